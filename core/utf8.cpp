#include "core/utf8.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) -> unsigned { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned b0 = byte(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (i < s.size() && b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xc0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xe0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(char(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(char(0xf0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(char(0x80 | (cp & 0x3f)));
  }
}

}  // namespace fy::core
