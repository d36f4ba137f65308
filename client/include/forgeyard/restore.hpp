// Restore safety (docs/operations.md#backup-and-restore, docs/architecture.md#fencing-across-a-restore):
// detecting that the store was restored from a backup or copied, and the one reconcile step every
// restore path runs afterwards.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/audit.hpp"
#include "forgeyard/types.hpp"

namespace forgeyard {

// The tenant of the operations audit chain: reconcile appends its report there. The name starts
// with '_', so it is reserved (an application tenant should not start with "_forgeyard").
inline constexpr const char* operations_tenant = "_forgeyard.operations";

enum class RestoreState {
  Ok,         // the store is where it was recorded: nothing to do
  Restored,   // a restore or copy is certain (another database, cluster or file): reconcile now
  Suspected,  // the timeline changed: a point-in-time recovery, or a failover to a replica (which
              // loses nothing): the operator decides (docs/operations.md#after-a-failover)
};

FORGEYARD_API const char* to_string(RestoreState state);

struct RestoreStatus {
  RestoreState state = RestoreState::Ok;
  std::string detail;  // what differs, e.g. "database oid 16384 recorded, now 16421"
  std::optional<TimePoint> last_reconciled_at;
  // Until reconcile has run after a certain restore, storage doctor fails and health is not Healthy.
  bool needs_reconcile() const { return state == RestoreState::Restored; }
};

// An anchor kept outside the store (an AuditHead saved earlier), to report a cut tail.
struct AuditAnchor {
  std::string tenant;
  AuditHead head;
};

struct AuditChainReport {
  std::string tenant;
  std::int64_t head_seq = 0;  // the chain's head after the restore
  bool ok = true;             // the chain verifies (and matches the anchor up to head_seq)
  std::optional<std::int64_t> first_bad_seq;
  // With an anchor beyond the head: the events head_seq+1 .. cut_to were lost with the restore.
  std::optional<std::int64_t> cut_to;
  std::optional<std::string> reason;
};

struct ReconcileReport {
  bool restore_detected = false;          // the state before reconcile was Restored or Suspected
  std::int64_t leases_expired = 0;        // live grants ended; lease_reap reports each once
  std::int64_t deliveries_released = 0;   // in-flight messages claimable again, old tokens refused
  std::int64_t idempotency_unlocked = 0;  // in-progress keys: lock ended, old attempt refused
  std::int64_t audit_chains_verified = 0;
  std::int64_t audit_chains_failed = 0;        // a bad link, or a cut tail against an anchor
  std::vector<AuditChainReport> audit_chains;  // every chain that failed (cut tail or bad link)
  AuditHead operations_audit;                  // where the report went in the operations chain
};

}  // namespace forgeyard
