// Restore safety helpers both backends use (forgeyard/restore.hpp).
#pragma once

#include <string>
#include <vector>

#include "forgeyard/restore.hpp"

namespace forgeyard::detail {

RestoreState parse_restore_state(const std::string& text);
// {"tenant": {"seq": N, "hash": "hex"}, ...}: the anchors argument of forgeyard.restore_reconcile.
std::string anchors_json(const std::vector<AuditAnchor>& anchors);
// 22023 for an anchor without tenant, seq or a 32-byte hash (the same rule as the SQL function).
void check_anchors(const std::vector<AuditAnchor>& anchors);

}  // namespace forgeyard::detail
