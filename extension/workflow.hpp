// What the workflow functions share, split by phase like the queue's files and like their PL/pgSQL
// twins (workflow*.sql): workflow.cpp (a run's arguments, the owner's fence and step cursor, the
// queue's own calls on a run's messages, signals, the end of a run), workflow_start.cpp (start,
// claim), workflow_step.cpp (steps, compensations, sleep, signals), workflow_finish.cpp
// (complete, fail, park, extend, cancel, retry), workflow_read.cpp (status, journal, list).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/workflow.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"

namespace fy::workflow {

namespace wf = core::workflow;

#define FY_EQ " OPERATOR(pg_catalog.=) "
#define FY_RUN_KEY " WHERE tenant_id" FY_EQ "$1 AND run_id" FY_EQ "$2"

// The tenant and run_id arguments (0 and 1) of every function on one run.
struct Run {
  std::string tenant, id, text;
  pg::Value t, r;
};

Run run_args(FunctionCallInfo fcinfo);

[[noreturn]] inline void unknown_run(const Run& run) {
  wf::throw_unknown_run(run.text, run.tenant);
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
                    const char* as, RunLock how = RunLock::always);

// The step cursor of `epoch` (wf_cursors) into `owned`, locked against other step calls of the
// run if `lock`: FY001 when it is gone (the UNLOGGED table was emptied) or another epoch's.
// Locking, a wait that ends on a newer version of the row (another step call of this epoch moved
// the cursor meanwhile) is 40001: what this call read before the wait (the run's deadline, its
// snapshot) is no longer current, so the caller retries with a fresh one.
void read_cursor_in(pg::Table& cursors, const Run& run, std::int64_t epoch, Owned& owned, bool lock);

// Which calls read the step cursor: the ones that record the current step.
enum class WithCursor { no, yes };

// The same as one statement of its own, for the calls that go on with SPI.
Owned lock_owned(const Run& run, std::int64_t epoch, TimestampTz now, const char* as = "running",
                 WithCursor with_cursor = WithCursor::no);

// The queue's own calls on the run's message, so its counters, retries and dead letters hold.
void ack(pg::Spi& spi, const Run& run, const std::string& queue, std::int64_t msg_id, std::int64_t token);

// The run's next message (payload: the run id's 16 bytes), visible after `delay` µs.
std::int64_t enqueue(pg::Spi& spi, const std::string& tenant, const std::string& queue, const std::string& run_id,
                     int priority, std::int64_t delay = 0);

// Sends a run the signal `name`, in the caller's transaction: false for a repeated signal_id or a
// run that has finished; a run waiting for the signal is handed out at once (its timeout message
// is let go at claim). 42704 for a run the tenant does not have, unless `missing_ok` (a parent
// removed by its retention hears nothing).
bool send_signal(pg::Spi& spi, const Run& run, const std::string& name, const pg::Value& payload,
                 const std::string& signal_id, TimestampTz now, bool missing_ok = false);

// The run ends in `state` (its delivery let go by the caller). One that fails, is cancelled or
// times out with compensations to run is compensating first: a new message hands it out for
// them. One that ends compensation_failed keeps its error (wf::keeps_error): `error` is not
// written then. Returns the run's state now.
std::string settle(pg::Spi& spi, const Run& run, const std::string& state, const pg::Value& result,
                   const std::optional<std::string>& error, TimestampTz now);

// A failed attempt of the step at `position`, recorded unless the step is done there (false then).
bool record_failed_attempt(pg::Spi& spi, const Run& run, std::int32_t position, const std::string& step,
                           const std::string& error, std::int64_t epoch, TimestampTz now);

}  // namespace fy::workflow
