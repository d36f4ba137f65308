#include "core/queue_options.hpp"

#include <string>
#include <utility>

#include "core/errors.hpp"

namespace fy::core {

int priority_from_name(const char* argument, std::string_view name) {
  for (int i = 0; i < priority_classes; ++i)
    if (name == priority_names[i]) return i;
  throw Error(sqlstate::invalid_parameter,
              std::string(argument) +
                  " must be one of emergency, security_control, "
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
    {"retry_budget_window", &QueueOptions::retry_budget_window_usecs, max_queue_duration_usecs},
    {"aging", &QueueOptions::aging_usecs, max_queue_duration_usecs},
};

// A fraction in [0, 1] as JSON writes it: digits, an optional point and digits (no exponent).
double fraction(std::string_view key, std::string_view value) {
  double whole = 0, scale = 1;
  bool point = false, digits = false;
  for (char c : value) {
    if (c == '.' && !point) {
      point = true;
    } else if (c >= '0' && c <= '9') {
      digits = true;
      if (point && scale < 1e-12) continue;  // past double's precision
      if (point) {
        scale /= 10;
        whole += (c - '0') * scale;
      } else {
        whole = whole * 10 + (c - '0');
      }
    } else {
      bad_option(key, "must be a number between 0 and 1");
    }
    if (whole > 1) bad_option(key, "must be a number between 0 and 1");
  }
  if (!digits) bad_option(key, "must be a number between 0 and 1");
  return whole;
}

std::int64_t non_negative_integer(std::string_view key, std::string_view value, std::int64_t max) {
  if (value == "0") return 0;
  if (value.empty() || value[0] < '1' || value[0] > '9') bad_option(key, "must be a non-negative integer");
  return positive_integer(key, value, max);
}
}  // namespace

bool is_duration_option(std::string_view key) {
  for (const DurationOption& d : duration_options)
    if (key == d.key) return true;
  return false;
}

void set_queue_duration(QueueOptions& options, std::string_view key, const Duration& value) {
  for (const DurationOption& d : duration_options)
    if (key == d.key) {
      // retain_acked may be zero: acked messages are then deleted at once; aging zero is none.
      if ((key == "retain_acked" || key == "aging") && value.months == 0 && value.days == 0 && value.usecs == 0) {
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
  if (key == "max_messages")
    o.max_messages = positive_integer(key, value, big);
  else if (key == "max_bytes")
    o.max_bytes = positive_integer(key, value, big);
  else if (key == "max_payload_bytes")
    o.max_payload_bytes = positive_integer(key, value, std::int64_t{64} * 1024 * 1024);
  else if (key == "max_attempts")
    o.max_attempts = positive_integer(key, value, max_queue_attempts);
  else if (key == "max_dead")
    o.max_dead = positive_integer(key, value, big);
  else if (key == "notify")
    o.notify = boolean(key, value);
  else if (key == "fairness")
    o.fairness = boolean(key, value);
  else if (key == "retry_budget")
    o.retry_budget = value == "null" ? std::nullopt : std::optional<double>(fraction(key, value));
  else if (key == "max_in_flight_per_key")
    o.max_in_flight_per_key = value == "null" ? 0 : positive_integer(key, value, max_key_limit);
  else if (key == "retry_budget_min")
    o.retry_budget_min = non_negative_integer(key, value, big);
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

std::int64_t fair_weight(std::optional<std::int64_t> weight) {
  if (!weight) return 1;
  if (*weight < 1 || *weight > max_fair_weight)
    throw Error(sqlstate::invalid_parameter, "weight must be between 1 and " + std::to_string(max_fair_weight));
  return *weight;
}

void throw_not_fair(std::string_view queue) {
  throw Error(sqlstate::invalid_parameter, "queue \"" + std::string(queue) + "\" is not fair",
              "set its option fairness first: forgeyard.queue_alter(tenant, queue, '{\"fairness\": true}')");
}

void validate(const QueueOptions& o) {
  const std::pair<const char*, std::int64_t> positive[] = {{"max_messages", o.max_messages},
                                                           {"max_bytes", o.max_bytes},
                                                           {"max_payload_bytes", o.max_payload_bytes},
                                                           {"visibility_timeout", o.visibility_usecs},
                                                           {"max_attempts", o.max_attempts},
                                                           {"backoff_base", o.backoff_base_usecs},
                                                           {"backoff_max", o.backoff_max_usecs},
                                                           {"max_dead", o.max_dead},
                                                           {"dead_letter_retention", o.dead_retention_usecs},
                                                           {"dedup_window", o.dedup_window_usecs},
                                                           {"retry_budget_window", o.retry_budget_window_usecs}};
  for (const auto& [key, value] : positive)
    if (value <= 0) bad_option(key, "must be positive");
  if (o.max_attempts > max_queue_attempts)
    bad_option("max_attempts", "must be at most " + std::to_string(max_queue_attempts));
  if (o.retain_acked_usecs < 0) bad_option("retain_acked", "must not be negative");
  if (o.aging_usecs < 0 || o.aging_usecs > max_queue_duration_usecs)
    bad_option("aging", "must be an interval of at least 0 and at most 30 days");
  if (o.aging_usecs > 0 && o.fairness)
    bad_option("aging", "cannot be combined with fairness (a fair queue orders a class by pass, not by age)");
  if (o.retry_budget && (*o.retry_budget < 0 || *o.retry_budget > 1))
    bad_option("retry_budget", "must be a number between 0 and 1");
  if (o.retry_budget_min < 0) bad_option("retry_budget_min", "must not be negative");
  // (0 is none; the client's option maps a value below 1 to -1.)
  if (o.max_in_flight_per_key < 0) bad_option("max_in_flight_per_key", "must be a positive integer");
  if (o.max_in_flight_per_key > max_key_limit)
    bad_option("max_in_flight_per_key", "must be at most " + std::to_string(max_key_limit));
  if (o.partitioned && o.max_in_flight_per_key > 0)
    bad_option("max_in_flight_per_key",
               "cannot be combined with ordering partition (which hands out one message of a partition_key at a time)");
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

}  // namespace fy::core
