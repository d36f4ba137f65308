// Pure logic shared by the PostgreSQL extension and the client's SQLite shim (docs/architecture.md#the-shared-core).
// It is compiled into both, so it must never see PostgreSQL, libpq or SQLite headers. This header
// includes the core's other headers, so "core/core.hpp" is all a backend needs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/delivery.hpp"
#include "core/digest.hpp"  // sha256, to_hex, from_hex
#include "core/errors.hpp"
#include "core/input.hpp"
#include "core/lease.hpp"
#include "core/queue_errors.hpp"
#include "core/queue_options.hpp"

namespace fy::core {

// ---- Compare-and-set ------------------------------------------------------------------

inline constexpr char version_column[] = "entity_version";
inline constexpr char tenant_column[] = "tenant_id";
inline constexpr std::size_t max_identifier_bytes = 63;

// FY002 for an UPDATE that does not move a versioned row from `expected` to expected + 1.
[[noreturn]] void throw_version_conflict(const std::string& table, std::int64_t expected, std::int64_t current);

// ---- Idempotency keys -------------------------------------------------------------------

inline constexpr std::size_t max_scope_bytes = 256;
inline constexpr std::size_t max_idempotency_key_bytes = 256;
inline constexpr std::size_t max_request_digest_bytes = 64;
inline constexpr std::size_t max_recovery_point_bytes = std::size_t{64} * 1024;
inline constexpr std::size_t max_response_bytes = std::size_t{1024} * 1024;
inline constexpr std::int64_t max_idempotency_lock_usecs = usecs_per_day;
inline constexpr std::int64_t max_idempotency_retention_usecs = 90 * usecs_per_day;

// The stored state of an idempotency key, times in microseconds since 1970.
struct IdempotencyRow {
  std::string request_digest;
  bool completed = false;
  std::int64_t attempt = 0;
  std::int64_t locked_until = 0;
  std::int64_t expires_at = 0;  // end of retention: the key counts as unused from then on
};

// Attempt numbers are drawn from one counter per store: strictly increasing and never reused, so
// an attempt that lost the key (lock expired, key abandoned or purged) can never act for a later one.
enum class BeginAction {
  start,        // unused (or past retention): record it and do the work under a new attempt
  replay,       // completed with this digest: return the stored response
  take_over,    // in progress but its lock expired: do the work again under a new attempt
  in_progress,  // FY010: someone holds a live lock
  mismatch,     // FY011: same key, different request
};
BeginAction decide_begin(const IdempotencyRow* row, std::string_view request_digest, std::int64_t now);

// checkpoint / complete / abandon: FY001 unless `attempt` (when given) is the row's attempt and
// the key is still in progress.
void check_attempt(const IdempotencyRow& row, const std::int64_t* attempt, const char* operation);

// P0002 for a key that does not exist; FY010 when attempt `holder` holds the key's live lock;
// FY011 when the key was used with a different request digest.
[[noreturn]] void throw_unknown_key(std::string_view scope, std::string_view key);
[[noreturn]] void throw_key_in_progress(std::string_view key, std::int64_t holder);
[[noreturn]] void throw_key_mismatch(std::string_view key);

// ---- Queues (the options and priority classes are in queue_options.hpp) ----------------

// Capacity is kept in `slots` counter rows so that producers do not serialize on one row. Each
// slot has its share of the budget; a message is admitted into a slot only within the share,
// so the queue never exceeds its limits (it may refuse slightly early when shares are uneven).
int capacity_slots(const QueueOptions& options);
struct Usage {
  std::int64_t messages = 0;
  std::int64_t bytes = 0;
};
Usage slot_budget(const QueueOptions& options, int slots, int slot);
bool admits(const QueueOptions& options, int priority, const Usage& used, const Usage& budget, std::int64_t bytes);
// What a class may use of a budget: floor(budget * admit_percent / 100) of each. admits() is
// used.messages + 1 <= limit.messages and used.bytes + bytes <= limit.bytes.
Usage class_limit(const QueueOptions& options, int priority, const Usage& budget);
// normal below 70% of either limit, elevated up to 90%, saturated above.
const char* pressure(const QueueOptions& options, const Usage& used);

// After a failed delivery (attempt counts from 1): dead-letter, or retry after this delay.
bool dead_after_failure(const QueueOptions& options, std::int64_t attempt, bool permanent);
std::int64_t retry_delay_usecs(const QueueOptions& options, std::int64_t attempt, double unit_random);

// The random number in [0, 1) of every jitter: a generator per thread, seeded once.
double unit_random();

// ---- Retry backoff ----------------------------------------------------------------------

// Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))].
// `unit_random` is in [0, 1); attempt counts from 1.
std::int64_t backoff_full_jitter(int attempt, std::int64_t base_usecs, std::int64_t cap_usecs, double unit_random);

}  // namespace fy::core
