// The operator's view on every backend: Store::stats() figures, Store::doctor() checks made to
// fail for real (direct table privileges, an unbound application role, an unsafe search_path, a
// password in the URL, an old or missing extension, a pending or changed migration, a held
// lock, a corrupted file), and the CLI's storage status | doctor | stats and metrics: exit
// codes, --json parsed by a JSON parser, the Prometheus text checked line by line.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // property_tree includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

// Boost.Test prints the values of a failed comparison.
namespace forgeyard {
inline std::ostream& operator<<(std::ostream& out, CheckStatus s) {
  return out << to_string(s);
}
inline std::ostream& operator<<(std::ostream& out, CheckGroup g) {
  return out << to_string(g);
}
}  // namespace forgeyard

using boost::property_tree::ptree;
using conformance::slurp;
using conformance::with_database;
using forgeyard::CheckGroup;
using forgeyard::CheckStatus;
using forgeyard::DoctorCheck;
using forgeyard::DoctorReport;
using namespace std::chrono_literals;

namespace {

ptree parse_json(const std::string& text) {
  std::istringstream in(text);
  ptree tree;
  boost::property_tree::read_json(in, tree);  // throws on anything that is not JSON
  return tree;
}

const DoctorCheck& check(const DoctorReport& report, const std::string& name) {
  for (const DoctorCheck& c : report.checks)
    if (c.name == name) return c;
  BOOST_FAIL("the doctor has no check " + name);
  throw;  // unreachable
}

const forgeyard::QueueBacklog* find_queue(const forgeyard::StoreStats& s, const std::string& tenant,
                                          const std::string& queue) {
  for (const auto& q : s.queues)
    if (q.tenant == tenant && q.queue == queue) return &q;
  return nullptr;
}

const forgeyard::TenantStats* find_tenant(const forgeyard::StoreStats& s, const std::string& tenant) {
  for (const auto& t : s.tenants)
    if (t.tenant == tenant) return &t;
  return nullptr;
}

// The same URL on another database of the same cluster.

std::string with_parameter(const std::string& url, const std::string& parameter) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + parameter;
}

struct Ops : conformance::Backend {
  std::string out_path = (std::filesystem::temp_directory_path() / unique("forgeyard-ops-out")).string();
  ~Ops() { std::filesystem::remove(out_path); }

  // Runs the CLI on this backend (or on `url_override`) and returns (exit code, stdout).
  std::pair<int, std::string> cli(std::vector<std::string> args, const std::string& url_override = "") {
    int code = 0;
    if (url_override.empty()) {
      code = run_cli(args, out_path);
    } else {
      args.insert(args.begin(), {"--store", url_override});  // the last --store wins
      code = run_cli(args, out_path);
    }
    return {code, slurp(out_path)};
  }

  // Three messages, one of them claimed: ready 2, in flight 1.
  void three_messages_one_claimed(const std::string& queue) {
    store->queues().create(tenant, queue, {});
    for (int i = 0; i < 3; ++i) store->queues().enqueue(tenant, queue, forgeyard::OutgoingMessage{"m"});
    BOOST_TEST_REQUIRE(store->queues().claim(tenant, queue, "c", 1, 10min).size() == 1u);
  }

  forgeyard::DoctorReport doctor_at(const std::string& other_url) const {
    forgeyard::StoreOptions options;
    options.prepared_statements = !unnamed_statements;
    return forgeyard::open(other_url, options)->doctor();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(operations, Ops)

BOOST_AUTO_TEST_CASE(stats_count_depth_leases_keys_and_audit) {
  // Leases and keys first, then two hours pass: one lease expired, one key past retention.
  BOOST_TEST_REQUIRE(store->leases().acquire(tenant, "long", "o", 10h).acquired);
  BOOST_TEST_REQUIRE(store->leases().acquire(tenant, "short", "o", 1s).acquired);
  BOOST_TEST_REQUIRE(store->leases().acquire(tenant, "released", "o", 10h).acquired);
  BOOST_TEST(store->leases().release(tenant, "released", store->leases().get(tenant, "released")->epoch));
  const forgeyard::IdempotencyKey open_key{tenant, "op", "open"}, done_key{tenant, "op", "done"};
  store->idempotency().begin(open_key, forgeyard::request_digest("a"));
  const auto done = store->idempotency().begin(done_key, forgeyard::request_digest("b"), 5min, 1h);
  store->idempotency().complete(done_key, std::string("ok"), done.attempt);
  clock.advance(2h);
  store->audit().append(tenant, forgeyard::AuditEvent{"actor", "act", "res"});
  store->audit().append(tenant, forgeyard::AuditEvent{"actor", "act", "res"});
  three_messages_one_claimed("q");

  const forgeyard::StoreStats s = store->stats();
  BOOST_TEST(s.backend == (is_postgres() ? "postgresql" : "sqlite"));
  const auto* q = find_queue(s, tenant, "q");
  BOOST_TEST_REQUIRE(q != nullptr);
  BOOST_TEST(q->depth.ready == 2);
  BOOST_TEST(q->depth.in_flight == 1);
  BOOST_TEST(q->depth.delayed == 0);
  BOOST_TEST(q->depth.dead == 0);
  BOOST_TEST(q->depth.pressure == "normal");
  BOOST_TEST(q->retrying == 0);
  BOOST_TEST(q->max_messages > 0);
  BOOST_TEST_REQUIRE(q->depth.oldest_ready_age.has_value());
  BOOST_TEST(q->depth.oldest_ready_age->count() == 0);  // the test clock did not move since
  const auto* t = find_tenant(s, tenant);
  BOOST_TEST_REQUIRE(t != nullptr);
  BOOST_TEST(t->leases_live == 1);
  BOOST_TEST(t->leases_expired == 1);
  BOOST_TEST(t->idempotency_in_progress == 1);
  BOOST_TEST(t->idempotency_completed == 1);
  BOOST_TEST(t->idempotency_past_retention == 1);
  BOOST_TEST(t->audit_events == 2);
  BOOST_TEST_REQUIRE(s.database_bytes.has_value());
  BOOST_TEST(*s.database_bytes > 0);
  std::map<std::string, forgeyard::TableStats> tables;
  for (const auto& table : s.tables) tables[table.name] = table;
  for (const char* name : {"leases", "idempotency_keys", "queues", "messages", "audit_events", "audit_heads"})
    BOOST_TEST(tables.count(name) == 1u, name);
  if (!is_postgres()) BOOST_TEST(tables["messages"].rows == 3);  // exact on SQLite, an estimate on PostgreSQL

  // The doctor's optional checks read the same figures.
  const DoctorReport report = store->doctor();
  BOOST_TEST(check(report, "expired_leases").status == CheckStatus::Warn);
  BOOST_TEST(check(report, "idempotency_retention").status == CheckStatus::Warn);
}

BOOST_AUTO_TEST_CASE(dead_letters_of_the_last_hour_warn) {
  store->queues().create(tenant, "dl", {});
  store->queues().enqueue(tenant, "dl", forgeyard::OutgoingMessage{"poison"});
  const auto d = store->queues().claim(tenant, "dl", "c", 1, 1min);
  BOOST_TEST_REQUIRE(d.size() == 1u);
  store->queues().nack(tenant, "dl", d[0].msg_id, d[0].claim_token, "bad", true);
  const forgeyard::StoreStats stats = store->stats();  // q points into it
  const auto* q = find_queue(stats, tenant, "dl");
  BOOST_TEST_REQUIRE(q != nullptr);
  BOOST_TEST(q->depth.dead == 1);
  BOOST_TEST(q->dead_last_hour == 1);
  BOOST_TEST(check(store->doctor(), "dead_letters").status == CheckStatus::Warn);
  clock.advance(2h);
  const forgeyard::StoreStats later = store->stats();
  const auto* q_later = find_queue(later, tenant, "dl");
  BOOST_TEST_REQUIRE(q_later != nullptr);
  BOOST_TEST(q_later->dead_last_hour == 0);
}

BOOST_AUTO_TEST_CASE(a_healthy_store_passes_the_doctor) {
  const DoctorReport report = store->doctor();
  BOOST_TEST(report.passed());
  for (const char* name : {"connectivity", "schema_version", "migrations", "inspection"})
    BOOST_TEST(check(report, name).status == CheckStatus::Ok, name);
  for (const DoctorCheck& c : report.checks) {
    BOOST_TEST(!c.detail.empty(), c.name);
    BOOST_TEST(c.fix.empty() == (c.status == CheckStatus::Ok), c.name);
  }
  if (is_postgres()) {
    for (const char* name : {"search_path", "password_in_url", "tls", "autovacuum"})
      BOOST_TEST(check(report, name).status == CheckStatus::Ok, name);
    // The PostgreSQL and PgBouncer runs of this suite share one database and run side by side:
    // the other run's a_role_with_direct_table_privileges_fails_security may hold its role's
    // grant at this moment. Any other privileged role fails.
    const DoctorCheck& privileges = check(report, "table_privileges");
    if (privileges.status != CheckStatus::Ok) {
      const std::string roles = privileges.detail.substr(privileges.detail.find(": ") + 2);
      for (std::size_t at = 0; at < roles.size();) {
        const std::size_t end = std::min(roles.find(", ", at), roles.size());
        BOOST_TEST(roles.substr(at, end - at).rfind("fy_doctor_dml", 0) == 0u, privileges.detail);
        at = end + 2;
      }
    }
  } else {
    for (const char* name : {"integrity", "migration_lock", "local_filesystem", "wal_size"})
      BOOST_TEST(check(report, name).status == CheckStatus::Ok, name);
  }
}

// A snapshot held open is named where an operator looks: stats().horizon, the doctor's
// xmin_horizon check, `storage stats --json` and the metrics. Other runs of this suite share the
// cluster and may hold an older one: the holder reported is at least as old as ours, and it is
// ours, named by its pid, when the observer sees nothing older.
BOOST_AUTO_TEST_CASE(a_snapshot_held_open_is_named_in_stats_doctor_and_metrics) {
  if (!is_postgres()) {
    BOOST_TEST(!store->stats().horizon.has_value());
    const DoctorReport report = store->doctor();
    for (const DoctorCheck& c : report.checks) BOOST_TEST(c.name != "xmin_horizon");
    return;
  }
  conformance::PgSession holder(url), observer(url);
  {
    const forgeyard::StoreStats before = store->stats();
    if (!before.horizon) {
      const DoctorCheck c = check(store->doctor(), "xmin_horizon");
      BOOST_TEST(c.status == CheckStatus::Ok);
    }
  }
  holder.value("BEGIN ISOLATION LEVEL REPEATABLE READ");
  const std::string xid = holder.value("SELECT pg_current_xact_id()::text");
  // Transactions that begin after ours: its age grows past them.
  for (int i = 0; i < 3; ++i) exec_sql("SELECT pg_current_xact_id()");
  const std::int64_t ours = std::stoll(observer.value("SELECT age('" + xid + "'::xid)"));
  BOOST_TEST(ours >= 3);
  // Anything at least as old in this database or holding every database's horizon, but ours.
  const std::string pid = std::to_string(holder.pid());
  const std::string older = observer.value(
      "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> " + pid +
      " AND pid <> pg_backend_pid() AND greatest(age(backend_xmin), age(backend_xid)) >= " + std::to_string(ours) +
      ") + (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()) +" +
      " (SELECT count(*) FROM pg_replication_slots WHERE xmin IS NOT NULL) +" +
      " (SELECT count(*) FROM pg_stat_replication WHERE backend_xmin IS NOT NULL)");
  const forgeyard::StoreStats s = store->stats();
  BOOST_REQUIRE(s.horizon.has_value());
  BOOST_TEST(s.horizon->xid_age >= ours);
  BOOST_TEST(!s.horizon->holder.empty());
  if (older == "0") {
    BOOST_TEST(s.horizon->kind == "transaction");
    BOOST_TEST(s.horizon->holder.rfind("pid " + pid + " (", 0) == 0u, s.horizon->holder);
    // The PL/pgSQL edition's owner, not superuser, is not shown when another role's transaction
    // began (docs/operations.md, "Installing forgeyard"): this suite connects as another role.
    if (!plpgsql) BOOST_TEST(s.horizon->held.has_value());
  }
  const DoctorCheck c = check(store->doctor(), "xmin_horizon");
  BOOST_TEST(c.group == CheckGroup::Performance);
  BOOST_TEST(c.detail.find("holds the xmin horizon") != std::string::npos, c.detail);
  BOOST_TEST(c.detail.find("dead rows in the hot tables") != std::string::npos, c.detail);
  const auto [code, json] = cli({"storage", "stats", "--json"});
  BOOST_TEST(code == 0);
  const ptree stats = parse_json(json);
  BOOST_TEST(stats.get<std::int64_t>("horizon.xid_age") >= ours);
  BOOST_TEST(!stats.get<std::string>("horizon.holder").empty());
  const auto [metrics_code, metrics] = cli({"metrics"});
  BOOST_TEST(metrics_code == 0);
  BOOST_TEST(metrics.find("forgeyard_xmin_horizon_age_transactions{kind=\"") != std::string::npos);
  holder.value("COMMIT");
}

// A sealed segment of the ready lanes that an open transaction has read is named where an
// operator looks (0.13.0): stats().lane_segments, the doctor's lane_segments check, `storage stats
// --json` and the metrics. Other runs share the database's segments: which one is sealed with
// entries is read from the stats; after an enqueue and a maintain() pass one always is (the
// entry's segment, sealed by the pass, or the next one, which kept the ring from turning).
BOOST_AUTO_TEST_CASE(a_transaction_pinning_a_lane_segment_is_named_in_stats_doctor_and_metrics) {
  if (!is_postgres()) {
    BOOST_TEST(store->stats().lane_segments.empty());
    for (const DoctorCheck& c : store->doctor().checks) BOOST_TEST(c.name != "lane_segments");
    return;
  }
  store->queues().create(tenant, "pinned", {});
  forgeyard::OutgoingMessage m;
  m.payload = "listed";
  store->queues().enqueue(tenant, "pinned", m);
  store->maintain(1000, tenant);
  std::string sealed;
  for (const forgeyard::LaneSegment& seg : store->stats().lane_segments)
    if (!seg.open && seg.has_rows) sealed = seg.name;
  BOOST_REQUIRE(!sealed.empty());
  conformance::PgSession holder(url);
  holder.value("BEGIN");
  holder.value("SELECT count(*) FROM forgeyard." + sealed);
  const forgeyard::StoreStats s = store->stats();
  BOOST_TEST(s.lane_segments.size() == 4u);
  const forgeyard::LaneSegment* seg = nullptr;
  for (const forgeyard::LaneSegment& x : s.lane_segments)
    if (x.name == sealed) seg = &x;
  BOOST_REQUIRE(seg != nullptr);
  BOOST_TEST(!seg->pinned_by.empty());
  // Ours, unless an older transaction of another run holds it too (the oldest is named).
  const std::string ours = "pid " + std::to_string(holder.pid()) + " (";
  if (seg->pinned_by.rfind(ours, 0) == 0u && !plpgsql) BOOST_TEST(seg->pinned_for.has_value());
  const DoctorCheck c = check(store->doctor(), "lane_segments");
  BOOST_TEST(c.group == CheckGroup::Performance);
  BOOST_TEST(c.detail.find("holds a lock on sealed segment forgeyard.queue_lane_entries_") != std::string::npos,
             c.detail);
  const auto [code, json] = cli({"storage", "stats", "--json"});
  BOOST_TEST(code == 0);
  bool named = false;
  const ptree parsed = parse_json(json);
  for (const auto& [_, x] : parsed.get_child("lane_segments"))
    if (x.get<std::string>("name") == sealed) named = x.get<std::string>("pinned_by") != "null";
  BOOST_TEST(named);
  const auto [text_code, text] = cli({"storage", "stats"});
  BOOST_TEST(text_code == 0);
  BOOST_TEST(text.find("lane_segment=" + sealed + " state=sealed has_rows=yes pinned_by=\"pid ") != std::string::npos,
             text);
  const auto [metrics_code, metrics] = cli({"metrics"});
  BOOST_TEST(metrics_code == 0);
  BOOST_TEST(metrics.find("forgeyard_lane_segment_has_rows{table=\"" + sealed + "\",state=\"sealed\"} 1") !=
             std::string::npos);
  holder.value("COMMIT");
  BOOST_TEST(store->queues().drop(tenant, "pinned"));
}

// A sealed segment of the capacity counts that an open transaction holds (0.14.0) is named the
// same way: stats().usage_segments, the doctor's usage_segments check, `storage stats` and the
// metrics. The holder writes a release row (of a queue that does not exist, rolled back at the
// end) into the segment two periods from the current one, which is sealed for the next ten
// seconds at least.
BOOST_AUTO_TEST_CASE(a_transaction_pinning_a_usage_segment_is_named_in_stats_doctor_and_metrics) {
  if (!is_postgres()) {
    BOOST_TEST(store->stats().usage_segments.empty());
    for (const DoctorCheck& c : store->doctor().checks) BOOST_TEST(c.name != "usage_segments");
    return;
  }
  conformance::PgSession holder(url);
  holder.value("BEGIN");
  const std::string seg = holder.value(
      "INSERT INTO forgeyard.queue_release_deltas (tenant_id, queue, slot, released_messages, released_bytes, gen)"
      " SELECT 'no-such-tenant', 'no-such-queue', 0, 0, 0, (p - 2) * 100"
      "   FROM (SELECT floor(date_part('epoch', forgeyard.now()) / 10)::bigint AS p) x"
      " RETURNING tableoid::regclass::text");
  BOOST_TEST(seg.rfind("forgeyard.queue_release_deltas_", 0) == 0u, seg);
  const std::string name = seg.substr(std::string("forgeyard.").size());
  const forgeyard::StoreStats s = store->stats();
  BOOST_TEST(s.usage_segments.size() == 8u);
  const forgeyard::LaneSegment* found = nullptr;
  for (const forgeyard::LaneSegment& x : s.usage_segments)
    if (x.name == name) found = &x;
  BOOST_REQUIRE(found != nullptr);
  BOOST_TEST(!found->open);
  BOOST_TEST(found->has_rows);
  BOOST_TEST(!found->pinned_by.empty());
  const DoctorCheck c = check(store->doctor(), "usage_segments");
  BOOST_TEST(c.group == CheckGroup::Performance);
  BOOST_TEST(c.detail.find("holds a lock on sealed segment forgeyard.queue_release_deltas_") != std::string::npos,
             c.detail);
  const auto [code, json] = cli({"storage", "stats", "--json"});
  BOOST_TEST(code == 0);
  bool named = false;
  const ptree parsed = parse_json(json);
  for (const auto& [_, x] : parsed.get_child("usage_segments"))
    if (x.get<std::string>("name") == name) named = x.get<std::string>("pinned_by") != "null";
  BOOST_TEST(named);
  const auto [text_code, text] = cli({"storage", "stats"});
  BOOST_TEST(text_code == 0);
  BOOST_TEST(text.find("usage_segment=" + name + " state=sealed has_rows=yes pinned_by=\"pid ") != std::string::npos,
             text);
  const auto [metrics_code, metrics] = cli({"metrics"});
  BOOST_TEST(metrics_code == 0);
  BOOST_TEST(metrics.find("forgeyard_usage_segment_has_rows{table=\"" + name + "\",state=\"sealed\"} 1") !=
             std::string::npos);
  holder.value("ROLLBACK");
}

BOOST_AUTO_TEST_CASE(cli_storage_doctor_json_and_exit_code) {
  auto [code, out] = cli({"storage", "doctor", "--json"});
  BOOST_TEST(code == 0);
  const ptree doc = parse_json(out);
  BOOST_TEST(doc.get<std::string>("passed") == "true");
  std::set<std::string> names;
  for (const auto& [_, c] : doc.get_child("checks")) {
    const std::string group = c.get<std::string>("group"), status = c.get<std::string>("status");
    BOOST_TEST((group == "required" || group == "security" || group == "performance" || group == "optional"));
    BOOST_TEST((status == "ok" || status == "warn" || status == "fail"));
    if (group == "required") BOOST_TEST(status != "fail", c.get<std::string>("name"));
    names.insert(c.get<std::string>("name"));
  }
  BOOST_TEST(names.count("connectivity") == 1u);
  BOOST_TEST(names.count("schema_version") == 1u);

  auto [text_code, text] = cli({"storage", "doctor"});
  BOOST_TEST(text_code == 0);
  BOOST_TEST(text.find("connectivity.status=ok\n") != std::string::npos);
  BOOST_TEST(text.find("\npassed=true\n") != std::string::npos);

  BOOST_TEST(cli({"storage", "doctor", "--bogus"}).first == 2);
  BOOST_TEST(cli({"storage", "doctor", "extra"}).first == 2);
}

BOOST_AUTO_TEST_CASE(cli_storage_stats_and_status_json) {
  three_messages_one_claimed("cliq");
  auto [code, out] = cli({"storage", "stats", "--json"});
  BOOST_TEST(code == 0);
  const ptree stats = parse_json(out);
  BOOST_TEST(stats.get<std::string>("backend") == (is_postgres() ? "postgresql" : "sqlite"));
  bool found = false;
  for (const auto& [_, q] : stats.get_child("queues")) {
    if (q.get<std::string>("tenant") != tenant || q.get<std::string>("queue") != "cliq") continue;
    found = true;
    BOOST_TEST(q.get<int>("ready") == 2);
    BOOST_TEST(q.get<int>("in_flight") == 1);
    BOOST_TEST(q.get<int>("dead") == 0);
    BOOST_TEST(q.get<std::string>("pressure") == "normal");
  }
  BOOST_TEST(found);
  BOOST_TEST(stats.get<long long>("database_bytes") > 0);

  auto [text_code, text] = cli({"storage", "stats"});
  BOOST_TEST(text_code == 0);
  BOOST_TEST(text.find("queue=cliq tenant=" + tenant + " ready=2 in_flight=1 delayed=0 dead=0") != std::string::npos);

  auto [status_code, status_out] = cli({"storage", "status", "--json"});
  BOOST_TEST(status_code == 0);
  const ptree status = parse_json(status_out);
  BOOST_TEST(status.get<std::string>("healthy") == "true");
  BOOST_TEST(status.get<long long>("database_bytes") > 0);
  BOOST_TEST(status.get<long long>("pool.acquired") > 0);
  BOOST_TEST(status.get_child("table_rows").count("messages") == 1u);
  // Which edition and version the store runs (PostgreSQL; SQLite has none).
  const std::string edition = !is_postgres() ? "" : plpgsql ? "plpgsql" : "cpp";
  BOOST_TEST(status.get<std::string>("edition") == edition);
  BOOST_TEST(status.get<std::string>("health.store_edition") == edition);
  if (is_postgres()) {
    BOOST_TEST(status.get<std::string>("schema_version") == std::string(forgeyard::version()));
    BOOST_TEST(status.get<std::string>("detail").find("(" + edition + " edition)") != std::string::npos);
  }
  auto [plain_code, plain] = cli({"storage", "status"});
  BOOST_TEST(plain_code == 0);
  BOOST_TEST(plain.find("healthy=true\n") != std::string::npos);
  BOOST_TEST((plain.find("\nedition=" + edition + "\n") != std::string::npos) == is_postgres());
  BOOST_TEST(plain.find("\npool_acquired=") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cli_metrics_is_valid_prometheus_text) {
  three_messages_one_claimed("mq");
  auto [code, out] = cli({"metrics"});
  BOOST_TEST(code == 0);
  BOOST_TEST_REQUIRE(!out.empty());
  BOOST_TEST(out.back() == '\n');
  const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter))");
  const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?))");
  const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
  const std::set<std::string> allowed_labels{"tenant", "queue", "state", "table", "operation", "workflow", "kind"};
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  std::map<std::string, double> ours;  // state -> value of forgeyard_queue_messages for this queue
  std::istringstream in(out);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    BOOST_TEST_CONTEXT(line) {
      if (std::regex_match(line, m, help)) {
        BOOST_TEST(helped.insert(m[1]).second);  // one HELP per family
      } else if (std::regex_match(line, m, type)) {
        BOOST_TEST(helped.count(m[1]) == 1u);  // after its HELP
        BOOST_TEST(types.emplace(m[1], m[2]).second);
        if (m[2] == "counter") BOOST_TEST(std::string(m[1]).ends_with("_total"));
      } else if (std::regex_match(line, m, sample)) {
        ++samples;
        const std::string name = m[1];
        BOOST_TEST(types.count(name) == 1u);  // declared before its samples
        BOOST_TEST(name.rfind("forgeyard_", 0) == 0u);
        std::map<std::string, std::string> labels;
        std::string rest = m[3];
        while (!rest.empty()) {
          std::smatch l;
          BOOST_TEST_REQUIRE(std::regex_search(rest, l, label, std::regex_constants::match_continuous));
          BOOST_TEST(allowed_labels.count(l[1]) == 1u);
          BOOST_TEST(labels.emplace(l[1], l[2]).second);
          rest = l.suffix();
        }
        if (name == "forgeyard_queue_messages" && labels["tenant"] == tenant && labels["queue"] == "mq")
          ours[labels["state"]] = std::stod(m[4]);
      } else {
        BOOST_ERROR("not a line of the Prometheus text format");
      }
    }
  }
  BOOST_TEST(samples > 10);
  BOOST_TEST(ours["ready"] == 2);
  BOOST_TEST(ours["in_flight"] == 1);
  BOOST_TEST(ours["dead"] == 0);
  BOOST_TEST(types["forgeyard_client_operations_total"] == "counter");
  BOOST_TEST(out.find("forgeyard_client_operations_total{operation=\"store.stats\"} 1\n") != std::string::npos);

  auto [json_code, json] = cli({"metrics", "--json"});
  BOOST_TEST(json_code == 0);
  const ptree doc = parse_json(json);
  BOOST_TEST(doc.get_child("operations").count("store.stats") == 1u);
  BOOST_TEST(doc.get_child("stats.queues").size() >= 1u);
}

BOOST_AUTO_TEST_CASE(a_role_with_direct_table_privileges_fails_security) {
  if (!is_postgres()) {
    const std::string file = url.substr(9);  // created with the umask: make it private first
    std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    BOOST_TEST(check(store->doctor(), "file_permissions").status == CheckStatus::Ok);
    std::filesystem::permissions(file, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
    const DoctorCheck c = check(store->doctor(), "file_permissions");
    BOOST_TEST(c.status == CheckStatus::Warn);
    BOOST_TEST(c.fix.find("chmod 600") != std::string::npos);
    return;
  }
  const std::string role = unique_identifier("fy_doctor_dml");
  // A DBA's own GRANT takes turns with forgeyard's access changes, as grant_* and revoke_access do
  // (the other run of this suite grants and revokes on the same table at the same moment).
  const std::string take_turns = "SELECT pg_advisory_xact_lock(hashtext('forgeyard.role_access')); ";
  exec_sql("BEGIN; " + take_turns + "CREATE ROLE " + role + "; GRANT SELECT, UPDATE ON forgeyard.leases TO " + role +
           "; COMMIT");
  const DoctorReport report = store->doctor();
  exec_sql("BEGIN; " + take_turns + "REVOKE ALL ON forgeyard.leases FROM " + role + "; DROP ROLE " + role + "; COMMIT");
  const DoctorCheck& c = check(report, "table_privileges");
  BOOST_TEST(c.group == CheckGroup::Security);
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.detail.find(role) != std::string::npos);
  BOOST_TEST(c.fix.find("REVOKE") != std::string::npos);
  BOOST_TEST(report.passed());  // a security finding does not fail the run: required checks do
  // Gone once revoked. (Not "Ok": the other run of this suite, beside this one on the same
  // database, may hold a role of its own at this moment.)
  BOOST_TEST(check(store->doctor(), "table_privileges").detail.find(role) == std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unbound_application_role_fails_security_where_bindings_are_used) {
  if (!is_postgres()) {
    BOOST_TEST(!check(store->doctor(), "integrity").detail.empty());  // SQLite has no roles
    return;
  }
  const std::string bound = unique_identifier("fy_doctor_bound"), unbound = unique_identifier("fy_doctor_free");
  exec_sql("CREATE ROLE " + bound + "; CREATE ROLE " + unbound + "; SELECT forgeyard.grant_usage('" + bound +
           "'); SELECT forgeyard.grant_usage('" + unbound + "'); SELECT forgeyard.bind_tenant('" + bound + "', '" +
           tenant + "')");
  const DoctorReport report = store->doctor();
  exec_sql("SELECT forgeyard.unbind_tenant('" + bound + "', '" + tenant + "'); SELECT forgeyard.revoke_access('" +
           bound + "'); SELECT forgeyard.revoke_access('" + unbound + "'); DROP ROLE " + bound + "; DROP ROLE " +
           unbound);
  const DoctorCheck& c = check(report, "tenant_bindings");
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.detail.find(unbound) != std::string::npos);
  BOOST_TEST(c.detail.find(bound + ",") == std::string::npos);
  BOOST_TEST(c.fix.find("bind_tenant") != std::string::npos);
}

// GRANT and REVOKE rewrite an object's ACL in place; two sessions changing access at once (two
// deploys, or this suite's two runs beside each other) failed with "tuple concurrently updated"
// (XX000) before grant_* and revoke_access took turns.
BOOST_AUTO_TEST_CASE(two_sessions_granting_and_revoking_at_once_both_succeed) {
  if (!is_postgres()) {
    BOOST_TEST(check(store->doctor(), "integrity").status == CheckStatus::Ok);  // SQLite has no roles
    return;
  }
  const std::string roles[2] = {unique_identifier("fy_grant_a"), unique_identifier("fy_grant_b")};
  exec_sql("CREATE ROLE " + roles[0] + "; CREATE ROLE " + roles[1]);
  conformance::ThreadFailures failures;
  std::vector<std::thread> sessions;
  for (const std::string& role : roles) {
    sessions.emplace_back([&, role] {
      failures.run([&] {
        for (int round = 0; round < 12; ++round) {
          exec_sql("SELECT forgeyard.grant_usage('" + role + "'); SELECT forgeyard.grant_inspect('" + role + "')");
          exec_sql("SELECT forgeyard.revoke_access('" + role + "')");
        }
        exec_sql("SELECT forgeyard.grant_usage('" + role + "')");
      });
    });
  }
  for (std::thread& t : sessions) t.join();
  failures.check("granting");
  for (const std::string& role : roles) {  // each ends with exactly what its last call granted
    BOOST_TEST(exec_sql_error("DO $$ BEGIN ASSERT has_function_privilege('" + role +
                              "', 'forgeyard.lease_acquire(text, text, text, interval)', 'EXECUTE'); "
                              "ASSERT NOT has_function_privilege('" +
                              role + "', 'forgeyard.storage_stats(text)', 'EXECUTE'); END $$") == "");
    exec_sql("SELECT forgeyard.revoke_access('" + role + "'); DROP ROLE " + role);
  }
}

BOOST_AUTO_TEST_CASE(a_search_path_through_a_public_writable_schema_fails_security) {
  if (!is_postgres() || unnamed_statements) {
    BOOST_TEST(check(store->doctor(), "connectivity").status == CheckStatus::Ok);  // PostgreSQL settings only
    return;
  }
  const std::string schema = unique_identifier("fy_doctor_open");
  exec_sql("CREATE SCHEMA " + schema + "; GRANT CREATE ON SCHEMA " + schema + " TO PUBLIC");
  const DoctorReport report = doctor_at(with_parameter(url, "options=-csearch_path%3D" + schema + ",public"));
  exec_sql("DROP SCHEMA " + schema);
  const DoctorCheck& c = check(report, "search_path");
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.detail.find(schema) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_password_in_the_url_fails_security_and_is_never_printed) {
  if (!is_postgres()) {
    BOOST_TEST(check(store->doctor(), "migrations").status == CheckStatus::Ok);  // no URL password on SQLite
    return;
  }
  const std::string with_password = with_parameter(url, "password=hunter2secret");
  const DoctorCheck c = check(doctor_at(with_password), "password_in_url");
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.fix.find("pgpass") != std::string::npos);
  auto [code, out] = cli({"storage", "doctor", "--json"}, with_password);
  BOOST_TEST(code == 0);  // a security finding, not a required one
  BOOST_TEST(out.find("hunter2secret") == std::string::npos);
  auto [status_code, status] = cli({"storage", "status", "--json"}, with_password);
  BOOST_TEST(status_code == 0);
  BOOST_TEST(status.find("hunter2secret") == std::string::npos);
  BOOST_TEST(parse_json(status).get<std::string>("location").find("***") != std::string::npos);
}

// A call the installed forgeyard does not have yet (workflows arrived in 0.7.0): the server's 42883,
// with the upgrade to run, not a bare "function does not exist".
BOOST_AUTO_TEST_CASE(a_call_an_older_catalog_lacks_names_the_upgrade) {
  if (!is_postgres() || unnamed_statements) return;
  const std::string old_db = unique_identifier("fy_old_catalog");
  exec_sql("CREATE DATABASE " + old_db);
  const std::string saved = url;
  url = with_database(saved, old_db);
  exec_sql("CREATE EXTENSION forgeyard VERSION '0.6.0'");
  url = saved;
  std::string message, code;
  try {
    forgeyard::open(with_database(url, old_db))->workflows().start(tenant, "w", 1, "k");
  } catch (const forgeyard::Error& e) {
    message = e.what();
    code = e.sqlstate();
  }
  exec_sql("DROP DATABASE " + old_db + " WITH (FORCE)");
  BOOST_TEST(code == "42883");
  BOOST_TEST(message.find("forgeyard.workflow_start") != std::string::npos, message);
  BOOST_TEST(message.find("this client is forgeyard " + std::string(forgeyard::version()) +
                          ": upgrade the database's forgeyard to it, with `forgeyard storage install` or ALTER "
                          "EXTENSION forgeyard UPDATE") != std::string::npos,
             message);
}

BOOST_AUTO_TEST_CASE(an_old_or_missing_extension_fails_required) {
  if (!is_postgres() || unnamed_statements) {
    BOOST_TEST(check(store->doctor(), "schema_version").status == CheckStatus::Ok);
    return;
  }
  const std::string old_db = unique_identifier("fy_doctor_old"), bare_db = unique_identifier("fy_doctor_bare");
  exec_sql("CREATE DATABASE " + old_db);
  exec_sql("CREATE DATABASE " + bare_db);
  const std::string saved = url;
  url = with_database(saved, old_db);  // exec_sql talks to the backend's url
  exec_sql("CREATE EXTENSION forgeyard VERSION '0.4.0'");
  url = saved;

  auto [old_code, old_out] = cli({"storage", "doctor", "--json"}, with_database(url, old_db));
  auto [bare_code, bare_out] = cli({"storage", "doctor", "--json"}, with_database(url, bare_db));
  exec_sql("DROP DATABASE " + old_db + " WITH (FORCE)");
  exec_sql("DROP DATABASE " + bare_db + " WITH (FORCE)");

  auto status_of = [](const ptree& doc, const std::string& name) {
    for (const auto& [_, c] : doc.get_child("checks"))
      if (c.get<std::string>("name") == name) return c.get<std::string>("status") + ": " + c.get<std::string>("fix");
    return std::string("missing");
  };
  BOOST_TEST(old_code == 1);
  const ptree old_doc = parse_json(old_out);
  BOOST_TEST(old_doc.get<std::string>("passed") == "false");
  BOOST_TEST(status_of(old_doc, "schema_version").rfind("fail: ALTER EXTENSION forgeyard UPDATE", 0) == 0u);
  BOOST_TEST(status_of(old_doc, "migrations").rfind("fail: ALTER EXTENSION forgeyard UPDATE", 0) == 0u);
  BOOST_TEST(bare_code == 1);
  BOOST_TEST(status_of(parse_json(bare_out), "schema_version") ==
             "fail: forgeyard storage install (docs/operations.md, \"Installing forgeyard\")");
}

BOOST_AUTO_TEST_CASE(a_pending_or_changed_migration_and_a_held_lock_on_sqlite) {
  if (is_postgres()) {
    BOOST_TEST(check(store->doctor(), "migrations").status == CheckStatus::Ok);  // extension: see above
    return;
  }
  const std::filesystem::path dir = std::filesystem::path(temp_dir) / "migrations";
  std::filesystem::copy(std::string(FORGEYARD_SOURCE_DIR) + "/migrations/sqlite", dir);
  forgeyard::StoreOptions options;
  options.sqlite_migrations_dir = dir.string();
  const std::string other = "sqlite://" + temp_dir + "/own.db";
  auto own = forgeyard::open(other, options);
  BOOST_TEST(own->doctor().passed());

  { std::ofstream(dir / "9999_next.sql") << "CREATE TABLE next_thing (id INTEGER) STRICT;\n"; }
  DoctorCheck c = check(own->doctor(), "migrations");
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.detail.find("1 forgeyard schema migration(s) pending") != std::string::npos);
  BOOST_TEST(!own->doctor().passed());
  std::filesystem::remove(dir / "9999_next.sql");

  const auto applied = *std::filesystem::directory_iterator(dir);
  { std::ofstream(applied.path(), std::ios::app) << "-- edited after it was applied\n"; }
  c = check(own->doctor(), "migrations");
  BOOST_TEST(c.status == CheckStatus::Fail);
  BOOST_TEST(c.detail.find(applied.path().filename().string()) != std::string::npos);
  BOOST_TEST(!own->doctor().passed());

  // Another process holds the exclusive lock (as a migration, backup or restore would).
  const std::string lock_path = temp_dir + "/store.db.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0600);
  BOOST_TEST_REQUIRE(fd >= 0);
  BOOST_TEST_REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string holder = "pid 4242 (restore-test) on here, restoring";
  BOOST_TEST_REQUIRE(::ftruncate(fd, 0) == 0);
  BOOST_TEST_REQUIRE(::pwrite(fd, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size()));
  c = check(store->doctor(), "migration_lock");
  ::close(fd);
  BOOST_TEST(c.status == CheckStatus::Warn);
  BOOST_TEST(c.detail.find("pid 4242") != std::string::npos);
  BOOST_TEST(check(store->doctor(), "migration_lock").status == CheckStatus::Ok);
}

BOOST_AUTO_TEST_CASE(a_corrupted_sqlite_file_fails_integrity) {
  if (is_postgres()) {
    BOOST_TEST(check(store->doctor(), "inspection").status == CheckStatus::Ok);  // PostgreSQL checks its pages itself
    return;
  }
  for (int i = 0; i < 200; ++i)
    store->audit().append(tenant, forgeyard::AuditEvent{"actor", "act", "resource-" + std::to_string(i)});
  store.reset();  // the last connection checkpoints the WAL into the file
  const std::string path = url.substr(9);
  std::int64_t root = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    BOOST_TEST_REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema"
                       " WHERE name = 'audit_events'",
                       -1, &st, nullptr);
    BOOST_TEST_REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    root = sqlite3_column_int64(st, 0);
    page_size = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  BOOST_TEST_REQUIRE(root > 1);
  BOOST_TEST_REQUIRE((!std::filesystem::exists(path + "-wal") || std::filesystem::file_size(path + "-wal") == 0u));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * page_size);
    const std::string garbage(static_cast<std::size_t>(page_size), '\xA5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto [code, out] = cli({"storage", "doctor", "--json"});
  BOOST_TEST(code == 1);
  const ptree doc = parse_json(out);
  BOOST_TEST(doc.get<std::string>("passed") == "false");
  bool integrity_failed = false;
  for (const auto& [_, c] : doc.get_child("checks"))
    if (c.get<std::string>("name") == "integrity")
      integrity_failed = c.get<std::string>("status") == "fail" && c.get<std::string>("group") == "required";
  BOOST_TEST(integrity_failed);
}

// A restore or copy detected and not reconciled fails the REQUIRED check restore_reconciled, and
// the store is not Healthy, until restore_reconcile() has run. SQLite: a closed store file copied
// to a new path; PostgreSQL: a database created from another as its template (another oid).
BOOST_AUTO_TEST_CASE(an_unreconciled_restore_fails_required_and_is_not_healthy) {
  forgeyard::StoreOptions options;
  options.prepared_statements = !unnamed_statements;
  std::string copy_url;
  std::vector<std::string> databases;
  if (is_postgres()) {
    if (unnamed_statements) {  // PgBouncer: CREATE DATABASE goes to the server directly above
      BOOST_TEST(check(store->doctor(), "restore_reconciled").status == CheckStatus::Ok);
      return;
    }
    const std::string source = unique_identifier("fy_restore_src"), copy = unique_identifier("fy_restore_copy");
    exec_sql("CREATE DATABASE " + source);
    databases = {copy, source};
    const std::string saved = url;
    url = with_database(saved, source);
    exec_sql("CREATE EXTENSION forgeyard");
    url = saved;
    BOOST_TEST(check(doctor_at(with_database(url, source)), "restore_reconciled").status == CheckStatus::Ok);
    exec_sql("CREATE DATABASE " + copy + " TEMPLATE " + source);
    copy_url = with_database(url, copy);
  } else {
    const std::string original = temp_dir + "/original.db", copy = temp_dir + "/copy.db";
    {
      const auto s = forgeyard::open("sqlite://" + original, options);
      BOOST_TEST_REQUIRE(s->leases().acquire(tenant, "r", "o", 10min).acquired);
      BOOST_TEST(check(s->doctor(), "restore_reconciled").status == CheckStatus::Ok);
    }
    std::filesystem::copy_file(original, copy);
    copy_url = "sqlite://" + copy;
  }

  {
    const auto restored = forgeyard::open(copy_url, options);
    BOOST_TEST(restored->restore_status().needs_reconcile());
    const DoctorReport report = restored->doctor();
    const DoctorCheck& c = check(report, "restore_reconciled");
    BOOST_TEST(c.group == CheckGroup::Required);
    BOOST_TEST(c.status == CheckStatus::Fail);
    BOOST_TEST(c.fix == "run forgeyard storage reconcile");
    BOOST_TEST(!report.passed());
    const forgeyard::Health health = restored->health();
    BOOST_TEST((health.status == forgeyard::HealthStatus::Degraded));
    BOOST_TEST(!restored->ready());
    BOOST_TEST(!restored->status().healthy);
  }
  auto [code, out] = cli({"storage", "doctor", "--json"}, copy_url);
  BOOST_TEST(code == 1);
  BOOST_TEST(parse_json(out).get<std::string>("passed") == "false");
  auto [status_code, status_out] = cli({"storage", "status", "--json"}, copy_url);
  BOOST_TEST(status_code == 1);
  BOOST_TEST(parse_json(status_out).get<std::string>("health.status") == "degraded");

  {
    const auto restored = forgeyard::open(copy_url, options);
    if (is_postgres()) {  // the SQL step a DBA runs (the client's call is covered by the restore drill)
      const std::string saved = url;
      url = copy_url;
      exec_sql("SELECT count(*) FROM forgeyard.restore_reconcile()");
      url = saved;
    } else {
      BOOST_TEST(restored->restore_reconcile().restore_detected);
    }
    const DoctorReport report = restored->doctor();
    BOOST_TEST(check(report, "restore_reconciled").status == CheckStatus::Ok);
    BOOST_TEST(report.passed());
    BOOST_TEST((restored->health().status == forgeyard::HealthStatus::Healthy));
    BOOST_TEST(restored->ready());
  }
  auto [after_code, after_out] = cli({"storage", "status", "--json"}, copy_url);
  BOOST_TEST(after_code == 0);
  BOOST_TEST(parse_json(after_out).get<std::string>("health.status") == "healthy");
  BOOST_TEST(cli({"storage", "doctor"}, copy_url).first == 0);
  for (const std::string& db : databases) exec_sql("DROP DATABASE " + db + " WITH (FORCE)");
}

BOOST_AUTO_TEST_SUITE_END()
