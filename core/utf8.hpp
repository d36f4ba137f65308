// UTF-8 sequence checks shared by the JSON parser and the audit input checks
// (docs/architecture.md#canonical-details).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fy::core {

// The length of the UTF-8 sequence at s[i] (1 to 4), or 0 when it is not valid UTF-8: no
// overlong forms, no surrogates, nothing past U+10FFFF, not cut short.
std::size_t utf8_length(std::string_view s, std::size_t i);

// Appends code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8.
void append_utf8(std::string& out, unsigned cp);

}  // namespace fy::core
