// Delivery fencing and the lease rules of the core (core/delivery.hpp, core/lease.hpp), which
// both backends call for ack / nack / extend and renew / fence.
#include <boost/test/unit_test.hpp>

#include <string>

#include "core/core.hpp"
#include "core_errors.hpp"

namespace core = fy::core;

using unit::code_of;
using unit::message_of;

BOOST_AUTO_TEST_SUITE(delivery_fencing)

namespace {
const std::int64_t now = 1'000'000;
const core::DeliveryRow claimed{"pending", 7, now + 10};  // token 7, visible again after now
const core::DeliveryRow lapsed{"pending", 7, now};        // its visibility ran out, nobody re-claimed
const core::DeliveryRow nacked{"pending", std::nullopt, now + 10};
}  // namespace

BOOST_AUTO_TEST_CASE(ack_accepts_the_current_claim_even_after_its_visibility_ran_out) {
  BOOST_TEST((core::decide_ack(&claimed, 1, 7) == core::AckAction::finish));
  BOOST_TEST((core::decide_ack(&lapsed, 1, 7) == core::AckAction::finish));
}

BOOST_AUTO_TEST_CASE(ack_of_an_acked_dead_or_gone_message_is_a_no_op) {
  const core::DeliveryRow acked{"acked", 7, now + 10};
  const core::DeliveryRow dead{"dead", std::nullopt, now};
  BOOST_TEST((core::decide_ack(&acked, 1, 7) == core::AckAction::no_op));
  BOOST_TEST((core::decide_ack(&acked, 1, 99) == core::AckAction::no_op));
  BOOST_TEST((core::decide_ack(&dead, 1, 7) == core::AckAction::no_op));
  BOOST_TEST((core::decide_ack(nullptr, 1, 7) == core::AckAction::no_op));
}

BOOST_AUTO_TEST_CASE(a_taken_over_or_nacked_claim_is_fy001_for_ack_nack_and_extend) {
  const core::DeliveryRow taken_over{"pending", 8, now + 10};
  for (const core::DeliveryRow* row : {&taken_over, &nacked}) {
    BOOST_TEST(code_of([&] { core::decide_ack(row, 1, 7); }) == "FY001");
    BOOST_TEST(code_of([&] { core::check_nack(row, 1, 7); }) == "FY001");
    BOOST_TEST(code_of([&] { core::check_extend(row, 1, 7, now); }) == "FY001");
  }
  BOOST_TEST(message_of([] { core::check_nack(&nacked, 12, 7); }) ==
             "claim token 7 is not the current delivery of message 12");
}

BOOST_AUTO_TEST_CASE(nack_needs_a_pending_message_with_the_current_claim) {
  BOOST_TEST(code_of([] { core::check_nack(&claimed, 1, 7); }) == "none");
  BOOST_TEST(code_of([] { core::check_nack(&lapsed, 1, 7); }) == "none");
  const core::DeliveryRow dead{"dead", std::nullopt, now};
  BOOST_TEST(code_of([&] { core::check_nack(&dead, 1, 7); }) == "FY001");
  BOOST_TEST(code_of([] { core::check_nack(nullptr, 1, 7); }) == "FY001");
}

BOOST_AUTO_TEST_CASE(extend_after_the_visibility_ran_out_is_fy001) {
  BOOST_TEST(code_of([] { core::check_extend(&claimed, 1, 7, now); }) == "none");
  BOOST_TEST(code_of([] { core::check_extend(&claimed, 1, 7, now + 9); }) == "none");
  BOOST_TEST(code_of([] { core::check_extend(&claimed, 1, 7, now + 10); }) == "FY001");
  BOOST_TEST(code_of([] { core::check_extend(&lapsed, 1, 7, now); }) == "FY001");
  BOOST_TEST(code_of([] { core::check_extend(nullptr, 1, 7, now); }) == "FY001");
}

BOOST_AUTO_TEST_CASE(the_stale_lease_error_names_epoch_and_resource) {
  BOOST_TEST(code_of([] { core::throw_stale_lease("orders/1", 42); }) == "FY001");
  BOOST_TEST(message_of([] { core::throw_stale_lease("orders/1", 42); }) ==
             "lease epoch 42 is not the live grant of \"orders/1\"");
}

BOOST_AUTO_TEST_CASE(the_live_lease_sql_is_is_live) {
  BOOST_TEST(core::live_lease_sql("?1") == "released_at IS NULL AND reaped_at IS NULL AND expires_at > ?1");
  BOOST_TEST(core::live_lease_sql("$4", "OPERATOR(pg_catalog.>)") ==
             "released_at IS NULL AND reaped_at IS NULL AND expires_at OPERATOR(pg_catalog.>) $4");
  // The same rule in C++: live until expires_at, not at it; never when released or reaped.
  BOOST_TEST(core::is_live({"a", 1, now + 1, false, false}, now));
  BOOST_TEST(!core::is_live({"a", 1, now, false, false}, now));
  BOOST_TEST(!core::is_live({"a", 1, now + 1, true, false}, now));
  BOOST_TEST(!core::is_live({"a", 1, now + 1, false, true}, now));
}

BOOST_AUTO_TEST_CASE(unit_random_is_in_zero_to_one_and_varies) {
  double lowest = 1, highest = 0;
  for (int i = 0; i < 10000; ++i) {
    const double r = core::unit_random();
    BOOST_REQUIRE(r >= 0.0);
    BOOST_REQUIRE(r < 1.0);
    lowest = std::min(lowest, r), highest = std::max(highest, r);
  }
  BOOST_TEST(lowest < 0.1);
  BOOST_TEST(highest > 0.9);
}

BOOST_AUTO_TEST_SUITE_END()
