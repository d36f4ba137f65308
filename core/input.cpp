#include "core/input.hpp"

#include <string>

#include "core/errors.hpp"

namespace fy::core {

void check_name(const char* argument, bool present, std::string_view value, std::size_t max_bytes) {
  using std::string;
  if (!present) throw Error(sqlstate::null_value, string(argument) + " must not be NULL");
  if (value.empty()) throw Error(sqlstate::invalid_parameter, string(argument) + " must not be empty");
  if (value.size() > max_bytes)
    throw Error(sqlstate::string_too_long, string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                "length is " + std::to_string(value.size()) + " bytes");
}

std::int64_t check_duration(const char* argument, const Duration& d, std::int64_t max_usecs) {
  using std::string;
  if (d.months != 0)
    throw Error(sqlstate::invalid_parameter, string(argument) + " must not have a month or year component",
                "months and years have no fixed length; use days or hours");
  std::int64_t day_part = 0;
  std::int64_t total = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(d.days), usecs_per_day, &day_part) ||
      __builtin_add_overflow(day_part, d.usecs, &total))
    throw Error(sqlstate::invalid_parameter, string(argument) + " is out of range");
  if (total <= 0) throw Error(sqlstate::invalid_parameter, string(argument) + " must be positive");
  if (total > max_usecs)
    throw Error(sqlstate::invalid_parameter, string(argument) + " is too long",
                "the maximum is " + std::to_string(max_usecs / usecs_per_second) + " seconds");
  return total;
}

}  // namespace fy::core
