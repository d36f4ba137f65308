// The pure logic shared by the extension and the SQLite shim.
#include <boost/test/unit_test.hpp>

#include "core/core.hpp"
#include "core_errors.hpp"

namespace core = fy::core;

using unit::code_of;

BOOST_AUTO_TEST_SUITE(core_logic)

BOOST_AUTO_TEST_CASE(names_are_checked_for_null_empty_and_length) {
  BOOST_TEST(code_of([] { core::check_name("tenant", false, "", 10); }) == "22004");
  BOOST_TEST(code_of([] { core::check_name("tenant", true, "", 10); }) == "22023");
  BOOST_TEST(code_of([] { core::check_name("tenant", true, "12345678901", 10); }) == "22001");
  BOOST_TEST(code_of([] { core::check_name("tenant", true, "1234567890", 10); }) == "none");
  try {
    core::check_name("resource", true, "", 10);
  } catch (const core::Error& e) {
    BOOST_TEST(std::string(e.what()).find("resource") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(durations_are_positive_bounded_and_month_free) {
  const std::int64_t max = core::max_lease_ttl_usecs;
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {1, 0, 0}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 0, 0}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 0, -1}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 1, -core::usecs_per_day}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 7, 1}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 2147483647, 0}, max); }) == "22023");
  BOOST_TEST(code_of([&] { core::check_duration("ttl", {0, 0, INT64_MAX}, max); }) == "22023");
  BOOST_TEST(core::check_duration("ttl", {0, 7, 0}, max) == max);
  BOOST_TEST(core::check_duration("ttl", {0, 1, 5}, max) == core::usecs_per_day + 5);  // a day is 24 h
  BOOST_TEST(core::check_duration("ttl", {0, 0, 1}, max) == 1);
}

BOOST_AUTO_TEST_CASE(next_epoch_is_strictly_greater_and_follows_the_clock) {
  BOOST_TEST(core::next_epoch(0, 1000) == 1000);
  BOOST_TEST(core::next_epoch(1000, 1000) == 1001);
  BOOST_TEST(core::next_epoch(5000, 1000) == 5001);  // clock behind: +1
  BOOST_TEST(core::next_epoch(5000, 9000) == 9000);  // clock ahead: the clock
  BOOST_TEST(code_of([] { core::next_epoch(INT64_MAX, 1); }) == "XX000");
}

BOOST_AUTO_TEST_CASE(acquire_decisions) {
  using core::AcquireAction;
  auto d = core::decide_acquire(nullptr, "a", 100);
  BOOST_TEST((d.action == AcquireAction::insert));
  BOOST_TEST(d.epoch == 100);
  core::LeaseRow live{"a", 500, 200, false};
  BOOST_TEST((core::decide_acquire(&live, "a", 150).action == AcquireAction::extend));
  BOOST_TEST(core::decide_acquire(&live, "a", 150).epoch == 500);
  BOOST_TEST((core::decide_acquire(&live, "b", 150).action == AcquireAction::contended));
  BOOST_TEST((core::decide_acquire(&live, "b", 200).action == AcquireAction::take_over));  // expires_at <= now
  BOOST_TEST(core::decide_acquire(&live, "b", 200).epoch == 501);
  BOOST_TEST((core::decide_acquire(&live, "a", 200).action == AcquireAction::take_over));  // own expired: new epoch
  core::LeaseRow released{"a", 500, 900, true};
  BOOST_TEST((core::decide_acquire(&released, "a", 150).action == AcquireAction::take_over));
}

BOOST_AUTO_TEST_CASE(backoff_is_capped_full_jitter) {
  BOOST_TEST(core::backoff_full_jitter(1, 100, 10000, 0.0) == 0);
  BOOST_TEST(core::backoff_full_jitter(1, 100, 10000, 0.999999) <= 100);
  BOOST_TEST(core::backoff_full_jitter(3, 100, 10000, 0.999999) <= 400);
  BOOST_TEST(core::backoff_full_jitter(3, 100, 10000, 0.999999) >= 399);
  BOOST_TEST(core::backoff_full_jitter(60, 100, 10000, 0.999999) <= 10000);
  BOOST_TEST(core::backoff_full_jitter(60, 100, 10000, 0.999999) >= 9999);
  BOOST_TEST(core::backoff_full_jitter(5, 100, 10000, 0.5) == (1600 + 1) / 2);
}

BOOST_AUTO_TEST_CASE(sha256_test_vectors) {
  BOOST_TEST(core::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(core::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(core::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  BOOST_TEST(core::sha256_hex(std::string(1000000, 'a')) ==
             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The whole view and only it: an embedded NUL counts, bytes past the view's end do not.
  BOOST_TEST(core::sha256_hex(std::string("a\0b", 3)) ==
             "59b271ae1bbcb1d31d41929817f4b16fb439eb4f31520b5ad1d5ce98920a7138");
  BOOST_TEST(core::sha256_hex(std::string_view("abcd").substr(1, 2)) ==
             "1e0bbd6c686ba050b8eb03ffeedc64fdc9d80947fce821abbe5d6dc8d252c5ac");
  BOOST_TEST(core::sha256(std::string_view("abc")) == *core::from_hex(core::sha256_hex("abc")));
}

BOOST_AUTO_TEST_SUITE_END()
