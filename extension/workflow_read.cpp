// The workflow reads: a run's status and journal, and the tenant's runs (docs/workflows.md).
#include <optional>
#include <string>
#include <vector>

#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/spi.hpp"
#include "queue.hpp"
#include "tenant.hpp"
#include "workflow.hpp"

using namespace fy;
using namespace fy::workflow;

// workflow_status(tenant, run_id) -> (state, workflow, version, result, error, owner, epoch, updated_at)
FY_FUNCTION(fy_workflow_status) {
  static pg::Statement status(
      "SELECT state, workflow, version::pg_catalog.int8, result::pg_catalog.text, error, owner, epoch, updated_at"
      "  FROM forgeyard.wf_runs" FY_RUN_KEY,
      {TEXTOID, UUIDOID});
  const Run run = run_args(fcinfo);
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  struct Status {
    std::string state, workflow;
    std::int64_t version, epoch;
    std::optional<std::string> result, error, owner;
    TimestampTz updated_at;
  };
  std::optional<Status> s;
  spi.run(status, {run.t, run.r}, [&](const pg::Row& r) {
    s = Status{*r.text(1), *r.text(2), *r.int8(3), *r.int8(7), r.text(4), r.text(5), r.text(6), *r.timestamptz(8)};
  });
  if (!s) unknown_run(run);
  spi.finish();
  pg::TableResult out(fcinfo);
  out.add_row({pg::text_value(s->state), pg::text_value(s->workflow),
               pg::int4_value(static_cast<std::int32_t>(s->version)), pg::typed_value(JSONBOID, -1, s->result),
               pg::optional_text_value(s->error), pg::optional_text_value(s->owner), pg::int8_value(s->epoch),
               pg::timestamptz_value(s->updated_at)});
  return (Datum)0;
}

// workflow_journal(tenant, run_id) -> (position, step, status, result, epoch, recorded_at, error, attempts,
// compensation, compensation_status, compensation_error)
FY_FUNCTION(fy_workflow_journal) {
  static pg::Statement exists("SELECT 1 FROM forgeyard.wf_runs" FY_RUN_KEY, {TEXTOID, UUIDOID});
  static pg::Statement journal(
      "SELECT position::pg_catalog.int8, step, status, result::pg_catalog.text, epoch, recorded_at, error,"
      "       attempts::pg_catalog.int8, compensation, compensation_status, compensation_error"
      "  FROM forgeyard.wf_journal" FY_RUN_KEY " ORDER BY position",
      {TEXTOID, UUIDOID});
  const Run run = run_args(fcinfo);
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  if (spi.run(exists, {run.t, run.r}) == 0) unknown_run(run);
  struct Entry {
    std::int64_t position;
    std::string step, status;
    std::optional<std::string> result;
    std::int64_t epoch;
    TimestampTz recorded_at;
    std::optional<std::string> error;
    std::int64_t attempts;
    std::optional<std::string> compensation, compensation_status, compensation_error;
  };
  std::vector<Entry> entries;
  spi.run(journal, {run.t, run.r}, [&](const pg::Row& r) {
    entries.push_back({*r.int8(1), *r.text(2), *r.text(3), r.text(4), *r.int8(5), *r.timestamptz(6), r.text(7),
                       *r.int8(8), r.text(9), r.text(10), r.text(11)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const Entry& e : entries)
    out.add_row({pg::int4_value(static_cast<std::int32_t>(e.position)), pg::text_value(e.step),
                 pg::text_value(e.status), pg::typed_value(JSONBOID, -1, e.result), pg::int8_value(e.epoch),
                 pg::timestamptz_value(e.recorded_at), pg::optional_text_value(e.error),
                 pg::int4_value(static_cast<std::int32_t>(e.attempts)), pg::optional_text_value(e.compensation),
                 pg::optional_text_value(e.compensation_status), pg::optional_text_value(e.compensation_error)});
  return (Datum)0;
}

// workflow_list(tenant, state, max_runs) -> the tenant's runs, most recently changed first
FY_FUNCTION(fy_workflow_list) {
  static pg::Statement list(
      "SELECT run_id, run_key, workflow, version::pg_catalog.int8, state, owner, epoch, error, updated_at"
      "  FROM forgeyard.wf_runs WHERE tenant_id" FY_EQ "$1 AND ($2::pg_catalog.text IS NULL OR state" FY_EQ
      "$2)"
      " ORDER BY updated_at DESC, run_id LIMIT $3",
      {TEXTOID, TEXTOID, INT4OID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::optional<std::string> state = pg::text_arg(fcinfo, 1, "state", wf::max_reason_bytes, true);
  if (state) wf::check_state(*state);
  const std::int32_t max_runs = queue::positive_int_arg(fcinfo, 2, "max_runs", wf::max_list_runs);
  pg::Spi spi;
  check_tenant(spi, tenant);
  struct Row {
    std::string run_id, run_key, workflow;
    std::int64_t version;
    std::string state;
    std::optional<std::string> owner;
    std::int64_t epoch;
    std::optional<std::string> error;
    TimestampTz updated_at;
  };
  std::vector<Row> rows;
  spi.run(list, {pg::text_value(tenant), pg::optional_text_value(state), pg::int4_value(max_runs)},
          [&](const pg::Row& r) {
            rows.push_back({*r.uuid(1), *r.text(2), *r.text(3), *r.int8(4), *r.text(5), r.text(6), *r.int8(7),
                            r.text(8), *r.timestamptz(9)});
          });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const Row& r : rows)
    out.add_row({pg::uuid_value(r.run_id), pg::text_value(r.run_key), pg::text_value(r.workflow),
                 pg::int4_value(static_cast<std::int32_t>(r.version)), pg::text_value(r.state),
                 pg::optional_text_value(r.owner), pg::int8_value(r.epoch), pg::optional_text_value(r.error),
                 pg::timestamptz_value(r.updated_at)});
  return (Datum)0;
}
