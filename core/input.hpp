// Input limits and the checks of names and durations that every function of both backends runs
// first (docs/sql-api.md lists the limits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fy::core {

inline constexpr std::size_t max_tenant_bytes = 128;
inline constexpr std::size_t max_resource_bytes = 512;
inline constexpr std::size_t max_owner_bytes = 256;

inline constexpr std::int64_t usecs_per_second = 1'000'000;
inline constexpr std::int64_t usecs_per_day = 86'400 * usecs_per_second;
inline constexpr std::int64_t max_lease_ttl_usecs = 7 * usecs_per_day;

// Throws 22004 for a missing value, 22023 for an empty one, 22001 for one over max_bytes.
// `present` is false when the SQL argument was NULL.
void check_name(const char* argument, bool present, std::string_view value, std::size_t max_bytes);

// A duration as PostgreSQL's interval stores it. SQLite callers pass months = days = 0.
struct Duration {
  std::int32_t months = 0;
  std::int32_t days = 0;
  std::int64_t usecs = 0;
};

// Validates a duration argument and returns it in microseconds: no month component
// (calendar-dependent), a day is 24 hours, the total must be > 0 and <= max_usecs.
std::int64_t check_duration(const char* argument, const Duration& d, std::int64_t max_usecs);

}  // namespace fy::core
