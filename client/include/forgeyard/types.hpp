// Time and small value types shared by the capability interfaces.
#pragma once

#include <chrono>
#include <cstdint>

namespace forgeyard {

using Clock = std::chrono::system_clock;
// Timestamps are wall-clock instants with microsecond precision, as both backends store them.
using TimePoint = std::chrono::time_point<Clock, std::chrono::microseconds>;
using Duration = std::chrono::microseconds;

inline TimePoint from_unix_usecs(std::int64_t us) {
  return TimePoint(Duration(us));
}
inline std::int64_t unix_usecs(TimePoint t) {
  return t.time_since_epoch().count();
}

}  // namespace forgeyard
