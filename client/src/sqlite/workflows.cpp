// Durable workflows in the SQLite store: the twin of extension/workflow.cpp, with the same rules
// (core/workflow.hpp) over the same queue calls (sqlite/queues.hpp). A write transaction holds
// SQLite's write lock, which serializes what row locks serialize on PostgreSQL.
#include "sqlite/workflows.hpp"

#include <set>

#include "core/timestamp.hpp"
#include "core/uuid.hpp"
#include "core/workflow.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"
#include "workflow_input.hpp"

namespace forgeyard::detail {

using namespace sqlite_queue;
namespace wf = fy::core::workflow;

namespace {

void check_tenant_name(std::string_view tenant) {
  fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
}

void check_step_name(std::string_view step) {
  fy::core::check_name("step", true, step, wf::max_step_bytes);
}

void check_reason(std::string_view text, const char* argument) {
  if (text.size() > wf::max_reason_bytes)
    throw fy::core::Error(fy::core::sqlstate::string_too_long,
                          std::string(argument) + " is longer than " + std::to_string(wf::max_reason_bytes) + " bytes");
}

std::optional<std::string> column_text(Query& q, int column) {
  if (q.is_null(column)) return std::nullopt;
  return q.text(column);
}

// The run under its owner's epoch: what a journal write needs to know.
struct OwnedRun {
  std::string queue, state;
  std::int64_t msg_id = 0;
  std::int32_t cursor = 0;
  std::optional<std::string> cursor_step;
  int priority = 0;    // the class of its messages
  wf::WaitState wait;  // a wait for a signal in progress
  std::optional<std::string> compensate_to, error;
  std::optional<std::int64_t> step_deadline;  // the current step's, when it has a timeout
};

// FY001 unless `epoch` owns the run in state `as`; 42704 for a run the tenant does not have.
OwnedRun owned_run(Db& db, std::string_view tenant, const std::string& run_id, std::int64_t epoch, std::int64_t now,
                   const char* as = "running") {
  auto q = db.query(
      "SELECT r.state, r.epoch, r.msg_id, r.step_cursor, r.cursor_step, r.workflow, r.version,"
      "       coalesce(m.state = 'pending' AND m.claim_token = r.epoch AND m.visible_at > ?3"
      "                AND (r.step_deadline IS NULL OR r.step_deadline > ?3), 0),"
      "       r.priority, r.wait_position, r.wait_until, r.compensate_to, r.error, r.step_deadline"
      "  FROM wf_runs r LEFT JOIN messages m ON m.msg_id = r.msg_id"
      " WHERE r.tenant_id = ?1 AND r.run_id = ?2");
  q.bind(1, tenant).bind(2, run_id).bind(3, now);
  if (!q.step()) wf::throw_unknown_run(run_id, tenant);
  const wf::Ownership ownership{q.text(0), q.int64(1), q.int64(7) != 0};
  OwnedRun owned{wf::queue_name(q.text(5), static_cast<std::int32_t>(q.int64(6))),
                 q.text(0),
                 q.is_null(2) ? 0 : q.int64(2),
                 static_cast<std::int32_t>(q.int64(3)),
                 column_text(q, 4),
                 static_cast<int>(q.int64(8)),
                 {}};
  if (!q.is_null(9)) owned.wait.position = static_cast<std::int32_t>(q.int64(9));
  if (!q.is_null(10)) owned.wait.until = q.int64(10);
  owned.compensate_to = column_text(q, 11);
  owned.error = column_text(q, 12);
  if (!q.is_null(13)) owned.step_deadline = q.int64(13);
  wf::check_owner(ownership, epoch, run_id, as);
  return owned;
}

// A failed attempt of the step at `position`, recorded unless the step is done there (false then).
// A call that names its step's position (the caller counts its steps): the step before it must be
// recorded done and, with `same_step`, a row at the position must be `step` (core/workflow.hpp).
void check_named_position(Db& db, std::string_view tenant, const std::string& run_id, std::int32_t position,
                          std::string_view step, const char* function, bool same_step = true) {
  std::optional<std::string> previous;
  std::optional<wf::JournalEntry> here;
  auto q = db.query(
      "SELECT position, step, status FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2"
      " AND position IN (?3 - 1, ?3)");
  q.bind(1, tenant).bind(2, run_id).bind(3, static_cast<std::int64_t>(position));
  while (q.step()) {
    if (q.int64(0) == position)
      here = wf::JournalEntry{q.text(1), q.text(2), std::nullopt};
    else
      previous = q.text(2);
  }
  wf::check_position_follows(position, previous, run_id, function);
  if (same_step) wf::check_same_step(here, step, run_id, position);
}

// The position a call that records the current step (step_complete, step_fail, sleep) records at:
// the one the caller names, checked against the journal, or the epoch's cursor, which must be at
// `step`.
std::int32_t current_step_position(Db& db, std::string_view tenant, const std::string& run_id, const OwnedRun& owned,
                                   const std::optional<std::int32_t>& named, std::string_view step,
                                   const char* function) {
  if (!named) {
    wf::check_current_step(owned.cursor, owned.cursor_step, step, function);
    return owned.cursor;
  }
  check_named_position(db, tenant, run_id, *named, step, function);
  return *named;
}

// The position a call names, checked (22023 below 1); none: the epoch's cursor.
std::optional<std::int32_t> named_position(std::optional<int> position) {
  if (!position) return std::nullopt;
  return wf::check_position(*position);
}

bool record_failed_attempt(Db& db, std::string_view tenant, const std::string& run_id, std::int32_t position,
                           std::string_view step, std::string_view error, std::int64_t epoch, std::int64_t now) {
  return db.query(
               "INSERT INTO wf_journal (tenant_id, run_id, position, step, status, error, epoch, recorded_at)"
               " VALUES (?1, ?2, ?3, ?4, 'failed', ?5, ?6, ?7)"
               " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET error = excluded.error,"
               "   attempts = attempts + 1, epoch = excluded.epoch, recorded_at = excluded.recorded_at"
               " WHERE status = 'failed'")
             .bind(1, tenant)
             .bind(2, run_id)
             .bind(3, static_cast<std::int64_t>(position))
             .bind(4, step)
             .bind(5, error)
             .bind(6, epoch)
             .bind(7, now)
             .run() != 0;
}

Queue workflow_queue(Db& db, std::string_view tenant, const std::string& name, std::int64_t now) {
  create_in(db, tenant, name, fy::core::QueueOptions{}, now);
  return load(db, tenant, name);
}

// The run's next message in its definition's queue (payload: the run id's 16 bytes).
std::int64_t hand_out(Db& db, Queue& queue, const std::string& run_id, int priority, std::int64_t now,
                      std::int64_t delay = 0) {
  OutgoingMessage m;
  m.payload = *fy::core::parse_uuid(run_id);
  m.priority = static_cast<Priority>(priority);
  m.delay = Duration(delay);
  return enqueue_one(db, queue, m, now);
}

void bind_optional(Query& q, int n, const std::optional<std::string>& value) {
  if (value)
    q.bind(n, *value);
  else
    q.bind_null(n);
}

// Sends a run the signal `name`: false for a repeated signal_id or a run that has finished; a run
// waiting for the signal is handed out at once (its timeout message is let go at claim). 42704
// for a run the tenant does not have, unless `missing_ok` (a parent removed by its retention hears
// nothing).
bool send_signal(Db& db, std::string_view tenant, const std::string& run_id, std::string_view name,
                 const std::string& payload, const std::string& signal_id, std::int64_t now, bool missing_ok = false) {
  auto q = db.query(
      "SELECT state, waiting_signal, workflow, version, priority FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2");
  q.bind(1, tenant).bind(2, run_id);
  if (!q.step()) {
    if (missing_ok) return false;
    wf::throw_unknown_run(run_id, tenant);
  }
  if (wf::is_finished(q.text(0))) return false;
  const bool sent = db.query(
                          "INSERT INTO wf_signals (tenant_id, run_id, signal_id, name, payload, sent_at)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING")
                        .bind(1, tenant)
                        .bind(2, run_id)
                        .bind(3, signal_id)
                        .bind(4, name)
                        .bind(5, payload)
                        .bind(6, now)
                        .run() > 0;
  if (sent && q.text(0) == "waiting" && column_text(q, 1) == std::string(name)) {
    Queue queue = workflow_queue(db, tenant, wf::queue_name(q.text(2), static_cast<std::int32_t>(q.int64(3))), now);
    const std::int64_t msg_id = hand_out(db, queue, run_id, static_cast<int>(q.int64(4)), now);
    db.query("UPDATE wf_runs SET state = 'pending', msg_id = ?3, updated_at = ?4 WHERE tenant_id = ?1 AND run_id = ?2")
        .bind(1, tenant)
        .bind(2, run_id)
        .bind(3, msg_id)
        .bind(4, now)
        .run();
  }
  return sent;
}

// A run that has a parent tells it how it ended (core/workflow.hpp, children).
void tell_parent(Db& db, std::string_view tenant, const std::string& run_id, std::int64_t now) {
  auto q = db.query(
      "SELECT parent_run_id, state, result, error FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2"
      " AND parent_run_id IS NOT NULL");
  q.bind(1, tenant).bind(2, run_id);
  if (!q.step() || !wf::tells_parent(q.text(1))) return;
  const std::string parent = q.text(0);
  const std::string payload = wf::child_payload(q.text(1), column_text(q, 2), column_text(q, 3));
  send_signal(db, tenant, parent, wf::child_signal(run_id), payload, run_id, now, true);
}

// The run ends in `state` (its delivery let go by the caller). One that fails, is cancelled or
// times out with compensations to run is compensating first: a new message hands it out for
// them. One that ends compensation_failed keeps its error (wf::keeps_error): `error` is not
// written then. Returns the run's state now.
std::string settle(Db& db, std::string_view tenant, const std::string& run_id, const std::string& state,
                   const std::optional<std::string>& result, const std::optional<std::string>& error,
                   std::int64_t now) {
  if (wf::ends_with_compensation(state)) {
    auto q = db.query(
        "SELECT workflow, version, priority FROM wf_runs r WHERE tenant_id = ?1 AND run_id = ?2"
        " AND EXISTS (SELECT 1 FROM wf_journal j WHERE j.tenant_id = ?1 AND j.run_id = ?2 AND j.status = 'done'"
        "   AND j.compensation IS NOT NULL AND j.compensation_status IS NOT 'done')");
    q.bind(1, tenant).bind(2, run_id);
    if (q.step()) {
      Queue queue = workflow_queue(db, tenant, wf::queue_name(q.text(0), static_cast<std::int32_t>(q.int64(1))), now);
      const std::int64_t msg_id = hand_out(db, queue, run_id, static_cast<int>(q.int64(2)), now);
      auto u = db.query(
          "UPDATE wf_runs SET state = 'compensating', compensate_to = ?3, error = ?4, msg_id = ?5, updated_at = ?6"
          " WHERE tenant_id = ?1 AND run_id = ?2");
      u.bind(1, tenant).bind(2, run_id).bind(3, state);
      bind_optional(u, 4, error);
      u.bind(5, msg_id).bind(6, now).run();
      return "compensating";
    }
  }
  auto q = db.query(
      "UPDATE wf_runs SET state = ?3, result = ?4, error = CASE WHEN ?7 THEN error ELSE ?5 END, updated_at = ?6,"
      "   finished_at = CASE WHEN ?3 = 'parked' THEN NULL ELSE ?6 END,"
      "   purge_at = CASE WHEN ?3 = 'parked' THEN NULL ELSE ?6 + retention_usecs END"
      " WHERE tenant_id = ?1 AND run_id = ?2");
  q.bind(1, tenant).bind(2, run_id).bind(3, state);
  bind_optional(q, 4, result);
  bind_optional(q, 5, error);
  q.bind(6, now).bind(7, static_cast<std::int64_t>(wf::keeps_error(state))).run();
  tell_parent(db, tenant, run_id, now);
  return state;
}

// Ends the run in `state` (completed, failed, parked) and lets its delivery go.
void finish_run(Db& db, std::string_view tenant, const std::string& run_id, const OwnedRun& owned, std::int64_t epoch,
                const char* state, const std::optional<std::string>& result, const std::optional<std::string>& error,
                std::int64_t now) {
  ack_in(db, load(db, tenant, owned.queue), owned.msg_id, epoch, now);
  settle(db, tenant, run_id, state, result, error, now);
}

// The newest step done whose compensation has not run.
std::optional<Compensation> next_compensation(Db& db, std::string_view tenant, const std::string& run_id) {
  auto q = db.query(
      "SELECT position, step, compensation, result FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2"
      " AND status = 'done' AND compensation IS NOT NULL AND compensation_status IS NOT 'done'"
      " ORDER BY position DESC LIMIT 1");
  q.bind(1, tenant).bind(2, run_id);
  if (!q.step()) return std::nullopt;
  const auto position = static_cast<std::int32_t>(q.int64(0));
  const std::optional<std::string> result = column_text(q, 3);
  return Compensation{position, q.text(1), q.text(2),
                      result ? std::optional(wf::canonical(*result, "result")) : std::nullopt,
                      wf::compensation_key(run_id, position, q.text(1))};
}

std::optional<std::int32_t> position_of(const std::optional<Compensation>& c) {
  return c ? std::optional<std::int32_t>(c->position) : std::nullopt;
}

}  // namespace

std::string start_run(Db& db, std::string_view tenant, std::string_view workflow, int version, std::string_view run_key,
                      const std::string& input, const WorkflowStartOptions& options, std::int64_t now) {
  check_tenant_name(tenant);
  fy::core::check_name("workflow", true, workflow, wf::max_workflow_bytes);
  wf::check_version(version);
  fy::core::check_name("run_key", true, run_key, wf::max_run_key_bytes);
  std::optional<std::int64_t> deadline_usecs;
  if (options.deadline)
    deadline_usecs =
        fy::core::check_duration("deadline", {0, 0, options.deadline->count()}, fy::core::max_queue_retention_usecs);
  const std::int64_t retention =
      options.retention ? wf::check_retention({0, 0, options.retention->count()}) : wf::default_retention_usecs;
  const std::optional<std::string> parent =
      options.parent ? std::optional(run_id_param(*options.parent)) : std::nullopt;
  if (parent) {
    auto p = db.query("SELECT 1 FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2");
    p.bind(1, tenant).bind(2, *parent);
    if (!p.step())
      throw fy::core::Error(fy::core::sqlstate::undefined_object,
                            "parent workflow run " + *parent + " not found for tenant \"" + std::string(tenant) + "\"");
  }
  auto existing =
      db.query("SELECT run_id, workflow, version, input FROM wf_runs WHERE tenant_id = ?1 AND run_key = ?2");
  existing.bind(1, tenant).bind(2, run_key);
  if (existing.step()) {
    // The run_key started a run before: the same definition and input return it.
    const std::string id = existing.text(0);
    const bool same = existing.text(1) == workflow && existing.int64(2) == version &&
                      wf::canonical(existing.text(3), "input") == input;
    if (!same)
      throw fy::core::Error(fy::core::sqlstate::idempotency_mismatch,
                            "run_key \"" + std::string(run_key) + "\" already started run " + id + " of " +
                                existing.text(1) + "@" + std::to_string(existing.int64(2)) + " with other input",
                            "a run_key names one run: the same workflow, version and input");
    return id;
  }
  const std::string id = fy::core::format_uuid(random_uuid());
  const int priority = priority_index(options.priority);
  Queue queue = workflow_queue(db, tenant, wf::queue_name(workflow, version), now);
  const std::int64_t msg_id = hand_out(db, queue, id, priority, now);
  auto insert = db.query(
      "INSERT INTO wf_runs (tenant_id, run_id, run_key, workflow, version, input, state, priority, msg_id,"
      "   deadline, parent_run_id, created_at, updated_at, retention_usecs)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ?9, ?10, ?11, ?11, ?12)");
  insert.bind(1, tenant)
      .bind(2, id)
      .bind(3, run_key)
      .bind(4, workflow)
      .bind(5, static_cast<std::int64_t>(version))
      .bind(6, input)
      .bind(7, static_cast<std::int64_t>(priority))
      .bind(8, msg_id);
  if (deadline_usecs)
    insert.bind(9, now + *deadline_usecs);
  else
    insert.bind_null(9);
  bind_optional(insert, 10, parent);
  insert.bind(11, now).bind(12, retention).run();
  return id;
}

std::string SqliteWorkflows::start(std::string_view tenant, std::string_view workflow, int version,
                                   std::string_view run_key, std::string_view input_json,
                                   const WorkflowStartOptions& options) {
  return session_.measure("workflow.start", [&] {
    const std::string input = json_param(input_json, "input");
    if (options.parent) run_id_param(*options.parent);
    return core_guarded([&] {
      std::string id;
      session_.write([&](Db& db) {
        id = start_run(db, tenant, workflow, version, run_key, input, options, session_.now_usecs());
      });
      return id;
    });
  });
}

std::vector<ClaimedRun> SqliteWorkflows::claim(std::string_view tenant, std::string_view worker,
                                               const std::vector<std::string>& definitions, int max_runs,
                                               std::optional<Duration> lease) {
  return session_.measure("workflow.claim", [&] {
    return core_guarded([&] {
      check_tenant_name(tenant);
      fy::core::check_name("worker", true, worker, fy::core::max_consumer_bytes);
      if (definitions.empty())
        throw fy::core::Error(fy::core::sqlstate::invalid_parameter,
                              "definitions must name at least one 'workflow@version'");
      if (definitions.size() > static_cast<std::size_t>(wf::max_definitions))
        throw fy::core::Error(fy::core::sqlstate::invalid_parameter,
                              "at most " + std::to_string(wf::max_definitions) + " definitions");
      std::vector<std::string> queues;
      std::set<std::string> seen;
      for (const std::string& d : definitions) {
        const wf::Definition def = wf::parse_definition(d);
        std::string q = wf::queue_name(def.workflow, def.version);
        if (seen.insert(q).second) queues.push_back(std::move(q));
      }
      if (max_runs < 1 || max_runs > wf::max_claim_runs)
        throw fy::core::Error(fy::core::sqlstate::invalid_parameter,
                              "max_runs must be between 1 and " + std::to_string(wf::max_claim_runs));
      const std::int64_t lease_usecs =
          lease ? fy::core::check_duration("lease", {0, 0, lease->count()}, fy::core::max_queue_duration_usecs) : 0;
      std::vector<ClaimedRun> out;
      session_.write([&](Db& db) {
        out.clear();
        const std::int64_t now = session_.now_usecs();
        for (const std::string& name : queues) {
          if (static_cast<int>(out.size()) >= max_runs) break;
          auto exists = db.query("SELECT 1 FROM queues WHERE tenant_id = ?1 AND queue = ?2");
          exists.bind(1, tenant).bind(2, name);
          if (!exists.step()) continue;  // nothing started yet
          // Until max_runs or an empty claim: a message that is not its run's live one takes a
          // place in a claim and is let go.
          for (bool more = true; more && static_cast<int>(out.size()) < max_runs;) {
            const Queue q = load(db, tenant, name);
            std::vector<Delivery> lapsed;
            const std::vector<Delivery> claimed =
                claim_in(db, q, worker, max_runs - static_cast<int>(out.size()),
                         lease_usecs > 0 ? lease_usecs : q.options.visibility_usecs, now, &lapsed);
            // The run a delivery names.
            struct Found {
              bool found = false, past_deadline = false, past_step_deadline = false;
              std::string state, workflow, input;
              std::optional<std::int64_t> msg_id;
              std::int64_t version = 0, cursor = 0, epoch = 0;
              std::optional<std::string> cursor_step;
            };
            const auto find = [&](const Delivery& c, const std::string& run_id) {
              if (c.payload.size() != 16)
                throw fy::core::Error(
                    fy::core::sqlstate::data_corrupted,
                    "workflow queue \"" + name + "\" holds message " + std::to_string(c.msg_id) + " that names no run");
              auto run = db.query(
                  "SELECT state, msg_id, coalesce(deadline <= ?3, 0), workflow, version, input,"
                  "       coalesce(step_deadline <= ?3, 0), step_cursor, cursor_step, epoch FROM wf_runs"
                  " WHERE tenant_id = ?1 AND run_id = ?2");
              run.bind(1, tenant).bind(2, run_id).bind(3, now);
              Found f;
              if (!run.step()) return f;
              f = {true,
                   run.int64(2) != 0,
                   run.int64(6) != 0,
                   run.text(0),
                   run.text(3),
                   run.text(5),
                   run.is_null(1) ? std::nullopt : std::optional<std::int64_t>(run.int64(1)),
                   run.int64(4),
                   run.int64(7),
                   run.int64(9),
                   column_text(run, 8)};
              return f;
            };
            // A running run whose owner ran past a step's timeout: that attempt is recorded failed.
            const auto record_timeout = [&](const Found& f, const std::string& run_id) -> std::optional<std::string> {
              if (f.state != "running" || !f.past_step_deadline || !f.cursor_step) return std::nullopt;
              record_failed_attempt(db, tenant, run_id, static_cast<std::int32_t>(f.cursor), *f.cursor_step,
                                    wf::step_timeout_error(*f.cursor_step), f.epoch, now);
              return f.cursor_step;
            };
            // A run whose deliveries lapsed on every attempt (dead-lettered by the claim) ends.
            for (const Delivery& c : lapsed) {
              const std::string run_id = fy::core::format_uuid(c.payload);
              const Found f = find(c, run_id);
              if (!f.found || f.msg_id != c.msg_id || (f.state != "running" && f.state != "compensating")) continue;
              const std::optional<std::string> timed_out = record_timeout(f, run_id);
              settle(db, tenant, run_id, wf::lapsed_state(f.state), std::nullopt, wf::lapsed_error(timed_out), now);
            }
            for (const Delivery& c : claimed) {
              const std::string run_id = fy::core::format_uuid(c.payload);
              const Found f = find(c, run_id);
              // A message that is not the run's live one (cancelled, retried, finished) is let go.
              if (!f.found || f.msg_id != c.msg_id || wf::is_finished(f.state)) {
                ack_in(db, q, c.msg_id, c.claim_token, now);
                continue;
              }
              const bool compensating = f.state == "compensating";
              // Past its deadline: timed out, compensating first if it has compensations to run
              // (their message comes in a later round). A compensating run finishes them.
              if (f.past_deadline && !compensating) {
                ack_in(db, q, c.msg_id, c.claim_token, now);
                settle(db, tenant, run_id, "timed_out", std::nullopt, "the run's deadline passed", now);
                continue;
              }
              // A run still running was claimed again: its owner's lease ran out. One whose step
              // ran past its timeout records that attempt as failed (the new owner runs it again).
              const std::int64_t takeover = f.state == "running" ? 1 : 0;
              record_timeout(f, run_id);
              ClaimedRun claimed_run{run_id,
                                     f.workflow,
                                     static_cast<int>(f.version),
                                     c.claim_token,
                                     compensating ? "compensating" : "running",
                                     wf::canonical(f.input, "input")};
              db.query(
                    "UPDATE wf_runs SET state = CASE WHEN state = 'compensating' THEN state ELSE 'running' END,"
                    "   epoch = ?3, owner = ?4, step_cursor = 0, cursor_step = NULL, step_deadline = NULL,"
                    "   takeovers = takeovers + ?5,"
                    "   taken_over_at = CASE WHEN ?5 > 0 THEN ?6 ELSE taken_over_at END,"
                    "   previous_owner = CASE WHEN ?5 > 0 THEN owner ELSE previous_owner END,"
                    "   updated_at = ?6 WHERE tenant_id = ?1 AND run_id = ?2")
                  .bind(1, tenant)
                  .bind(2, run_id)
                  .bind(3, c.claim_token)
                  .bind(4, worker)
                  .bind(5, takeover)
                  .bind(6, now)
                  .run();
              out.push_back(std::move(claimed_run));
            }
            more = !claimed.empty() || !lapsed.empty();  // a lapsed run may be compensating now
          }
        }
      });
      return out;
    });
  });
}

StepAnswer SqliteWorkflows::step(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                 std::string_view step, std::optional<Duration> timeout, std::optional<int> at) {
  return session_.measure("workflow.step", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      check_step_name(step);
      const std::int64_t timeout_usecs = timeout ? wf::check_step_timeout({0, 0, timeout->count()}) : 0;  // 0: none
      const std::optional<std::int32_t> named = named_position(at);
      StepAnswer answer;
      // A named step without a timeout usually writes nothing: it is answered in a read (no
      // write turn, no disk sync), unless a deadline of the step before is left to clear.
      bool writes = !named || timeout_usecs > 0;
      auto decide = [&](Db& db, bool may_write) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now);
        if (!may_write && owned.step_deadline) {
          writes = true;
          return;
        }
        if (named) check_named_position(db, tenant, id, *named, step, "workflow_step", false);
        const std::int32_t position = named ? *named : owned.cursor + 1;
        std::optional<wf::JournalEntry> entry;
        std::optional<std::string> result;
        auto q = db.query(
            "SELECT step, status, result, wake_at FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2 AND position = ?3");
        q.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position));
        if (q.step()) {
          entry = wf::JournalEntry{q.text(0), q.text(1),
                                   q.is_null(3) ? std::nullopt : std::optional<std::int64_t>(q.int64(3))};
          result = column_text(q, 2);
        }
        const bool done = wf::decide_step(entry, step, id, position, now) == wf::StepAnswer::done;
        // A step to run with a timeout: its deadline, and the owner's lease cut to it.
        const bool timed = !done && timeout_usecs > 0;
        const std::int64_t deadline = now + timeout_usecs;
        // The cursor moves unless the caller names positions, and then too for a step with a
        // timeout (a takeover past it reads the step there), as on PostgreSQL.
        const bool moves_cursor = !named || timeout_usecs > 0;
        if (moves_cursor || timed || owned.step_deadline) {
          auto cursor = db.query(
              "UPDATE wf_runs SET step_cursor = CASE WHEN ?6 THEN ?3 ELSE step_cursor END,"
              "   cursor_step = CASE WHEN ?6 THEN ?4 ELSE cursor_step END, step_deadline = ?5"
              " WHERE tenant_id = ?1 AND run_id = ?2");
          cursor.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position)).bind(4, step);
          cursor.bind(6, static_cast<std::int64_t>(moves_cursor ? 1 : 0));
          if (timed)
            cursor.bind(5, deadline);
          else
            cursor.bind_null(5);
          cursor.run();
        }
        if (timed) {
          db.query("UPDATE messages SET visible_at = ?2 WHERE msg_id = ?1 AND claim_token = ?3 AND visible_at > ?2")
              .bind(1, owned.msg_id)
              .bind(2, deadline)
              .bind(3, epoch)
              .run();
        }
        answer = StepAnswer{done, done && result ? std::optional(wf::canonical(*result, "result")) : std::nullopt,
                            wf::idempotency_key(id, position, step)};
      };
      if (!writes) session_.read([&](Db& db) { decide(db, false); });
      if (writes) session_.write([&](Db& db) { decide(db, true); });
      return answer;
    });
  });
}

void SqliteWorkflows::step_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                    std::string_view step, std::string_view result_json,
                                    const std::optional<std::string>& compensation, std::optional<int> at) {
  session_.measure("workflow.step_complete", [&] {
    const std::optional<std::int32_t> named = named_position(at);
    const std::string id = run_id_param(run_id);
    const std::string result = json_param(result_json, "result");
    core_guarded([&] {
      check_tenant_name(tenant);
      check_step_name(step);
      if (compensation) fy::core::check_name("compensation", true, *compensation, wf::max_step_bytes);
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now);
        const std::int32_t position =
            current_step_position(db, tenant, id, owned, named, step, "workflow_step_complete");
        if (owned.step_deadline) {  // recorded in time: the step's deadline no longer holds the lease
          db.query("UPDATE wf_runs SET step_deadline = NULL WHERE tenant_id = ?1 AND run_id = ?2")
              .bind(1, tenant)
              .bind(2, id)
              .run();
        }
        auto recorded = db.query(
            "SELECT status, result, compensation FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2 AND position = ?3");
        recorded.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position));
        if (recorded.step() && recorded.text(0) == "done") {
          // Recorded before (a retried call, or a replayed step): the same result is a no-op.
          const bool same = !recorded.is_null(1) && wf::canonical(recorded.text(1), "result") == result &&
                            column_text(recorded, 2) == compensation;
          if (!same) wf::throw_step_recorded(step, id, position, false);
          return;
        }
        auto q = db.query(
            "INSERT INTO wf_journal (tenant_id, run_id, position, step, status, result, compensation, epoch,"
            "   recorded_at) VALUES (?1, ?2, ?3, ?4, 'done', ?5, ?6, ?7, ?8)"
            " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET status = 'done', result = excluded.result,"
            "   error = NULL, compensation = excluded.compensation, epoch = excluded.epoch,"
            "   recorded_at = excluded.recorded_at");
        q.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position)).bind(4, step).bind(5, result);
        if (compensation)
          q.bind(6, *compensation);
        else
          q.bind_null(6);
        q.bind(7, epoch).bind(8, now).run();
      });
    });
  });
}

StepFailure SqliteWorkflows::step_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                       std::string_view step, std::string_view error, bool permanent,
                                       std::optional<int> at) {
  return session_.measure("workflow.step_fail", [&] {
    const std::optional<std::int32_t> named = named_position(at);
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      check_step_name(step);
      check_reason(error, "error");
      StepFailure outcome = StepFailure::Failed;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now);
        const std::int32_t position = current_step_position(db, tenant, id, owned, named, step, "workflow_step_fail");
        if (!record_failed_attempt(db, tenant, id, position, step, error, epoch, now))
          wf::throw_step_recorded(step, id, position, true);
        const Queue q = load(db, tenant, owned.queue);
        if (permanent) {
          ack_in(db, q, owned.msg_id, epoch, now);
        } else if (nack_in(db, q, owned.msg_id, epoch, error, false, now) == NackOutcome::Retry) {
          db.query("UPDATE wf_runs SET state = 'pending', updated_at = ?3 WHERE tenant_id = ?1 AND run_id = ?2")
              .bind(1, tenant)
              .bind(2, id)
              .bind(3, now)
              .run();
          outcome = StepFailure::Retry;
          return;
        }
        // Permanent, or the queue's max_attempts reached (the message is a dead letter now): the
        // run fails, compensating first if it has compensations to run.
        settle(db, tenant, id, "failed", std::nullopt, wf::step_error(step, error), now);
        outcome = StepFailure::Failed;
      });
      return outcome;
    });
  });
}

void SqliteWorkflows::sleep_until(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                  std::string_view step, TimePoint until, std::optional<int> position) {
  sleep(tenant, run_id, epoch, step, position, [&](std::int64_t) { return unix_usecs(until); });
}

void SqliteWorkflows::sleep_for(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                std::string_view step, Duration delay, std::optional<int> position) {
  sleep(tenant, run_id, epoch, step, position, [&](std::int64_t now) { return now + delay.count(); });
}

void SqliteWorkflows::sleep(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                            std::optional<int> at, const std::function<std::int64_t(std::int64_t)>& until_at) {
  session_.measure("workflow.sleep", [&] {
    const std::optional<std::int32_t> named = named_position(at);
    const std::string id = run_id_param(run_id);
    core_guarded([&] {
      check_tenant_name(tenant);
      check_step_name(step);
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const std::int64_t until = until_at(now);
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now);
        const std::int32_t position = current_step_position(db, tenant, id, owned, named, step, "workflow_sleep");
        auto recorded =
            db.query("SELECT status, wake_at FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2 AND position = ?3");
        recorded.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position));
        std::optional<std::int64_t> wake_at;
        if (recorded.step()) {
          // A sleep journaled before keeps its end (replayed code may compute another one).
          if (recorded.text(0) == "done" && recorded.is_null(1)) wf::throw_step_recorded(step, id, position, false);
          if (!recorded.is_null(1)) wake_at = recorded.int64(1);
        }
        if (!wake_at) {
          wake_at = until;
          db.query(
                "INSERT INTO wf_journal (tenant_id, run_id, position, step, status, result, wake_at, epoch,"
                "   recorded_at) VALUES (?1, ?2, ?3, ?4, 'done', ?5, ?6, ?7, ?8)"
                " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET status = 'done', result = excluded.result,"
                "   error = NULL, wake_at = excluded.wake_at, epoch = excluded.epoch, recorded_at = excluded.recorded_at")
              .bind(1, tenant)
              .bind(2, id)
              .bind(3, static_cast<std::int64_t>(position))
              .bind(4, step)
              .bind(5, wf::sleep_result(fy::core::format_timestamp(until)))
              .bind(6, until)
              .bind(7, epoch)
              .bind(8, now)
              .run();
        }
        Queue queue = load(db, tenant, owned.queue);
        ack_in(db, queue, owned.msg_id, epoch, now);
        queue = load(db, tenant, owned.queue);  // its usage after the ack
        const std::int64_t msg_id = hand_out(db, queue, id, owned.priority, now, wf::timer_delay(*wake_at, now));
        db.query(
              "UPDATE wf_runs SET state = 'sleeping', msg_id = ?3, updated_at = ?4 WHERE tenant_id = ?1 AND run_id = ?2")
            .bind(1, tenant)
            .bind(2, id)
            .bind(3, msg_id)
            .bind(4, now)
            .run();
      });
    });
  });
}

SignalWait SqliteWorkflows::wait_signal(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                        std::string_view step, std::string_view signal, Duration timeout,
                                        std::optional<int> at) {
  return session_.measure("workflow.wait_signal", [&] {
    const std::optional<std::int32_t> named = named_position(at);
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      check_step_name(step);
      fy::core::check_name("signal", true, signal, wf::max_step_bytes);
      const std::int64_t timeout_usecs =
          fy::core::check_duration("timeout", {0, 0, timeout.count()}, fy::core::max_queue_retention_usecs);
      wf::SignalAnswer answer;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now);
        // The step compared below (decide_wait: FY060 for another step at the position).
        if (named) check_named_position(db, tenant, id, *named, step, "workflow_wait_signal", false);
        const std::int32_t position = named ? *named : owned.cursor + 1;
        std::optional<wf::JournalEntry> entry;
        std::optional<std::string> result;
        auto q = db.query(
            "SELECT step, status, result FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2 AND position = ?3");
        q.bind(1, tenant).bind(2, id).bind(3, static_cast<std::int64_t>(position));
        if (q.step()) {
          entry = wf::JournalEntry{q.text(0), q.text(1), std::nullopt};
          result = column_text(q, 2);
        }
        const wf::WaitState& state = owned.wait;
        std::optional<std::string> signal_id, payload;
        if (!entry || entry->status != "done") {
          auto o = db.query(
              "SELECT signal_id, payload FROM wf_signals WHERE tenant_id = ?1 AND run_id = ?2 AND name = ?3"
              " AND consumed_at IS NULL ORDER BY sent_at, signal_id LIMIT 1");
          o.bind(1, tenant).bind(2, id).bind(3, signal);
          if (o.step()) {
            signal_id = o.text(0);
            payload = o.text(1);
          }
        }
        const wf::WaitAction action = wf::decide_wait(entry, step, id, position, signal_id.has_value(), state, now);
        switch (action) {
          case wf::WaitAction::replay:
            answer = wf::parse_signal_result(*result);
            break;
          case wf::WaitAction::receive:
            answer = {"received", wf::canonical(*payload, "payload")};
            db.query(
                  "UPDATE wf_signals SET consumed_at = ?4, consumed_position = ?5"
                  " WHERE tenant_id = ?1 AND run_id = ?2 AND signal_id = ?3")
                .bind(1, tenant)
                .bind(2, id)
                .bind(3, *signal_id)
                .bind(4, now)
                .bind(5, static_cast<std::int64_t>(position))
                .run();
            break;
          case wf::WaitAction::time_out:
            answer = {"timed_out", std::nullopt};
            break;
          case wf::WaitAction::wait: {
            const std::int64_t until = wf::wait_end(state, position, now, timeout_usecs);
            Queue queue = load(db, tenant, owned.queue);
            ack_in(db, queue, owned.msg_id, epoch, now);
            queue = load(db, tenant, owned.queue);  // its usage after the ack
            const std::int64_t msg_id = hand_out(db, queue, id, owned.priority, now, wf::timer_delay(until, now));
            db.query(
                  "UPDATE wf_runs SET state = 'waiting', msg_id = ?3, waiting_signal = ?4, wait_until = ?5,"
                  "   wait_position = ?6, updated_at = ?7 WHERE tenant_id = ?1 AND run_id = ?2")
                .bind(1, tenant)
                .bind(2, id)
                .bind(3, msg_id)
                .bind(4, signal)
                .bind(5, until)
                .bind(6, static_cast<std::int64_t>(position))
                .bind(7, now)
                .run();
            answer = {"waiting", std::nullopt};
            break;
          }
        }
        // Received or timed out: journaled, so a replay answers the same; either way but waiting,
        // the cursor moves past the step.
        if (action == wf::WaitAction::receive || action == wf::WaitAction::time_out)
          db.query(
                "INSERT INTO wf_journal (tenant_id, run_id, position, step, status, result, epoch, recorded_at)"
                " VALUES (?1, ?2, ?3, ?4, 'done', ?5, ?6, ?7)"
                " ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET status = 'done', result = excluded.result,"
                "   error = NULL, epoch = excluded.epoch, recorded_at = excluded.recorded_at")
              .bind(1, tenant)
              .bind(2, id)
              .bind(3, static_cast<std::int64_t>(position))
              .bind(4, step)
              .bind(5, wf::signal_result(answer))
              .bind(6, epoch)
              .bind(7, now)
              .run();
        if (action != wf::WaitAction::wait)
          db.query(
                "UPDATE wf_runs SET step_cursor = CASE WHEN ?6 THEN step_cursor ELSE ?3 END,"
                "   cursor_step = CASE WHEN ?6 THEN cursor_step ELSE ?4 END, step_deadline = NULL,"
                "   waiting_signal = CASE WHEN wait_position = ?3 THEN NULL ELSE waiting_signal END,"
                "   wait_until = CASE WHEN wait_position = ?3 THEN NULL ELSE wait_until END,"
                "   wait_position = CASE WHEN wait_position = ?3 THEN NULL ELSE wait_position END,"
                "   updated_at = ?5 WHERE tenant_id = ?1 AND run_id = ?2")
              .bind(1, tenant)
              .bind(2, id)
              .bind(3, static_cast<std::int64_t>(position))
              .bind(4, step)
              .bind(5, now)
              .bind(6, static_cast<std::int64_t>(named ? 1 : 0))  // a caller that names positions has no cursor
              .run();
      });
      return SignalWait{parse_wait_status(answer.status), answer.payload};
    });
  });
}

bool SqliteWorkflows::signal(std::string_view tenant, std::string_view run_id, std::string_view signal,
                             std::string_view payload_json, const std::optional<std::string>& signal_id) {
  return session_.measure("workflow.signal", [&] {
    const std::string id = run_id_param(run_id);
    const std::string payload = json_param(payload_json, "payload");
    const std::string sid = signal_id ? run_id_param(*signal_id) : fy::core::format_uuid(random_uuid());
    return core_guarded([&] {
      check_tenant_name(tenant);
      fy::core::check_name("signal", true, signal, wf::max_step_bytes);
      bool sent = false;
      session_.write([&](Db& db) { sent = send_signal(db, tenant, id, signal, payload, sid, session_.now_usecs()); });
      return sent;
    });
  });
}

std::optional<Compensation> SqliteWorkflows::compensation(std::string_view tenant, std::string_view run_id,
                                                          std::int64_t epoch) {
  return session_.measure("workflow.compensation", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      std::optional<Compensation> out;
      session_.write([&](Db& db) {
        owned_run(db, tenant, id, epoch, session_.now_usecs(), "compensating");
        out = next_compensation(db, tenant, id);
      });
      return out;
    });
  });
}

std::string SqliteWorkflows::compensation_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                                   int position) {
  return session_.measure("workflow.compensation_complete", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      std::string state;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now, "compensating");
        wf::check_next_compensation(position_of(next_compensation(db, tenant, id)), position, id);
        db.query(
              "UPDATE wf_journal SET compensation_status = 'done', compensation_error = NULL, compensated_at = ?4,"
              "   compensation_attempts = compensation_attempts + 1 WHERE tenant_id = ?1 AND run_id = ?2"
              "   AND position = ?3")
            .bind(1, tenant)
            .bind(2, id)
            .bind(3, static_cast<std::int64_t>(position))
            .bind(4, now)
            .run();
        state = "compensating";
        if (!next_compensation(db, tenant, id)) {
          // The last one: the run ends as it was going to.
          ack_in(db, load(db, tenant, owned.queue), owned.msg_id, epoch, now);
          state = settle(db, tenant, id, owned.compensate_to.value_or("failed"), std::nullopt, owned.error, now);
        }
      });
      return state;
    });
  });
}

StepFailure SqliteWorkflows::compensation_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                               int position, std::string_view error, bool permanent) {
  return session_.measure("workflow.compensation_fail", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      check_reason(error, "error");
      StepFailure outcome = StepFailure::Failed;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now, "compensating");
        const std::optional<Compensation> next = next_compensation(db, tenant, id);
        wf::check_next_compensation(position_of(next), position, id);
        db.query(
              "UPDATE wf_journal SET compensation_status = 'failed', compensation_error = ?4,"
              "   compensation_attempts = compensation_attempts + 1 WHERE tenant_id = ?1 AND run_id = ?2"
              "   AND position = ?3")
            .bind(1, tenant)
            .bind(2, id)
            .bind(3, static_cast<std::int64_t>(position))
            .bind(4, error)
            .run();
        const Queue q = load(db, tenant, owned.queue);
        if (permanent) {
          ack_in(db, q, owned.msg_id, epoch, now);
        } else if (nack_in(db, q, owned.msg_id, epoch, error, false, now) == NackOutcome::Retry) {
          outcome = StepFailure::Retry;
          return;
        }
        // Permanent, or the queue's max_attempts reached (the message is a dead letter now).
        // The run keeps its error; the compensation's is in the journal (recorded above).
        settle(db, tenant, id, "compensation_failed", std::nullopt, std::nullopt, now);
        outcome = StepFailure::Failed;
      });
      return outcome;
    });
  });
}

void SqliteWorkflows::end_run(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                              const char* operation, const char* state, const std::optional<std::string>& result,
                              const std::optional<std::string>& error) {
  session_.measure(operation, [&] {
    const std::string id = run_id_param(run_id);
    core_guarded([&] {
      check_tenant_name(tenant);
      if (error) check_reason(*error, std::string_view(state) == "failed" ? "error" : "reason");
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        finish_run(db, tenant, id, owned_run(db, tenant, id, epoch, now), epoch, state, result, error, now);
      });
    });
  });
}

void SqliteWorkflows::complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                               std::string_view result_json) {
  end_run(tenant, run_id, epoch, "workflow.complete", "completed", json_param(result_json, "result"), std::nullopt);
}

void SqliteWorkflows::fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                           std::string_view error) {
  end_run(tenant, run_id, epoch, "workflow.fail", "failed", std::nullopt, std::string(error));
}

void SqliteWorkflows::park(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                           std::string_view reason) {
  end_run(tenant, run_id, epoch, "workflow.park", "parked", std::nullopt, std::string(reason));
}

TimePoint SqliteWorkflows::extend(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                  Duration lease) {
  return session_.measure("workflow.extend", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      std::int64_t until = 0;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const OwnedRun owned = owned_run(db, tenant, id, epoch, now, "owned");  // running, or compensating
        const std::int64_t v =
            fy::core::check_duration("visibility", {0, 0, lease.count()}, fy::core::max_queue_duration_usecs);
        // Not past the deadline of a step with a timeout.
        until = extend_in(db, load(db, tenant, owned.queue), owned.msg_id, epoch,
                          wf::capped_lease(v, owned.step_deadline, now), now);
      });
      return from_unix_usecs(until);
    });
  });
}

bool SqliteWorkflows::cancel(std::string_view tenant, std::string_view run_id, std::string_view reason) {
  return session_.measure("workflow.cancel", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      check_reason(reason, "reason");
      bool cancelled = false;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        auto q = db.query("SELECT state FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2");
        q.bind(1, tenant).bind(2, id);
        if (!q.step()) wf::throw_unknown_run(id, tenant);
        // A compensating run finishes its compensations first.
        cancelled = !wf::is_finished(q.text(0)) && q.text(0) != "compensating";
        if (cancelled) settle(db, tenant, id, "cancelled", std::nullopt, std::string(reason), now);
      });
      return cancelled;
    });
  });
}

bool SqliteWorkflows::retry(std::string_view tenant, std::string_view run_id) {
  return session_.measure("workflow.retry", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      bool retried = false;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        auto q = db.query(
            "SELECT state, workflow, version, priority, EXISTS (SELECT 1 FROM wf_journal j WHERE j.tenant_id = ?1"
            "   AND j.run_id = ?2 AND j.compensation_status = 'done') FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2");
        q.bind(1, tenant).bind(2, id);
        if (!q.step()) wf::throw_unknown_run(id, tenant);
        // A failed run whose steps were compensated cannot replay them as done.
        retried = wf::is_retryable(q.text(0)) && (q.text(0) == "compensation_failed" || q.int64(4) == 0);
        if (!retried) return;
        Queue queue = workflow_queue(db, tenant, wf::queue_name(q.text(1), static_cast<std::int32_t>(q.int64(2))), now);
        const std::int64_t msg_id = hand_out(db, queue, id, static_cast<int>(q.int64(3)), now);
        db.query(
              "UPDATE wf_runs SET state = CASE WHEN state = 'compensation_failed' THEN 'compensating' ELSE 'pending' END,"
              "   msg_id = ?3, error = CASE WHEN state = 'compensation_failed' THEN error END, finished_at = NULL,"
              "   purge_at = NULL,"
              "   updated_at = ?4 WHERE tenant_id = ?1 AND run_id = ?2")
            .bind(1, tenant)
            .bind(2, id)
            .bind(3, msg_id)
            .bind(4, now)
            .run();
      });
      return retried;
    });
  });
}

RunStatus SqliteWorkflows::status(std::string_view tenant, std::string_view run_id, ReadClass /*read*/) {
  return session_.measure("workflow.status", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      RunStatus s;
      session_.read([&](Db& db) {
        auto q = db.query(
            "SELECT state, workflow, version, result, error, owner, epoch, updated_at FROM wf_runs"
            " WHERE tenant_id = ?1 AND run_id = ?2");
        q.bind(1, tenant).bind(2, id);
        if (!q.step()) wf::throw_unknown_run(id, tenant);
        const std::optional<std::string> result = column_text(q, 3);
        s = RunStatus{q.text(0),
                      q.text(1),
                      static_cast<int>(q.int64(2)),
                      result ? std::optional(wf::canonical(*result, "result")) : std::nullopt,
                      column_text(q, 4),
                      column_text(q, 5),
                      q.int64(6),
                      from_unix_usecs(q.int64(7))};
      });
      return s;
    });
  });
}

std::vector<JournalEntry> SqliteWorkflows::journal(std::string_view tenant, std::string_view run_id,
                                                   ReadClass /*read*/) {
  return session_.measure("workflow.journal", [&] {
    const std::string id = run_id_param(run_id);
    return core_guarded([&] {
      check_tenant_name(tenant);
      std::vector<JournalEntry> out;
      session_.read([&](Db& db) {
        out.clear();
        auto exists = db.query("SELECT 1 FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2");
        exists.bind(1, tenant).bind(2, id);
        if (!exists.step()) wf::throw_unknown_run(id, tenant);
        auto q = db.query(
            "SELECT position, step, status, result, epoch, recorded_at, error, attempts, compensation,"
            "       compensation_status, compensation_error FROM wf_journal"
            " WHERE tenant_id = ?1 AND run_id = ?2 ORDER BY position");
        q.bind(1, tenant).bind(2, id);
        while (q.step()) {
          const std::optional<std::string> result = column_text(q, 3);
          out.push_back({static_cast<int>(q.int64(0)), q.text(1), q.text(2),
                         result ? std::optional(wf::canonical(*result, "result")) : std::nullopt, q.int64(4),
                         from_unix_usecs(q.int64(5)), column_text(q, 6), static_cast<int>(q.int64(7)),
                         column_text(q, 8), column_text(q, 9), column_text(q, 10)});
        }
      });
      return out;
    });
  });
}

std::vector<RunSummary> SqliteWorkflows::list(std::string_view tenant, const std::optional<std::string>& state,
                                              int max_runs, ReadClass /*read*/) {
  return session_.measure("workflow.list", [&] {
    return core_guarded([&] {
      check_tenant_name(tenant);
      if (state) wf::check_state(*state);
      if (max_runs < 1 || max_runs > wf::max_list_runs)
        throw fy::core::Error(fy::core::sqlstate::invalid_parameter,
                              "max_runs must be between 1 and " + std::to_string(wf::max_list_runs));
      std::vector<RunSummary> out;
      session_.read([&](Db& db) {
        out.clear();
        auto q = db.query(
            "SELECT run_id, run_key, workflow, version, state, owner, epoch, error, updated_at FROM wf_runs"
            " WHERE tenant_id = ?1 AND (?2 IS NULL OR state = ?2) ORDER BY updated_at DESC, run_id LIMIT ?3");
        q.bind(1, tenant);
        if (state)
          q.bind(2, *state);
        else
          q.bind_null(2);
        q.bind(3, static_cast<std::int64_t>(max_runs));
        while (q.step())
          out.push_back({q.text(0), q.text(1), q.text(2), static_cast<int>(q.int64(3)), q.text(4), column_text(q, 5),
                         q.int64(6), column_text(q, 7), from_unix_usecs(q.int64(8))});
      });
      return out;
    });
  });
}

std::int64_t purge_runs(Db& db, std::int64_t now, int max_rows, const std::optional<std::string>& tenant) {
  std::vector<std::pair<std::string, std::string>> runs;
  {
    auto q = db.query(
        "SELECT tenant_id, run_id FROM wf_runs WHERE purge_at <= ?1 AND (?2 IS NULL OR tenant_id = ?2)"
        " ORDER BY purge_at LIMIT ?3");
    q.bind(1, now);
    bind_optional(q, 2, tenant);
    q.bind(3, static_cast<std::int64_t>(max_rows));
    while (q.step()) runs.emplace_back(q.text(0), q.text(1));
  }
  for (const auto& [t, id] : runs)
    for (const char* sql : {"DELETE FROM wf_journal WHERE tenant_id = ?1 AND run_id = ?2",
                            "DELETE FROM wf_signals WHERE tenant_id = ?1 AND run_id = ?2",
                            "DELETE FROM wf_runs WHERE tenant_id = ?1 AND run_id = ?2"})
      db.query(sql).bind(1, t).bind(2, id).run();
  return static_cast<std::int64_t>(runs.size());
}

}  // namespace forgeyard::detail
