// The runner lock is pg_try_advisory_xact_lock(app_lock_class, app_lock_key(app)), taken in each
// migration's transaction and retried until the caller's bound: nothing depends on session
// state, so it also holds through PgBouncer in transaction mode.
#include "postgres/app_migrations.hpp"

#include <chrono>
#include <thread>

#include "core/app_migrations.hpp"
#include "core/errors.hpp"
#include "instruments.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

namespace {

namespace sqlstate = fy::core::sqlstate;

const PgStatement list_sql{"fy_app_migration_list",
                           "SELECT migration_id, name, sha256, phase, transactional, " FY_USECS(
                               "applied_at") ", applied_by, app_version, duration_ms"
                                             " FROM forgeyard.app_migration_list($1)",
                           1};
const PgStatement record_sql{"fy_app_migration_record",
                             "SELECT " FY_USECS("applied_at") ", applied_by"
                                                              " FROM forgeyard.app_migration_record($1, $2::int4, $3, "
                                                              "$4, $5, $6::bool, $7, $8::int8)",
                             8};
const PgStatement daemons_sql{"fy_app_daemon_list",
                              "SELECT instance, min_schema, max_schema, " FY_USECS("heartbeat_at") ", " FY_USECS(
                                  "expires_at") ", live FROM forgeyard.app_daemon_list($1)",
                              1};
const PgStatement register_sql{"fy_app_daemon_register",
                               "SELECT forgeyard.app_daemon_register($1, $2, $3::int4, $4::int4, $5::interval)", 5};
const PgStatement daemon_release_sql{"fy_app_daemon_release", "SELECT forgeyard.app_daemon_release($1, $2)", 2};
const PgStatement backfills_sql{"fy_app_backfill_list",
                                "SELECT migration_id, name, \"cursor\", rows_done, errors, done, " FY_USECS(
                                    "updated_at") " FROM forgeyard.app_backfill_list($1)",
                                1};
const PgStatement backfill_save_sql{
    "fy_app_backfill_save", "SELECT forgeyard.app_backfill_save($1, $2::int4, $3, $4, $5::int8, $6::int8, $7::bool)",
    7};
const PgStatement try_lock_sql{"fy_app_try_lock", "SELECT pg_catalog.pg_try_advisory_xact_lock($1::int4, $2::int4)", 2};
const PgStatement holder_sql{
    "fy_app_lock_holder",
    "SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.usename::text, ''),"
    " coalesce(pg_catalog.to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '')"
    " FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid"
    " WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted"
    " AND l.classid OPERATOR(pg_catalog.=) $1::int4::oid AND l.objid OPERATOR(pg_catalog.=) $2::int4::oid"
    " AND l.objsubid OPERATOR(pg_catalog.=) 2 LIMIT 1",
    2};

std::string b(bool v) {
  return v ? "true" : "false";
}

class PgAppTxn final : public AppSchemaTxn {
 public:
  PgAppTxn(Pool<PgConnection>::Handle conn, std::string app) : conn_(std::move(conn)), app_(std::move(app)) {}
  ~PgAppTxn() override {
    if (!open_) return;
    try {
      conn_->command("ROLLBACK");
    } catch (const std::exception& e) {  // the pool drops a connection it cannot reuse
      log().warn("rollback of an application schema transaction failed: {}", e.what());
    }
  }
  void mark_open() { open_ = true; }
  PgConnection& conn() { return *conn_; }

  std::vector<AppliedMigration> applied() override {
    PgResult r = conn_->exec(list_sql, {app_});
    std::vector<AppliedMigration> out;
    for (int i = 0; i < r.rows(); ++i) {
      AppliedMigration a;
      a.id = static_cast<int>(r.int8(i, 0));
      a.name = r.text(i, 1);
      a.sha256 = r.text(i, 2);
      a.phase = r.text(i, 3) == "contract" ? MigrationPhase::Contract : MigrationPhase::Expand;
      a.transactional = r.boolean(i, 4);
      a.applied_at = from_unix_usecs(r.int8(i, 5));
      a.applied_by = r.text(i, 6);
      a.app_version = r.text(i, 7);
      a.duration_ms = r.int8(i, 8);
      out.push_back(std::move(a));
    }
    return out;
  }
  std::vector<DaemonRegistration> daemons() override {
    PgResult r = conn_->exec(daemons_sql, {app_});
    std::vector<DaemonRegistration> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), static_cast<int>(r.int8(i, 1)), static_cast<int>(r.int8(i, 2)),
                     from_unix_usecs(r.int8(i, 3)), from_unix_usecs(r.int8(i, 4)), r.boolean(i, 5)});
    return out;
  }
  std::vector<BackfillProgress> backfills() override {
    PgResult r = conn_->exec(backfills_sql, {app_});
    std::vector<BackfillProgress> out;
    for (int i = 0; i < r.rows(); ++i) {
      BackfillProgress p;
      p.migration_id = static_cast<int>(r.int8(i, 0));
      p.name = r.text(i, 1);
      if (!r.is_null(i, 2)) p.cursor = r.text(i, 2);
      p.rows_done = r.int8(i, 3);
      p.errors = r.int8(i, 4);
      p.done = r.boolean(i, 5);
      p.updated_at = from_unix_usecs(r.int8(i, 6));
      out.push_back(std::move(p));
    }
    return out;
  }
  void exec_script(const std::string& sql) override { conn_->script(sql); }
  AppliedMigration record(const fy::core::AppMigrationFile& f, const std::string& app_version,
                          std::int64_t duration_ms) override {
    PgResult r =
        conn_->exec(record_sql, {app_, std::to_string(f.id), f.name, f.sha256, f.contract ? "contract" : "expand",
                                 b(f.transactional), app_version, std::to_string(duration_ms)});
    AppliedMigration a;
    a.id = f.id;
    a.name = f.name;
    a.sha256 = f.sha256;
    a.phase = f.contract ? MigrationPhase::Contract : MigrationPhase::Expand;
    a.transactional = f.transactional;
    a.applied_at = from_unix_usecs(r.int8(0, 0));
    a.applied_by = r.text(0, 1);
    a.app_version = app_version;
    a.duration_ms = duration_ms;
    return a;
  }
  void save_backfill(const BackfillProgress& p) override {
    conn_->exec(backfill_save_sql, {app_, std::to_string(p.migration_id), p.name, p.cursor, std::to_string(p.rows_done),
                                    std::to_string(p.errors), b(p.done)});
  }
  void register_daemon(const std::string& instance, int min_schema, int max_schema, Duration lease) override {
    conn_->exec(register_sql,
                {app_, instance, std::to_string(min_schema), std::to_string(max_schema), interval_param(lease)});
  }
  void release_daemon(const std::string& instance) override { conn_->exec(daemon_release_sql, {app_, instance}); }
  void commit() override {
    conn_->commit();
    open_ = false;
  }

 private:
  Pool<PgConnection>::Handle conn_;
  std::string app_;
  bool open_ = false;
};

std::string describe_holder(PgConnection& conn, const std::string& app) {
  PgResult r =
      conn.exec(holder_sql, {std::to_string(fy::core::app_lock_class), std::to_string(fy::core::app_lock_key(app))});
  if (r.rows() == 0) return {};
  std::string out = "pid " + r.text(0, 0);
  if (!r.text(0, 1).empty()) out += " (application_name " + r.text(0, 1) + ")";
  if (!r.text(0, 2).empty()) out += " as " + r.text(0, 2);
  if (!r.text(0, 3).empty()) out += ", in a transaction since " + r.text(0, 3);
  return out;
}

class PgAppSchema final : public AppSchemaBackend {
 public:
  PgAppSchema(Pool<PgConnection>& pool, std::function<void(PgConnection&)> apply_clock)
      : pool_(pool), apply_clock_(std::move(apply_clock)) {}

  std::unique_ptr<AppSchemaTxn> begin(const std::string& app, std::optional<Duration> lock_wait, bool) override {
    auto txn = std::make_unique<PgAppTxn>(pool_.acquire(), app);
    txn->conn().command("BEGIN");
    txn->mark_open();
    apply_clock_(txn->conn());
    if (!lock_wait) return txn;
    const auto deadline = std::chrono::steady_clock::now() + *lock_wait;
    const PgParams key{std::to_string(fy::core::app_lock_class), std::to_string(fy::core::app_lock_key(app))};
    while (!txn->conn().exec(try_lock_sql, key).boolean(0, 0)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string holder;
        try {
          auto other = pool_.acquire();
          holder = describe_holder(*other, app);
        } catch (const Error&) {
          holder = "unknown";
        }
        throw Error(ErrorKind::Unavailable, sqlstate::lock_not_available,
                    "application " + app +
                        ": another migration runner holds the lock: " + (holder.empty() ? "released just now" : holder),
                    "waited " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*lock_wait).count()) +
                        " ms; retry when it is done");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return txn;
  }
  std::shared_ptr<void> lock_run(const std::string&, Duration) override { return nullptr; }
  void exec_outside(const std::string& sql) override {
    auto conn = pool_.acquire();
    conn->script(sql);
  }
  std::string lock_holder(const std::string& app) override {
    auto conn = pool_.acquire();
    return describe_holder(*conn, app);
  }

 private:
  Pool<PgConnection>& pool_;
  std::function<void(PgConnection&)> apply_clock_;
};

}  // namespace

std::unique_ptr<AppSchemaBackend> make_pg_app_schema(Pool<PgConnection>& pool,
                                                     std::function<void(PgConnection&)> apply_clock) {
  return std::make_unique<PgAppSchema>(pool, std::move(apply_clock));
}

}  // namespace forgeyard::detail
