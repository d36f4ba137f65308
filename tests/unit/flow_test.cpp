// Flow control's rules in the core (core/flow.hpp): GCRA buckets, their split over capacity
// slots, the retry-after text, and the retry budget's sliding window.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>

#include "core/errors.hpp"
#include "core/flow.hpp"
#include "core/queue_options.hpp"

namespace flow = fy::core::flow;
using fy::core::usecs_per_second;

BOOST_AUTO_TEST_SUITE(flow_rules)

BOOST_AUTO_TEST_CASE(a_full_bucket_gives_its_burst_then_one_token_per_emission) {
  const flow::Rate r{3, 60 * usecs_per_second};
  std::optional<std::int64_t> tat;
  BOOST_TEST(flow::take(r, tat, 0, 5) == 3);  // the burst, no more
  BOOST_TEST(flow::take(r, tat, 0, 1) == 0);
  BOOST_TEST(flow::wait_usecs(r, tat, 0) == 20 * usecs_per_second);
  BOOST_TEST(flow::wait_usecs(r, tat, 5 * usecs_per_second) == 15 * usecs_per_second);
  BOOST_TEST(flow::take(r, tat, 20 * usecs_per_second - 1, 1) == 0);
  BOOST_TEST(flow::take(r, tat, 20 * usecs_per_second, 1) == 1);
  BOOST_TEST(flow::take(r, tat, 20 * usecs_per_second, 1) == 0);
  // Idle for long: the bucket holds its burst again, never more.
  BOOST_TEST(flow::take(r, tat, 3600 * usecs_per_second, 10) == 3);
}

BOOST_AUTO_TEST_CASE(a_rate_that_does_not_divide_its_interval_never_runs_faster) {
  const flow::Rate r{3, usecs_per_second};  // 333333.33 us per token, rounded up
  std::optional<std::int64_t> tat;
  std::int64_t taken = 0;
  for (std::int64_t t = 0; t < 10 * usecs_per_second; t += 1000) taken += flow::take(r, tat, t, 1);
  BOOST_TEST(taken <= 3 + 30);  // the burst plus the rate over 10 s
  BOOST_TEST(taken >= 3 + 29);
}

BOOST_AUTO_TEST_CASE(the_slot_buckets_add_up_to_the_limit_and_none_is_empty) {
  for (std::int64_t tokens : {1, 3, 7, 8, 10, 1000}) {
    const flow::Rate r{tokens, usecs_per_second};
    const int n = flow::admission_slots(r, 8);
    std::int64_t sum = 0;
    for (int s = 0; s < n; ++s) {
      BOOST_TEST(flow::slot_rate(r, n, s).tokens >= 1);
      sum += flow::slot_rate(r, n, s).tokens;
    }
    BOOST_TEST(sum == tokens);
  }
}

BOOST_AUTO_TEST_CASE(the_retry_after_is_read_back_from_the_detail) {
  try {
    flow::throw_admission_refused("q", {3, 60 * usecs_per_second}, 19'999'001);
    BOOST_FAIL("no error");
  } catch (const fy::core::Error& e) {
    BOOST_TEST(std::string(e.sqlstate()) == "FY020");
    BOOST_TEST(e.detail() == "the queue admits 3 messages per 60 s; retry after 20000 ms");
    BOOST_TEST(flow::retry_after_ms(e.detail()).value() == 20000);
  }
  BOOST_TEST(!flow::retry_after_ms("class bulk is admitted up to 70% of max_messages").has_value());
  BOOST_TEST(!flow::retry_after_ms("retry after soon").has_value());
}

BOOST_AUTO_TEST_CASE(bad_limits_are_22023_naming_the_argument) {
  BOOST_CHECK_THROW(flow::check_rate("rate", 0, "per", {0, 0, 1}), fy::core::Error);
  BOOST_CHECK_THROW(flow::check_rate("rate", 1'000'000'001, "per", {0, 0, 1}), fy::core::Error);
  BOOST_CHECK_THROW(flow::check_rate("rate", 1, "per", {1, 0, 0}), fy::core::Error);
  BOOST_CHECK_THROW(flow::check_rate("rate", 1, "per", {0, 0, 0}), fy::core::Error);
  BOOST_TEST(flow::check_rate("rate", 5, "per", {0, 1, 0}) == 86400 * usecs_per_second);
}

BOOST_AUTO_TEST_CASE(the_retry_budget_counts_within_a_sliding_window) {
  fy::core::QueueOptions o;
  o.retry_budget = 0.2;
  o.retry_budget_min = 2;
  o.retry_budget_window_usecs = 60 * usecs_per_second;
  flow::RetryWindow w{0, 0, 0, 0, 0};
  // 100 admitted in the window: 20 retries, then the rest wait for the window's end.
  int admitted = 0;
  for (int i = 0; i < 30; ++i) admitted += flow::admit_retry(o, w, 100, usecs_per_second).admitted ? 1 : 0;
  BOOST_TEST(admitted == 20);
  BOOST_TEST(w.delayed == 10);
  const flow::RetryDecision late = flow::admit_retry(o, w, 100, usecs_per_second);
  BOOST_TEST(!late.admitted);
  BOOST_TEST(late.not_before == 60 * usecs_per_second);
  // The next window, 15 s in, nothing new admitted: the last window's 100 weigh 3/4: 15 retries.
  admitted = 0;
  for (int i = 0; i < 30; ++i) admitted += flow::admit_retry(o, w, 100, 75 * usecs_per_second).admitted ? 1 : 0;
  BOOST_TEST(w.start == 60 * usecs_per_second);
  BOOST_TEST(admitted == 15);
  // A window after a gap starts afresh: only the minimum.
  admitted = 0;
  for (int i = 0; i < 30; ++i) admitted += flow::admit_retry(o, w, 100, 1000 * usecs_per_second).admitted ? 1 : 0;
  BOOST_TEST(admitted == 2);
  // Without a budget every retry is admitted and nothing is counted.
  o.retry_budget.reset();
  flow::RetryWindow none;
  BOOST_TEST(flow::admit_retry(o, none, 0, 0).admitted);
  BOOST_TEST(none.retries == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(resource_rules)

namespace {
flow::ResourceConfig breaker_only() {
  flow::ResourceConfig c;
  c.breaker = flow::BreakerConfig{0.5, 4, 6, 60 * usecs_per_second, 2};
  return c;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_breaker_opens_only_with_enough_calls_and_failures) {
  const flow::ResourceConfig c = breaker_only();
  flow::ResourceState s;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::none));
    flow::record_outcome(c, s, flow::Outcome::failure, 0);
  }
  BOOST_TEST((s.state == flow::BreakerState::closed));  // 3 < minimum_calls
  flow::record_outcome(c, s, flow::Outcome::success, 0);
  BOOST_TEST((s.state == flow::BreakerState::open));  // 3 of 4 failed
  BOOST_TEST(s.failures() == 3);
  BOOST_TEST((flow::admit_delivery(c, s, 10, false) == flow::Refusal::open));
  // Half-open after open_for: two trials, then nothing until they end.
  BOOST_TEST((flow::admit_delivery(c, s, 60 * usecs_per_second, false) == flow::Refusal::none));
  BOOST_TEST((s.state == flow::BreakerState::half_open));
  BOOST_TEST((flow::admit_delivery(c, s, 60 * usecs_per_second, false) == flow::Refusal::none));
  BOOST_TEST((flow::admit_delivery(c, s, 60 * usecs_per_second, false) == flow::Refusal::open));
  flow::record_outcome(c, s, flow::Outcome::success, 61 * usecs_per_second);
  BOOST_TEST((s.state == flow::BreakerState::half_open));
  flow::record_outcome(c, s, flow::Outcome::success, 61 * usecs_per_second);
  BOOST_TEST((s.state == flow::BreakerState::closed));
  BOOST_TEST(s.outcomes.empty());
  BOOST_TEST(s.transitions == 3);
}

BOOST_AUTO_TEST_CASE(a_failed_trial_opens_again_and_neutral_outcomes_do_not_count) {
  const flow::ResourceConfig c = breaker_only();
  flow::ResourceState s;
  for (int i = 0; i < 10; ++i) flow::record_outcome(c, s, flow::Outcome::neutral, 0);
  BOOST_TEST((s.state == flow::BreakerState::closed));
  BOOST_TEST(s.outcomes.empty());
  for (int i = 0; i < 4; ++i) flow::record_outcome(c, s, flow::Outcome::failure, 0);
  BOOST_TEST((s.state == flow::BreakerState::open));
  BOOST_TEST((flow::admit_delivery(c, s, 60 * usecs_per_second, false) == flow::Refusal::none));
  flow::record_outcome(c, s, flow::Outcome::failure, 61 * usecs_per_second);
  BOOST_TEST((s.state == flow::BreakerState::open));
  BOOST_TEST(s.open_until == 121 * usecs_per_second);
  // The window keeps only its last `window` outcomes.
  flow::ResourceState w;
  flow::ResourceConfig wide = breaker_only();
  wide.breaker->minimum_calls = 6;
  for (int i = 0; i < 20; ++i) flow::record_outcome(wide, w, flow::Outcome::success, 0);
  BOOST_TEST(w.outcomes.size() == 6u);
}

BOOST_AUTO_TEST_CASE(max_in_flight_counts_places_and_a_lapsed_delivery_keeps_its_own) {
  flow::ResourceConfig c;
  c.max_in_flight = 2;
  flow::ResourceState s;
  BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::none));
  BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::none));
  BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::in_flight));
  BOOST_TEST((flow::admit_delivery(c, s, 0, true) == flow::Refusal::none));  // a lapsed one, taken over
  BOOST_TEST(s.in_flight == 2);
  flow::record_outcome(c, s, flow::Outcome::success, 0);
  BOOST_TEST(s.in_flight == 1);
  flow::record_outcome(c, s, flow::Outcome::success, 0);
  flow::record_outcome(c, s, flow::Outcome::success, 0);  // never below zero
  BOOST_TEST(s.in_flight == 0);
}

BOOST_AUTO_TEST_CASE(a_rate_limit_with_a_burst_refuses_without_taking_a_place) {
  flow::ResourceConfig c;
  c.rate = flow::Rate{1, usecs_per_second, 3};
  c.max_in_flight = 10;
  flow::ResourceState s;
  for (int i = 0; i < 3; ++i) BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::none));
  BOOST_TEST((flow::admit_delivery(c, s, 0, false) == flow::Refusal::rate));
  BOOST_TEST(s.in_flight == 3);
  BOOST_TEST((flow::admit_delivery(c, s, usecs_per_second, false) == flow::Refusal::none));
}

BOOST_AUTO_TEST_CASE(large_limits_are_kept_in_parts_that_add_up_exactly) {
  flow::ResourceConfig c;
  BOOST_TEST(flow::resource_parts(c) == 1);  // no limit
  c.max_in_flight = 31;
  BOOST_TEST(flow::resource_parts(c) == 1);  // under two parts of 16: one row, exact to the place
  c.max_in_flight = 50;
  BOOST_TEST(flow::resource_parts(c) == 3);
  c.rate = flow::Rate{1000, 60 * usecs_per_second, 20};
  BOOST_TEST(flow::resource_parts(c) == 1);  // the burst is the smallest limit
  c.rate->burst = 0;                         // the burst is the rate
  c.max_in_flight = 1'000'000;
  BOOST_TEST(flow::resource_parts(c) == 8);  // at most 8
  c.breaker = flow::BreakerConfig{};
  BOOST_TEST(flow::resource_parts(c) == 1);  // a breaker's window is one sequence of outcomes
  c.breaker.reset();
  c.rate = flow::Rate{1000, 60 * usecs_per_second, 100};
  c.max_in_flight = 50;
  c.parts = flow::resource_parts(c);
  std::int64_t places = 0, tokens = 0, burst = 0;
  for (int i = 0; i < c.parts; ++i) {
    const flow::ResourceConfig p = flow::part_config(c, i);
    BOOST_TEST(p.parts == 1);
    places += *p.max_in_flight;
    tokens += p.rate->tokens;
    burst += p.rate->burst;
    BOOST_TEST(p.rate->per_usecs == 60 * usecs_per_second);
  }
  BOOST_TEST(places == 50);
  BOOST_TEST(tokens == 1000);
  BOOST_TEST(burst == 100);
  BOOST_TEST(*flow::part_config(c, 0).max_in_flight == 17);  // the remainders to the first parts
  BOOST_TEST(*flow::part_config(c, 2).max_in_flight == 16);
}

BOOST_AUTO_TEST_CASE(options_are_checked_by_name) {
  flow::ResourceConfig c;
  BOOST_CHECK_THROW(flow::set_limit_option(c, "rate", "-1"), fy::core::Error);
  BOOST_CHECK_THROW(flow::set_limit_option(c, "rates", "1"), fy::core::Error);
  flow::set_limit_option(c, "burst", "4");
  BOOST_CHECK_THROW(flow::validate(c), fy::core::Error);  // a burst without a rate
  flow::BreakerConfig b;
  BOOST_CHECK_THROW(flow::set_breaker_option(b, "failure_rate", "0"), fy::core::Error);
  BOOST_CHECK_THROW(flow::set_breaker_option(b, "failure_rate", "x"), fy::core::Error);
  flow::set_breaker_option(b, "failure_rate", "0.25");
  BOOST_TEST(b.failure_rate == 0.25);
  BOOST_CHECK_THROW(flow::set_breaker_option(b, "window", "0"), fy::core::Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(key_limit_rules)

BOOST_AUTO_TEST_CASE(a_key_is_counted_by_its_partition_or_by_its_fairness_key_under_a_limit) {
  fy::core::QueueOptions o;
  const std::optional<std::string> p = "p", f = "f";
  BOOST_TEST(!fy::core::group_key(o, p, f).has_value());  // neither ordering nor a limit
  o.max_in_flight_per_key = 2;
  BOOST_TEST(*fy::core::group_key(o, p, f) == "f");
  o.max_in_flight_per_key = 0;
  o.partitioned = true;
  BOOST_TEST(*fy::core::group_key(o, p, f) == "p");
  o.max_in_flight_per_key = 2;
  BOOST_CHECK_THROW(fy::core::validate(o), fy::core::Error);  // not both
}

BOOST_AUTO_TEST_CASE(heads_are_promoted_up_to_the_limit_and_never_beyond_what_waits) {
  BOOST_TEST(fy::core::heads_to_promote(2, 5, 1) == 1);  // one place free
  BOOST_TEST(fy::core::heads_to_promote(3, 5, 0) == 3);  // all free, five pending
  BOOST_TEST(fy::core::heads_to_promote(3, 2, 0) == 2);  // fewer waiting than places
  BOOST_TEST(fy::core::heads_to_promote(2, 4, 2) == 0);  // at the limit
  BOOST_TEST(fy::core::heads_to_promote(1, 4, 3) == 0);  // above it (the limit was lowered)
  BOOST_TEST(fy::core::heads_to_promote(2, 1, 1) == 0);  // nothing waits
}

BOOST_AUTO_TEST_CASE(aging_lifts_a_class_per_interval_waited_and_never_above_realtime) {
  constexpr std::int64_t a = 1000;
  BOOST_TEST(fy::core::aged_class(5, 999, a) == 5);      // bulk, not yet an interval
  BOOST_TEST(fy::core::aged_class(5, 1000, a) == 4);     // one interval: background
  BOOST_TEST(fy::core::aged_class(5, 2500, a) == 3);     // two: interactive
  BOOST_TEST(fy::core::aged_class(5, 3000, a) == 2);     // three: realtime
  BOOST_TEST(fy::core::aged_class(5, 1000000, a) == 2);  // never above realtime
  BOOST_TEST(fy::core::aged_class(2, 1000000, a) == 2);  // realtime does not move
  BOOST_TEST(fy::core::aged_class(1, 1000000, a) == 1);  // nor security_control
  BOOST_TEST(fy::core::aged_class(0, 1000000, a) == 0);  // nor emergency
  BOOST_TEST(fy::core::aged_class(5, 1000000, 0) == 5);  // no aging
  fy::core::QueueOptions o;
  o.aging_usecs = a;
  o.fairness = true;
  BOOST_CHECK_THROW(fy::core::validate(o), fy::core::Error);  // not with fairness
}

BOOST_AUTO_TEST_CASE(heads_made_by_an_enqueue_are_read_back_from_the_counts_after_it) {
  // A new key of 5 with a limit of 2: pending 5, heads 2: the first two are heads.
  BOOST_TEST(fy::core::heads_made(5, 5, 2) == 2);
  // One more to a key with room and none waiting: pending 2, heads 2: a head.
  BOOST_TEST(fy::core::heads_made(1, 2, 2) == 1);
  // One more to a key at its limit (none waiting before): pending 3, heads 2: waits.
  BOOST_TEST(fy::core::heads_made(1, 3, 2) == 0);
  // Room after a raised limit, but two were waiting: they go first, this one waits too.
  BOOST_TEST(fy::core::heads_made(1, 5, 2) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
