// Restore safety over the extension's SQL API (forgeyard.restore_status / restore_reconcile).
#pragma once

#include <vector>

#include "forgeyard/restore.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

RestoreStatus pg_restore_status(PgSession& session);
ReconcileReport pg_restore_reconcile(PgSession& session, const std::vector<AuditAnchor>& anchors);

}  // namespace forgeyard::detail
