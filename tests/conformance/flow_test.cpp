// Flow control (docs/operations.md, "Flow control"): admission limits of producers and the retry
// budget of nacks, on every backend.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"
#include "claimers.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::NackOutcome;
using forgeyard::OutgoingMessage;

namespace {
struct FlowFixture : conformance::Backend {
  std::string queue = "flow";
  forgeyard::Queues& queues() { return store->queues(); }
  void create(std::int64_t max_messages, const forgeyard::QueueOptions& base = {}) {
    forgeyard::QueueOptions o = base;
    o.max_messages = max_messages;
    queues().create(tenant, queue, o);
  }
  std::int64_t send(const std::string& payload) { return queues().enqueue(tenant, queue, {payload}); }
  // `threads` claimers taking up to `batch` each until `total` messages are acked
  // (conformance::run_claimers): the most deliveries they held at once.
  int most_held_by_claimers(int threads, int batch, int total) {
    std::atomic<int> holding{0}, most{0};
    const auto result = conformance::run_claimers(
        *this, tenant, queue, threads, batch, total,
        [&](const std::vector<forgeyard::Delivery>& got) {
          const int now_holding = holding += static_cast<int>(got.size());
          for (int seen = most.load(); now_holding > seen && !most.compare_exchange_weak(seen, now_holding);) {
          }
        },
        [&](const std::vector<forgeyard::Delivery>& got) { holding -= static_cast<int>(got.size()); });
    BOOST_TEST(result.error == "");
    BOOST_TEST(result.done == total);
    return most.load();
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(flow, FlowFixture)

BOOST_AUTO_TEST_CASE(an_admission_limit_refuses_producers_with_a_retry_after) {
  create(1000);  // one capacity slot on PostgreSQL: one bucket, the answers of SQLite's
  queues().admission_limit(tenant, queue, forgeyard::RateLimit{3, 1min});
  for (int i = 0; i < 3; ++i) send("burst");
  const forgeyard::Error e = conformance::expect_error([&] { send("over"); });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "QueueFull");
  BOOST_TEST(e.sqlstate() == "FY020");
  BOOST_TEST(std::string(e.what()) == "queue \"flow\" is over its admission limit");
  BOOST_TEST(e.detail() == "the queue admits 3 messages per 60 s; retry after 20000 ms");
  BOOST_REQUIRE(e.retry_after().has_value());
  BOOST_TEST(e.retry_after()->count() == 20000);
  BOOST_TEST(e.retryable());
  clock.advance(5s);
  BOOST_TEST(conformance::expect_error([&] { send("over"); }).retry_after()->count() == 15000);
  clock.advance(15s);
  send("one more");
  FY_CHECK_ERROR(send("over"), ErrorKind::QueueFull, "FY020");
  // All or nothing: a list of 3 against the next token.
  clock.advance(20s);
  FY_CHECK_ERROR(queues().enqueue_many(tenant, queue, {{"a"}, {"b"}, {"c"}}), ErrorKind::QueueFull, "FY020");
  BOOST_TEST(queues().stats(tenant, queue).ready == 4);
  BOOST_TEST(queues().enqueue_many(tenant, queue, {{"a"}}).size() == 1u);
  // Removed: producers are admitted again.
  queues().admission_limit(tenant, queue, std::nullopt);
  for (int i = 0; i < 5; ++i) send("free");
  BOOST_TEST(queues().stats(tenant, queue).ready == 10);
}

BOOST_AUTO_TEST_CASE(a_full_queue_has_no_retry_after) {
  create(10);
  for (int i = 0; i < 9; ++i) send("fills it");  // interactive is admitted up to 90%
  const forgeyard::Error e = conformance::expect_error([&] { send("over"); });
  BOOST_TEST(e.sqlstate() == "FY020");
  BOOST_TEST(!e.retry_after().has_value());
}

BOOST_AUTO_TEST_CASE(bad_admission_limits_are_refused) {
  create(1000);
  FY_CHECK_ERROR(queues().admission_limit(tenant, queue, forgeyard::RateLimit{0, 1s}), ErrorKind::InvalidArgument,
                 "22023", "rate must be between 1 and 1000000000");
  FY_CHECK_ERROR(queues().admission_limit(tenant, queue, forgeyard::RateLimit{5, 0s}), ErrorKind::InvalidArgument,
                 "22023", "per must be positive");
  FY_CHECK_ERROR(queues().admission_limit(tenant, queue, forgeyard::RateLimit{5, 24h * 31}), ErrorKind::InvalidArgument,
                 "22023", "per is too long");
  FY_CHECK_ERROR(queues().admission_limit(tenant, "nope", forgeyard::RateLimit{5, 1s}), ErrorKind::NotFound, "42704");
  for (int i = 0; i < 10; ++i) send("no limit was set");
}

BOOST_AUTO_TEST_CASE(concurrent_producers_never_pass_the_limit) {
  create(100000);  // eight capacity slots on PostgreSQL: eight buckets
  queues().admission_limit(tenant, queue, forgeyard::RateLimit{50, 1h});
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; ++p)
    producers.emplace_back([&] {
      auto own = open_another(2);
      for (int i = 0; i < 20; ++i) try {
          own->queues().enqueue(tenant, queue, {"p"});
          ++admitted;
        } catch (const forgeyard::Error& e) {
          if (e.kind() != ErrorKind::QueueFull) throw;
          BOOST_CHECK(e.retry_after().has_value());
          ++refused;
        }
    });
  for (auto& t : producers) t.join();
  BOOST_TEST(admitted.load() <= 50);
  BOOST_TEST(admitted.load() + refused.load() == 160);
  // One producer alone then takes whatever tokens contention left: exactly the limit in all.
  int more = 0;
  for (;; ++more) try {
      send("alone");
    } catch (const forgeyard::Error& e) {
      BOOST_TEST(forgeyard::to_string(e.kind()) == "QueueFull");
      break;
    }
  BOOST_TEST(admitted.load() + more == 50);
  BOOST_TEST(queues().stats(tenant, queue).ready == 50);
}

BOOST_AUTO_TEST_CASE(retries_over_the_budget_wait_for_the_window_without_an_attempt) {
  forgeyard::QueueOptions o;
  o.retry_budget = 0.5;
  o.retry_budget_min = 1;
  o.retry_budget_window = 1min;
  o.backoff_base = 1s;
  o.backoff_max = 2s;
  o.max_attempts = 2;
  create(1000, o);
  for (int i = 0; i < 4; ++i) send("m");
  auto got = queues().claim(tenant, queue, "w", 10);
  BOOST_REQUIRE(got.size() == 4u);
  for (const auto& d : got)
    BOOST_TEST((queues().nack(tenant, queue, d.msg_id, d.claim_token, "down") == NackOutcome::Retry));
  // Budget max(1, 0.5 x 4 admitted) = 2: two retries after their backoff, two at the window's end.
  clock.advance(2s);
  auto retried = queues().claim(tenant, queue, "w", 10);
  BOOST_TEST(retried.size() == 2u);
  BOOST_TEST(queues().stats(tenant, queue).delayed == 2);
  BOOST_TEST(queues().stats(tenant, queue).retries_delayed == 2);  // the budget's count in its window
  for (const auto& d : retried) queues().ack(tenant, queue, d.msg_id, d.claim_token);
  clock.advance(58s);
  BOOST_TEST(queues().stats(tenant, queue).retries_delayed == 0);  // that window has run out
  auto waited = queues().claim(tenant, queue, "w", 10);
  BOOST_REQUIRE(waited.size() == 2u);
  for (const auto& d : waited) BOOST_TEST(d.attempt == 2);  // the wait charged no attempt
  // Their failure now dead-letters by max_attempts, as without a budget.
  for (const auto& d : waited)
    BOOST_TEST((queues().nack(tenant, queue, d.msg_id, d.claim_token, "down") == NackOutcome::Dead));
  BOOST_TEST(queues().stats(tenant, queue).dead == 2);
}

BOOST_AUTO_TEST_CASE(bad_retry_budgets_are_refused) {
  forgeyard::QueueOptions o;
  o.retry_budget = 1.5;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023",
                 "queue option retry_budget must be a number between 0 and 1");
  o.retry_budget = 0.1;
  o.retry_budget_min = -1;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023");
  o.retry_budget_min = 1;
  o.retry_budget_window = 0s;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023",
                 "queue option retry_budget_window must be positive");
  FY_CHECK_ERROR(send("x"), ErrorKind::NotFound, "42704");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(flow_resources, FlowFixture)

namespace {
OutgoingMessage bound(const std::string& payload, const std::string& resource) {
  OutgoingMessage m{payload};
  m.resource = resource;
  return m;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_rate_limited_resource_leaves_its_messages_ready_without_an_attempt) {
  create(1000);
  forgeyard::ResourceLimits limits;
  limits.rate = forgeyard::RateLimit{2, 1min};
  queues().resource_limit(tenant, "payments", limits);
  for (int i = 0; i < 4; ++i) queues().enqueue(tenant, queue, bound("pay", "payments"));
  const auto plain = send("plain");
  auto got = queues().claim(tenant, queue, "w", 10, 1h);
  BOOST_REQUIRE(got.size() == 3u);  // the burst of 2, and the message bound to nothing
  BOOST_TEST(got[2].msg_id == plain);
  BOOST_TEST(queues().stats(tenant, queue).ready == 2);  // refused, still ready
  BOOST_TEST(queues().claim(tenant, queue, "w", 10).empty());
  clock.advance(30s);  // one token every 30 s
  auto next = queues().claim(tenant, queue, "w", 10);
  BOOST_REQUIRE(next.size() == 1u);
  BOOST_TEST(next[0].attempt == 1);  // the refusals charged no attempt
  // Removing the limit hands out the rest.
  queues().resource_limit(tenant, "payments", {});
  BOOST_TEST(queues().claim(tenant, queue, "w", 10).size() == 1u);
}

BOOST_AUTO_TEST_CASE(eight_claimers_never_hold_more_than_max_in_flight) {
  create(1000);
  forgeyard::ResourceLimits limits;
  limits.max_in_flight = 3;
  queues().resource_limit(tenant, "db", limits);
  constexpr int total = 48;
  for (int i = 0; i < total; ++i) queues().enqueue(tenant, queue, bound("job", "db"));
  const int most = most_held_by_claimers(8, 2, total);
  BOOST_TEST(most <= 3);
  BOOST_TEST(most >= 1);
  BOOST_TEST(queues().stats(tenant, queue).ready == 0);
}

// Large limits: PostgreSQL keeps them in parts (flow_resources.parts) so that concurrent claimers
// do not queue on one row; the parts add up to the limit exactly (SQLite keeps one).
BOOST_AUTO_TEST_CASE(a_limit_kept_in_parts_is_exact_and_holds_up_no_second_claimer) {
  create(1000);
  forgeyard::ResourceLimits limits;
  limits.max_in_flight = 50;  // on PostgreSQL 3 parts: 17, 17 and 16 places
  limits.rate = forgeyard::RateLimit{1000, 1min};
  queues().resource_limit(tenant, "wide", limits);
  for (int i = 0; i < 60; ++i) queues().enqueue(tenant, queue, bound("job", "wide"));
  const auto got = queues().claim(tenant, queue, "w", 100, 1h);
  BOOST_TEST(got.size() == 50u);  // one claim takes from part after part, and not one more than the limit
  auto wide = [&] {
    for (const auto& row : queues().flow_state(tenant))
      if (row.kind == "resource_limit" && row.subject == "wide") return row;
    BOOST_FAIL("no resource_limit row for wide");
    return forgeyard::FlowLimit{};
  };
  BOOST_TEST(wide().in_flight.value_or(-1) == 50);
  BOOST_TEST(wide().available.value_or(-1) == 950);
  BOOST_TEST(queues().claim(tenant, queue, "w", 100).empty());
  for (const auto& d : got) queues().ack(tenant, queue, d.msg_id, d.claim_token);
  BOOST_TEST(wide().in_flight.value_or(-1) == 0);  // every part got its places back
  if (is_postgres()) {
    // A claim whose transaction is still open holds its part's row; a second claimer takes another
    // part instead of waiting (with one row it would wait, and run into lock_timeout: 55P03).
    conformance::PgSession holder(url);
    auto run = [&](const std::string& sql) { return holder.value(sql); };
    run("BEGIN");
    BOOST_TEST(run("SELECT count(*) FROM forgeyard.claim('" + tenant + "', '" + queue + "', 'a', 1, '1 hour')") == "1");
    BOOST_TEST(exec_sql_error("SET lock_timeout = '5s'; SELECT forgeyard.claim('" + tenant + "', '" + queue +
                              "', 'b', 1, '1 hour')") == "");
    run("COMMIT");
    BOOST_TEST(wide().in_flight.value_or(-1) == 2);
    BOOST_TEST(queues().stats(tenant, queue).ready == 8);
  }
}

BOOST_AUTO_TEST_CASE(eight_claimers_never_pass_a_limit_kept_in_parts) {
  create(1000);
  forgeyard::ResourceLimits limits;
  limits.max_in_flight = 48;  // on PostgreSQL 3 parts of 16
  queues().resource_limit(tenant, "wide", limits);
  constexpr int total = 320;
  for (int i = 0; i < total; ++i) queues().enqueue(tenant, queue, bound("job", "wide"));
  const int most = most_held_by_claimers(8, 10, total);  // 8 claimers of 10 each could hold 80
  BOOST_TEST(most <= 48);
  BOOST_TEST(most >= 10);  // a whole claim's worth at least (how much more overlaps depends on the machine)
  BOOST_TEST(queues().stats(tenant, queue).ready == 0);
}

BOOST_AUTO_TEST_CASE(a_breaker_opens_on_failures_then_half_opens_and_closes) {
  forgeyard::QueueOptions o;
  o.backoff_base = 1ms;
  o.backoff_max = 1ms;
  o.max_attempts = 50;
  create(1000, o);
  forgeyard::BreakerOptions b;
  b.failure_rate = 0.5;
  b.minimum_calls = 4;
  b.window = 10;
  b.open_for = 1min;
  b.half_open_calls = 2;
  queues().breaker_configure(tenant, "smtp", b);
  BOOST_TEST(queues().breaker_state(tenant, "smtp").state == "closed");
  for (int i = 0; i < 8; ++i) queues().enqueue(tenant, queue, bound("mail", "smtp"));
  // A permanent failure is the message's own fault: it does not count.
  auto first = queues().claim(tenant, queue, "w", 1);
  queues().nack(tenant, queue, first[0].msg_id, first[0].claim_token, "bad address", true);
  auto got = queues().claim(tenant, queue, "w", 4);
  BOOST_REQUIRE(got.size() == 4u);
  for (int i = 0; i < 3; ++i) queues().nack(tenant, queue, got[i].msg_id, got[i].claim_token, "smtp down");
  BOOST_TEST(queues().breaker_state(tenant, "smtp").state == "closed");  // 3 outcomes: under minimum_calls
  queues().ack(tenant, queue, got[3].msg_id, got[3].claim_token);
  const forgeyard::BreakerStatus open = queues().breaker_state(tenant, "smtp");
  BOOST_TEST(open.state == "open");  // 3 failures of 4
  BOOST_TEST(open.failures == 3);
  BOOST_TEST(open.calls == 4);
  clock.advance(1s);
  BOOST_TEST(queues().claim(tenant, queue, "w", 10).empty());  // open: nothing bound to smtp
  BOOST_TEST(queues().stats(tenant, queue).ready == 6);
  BOOST_TEST(queues().stats(tenant, queue).dead == 1);  // only the permanent failure
  clock.advance(1min);
  BOOST_TEST(queues().breaker_state(tenant, "smtp").state == "half_open");
  auto trial = queues().claim(tenant, queue, "w", 10);
  BOOST_REQUIRE(trial.size() == 2u);  // half_open_calls
  BOOST_TEST(queues().claim(tenant, queue, "w", 10).empty());
  // One trial fails: open again.
  queues().nack(tenant, queue, trial[0].msg_id, trial[0].claim_token, "still down");
  BOOST_TEST(queues().breaker_state(tenant, "smtp").state == "open");
  queues().ack(tenant, queue, trial[1].msg_id, trial[1].claim_token);
  clock.advance(61s);
  trial = queues().claim(tenant, queue, "w", 10);
  BOOST_REQUIRE(trial.size() == 2u);
  for (const auto& d : trial) queues().ack(tenant, queue, d.msg_id, d.claim_token);
  const forgeyard::BreakerStatus closed = queues().breaker_state(tenant, "smtp");
  BOOST_TEST(closed.state == "closed");
  BOOST_TEST(closed.calls == 0);
  BOOST_TEST(queues().claim(tenant, queue, "w", 10).size() == 3u);  // the rest, all at once
  queues().breaker_configure(tenant, "smtp", std::nullopt);
  FY_CHECK_ERROR(queues().breaker_state(tenant, "smtp"), ErrorKind::NotFound, "42704",
                 "resource \"smtp\" has no breaker for tenant \"" + tenant + "\"");
}

BOOST_AUTO_TEST_CASE(bad_resource_options_are_refused) {
  forgeyard::ResourceLimits limits;
  limits.rate = forgeyard::RateLimit{0, 1s};
  FY_CHECK_ERROR(queues().resource_limit(tenant, "r", limits), ErrorKind::InvalidArgument, "22023",
                 "resource option rate must be an integer between 1 and 1000000000");
  limits.rate = forgeyard::RateLimit{5, 0s};
  FY_CHECK_ERROR(queues().resource_limit(tenant, "r", limits), ErrorKind::InvalidArgument, "22023",
                 "resource option per must be positive");
  limits = {};
  limits.max_in_flight = 0;
  FY_CHECK_ERROR(queues().resource_limit(tenant, "r", limits), ErrorKind::InvalidArgument, "22023",
                 "resource option max_in_flight must be an integer between 1 and 1000000000");
  forgeyard::BreakerOptions b;
  b.failure_rate = 1.5;
  FY_CHECK_ERROR(queues().breaker_configure(tenant, "r", b), ErrorKind::InvalidArgument, "22023",
                 "breaker option failure_rate must be a number above 0 and at most 1");
  b = {};
  b.minimum_calls = 20;
  b.window = 10;
  FY_CHECK_ERROR(queues().breaker_configure(tenant, "r", b), ErrorKind::InvalidArgument, "22023",
                 "breaker option minimum_calls must not exceed window");
  FY_CHECK_ERROR(queues().resource_limit(tenant, "", {}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(queues().breaker_state(tenant, "r"), ErrorKind::NotFound, "42704");
  // A message names its resource with the same rules.
  create(1000);
  FY_CHECK_ERROR(queues().enqueue(tenant, queue, bound("x", "")), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_SUITE_END()
