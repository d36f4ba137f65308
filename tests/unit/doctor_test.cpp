// storage doctor's decisions (client/src/doctor.cpp) and the Prometheus text (operations.cpp):
// thresholds to ok / warn / fail, groups, what makes the report fail, and label escaping.
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>

#include "doctor.hpp"
#include "forgeyard/store.hpp"

// Boost.Test prints the values of a failed comparison.
namespace forgeyard {
inline std::ostream& operator<<(std::ostream& out, CheckStatus s) {
  return out << to_string(s);
}
inline std::ostream& operator<<(std::ostream& out, CheckGroup g) {
  return out << to_string(g);
}
}  // namespace forgeyard

using forgeyard::CheckGroup;
using forgeyard::CheckStatus;
using forgeyard::DoctorCheck;
using forgeyard::DoctorReport;
using forgeyard::detail::DoctorFacts;
using forgeyard::detail::evaluate_doctor;
using namespace std::chrono_literals;

namespace {

const DoctorCheck* find(const std::vector<DoctorCheck>& checks, const std::string& name) {
  for (const DoctorCheck& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

DoctorFacts healthy_postgres() {
  DoctorFacts f;
  f.backend = "postgresql";
  f.latency = 500us;
  f.expected_schema = "0.5.0";
  f.installed_schema = "0.5.0";
  f.pending_schema_migrations = 0;
  f.roles_with_table_privileges = std::vector<std::string>{};
  f.unbound_usage_roles = std::vector<std::string>{};
  f.unsafe_search_path = std::vector<std::string>{};
  f.remote_without_tls = false;
  f.password_in_url = false;
  f.timezone = "UTC";
  f.clock_skew = 2ms;
  f.autovacuum_on = true;
  f.horizon_known = true;
  f.stats = forgeyard::StoreStats{};
  return f;
}

CheckStatus status_of(const DoctorFacts& f, const std::string& name) {
  const auto checks = evaluate_doctor(f);
  const DoctorCheck* c = find(checks, name);
  BOOST_REQUIRE_MESSAGE(c != nullptr, "no check " + name);
  return c->status;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(doctor)

BOOST_AUTO_TEST_CASE(a_healthy_store_passes_with_every_check_ok) {
  const auto checks = evaluate_doctor(healthy_postgres());
  BOOST_TEST(checks.size() >= 15u);
  for (const DoctorCheck& c : checks) {
    BOOST_TEST_CONTEXT(c.name) {
      BOOST_TEST(c.status == CheckStatus::Ok);
      BOOST_TEST(c.fix.empty());
      BOOST_TEST(!c.detail.empty());
    }
  }
  BOOST_TEST(DoctorReport{checks}.passed());
}

BOOST_AUTO_TEST_CASE(checks_come_grouped_required_security_performance_optional) {
  const auto checks = evaluate_doctor(healthy_postgres());
  auto rank = [](CheckGroup g) {
    return g == CheckGroup::Required ? 0 : g == CheckGroup::Security ? 1 : g == CheckGroup::Performance ? 2 : 3;
  };
  for (std::size_t i = 1; i < checks.size(); ++i) BOOST_TEST(rank(checks[i - 1].group) <= rank(checks[i].group));
}

BOOST_AUTO_TEST_CASE(latency_warns_then_fails) {
  DoctorFacts f = healthy_postgres();
  f.latency = 99ms;
  BOOST_TEST(status_of(f, "connectivity") == CheckStatus::Ok);
  f.latency = 100ms;
  BOOST_TEST(status_of(f, "connectivity") == CheckStatus::Warn);
  f.latency = 2s;
  BOOST_TEST(status_of(f, "connectivity") == CheckStatus::Fail);
  BOOST_TEST(!DoctorReport{evaluate_doctor(f)}.passed());
}

BOOST_AUTO_TEST_CASE(an_unreachable_store_reports_connectivity_alone_and_fails) {
  DoctorFacts f;
  f.backend = "postgresql";
  f.connect_error = "Unavailable: connection refused";
  const auto checks = evaluate_doctor(f);
  BOOST_TEST_REQUIRE(checks.size() == 1u);
  BOOST_TEST(checks[0].name == "connectivity");
  BOOST_TEST(checks[0].status == CheckStatus::Fail);
  BOOST_TEST(!checks[0].fix.empty());
  BOOST_TEST(!DoctorReport{checks}.passed());
}

BOOST_AUTO_TEST_CASE(a_required_failure_fails_the_report_and_others_do_not) {
  DoctorFacts f = healthy_postgres();
  f.installed_schema = "0.4.0";
  BOOST_TEST(status_of(f, "schema_version") == CheckStatus::Fail);
  BOOST_TEST(find(evaluate_doctor(f), "schema_version")->fix.find("ALTER EXTENSION forgeyard UPDATE TO '0.5.0'") !=
             std::string::npos);
  BOOST_TEST(!DoctorReport{evaluate_doctor(f)}.passed());

  DoctorFacts g = healthy_postgres();
  g.roles_with_table_privileges = std::vector<std::string>{"app"};
  g.password_in_url = true;
  g.remote_without_tls = true;
  g.autovacuum_on = false;
  BOOST_TEST(status_of(g, "table_privileges") == CheckStatus::Fail);
  BOOST_TEST(status_of(g, "password_in_url") == CheckStatus::Fail);
  BOOST_TEST(status_of(g, "tls") == CheckStatus::Fail);
  BOOST_TEST(status_of(g, "autovacuum") == CheckStatus::Fail);
  BOOST_TEST(DoctorReport{evaluate_doctor(g)}.passed());  // security and performance do not fail the run
}

BOOST_AUTO_TEST_CASE(schema_problems_fail) {
  DoctorFacts f = healthy_postgres();
  f.installed_schema = "";
  BOOST_TEST(status_of(f, "schema_version") == CheckStatus::Fail);
  f = healthy_postgres();
  f.pending_schema_migrations = 1;
  BOOST_TEST(status_of(f, "migrations") == CheckStatus::Fail);
  f = healthy_postgres();
  f.schema_error = "0004_audit.sql changed";
  BOOST_TEST(status_of(f, "migrations") == CheckStatus::Fail);
  f = healthy_postgres();
  f.integrity = "*** in database main *** Page 5: btreeInitPage() returns error code 11";
  BOOST_TEST(status_of(f, "integrity") == CheckStatus::Fail);
  f = healthy_postgres();
  f.lock_holder = "pid 42 (forgeyard) on host, migrating";
  BOOST_TEST(status_of(f, "migration_lock") == CheckStatus::Warn);
  BOOST_TEST(find(evaluate_doctor(f), "migration_lock")->detail.find("pid 42") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(application_migrations_pending_changed_or_locked) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(find(evaluate_doctor(f), "app_migrations") == nullptr);  // no directory named: no check
  f.app_migrations = forgeyard::detail::AppMigrationFacts{"billing", 0, 0, "", ""};
  BOOST_TEST(status_of(f, "app_migrations") == CheckStatus::Ok);
  BOOST_TEST(status_of(f, "app_migration_lock") == CheckStatus::Ok);
  f.app_migrations->pending = 2;
  BOOST_TEST(status_of(f, "app_migrations") == CheckStatus::Fail);
  BOOST_TEST(find(evaluate_doctor(f), "app_migrations")->fix.find("--app billing") != std::string::npos);
  BOOST_TEST(!DoctorReport{evaluate_doctor(f)}.passed());
  f.app_migrations->changed = 1;
  f.app_migrations->changed_detail = "0002_add_email.sql: recorded abc, file def";
  BOOST_TEST(find(evaluate_doctor(f), "app_migrations")->detail.find("0002_add_email.sql") != std::string::npos);
  f.app_migrations->lock_holder = "pid 77 (deploy) migrating";
  BOOST_TEST(status_of(f, "app_migration_lock") == CheckStatus::Warn);
}

BOOST_AUTO_TEST_CASE(an_unreconciled_restore_fails_required) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(find(evaluate_doctor(f), "restore_reconciled") == nullptr);  // not observed: no check
  f.restore = forgeyard::RestoreStatus{};
  BOOST_TEST(status_of(f, "restore_reconciled") == CheckStatus::Ok);
  BOOST_TEST(find(evaluate_doctor(f), "restore_reconciled")->group == CheckGroup::Required);
  f.restore->state = forgeyard::RestoreState::Restored;
  f.restore->detail = "database oid 16384 recorded, now 16421";
  const auto checks = evaluate_doctor(f);
  const DoctorCheck* c = find(checks, "restore_reconciled");
  BOOST_TEST(c->status == CheckStatus::Fail);
  BOOST_TEST(c->fix == "run forgeyard storage reconcile");
  BOOST_TEST(c->detail.find("now 16421") != std::string::npos);
  BOOST_TEST(!DoctorReport{checks}.passed());
  // A changed timeline may be a failover, which loses nothing: a warning, the report passes.
  f.restore->state = forgeyard::RestoreState::Suspected;
  BOOST_TEST(status_of(f, "restore_reconciled") == CheckStatus::Warn);
  BOOST_TEST(DoctorReport{evaluate_doctor(f)}.passed());
  // Not knowing is not passing.
  f.restore.reset();
  f.restore_error = "permission denied for function restore_status";
  BOOST_TEST(status_of(f, "restore_reconciled") == CheckStatus::Fail);
}

BOOST_AUTO_TEST_CASE(long_transactions_and_slots_by_age) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(status_of(f, "long_transaction") == CheckStatus::Ok);
  f.oldest_transaction = "pid 7 (app, idle in transaction)";
  f.oldest_transaction_age = 4min;
  BOOST_TEST(status_of(f, "long_transaction") == CheckStatus::Ok);
  f.oldest_transaction_age = 5min;
  BOOST_TEST(status_of(f, "long_transaction") == CheckStatus::Warn);
  f.oldest_transaction_age = 1h;
  BOOST_TEST(status_of(f, "long_transaction") == CheckStatus::Fail);
  f.slot_holding_xmin = "standby";
  f.slot_xmin_age = 10'000'000;
  BOOST_TEST(status_of(f, "replication_slots") == CheckStatus::Warn);
  f.slot_xmin_age = 500'000'000;
  BOOST_TEST(status_of(f, "replication_slots") == CheckStatus::Fail);
}

BOOST_AUTO_TEST_CASE(the_oldest_horizon_holder_is_named_with_what_it_holds_back) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Ok);
  f.stats->tables.push_back({"messages", 1000, 46'932, 1 << 20, true});
  f.stats->tables.push_back({"queue_releases", 8, 24'026, 1 << 16, true});
  f.stats->tables.push_back({"access_catalog", 10, 99, 1 << 16, true});  // not a hot table
  f.stats->horizon = forgeyard::XminHorizon{"transaction", "pid 7 (app, psql, idle in transaction)", 5000, 59s};
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Ok);
  f.stats->horizon->held = 60s;
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Warn);
  const auto checks = evaluate_doctor(f);
  const DoctorCheck* c = find(checks, "xmin_horizon");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(c->group == CheckGroup::Performance);
  BOOST_TEST(c->detail ==
             "transaction pid 7 (app, psql, idle in transaction) holds the xmin horizon 5000 transactions back, for "
             "60 s; dead rows in the hot tables: 70958 (forgeyard.messages 46932, forgeyard.queue_releases 24026)");
  BOOST_TEST(!c->fix.empty());
  f.stats->horizon->held = 1h;
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Fail);
  // A slot or a standby has no start time: its age in transactions decides.
  f.stats->horizon = forgeyard::XminHorizon{"replication_slot", "standby_1", 9'999'999, std::nullopt};
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Ok);
  f.stats->horizon->xid_age = 10'000'000;
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Warn);
  f.stats->horizon->xid_age = 500'000'000;
  BOOST_TEST(status_of(f, "xmin_horizon") == CheckStatus::Fail);
  // Without the rows (a role bound to tenants, or a catalog before 0.9.0) nothing is known: no check.
  f.horizon_known = false;
  BOOST_TEST(find(evaluate_doctor(f), "xmin_horizon") == nullptr);
}

BOOST_AUTO_TEST_CASE(the_horizon_is_a_metric_by_kind) {
  forgeyard::StoreStats s;
  BOOST_TEST(forgeyard::prometheus_text(s, forgeyard::Metrics{}).find("xmin_horizon") == std::string::npos);
  s.horizon = forgeyard::XminHorizon{"prepared", "gid g (app, db)", 42, 2500ms};
  const std::string text = forgeyard::prometheus_text(s, forgeyard::Metrics{});
  BOOST_TEST(text.find("forgeyard_xmin_horizon_age_transactions{kind=\"prepared\"} 42\n") != std::string::npos);
  BOOST_TEST(text.find("forgeyard_xmin_horizon_held_seconds{kind=\"prepared\"} 2.5\n") != std::string::npos);
}

// The ready lanes' segments (0.13.0): a sealed one with entries that an open transaction has
// locked cannot be truncated; the check names the oldest such transaction, warns after a minute
// and fails after an hour (its duration unknown: named, not judged).
BOOST_AUTO_TEST_CASE(a_pinned_lane_segment_is_named_and_judged_by_how_long) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(find(evaluate_doctor(f), "lane_segments") == nullptr);  // a catalog before 0.13.0
  f.stats->lane_segments = {{"queue_lane_entries_0", false, true, "", std::nullopt},
                            {"queue_lane_entries_1", true, true, "", std::nullopt},
                            {"queue_lane_entries_2", false, false, "", std::nullopt},
                            {"queue_lane_entries_3", false, false, "", std::nullopt}};
  BOOST_TEST(status_of(f, "lane_segments") == CheckStatus::Ok);
  BOOST_TEST(find(evaluate_doctor(f), "lane_segments")->detail ==
             "2 of 4 segments of the ready lanes hold entries; no sealed one is pinned by an open transaction");
  f.stats->lane_segments[0].pinned_by = "pid 9 (app, psql, idle in transaction)";
  f.stats->lane_segments[0].pinned_for = 59s;
  BOOST_TEST(status_of(f, "lane_segments") == CheckStatus::Ok);
  f.stats->lane_segments[0].pinned_for = 60s;
  BOOST_TEST(status_of(f, "lane_segments") == CheckStatus::Warn);
  const auto checks = evaluate_doctor(f);
  const DoctorCheck* c = find(checks, "lane_segments");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(c->group == CheckGroup::Performance);
  BOOST_TEST(
      c->detail ==
      "2 of 4 segments of the ready lanes hold entries; pid 9 (app, psql, idle in transaction) holds a lock on "
      "sealed segment forgeyard.queue_lane_entries_0, open for 60 s: maintain() skips the segment until it ends");
  BOOST_TEST(!c->fix.empty());
  f.stats->lane_segments[0].pinned_for = 1h;
  BOOST_TEST(status_of(f, "lane_segments") == CheckStatus::Fail);
  f.stats->lane_segments[0].pinned_for = std::nullopt;  // not visible to the role
  BOOST_TEST(status_of(f, "lane_segments") == CheckStatus::Ok);
  BOOST_TEST(find(evaluate_doctor(f), "lane_segments")->detail.find("pid 9") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_lane_segments_are_metrics) {
  forgeyard::StoreStats s;
  BOOST_TEST(forgeyard::prometheus_text(s, forgeyard::Metrics{}).find("lane_segment") == std::string::npos);
  s.lane_segments = {{"queue_lane_entries_0", false, true, "pid 9 (a, b, c)", 1500ms},
                     {"queue_lane_entries_1", true, false, "", std::nullopt}};
  const std::string text = forgeyard::prometheus_text(s, forgeyard::Metrics{});
  BOOST_TEST(text.find("forgeyard_lane_segment_has_rows{table=\"queue_lane_entries_0\",state=\"sealed\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(text.find("forgeyard_lane_segment_has_rows{table=\"queue_lane_entries_1\",state=\"open\"} 0\n") !=
             std::string::npos);
  BOOST_TEST(text.find("forgeyard_lane_segment_pinned_seconds{table=\"queue_lane_entries_0\"} 1.5\n") !=
             std::string::npos);
}

// The capacity counts' segments (0.14.0): the same judgment as the lanes', in a check of their own.
BOOST_AUTO_TEST_CASE(a_pinned_usage_segment_is_named_and_judged_by_how_long) {
  DoctorFacts f = healthy_postgres();
  BOOST_TEST(find(evaluate_doctor(f), "usage_segments") == nullptr);  // a catalog before 0.14.0
  f.stats->usage_segments = {{"queue_admit_deltas_0", false, false, "", std::nullopt},
                             {"queue_admit_deltas_1", true, true, "", std::nullopt},
                             {"queue_release_deltas_0", false, true, "", std::nullopt},
                             {"queue_release_deltas_1", true, true, "", std::nullopt}};
  BOOST_TEST(status_of(f, "usage_segments") == CheckStatus::Ok);
  BOOST_TEST(find(evaluate_doctor(f), "usage_segments")->detail ==
             "3 of 4 segments of the capacity counts hold rows; no sealed one is pinned by an open transaction");
  f.stats->usage_segments[2].pinned_by = "pid 7 (app, psql, idle in transaction)";
  f.stats->usage_segments[2].pinned_for = 59s;
  BOOST_TEST(status_of(f, "usage_segments") == CheckStatus::Ok);
  f.stats->usage_segments[2].pinned_for = 61s;
  BOOST_TEST(status_of(f, "usage_segments") == CheckStatus::Warn);
  const auto checks = evaluate_doctor(f);
  const DoctorCheck* c = find(checks, "usage_segments");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(c->group == CheckGroup::Performance);
  BOOST_TEST(c->detail ==
             "3 of 4 segments of the capacity counts hold rows; pid 7 (app, psql, idle in transaction) holds a lock "
             "on sealed segment forgeyard.queue_release_deltas_0, open for 61 s: maintain() skips the segment until "
             "it ends");
  BOOST_TEST(c->fix.find("dead versions") != std::string::npos);
  f.stats->usage_segments[2].pinned_for = 2h;
  BOOST_TEST(status_of(f, "usage_segments") == CheckStatus::Fail);
  const std::string text = forgeyard::prometheus_text(*f.stats, forgeyard::Metrics{});
  BOOST_TEST(text.find("forgeyard_usage_segment_has_rows{table=\"queue_release_deltas_0\",state=\"sealed\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(text.find("forgeyard_usage_segment_has_rows{table=\"queue_admit_deltas_0\",state=\"sealed\"} 0\n") !=
             std::string::npos);
  BOOST_TEST(text.find("forgeyard_usage_segment_pinned_seconds{table=\"queue_release_deltas_0\"} 7200\n") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(dead_tuples_on_hot_tables_warn_only_past_both_limits) {
  DoctorFacts f = healthy_postgres();
  f.stats->tables.push_back({"messages", 1000, 10'001, 1 << 20, true});
  BOOST_TEST(status_of(f, "dead_tuples") == CheckStatus::Warn);
  f.stats->tables.back().rows = 100'000;  // 10% dead
  BOOST_TEST(status_of(f, "dead_tuples") == CheckStatus::Ok);
  f.stats->tables.back() = {"access_catalog", 0, 50'000, 0, true};  // not a hot table
  BOOST_TEST(status_of(f, "dead_tuples") == CheckStatus::Ok);
  f.stats->tables.back() = {"leases", 10, 0, 0, false};
  BOOST_TEST(status_of(f, "autovacuum") == CheckStatus::Fail);
}

BOOST_AUTO_TEST_CASE(optional_checks_from_the_figures) {
  DoctorFacts f = healthy_postgres();
  forgeyard::QueueBacklog q;
  q.tenant = "t";
  q.queue = "q";
  q.depth.pressure = "elevated";
  f.stats->queues.push_back(q);
  BOOST_TEST(status_of(f, "queue_pressure") == CheckStatus::Warn);
  f.stats->queues.back().depth.pressure = "saturated";
  BOOST_TEST(status_of(f, "queue_pressure") == CheckStatus::Fail);
  BOOST_TEST(DoctorReport{evaluate_doctor(f)}.passed());
  f.stats->queues.back().depth.dead = 5;
  BOOST_TEST(status_of(f, "dead_letters") == CheckStatus::Ok);  // old ones only: not growing
  f.stats->queues.back().dead_last_hour = 2;
  BOOST_TEST(status_of(f, "dead_letters") == CheckStatus::Warn);
  forgeyard::TenantStats t;
  t.tenant = "t";
  f.stats->tenants.push_back(t);
  BOOST_TEST(status_of(f, "expired_leases") == CheckStatus::Ok);
  f.stats->tenants.back().leases_expired = 1;
  BOOST_TEST(status_of(f, "expired_leases") == CheckStatus::Warn);
  BOOST_TEST(status_of(f, "idempotency_retention") == CheckStatus::Ok);
  f.stats->tenants.back().idempotency_past_retention = 3;
  BOOST_TEST(status_of(f, "idempotency_retention") == CheckStatus::Warn);
  f.timezone = "Europe/Paris";
  BOOST_TEST(status_of(f, "timezone") == CheckStatus::Warn);
  f.clock_skew = -1500ms;
  BOOST_TEST(status_of(f, "clock_skew") == CheckStatus::Warn);
}

BOOST_AUTO_TEST_CASE(a_fact_not_observed_gives_no_check) {
  DoctorFacts f;
  f.backend = "sqlite";
  f.latency = 10us;
  f.integrity = "ok";
  const auto checks = evaluate_doctor(f);
  BOOST_TEST(find(checks, "tls") == nullptr);
  BOOST_TEST(find(checks, "password_in_url") == nullptr);
  BOOST_TEST(find(checks, "integrity") != nullptr);
}

BOOST_AUTO_TEST_CASE(prometheus_label_values_are_escaped) {
  forgeyard::StoreStats s;
  forgeyard::QueueBacklog q;
  q.tenant = "a\"b\\c\nd";
  q.queue = "q";
  q.depth.ready = 2;
  q.depth.pressure = "normal";
  s.queues.push_back(q);
  const std::string text = forgeyard::prometheus_text(s, forgeyard::Metrics{});
  BOOST_TEST(text.find("forgeyard_queue_messages{tenant=\"a\\\"b\\\\c\\nd\",queue=\"q\",state=\"ready\"} 2\n") !=
             std::string::npos);
  BOOST_TEST(text.find("# TYPE forgeyard_queue_messages gauge\n") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
