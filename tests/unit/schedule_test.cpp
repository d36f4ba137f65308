// Workflow schedules (core/schedule.hpp): specs, tz database zones across their transitions, the
// fires a tick starts and the ones it skips.
#include <boost/test/unit_test.hpp>

#include "core/errors.hpp"
#include "core/schedule.hpp"
#include "core/timestamp.hpp"
#include "core_errors.hpp"

namespace sc = fy::core::schedule;

using unit::code_of;

namespace {

std::int64_t at(const char* iso) {
  return *fy::core::parse_timestamp(iso);
}

std::string iso(std::int64_t usecs) {
  return fy::core::format_timestamp(usecs);
}

std::string next(const char* spec, const char* zone, const char* after) {
  return iso(sc::next_fire(sc::parse_spec(spec), *sc::Zone::load(zone), at(after)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schedules)

BOOST_AUTO_TEST_CASE(specs_are_cron_macros_or_every) {
  BOOST_TEST(code_of([] { sc::parse_spec("* * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("60 * * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("* 24 * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("* * 0 * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("* * * 13 *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("* * * * 8"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("5-1 * * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("*/0 * * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("1,,2 * * * *"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("@sometimes"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("@every"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("@every 0s"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("@every 367d"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec("@every 5 fortnights"); }) == "22023");
  BOOST_TEST(code_of([] { sc::parse_spec(std::string(201, '*')); }) == "22001");
  BOOST_TEST(sc::parse_spec("@every 1h30m").every_usecs == 5'400'000'000);
  BOOST_TEST(sc::parse_spec("@every 2 minutes 5 seconds").every_usecs == 125'000'000);
  BOOST_TEST(sc::parse_spec("@Daily").hours.count() == 1u);
  BOOST_TEST(sc::parse_spec("0 9 * jan-MAR mon-fri").weekdays.count() == 5u);
  BOOST_TEST(sc::parse_spec("0 0 * * 7").weekdays.test(0));  // 7 is Sunday too
  BOOST_TEST(sc::parse_spec("*/15 * * * *").minutes.count() == 4u);
  BOOST_TEST(sc::parse_spec("10-50/20 * * * *").minutes.count() == 3u);  // 10, 30, 50
}

BOOST_AUTO_TEST_CASE(fires_come_in_order_in_utc) {
  BOOST_TEST(next("@every 15m", "UTC", "2030-01-01T00:07:00Z") == "2030-01-01T00:15:00.000000Z");
  BOOST_TEST(next("@every 15m", "UTC", "2030-01-01T00:15:00Z") == "2030-01-01T00:30:00.000000Z");
  BOOST_TEST(next("30 9 * * MON-FRI", "UTC", "2030-01-04T10:00:00Z") == "2030-01-07T09:30:00.000000Z");  // Fri -> Mon
  BOOST_TEST(next("0 0 1 * *", "UTC", "2030-01-31T12:00:00Z") == "2030-02-01T00:00:00.000000Z");
  BOOST_TEST(next("0 12 29 2 *", "UTC", "2030-01-01T00:00:00Z") == "2032-02-29T12:00:00.000000Z");  // a leap day
  // Both days restricted: either one fires (the 13th, or a Friday).
  BOOST_TEST(next("0 0 13 * FRI", "UTC", "2030-01-01T00:00:00Z") == "2030-01-04T00:00:00.000000Z");
  BOOST_TEST(next("0 0 13 * FRI", "UTC", "2030-01-11T00:00:00Z") == "2030-01-13T00:00:00.000000Z");
  BOOST_TEST(code_of([] { next("0 0 30 2 *", "UTC", "2030-01-01T00:00:00Z"); }) == "22023");  // never
  // A step in a day field still restricts it (the '*' only makes the two fields AND).
  BOOST_TEST(next("0 0 */2 * *", "UTC", "2030-01-01T00:00:00Z") == "2030-01-03T00:00:00.000000Z");
  BOOST_TEST(next("0 0 * * */3", "UTC", "2030-01-01T00:00:00Z") == "2030-01-02T00:00:00.000000Z");  // Wed
  BOOST_TEST(next("0 0 */2 * 1", "UTC", "2030-01-01T00:00:00Z") == "2030-01-07T00:00:00.000000Z");  // an odd Monday
}

BOOST_AUTO_TEST_CASE(zones_come_from_the_tz_database_across_their_transitions) {
  BOOST_TEST(code_of([] { sc::Zone::load("Mars/Olympus_Mons"); }) == "22023");
  BOOST_TEST(code_of([] { sc::Zone::load("../../etc/passwd"); }) == "22023");
  BOOST_TEST(code_of([] { sc::Zone::load("/etc/passwd"); }) == "22023");
  const auto berlin = sc::Zone::load("Europe/Berlin");
  BOOST_TEST(berlin->offset_at(at("2030-01-15T12:00:00Z") / 1'000'000) == 3600);
  BOOST_TEST(berlin->offset_at(at("2030-07-15T12:00:00Z") / 1'000'000) == 7200);
  // Past the file's last transition (2037), from its POSIX rule.
  BOOST_TEST(berlin->offset_at(at("2050-01-15T12:00:00Z") / 1'000'000) == 3600);
  BOOST_TEST(berlin->offset_at(at("2050-07-15T12:00:00Z") / 1'000'000) == 7200);
  BOOST_TEST(berlin->offset_at(at("2050-03-27T00:59:59Z") / 1'000'000) == 3600);  // last Sunday of March 2050
  BOOST_TEST(berlin->offset_at(at("2050-03-27T01:00:00Z") / 1'000'000) == 7200);
  BOOST_TEST(sc::Zone::load("America/New_York")->offset_at(at("2030-07-01T00:00:00Z") / 1'000'000) == -14400);
  BOOST_TEST(sc::Zone::load("Australia/Sydney")->offset_at(at("2045-01-01T00:00:00Z") / 1'000'000) == 39600);

  // 02:30 every day in Berlin: on 2030-03-31 the clocks jump from 02:00 to 03:00 (no fire that
  // day); on 2030-10-27 they go back from 03:00 to 02:00 (02:30 happens twice: one fire).
  BOOST_TEST(next("30 2 * * *", "Europe/Berlin", "2030-03-29T12:00:00Z") == "2030-03-30T01:30:00.000000Z");
  BOOST_TEST(next("30 2 * * *", "Europe/Berlin", "2030-03-30T01:30:00Z") == "2030-04-01T00:30:00.000000Z");
  BOOST_TEST(next("30 2 * * *", "Europe/Berlin", "2030-10-26T12:00:00Z") == "2030-10-27T00:30:00.000000Z");
  BOOST_TEST(next("30 2 * * *", "Europe/Berlin", "2030-10-27T00:30:00Z") == "2030-10-28T01:30:00.000000Z");
  // Every hour on the hour in New York across the fall-back: 01:00 once, then 02:00 EST.
  BOOST_TEST(next("0 * * * *", "America/New_York", "2030-11-03T05:00:00Z") == "2030-11-03T07:00:00.000000Z");
  BOOST_TEST(next("0 9 * * *", "America/New_York", "2030-07-01T00:00:00Z") == "2030-07-01T13:00:00.000000Z");
}

BOOST_AUTO_TEST_CASE(a_tick_starts_the_newest_due_fires_and_skips_the_rest) {
  const auto utc = sc::Zone::load("UTC");
  const sc::Spec hourly = sc::parse_spec("@hourly");
  const sc::Due none = sc::due(hourly, *utc, at("2030-01-01T06:00:00Z"), at("2030-01-01T05:30:00Z"), 0);
  BOOST_TEST(none.start.empty());
  BOOST_TEST(none.next == at("2030-01-01T06:00:00Z"));
  const sc::Due one = sc::due(hourly, *utc, at("2030-01-01T00:00:00Z"), at("2030-01-01T05:30:00Z"), 0);
  BOOST_TEST(one.start.size() == 1u);
  BOOST_TEST(iso(one.start.at(0)) == "2030-01-01T05:00:00.000000Z");
  BOOST_TEST(one.skipped == 5);
  BOOST_TEST(iso(one.next) == "2030-01-01T06:00:00.000000Z");
  const sc::Due three = sc::due(hourly, *utc, at("2030-01-01T00:00:00Z"), at("2030-01-01T05:30:00Z"), 2);
  BOOST_TEST(three.start.size() == 3u);
  BOOST_TEST(iso(three.start.at(0)) == "2030-01-01T03:00:00.000000Z");  // oldest first
  BOOST_TEST(three.skipped == 3);
  // More missed fires than are counted: the newest are still found.
  const sc::Due many =
      sc::due(sc::parse_spec("@every 1s"), *utc, at("2030-01-01T00:00:00Z"), at("2030-01-11T00:00:00Z"), 1);
  BOOST_TEST(many.start.size() == 2u);
  BOOST_TEST(iso(many.start.at(0)) == "2030-01-10T23:59:59.000000Z");
  BOOST_TEST(iso(many.start.at(1)) == "2030-01-11T00:00:00.000000Z");
  BOOST_TEST(many.skipped >= sc::max_counted_fires - 2);
  BOOST_TEST(iso(many.next) == "2030-01-11T00:00:01.000000Z");
  // One fire more than are counted: the newest three are the last two counted and that one.
  const std::int64_t t0 = at("2030-01-01T00:00:00Z");
  const sc::Due edge = sc::due(sc::parse_spec("@every 1s"), *utc, t0, t0 + sc::max_counted_fires * 1'000'000, 2);
  BOOST_TEST_REQUIRE(edge.start.size() == 3u);
  BOOST_TEST(edge.start.at(0) == t0 + (sc::max_counted_fires - 2) * 1'000'000);
  BOOST_TEST(edge.start.at(2) == t0 + sc::max_counted_fires * 1'000'000);
  BOOST_TEST(sc::run_key("nightly", at("2030-01-01T00:00:00Z")) == "nightly@2030-01-01T00:00:00.000000Z");
}

BOOST_AUTO_TEST_CASE(options_are_checked) {
  sc::Options o;
  sc::set_option(o, "timezone", "string", "Europe/Berlin");
  BOOST_TEST(o.timezone == "Europe/Berlin");
  sc::set_option(o, "catch_up", "number", "3");
  BOOST_TEST(o.catch_up == 3);
  BOOST_TEST(code_of([&] { sc::set_option(o, "catch_up", "number", "1001"); }) == "22023");
  BOOST_TEST(code_of([&] { sc::set_option(o, "catch_up", "number", "1.5"); }) == "22023");
  BOOST_TEST(code_of([&] { sc::set_option(o, "timezone", "string", "Nowhere/Else"); }) == "22023");
  BOOST_TEST(code_of([&] { sc::set_option(o, "colour", "string", "red"); }) == "22023");
}

BOOST_AUTO_TEST_SUITE_END()
