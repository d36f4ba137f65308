#include "core/lease.hpp"

#include <limits>

#include "core/errors.hpp"

namespace fy::core {

std::int64_t next_epoch(std::int64_t previous, std::int64_t now_unix_usecs) {
  if (previous == std::numeric_limits<std::int64_t>::max())
    throw Error(sqlstate::internal_error, "lease epoch space exhausted");
  return previous + 1 > now_unix_usecs ? previous + 1 : now_unix_usecs;
}

std::string live_lease_sql(std::string_view now, std::string_view greater) {
  return "released_at IS NULL AND reaped_at IS NULL AND expires_at " + std::string(greater) + " " + std::string(now);
}

const char* lease_state(const LeaseRow& row, std::int64_t now) {
  if (row.released) return "released";
  if (row.reaped) return "reaped";
  return is_expired(row.expires_at, now) ? "expired" : "live";
}

AcquireDecision decide_acquire(const LeaseRow* current, std::string_view owner, std::int64_t now_unix_usecs) {
  if (current == nullptr) return {AcquireAction::insert, next_epoch(0, now_unix_usecs)};
  if (!is_live(*current, now_unix_usecs)) return {AcquireAction::take_over, next_epoch(current->epoch, now_unix_usecs)};
  if (current->owner == owner) return {AcquireAction::extend, current->epoch};
  return {AcquireAction::contended, current->epoch};
}

void throw_stale_lease(std::string_view resource, std::int64_t epoch) {
  throw Error(sqlstate::stale_fence,
              "lease epoch " + std::to_string(epoch) + " is not the live grant of \"" + std::string(resource) + "\"",
              "the lease expired, was released, or was taken over; stop work");
}

}  // namespace fy::core
