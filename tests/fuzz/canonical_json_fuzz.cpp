// The canonical-JSON parser and printer (core/canonical_json): any input either is refused with a
// forgeyard error (22023) or parses; the canonical text then parses again to the same canonical text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/canonical_json.hpp"
#include "core/errors.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string canonical;
  try {
    auto value = fy::core::parse_json(text, "details", 64);
    canonical = fy::core::canonical_json(value, "details", 1 << 20);
  } catch (const fy::core::Error&) {
    return 0;
  }
  auto again = fy::core::canonical_json(fy::core::parse_json(canonical, "details", 64), "details", 1 << 20);
  FUZZ_CHECK(again == canonical);
  return 0;
}
