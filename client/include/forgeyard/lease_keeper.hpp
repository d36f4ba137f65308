// Holds a lease and renews it in the background. The holder asks should_stop() (or waits on
// the stop token) before each step of protected work: it turns true before the lease can have
// expired, judged by the local monotonic clock from the moment each request was sent.
#pragma once

#include "forgeyard/export.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "forgeyard/leases.hpp"

namespace forgeyard {

struct LeaseKeeperOptions {
  Duration ttl = std::chrono::seconds(30);
  // Renew when this fraction of the ttl has passed since the last successful request.
  double renew_at = 1.0 / 3.0;
  // Stop this long before the earliest possible expiry (network delay, clock rate drift).
  Duration safety_margin = std::chrono::seconds(1);
  bool release_on_destroy = true;
  // Called once, from the keeper's thread, when the holder must stop.
  std::function<void()> on_lost;
};

class FORGEYARD_API LeaseKeeper {
 public:
  // Acquires the lease and starts renewing; nullopt if another owner holds it.
  static std::unique_ptr<LeaseKeeper> acquire(Leases& leases, std::string tenant, std::string resource,
                                              const std::string& owner, LeaseKeeperOptions options = {});
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  std::int64_t epoch() const noexcept { return epoch_; }
  // True once the lease may have expired or was lost: stop protected work.
  bool should_stop() const noexcept;
  std::stop_token stop_token() const noexcept { return lost_.get_token(); }
  // Time left before should_stop() turns true by the monotonic clock.
  Duration remaining() const;
  // Stops renewing and releases the lease now (true if it was still the live grant).
  bool release();

 private:
  using Steady = std::chrono::steady_clock;
  LeaseKeeper(Leases& leases, std::string tenant, std::string resource, std::int64_t epoch,
              Steady::time_point valid_until, LeaseKeeperOptions options);
  void run(std::stop_token stop);
  void watch(std::stop_token stop);
  void mark_lost();
  void stop_threads();  // stops and joins the renewer and the watchdog

  Leases& leases_;
  const std::string tenant_;
  const std::string resource_;
  const std::int64_t epoch_;
  const LeaseKeeperOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  Steady::time_point valid_until_;  // request start + ttl - safety margin
  std::stop_source lost_;
  std::atomic<bool> released_{false};
  std::condition_variable_any validity_changed_;
  std::jthread thread_;    // renews
  std::jthread watchdog_;  // tells the holder to stop at valid_until_, even while a renewal hangs
};

}  // namespace forgeyard
