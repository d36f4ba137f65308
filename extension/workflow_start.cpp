// Starting and handing out workflow runs: workflow_start, a run started in the caller's transaction,
// idempotent by run_key, handed out through the queue of its definition; workflow_claim, which owns
// each run it hands out under the claim token of its delivery (the run's epoch), takes over runs
// whose owner's lease ran out, and ends runs whose deliveries lapsed on every attempt or whose
// deadline passed (docs/workflows.md).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/uuid.hpp"
#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "queue.hpp"
#include "tenant.hpp"
#include "workflow.hpp"

namespace fy::workflow {
namespace {

using core::sqlstate::invalid_parameter;

}  // namespace
}  // namespace fy::workflow

using namespace fy;
using namespace fy::workflow;

// workflow_start(tenant, workflow, version, run_key, input, options) -> run_id
FY_FUNCTION(fy_workflow_start) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.wf_runs (tenant_id, run_id, run_key, workflow, version, input, state, priority,"
      "   deadline, parent_run_id, created_at, updated_at, retention_usecs)"
      " VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, $10, $10, $11) ON CONFLICT DO NOTHING",
      {TEXTOID, UUIDOID, TEXTOID, TEXTOID, INT4OID, JSONBOID, INT2OID, TIMESTAMPTZOID, UUIDOID, TIMESTAMPTZOID,
       INT8OID});
  static pg::Statement existing("SELECT run_id, workflow" FY_EQ "$3 AND version" FY_EQ "$4 AND input" FY_EQ
                                "$5, workflow,"
                                "       version::pg_catalog.int8"
                                "  FROM forgeyard.wf_runs WHERE tenant_id" FY_EQ "$1 AND run_key" FY_EQ "$2",
                                {TEXTOID, TEXTOID, TEXTOID, INT4OID, JSONBOID});
  static pg::Statement set_message("UPDATE forgeyard.wf_runs SET msg_id = $3, lease_until = NULL" FY_RUN_KEY,
                                   {TEXTOID, UUIDOID, INT8OID});
  static pg::Statement parent_exists("SELECT 1 FROM forgeyard.wf_runs" FY_RUN_KEY, {TEXTOID, UUIDOID});
  static pg::Statement options_entries(
      "SELECT e.key, pg_catalog.jsonb_typeof(e.value), e.value OPERATOR(pg_catalog.#>>) '{}'"
      "  FROM pg_catalog.jsonb_each($1) e",
      {JSONBOID});

  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string workflow = pg::name_arg(fcinfo, 1, "workflow", wf::max_workflow_bytes);
  const std::int32_t version = pg::int4_arg(fcinfo, 2, "version");
  wf::check_version(version);
  const std::string run_key = pg::name_arg(fcinfo, 3, "run_key", wf::max_run_key_bytes);
  const pg::Value input = pg::jsonb_arg(fcinfo, 4, "input");
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  wf::StartOptions options;
  if (!pg::arg_is_null(fcinfo, 5)) {
    const pg::Value json = pg::jsonb_arg(fcinfo, 5, "options");
    if (!pg::jsonb_object_keys(json)) throw core::Error(invalid_parameter, "options must be a JSON object");
    std::vector<std::vector<std::string>> entries;
    spi.run(options_entries, {json}, [&](const pg::Row& r) {
      entries.push_back({*r.text(1), *r.text(2), r.text(3).value_or("")});
    });
    for (const auto& e : entries) wf::set_start_option(options, e[0], e[1], e[2]);
  }
  std::optional<TimestampTz> deadline;
  if (options.deadline) {
    const core::Duration d = pg::parse_interval(*options.deadline, "workflow option deadline");
    deadline = now + core::check_duration("deadline", d, core::max_queue_retention_usecs);
  }
  std::int64_t retention = wf::default_retention_usecs;
  if (options.retention) {
    const core::Duration d = pg::parse_interval(*options.retention, "workflow option retention");
    retention = wf::check_retention(d);
  }
  const pg::Value t = pg::text_value(tenant);
  if (options.parent && spi.run(parent_exists, {t, pg::uuid_value(*options.parent)}) == 0)
    throw core::Error(core::sqlstate::undefined_object, "parent workflow run " + core::format_uuid(*options.parent) +
                                                            " not found for tenant \"" + tenant + "\"");

  const std::string run_id = pg::random_uuid();
  const bool inserted = spi.run(insert, {t,
                                         pg::uuid_value(run_id),
                                         pg::text_value(run_key),
                                         pg::text_value(workflow),
                                         pg::int4_value(version),
                                         input,
                                         {Int16GetDatum(static_cast<std::int16_t>(options.priority)), false},
                                         deadline ? pg::timestamptz_value(*deadline) : pg::null_value(),
                                         pg::optional_uuid_value(options.parent),
                                         pg::timestamptz_value(now),
                                         pg::int8_value(retention)}) > 0;
  std::string id = run_id;
  if (inserted) {
    const std::string queue = wf::queue_name(workflow, version);
    queue::ensure_queue(spi, tenant, queue);
    const std::int64_t msg_id = enqueue(spi, tenant, queue, run_id, options.priority);
    spi.run(set_message, {t, pg::uuid_value(run_id), pg::int8_value(msg_id)});
  } else {
    // The run_key started a run before (or a concurrent start committed it first): the same
    // definition and input return that run, anything else is FY011.
    bool same = false;
    std::string first;
    spi.run(existing, {t, pg::text_value(run_key), pg::text_value(workflow), pg::int4_value(version), input},
            [&](const pg::Row& r) {
              id = *r.uuid(1);
              same = *r.boolean(2);
              first = *r.text(3) + "@" + std::to_string(*r.int8(4));
            });
    if (first.empty())
      throw core::Error(core::sqlstate::internal_error, "workflow_start inserted no run and found none");
    if (!same)
      throw core::Error(core::sqlstate::idempotency_mismatch,
                        "run_key \"" + run_key + "\" already started run " + core::format_uuid(id) + " of " + first +
                            " with other input",
                        "a run_key names one run: the same workflow, version and input");
  }
  spi.finish();
  pg::Value out = pg::uuid_value(id);
  return out.datum;
}

// workflow_claim(tenant, worker, definitions, max_runs, lease) -> runs now owned by worker
FY_FUNCTION(fy_workflow_claim) {
  static pg::Statement queue_exists("SELECT 1 FROM forgeyard.queues WHERE tenant_id" FY_EQ "$1 AND queue" FY_EQ "$2",
                                    {TEXTOID, TEXTOID});
  static pg::Statement lock(
      "SELECT state, msg_id, coalesce(deadline OPERATOR(pg_catalog.<=) $3, false), workflow, version::pg_catalog.int8,"
      "       input::pg_catalog.text, coalesce(step_deadline OPERATOR(pg_catalog.<=) $3, false), epoch"
      "  FROM forgeyard.wf_runs" FY_RUN_KEY " FOR UPDATE",
      {TEXTOID, UUIDOID, TIMESTAMPTZOID});
  static pg::Statement own(
      "UPDATE forgeyard.wf_runs SET state = CASE WHEN state" FY_EQ
      "'compensating' THEN state ELSE 'running' END,"
      "   epoch = $3, owner = $4, step_deadline = NULL, lease_until = $7,"
      "   takeovers = takeovers OPERATOR(pg_catalog.+) $5::pg_catalog.int4,"
      "   taken_over_at = CASE WHEN $5 OPERATOR(pg_catalog.>) 0 THEN $6 ELSE taken_over_at END,"
      "   previous_owner = CASE WHEN $5 OPERATOR(pg_catalog.>) 0 THEN owner ELSE previous_owner END,"
      "   updated_at = $6" FY_RUN_KEY,
      {TEXTOID, UUIDOID, INT8OID, TEXTOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  // The step cursor of the run's last epoch, read after the run's lock (a statement of its own).
  static pg::Statement last_cursor("SELECT position::pg_catalog.int8, step FROM forgeyard.wf_cursors" FY_RUN_KEY
                                   " AND epoch" FY_EQ "$3",
                                   {TEXTOID, UUIDOID, INT8OID});
  // The new epoch's step cursor, at no step yet.
  static pg::Statement cursor(
      "INSERT INTO forgeyard.wf_cursors AS c (tenant_id, run_id, epoch, position, step) VALUES ($1, $2, $3, 0, NULL)"
      " ON CONFLICT (tenant_id, run_id) DO UPDATE SET epoch = excluded.epoch, position = 0, step = NULL",
      {TEXTOID, UUIDOID, INT8OID});

  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string worker = pg::name_arg(fcinfo, 1, "worker", core::max_consumer_bytes);
  const std::optional<std::vector<std::optional<std::string>>> given = pg::text_array_arg(fcinfo, 2);
  if (!given) throw core::Error(core::sqlstate::null_value, "definitions must not be NULL");
  if (given->empty()) throw core::Error(invalid_parameter, "definitions must name at least one 'workflow@version'");
  if (given->size() > static_cast<std::size_t>(wf::max_definitions))
    throw core::Error(invalid_parameter, "at most " + std::to_string(wf::max_definitions) + " definitions");
  std::vector<std::string> queues;
  std::set<std::string> seen;
  for (const std::optional<std::string>& d : *given) {
    if (!d) throw core::Error(core::sqlstate::null_value, "definitions must not contain NULL");
    const wf::Definition def = wf::parse_definition(*d);
    std::string q = wf::queue_name(def.workflow, def.version);
    if (seen.insert(q).second) queues.push_back(std::move(q));
  }
  const std::int32_t max_runs = queue::positive_int_arg(fcinfo, 3, "max_runs", wf::max_claim_runs);
  const std::optional<core::Duration> lease = pg::optional_interval_arg(fcinfo, 4);
  // 0: the queue's visibility timeout.
  const std::int64_t lease_usecs = lease ? core::check_duration("lease", *lease, core::max_queue_duration_usecs) : 0;
  const TimestampTz now = pg::now();

  struct Out {
    std::string run_id, workflow;
    std::int64_t version, epoch;
    std::string state, input;
  };
  std::vector<Out> out;
  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value t = pg::text_value(tenant);
  // The run a delivery names, locked.
  struct Found {
    Run run;
    std::optional<std::string> state, workflow, input;
    std::int64_t msg_id = 0, version = 0, epoch = 0;
    bool past_deadline = false, past_step_deadline = false;
  };
  const auto find = [&](const std::string& name, const queue::Claimed& c) {
    if (!c.payload || c.payload->size() != 16) {
      throw core::Error(core::sqlstate::data_corrupted, "workflow queue \"" + name + "\" holds message " +
                                                            std::to_string(c.msg_id) + " that names no run");
    }
    Found f{{tenant, *c.payload, core::format_uuid(*c.payload), t, pg::uuid_value(*c.payload)}};
    spi.run(lock, {t, f.run.r, pg::timestamptz_value(now)}, [&](const pg::Row& r) {
      f.state = r.text(1);
      f.msg_id = r.int8(2).value_or(0);
      f.past_deadline = *r.boolean(3);
      f.workflow = r.text(4);
      f.version = *r.int8(5);
      f.input = r.text(6);
      f.past_step_deadline = *r.boolean(7);
      f.epoch = *r.int8(8);
    });
    return f;
  };
  // A running run whose owner ran past a step's timeout: that attempt is recorded as failed (not
  // when the step is not known: the last epoch's cursor was lost to a crash).
  const auto record_timeout = [&](const Found& f) -> std::optional<std::string> {
    if (*f.state != "running" || !f.past_step_deadline) return std::nullopt;
    std::int64_t position = 0;
    std::optional<std::string> step;
    spi.run(last_cursor, {t, f.run.r, pg::int8_value(f.epoch)}, [&](const pg::Row& r) {
      position = *r.int8(1);
      step = r.text(2);
    });
    if (!step) return std::nullopt;
    record_failed_attempt(spi, f.run, static_cast<std::int32_t>(position), *step, wf::step_timeout_error(*step),
                          f.epoch, now);
    return step;
  };
  for (const std::string& name : queues) {
    if (static_cast<std::int32_t>(out.size()) >= max_runs) break;
    if (spi.run(queue_exists, {t, pg::text_value(name)}) == 0) continue;  // nothing started yet
    // Until max_runs or an empty claim: a message that is not its run's live one takes a place
    // in a claim and is let go.
    for (bool more = true; more && static_cast<std::int32_t>(out.size()) < max_runs;) {
      const queue::Queue q = queue::load(spi, tenant, name, false);
      std::vector<queue::Claimed> lapsed;
      const std::int64_t visibility = lease_usecs > 0 ? lease_usecs : q.options.visibility_usecs;
      const std::vector<queue::Claimed> claimed =
          queue::claim(spi, q, worker, max_runs - static_cast<std::int32_t>(out.size()), visibility, now, &lapsed);
      // A run whose deliveries lapsed on every attempt (dead-lettered by the claim) ends.
      for (const queue::Claimed& c : lapsed) {
        const Found f = find(name, c);
        if (!f.state || f.msg_id != c.msg_id || (*f.state != "running" && *f.state != "compensating")) continue;
        const std::optional<std::string> timed_out = record_timeout(f);
        settle(spi, f.run, wf::lapsed_state(*f.state), pg::null_value(), wf::lapsed_error(timed_out), now);
      }
      for (const queue::Claimed& c : claimed) {
        const Found f = find(name, c);
        const Run& run = f.run;
        const std::optional<std::string>& state = f.state;
        // A message that is not the run's live one (the run was cancelled, retried or has
        // finished) is let go.
        if (!state || f.msg_id != c.msg_id || wf::is_finished(*state)) {
          ack(spi, run, name, c.msg_id, c.claim_token);
          continue;
        }
        // Past its deadline: timed out, compensating first if it has compensations to run (their
        // message comes in a later round). A compensating run finishes its compensations.
        if (f.past_deadline && *state != "compensating") {
          ack(spi, run, name, c.msg_id, c.claim_token);
          settle(spi, run, "timed_out", pg::null_value(), "the run's deadline passed", now);
          continue;
        }
        // A run still running was claimed again: its owner's lease ran out. One whose step ran
        // past its timeout records that attempt as failed (the new owner runs the step again).
        const bool takeover = *state == "running";
        record_timeout(f);
        // The lease ends where the claim made the message visible again.
        spi.run(own, {t, run.r, pg::int8_value(c.claim_token), pg::text_value(worker), pg::int4_value(takeover ? 1 : 0),
                      pg::timestamptz_value(now), pg::timestamptz_value(now + visibility)});
        spi.run(cursor, {t, run.r, pg::int8_value(c.claim_token)});
        out.push_back({*c.payload, *f.workflow, f.version, c.claim_token, *state == "compensating" ? *state : "running",
                       *f.input});
      }
      more = !claimed.empty() || !lapsed.empty();  // a lapsed run may be compensating now
    }
  }
  spi.finish();
  pg::TableResult result(fcinfo);
  for (const Out& o : out)
    result.add_row({pg::uuid_value(o.run_id), pg::text_value(o.workflow),
                    pg::int4_value(static_cast<std::int32_t>(o.version)), pg::int8_value(o.epoch),
                    pg::text_value(o.state), pg::typed_value(JSONBOID, -1, o.input)});
  return (Datum)0;
}
