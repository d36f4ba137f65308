// Durations and timestamps (core/input, core/timestamp): check_duration either refuses with a
// forgeyard error or returns a positive total within the bound, equal to days * 24 h + usecs; a
// timestamp text that parses prints back to a text that parses to the same instant.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/errors.hpp"
#include "core/input.hpp"
#include "core/timestamp.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= 16) {
    fy::core::Duration d;
    std::memcpy(&d.months, data, 4);
    std::memcpy(&d.days, data + 4, 4);
    std::memcpy(&d.usecs, data + 8, 8);
    try {
      std::int64_t total = fy::core::check_duration("ttl", d, fy::core::max_lease_ttl_usecs);
      FUZZ_CHECK(d.months == 0);
      FUZZ_CHECK(total > 0 && total <= fy::core::max_lease_ttl_usecs);
      FUZZ_CHECK(total == static_cast<std::int64_t>(d.days) * fy::core::usecs_per_day + d.usecs);
    } catch (const fy::core::Error& e) {
      FUZZ_CHECK(e.sqlstate() == "22023");
    }
  }
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto t = fy::core::parse_timestamp(text)) {
    auto printed = fy::core::format_timestamp(*t);
    auto back = fy::core::parse_timestamp(printed);
    FUZZ_CHECK(back && *back == *t);
  }
  return 0;
}
