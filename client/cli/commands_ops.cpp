// The operator's commands: storage status | doctor | stats, and metrics (docs/operations.md,
// "storage doctor" and "Stats and metrics"). Read-only. key=value lines by default, --json for
// one JSON object.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

namespace {

// JSON text built from already-encoded members: obj({{"a", num(1)}}) -> {"a":1}.
using Member = std::pair<std::string, std::string>;
std::string num(std::int64_t n) {
  return std::to_string(n);
}
std::string boolean(bool b) {
  return b ? "true" : "false";
}
std::string opt(const std::optional<std::int64_t>& n) {
  return n ? num(*n) : "null";
}
std::string obj(const std::vector<Member>& members) {
  std::string out = "{";
  for (const auto& [k, v] : members) out += (out.size() > 1 ? "," : "") + json_string(k) + ":" + v;
  return out + "}";
}
std::string arr(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& i : items) out += (out.size() > 1 ? "," : "") + i;
  return out + "]";
}

std::optional<std::int64_t> age_usecs(const QueueBacklog& q) {
  if (!q.depth.oldest_ready_age) return std::nullopt;
  return q.depth.oldest_ready_age->count();
}

std::string pool_json(const PoolStats& p) {
  return obj({{"created", num(static_cast<std::int64_t>(p.created))},
              {"closed", num(static_cast<std::int64_t>(p.closed))},
              {"acquired", num(static_cast<std::int64_t>(p.acquired))},
              {"waited", num(static_cast<std::int64_t>(p.waited))},
              {"timed_out", num(static_cast<std::int64_t>(p.timed_out))},
              {"in_use", num(p.in_use)},
              {"idle", num(p.idle)}});
}

void print_pool(const PoolStats& p) {
  std::cout << "pool_created=" << p.created << "\npool_closed=" << p.closed << "\npool_acquired=" << p.acquired
            << "\npool_waited=" << p.waited << "\npool_timed_out=" << p.timed_out << "\npool_in_use=" << p.in_use
            << "\npool_idle=" << p.idle << "\n";
}

std::string stats_json(const StoreStats& s) {
  std::vector<std::string> tables, queues, tenants, workflows, flow;
  for (const TableStats& t : s.tables)
    tables.push_back(obj({{"name", json_string(t.name)},
                          {"rows", num(t.rows)},
                          {"dead_rows", num(t.dead_rows)},
                          {"bytes", opt(t.bytes)},
                          {"autovacuum", boolean(t.autovacuum)}}));
  for (const QueueBacklog& q : s.queues)
    queues.push_back(obj({{"tenant", json_string(q.tenant)},
                          {"queue", json_string(q.queue)},
                          {"ready", num(q.depth.ready)},
                          {"in_flight", num(q.depth.in_flight)},
                          {"delayed", num(q.depth.delayed)},
                          {"dead", num(q.depth.dead)},
                          {"bytes", num(q.depth.bytes)},
                          {"oldest_ready_age_usecs", opt(age_usecs(q))},
                          {"pressure", json_string(q.depth.pressure)},
                          {"waiting", num(q.depth.waiting)},
                          {"retries_delayed", num(q.depth.retries_delayed)},
                          {"max_messages", num(q.max_messages)},
                          {"retrying", num(q.retrying)},
                          {"dead_last_hour", num(q.dead_last_hour)}}));
  for (const TenantStats& t : s.tenants)
    tenants.push_back(obj({{"tenant", json_string(t.tenant)},
                           {"leases_live", num(t.leases_live)},
                           {"leases_expired", num(t.leases_expired)},
                           {"idempotency_in_progress", num(t.idempotency_in_progress)},
                           {"idempotency_completed", num(t.idempotency_completed)},
                           {"idempotency_past_retention", num(t.idempotency_past_retention)},
                           {"audit_events", num(t.audit_events)}}));
  for (const WorkflowRunCount& w : s.workflows)
    workflows.push_back(obj({{"tenant", json_string(w.tenant)},
                             {"workflow", json_string(w.definition)},
                             {"state", json_string(w.state)},
                             {"runs", num(w.runs)}}));
  auto opt_text = [](const std::optional<std::string>& v) { return v ? json_string(*v) : std::string("null"); };
  for (const TenantFlowLimit& f : s.flow)
    flow.push_back(obj({{"tenant", json_string(f.tenant)},
                        {"queue", opt_text(f.limit.queue)},
                        {"kind", json_string(f.limit.kind)},
                        {"subject", opt_text(f.limit.subject)},
                        {"limit", json_string(f.limit.limit)},
                        {"available", opt(f.limit.available)},
                        {"in_flight", opt(f.limit.in_flight)},
                        {"counted", opt(f.limit.counted)},
                        {"delayed", opt(f.limit.delayed)},
                        {"refused", opt(f.limit.refused)},
                        {"state", opt_text(f.limit.state)}}));
  std::string horizon = "null";
  if (s.horizon)
    horizon = obj({{"kind", json_string(s.horizon->kind)},
                   {"holder", json_string(s.horizon->holder)},
                   {"xid_age", num(s.horizon->xid_age)},
                   {"held_usecs", s.horizon->held ? num(s.horizon->held->count()) : "null"}});
  const auto segments_of = [&](const std::vector<LaneSegment>& list) {
    std::vector<std::string> out;
    for (const LaneSegment& seg : list)
      out.push_back(obj({{"name", json_string(seg.name)},
                         {"open", seg.open ? "true" : "false"},
                         {"has_rows", seg.has_rows ? "true" : "false"},
                         {"pinned_by", seg.pinned_by.empty() ? "null" : json_string(seg.pinned_by)},
                         {"pinned_usecs", seg.pinned_for ? num(seg.pinned_for->count()) : "null"}}));
    return arr(out);
  };
  return obj({{"backend", json_string(s.backend)},
              {"database_bytes", opt(s.database_bytes)},
              {"horizon", horizon},
              {"lane_segments", segments_of(s.lane_segments)},
              {"usage_segments", segments_of(s.usage_segments)},
              {"tables", arr(tables)},
              {"queues", arr(queues)},
              {"tenants", arr(tenants)},
              {"workflows", arr(workflows)},
              {"flow", arr(flow)}});
}

void print_stats(const StoreStats& s) {
  std::cout << "backend=" << s.backend << "\n";
  if (s.database_bytes) std::cout << "database_bytes=" << *s.database_bytes << "\n";
  if (s.horizon) {
    std::cout << "horizon=" << s.horizon->kind << " holder=" << s.horizon->holder << " xid_age=" << s.horizon->xid_age;
    if (s.horizon->held) std::cout << " held=" << format_duration(s.horizon->held->count());
    std::cout << "\n";
  }
  for (const auto& [key, list] :
       {std::pair{"lane_segment", &s.lane_segments}, std::pair{"usage_segment", &s.usage_segments}})
    for (const LaneSegment& seg : *list) {
      std::cout << key << "=" << seg.name << " state=" << (seg.open ? "open" : "sealed")
                << " has_rows=" << (seg.has_rows ? "yes" : "no");
      if (!seg.pinned_by.empty()) std::cout << " pinned_by=\"" << seg.pinned_by << "\"";
      if (seg.pinned_for) std::cout << " pinned=" << format_duration(seg.pinned_for->count());
      std::cout << "\n";
    }
  for (const TableStats& t : s.tables) {
    std::cout << "table=" << t.name << " rows=" << t.rows << " dead_rows=" << t.dead_rows;
    if (t.bytes) std::cout << " bytes=" << *t.bytes;
    if (s.backend == "postgresql") std::cout << " autovacuum=" << (t.autovacuum ? "on" : "off");
    std::cout << "\n";
  }
  for (const QueueBacklog& q : s.queues) {
    std::cout << "queue=" << q.queue << " tenant=" << q.tenant << " ready=" << q.depth.ready
              << " in_flight=" << q.depth.in_flight << " delayed=" << q.depth.delayed << " dead=" << q.depth.dead
              << " bytes=" << q.depth.bytes;
    if (auto age = age_usecs(q)) std::cout << " oldest_ready_age=" << format_duration(*age);
    std::cout << " pressure=" << q.depth.pressure << " waiting=" << q.depth.waiting
              << " retries_delayed=" << q.depth.retries_delayed << " max_messages=" << q.max_messages
              << " retrying=" << q.retrying << " dead_last_hour=" << q.dead_last_hour << "\n";
  }
  for (const TenantStats& t : s.tenants)
    std::cout << "tenant=" << t.tenant << " leases_live=" << t.leases_live << " leases_expired=" << t.leases_expired
              << " idempotency_in_progress=" << t.idempotency_in_progress
              << " idempotency_completed=" << t.idempotency_completed
              << " idempotency_past_retention=" << t.idempotency_past_retention << " audit_events=" << t.audit_events
              << "\n";
  for (const WorkflowRunCount& w : s.workflows)
    std::cout << "workflow=" << w.definition << " tenant=" << w.tenant << " state=" << w.state << " runs=" << w.runs
              << "\n";
  for (const TenantFlowLimit& f : s.flow) {
    std::cout << "flow=" << f.limit.kind << " tenant=" << f.tenant << " queue=" << f.limit.queue.value_or("")
              << " subject=" << f.limit.subject.value_or("");
    for (const auto& [name, v] : {std::pair{"available", f.limit.available}, std::pair{"in_flight", f.limit.in_flight},
                                  std::pair{"counted", f.limit.counted}, std::pair{"delayed", f.limit.delayed},
                                  std::pair{"refused", f.limit.refused}})
      if (v) std::cout << " " << name << "=" << *v;
    if (f.limit.state) std::cout << " state=" << *f.limit.state;
    std::cout << "\n";
  }
}

std::string replicas_json(const std::vector<ReplicaStatus>& replicas) {
  std::vector<std::string> items;
  for (const ReplicaStatus& r : replicas)
    items.push_back(obj({{"location", json_string(r.location)},
                         {"reachable", boolean(r.reachable)},
                         {"in_recovery", boolean(r.in_recovery)},
                         {"lag_usecs", r.lag ? num(r.lag->count()) : "null"},
                         {"measured_ago_usecs", r.measured_ago ? num(r.measured_ago->count()) : "null"},
                         {"reads", num(static_cast<std::int64_t>(r.reads))},
                         {"fallbacks", num(static_cast<std::int64_t>(r.fallbacks))},
                         {"error", r.error.empty() ? "null" : json_string(r.error)}}));
  return arr(items);
}

void print_replicas(const std::vector<ReplicaStatus>& replicas) {
  for (const ReplicaStatus& r : replicas) {
    std::cout << "replica=" << r.location << " reachable=" << (r.reachable ? "true" : "false")
              << " in_recovery=" << (r.in_recovery ? "true" : "false");
    if (r.lag) std::cout << " lag=" << format_duration(r.lag->count());
    std::cout << " reads=" << r.reads << " fallbacks=" << r.fallbacks;
    if (!r.error.empty()) std::cout << " error=" << r.error;
    std::cout << "\n";
  }
}

std::string health_json(const Health& h) {
  std::vector<std::string> details;
  for (const std::string& d : h.details) details.push_back(json_string(d));
  return obj({{"status", json_string(to_string(h.status))},
              {"store_version", json_string(h.schema.store_version)},
              {"store_edition", json_string(h.schema.store_edition)},
              {"latency_usecs", num(std::chrono::duration_cast<std::chrono::microseconds>(h.latency).count())},
              {"details", arr(details)},
              {"replicas", replicas_json(h.replicas)}});
}

void print_health(const Health& h) {
  std::cout << "health=" << to_string(h.status) << "\nhealth_latency="
            << format_duration(std::chrono::duration_cast<std::chrono::microseconds>(h.latency).count()) << "\n";
  for (const std::string& d : h.details) std::cout << "health_detail=" << d << "\n";
}

// One application's migration state (storage status --dir): counts, and each file not applied.
std::string app_json(const MigrationStatus& a) {
  std::vector<std::string> files;
  for (const MigrationEntry& m : a.migrations)
    files.push_back(obj({{"id", num(m.id)},
                         {"name", json_string(m.name)},
                         {"state", json_string(to_string(m.state))},
                         {"detail", json_string(m.detail)}}));
  return obj({{"app", json_string(a.app)},
              {"applied_through", num(a.applied_through)},
              {"applied", num(a.applied)},
              {"pending", num(a.pending)},
              {"changed", num(a.changed)},
              {"lock_holder", a.lock_holder.empty() ? "null" : json_string(a.lock_holder)},
              {"migrations", arr(files)}});
}

void print_app(const MigrationStatus& a) {
  std::cout << "app=" << a.app << "\napp_applied_through=" << a.applied_through << "\napp_applied=" << a.applied
            << "\napp_pending=" << a.pending << "\napp_changed=" << a.changed << "\n";
  if (!a.lock_holder.empty()) std::cout << "app_lock_holder=" << a.lock_holder << "\n";
  for (const MigrationEntry& m : a.migrations)
    if (m.state != MigrationState::Applied)
      std::cout << "app_migration=" << m.name << " state=" << to_string(m.state) << "\n";
}

// The flags every report command takes: --json, and the application whose migrations it checks.
struct ReportFlags {
  bool json = false;
  DoctorOptions app;  // --dir / --app
};

void add_app_options(CLI::App& command, ReportFlags& o) {
  command.add_option("--dir", o.app.app_migrations_dir, "also check this application's migrations directory")
      ->type_name("DIR");
  command.add_option("--app", o.app.app, "the application whose migrations --dir holds (default: default)")
      ->type_name("NAME");
}

void add_json(CLI::App& command, ReportFlags& o) {
  command.add_flag("--json", o.json, "one JSON object instead of key=value lines");
}

}  // namespace

void add_ops_commands(CLI::App& app, Commands& commands) {
  CLI::App* storage = app.get_subcommand("storage");

  auto status_out = std::make_shared<ReportFlags>();
  CLI::App* status =
      storage->add_subcommand("status", "backend, location, schema, migrations, health, pool, sizes, row counts");
  add_json(*status, *status_out);
  add_app_options(*status, *status_out);
  commands.on(status, [status_out](Context& ctx) {
    const StorageStatus s = ctx.store().status();
    const Health health = ctx.store().health(ctx.read());
    std::optional<MigrationStatus> app_state;
    if (!status_out->app.app_migrations_dir.empty())
      app_state = ctx.store().migrations().status(status_out->app.app_migrations_dir,
                                                  status_out->app.app.empty() ? default_app_name : status_out->app.app);
    const Metrics m = ctx.store().metrics();
    std::optional<StoreStats> stats;
    std::string stats_error;
    if (s.healthy) {
      try {
        stats = ctx.store().stats(ctx.read());
      } catch (const Error& e) {
        stats_error = e.what();  // e.g. a role without grant_inspect: the rest still answers
      }
    }
    const int code = s.healthy ? exit_done : exit_no;
    if (status_out->json) {
      std::vector<Member> tables;
      if (stats)
        for (const TableStats& t : stats->tables) tables.emplace_back(t.name, num(t.rows));
      std::cout << obj({{"backend", json_string(s.backend)},
                        {"location", json_string(s.location)},
                        {"schema_version", json_string(s.schema_version)},
                        {"edition", json_string(s.edition)},
                        {"migrations_applied", num(s.migrations_applied)},
                        {"migrations_pending", num(s.migrations_pending)},
                        {"healthy", boolean(s.healthy)},
                        {"detail", json_string(s.detail)},
                        {"health", health_json(health)},
                        {"app_migrations", app_state ? app_json(*app_state) : "null"},
                        {"database_bytes", stats ? opt(stats->database_bytes) : "null"},
                        {"table_rows", obj(tables)},
                        {"stats_error", stats_error.empty() ? "null" : json_string(stats_error)},
                        {"pool", pool_json(m.pool)},
                        {"replicas", replicas_json(s.replicas)}})
                << "\n";
      return code;
    }
    std::cout << "backend=" << s.backend << "\nlocation=" << s.location << "\nschema_version=" << s.schema_version;
    if (!s.edition.empty()) std::cout << "\nedition=" << s.edition;
    std::cout << "\nmigrations_applied=" << s.migrations_applied << "\nmigrations_pending=" << s.migrations_pending
              << "\nhealthy=" << (s.healthy ? "true" : "false") << "\ndetail=" << s.detail << "\n";
    print_health(health);
    if (app_state) print_app(*app_state);
    if (stats) {
      if (stats->database_bytes) std::cout << "database_bytes=" << *stats->database_bytes << "\n";
      for (const TableStats& t : stats->tables) std::cout << "rows." << t.name << "=" << t.rows << "\n";
    }
    if (!stats_error.empty()) std::cout << "stats_error=" << stats_error << "\n";
    print_pool(m.pool);
    print_replicas(s.replicas);
    return code;
  });

  auto doctor_out = std::make_shared<ReportFlags>();
  CLI::App* doctor = storage->add_subcommand(
      "doctor",
      "checks (required, security, performance, optional), each ok, warn or fail with a fix; exit 1 when a "
      "required one fails");
  add_json(*doctor, *doctor_out);
  add_app_options(*doctor, *doctor_out);
  commands.on(doctor, [doctor_out](Context& ctx) {
    const DoctorReport report = ctx.store().doctor(doctor_out->app);
    const int code = report.passed() ? exit_done : exit_no;
    if (doctor_out->json) {
      std::vector<std::string> checks;
      for (const DoctorCheck& c : report.checks)
        checks.push_back(obj({{"group", json_string(to_string(c.group))},
                              {"name", json_string(c.name)},
                              {"status", json_string(to_string(c.status))},
                              {"detail", json_string(c.detail)},
                              {"fix", json_string(c.fix)}}));
      std::cout << obj({{"passed", boolean(report.passed())}, {"checks", arr(checks)}}) << "\n";
      return code;
    }
    for (const DoctorCheck& c : report.checks) {
      std::cout << c.name << ".group=" << to_string(c.group) << "\n"
                << c.name << ".status=" << to_string(c.status) << "\n"
                << c.name << ".detail=" << c.detail << "\n";
      if (!c.fix.empty()) std::cout << c.name << ".fix=" << c.fix << "\n";
    }
    std::cout << "passed=" << (report.passed() ? "true" : "false") << "\n";
    return code;
  });

  auto stats_out = std::make_shared<ReportFlags>();
  CLI::App* stats = storage->add_subcommand(
      "stats", "table sizes and rows, queue backlog by state, dead letters, leases, idempotency keys, audit");
  add_json(*stats, *stats_out);
  commands.on(stats, [stats_out](Context& ctx) {
    const StoreStats s = ctx.store().stats(ctx.read());
    if (stats_out->json)
      std::cout << stats_json(s) << "\n";
    else
      print_stats(s);
    return exit_done;
  });

  auto metrics_out = std::make_shared<ReportFlags>();
  CLI::App* metrics =
      app.add_subcommand("metrics", "the store's figures and this client's counters, Prometheus text format");
  add_json(*metrics, *metrics_out);
  commands.on(metrics, [metrics_out](Context& ctx) {
    const StoreStats s = ctx.store().stats(ctx.read());
    ctx.store().replicas();  // measured now, so that the figures below are this run's
    const Metrics m = ctx.store().metrics();
    if (!metrics_out->json) {
      std::cout << prometheus_text(s, m);
      return exit_done;
    }
    std::vector<Member> operations;
    for (const auto& [name, o] : m.operations)
      operations.emplace_back(name, obj({{"calls", num(static_cast<std::int64_t>(o.calls))},
                                         {"errors", num(static_cast<std::int64_t>(o.errors))},
                                         {"total_usecs", num(static_cast<std::int64_t>(o.total_usecs))},
                                         {"max_usecs", num(static_cast<std::int64_t>(o.max_usecs))}}));
    std::cout << obj({{"stats", stats_json(s)},
                      {"operations", obj(operations)},
                      {"pool", pool_json(m.pool)},
                      {"replicas", replicas_json(m.replicas)}})
              << "\n";
    return exit_done;
  });
}

}  // namespace forgeyard::cli
