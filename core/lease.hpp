// Lease rules both backends apply: epochs, "live", what acquire does, and the stale-lease error
// (docs/sql-api.md#leases).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fy::core {

// The epoch of a new grant: strictly above every earlier one of the resource, and at least the
// clock in microseconds since the Unix epoch, so epochs keep growing after a restore from an
// older backup as long as the clock does. `previous` is 0 for a resource never granted.
std::int64_t next_epoch(std::int64_t previous, std::int64_t now_unix_usecs);

// "Expired" means expires_at <= now, on both backends.
inline bool is_expired(std::int64_t expires_at, std::int64_t now) {
  return expires_at <= now;
}

// The stored state of a lease, times in microseconds since the Unix epoch.
struct LeaseRow {
  std::string owner;
  std::int64_t epoch = 0;
  std::int64_t expires_at = 0;
  bool released = false;
  bool reaped = false;
};

// A reaped grant is not live either: its reconciler was told it expired, whatever the clock a
// concurrent renew read.
inline bool is_live(const LeaseRow& row, std::int64_t now) {
  return !row.released && !row.reaped && !is_expired(row.expires_at, now);
}

// is_live as a SQL condition on a leases row, for the statements that test it where the row is
// (renew, release, fence). `now` is the clock's placeholder ("$4", "?1"); `greater` is the
// operator the backend spells ">" with ("OPERATOR(pg_catalog.>)" on PostgreSQL).
std::string live_lease_sql(std::string_view now, std::string_view greater = ">");

// "live", "expired", "reaped" or "released": the state both backends report.
const char* lease_state(const LeaseRow& row, std::int64_t now);

// What acquire does, given the current row (nullptr: never granted).
enum class AcquireAction {
  insert,     // first grant of the resource
  take_over,  // free, released or expired: a new grant with a new epoch
  extend,     // live and held by the same owner: same epoch, expiry moved to now + ttl if that is later
  contended,  // live and held by another owner: not granted
};
struct AcquireDecision {
  AcquireAction action;
  std::int64_t epoch;  // of the grant after the call (the holder's, when contended)
};
AcquireDecision decide_acquire(const LeaseRow* current, std::string_view owner, std::int64_t now_unix_usecs);

// FY001 for renew or fence with an epoch that is not the live grant of the resource.
[[noreturn]] void throw_stale_lease(std::string_view resource, std::int64_t epoch);

}  // namespace fy::core
