// Durable workflows (contract §6.8, docs/workflows.md): the rules both backends share: names and
// limits, the internal queue of a definition, run states, the positional step comparison and the
// fence of every journal write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/input.hpp"

namespace fy::core::workflow {

inline constexpr std::size_t max_workflow_bytes = 100;  // "_wf." + name + "@" + version fits a queue name
inline constexpr std::size_t max_run_key_bytes = 255;
inline constexpr std::size_t max_step_bytes = 200;
inline constexpr std::size_t max_reason_bytes = 4096;
inline constexpr int max_definitions = 100;
inline constexpr std::int32_t max_claim_runs = 100;
// Inputs and results, in their canonical text (the client sends and returns that form).
inline constexpr std::size_t max_json_bytes = std::size_t{1} << 20;
inline constexpr int max_json_depth = 64;

// The queue that hands out the runs of one (workflow, version): "_wf.<workflow>@<version>".
// Names starting "_wf." are reserved: queue_create and queue_drop refuse them (22023).
inline constexpr std::string_view queue_prefix = "_wf.";
bool is_workflow_queue(std::string_view queue);
// 22023 for such a name given to queue_create or queue_drop.
void refuse_reserved_queue(std::string_view queue);
std::string queue_name(std::string_view workflow, std::int32_t version);
// 22023 unless the version is at least 1.
void check_version(std::int32_t version);

// 'name@version', as workflow_claim's definitions list them; 22023 for anything else.
struct Definition {
  std::string workflow;
  std::int32_t version = 0;
};
Definition parse_definition(std::string_view text);

// Run states (contract §6.8, plus `parked`: stopped on nondeterminism until an operator acts).
inline constexpr const char* states[] = {"pending",   "running", "sleeping",  "waiting",   "compensating",
                                         "completed", "failed",  "cancelled", "timed_out", "compensation_failed",
                                         "parked"};
// No worker ever runs it again (retry may start it again from failed or parked).
bool is_finished(std::string_view state);
// 22023 unless `state` is one of `states`.
void check_state(std::string_view state);
inline constexpr std::int32_t max_list_runs = 1000;
// workflow_retry takes these back to pending (compensation_failed: back to compensating).
bool is_retryable(std::string_view state);
// A run that ends in one of these (failed, cancelled, timed_out) with compensations to run goes to
// `compensating` first and ends in it once they ran (contract §6.8, sagas).
bool ends_with_compensation(std::string_view state);

// JSON text checked (22023 naming `argument`) and in its canonical form (core/canonical_json.hpp).
std::string canonical(std::string_view json, const char* argument);

// What the journal holds at a position, as workflow_step compares it.
struct JournalEntry {
  std::string step;
  std::string status;                   // done | failed
  std::optional<std::int64_t> wake_at;  // a sleep's end (µs since 1970): done only from then on
};
enum class StepAnswer { run, done };
// The n-th step call of an epoch against the journal's n-th row: none or a failed attempt of the
// same step: run it; the same step done: replay its result (a sleep only once `now` reached its
// end; before, run it: sleep again); another step name: FY060.
StepAnswer decide_step(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                       std::int32_t position, std::int64_t now);
// How long the message of a sleep ending at wake_at waits: at most a queue's longest delay (30
// days); a longer sleep wakes, finds its step not done yet, and sleeps again.
std::int64_t timer_delay(std::int64_t wake_at, std::int64_t now);
// A wait for a signal at a journal position (workflow_wait_signal). The run remembers the
// position it waits at and until when, so a run woken early waits on with the same end.
enum class WaitAction { replay, receive, time_out, wait };
struct WaitState {
  std::optional<std::int32_t> position;  // where the run waits, if it does
  std::optional<std::int64_t> until;
};
// replay: the position is journaled (another step name there is FY060); receive: a signal of the
// name is there; time_out: the wait at this position reached its end; wait: release the run.
WaitAction decide_wait(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                       std::int32_t position, bool signal_there, const WaitState& waiting, std::int64_t now);
// The end of the wait at `position`: the one recorded, else now + timeout.
std::int64_t wait_end(const WaitState& waiting, std::int32_t position, std::int64_t now, std::int64_t timeout);
// What a wait is journaled with, and read back: {"payload": ..., "status": "received" | "timed_out"}.
struct SignalAnswer {
  std::string status;                  // received | timed_out | waiting
  std::optional<std::string> payload;  // canonical JSON, when received
};
std::string signal_result(const SignalAnswer& answer);
SignalAnswer parse_signal_result(std::string_view json);

// The result a sleep is journaled with.
std::string sleep_result(std::string_view until_iso);

// The key a step with an outside effect hands to the outside system: the same for every attempt.
std::string idempotency_key(std::string_view run_id, std::int32_t position, std::string_view step);

// The run as a journal write finds it, locked. `live`: its delivery is pending with this epoch's
// claim token and has not run out.
struct Ownership {
  std::string state;
  std::int64_t epoch = 0;
  bool live = false;
};
// 42704 for a run the tenant does not have.
[[noreturn]] void throw_unknown_run(std::string_view run_id, std::string_view tenant);
// 22023 unless `step` is the epoch's current step (workflow_step moved the cursor to it).
void check_current_step(std::int32_t cursor, const std::optional<std::string>& cursor_step, std::string_view step,
                        const char* function);
// A call that names its step's position instead of the epoch's cursor (the caller counts its
// steps): `position` at least 1 (22023), and the step before it recorded done, since a journal is
// contiguous from 1 (22023 otherwise: `previous_status` is the journal's status at position - 1,
// none when no row is there); a row at `position` must be the same step (FY060, as decide_step).
std::int32_t check_position(std::int64_t position);
void check_position_follows(std::int32_t position, const std::optional<std::string>& previous_status,
                            std::string_view run_id, const char* function);
void check_same_step(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                     std::int32_t position);
// 22023: the step at `position` is recorded (done) already, with another result, or cannot fail.
[[noreturn]] void throw_step_recorded(std::string_view step, std::string_view run_id, std::int32_t position,
                                      bool failing);
// The error a run ends with when its step fails for good.
std::string step_error(std::string_view step, std::string_view error);

// Per-step timeouts: a step to run with a timeout must be recorded within it. The step call cuts
// its owner's lease to the step's deadline and no extend passes it, so a late owner is fenced off
// (FY001); a claim that takes the run over past the deadline records the attempt as failed with
// step_timeout_error, and the next owner runs the step again (the queue's max_attempts bounds it).
// 22023 unless the timeout is positive and at most a queue's longest duration.
std::int64_t check_step_timeout(const fy::core::Duration& timeout);
std::string step_timeout_error(std::string_view step);
// A run whose deliveries all lapsed (its owners died, hung or ran a step past its timeout on every
// attempt, up to the definition queue's max_attempts) ends: a running run failed (compensating
// first if it has compensations to run), a compensating one compensation_failed. `timed_out_step`:
// the step whose timeout the last owner ran past, if it did.
std::string lapsed_state(std::string_view state);
std::string lapsed_error(const std::optional<std::string>& timed_out_step);
// The lease an extend gives: `lease`, but not past a step's deadline.
std::int64_t capped_lease(std::int64_t lease, const std::optional<std::int64_t>& step_deadline, std::int64_t now);

// FY001 unless `epoch` owns the run: the run is in `as` (running, or compensating for the
// compensation calls; "owned" takes either, for workflow_extend), at that epoch, and its delivery
// is live.
void check_owner(const Ownership& run, std::int64_t epoch, std::string_view run_id, std::string_view as = "running");
// FY001 for an owner whose step cursor is gone (PostgreSQL keeps the cursors in an UNLOGGED table,
// which a crash, a failover or a restore empties) or belongs to a later epoch.
[[noreturn]] void throw_cursor_lost(std::int64_t epoch, std::string_view run_id);
// 40001 for a step call that waited for another step call of the same run and epoch: retry it.
[[noreturn]] void throw_concurrent_step(std::string_view run_id);

// Sagas: a step done with a compensation is undone, newest first, when its run fails, is cancelled
// or times out. The compensation of the step at `position` hands the outside system this key.
std::string compensation_key(std::string_view run_id, std::int32_t position, std::string_view step);
// 22023 unless `position` is the run's next compensation (`next`: none left when nullopt).
void check_next_compensation(const std::optional<std::int32_t>& next, std::int32_t position, std::string_view run_id);
// A run that ends compensation_failed (a compensation failed for good, or its deliveries lapsed)
// keeps the error it was compensating for: its first. The compensation's own error is in the
// journal (compensation_error), and workflow_stuck names it; a workflow_retry that lets the
// compensations finish ends the run with that first error.
bool keeps_error(std::string_view state);

// Children: a run started with a parent sends it, once, when it first ends (any finished state
// but parked), the signal "child:<run_id>" (its signal_id is the child's run id) with the payload
// {"error": ..., "result": ..., "state": ...} in canonical form.
std::string child_signal(std::string_view child_run_id);
bool tells_parent(std::string_view state);
std::string child_payload(std::string_view state, const std::optional<std::string>& result_json,
                          const std::optional<std::string>& error);

// workflow_start's options: deadline (an interval, as text), priority (a class name), parent
// (a run id), retention (an interval, as text: how long the run is kept once it finished).
// Unknown keys and bad values are 22023 naming them. Given one key at a time.
struct StartOptions {
  std::optional<std::string> deadline;   // interval text, parsed by the backend
  std::optional<std::string> retention;  // interval text, parsed by the backend
  int priority = 3;                      // interactive
  std::optional<std::string> parent;     // 16 bytes
};
void set_start_option(StartOptions& options, std::string_view key, std::string_view json_type, std::string_view value);
// How long a finished run is kept by default (maintain() removes it, its journal and signals,
// after that); a run's own retention is 1 second to 365 days.
inline constexpr std::int64_t default_retention_usecs = 30LL * 86'400'000'000LL;
std::int64_t check_retention(const Duration& retention);

}  // namespace fy::core::workflow
