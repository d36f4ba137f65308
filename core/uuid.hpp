// The text form of a uuid.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fy::core {

std::string format_uuid(std::string_view bytes16);
std::optional<std::string> parse_uuid(std::string_view text);

}  // namespace fy::core
