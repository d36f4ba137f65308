// The SQLite schema: migrations/sqlite/NNNN_name.sql, applied in order under the exclusive
// file lock, each recorded with its SHA-256 in schema_migrations. A changed applied file, or
// an applied version this client does not know, refuses to open.
#pragma once

#include <string>
#include <vector>

#include "sqlite/db.hpp"

namespace forgeyard::detail {

struct Migration {
  int version = 0;
  std::string name;  // file name, e.g. 0001_leases.sql
  std::string sql;
};

// Built in from migrations/sqlite/ at compile time (generated source).
std::vector<Migration> embedded_sqlite_migrations();
// Read from a directory instead (StoreOptions::sqlite_migrations_dir).
std::vector<Migration> load_migrations(const std::string& directory);

struct MigrationState {
  int applied = 0;
  int pending = 0;
  std::string last;  // name of the last applied migration
};

// Checks the ledger against `migrations`; applies the pending ones if `apply`.
MigrationState migrate(Db& db, const std::vector<Migration>& migrations, bool apply);

}  // namespace forgeyard::detail
