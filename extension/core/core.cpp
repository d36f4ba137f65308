#include "core.hpp"

#include <limits>

namespace fy::core {

void check_name(const char* argument, bool present, std::string_view value, std::size_t max_bytes) {
  using std::string;
  if (!present) throw Error(sqlstate::null_value, string(argument) + " must not be NULL");
  if (value.empty()) throw Error(sqlstate::invalid_parameter, string(argument) + " must not be empty");
  if (value.size() > max_bytes)
    throw Error(sqlstate::string_too_long,
                string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                "length is " + std::to_string(value.size()) + " bytes");
}

std::int64_t check_duration(const char* argument, const Duration& d, std::int64_t max_usecs) {
  using std::string;
  if (d.months != 0)
    throw Error(sqlstate::invalid_parameter,
                string(argument) + " must not have a month or year component",
                "months and years have no fixed length; use days or hours");
  constexpr auto limit = std::numeric_limits<std::int64_t>::max();
  // Both parts are bounded before they are added, so the sum cannot overflow.
  if (d.days > 0 && d.days > max_usecs / usecs_per_day + 1)
    throw Error(sqlstate::invalid_parameter, string(argument) + " is too long",
                "the maximum is " + std::to_string(max_usecs / usecs_per_second) + " seconds");
  std::int64_t day_part = static_cast<std::int64_t>(d.days) * usecs_per_day;
  if ((day_part > 0 && d.usecs > limit - day_part) || (day_part < 0 && d.usecs < -limit - day_part))
    throw Error(sqlstate::invalid_parameter, string(argument) + " is too long");
  std::int64_t total = day_part + d.usecs;
  if (total <= 0) throw Error(sqlstate::invalid_parameter, string(argument) + " must be positive");
  if (total > max_usecs)
    throw Error(sqlstate::invalid_parameter, string(argument) + " is too long",
                "the maximum is " + std::to_string(max_usecs / usecs_per_second) + " seconds");
  return total;
}

std::int64_t next_epoch(std::int64_t previous, std::int64_t now_unix_usecs) {
  if (previous == std::numeric_limits<std::int64_t>::max())
    throw Error(sqlstate::internal_error, "lease epoch space exhausted");
  return previous + 1 > now_unix_usecs ? previous + 1 : now_unix_usecs;
}

}  // namespace fy::core
