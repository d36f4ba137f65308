// Between the client's audit types and the shared core's (core/audit.hpp), for both backends.
#pragma once

#include <string_view>

#include "core/audit.hpp"
#include "forgeyard/audit.hpp"

namespace forgeyard::detail {

// The event checked and canonicalized as the extension does (22004 / 22023 / 22001 as
// forgeyard::Error), without seq, times or hashes. event_id: its 16 bytes, when given.
fy::core::AuditEvent audit_input(std::string_view tenant, const AuditEvent& event);

AuditRecord to_record(const fy::core::AuditEvent& e);
fy::core::AuditEvent from_record(const AuditRecord& r);
AuditVerification to_verification(const fy::core::Verification& v);
std::optional<fy::core::Anchor> to_anchor(const std::optional<AuditHead>& anchor);

}  // namespace forgeyard::detail
