// PostgreSQL under faults: the workloads run through a TCP proxy that delays and cuts
// connections (before a statement, after it before the reply, during COMMIT), while backends are
// terminated, statements time out, serializable transactions conflict and deadlock, and the
// server restarts (immediate); then the history is checked.
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "harness.hpp"
#include "pg_admin.hpp"
#include "tcp_proxy.hpp"
#include "workload.hpp"

using namespace std::chrono_literals;

namespace faults {

BOOST_AUTO_TEST_SUITE(postgres_faults)

BOOST_AUTO_TEST_CASE(workloads_under_cuts_kills_timeouts_conflicts_and_a_restart) {
  const std::string test_url = required_env("FORGEYARD_TEST_PG_URL");
  const int tcp_port = std::stoi(required_env("FORGEYARD_TEST_PG_TCP_PORT"));
  required_env("CLUSTER_DIR");  // the restart goes through scripts/lib/cluster.sh
  const std::string id = pg_run_id();
  // A database of its own, so that the full verify at the end sees this run's rows only (other
  // suites run next to it and leave deliberately broken chains behind). With
  // FORGEYARD_FAULT_EDITION=plpgsql (ctest's faults_plpgsql), the PL/pgSQL edition, installed by
  // storage install as FORGEYARD_TEST_PG_PLPGSQL_OWNER, a role that is not superuser.
  const char* edition = std::getenv("FORGEYARD_FAULT_EDITION");
  const bool plpgsql = edition != nullptr && std::string(edition) == "plpgsql";
  const std::string db = "fy_faults_" + id;
  const std::string owner = plpgsql ? required_env("FORGEYARD_TEST_PG_PLPGSQL_OWNER") : "";
  Admin(test_url).exec("CREATE DATABASE " + db + (plpgsql ? " OWNER " + owner : ""));
  const std::string direct_url = with_database(test_url, db);
  Admin admin(direct_url);
  const std::string user = admin.user();
  if (plpgsql) {
    const auto at = direct_url.find("://") + 3;
    forgeyard::InstallOptions install;
    install.edition = forgeyard::Edition::Plpgsql;
    forgeyard::install_store(direct_url.substr(0, at) + owner + direct_url.substr(direct_url.find('@', at)), install);
  } else {
    admin.exec("CREATE EXTENSION forgeyard");
  }

  TcpProxy proxy(tcp_port);
  const std::string base = "postgresql://" + user + "@127.0.0.1:" + std::to_string(proxy.port()) + "/" + db +
                           "?sslmode=disable&connect_timeout=5&application_name=forgeyard-faults";
  forgeyard::StoreOptions options;
  options.pool.max_connections = 16;
  auto store = forgeyard::open(base, options);
  // Serializable, with a short deadlock_timeout: the pair workers conflict and deadlock for real.
  auto serializable = forgeyard::open(
      base + "&options=-c%20default_transaction_isolation%3Dserializable%20-c%20deadlock_timeout%3D50ms", options);
  // A statement_timeout that a held row lock runs into.
  auto impatient = forgeyard::open(base + "&options=-c%20statement_timeout%3D150", options);

  Names names(id);
  history::Recorder rec(0);
  set_up(*forgeyard::open(direct_url), names, false, [&](const std::string& sql) { admin.exec(sql); });
  Workload w(names, rec, 0);
  Figures f;
  f.backend = plpgsql ? "postgresql (PL/pgSQL edition)" : "postgresql";

  proxy.set_faults({.delay = 0.03, .delay_ms_max = 30, .cut_before = 0.004, .cut_after = 0.004, .cut_commit = 0.03});
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { w.producer(*store, stop); });
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { w.consumer(*store, stop); });
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { w.lease_worker(*store, stop); });
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { w.cas_worker(*store, stop, 0, names.cas_rows); });
  threads.emplace_back([&] { w.cas_worker(*impatient, stop, 0, 1); });
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { w.pair_worker(*serializable, stop); });
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { w.idempotent_worker(*store, stop); });
  threads.emplace_back([&] { w.audit_worker(*store, stop); });
  threads.emplace_back([&] { w.workflow_worker(*store, stop); });

  std::mutex figures_mutex;
  auto count_fault = [&](const std::string& kind) {
    std::lock_guard lock(figures_mutex);
    ++f.faults[kind];
  };
  // Client processes too (every workload in each, through the proxy), SIGKILLed at random and
  // replaced; their histories are streamed to files and merged at the end.
  struct Child {
    pid_t pid;
    std::string history;
    int process;
  };
  const std::string dir = temp_dir("faults-pg");
  std::vector<Child> children, finished;
  int next_process = 1;
  auto spawn = [&] {
    const int p = next_process++;
    Child c{0, dir + "/history-" + std::to_string(p), p};
    c.pid = spawn_self({"--fault-worker", base, id, c.history, std::to_string(p)});
    children.push_back(c);
  };
  spawn();
  spawn();
  threads.emplace_back([&] {
    std::mt19937 rng{std::random_device{}()};
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 + rng() % 1500));
      if (stop) break;
      const std::size_t victim = rng() % children.size();
      kill(children[victim].pid, SIGKILL);
      waitpid(children[victim].pid, nullptr, 0);
      finished.push_back(children[victim]);
      children.erase(children.begin() + static_cast<long>(victim));
      spawn();
      count_fault("sigkill_client_process");
    }
  });
  // Backends of the workload terminated at random points.
  threads.emplace_back([&] {
    Admin killer(direct_url);
    std::mt19937 rng{std::random_device{}()};
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 300));
      try {
        if (killer.exec("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (SELECT pid FROM "
                        "pg_catalog.pg_stat_activity WHERE application_name = 'forgeyard-faults' "
                        "ORDER BY random() LIMIT 1) s") == "1")
          count_fault("pg_terminate_backend");
      } catch (const std::exception&) {
        // The server is restarting.
      }
    }
  });
  // A row lock held past the impatient store's statement_timeout.
  threads.emplace_back([&] {
    Admin locker(direct_url);
    while (!stop) {
      std::this_thread::sleep_for(700ms);
      try {
        locker.exec("BEGIN");
        locker.exec("SELECT 1 FROM " + names.cas_table + " WHERE tenant_id = '" + names.tenant +
                    "' AND id = 0 FOR UPDATE");
        std::this_thread::sleep_for(400ms);
        locker.exec("COMMIT");
        count_fault("row_lock_past_statement_timeout");
      } catch (const std::exception&) {
      }
    }
  });

  const auto seconds = std::chrono::seconds(run_seconds());
  std::this_thread::sleep_for(seconds * 2 / 5);
  // An immediate restart (a crash, recovery at start) in the middle of the run.
  const std::string restart = std::string("bash -c 'source \"") + FORGEYARD_SOURCE_DIR +
                              "/scripts/lib/cluster.sh\" && cluster_pg_ctl restart -m immediate'";
  BOOST_TEST_REQUIRE(std::system(restart.c_str()) == 0);
  count_fault("server_restart_immediate");
  std::this_thread::sleep_for(seconds * 3 / 5);
  stop = true;
  for (auto& t : threads) t.join();
  for (auto& c : children) {
    kill(c.pid, SIGTERM);
    int status = 0;
    waitpid(c.pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    finished.push_back(c);
  }
  proxy.set_faults({});
  for (const auto& [kind, n] : proxy.injected()) f.faults["proxy_" + kind] = n;
  f.errors = w.errors();
  for (const auto& c : finished) {
    auto child_ops = history::Recorder::load(c.history, c.process);
    for (const auto& o : child_ops) {
      if (o.error == "killed")
        ++f.faults["op_in_flight_at_kill"];
      else if (!o.error.empty())
        ++f.errors[o.error];
    }
    rec.merge(child_ops);
  }
  std::filesystem::remove_all(dir);

  auto clean = forgeyard::open(direct_url);
  read_back(*clean, names, w, rec);
  const auto ops = rec.ops();
  f.operations = static_cast<std::int64_t>(ops.size());
  f.reports = history::check_all(ops);
  BOOST_TEST_MESSAGE(f.format());
  std::printf("%s", f.format().c_str());

  BOOST_TEST(f.violations() == 0);
  for (const auto& r : f.reports) BOOST_TEST(r.ops > 0, r.check << " saw no operations");
  // Each fault was injected, and each surfaced as its documented kind.
  for (const char* kind :
       {"proxy_delay", "proxy_cut_before_statement", "proxy_cut_after_statement", "proxy_cut_during_commit",
        "pg_terminate_backend", "server_restart_immediate", "row_lock_past_statement_timeout"})
    BOOST_TEST(f.faults[kind] > 0, "fault " << kind << " never injected");
  auto seen = [&](const std::string& prefix) {
    std::int64_t n = 0;
    for (const auto& [k, v] : f.errors)
      if (k.rfind(prefix, 0) == 0) n += v;
    return n;
  };
  BOOST_TEST(seen("CommitUnknown/08006") > 0);
  BOOST_TEST(seen("Unavailable/") > 0);
  BOOST_TEST(seen("Timeout/57014") > 0);
  BOOST_TEST(seen("SerializationFailure/40001") > 0);
  BOOST_TEST(seen("SerializationFailure/40P01") > 0);
  BOOST_TEST(seen("Internal") == 0);
  BOOST_TEST(seen("exception") == 0);
  const auto s = clean->queues().stats(names.tenant, names.work_queue);
  BOOST_TEST(s.ready + s.in_flight + s.delayed + s.dead == 0);

  // The store itself is consistent after the faults: audit chains, versions, queue counters
  // against the rows, message states, idempotency attempts (`storage verify --full`).
  expect_verified(direct_url, "after the faults");
  store.reset();
  serializable.reset();
  impatient.reset();
  clean.reset();
  Admin(test_url).exec("DROP DATABASE " + db + " WITH (FORCE)");
}

// A batch through the pipeline (enqueue_many: BEGIN, enqueue_batch, COMMIT in one round trip): a
// connection cut once the COMMIT went out is CommitUnknown, and the batch is all or nothing (here
// all: the server got the COMMIT); a cut before the first statement is Unavailable, and nothing.
BOOST_AUTO_TEST_CASE(a_pipeline_cut_during_its_commit_is_commit_unknown_and_all_or_nothing) {
  const std::string test_url = required_env("FORGEYARD_TEST_PG_URL");
  const int tcp_port = std::stoi(required_env("FORGEYARD_TEST_PG_TCP_PORT"));
  Admin admin(test_url);
  const std::string user = admin.user(), db = admin.db(), tenant = "pipeline-" + pg_run_id();
  auto direct = forgeyard::open(test_url);
  direct->queues().create(tenant, "q", {});
  TcpProxy proxy(tcp_port);
  auto through = forgeyard::open("postgresql://" + user + "@127.0.0.1:" + std::to_string(proxy.port()) + "/" + db +
                                 "?sslmode=disable&connect_timeout=5");
  std::vector<forgeyard::OutgoingMessage> batch(5);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].payload = "m" + std::to_string(i);
  batch[3].priority = forgeyard::Priority::Realtime;  // two enqueue_batch statements in the pipeline

  // The batch's error (a batch that went through fails the test).
  const auto refusal = [&] {
    try {
      through->queues().enqueue_many(tenant, "q", batch);
    } catch (const forgeyard::Error& e) {
      return e;
    }
    BOOST_FAIL("the cut pipeline answered");
    throw;  // unreachable
  };
  proxy.set_faults({.cut_commit = 1});
  const forgeyard::Error in_doubt = refusal();
  BOOST_TEST(forgeyard::to_string(in_doubt.kind()) == forgeyard::to_string(forgeyard::ErrorKind::CommitUnknown));
  BOOST_TEST(in_doubt.sqlstate() == "08006");
  BOOST_TEST(proxy.injected()["cut_during_commit"] == 1);
  BOOST_TEST(direct->queues().stats(tenant, "q").ready == 5);  // all of it: the COMMIT had arrived

  proxy.set_faults({.cut_before = 1});
  const forgeyard::Error cut = refusal();
  BOOST_TEST(forgeyard::to_string(cut.kind()) == forgeyard::to_string(forgeyard::ErrorKind::Unavailable));
  BOOST_TEST(direct->queues().stats(tenant, "q").ready == 5);  // none of the second
  proxy.set_faults({});
  BOOST_TEST(through->queues().enqueue_many(tenant, "q", batch).size() == 5u);  // a new connection
  BOOST_TEST(direct->queues().stats(tenant, "q").ready == 10);
  direct->queues().drop(tenant, "q");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace faults
