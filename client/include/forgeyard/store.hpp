// The entry point: open a store from a URL and reach its capabilities.
//   postgresql://...      the PostgreSQL backend (the forgeyard extension, over libpq)
//   sqlite:///path/to/db  the embedded SQLite shim
//   empty                 the shim at $XDG_DATA_HOME/forgeyard/forgeyard.db
//                         (else ~/.local/share/forgeyard/forgeyard.db)
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/audit.hpp"
#include "forgeyard/idempotency.hpp"
#include "forgeyard/leases.hpp"
#include "forgeyard/migrations.hpp"
#include "forgeyard/operations.hpp"
#include "forgeyard/queues.hpp"
#include "forgeyard/restore.hpp"
#include "forgeyard/topics.hpp"
#include "forgeyard/workflows.hpp"
#include "forgeyard/types.hpp"
#include "forgeyard/versioned_rows.hpp"

namespace forgeyard {

struct PoolOptions {
  int min_connections = 0;
  int max_connections = 8;
  Duration acquire_timeout = std::chrono::seconds(5);
  Duration idle_timeout = std::chrono::minutes(5);
  Duration max_lifetime = std::chrono::minutes(30);
};

struct StoreOptions {
  PoolOptions pool;
  // PostgreSQL: use named prepared statements per connection. Turn off behind PgBouncer in
  // transaction mode (1.18 has no prepared statements there): every call is then unnamed.
  bool prepared_statements = true;
  // PostgreSQL: streaming replicas of the primary, for eventual reads (ReadClass). Each gets a pool
  // of its own sized as `pool`. Writes and strong reads never go to them. Not for SQLite.
  std::vector<std::string> replicas;
  // How often a replica's lag is measured at most (one query on the primary, one on the replica).
  // An eventual read counts the age of the last measurement into the lag it compares.
  Duration replica_lag_refresh = std::chrono::seconds(1);
  // SQLite: PRAGMA synchronous (FULL by default; NORMAL trades the last commits on power loss).
  std::string sqlite_synchronous = "FULL";
  Duration sqlite_busy_timeout = std::chrono::seconds(10);
  // SQLite: read migrations from this directory instead of the ones built in (development).
  std::string sqlite_migrations_dir;
  // Replaces the clock that decides expiry, for tests. SQLite: called at each operation.
  // PostgreSQL: sent as forgeyard.now_override in each transaction (needs a superuser).
  std::function<TimePoint()> clock;
  // A daemon of an application (docs/operations.md, "Migrating your application's schema"): with
  // app_name set, open registers it under a heartbeat lease and checks the application's schema
  // against [min_schema, max_schema] (migration ids; max 0 = no bound). Below min: health() says
  // MigrationRequired. A contract above max is applied: open refuses. With app_migrations_dir,
  // open also refuses a changed or missing applied file.
  std::string app_name;
  std::string instance_id;  // default: host:pid
  std::string app_version;
  int min_schema = 0;
  int max_schema = 0;
  std::string app_migrations_dir;
  Duration daemon_lease = std::chrono::seconds(60);
};

struct StorageStatus {
  std::string backend;         // "postgresql" or "sqlite"
  std::string location;        // URL with any password redacted, or the SQLite file
  std::string schema_version;  // forgeyard's version (PostgreSQL), or the last applied migration
  std::string edition;         // PostgreSQL: "cpp" or "plpgsql" (forgeyard.edition()); SQLite: ""
  int migrations_applied = 0;
  int migrations_pending = 0;
  bool healthy = false;
  std::string detail;
  std::vector<ReplicaStatus> replicas;  // each measured now
};

// Per-operation counters (operation names are stable: "lease.acquire", "tx.commit", ...).
struct OperationStats {
  std::uint64_t calls = 0;
  std::uint64_t errors = 0;
  std::uint64_t total_usecs = 0;
  std::uint64_t max_usecs = 0;
};

struct PoolStats {
  std::uint64_t created = 0;
  std::uint64_t closed = 0;
  std::uint64_t acquired = 0;
  std::uint64_t waited = 0;
  std::uint64_t timed_out = 0;
  int in_use = 0;
  int idle = 0;
};

struct Metrics {
  std::map<std::string, OperationStats> operations;
  PoolStats pool;
  std::vector<ReplicaStatus> replicas;  // as last measured (Store::replicas() measures)
};

// A unit of work on one connection: commit makes every call in it durable together, and the
// destructor rolls back what was not committed (it never throws).
class FORGEYARD_API Transaction {
 public:
  virtual ~Transaction() = default;
  virtual Leases& leases() = 0;
  virtual VersionedRows& versioned_rows() = 0;
  virtual Idempotency& idempotency() = 0;
  virtual Queues& queues() = 0;
  virtual Topics& topics() = 0;
  virtual Audit& audit() = 0;
  virtual Workflows& workflows() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
};

class FORGEYARD_API Store {
 public:
  virtual ~Store() = default;
  // Each call is its own transaction.
  virtual Leases& leases() = 0;
  virtual VersionedRows& versioned_rows() = 0;
  virtual Idempotency& idempotency() = 0;
  virtual Queues& queues() = 0;
  virtual Topics& topics() = 0;
  virtual Audit& audit() = 0;
  virtual Workflows& workflows() = 0;
  virtual std::unique_ptr<Transaction> begin() = 0;
  virtual StorageStatus status() = 0;
  virtual Metrics metrics() const = 0;
  // The application's schema migrations (forgeyard/migrations.hpp).
  virtual Migrations& migrations() = 0;
  // One round trip: Healthy, Degraded (reads work, writes refused), Unavailable or
  // MigrationRequired. Renews this daemon's registration lease when it has one. With replicas,
  // each is measured and listed. An eventual class also counts a replica within its lag: with the
  // primary unreachable and such a replica answering, the store is Degraded, not Unavailable.
  virtual Health health(ReadClass read = {}) = 0;
  // Ready to take work: health() is Healthy.
  bool ready() { return health().status == HealthStatus::Healthy; }
  // Measures each replica's lag now (StoreOptions::replicas; none on SQLite).
  virtual std::vector<ReplicaStatus> replicas() = 0;
  // One bounded clean-up pass (at most max_rows per task; safe from several places at once):
  // expired idempotency keys, dedup events past their window, acked messages past retention,
  // dead letters past retention or over their cap, inbox entries older than 7 days. Returns
  // rows removed per task. Leases are not reaped here (Leases::reap hands them to reconcilers).
  virtual std::map<std::string, std::int64_t> maintain(int max_rows = 1000,
                                                       std::optional<std::string> tenant = std::nullopt) = 0;
  // Read-only operations figures and checks (forgeyard/operations.hpp). On PostgreSQL they need
  // forgeyard.storage_stats() (grant_inspect or grant_maintenance); a role bound to tenants sees
  // only its own tenants' figures.
  virtual StoreStats stats(ReadClass read = {}) = 0;
  virtual DoctorReport doctor(const DoctorOptions& options) = 0;
  DoctorReport doctor() { return doctor(DoctorOptions{}); }
  // Restore safety (forgeyard/restore.hpp): whether the store was restored or copied since it was
  // last reconciled, and the reconcile step every restore path runs (idempotent). anchors: audit
  // heads saved outside the store, to report a cut tail.
  virtual RestoreStatus restore_status() = 0;
  virtual ReconcileReport restore_reconcile(const std::vector<AuditAnchor>& anchors = {}) = 0;
};

FORGEYARD_API std::unique_ptr<Store> open(std::string_view url = {}, const StoreOptions& options = {});

// The SQLite file used when no URL is given.
FORGEYARD_API std::string default_sqlite_path();

}  // namespace forgeyard
