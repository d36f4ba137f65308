// The text form of a uuid: one parser for every place that reads one (docs/sql-api.md#uuids).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fy::core {

// 8-4-4-4-12 lower-case hex: the form PostgreSQL prints and the audit export writes.
std::string format_uuid(std::string_view bytes16);
// The 16 bytes of `text` in the spellings PostgreSQL's uuid input accepts, and only those: 32
// hex digits in either case, optionally a '-' after any group of four of them (not after the
// last), the whole optionally in braces; no spaces. nullopt for anything else.
std::optional<std::string> parse_uuid(std::string_view text);
// The same parser held to the 8-4-4-4-12 layout (either case): what an audit export line carries,
// so an exported chain has one spelling per event.
std::optional<std::string> parse_dashed_uuid(std::string_view text);

}  // namespace fy::core
