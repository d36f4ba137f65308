// Restore safety in the SQLite store (docs/architecture.md#fencing-across-a-restore): the file's
// recorded identity, and the reconcile step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "forgeyard/restore.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

// Fills in the file identity of a store whose identity row has none yet (a new store), in its
// own write transaction; reads only otherwise. Call outside a transaction, after the migrations.
void record_new_store_identity(Db& db, const std::string& path, std::int64_t now);
RestoreStatus sqlite_restore_status(Db& db, const std::string& path);
// Inside session's write transaction: the whole reconcile commits together.
ReconcileReport sqlite_restore_reconcile(SqliteSession& session, const std::string& path,
                                         const std::vector<AuditAnchor>& anchors);

}  // namespace forgeyard::detail
