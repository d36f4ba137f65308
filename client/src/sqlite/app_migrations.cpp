#include "sqlite/app_migrations.hpp"

#include <pwd.h>
#include <unistd.h>

#include "instruments.hpp"
#include "sqlite/file_lock.hpp"

namespace forgeyard::detail {

namespace {

std::string os_user() {
  const passwd* pw = getpwuid(getuid());
  return pw != nullptr && pw->pw_name != nullptr ? pw->pw_name : "uid " + std::to_string(getuid());
}

class SqliteAppTxn final : public AppSchemaTxn {
 public:
  SqliteAppTxn(Pool<Db>::Handle db, std::string app, std::int64_t now, bool write)
      : db_(std::move(db)), app_(std::move(app)), now_(now) {
    db_->exec(write ? "BEGIN IMMEDIATE" : "BEGIN");
    open_ = true;
  }
  ~SqliteAppTxn() override {
    if (!open_ || db_->reusable()) return;
    try {
      db_->exec("ROLLBACK");
    } catch (const std::exception& e) {
      log().warn("rollback of an application schema transaction failed: {}", e.what());
    }
  }
  std::vector<AppliedMigration> applied() override {
    auto q = db_->query(
        "SELECT migration_id, name, sha256, phase, transactional, applied_at, applied_by, app_version, duration_ms"
        " FROM app_migrations WHERE application = ? ORDER BY migration_id");
    q.bind(1, app_);
    std::vector<AppliedMigration> out;
    while (q.step()) {
      AppliedMigration a;
      a.id = static_cast<int>(q.int64(0));
      a.name = q.text(1);
      a.sha256 = q.text(2);
      a.phase = q.text(3) == "contract" ? MigrationPhase::Contract : MigrationPhase::Expand;
      a.transactional = q.int64(4) != 0;
      a.applied_at = from_unix_usecs(q.int64(5));
      a.applied_by = q.text(6);
      a.app_version = q.text(7);
      a.duration_ms = q.int64(8);
      out.push_back(std::move(a));
    }
    return out;
  }
  std::vector<DaemonRegistration> daemons() override {
    auto q = db_->query(
        "SELECT instance, min_schema, max_schema, heartbeat_at, expires_at FROM app_daemons"
        " WHERE application = ? ORDER BY instance");
    q.bind(1, app_);
    std::vector<DaemonRegistration> out;
    while (q.step())
      out.push_back({q.text(0), static_cast<int>(q.int64(1)), static_cast<int>(q.int64(2)), from_unix_usecs(q.int64(3)),
                     from_unix_usecs(q.int64(4)), q.int64(4) > now_});
    return out;
  }
  std::vector<BackfillProgress> backfills() override {
    auto q = db_->query(
        "SELECT migration_id, name, cursor, rows_done, errors, done, updated_at FROM app_backfills"
        " WHERE application = ? ORDER BY migration_id, name");
    q.bind(1, app_);
    std::vector<BackfillProgress> out;
    while (q.step()) {
      BackfillProgress p;
      p.migration_id = static_cast<int>(q.int64(0));
      p.name = q.text(1);
      if (!q.is_null(2)) p.cursor = q.text(2);
      p.rows_done = q.int64(3);
      p.errors = q.int64(4);
      p.done = q.int64(5) != 0;
      p.updated_at = from_unix_usecs(q.int64(6));
      out.push_back(std::move(p));
    }
    return out;
  }
  void exec_script(const std::string& sql) override { db_->exec(sql.c_str()); }
  AppliedMigration record(const fy::core::AppMigrationFile& f, const std::string& app_version,
                          std::int64_t duration_ms) override {
    AppliedMigration a;
    a.id = f.id;
    a.name = f.name;
    a.sha256 = f.sha256;
    a.phase = f.contract ? MigrationPhase::Contract : MigrationPhase::Expand;
    a.transactional = f.transactional;
    a.applied_at = from_unix_usecs(now_);
    a.applied_by = os_user();
    a.app_version = app_version;
    a.duration_ms = duration_ms;
    if (app_version.size() > 200)
      throw Error(ErrorKind::InvalidArgument, sqlstate::string_too_long, "app_version is longer than 200 bytes");
    db_->query(
           "INSERT INTO app_migrations (application, migration_id, name, sha256, phase, transactional, applied_at,"
           " applied_by, app_version, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, app_)
        .bind(2, static_cast<std::int64_t>(f.id))
        .bind(3, f.name)
        .bind(4, f.sha256)
        .bind(5, std::string_view(f.contract ? "contract" : "expand"))
        .bind(6, static_cast<std::int64_t>(f.transactional ? 1 : 0))
        .bind(7, now_)
        .bind(8, a.applied_by)
        .bind(9, app_version)
        .bind(10, duration_ms)
        .run();
    return a;
  }
  void save_backfill(const BackfillProgress& p) override {
    auto q = db_->query(
        "INSERT INTO app_backfills (application, migration_id, name, cursor, rows_done, errors, done, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (application, migration_id, name) DO UPDATE SET"
        " cursor = excluded.cursor, rows_done = excluded.rows_done, errors = excluded.errors, done = excluded.done,"
        " updated_at = excluded.updated_at");
    q.bind(1, app_).bind(2, static_cast<std::int64_t>(p.migration_id)).bind(3, p.name);
    if (p.cursor)
      q.bind(4, *p.cursor);
    else
      q.bind_null(4);
    q.bind(5, p.rows_done).bind(6, p.errors).bind(7, static_cast<std::int64_t>(p.done ? 1 : 0)).bind(8, now_).run();
  }
  void register_daemon(const std::string& instance, int min_schema, int max_schema, Duration lease) override {
    db_->query(
           "INSERT INTO app_daemons (application, instance, min_schema, max_schema, registered_at, heartbeat_at,"
           " expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6) ON CONFLICT (application, instance) DO UPDATE SET"
           " min_schema = excluded.min_schema, max_schema = excluded.max_schema,"
           " heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at")
        .bind(1, app_)
        .bind(2, instance)
        .bind(3, static_cast<std::int64_t>(min_schema))
        .bind(4, static_cast<std::int64_t>(max_schema))
        .bind(5, now_)
        .bind(6, now_ + lease.count())
        .run();
  }
  void release_daemon(const std::string& instance) override {
    db_->query("DELETE FROM app_daemons WHERE application = ? AND instance = ?").bind(1, app_).bind(2, instance).run();
  }
  void commit() override {
    db_->exec("COMMIT");
    open_ = false;
  }

 private:
  Pool<Db>::Handle db_;
  std::string app_;
  std::int64_t now_;
  bool open_ = false;
};

class SqliteAppSchema final : public AppSchemaBackend {
 public:
  SqliteAppSchema(Pool<Db>& pool, std::string lock_path, std::function<std::int64_t()> now)
      : pool_(pool), lock_path_(std::move(lock_path)), now_(std::move(now)) {}

  // SQLite serializes writers itself; the runner's exclusivity is the file lock of lock_run.
  std::unique_ptr<AppSchemaTxn> begin(const std::string& app, std::optional<Duration>, bool write) override {
    return std::make_unique<SqliteAppTxn>(pool_.acquire(), app, now_(), write);
  }
  std::shared_ptr<void> lock_run(const std::string& app, Duration wait) override {
    return std::make_shared<FileLock>(lock_path_, "migrating application " + app,
                                      std::chrono::duration_cast<std::chrono::milliseconds>(wait));
  }
  void exec_outside(const std::string& sql) override {
    auto db = pool_.acquire();
    db->exec(sql.c_str());
  }
  std::string lock_holder(const std::string&) override {
    return FileLock::held(lock_path_) ? FileLock::describe_holder(lock_path_) : std::string();
  }

 private:
  Pool<Db>& pool_;
  std::string lock_path_;
  std::function<std::int64_t()> now_;
};

}  // namespace

std::unique_ptr<AppSchemaBackend> make_sqlite_app_schema(Pool<Db>& pool, std::string lock_path,
                                                         std::function<std::int64_t()> now_usecs) {
  return std::make_unique<SqliteAppSchema>(pool, std::move(lock_path), std::move(now_usecs));
}

}  // namespace forgeyard::detail
