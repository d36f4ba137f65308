// Flow control (docs/operations.md, "Flow control"): admission limits of producers and the retry
// budget of nacks, on every backend.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

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
  for (const auto& d : retried) queues().ack(tenant, queue, d.msg_id, d.claim_token);
  clock.advance(58s);
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
