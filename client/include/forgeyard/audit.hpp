// The append-only, hash-chained audit log (docs/sql-api.md#audit), and an offline verifier for
// exported chains that needs no database.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/types.hpp"

namespace forgeyard {

using Bytes = std::string;

struct AuditEvent {
  std::string actor;     // who (1..256 bytes)
  std::string action;    // what (1..128 bytes), e.g. "release.promote"
  std::string resource;  // on what (1..512 bytes)
  // Small structured context: a JSON object of at most 64 KiB in canonical form. Large payloads
  // go elsewhere and are referenced by payload_digest / payload_ref.
  std::optional<std::string> details;
  std::optional<Bytes> payload_digest;  // 1..64 bytes, e.g. a SHA-256
  std::optional<std::string> payload_ref;
  std::optional<TimePoint> occurred_at;  // default: when the event is recorded
  // A UUID. Default: a new one. Appending an event_id already in the chain with the same
  // contents returns its (seq, hash) (a safe retry); with other contents it is IdempotencyMismatch.
  std::optional<std::string> event_id;
};

// A position in a tenant's chain. head() of an empty chain is (0, 32 zero bytes). Kept outside
// the database, it is the anchor that detects a cut tail or a rewritten chain.
struct AuditHead {
  std::int64_t seq = 0;
  Bytes hash;  // 32 bytes
};

struct AuditRecord {
  std::string tenant;
  std::int64_t seq = 0;
  std::string event_id;  // UUID text
  TimePoint occurred_at;
  TimePoint recorded_at;
  std::string actor, action, resource;
  std::optional<std::string> details;  // canonical JSON text
  std::optional<Bytes> payload_digest;
  std::optional<std::string> payload_ref;
  Bytes prev_hash;
  Bytes hash;
};

struct AuditVerification {
  bool ok = true;
  std::int64_t checked = 0;                   // events whose hash and link were recomputed
  std::optional<std::int64_t> first_bad_seq;  // the first seq that is missing, edited or unlinked
  std::optional<std::string> reason;
};

class FORGEYARD_API Audit {
 public:
  virtual ~Audit() = default;
  // Appends to the tenant's chain: seq is gap-free from 1, hash = SHA-256(canonical(event) ||
  // prev_hash). Appends of one tenant serialize until their transactions end.
  virtual AuditHead append(std::string_view tenant, const AuditEvent& event) = 0;
  // Up to 1000 events in order, all or nothing.
  virtual std::vector<AuditHead> append_batch(std::string_view tenant, const std::vector<AuditEvent>& events) = 0;
  virtual AuditHead head(std::string_view tenant, ReadClass read = {}) = 0;
  // Recomputes from_seq .. to_seq (default: the head). With an anchor, also reports a tail cut
  // below it or a chain rewritten up to it.
  virtual AuditVerification verify(std::string_view tenant, std::int64_t from_seq = 1,
                                   std::optional<std::int64_t> to_seq = std::nullopt,
                                   std::optional<AuditHead> anchor = std::nullopt, ReadClass read = {}) = 0;
  // Up to max_events (1..10000) events from from_seq on, in seq order; fewer once they hold
  // 8 MiB of details, so page on from the last seq + 1 until a call returns none.
  virtual std::vector<AuditRecord> read(std::string_view tenant, std::int64_t from_seq = 1, int max_events = 1000,
                                        ReadClass read_class = {}) = 0;
};

// ---- Export and offline verification (no database) -----------------------------------------

// One event as a line of JSON (without the newline): the format `forgeyard audit export` writes.
FORGEYARD_API std::string audit_export_line(const AuditRecord& record);
// The inverse (details canonicalized); InvalidArgument on a malformed line.
FORGEYARD_API AuditRecord parse_audit_export_line(std::string_view line);
// Checks an exported chain (JSON lines of one tenant in seq order; an export that starts after
// seq 1 trusts its first prev_hash) with the same encoding the stores use.
FORGEYARD_API AuditVerification verify_audit_export(std::istream& lines,
                                                    std::optional<AuditHead> anchor = std::nullopt);

// RFC 3339 timestamps as the export writes them ("2026-11-29T12:00:00.000001Z"); parse also
// takes an offset ("+01:00") and 0..6 fractional digits.
FORGEYARD_API std::string format_time(TimePoint t);
FORGEYARD_API std::optional<TimePoint> parse_time(std::string_view text);

FORGEYARD_API std::string to_hex(std::string_view bytes);
// nullopt unless `text` is pairs of hex digits.
FORGEYARD_API std::optional<Bytes> from_hex(std::string_view text);

}  // namespace forgeyard
