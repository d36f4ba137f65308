// Durable workflows (docs/workflows.md): runs handed to workers through the queue of their
// definition, owned under the claim token of that delivery (the run's epoch), and a journal whose
// every write is fenced by that epoch. The rules both backends share are in core/workflow.cpp.
// What the phases share (workflow.hpp): a run's arguments, the owner's fence and step cursor, the
// queue's own calls on a run's messages, signals, and the end of a run.
#include <optional>
#include <string>

#include "core/uuid.hpp"
#include "core/workflow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "queue.hpp"
#include "workflow.hpp"

namespace fy::workflow {

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

namespace {

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

// The columns of the run's delivery that say whether its owner's lease holds.
struct DeliveryColumns {
  int state, claim_token, visible_at;
  explicit DeliveryColumns(const pg::Table& m)
      : state(m.column("state")), claim_token(m.column("claim_token")), visible_at(m.column("visible_at")) {}
};

}  // namespace

Owned lock_owned_in(pg::Access& access, pg::Table& runs, const Run& run, std::int64_t epoch, TimestampTz now,
                    const char* as, RunLock how) {
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

Owned lock_owned(const Run& run, std::int64_t epoch, TimestampTz now, const char* as, WithCursor with_cursor) {
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

void ack(pg::Spi& spi, const Run& run, const std::string& queue, std::int64_t msg_id, std::int64_t token) {
  static pg::Statement statement("SELECT forgeyard.ack($1, $2, $3, $4)", {TEXTOID, TEXTOID, INT8OID, INT8OID});
  spi.run(statement, {run.t, pg::text_value(queue), pg::int8_value(msg_id), pg::int8_value(token)});
}

std::int64_t enqueue(pg::Spi& spi, const std::string& tenant, const std::string& queue, const std::string& run_id,
                     int priority, std::int64_t delay) {
  static pg::Statement statement("SELECT forgeyard.enqueue($1, $2, $3, NULL, NULL, $4, $5)",
                                 {TEXTOID, TEXTOID, BYTEAOID, TEXTOID, INTERVALOID});
  std::int64_t msg_id = 0;
  spi.run(statement,
          {pg::text_value(tenant), pg::text_value(queue), pg::bytea_value(run_id),
           pg::text_value(core::priority_names[priority]), pg::interval_value(delay)},
          [&](const pg::Row& r) { msg_id = *r.int8(1); });
  return msg_id;
}

bool send_signal(pg::Spi& spi, const Run& run, const std::string& name, const pg::Value& payload,
                 const std::string& signal_id, TimestampTz now, bool missing_ok) {
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

namespace {

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

}  // namespace

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

}  // namespace fy::workflow
