// The application's schema migrations over either backend: status, plan and apply, backfills,
// and a daemon's registration. docs/operations.md, "Migrating your application's schema".
#include "app_schema.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_map.hpp"
#include "instruments.hpp"

namespace forgeyard {

std::string_view to_string(MigrationPhase phase) noexcept {
  return phase == MigrationPhase::Contract ? "contract" : "expand";
}

std::string_view to_string(MigrationState state) noexcept {
  switch (state) {
    case MigrationState::Applied:
      return "applied";
    case MigrationState::Pending:
      return "pending";
    case MigrationState::Changed:
      return "changed";
    case MigrationState::Missing:
      return "missing";
  }
  return "?";
}

std::string_view to_string(HealthStatus status) noexcept {
  switch (status) {
    case HealthStatus::Healthy:
      return "healthy";
    case HealthStatus::Degraded:
      return "degraded";
    case HealthStatus::Unavailable:
      return "unavailable";
    case HealthStatus::MigrationRequired:
      return "migration_required";
  }
  return "?";
}

namespace detail {

namespace core = fy::core;

std::vector<core::AppMigrationFile> read_app_migrations(const std::string& dir) {
  return core_guarded([&] {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw Error(ErrorKind::NotFound, "58P01", "no migrations directory " + dir);
    std::vector<core::AppMigrationFile> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".sql") || !entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in && !in.eof())
        throw Error(ErrorKind::Unavailable, core::sqlstate::io_error, "cannot read " + entry.path().string());
      files.push_back(core::parse_app_migration(name, text.str()));
    }
    if (ec) throw Error(ErrorKind::Unavailable, core::sqlstate::io_error, "cannot read " + dir + ": " + ec.message());
    core::sort_app_migrations(files);
    return files;
  });
}

std::vector<core::AppMigrationRecord> core_records(const std::vector<AppliedMigration>& applied) {
  std::vector<core::AppMigrationRecord> out;
  out.reserve(applied.size());
  for (const AppliedMigration& a : applied)
    out.push_back({a.id, a.name, a.sha256, a.phase == MigrationPhase::Contract});
  return out;
}

namespace {

MigrationPhase phase_of(const core::AppMigrationFile& f) {
  return f.contract ? MigrationPhase::Contract : MigrationPhase::Expand;
}

std::vector<core::AppDaemon> core_daemons(const std::vector<DaemonRegistration>& daemons) {
  std::vector<core::AppDaemon> out;
  for (const DaemonRegistration& d : daemons) out.push_back({d.instance, d.min_schema, d.max_schema, d.live});
  return out;
}

int applied_through(const std::vector<AppliedMigration>& applied) {
  int top = 0;
  for (const AppliedMigration& a : applied) top = std::max(top, a.id);
  return top;
}

MigrationPlan make_plan(const std::string& app, const std::vector<core::AppMigrationCheck>& checks, bool allow_contract,
                        const std::vector<DaemonRegistration>& daemons) {
  MigrationPlan plan;
  plan.app = app;
  plan.refused = core::app_history_refusal(checks);
  for (const core::AppPlanStep& s : core::plan_app_migrations(checks, allow_contract, core_daemons(daemons))) {
    PlannedMigration p{s.file->id, s.file->name, phase_of(*s.file), s.file->transactional, s.will_run, s.reason};
    if (!plan.refused.empty()) {
      p.will_run = false;
      p.reason = "the applied history does not match the directory";
    }
    (p.will_run ? plan.will_run : plan.held_back) += 1;
    plan.steps.push_back(std::move(p));
  }
  return plan;
}

[[noreturn]] void refuse_history(const std::string& app, const std::string& refusal) {
  throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter,
              "application " + app + ": the migrations directory does not match the applied history; nothing was run",
              refusal);
}

class MigrationsImpl final : public Migrations {
 public:
  explicit MigrationsImpl(AppSchemaBackend& backend) : backend_(backend) {}

  MigrationStatus status(const std::string& dir, const std::string& app) override {
    core_guarded([&] { core::check_app_name(app, "app"); });
    const auto files = read_app_migrations(dir);
    auto txn = backend_.begin(app, std::nullopt, false);
    MigrationStatus s;
    s.app = app;
    const std::vector<AppliedMigration> applied = txn->applied();
    s.daemons = txn->daemons();
    s.backfills = txn->backfills();
    txn.reset();
    s.lock_holder = backend_.lock_holder(app);
    s.applied_through = applied_through(applied);
    const auto records = core_records(applied);
    for (const core::AppMigrationCheck& c : core::compare_app_migrations(files, records)) {
      MigrationEntry e;
      e.id = c.id;
      e.name = c.name;
      e.detail = c.detail;
      if (c.file != nullptr) {
        e.file_sha256 = c.file->sha256;
        e.phase = phase_of(*c.file);
        e.transactional = c.file->transactional;
      }
      if (c.record != nullptr) {
        const auto it = std::find_if(applied.begin(), applied.end(), [&](const auto& a) { return a.id == c.id; });
        e.record = *it;
        e.recorded_sha256 = it->sha256;
        e.phase = it->phase;
        e.transactional = it->transactional;
      }
      switch (c.state) {
        case core::FileState::Applied:
          e.state = MigrationState::Applied;
          ++s.applied;
          break;
        case core::FileState::Pending:
          e.state = MigrationState::Pending;
          ++s.pending;
          break;
        case core::FileState::Changed:
          e.state = MigrationState::Changed;
          ++s.changed;
          break;
        case core::FileState::Missing:
          e.state = MigrationState::Missing;
          ++s.changed;
          break;
      }
      s.migrations.push_back(std::move(e));
    }
    return s;
  }

  MigrationPlan plan(const std::string& dir, const MigrateOptions& options) override {
    core_guarded([&] { core::check_app_name(options.app, "app"); });
    const auto files = read_app_migrations(dir);
    auto txn = backend_.begin(options.app, std::nullopt, false);
    const auto applied = txn->applied();
    const auto daemons = txn->daemons();
    txn.reset();
    const auto records = core_records(applied);
    return make_plan(options.app, core::compare_app_migrations(files, records), options.allow_contract, daemons);
  }

  MigrationResult apply(const std::string& dir, const MigrateOptions& options) override {
    core_guarded([&] { core::check_app_name(options.app, "app"); });
    if (options.lock_wait.count() < 0)
      throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter, "lock_wait must not be negative");
    const auto files = read_app_migrations(dir);
    MigrationResult result;
    result.app = options.app;
    const auto run_lock = backend_.lock_run(options.app, options.lock_wait);
    for (;;) {
      // Each step re-reads the history under the lock: a runner that waited finds what the
      // other one applied and has nothing left to do.
      auto txn = backend_.begin(options.app, options.lock_wait);
      const auto applied = txn->applied();
      result.applied_through = applied_through(applied);
      const auto records = core_records(applied);
      const auto checks = core::compare_app_migrations(files, records);
      if (const std::string refusal = core::app_history_refusal(checks); !refusal.empty())
        refuse_history(options.app, refusal);
      const MigrationPlan plan = make_plan(options.app, checks, options.allow_contract, txn->daemons());
      const auto next = std::find_if(plan.steps.begin(), plan.steps.end(), [](const auto& s) { return s.will_run; });
      if (next == plan.steps.end()) {
        for (const PlannedMigration& p : plan.steps) result.held_back.push_back(p);
        txn->commit();
        return result;
      }
      const auto file = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.id == next->id; });
      const auto started = std::chrono::steady_clock::now();
      auto elapsed_ms = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
            .count();
      };
      if (file->transactional) {
        txn->exec_script(file->sql);
        result.applied.push_back(txn->record(*file, options.app_version, elapsed_ms()));
        txn->commit();
      } else {
        // Outside any transaction (CREATE INDEX CONCURRENTLY): the file must be idempotent, as a
        // crash before its record, or a second runner on PostgreSQL, runs it again.
        txn.reset();
        backend_.exec_outside(file->sql);
        auto rec = backend_.begin(options.app, options.lock_wait);
        const auto now_applied = rec->applied();
        if (std::none_of(now_applied.begin(), now_applied.end(), [&](const auto& a) { return a.id == file->id; }))
          result.applied.push_back(rec->record(*file, options.app_version, elapsed_ms()));
        rec->commit();
      }
      log().info("application {}: applied migration {} ({} ms)", options.app, file->name, elapsed_ms());
    }
  }

  BackfillProgress run_backfill(const std::string& app, int migration_id, const std::string& name,
                                const std::function<BackfillChunk(const std::optional<std::string>&)>& chunk) override {
    core_guarded([&] {
      core::check_app_name(app, "app");
      core::check_app_name(name, "backfill name");
    });
    if (migration_id <= 0)
      throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter, "migration_id must be positive");
    BackfillProgress progress;
    progress.migration_id = migration_id;
    progress.name = name;
    {
      auto txn = backend_.begin(app, std::nullopt, false);
      for (const BackfillProgress& p : txn->backfills())
        if (p.migration_id == migration_id && p.name == name) progress = p;
    }
    while (!progress.done) {
      const BackfillChunk c = chunk(progress.cursor);
      if (c.rows < 0 || c.errors < 0)
        throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter,
                    "a backfill chunk reports negative rows or errors");
      if (!c.done && c.next_cursor == progress.cursor)
        throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter,
                    "backfill " + name + ": a chunk that is not done must move the cursor");
      progress.cursor = c.next_cursor;
      progress.rows_done += c.rows;
      progress.errors += c.errors;
      progress.done = c.done;
      auto txn = backend_.begin(app, std::nullopt);
      txn->save_backfill(progress);
      txn->commit();
    }
    return progress;
  }

 private:
  AppSchemaBackend& backend_;
};

std::string default_instance() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

}  // namespace

std::unique_ptr<Migrations> make_migrations(AppSchemaBackend& backend) {
  return std::make_unique<MigrationsImpl>(backend);
}

DaemonPresence::DaemonPresence(AppSchemaBackend& backend, const StoreOptions& options)
    : backend_(backend),
      app_(options.app_name),
      instance_(options.instance_id.empty() ? default_instance() : options.instance_id),
      min_schema_(options.min_schema),
      max_schema_(options.max_schema),
      dir_(options.app_migrations_dir),
      lease_(options.daemon_lease) {
  if (app_.empty()) return;
  core_guarded([&] {
    core::check_app_name(app_, "app_name");
    core::check_app_name(instance_, "instance_id");
  });
  if (min_schema_ < 0 || max_schema_ < 0 || (max_schema_ > 0 && max_schema_ < min_schema_))
    throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter,
                "min_schema and max_schema must be >= 0 and min_schema <= max_schema (max 0: no bound)");
  if (lease_.count() <= 0)
    throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter, "daemon_lease must be positive");
}

DaemonPresence::~DaemonPresence() {
  if (!registered_) return;
  try {
    auto txn = backend_.begin(app_, std::nullopt);
    txn->release_daemon(instance_);
    txn->commit();
  } catch (const std::exception& e) {
    log().warn("application {}: could not release daemon registration {}: {}", app_, instance_, e.what());
  }
}

void DaemonPresence::open() {
  if (app_.empty()) return;
  auto txn = backend_.begin(app_, std::nullopt);
  const auto applied = txn->applied();
  const auto records = core_records(applied);
  if (!dir_.empty()) {
    const auto files = read_app_migrations(dir_);
    if (const std::string refusal = core::app_history_refusal(core::compare_app_migrations(files, records));
        !refusal.empty())
      refuse_history(app_, refusal);
  }
  std::string why;
  if (core::check_daemon_range(records, min_schema_, max_schema_, why) == core::DaemonFit::TooOld)
    throw Error(ErrorKind::InvalidArgument, core::sqlstate::invalid_parameter,
                "application " + app_ + ": this daemon is too old for the store's schema; deploy a newer version", why);
  txn->register_daemon(instance_, min_schema_, max_schema_, lease_);
  txn->commit();
  registered_ = true;
}

HealthStatus DaemonPresence::check(SchemaInfo& schema, std::vector<std::string>& details, bool renew) {
  schema.app = app_;
  schema.min_schema = min_schema_;
  schema.max_schema = max_schema_;
  if (app_.empty()) return HealthStatus::Healthy;
  auto txn = backend_.begin(app_, std::nullopt, renew);
  const auto applied = txn->applied();
  schema.applied_through = applied_through(applied);
  if (renew) {
    txn->register_daemon(instance_, min_schema_, max_schema_, lease_);
    txn->commit();
  }
  std::string why;
  switch (core::check_daemon_range(core_records(applied), min_schema_, max_schema_, why)) {
    case core::DaemonFit::Ok:
      return HealthStatus::Healthy;
    case core::DaemonFit::MigrationRequired:
      details.push_back("migration required: " + why);
      return HealthStatus::MigrationRequired;
    case core::DaemonFit::TooOld:
      details.push_back("this daemon is too old for the schema: " + why);
      return HealthStatus::Unavailable;
  }
  return HealthStatus::Unavailable;
}

}  // namespace detail

}  // namespace forgeyard
