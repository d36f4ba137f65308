// Queue options, their defaults and their validation, and the priority classes: one source for the
// extension's queue_create / queue_alter, the SQLite shim and the client's defaults
// (docs/sql-api.md#queues lists the options).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/input.hpp"

namespace fy::core {

inline constexpr int priority_classes = 6;
// Highest first; claim delivers lower numbers first.
inline constexpr const char* priority_names[priority_classes] = {"emergency",   "security_control", "realtime",
                                                                 "interactive", "background",       "bulk"};
// The class number of a name; 22023 naming the argument for an unknown one.
int priority_from_name(const char* argument, std::string_view name);

inline constexpr std::size_t max_queue_name_bytes = 128;
inline constexpr std::size_t max_consumer_bytes = 256;
inline constexpr std::size_t max_partition_key_bytes = 512;
inline constexpr std::size_t max_error_bytes = 4096;
inline constexpr int max_claim_batch = 1000;
// A claim for longer than this (its visibility, an extend, a workflow step's deadline) takes the
// message out of its ready lane (ready_pos NULL: messages_claim finds it when it lapses): a
// listing held open stops its lane's cursor, and every claim would read what was consumed past it
// (docs/architecture.md, "Ready lanes"). The PL/pgSQL edition writes the same number (60000000).
inline constexpr std::int64_t max_listed_claim_usecs = 60'000'000;
// A release generation (0.11.0): an ack adds the room it gives back to its slot's delta row of
// the generation (forgeyard.now() in these units since 1970), in place; the first ack of a later
// generation folds it into the release row. Under a held snapshot an ack so walks at most one
// generation's versions of one row (docs/architecture.md, "Capacity slots"). The PL/pgSQL edition
// writes the same number (100000).
inline constexpr std::int64_t release_generation_usecs = 100'000;
// Acks fold the older generations into the release row at most this often (0.12.0): every
// admission reads that row, and under a held snapshot walks a version per fold since the snapshot
// (ten a second per slot with a fold per generation). maintain() folds every generation before its
// own. The PL/pgSQL edition writes the same number of generations (10).
inline constexpr std::int64_t release_fold_usecs = 1'000'000;
// An admission generation (0.12.0): a producer adds what it admits to its slot's row of the
// generation (forgeyard.now() in these units since 1970), in place, under the slot row's lock; the
// first producer of a later generation folds it into the slot row. The slot row so keeps one
// version per generation with producers, not one per message (docs/architecture.md, "Capacity
// slots"). The PL/pgSQL edition writes the same number (1000000).
inline constexpr std::int64_t admission_generation_usecs = 1'000'000;
// The delta rows of both (0.14.0) are in four segments by the period of this length their
// generation falls in, modulo 4: the LIST partitions of queue_release_deltas and
// queue_admit_deltas, which maintain() truncates once emptied (their keys in sql/src/forgeyard.sql:
// (gen / 100) % 4 and (gen / 10) % 4).
inline constexpr std::int64_t usage_segment_usecs = 10'000'000;
inline constexpr int usage_segments = 4;
inline constexpr std::int64_t max_queue_duration_usecs = 30 * usecs_per_day;
// The most delivery attempts a queue may allow (attempt numbers stay small on both backends).
inline constexpr std::int64_t max_queue_attempts = 1000;
inline constexpr std::int64_t max_queue_retention_usecs = 365 * usecs_per_day;

struct QueueOptions {
  std::int64_t max_messages = 100000;
  std::int64_t max_bytes = 1LL << 30;
  std::int64_t max_payload_bytes = std::int64_t{64} * 1024;
  std::int64_t visibility_usecs = 30 * usecs_per_second;
  std::int64_t max_attempts = 5;
  std::int64_t backoff_base_usecs = usecs_per_second;
  std::int64_t backoff_max_usecs = 300 * usecs_per_second;
  bool partitioned = false;        // ordering: none | partition
  bool keep_dead_payload = false;  // dead_letter_payload: drop | keep
  std::int64_t retain_acked_usecs = 0;
  std::int64_t max_dead = 100000;
  std::int64_t dead_retention_usecs = 7 * usecs_per_day;
  std::int64_t dedup_window_usecs = usecs_per_day;
  // admit_<class>: the percentage of max_messages / max_bytes up to which the class is admitted.
  std::int64_t admit_percent[priority_classes] = {100, 100, 95, 90, 80, 70};
  bool notify = false;
  // Flow control (core/flow.hpp). retry_budget: retries admitted per window as a fraction of the
  // messages admitted in it (none: no budget), never fewer than retry_budget_min.
  std::optional<double> retry_budget;
  std::int64_t retry_budget_min = 10;
  std::int64_t retry_budget_window_usecs = 60 * usecs_per_second;
  // admission_limit(): producers' enqueues per interval (0: none); set by its own function.
  std::int64_t admission_rate = 0;
  std::int64_t admission_per_usecs = 0;
  // max_in_flight_per_key: at most this many messages of one fairness key are heads, ready or in
  // flight, at a time (0: no limit). Never with ordering partition (which is the case 1 by
  // partition_key).
  std::int64_t max_in_flight_per_key = 0;
  // fairness: within a class, claims go by each message's virtual pass (stride scheduling over
  // its fairness key's weight), not by age.
  bool fairness = false;
  // aging: a message of a class below realtime that waited this long competes one class higher
  // per such interval, up to realtime (0: none). emergency and security_control keep their lead.
  std::int64_t aging_usecs = 0;
};

// The class a ready message competes in under aging: its own, or one higher per `aging_usecs` it
// has waited since it became visible, never above realtime (and realtime and above never move).
inline int aged_class(int priority, std::int64_t waited_usecs, std::int64_t aging_usecs) {
  constexpr int realtime = 2;
  if (aging_usecs <= 0 || priority <= realtime || waited_usecs < aging_usecs) return priority;
  const std::int64_t steps = waited_usecs / aging_usecs;
  return steps >= priority - realtime ? realtime : priority - static_cast<int>(steps);
}

inline constexpr std::int64_t max_key_limit = 1000000;

// The key a pending message is counted under in queue_partitions, whose heads alone are
// claimable: its partition_key in a partition-ordered queue (one head per key), its fairness_key
// in a queue with max_in_flight_per_key; none elsewhere (every message is a head).
inline const std::optional<std::string>& group_key(const QueueOptions& o,
                                                   const std::optional<std::string>& partition_key,
                                                   const std::optional<std::string>& fairness_key) {
  static const std::optional<std::string> none;
  if (o.partitioned) return partition_key;
  return o.max_in_flight_per_key > 0 ? fairness_key : none;
}

// How many waiting messages of a key of a max_in_flight_per_key queue become heads once its
// counts are `pending` (heads and waiting) and `heads`: up to the limit, never more than wait.
inline std::int64_t heads_to_promote(std::int64_t limit, std::int64_t pending, std::int64_t heads) {
  const std::int64_t room = limit - heads, waiting = pending - heads;
  return room <= 0 || waiting <= 0 ? 0 : (room < waiting ? room : waiting);
}
// How many of `n` messages just added to a key are heads, from the key's counts after adding them
// (the enqueue made min(n, limit - heads) heads only if none was waiting, so what waits now says it).
// Fair queues: a message's pass is its key's last pass or the class's lowest pending pass,
// whichever is later, plus pass_unit / weight (weights 1..max_fair_weight).
inline constexpr std::int64_t pass_unit = 1000000;
inline constexpr std::int64_t max_fair_weight = 1000;
inline std::int64_t pass_step(std::int64_t weight) {
  return pass_unit / (weight < 1 ? 1 : weight);
}
// The passes of `n` messages of one key, given the key's last pass after they were added (the
// last of them): from the first to the last.
inline std::int64_t nth_pass(std::int64_t last_pass, std::int64_t weight, std::int64_t n, std::int64_t i) {
  return last_pass - (n - 1 - i) * pass_step(weight);
}
// fairness_weight's weight (none: 1), 22023 outside 1..max_fair_weight; and its refusal of a queue
// without fairness.
std::int64_t fair_weight(std::optional<std::int64_t> weight);
[[noreturn]] void throw_not_fair(std::string_view queue);
// The fairness key a message is scheduled under ("" for one without: they share a key).
inline std::string fair_key(const std::optional<std::string>& fairness_key) {
  return fairness_key.value_or(std::string());
}
inline std::int64_t heads_made(std::int64_t n, std::int64_t pending, std::int64_t heads) {
  const std::int64_t waiting = pending - heads;
  return waiting >= n ? 0 : n - waiting;
}

// Sets one option from its JSON text (numbers, booleans and names as text; durations as
// microseconds, already converted by the caller). 22023 naming the option when unknown or invalid.
void set_queue_option(QueueOptions& options, std::string_view key, std::string_view value);
bool is_duration_option(std::string_view key);
void set_queue_duration(QueueOptions& options, std::string_view key, const Duration& d);
// Cross-field checks (backoff_base <= backoff_max, admission percentages ordered by class).
void validate(const QueueOptions& options);

// The defaults of every option, as queue_create applies them when the options leave one out.
inline constexpr QueueOptions default_queue_options{};

}  // namespace fy::core
