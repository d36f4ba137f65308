// Durable workflows (docs/workflows.md, docs/sql-api.md#workflows): runs handed to workers that
// declared their (workflow, version), owned under an epoch that fences every journal write, and a
// journal replayed by the next owner. JSON travels as text: the client checks it and passes it on
// in its canonical form (no whitespace, keys sorted), and returns it in the same form from both
// backends.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/queues.hpp"
#include "forgeyard/types.hpp"

namespace forgeyard {

struct WorkflowStartOptions {
  std::optional<Duration> deadline;           // from now; a run past it ends timed_out
  Priority priority = Priority::Interactive;  // the class of the run's messages
  std::optional<std::string> parent;          // a run id of the same tenant
  std::optional<Duration> retention;          // kept this long once finished (default 30 days), then
                                              // maintain() removes it with its journal and signals
};

// A run handed to a worker: it owns it under `epoch` until its lease runs out.
struct ClaimedRun {
  std::string run_id;
  std::string workflow;
  int version = 0;
  std::int64_t epoch = 0;
  std::string state;  // running, or compensating: run its compensations (Workflows::compensation)
  std::string input;  // canonical JSON
};

// What workflow_step answers: run the step, or its recorded result (replay).
struct StepAnswer {
  bool done = false;
  std::optional<std::string> result;  // canonical JSON, when done
  std::string idempotency_key;        // <run_id>:<position>:<step>, the same in every attempt
};

// Retry: the run is released for the queue's backoff. Failed: the step (or compensation) failed for
// good: the run ends failed, or compensating first (compensation_failed for a compensation).
enum class StepFailure { Retry, Failed };

// The next compensation of a compensating run: the step done at `position` (newest first), the
// compensation's name as recorded with the step, the step's result, and the key to hand to the
// outside system, the same in every attempt.
struct Compensation {
  int position = 0;
  std::string step;
  std::string compensation;
  std::optional<std::string> result;  // canonical JSON
  std::string idempotency_key;        // <run_id>:<position>:<step>:compensate
};

// What workflow_wait_signal answers.
struct SignalWait {
  enum class Status { Received, Waiting, TimedOut } status = Status::Waiting;
  std::optional<std::string> payload;  // canonical JSON, when received
};

struct RunStatus {
  std::string state;
  std::string workflow;
  int version = 0;
  std::optional<std::string> result;  // canonical JSON, once completed
  std::optional<std::string> error;
  std::optional<std::string> owner;
  std::int64_t epoch = 0;
  TimePoint updated_at;
};

struct JournalEntry {
  int position = 0;
  std::string step;
  std::string status;                 // done | failed
  std::optional<std::string> result;  // canonical JSON, when done
  std::int64_t epoch = 0;
  TimePoint recorded_at;
  std::optional<std::string> error;
  int attempts = 0;
  std::optional<std::string> compensation;
  std::optional<std::string> compensation_status;  // done | failed, once it ran
  std::optional<std::string> compensation_error;   // its last error, while failed
};

// One line of Workflows::list.
struct RunSummary {
  std::string run_id;
  std::string run_key;
  std::string workflow;
  int version = 0;
  std::string state;
  std::optional<std::string> owner;
  std::int64_t epoch = 0;
  std::optional<std::string> error;
  TimePoint updated_at;
};

// schedule_create's options.
struct ScheduleOptions {
  std::string timezone = "UTC";  // a zone of the tz database, for cron specs
  int catch_up = 0;              // missed fires started besides the newest (0..1000); the rest are skipped
  std::string input = "{}";      // each run's input, JSON
};

// One line of Workflows::schedule_list.
struct ScheduleInfo {
  std::string schedule;
  std::string workflow;
  int version = 0;
  std::string spec;
  std::string timezone;
  int catch_up = 0;
  std::string input;  // canonical JSON
  TimePoint next_fire;
  std::optional<TimePoint> last_fire;
  std::int64_t fires = 0;    // runs started
  std::int64_t skipped = 0;  // missed fires not started
};

class FORGEYARD_API Workflows {
 public:
  virtual ~Workflows() = default;

  // In the caller's transaction (on a Transaction's workflows()). The same run_key returns the
  // first run; with another workflow, version or input IdempotencyMismatch (FY011).
  virtual std::string start(std::string_view tenant, std::string_view workflow, int version, std::string_view run_key,
                            std::string_view input_json = "{}", const WorkflowStartOptions& options = {}) = 0;
  // Up to max_runs runs of the definitions ("name@version"), each owned by `worker` under a new
  // epoch for `lease` (default: the definition queue's visibility timeout).
  virtual std::vector<ClaimedRun> claim(std::string_view tenant, std::string_view worker,
                                        const std::vector<std::string>& definitions, int max_runs = 1,
                                        std::optional<Duration> lease = std::nullopt) = 0;
  // The epoch's next step: run it, or its recorded result. Nondeterminism (FY060) when the
  // journal has another step at this position; StaleFence (FY001) for an owner that lost the run.
  // `position` (on this call and on step_complete, step_fail, sleep_* and wait_signal): the caller
  // counts its steps, 1 for its first of the epoch and one more per step, and the store keeps no
  // cursor for it (a step() without a timeout then writes nothing: no commit to wait for);
  // InvalidArgument (22023) unless the step before it is recorded done. Name a position on every
  // call of an epoch or on none (WorkflowWorker names them).
  // With a timeout, a step to run must be recorded within it: the run's lease ends by then at the
  // latest (extend never passes it; extend once the step is recorded), and a run taken over past
  // it has the attempt recorded as failed ("ran past its timeout").
  virtual StepAnswer step(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                          std::optional<Duration> timeout = std::nullopt,
                          std::optional<int> position = std::nullopt) = 0;
  // Records the current step's result (in the caller's transaction, with the step's own work).
  virtual void step_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                             std::string_view step, std::string_view result_json,
                             const std::optional<std::string>& compensation = std::nullopt,
                             std::optional<int> position = std::nullopt) = 0;
  virtual StepFailure step_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                std::string_view step, std::string_view error, bool permanent = false,
                                std::optional<int> position = std::nullopt) = 0;
  // A durable timer as the current step (step() answered run): journaled with its end, the run is
  // released (sleeping) and handed out again then, when the step replays as done. A sleep
  // journaled before keeps its first end. sleep_for counts from the store's clock.
  virtual void sleep_until(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                           TimePoint until, std::optional<int> position = std::nullopt) = 0;
  virtual void sleep_for(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                         Duration delay, std::optional<int> position = std::nullopt) = 0;
  // The epoch's next step waits for `signal`: Received (the oldest signal of the name not yet
  // consumed, also one sent before the wait), Waiting (the run is released until a signal or the
  // timeout: stop), or TimedOut. A replay answers as first recorded.
  virtual SignalWait wait_signal(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                 std::string_view step, std::string_view signal, Duration timeout,
                                 std::optional<int> position = std::nullopt) = 0;
  // In the caller's transaction; a run waiting for it is handed out at once. False for a repeated
  // signal_id or a run that has finished.
  virtual bool signal(std::string_view tenant, std::string_view run_id, std::string_view signal,
                      std::string_view payload_json = "{}",
                      const std::optional<std::string>& signal_id = std::nullopt) = 0;
  // Sagas: a run that fails, is cancelled or times out with steps done that name a compensation
  // is compensating; its owner (claim answered state "compensating") runs them newest first. The
  // next one, or nullopt when none is left. StaleFence (FY001) for an owner that lost the run.
  virtual std::optional<Compensation> compensation(std::string_view tenant, std::string_view run_id,
                                                   std::int64_t epoch) = 0;
  // Records the compensation at `position` as done (in the caller's transaction); returns the
  // run's state: "compensating" while more are left, else the state it ended in.
  // InvalidArgument (22023) unless `position` is the next compensation.
  virtual std::string compensation_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                            int position) = 0;
  // Retry (released for the queue's backoff) or Failed (permanent, or max_attempts reached: the
  // run ends compensation_failed; retry() resumes its compensations).
  virtual StepFailure compensation_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                        int position, std::string_view error, bool permanent = false) = 0;
  virtual void complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                        std::string_view result_json) = 0;
  virtual void fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view error) = 0;
  // After Nondeterminism, in a new transaction: the run waits for an operator (retry).
  virtual void park(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view reason) = 0;
  // The owner's lease runs until the returned time.
  virtual TimePoint extend(std::string_view tenant, std::string_view run_id, std::int64_t epoch, Duration lease) = 0;
  // False for a run that had finished or is compensating. A run with compensations to run is
  // compensating first.
  virtual bool cancel(std::string_view tenant, std::string_view run_id, std::string_view reason) = 0;
  // A failed or parked run is handed out again (false for other states, and for a failed run whose
  // compensations ran); a compensation_failed run resumes its compensations.
  virtual bool retry(std::string_view tenant, std::string_view run_id) = 0;
  // NotFound (42704) for a run the tenant does not have.
  virtual RunStatus status(std::string_view tenant, std::string_view run_id, ReadClass read = {}) = 0;
  virtual std::vector<JournalEntry> journal(std::string_view tenant, std::string_view run_id, ReadClass read = {}) = 0;
  // Schedules: `spec` is 5 cron fields (minute hour day-of-month month day-of-week, read in
  // options.timezone), a macro (@hourly, @daily, @weekly, @monthly, @yearly) or "@every <interval>"
  // ("15m", "1h30m"; fires at multiples of it since 1970 UTC). Each fire starts a run with run_key
  // "<schedule>@<fire time>". The same definition again is a no-op, another one InvalidArgument
  // (42710); a bad spec, zone or option InvalidArgument (22023).
  virtual void schedule_create(std::string_view tenant, std::string_view schedule, std::string_view workflow,
                               int version, std::string_view spec, const ScheduleOptions& options = {}) = 0;
  virtual bool schedule_drop(std::string_view tenant, std::string_view schedule) = 0;
  // Starts the runs of the due schedules (of `tenant`, or all): safe from several places at once,
  // each fire starts one run. Returns the runs started. Store::maintain calls it too.
  virtual int schedule_tick(const std::optional<std::string>& tenant = std::nullopt) = 0;
  virtual std::vector<ScheduleInfo> schedule_list(std::string_view tenant, ReadClass read = {}) = 0;
  // The tenant's runs, in one state or all, most recently changed first (1..1000 of them).
  virtual std::vector<RunSummary> list(std::string_view tenant, const std::optional<std::string>& state = std::nullopt,
                                       int max_runs = 100, ReadClass read = {}) = 0;
};

}  // namespace forgeyard
