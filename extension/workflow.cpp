// Durable workflows (docs/workflows.md): runs handed to workers through the queue of their
// definition, owned under the claim token of that delivery (the run's epoch), and a journal whose
// every write is fenced by that epoch. The rules both backends share are in core/workflow.cpp.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/timestamp.hpp"
#include "core/uuid.hpp"
#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/trigger.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy {
namespace {

namespace wf = core::workflow;
using core::sqlstate::invalid_parameter;

#define FY_EQ " OPERATOR(pg_catalog.=) "
#define FY_RUN_KEY " WHERE tenant_id" FY_EQ "$1 AND run_id" FY_EQ "$2"

// The tenant and run_id arguments (0 and 1) of every function on one run.
struct Run {
  std::string tenant, id, text;
  pg::Value t, r;
};

Run run_args(FunctionCallInfo fcinfo) {
  Run run;
  run.tenant = queue::tenant_arg(fcinfo);
  std::optional<std::string> id = pg::optional_uuid_arg(fcinfo, 1);
  if (!id) throw core::Error(core::sqlstate::null_value, "run_id must not be NULL");
  run.id = *id;
  run.text = core::format_uuid(run.id);
  run.t = pg::text_value(run.tenant);
  run.r = pg::uuid_value(run.id);
  return run;
}

[[noreturn]] void unknown_run(const Run& run) {
  wf::throw_unknown_run(run.text, run.tenant);
}

std::string step_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "step", wf::max_step_bytes);
}

std::string optional_text(FunctionCallInfo fcinfo, int n, const char* argument) {
  return pg::text_arg(fcinfo, n, argument, wf::max_reason_bytes, true).value_or("");
}

// The run under its owner's epoch, locked: what a journal write needs to know.
struct Owned {
  std::string workflow, state;
  std::int32_t version = 0;
  std::int64_t msg_id = 0;
  std::int32_t cursor = 0;  // the epoch's step cursor (wf_cursors), for the calls that read it
  std::optional<std::string> cursor_step;
  int priority = 0;    // the class of its messages
  wf::WaitState wait;  // a wait for a signal in progress
  std::optional<std::string> compensate_to, error;
  std::optional<TimestampTz> step_deadline;  // the current step's, when it has a timeout
  // The queue of its definition, which hands out its deliveries.
  std::string queue() const { return wf::queue_name(workflow, version); }
};

// The columns a journal write reads, resolved by name once per backend (pg::columns_of).
struct RunColumns {
  int state, epoch, msg_id, step_deadline, lease_until, workflow, version, priority, wait_position, wait_until,
      compensate_to, error;
  explicit RunColumns(const pg::Table& r)
      : state(r.column("state")),
        epoch(r.column("epoch")),
        msg_id(r.column("msg_id")),
        step_deadline(r.column("step_deadline")),
        lease_until(r.column("lease_until")),
        workflow(r.column("workflow")),
        version(r.column("version")),
        priority(r.column("priority")),
        wait_position(r.column("wait_position")),
        wait_until(r.column("wait_until")),
        compensate_to(r.column("compensate_to")),
        error(r.column("error")) {}
};

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

// The columns of the run's delivery that say whether its owner's lease holds.
struct DeliveryColumns {
  int state, claim_token, visible_at;
  explicit DeliveryColumns(const pg::Table& m)
      : state(m.column("state")), claim_token(m.column("claim_token")), visible_at(m.column("visible_at")) {}
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

// When the fence locks the run's row: always (every journal write), or only when the run has a
// step deadline to let go of (workflow_step, which otherwise writes only its cursor).
enum class RunLock { always, for_a_deadline };

// Below SPI (pg/table_access.hpp), as the SELECT ... FROM wf_runs r LEFT JOIN messages m ... FOR
// UPDATE OF r it replaces: finds and locks the run (a claim that takes it over waits for this
// transaction; a newer version followed while waiting is the one read), reads its message when
// it must (below), and checks that `epoch` owns the run in state `as`: FY001 otherwise, 42704 for
// a run the tenant does not have (or one removed meanwhile). Unlocked (RunLock::for_a_deadline
// and no deadline), the row is the snapshot's: the cursor's lock then serializes the step calls
// of the run.
Owned lock_owned_in(pg::Access& access, pg::Table& runs, const Run& run, std::int64_t epoch, TimestampTz now,
                    const char* as, RunLock how = RunLock::always) {
  const auto c = pg::columns_of<RunColumns>(runs);
  if (!runs.find(pg::OwnIndex::wf_runs_pkey, {{1, pg::Compare::eq, run.r}, {2, pg::Compare::eq, run.t}}))
    unknown_run(run);
  const bool lock = how == RunLock::always || !runs.is_null(c.step_deadline);
  if (lock && runs.lock(pg::LockMode::update, pg::Wait::block) == pg::Locked::skipped) unknown_run(run);
  Owned owned;
  owned.workflow = *runs.text(c.workflow);
  owned.version = runs.int4(c.version);
  owned.state = *runs.text(c.state);
  owned.msg_id = runs.is_null(c.msg_id) ? 0 : runs.int8(c.msg_id);
  owned.priority = runs.int2(c.priority);
  if (!runs.is_null(c.wait_position)) owned.wait.position = runs.int4(c.wait_position);
  if (!runs.is_null(c.wait_until)) owned.wait.until = pg::unix_usecs(runs.timestamptz(c.wait_until));
  owned.compensate_to = runs.text(c.compensate_to);
  owned.error = runs.text(c.error);
  if (!runs.is_null(c.step_deadline)) owned.step_deadline = runs.timestamptz(c.step_deadline);
  const std::int64_t run_epoch = runs.int8(c.epoch);
  // The owner's lease holds while the end its claim or workflow_extend wrote on the run is ahead
  // (every change of the run's message or state clears it). Past it, or not kept (a run copied in),
  // the run's message decides: its delivery under this epoch, visible only later.
  bool live = !runs.is_null(c.lease_until) && runs.timestamptz(c.lease_until) > now;
  if (!live && owned.msg_id != 0) {
    pg::Table messages(access, pg::OwnTable::messages, pg::Opened::for_row_locks);
    if (messages.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(owned.msg_id)}})) {
      const auto m = pg::columns_of<DeliveryColumns>(messages);
      live = messages.text_equals(m.state, "pending") && !messages.is_null(m.claim_token) &&
             messages.int8(m.claim_token) == run_epoch && messages.timestamptz(m.visible_at) > now;
    }
    messages.finish();
  }
  // A step with a timeout ends the lease at its deadline, whatever the delivery says (a plain
  // queue extend on the definition queue cannot move it).
  if (owned.step_deadline && *owned.step_deadline <= now) live = false;
  wf::check_owner({owned.state, run_epoch, live}, epoch, run.text, as);
  return owned;
}

// The step cursor of `epoch` (wf_cursors) into `owned`, locked against other step calls of the
// run if `lock`: FY001 when it is gone (the UNLOGGED table was emptied) or another epoch's.
// Locking, a wait that ends on a newer version of the row (another step call of this epoch moved
// the cursor meanwhile) is 40001: what this call read before the wait (the run's deadline, its
// snapshot) is no longer current, so the caller retries with a fresh one.
void read_cursor_in(pg::Table& cursors, const Run& run, std::int64_t epoch, Owned& owned, bool lock) {
  if (!cursors.find(pg::OwnIndex::wf_cursors_pkey, {{1, pg::Compare::eq, run.r}, {2, pg::Compare::eq, run.t}}))
    wf::throw_cursor_lost(epoch, run.text);
  const pg::Locked locked = lock ? cursors.lock(pg::LockMode::no_key_update, pg::Wait::block) : pg::Locked::as_read;
  if (locked == pg::Locked::skipped) wf::throw_cursor_lost(epoch, run.text);
  // After a wait, the newest version is in the slot: a claim that took the run over moved it.
  if (cursors.int8(cursors.column("epoch")) != epoch) wf::throw_cursor_lost(epoch, run.text);
  if (locked == pg::Locked::newer_version) wf::throw_concurrent_step(run.text);
  owned.cursor = cursors.int4(cursors.column("position"));
  owned.cursor_step = cursors.text(cursors.column("step"));
}

// Which calls read the step cursor: the ones that record the current step.
enum class WithCursor { no, yes };

// The same as one statement of its own, for the calls that go on with SPI.
Owned lock_owned(const Run& run, std::int64_t epoch, TimestampTz now, const char* as = "running",
                 WithCursor with_cursor = WithCursor::no) {
  pg::Access access;
  pg::Table runs(access, pg::OwnTable::wf_runs, pg::Opened::for_row_locks);
  Owned owned = lock_owned_in(access, runs, run, epoch, now, as);
  runs.finish();
  access.finish();
  if (with_cursor == WithCursor::yes) {
    // Under a snapshot taken after the run's lock: what a call that held it wrote is seen.
    pg::Access after;
    pg::Table cursors(after, pg::OwnTable::wf_cursors, pg::Opened::for_row_locks);
    read_cursor_in(cursors, run, epoch, owned, false);
    cursors.finish();
    after.finish();
  }
  return owned;
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

// The queue's own calls on the run's message, so its counters, retries and dead letters hold.
void ack(pg::Spi& spi, const Run& run, const std::string& queue, std::int64_t msg_id, std::int64_t token) {
  static pg::Statement statement("SELECT forgeyard.ack($1, $2, $3, $4)", {TEXTOID, TEXTOID, INT8OID, INT8OID});
  spi.run(statement, {run.t, pg::text_value(queue), pg::int8_value(msg_id), pg::int8_value(token)});
}

// The run's next message (payload: the run id's 16 bytes), visible after `delay` µs.
std::int64_t enqueue(pg::Spi& spi, const std::string& tenant, const std::string& queue, const std::string& run_id,
                     int priority, std::int64_t delay = 0) {
  static pg::Statement statement("SELECT forgeyard.enqueue($1, $2, $3, NULL, NULL, $4, $5)",
                                 {TEXTOID, TEXTOID, BYTEAOID, TEXTOID, INTERVALOID});
  std::int64_t msg_id = 0;
  spi.run(statement,
          {pg::text_value(tenant), pg::text_value(queue), pg::bytea_value(run_id),
           pg::text_value(core::priority_names[priority]), pg::interval_value(delay)},
          [&](const pg::Row& r) { msg_id = *r.int8(1); });
  return msg_id;
}

// Sends a run the signal `name`, in the caller's transaction: false for a repeated signal_id or a
// run that has finished; a run waiting for the signal is handed out at once (its timeout message
// is let go at claim). 42704 for a run the tenant does not have, unless `missing_ok` (a parent
// removed by its retention hears nothing).
bool send_signal(pg::Spi& spi, const Run& run, const std::string& name, const pg::Value& payload,
                 const std::string& signal_id, TimestampTz now, bool missing_ok = false) {
  static pg::Statement lock(
      "SELECT state, waiting_signal, workflow, version::pg_catalog.int8, priority::pg_catalog.int8"
      "  FROM forgeyard.wf_runs" FY_RUN_KEY " FOR UPDATE",
      {TEXTOID, UUIDOID});
  static pg::Statement insert(
      "INSERT INTO forgeyard.wf_signals (tenant_id, run_id, signal_id, name, payload, sent_at)"
      " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
      {TEXTOID, UUIDOID, UUIDOID, TEXTOID, JSONBOID, TIMESTAMPTZOID});
  static pg::Statement wake(
      "UPDATE forgeyard.wf_runs SET state = 'pending', msg_id = $3, lease_until = NULL, updated_at = $4" FY_RUN_KEY,
      {TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID});
  std::optional<std::string> state, waiting_for, workflow;
  std::int64_t version = 0, class_number = 0;
  spi.run(lock, {run.t, run.r}, [&](const pg::Row& r) {
    state = r.text(1);
    waiting_for = r.text(2);
    workflow = r.text(3);
    version = *r.int8(4);
    class_number = *r.int8(5);
  });
  if (!state && missing_ok) return false;
  if (!state) unknown_run(run);
  if (wf::is_finished(*state)) return false;
  const bool sent = spi.run(insert, {run.t, run.r, pg::uuid_value(signal_id), pg::text_value(name), payload,
                                     pg::timestamptz_value(now)}) > 0;
  if (sent && *state == "waiting" && waiting_for == name) {
    const std::int64_t msg_id = enqueue(spi, run.tenant, wf::queue_name(*workflow, static_cast<std::int32_t>(version)),
                                        run.id, static_cast<int>(class_number));
    spi.run(wake, {run.t, run.r, pg::int8_value(msg_id), pg::timestamptz_value(now)});
  }
  return sent;
}

// A run that has a parent tells it how it ended (core/workflow.hpp, children).
void tell_parent(pg::Spi& spi, const Run& run, TimestampTz now) {
  static pg::Statement ended(
      "SELECT parent_run_id, state, result::pg_catalog.text, error FROM forgeyard.wf_runs" FY_RUN_KEY
      " AND parent_run_id IS NOT NULL",
      {TEXTOID, UUIDOID});
  std::optional<std::string> parent, state, result, error;
  spi.run(ended, {run.t, run.r}, [&](const pg::Row& r) {
    parent = r.uuid(1);
    state = r.text(2);
    result = r.text(3);
    error = r.text(4);
  });
  if (!parent || !wf::tells_parent(*state)) return;
  const Run to{run.tenant, *parent, core::format_uuid(*parent), run.t, pg::uuid_value(*parent)};
  send_signal(spi, to, wf::child_signal(run.text),
              pg::typed_value(JSONBOID, -1, wf::child_payload(*state, result, error)), run.id, now, true);
}

// The run ends in `state` (its delivery let go by the caller). One that fails, is cancelled or
// times out with compensations to run is compensating first: a new message hands it out for
// them. One that ends compensation_failed keeps its error (wf::keeps_error): `error` is not
// written then. Returns the run's state now.
std::string settle(pg::Spi& spi, const Run& run, const std::string& state, const pg::Value& result,
                   const std::optional<std::string>& error, TimestampTz now) {
  static pg::Statement pending(
      "SELECT workflow, version::pg_catalog.int8, priority::pg_catalog.int8 FROM forgeyard.wf_runs r" FY_RUN_KEY
      " AND EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id" FY_EQ "$1 AND j.run_id" FY_EQ
      "$2"
      "   AND j.status" FY_EQ
      "'done' AND j.compensation IS NOT NULL"
      "   AND j.compensation_status IS DISTINCT FROM 'done')",
      {TEXTOID, UUIDOID});
  static pg::Statement compensate(
      "UPDATE forgeyard.wf_runs SET state = 'compensating', compensate_to = $3, error = $4, msg_id = $5,"
      "   lease_until = NULL,"
      "   updated_at = $6" FY_RUN_KEY,
      {TEXTOID, UUIDOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID});
  static pg::Statement end(
      "UPDATE forgeyard.wf_runs SET state = $3, result = $4, error = CASE WHEN $7 THEN error ELSE $5 END,"
      "   lease_until = NULL, updated_at = $6,"
      "   finished_at = CASE WHEN $3" FY_EQ
      "'parked' THEN NULL ELSE $6 END,"
      "   purge_at = CASE WHEN $3" FY_EQ
      "'parked' THEN NULL"
      "       ELSE $6 OPERATOR(pg_catalog.+) (retention_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)"
      "   END" FY_RUN_KEY,
      {TEXTOID, UUIDOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, BOOLOID});
  if (wf::ends_with_compensation(state)) {
    std::optional<std::string> workflow;
    std::int64_t version = 0, priority = 0;
    spi.run(pending, {run.t, run.r}, [&](const pg::Row& r) {
      workflow = r.text(1);
      version = *r.int8(2);
      priority = *r.int8(3);
    });
    if (workflow) {
      const std::string queue = wf::queue_name(*workflow, static_cast<std::int32_t>(version));
      queue::ensure_queue(spi, run.tenant, queue);
      const std::int64_t msg_id = enqueue(spi, run.tenant, queue, run.id, static_cast<int>(priority));
      spi.run(compensate, {run.t, run.r, pg::text_value(state), pg::optional_text_value(error), pg::int8_value(msg_id),
                           pg::timestamptz_value(now)});
      return "compensating";
    }
  }
  spi.run(end, {run.t, run.r, pg::text_value(state), result, pg::optional_text_value(error), pg::timestamptz_value(now),
                pg::bool_value(wf::keeps_error(state))});
  tell_parent(spi, run, now);
  return state;
}

// Ends the run in `state` (completed, failed, parked) and lets its delivery go.
void finish(pg::Spi& spi, const Run& run, const Owned& owned, std::int64_t epoch, const char* state,
            const pg::Value& result, const std::optional<std::string>& error, TimestampTz now) {
  ack(spi, run, owned.queue(), owned.msg_id, epoch);
  settle(spi, run, state, result, error, now);
}

// A failed attempt of the step at `position`, recorded unless the step is done there (false then).
bool record_failed_attempt(pg::Spi& spi, const Run& run, std::int32_t position, const std::string& step,
                           const std::string& error, std::int64_t epoch, TimestampTz now) {
  static pg::Statement record(
      "INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, error, epoch, recorded_at)"
      " VALUES ($1, $2, $3, $4, 'failed', $5, $6, $7)"
      " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET error = excluded.error,"
      "   attempts = j.attempts OPERATOR(pg_catalog.+) 1, epoch = excluded.epoch, recorded_at = excluded.recorded_at"
      " WHERE j.status" FY_EQ "'failed'",
      {TEXTOID, UUIDOID, INT4OID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID});
  return spi.run(record, {run.t, run.r, pg::int4_value(position), pg::text_value(step), pg::text_value(error),
                          pg::int8_value(epoch), pg::timestamptz_value(now)}) != 0;
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
}  // namespace fy

using namespace fy;

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

namespace {

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
