// The audit chain's export format, JSON lines (docs/architecture.md#export-and-offline-verification).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/audit_verify.hpp"

namespace fy::core {

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

}  // namespace fy::core
