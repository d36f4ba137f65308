// Durable workflows (docs/workflows.md): the same answers on every backend for starts, claims,
// the fenced journal, replay, nondeterminism, failures, park, retry, cancel, deadlines and
// takeovers. Time is the test clock; nothing sleeps.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::StepFailure;
using forgeyard::unix_usecs;

namespace {

// 2030-01-02T01:00:00.000000Z
std::string iso_utc(forgeyard::TimePoint t) {
  const std::int64_t usecs = forgeyard::unix_usecs(t);
  const std::time_t seconds = static_cast<std::time_t>(usecs / 1000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(usecs % 1000000));
  return buf;
}

// 2030-01-02T01:00:00Z as a time point.
forgeyard::TimePoint utc(const char* iso) {
  std::tm tm{};
  std::sscanf(iso, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return forgeyard::from_unix_usecs(static_cast<std::int64_t>(timegm(&tm)) * 1000000);
}

// The queue a definition's runs are handed out through.
std::string definition_queue(const std::string& workflow, int version) {
  return "_wf." + workflow + "@" + std::to_string(version);
}

// The retry policy is the definition queue's (queue_alter on PostgreSQL; the client has no
// alter): an UPDATE of that queue's row setting `set`, in either backend's catalog.
std::string alter_definition_queue(bool postgres, const std::string& tenant, const std::string& workflow,
                                   const std::string& set) {
  return std::string("UPDATE ") + (postgres ? "forgeyard." : "") + "queues SET " + set + " WHERE tenant_id = '" +
         tenant + "' AND queue = '" + definition_queue(workflow, 1) + "'";
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(workflows, conformance::Backend)

BOOST_AUTO_TEST_CASE(a_start_is_idempotent_by_run_key_and_commits_with_the_callers_transaction) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "order-1", R"({"sku": "tea", "n": 2})");
  BOOST_TEST(wf.start(tenant, "order", 1, "order-1", R"({"n":2,"sku":"tea"})") == id);
  FY_CHECK_ERROR(wf.start(tenant, "order", 1, "order-1", R"({"sku": "coffee"})"), ErrorKind::IdempotencyMismatch,
                 "FY011", "run_key \"order-1\" already started run " + id + " of order@1 with other input");
  FY_CHECK_ERROR(wf.start(tenant, "order", 2, "order-1", R"({"sku": "tea", "n": 2})"), ErrorKind::IdempotencyMismatch,
                 "FY011");
  const auto status = wf.status(tenant, id);
  BOOST_TEST(status.state == "pending");
  BOOST_TEST(status.workflow == "order");
  BOOST_TEST(status.version == 1);
  BOOST_TEST(status.epoch == 0);
  BOOST_TEST(!status.owner);
  BOOST_TEST(store->queues().stats(tenant, definition_queue("order", 1)).ready == 1);

  {  // rolled back: no run, no message
    auto tx = store->begin();
    tx->workflows().start(tenant, "order", 1, "order-2", "{}");
    tx->rollback();
  }
  BOOST_TEST(store->queues().stats(tenant, definition_queue("order", 1)).ready == 1);
  {  // committed with the caller's own work
    auto tx = store->begin();
    const std::string second = tx->workflows().start(tenant, "order", 1, "order-2", "{}");
    tx->commit();
    BOOST_TEST(wf.status(tenant, second).state == "pending");
  }
  BOOST_TEST(store->queues().stats(tenant, definition_queue("order", 1)).ready == 2);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_with_the_same_errors) {
  auto& wf = store->workflows();
  FY_CHECK_ERROR(wf.start(tenant, "order", 0, "k", "{}"), ErrorKind::InvalidArgument, "22023",
                 "version must be at least 1, not 0");
  FY_CHECK_ERROR(wf.start(tenant, std::string(101, 'w'), 1, "k", "{}"), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(wf.start(tenant, "order", 1, "", "{}"), ErrorKind::InvalidArgument, "22023",
                 "run_key must not be empty");
  FY_CHECK_ERROR(wf.start(tenant, "order", 1, "k", "{not json"), ErrorKind::InvalidArgument, "22023");
  forgeyard::WorkflowStartOptions unknown_parent;
  unknown_parent.parent = "00000000-0000-4000-8000-000000000001";
  FY_CHECK_ERROR(wf.start(tenant, "order", 1, "k", "{}", unknown_parent), ErrorKind::NotFound, "42704",
                 "parent workflow run 00000000-0000-4000-8000-000000000001 not found for tenant \"" + tenant + "\"");
  forgeyard::WorkflowStartOptions bad_deadline;
  bad_deadline.deadline = forgeyard::Duration(-1);
  FY_CHECK_ERROR(wf.start(tenant, "order", 1, "k", "{}", bad_deadline), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(wf.claim(tenant, "w", {"order"}), ErrorKind::InvalidArgument, "22023",
                 "definitions must be 'workflow@version' with a version of at least 1, not 'order'");
  FY_CHECK_ERROR(wf.claim(tenant, "w", {"order@0"}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(wf.claim(tenant, "w", {}), ErrorKind::InvalidArgument, "22023",
                 "definitions must name at least one 'workflow@version'");
  FY_CHECK_ERROR(wf.claim(tenant, "w", {"order@1"}, 101), ErrorKind::InvalidArgument, "22023",
                 "max_runs must be between 1 and 100");
  FY_CHECK_ERROR(wf.status(tenant, "not-a-uuid"), ErrorKind::InvalidArgument, "22P02",
                 "invalid input syntax for type uuid: \"not-a-uuid\"");
  const std::string missing = "00000000-0000-4000-8000-0000000000ff";
  FY_CHECK_ERROR(wf.status(tenant, missing), ErrorKind::NotFound, "42704",
                 "workflow run " + missing + " not found for tenant \"" + tenant + "\"");
  FY_CHECK_ERROR(wf.journal(tenant, missing), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(wf.step(tenant, missing, 1, "s"), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(wf.cancel(tenant, missing, "x"), ErrorKind::NotFound, "42704");
  // A definition's queue belongs to the workflows.
  FY_CHECK_ERROR(store->queues().create(tenant, definition_queue("order", 1), {}), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(a_worker_gets_only_the_definitions_it_declared_and_one_owner_at_a_time) {
  auto& wf = store->workflows();
  const std::string v1 = wf.start(tenant, "order", 1, "a", R"({"x": [1, 2.50, "é"]})");
  const std::string v2 = wf.start(tenant, "order", 2, "b", "{}");
  BOOST_TEST(wf.claim(tenant, "w0", {"invoice@1"}).empty());
  const auto claimed = wf.claim(tenant, "w1", {"order@1"}, 10, 60s);
  BOOST_TEST_REQUIRE(claimed.size() == 1u);
  BOOST_TEST(claimed[0].run_id == v1);
  BOOST_TEST(claimed[0].workflow == "order");
  BOOST_TEST(claimed[0].version == 1);
  BOOST_TEST(claimed[0].state == "running");
  BOOST_TEST(claimed[0].input == R"({"x":[1,2.5,"é"]})");  // canonical on both backends
  BOOST_TEST(claimed[0].epoch > 0);
  BOOST_TEST(wf.claim(tenant, "w2", {"order@1"}).empty());
  const auto other = wf.claim(tenant, "w2", {"order@1", "order@2", "order@2"}, 10);
  BOOST_TEST_REQUIRE(other.size() == 1u);
  BOOST_TEST(other[0].run_id == v2);
  BOOST_TEST(other[0].epoch > claimed[0].epoch);
  const auto status = wf.status(tenant, v1);
  BOOST_TEST(status.state == "running");
  BOOST_TEST((status.owner == std::optional<std::string>("w1")));
  BOOST_TEST(status.epoch == claimed[0].epoch);
}

BOOST_AUTO_TEST_CASE(steps_replay_after_a_takeover_and_a_stale_owner_changes_nothing) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "k", "{}");
  const auto first = wf.claim(tenant, "w1", {"order@1"}, 1, 60s).at(0);
  const auto reserve = wf.step(tenant, id, first.epoch, "reserve");
  BOOST_TEST(!reserve.done);
  BOOST_TEST(reserve.idempotency_key == id + ":1:reserve");
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "charge", "{}"), ErrorKind::InvalidArgument, "22023",
                 "workflow_step_complete for step \"charge\", but the run's current step is \"reserve\"");
  wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved": 2})", "release");
  wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved":2})", "release");  // the same: a no-op
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved": 3})", "release"),
                 ErrorKind::InvalidArgument, "22023",
                 "step \"reserve\" of workflow run " + id + " at position 1 is recorded already, with another result");
  {  // a step call that rolls back takes its cursor move with it
    auto tx = store->begin();
    tx->workflows().step(tenant, id, first.epoch, "charge");
    tx->rollback();
  }
  BOOST_TEST(wf.step(tenant, id, first.epoch, "charge").idempotency_key == id + ":2:charge");

  // The owner's lease runs out; another worker takes the run over and replays.
  clock.advance(61s);
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "charge", "{}"), ErrorKind::StaleFence, "FY001",
                 "workflow run " + id + ": the lease of epoch " + std::to_string(first.epoch) + " ran out");
  const auto second = wf.claim(tenant, "w2", {"order@1"}, 1, 60s).at(0);
  BOOST_TEST(second.epoch > first.epoch);
  const auto replayed = wf.step(tenant, id, second.epoch, "reserve");
  BOOST_TEST(replayed.done);
  BOOST_TEST((replayed.result == std::optional<std::string>(R"({"reserved":2})")));
  BOOST_TEST(replayed.idempotency_key == reserve.idempotency_key);
  BOOST_TEST(!wf.step(tenant, id, second.epoch, "charge").done);
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "charge", R"({"paid": false})"), ErrorKind::StaleFence,
                 "FY001",
                 "workflow run " + id + ": epoch " + std::to_string(first.epoch) + " is not the run's current epoch " +
                     std::to_string(second.epoch));
  FY_CHECK_ERROR(wf.complete(tenant, id, first.epoch, "{}"), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(wf.extend(tenant, id, first.epoch, 60s), ErrorKind::StaleFence, "FY001");
  wf.step_complete(tenant, id, second.epoch, "charge", R"({"paid": true})");
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST(journal[0].step == "reserve");
  BOOST_TEST(journal[0].epoch == first.epoch);
  BOOST_TEST((journal[0].compensation == std::optional<std::string>("release")));
  BOOST_TEST((journal[1].result == std::optional<std::string>(R"({"paid":true})")));
  BOOST_TEST(journal[1].epoch == second.epoch);
  const auto status = wf.status(tenant, id);
  BOOST_TEST((status.owner == std::optional<std::string>("w2")));

  BOOST_TEST(unix_usecs(wf.extend(tenant, id, second.epoch, 90s)) == unix_usecs(clock.now() + 90s));
  wf.complete(tenant, id, second.epoch, R"({"shipped": true})");
  const auto done = wf.status(tenant, id);
  BOOST_TEST(done.state == "completed");
  BOOST_TEST((done.result == std::optional<std::string>(R"({"shipped":true})")));
  FY_CHECK_ERROR(wf.step(tenant, id, second.epoch, "more"), ErrorKind::StaleFence, "FY001",
                 "workflow run " + id + " is completed, not running under epoch " + std::to_string(second.epoch));
  BOOST_TEST(store->queues().stats(tenant, definition_queue("order", 1)).in_flight == 0);
  BOOST_TEST(!wf.cancel(tenant, id, "late"));
}

// The caller may name each step call's position (WorkflowWorker does): the same answers as the
// epoch's cursor gives, the journal kept contiguous, and on PostgreSQL a step call that only reads
// takes no transaction id, so its commit has nothing to wait for.
BOOST_AUTO_TEST_CASE(steps_named_by_position_replay_fail_and_keep_the_journal_contiguous) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "k", "{}");
  const auto first = wf.claim(tenant, "w1", {"order@1"}, 1, 60s).at(0);
  const auto reserve = wf.step(tenant, id, first.epoch, "reserve", std::nullopt, 1);
  BOOST_TEST(!reserve.done);
  BOOST_TEST(reserve.idempotency_key == id + ":1:reserve");
  FY_CHECK_ERROR(wf.step(tenant, id, first.epoch, "charge", std::nullopt, 2), ErrorKind::InvalidArgument, "22023",
                 "workflow_step at position 2 of workflow run " + id + ", but the step at position 1 is not recorded");
  FY_CHECK_ERROR(wf.step(tenant, id, first.epoch, "reserve", std::nullopt, 0), ErrorKind::InvalidArgument, "22023",
                 "position must be 1 or more");
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "charge", "{}", std::nullopt, 2), ErrorKind::InvalidArgument,
                 "22023");
  wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved": 2})", "release", 1);
  wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved":2})", "release", 1);  // the same: a no-op
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "refund", "{}", std::nullopt, 1), ErrorKind::Nondeterminism,
                 "FY060");
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "reserve", R"({"reserved": 2})"), ErrorKind::InvalidArgument,
                 "22023", "workflow_step_complete for step \"reserve\", but the run's current step is none");
  const auto replayed = wf.step(tenant, id, first.epoch, "reserve", std::nullopt, 1);
  BOOST_TEST(replayed.done);
  BOOST_TEST((replayed.result == std::optional<std::string>(R"({"reserved":2})")));
  if (is_postgres()) {
    conformance::PgSession conn(url);
    auto value = [&](const std::string& sql) { return conn.value(sql); };
    const std::string call = "forgeyard.workflow_step('" + tenant + "', '" + id + "', " + std::to_string(first.epoch);
    value("BEGIN");
    BOOST_TEST(value("SELECT status FROM " + call + ", 'reserve', NULL, 1)") == "done");
    BOOST_TEST(value("SELECT status FROM " + call + ", 'charge', NULL, 2)") == "run");
    BOOST_TEST(value("SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NULL") == "t");  // nothing written
    value("COMMIT");
    value("BEGIN");
    BOOST_TEST(value("SELECT status FROM " + call + ", 'reserve')") == "done");  // by the cursor: it moves
    BOOST_TEST(value("SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NULL") == "f");
    value("ROLLBACK");
  }
  BOOST_TEST(!wf.step(tenant, id, first.epoch, "charge", std::nullopt, 2).done);
  const auto declined = wf.step_fail(tenant, id, first.epoch, "charge", "declined", true, 2);
  BOOST_TEST((declined == StepFailure::Failed));
  BOOST_TEST(wf.status(tenant, id).state == "compensating");
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST(journal[0].step == "reserve");
  BOOST_TEST(journal[1].step == "charge");
  BOOST_TEST(journal[1].status == "failed");
  BOOST_TEST((journal[1].error == std::optional<std::string>("declined")));

  // A sleep and a wait by position, on another run: the wait's signal came first.
  // (The first run is compensating now: "reserve" named a compensation.)
  const std::string other = wf.start(tenant, "notify", 1, "k2", "{}");
  const auto owner = wf.claim(tenant, "w1", {"notify@1"}, 1, 60s).at(0);
  BOOST_TEST_REQUIRE(owner.run_id == other);
  BOOST_TEST(wf.signal(tenant, other, "go", R"({"k": 1})"));
  const auto got = wf.wait_signal(tenant, other, owner.epoch, "wait", "go", 1h, 1);
  BOOST_TEST((got.status == forgeyard::SignalWait::Status::Received));
  BOOST_TEST((got.payload == std::optional<std::string>(R"({"k":1})")));
  BOOST_TEST(!wf.step(tenant, other, owner.epoch, "nap", std::nullopt, 2).done);
  wf.sleep_for(tenant, other, owner.epoch, "nap", 10s, 2);
  BOOST_TEST(wf.status(tenant, other).state == "sleeping");
  clock.advance(11s);
  const auto woken = wf.claim(tenant, "w2", {"notify@1"}, 1, 60s).at(0);
  BOOST_TEST((wf.wait_signal(tenant, other, woken.epoch, "wait", "go", 1h, 1).payload ==
              std::optional<std::string>(R"({"k":1})")));
  BOOST_TEST(wf.step(tenant, other, woken.epoch, "nap", std::nullopt, 2).done);
  BOOST_TEST(!wf.step(tenant, other, woken.epoch, "ship", std::nullopt, 3).done);
}

BOOST_AUTO_TEST_CASE(another_step_at_a_journaled_position_is_nondeterminism_and_parks_the_run) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "k", "{}");
  const auto first = wf.claim(tenant, "w1", {"order@1"}, 1, 60s).at(0);
  wf.step(tenant, id, first.epoch, "reserve");
  wf.step_complete(tenant, id, first.epoch, "reserve", "1");
  clock.advance(61s);
  const auto second = wf.claim(tenant, "w2", {"order@1"}, 1, 60s).at(0);
  const forgeyard::Error e = conformance::expect_error([&] { wf.step(tenant, id, second.epoch, "refund"); });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "Nondeterminism");
  BOOST_TEST(e.sqlstate() == "FY060");
  BOOST_TEST(std::string(e.what()) ==
             "workflow run " + id + " called step \"refund\" at position 1, where its journal has step \"reserve\"");
  BOOST_TEST(!e.retryable());
  wf.park(tenant, id, second.epoch, "FY060 at position 1");
  const auto parked = wf.status(tenant, id);
  BOOST_TEST(parked.state == "parked");
  BOOST_TEST((parked.error == std::optional<std::string>("FY060 at position 1")));
  clock.advance(1h);
  BOOST_TEST(wf.claim(tenant, "w3", {"order@1"}).empty());
  BOOST_TEST(wf.retry(tenant, id));
  BOOST_TEST(!wf.retry(tenant, id));
  const auto third = wf.claim(tenant, "w3", {"order@1"}, 1, 60s);
  BOOST_TEST_REQUIRE(third.size() == 1u);
  BOOST_TEST(wf.step(tenant, id, third[0].epoch, "reserve").done);
}

BOOST_AUTO_TEST_CASE(a_failing_step_is_retried_by_the_queue_then_fails_the_run) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "mail", 1, "k", "{}");
  exec_sql(alter_definition_queue(is_postgres(), tenant, "mail",
                                  "max_attempts = 2, backoff_base_usecs = 1000000, backoff_max_usecs = 1000000"));
  const auto first = wf.claim(tenant, "w1", {"mail@1"}).at(0);
  wf.step(tenant, id, first.epoch, "send");
  BOOST_TEST((wf.step_fail(tenant, id, first.epoch, "send", "timeout") == StepFailure::Retry));
  BOOST_TEST(wf.status(tenant, id).state == "pending");
  FY_CHECK_ERROR(wf.step(tenant, id, first.epoch, "send"), ErrorKind::StaleFence, "FY001");
  clock.advance(2s);
  const auto second = wf.claim(tenant, "w1", {"mail@1"}).at(0);
  BOOST_TEST(!wf.step(tenant, id, second.epoch, "send").done);
  BOOST_TEST((wf.step_fail(tenant, id, second.epoch, "send", "timeout again") == StepFailure::Failed));
  const auto failed = wf.status(tenant, id);
  BOOST_TEST(failed.state == "failed");
  BOOST_TEST((failed.error == std::optional<std::string>("step \"send\" failed: timeout again")));
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 1u);
  BOOST_TEST(journal[0].status == "failed");
  BOOST_TEST(journal[0].attempts == 2);
  BOOST_TEST((journal[0].error == std::optional<std::string>("timeout again")));
  BOOST_TEST(store->queues().stats(tenant, definition_queue("mail", 1)).dead == 1);

  // Retried by an operator, it runs the failed step again and can finish.
  BOOST_TEST(wf.retry(tenant, id));
  const auto third = wf.claim(tenant, "w2", {"mail@1"}).at(0);
  BOOST_TEST(!wf.step(tenant, id, third.epoch, "send").done);
  wf.step_complete(tenant, id, third.epoch, "send", R"({"sent": true})");
  FY_CHECK_ERROR(wf.step_fail(tenant, id, third.epoch, "send", "late"), ErrorKind::InvalidArgument, "22023",
                 "step \"send\" of workflow run " + id + " at position 1 is recorded as done; it cannot fail");
  wf.complete(tenant, id, third.epoch, "null");
  BOOST_TEST(wf.status(tenant, id).state == "completed");

  const std::string doomed = wf.start(tenant, "mail", 1, "k2", "{}");
  const auto d = wf.claim(tenant, "w1", {"mail@1"}).at(0);
  wf.step(tenant, doomed, d.epoch, "send");
  BOOST_TEST((wf.step_fail(tenant, doomed, d.epoch, "send", "no such address", true) == StepFailure::Failed));
  BOOST_TEST(wf.status(tenant, doomed).state == "failed");
}

BOOST_AUTO_TEST_CASE(cancel_fail_and_deadlines_end_runs) {
  auto& wf = store->workflows();
  const std::string running = wf.start(tenant, "job", 1, "running", "{}");
  const auto owned = wf.claim(tenant, "w1", {"job@1"}).at(0);
  BOOST_TEST(wf.cancel(tenant, running, "customer asked"));
  BOOST_TEST(!wf.cancel(tenant, running, "again"));
  FY_CHECK_ERROR(wf.step(tenant, running, owned.epoch, "x"), ErrorKind::StaleFence, "FY001");
  const auto cancelled = wf.status(tenant, running);
  BOOST_TEST(cancelled.state == "cancelled");
  BOOST_TEST((cancelled.error == std::optional<std::string>("customer asked")));

  forgeyard::WorkflowStartOptions soon;
  soon.deadline = 60s;
  const std::string late = wf.start(tenant, "job", 1, "late", "{}", soon);
  clock.advance(2min);
  // The cancelled run's message (visible again) and the late run are both let go.
  BOOST_TEST(wf.claim(tenant, "w1", {"job@1"}, 10).empty());
  BOOST_TEST(wf.status(tenant, late).state == "timed_out");
  const auto stats = store->queues().stats(tenant, definition_queue("job", 1));
  BOOST_TEST(stats.ready + stats.in_flight + stats.delayed == 0);

  const std::string failing = wf.start(tenant, "job", 1, "failing", "{}");
  const auto f = wf.claim(tenant, "w1", {"job@1"}).at(0);
  wf.fail(tenant, failing, f.epoch, "gave up");
  BOOST_TEST(wf.status(tenant, failing).state == "failed");
  BOOST_TEST((wf.status(tenant, failing).error == std::optional<std::string>("gave up")));
}

BOOST_AUTO_TEST_CASE(list_shows_runs_by_state_most_recently_changed_first) {
  auto& wf = store->workflows();
  const std::string first = wf.start(tenant, "order", 1, "a");
  clock.advance(1s);
  const std::string second = wf.start(tenant, "order", 1, "b");
  clock.advance(1s);
  const auto owned = wf.claim(tenant, "w1", {"order@1"}).at(0);  // the older one, a
  BOOST_TEST(owned.run_id == first);
  const auto all = wf.list(tenant);
  BOOST_TEST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].run_id == first);
  BOOST_TEST(all[0].state == "running");
  BOOST_TEST((all[0].owner == std::optional<std::string>("w1")));
  BOOST_TEST(all[0].run_key == "a");
  BOOST_TEST(all[1].run_id == second);
  const auto pending = wf.list(tenant, std::string("pending"));
  BOOST_TEST_REQUIRE(pending.size() == 1u);
  BOOST_TEST(pending[0].run_id == second);
  BOOST_TEST(wf.list(tenant, std::nullopt, 1).size() == 1u);
  FY_CHECK_ERROR(wf.list(tenant, std::string("done")), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(wf.list(tenant, std::nullopt, 0), ErrorKind::InvalidArgument, "22023",
                 "max_runs must be between 1 and 1000");
}

// Reading runs never waits for a writer: status, journal and list from another store, while a
// transaction holds the write side (on SQLite: its write turn), answer at once with what was
// committed (an operator's `workflow show` beside busy workers).
BOOST_AUTO_TEST_CASE(reads_of_runs_do_not_wait_for_an_open_write) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "committed", "{}");
  const auto other = open_another();
  auto tx = store->begin();
  tx->workflows().start(tenant, "order", 1, "open", "{}");
  BOOST_TEST(other->workflows().status(tenant, id).state == "pending");
  BOOST_TEST(other->workflows().journal(tenant, id).empty());
  const auto listed = other->workflows().list(tenant);
  BOOST_TEST_REQUIRE(listed.size() == 1u);  // not the run of the open transaction
  BOOST_TEST(listed[0].run_id == id);
  tx->rollback();
  BOOST_TEST(other->workflows().list(tenant).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_tenant_cannot_reach_another_tenants_runs) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "order", 1, "k", "{}");
  const std::string other = unique("other-tenant");
  FY_CHECK_ERROR(wf.status(other, id), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(wf.journal(other, id), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(wf.cancel(other, id, "x"), ErrorKind::NotFound, "42704");
  BOOST_TEST(wf.claim(other, "w", {"order@1"}).empty());
  BOOST_TEST(wf.list(other).empty());
  BOOST_TEST(wf.start(other, "order", 1, "k", "{}") != id);
}

BOOST_AUTO_TEST_CASE(the_cli_starts_lists_shows_cancels_and_retries_runs) {
  const std::string out = (std::filesystem::temp_directory_path() / unique("workflow-cli")).string();
  auto cli = [&](const std::vector<std::string>& args) {
    const int code = run_cli(args, out);
    return std::pair<int, std::string>(code, conformance::slurp(out));
  };
  const auto [started, start_out] = cli({"workflow", "start", tenant, "order", "1", "k", "--input", R"({"a": 1})"});
  BOOST_TEST(started == 0);
  BOOST_TEST_REQUIRE(start_out.rfind("run_id=", 0) == 0u);
  const std::string id = start_out.substr(7, 36);
  BOOST_TEST(store->workflows().status(tenant, id).state == "pending");
  BOOST_TEST(cli({"workflow", "start", tenant, "order", "1", "k", "--input", R"({"a":1})"}).second == start_out);
  BOOST_TEST(cli({"workflow", "start", tenant, "order", "1", "k", "--input", R"({"a": 2})"}).first == 4);

  const auto [listed, list_out] = cli({"workflow", "list", tenant, "--json"});
  BOOST_TEST(listed == 0);
  BOOST_TEST(list_out.find(R"("run_id":")" + id +
                           R"(","run_key":"k","workflow":"order","version":1,"state":"pending")") != std::string::npos,
             list_out);

  clock.advance(1min);  // the CLI enqueued by the real clock, a little after the test clock's now
  const auto owned = store->workflows().claim(tenant, "w1", {"order@1"}, 1, 1h).at(0);
  store->workflows().step(tenant, id, owned.epoch, "reserve");
  store->workflows().step_complete(tenant, id, owned.epoch, "reserve", R"({"n": 2})");
  const auto [shown, show_out] = cli({"workflow", "show", tenant, id});
  BOOST_TEST(shown == 0);
  BOOST_TEST(show_out.find("state=running\nworkflow=order@1\nowner=w1\n") != std::string::npos, show_out);
  BOOST_TEST(show_out.find(R"(step.1=reserve status=done attempts=1 epoch=)" + std::to_string(owned.epoch) +
                           R"( result={"n":2} error=)") != std::string::npos,
             show_out);
  const auto [shown_json, json_out] = cli({"workflow", "show", tenant, id, "--json"});
  BOOST_TEST(shown_json == 0);
  BOOST_TEST(
      json_out.find(R"("journal":[{"position":1,"step":"reserve","status":"done","attempts":1)") != std::string::npos,
      json_out);
  BOOST_TEST(json_out.find(R"("result":{"n":2})") != std::string::npos, json_out);

  BOOST_TEST(cli({"workflow", "retry", tenant, id}).second == "retried=false\n");
  const std::vector<std::string> send{"workflow",
                                      "signal",
                                      tenant,
                                      id,
                                      "approve",
                                      "--payload",
                                      R"({"by": "ann"})",
                                      "--id",
                                      "00000000-0000-4000-8000-0000000000a1"};
  BOOST_TEST((cli(send) == std::pair<int, std::string>(0, "sent=true\n")));
  BOOST_TEST((cli(send) == std::pair<int, std::string>(1, "sent=false\n")));  // the same id again
  const auto received = store->workflows().wait_signal(tenant, id, owned.epoch, "approval", "approve", 1h);
  BOOST_TEST((received.status == forgeyard::SignalWait::Status::Received));
  BOOST_TEST((received.payload == std::optional<std::string>(R"({"by":"ann"})")));
  const auto [cancelled, cancel_out] = cli({"workflow", "cancel", tenant, id, "--reason", "operator"});
  BOOST_TEST(cancelled == 0);
  BOOST_TEST(cancel_out == "cancelled=true\n");
  BOOST_TEST(cli({"workflow", "cancel", tenant, id}).first == 1);
  BOOST_TEST(store->workflows().status(tenant, id).state == "cancelled");
  BOOST_TEST(cli({"workflow", "list", tenant, "--state", "cancelled"}).second.find("runs=1\n") != std::string::npos);
  BOOST_TEST(cli({"workflow", "show", tenant, "00000000-0000-4000-8000-0000000000ff"}).first == 4);
  BOOST_TEST(cli({"workflow", "list", tenant, "--state", "done"}).first == 4);
  std::filesystem::remove(out);
}

// storage stats and the metrics count a tenant's runs by definition and state.
BOOST_AUTO_TEST_CASE(stats_and_metrics_count_runs_by_definition_and_state) {
  auto& wf = store->workflows();
  wf.start(tenant, "order", 1, "s1");
  wf.start(tenant, "order", 1, "s2");
  wf.start(tenant, "order", 2, "s3");
  BOOST_TEST_REQUIRE(wf.claim(tenant, "w", {"order@1"}).size() == 1u);
  std::map<std::string, std::int64_t> mine;
  const forgeyard::StoreStats stats = store->stats();
  for (const auto& w : stats.workflows)
    if (w.tenant == tenant) mine[w.definition + " " + w.state] = w.runs;
  const std::map<std::string, std::int64_t> expected{
      {"order@1 pending", 1}, {"order@1 running", 1}, {"order@2 pending", 1}};
  BOOST_TEST((mine == expected));
  const std::string text = forgeyard::prometheus_text(stats, forgeyard::Metrics{});
  BOOST_TEST(text.find("forgeyard_workflow_runs{tenant=\"" + tenant +
                       "\",workflow=\"order@1\",state=\"running\"} 1\n") != std::string::npos,
             text);
}

// Retention: maintain() removes a finished run once its retention passed, on every backend.
BOOST_AUTO_TEST_CASE(a_finished_run_is_kept_for_its_retention_then_removed_by_maintain) {
  auto& wf = store->workflows();
  forgeyard::WorkflowStartOptions options;
  options.retention = 500ms;
  FY_CHECK_ERROR(wf.start(tenant, "brief", 1, "b0", "{}", options), ErrorKind::InvalidArgument, "22023",
                 "workflow option retention must be at least 1 second");
  options.retention = 0s;
  FY_CHECK_ERROR(wf.start(tenant, "brief", 1, "b0", "{}", options), ErrorKind::InvalidArgument, "22023",
                 "workflow option retention must be positive");
  options.retention = 1h;
  const std::string id = wf.start(tenant, "brief", 1, "b1", "{}", options);
  const auto claimed = wf.claim(tenant, "w", {"brief@1"});
  BOOST_TEST_REQUIRE(claimed.size() == 1u);
  BOOST_TEST(wf.signal(tenant, id, "note"));
  wf.complete(tenant, id, claimed[0].epoch, "{}");
  clock.advance(59min);
  BOOST_TEST(store->maintain(1000, tenant)["workflow_runs"] == 0);
  BOOST_TEST(wf.status(tenant, id).state == "completed");
  clock.advance(1min);
  BOOST_TEST(store->maintain(1000, tenant)["workflow_runs"] == 1);
  FY_CHECK_ERROR(wf.status(tenant, id), ErrorKind::NotFound, "42704");
}

// Schedules: each fire starts one run named by the schedule and the fire time, missed fires are
// started up to catch_up and the rest skipped; a cron spec is read in its time zone; two tickers
// at once start one run per fire; the same answers, and the same errors, on every backend.
BOOST_AUTO_TEST_CASE(schedules_start_one_run_per_fire_even_with_two_tickers_at_once) {
  auto& wf = store->workflows();
  clock.set(utc("2030-03-29T12:07:00Z"));
  FY_CHECK_ERROR(wf.schedule_create(tenant, "s", "report", 1, "* * * *"), ErrorKind::InvalidArgument, "22023",
                 "schedule spec '* * * *' is not valid: cron takes 5 fields, not 4");
  FY_CHECK_ERROR(wf.schedule_create(tenant, "s", "report", 1, "0 0 30 2 *"), ErrorKind::InvalidArgument, "22023",
                 "the schedule never fires within 5 years");
  FY_CHECK_ERROR(wf.schedule_create(tenant, "s", "report", 1, "@daily", {"Mars/Olympus", 0, "{}"}),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(wf.schedule_create(tenant, "s", "report", 1, "@daily", {"UTC", 1001, "{}"}),
                 ErrorKind::InvalidArgument, "22023");
  BOOST_TEST(wf.schedule_list(tenant).empty());

  wf.schedule_create(tenant, "quarter", "report", 1, "@every 15m", {"UTC", 0, R"({"kind": "q"})"});
  wf.schedule_create(tenant, "quarter", "report", 1, "@every 15m", {"UTC", 0, R"({"kind":"q"})"});  // the same
  FY_CHECK_ERROR(wf.schedule_create(tenant, "quarter", "report", 1, "@every 10m"), ErrorKind::InvalidArgument, "42710");
  wf.schedule_create(tenant, "berlin", "report", 2, "30 2 * * *", {"Europe/Berlin", 2, "{}"});
  auto listed = wf.schedule_list(tenant);
  BOOST_TEST_REQUIRE(listed.size() == 2u);
  BOOST_TEST(listed[0].schedule == "berlin");                                 // by name
  BOOST_TEST(iso_utc(listed[0].next_fire) == "2030-03-30T01:30:00.000000Z");  // 02:30 CET
  BOOST_TEST(listed[1].input == R"({"kind":"q"})");
  BOOST_TEST(iso_utc(listed[1].next_fire) == "2030-03-29T12:15:00.000000Z");
  BOOST_TEST(wf.schedule_tick(tenant) == 0);

  clock.set(utc("2030-03-30T02:00:00Z"));  // 56 quarter hours and one Berlin fire due
  BOOST_TEST(wf.schedule_tick(tenant) == 2);
  BOOST_TEST(wf.schedule_tick(tenant) == 0);
  listed = wf.schedule_list(tenant);
  BOOST_TEST(iso_utc(listed[0].next_fire) == "2030-04-01T00:30:00.000000Z");  // no 02:30 on 03-31
  BOOST_TEST((listed[1].fires == 1 && listed[1].skipped == 55));
  BOOST_TEST(iso_utc(*listed[1].last_fire) == "2030-03-30T02:00:00.000000Z");
  const auto runs = wf.list(tenant, "pending");
  std::set<std::string> keys;
  for (const auto& r : runs) keys.insert(r.run_key);
  BOOST_TEST(keys.count("quarter@2030-03-30T02:00:00.000000Z") == 1u);
  BOOST_TEST(keys.count("berlin@2030-03-30T01:30:00.000000Z") == 1u);

  // Two tickers at once, each with its own connections: 120 due fires, 120 runs.
  const std::string busy = unique("busy-tenant");
  wf.schedule_create(busy, "minutely", "ping", 1, "@every 1m", {"UTC", 1000, "{}"});
  clock.advance(2h);
  auto a = open_another(2), b = open_another(2);
  std::atomic<int> started{0};
  {
    std::jthread one([&] { started += a->workflows().schedule_tick(busy); });
    std::jthread two([&] { started += b->workflows().schedule_tick(busy); });
  }
  BOOST_TEST(started.load() == 120);
  BOOST_TEST(wf.list(busy, std::nullopt, 1000).size() == 120u);
  BOOST_TEST(store->maintain(1000, busy)["schedules"] == 0);
  clock.advance(1min);
  BOOST_TEST(store->maintain(1000, busy)["schedules"] == 1);  // maintain ticks too

  BOOST_TEST(wf.schedule_list(unique("nobody")).empty());
  BOOST_TEST(wf.schedule_drop(tenant, "quarter"));
  BOOST_TEST(!wf.schedule_drop(tenant, "quarter"));
}

// The schedule commands of the CLI.
BOOST_AUTO_TEST_CASE(the_cli_creates_lists_ticks_and_drops_schedules) {
  const std::string out = (std::filesystem::temp_directory_path() / unique("schedule-cli")).string();
  auto cli = [&](const std::vector<std::string>& args) {
    const int code = run_cli(args, out);
    return std::pair<int, std::string>(code, conformance::slurp(out));
  };
  const auto [created, create_out] = cli({"schedule", "create", tenant, "yearly", "report", "1", "@yearly",
                                          "--timezone", "Europe/Berlin", "--input", R"({"a": 1})"});
  BOOST_TEST(created == 0);
  BOOST_TEST(create_out.find("schedule=yearly\nnext_fire=") == 0u, create_out);
  BOOST_TEST(create_out.find("-12-31T23:00:00.000000Z") != std::string::npos, create_out);  // Jan 1 00:00 CET
  BOOST_TEST(cli({"schedule", "create", tenant, "yearly", "report", "1", "@daily"}).first == 4);
  BOOST_TEST(cli({"schedule", "create", tenant, "bad", "report", "1", "* *"}).first == 4);
  const auto [listed, list_out] = cli({"schedule", "list", tenant, "--json"});
  BOOST_TEST(listed == 0);
  BOOST_TEST(
      list_out.find(
          R"({"schedule":"yearly","workflow":"report","version":1,"spec":"@yearly","timezone":"Europe/Berlin","catch_up":0,)") !=
          std::string::npos,
      list_out);
  BOOST_TEST(list_out.find(R"("input":{"a":1},"last_fire":null)") != std::string::npos, list_out);
  BOOST_TEST((cli({"schedule", "tick", tenant}) == std::pair<int, std::string>(0, "started=0\n")));
  BOOST_TEST((cli({"schedule", "drop", tenant, "yearly"}) == std::pair<int, std::string>(0, "dropped=true\n")));
  BOOST_TEST(cli({"schedule", "drop", tenant, "yearly"}).first == 1);
  std::filesystem::remove(out);
}

// A retried step_complete that waited for the first attempt's transaction (on another
// connection) finds the step recorded and is a no-op; a retried step call then replays it.
BOOST_AUTO_TEST_CASE(a_retry_that_waited_for_the_first_attempt_sees_what_it_recorded) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "retry", 1, "r1");
  const auto owner = wf.claim(tenant, "w", {"retry@1"}, 1, 1h).at(0);
  BOOST_TEST(!wf.step(tenant, id, owner.epoch, "a").done);
  auto other = open_another(2);
  auto first = store->begin();
  first->workflows().step_complete(tenant, id, owner.epoch, "a", R"({"n":1})");
  std::atomic<bool> retried{false};
  std::jthread retry([&] {
    other->workflows().step_complete(tenant, id, owner.epoch, "a", R"({"n":1})");  // waits for `first`
    retried = true;
  });
  std::this_thread::sleep_for(200ms);
  BOOST_TEST(!retried.load());
  first->commit();
  retry.join();
  BOOST_TEST(retried.load());
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 1u);
  BOOST_TEST((journal[0].result == std::optional<std::string>(R"({"n":1})")));
}

// Eight workers claim the same definition at once: every run goes to exactly one of them.
// Per-step timeouts: a step to run with a timeout must be recorded within it. The step call cuts
// the owner's lease to the step's deadline, extend never passes it, a late owner is fenced off,
// and the takeover records the attempt as failed; recorded in time, the lease is whole again.
BOOST_AUTO_TEST_CASE(a_step_past_its_timeout_is_fenced_off_and_recorded_failed_by_the_takeover) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "timed", 1, "k", "{}");
  const auto first = wf.claim(tenant, "w1", {"timed@1"}, 1, 60s).at(0);
  FY_CHECK_ERROR(wf.step(tenant, id, first.epoch, "call", 0s), ErrorKind::InvalidArgument, "22023",
                 "timeout must be positive");
  FY_CHECK_ERROR(wf.step(tenant, id, first.epoch, "call", -5s), ErrorKind::InvalidArgument, "22023");
  // In time: the deadline lets go of the lease once the step is recorded.
  BOOST_TEST(!wf.step(tenant, id, first.epoch, "quick", 10s).done);  // position 1: the bad calls moved nothing
  BOOST_TEST(unix_usecs(wf.extend(tenant, id, first.epoch, 60s)) == unix_usecs(clock.now() + 10s));
  clock.advance(5s);
  wf.step_complete(tenant, id, first.epoch, "quick", "1");
  BOOST_TEST(unix_usecs(wf.extend(tenant, id, first.epoch, 60s)) == unix_usecs(clock.now() + 60s));
  // Too late: fenced off, taken over once the deadline passed, the attempt recorded failed.
  BOOST_TEST(!wf.step(tenant, id, first.epoch, "call", 10s).done);
  const forgeyard::TimePoint deadline = clock.now() + 10s;
  BOOST_TEST(unix_usecs(wf.extend(tenant, id, first.epoch, 60s)) == unix_usecs(deadline));
  clock.advance(9s);
  BOOST_TEST(wf.claim(tenant, "w2", {"timed@1"}, 1, 60s).empty());
  clock.advance(2s);
  FY_CHECK_ERROR(wf.step_complete(tenant, id, first.epoch, "call", "2"), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(wf.extend(tenant, id, first.epoch, 60s), ErrorKind::StaleFence, "FY001");
  BOOST_TEST(wf.journal(tenant, id).size() == 1u);
  const auto second = wf.claim(tenant, "w2", {"timed@1"}, 1, 60s).at(0);
  BOOST_TEST(second.epoch > first.epoch);
  auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST(journal[1].step == "call");
  BOOST_TEST(journal[1].status == "failed");
  BOOST_TEST((journal[1].error == std::optional<std::string>("step \"call\" ran past its timeout")));
  BOOST_TEST(journal[1].epoch == first.epoch);
  BOOST_TEST(wf.step(tenant, id, second.epoch, "quick", 10s).done);  // a replay has no deadline
  BOOST_TEST(unix_usecs(wf.extend(tenant, id, second.epoch, 60s)) == unix_usecs(clock.now() + 60s));
  BOOST_TEST(!wf.step(tenant, id, second.epoch, "call", 10s).done);  // runs again
  wf.step_complete(tenant, id, second.epoch, "call", "2");
  journal = wf.journal(tenant, id);
  BOOST_TEST(journal.at(1).status == "done");
  BOOST_TEST(journal.at(1).epoch == second.epoch);
  wf.complete(tenant, id, second.epoch, "{}");
  BOOST_TEST(wf.status(tenant, id).state == "completed");
}

// A step that runs past its timeout on every attempt: each takeover records the attempt, and once
// the definition queue's max_attempts are used up the claim ends the run failed, compensating
// first (the same for owners that die every time, without a step timeout).
BOOST_AUTO_TEST_CASE(a_run_whose_every_attempt_ran_past_its_step_timeout_fails_and_compensates) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "stuck", 1, "k", "{}");
  exec_sql(alter_definition_queue(is_postgres(), tenant, "stuck", "max_attempts = 2"));
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto owned = wf.claim(tenant, "w" + std::to_string(attempt), {"stuck@1"}, 1, 60s).at(0);
    BOOST_TEST(owned.state == "running");
    const auto reserve = wf.step(tenant, id, owned.epoch, "reserve");
    if (!reserve.done) wf.step_complete(tenant, id, owned.epoch, "reserve", "1", "release");
    BOOST_TEST(!wf.step(tenant, id, owned.epoch, "call", 10s).done);
    clock.advance(11s);
  }
  const std::string error = "step \"call\" ran past its timeout on every attempt (the definition queue's max_attempts)";
  const auto compensating = wf.claim(tenant, "w3", {"stuck@1"}, 1, 60s);  // the lapsed run, compensating now
  BOOST_TEST_REQUIRE(compensating.size() == 1u);
  BOOST_TEST(compensating[0].state == "compensating");
  const auto status = wf.status(tenant, id);
  BOOST_TEST(status.state == "compensating");
  BOOST_TEST((status.error == std::optional<std::string>(error)));
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST(journal[1].status == "failed");
  BOOST_TEST(journal[1].attempts == 2);  // recorded by the takeover and by the lapse
  const auto next = wf.compensation(tenant, id, compensating[0].epoch);
  BOOST_TEST_REQUIRE(next.has_value());
  BOOST_TEST(next->compensation == "release");
  BOOST_TEST(wf.compensation_complete(tenant, id, compensating[0].epoch, next->position) == "failed");
  BOOST_TEST((wf.status(tenant, id).error == std::optional<std::string>(error)));
  // Owners that die every time, with no step timeout: the run fails with the lease's reason.
  const std::string dying = wf.start(tenant, "stuck", 1, "d", "{}");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    BOOST_TEST(wf.claim(tenant, "w", {"stuck@1"}, 1, 60s).at(0).run_id == dying);
    clock.advance(61s);
  }
  BOOST_TEST(wf.claim(tenant, "w", {"stuck@1"}, 1, 60s).empty());
  BOOST_TEST(wf.status(tenant, dying).state == "failed");
  BOOST_TEST(
      (wf.status(tenant, dying).error ==
       std::optional<std::string>("the owner's lease ran out on every attempt (the definition queue's max_attempts)")));
}

// A compensating run whose owners die on every attempt (the definition queue's max_attempts) ends
// compensation_failed, and keeps the error it was compensating for.
BOOST_AUTO_TEST_CASE(a_compensating_run_whose_every_attempt_lapsed_ends_compensation_failed_with_its_first_error) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "lapsing", 1, "k", "{}");
  exec_sql(alter_definition_queue(is_postgres(), tenant, "lapsing", "max_attempts = 2"));
  const auto owned = wf.claim(tenant, "w", {"lapsing@1"}, 1, 60s).at(0);
  BOOST_TEST(!wf.step(tenant, id, owned.epoch, "reserve").done);
  wf.step_complete(tenant, id, owned.epoch, "reserve", "1", std::string("release"));
  wf.fail(tenant, id, owned.epoch, "out of stock");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto compensating = wf.claim(tenant, "w" + std::to_string(attempt), {"lapsing@1"}, 1, 60s);
    BOOST_TEST_REQUIRE(compensating.size() == 1u);
    BOOST_TEST(compensating[0].state == "compensating");
    clock.advance(61s);  // its owner dies
  }
  BOOST_TEST(wf.claim(tenant, "w3", {"lapsing@1"}, 1, 60s).empty());
  const auto status = wf.status(tenant, id);
  BOOST_TEST(status.state == "compensation_failed");
  BOOST_TEST((status.error == std::optional<std::string>("out of stock")));
}

BOOST_AUTO_TEST_CASE(concurrent_claimers_never_share_a_run) {
  auto& wf = store->workflows();
  std::set<std::string> started;
  for (int i = 0; i < 40; ++i) started.insert(wf.start(tenant, "batch", 1, "run-" + std::to_string(i), "{}"));
  std::vector<std::vector<std::string>> got(8);
  conformance::ThreadFailures failures;
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&, w] {
      failures.run([&] {
        auto own = open_another(2);
        for (int round = 0; round < 20; ++round) {
          try {
            for (const auto& run : own->workflows().claim(tenant, "w" + std::to_string(w), {"batch@1"}, 3, 60s))
              got[static_cast<std::size_t>(w)].push_back(run.run_id);
          } catch (const forgeyard::Error& e) {
            if (!e.retryable()) throw;  // SQLite's busy writer: try again
          }
        }
      });
    });
  }
  for (auto& t : workers) t.join();
  failures.check("claimer");
  std::multiset<std::string> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  BOOST_TEST(all.size() == started.size());
  BOOST_TEST((std::set<std::string>(all.begin(), all.end()) == started));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- The worker and the workflow context ------------------------------------------------------

namespace {

forgeyard::WorkflowWorkerOptions worker_options(const std::string& tenant, const std::string& worker) {
  forgeyard::WorkflowWorkerOptions o;
  o.tenant = tenant;
  o.worker = worker;
  o.threads = 2;
  o.lease = 60s;
  o.idle_min = 10ms;
  o.idle_max = 10ms;
  o.stop_when_idle = true;
  return o;
}

// An audit event that says a step's database work happened: the effect counted below.
forgeyard::AuditEvent effect(const forgeyard::WorkflowContext& ctx, const std::string& step) {
  forgeyard::AuditEvent e;
  e.actor = "workflow";
  e.action = "step";
  e.resource = ctx.run_id() + ":" + step;
  return e;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(workflow_worker, conformance::Backend)

BOOST_AUTO_TEST_CASE(the_worker_runs_each_step_once_and_records_the_result) {
  std::atomic<int> reserve_calls{0}, charge_calls{0};
  forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w1"));
  worker.add("order", 1, [&](forgeyard::WorkflowContext& ctx) {
    const std::string reserved =
        ctx.transaction_step("reserve", [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
          ++reserve_calls;
          tx.audit().append(ctx.tenant(), effect(ctx, "reserve"));
          return std::string(R"({"n": 2})");
        });
    const std::string charge = ctx.step("charge", [&](const forgeyard::StepContext& s) {
      ++charge_calls;
      return "\"" + s.idempotency_key + "\"";
    });
    return R"({"reserved": )" + reserved + R"(, "charge": )" + charge + "}";
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(store->workflows().start(tenant, "order", 1, "o" + std::to_string(i)));
  const auto stats = worker.run({});
  BOOST_TEST(stats.completed == 3u);
  BOOST_TEST(stats.steps_run == 6u);
  BOOST_TEST(reserve_calls == 3);
  BOOST_TEST(charge_calls == 3);
  for (const std::string& id : ids) {
    const auto status = store->workflows().status(tenant, id);
    BOOST_TEST(status.state == "completed");
    BOOST_TEST(
        (status.result == std::optional<std::string>(R"({"charge":")" + id + R"(:2:charge","reserved":{"n":2}})")));
  }
  BOOST_TEST(store->audit().head(tenant).seq == 3);
}

BOOST_AUTO_TEST_CASE(a_failed_step_releases_the_run_and_the_retry_replays_what_was_done) {
  std::atomic<int> reserve_calls{0}, charge_calls{0};
  auto code = [&](forgeyard::WorkflowContext& ctx) {
    ctx.transaction_step("reserve", [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
      ++reserve_calls;
      tx.audit().append(ctx.tenant(), effect(ctx, "reserve"));
      return std::string("1");
    });
    ctx.transaction_step("charge", [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
      tx.audit().append(ctx.tenant(), effect(ctx, "charge"));  // rolled back with the failure
      if (++charge_calls == 1) throw std::runtime_error("provider timeout");
      return std::string("2");
    });
    return std::string("true");
  };
  const std::string id = store->workflows().start(tenant, "order", 1, "o");
  forgeyard::WorkflowWorker first(*store, worker_options(tenant, "w1"));
  first.add("order", 1, code);
  const auto failed = first.run({});
  BOOST_TEST(failed.released == 1u);
  BOOST_TEST(store->workflows().status(tenant, id).state == "pending");
  const auto journal = store->workflows().journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST((journal[1].error == std::optional<std::string>("provider timeout")));
  clock.advance(10min);  // past the queue's backoff
  forgeyard::WorkflowWorker second(*store, worker_options(tenant, "w2"));
  second.add("order", 1, code);
  const auto done = second.run({});
  BOOST_TEST(done.completed == 1u);
  BOOST_TEST(done.steps_replayed == 1u);
  BOOST_TEST(reserve_calls == 1);
  BOOST_TEST(charge_calls == 2);
  BOOST_TEST(store->workflows().status(tenant, id).state == "completed");
  BOOST_TEST(store->audit().head(tenant).seq == 2);  // reserve once, charge once (the failed one rolled back)
}

BOOST_AUTO_TEST_CASE(changed_code_is_parked_and_code_that_throws_fails_the_run) {
  const std::string id = store->workflows().start(tenant, "order", 1, "o");
  forgeyard::WorkflowWorker old_code(*store, worker_options(tenant, "w1"));
  old_code.add("order", 1, [&](forgeyard::WorkflowContext& ctx) {
    ctx.step("a", [](const forgeyard::StepContext&) { return std::string("1"); });
    ctx.step("b", [](const forgeyard::StepContext&) -> std::string { throw std::runtime_error("not yet"); });
    return std::string("null");
  });
  BOOST_TEST(old_code.run({}).released == 1u);
  clock.advance(10min);
  forgeyard::WorkflowWorker new_code(*store, worker_options(tenant, "w2"));
  new_code.add("order", 1, [&](forgeyard::WorkflowContext& ctx) {
    ctx.step("x", [](const forgeyard::StepContext&) { return std::string("1"); });
    return std::string("null");
  });
  BOOST_TEST(new_code.run({}).parked == 1u);
  const auto parked = store->workflows().status(tenant, id);
  BOOST_TEST(parked.state == "parked");
  BOOST_TEST(parked.error->find("called step \"x\" at position 1, where its journal has step \"a\"") !=
             std::string::npos);

  const std::string broken = store->workflows().start(tenant, "broken", 1, "b");
  forgeyard::WorkflowWorker throwing(*store, worker_options(tenant, "w3"));
  throwing.add("broken", 1, [](forgeyard::WorkflowContext&) -> std::string { throw std::logic_error("bug"); });
  BOOST_TEST(throwing.run({}).failed == 1u);
  BOOST_TEST(store->workflows().status(tenant, broken).state == "failed");
  BOOST_TEST((store->workflows().status(tenant, broken).error == std::optional<std::string>("bug")));
}

// A durable timer: the run sleeps an hour by the store's clock, survives its store being closed
// (its message is a row like any other) and goes on from the step after the sleep.
BOOST_AUTO_TEST_CASE(a_sleeping_run_wakes_at_its_end_and_goes_on_after_the_sleep) {
  std::atomic<int> before{0}, after{0};
  auto code = [&](forgeyard::WorkflowContext& ctx) {
    ctx.step("before", [&](const forgeyard::StepContext&) {
      ++before;
      return std::string("1");
    });
    ctx.sleep_for("nap", 1h);
    ctx.step("after", [&](const forgeyard::StepContext&) {
      ++after;
      return std::string("2");
    });
    return std::string("\"rested\"");
  };
  const std::string id = store->workflows().start(tenant, "nap", 1, "n");
  {
    forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w1"));
    worker.add("nap", 1, code);
    BOOST_TEST(worker.run({}).sleeping == 1u);
  }
  BOOST_TEST(store->workflows().status(tenant, id).state == "sleeping");
  const auto journal = store->workflows().journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 2u);
  BOOST_TEST(journal[1].step == "nap");
  BOOST_TEST((journal[1].result == std::optional<std::string>(R"({"until":")" + iso_utc(clock.now() + 1h) + R"("})")));
  store.reset();  // the store closes; the timer is in the database
  store = open_another();
  clock.advance(59min);
  BOOST_TEST(store->workflows().claim(tenant, "w", {"nap@1"}).empty());
  clock.advance(1min);
  forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w2"));
  worker.add("nap", 1, code);
  const auto stats = worker.run({});
  BOOST_TEST(stats.completed == 1u);
  BOOST_TEST(stats.steps_replayed == 2u);  // before, and the sleep
  BOOST_TEST(before == 1);
  BOOST_TEST(after == 1);
  BOOST_TEST(store->workflows().status(tenant, id).state == "completed");
}

// Signals: one sent before the wait is received, one sent during it wakes the run at once, each
// is received once (a repeated signal_id is refused), and a wait with nothing to receive times out.
BOOST_AUTO_TEST_CASE(signals_are_received_once_before_or_during_a_wait_and_waits_time_out) {
  auto code = [&](forgeyard::WorkflowContext& ctx) {
    const auto first = ctx.wait_signal("first", "approve", 1h);
    const auto second = ctx.wait_signal("second", "approve", 10min);
    return "[" + first.value_or("null") + "," + second.value_or("null") + "]";
  };
  auto run_worker = [&](const std::string& name) {
    forgeyard::WorkflowWorker worker(*store, worker_options(tenant, name));
    worker.add("approval", 1, code);
    return worker.run({});
  };
  auto& wf = store->workflows();
  const std::string early = wf.start(tenant, "approval", 1, "early");
  const std::string signal_id = "00000000-0000-4000-8000-0000000000a1";
  BOOST_TEST(wf.signal(tenant, early, "approve", R"({"by": "ann"})", signal_id));
  BOOST_TEST(!wf.signal(tenant, early, "approve", R"({"by": "ann"})", signal_id));
  BOOST_TEST(run_worker("w1").sleeping == 1u);  // received the first, waits at the second
  BOOST_TEST(wf.status(tenant, early).state == "waiting");
  BOOST_TEST(wf.claim(tenant, "w", {"approval@1"}).empty());
  clock.advance(10min);
  BOOST_TEST(run_worker("w2").completed == 1u);
  BOOST_TEST((wf.status(tenant, early).result == std::optional<std::string>(R"([{"by":"ann"},null])")));
  BOOST_TEST(!wf.signal(tenant, early, "approve"));  // finished

  const std::string late = wf.start(tenant, "approval", 1, "late");
  BOOST_TEST(run_worker("w1").sleeping == 1u);   // waits at the first
  BOOST_TEST(wf.signal(tenant, late, "other"));  // another name leaves it waiting
  BOOST_TEST(wf.claim(tenant, "w", {"approval@1"}).empty());
  BOOST_TEST(wf.signal(tenant, late, "approve", R"({"by": "bob"})"));
  BOOST_TEST(run_worker("w2").sleeping == 1u);  // woken at once, waits at the second
  BOOST_TEST(wf.signal(tenant, late, "approve", R"({"n": 2})"));
  const auto done = run_worker("w3");
  BOOST_TEST(done.completed == 1u);
  BOOST_TEST((wf.status(tenant, late).result == std::optional<std::string>(R"([{"by":"bob"},{"n":2}])")));
  FY_CHECK_ERROR(wf.signal(tenant, "00000000-0000-4000-8000-0000000000ff", "approve"), ErrorKind::NotFound, "42704");
}

BOOST_AUTO_TEST_CASE(a_run_whose_lease_is_lost_stops_and_its_next_owner_finishes_it) {
  const std::string id = store->workflows().start(tenant, "slow", 1, "o");
  std::atomic<int> executions{0};
  std::atomic<bool> waiting{false};
  auto options = worker_options(tenant, "w1");
  options.lease = 3s;  // extended every second of real time
  options.threads = 1;
  forgeyard::WorkflowWorker worker(*store, options);
  worker.add("slow", 1, [&](forgeyard::WorkflowContext& ctx) {
    const bool first = ++executions == 1;
    ctx.step("work", [&](const forgeyard::StepContext&) {
      if (first) {
        waiting = true;
        while (!ctx.lost()) std::this_thread::sleep_for(10ms);  // long work that watches its lease
      }
      return std::string("1");
    });
    return std::string("\"done\"");
  });
  std::optional<forgeyard::WorkflowWorkerStats> stats;
  std::jthread running([&] { stats = worker.run({}); });
  while (!waiting) std::this_thread::sleep_for(10ms);
  clock.advance(1min);  // the server now sees the lease run out: the next extend is FY001
  running.join();
  BOOST_TEST_REQUIRE(stats.has_value());
  BOOST_TEST(stats->lost == 1u);
  BOOST_TEST(stats->completed == 1u);  // taken over by the same worker's next claim
  const auto status = store->workflows().status(tenant, id);
  BOOST_TEST(status.state == "completed");
  BOOST_TEST(store->workflows().journal(tenant, id).at(0).epoch == status.epoch);
}

// A step that hangs past its timeout: the worker's lease ends at the step's deadline (the step's
// code is told through the stop token), the run is taken over then, not when the worker's 60 s
// lease would have ended, and the step runs again. Real time: the timeout is 1 s.
BOOST_AUTO_TEST_CASE(a_step_that_hangs_past_its_timeout_is_stopped_and_run_again) {
  std::unique_ptr<forgeyard::Store> real = open_real_clock();
  const std::string id = real->workflows().start(tenant, "hangs", 1, "h");
  std::atomic<int> attempts{0};
  std::atomic<bool> told{false};
  auto options = worker_options(tenant, "w1");
  options.threads = 1;
  options.stop_when_idle = false;  // the run is not runnable again until the deadline passed
  forgeyard::WorkflowWorker worker(*real, options);
  worker.add("hangs", 1, [&](forgeyard::WorkflowContext& ctx) {
    ctx.step(
        "call",
        [&](const forgeyard::StepContext&) {
          if (++attempts == 1) {
            const auto give_up = std::chrono::steady_clock::now() + 30s;
            while (!ctx.stop_token().stop_requested() && std::chrono::steady_clock::now() < give_up)
              std::this_thread::sleep_for(5ms);
            told = ctx.stop_token().stop_requested();
          }
          return std::string("1");
        },
        // 1 s for the attempt that hangs; the next has room for a loaded machine.
        forgeyard::StepOptions{std::nullopt, attempts.load() == 0 ? std::chrono::microseconds(1s) : 60s});
    return std::string("\"done\"");
  });
  std::stop_source stop;
  std::optional<forgeyard::WorkflowWorkerStats> stats;
  std::jthread running([&] { stats = worker.run(stop.get_token()); });
  const auto give_up = std::chrono::steady_clock::now() + 40s;
  while (real->workflows().status(tenant, id).state != "completed" && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(20ms);
  stop.request_stop();
  running.join();
  BOOST_TEST(told.load());
  BOOST_TEST(attempts.load() == 2);
  BOOST_TEST_REQUIRE(stats.has_value());
  BOOST_TEST(stats->lost == 1u);
  BOOST_TEST(stats->completed == 1u);
  const auto status = real->workflows().status(tenant, id);
  BOOST_TEST(status.state == "completed");
  BOOST_TEST(real->workflows().journal(tenant, id).at(0).epoch == status.epoch);
}

// A transaction step takes no timeout: its open transaction holds the run, so a hung one could not
// be taken over. The code that asks for one fails its run with that reason.
BOOST_AUTO_TEST_CASE(a_transaction_step_with_a_timeout_is_refused) {
  const std::string id = store->workflows().start(tenant, "tx-timed", 1, "t");
  forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w1"));
  std::atomic<int> ran{0};
  worker.add("tx-timed", 1, [&](forgeyard::WorkflowContext& ctx) {
    ctx.transaction_step(
        "write",
        [&](forgeyard::Transaction&, const forgeyard::StepContext&) {
          ++ran;
          return std::string("1");
        },
        forgeyard::StepOptions{std::nullopt, 10s});
    return std::string("{}");
  });
  const auto stats = worker.run({});
  BOOST_TEST(ran.load() == 0);
  BOOST_TEST(stats.failed == 1u);
  const auto status = store->workflows().status(tenant, id);
  BOOST_TEST(status.state == "failed");
  BOOST_TEST(status.error.value_or("").find("cannot have a timeout") != std::string::npos);
}

// Sagas: a run that fails after steps with compensations is compensating; the worker runs the
// compensations newest first (each with the step's result and a stable key) and the run ends
// failed. A compensation that is not registered ends the run compensation_failed; once it is,
// retry resumes the compensations.
BOOST_AUTO_TEST_CASE(compensations_run_newest_first_and_a_missing_one_ends_the_run_compensation_failed) {
  std::vector<std::string> undone;
  std::mutex undone_mutex;
  auto code = [&](forgeyard::WorkflowContext& ctx) -> std::string {
    ctx.step(
        "book", [](const forgeyard::StepContext&) { return std::string(R"({"seat":"12A"})"); }, "unbook");
    ctx.step("note", [](const forgeyard::StepContext&) { return std::string("1"); });
    ctx.transaction_step(
        "pay",
        [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
          tx.audit().append(tenant, effect(ctx, "pay"));
          return std::string(R"({"paid":5})");
        },
        "refund");
    if (ctx.input() == R"({"fail":true})") throw std::runtime_error("no truck");
    return std::string(R"("shipped")");
  };
  auto undo = [&](const std::string& name) {
    return [&, name](const forgeyard::Compensation& c) {
      std::lock_guard lock(undone_mutex);
      undone.push_back(name + ":" + std::to_string(c.position) + ":" + c.step + ":" + c.result.value_or("null") + ":" +
                       c.idempotency_key.substr(c.idempotency_key.rfind(':') + 1));
    };
  };
  auto& wf = store->workflows();
  const std::string shipped = wf.start(tenant, "trip", 1, "trip-ok", "{}");
  const std::string failing = wf.start(tenant, "trip", 1, "trip-fail", R"({"fail":true})");
  {
    forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w1"));
    worker.add("trip", 1, code);
    worker.add_compensation("trip", 1, "unbook", undo("unbook"));
    worker.add_compensation("trip", 1, "refund", undo("refund"));
    const auto stats = worker.run({});
    BOOST_TEST(stats.completed == 1u);
    BOOST_TEST(stats.failed == 1u);
    BOOST_TEST(stats.compensated == 1u);
    BOOST_TEST(stats.compensations == 2u);
  }
  BOOST_TEST(wf.status(tenant, shipped).state == "completed");
  const auto failed = wf.status(tenant, failing);
  BOOST_TEST(failed.state == "failed");
  BOOST_TEST((failed.error == std::optional<std::string>("no truck")));
  const std::vector<std::string> expected{R"(refund:3:pay:{"paid":5}:compensate)",
                                          R"(unbook:1:book:{"seat":"12A"}:compensate)"};
  BOOST_TEST(undone == expected, boost::test_tools::per_element());
  const auto journal = wf.journal(tenant, failing);
  BOOST_TEST_REQUIRE(journal.size() == 3u);
  BOOST_TEST((journal[0].compensation_status == std::optional<std::string>("done")));
  BOOST_TEST(!journal[1].compensation_status);
  BOOST_TEST((journal[2].compensation_status == std::optional<std::string>("done")));
  BOOST_TEST(!wf.retry(tenant, failing));  // its steps were undone: no replay as done

  // A compensation nobody registered: compensation_failed, listed with its reason; retry resumes.
  undone.clear();
  const std::string stuck = wf.start(tenant, "trip", 1, "trip-stuck", R"({"fail":true})");
  {
    forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w2"));
    worker.add("trip", 1, code);
    worker.add_compensation("trip", 1, "refund", undo("refund"));
    const auto stats = worker.run({});
    BOOST_TEST(stats.compensations == 1u);
  }
  const auto status = wf.status(tenant, stuck);
  BOOST_TEST(status.state == "compensation_failed");
  BOOST_TEST((status.error == std::optional<std::string>("no truck")));  // the error it was compensating for
  const auto failed_compensation = wf.journal(tenant, stuck).at(0);
  BOOST_TEST((failed_compensation.compensation_status == std::optional<std::string>("failed")));
  BOOST_TEST((failed_compensation.compensation_error ==
              std::optional<std::string>(R"(no compensation "unbook" is registered for trip@1)")));
  // `workflow show` prints it beside the step.
  const std::string out = (std::filesystem::temp_directory_path() / unique("compensation-cli")).string();
  BOOST_TEST(run_cli({"workflow", "show", tenant, stuck}, out) == 0);
  const std::string shown = conformance::slurp(out);
  BOOST_TEST(shown.find(R"(step.1=book status=done)") != std::string::npos, shown);
  BOOST_TEST(
      shown.find(
          R"( compensation=unbook compensated=failed compensation_error=no compensation "unbook" is registered for trip@1)") !=
          std::string::npos,
      shown);
  BOOST_TEST(wf.retry(tenant, stuck));
  BOOST_TEST(wf.status(tenant, stuck).state == "compensating");
  {
    forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w3"));
    worker.add("trip", 1, code);
    worker.add_compensation("trip", 1, "unbook", undo("unbook"));
    BOOST_TEST(worker.run({}).compensated == 1u);
  }
  const auto ended = wf.status(tenant, stuck);
  BOOST_TEST(ended.state == "failed");
  BOOST_TEST((ended.error == std::optional<std::string>("no truck")));  // its first error, after the retry too
  BOOST_TEST(undone.size() == 2u);                                      // refund once, then unbook once
}

// A cancel while steps with compensations are done: the run compensates, and its owner's next
// write is refused (FY001).
BOOST_AUTO_TEST_CASE(a_cancelled_run_compensates_and_its_owner_is_fenced_off) {
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "trip", 1, "trip-c");
  const auto claimed = wf.claim(tenant, "w", {"trip@1"});
  BOOST_TEST_REQUIRE(claimed.size() == 1u);
  const std::int64_t epoch = claimed[0].epoch;
  BOOST_TEST(!wf.step(tenant, id, epoch, "book").done);
  wf.step_complete(tenant, id, epoch, "book", "{}", std::string("unbook"));
  BOOST_TEST(wf.cancel(tenant, id, "customer left"));
  BOOST_TEST(!wf.cancel(tenant, id, "again"));  // compensating: it finishes that first
  FY_CHECK_ERROR(wf.step(tenant, id, epoch, "pay"), ErrorKind::StaleFence, "FY001");
  const auto again = wf.claim(tenant, "w2", {"trip@1"});
  BOOST_TEST_REQUIRE(again.size() == 1u);
  BOOST_TEST(again[0].state == "compensating");
  FY_CHECK_ERROR(wf.step(tenant, id, again[0].epoch, "pay"), ErrorKind::StaleFence, "FY001");
  wf.extend(tenant, id, again[0].epoch, 5min);  // the compensating owner keeps its lease
  const auto next = wf.compensation(tenant, id, again[0].epoch);
  BOOST_TEST_REQUIRE(next.has_value());
  BOOST_TEST(next->idempotency_key == id + ":1:book:compensate");
  FY_CHECK_ERROR(wf.compensation_complete(tenant, id, again[0].epoch, 2), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST((wf.compensation_fail(tenant, id, again[0].epoch, 1, "bank down") == StepFailure::Retry));
  FY_CHECK_ERROR(wf.compensation(tenant, id, again[0].epoch), ErrorKind::StaleFence, "FY001");
  clock.advance(1h);  // past the queue's backoff
  const auto third = wf.claim(tenant, "w3", {"trip@1"});
  BOOST_TEST_REQUIRE(third.size() == 1u);
  BOOST_TEST(wf.compensation_complete(tenant, id, third[0].epoch, 1) == "cancelled");
  const auto status = wf.status(tenant, id);
  BOOST_TEST(status.state == "cancelled");
  BOOST_TEST((status.error == std::optional<std::string>("customer left")));
  const auto journal = wf.journal(tenant, id);
  BOOST_TEST((journal.at(0).compensation_status == std::optional<std::string>("done")));
  BOOST_TEST(!journal.at(0).compensation_error);
}

// A child started from a step (its run_key is the step's idempotency key) ends, and its parent,
// waiting for it, is woken with the child's state and result.
BOOST_AUTO_TEST_CASE(a_child_run_tells_its_waiting_parent_how_it_ended) {
  std::string child_id;
  auto parent = [&](forgeyard::WorkflowContext& ctx) {
    child_id = ctx.start_child("spawn", "child", 1, R"({"n": 2})");
    const auto ended = ctx.wait_child("join", child_id, 1h);
    return ended.value_or("null");
  };
  auto child = [&](forgeyard::WorkflowContext& ctx) {
    return std::string(ctx.input() == R"({"n":2})" ? R"({"doubled":4})" : "null");
  };
  auto& wf = store->workflows();
  const std::string id = wf.start(tenant, "parent", 1, "family");
  forgeyard::WorkflowWorker worker(*store, worker_options(tenant, "w1"));
  worker.add("parent", 1, parent);
  worker.add("child", 1, child);
  const auto stats = worker.run({});
  BOOST_TEST(stats.completed == 2u);
  BOOST_TEST(wf.status(tenant, id).state == "completed");
  BOOST_TEST((wf.status(tenant, id).result ==
              std::optional<std::string>(R"({"error":null,"result":{"doubled":4},"state":"completed"})")));
  BOOST_TEST(wf.status(tenant, child_id).state == "completed");
  const auto runs = wf.list(tenant, "completed");
  const auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.run_id == child_id; });
  BOOST_TEST_REQUIRE((it != runs.end()));
  BOOST_TEST(it->run_key == id + ":1:spawn");
  // The child's end is told once: a second child signal would be refused by its id.
  BOOST_TEST(!wf.signal(tenant, id, "child:" + child_id, "{}", child_id));

  // A parent removed by its retention hears nothing, and its child still ends.
  forgeyard::WorkflowStartOptions brief;
  brief.retention = 1s;
  const std::string gone = wf.start(tenant, "parent", 1, "gone", "{}", brief);
  forgeyard::WorkflowStartOptions of_gone;
  of_gone.parent = gone;
  const std::string orphan = wf.start(tenant, "child", 1, "orphan", "{}", of_gone);
  const auto p = wf.claim(tenant, "w", {"parent@1"}).at(0);
  wf.complete(tenant, gone, p.epoch, "{}");
  clock.advance(2s);
  BOOST_TEST(store->maintain(1000, tenant)["workflow_runs"] >= 1);
  FY_CHECK_ERROR(wf.status(tenant, gone), ErrorKind::NotFound, "42704");
  const auto c = wf.claim(tenant, "w", {"child@1"}).at(0);
  wf.complete(tenant, orphan, c.epoch, "{}");
  BOOST_TEST(wf.status(tenant, orphan).state == "completed");
}

// A worker process SIGKILLed at random points mid-run is replaced by the next one, and no step's
// database effect happens twice: 10 runs of 20 steps, each step an audit event in the step's
// transaction.
// A durable timer outlives the process that set it: a worker process runs a step and sleeps 3 s,
// then exits (nothing else is runnable); a new worker process, started once the sleep ended,
// replays the step, passes the sleep and finishes the run under a new epoch. (Across a
// PostgreSQL restart: tests/pg/restart_restore.sh.)
BOOST_AUTO_TEST_CASE(a_timer_fires_after_the_process_that_set_it_exited) {
  const std::string id = store->workflows().start(tenant, "napper", 1, "nap-1");
  const auto worker_process = [&] {
    const pid_t pid = spawn_self({"--workflow-worker", url, tenant, unnamed_statements ? "unnamed" : "prepared", "1"});
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  const auto effects = [&](const std::string& step) {
    int n = 0;
    for (const auto& e : store->audit().read(tenant, 1, 1000)) n += e.resource == id + ":" + step ? 1 : 0;
    return n;
  };
  BOOST_TEST_REQUIRE(worker_process());
  BOOST_TEST(store->workflows().status(tenant, id).state == "sleeping");
  const auto slept = store->workflows().journal(tenant, id);
  BOOST_TEST_REQUIRE(slept.size() == 2u);
  BOOST_TEST(slept[1].step == "nap");
  BOOST_TEST(effects("before") == 1);
  BOOST_TEST(effects("after") == 0);
  // The sleep's end, by the real clock the worker used: 3 s after it was journaled.
  std::this_thread::sleep_until(slept[1].recorded_at + 3s + 100ms);
  BOOST_TEST_REQUIRE(worker_process());
  const auto status = store->workflows().status(tenant, id);
  BOOST_TEST(status.state == "completed");
  BOOST_TEST((status.result == std::optional<std::string>("\"rested\"")));
  BOOST_TEST(effects("before") == 1);
  BOOST_TEST(effects("after") == 1);
  const auto journal = store->workflows().journal(tenant, id);
  BOOST_TEST_REQUIRE(journal.size() == 3u);
  BOOST_TEST(journal[0].epoch < status.epoch);  // set by the first process, fired for the second
  BOOST_TEST(journal[2].epoch == status.epoch);
}

BOOST_AUTO_TEST_CASE(workers_killed_at_random_never_repeat_a_steps_database_effect) {
  constexpr int runs = 10, steps = 20;
  std::vector<std::string> ids;
  for (int i = 0; i < runs; ++i)
    ids.push_back(store->workflows().start(tenant, "chain", 1, "run-" + std::to_string(i)));
  auto finished = [&] {
    for (const std::string& id : ids)
      if (store->workflows().status(tenant, id).state != "completed") return false;
    return true;
  };
  // A run is mid-run when some of its steps are journaled and some are not: a kill then must hand
  // it to another worker, whose steps carry another epoch.
  auto mid_run = [&] {
    for (const std::string& id : ids) {
      const auto journaled = store->workflows().journal(tenant, id).size();
      if (journaled > 0 && journaled < static_cast<std::size_t>(steps)) return true;
    }
    return false;
  };
  // Steps journaled so far, read beside the worker (reads of runs never wait for its writes).
  auto journaled = [&] {
    std::size_t n = 0;
    for (const std::string& id : ids) n += store->workflows().journal(tenant, id).size();
    return n;
  };
  std::mt19937 rng(std::random_device{}());
  int kills = 0, mid_run_kills = 0;
  for (int attempt = 0; attempt < 60 && !finished(); ++attempt) {
    const std::size_t before = journaled();
    const pid_t pid = spawn_self(
        {"--workflow-worker", url, tenant, unnamed_statements ? "unnamed" : "prepared", std::to_string(steps)});
    // Four kills, and more (up to twelve) until one has landed mid-run.
    const bool kill_it = kills < 4 || (mid_run_kills == 0 && kills < 12);
    if (kill_it) {
      // Once this worker has recorded a step (however slow its start, e.g. under a sanitizer), at
      // a random moment within the next 150 ms: it is killed in the middle of its work, before
      // it could finish the whole batch (200 steps of 10 ms on 2 threads).
      const auto give_up = std::chrono::steady_clock::now() + 30s;
      while (journaled() == before && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(10ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 150));
      ::kill(pid, SIGKILL);
      ++kills;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    const bool exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    BOOST_TEST_REQUIRE((exited || (kill_it && killed)), "a worker process ended with status " << status);
    if (kill_it && killed && mid_run()) ++mid_run_kills;
    // Runs the killed worker held come back once their 1 s lease runs out.
    if (!finished()) std::this_thread::sleep_for(500ms);
  }
  BOOST_TEST(kills >= 4);
  BOOST_TEST_REQUIRE(mid_run_kills > 0);
  BOOST_TEST_REQUIRE(finished());
  std::map<std::string, int> effects;
  for (const auto& e : store->audit().read(tenant, 1, 10000)) ++effects[e.resource];
  BOOST_TEST(effects.size() == static_cast<std::size_t>(runs * steps));
  for (const auto& [resource, count] : effects) BOOST_TEST(count == 1, resource << " happened " << count << " times");
  BOOST_TEST(store->audit().verify(tenant).ok);
  // The runs a kill left mid-run changed owners between their steps.
  int handed_over = 0;
  for (const std::string& id : ids) {
    std::set<std::int64_t> epochs;
    for (const auto& entry : store->workflows().journal(tenant, id)) epochs.insert(entry.epoch);
    if (epochs.size() > 1) ++handed_over;
  }
  BOOST_TEST(handed_over > 0);
}

BOOST_AUTO_TEST_SUITE_END()

namespace conformance {

// `conformance_tests --workflow-worker URL TENANT prepared|unnamed STEPS`: a worker process for the
// tests above, with the real clock and a 1 s lease; each step of "chain@1" takes 10 ms and appends
// its audit event in the step's transaction; "napper@1" sleeps between two such steps. Exits 0
// once nothing is runnable.
int workflow_worker_main(int argc, char* argv[]) {
  if (argc < 6) return 2;
  forgeyard::StoreOptions options;
  options.prepared_statements = std::string(argv[4]) != "unnamed";
  const auto store = forgeyard::open(argv[2], options);
  const int steps = std::stoi(argv[5]);
  forgeyard::WorkflowWorkerOptions o;
  o.tenant = argv[3];
  o.worker = "worker-" + std::to_string(::getpid());
  o.threads = 2;
  o.lease = 1s;
  o.idle_min = 50ms;
  o.idle_max = 50ms;
  o.stop_when_idle = true;
  forgeyard::WorkflowWorker worker(*store, o);
  worker.add("chain", 1, [steps](forgeyard::WorkflowContext& ctx) {
    for (int i = 1; i <= steps; ++i) {
      const std::string step = "s" + std::to_string(i);
      ctx.transaction_step(step, [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
        std::this_thread::sleep_for(10ms);
        tx.audit().append(ctx.tenant(), effect(ctx, step));
        return std::to_string(i);
      });
    }
    return std::string("\"chained\"");
  });
  // The timer test's run: a step, a 3 s sleep, a step.
  worker.add("napper", 1, [](forgeyard::WorkflowContext& ctx) {
    for (const char* step : {"before", "after"}) {
      ctx.transaction_step(step, [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
        tx.audit().append(ctx.tenant(), effect(ctx, step));
        return std::string("1");
      });
      if (std::string(step) == "before") ctx.sleep_for("nap", 3s);
    }
    return std::string("\"rested\"");
  });
  worker.run({});
  return 0;
}

}  // namespace conformance
