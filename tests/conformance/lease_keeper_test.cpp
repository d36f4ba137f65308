// The lease keeper renews in the background and tells the holder to stop in time.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(lease_keeper, conformance::Backend)

BOOST_AUTO_TEST_CASE(keeps_the_lease_alive_past_its_ttl) {
  auto real = open_real_clock();
  forgeyard::LeaseKeeperOptions options;
  options.ttl = 1500ms;
  options.safety_margin = 200ms;
  auto keeper = forgeyard::LeaseKeeper::acquire(real->leases(), tenant, "kept", "worker-a", options);
  BOOST_REQUIRE(keeper != nullptr);
  const auto first_expiry = real->leases().get(tenant, "kept")->expires_at;
  std::this_thread::sleep_for(2500ms);  // longer than the ttl: only renewals keep it
  BOOST_TEST(!keeper->should_stop());
  auto info = real->leases().get(tenant, "kept");
  BOOST_TEST(forgeyard::to_string(info->state) == "live");
  BOOST_TEST(info->epoch == keeper->epoch());
  BOOST_TEST((info->expires_at > first_expiry));
  BOOST_TEST(keeper->release());
  BOOST_TEST(keeper->should_stop());
  BOOST_TEST(forgeyard::to_string(real->leases().get(tenant, "kept")->state) == "released");
}

BOOST_AUTO_TEST_CASE(a_contended_lease_yields_no_keeper) {
  store->leases().acquire(tenant, "held", "someone-else", 1h);
  auto keeper = forgeyard::LeaseKeeper::acquire(store->leases(), tenant, "held", "worker-a", {});
  BOOST_TEST(keeper == nullptr);
}

BOOST_AUTO_TEST_CASE(tells_the_holder_to_stop_when_the_lease_is_taken_over) {
  std::mutex m;
  std::condition_variable cv;
  bool lost = false;
  forgeyard::LeaseKeeperOptions options;
  options.ttl = 900ms;
  options.safety_margin = 100ms;
  options.on_lost = [&] {
    std::lock_guard lock(m);
    lost = true;
    cv.notify_all();
  };
  auto keeper = forgeyard::LeaseKeeper::acquire(store->leases(), tenant, "job", "worker-a", options);
  BOOST_REQUIRE(keeper != nullptr);
  clock.advance(1h);  // on the store's clock the lease has long expired
  auto b = store->leases().acquire(tenant, "job", "worker-b", 1h);
  BOOST_REQUIRE(b.acquired);
  std::unique_lock lock(m);
  BOOST_TEST(cv.wait_for(lock, 10s, [&] { return lost; }));
  BOOST_TEST(keeper->should_stop());
  BOOST_TEST(keeper->stop_token().stop_requested());
}

BOOST_AUTO_TEST_CASE(stops_by_the_monotonic_clock_when_renewals_cannot_get_through) {
  // The store refuses every renewal with a transient error (not a stale fence): the keeper must
  // still tell the holder to stop before ttl has passed since its last successful request.
  struct Unreachable final : forgeyard::Leases {
    forgeyard::Leases& real;
    explicit Unreachable(forgeyard::Leases& r) : real(r) {}
    forgeyard::LeaseGrant acquire(std::string_view t, std::string_view r, std::string_view o,
                                  forgeyard::Duration d) override {
      return real.acquire(t, r, o, d);
    }
    forgeyard::TimePoint renew(std::string_view, std::string_view, std::int64_t, forgeyard::Duration) override {
      throw forgeyard::Error(forgeyard::ErrorKind::Unavailable, "08006", "network unreachable");
    }
    bool release(std::string_view t, std::string_view r, std::int64_t e) override { return real.release(t, r, e); }
    void fence(std::string_view t, std::string_view r, std::int64_t e) override { real.fence(t, r, e); }
    std::optional<forgeyard::LeaseInfo> get(std::string_view t, std::string_view r, forgeyard::ReadClass c) override {
      return real.get(t, r, c);
    }
    std::vector<forgeyard::ReapedLease> reap(int n, std::optional<std::string> t) override { return real.reap(n, t); }
  } unreachable(store->leases());
  forgeyard::LeaseKeeperOptions options;
  options.ttl = 1s;
  options.safety_margin = 200ms;
  const auto before = std::chrono::steady_clock::now();
  auto keeper = forgeyard::LeaseKeeper::acquire(unreachable, tenant, "job", "worker-a", options);
  BOOST_REQUIRE(keeper != nullptr);
  BOOST_TEST(!keeper->should_stop());
  while (!keeper->should_stop()) std::this_thread::sleep_for(10ms);
  // It gave up no later than ttl - margin after the acquire request was sent (plus scheduling).
  BOOST_TEST(keeper->remaining().count() == 0);
  BOOST_TEST((std::chrono::steady_clock::now() - before >= 800ms));
}

BOOST_AUTO_TEST_CASE(the_stop_signal_fires_on_time_while_a_renewal_hangs) {
  // A renewal stuck in the network must not delay the signal: the holder is told to stop by
  // ttl - safety margin after the acquire was sent, not when the renewal returns.
  struct Hanging final : forgeyard::Leases {
    forgeyard::Leases& real;
    explicit Hanging(forgeyard::Leases& r) : real(r) {}
    forgeyard::LeaseGrant acquire(std::string_view t, std::string_view r, std::string_view o,
                                  forgeyard::Duration d) override {
      return real.acquire(t, r, o, d);
    }
    forgeyard::TimePoint renew(std::string_view t, std::string_view r, std::int64_t e, forgeyard::Duration d) override {
      std::this_thread::sleep_for(5s);
      return real.renew(t, r, e, d);
    }
    bool release(std::string_view t, std::string_view r, std::int64_t e) override { return real.release(t, r, e); }
    void fence(std::string_view t, std::string_view r, std::int64_t e) override { real.fence(t, r, e); }
    std::optional<forgeyard::LeaseInfo> get(std::string_view t, std::string_view r, forgeyard::ReadClass c) override {
      return real.get(t, r, c);
    }
    std::vector<forgeyard::ReapedLease> reap(int n, std::optional<std::string> t) override { return real.reap(n, t); }
  } hanging(store->leases());
  std::atomic<bool> lost{false};
  forgeyard::LeaseKeeperOptions options;
  options.ttl = 1s;
  options.safety_margin = 200ms;
  options.on_lost = [&] { lost = true; };
  const auto before = std::chrono::steady_clock::now();
  auto keeper = forgeyard::LeaseKeeper::acquire(hanging, tenant, "job", "worker-a", options);
  BOOST_REQUIRE(keeper != nullptr);
  while (!keeper->stop_token().stop_requested() && std::chrono::steady_clock::now() - before < 4s)
    std::this_thread::sleep_for(10ms);
  // Signalled while the renewal (5 s) still hangs: no later than the deadline plus scheduling.
  BOOST_TEST(keeper->stop_token().stop_requested());
  BOOST_TEST(lost.load());
  BOOST_TEST(keeper->should_stop());
  BOOST_TEST((std::chrono::steady_clock::now() - before >= 800ms));
}

BOOST_AUTO_TEST_SUITE_END()
