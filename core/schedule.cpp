// Workflow schedules: cron and "@every" specs, tz database zones, fire times (core/schedule.hpp).
#include "core/schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "core/errors.hpp"
#include "core/timestamp.hpp"

namespace fy::core::schedule {

namespace {

constexpr std::int64_t usecs_per_second = 1'000'000;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// ---- Civil time ---------------------------------------------------------------------------

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = floor_div(y, 400);
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  std::int64_t year;
  int month, day, hour, minute;
};

Civil civil_from_seconds(std::int64_t secs) {
  const std::int64_t days = floor_div(secs, 86400);
  const std::int64_t rest = secs - days * 86400;
  const std::int64_t z = days + 719468;
  const std::int64_t era = floor_div(z, 146097);
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {yoe + era * 400 + (m <= 2), m, d, static_cast<int>(rest / 3600), static_cast<int>(rest % 3600 / 60)};
}

std::int64_t seconds_from_civil(const Civil& c) {
  return days_from_civil(c.year, c.month, c.day) * 86400 + std::int64_t{c.hour} * 3600 + std::int64_t{c.minute} * 60;
}

bool leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int days_in_month(std::int64_t y, int m) {
  static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : days[m - 1];
}

// 0 = Sunday; 1970-01-01 was a Thursday.
int weekday(std::int64_t y, int m, int d) {
  const std::int64_t z = days_from_civil(y, m, d) + 4;
  return static_cast<int>(z - floor_div(z, 7) * 7);
}

// ---- The TZif file and its POSIX TZ rule ---------------------------------------------------

[[noreturn]] void unknown_zone(std::string_view name, const std::string& why) {
  invalid_parameter("unknown time zone \"" + std::string(name.substr(0, max_zone_bytes)) + "\" (" + why + ")");
}

struct Reader {
  const std::string& bytes;
  std::size_t at = 0;
  bool need(std::size_t n) const { return at + n <= bytes.size(); }
  std::int64_t be(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
    at += static_cast<std::size_t>(n);
    if (n == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    return static_cast<std::int64_t>(v);
  }
};

}  // namespace

// std offset [dst [offset] [,start[/time],end[/time]]] (POSIX; offsets west of UTC positive).
struct Zone::Rule {
  struct Date {
    char kind = 'M';  // J: 1..365 without Feb 29; N: 0..365; M: month.week.weekday
    int a = 0, b = 0, c = 0;
    std::int64_t time = 7200;  // seconds after local midnight
  };
  std::int32_t std_offset = 0, dst_offset = 0;  // seconds east of UTC
  bool has_dst = false;
  Date start, end;

  // The instant (local standard or daylight seconds) a date of year y starts at, as local seconds.
  static std::int64_t local_start(const Date& d, std::int64_t y) {
    std::int64_t day = 0;  // days since 1970 of the date
    if (d.kind == 'J') {
      day = days_from_civil(y, 1, 1) + d.a - 1 + (leap(y) && d.a >= 60 ? 1 : 0);
    } else if (d.kind == 'N') {
      day = days_from_civil(y, 1, 1) + d.a;
    } else {
      const int first = weekday(y, d.a, 1);
      int dom = 1 + (d.c - first + 7) % 7 + (d.b - 1) * 7;
      while (dom > days_in_month(y, d.a)) dom -= 7;
      day = days_from_civil(y, d.a, dom);
    }
    return day * 86400 + d.time;
  }

  std::int32_t offset_at(std::int64_t utc) const {
    if (!has_dst) return std_offset;
    const std::int64_t year = civil_from_seconds(utc + std_offset).year;
    const std::int64_t on = local_start(start, year) - std_offset;
    const std::int64_t off = local_start(end, year) - dst_offset;
    const bool dst = on < off ? (utc >= on && utc < off) : !(utc >= off && utc < on);
    return dst ? dst_offset : std_offset;
  }
};

namespace {

// [+-]hh[:mm[:ss]]
bool parse_hms(std::string_view& s, std::int64_t& out) {
  int sign = 1;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    sign = s[0] == '-' ? -1 : 1;
    s.remove_prefix(1);
  }
  std::int64_t parts[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    std::int64_t v = 0;
    while (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      v = v * 10 + (s[0] - '0');
      if (v > 1000) return false;
      s.remove_prefix(1);
    }
    parts[i] = v;
    if (s.empty() || s[0] != ':' || i == 2) break;
    s.remove_prefix(1);
  }
  out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
  return true;
}

bool parse_abbreviation(std::string_view& s) {
  if (!s.empty() && s[0] == '<') {
    const std::size_t close = s.find('>');
    if (close == std::string_view::npos) return false;
    s.remove_prefix(close + 1);
    return true;
  }
  std::size_t n = 0;
  while (n < s.size() && std::isalpha(static_cast<unsigned char>(s[n]))) ++n;
  if (n < 3) return false;
  s.remove_prefix(n);
  return true;
}

bool parse_number(std::string_view& s, int& out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  out = 0;
  while (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
    out = out * 10 + (s[0] - '0');
    if (out > 1000) return false;
    s.remove_prefix(1);
  }
  return true;
}

bool parse_rule_date(std::string_view& s, Zone::Rule::Date& d) {
  if (s.empty()) return false;
  if (s[0] == 'M') {
    s.remove_prefix(1);
    d.kind = 'M';
    if (!parse_number(s, d.a) || s.empty() || s[0] != '.') return false;
    s.remove_prefix(1);
    if (!parse_number(s, d.b) || s.empty() || s[0] != '.') return false;
    s.remove_prefix(1);
    if (!parse_number(s, d.c)) return false;
    if (d.a < 1 || d.a > 12 || d.b < 1 || d.b > 5 || d.c > 6) return false;
  } else if (s[0] == 'J') {
    s.remove_prefix(1);
    d.kind = 'J';
    if (!parse_number(s, d.a) || d.a < 1 || d.a > 365) return false;
  } else {
    d.kind = 'N';
    if (!parse_number(s, d.a) || d.a > 365) return false;
  }
  if (!s.empty() && s[0] == '/') {
    s.remove_prefix(1);
    if (!parse_hms(s, d.time)) return false;
  }
  return true;
}

std::shared_ptr<const Zone::Rule> parse_rule(std::string_view s) {
  auto rule = std::make_shared<Zone::Rule>();
  std::int64_t offset = 0;
  if (!parse_abbreviation(s) || !parse_hms(s, offset)) return nullptr;
  rule->std_offset = static_cast<std::int32_t>(-offset);
  if (s.empty()) return rule;
  if (!parse_abbreviation(s)) return nullptr;
  rule->has_dst = true;
  rule->dst_offset = rule->std_offset + 3600;
  if (!s.empty() && s[0] != ',') {
    if (!parse_hms(s, offset)) return nullptr;
    rule->dst_offset = static_cast<std::int32_t>(-offset);
  }
  if (s.empty()) {  // POSIX's default: the US rules
    rule->start = {'M', 3, 2, 0, 7200};
    rule->end = {'M', 11, 1, 0, 7200};
    return rule;
  }
  if (s[0] != ',') return nullptr;
  s.remove_prefix(1);
  if (!parse_rule_date(s, rule->start) || s.empty() || s[0] != ',') return nullptr;
  s.remove_prefix(1);
  if (!parse_rule_date(s, rule->end) || !s.empty()) return nullptr;
  return rule;
}

bool valid_zone_name(std::string_view name) {
  if (name.empty() || name.size() > max_zone_bytes || name[0] == '/' || name[0] == '.') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' && c != '+') return false;
  return name.find("..") == std::string_view::npos;
}

}  // namespace

std::shared_ptr<const Zone> Zone::load(std::string_view name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Zone>, std::less<>> zones;
  std::lock_guard lock(mutex);
  if (const auto it = zones.find(name); it != zones.end()) return it->second;
  auto zone = std::make_shared<Zone>();
  zone->name_ = std::string(name);
  if (name != "UTC") {
    if (!valid_zone_name(name)) unknown_zone(name, "a zone is a name such as Europe/Berlin");
    const char* dir = std::getenv("TZDIR");
    const std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo") + "/" + std::string(name);
    std::ifstream in(path, std::ios::binary);
    if (!in) unknown_zone(name, "no such zone in the tz database");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Reader r{bytes};
    const auto header = [&](std::int64_t counts[6]) {
      if (!r.need(44) || bytes.compare(r.at, 4, "TZif") != 0) unknown_zone(name, "not a TZif file");
      r.at += 20;
      for (int i = 0; i < 6; ++i) counts[i] = r.be(4);
      for (int i = 0; i < 6; ++i)
        if (counts[i] < 0 || counts[i] > 100000) unknown_zone(name, "a damaged TZif file");
    };
    std::int64_t c[6];  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
    header(c);
    int time_bytes = 4;
    const char version = bytes[4];
    if (version >= '2') {  // skip the 32-bit block for the 64-bit one
      r.at += static_cast<std::size_t>(c[3] * 5 + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0]);
      header(c);
      time_bytes = 8;
    }
    const std::size_t block =
        static_cast<std::size_t>(c[3] * (time_bytes + 1) + c[4] * 6 + c[5] + c[2] * (time_bytes + 4) + c[1] + c[0]);
    if (!r.need(block) || c[4] < 1) unknown_zone(name, "a damaged TZif file");
    std::vector<std::int64_t> times(static_cast<std::size_t>(c[3]));
    for (auto& t : times) t = r.be(time_bytes);
    std::vector<int> index(static_cast<std::size_t>(c[3]));
    for (auto& i : index) i = static_cast<unsigned char>(bytes[r.at++]);
    std::vector<std::int32_t> offsets(static_cast<std::size_t>(c[4]));
    for (auto& o : offsets) {
      o = static_cast<std::int32_t>(r.be(4));
      r.at += 2;
    }
    r.at += static_cast<std::size_t>(c[5] + c[2] * (time_bytes + 4) + c[1] + c[0]);
    for (std::size_t i = 0; i < times.size(); ++i) {
      if (index[i] >= static_cast<int>(offsets.size())) unknown_zone(name, "a damaged TZif file");
      zone->transitions_.push_back(times[i]);
      zone->offsets_.push_back(offsets[static_cast<std::size_t>(index[i])]);
    }
    zone->initial_ = offsets[0];
    if (time_bytes == 8 && r.need(1) && bytes[r.at] == '\n') {
      const std::size_t end = bytes.find('\n', r.at + 1);
      if (end != std::string::npos && end > r.at + 1) {
        zone->rule_ = parse_rule(std::string_view(bytes).substr(r.at + 1, end - r.at - 1));
        if (!zone->rule_) unknown_zone(name, "a TZ rule this reader does not know");
      }
    }
  }
  zones.emplace(std::string(name), zone);
  return zone;
}

std::int64_t Zone::offset_at(std::int64_t utc) const {
  if (transitions_.empty() || utc >= transitions_.back()) {
    if (rule_) return rule_->offset_at(utc);
    return transitions_.empty() ? initial_ : offsets_.back();
  }
  const auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc);
  if (it == transitions_.begin()) return initial_;
  return offsets_[static_cast<std::size_t>(std::distance(transitions_.begin(), it) - 1)];
}

std::vector<std::int64_t> Zone::from_local(std::int64_t local) const {
  std::vector<std::int64_t> out;
  for (const std::int64_t offset : {offset_at(local - 86400), offset_at(local + 86400)}) {
    const std::int64_t utc = local - offset;
    if (utc + offset_at(utc) == local && std::find(out.begin(), out.end(), utc) == out.end()) out.push_back(utc);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Specs ----------------------------------------------------------------------------------

namespace {

[[noreturn]] void bad_spec(std::string_view text, const std::string& why) {
  throw Error(sqlstate::invalid_parameter,
              "schedule spec '" + std::string(text.substr(0, max_spec_bytes)) + "' is not valid: " + why,
              "a spec is 5 cron fields (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, "
              "@monthly, @yearly, or '@every <interval>' such as '@every 15m'");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "1h30m", "90s", "15 minutes", "1 day 2 hours"
std::int64_t parse_every(std::string_view spec, std::string_view s) {
  std::int64_t total = 0;
  bool any = false;
  while (true) {
    while (!s.empty() && s[0] == ' ') s.remove_prefix(1);
    if (s.empty()) break;
    if (!std::isdigit(static_cast<unsigned char>(s[0]))) bad_spec(spec, "an interval is numbers with units");
    std::int64_t n = 0;
    while (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      n = n * 10 + (s[0] - '0');
      if (n > 1'000'000'000) bad_spec(spec, "the interval is too long");
      s.remove_prefix(1);
    }
    while (!s.empty() && s[0] == ' ') s.remove_prefix(1);
    std::size_t len = 0;
    while (len < s.size() && std::isalpha(static_cast<unsigned char>(s[len]))) ++len;
    const std::string unit = lower(s.substr(0, len));
    s.remove_prefix(len);
    std::int64_t seconds = 0;
    if (unit == "s" || unit == "sec" || unit == "secs" || unit == "second" || unit == "seconds")
      seconds = 1;
    else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" || unit == "minutes")
      seconds = 60;
    else if (unit == "h" || unit == "hour" || unit == "hours")
      seconds = 3600;
    else if (unit == "d" || unit == "day" || unit == "days")
      seconds = 86400;
    else
      bad_spec(spec, "the units of an interval are s, m, h and d");
    total += n * seconds;
    if (total > max_every_usecs / usecs_per_second) bad_spec(spec, "the interval is longer than 366 days");
    any = true;
  }
  if (!any) bad_spec(spec, "@every needs an interval");
  const std::int64_t usecs = total * usecs_per_second;
  if (usecs < min_every_usecs) bad_spec(spec, "the interval is shorter than 1 second");
  return usecs;
}

int field_value(std::string_view spec, std::string_view text, int field) {
  static constexpr const char* months[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec"};
  static constexpr const char* days[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
  const std::string name = lower(text);
  if (field == 3)
    for (int i = 0; i < 12; ++i)
      if (name == months[i]) return i + 1;
  if (field == 4)
    for (int i = 0; i < 7; ++i)
      if (name == days[i]) return i;
  if (text.empty() || text.size() > 4) bad_spec(spec, "'" + std::string(text) + "' is not a value");
  int v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) bad_spec(spec, "'" + std::string(text) + "' is not a value");
    v = v * 10 + (c - '0');
  }
  return v;
}

// One cron field into `bits` (values lo..hi).
template <std::size_t N>
void parse_field(std::string_view spec, std::string_view text, int field, int lo, int hi, std::bitset<N>& bits) {
  static constexpr const char* names[] = {"minute", "hour", "day-of-month", "month", "day-of-week"};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    int step = 1;
    if (const std::size_t slash = item.find('/'); slash != std::string_view::npos) {
      step = field_value(spec, item.substr(slash + 1), -1);
      if (step < 1) bad_spec(spec, "a step must be at least 1");
      item = item.substr(0, slash);
    }
    int from = lo, to = hi;
    if (item != "*") {
      const std::size_t dash = item.find('-');
      from = field_value(spec, item.substr(0, dash), field);
      to = dash == std::string_view::npos ? (step > 1 ? hi : from) : field_value(spec, item.substr(dash + 1), field);
      const int top = field == 4 ? 7 : hi;
      if (from < lo || to > top || from > to)
        bad_spec(spec, std::string("the ") + names[field] + " field takes " + std::to_string(lo) + "-" +
                           std::to_string(top) + ", not '" + std::string(item) + "'");
    }
    for (int v = from; v <= to; v += step) bits.set(static_cast<std::size_t>(field == 4 ? v % 7 : v));
    start = comma + 1;
  }
}

}  // namespace

Spec parse_spec(std::string_view text) {
  if (text.size() > max_spec_bytes)
    throw Error(sqlstate::string_too_long, "spec is longer than " + std::to_string(max_spec_bytes) + " bytes");
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  Spec spec;
  std::string cron(s);
  if (!s.empty() && s[0] == '@') {
    const std::string word = lower(s.substr(0, s.find(' ')));
    if (word == "@every") return Spec{parse_every(text, s.substr(6)), {}, {}, {}, {}, {}, true, true};
    if (word.size() != s.size()) bad_spec(text, "unknown macro");
    if (word == "@hourly")
      cron = "0 * * * *";
    else if (word == "@daily" || word == "@midnight")
      cron = "0 0 * * *";
    else if (word == "@weekly")
      cron = "0 0 * * 0";
    else if (word == "@monthly")
      cron = "0 0 1 * *";
    else if (word == "@yearly" || word == "@annually")
      cron = "0 0 1 1 *";
    else
      bad_spec(text, "unknown macro");
  }
  std::vector<std::string_view> fields;
  std::string_view rest = cron;
  while (!rest.empty()) {
    while (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) rest.remove_prefix(1);
    if (rest.empty()) break;
    std::size_t n = 0;
    while (n < rest.size() && rest[n] != ' ' && rest[n] != '\t') ++n;
    fields.push_back(rest.substr(0, n));
    rest.remove_prefix(n);
  }
  if (fields.size() != 5) bad_spec(text, "cron takes 5 fields, not " + std::to_string(fields.size()));
  parse_field(text, fields[0], 0, 0, 59, spec.minutes);
  parse_field(text, fields[1], 1, 0, 23, spec.hours);
  parse_field(text, fields[2], 2, 1, 31, spec.days);
  parse_field(text, fields[3], 3, 1, 12, spec.months);
  parse_field(text, fields[4], 4, 0, 6, spec.weekdays);
  spec.any_day = fields[2][0] == '*';
  spec.any_weekday = fields[4][0] == '*';
  return spec;
}

std::int64_t next_fire(const Spec& spec, const Zone& zone, std::int64_t after) {
  if (spec.every_usecs > 0) return (floor_div(after, spec.every_usecs) + 1) * spec.every_usecs;
  const std::int64_t s = floor_div(after, usecs_per_second);
  Civil c = civil_from_seconds(floor_div(s + zone.offset_at(s), 60) * 60);
  const std::int64_t last_year = c.year + 5;
  const auto next_day = [&] {
    c.hour = c.minute = 0;
    if (++c.day > days_in_month(c.year, c.month)) {
      c.day = 1;
      if (++c.month > 12) {
        c.month = 1;
        ++c.year;
      }
    }
  };
  while (c.year <= last_year) {
    if (!spec.months[static_cast<std::size_t>(c.month)]) {
      c.day = days_in_month(c.year, c.month);
      next_day();
      continue;
    }
    const bool dom = spec.days[static_cast<std::size_t>(c.day)];
    const bool dow = spec.weekdays[static_cast<std::size_t>(weekday(c.year, c.month, c.day))];
    // As cron: a field starting with '*' (also "*/2") makes the two day fields AND, else OR.
    const bool day = spec.any_day || spec.any_weekday ? dom && dow : dom || dow;
    if (!day) {
      next_day();
      continue;
    }
    if (!spec.hours[static_cast<std::size_t>(c.hour)]) {
      c.minute = 0;
      if (++c.hour > 23) next_day();
      continue;
    }
    if (spec.minutes[static_cast<std::size_t>(c.minute)]) {
      // A local minute in a gap does not fire; one in an overlap fires at its first instant only.
      const std::vector<std::int64_t> at = zone.from_local(seconds_from_civil(c));
      if (!at.empty() && at.front() * usecs_per_second > after) return at.front() * usecs_per_second;
    }
    if (++c.minute > 59) {
      c.minute = 0;
      if (++c.hour > 23) next_day();
    }
  }
  invalid_parameter("the schedule never fires within 5 years");
}

Due due(const Spec& spec, const Zone& zone, std::int64_t next, std::int64_t now, int catch_up) {
  Due out;
  if (next > now) {
    out.next = next;
    return out;
  }
  const std::size_t keep = static_cast<std::size_t>(catch_up) + 1;
  std::deque<std::int64_t> newest;
  std::int64_t counted = 0, f = next;
  for (; f <= now && counted < max_counted_fires; ++counted, f = next_fire(spec, zone, f)) {
    newest.push_back(f);
    if (newest.size() > keep) newest.pop_front();
  }
  if (f <= now) {
    // Too many to count: the newest fires are found in a window before now that doubles until it
    // holds enough of them (or reaches back to the fires counted).
    for (std::int64_t window = 60 * usecs_per_second;; window *= 2) {
      const std::int64_t from = std::max(now - window, f - 1);
      std::deque<std::int64_t> found;
      std::int64_t n = 0;
      for (std::int64_t g = next_fire(spec, zone, from); g <= now && n < max_counted_fires;
           g = next_fire(spec, zone, g), ++n) {
        found.push_back(g);
        if (found.size() > keep) found.pop_front();
      }
      if (found.size() >= keep || from == f - 1) {
        // Reaching back to the fires counted: the newest of those come first.
        for (const std::int64_t g : found) {
          newest.push_back(g);
          if (newest.size() > keep) newest.pop_front();
        }
        break;
      }
    }
  }
  out.start.assign(newest.begin(), newest.end());
  out.skipped = std::max<std::int64_t>(counted - static_cast<std::int64_t>(out.start.size()), 0);
  out.next = next_fire(spec, zone, now);
  return out;
}

std::string run_key(std::string_view schedule, std::int64_t fire) {
  return std::string(schedule) + "@" + format_timestamp(fire);
}

void set_option(Options& options, std::string_view key, std::string_view json_type, std::string_view value) {
  if (key == "timezone") {
    if (json_type != "string") invalid_parameter("schedule option timezone must be a string");
    options.timezone = Zone::load(value)->name();
  } else if (key == "catch_up") {
    int n = -1;
    if (json_type == "number" && !value.empty() && value.size() <= 4 &&
        std::all_of(value.begin(), value.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      n = std::atoi(std::string(value).c_str());
    if (n < 0 || n > max_catch_up)
      invalid_parameter("schedule option catch_up must be a whole number from 0 to " + std::to_string(max_catch_up));
    options.catch_up = n;
  } else if (key == "input") {
    options.input = std::string(value);
  } else {
    invalid_parameter("unknown schedule option " + std::string(key.substr(0, 100)) +
                      " (the options are timezone, catch_up and input)");
  }
}

}  // namespace fy::core::schedule
