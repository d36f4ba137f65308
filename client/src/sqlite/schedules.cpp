// Workflow schedules in the SQLite store: the twin of extension/schedule.cpp, with the same rules
// (core/schedule.hpp). A tick holds SQLite's write lock, so tickers in several processes take
// turns and each finds the next_fire the one before it moved.
#include "core/errors.hpp"
#include "core/input.hpp"
#include "core/schedule.hpp"
#include "core/workflow.hpp"
#include "error_map.hpp"
#include "sqlite/workflows.hpp"
#include "workflow_input.hpp"

namespace forgeyard::detail {

namespace sc = fy::core::schedule;

namespace {

void check_schedule_args(std::string_view tenant, std::string_view schedule) {
  fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
  fy::core::check_name("schedule", true, schedule, sc::max_schedule_bytes);
}

}  // namespace

std::int64_t tick_schedules(Db& db, const std::optional<std::string>& tenant, std::int64_t now) {
  struct Row {
    std::string tenant, schedule, workflow;
    int version;
    std::string spec, timezone;
    int catch_up;
    std::string input;
    std::int64_t next_fire;
  };
  std::vector<Row> rows;
  {
    auto q = db.query(
        "SELECT tenant_id, schedule, workflow, version, spec, timezone, catch_up, input, next_fire FROM wf_schedules"
        " WHERE (?1 IS NULL OR tenant_id = ?1) AND next_fire <= ?2 ORDER BY next_fire LIMIT 1000");
    if (tenant)
      q.bind(1, *tenant);
    else
      q.bind_null(1);
    q.bind(2, now);
    while (q.step())
      rows.push_back({q.text(0), q.text(1), q.text(2), static_cast<int>(q.int64(3)), q.text(4), q.text(5),
                      static_cast<int>(q.int64(6)), q.text(7), q.int64(8)});
  }
  std::int64_t started = 0;
  for (const Row& row : rows) {
    const sc::Due d =
        sc::due(sc::parse_spec(row.spec), *sc::Zone::load(row.timezone), row.next_fire, now, row.catch_up);
    for (const std::int64_t fire : d.start)
      start_run(db, row.tenant, row.workflow, row.version, sc::run_key(row.schedule, fire), row.input, {}, now);
    started += static_cast<std::int64_t>(d.start.size());
    auto u = db.query(
        "UPDATE wf_schedules SET next_fire = ?3, last_fire = coalesce(?4, last_fire), fires = fires + ?5,"
        "   skipped = skipped + ?6, updated_at = ?7 WHERE tenant_id = ?1 AND schedule = ?2");
    u.bind(1, row.tenant).bind(2, row.schedule).bind(3, d.next);
    if (d.start.empty())
      u.bind_null(4);
    else
      u.bind(4, d.start.back());
    u.bind(5, static_cast<std::int64_t>(d.start.size())).bind(6, d.skipped).bind(7, now).run();
  }
  return started;
}

void SqliteWorkflows::schedule_create(std::string_view tenant, std::string_view schedule, std::string_view workflow,
                                      int version, std::string_view spec_text, const ScheduleOptions& options) {
  session_.measure("workflow.schedule_create", [&] {
    const std::string input = json_param(options.input, "input");
    core_guarded([&] {
      check_schedule_args(tenant, schedule);
      fy::core::check_name("workflow", true, workflow, fy::core::workflow::max_workflow_bytes);
      fy::core::workflow::check_version(version);
      const sc::Spec spec = sc::parse_spec(spec_text);
      if (options.catch_up < 0 || options.catch_up > sc::max_catch_up)
        fy::core::invalid_parameter("schedule option catch_up must be a whole number from 0 to " +
                                    std::to_string(sc::max_catch_up));
      const auto zone = sc::Zone::load(options.timezone);
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const std::int64_t next = sc::next_fire(spec, *zone, now);
        auto existing = db.query(
            "SELECT workflow = ?3 AND version = ?4 AND spec = ?5 AND timezone = ?6 AND catch_up = ?7 AND input = ?8"
            "  FROM wf_schedules WHERE tenant_id = ?1 AND schedule = ?2");
        existing.bind(1, tenant)
            .bind(2, schedule)
            .bind(3, workflow)
            .bind(4, static_cast<std::int64_t>(version))
            .bind(5, spec_text)
            .bind(6, zone->name())
            .bind(7, static_cast<std::int64_t>(options.catch_up))
            .bind(8, input);
        if (existing.step()) {
          // There already: the same definition is a no-op, another one 42710.
          if (existing.int64(0) != 0) return;
          throw fy::core::Error(fy::core::sqlstate::duplicate_object,
                                "schedule \"" + std::string(schedule) + "\" already exists for tenant \"" +
                                    std::string(tenant) + "\" with another definition",
                                "drop it first (schedule_drop), or create it under another name");
        }
        db.query(
              "INSERT INTO wf_schedules (tenant_id, schedule, workflow, version, spec, timezone, catch_up, input,"
              "   next_fire, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)")
            .bind(1, tenant)
            .bind(2, schedule)
            .bind(3, workflow)
            .bind(4, static_cast<std::int64_t>(version))
            .bind(5, spec_text)
            .bind(6, zone->name())
            .bind(7, static_cast<std::int64_t>(options.catch_up))
            .bind(8, input)
            .bind(9, next)
            .bind(10, now)
            .run();
      });
    });
  });
}

bool SqliteWorkflows::schedule_drop(std::string_view tenant, std::string_view schedule) {
  return session_.measure("workflow.schedule_drop", [&] {
    return core_guarded([&] {
      check_schedule_args(tenant, schedule);
      bool dropped = false;
      session_.write([&](Db& db) {
        dropped = db.query("DELETE FROM wf_schedules WHERE tenant_id = ?1 AND schedule = ?2")
                      .bind(1, tenant)
                      .bind(2, schedule)
                      .run() > 0;
      });
      return dropped;
    });
  });
}

int SqliteWorkflows::schedule_tick(const std::optional<std::string>& tenant) {
  return session_.measure("workflow.schedule_tick", [&] {
    return core_guarded([&] {
      if (tenant) fy::core::check_name("tenant", true, *tenant, fy::core::max_tenant_bytes);
      std::int64_t started = 0;
      session_.write([&](Db& db) { started = tick_schedules(db, tenant, session_.now_usecs()); });
      return static_cast<int>(started);
    });
  });
}

std::vector<ScheduleInfo> SqliteWorkflows::schedule_list(std::string_view tenant, ReadClass /*read*/) {
  return session_.measure("workflow.schedule_list", [&] {
    return core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      std::vector<ScheduleInfo> out;
      session_.read([&](Db& db) {
        out.clear();
        auto q = db.query(
            "SELECT schedule, workflow, version, spec, timezone, catch_up, input, next_fire, last_fire, fires,"
            "       skipped FROM wf_schedules WHERE tenant_id = ?1 ORDER BY schedule");
        q.bind(1, tenant);
        while (q.step())
          out.push_back({q.text(0), q.text(1), static_cast<int>(q.int64(2)), q.text(3), q.text(4),
                         static_cast<int>(q.int64(5)), q.text(6), from_unix_usecs(q.int64(7)),
                         q.is_null(8) ? std::nullopt : std::optional<TimePoint>(from_unix_usecs(q.int64(8))),
                         q.int64(9), q.int64(10)});
      });
      return out;
    });
  });
}

}  // namespace forgeyard::detail
