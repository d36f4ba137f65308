// Reads never wait for writers (contract §8): while a Transaction holds the write side, every read
// call and every operations read (health, status, stats, doctor, restore status, metrics,
// storage verify) answers with what was committed, and a read inside the Transaction sees its own
// writes. On SQLite the stores here have one write connection and a short busy timeout: the open
// Transaction holds that connection and the process's write turn, so a read that needed either
// would fail (pool timeout, or 40001 when the turn does not come within the busy timeout). On
// PostgreSQL reads share the pool with the Transaction's connection (sized so that they can) and
// must not wait for the row locks its writes hold.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "backend.hpp"
#include "check.hpp"
#include "forgeyard/backup.hpp"

using namespace std::chrono_literals;
using forgeyard::CheckStatus;
using forgeyard::HealthStatus;

namespace {

// forgeyard --store AT storage verify --full, its stdout into `out`; returns the exit code.
int cli_verify(const std::string& at, const std::string& out) {
  std::vector<std::string> args{"forgeyard", "--store", at, "storage", "verify", "--full"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    execv(FORGEYARD_CLI, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct ReadsBesideAWrite : conformance::Backend {
  std::string table = unique_identifier("beside");
  const std::string queue = "beside";
  const std::string topic = "beside";
  const forgeyard::IdempotencyKey committed_key{tenant, "beside", "committed"};
  const forgeyard::IdempotencyKey open_key{tenant, "beside", "open"};
  std::int64_t lease_epoch = 0;
  std::string run;

  ReadsBesideAWrite() {
    create_versioned_table(table);
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value, note) VALUES ('" + tenant + "', 1, 10, 'first')");
  }

  forgeyard::Fields row_key() const { return {{"tenant_id", tenant}, {"id", std::int64_t{1}}}; }

  // SQLite: one write connection, and a busy timeout (also the wait for a write turn) far shorter
  // than any test. PostgreSQL: room for reads beside a Transaction's connection.
  std::unique_ptr<forgeyard::Store> open_small(const std::string& at) const {
    forgeyard::StoreOptions options;
    options.pool.max_connections = is_postgres() ? 8 : 1;
    options.pool.acquire_timeout = 2s;
    options.sqlite_busy_timeout = 150ms;
    options.clock = [this] { return clock.now(); };
    options.prepared_statements = !unnamed_statements;
    return forgeyard::open(at, options);
  }
  std::unique_ptr<forgeyard::Store> open_small() const { return open_small(url); }

  // The committed state: one of each kind.
  void commit_state(forgeyard::Store& s) {
    lease_epoch = s.leases().acquire(tenant, "beside/held", "worker-a", 30s).epoch;
    s.queues().create(tenant, queue, {});
    s.queues().enqueue(tenant, queue, {.payload = "m1"});
    s.audit().append(tenant, {.actor = "ann", .action = "beside.test", .resource = "r1"});
    s.topics().register_event_type(tenant, "beside.done", 1);
    s.topics().create(tenant, topic);
    const auto begun = s.idempotency().begin(committed_key, "digest");
    s.idempotency().complete(committed_key, std::string("done"), begun.attempt);
    run = s.workflows().start(tenant, "order", 1, "committed", "{}");
    s.workflows().schedule_create(tenant, "committed", "report", 1, "@daily");
  }

  // A change of each kind, left uncommitted.
  void change_everything(forgeyard::Transaction& tx) {
    tx.leases().acquire(tenant, "beside/open", "worker-b", 30s);
    BOOST_TEST(tx.versioned_rows().update(table, row_key(), 1, {{"value", std::int64_t{11}}}) == 2);
    tx.queues().enqueue(tenant, queue, {.payload = "m2"});
    tx.audit().append(tenant, {.actor = "bob", .action = "beside.test", .resource = "r2"});
    tx.topics().create(tenant, "beside-open");
    tx.idempotency().begin(open_key, "digest");
    BOOST_TEST(tx.workflows().cancel(tenant, run, "beside"));
    tx.workflows().schedule_create(tenant, "open", "report", 1, "@hourly");
  }

  // What each read of `s` must answer while the change is open elsewhere: the committed state.
  // Each read is checked on its own: one that fails (waits out a pool or a write turn) is named,
  // and the others still run.
  void expect_committed(forgeyard::Store& s) {
    answers("lease get", [&] {
      const auto lease = s.leases().get(tenant, "beside/held");
      BOOST_TEST_REQUIRE(lease.has_value());
      BOOST_TEST(lease->epoch == lease_epoch);
      BOOST_TEST(!s.leases().get(tenant, "beside/open").has_value());
    });
    answers("cas get", [&] {
      const auto row = s.versioned_rows().get(table, row_key());
      BOOST_TEST_REQUIRE(row.has_value());
      BOOST_TEST(row->version == 1);
      BOOST_TEST((row->values.at("value") == forgeyard::Value(std::int64_t{10})));
    });
    answers("queue stats", [&] { BOOST_TEST(s.queues().stats(tenant, queue).ready == 1); });
    answers("dead letters", [&] { BOOST_TEST(s.queues().dead_letters(tenant, queue).empty()); });
    answers("audit head and read", [&] {
      BOOST_TEST(s.audit().head(tenant).seq == 1);
      BOOST_TEST(s.audit().read(tenant, 1, 10).size() == 1u);
    });
    answers("audit verify", [&] {
      const auto verified = s.audit().verify(tenant);
      BOOST_TEST(verified.ok);
      BOOST_TEST(verified.checked == 1);
    });
    answers("topic list", [&] { BOOST_TEST(s.topics().list(tenant).size() == 1u); });
    answers("idempotency status", [&] {
      BOOST_TEST(s.idempotency().status(committed_key)->status == "completed");
      BOOST_TEST(!s.idempotency().status(open_key).has_value());
    });
    answers("workflow status and list", [&] {
      BOOST_TEST(s.workflows().status(tenant, run).state == "pending");
      BOOST_TEST(s.workflows().list(tenant).size() == 1u);
    });
    answers("schedule list", [&] { BOOST_TEST(s.workflows().schedule_list(tenant).size() == 1u); });
    answers("health", [&] { BOOST_TEST((s.health().status == HealthStatus::Healthy)); });
    answers("storage status", [&] {
      const forgeyard::StorageStatus status = s.status();
      BOOST_TEST(status.healthy, status.detail);
    });
    answers("restore status", [&] { BOOST_TEST((s.restore_status().state == forgeyard::RestoreState::Ok)); });
    answers("storage stats", [&] {
      const forgeyard::StoreStats stats = s.stats();
      const auto backlog = std::find_if(stats.queues.begin(), stats.queues.end(),
                                        [&](const auto& b) { return b.tenant == tenant && b.queue == queue; });
      BOOST_TEST_REQUIRE((backlog != stats.queues.end()));
      BOOST_TEST(backlog->depth.ready == 1);
      const auto figures =
          std::find_if(stats.tenants.begin(), stats.tenants.end(), [&](const auto& t) { return t.tenant == tenant; });
      BOOST_TEST_REQUIRE((figures != stats.tenants.end()));
      BOOST_TEST(figures->audit_events == 1);
      BOOST_TEST(figures->leases_live == 1);
    });
    answers("storage doctor", [&] {
      const forgeyard::DoctorReport report = s.doctor();
      for (const char* name : {"connectivity", "inspection"}) {
        const auto c = std::find_if(report.checks.begin(), report.checks.end(),
                                    [&](const forgeyard::DoctorCheck& d) { return d.name == name; });
        BOOST_TEST_REQUIRE((c != report.checks.end()), name);
        BOOST_TEST((c->status == CheckStatus::Ok), name << ": " << c->detail);
      }
    });
    const forgeyard::Metrics metrics = s.metrics();
    for (const char* operation : {"lease.get", "cas.get", "queue.stats", "audit.verify", "store.stats"}) {
      const auto it = metrics.operations.find(operation);
      BOOST_TEST_REQUIRE((it != metrics.operations.end()), operation);
      BOOST_TEST(it->second.errors == 0u, operation);
    }
    BOOST_TEST(metrics.pool.timed_out == 0u);
  }

  template <class F>
  static void answers(const char* read, F&& check) {
    BOOST_TEST_CONTEXT(read) {
      try {
        check();
      } catch (const forgeyard::Error& e) {
        BOOST_ERROR(read << " failed: " << forgeyard::to_string(e.kind()) << " " << e.sqlstate() << ": " << e.what());
      }
    }
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(read_connections, ReadsBesideAWrite)

// The Transaction holds the store's only write connection (and, on SQLite, the write turn).
BOOST_AUTO_TEST_CASE(reads_beside_an_open_transaction_of_the_same_store_answer_the_committed_state) {
  const auto s = open_small();
  commit_state(*s);
  auto tx = s->begin();
  change_everything(*tx);
  expect_committed(*s);
  BOOST_TEST(s->metrics().pool.in_use >= 1);  // the Transaction's connection
  tx->commit();
  tx.reset();
  BOOST_TEST(s->versioned_rows().get(table, row_key())->version == 2);
  BOOST_TEST(s->queues().stats(tenant, queue).ready == 2);
  BOOST_TEST(s->audit().head(tenant).seq == 2);
  BOOST_TEST(s->workflows().status(tenant, run).state == "cancelled");
}

// Another store on the same data holds the write transaction (on SQLite: the file's write lock and
// this process's write turn, as a writer in another process holds the lock).
BOOST_AUTO_TEST_CASE(reads_beside_another_stores_write_transaction_answer_the_committed_state) {
  const auto writer = open_small();
  const auto reader = open_small();
  commit_state(*writer);
  auto tx = writer->begin();
  change_everything(*tx);
  expect_committed(*reader);
  tx->rollback();
  BOOST_TEST(reader->versioned_rows().get(table, row_key())->version == 1);
}

BOOST_AUTO_TEST_CASE(a_read_inside_a_transaction_sees_its_own_writes) {
  const auto s = open_small();
  commit_state(*s);
  auto tx = s->begin();
  change_everything(*tx);
  BOOST_TEST(tx->leases().get(tenant, "beside/open").has_value());
  BOOST_TEST(tx->versioned_rows().get(table, row_key())->version == 2);
  BOOST_TEST(tx->queues().stats(tenant, queue).ready == 2);
  BOOST_TEST(tx->audit().head(tenant).seq == 2);
  BOOST_TEST(tx->audit().read(tenant, 1, 10).size() == 2u);
  BOOST_TEST(tx->audit().verify(tenant).checked == 2);
  BOOST_TEST(tx->topics().list(tenant).size() == 2u);
  BOOST_TEST(tx->idempotency().status(open_key)->status == "in_progress");
  BOOST_TEST(tx->workflows().status(tenant, run).state == "cancelled");
  BOOST_TEST(tx->workflows().schedule_list(tenant).size() == 2u);
  tx->rollback();
  tx.reset();
  expect_committed(*s);
}

// storage verify --full (the library call and the CLI) runs to its end while another store holds
// a write transaction on the data, and reports the committed state.
BOOST_AUTO_TEST_CASE(storage_verify_runs_to_the_end_beside_a_write_transaction) {
  const std::string name = unique_identifier("verify_beside");
  const std::string at = create_own_store(name);
  {
    const auto writer = open_small(at);
    writer->queues().create(tenant, queue, {});
    writer->queues().enqueue(tenant, queue, {.payload = "m1"});
    writer->audit().append(tenant, {.actor = "ann", .action = "beside.test", .resource = "r1"});
    auto tx = writer->begin();
    tx->queues().enqueue(tenant, queue, {.payload = "m2"});
    tx->audit().append(tenant, {.actor = "bob", .action = "beside.test", .resource = "r2"});

    const forgeyard::VerifyReport report = forgeyard::verify_store(at, true);
    BOOST_TEST(report.ok());
    BOOST_TEST(report.checks.back() == "audit_chains");
    BOOST_TEST(report.counts.at("messages") == 1);
    BOOST_TEST(report.counts.at("audit_events") == 1);

    const std::string out = (std::filesystem::temp_directory_path() / (name + ".out")).string();
    BOOST_TEST(cli_verify(at, out) == 0);
    BOOST_TEST(conformance::slurp(out).find("ok=true") != std::string::npos);
    std::filesystem::remove(out);

    tx->commit();  // the writer was never in verify's way
    BOOST_TEST(forgeyard::verify_store(at, true).counts.at("messages") == 2);
  }
  drop_own_store(name);
}

BOOST_AUTO_TEST_SUITE_END()
