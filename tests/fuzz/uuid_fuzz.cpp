// UUIDs (core/uuid): a text that parses gives 16 bytes, whose dashed form parses back to them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/uuid.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto bytes = fy::core::parse_uuid(text);
  if (auto dashed = fy::core::parse_dashed_uuid(text)) FUZZ_CHECK(bytes && *bytes == *dashed);
  if (!bytes) return 0;
  FUZZ_CHECK(bytes->size() == 16);
  auto formatted = fy::core::format_uuid(*bytes);
  auto back = fy::core::parse_dashed_uuid(formatted);
  FUZZ_CHECK(back && *back == *bytes);
  return 0;
}
