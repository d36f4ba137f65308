// The audit export reader (core/audit_export), the input of the offline verifier (audit verify
// --file): a line either is refused with a forgeyard error or parses to an event that prints back
// to a line parsing to the same line; whole inputs, split into lines, verify without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/audit_export.hpp"
#include "core/errors.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (const auto& line : lines) {
    try {
      auto event = fy::core::parse_audit_json_line(line);
      auto printed = fy::core::audit_json_line(event);
      auto again = fy::core::audit_json_line(fy::core::parse_audit_json_line(printed));
      FUZZ_CHECK(again == printed);
    } catch (const fy::core::Error&) {
    }
  }
  try {
    (void)fy::core::verify_exported_chain(lines, std::nullopt);
  } catch (const fy::core::Error&) {
  }
  return 0;
}
