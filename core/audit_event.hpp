// An audit event (docs/architecture.md#the-audit-chain): its limits and input checks, the
// canonical form of `details`, the canonical encoding and its hash, and the replay rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/canonical_json.hpp"
#include "core/core.hpp"

namespace fy::core {

// ---- Limits (docs/sql-api.md) --------------------------------------------------------------

inline constexpr std::size_t max_actor_bytes = 256;
inline constexpr std::size_t max_action_bytes = 128;
inline constexpr std::size_t max_details_bytes = std::size_t{64} * 1024;  // of the canonical form
inline constexpr std::size_t max_payload_digest_bytes = 64;
inline constexpr std::size_t max_payload_ref_bytes = 2048;
inline constexpr int max_details_depth = 64;
inline constexpr int max_audit_batch = 1000;
inline constexpr std::size_t hash_bytes = 32;
// occurred_at and recorded_at lie in the years 1..9999 (the export's RFC 3339 form), in
// microseconds since 1970.
inline constexpr std::int64_t min_audit_time_usecs = -62135596800000000;  // 0001-01-01T00:00:00Z
inline constexpr std::int64_t max_audit_time_usecs = 253402300799999999;  // 9999-12-31T23:59:59.999999Z

// 22023 naming `argument` outside those years.
void check_audit_time(const char* argument, std::int64_t unix_usecs);

// The canonical form of a `details` argument: a JSON object, at most max_details_depth deep,
// at most max_details_bytes in canonical form (22023 otherwise).
std::string canonical_details(std::string_view json_text);
std::string canonical_details(const Json& value);

// ---- Events --------------------------------------------------------------------------------

struct AuditEvent {
  std::string tenant;
  std::int64_t seq = 0;
  std::string event_id;          // 16 bytes
  std::int64_t occurred_at = 0;  // microseconds since 1970-01-01 UTC
  std::int64_t recorded_at = 0;
  std::string actor, action, resource;
  std::optional<std::string> details;         // canonical JSON text
  std::optional<std::string> payload_digest;  // bytes
  std::optional<std::string> payload_ref;
  std::string prev_hash;  // 32 bytes
  std::string hash;       // 32 bytes
};

// The hash before the first event of a chain: 32 zero bytes.
const std::string& genesis_hash();

// Checks an append's arguments (tenant, actor, action, resource as names; digest 1..64 bytes;
// ref 1..2048 bytes; text must be UTF-8 without NUL: 22021) with the SQLSTATEs of
// docs/errors.md. `details` is checked by canonical_details.
void check_audit_input(const AuditEvent& event);

// canonical(event): the byte string hashed with prev_hash (docs/architecture.md documents it).
std::string audit_encoding(const AuditEvent& event);
// SHA-256(audit_encoding(event) || event.prev_hash).
std::string audit_hash(const AuditEvent& event);

// A retried append (same event_id): whether it carries the stored event's contents. occurred_at
// is compared only when the retry gave one.
bool same_contents(const AuditEvent& stored, const AuditEvent& retry, bool retry_has_occurred_at);
// FY011: the event_id is in the chain with other contents.
[[noreturn]] void throw_event_id_reused(const AuditEvent& stored);

}  // namespace fy::core
