// What an operator reads about a store: Store::stats() (sizes, depths, keys, leases, audit),
// Store::doctor() (checks grouped REQUIRED / OPTIONAL / PERFORMANCE / SECURITY) and
// prometheus_text() (the same figures as a Prometheus scrape). Read-only: none of these change
// the store. Fields and checks are described in docs/operations.md, "Stats and metrics" and
// "storage doctor".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/export.hpp"
#include "forgeyard/queues.hpp"
#include "forgeyard/types.hpp"

namespace forgeyard {

struct Metrics;

struct TableStats {
  std::string name;
  std::int64_t rows = 0;              // PostgreSQL: the statistics' live-row estimate; SQLite: exact
  std::int64_t dead_rows = 0;         // PostgreSQL: dead tuples not yet vacuumed; SQLite: 0
  std::optional<std::int64_t> bytes;  // with indexes (PostgreSQL) or its pages (SQLite dbstat)
  bool autovacuum = true;             // PostgreSQL: autovacuum_enabled is not off for the table
};

struct QueueBacklog {
  std::string tenant;
  std::string queue;
  QueueStats depth;  // ready, in_flight, delayed, dead, bytes, oldest ready age, pressure
  std::int64_t max_messages = 0;
  std::int64_t retrying = 0;        // pending messages delivered at least once before
  std::int64_t dead_last_hour = 0;  // dead-lettered within the last hour (the store's clock)
};

struct TenantStats {
  std::string tenant;
  std::int64_t leases_live = 0;
  std::int64_t leases_expired = 0;  // expired but neither released nor reaped
  std::int64_t idempotency_in_progress = 0;
  std::int64_t idempotency_completed = 0;
  std::int64_t idempotency_past_retention = 0;  // expired keys maintain() has not purged yet
  std::int64_t audit_events = 0;
};

// The workflow runs of one definition in one state.
struct WorkflowRunCount {
  std::string tenant;
  std::string definition;  // "workflow@version"
  std::string state;       // pending, running, ..., parked
  std::int64_t runs = 0;
};

// A limit of flow control and the tenant it belongs to (Queues::flow_state across tenants).
struct TenantFlowLimit {
  std::string tenant;
  FlowLimit limit;
};

// The oldest holder of this database's xmin horizon (PostgreSQL, 0.9.0 on): VACUUM removes no row
// version that died after it began, and every claim of a queue steps over the ones it keeps
// (docs/operations.md, "forgeyard storage stats" and the doctor's xmin_horizon).
struct XminHorizon {
  std::string kind;          // "transaction", "prepared", "replication_slot" or "standby"
  std::string holder;        // "pid N (user, application, state)", "gid G (owner, database)", a slot's
                             // name, "application (walsender pid N)"
  std::int64_t xid_age = 0;  // transactions begun since its horizon
  std::optional<std::chrono::microseconds> held;  // how long (a transaction or a prepared one)
};

// One of the ready lanes' four segments (PostgreSQL, 0.13.0 on): producers append to the open one;
// maintain() truncates a sealed one once its entries are consumed, unless a transaction that read
// it is still open, which pins it (docs/operations.md, "forgeyard.maintain()" and the doctor's
// lane_segments). The capacity counts' segments (0.14.0 on, StoreStats::usage_segments) are
// described the same way: the open one is the current ten-second period's, and maintain()
// truncates a sealed one once its rows are folded (the doctor's usage_segments).
struct LaneSegment {
  std::string name;       // "queue_lane_entries_N" ("queue_release_deltas_N", "queue_admit_deltas_N")
  bool open = false;      // producers append to it
  bool has_rows = false;  // it has pages: not truncated since it was written
  std::string pinned_by;  // a sealed one with pages: the oldest transaction holding a lock on it,
                          // "pid N (user, application, state)"; "" when none
  std::optional<std::chrono::microseconds> pinned_for;  // how long that transaction has been open,
                                                        // where the role may see it
};

struct StoreStats {
  std::string backend;  // "postgresql" or "sqlite"
  std::optional<std::int64_t> database_bytes;
  std::optional<XminHorizon> horizon;       // PostgreSQL, server-wide stats: none when nothing holds it
                                            // (or the catalog predates 0.9.0)
  std::vector<LaneSegment> lane_segments;   // PostgreSQL, server-wide stats, by name (0.13.0 on)
  std::vector<LaneSegment> usage_segments;  // the counts' eight, likewise (0.14.0 on)
  std::vector<TableStats> tables;           // by name
  std::vector<QueueBacklog> queues;         // by tenant, queue
  std::vector<TenantStats> tenants;         // by tenant
  std::vector<WorkflowRunCount> workflows;  // by tenant, definition, state (bytewise)
  std::vector<TenantFlowLimit> flow;        // by tenant, then as flow_state orders them
};

enum class CheckGroup { Required, Optional, Performance, Security };
enum class CheckStatus { Ok, Warn, Fail };

FORGEYARD_API std::string_view to_string(CheckGroup group) noexcept;    // "required", ...
FORGEYARD_API std::string_view to_string(CheckStatus status) noexcept;  // "ok", "warn", "fail"

struct DoctorCheck {
  CheckGroup group = CheckGroup::Required;
  std::string name;  // stable: "connectivity", "extension_version", "table_privileges", ...
  CheckStatus status = CheckStatus::Ok;
  std::string detail;  // what was found, one line
  std::string fix;     // what to do about it, one line ("" when ok)
};

// What `storage doctor` checks beyond the store itself. With an application's migration directory
// (here, or StoreOptions::app_migrations_dir), the REQUIRED checks app_migrations and
// app_migration_lock report that application's pending and changed files and the runner lock.
struct DoctorOptions {
  std::string app_migrations_dir;  // empty: StoreOptions::app_migrations_dir; both empty: not checked
  std::string app;                 // empty: StoreOptions::app_name, else "default"
};

struct DoctorReport {
  std::vector<DoctorCheck> checks;  // grouped: REQUIRED, SECURITY, PERFORMANCE, OPTIONAL
  // True when no REQUIRED check failed (`storage doctor` exits 0 then, 1 otherwise).
  bool passed() const noexcept {
    for (const DoctorCheck& c : checks)
      if (c.group == CheckGroup::Required && c.status == CheckStatus::Fail) return false;
    return true;
  }
};

// The Prometheus text exposition (format 0.0.4) of a store's figures and a client's
// per-operation counters. Labels are tenant and queue, plus fixed names of ours (state, table,
// operation); never a payload, key, resource or actor.
FORGEYARD_API std::string prometheus_text(const StoreStats& stats, const Metrics& client);

}  // namespace forgeyard
