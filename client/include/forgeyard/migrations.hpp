// The application's own schema, migrated through the store (docs/operations.md, "Migrating your
// application's schema"), the daemons of an application and the schema range each works with, and
// the store's health. Plain structs; both backends give the same answers.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/types.hpp"

namespace forgeyard {

// The application name used when none is given.
inline constexpr char default_app_name[] = "default";

enum class MigrationPhase { Expand, Contract };
FORGEYARD_API std::string_view to_string(MigrationPhase phase) noexcept;

// The state of one migration: a file in the directory, a record in the store, or both.
enum class MigrationState {
  Applied,  // recorded, and the file matches its checksum
  Pending,  // in the directory, not recorded yet
  Changed,  // recorded, but the file's checksum (or name) differs: refused
  Missing,  // recorded, but no file with that id in the directory: refused
};
FORGEYARD_API std::string_view to_string(MigrationState state) noexcept;

struct AppliedMigration {
  int id = 0;
  std::string name;    // file name, 0003_add_email.sql
  std::string sha256;  // of the file's bytes, lower-case hex
  MigrationPhase phase = MigrationPhase::Expand;
  bool transactional = true;
  TimePoint applied_at;
  std::string applied_by;  // PostgreSQL: the session user; SQLite: the OS user
  std::string app_version;
  std::int64_t duration_ms = 0;
};

struct MigrationEntry {
  int id = 0;
  std::string name;  // the file's name (or the recorded one when the file is missing)
  MigrationState state = MigrationState::Pending;
  MigrationPhase phase = MigrationPhase::Expand;
  bool transactional = true;
  std::string file_sha256;      // empty when the file is missing
  std::string recorded_sha256;  // empty when not applied
  std::optional<AppliedMigration> record;
  std::string detail;  // why Changed / Missing
};

// Progress of a backfill (run_backfill), as recorded after each chunk.
struct BackfillProgress {
  int migration_id = 0;
  std::string name;
  std::optional<std::string> cursor;  // where the next chunk starts; none before the first chunk
  std::int64_t rows_done = 0;
  std::int64_t errors = 0;
  bool done = false;
  TimePoint updated_at;
};

// A daemon registered at open (StoreOptions::app_name), alive while its lease runs.
struct DaemonRegistration {
  std::string instance;
  int min_schema = 0;
  int max_schema = 0;  // 0: no upper bound declared
  TimePoint heartbeat_at;
  TimePoint expires_at;
  bool live = false;  // expires_at > now
};

struct MigrationStatus {
  std::string app;
  int applied_through = 0;                 // highest applied id, 0 for none
  std::vector<MigrationEntry> migrations;  // by id
  int applied = 0;
  int pending = 0;
  int changed = 0;  // Changed + Missing: apply and daemon start-up refuse while > 0
  std::vector<BackfillProgress> backfills;
  std::vector<DaemonRegistration> daemons;
  // Who holds the runner lock now, empty when free ("pid 123 (forgeyard)", ...).
  std::string lock_holder;
};

struct PlannedMigration {
  int id = 0;
  std::string name;
  MigrationPhase phase = MigrationPhase::Expand;
  bool transactional = true;
  bool will_run = false;
  std::string reason;  // why it is held back, e.g. "contract: needs --allow-contract"
};

struct MigrationPlan {
  std::string app;
  std::vector<PlannedMigration> steps;  // the pending migrations, in order
  // Set when the history does not match the directory: nothing runs.
  std::string refused;
  int will_run = 0;
  int held_back = 0;
};

struct MigrateOptions {
  std::string app = default_app_name;
  bool allow_contract = false;
  std::string app_version;  // recorded with each migration
  // How long a second runner waits for the first before it fails naming the holder.
  Duration lock_wait = std::chrono::seconds(30);
};

struct MigrationResult {
  std::string app;
  std::vector<AppliedMigration> applied;  // by this call, in order
  std::vector<PlannedMigration> held_back;
  int applied_through = 0;
};

// One chunk of a backfill: the work from `cursor` (none: from the start) to the returned cursor.
struct BackfillChunk {
  std::optional<std::string> next_cursor;
  std::int64_t rows = 0;
  std::int64_t errors = 0;
  bool done = false;  // nothing left after this chunk
};

class FORGEYARD_API Migrations {
 public:
  virtual ~Migrations() = default;
  // The files of `dir` (NNNN_name.sql) against the application's records.
  virtual MigrationStatus status(const std::string& dir, const std::string& app = default_app_name) = 0;
  // What apply would run, and why a migration is held back. Refused when a file changed.
  virtual MigrationPlan plan(const std::string& dir, const MigrateOptions& options = {}) = 0;
  // Runs the pending migrations in order, each in its own transaction with its record (unless the
  // file says no-transaction), under the runner lock. Stops before the first held-back contract.
  virtual MigrationResult apply(const std::string& dir, const MigrateOptions& options = {}) = 0;
  // Chunked, resumable backfill: calls `chunk` from the recorded cursor until it says done,
  // recording progress after each chunk. Chunks must be idempotent: a crash between a chunk's
  // commit and its progress record runs that chunk again.
  virtual BackfillProgress run_backfill(
      const std::string& app, int migration_id, const std::string& name,
      const std::function<BackfillChunk(const std::optional<std::string>& cursor)>& chunk) = 0;
};

enum class HealthStatus { Healthy, Degraded, Unavailable, MigrationRequired };
FORGEYARD_API std::string_view to_string(HealthStatus status) noexcept;

struct SchemaInfo {
  std::string store_version;  // forgeyard's version (PostgreSQL) or last forgeyard migration (SQLite)
  std::string store_edition;  // PostgreSQL: "cpp" or "plpgsql" (forgeyard.edition()); SQLite: ""
  std::string app;            // StoreOptions::app_name, empty when none
  int applied_through = 0;    // the application's highest applied migration
  int min_schema = 0;         // what this daemon declared
  int max_schema = 0;
};

struct Health {
  HealthStatus status = HealthStatus::Unavailable;
  SchemaInfo schema;
  Duration latency{0};  // one round trip to the store
  std::vector<std::string> details;
  std::vector<ReplicaStatus> replicas;  // each measured now
};

}  // namespace forgeyard
