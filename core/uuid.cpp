#include "core/uuid.hpp"

#include "core/digest.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

std::string format_uuid(std::string_view b) {
  if (b.size() != 16) return to_hex(b);
  // One pass into one allocation: every workflow call formats its run id.
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(36, '-');
  std::size_t o = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) ++o;  // the dashes already in place
    const auto byte = static_cast<unsigned char>(b[i]);
    out[o++] = digits[byte >> 4];
    out[o++] = digits[byte & 0xf];
  }
  return out;
}

std::optional<std::string> parse_uuid(std::string_view text) {
  // PostgreSQL's string_to_uuid (src/backend/utils/adt/uuid.c), so that the SQLite shim and the
  // client's checks accept exactly what a uuid argument of the extension accepts.
  std::string_view s = text;
  const bool braces = !s.empty() && s.front() == '{';
  if (braces) s.remove_prefix(1);
  std::string hex;
  hex.reserve(32);
  for (int group = 0; group < 8; ++group) {
    if (s.size() < 4) return std::nullopt;
    hex.append(s.substr(0, 4));
    s.remove_prefix(4);
    if (group < 7 && !s.empty() && s.front() == '-') s.remove_prefix(1);
  }
  if (braces) {
    if (s.empty() || s.front() != '}') return std::nullopt;
    s.remove_prefix(1);
  }
  if (!s.empty()) return std::nullopt;
  return from_hex(hex);  // 32 characters: nullopt unless all are hex digits
}

std::optional<std::string> parse_dashed_uuid(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  for (std::size_t dash : {8, 13, 18, 23})
    if (text[dash] != '-') return std::nullopt;
  return parse_uuid(text);
}

}  // namespace fy::core
