#include "sqlite/operations.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "forgeyard/error.hpp"
#include "sqlite/file_lock.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

namespace {

std::int64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::int64_t>(size);
}

// Who holds the store's exclusive lock right now ("" when nobody does). A shared lock attempt
// fails only while someone holds it exclusively; nothing is written to the lock file.
std::string exclusive_holder(const std::string& lock_path) {
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const bool free = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
  if (free) ::flock(fd, LOCK_UN);
  ::close(fd);
  return free ? "" : FileLock::describe_holder(lock_path);
}

}  // namespace

StoreStats sqlite_stats(Db& db, Queues& queues, std::int64_t now_usecs) {
  StoreStats s;
  s.backend = "sqlite";
  s.database_bytes = file_size(db.path()) + file_size(db.path() + "-wal");

  std::map<std::string, std::int64_t> bytes;
  try {
    auto q = db.query("SELECT name, sum(pgsize) FROM dbstat GROUP BY name");
    while (q.step()) bytes[q.text(0)] = q.int64(1);
  } catch (const Error&) {
    bytes.clear();  // this SQLite has no dbstat: sizes per table are unknown, not zero
  }
  std::vector<std::string> names;
  {
    auto q = db.query(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
        " ORDER BY name");
    while (q.step()) names.push_back(q.text(0));
  }
  for (const std::string& name : names) {
    TableStats t;
    t.name = name;
    // The name comes from sqlite_schema; quoted as an identifier all the same.
    std::string quoted = "\"";
    for (char c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    auto q = db.query_text("SELECT count(*) FROM " + quoted + "\"");
    q.step();
    t.rows = q.int64(0);
    if (auto it = bytes.find(name); it != bytes.end()) t.bytes = it->second;
    s.tables.push_back(std::move(t));
  }

  {
    auto q = db.query(
        "SELECT q.tenant_id, q.queue, q.max_messages,"
        "       (SELECT count(*) FROM messages m WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue"
        "           AND m.state = 'pending'"
        "           AND (m.attempt > 1 OR (m.attempt = 1 AND (m.claim_token IS NULL OR m.visible_at <= ?1)))),"
        "       (SELECT count(*) FROM messages m WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue"
        "           AND m.state = 'dead' AND m.finished_at > ?1 - 3600000000)"
        "  FROM queues q ORDER BY q.tenant_id, q.queue");
    q.bind(1, now_usecs);
    while (q.step()) {
      QueueBacklog b;
      b.tenant = q.text(0);
      b.queue = q.text(1);
      b.max_messages = q.int64(2);
      b.retrying = q.int64(3);
      b.dead_last_hour = q.int64(4);
      s.queues.push_back(std::move(b));
    }
  }
  for (QueueBacklog& b : s.queues) b.depth = queues.stats(b.tenant, b.queue);

  {
    auto q = db.query(
        "WITH t(tenant_id) AS (SELECT tenant_id FROM leases UNION SELECT tenant_id FROM idempotency_keys"
        "                      UNION SELECT tenant_id FROM audit_heads)"
        " SELECT t.tenant_id,"
        "   (SELECT count(*) FROM leases l WHERE l.tenant_id = t.tenant_id AND l.released_at IS NULL"
        "       AND l.reaped_at IS NULL AND l.expires_at > ?1),"
        "   (SELECT count(*) FROM leases l WHERE l.tenant_id = t.tenant_id AND l.released_at IS NULL"
        "       AND l.reaped_at IS NULL AND l.expires_at <= ?1),"
        "   (SELECT count(*) FROM idempotency_keys k WHERE k.tenant_id = t.tenant_id AND k.status = 'in_progress'),"
        "   (SELECT count(*) FROM idempotency_keys k WHERE k.tenant_id = t.tenant_id AND k.status = 'completed'),"
        "   (SELECT count(*) FROM idempotency_keys k WHERE k.tenant_id = t.tenant_id AND k.expires_at <= ?1"
        "       AND (k.status = 'completed' OR k.locked_until <= ?1)),"
        "   coalesce((SELECT h.seq FROM audit_heads h WHERE h.tenant_id = t.tenant_id), 0)"
        "  FROM t ORDER BY t.tenant_id");
    q.bind(1, now_usecs);
    while (q.step())
      s.tenants.push_back(
          TenantStats{q.text(0), q.int64(1), q.int64(2), q.int64(3), q.int64(4), q.int64(5), q.int64(6)});
  }
  {
    auto q = db.query(
        "SELECT tenant_id, workflow || '@' || version, state, count(*) FROM wf_runs"
        " GROUP BY tenant_id, workflow, version, state ORDER BY 1, 2, 3");
    while (q.step()) s.workflows.push_back({q.text(0), q.text(1), q.text(2), q.int64(3)});
  }
  {
    std::vector<std::string> tenants;
    auto q = db.query("SELECT tenant_id FROM queues UNION SELECT tenant_id FROM flow_resources ORDER BY 1");
    while (q.step()) tenants.push_back(q.text(0));
    for (const std::string& tenant : tenants)
      for (FlowLimit& l : sqlite_queue::flow_rows(db, tenant, now_usecs)) s.flow.push_back({tenant, std::move(l)});
  }
  return s;
}

DoctorFacts sqlite_doctor_facts(Db& db, Queues& queues, std::int64_t now_usecs,
                                const std::vector<Migration>& migrations) {
  DoctorFacts f;
  f.backend = "sqlite";
  std::chrono::microseconds best = std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto q = db.query("SELECT 1");
    q.step();
    best =
        std::min(best, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
  }
  f.latency = best;

  f.expected_schema = migrations.empty() ? "" : migrations.back().name;
  try {
    const MigrationState state = migrate(db, migrations, false);
    f.installed_schema = state.last;
    f.pending_schema_migrations = state.pending;
  } catch (const Error& e) {
    f.schema_error = e.what();
  }
  {
    auto q = db.query("PRAGMA quick_check");
    f.integrity = q.step() ? q.text(0) : "no answer";
  }
  f.lock_holder = exclusive_holder(db.path() + ".lock");
  f.wal_bytes = file_size(db.path() + "-wal");
  try {
    check_local_filesystem(std::filesystem::absolute(db.path()).parent_path().string());
    f.network_filesystem = false;
  } catch (const Error&) {
    f.network_filesystem = true;
  }
  struct stat st {};
  if (::stat(db.path().c_str(), &st) == 0) f.world_readable_file = (st.st_mode & S_IROTH) ? db.path() : "";
  if (f.integrity == "ok") {
    try {
      f.stats = sqlite_stats(db, queues, now_usecs);
    } catch (const Error& e) {
      f.stats_error = e.what();
    }
  }
  return f;
}

}  // namespace forgeyard::detail
