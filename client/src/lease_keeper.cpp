#include "forgeyard/lease_keeper.hpp"

#include "forgeyard/error.hpp"
#include "instruments.hpp"

namespace forgeyard {

std::unique_ptr<LeaseKeeper> LeaseKeeper::acquire(Leases& leases, std::string tenant, std::string resource,
                                                  const std::string& owner, LeaseKeeperOptions options) {
  // Validity is counted from before the request left: the server's expiry cannot be earlier.
  const auto sent = Steady::now();
  LeaseGrant grant = leases.acquire(tenant, resource, owner, options.ttl);
  if (!grant.acquired) return nullptr;
  const auto valid_until = sent + options.ttl - options.safety_margin;
  return std::unique_ptr<LeaseKeeper>(
      new LeaseKeeper(leases, std::move(tenant), std::move(resource), grant.epoch, valid_until, std::move(options)));
}

LeaseKeeper::LeaseKeeper(Leases& leases, std::string tenant, std::string resource, std::int64_t epoch,
                         Steady::time_point valid_until, LeaseKeeperOptions options)
    : leases_(leases),
      tenant_(std::move(tenant)),
      resource_(std::move(resource)),
      epoch_(epoch),
      options_(std::move(options)),
      valid_until_(valid_until) {
  if (options_.safety_margin >= options_.ttl)
    throw Error(ErrorKind::InvalidArgument, "22023", "lease keeper safety_margin must be shorter than ttl");
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  watchdog_ = std::jthread([this](std::stop_token stop) { watch(stop); });
}

LeaseKeeper::~LeaseKeeper() {
  stop_threads();
  if (options_.release_on_destroy && !released_.exchange(true) && !should_stop()) {
    try {
      leases_.release(tenant_, resource_, epoch_);
    } catch (const Error& e) {
      detail::log().warn("lease keeper could not release {}: {}", resource_, e.what());
    }
  }
}

void LeaseKeeper::stop_threads() {
  thread_.request_stop();
  watchdog_.request_stop();
  wake_.notify_all();
  validity_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

bool LeaseKeeper::should_stop() const noexcept {
  if (lost_.stop_requested()) return true;
  std::lock_guard lock(mutex_);
  return Steady::now() >= valid_until_;
}

Duration LeaseKeeper::remaining() const {
  if (lost_.stop_requested()) return Duration::zero();
  std::lock_guard lock(mutex_);
  auto left = std::chrono::duration_cast<Duration>(valid_until_ - Steady::now());
  return left > Duration::zero() ? left : Duration::zero();
}

bool LeaseKeeper::release() {
  stop_threads();
  if (released_.exchange(true)) return false;
  mark_lost();
  return leases_.release(tenant_, resource_, epoch_);
}

void LeaseKeeper::mark_lost() {
  if (lost_.request_stop() && options_.on_lost && !released_) options_.on_lost();
}

void LeaseKeeper::watch(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    const auto deadline = valid_until_;
    validity_changed_.wait_until(lock, stop, deadline, [&] { return valid_until_ != deadline; });
    if (stop.stop_requested()) return;
    if (Steady::now() >= valid_until_) {
      lock.unlock();
      mark_lost();
      return;
    }
  }
}

void LeaseKeeper::run(std::stop_token stop) {
  const auto renew_every = std::chrono::duration_cast<Duration>(options_.ttl * options_.renew_at);
  auto next_renew = Steady::now() + renew_every;
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    // Wake for the next renewal or for the moment the lease can no longer be trusted.
    const auto wake_at = std::min(next_renew, valid_until_);
    wake_.wait_until(lock, stop, wake_at, [] { return false; });
    if (stop.stop_requested()) return;
    if (Steady::now() >= valid_until_) {
      lock.unlock();
      mark_lost();
      return;
    }
    if (Steady::now() < next_renew) continue;
    lock.unlock();
    const auto sent = Steady::now();
    try {
      leases_.renew(tenant_, resource_, epoch_, options_.ttl);
      lock.lock();
      valid_until_ = sent + options_.ttl - options_.safety_margin;
      next_renew = sent + renew_every;
      validity_changed_.notify_all();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::StaleFence) {
        detail::log().warn("lease {} epoch {} was lost: {}", resource_, epoch_, e.what());
        mark_lost();
        return;
      }
      // Transient: try again soon; valid_until_ still bounds how long the holder may go on.
      detail::log().info("lease {} renewal failed, retrying: {}", resource_, e.what());
      lock.lock();
      next_renew = Steady::now() + std::max(renew_every / 10, Duration(std::chrono::milliseconds(50)));
    }
  }
}

}  // namespace forgeyard
