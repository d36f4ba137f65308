// forgeyard.now(): the one clock that decides expiry, and the forgeyard.* settings.
#pragma once

#include <cstdint>

#include "pg/guard.hpp"

namespace fy::pg {

// clock_timestamp(), or forgeyard.now_override when set (superuser-only; for tests).
// Read once per API call; a value that does not parse is an ERROR.
TimestampTz now();

// Microseconds since 1970-01-01, the unit of lease epochs on both backends.
inline std::int64_t unix_usecs(TimestampTz t) {
  return t + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

void define_settings();

}  // namespace fy::pg
