// Pure logic shared by the PostgreSQL extension and the client's SQLite shim.
// It is compiled into both, so it must never see PostgreSQL, libpq or SQLite headers.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

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

inline bool is_live(const LeaseRow& row, std::int64_t now) {
  return !row.released && !is_expired(row.expires_at, now);
}

// "live", "expired", "reaped" or "released": the state both backends report.
const char* lease_state(const LeaseRow& row, std::int64_t now);

// What acquire does, given the current row (nullptr: never granted).
enum class AcquireAction {
  insert,     // first grant of the resource
  take_over,  // free, released or expired: a new grant with a new epoch
  extend,     // live and held by the same owner: same epoch, expiry moved to now + ttl
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

enum class BeginAction {
  start,        // unused (or past retention): record it and do the work, attempt 1
  replay,       // completed with this digest: return the stored response
  take_over,    // in progress but its lock expired: do the work again, attempt + 1
  in_progress,  // FY010: someone holds a live lock
  mismatch,     // FY011: same key, different request
};
BeginAction decide_begin(const IdempotencyRow* row, std::string_view request_digest, std::int64_t now);

// checkpoint / complete / abandon: FY001 unless `attempt` (when given) is the row's attempt and
// the key is still in progress.
void check_attempt(const IdempotencyRow& row, const std::int64_t* attempt, const char* operation);

// ---- Retry backoff ----------------------------------------------------------------------

// Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))].
// `unit_random` is in [0, 1); attempt counts from 1.
std::int64_t backoff_full_jitter(int attempt, std::int64_t base_usecs, std::int64_t cap_usecs, double unit_random);

// ---- SHA-256 (migration checksums; the audit chain later) -------------------------------

std::string sha256_hex(std::string_view data);

}  // namespace fy::core
