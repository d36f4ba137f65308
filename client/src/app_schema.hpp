// What each backend gives the application's schema migrations, the daemon registry and
// health: a transaction (optionally holding the runner lock) with the reads and writes of the
// records. The rules themselves are in core/app_migrations.* and app_migrations.cpp, once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/app_migrations.hpp"
#include "forgeyard/migrations.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {

class AppSchemaTxn {
 public:
  virtual ~AppSchemaTxn() = default;  // rolls back unless committed; never throws
  virtual std::vector<AppliedMigration> applied() = 0;
  virtual std::vector<DaemonRegistration> daemons() = 0;  // live per the store's clock
  virtual std::vector<BackfillProgress> backfills() = 0;
  virtual void exec_script(const std::string& sql) = 0;
  virtual AppliedMigration record(const fy::core::AppMigrationFile& file, const std::string& app_version,
                                  std::int64_t duration_ms) = 0;
  virtual void save_backfill(const BackfillProgress& progress) = 0;
  virtual void register_daemon(const std::string& instance, int min_schema, int max_schema, Duration lease) = 0;
  virtual void release_daemon(const std::string& instance) = 0;
  virtual void commit() = 0;
};

class AppSchemaBackend {
 public:
  virtual ~AppSchemaBackend() = default;
  // A transaction for `app`; with lock_wait, holding the runner lock (bounded wait, then
  // Unavailable naming the holder). A read-only one never waits for a writer.
  virtual std::unique_ptr<AppSchemaTxn> begin(const std::string& app, std::optional<Duration> lock_wait,
                                              bool write = true) = 0;
  // Exclusive for a whole apply where the backend can (SQLite: the store's file lock); else null.
  virtual std::shared_ptr<void> lock_run(const std::string& app, Duration wait) = 0;
  // A no-transaction migration: the file alone, outside any transaction.
  virtual void exec_outside(const std::string& sql) = 0;
  // Who holds the runner lock, empty when free.
  virtual std::string lock_holder(const std::string& app) = 0;
};

// The files of a migrations directory, parsed and sorted (22023 for a bad name or directive,
// NotFound for a missing directory).
std::vector<fy::core::AppMigrationFile> read_app_migrations(const std::string& dir);
std::vector<fy::core::AppMigrationRecord> core_records(const std::vector<AppliedMigration>& applied);

// Store::migrations() for either backend.
std::unique_ptr<Migrations> make_migrations(AppSchemaBackend& backend);

// The daemon side (StoreOptions::app_name): register and check at open; health's view.
class DaemonPresence {
 public:
  DaemonPresence(AppSchemaBackend& backend, const StoreOptions& options);
  ~DaemonPresence();  // releases the registration; never throws
  // At open: registers, refuses a changed history (with app_migrations_dir) and a schema this
  // daemon predates; returns the applied-through id.
  void open();
  // The schema part of health(): MigrationRequired, Unavailable (too old) or Healthy; renews the
  // lease unless the store accepts reads only.
  HealthStatus check(SchemaInfo& schema, std::vector<std::string>& details, bool renew = true);
  bool active() const { return !app_.empty(); }

 private:
  AppSchemaBackend& backend_;
  std::string app_;
  std::string instance_;
  int min_schema_;
  int max_schema_;
  std::string dir_;
  Duration lease_;
  bool registered_ = false;
};

}  // namespace forgeyard::detail
