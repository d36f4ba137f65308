// The journal writes of an owned run (docs/workflows.md): steps, their results and failures,
// compensations, durable timers, waits for signals, and signals. Every write is fenced by the
// owner's epoch (lock_owned, workflow.cpp: FY001 for a stale owner).
#include <optional>
#include <string>

#include "core/timestamp.hpp"
#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/trigger.hpp"
#include "tenant.hpp"
#include "workflow.hpp"

namespace fy::workflow {
namespace {

std::string step_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "step", wf::max_step_bytes);
}

struct JournalColumns {
  int tenant_id, run_id, position, step, status, result, error, compensation, wake_at, attempts, compensation_attempts,
      epoch, recorded_at;
  explicit JournalColumns(const pg::Table& j)
      : tenant_id(j.column("tenant_id")),
        run_id(j.column("run_id")),
        position(j.column("position")),
        step(j.column("step")),
        status(j.column("status")),
        result(j.column("result")),
        error(j.column("error")),
        compensation(j.column("compensation")),
        wake_at(j.column("wake_at")),
        attempts(j.column("attempts")),
        compensation_attempts(j.column("compensation_attempts")),
        epoch(j.column("epoch")),
        recorded_at(j.column("recorded_at")) {}
};

// The journal rows at `position` and the one before it, read in one descent of the journal's key:
// the status of the step before (when `with_previous` and position > 1), and whether a row is at
// the position (then the one in the table's slot, for the caller to read, lock or update).
struct AtPosition {
  std::optional<std::string> previous;
  bool found = false;
};
AtPosition read_position(pg::Table& journal, const JournalColumns& j, const Run& run, std::int32_t position,
                         bool with_previous) {
  AtPosition at;
  const std::int32_t first = with_previous && position > 1 ? position - 1 : position;
  pg::Table::Scan scan(journal, pg::OwnIndex::wf_journal_pkey,
                       {{1, pg::Compare::eq, run.r},
                        {2, pg::Compare::ge, pg::int4_value(first)},
                        {2, pg::Compare::le, pg::int4_value(position)},
                        {3, pg::Compare::eq, run.t}});
  while (scan.next()) {
    if (journal.int4(j.position) == position) {
      at.found = true;
      break;
    }
    at.previous = journal.text(j.status);
  }
  scan.end();
  return at;
}

// The current step of an epoch must be `step`: workflow_step moved the cursor to it.
void check_current_step(const Owned& owned, const std::string& step, const char* function) {
  wf::check_current_step(owned.cursor, owned.cursor_step, step, function);
}

// The position a step call names, its argument n (NULL: none, the epoch's cursor counts).
std::optional<std::int32_t> position_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_NARGS() <= n || pg::arg_is_null(fcinfo, n)) return std::nullopt;
  return wf::check_position(pg::int4_arg(fcinfo, n, "position"));
}

// A call that names its step's position: the step before it must be recorded done and, with
// `same_step`, a row at the position must be `step` (core/workflow.hpp). `at` is what
// read_position found in `journal`, open in an Access begun after the fence.
void check_named_position(const pg::Table& journal, const JournalColumns& j, const AtPosition& at, const Run& run,
                          std::int32_t position, const std::string& step, const char* function, bool same_step = true) {
  if (position > 1) wf::check_position_follows(position, at.previous, run.text, function);
  if (same_step && at.found)
    wf::check_same_step(wf::JournalEntry{*journal.text(j.step), *journal.text(j.status), std::nullopt}, step, run.text,
                        position);
}
// The same on a reading of its own, under a snapshot taken after the fence, as the journal reads
// that follow.
void check_named_position(const Run& run, std::int32_t position, const std::string& step, const char* function,
                          bool same_step = true) {
  pg::Access access;
  pg::Table journal(access, pg::OwnTable::wf_journal);
  const auto j = pg::columns_of<JournalColumns>(journal);
  const AtPosition at = read_position(journal, j, run, position, true);
  check_named_position(journal, j, at, run, position, step, function, same_step);
  journal.finish();
  access.finish();
}

// The fence of a call that records the current step (step_complete, step_fail, sleep), and the
// position it records at: the one the caller names, checked against the journal (unless the
// caller checks it on its own reading of the journal: NamedCheck::by_caller), or the epoch's
// cursor, which must be at `step`.
struct CurrentStep {
  Owned owned;
  std::int32_t position;
};
enum class NamedCheck { here, by_caller };
CurrentStep lock_current_step(const Run& run, std::int64_t epoch, TimestampTz now,
                              const std::optional<std::int32_t>& named, const std::string& step, const char* function,
                              NamedCheck check = NamedCheck::here) {
  CurrentStep current{lock_owned(run, epoch, now, "running", named ? WithCursor::no : WithCursor::yes), 0};
  if (!named)
    check_current_step(current.owned, step, function);
  else if (check == NamedCheck::here)
    check_named_position(run, *named, step, function);
  current.position = named ? *named : current.owned.cursor;
  return current;
}

// The newest step done whose compensation has not run: its position, step, compensation, result.
struct NextCompensation {
  std::int32_t position = 0;
  std::string step, compensation;
  std::optional<std::string> result;
};
std::optional<NextCompensation> next_compensation(pg::Spi& spi, const Run& run) {
  static pg::Statement next(
      "SELECT position::pg_catalog.int8, step, compensation, result::pg_catalog.text FROM forgeyard.wf_journal" FY_RUN_KEY
      "   AND status" FY_EQ
      "'done' AND compensation IS NOT NULL AND compensation_status IS DISTINCT FROM 'done'"
      " ORDER BY position DESC LIMIT 1",
      {TEXTOID, UUIDOID});
  std::optional<NextCompensation> out;
  spi.run(next, {run.t, run.r}, [&](const pg::Row& r) {
    out = NextCompensation{static_cast<std::int32_t>(*r.int8(1)), *r.text(2), *r.text(3), r.text(4)};
  });
  return out;
}

}  // namespace
}  // namespace fy::workflow

using namespace fy;
using namespace fy::workflow;

// workflow_step(tenant, run_id, epoch, step, timeout) -> (status, result, idempotency_key). Below
// SPI: the fence, the journal row at the position, and the cursor move. Without a timeout (and
// no deadline of an earlier step to let go of) the run's row is read, not locked, and the only
// write is the cursor's, in an UNLOGGED table: the call writes no WAL, so its commit does not wait
// for a flush. Two step calls of a run are serialized by the cursor's row lock, and a claim that
// takes the run over moves the cursor to its epoch (FY001 here after the wait).
FY_FUNCTION(fy_workflow_step) {
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::string step = step_arg(fcinfo, 3);
  const std::optional<core::Duration> timeout_arg = pg::optional_interval_arg(fcinfo, 4);
  const std::int64_t timeout = timeout_arg ? wf::check_step_timeout(*timeout_arg) : 0;  // 0: none
  const std::optional<std::int32_t> named = position_arg(fcinfo, 5);
  // The cursor is read and moved unless the caller names the position, and also then for a step
  // with a timeout: a claim that takes the run over past it reads the step from the cursor.
  const bool with_cursor = !named || timeout > 0;
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  // The fence first. When it locks rows (the cursor's; the run's for a timeout or a deadline to
  // let go of) it is a statement of its own: what a call that held a lock before this one
  // committed (a retry on another connection) is visible to the reads below, under a new
  // snapshot. The run's row before the cursor's, as every call that locks both takes them. A
  // fence that locks nothing (a step named by position, no timeout, no deadline) waits for
  // nothing: the journal is read under its snapshot, in the same Access.
  Owned owned;
  std::optional<pg::Access> access(std::in_place);
  {
    pg::Table runs(*access, pg::OwnTable::wf_runs, pg::Opened::for_row_locks);
    std::optional<pg::Table> cursors;
    if (with_cursor) cursors.emplace(*access, pg::OwnTable::wf_cursors, pg::Opened::for_row_locks);
    owned = lock_owned_in(*access, runs, run, epoch, now, "running",
                          timeout > 0 ? RunLock::always : RunLock::for_a_deadline);
    if (cursors) {
      read_cursor_in(*cursors, run, epoch, owned, true);
      cursors->finish();
    }
    runs.finish();
  }
  if (with_cursor || timeout > 0 || owned.step_deadline) {
    access->finish();
    access.emplace();
  }
  pg::Table journal(*access, pg::OwnTable::wf_journal, pg::Opened::for_row_locks);
  const std::int32_t position = named ? *named : owned.cursor + 1;
  const auto j = pg::columns_of<JournalColumns>(journal);
  const AtPosition at = read_position(journal, j, run, position, named.has_value());
  if (named && position > 1) wf::check_position_follows(position, at.previous, run.text, "workflow_step");
  std::optional<wf::JournalEntry> entry;
  std::optional<std::string> result;
  if (at.found) {
    entry = wf::JournalEntry{*journal.text(j.step), *journal.text(j.status),
                             journal.is_null(j.wake_at)
                                 ? std::nullopt
                                 : std::optional<std::int64_t>(pg::unix_usecs(journal.timestamptz(j.wake_at)))};
    if (!journal.is_null(j.result)) result = pg::jsonb_text(journal.value(j.result));
  }
  const wf::StepAnswer answer = wf::decide_step(entry, step, run.text, position, pg::unix_usecs(now));
  const bool done = answer == wf::StepAnswer::done;
  // A step to run with a timeout: its deadline, and the owner's lease cut to it.
  const bool timed = !done && timeout > 0;
  const TimestampTz deadline = now + timeout;
  if (with_cursor) {
    // The cursor's row, locked by this transaction above.
    pg::Table cursors(*access, pg::OwnTable::wf_cursors);
    if (!cursors.find(pg::OwnIndex::wf_cursors_pkey, {{1, pg::Compare::eq, run.r}, {2, pg::Compare::eq, run.t}}))
      wf::throw_cursor_lost(epoch, run.text);
    cursors.update(
        {{cursors.column("position"), pg::int4_value(position)}, {cursors.column("step"), pg::text_value(step)}});
    cursors.finish();
  }
  // A deadline to set, or an earlier step's to let go of: the fence locked the run's row then.
  if (timed || owned.step_deadline) {
    pg::Table runs(*access, pg::OwnTable::wf_runs);
    if (!runs.find(pg::OwnIndex::wf_runs_pkey, {{1, pg::Compare::eq, run.r}, {2, pg::Compare::eq, run.t}}) ||
        runs.lock(pg::LockMode::update, pg::Wait::block) == pg::Locked::skipped)
      unknown_run(run);
    const int step_deadline = runs.column("step_deadline"), lease_until = runs.column("lease_until");
    // The owner's lease ends by the deadline at the latest, as its message's visibility below.
    if (timed && !runs.is_null(lease_until) && runs.timestamptz(lease_until) > deadline)
      runs.update({{step_deadline, pg::timestamptz_value(deadline)}, {lease_until, pg::timestamptz_value(deadline)}});
    else
      runs.update({{step_deadline, timed ? pg::timestamptz_value(deadline) : pg::null_value()}});
    runs.finish();
  }
  if (timed) {
    pg::Table messages(*access, pg::OwnTable::messages);
    const int visible_at = messages.column("visible_at"), token = messages.column("claim_token");
    // Still this epoch's delivery. Not waited for: a claim that holds it is taking the run over
    // (and waits for this transaction's lock on the run), so the cut is moot.
    if (messages.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(owned.msg_id)}}) &&
        messages.lock(pg::LockMode::no_key_update, pg::Wait::skip) != pg::Locked::skipped && !messages.is_null(token) &&
        messages.int8(token) == epoch && messages.timestamptz(visible_at) > deadline)
      messages.update({{visible_at, pg::timestamptz_value(deadline)}});
    messages.finish();
  }
  journal.finish();
  access->finish();
  spi.finish();
  pg::TableResult out(fcinfo);
  out.add_row({pg::text_value(done ? "done" : "run"), done ? pg::typed_value(JSONBOID, -1, result) : pg::null_value(),
               pg::text_value(wf::idempotency_key(run.text, position, step))});
  return (Datum)0;
}

// workflow_step_complete(tenant, run_id, epoch, step, result, compensation). Below SPI, as the
// INSERT ... ON CONFLICT DO UPDATE ... WHERE status = 'failed' it replaces: the run's lock
// serializes every journal write of the run, and the journal is read under a snapshot taken after
// that lock, so the row found is the row to write.
FY_FUNCTION(fy_workflow_step_complete) {
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::string step = step_arg(fcinfo, 3);
  const pg::Value result = pg::jsonb_arg(fcinfo, 4, "result");
  const std::optional<std::string> compensation =
      pg::arg_is_null(fcinfo, 5)
          ? std::nullopt
          : std::optional<std::string>(pg::name_arg(fcinfo, 5, "compensation", wf::max_step_bytes));
  const std::optional<std::int32_t> named = position_arg(fcinfo, 6);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  // The fence first, a statement of its own (as in workflow_step): a retry of this call that
  // waited for the first attempt's lock sees its journal row and answers as a replay.
  // A named position is checked on the journal read below: one descent for the step before it
  // and the row at it.
  const auto [owned, at] =
      lock_current_step(run, epoch, now, named, step, "workflow_step_complete", NamedCheck::by_caller);
  pg::Access access;
  pg::Table journal(access, pg::OwnTable::wf_journal);
  const pg::Value position = pg::int4_value(at);
  const auto j = pg::columns_of<JournalColumns>(journal);
  const AtPosition found = read_position(journal, j, run, at, named.has_value());
  if (named) check_named_position(journal, j, found, run, at, step, "workflow_step_complete");
  if (found.found) {
    if (journal.text_equals(j.status, "failed")) {
      journal.lock(pg::LockMode::no_key_update, pg::Wait::block);
      journal.update({{j.status, pg::text_value("done")},
                      {j.result, result},
                      {j.error, pg::null_value()},
                      {j.compensation, pg::optional_text_value(compensation)},
                      {j.epoch, pg::int8_value(epoch)},
                      {j.recorded_at, pg::timestamptz_value(now)}});
    } else {
      // Recorded before (a retried call, or a replayed step): the same result is a no-op.
      const bool same = !journal.is_null(j.result) && pg::jsonb_equal(journal.value(j.result), result) &&
                        journal.text(j.compensation) == compensation;
      if (!same) wf::throw_step_recorded(step, run.text, at, false);
    }
  } else {
    journal.insert({{j.tenant_id, run.t},
                    {j.run_id, run.r},
                    {j.position, position},
                    {j.step, pg::text_value(step)},
                    {j.status, pg::text_value("done")},
                    {j.result, result},
                    {j.compensation, pg::optional_text_value(compensation)},
                    {j.attempts, pg::int4_value(1)},
                    {j.compensation_attempts, pg::int4_value(0)},
                    {j.epoch, pg::int8_value(epoch)},
                    {j.recorded_at, pg::timestamptz_value(now)}});
  }
  journal.finish();
  if (owned.step_deadline) {  // the step is recorded in time: its deadline no longer holds the lease
    pg::Table runs(access, pg::OwnTable::wf_runs);
    if (!runs.find(pg::OwnIndex::wf_runs_pkey, {{1, pg::Compare::eq, run.r}, {2, pg::Compare::eq, run.t}}) ||
        runs.lock(pg::LockMode::update, pg::Wait::block) == pg::Locked::skipped)
      unknown_run(run);
    runs.update({{runs.column("step_deadline"), pg::null_value()}});
    runs.finish();
  }
  access.finish();
  spi.finish();
  return (Datum)0;
}

// workflow_step_fail(tenant, run_id, epoch, step, error, permanent) -> retry | failed
FY_FUNCTION(fy_workflow_step_fail) {
  static pg::Statement nack("SELECT forgeyard.nack($1, $2, $3, $4, $5, false)",
                            {TEXTOID, TEXTOID, INT8OID, INT8OID, TEXTOID});
  static pg::Statement release(
      "UPDATE forgeyard.wf_runs SET state = 'pending', lease_until = NULL, updated_at = $3" FY_RUN_KEY,
      {TEXTOID, UUIDOID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::string step = step_arg(fcinfo, 3);
  const std::string error = pg::text_arg(fcinfo, 4, "error", core::max_error_bytes, true).value_or("");
  const bool permanent = pg::bool_arg(fcinfo, 5, false);
  const std::optional<std::int32_t> named = position_arg(fcinfo, 6);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const auto [owned, at] = lock_current_step(run, epoch, now, named, step, "workflow_step_fail");
  if (!record_failed_attempt(spi, run, at, step, error, epoch, now)) wf::throw_step_recorded(step, run.text, at, true);
  std::string outcome = "failed";
  if (!permanent) {
    spi.run(nack,
            {run.t, pg::text_value(owned.queue()), pg::int8_value(owned.msg_id), pg::int8_value(epoch),
             pg::text_value(error)},
            [&](const pg::Row& r) { outcome = *r.text(1); });
  }
  if (outcome == "retry") {
    spi.run(release, {run.t, run.r, pg::timestamptz_value(now)});
  } else {
    // Permanent, or the queue's max_attempts reached (nack dead-lettered the message): the run
    // fails, compensating first if it has compensations to run.
    if (permanent) ack(spi, run, owned.queue(), owned.msg_id, epoch);
    settle(spi, run, "failed", pg::null_value(), wf::step_error(step, error), now);
    outcome = "failed";
  }
  spi.finish();
  return pg::text_value(outcome).datum;
}

// workflow_compensation(tenant, run_id, epoch) -> the next compensation, newest step first
FY_FUNCTION(fy_workflow_compensation) {
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  lock_owned(run, epoch, now, "compensating");
  const std::optional<NextCompensation> next = next_compensation(spi, run);
  spi.finish();
  pg::TableResult out(fcinfo);
  if (next)
    out.add_row({pg::int4_value(next->position), pg::text_value(next->step), pg::text_value(next->compensation),
                 pg::typed_value(JSONBOID, -1, next->result),
                 pg::text_value(wf::compensation_key(run.text, next->position, next->step))});
  return (Datum)0;
}

// workflow_compensation_complete(tenant, run_id, epoch, position) -> the run's state now
FY_FUNCTION(fy_workflow_compensation_complete) {
  static pg::Statement record(
      "UPDATE forgeyard.wf_journal SET compensation_status = 'done', compensation_error = NULL, compensated_at = $4,"
      "   compensation_attempts = compensation_attempts OPERATOR(pg_catalog.+) 1" FY_RUN_KEY " AND position" FY_EQ "$3",
      {TEXTOID, UUIDOID, INT4OID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::int32_t position = pg::int4_arg(fcinfo, 3, "position");
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const Owned owned = lock_owned(run, epoch, now, "compensating");
  std::optional<NextCompensation> next = next_compensation(spi, run);
  wf::check_next_compensation(next ? std::optional(next->position) : std::nullopt, position, run.text);
  spi.run(record, {run.t, run.r, pg::int4_value(position), pg::timestamptz_value(now)});
  std::string state = "compensating";
  if (!next_compensation(spi, run)) {
    // The last one: the run ends as it was going to.
    ack(spi, run, owned.queue(), owned.msg_id, epoch);
    state = settle(spi, run, owned.compensate_to.value_or("failed"), pg::null_value(), owned.error, now);
  }
  spi.finish();
  return pg::text_value(state).datum;
}

// workflow_compensation_fail(tenant, run_id, epoch, position, error, permanent) -> retry | compensation_failed
FY_FUNCTION(fy_workflow_compensation_fail) {
  static pg::Statement record(
      "UPDATE forgeyard.wf_journal SET compensation_status = 'failed', compensation_error = $4,"
      "   compensation_attempts = compensation_attempts OPERATOR(pg_catalog.+) 1" FY_RUN_KEY " AND position" FY_EQ "$3",
      {TEXTOID, UUIDOID, INT4OID, TEXTOID});
  static pg::Statement nack("SELECT forgeyard.nack($1, $2, $3, $4, $5, false)",
                            {TEXTOID, TEXTOID, INT8OID, INT8OID, TEXTOID});
  // The run stays compensating, its delivery let go: its owner's lease ends with it.
  static pg::Statement release("UPDATE forgeyard.wf_runs SET lease_until = NULL" FY_RUN_KEY, {TEXTOID, UUIDOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::int32_t position = pg::int4_arg(fcinfo, 3, "position");
  const std::string error = pg::text_arg(fcinfo, 4, "error", core::max_error_bytes, true).value_or("");
  const bool permanent = pg::bool_arg(fcinfo, 5, false);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const Owned owned = lock_owned(run, epoch, now, "compensating");
  const std::optional<NextCompensation> next = next_compensation(spi, run);
  wf::check_next_compensation(next ? std::optional(next->position) : std::nullopt, position, run.text);
  spi.run(record, {run.t, run.r, pg::int4_value(position), pg::text_value(error)});
  std::string outcome = "compensation_failed";
  if (!permanent) {
    spi.run(nack,
            {run.t, pg::text_value(owned.queue()), pg::int8_value(owned.msg_id), pg::int8_value(epoch),
             pg::text_value(error)},
            [&](const pg::Row& r) { outcome = *r.text(1); });
  } else {
    ack(spi, run, owned.queue(), owned.msg_id, epoch);
  }
  if (outcome == "retry") {
    spi.run(release, {run.t, run.r});
  } else {
    // Permanent, or the queue's max_attempts reached (the message is a dead letter now).
    // The run keeps its error; the compensation's is in the journal (recorded above).
    outcome = settle(spi, run, "compensation_failed", pg::null_value(), std::nullopt, now);
  }
  spi.finish();
  return pg::text_value(outcome).datum;
}

// workflow_sleep(tenant, run_id, epoch, step, until): a durable timer as the current step
FY_FUNCTION(fy_workflow_sleep) {
  static pg::Statement recorded("SELECT status, wake_at FROM forgeyard.wf_journal" FY_RUN_KEY " AND position" FY_EQ
                                "$3",
                                {TEXTOID, UUIDOID, INT4OID});
  static pg::Statement record(
      "INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, wake_at, epoch,"
      "   recorded_at)"
      " VALUES ($1, $2, $3, $4, 'done', $5, $6, $7, $8)"
      " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET status = 'done', result = excluded.result,"
      "   error = NULL, wake_at = excluded.wake_at, epoch = excluded.epoch, recorded_at = excluded.recorded_at",
      {TEXTOID, UUIDOID, INT4OID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID});
  static pg::Statement sleep(
      "UPDATE forgeyard.wf_runs SET state = 'sleeping', msg_id = $3, lease_until = NULL, updated_at = $4" FY_RUN_KEY,
      {TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::string step = step_arg(fcinfo, 3);
  const std::optional<TimestampTz> until = pg::optional_timestamptz_arg(fcinfo, 4);
  if (!until) throw core::Error(core::sqlstate::null_value, "until must not be NULL");
  const std::optional<std::int32_t> named = position_arg(fcinfo, 5);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const auto [owned, at] = lock_current_step(run, epoch, now, named, step, "workflow_sleep");
  const pg::Value position = pg::int4_value(at);
  std::optional<std::string> status;
  std::optional<TimestampTz> wake_at;
  spi.run(recorded, {run.t, run.r, position}, [&](const pg::Row& r) {
    status = r.text(1);
    wake_at = r.timestamptz(2);
  });
  // A sleep journaled before keeps its end (replayed code may compute another one).
  if (status == "done" && !wake_at) wf::throw_step_recorded(step, run.text, at, false);
  if (!wake_at) {
    wake_at = *until;
    const std::string result = wf::sleep_result(core::format_timestamp(pg::unix_usecs(*until)));
    spi.run(record, {run.t, run.r, position, pg::text_value(step), pg::typed_value(JSONBOID, -1, result),
                     pg::timestamptz_value(*until), pg::int8_value(epoch), pg::timestamptz_value(now)});
  }
  ack(spi, run, owned.queue(), owned.msg_id, epoch);
  const std::int64_t msg_id = enqueue(spi, run.tenant, owned.queue(), run.id, owned.priority,
                                      wf::timer_delay(pg::unix_usecs(*wake_at), pg::unix_usecs(now)));
  spi.run(sleep, {run.t, run.r, pg::int8_value(msg_id), pg::timestamptz_value(now)});
  spi.finish();
  return (Datum)0;
}

// workflow_wait_signal(tenant, run_id, epoch, step, signal, timeout) -> (status, payload)
FY_FUNCTION(fy_workflow_wait_signal) {
  static pg::Statement recorded(
      "SELECT step, status, result::pg_catalog.text, wake_at FROM forgeyard.wf_journal" FY_RUN_KEY " AND position" FY_EQ
      "$3",
      {TEXTOID, UUIDOID, INT4OID});
  static pg::Statement oldest("SELECT signal_id, payload::pg_catalog.text FROM forgeyard.wf_signals" FY_RUN_KEY
                              " AND name" FY_EQ
                              "$3 AND consumed_at IS NULL ORDER BY sent_at, signal_id LIMIT 1 FOR UPDATE",
                              {TEXTOID, UUIDOID, TEXTOID});
  static pg::Statement consume("UPDATE forgeyard.wf_signals SET consumed_at = $4, consumed_position = $5" FY_RUN_KEY
                               " AND signal_id" FY_EQ "$3",
                               {TEXTOID, UUIDOID, UUIDOID, TIMESTAMPTZOID, INT4OID});
  static pg::Statement record(
      "INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, epoch, recorded_at)"
      " VALUES ($1, $2, $3, $4, 'done', $5, $6, $7)"
      " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET status = 'done', result = excluded.result,"
      "   error = NULL, epoch = excluded.epoch, recorded_at = excluded.recorded_at",
      {TEXTOID, UUIDOID, INT4OID, TEXTOID, JSONBOID, INT8OID, TIMESTAMPTZOID});
  // Past the wait: the cursor moves on, and the run lets go of the wait and of a step deadline.
  static pg::Statement advance("UPDATE forgeyard.wf_cursors SET position = $3, step = $4" FY_RUN_KEY " AND epoch" FY_EQ
                               "$5",
                               {TEXTOID, UUIDOID, INT4OID, TEXTOID, INT8OID});
  static pg::Statement let_go(
      "UPDATE forgeyard.wf_runs SET step_deadline = NULL,"
      "   waiting_signal = CASE WHEN wait_position" FY_EQ
      "$3 THEN NULL ELSE waiting_signal END,"
      "   wait_until = CASE WHEN wait_position" FY_EQ
      "$3 THEN NULL ELSE wait_until END,"
      "   wait_position = CASE WHEN wait_position" FY_EQ
      "$3 THEN NULL ELSE wait_position END,"
      "   updated_at = $4" FY_RUN_KEY " AND (step_deadline IS NOT NULL OR wait_position" FY_EQ "$3)",
      {TEXTOID, UUIDOID, INT4OID, TIMESTAMPTZOID});
  static pg::Statement wait(
      "UPDATE forgeyard.wf_runs SET state = 'waiting', msg_id = $3, lease_until = NULL, waiting_signal = $4,"
      "   wait_until = $5,"
      "   wait_position = $6, updated_at = $7" FY_RUN_KEY,
      {TEXTOID, UUIDOID, INT8OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID});
  const Run run = run_args(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::string step = step_arg(fcinfo, 3);
  const std::string signal = pg::name_arg(fcinfo, 4, "signal", wf::max_step_bytes);
  const std::int64_t timeout = pg::duration_arg(fcinfo, 5, "timeout", core::max_queue_retention_usecs);
  const std::optional<std::int32_t> named = position_arg(fcinfo, 6);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const Owned owned = lock_owned(run, epoch, now, "running", named ? WithCursor::no : WithCursor::yes);
  // The step compared below (decide_wait: FY060 for another step at the position).
  if (named) check_named_position(run, *named, step, "workflow_wait_signal", false);
  const std::int32_t position = named ? *named : owned.cursor + 1;
  const pg::Value at = pg::int4_value(position);
  std::optional<wf::JournalEntry> entry;
  std::optional<std::string> result;
  spi.run(recorded, {run.t, run.r, at}, [&](const pg::Row& r) {
    entry = wf::JournalEntry{*r.text(1), *r.text(2), std::nullopt};
    result = r.text(3);
  });
  const wf::WaitState& state = owned.wait;
  std::optional<std::string> signal_id, payload;
  if (!entry || entry->status != "done") {
    spi.run(oldest, {run.t, run.r, pg::text_value(signal)}, [&](const pg::Row& r) {
      signal_id = r.uuid(1);
      payload = r.text(2);
    });
  }
  wf::SignalAnswer answer;
  const wf::WaitAction action =
      wf::decide_wait(entry, step, run.text, position, signal_id.has_value(), state, pg::unix_usecs(now));
  switch (action) {
    case wf::WaitAction::replay:
      answer = wf::parse_signal_result(*result);
      break;
    case wf::WaitAction::receive:
      answer = {"received", wf::canonical(*payload, "payload")};
      spi.run(consume, {run.t, run.r, pg::uuid_value(*signal_id), pg::timestamptz_value(now), at});
      break;
    case wf::WaitAction::time_out:
      answer = {"timed_out", std::nullopt};
      break;
    case wf::WaitAction::wait: {
      const std::int64_t until = wf::wait_end(state, position, pg::unix_usecs(now), timeout);
      ack(spi, run, owned.queue(), owned.msg_id, epoch);
      const std::int64_t msg_id =
          enqueue(spi, run.tenant, owned.queue(), run.id, owned.priority, wf::timer_delay(until, pg::unix_usecs(now)));
      spi.run(wait, {run.t, run.r, pg::int8_value(msg_id), pg::text_value(signal),
                     pg::timestamptz_value(now + (until - pg::unix_usecs(now))), at, pg::timestamptz_value(now)});
      answer = {"waiting", std::nullopt};
      break;
    }
  }
  // Received or timed out: journaled, so a replay answers the same; either way but waiting, the
  // cursor moves past the step (a caller that names positions has none).
  if (action == wf::WaitAction::receive || action == wf::WaitAction::time_out)
    spi.run(record, {run.t, run.r, at, pg::text_value(step), pg::typed_value(JSONBOID, -1, wf::signal_result(answer)),
                     pg::int8_value(epoch), pg::timestamptz_value(now)});
  if (action != wf::WaitAction::wait) {
    if (!named && spi.run(advance, {run.t, run.r, at, pg::text_value(step), pg::int8_value(epoch)}) == 0)
      wf::throw_cursor_lost(epoch, run.text);
    spi.run(let_go, {run.t, run.r, at, pg::timestamptz_value(now)});
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  out.add_row({pg::text_value(answer.status), pg::typed_value(JSONBOID, -1, answer.payload)});
  return (Datum)0;
}

// workflow_signal(tenant, run_id, signal, payload, signal_id) -> whether it was new
FY_FUNCTION(fy_workflow_signal) {
  const Run run = run_args(fcinfo);
  const std::string signal = pg::name_arg(fcinfo, 2, "signal", wf::max_step_bytes);
  const pg::Value payload = pg::jsonb_arg(fcinfo, 3, "payload");
  const std::string signal_id = pg::optional_uuid_arg(fcinfo, 4).value_or(pg::random_uuid());
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, run.tenant);
  const bool sent = send_signal(spi, run, signal, payload, signal_id, now);
  spi.finish();
  return BoolGetDatum(sent);
}
