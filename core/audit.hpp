// The append-only audit chain (docs/architecture.md#the-audit-chain): the canonical encoding
// of an event, its hash, the canonical form of `details`, chain verification and the JSON-lines
// export format. Written once; the extension, the SQLite shim and the client's offline verifier
// all call it, and tests/vectors/ proves they hash alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/core.hpp"

namespace fy::core {

// ---- Limits (docs/sql-api.md) --------------------------------------------------------------

inline constexpr std::size_t max_actor_bytes = 256;
inline constexpr std::size_t max_action_bytes = 128;
inline constexpr std::size_t max_details_bytes = 64 * 1024;  // of the canonical form
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

// ---- JSON ----------------------------------------------------------------------------------

// A parsed JSON value. Numbers keep their text (exact, any precision); objects keep the last
// value of a repeated key, as jsonb does.
struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  std::string text;  // number: its lexeme; string: the decoded UTF-8; boolean: "true" / "false"
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* find(std::string_view key) const;
};

// Strict RFC 8259 JSON (UTF-8, no \u0000, no lone surrogates, at most max_depth objects and
// arrays inside each other);
// anything else is 22023 naming `argument`.
Json parse_json(std::string_view text, const char* argument, int max_depth = max_details_depth);

// The canonical text: no whitespace; object keys sorted by their UTF-8 bytes; numbers as plain
// decimals without exponent, leading or trailing zeros ("1.50" -> "1.5", "1e2" -> "100",
// "-0" -> "0"); strings escape only '"', '\\' and U+0000..U+001F (\b \f \n \r \t, else \u00xx).
// `limit` bounds the output: longer is 22023 "<argument> is over N bytes".
std::string canonical_json(const Json& value, const char* argument, std::size_t limit);
// JSON string literal in the canonical escaping.
std::string json_quote(std::string_view s);

// The canonical form of a `details` argument: a JSON object, at most max_details_depth deep,
// at most max_details_bytes in canonical form (22023 otherwise).
std::string canonical_details(std::string_view json_text);
std::string canonical_details(const Json& value);

// ---- Events --------------------------------------------------------------------------------

struct AuditEvent {
  std::string tenant;
  std::int64_t seq = 0;
  std::string event_id;      // 16 bytes
  std::int64_t occurred_at = 0;  // microseconds since 1970-01-01 UTC
  std::int64_t recorded_at = 0;
  std::string actor, action, resource;
  std::optional<std::string> details;  // canonical JSON text
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

// ---- Verification --------------------------------------------------------------------------

struct Anchor {
  std::int64_t seq = 0;
  std::string hash;
};

struct Verification {
  bool ok = true;
  std::int64_t checked = 0;
  std::optional<std::int64_t> first_bad_seq;
  std::optional<std::string> reason;
};

// Walks one tenant's events in seq order from `from_seq`. `prev_hash` is the hash the first
// event must link to (the genesis hash from seq 1; the stored hash of event from_seq - 1 else).
// Stops at the first bad event; later add() calls are ignored.
class ChainVerifier {
 public:
  ChainVerifier(std::int64_t from_seq, std::string prev_hash, std::optional<Anchor> anchor = std::nullopt);
  // The verifier of a stored range: from seq 1 it links to the genesis hash, from a later seq to
  // `hash_before`, the stored hash of event from_seq - 1, which must be there if the chain
  // reaches it. `head` is the store's head row (seq 0 when there is none): a second witness, the
  // event at its seq must have its hash. A range past the head is empty, not broken.
  static ChainVerifier for_range(std::int64_t from_seq, const std::optional<std::string>& hash_before,
                                 const Anchor& head, std::optional<Anchor> anchor);
  // finish() for a stored range: the chain must reach to_seq, or the head when to_seq is open.
  Verification finish_range(std::optional<std::int64_t> to_seq, std::int64_t head_seq) {
    return finish(to_seq && *to_seq < head_seq ? *to_seq : head_seq);
  }
  // False once the chain is bad.
  bool add(const AuditEvent& event);
  // The chain must reach `expected_last` (the head the store records, or the anchor's seq).
  Verification finish(std::optional<std::int64_t> expected_last);
  std::int64_t next_seq() const { return next_; }
  bool bad() const { return !result_.ok; }
  // Marks `seq` bad with `reason` (e.g. the event before from_seq is missing).
  void fail(std::int64_t seq, std::string reason);

 private:
  std::int64_t next_;
  std::string prev_;
  std::optional<Anchor> anchor_;
  std::optional<Anchor> head_;
  Verification result_;
};

// Validates verify's range and anchor arguments (22023 naming the argument).
void check_verify_range(std::int64_t from_seq, std::optional<std::int64_t> to_seq, const std::optional<Anchor>& anchor);

// ---- Export (JSON lines) -------------------------------------------------------------------

// One event as one line of JSON (no newline): tenant, seq, event_id (uuid text), occurred_at and
// recorded_at (RFC 3339 UTC with microseconds), actor, action, resource, details (JSON or null),
// payload_digest (hex or null), payload_ref (or null), prev_hash, hash (hex).
std::string audit_json_line(const AuditEvent& event);
// The inverse; 22023 naming the field on a malformed line. details is canonicalized.
AuditEvent parse_audit_json_line(std::string_view line);

// Verifies an exported chain (lines of one tenant in seq order, possibly starting after seq 1:
// the first line's prev_hash is then trusted). Blank lines are skipped. An anchor before the
// first line cannot be checked: 22023.
Verification verify_exported_chain(const std::vector<std::string>& lines, const std::optional<Anchor>& anchor);

// ---- Text forms ----------------------------------------------------------------------------

std::string format_uuid(std::string_view bytes16);
std::optional<std::string> parse_uuid(std::string_view text);
// 2026-11-29T12:00:00.000001Z
std::string format_timestamp(std::int64_t unix_usecs);
// The form above; also accepts an offset (+hh:mm / -hh:mm) and 0..6 fractional digits.
std::optional<std::int64_t> parse_timestamp(std::string_view text);

}  // namespace fy::core
