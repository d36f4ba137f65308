// Backup, restore and verify behind forgeyard/backup.hpp: the backend-neutral steps (backup
// directories, manifests, checksums, child processes) and one entry per backend.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/backup_manifest.hpp"
#include "forgeyard/backup.hpp"
#include "forgeyard/error.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {
class PgConnection;
}

namespace forgeyard::detail::ops {

// ---- files (files.cpp) ----
struct FileDigest {
  std::uint64_t size = 0;
  std::string sha256;
};
FileDigest digest_file(const std::string& path);
// Creates `directory` if absent; refuses one that holds anything (22023).
void prepare_backup_directory(const std::string& directory);
// Writes `text` to `path` and fsyncs it and its directory.
void write_durably(const std::string& path, const std::string& text);
void fsync_path(const std::string& path);
// Reads and parses manifest.json, then checks every listed file's size and SHA-256 and that no
// other file is there: a partial or corrupted backup is XX001 before anything changes.
fy::core::BackupManifest read_checked_backup(const std::string& directory, const ProgressFn& progress);
std::string utc_now_iso();

// ---- child processes (child.cpp) ----
struct Child {
  std::vector<std::string> argv;           // argv[0] is looked up on PATH
  std::map<std::string, std::string> env;  // set in the child only (libpq's PG* variables)
  std::string label;                       // "pg_dump", for progress and errors
  std::string watch_file;                  // its size is shown in progress lines
  std::string stdout_file = {};            // where its stdout goes (else /dev/null)
};
// Runs the child to its end; its stderr is kept and quoted in the error if it fails.
// Progress lines every second once it has run for more than one.
void run_child(const Child& child, const ProgressFn& progress);

// An SQL identifier in double quotes (PostgreSQL and SQLite alike).
std::string quote_ident(const std::string& name);

// forgeyard's version in a PostgreSQL database, either edition ("" when it has none).
std::string pg_installed_version(PgConnection& conn);

// ---- what counts as data ----
// The forgeyard tables that hold a store's state, the same names on both backends. A target is
// empty when none of them has a row and it has no application table; bookkeeping tables (the
// migration ledger, counters, the store's identity) do not count.
const std::vector<std::string>& data_tables();
// SQLite: the tables forgeyard's own migrations create; any other table is the application's.
std::set<std::string> sqlite_forgeyard_tables();

// ---- the restore reconcile seam ----
// Moves every fencing value past the restored state and expires what was live at backup time
// (forgeyard.restore_reconcile / Store::restore_reconcile). Returns false while this build has
// no reconcile step, so the result says it did not run.
bool reconcile_restored(Store& store);

// ---- SQLite (sqlite_backup.cpp) ----
BackupResult sqlite_backup(const std::string& path, const std::string& directory, const ProgressFn& progress);
RestoreResult sqlite_restore(const std::string& path, const std::string& directory,
                             const fy::core::BackupManifest& manifest, const RestoreOptions& options);
VerifyReport sqlite_verify(const std::string& path, bool full);

// ---- PostgreSQL (postgres_backup.cpp) ----
BackupResult postgres_backup(const std::string& url, const std::string& directory, const ProgressFn& progress);
RestoreResult postgres_restore(const std::string& url, const std::string& directory,
                               const fy::core::BackupManifest& manifest, const RestoreOptions& options);
VerifyReport postgres_verify(const std::string& url, bool full);

// ---- storage copy (copy.cpp) ----
CopyResult copy_between(const std::string& from, const std::string& to, const ProgressFn& progress);

// The full audit chain check of every tenant in `tenants` through the public API (a store's, or
// the SQLite audit code run inside verify's snapshot).
void verify_audit_chains(Audit& audit, const std::vector<std::string>& tenants, VerifyReport& report);

// The findings of the workflow_journals check, worded once for both backends: a journal whose
// positions are not 1..n, journal rows of a run that does not exist, a run whose state and finish
// time disagree or whose epoch is above the claim token sequence.
std::string workflow_gap(const std::string& tenant, const std::string& run, std::int64_t rows, std::int64_t last);
std::string workflow_orphan(const std::string& tenant, const std::string& run);
std::string workflow_inconsistent(const std::string& tenant, const std::string& run, const std::string& state,
                                  std::int64_t epoch);

}  // namespace forgeyard::detail::ops
