// Workflows end to end: runs of 10 steps per second through WorkflowWorker, against the same
// work hand-written in SQL in the same run (docs/performance.md#workflows-a-10-step-run-end-to-end).
// The baseline claims a run row with SKIP LOCKED and records each step DBOS's way (look the
// step's output up, else INSERT ... ON CONFLICT DO NOTHING), then marks the run done: no fence,
// no lease, no retries. Each round is sized from a first short one to last about --seconds; the
// two sides alternate, three rounds each, and the medians are reported.
// Usage: workflow_bench [--pg URL] [--threads T] [--seconds S]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "forgeyard/forgeyard.hpp"
#include "forgeyard/workflow_worker.hpp"
#include "harness.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int steps = 10;
const std::string tenant = "bench";

struct Options {
  std::string pg_url, sqlite_dir;
  int threads = 2;
  double seconds = 10;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The client: `runs` runs started in batches of 100, then a worker of `threads` threads until none
// is left; returns runs per second of the worker's part.
double client_round(forgeyard::Store& store, const Options& o, int runs, int round) {
  for (int first = 0; first < runs; first += 100) {
    forgeyard::transact(store, [&](forgeyard::Transaction& tx) {
      for (int i = first; i < std::min(runs, first + 100); ++i)
        tx.workflows().start(tenant, "ten", 1, "r" + std::to_string(round) + "-" + std::to_string(i));
    });
  }
  forgeyard::WorkflowWorkerOptions wo;
  wo.tenant = tenant;
  wo.threads = o.threads;
  wo.stop_when_idle = true;
  wo.idle_min = wo.idle_max = std::chrono::milliseconds(1);
  forgeyard::WorkflowWorker worker(store, wo);
  worker.add("ten", 1, [](forgeyard::WorkflowContext& ctx) {
    for (int s = 0; s < steps; ++s)
      ctx.step("s" + std::to_string(s), [](const forgeyard::StepContext&) { return std::string(R"({"ok":true})"); });
    return std::string("{}");
  });
  const auto start = Clock::now();
  const auto stats = worker.run({});
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  if (stats.completed != static_cast<std::uint64_t>(runs)) {
    std::fprintf(stderr, "workflow_bench: %llu of %d runs completed\n",
                 static_cast<unsigned long long>(stats.completed), runs);
    std::exit(1);
  }
  return runs / secs;
}

// The baseline on PostgreSQL: the same runs as rows, claimed and stepped by hand.
double pg_baseline_round(const Options& o, int runs) {
  {
    bench::Pg setup(o.pg_url);
    setup.exec(
        "SET client_min_messages = warning;"
        "CREATE TABLE IF NOT EXISTS bench_wf_runs (id bigserial PRIMARY KEY, state text NOT NULL, owner text);"
        "CREATE TABLE IF NOT EXISTS bench_wf_steps (run bigint, step int, output jsonb, PRIMARY KEY (run, step));"
        "TRUNCATE bench_wf_runs, bench_wf_steps;");
    setup.exec(
        ("INSERT INTO bench_wf_runs (state) SELECT 'pending' FROM generate_series(1, " + std::to_string(runs) + ")")
            .c_str());
  }
  std::atomic<int> done{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < o.threads; ++t)
    pool.emplace_back([&, t] {
      bench::Pg pg(o.pg_url);
      pg.prepare("claim",
                 "UPDATE bench_wf_runs SET state = 'running', owner = $1 WHERE id = (SELECT id FROM bench_wf_runs"
                 " WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id");
      pg.prepare("look", "SELECT output FROM bench_wf_steps WHERE run = $1 AND step = $2");
      pg.prepare("record", "INSERT INTO bench_wf_steps VALUES ($1, $2, $3) ON CONFLICT DO NOTHING");
      pg.prepare("finish", "UPDATE bench_wf_runs SET state = 'completed' WHERE id = $1");
      const std::string owner = "w" + std::to_string(t);
      for (;;) {
        const std::string id = pg.run("claim", {owner});
        if (id == "0") break;  // no row: the command's count
        for (int s = 0; s < steps; ++s) {
          const std::string step = std::to_string(s);
          if (pg.run("look", {id, step}) == "0") pg.run("record", {id, step, R"({"ok":true})"});
        }
        pg.run("finish", {id});
        ++done;
      }
    });
  for (auto& th : pool) th.join();
  return done / std::chrono::duration<double>(Clock::now() - start).count();
}

// The baseline on SQLite: the same statements in the same file, each in a write transaction.
double sqlite_baseline_round(const Options& o, int runs) {
  const std::string path = o.sqlite_dir + "/baseline.db";
  {
    bench::Lite setup(path);
    setup.exec(
        "CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, owner TEXT);"
        "CREATE TABLE IF NOT EXISTS steps (run INTEGER, step INTEGER, output TEXT, PRIMARY KEY (run, step));"
        "DELETE FROM runs; DELETE FROM steps;");
    setup.exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + std::to_string(runs) +
               ") INSERT INTO runs (state) SELECT 'pending' FROM n");
  }
  std::atomic<int> done{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < o.threads; ++t)
    pool.emplace_back([&, t] {
      bench::Lite db(path);
      sqlite3_stmt* claim = db.prepare(
          "UPDATE runs SET state = 'running', owner = ?1 WHERE id = (SELECT id FROM runs WHERE state = 'pending'"
          " ORDER BY id LIMIT 1) RETURNING id");
      sqlite3_stmt* look = db.prepare("SELECT count(*) FROM steps WHERE run = ?1 AND step = ?2");
      sqlite3_stmt* record = db.prepare("INSERT INTO steps VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING");
      sqlite3_stmt* finish = db.prepare("UPDATE runs SET state = 'completed' WHERE id = ?1");
      const std::string owner = "w" + std::to_string(t);
      for (;;) {
        db.exec("BEGIN IMMEDIATE");
        sqlite3_bind_text(claim, 1, owner.c_str(), -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(claim);
        const std::int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(claim, 0) : 0;
        while (rc == SQLITE_ROW) rc = sqlite3_step(claim);
        sqlite3_reset(claim);
        db.exec("COMMIT");
        if (id == 0) break;
        for (int s = 0; s < steps; ++s) {
          db.exec("BEGIN IMMEDIATE");
          sqlite3_bind_int64(look, 1, id);
          sqlite3_bind_int(look, 2, s);
          if (db.step(look) == 0) {
            sqlite3_bind_int64(record, 1, id);
            sqlite3_bind_int(record, 2, s);
            sqlite3_bind_text(record, 3, R"({"ok":true})", -1, SQLITE_STATIC);
            db.step(record);
          }
          db.exec("COMMIT");
        }
        sqlite3_bind_int64(finish, 1, id);
        db.step(finish);
        ++done;
      }
      for (sqlite3_stmt* s : {claim, look, record, finish}) sqlite3_finalize(s);
    });
  for (auto& th : pool) th.join();
  return done / std::chrono::duration<double>(Clock::now() - start).count();
}

void compare(forgeyard::Store& store, const Options& o, const char* backend,
             const std::function<double(int)>& baseline) {
  // A short first round of each side sizes the rounds to about o.seconds.
  const int client_runs = std::max(50, static_cast<int>(client_round(store, o, 50, 0) * o.seconds));
  const int baseline_runs = std::max(50, static_cast<int>(baseline(50) * o.seconds));
  std::vector<double> client, base;
  for (int round = 1; round <= 3; ++round) {
    client.push_back(client_round(store, o, client_runs, round));
    base.push_back(baseline(baseline_runs));
    std::fprintf(stderr, "  %s round %d: client %.0f runs/s, baseline %.0f runs/s\n", backend, round, client.back(),
                 base.back());
  }
  const double c = median(client), b = median(base);
  std::printf("%-28s %-10s threads=%d  client %8.0f runs/s  baseline %8.0f runs/s  ratio %.2fx\n", "10-step run",
              backend, o.threads, c, b, c / b);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Config c = bench::Config::parse(argc, argv, "workflow_bench");
  Options o;
  o.pg_url = c.pg_url;
  o.sqlite_dir = c.sqlite_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") o.seconds = std::atof(argv[i + 1]);
    if (std::string(argv[i]) == "--threads") o.threads = std::max(1, std::atoi(argv[i + 1]));
  }
  if (!o.pg_url.empty()) {
    bench::Pg raw(o.pg_url);
    raw.exec(
        "DELETE FROM forgeyard.wf_journal WHERE tenant_id = 'bench'; DELETE FROM forgeyard.wf_signals WHERE tenant_id "
        "= 'bench'; DELETE FROM forgeyard.wf_runs WHERE tenant_id = 'bench'");
    forgeyard::StoreOptions so;
    so.pool.max_connections = o.threads * 2 + 1;  // a run's lease keeper has a connection of its own
    auto store = forgeyard::open(o.pg_url, so);
    compare(*store, o, "postgresql", [&](int runs) { return pg_baseline_round(o, runs); });
  }
  auto store = forgeyard::open("sqlite://" + o.sqlite_dir + "/store.db");
  compare(*store, o, "sqlite", [&](int runs) { return sqlite_baseline_round(o, runs); });
  return 0;
}
