// Read classes (contract §12): strong reads on the primary, eventual reads on a streaming replica
// within a lag bound. `read_classes` runs on every backend; `replica_reads` needs the hot standby
// of the test command's cluster (FORGEYARD_TEST_PG_REPLICA_URL, scripts/lib/cluster.sh) and runs
// in the direct PostgreSQL run only (main.cpp removes it from the others).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>
#include <thread>

#include <libpq-fe.h>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::ReadClass;

namespace {

// The reads of every capability that take a read class, each written first through the API.
struct ReadFixture : conformance::Backend {
  std::string queue = "reads";
  std::string topic = "reads";
  std::string table = unique_identifier("reads");
  forgeyard::IdempotencyKey key{tenant, "reads", "k1"};

  ReadFixture() {
    create_versioned_table(table);
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value, note) VALUES ('" + tenant + "', 1, 10, 'first')");
  }

  forgeyard::Fields row_key() const { return {{"tenant_id", tenant}, {"id", std::int64_t{1}}}; }

  // One write of each kind, on the primary.
  void write_everything(forgeyard::Store& s) {
    s.leases().acquire(tenant, "reads/lease", "worker-a", 30s);
    s.queues().create(tenant, queue, {});
    s.queues().enqueue(tenant, queue, {.payload = "m1"});
    s.topics().register_event_type(tenant, "read.done", 1);
    s.topics().create(tenant, topic);
    s.topics().subscribe(tenant, topic, "sub");
    s.topics().publish(tenant, topic, {.event_type = "read.done", .version = 1, .payload = "e1"});
    s.audit().append(tenant, {.actor = "alice", .action = "read.test", .resource = "r1"});
    s.versioned_rows().update(table, row_key(), 1, {{"value", std::int64_t{11}}});
    auto begun = s.idempotency().begin(key, "digest");
    s.idempotency().complete(key, std::string("done"), begun.attempt);
  }

  // Every read of the class, compared with the same read strong; each call is counted in `calls`.
  int compare_every_read(forgeyard::Store& s, ReadClass read) {
    int calls = 0;
    auto lease = s.leases().get(tenant, "reads/lease", read);
    ++calls;
    BOOST_REQUIRE(lease.has_value());
    BOOST_TEST(lease->epoch == s.leases().get(tenant, "reads/lease")->epoch);
    BOOST_TEST(s.queues().stats(tenant, queue, read).ready == s.queues().stats(tenant, queue).ready);
    ++calls;
    auto lag = s.topics().lag(tenant, topic, read);
    ++calls;
    BOOST_REQUIRE(lag.size() == 1u);
    BOOST_TEST(lag[0].backlog == 1);
    BOOST_TEST(s.audit().head(tenant, read).seq == 1);
    ++calls;
    BOOST_TEST(s.audit().verify(tenant, 1, std::nullopt, std::nullopt, read).ok);
    ++calls;
    auto events = s.audit().read(tenant, 1, 10, read);
    ++calls;
    BOOST_REQUIRE(events.size() == 1u);
    BOOST_TEST(events[0].action == "read.test");
    auto row = s.versioned_rows().get(table, row_key(), read);
    ++calls;
    BOOST_REQUIRE(row.has_value());
    BOOST_TEST(row->version == 2);
    auto status = s.idempotency().status(key, read);
    ++calls;
    BOOST_REQUIRE(status.has_value());
    BOOST_TEST(status->status == "completed");
    bool tenant_seen = false;
    for (const auto& t : s.stats(read).tenants) tenant_seen = tenant_seen || t.tenant == tenant;
    calls += 1;  // storage_stats is several statements; counted as one read or more below
    BOOST_TEST(tenant_seen);
    return calls;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(read_classes, ReadFixture)

BOOST_AUTO_TEST_CASE(without_replicas_an_eventual_read_answers_as_a_strong_one) {
  write_everything(*store);
  compare_every_read(*store, ReadClass::eventual(1h));
  BOOST_TEST(store->replicas().empty());
  BOOST_TEST(store->metrics().replicas.empty());
  BOOST_TEST((store->health(ReadClass::eventual(1h)).status == store->health().status));
}

BOOST_AUTO_TEST_CASE(inside_a_transaction_an_eventual_read_sees_the_transactions_own_writes) {
  auto tx = store->begin();
  tx->leases().acquire(tenant, "tx/lease", "worker-a", 30s);
  auto seen = tx->leases().get(tenant, "tx/lease", ReadClass::eventual(1h));
  BOOST_REQUIRE(seen.has_value());
  BOOST_TEST(seen->owner == "worker-a");
  tx->rollback();
  BOOST_TEST(!store->leases().get(tenant, "tx/lease").has_value());
}

BOOST_AUTO_TEST_CASE(replicas_are_for_postgresql_and_an_unreachable_one_leaves_reads_to_the_primary) {
  forgeyard::StoreOptions options;
  options.clock = [this] { return clock.now(); };
  options.prepared_statements = !unnamed_statements;
  // A port nothing listens on (the cluster's own, plus a gap the test command never uses).
  options.replicas = {"postgresql://postgres@127.0.0.1:1/forgeyard_test?connect_timeout=2"};
  options.pool.min_connections = 1;  // opened at once on the primary; the replica's only when used
  if (!is_postgres()) {
    FY_CHECK_ERROR(forgeyard::open(url, options), ErrorKind::InvalidArgument, "22023");
    return;
  }
  auto s = forgeyard::open(url, options);
  write_everything(*s);
  compare_every_read(*s, ReadClass::eventual(1h));
  const auto replicas = s->replicas();
  BOOST_REQUIRE(replicas.size() == 1u);
  BOOST_TEST(!replicas[0].reachable);
  BOOST_TEST(!replicas[0].error.empty());
  BOOST_TEST(replicas[0].reads == 0u);
  BOOST_TEST(replicas[0].location.find("127.0.0.1:1") != std::string::npos);
  const auto health = s->health();
  BOOST_TEST((health.status == forgeyard::HealthStatus::Healthy));
  BOOST_REQUIRE(health.replicas.size() == 1u);
  bool named = false;
  for (const auto& d : health.details) named = named || d.find("unreachable") != std::string::npos;
  BOOST_TEST(named);
  FY_CHECK_ERROR(
      [&] {
        forgeyard::StoreOptions bad = options;
        bad.replicas = {""};
        forgeyard::open(url, bad);
      }(),
      ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct ReplicaFixture : ReadFixture {
  std::string replica_url;
  std::unique_ptr<forgeyard::Store> with_replica;

  ReplicaFixture() {
    BOOST_REQUIRE_MESSAGE(is_postgres() && !unnamed_statements,
                          "replica_reads runs on PostgreSQL directly (conformance_postgres)");
    const char* env = std::getenv("FORGEYARD_TEST_PG_REPLICA_URL");
    BOOST_REQUIRE_MESSAGE(env != nullptr && *env != '\0',
                          "FORGEYARD_TEST_PG_REPLICA_URL: the test command starts a standby (standby_start)");
    // The standby replays the whole cluster: the same database as the primary's URL (the PL/pgSQL
    // edition's run has its own).
    replica_url = conformance::with_database(env, conformance::database_of(url));
    forgeyard::StoreOptions options;
    options.clock = [this] { return clock.now(); };
    options.replicas = {replica_url};
    options.replica_lag_refresh = 20ms;
    with_replica = forgeyard::open(url, options);
  }
  // A test that paused replay and failed midway must not leave the standby paused for the next.
  ~ReplicaFixture() {
    PGconn* c = PQconnectdb(replica_url.c_str());
    if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, "SELECT pg_catalog.pg_wal_replay_resume()"));
    PQfinish(c);
  }

  // Until the standby has replayed everything the primary had written when this was called.
  void wait_caught_up() {
    conformance::PgSession primary(url), standby(replica_url);
    const std::string lsn = primary.value("SELECT pg_catalog.pg_current_wal_lsn()::text");
    // Patient: beside the test command's other suites and builds, replay can fall seconds behind.
    for (int i = 0; i < 6000; ++i) {
      if (standby.value("SELECT (pg_catalog.pg_last_wal_replay_lsn() >= '" + lsn + "')::text") == "true") return;
      std::this_thread::sleep_for(10ms);
    }
    BOOST_FAIL("the standby did not replay " + lsn + " within 60 s: received " +
               standby.value("SELECT pg_catalog.pg_last_wal_receive_lsn()::text") + ", replayed " +
               standby.value("SELECT pg_catalog.pg_last_wal_replay_lsn()::text") + ", replay paused " +
               standby.value("SELECT pg_catalog.pg_is_wal_replay_paused()::text") + ", receiver " +
               standby.value("SELECT COALESCE((SELECT status FROM pg_catalog.pg_stat_wal_receiver), 'none')") +
               " (build/pg-standby.log has its log)");
  }
  std::uint64_t replica_reads() const { return with_replica->metrics().replicas.at(0).reads; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(replica_reads, ReplicaFixture)

BOOST_AUTO_TEST_CASE(every_eventual_read_is_served_by_the_standby_and_answers_as_the_primary) {
  write_everything(*with_replica);
  wait_caught_up();
  const std::uint64_t before = replica_reads();
  const int calls = compare_every_read(*with_replica, ReadClass::eventual(1h));
  // Each eventual call above ran on the standby (a statement that wrote would have failed there
  // and fallen back to the primary, uncounted); storage_stats is more than one statement.
  BOOST_TEST(replica_reads() - before >= static_cast<std::uint64_t>(calls));
  BOOST_TEST(with_replica->metrics().replicas.at(0).fallbacks == 0u);
  // Strong reads never go there.
  const std::uint64_t after = replica_reads();
  with_replica->leases().get(tenant, "reads/lease");
  with_replica->leases().get(tenant, "reads/lease", ReadClass::strong());
  BOOST_TEST(replica_reads() == after);
}

BOOST_AUTO_TEST_CASE(a_paused_replica_serves_stale_reads_within_the_bound_and_the_primary_beyond_it) {
  auto& leases = with_replica->leases();
  leases.acquire(tenant, "before", "worker-a", 30s);
  wait_caught_up();
  conformance::PgSession standby(replica_url);
  standby.value("SELECT pg_catalog.pg_wal_replay_pause()::text");
  // A write after the pause: it goes to the primary (the standby would refuse it), so strong
  // reads see it, and the paused standby does not.
  auto grant = leases.acquire(tenant, "after", "worker-b", 30s);
  BOOST_TEST(grant.acquired);
  BOOST_TEST(leases.get(tenant, "after").has_value());
  const std::uint64_t before = replica_reads();
  BOOST_TEST(leases.get(tenant, "before", ReadClass::eventual(1h)).has_value());
  BOOST_TEST(!leases.get(tenant, "after", ReadClass::eventual(1h)).has_value());  // stale, as allowed
  BOOST_TEST(replica_reads() == before + 2);
  // The standby falls behind: its lag is measured and shown.
  std::this_thread::sleep_for(300ms);
  const auto measured = with_replica->replicas();
  BOOST_REQUIRE(measured.size() == 1u);
  BOOST_TEST(measured[0].reachable);
  BOOST_TEST(measured[0].in_recovery);
  BOOST_REQUIRE(measured[0].lag.has_value());
  BOOST_TEST(measured[0].lag->count() >= std::chrono::microseconds(300ms).count());
  const auto health = with_replica->health();
  BOOST_REQUIRE(health.replicas.size() == 1u);
  BOOST_TEST(health.replicas[0].lag.has_value());
  // A tighter bound than that lag: the primary answers, with the write.
  const std::uint64_t stale_reads = replica_reads();
  BOOST_TEST(leases.get(tenant, "after", ReadClass::eventual(100ms)).has_value());
  BOOST_TEST(replica_reads() == stale_reads);
  // Replay resumes: the standby catches up, its lag falls, and it serves the bound again.
  standby.value("SELECT pg_catalog.pg_wal_replay_resume()::text");
  wait_caught_up();
  std::this_thread::sleep_for(30ms);  // past the refresh: the next read measures again
  BOOST_TEST(leases.get(tenant, "after", ReadClass::eventual(1h)).has_value());
  BOOST_TEST(with_replica->replicas().at(0).lag.has_value());
}

BOOST_AUTO_TEST_CASE(with_the_primary_away_an_eventual_class_still_finds_the_standby_healthy_for_reads) {
  // The primary's URL names a port nothing listens on; the standby answers.
  forgeyard::StoreOptions options;
  options.replicas = {replica_url};
  options.pool.acquire_timeout = 2s;
  auto s = forgeyard::open("postgresql://postgres@127.0.0.1:1/forgeyard_test?connect_timeout=2", options);
  BOOST_TEST((s->health().status == forgeyard::HealthStatus::Unavailable));
  const auto h = s->health(ReadClass::eventual(1h));
  BOOST_TEST((h.status == forgeyard::HealthStatus::Degraded));
  bool named = false;
  for (const auto& d : h.details) named = named || d.find("eventual reads go to replica") != std::string::npos;
  BOOST_TEST(named);
  // The reads themselves: the standby serves them, writes fail.
  with_replica->leases().acquire(tenant, "away", "worker-a", 30s);
  wait_caught_up();
  BOOST_TEST(s->leases().get(tenant, "away", ReadClass::eventual(1h)).has_value());
  const auto refused = conformance::expect_error([&] { s->leases().acquire(tenant, "away2", "worker-a", 30s); });
  BOOST_TEST(forgeyard::to_string(refused.kind()) == forgeyard::to_string(ErrorKind::Unavailable));
}

BOOST_AUTO_TEST_CASE(a_multi_host_url_with_read_write_finds_the_primary_past_the_standby) {
  // The standby listed first: libpq skips it for target_session_attrs=read-write.
  const auto host_port = [](const std::string& u) {
    const auto host = u.find("host=") + 5;
    const auto amp = u.find('&', host);
    const auto port = u.find("port=") + 5;
    return std::make_pair(u.substr(host, amp - host), u.substr(port));
  };
  const auto [standby_host, standby_port] = host_port(replica_url);
  const auto [primary_host, primary_port] = host_port(url);
  const std::string multi = "postgresql://postgres@/forgeyard_test?host=" + standby_host + "," + primary_host +
                            "&port=" + standby_port + "," + primary_port;
  auto any = forgeyard::open(multi, {});
  const auto standby_health = any->health();
  BOOST_TEST((standby_health.status == forgeyard::HealthStatus::Degraded));  // the standby: reads only
  // A write there: refused by the standby (read_only_sql_transaction).
  FY_CHECK_ERROR(any->leases().acquire(tenant, "multi", "worker-a", 30s), ErrorKind::Internal, "25006");
  auto rw = forgeyard::open(multi + "&target_session_attrs=read-write", {});
  BOOST_TEST((rw->health().status == forgeyard::HealthStatus::Healthy));
  auto grant = rw->leases().acquire(tenant, "multi", "worker-a", 30s);
  BOOST_TEST(grant.acquired);
  BOOST_TEST(rw->leases().get(tenant, "multi")->epoch == grant.epoch);
}

BOOST_AUTO_TEST_CASE(the_cli_reads_a_replica_with_max_lag_and_reports_its_lag) {
  const std::string out = (std::filesystem::temp_directory_path() / unique("replica-cli")).string();
  with_replica->leases().acquire(tenant, "cli/before", "worker-a", 30s);
  wait_caught_up();
  conformance::PgSession standby(replica_url);
  standby.value("SELECT pg_catalog.pg_wal_replay_pause()::text");
  with_replica->leases().acquire(tenant, "cli/after", "worker-a", 30s);
  const std::vector<std::string> eventual{"--replica", replica_url, "--max-lag", "1h"};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), eventual.begin(), eventual.end());
    return args;
  };
  // The paused standby answers --max-lag 1h: it has the first lease and not the second; the
  // primary, without --max-lag, has both.
  BOOST_TEST(run_cli(with({"lease", "status", tenant, "cli/before"}), out) == 0);
  BOOST_TEST(run_cli(with({"lease", "status", tenant, "cli/after"}), out) == 1);
  BOOST_TEST(conformance::slurp(out) == "state=none\n");
  BOOST_TEST(run_cli({"--replica", replica_url, "lease", "status", tenant, "cli/after"}, out) == 0);
  // Its lag, measured: in storage status --json and in metrics.
  run_cli(with({"storage", "status", "--json"}), out);
  const std::string status = conformance::slurp(out);
  BOOST_TEST(status.find("\"replicas\":[{\"location\":") != std::string::npos, status);
  BOOST_TEST(status.find("\"in_recovery\":true") != std::string::npos, status);
  BOOST_TEST(status.find("\"lag_usecs\":null") == std::string::npos, status);
  BOOST_TEST(run_cli(with({"metrics"}), out) == 0);
  const std::string metrics = conformance::slurp(out);
  BOOST_TEST(metrics.find("forgeyard_replica_up{replica=") != std::string::npos);
  BOOST_TEST(metrics.find("forgeyard_replica_lag_seconds{replica=") != std::string::npos);
  BOOST_TEST(metrics.find("forgeyard_replica_reads_total{replica=") != std::string::npos);
  // A bound that is not a duration is a usage error.
  BOOST_TEST(run_cli({"--replica", replica_url, "--max-lag", "soon", "lease", "status", tenant, "cli/after"}, out) ==
             2);
  std::filesystem::remove(out);
}

BOOST_AUTO_TEST_SUITE_END()
