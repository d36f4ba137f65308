// Workflow schedules (docs/workflows.md#schedules): a cron spec in a time zone, or an interval,
// that starts a run of its definition at each fire, with run_key "<schedule>@<fire time>" so a
// fire starts one run however many tickers run at once. The rules are in core/schedule.cpp.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/schedule.hpp"
#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "queue.hpp"
#include "schedule.hpp"
#include "tenant.hpp"

namespace fy {
namespace {

namespace sc = core::schedule;

#define FY_EQ " OPERATOR(pg_catalog.=) "

std::string schedule_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "schedule", sc::max_schedule_bytes);
}

}  // namespace

std::int64_t schedule::tick(pg::Spi& spi, const std::optional<std::string>& tenant, TimestampTz now) {
  // Each due schedule once: another ticker skips the rows this one holds, and finds their
  // next_fire moved once it commits.
  static pg::Statement due(
      "SELECT tenant_id, schedule, workflow, version::pg_catalog.int8, spec, timezone, catch_up::pg_catalog.int8,"
      "       input::pg_catalog.text, next_fire"
      "  FROM forgeyard.wf_schedules"
      " WHERE ($1::pg_catalog.text IS NULL OR tenant_id" FY_EQ
      "$1) AND next_fire OPERATOR(pg_catalog.<=) $2"
      " ORDER BY next_fire LIMIT 1000 FOR UPDATE SKIP LOCKED",
      {TEXTOID, TIMESTAMPTZOID});
  static pg::Statement start("SELECT forgeyard.workflow_start($1, $2, $3, $4, $5::pg_catalog.jsonb)",
                             {TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID});
  static pg::Statement moved(
      "UPDATE forgeyard.wf_schedules SET next_fire = $3, last_fire = coalesce($4, last_fire),"
      "   fires = fires OPERATOR(pg_catalog.+) $5, skipped = skipped OPERATOR(pg_catalog.+) $6, updated_at = $7"
      " WHERE tenant_id" FY_EQ "$1 AND schedule" FY_EQ "$2",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID, TIMESTAMPTZOID});
  struct Row {
    std::string tenant, schedule, workflow;
    std::int64_t version;
    std::string spec, timezone;
    std::int64_t catch_up;
    std::string input;
    TimestampTz next_fire;
  };
  std::vector<Row> rows;
  spi.run(due, {pg::optional_text_value(tenant), pg::timestamptz_value(now)}, [&](const pg::Row& r) {
    rows.push_back({*r.text(1), *r.text(2), *r.text(3), *r.int8(4), *r.text(5), *r.text(6), *r.int8(7), *r.text(8),
                    *r.timestamptz(9)});
  });
  std::int64_t started = 0;
  const std::int64_t now_usecs = pg::unix_usecs(now);
  for (const Row& row : rows) {
    const sc::Due d = sc::due(sc::parse_spec(row.spec), *sc::Zone::load(row.timezone), pg::unix_usecs(row.next_fire),
                              now_usecs, static_cast<int>(row.catch_up));
    for (const std::int64_t fire : d.start)
      spi.run(start, {pg::text_value(row.tenant), pg::text_value(row.workflow),
                      pg::int4_value(static_cast<std::int32_t>(row.version)),
                      pg::text_value(sc::run_key(row.schedule, fire)), pg::text_value(row.input)});
    started += static_cast<std::int64_t>(d.start.size());
    const auto at = [&](std::int64_t usecs) { return pg::timestamptz_value(now + (usecs - now_usecs)); };
    spi.run(moved, {pg::text_value(row.tenant), pg::text_value(row.schedule), at(d.next),
                    d.start.empty() ? pg::null_value() : at(d.start.back()),
                    pg::int8_value(static_cast<std::int64_t>(d.start.size())), pg::int8_value(d.skipped),
                    pg::timestamptz_value(now)});
  }
  return started;
}

}  // namespace fy

using namespace fy;

// schedule_create(tenant, schedule, workflow, version, spec, options)
FY_FUNCTION(fy_schedule_create) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.wf_schedules (tenant_id, schedule, workflow, version, spec, timezone, catch_up, input,"
      "   next_fire, created_at, updated_at)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8::pg_catalog.jsonb, $9, $10, $10) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement same("SELECT workflow" FY_EQ "$3 AND version" FY_EQ "$4 AND spec" FY_EQ "$5 AND timezone" FY_EQ
                            "$6 AND catch_up" FY_EQ "$7 AND input" FY_EQ
                            "$8::pg_catalog.jsonb"
                            "  FROM forgeyard.wf_schedules WHERE tenant_id" FY_EQ "$1 AND schedule" FY_EQ "$2",
                            {TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID, TEXTOID});
  static pg::Statement options_entries("SELECT e.key, pg_catalog.jsonb_typeof(e.value), CASE WHEN e.key" FY_EQ
                                       "'input' THEN e.value::pg_catalog.text"
                                       "       ELSE e.value OPERATOR(pg_catalog.#>>) '{}' END"
                                       "  FROM pg_catalog.jsonb_each($1) e",
                                       {JSONBOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string name = schedule_arg(fcinfo, 1);
  const std::string workflow = pg::name_arg(fcinfo, 2, "workflow", core::workflow::max_workflow_bytes);
  const std::int32_t version = pg::int4_arg(fcinfo, 3, "version");
  core::workflow::check_version(version);
  const std::string spec_text = pg::text_arg(fcinfo, 4, "spec", sc::max_spec_bytes, false).value_or("");
  const sc::Spec spec = sc::parse_spec(spec_text);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, tenant);
  sc::Options options;
  if (!pg::arg_is_null(fcinfo, 5)) {
    const pg::Value json = pg::jsonb_arg(fcinfo, 5, "options");
    if (!pg::jsonb_object_keys(json))
      throw core::Error(core::sqlstate::invalid_parameter, "options must be a JSON object");
    std::vector<std::vector<std::string>> entries;
    spi.run(options_entries, {json}, [&](const pg::Row& r) {
      entries.push_back({*r.text(1), *r.text(2), r.text(3).value_or("")});
    });
    for (const auto& e : entries) sc::set_option(options, e[0], e[1], e[2]);
  }
  const std::int64_t now_usecs = pg::unix_usecs(now);
  const std::int64_t next = sc::next_fire(spec, *sc::Zone::load(options.timezone), now_usecs);
  const std::vector<pg::Value> args = {pg::text_value(tenant),           pg::text_value(name),
                                       pg::text_value(workflow),         pg::int4_value(version),
                                       pg::text_value(spec_text),        pg::text_value(options.timezone),
                                       pg::int4_value(options.catch_up), pg::text_value(options.input)};
  std::vector<pg::Value> insert_args = args;
  insert_args.push_back(pg::timestamptz_value(now + (next - now_usecs)));
  insert_args.push_back(pg::timestamptz_value(now));
  if (spi.run(insert, std::span<const pg::Value>(insert_args), [](const pg::Row&) {}) == 0) {
    // There already: the same definition is a no-op, another one 42710.
    bool equal = false;
    spi.run(same, std::span<const pg::Value>(args), [&](const pg::Row& r) { equal = r.boolean(1).value_or(false); });
    if (!equal)
      throw core::Error(
          core::sqlstate::duplicate_object,
          "schedule \"" + name + "\" already exists for tenant \"" + tenant + "\" with another definition",
          "drop it first (schedule_drop), or create it under another name");
  }
  spi.finish();
  return (Datum)0;
}

// schedule_drop(tenant, schedule) -> whether it existed
FY_FUNCTION(fy_schedule_drop) {
  static pg::Statement drop("DELETE FROM forgeyard.wf_schedules WHERE tenant_id" FY_EQ "$1 AND schedule" FY_EQ "$2",
                            {TEXTOID, TEXTOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string name = schedule_arg(fcinfo, 1);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const bool dropped = spi.run(drop, {pg::text_value(tenant), pg::text_value(name)}) > 0;
  spi.finish();
  return BoolGetDatum(dropped);
}

// schedule_tick(tenant) -> runs started
FY_FUNCTION(fy_schedule_tick) {
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::int64_t started = schedule::tick(spi, tenant, now);
  spi.finish();
  return Int32GetDatum(static_cast<std::int32_t>(started));
}

// schedule_list(tenant) -> the tenant's schedules by name
FY_FUNCTION(fy_schedule_list) {
  static pg::Statement list(
      "SELECT schedule, workflow, version::pg_catalog.int8, spec, timezone, catch_up::pg_catalog.int8,"
      "       input::pg_catalog.text, next_fire, last_fire, fires, skipped"
      "  FROM forgeyard.wf_schedules WHERE tenant_id" FY_EQ "$1 ORDER BY schedule COLLATE pg_catalog.\"C\"",
      {TEXTOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  struct Row {
    std::string schedule, workflow;
    std::int64_t version;
    std::string spec, timezone;
    std::int64_t catch_up;
    std::string input;
    TimestampTz next_fire;
    std::optional<TimestampTz> last_fire;
    std::int64_t fires, skipped;
  };
  std::vector<Row> rows;
  spi.run(list, {pg::text_value(tenant)}, [&](const pg::Row& r) {
    rows.push_back({*r.text(1), *r.text(2), *r.int8(3), *r.text(4), *r.text(5), *r.int8(6), *r.text(7),
                    *r.timestamptz(8), r.timestamptz(9), *r.int8(10), *r.int8(11)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const Row& r : rows)
    out.add_row({pg::text_value(r.schedule), pg::text_value(r.workflow),
                 pg::int4_value(static_cast<std::int32_t>(r.version)), pg::text_value(r.spec),
                 pg::text_value(r.timezone), pg::int4_value(static_cast<std::int32_t>(r.catch_up)),
                 pg::typed_value(JSONBOID, -1, r.input), pg::timestamptz_value(r.next_fire),
                 r.last_fire ? pg::timestamptz_value(*r.last_fire) : pg::null_value(), pg::int8_value(r.fires),
                 pg::int8_value(r.skipped)});
  return (Datum)0;
}
