// Ending, extending and resuming a run: complete, fail and park by its owner, extend (its
// lease, never past a step's deadline), and cancel and retry by an operator (docs/workflows.md).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "queue.hpp"
#include "tenant.hpp"
#include "workflow.hpp"

namespace fy::workflow {
namespace {

std::string optional_text(FunctionCallInfo fcinfo, int n, const char* argument) {
  return pg::text_arg(fcinfo, n, argument, wf::max_reason_bytes, true).value_or("");
}

// Ends the run in `state` (completed, failed, parked) and lets its delivery go.
void finish(pg::Spi& spi, const Run& run, const Owned& owned, std::int64_t epoch, const char* state,
            const pg::Value& result, const std::optional<std::string>& error, TimestampTz now) {
  ack(spi, run, owned.queue(), owned.msg_id, epoch);
  settle(spi, run, state, result, error, now);
}

// workflow_complete, workflow_fail, workflow_park: the owner ends the run in `state`; argument 3 is
// the result (completed), the error (failed) or the reason (parked).
Datum end_run(FunctionCallInfo fcinfo, const char* state) {
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const bool completed = std::string_view(state) == "completed";
  const pg::Value result = completed ? pg::jsonb_arg(fcinfo, 3, "result") : pg::null_value();
  const std::optional<std::string> error =
      completed ? std::nullopt
                : std::optional<std::string>(
                      optional_text(fcinfo, 3, std::string_view(state) == "failed" ? "error" : "reason"));
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const Owned owned = lock_owned(run, epoch, now);
  finish(spi, run, owned, epoch, state, result, error, now);
  spi.finish();
  return (Datum)0;
}

}  // namespace
}  // namespace fy::workflow

using namespace fy;
using namespace fy::workflow;

// workflow_complete(tenant, run_id, epoch, result)
FY_FUNCTION(fy_workflow_complete) {
  return end_run(fcinfo, "completed");
}

// workflow_fail(tenant, run_id, epoch, error)
FY_FUNCTION(fy_workflow_fail) {
  return end_run(fcinfo, "failed");
}

// workflow_park(tenant, run_id, epoch, reason)
FY_FUNCTION(fy_workflow_park) {
  return end_run(fcinfo, "parked");
}

// workflow_extend(tenant, run_id, epoch, lease) -> until
FY_FUNCTION(fy_workflow_extend) {
  static pg::Statement extend("SELECT forgeyard.extend($1, $2, $3, $4, $5)",
                              {TEXTOID, TEXTOID, INT8OID, INT8OID, INTERVALOID});
  static pg::Statement set_lease("UPDATE forgeyard.wf_runs SET lease_until = $3" FY_RUN_KEY,
                                 {TEXTOID, UUIDOID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const pg::Value lease = pg::raw_arg(fcinfo, 3);
  if (lease.is_null) throw core::Error(core::sqlstate::null_value, "lease must not be NULL");
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const Owned owned = lock_owned(run, epoch, now, "owned");  // running, or compensating
  // Not past the deadline of a step with a timeout (a lease that is not a plain duration goes
  // through as it is, for extend's own checks).
  pg::Value capped = lease;
  if (owned.step_deadline) {
    const core::Duration d = *pg::optional_interval_arg(fcinfo, 3);
    std::int64_t usecs = 0;
    const bool plain = d.months == 0 && !__builtin_mul_overflow(std::int64_t{d.days}, 86'400'000'000, &usecs) &&
                       !__builtin_add_overflow(usecs, d.usecs, &usecs);
    if (plain && usecs > 0 && usecs > *owned.step_deadline - now)
      capped = pg::interval_value(wf::capped_lease(usecs, owned.step_deadline, now));
  }
  TimestampTz until = 0;
  spi.run(extend, {run.t, pg::text_value(owned.queue()), pg::int8_value(owned.msg_id), pg::int8_value(epoch), capped},
          [&](const pg::Row& r) { until = *r.timestamptz(1); });
  spi.run(set_lease, {run.t, run.r, pg::timestamptz_value(until)});  // the run's row, locked above
  spi.finish();
  return TimestampTzGetDatum(until);
}

// workflow_cancel(tenant, run_id, reason) -> whether it was cancelled now
FY_FUNCTION(fy_workflow_cancel) {
  static pg::Statement lock("SELECT state FROM forgeyard.wf_runs" FY_RUN_KEY " FOR UPDATE", {TEXTOID, UUIDOID});
  const Run run = run_args(fcinfo);
  const std::string reason = optional_text(fcinfo, 2, "reason");
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  std::optional<std::string> state;
  spi.run(lock, {run.t, run.r}, [&](const pg::Row& r) { state = r.text(1); });
  if (!state) unknown_run(run);
  // A compensating run finishes its compensations first.
  const bool cancelled = !wf::is_finished(*state) && *state != "compensating";
  // Its message stays until the next claim of the definition lets it go; an owner's next
  // journal write gets FY001.
  if (cancelled) settle(spi, run, "cancelled", pg::null_value(), reason, now);
  spi.finish();
  return BoolGetDatum(cancelled);
}

// workflow_retry(tenant, run_id) -> whether the run was handed out again
FY_FUNCTION(fy_workflow_retry) {
  static pg::Statement lock(
      "SELECT state, workflow, version::pg_catalog.int8, priority::pg_catalog.int8,"
      "       EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id" FY_EQ "$1 AND j.run_id" FY_EQ
      "$2"
      "                 AND j.compensation_status" FY_EQ
      "'done')"
      "  FROM forgeyard.wf_runs" FY_RUN_KEY " FOR UPDATE",
      {TEXTOID, UUIDOID});
  // A compensation_failed run resumes its compensations; another starts again where it failed.
  static pg::Statement requeue("UPDATE forgeyard.wf_runs SET state = CASE WHEN state" FY_EQ
                               "'compensation_failed' THEN 'compensating' ELSE 'pending' END,"
                               "   msg_id = $3, lease_until = NULL, error = CASE WHEN state" FY_EQ
                               "'compensation_failed' THEN error END, finished_at = NULL, purge_at = NULL,"
                               "   updated_at = $4" FY_RUN_KEY,
                               {TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  std::optional<std::string> state, workflow;
  std::int64_t version = 0, priority = 0;
  bool compensated = false;
  spi.run(lock, {run.t, run.r}, [&](const pg::Row& r) {
    state = r.text(1);
    workflow = r.text(2);
    version = *r.int8(3);
    priority = *r.int8(4);
    compensated = *r.boolean(5);
  });
  if (!state) unknown_run(run);
  // A failed run whose steps were compensated cannot replay them as done.
  const bool retried = wf::is_retryable(*state) && (*state == "compensation_failed" || !compensated);
  if (retried) {
    const std::string queue = wf::queue_name(*workflow, static_cast<std::int32_t>(version));
    queue::ensure_queue(spi, run.tenant, queue);
    const std::int64_t msg_id = enqueue(spi, run.tenant, queue, run.id, static_cast<int>(priority));
    spi.run(requeue, {run.t, run.r, pg::int8_value(msg_id), pg::timestamptz_value(now)});
  }
  spi.finish();
  return BoolGetDatum(retried);
}
