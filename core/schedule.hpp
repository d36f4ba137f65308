// Workflow schedules (contract §6.8, docs/workflows.md#schedules): the spec of a schedule (a
// 5-field cron expression read in a time zone, or "@every <interval>"), its fire times, and which
// fires a tick starts. Both backends use this code, and read time zones from the same tz database
// files (TZif), so they agree on every fire.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fy::core::schedule {

inline constexpr std::size_t max_schedule_bytes = 200;
inline constexpr std::size_t max_spec_bytes = 200;
inline constexpr std::size_t max_zone_bytes = 100;
inline constexpr int max_catch_up = 1000;
inline constexpr std::int64_t min_every_usecs = 1'000'000;                 // 1 second
inline constexpr std::int64_t max_every_usecs = 366LL * 86'400'000'000LL;  // 366 days
// Missed fires a tick counts one by one; beyond, the count stops there (the fires are skipped all
// the same).
inline constexpr std::int64_t max_counted_fires = 100'000;

// A time zone of the tz database: UTC offsets by instant, from the zone's TZif file (the
// directory in $TZDIR, else /usr/share/zoneinfo), and past its last transition from the file's
// POSIX TZ rule. "UTC" needs no file.
class Zone {
 public:
  // 22023 for a name that is not a zone of the tz database.
  static std::shared_ptr<const Zone> load(std::string_view name);
  const std::string& name() const { return name_; }
  // Seconds east of UTC at `utc` (seconds since 1970).
  std::int64_t offset_at(std::int64_t utc) const;
  // The instants (seconds since 1970, ascending) whose local time is `local` (a local time read as
  // if it were UTC): none in a gap (clocks jumped over it), two in an overlap (clocks went back).
  std::vector<std::int64_t> from_local(std::int64_t local) const;

  struct Rule;  // the POSIX TZ rule after the last transition

 private:
  std::string name_;
  std::vector<std::int64_t> transitions_;  // instants, ascending
  std::vector<std::int32_t> offsets_;      // the offset from each transition on
  std::int32_t initial_ = 0;               // before the first
  std::shared_ptr<const Rule> rule_;       // after the last, if the file has one
};

// A parsed spec: "@every 15m" (fires at every multiple of the interval since 1970-01-01 UTC), or
// cron: minute hour day-of-month month day-of-week, each '*', a number, a range a-b, a step
// (*/n, a-b/n) or a list of those; months JAN-DEC and weekdays SUN-SAT (0 or 7 is Sunday) by
// name too; @hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually). When both days
// are restricted a day matching either fires (as cron does). 22023 for anything else.
struct Spec {
  std::int64_t every_usecs = 0;  // > 0: "@every"
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days;     // 1..31
  std::bitset<13> months;   // 1..12
  std::bitset<7> weekdays;  // 0 = Sunday
  bool any_day = true, any_weekday = true;
};
Spec parse_spec(std::string_view text);

// The first fire after `after` (µs since 1970). A cron fire is a local minute of the zone: one in
// a gap (a spring-forward) does not fire; one in an overlap (a fall-back) fires once, at its first
// instant. 22023 when the spec never fires within 5 years (e.g. "0 0 30 2 *").
std::int64_t next_fire(const Spec& spec, const Zone& zone, std::int64_t after);

// What a tick at `now` does with a schedule whose next fire is `next`: the fires to start (the
// newest catch_up + 1 of those due, oldest first), the count of the others (skipped), and the
// schedule's next fire after now.
struct Due {
  std::vector<std::int64_t> start;
  std::int64_t skipped = 0;
  std::int64_t next = 0;
};
Due due(const Spec& spec, const Zone& zone, std::int64_t next, std::int64_t now, int catch_up);

// The run_key of a fire: "<schedule>@<fire time, ISO 8601 UTC to the microsecond>".
std::string run_key(std::string_view schedule, std::int64_t fire);

// schedule_create's options: timezone (a zone name), catch_up (0..1000), input (any JSON, given
// by the backend as its canonical text). Unknown keys and bad values are 22023 naming them.
struct Options {
  std::string timezone = "UTC";
  int catch_up = 0;
  std::string input = "{}";
};
void set_option(Options& options, std::string_view key, std::string_view json_type, std::string_view value);

}  // namespace fy::core::schedule
