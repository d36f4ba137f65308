#include "core/uuid.hpp"

#include "core/digest.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

std::string format_uuid(std::string_view b) {
  std::string h = to_hex(b);
  if (h.size() != 32) return h;
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

std::optional<std::string> parse_uuid(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  std::string hex;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (text[i] == '-')) return std::nullopt;
    if (!dash) hex.push_back(text[i]);
  }
  return from_hex(hex);  // 32 characters: nullopt unless all are hex digits
}

}  // namespace fy::core
