// Backup, restore and verify of a whole store (docs/operations.md#backup-and-restore). They take
// a URL, not an open Store: a restore replaces what a Store would hold open. Run them with the
// rights of the database owner (PostgreSQL) or the store file's owner (SQLite).
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace forgeyard {

// One line for a human about long work (the CLI prints it on stderr).
using ProgressFn = std::function<void(const std::string&)>;

struct BackupResult {
  std::string directory;
  std::string backend;         // "sqlite" or "postgresql"
  std::string schema_version;  // last migration (SQLite) or extension version (PostgreSQL)
  std::string server_version;  // PostgreSQL only
  std::string created_at;
  std::uint64_t bytes = 0;  // of the data files
  int files = 0;
  int audit_chains = 0;
};

// An application-consistent snapshot of the store at `url` into `directory` (created; it must be
// empty or absent) plus manifest.json. SQLite: the online backup API. PostgreSQL: pg_dump -Fc
// (found on PATH) of the one snapshot the manifest's audit heads were read in.
FORGEYARD_API BackupResult backup_store(std::string_view url, const std::string& directory,
                                        const ProgressFn& progress = {});

struct VerifyFinding {
  std::string check;   // e.g. "queue_counters"
  std::string detail;  // what is wrong, naming the rows
};

struct VerifyReport {
  bool full = false;
  std::vector<std::string> checks;             // every check that ran, in order
  std::map<std::string, std::int64_t> counts;  // rows per table
  std::vector<VerifyFinding> findings;         // empty: the store is consistent
  bool ok() const { return findings.empty(); }
};

// quick: schema (migrations / extension version), constraints, row counts. full: also every
// audit chain, every versioned table's entity_version >= 1, queue counters against the rows,
// message states, idempotency attempts against the attempt counter.
FORGEYARD_API VerifyReport verify_store(std::string_view url, bool full);

struct RestoreOptions {
  bool replace = false;  // a non-empty target is refused unless this is set
  ProgressFn progress;
};

struct RestoreResult {
  std::string backend;
  std::string backup_schema_version;  // as backed up
  std::string schema_version;         // after migrating forward
  std::string backup_created_at;
  bool migrated = false;    // the backup was older and was brought to this version
  bool replaced = false;    // a non-empty target was replaced
  bool reconciled = false;  // restore_reconcile ran (fencing values moved past the backup)
  VerifyReport verify;      // the full verify of the restored store
};

// Validates `directory` (manifest, every file's size and SHA-256, a schema this code
// understands) before anything changes, then restores into the store at `url` (SQLite: under
// the exclusive store lock; PostgreSQL: pg_restore into the URL's database, created if absent),
// migrates forward, verifies and reconciles.
FORGEYARD_API RestoreResult restore_store(std::string_view url, const std::string& directory,
                                          const RestoreOptions& options = {});

struct CopyResult {
  std::map<std::string, std::int64_t> rows;     // rows copied per table
  std::vector<std::string> application_tables;  // versioned tables created on the target
  bool reconciled = false;
  VerifyReport verify;  // the full verify of the target
};

// Copies everything of the store at `from` into the empty store at `to` of the other backend
// (SQLite -> PostgreSQL, or back): leases and epochs, idempotency keys, queues and every message
// in its state, dead letters, the inbox, audit chains with the same seq and hashes, and the
// application's versioned tables (created on the target where every column's type maps; else
// refused before anything is written, naming the column). PostgreSQL: as the extension's owner.
FORGEYARD_API CopyResult copy_store(std::string_view from, std::string_view to, const ProgressFn& progress = {});

}  // namespace forgeyard
