// The failover drill (tests/ha/failover.sh starts it): pg_auto_failover runs a monitor and two
// nodes with synchronous replication; the fault workloads (producers with event ids, inbox
// consumers, fenced lease writes, compare-and-set, idempotent commands, audit appends) run through
// one multi-host URL with target_session_attrs=read-write while the primary is SIGKILLed (its
// keeper, postmaster and backends: the machine is gone), the monitor promotes the standby, the old
// primary rejoins as a standby, and a second failover goes back. Then: the history checker finds
// no violation (nothing acknowledged lost or done twice), every fencing value issued after a
// failover is above every one issued before it, the store sees the promotion at once and a
// restore_acknowledge() sticks, and `storage verify --full` finds nothing.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "harness.hpp"
#include "pg_admin.hpp"
#include "workload.hpp"

using namespace std::chrono_literals;

namespace faults {

namespace {

struct Failover {
  std::int64_t killed_us = 0;    // before the SIGKILL
  std::int64_t promoted_us = 0;  // the new primary took writes
};

// The largest value completed before `at` must stay below the smallest invoked after `after`,
// per key (lease epochs per resource, audit seqs per tenant, attempts per message) or over all
// keys (claim tokens come from one sequence).
void expect_above(const std::vector<history::Op>& ops, const std::string& kind, const std::string& field, bool per_key,
                  const Failover& f, const std::string& what) {
  std::map<std::string, std::int64_t> before, after;
  for (const auto& o : ops) {
    if (o.kind != kind || o.outcome != history::Outcome::Ok || !o.result.contains(field)) continue;
    if (kind == "acquire" && o.res("acquired") != 1) continue;
    const std::string key = per_key ? (kind == "claim" ? std::to_string(o.res("msg_id")) : o.key) : "";
    const std::int64_t v = o.res(field);
    if (o.completed_us < f.killed_us) before[key] = std::max(before[key], v);
    if (o.invoked_us > f.promoted_us) after[key] = after.contains(key) ? std::min(after[key], v) : v;
  }
  int compared = 0;
  for (const auto& [key, low] : after) {
    auto b = before.find(key);
    if (b == before.end()) continue;
    ++compared;
    BOOST_TEST(low > b->second,
               what << " " << key << ": " << low << " issued after the failover, " << b->second << " before it");
  }
  std::printf("  %s: %d keys compared across the failover\n", what.c_str(), compared);
  if (!per_key || kind != "claim") BOOST_TEST(compared > 0, what << ": nothing to compare across the failover");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ha_failover)

BOOST_AUTO_TEST_CASE(two_failovers_lose_no_acknowledged_work_and_no_fence_goes_back) {
  // postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/DB?target_session_attrs=read-write
  const std::string url = required_env("FORGEYARD_TEST_HA_URL");
  // tests/ha/failover.sh's control command: kill-primary, wait-primary, rejoin.
  const std::string control = required_env("FORGEYARD_TEST_HA_CONTROL");
  auto step = [&](const std::string& what) {
    BOOST_TEST_REQUIRE(std::system((control + " " + what).c_str()) == 0, control << " " << what << " failed");
  };
  Admin admin(url, 30s);  // reconnects through the multi-host URL: always the primary
  const std::string id = pg_run_id();
  forgeyard::StoreOptions options;
  options.pool.max_connections = 12;
  auto store = forgeyard::open(url, options);
  Names names(id);
  history::Recorder rec(0);
  set_up(*store, names, false, [&](const std::string& sql) { admin.exec(sql); });
  Workload w(names, rec, 0);
  w.set_unavailable_backoff(100);

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  // A failed step ends the test with the workers stopped and joined, not with std::terminate.
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{stop, threads};
  // One of each, two consumers: the drill runs beside the test command's last builds, so its
  // load is what a failover needs to meet, not the most this machine can take.
  threads.emplace_back([&] { w.producer(*store, stop); });
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { w.consumer(*store, stop); });
  threads.emplace_back([&] { w.lease_worker(*store, stop); });
  threads.emplace_back([&] { w.cas_worker(*store, stop, 0, names.cas_rows); });
  threads.emplace_back([&] { w.idempotent_worker(*store, stop); });
  threads.emplace_back([&] { w.audit_worker(*store, stop); });
  threads.emplace_back([&] { w.workflow_worker(*store, stop); });

  // The store sees a promotion at once (not at the new primary's first checkpoint), and an
  // acknowledgement of it sticks across that checkpoint.
  auto acknowledge = [&](const char* which) {
    const std::string state = admin.exec("SELECT state || ': ' || detail FROM forgeyard.restore_status()");
    BOOST_TEST(state.starts_with("suspected"), which << ": restore_status right after the promotion is " << state);
    admin.exec("SELECT forgeyard.restore_acknowledge()");
    admin.exec("CHECKPOINT");
    BOOST_TEST(admin.exec("SELECT state FROM forgeyard.restore_status()") == "ok",
               which << ": the acknowledgement did not stick across the checkpoint");
  };
  std::vector<Failover> failovers;
  auto fail_over = [&](const char* which) {
    Failover f;
    f.killed_us = history::now_us();
    step("kill-primary");
    step("wait-primary");
    f.promoted_us = history::now_us();
    acknowledge(which);
    std::printf("%s: writes again %.1f s after the SIGKILL\n", which,
                static_cast<double>(f.promoted_us - f.killed_us) / 1e6);
    failovers.push_back(f);
  };
  std::this_thread::sleep_for(4s);
  fail_over("failover 1");
  std::this_thread::sleep_for(3s);
  step("rejoin");  // the old primary, rewound, follows the new one
  std::this_thread::sleep_for(2s);
  fail_over("failover 2 (back)");
  std::this_thread::sleep_for(3s);
  stop = true;
  for (auto& t : threads) t.join();
  step("rejoin");

  auto clean = forgeyard::open(url);
  read_back(*clean, names, w, rec);
  const auto ops = rec.ops();
  Figures fig;
  fig.backend = "postgresql, pg_auto_failover";
  fig.operations = static_cast<std::int64_t>(ops.size());
  fig.faults["failover"] = static_cast<std::int64_t>(failovers.size());
  fig.errors = w.errors();
  fig.reports = history::check_all(ops);
  std::printf("%s", fig.format().c_str());
  BOOST_TEST(fig.violations() == 0);
  for (const auto& r : fig.reports) BOOST_TEST(r.ops > 0, r.check << " saw no operations");
  for (std::size_t i = 0; i < failovers.size(); ++i) {
    std::printf("fencing values across failover %zu:\n", i + 1);
    expect_above(ops, "acquire", "epoch", true, failovers[i], "lease epoch of resource");
    expect_above(ops, "claim", "token", false, failovers[i], "claim token");
    expect_above(ops, "claim", "attempt", true, failovers[i], "attempt of message");
    expect_above(ops, "audit_append", "seq", true, failovers[i], "audit seq of tenant");
  }
  // Work went on after each failover.
  for (const auto& f : failovers) {
    std::int64_t after = 0;
    for (const auto& o : ops)
      if (o.kind == "consume" && o.outcome == history::Outcome::Ok && o.invoked_us > f.promoted_us) ++after;
    BOOST_TEST(after > 0, "no delivery was acked after a failover");
  }
  const auto s = clean->queues().stats(names.tenant, names.work_queue);
  BOOST_TEST(s.ready + s.in_flight + s.delayed + s.dead == 0);
  expect_verified(url, "after the failovers");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace faults
