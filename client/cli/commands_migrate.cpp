// storage migrate status|plan|apply: the application's own schema (docs/operations.md,
// "Migrating your application's schema").
#include <iostream>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

namespace {

struct MigrateArgs {
  std::string dir;
  std::string app = default_app_name;
  std::string app_version;
  std::string lock_wait = "30s";
  bool allow_contract = false;
  bool json = false;

  MigrateOptions options() const {
    MigrateOptions o;
    o.app = app;
    o.allow_contract = allow_contract;
    o.app_version = app_version;
    o.lock_wait = parse_duration(lock_wait);
    return o;
  }
};

std::string id4(int id) {
  std::string s = std::to_string(id);
  return s.size() < 4 ? std::string(4 - s.size(), '0') + s : s;
}

void json_planned(JsonWriter& j, const PlannedMigration& p) {
  j.begin_object()
      .field("id", p.id)
      .field("name", p.name)
      .field("phase", to_string(p.phase))
      .field("transactional", p.transactional)
      .field("will_run", p.will_run)
      .field("reason", p.reason)
      .end_object();
}

void print_planned(const PlannedMigration& p, const char* prefix) {
  std::cout << prefix << id4(p.id) << "=" << (p.will_run ? "run" : "held_back") << " " << to_string(p.phase) << " "
            << p.name << (p.transactional ? "" : " no-transaction") << "\n";
  if (!p.reason.empty()) std::cout << prefix << id4(p.id) << ".reason=" << p.reason << "\n";
}

int status(Context& ctx, const MigrateArgs& a) {
  const MigrationStatus s = ctx.store().migrations().status(a.dir, a.app);
  const int code = (s.pending == 0 && s.changed == 0) ? exit_done : exit_no;
  if (a.json) {
    JsonWriter j;
    j.begin_object()
        .field("app", s.app)
        .field("applied_through", s.applied_through)
        .field("applied", s.applied)
        .field("pending", s.pending)
        .field("changed", s.changed)
        .field("lock_holder", s.lock_holder);
    j.key("migrations").begin_array();
    for (const MigrationEntry& e : s.migrations) {
      j.begin_object()
          .field("id", e.id)
          .field("name", e.name)
          .field("state", to_string(e.state))
          .field("phase", to_string(e.phase))
          .field("transactional", e.transactional)
          .field("file_sha256", e.file_sha256)
          .field("recorded_sha256", e.recorded_sha256)
          .field("detail", e.detail);
      if (e.record) {
        j.field("applied_at", iso(e.record->applied_at))
            .field("applied_by", e.record->applied_by)
            .field("app_version", e.record->app_version)
            .field("duration_ms", e.record->duration_ms);
      }
      j.end_object();
    }
    j.end_array().key("backfills").begin_array();
    for (const BackfillProgress& b : s.backfills) {
      j.begin_object().field("migration_id", b.migration_id).field("name", b.name).key("cursor");
      if (b.cursor)
        j.value(*b.cursor);
      else
        j.null();
      j.field("rows_done", b.rows_done)
          .field("errors", b.errors)
          .field("done", b.done)
          .field("updated_at", iso(b.updated_at))
          .end_object();
    }
    j.end_array().key("daemons").begin_array();
    for (const DaemonRegistration& d : s.daemons)
      j.begin_object()
          .field("instance", d.instance)
          .field("min_schema", d.min_schema)
          .field("max_schema", d.max_schema)
          .field("live", d.live)
          .field("heartbeat_at", iso(d.heartbeat_at))
          .field("expires_at", iso(d.expires_at))
          .end_object();
    j.end_array().end_object();
    std::cout << j.str() << "\n";
    return code;
  }
  std::cout << "app=" << s.app << "\napplied_through=" << s.applied_through << "\napplied=" << s.applied
            << "\npending=" << s.pending << "\nchanged=" << s.changed << "\nlock_holder=" << s.lock_holder << "\n";
  for (const MigrationEntry& e : s.migrations) {
    std::cout << "migration." << id4(e.id) << "=" << to_string(e.state) << " " << to_string(e.phase) << " " << e.name
              << "\n";
    if (!e.detail.empty()) std::cout << "migration." << id4(e.id) << ".detail=" << e.detail << "\n";
  }
  for (const BackfillProgress& b : s.backfills) {
    const std::string k = "backfill." + id4(b.migration_id) + "." + b.name;
    std::cout << k << ".rows_done=" << b.rows_done << "\n"
              << k << ".errors=" << b.errors << "\n"
              << k << ".done=" << (b.done ? "true" : "false") << "\n"
              << k << ".cursor=" << b.cursor.value_or("") << "\n"
              << k << ".updated_at=" << iso(b.updated_at) << "\n";
  }
  for (const DaemonRegistration& d : s.daemons)
    std::cout << "daemon." << d.instance << "=" << (d.live ? "live" : "expired") << " min_schema=" << d.min_schema
              << " max_schema=" << d.max_schema << " expires_at=" << iso(d.expires_at) << "\n";
  return code;
}

int plan(Context& ctx, const MigrateArgs& a) {
  const MigrationPlan p = ctx.store().migrations().plan(a.dir, a.options());
  const int code = p.refused.empty() && p.held_back == 0 ? exit_done : exit_no;
  if (a.json) {
    JsonWriter j;
    j.begin_object()
        .field("app", p.app)
        .field("will_run", p.will_run)
        .field("held_back", p.held_back)
        .field("refused", p.refused);
    j.key("steps").begin_array();
    for (const PlannedMigration& s : p.steps) json_planned(j, s);
    j.end_array().end_object();
    std::cout << j.str() << "\n";
    return code;
  }
  std::cout << "app=" << p.app << "\nwill_run=" << p.will_run << "\nheld_back=" << p.held_back
            << "\nrefused=" << p.refused << "\n";
  for (const PlannedMigration& s : p.steps) print_planned(s, "migration.");
  return code;
}

int apply(Context& ctx, const MigrateArgs& a) {
  const MigrateOptions options = a.options();
  std::cerr << "applying migrations of " << options.app << " from " << a.dir << "\n";
  const MigrationResult r = ctx.store().migrations().apply(a.dir, options);
  const int code = r.held_back.empty() ? exit_done : exit_no;
  if (a.json) {
    JsonWriter j;
    j.begin_object().field("app", r.app).field("applied_through", r.applied_through);
    j.key("applied").begin_array();
    for (const AppliedMigration& m : r.applied)
      j.begin_object()
          .field("id", m.id)
          .field("name", m.name)
          .field("phase", to_string(m.phase))
          .field("sha256", m.sha256)
          .field("duration_ms", m.duration_ms)
          .end_object();
    j.end_array().key("held_back").begin_array();
    for (const PlannedMigration& s : r.held_back) json_planned(j, s);
    j.end_array().end_object();
    std::cout << j.str() << "\n";
    return code;
  }
  std::cout << "app=" << r.app << "\napplied=" << r.applied.size() << "\napplied_through=" << r.applied_through << "\n";
  for (const AppliedMigration& m : r.applied)
    std::cout << "migration." << id4(m.id) << "=applied " << to_string(m.phase) << " " << m.name
              << " duration_ms=" << m.duration_ms << "\n";
  for (const PlannedMigration& s : r.held_back) print_planned(s, "migration.");
  return code;
}

}  // namespace

void add_migrate_commands(CLI::App& app, Commands& commands) {
  CLI::App* storage = app.get_subcommand("storage");
  CLI::App* migrate = storage->add_subcommand("migrate", "the application's own schema migrations");
  migrate->require_subcommand(1);
  struct Verb {
    const char* name;
    const char* description;
    int (*run)(Context&, const MigrateArgs&);
    bool changes;
  };
  static constexpr Verb verbs[] = {
      {"status", "applied, pending, changed files; backfills; daemons", status, false},
      {"plan", "what apply would run, and why a contract waits", plan, false},
      {"apply", "run pending migrations, each with its record", apply, true},
  };
  for (const Verb& v : verbs) {
    auto a = std::make_shared<MigrateArgs>();
    CLI::App* cmd = migrate->add_subcommand(v.name, v.description);
    cmd->add_option("--dir", a->dir, "the migrations directory (NNNN_name.sql)")->type_name("DIR")->required();
    cmd->add_option("--app", a->app, "the application")->type_name("NAME")->capture_default_str();
    if (v.run != status) cmd->add_flag("--allow-contract", a->allow_contract, "also run contract migrations");
    if (v.changes) {
      cmd->add_option("--app-version", a->app_version, "recorded with each migration")->type_name("V");
      cmd->add_option("--lock-wait", a->lock_wait, "wait this long for another runner")
          ->type_name("DURATION")
          ->capture_default_str();
    }
    cmd->add_flag("--json", a->json, "one JSON object instead of key=value lines");
    commands.on(cmd, [a, run = v.run](Context& ctx) { return run(ctx, *a); });
  }
}

}  // namespace forgeyard::cli
