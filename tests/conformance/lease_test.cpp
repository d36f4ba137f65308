// Leases with fencing epochs: docs/sql-api.md#leases, on every backend.
#include <boost/test/unit_test.hpp>

#include <string>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::LeaseState;
using forgeyard::unix_usecs;

namespace {
constexpr forgeyard::Duration ttl = 30s;
}

BOOST_FIXTURE_TEST_SUITE(leases, conformance::Backend)

BOOST_AUTO_TEST_CASE(first_grant_has_epoch_at_least_the_clock_and_expires_after_ttl) {
  auto g = store->leases().acquire(tenant, "job/1", "worker-a", ttl);
  BOOST_TEST(g.acquired);
  BOOST_TEST(g.holder == "worker-a");
  BOOST_TEST(g.epoch >= unix_usecs(clock.now()));
  BOOST_TEST(unix_usecs(g.expires_at) == unix_usecs(clock.now() + ttl));
  auto info = store->leases().get(tenant, "job/1");
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->owner == "worker-a");
  BOOST_TEST(info->epoch == g.epoch);
  BOOST_TEST(forgeyard::to_string(info->state) == "live");
}

BOOST_AUTO_TEST_CASE(contention_is_an_answer_naming_the_holder) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  clock.advance(1s);
  auto b = store->leases().acquire(tenant, "job", "worker-b", ttl);
  BOOST_TEST(!b.acquired);
  BOOST_TEST(b.holder == "worker-a");
  BOOST_TEST(b.epoch == a.epoch);
  BOOST_TEST(unix_usecs(b.expires_at) == unix_usecs(a.expires_at));
}

BOOST_AUTO_TEST_CASE(same_owner_reacquire_keeps_epoch_and_moves_expiry) {
  auto first = store->leases().acquire(tenant, "job", "worker-a", ttl);
  clock.advance(10s);
  auto again = store->leases().acquire(tenant, "job", "worker-a", ttl);
  BOOST_TEST(again.acquired);
  BOOST_TEST(again.epoch == first.epoch);
  BOOST_TEST(unix_usecs(again.expires_at) == unix_usecs(clock.now() + ttl));
}

BOOST_AUTO_TEST_CASE(a_same_owner_reacquire_never_shortens_the_lease) {
  auto first = store->leases().acquire(tenant, "job", "worker-a", 60s);
  auto again = store->leases().acquire(tenant, "job", "worker-a", 10s);
  BOOST_TEST(again.epoch == first.epoch);
  BOOST_TEST(unix_usecs(again.expires_at) == unix_usecs(first.expires_at));
  BOOST_TEST(unix_usecs(store->leases().get(tenant, "job")->expires_at) == unix_usecs(first.expires_at));
}

BOOST_AUTO_TEST_CASE(a_reaped_grant_is_over_even_for_a_caller_whose_clock_is_behind) {
  // A renew that read its clock before the reaper ran must not revive the grant.
  auto a = store->leases().acquire(tenant, "job", "worker-a", 10s);
  clock.advance(11s);
  BOOST_REQUIRE(store->leases().reap(10, tenant).size() == 1u);
  clock.advance(-2s);  // as the late renewal saw time
  const std::string stale = "lease epoch " + std::to_string(a.epoch) + " is not the live grant of \"job\"";
  FY_CHECK_ERROR(store->leases().renew(tenant, "job", a.epoch, 10s), ErrorKind::StaleFence, "FY001", stale);
  FY_CHECK_ERROR(store->leases().fence(tenant, "job", a.epoch), ErrorKind::StaleFence, "FY001", stale);
  BOOST_TEST(!store->leases().release(tenant, "job", a.epoch));
  auto again = store->leases().acquire(tenant, "job", "worker-a", 10s);
  BOOST_TEST(again.acquired);
  BOOST_TEST(again.epoch > a.epoch);  // a new grant, not the reaped one extended
}

BOOST_AUTO_TEST_CASE(expired_means_expires_at_not_after_now) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  clock.set(a.expires_at - 1us);
  BOOST_TEST(!store->leases().acquire(tenant, "job", "worker-b", ttl).acquired);
  clock.set(a.expires_at);
  auto b = store->leases().acquire(tenant, "job", "worker-b", ttl);
  BOOST_TEST(b.acquired);
  BOOST_TEST(b.epoch > a.epoch);
}

BOOST_AUTO_TEST_CASE(epochs_strictly_increase_even_when_the_clock_goes_back) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  BOOST_TEST(store->leases().release(tenant, "job", a.epoch));
  clock.advance(-1h);  // a restore onto a machine whose clock is behind
  auto b = store->leases().acquire(tenant, "job", "worker-b", ttl);
  BOOST_TEST(b.acquired);
  BOOST_TEST(b.epoch == a.epoch + 1);
  BOOST_TEST(store->leases().release(tenant, "job", b.epoch));
  clock.advance(2h);
  auto c = store->leases().acquire(tenant, "job", "worker-c", ttl);
  BOOST_TEST(c.epoch == unix_usecs(clock.now()));  // the clock is ahead again: epoch follows it
}

BOOST_AUTO_TEST_CASE(release_is_true_only_for_the_live_grant_and_the_epoch_is_never_reused) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  BOOST_TEST(!store->leases().release(tenant, "job", a.epoch + 1));
  BOOST_TEST(store->leases().release(tenant, "job", a.epoch));
  BOOST_TEST(!store->leases().release(tenant, "job", a.epoch));
  auto info = store->leases().get(tenant, "job");
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(forgeyard::to_string(info->state) == "released");
  BOOST_TEST(info->epoch == a.epoch);
  auto again = store->leases().acquire(tenant, "job", "worker-a", ttl);
  BOOST_TEST(again.acquired);
  BOOST_TEST(again.epoch > a.epoch);
}

BOOST_AUTO_TEST_CASE(release_of_an_expired_grant_is_false) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  clock.advance(ttl);
  BOOST_TEST(!store->leases().release(tenant, "job", a.epoch));
  BOOST_TEST(forgeyard::to_string(store->leases().get(tenant, "job")->state) == "expired");
}

BOOST_AUTO_TEST_CASE(renew_extends_the_live_grant_only) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  clock.advance(20s);
  auto expires = store->leases().renew(tenant, "job", a.epoch, 60s);
  BOOST_TEST(unix_usecs(expires) == unix_usecs(clock.now() + 60s));
  BOOST_TEST(unix_usecs(store->leases().get(tenant, "job")->expires_at) == unix_usecs(expires));
  FY_CHECK_ERROR(store->leases().renew(tenant, "job", a.epoch - 1, ttl), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(store->leases().renew(tenant, "nothing-here", a.epoch, ttl), ErrorKind::StaleFence, "FY001");
}

BOOST_AUTO_TEST_CASE(renew_after_expiry_release_or_takeover_is_stale) {
  auto a = store->leases().acquire(tenant, "expiring", "worker-a", ttl);
  clock.advance(ttl);
  FY_CHECK_ERROR(store->leases().renew(tenant, "expiring", a.epoch, ttl), ErrorKind::StaleFence, "FY001",
                 "lease epoch " + std::to_string(a.epoch) + " is not the live grant of \"expiring\"");

  auto b = store->leases().acquire(tenant, "released", "worker-a", ttl);
  BOOST_TEST(store->leases().release(tenant, "released", b.epoch));
  FY_CHECK_ERROR(store->leases().renew(tenant, "released", b.epoch, ttl), ErrorKind::StaleFence, "FY001",
                 "lease epoch " + std::to_string(b.epoch) + " is not the live grant of \"released\"");

  auto c = store->leases().acquire(tenant, "taken", "worker-a", ttl);
  clock.advance(ttl + 1s);
  auto d = store->leases().acquire(tenant, "taken", "worker-b", ttl);
  BOOST_TEST(d.acquired);
  FY_CHECK_ERROR(store->leases().renew(tenant, "taken", c.epoch, ttl), ErrorKind::StaleFence, "FY001",
                 "lease epoch " + std::to_string(c.epoch) + " is not the live grant of \"taken\"");
  BOOST_TEST(store->leases().get(tenant, "taken")->owner == "worker-b");
}

BOOST_AUTO_TEST_CASE(fence_accepts_the_live_grant_and_refuses_a_stale_one) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", ttl);
  store->leases().fence(tenant, "job", a.epoch);
  clock.advance(ttl + 1s);
  FY_CHECK_ERROR(store->leases().fence(tenant, "job", a.epoch), ErrorKind::StaleFence, "FY001");
  auto b = store->leases().acquire(tenant, "job", "worker-b", ttl);
  store->leases().fence(tenant, "job", b.epoch);
  FY_CHECK_ERROR(store->leases().fence(tenant, "job", a.epoch), ErrorKind::StaleFence, "FY001");
}

BOOST_AUTO_TEST_CASE(reap_returns_each_expired_grant_once_and_skips_released_ones) {
  const std::string t = unique("reap");
  auto a = store->leases().acquire(t, "a", "worker-a", 10s);
  auto b = store->leases().acquire(t, "b", "worker-b", 20s);
  auto c = store->leases().acquire(t, "c", "worker-c", 10s);
  store->leases().acquire(t, "live", "worker-d", 1h);
  BOOST_TEST(store->leases().release(t, "c", c.epoch));
  clock.advance(30s);
  auto first = store->leases().reap(1, t);
  BOOST_REQUIRE(first.size() == 1u);
  BOOST_TEST(first[0].resource == "a");  // oldest expiry first
  BOOST_TEST(first[0].epoch == a.epoch);
  BOOST_TEST(first[0].holder == "worker-a");
  BOOST_TEST(first[0].tenant == t);
  BOOST_TEST(unix_usecs(first[0].expired_at) == unix_usecs(a.expires_at));
  auto second = store->leases().reap(100, t);
  BOOST_REQUIRE(second.size() == 1u);
  BOOST_TEST(second[0].resource == "b");
  BOOST_TEST(second[0].epoch == b.epoch);
  BOOST_TEST(store->leases().reap(100, t).empty());
  BOOST_TEST(forgeyard::to_string(store->leases().get(t, "a")->state) == "reaped");
  // A new grant of a reaped resource that expires is reported again, once.
  auto a2 = store->leases().acquire(t, "a", "worker-x", 10s);
  clock.advance(11s);
  auto third = store->leases().reap(100, t);
  BOOST_REQUIRE(third.size() == 1u);
  BOOST_TEST(third[0].epoch == a2.epoch);
}

BOOST_AUTO_TEST_CASE(reap_filters_by_tenant) {
  const std::string t1 = unique("reap-t1"), t2 = unique("reap-t2");
  store->leases().acquire(t1, "r", "w", 1s);
  store->leases().acquire(t2, "r", "w", 1s);
  clock.advance(2s);
  auto only_t1 = store->leases().reap(100, t1);
  BOOST_REQUIRE(only_t1.size() == 1u);
  BOOST_TEST(only_t1[0].tenant == t1);
  BOOST_TEST(forgeyard::to_string(store->leases().get(t2, "r")->state) == "expired");
}

BOOST_AUTO_TEST_CASE(tenants_are_independent) {
  const std::string other = unique("other-tenant");
  auto a = store->leases().acquire(tenant, "shared-name", "worker-a", ttl);
  clock.advance(1s);
  auto b = store->leases().acquire(other, "shared-name", "worker-b", ttl);
  BOOST_TEST(b.epoch != a.epoch);
  BOOST_TEST(a.acquired);
  BOOST_TEST(b.acquired);
  FY_CHECK_ERROR(store->leases().renew(other, "shared-name", a.epoch, ttl), ErrorKind::StaleFence, "FY001");
  BOOST_TEST(!store->leases().release(other, "shared-name", a.epoch));
  BOOST_TEST(store->leases().get(tenant, "shared-name")->owner == "worker-a");
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_with_its_code_and_changes_nothing) {
  auto& leases = store->leases();
  auto a = leases.acquire(tenant, "job", "worker-a", ttl);
  FY_CHECK_ERROR(leases.acquire("", "job", "w", ttl), ErrorKind::InvalidArgument, "22023", "tenant must not be empty");
  FY_CHECK_ERROR(leases.acquire(tenant, "", "w", ttl), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(leases.acquire(tenant, "job", "", ttl), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(leases.acquire(std::string(129, 't'), "job", "w", ttl), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(leases.acquire(tenant, std::string(513, 'r'), "w", ttl), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(leases.acquire(tenant, "job", std::string(257, 'o'), ttl), ErrorKind::InvalidArgument, "22001",
                 "owner is longer than 256 bytes");
  FY_CHECK_ERROR(leases.acquire(tenant, "job", "worker-b", 0s), ErrorKind::InvalidArgument, "22023",
                 "ttl must be positive");
  FY_CHECK_ERROR(leases.acquire(tenant, "job", "worker-b", -5s), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(leases.acquire(tenant, "job", "worker-b", 24h * 7 + 1us), ErrorKind::InvalidArgument, "22023",
                 "ttl is too long");
  FY_CHECK_ERROR(leases.renew(tenant, "job", a.epoch, 0s), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(leases.reap(0), ErrorKind::InvalidArgument, "22023");
  const forgeyard::Error named = conformance::expect_error([&] { leases.acquire(tenant, "job", "w", 0s); });
  BOOST_TEST(std::string(named.what()).find("ttl") != std::string::npos);
  // Nothing changed: same holder, epoch and expiry.
  auto info = leases.get(tenant, "job");
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->owner == "worker-a");
  BOOST_TEST(info->epoch == a.epoch);
  BOOST_TEST(unix_usecs(info->expires_at) == unix_usecs(a.expires_at));
  FY_CHECK_ERROR(leases.get(tenant, ""), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(the_longest_names_and_ttl_are_accepted) {
  auto g = store->leases().acquire(std::string(128, 't'), std::string(512, 'r'), std::string(256, 'o'), 24h * 7);
  BOOST_TEST(g.acquired);
}

BOOST_AUTO_TEST_SUITE_END()
