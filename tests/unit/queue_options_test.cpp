// The client's public QueueOptions spells its defaults as literals (a public header cannot
// include core/), so this test keeps them equal to the core's, which the extension applies.
#include <boost/test/unit_test.hpp>

#include <iterator>

#include "core/core.hpp"
#include "forgeyard/queues.hpp"
#include "queue_options.hpp"

namespace core = fy::core;

BOOST_AUTO_TEST_SUITE(queue_option_defaults)

BOOST_AUTO_TEST_CASE(client_defaults_equal_the_cores_field_by_field) {
  const forgeyard::QueueOptions client;
  const core::QueueOptions& c = core::default_queue_options;
  BOOST_TEST(client.max_messages == c.max_messages);
  BOOST_TEST(client.max_bytes == c.max_bytes);
  BOOST_TEST(client.max_payload_bytes == c.max_payload_bytes);
  BOOST_TEST(client.visibility_timeout.count() == c.visibility_usecs);
  BOOST_TEST(client.max_attempts == c.max_attempts);
  BOOST_TEST(client.backoff_base.count() == c.backoff_base_usecs);
  BOOST_TEST(client.backoff_max.count() == c.backoff_max_usecs);
  BOOST_TEST(client.partition_ordered == c.partitioned);
  BOOST_TEST(client.keep_dead_letter_payload == c.keep_dead_payload);
  BOOST_TEST(client.retain_acked.count() == c.retain_acked_usecs);
  BOOST_TEST(client.max_dead == c.max_dead);
  BOOST_TEST(client.dead_letter_retention.count() == c.dead_retention_usecs);
  BOOST_TEST(client.dedup_window.count() == c.dedup_window_usecs);
  BOOST_TEST(std::size(client.admit_percent) == std::size(c.admit_percent));
  for (int p = 0; p < core::priority_classes; ++p) BOOST_TEST(client.admit_percent[p] == c.admit_percent[p]);
  BOOST_TEST(client.notify == c.notify);
  BOOST_TEST(client.retry_budget.has_value() == c.retry_budget.has_value());
  BOOST_TEST(client.retry_budget_min == c.retry_budget_min);
  BOOST_TEST(client.retry_budget_window.count() == c.retry_budget_window_usecs);
  BOOST_TEST(client.max_in_flight_per_key.has_value() == (c.max_in_flight_per_key > 0));
  BOOST_TEST(client.fairness == c.fairness);
  BOOST_TEST(client.aging.count() == c.aging_usecs);
}

BOOST_AUTO_TEST_CASE(the_conversion_to_the_core_keeps_every_default) {
  // core_options is how the shim applies the client's options; applied to the defaults it must
  // give the core's defaults, or a queue made through the shim would differ from queue_create's.
  const core::QueueOptions o = forgeyard::detail::core_options(forgeyard::QueueOptions{});
  const core::QueueOptions& c = core::default_queue_options;
  BOOST_TEST(o.max_messages == c.max_messages);
  BOOST_TEST(o.max_bytes == c.max_bytes);
  BOOST_TEST(o.max_payload_bytes == c.max_payload_bytes);
  BOOST_TEST(o.visibility_usecs == c.visibility_usecs);
  BOOST_TEST(o.max_attempts == c.max_attempts);
  BOOST_TEST(o.backoff_base_usecs == c.backoff_base_usecs);
  BOOST_TEST(o.backoff_max_usecs == c.backoff_max_usecs);
  BOOST_TEST(o.partitioned == c.partitioned);
  BOOST_TEST(o.keep_dead_payload == c.keep_dead_payload);
  BOOST_TEST(o.retain_acked_usecs == c.retain_acked_usecs);
  BOOST_TEST(o.max_dead == c.max_dead);
  BOOST_TEST(o.dead_retention_usecs == c.dead_retention_usecs);
  BOOST_TEST(o.dedup_window_usecs == c.dedup_window_usecs);
  for (int p = 0; p < core::priority_classes; ++p) BOOST_TEST(o.admit_percent[p] == c.admit_percent[p]);
  BOOST_TEST(o.notify == c.notify);
  BOOST_TEST(o.retry_budget.has_value() == c.retry_budget.has_value());
  BOOST_TEST(o.retry_budget_min == c.retry_budget_min);
  BOOST_TEST(o.retry_budget_window_usecs == c.retry_budget_window_usecs);
  BOOST_TEST(o.max_in_flight_per_key == c.max_in_flight_per_key);
  BOOST_TEST(o.fairness == c.fairness);
  BOOST_TEST(o.aging_usecs == c.aging_usecs);
  BOOST_CHECK_NO_THROW(core::validate(c));
}

BOOST_AUTO_TEST_CASE(max_attempts_is_bounded_the_same_way_from_text_and_from_a_struct) {
  // The extension parses text options, the SQLite shim passes a struct: validate bounds both.
  core::QueueOptions o = core::default_queue_options;
  o.max_attempts = core::max_queue_attempts;
  BOOST_CHECK_NO_THROW(core::validate(o));
  o.max_attempts = core::max_queue_attempts + 1;
  try {
    core::validate(o);
    BOOST_FAIL("max_attempts 1001 was accepted");
  } catch (const fy::core::Error& e) {
    BOOST_TEST(std::string(e.what()) == "queue option max_attempts must be at most 1000");
  }
  core::QueueOptions parsed = core::default_queue_options;
  BOOST_CHECK_THROW(core::set_queue_option(parsed, "max_attempts", "1001"), fy::core::Error);
  core::set_queue_option(parsed, "max_attempts", "1000");
  BOOST_TEST(parsed.max_attempts == 1000);
}

BOOST_AUTO_TEST_CASE(priority_names_follow_the_enum) {
  // The compile-time check in queue_options.hpp, seen from the public API.
  for (int p = 0; p < core::priority_classes; ++p) {
    const auto priority = static_cast<forgeyard::Priority>(p);
    BOOST_TEST(forgeyard::to_string(priority) == core::priority_names[p]);
    BOOST_TEST((forgeyard::priority_from_string(core::priority_names[p]) == priority));
  }
}

BOOST_AUTO_TEST_SUITE_END()
