#include "core.hpp"

#include <array>
#include <cstring>
#include <limits>
#include <utility>

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

void check_name(const char* argument, bool present, std::string_view value, std::size_t max_bytes) {
  using std::string;
  if (!present) throw Error(sqlstate::null_value, string(argument) + " must not be NULL");
  if (value.empty()) throw Error(sqlstate::invalid_parameter, string(argument) + " must not be empty");
  if (value.size() > max_bytes)
    throw Error(sqlstate::string_too_long,
                string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                "length is " + std::to_string(value.size()) + " bytes");
}

std::int64_t check_duration(const char* argument, const Duration& d, std::int64_t max_usecs) {
  using std::string;
  if (d.months != 0)
    throw Error(sqlstate::invalid_parameter,
                string(argument) + " must not have a month or year component",
                "months and years have no fixed length; use days or hours");
  std::int64_t day_part = 0;
  std::int64_t total = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(d.days), usecs_per_day, &day_part) ||
      __builtin_add_overflow(day_part, d.usecs, &total))
    throw Error(sqlstate::invalid_parameter, string(argument) + " is out of range");
  if (total <= 0) throw Error(sqlstate::invalid_parameter, string(argument) + " must be positive");
  if (total > max_usecs)
    throw Error(sqlstate::invalid_parameter, string(argument) + " is too long",
                "the maximum is " + std::to_string(max_usecs / usecs_per_second) + " seconds");
  return total;
}

std::int64_t next_epoch(std::int64_t previous, std::int64_t now_unix_usecs) {
  if (previous == std::numeric_limits<std::int64_t>::max())
    throw Error(sqlstate::internal_error, "lease epoch space exhausted");
  return previous + 1 > now_unix_usecs ? previous + 1 : now_unix_usecs;
}

const char* lease_state(const LeaseRow& row, std::int64_t now) {
  if (row.released) return "released";
  if (row.reaped) return "reaped";
  return is_expired(row.expires_at, now) ? "expired" : "live";
}

AcquireDecision decide_acquire(const LeaseRow* current, std::string_view owner, std::int64_t now_unix_usecs) {
  if (current == nullptr) return {AcquireAction::insert, next_epoch(0, now_unix_usecs)};
  if (!is_live(*current, now_unix_usecs))
    return {AcquireAction::take_over, next_epoch(current->epoch, now_unix_usecs)};
  if (current->owner == owner) return {AcquireAction::extend, current->epoch};
  return {AcquireAction::contended, current->epoch};
}

void throw_version_conflict(const std::string& table, std::int64_t expected, std::int64_t current) {
  throw Error(sqlstate::version_conflict, "version conflict on " + table,
              "expected version " + std::to_string(expected) + ", current version " + std::to_string(current));
}

BeginAction decide_begin(const IdempotencyRow* row, std::string_view request_digest, std::int64_t now) {
  // Past its retention a key counts as unused, unless an attempt still holds a live lock on it.
  if (row == nullptr || (is_expired(row->expires_at, now) && (row->completed || is_expired(row->locked_until, now))))
    return BeginAction::start;
  if (row->request_digest != request_digest) return BeginAction::mismatch;
  if (row->completed) return BeginAction::replay;
  if (!is_expired(row->locked_until, now)) return BeginAction::in_progress;
  return BeginAction::take_over;
}

void check_attempt(const IdempotencyRow& row, const std::int64_t* attempt, const char* operation) {
  if (attempt != nullptr && *attempt != row.attempt)
    throw Error(sqlstate::stale_fence,
                std::string(operation) + " by attempt " + std::to_string(*attempt) + " refused: attempt " +
                    std::to_string(row.attempt) + " owns the key now",
                "the lock expired and another caller took the work over");
  if (row.completed)
    throw Error(sqlstate::stale_fence, std::string(operation) + " refused: the key is already completed",
                "begin again to get the stored response");
}

int priority_from_name(const char* argument, std::string_view name) {
  for (int i = 0; i < priority_classes; ++i)
    if (name == priority_names[i]) return i;
  throw Error(sqlstate::invalid_parameter, std::string(argument) + " must be one of emergency, security_control, "
                                           "realtime, interactive, background, bulk",
              "got \"" + std::string(name) + "\"");
}

namespace {
[[noreturn]] void bad_option(std::string_view key, const std::string& why) {
  throw Error(sqlstate::invalid_parameter, "queue option " + std::string(key) + " " + why);
}

std::int64_t positive_integer(std::string_view key, std::string_view value, std::int64_t max) {
  std::int64_t v = 0;
  std::size_t i = 0;
  if (value.empty()) bad_option(key, "must be a positive integer");
  for (; i < value.size(); ++i) {
    if (value[i] < '0' || value[i] > '9') bad_option(key, "must be a positive integer");
    if (v > (max - (value[i] - '0')) / 10) bad_option(key, "must be at most " + std::to_string(max));
    v = v * 10 + (value[i] - '0');
  }
  if (v <= 0) bad_option(key, "must be a positive integer");
  return v;
}

bool boolean(std::string_view key, std::string_view value) {
  if (value == "true") return true;
  if (value == "false") return false;
  bad_option(key, "must be true or false");
}

struct DurationOption {
  const char* key;
  std::int64_t QueueOptions::*field;
  std::int64_t max;
};
constexpr DurationOption duration_options[] = {
    {"visibility_timeout", &QueueOptions::visibility_usecs, max_queue_duration_usecs},
    {"backoff_base", &QueueOptions::backoff_base_usecs, max_queue_duration_usecs},
    {"backoff_max", &QueueOptions::backoff_max_usecs, max_queue_duration_usecs},
    {"retain_acked", &QueueOptions::retain_acked_usecs, max_queue_retention_usecs},
    {"dead_letter_retention", &QueueOptions::dead_retention_usecs, max_queue_retention_usecs},
    {"dedup_window", &QueueOptions::dedup_window_usecs, max_queue_retention_usecs},
};
}  // namespace

bool is_duration_option(std::string_view key) {
  for (const DurationOption& d : duration_options)
    if (key == d.key) return true;
  return false;
}

void set_queue_duration(QueueOptions& options, std::string_view key, const Duration& value) {
  for (const DurationOption& d : duration_options)
    if (key == d.key) {
      // retain_acked may be zero: acked messages are then deleted at once.
      if (key == "retain_acked" && value.months == 0 && value.days == 0 && value.usecs == 0) {
        options.*d.field = 0;
        return;
      }
      options.*d.field = check_duration(("queue option " + std::string(key)).c_str(), value, d.max);
      return;
    }
  bad_option(key, "is not a duration option");
}

void set_queue_option(QueueOptions& o, std::string_view key, std::string_view value) {
  constexpr std::int64_t big = std::int64_t{1} << 50;
  if (key == "max_messages") o.max_messages = positive_integer(key, value, big);
  else if (key == "max_bytes") o.max_bytes = positive_integer(key, value, big);
  else if (key == "max_payload_bytes") o.max_payload_bytes = positive_integer(key, value, 64 * 1024 * 1024);
  else if (key == "max_attempts") o.max_attempts = positive_integer(key, value, 1000);
  else if (key == "max_dead") o.max_dead = positive_integer(key, value, big);
  else if (key == "notify") o.notify = boolean(key, value);
  else if (key == "ordering") {
    if (value != "none" && value != "partition") bad_option(key, "must be none or partition");
    o.partitioned = value == "partition";
  } else if (key == "dead_letter_payload") {
    if (value != "drop" && value != "keep") bad_option(key, "must be drop or keep");
    o.keep_dead_payload = value == "keep";
  } else if (key.substr(0, 6) == "admit_") {
    const int p = priority_from_name(("queue option " + std::string(key)).c_str(), key.substr(6));
    o.admit_percent[p] = positive_integer(key, value, 100);
  } else if (is_duration_option(key)) {
    bad_option(key, "must be an interval");
  } else {
    bad_option(key, "is unknown");
  }
}

void validate(const QueueOptions& o) {
  const std::pair<const char*, std::int64_t> positive[] = {
      {"max_messages", o.max_messages},         {"max_bytes", o.max_bytes},
      {"max_payload_bytes", o.max_payload_bytes}, {"visibility_timeout", o.visibility_usecs},
      {"max_attempts", o.max_attempts},         {"backoff_base", o.backoff_base_usecs},
      {"backoff_max", o.backoff_max_usecs},     {"max_dead", o.max_dead},
      {"dead_letter_retention", o.dead_retention_usecs}, {"dedup_window", o.dedup_window_usecs}};
  for (const auto& [key, value] : positive)
    if (value <= 0) bad_option(key, "must be positive");
  if (o.retain_acked_usecs < 0) bad_option("retain_acked", "must not be negative");
  if (o.visibility_usecs > max_queue_duration_usecs || o.backoff_max_usecs > max_queue_duration_usecs)
    bad_option("visibility_timeout", "and backoff_max must be at most 30 days");
  for (int p = 0; p < priority_classes; ++p)
    if (o.admit_percent[p] < 1 || o.admit_percent[p] > 100)
      bad_option(std::string("admit_") + priority_names[p], "must be between 1 and 100");
  if (o.max_payload_bytes > o.max_bytes) bad_option("max_payload_bytes", "must not exceed max_bytes");
  if (o.backoff_base_usecs > o.backoff_max_usecs) bad_option("backoff_base", "must not exceed backoff_max");
  for (int p = 1; p < priority_classes; ++p)
    if (o.admit_percent[p] > o.admit_percent[p - 1])
      bad_option(std::string("admit_") + priority_names[p],
                 "must not exceed admit_" + std::string(priority_names[p - 1]) + ": a lower class is refused earlier");
}

int capacity_slots(const QueueOptions& o) {
  // Each slot's share holds at least 1024 messages and 1024 of the largest payloads, so a
  // payload of max_payload_bytes always fits an empty slot and the split refuses little early.
  std::int64_t slots = o.max_messages / 1024;
  const std::int64_t by_bytes = o.max_bytes / 1024 / o.max_payload_bytes;
  if (by_bytes < slots) slots = by_bytes;
  return static_cast<int>(slots < 1 ? 1 : slots > 8 ? 8 : slots);
}

Usage slot_budget(const QueueOptions& o, int slots, int slot) {
  auto share = [&](std::int64_t total) { return total / slots + (slot < total % slots ? 1 : 0); };
  return {share(o.max_messages), share(o.max_bytes)};
}

bool admits(const QueueOptions& o, int priority, const Usage& used, const Usage& budget, std::int64_t bytes) {
  const std::int64_t percent = o.admit_percent[priority];
  // Integer arithmetic: the class may use floor(budget * percent / 100) of the slot.
  const auto limit = [&](std::int64_t total) {
    return total / 100 * percent + total % 100 * percent / 100;
  };
  return used.messages + 1 <= limit(budget.messages) && used.bytes + bytes <= limit(budget.bytes);
}

const char* pressure(const QueueOptions& o, const Usage& used) {
  const double m = static_cast<double>(used.messages) / static_cast<double>(o.max_messages);
  const double b = static_cast<double>(used.bytes) / static_cast<double>(o.max_bytes);
  const double fill = m > b ? m : b;
  if (fill < 0.70) return "normal";
  if (fill <= 0.90) return "elevated";
  return "saturated";
}

bool dead_after_failure(const QueueOptions& o, std::int64_t attempt, bool permanent) {
  return permanent || attempt >= o.max_attempts;
}

std::int64_t retry_delay_usecs(const QueueOptions& o, std::int64_t attempt, double unit_random) {
  return backoff_full_jitter(static_cast<int>(attempt > 1000 ? 1000 : attempt), o.backoff_base_usecs,
                             o.backoff_max_usecs, unit_random);
}

std::int64_t backoff_full_jitter(int attempt, std::int64_t base_usecs, std::int64_t cap_usecs, double unit_random) {
  if (attempt < 1) attempt = 1;
  if (base_usecs <= 0 || cap_usecs <= 0) return 0;
  std::int64_t ceiling = base_usecs;
  for (int i = 1; i < attempt && ceiling < cap_usecs; ++i)
    ceiling = ceiling > cap_usecs / 2 ? cap_usecs : ceiling * 2;
  if (ceiling > cap_usecs) ceiling = cap_usecs;
  if (unit_random < 0) unit_random = 0;
  if (unit_random >= 1) unit_random = 0.999999999;
  return static_cast<std::int64_t>(static_cast<double>(ceiling + 1) * unit_random);
}

}  // namespace fy::core
