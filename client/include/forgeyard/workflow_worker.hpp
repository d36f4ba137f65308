// Workflows as C++ functions (docs/workflows.md#the-c-api): a workflow is a function of a
// context whose steps replay their recorded results, and a worker runs registered
// (workflow, version) pairs on a pool of threads, keeps each run's lease alive and stops a run the
// moment its lease may have run out.
#pragma once

#include "forgeyard/export.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "forgeyard/store.hpp"
#include "forgeyard/workflows.hpp"

namespace forgeyard {

// What a step's function gets: the key to hand to an outside system, the same in every attempt.
struct StepContext {
  std::string idempotency_key;
};

// Thrown by a context call when the run must stop where it is: the lease was lost (another worker
// owns the run now, or it was cancelled), a step failed and the run was released for a retry or
// ended, or the code no longer replays its journal and the run was parked. The worker catches
// it; workflow code must let it pass (a catch (...) that swallows it keeps a run it lost).
class FORGEYARD_API RunInterrupted : public std::exception {
 public:
  explicit RunInterrupted(std::string why) : why_(std::move(why)) {}
  const char* what() const noexcept override { return why_.c_str(); }

 private:
  std::string why_;
};

// How a step runs. `compensation` names what undoes it (WorkflowWorker::add_compensation): should
// the run fail, be cancelled or time out later, the compensations of its steps run, newest first.
// `timeout`: the step must be recorded within it. The run's lease ends by then at the latest:
// lost() turns true and stop_token() is requested at that moment, and the run is taken over once
// the timeout passed; the attempt is recorded as failed ("ran past its timeout") and the next
// owner runs the step again (the definition queue's max_attempts bounds the attempts). A
// transaction_step takes no timeout (InvalidArgument): its open transaction holds the run, so a
// hung one could not be taken over.
struct StepOptions {
  std::optional<std::string> compensation;
  std::optional<Duration> timeout;
};

class FORGEYARD_API WorkflowContext {
 public:
  virtual ~WorkflowContext() = default;
  virtual const std::string& tenant() const = 0;
  virtual const std::string& run_id() const = 0;
  virtual const std::string& workflow() const = 0;
  virtual int version() const = 0;
  virtual std::int64_t epoch() const = 0;
  virtual const std::string& input() const = 0;  // canonical JSON

  // A step with an outside effect. `fn` runs unless the journal holds the step's result, and
  // returns the result as JSON; it is recorded after `fn` returns, so `fn` runs at least once:
  // give the outside system the idempotency key. Returns the result (recorded or new), canonical.
  // An exception from `fn` fails the step: the run is released for the queue's retry (or ends
  // failed once its attempts are used up) and RunInterrupted is thrown. StepOptions: a
  // compensation and a timeout.
  virtual std::string step(std::string_view name, const std::function<std::string(const StepContext&)>& fn,
                           const StepOptions& options) = 0;
  std::string step(std::string_view name, const std::function<std::string(const StepContext&)>& fn,
                   const std::optional<std::string>& compensation = std::nullopt) {
    return step(name, fn, StepOptions{compensation, std::nullopt});
  }
  // A step whose work is in this database: `fn` runs inside a Transaction that also records the
  // result, so the work and its record commit together, exactly once.
  virtual std::string transaction_step(std::string_view name,
                                       const std::function<std::string(Transaction&, const StepContext&)>& fn,
                                       const StepOptions& options) = 0;
  std::string transaction_step(std::string_view name,
                               const std::function<std::string(Transaction&, const StepContext&)>& fn,
                               const std::optional<std::string>& compensation = std::nullopt) {
    return transaction_step(name, fn, StepOptions{compensation, std::nullopt});
  }
  // A durable timer: the run is released and handed out again `delay` from now (by the store's
  // clock, the first time this step runs; a replay keeps that end), then this step is done. The
  // call ends the run's execution here (RunInterrupted); the next owner replays past it.
  virtual void sleep_for(std::string_view name, Duration delay) = 0;
  virtual void sleep_until(std::string_view name, TimePoint until) = 0;
  // Waits for a signal sent to this run (Workflows::signal), also one sent before: its payload,
  // or nullopt once `timeout` passed. While nothing came, the run is released until a signal or
  // the timeout (RunInterrupted); the next owner replays to here and gets the answer.
  virtual std::optional<std::string> wait_signal(std::string_view name, std::string_view signal, Duration timeout) = 0;
  // Starts a child run (of the same tenant, with this run as its parent) as the step `name`: the
  // child's run_key is the step's idempotency key, so a replay returns the same child. Returns
  // the child's run id.
  virtual std::string start_child(std::string_view name, std::string_view workflow, int version,
                                  std::string_view input_json = "{}", const WorkflowStartOptions& options = {}) = 0;
  // Waits, as wait_signal does, for the child to end: {"error": ..., "result": ..., "state": ...}
  // (the state it first ended in: completed, failed, cancelled, timed_out or
  // compensation_failed), or nullopt once `timeout` passed.
  virtual std::optional<std::string> wait_child(std::string_view name, std::string_view child_run_id,
                                                Duration timeout) = 0;
  // True once the lease may have run out (judged by the local monotonic clock) or was lost: stop.
  virtual bool lost() const = 0;
  // Requested at the same moment lost() turns true, for long work to wait on.
  virtual std::stop_token stop_token() const = 0;
};

// The run's code: returns the run's result as JSON. An exception (other than RunInterrupted)
// ends the run failed with its message.
using WorkflowFunction = std::function<std::string(WorkflowContext&)>;
// Undoes one step of a run that failed, was cancelled or timed out: gets the step's position,
// name and recorded result and the idempotency key for the outside system. An exception fails the
// attempt (retried with the queue's backoff; at max_attempts the run ends compensation_failed).
using CompensationFunction = std::function<void(const Compensation&)>;

struct WorkflowWorkerOptions {
  std::string tenant;
  std::string worker = "workflow-worker";  // the owner's name in the runs
  int threads = 2;                         // runs in parallel
  Duration lease = std::chrono::seconds(30);
  Duration idle_min = std::chrono::milliseconds(50);  // first sleep when nothing is runnable
  Duration idle_max = std::chrono::seconds(2);        // the sleep doubles up to this
  bool stop_when_idle = false;                        // return once nothing is runnable (scripts, tests)
};

struct WorkflowWorkerStats {
  // sleeping: runs released to a timer or to wait for a signal.
  // compensated: runs whose compensations all ran (they ended failed, cancelled or timed_out);
  // compensations: compensations that ran.
  std::uint64_t completed = 0, failed = 0, released = 0, parked = 0, lost = 0, sleeping = 0, steps_run = 0,
                steps_replayed = 0, compensated = 0, compensations = 0;
};

class FORGEYARD_API WorkflowWorker {
 public:
  WorkflowWorker(Store& store, WorkflowWorkerOptions options);
  // The code of one (workflow, version); a worker claims only the runs of what it registered.
  void add(const std::string& workflow, int version, WorkflowFunction fn);
  // A compensation named by the steps of (workflow, version). A step naming one that is not
  // registered ends its run compensation_failed should it come to compensating.
  void add_compensation(const std::string& workflow, int version, const std::string& name, CompensationFunction fn);
  // Claims and runs until `stop` is requested (a run in progress is finished first), or, with
  // stop_when_idle, until nothing is runnable.
  WorkflowWorkerStats run(std::stop_token stop);

 private:
  Store& store_;
  WorkflowWorkerOptions options_;
  std::map<std::string, WorkflowFunction> functions_;                                  // by "name@version"
  std::map<std::pair<std::string, std::string>, CompensationFunction> compensations_;  // by it and name
};

}  // namespace forgeyard
