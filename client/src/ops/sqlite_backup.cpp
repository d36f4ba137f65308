// Backup, restore and verify of the embedded store. Backup and restore copy pages through
// SQLite's online backup API (sqlite3_backup_*), never the bytes of a live file: a writer in
// another process cannot tear the copy, and the WAL is included.
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/core.hpp"
#include "forgeyard/version.hpp"
#include "ops/ops.hpp"
#include "sqlite/audit.hpp"
#include "sqlite/db.hpp"
#include "sqlite/file_lock.hpp"
#include "sqlite/migrations.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail::ops {

namespace fs = std::filesystem;

namespace {

constexpr char backup_file_name[] = "store.db";
constexpr auto lock_wait = std::chrono::seconds(10);

// A raw connection for the backup API and for reading a backup file (read-only, immutable:
// reading it must not create a journal beside it).
class RawDb {
 public:
  RawDb(const std::string& path, bool read_only_backup_file) {
    std::string uri = path;
    if (read_only_backup_file) {
      uri = "file:";
      for (char c : path)
        uri += c == '%'   ? std::string("%25")
               : c == '?' ? std::string("%3f")
               : c == '#' ? std::string("%23")
                          : std::string(1, c);
      uri += "?immutable=1";
    }
    const int flags =
        read_only_backup_file ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    const int rc = sqlite3_open_v2(uri.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) fail("cannot open " + path);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  sqlite3* get() const { return db_; }
  [[noreturn]] void fail(const std::string& what) const {
    const int code = sqlite3_extended_errcode(db_);
    const bool corrupt = (code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB;
    throw Error(corrupt ? ErrorKind::Corruption : ErrorKind::Unavailable,
                corrupt ? sqlstate::data_corrupted : sqlstate::io_error, what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const std::string& sql) const {
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }
  // Rows of a query, every column as text (NULL as "").
  std::vector<std::vector<std::string>> rows(const std::string& sql) const {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) fail(sql);
    std::vector<std::vector<std::string>> out;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        const unsigned char* t = sqlite3_column_text(stmt, i);
        row.emplace_back(t != nullptr ? reinterpret_cast<const char*>(t) : "");
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) fail(sql);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Copies every page of `from` into `to`, 256 pages per step, reporting progress after a second.
void copy_pages(const RawDb& from, const RawDb& to, const ProgressFn& progress, const char* verb) {
  sqlite3_backup* b = sqlite3_backup_init(to.get(), "main", from.get(), "main");
  if (b == nullptr) to.fail("cannot start the SQLite backup");
  const auto started = std::chrono::steady_clock::now();
  auto next_report = started + std::chrono::seconds(1);
  int rc;
  while ((rc = sqlite3_backup_step(b, 256)) == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    if (rc != SQLITE_OK) sqlite3_sleep(20);
    const auto now = std::chrono::steady_clock::now();
    if (progress && now >= next_report) {
      const int total = sqlite3_backup_pagecount(b);
      progress(std::string(verb) + " " + std::to_string(total - sqlite3_backup_remaining(b)) + " of " +
               std::to_string(total) + " pages");
      next_report = now + std::chrono::seconds(1);
    }
  }
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) to.fail(std::string("SQLite backup failed while it ") + verb);
}

std::string last_known_migration() {
  const auto known = embedded_sqlite_migrations();
  return known.empty() ? std::string("0000") : known.back().name;
}

// What the target holds that a restore would overwrite: application tables, and forgeyard
// tables with data (bookkeeping rows such as the counters do not count).
std::vector<std::string> non_empty_tables(const RawDb& db) {
  const auto ours = sqlite_forgeyard_tables();
  std::vector<std::string> found;
  for (const auto& row : db.rows("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")) {
    const std::string& name = row[0];
    if (name.starts_with("sqlite_")) continue;
    if (!ours.contains(name)) {
      found.push_back(name);
      continue;
    }
    if (std::find(data_tables().begin(), data_tables().end(), name) == data_tables().end()) continue;
    if (!db.rows("SELECT 1 FROM \"" + name + "\" LIMIT 1").empty()) found.push_back(name);
  }
  return found;
}

// One read transaction on a query_only connection: verify reads one WAL snapshot from its first
// statement to its last, never writes, and never stands in a writer's way (a long snapshot only
// keeps checkpoints from passing it).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Db& db) : db_(db) {
    db_.exec("PRAGMA query_only = 1");
    db_.exec("BEGIN");
  }
  ~ReadSnapshot() {
    if (db_.reusable()) return;
    try {
      db_.exec("ROLLBACK");  // nothing was written: ending the read is all it does
    } catch (const Error&) {
      // closing the connection ends it as well
    }
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Db& db_;
};

}  // namespace

const std::vector<std::string>& data_tables() {
  static const std::vector<std::string> tables{"leases",
                                               "idempotency_keys",
                                               "queues",
                                               "messages",
                                               "queue_events",
                                               "queue_partitions",
                                               "inbox",
                                               "audit_events",
                                               "audit_heads",
                                               "event_types",
                                               "topics",
                                               "subscriptions",
                                               "subscription_event_types",
                                               "topic_events",
                                               "wf_runs",
                                               "wf_journal",
                                               "wf_signals",
                                               "wf_schedules",
                                               "flow_resources",
                                               "queue_fair_keys"};
  return tables;
}

std::set<std::string> sqlite_forgeyard_tables() {
  RawDb scratch(":memory:", false);
  scratch.exec("CREATE TABLE schema_migrations (version INTEGER)");
  for (const auto& m : embedded_sqlite_migrations()) scratch.exec(m.sql);
  std::set<std::string> names;
  for (const auto& row : scratch.rows("SELECT name FROM sqlite_schema WHERE type = 'table'")) names.insert(row[0]);
  return names;
}

BackupResult sqlite_backup(const std::string& path, const std::string& directory, const ProgressFn& progress) {
  if (!fs::exists(path)) throw Error(ErrorKind::NotFound, sqlstate::undefined_object, "no SQLite store at " + path);
  prepare_backup_directory(directory);
  const std::string target = (fs::path(directory) / backup_file_name).string();
  {
    FileLock lock(path + ".lock", "backing up", lock_wait);
    RawDb source(path, false);
    RawDb copy(target, false);
    copy_pages(source, copy, progress, "copied");
    // The copy is a plain rollback-journal file: reading or restoring it never needs a WAL beside it.
    copy.exec("PRAGMA journal_mode = DELETE");
  }
  fsync_path(target);

  fy::core::BackupManifest m;
  m.forgeyard_version = std::string(version());
  m.backend = "sqlite";
  m.created_at = utc_now_iso();
  {
    RawDb copy(target, true);
    const auto check = copy.rows("PRAGMA integrity_check");
    if (check.empty() || check[0][0] != "ok")
      copy.fail("the copy does not pass PRAGMA integrity_check: " + (check.empty() ? "" : check[0][0]));
    for (const auto& r : copy.rows("SELECT name, checksum FROM schema_migrations ORDER BY version"))
      m.migrations.push_back({"forgeyard", r[0], r[1]});
    if (m.migrations.empty()) copy.fail("the store has no applied migration");
    m.schema_version = m.migrations.back().version;
    for (const auto& r : copy.rows("SELECT tenant_id, seq, lower(hex(hash)) FROM audit_heads ORDER BY tenant_id"))
      m.audit_heads.push_back({r[0], std::stoll(r[1]), r[2]});
  }
  const FileDigest d = digest_file(target);
  m.files.push_back({backup_file_name, d.size, d.sha256});
  write_durably((fs::path(directory) / fy::core::backup_manifest_name).string(), fy::core::to_json(m));
  return {directory, m.backend, m.schema_version, "", m.created_at, d.size, 1, static_cast<int>(m.audit_heads.size())};
}

RestoreResult sqlite_restore(const std::string& path, const std::string& directory,
                             const fy::core::BackupManifest& manifest, const RestoreOptions& options) {
  if (manifest.backend != "sqlite")
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "this is a " + manifest.backend + " backup: restore it into a " + manifest.backend +
                    " store, or move data between backends with `storage copy`");
  try {
    fy::core::check_backup_not_newer(manifest, last_known_migration());
  } catch (const fy::core::Error& e) {
    throw Error(e.sqlstate(), e.what());
  }
  if (manifest.files.size() != 1 || manifest.files[0].name != backup_file_name)
    throw Error(ErrorKind::Corruption, sqlstate::data_corrupted,
                "the backup is incomplete or corrupted: a SQLite backup holds exactly store.db");
  const std::string source_path = (fs::path(directory) / backup_file_name).string();
  RestoreResult result;
  result.backend = "sqlite";
  result.backup_schema_version = manifest.schema_version;
  result.backup_created_at = manifest.created_at;
  {
    RawDb source(source_path, true);
    const auto check = source.rows("PRAGMA integrity_check");
    if (check.empty() || check[0][0] != "ok") source.fail("the backup's store.db does not pass PRAGMA integrity_check");
    const auto last = source.rows("SELECT name FROM schema_migrations ORDER BY version DESC LIMIT 1");
    if (last.empty() || last[0][0] != manifest.schema_version)
      throw Error(
          ErrorKind::Corruption, sqlstate::data_corrupted,
          "the backup is incomplete or corrupted: store.db is not at the manifest's schema " + manifest.schema_version);

    const auto dir = fs::path(path).parent_path();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot create " + dir.string() + ": " + ec.message());
    check_local_filesystem(dir.string());
    FileLock lock(path + ".lock", "restoring", lock_wait);
    const bool existed = fs::exists(path);
    RawDb target(path, false);
    if (existed) {
      const auto used = non_empty_tables(target);
      if (!used.empty()) {
        if (!options.replace) {
          std::string names;
          for (const auto& n : used) names += (names.empty() ? "" : ", ") + n;
          throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                      "the target store " + path + " is not empty (" + names + "): pass --replace to overwrite it");
        }
        result.replaced = true;
      }
    }
    if (options.progress) options.progress("restoring " + source_path + " into " + path);
    copy_pages(source, target, options.progress, "restored");
    target.exec("PRAGMA journal_mode = WAL");
  }
  // Opening migrates forward (under the lock again) when the backup is older than this code.
  auto store = forgeyard::open("sqlite://" + path);
  result.schema_version = store->status().schema_version;
  result.migrated = result.schema_version != manifest.schema_version;
  result.reconciled = reconcile_restored(*store);
  store.reset();
  result.verify = sqlite_verify(path, true);
  return result;
}

VerifyReport sqlite_verify(const std::string& path, bool full) {
  if (!fs::exists(path)) throw Error(ErrorKind::NotFound, sqlstate::undefined_object, "no SQLite store at " + path);
  VerifyReport report;
  report.full = full;
  auto finding = [&](const std::string& check, const std::string& detail) {
    report.findings.push_back({check, detail});
  };
  StoreOptions options;
  Db db(path, options);
  const ReadSnapshot snapshot(db);

  report.checks.push_back("schema");
  bool schema_current = false;
  if (!db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").step()) {
    finding("schema", "no schema_migrations table: not a forgeyard store");
  } else {
    try {
      const MigrationState state = migrate(db, embedded_sqlite_migrations(), false);
      if (state.pending > 0)
        finding("schema", std::to_string(state.pending) + " migration(s) pending after " + state.last);
      else
        schema_current = true;
    } catch (const Error& e) {
      finding("schema", e.what());
    }
  }

  report.checks.push_back("constraints");
  {
    auto q = db.query("PRAGMA integrity_check");
    while (q.step())
      if (q.text(0) != "ok") finding("constraints", q.text(0));
  }
  for (const char* trigger : {"audit_events_no_update", "audit_events_no_delete", "audit_events_no_replace"}) {
    auto q = db.query("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = ?1");
    q.bind(1, std::string_view(trigger));
    if (schema_current && !q.step())
      finding("constraints", std::string("append-only trigger ") + trigger + " is missing");
  }

  report.checks.push_back("counts");
  std::vector<std::string> tables;
  {
    auto q = db.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (q.step()) tables.push_back(q.text(0));
  }
  for (const auto& t : tables) {
    auto q = db.query_text("SELECT count(*) FROM \"" + t + "\"");
    if (q.step()) report.counts[t] = q.int64(0);
  }
  if (!full || !schema_current) return report;

  report.checks.push_back("versioned_tables");
  for (const auto& t : tables) {
    auto trig = db.query("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = ?1 AND name = ?2");
    trig.bind(1, t).bind(2, "forgeyard_versioning_update_" + t);
    if (!trig.step()) continue;
    auto q = db.query_text("SELECT count(*) FROM \"" + t + "\" WHERE entity_version IS NULL OR entity_version < 1");
    if (q.step() && q.int64(0) > 0)
      finding("versioned_tables", t + ": " + std::to_string(q.int64(0)) + " row(s) with entity_version < 1");
  }

  report.checks.push_back("queue_counters");
  {
    auto q = db.query(
        "SELECT q.tenant_id, q.queue, q.used_messages, q.used_bytes, count(m.msg_id), coalesce(sum(m.bytes), 0)"
        " FROM queues q LEFT JOIN messages m ON m.tenant_id = q.tenant_id AND m.queue = q.queue AND m.state = 'pending'"
        " GROUP BY q.tenant_id, q.queue"
        " HAVING q.used_messages <> count(m.msg_id) OR q.used_bytes <> coalesce(sum(m.bytes), 0)");
    while (q.step())
      finding("queue_counters", "queue " + q.text(1) + " of tenant " + q.text(0) + " counts " +
                                    std::to_string(q.int64(2)) + " messages / " + std::to_string(q.int64(3)) +
                                    " bytes, its pending rows are " + std::to_string(q.int64(4)) + " / " +
                                    std::to_string(q.int64(5)));
  }
  {
    // A key's row counts the pending messages of its partition_key (partition-ordered queues) or
    // of its fairness_key (max_in_flight_per_key), and of a limited key its heads.
    auto q = db.query(
        "SELECT tenant_id, queue, partition_key, pending, n, heads, h FROM ("
        " SELECT p.tenant_id, p.queue, p.partition_key, p.pending, p.heads, k.partitioned,"
        "  (SELECT count(*) FROM messages m WHERE m.tenant_id = p.tenant_id AND m.queue = p.queue"
        "   AND (CASE WHEN k.partitioned THEN m.partition_key ELSE m.fairness_key END) = p.partition_key"
        "   AND m.state = 'pending') AS n,"
        "  (SELECT count(*) FROM messages m WHERE m.tenant_id = p.tenant_id AND m.queue = p.queue"
        "   AND m.fairness_key = p.partition_key AND m.state = 'pending' AND m.is_head) AS h"
        " FROM queue_partitions p JOIN (SELECT tenant_id, queue, ordering = 'partition' AS partitioned FROM queues) k"
        "  ON k.tenant_id = p.tenant_id AND k.queue = p.queue)"
        " WHERE pending <> n OR (NOT partitioned AND heads <> h)");
    while (q.step())
      finding("queue_counters", "key " + q.text(2) + " of queue " + q.text(1) + " (tenant " + q.text(0) + ") counts " +
                                    std::to_string(q.int64(3)) + " pending and " + std::to_string(q.int64(5)) +
                                    " heads, its rows are " + std::to_string(q.int64(4)) + " and " +
                                    std::to_string(q.int64(6)));
  }

  report.checks.push_back("workflow_journals");
  {
    auto gaps = db.query(
        "SELECT tenant_id, run_id, count(*), max(position) FROM wf_journal GROUP BY 1, 2"
        " HAVING count(*) <> max(position) OR min(position) <> 1 ORDER BY 1, 2 LIMIT 100");
    while (gaps.step())
      finding("workflow_journals", workflow_gap(gaps.text(0), gaps.text(1), gaps.int64(2), gaps.int64(3)));
    auto orphans = db.query(
        "SELECT DISTINCT j.tenant_id, j.run_id FROM wf_journal j WHERE NOT EXISTS (SELECT 1 FROM wf_runs r"
        " WHERE r.tenant_id = j.tenant_id AND r.run_id = j.run_id) ORDER BY 1, 2 LIMIT 100");
    while (orphans.step()) finding("workflow_journals", workflow_orphan(orphans.text(0), orphans.text(1)));
    auto runs = db.query(
        "SELECT r.tenant_id, r.run_id, r.state, r.epoch FROM wf_runs r"
        " WHERE r.epoch > (SELECT last FROM claim_tokens)"
        "    OR (r.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed'))"
        "       <> (r.finished_at IS NOT NULL)"
        " ORDER BY 1, 2 LIMIT 100");
    while (runs.step())
      finding("workflow_journals", workflow_inconsistent(runs.text(0), runs.text(1), runs.text(2), runs.int64(3)));
  }

  report.checks.push_back("message_states");
  {
    auto q = db.query(
        "SELECT msg_id, state FROM messages WHERE (state = 'pending') = (finished_at IS NOT NULL)"
        " OR (state = 'dead' AND is_head) ORDER BY msg_id LIMIT 100");
    while (q.step())
      finding("message_states",
              "message " + std::to_string(q.int64(0)) + " is " + q.text(1) + " but its finish time says otherwise");
  }

  report.checks.push_back("idempotency_attempts");
  {
    auto q = db.query(
        "SELECT tenant_id, scope, key, attempt, status FROM idempotency_keys"
        " WHERE attempt > (SELECT last FROM idempotency_attempts)"
        " OR (status = 'completed') <> (completed_at IS NOT NULL) LIMIT 100");
    while (q.step())
      finding("idempotency_attempts", "key " + q.text(2) + " in " + q.text(1) + " (tenant " + q.text(0) + ", attempt " +
                                          std::to_string(q.int64(3)) + ", " + q.text(4) +
                                          ") has no matching attempt or completion");
  }

  report.checks.push_back("audit_chains");
  std::vector<std::string> tenants;
  {
    auto q = db.query("SELECT tenant_id FROM audit_heads ORDER BY tenant_id");
    while (q.step()) tenants.push_back(q.text(0));
  }
  // Each tenant's chain as it is in the same snapshot as every count and check above.
  Instruments instruments;
  HeldSession session(db, instruments, [] { return unix_usecs(std::chrono::time_point_cast<Duration>(Clock::now())); });
  SqliteAudit chains(session);
  verify_audit_chains(chains, tenants, report);
  return report;
}

}  // namespace forgeyard::detail::ops
