// The manifest of a `storage backup` directory (docs/operations.md#backup-and-restore): what was
// backed up, from which store and version, and every file's size and SHA-256, so that a restore
// can refuse a partial, corrupted or too-new backup before it changes anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fy::core {

// The manifest layout this code writes and reads. A manifest with a higher format is refused.
inline constexpr int backup_manifest_format = 1;
inline constexpr char backup_manifest_name[] = "manifest.json";

struct BackupFile {
  std::string name;  // a plain file name inside the backup directory (no '/', not "." or "..")
  std::uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
};

struct BackupMigration {
  std::string application;  // "forgeyard" for the store's own schema
  std::string version;      // e.g. "0004_audit.sql", or the extension version
  std::string checksum;     // hex SHA-256 of the migration, empty where the backend has none
};

struct BackupAuditHead {
  std::string tenant;
  std::int64_t seq = 0;
  std::string hash;  // hex
};

struct BackupManifest {
  int format = backup_manifest_format;
  std::string forgeyard_version;  // the client that wrote the backup
  std::string backend;            // "sqlite" or "postgresql"
  std::string schema_version;     // SQLite: last applied migration; PostgreSQL: extension version
  std::string server_version;     // PostgreSQL server version; empty for SQLite
  std::string created_at;         // ISO 8601, UTC
  std::vector<BackupMigration> migrations;
  std::vector<BackupFile> files;
  std::vector<BackupAuditHead> audit_heads;
};

// Pretty-printed JSON, keys in a fixed order.
std::string to_json(const BackupManifest& manifest);

// Parses and checks a manifest: every field present with its type, a known backend, a format
// this code reads, safe file names, hex digests. Anything else is XX001 ("the backup manifest
// is invalid: ..."), so a damaged backup is refused as corrupted.
BackupManifest parse_backup_manifest(std::string_view text);

// The number of a SQLite migration name ("0004_audit.sql" -> 4); -1 if it has none.
int migration_number(std::string_view name);

// <0, 0, >0 as version a is older, equal or newer than b ("0.10.0" > "0.9.3"). A component
// that is not a number is 22023.
int compare_versions(std::string_view a, std::string_view b);

// 22023 unless this code understands the backup's schema: a SQLite migration number at most
// `known_schema`'s, an extension version at most this client's.
void check_backup_not_newer(const BackupManifest& manifest, std::string_view known_schema);

}  // namespace fy::core
