// Pure logic shared by the PostgreSQL extension and the client's SQLite shim.
// It is compiled into both, so it must never see PostgreSQL, libpq or SQLite headers.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/digest.hpp"  // sha256, to_hex, from_hex

namespace fy::core {

// SQLSTATEs of docs/errors.md that the shared logic raises. Five characters each.
namespace sqlstate {
inline constexpr char stale_fence[] = "FY001";
inline constexpr char version_conflict[] = "FY002";
inline constexpr char idempotency_in_progress[] = "FY010";
inline constexpr char idempotency_mismatch[] = "FY011";
inline constexpr char queue_full[] = "FY020";
inline constexpr char payload_too_large[] = "FY021";
inline constexpr char append_only[] = "FY030";
inline constexpr char tenant_denied[] = "FY040";
inline constexpr char null_value[] = "22004";
inline constexpr char string_too_long[] = "22001";
inline constexpr char invalid_parameter[] = "22023";
inline constexpr char undefined_object[] = "42704";
inline constexpr char no_data_found[] = "P0002";
inline constexpr char internal_error[] = "XX000";
}  // namespace sqlstate

// An error with a SQLSTATE. The extension re-raises it as ereport(ERROR); the shim turns it
// into the client's forgeyard::Error. Both keep the code, message and detail unchanged.
class Error : public std::runtime_error {
 public:
  Error(std::string_view code, const std::string& message, std::string detail = {})
      : std::runtime_error(message), detail_(std::move(detail)) {
    code_.assign(code.substr(0, 5));
  }
  const std::string& sqlstate() const noexcept { return code_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string code_;
  std::string detail_;
};

// ---- Input limits (docs/sql-api.md lists them) -------------------------------------------

inline constexpr std::size_t max_tenant_bytes = 128;
inline constexpr std::size_t max_resource_bytes = 512;
inline constexpr std::size_t max_owner_bytes = 256;

inline constexpr std::int64_t usecs_per_second = 1'000'000;
inline constexpr std::int64_t usecs_per_day = 86'400 * usecs_per_second;
inline constexpr std::int64_t max_lease_ttl_usecs = 7 * usecs_per_day;

// Throws 22004 for a missing value, 22023 for an empty one, 22001 for one over max_bytes.
// `present` is false when the SQL argument was NULL.
void check_name(const char* argument, bool present, std::string_view value, std::size_t max_bytes);

// A duration as PostgreSQL's interval stores it. SQLite callers pass months = days = 0.
struct Duration {
  std::int32_t months = 0;
  std::int32_t days = 0;
  std::int64_t usecs = 0;
};

// Validates a duration argument and returns it in microseconds: no month component
// (calendar-dependent), a day is 24 hours, the total must be > 0 and <= max_usecs.
std::int64_t check_duration(const char* argument, const Duration& d, std::int64_t max_usecs);

// ---- Lease rules ------------------------------------------------------------------------

// The epoch of a new grant: strictly above every earlier one of the resource, and at least the
// clock in microseconds since the Unix epoch, so epochs keep growing after a restore from an
// older backup as long as the clock does. `previous` is 0 for a resource never granted.
std::int64_t next_epoch(std::int64_t previous, std::int64_t now_unix_usecs);

// "Expired" means expires_at <= now, on both backends.
inline bool is_expired(std::int64_t expires_at, std::int64_t now) { return expires_at <= now; }

// The stored state of a lease, times in microseconds since the Unix epoch.
struct LeaseRow {
  std::string owner;
  std::int64_t epoch = 0;
  std::int64_t expires_at = 0;
  bool released = false;
  bool reaped = false;
};

// A reaped grant is not live either: its reconciler was told it expired, whatever the clock a
// concurrent renew read.
inline bool is_live(const LeaseRow& row, std::int64_t now) {
  return !row.released && !row.reaped && !is_expired(row.expires_at, now);
}

// "live", "expired", "reaped" or "released": the state both backends report.
const char* lease_state(const LeaseRow& row, std::int64_t now);

// What acquire does, given the current row (nullptr: never granted).
enum class AcquireAction {
  insert,     // first grant of the resource
  take_over,  // free, released or expired: a new grant with a new epoch
  extend,     // live and held by the same owner: same epoch, expiry moved to now + ttl if that is later
  contended,  // live and held by another owner: not granted
};
struct AcquireDecision {
  AcquireAction action;
  std::int64_t epoch;  // of the grant after the call (the holder's, when contended)
};
AcquireDecision decide_acquire(const LeaseRow* current, std::string_view owner, std::int64_t now_unix_usecs);

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
inline constexpr std::size_t max_recovery_point_bytes = 64 * 1024;
inline constexpr std::size_t max_response_bytes = 1024 * 1024;
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

// ---- Queues -----------------------------------------------------------------------------

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
inline constexpr std::int64_t max_queue_duration_usecs = 30 * usecs_per_day;
inline constexpr std::int64_t max_queue_retention_usecs = 365 * usecs_per_day;

struct QueueOptions {
  std::int64_t max_messages = 100000;
  std::int64_t max_bytes = 1LL << 30;
  std::int64_t max_payload_bytes = 64 * 1024;
  std::int64_t visibility_usecs = 30 * usecs_per_second;
  std::int64_t max_attempts = 5;
  std::int64_t backoff_base_usecs = usecs_per_second;
  std::int64_t backoff_max_usecs = 300 * usecs_per_second;
  bool partitioned = false;         // ordering: none | partition
  bool keep_dead_payload = false;   // dead_letter_payload: drop | keep
  std::int64_t retain_acked_usecs = 0;
  std::int64_t max_dead = 100000;
  std::int64_t dead_retention_usecs = 7 * usecs_per_day;
  std::int64_t dedup_window_usecs = usecs_per_day;
  // admit_<class>: the percentage of max_messages / max_bytes up to which the class is admitted.
  std::int64_t admit_percent[priority_classes] = {100, 100, 95, 90, 80, 70};
  bool notify = false;
};

// Sets one option from its JSON text (numbers, booleans and names as text; durations as
// microseconds, already converted by the caller). 22023 naming the option when unknown or invalid.
void set_queue_option(QueueOptions& options, std::string_view key, std::string_view value);
bool is_duration_option(std::string_view key);
void set_queue_duration(QueueOptions& options, std::string_view key, const Duration& d);
// Cross-field checks (backoff_base <= backoff_max, admission percentages ordered by class).
void validate(const QueueOptions& options);

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
// normal below 70% of either limit, elevated up to 90%, saturated above.
const char* pressure(const QueueOptions& options, const Usage& used);

// After a failed delivery (attempt counts from 1): dead-letter, or retry after this delay.
bool dead_after_failure(const QueueOptions& options, std::int64_t attempt, bool permanent);
std::int64_t retry_delay_usecs(const QueueOptions& options, std::int64_t attempt, double unit_random);

// ---- Retry backoff ----------------------------------------------------------------------

// Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))].
// `unit_random` is in [0, 1); attempt counts from 1.
std::int64_t backoff_full_jitter(int attempt, std::int64_t base_usecs, std::int64_t cap_usecs, double unit_random);

}  // namespace fy::core
