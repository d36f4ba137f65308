// Leases with fencing epochs (docs/sql-api.md#leases).
#pragma once

#include "forgeyard/export.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/types.hpp"

namespace forgeyard {

// The answer of acquire: contention is an answer, not an error.
struct LeaseGrant {
  bool acquired = false;
  std::int64_t epoch = 0;  // the grant's fencing token (the holder's, when not acquired)
  std::string holder;
  TimePoint expires_at;
};

enum class LeaseState { Live, Expired, Reaped, Released };

struct LeaseInfo {
  std::string owner;
  std::int64_t epoch = 0;
  TimePoint acquired_at;
  TimePoint expires_at;
  LeaseState state = LeaseState::Live;
};

struct ReapedLease {
  std::string tenant;
  std::string resource;
  std::int64_t epoch = 0;
  std::string holder;
  TimePoint expired_at;
};

class FORGEYARD_API Leases {
 public:
  virtual ~Leases() = default;

  // Free or expired: a new grant with a strictly greater epoch. Held by `owner`: the same epoch,
  // expiry moved to now + ttl. Held by someone else: acquired == false and the current holder.
  virtual LeaseGrant acquire(std::string_view tenant, std::string_view resource, std::string_view owner,
                             Duration ttl) = 0;
  // The new expiry; StaleFence if `epoch` is not the live grant.
  virtual TimePoint renew(std::string_view tenant, std::string_view resource, std::int64_t epoch, Duration ttl) = 0;
  // Whether `epoch` was the live grant.
  virtual bool release(std::string_view tenant, std::string_view resource, std::int64_t epoch) = 0;
  // Inside a transaction: StaleFence unless `epoch` is the live grant; the grant then cannot
  // change hands until the transaction ends.
  virtual void fence(std::string_view tenant, std::string_view resource, std::int64_t epoch) = 0;
  // The stored state of a lease, or nullopt if the resource was never leased.
  virtual std::optional<LeaseInfo> get(std::string_view tenant, std::string_view resource, ReadClass read = {}) = 0;
  // Maintenance: grants that expired without release, each returned once.
  virtual std::vector<ReapedLease> reap(int max_leases, std::optional<std::string> tenant = std::nullopt) = 0;
};

FORGEYARD_API std::string_view to_string(LeaseState state) noexcept;

}  // namespace forgeyard
