#include "core/timestamp.hpp"

#include <cstdio>

#include "core/core.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {
namespace {

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  d = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
  m = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
  y = yoe + era * 400 + (m <= 2);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

std::string format_timestamp(std::int64_t unix_usecs) {
  const std::int64_t secs = floor_div(unix_usecs, usecs_per_second);
  const std::int64_t micros = unix_usecs - secs * usecs_per_second;
  const std::int64_t days = floor_div(secs, 86400);
  const std::int64_t rest = secs - days * 86400;
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%06lldZ", static_cast<long long>(y), m, d,
                static_cast<int>(rest / 3600), static_cast<int>(rest / 60 % 60), static_cast<int>(rest % 60),
                static_cast<long long>(micros));
  return buf;
}

std::optional<std::int64_t> parse_timestamp(std::string_view t) {
  std::size_t p = 0;
  auto num = [&](std::size_t width, std::int64_t& out) {
    if (p + width > t.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < width; ++k) {
      char c = t[p + k];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    p += width;
    return true;
  };
  auto sep = [&](char c) { return p < t.size() && (t[p] == c || (c == 'T' && (t[p] == 't' || t[p] == ' '))) && ++p; };
  std::int64_t y, mo, d, h, mi, s, micros = 0;
  if (!(num(4, y) && sep('-') && num(2, mo) && sep('-') && num(2, d) && sep('T') && num(2, h) && sep(':') &&
        num(2, mi) && sep(':') && num(2, s)))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return std::nullopt;
  static constexpr int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > month_days[mo - 1] + (mo == 2 && leap ? 1 : 0)) return std::nullopt;
  if (p < t.size() && t[p] == '.') {
    ++p;
    std::size_t digits = 0;
    while (p < t.size() && t[p] >= '0' && t[p] <= '9' && digits < 6) {
      micros = micros * 10 + (t[p++] - '0');
      ++digits;
    }
    if (digits == 0 || (p < t.size() && t[p] >= '0' && t[p] <= '9')) return std::nullopt;
    for (; digits < 6; ++digits) micros *= 10;
  }
  std::int64_t offset = 0;
  if (p < t.size() && (t[p] == 'Z' || t[p] == 'z')) {
    ++p;
  } else if (p < t.size() && (t[p] == '+' || t[p] == '-')) {
    const bool minus = t[p++] == '-';
    std::int64_t oh, om;
    if (!(num(2, oh) && sep(':') && num(2, om)) || oh > 23 || om > 59) return std::nullopt;
    offset = (oh * 3600 + om * 60) * (minus ? -1 : 1);
  } else {
    return std::nullopt;
  }
  if (p != t.size()) return std::nullopt;
  const std::int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const std::int64_t secs = (days * 86400 + h * 3600 + mi * 60 + s) - offset;
  // An offset can move the instant out of the years 0000-9999 (0000-01-01T00:00:30+10:01): then
  // the form above could not print it back, so it is refused like any other unreadable text.
  static const std::int64_t first = days_from_civil(0, 1, 1) * 86400;
  static const std::int64_t past_last = days_from_civil(10000, 1, 1) * 86400;
  if (secs < first || secs >= past_last) return std::nullopt;
  return secs * usecs_per_second + micros;
}

}  // namespace fy::core
