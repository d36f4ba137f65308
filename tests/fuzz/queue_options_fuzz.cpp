// Queue options (core/queue_options), as queue_create reads its JSON: each member is set or refused
// with 22023; whatever is accepted passes validate() or is refused by it with 22023, never more.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/canonical_json.hpp"
#include "core/errors.hpp"
#include "core/queue_options.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fy::core::Json options;
  try {
    options = fy::core::parse_json(text, "options", 8);
  } catch (const fy::core::Error&) {
    return 0;
  }
  if (options.kind != fy::core::Json::Kind::object) return 0;
  fy::core::QueueOptions q;
  for (const auto& m : options.members) {
    try {
      if (fy::core::is_duration_option(m.key)) {
        fy::core::Duration d;
        d.usecs = static_cast<std::int64_t>(m.value.text.size()) * 1000;
        fy::core::set_queue_duration(q, m.key, d);
      } else {
        fy::core::set_queue_option(q, m.key, m.value.text);
      }
    } catch (const fy::core::Error& e) {
      FUZZ_CHECK(e.sqlstate() == "22023" || e.sqlstate() == "22001" || e.sqlstate() == "22004");
    }
  }
  try {
    fy::core::validate(q);
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "22023");
  }
  return 0;
}
