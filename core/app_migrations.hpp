// The application's schema migrations, the logic both backends share: a file's name and header
// directives, the comparison of a directory with the recorded history, the plan (what runs, what
// is held back and why) and a daemon's schema range check (docs/operations.md, "Migrating your
// application's schema").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fy::core {

struct AppMigrationFile {
  int id = 0;
  std::string name;  // 0003_add_email.sql
  std::string sql;
  std::string sha256;  // hex, of the file's bytes
  bool contract = false;
  bool transactional = true;
};

// NNNN_name.sql (four or more digits, id > 0, name of [a-z0-9_-]) and the header directives
// "-- forgeyard: phase=expand|contract" and "-- forgeyard: no-transaction" in the leading
// comment lines. A bad name or an unknown directive: 22023.
AppMigrationFile parse_app_migration(const std::string& file_name, std::string sql);
// Sorted by id; two files with one id: 22023.
void sort_app_migrations(std::vector<AppMigrationFile>& files);

struct AppMigrationRecord {
  int id = 0;
  std::string name;
  std::string sha256;
  bool contract = false;
};

enum class FileState { Applied, Pending, Changed, Missing };

struct AppMigrationCheck {
  int id = 0;
  std::string name;
  FileState state = FileState::Pending;
  const AppMigrationFile* file = nullptr;      // null when Missing
  const AppMigrationRecord* record = nullptr;  // null when Pending
  std::string detail;                          // why Changed / Missing
};

// Every id of the files and the records, by id. Changed: the checksum or the name differs, or
// a new file sits below the highest applied id, or a pending file has the checksum of a file
// applied under another id (renumbered). Missing: recorded, no file with that id.
std::vector<AppMigrationCheck> compare_app_migrations(const std::vector<AppMigrationFile>& files,
                                                      const std::vector<AppMigrationRecord>& records);
// Empty when the history matches; else one line per Changed / Missing migration, naming the
// file and both checksums.
std::string app_history_refusal(const std::vector<AppMigrationCheck>& checks);

struct AppDaemon {
  std::string instance;
  int min_schema = 0;
  int max_schema = 0;  // 0: no bound declared
  bool live = false;
};

struct AppPlanStep {
  const AppMigrationFile* file = nullptr;
  bool will_run = false;
  std::string reason;
};

// The pending migrations in order. A contract runs only with allow_contract and while no live
// daemon declares a max_schema below its id (that daemon predates it and may still use what it
// removes). Everything after the first held-back migration waits for it.
std::vector<AppPlanStep> plan_app_migrations(const std::vector<AppMigrationCheck>& checks, bool allow_contract,
                                             const std::vector<AppDaemon>& daemons);

enum class DaemonFit { Ok, MigrationRequired, TooOld };

// A daemon's range against the applied history: below min_schema -> MigrationRequired; a
// contract above max_schema applied -> TooOld (expand migrations above it are fine: N-1 keeps
// working). `why` says which migration decided.
DaemonFit check_daemon_range(const std::vector<AppMigrationRecord>& records, int min_schema, int max_schema,
                             std::string& why);

// Bad application names, instance ids: empty 22023, over 200 bytes 22001.
void check_app_name(std::string_view value, const char* what);

// The second key of the runner's advisory lock (the first is app_lock_class): the first four
// bytes of SHA-256(app), as a signed 32-bit integer.
inline constexpr std::int32_t app_lock_class = 0x46590007;
std::int32_t app_lock_key(std::string_view app);

}  // namespace fy::core
