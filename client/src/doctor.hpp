// `storage doctor`'s decisions, once for both backends: each backend gathers DoctorFacts (what
// it can observe; a fact it cannot observe stays empty), and evaluate_doctor() turns them into
// checks with the thresholds below. A check whose fact is empty is not reported.
//
// Adding a check: one fact here, filled by the backend(s) that can see it, and one rule in the
// table in doctor.cpp (group, name, a function of the facts). E.g. "restore_reconciled"
// (REQUIRED): the fact `restore` (Store::restore_status()) and a rule that fails while a restore
// is detected and not reconciled. Facts both backends gather the same way through the public
// interfaces (application migrations, restore state) are filled once by add_store_facts().
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/migrations.hpp"
#include "forgeyard/operations.hpp"
#include "forgeyard/restore.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {

// Thresholds (docs/operations.md, "storage doctor").
namespace doctor_limits {
constexpr auto latency_warn = std::chrono::milliseconds(100);
constexpr auto latency_fail = std::chrono::seconds(2);
constexpr auto clock_skew_warn = std::chrono::seconds(1);
constexpr std::int64_t dead_rows_warn = 10'000;  // and more than 20% of the live rows
constexpr double dead_ratio_warn = 0.2;
constexpr auto transaction_warn = std::chrono::minutes(5);
constexpr auto transaction_fail = std::chrono::hours(1);
constexpr std::int64_t slot_xmin_age_warn = 10'000'000;  // transactions
constexpr std::int64_t slot_xmin_age_fail = 500'000'000;
constexpr std::int64_t wal_bytes_warn = 256ll << 20;
// The xmin horizon: a queue's claims slow down within a minute of a snapshot held (F17), sooner
// than long_transaction warns; its age in transactions as replication_slots counts it.
constexpr auto horizon_warn = std::chrono::minutes(1);
constexpr auto horizon_fail = std::chrono::hours(1);
constexpr std::int64_t horizon_xids_warn = slot_xmin_age_warn;
constexpr std::int64_t horizon_xids_fail = slot_xmin_age_fail;
// A transaction holding a lock on a sealed segment of the ready lanes: maintain() skips the
// segment while it is open (0.13.0), and the ring of four stops turning.
constexpr auto segment_pin_warn = std::chrono::minutes(1);
constexpr auto segment_pin_fail = std::chrono::hours(1);
}  // namespace doctor_limits

// Tables whose bloat slows the claim path and the API's hot writes (the counts' deltas: the tables
// before 0.14.0, their segments since).
inline constexpr const char* hot_tables[] = {"messages",
                                             "queue_slots",
                                             "queue_admit_deltas",
                                             "queue_admit_deltas_0",
                                             "queue_admit_deltas_1",
                                             "queue_admit_deltas_2",
                                             "queue_admit_deltas_3",
                                             "queue_releases",
                                             "queue_release_deltas",
                                             "queue_release_deltas_0",
                                             "queue_release_deltas_1",
                                             "queue_release_deltas_2",
                                             "queue_release_deltas_3",
                                             "flow_outcome_deltas",
                                             "leases",
                                             "idempotency_keys",
                                             "queue_partitions",
                                             "audit_heads"};

// The application's schema migrations (Store::migrations().status(dir, app)): filled where the
// caller names the application's migration directory.
struct AppMigrationFacts {
  std::string app;
  int pending = 0;
  int changed = 0;             // changed or missing applied files
  std::string changed_detail;  // the first one, naming the file and both checksums
  std::string lock_holder;     // who holds the runner lock now, "" when free
};

struct DoctorFacts {
  std::string backend;
  // REQUIRED
  std::optional<std::string> connect_error;  // set: nothing else could be observed
  std::optional<std::chrono::microseconds> latency;
  std::string expected_schema;                  // the client's version / the last built-in migration
  std::optional<std::string> installed_schema;  // "" = not installed
  std::string installed_edition;                // PostgreSQL: "cpp" or "plpgsql" (forgeyard.edition())
  std::optional<int> pending_schema_migrations;
  std::optional<std::string> schema_error;  // a changed or unknown applied migration
  std::optional<std::string> lock_holder;   // "" = the exclusive lock is free
  std::optional<std::string> integrity;     // SQLite quick_check: "ok" or its first finding
  std::optional<std::string> stats_error;   // storage_stats() failed (e.g. no privilege)
  std::optional<AppMigrationFacts> app_migrations;
  std::optional<RestoreStatus> restore;      // Restored: fails until storage reconcile has run
  std::optional<std::string> restore_error;  // restore_status() failed: the check fails naming why
  // SECURITY
  std::optional<std::vector<std::string>> roles_with_table_privileges;
  std::optional<std::vector<std::string>> unbound_usage_roles;
  std::optional<std::vector<std::string>> unsafe_search_path;  // what makes name resolution unsafe
  std::optional<bool> remote_without_tls;
  std::optional<bool> password_in_url;
  std::optional<std::string> world_readable_file;  // SQLite: a store file others can read
  // time
  std::optional<std::string> timezone;
  std::optional<std::chrono::microseconds> clock_skew;  // the store's clock minus ours
  // PERFORMANCE
  std::optional<bool> autovacuum_on;
  std::optional<std::string> oldest_transaction;  // who
  std::optional<std::chrono::microseconds> oldest_transaction_age;
  std::optional<std::string> slot_holding_xmin;
  std::optional<std::int64_t> slot_xmin_age;
  bool horizon_known = false;              // storage_stats() reported on the xmin horizon (0.9.0 on): stats->horizon
  std::optional<std::int64_t> wal_bytes;   // SQLite
  std::optional<bool> network_filesystem;  // SQLite
  // OPTIONAL, and the table figures for PERFORMANCE
  std::optional<StoreStats> stats;
};

std::vector<DoctorCheck> evaluate_doctor(const DoctorFacts& facts);

// Fills app_migrations (when a directory is named by `options` or `store_options`) and restore,
// through the backend's own Migrations and restore_status. A failure to read either becomes the
// fact's error (the check fails naming it); the other facts stay.
void add_store_facts(DoctorFacts& facts, Store& store, const DoctorOptions& options, const StoreOptions& store_options);

}  // namespace forgeyard::detail
