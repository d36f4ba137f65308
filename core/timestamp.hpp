// The text form of a point in time (docs/architecture.md#export-and-offline-verification).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fy::core {

// 2026-11-29T12:00:00.000001Z
std::string format_timestamp(std::int64_t unix_usecs);
// The form above; also accepts an offset (+hh:mm / -hh:mm) and 0..6 fractional digits. An instant
// outside the years 0000-9999 in UTC is refused, so whatever parses prints back.
std::optional<std::int64_t> parse_timestamp(std::string_view text);

}  // namespace fy::core
