// The workflow worker (forgeyard/workflow_worker.hpp): threads that claim runs of the registered
// definitions and run their code with a context whose steps go through the fenced journal, and
// per run a lease keeper that extends the run's lease and says when it may have run out.
#include "forgeyard/workflow_worker.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/canonical_json.hpp"
#include "forgeyard/error.hpp"
#include "workflow_input.hpp"

namespace forgeyard {

namespace {

using Steady = std::chrono::steady_clock;

struct Counters {
  std::atomic<std::uint64_t> completed{0}, failed{0}, released{0}, parked{0}, lost{0}, sleeping{0}, steps_run{0},
      steps_replayed{0}, compensated{0}, compensations{0};
};

enum class Why { lost, released, failed, parked, sleeping };

// The worker's own RunInterrupted, with the reason it keeps count of.
class Interrupt final : public RunInterrupted {
 public:
  Interrupt(Why why, std::string text) : RunInterrupted(std::move(text)), why_(why) {}
  Why why() const noexcept { return why_; }

 private:
  Why why_;
};

// Sleeps for `d` or until `stop` is requested.
void sleep_for(Duration d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, d, [] { return false; });
}

// Keeps one run's lease: extends it every third of the lease. The lease may have run out once no
// extend sent within the last (lease - margin) succeeded, by the monotonic clock from the moment
// each request was sent, or once a step with a timeout passed it (the server cut the lease to the
// step's deadline); then, or at FY001, the run is lost.
class RunLease {
 public:
  RunLease(Workflows& workflows, const std::string& tenant, const ClaimedRun& run, Duration lease,
           Steady::time_point claimed)
      : workflows_(workflows),
        tenant_(tenant),
        run_(run),
        lease_(lease),
        margin_(std::min<Duration>(lease / 10, std::chrono::seconds(1))),
        valid_until_((claimed + lease - margin_).time_since_epoch().count()),
        thread_([this](std::stop_token stop) { keep(stop); }) {}
  ~RunLease() {
    thread_.request_stop();
    thread_.join();
  }
  RunLease(const RunLease&) = delete;
  RunLease& operator=(const RunLease&) = delete;

  bool lost() const { return lost_.get_token().stop_requested() || Steady::now().time_since_epoch().count() >= ends(); }
  std::stop_token token() const { return lost_.get_token(); }

  // A step with a timeout began (its request was sent at `sent`): the lease ends by sent + timeout.
  void cap(Steady::time_point sent, Duration timeout) {
    {
      std::lock_guard lock(mutex_);
      cap_ = (sent + timeout).time_since_epoch().count();
      ++generation_;
    }
    wake_keeper(false);
  }
  // The step was recorded in time: the lease is the run's again once an extend sent from now on
  // succeeds (the server cut every earlier one to the step's deadline), which is asked for at once.
  void uncap() {
    {
      std::lock_guard lock(mutex_);
      valid_until_ = std::min(valid_until_.load(), cap_.load());
      cap_ = uncapped;
      ++generation_;
    }
    wake_keeper(true);
  }

 private:
  static constexpr Steady::rep uncapped = std::numeric_limits<Steady::rep>::max();
  Steady::rep ends() const { return std::min(valid_until_.load(), cap_.load()); }
  void wake_keeper(bool extend) {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
      extend_now_ = extend_now_ || extend;
    }
    woken_cv_.notify_all();
  }

  void keep(std::stop_token stop) {
    Steady::time_point last_sent = Steady::now();
    while (!stop.stop_requested()) {
      bool extend_now = false;
      {
        std::unique_lock lock(mutex_);
        const Steady::time_point wake = std::min(last_sent + lease_ / 3, Steady::time_point{Steady::duration(ends())});
        woken_cv_.wait_until(lock, stop, wake, [&] { return woken_; });
        woken_ = false;
        std::swap(extend_now, extend_now_);
      }
      if (stop.stop_requested()) return;
      if (Steady::now().time_since_epoch().count() >= ends()) {
        lost_.request_stop();
        return;
      }
      if (!extend_now && Steady::now() < last_sent + lease_ / 3) continue;  // woken by a new cap
      std::uint64_t sent_in = 0;
      {
        std::lock_guard lock(mutex_);
        sent_in = generation_;
      }
      last_sent = Steady::now();
      try {
        workflows_.extend(tenant_, run_.run_id, run_.epoch, lease_);
        // An answer to a request sent before the last cap or uncap may have been cut to a step's
        // deadline: it does not lengthen the lease.
        std::lock_guard lock(mutex_);
        if (generation_ == sent_in) valid_until_ = (last_sent + lease_ - margin_).time_since_epoch().count();
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::StaleFence || e.kind() == ErrorKind::NotFound) {
          lost_.request_stop();
          return;
        }
        // Anything else (the server away): try again until the lease may have run out.
      }
    }
  }

  Workflows& workflows_;
  const std::string& tenant_;
  const ClaimedRun& run_;
  Duration lease_;
  Duration margin_;
  std::atomic<Steady::rep> valid_until_;
  std::atomic<Steady::rep> cap_{uncapped};
  std::mutex mutex_;
  std::condition_variable_any woken_cv_;
  bool woken_ = false, extend_now_ = false;
  std::uint64_t generation_ = 0;  // cap() and uncap() so far
  std::stop_source lost_;
  std::jthread thread_;
};

class Context final : public WorkflowContext {
 public:
  Context(Store& store, const std::string& tenant, const ClaimedRun& run, RunLease& lease, Counters& counters)
      : store_(store), tenant_(tenant), run_(run), lease_(lease), counters_(counters) {}

  const std::string& tenant() const override { return tenant_; }
  const std::string& run_id() const override { return run_.run_id; }
  const std::string& workflow() const override { return run_.workflow; }
  int version() const override { return run_.version; }
  std::int64_t epoch() const override { return run_.epoch; }
  const std::string& input() const override { return run_.input; }
  bool lost() const override { return lease_.lost(); }
  std::stop_token stop_token() const override { return lease_.token(); }

  using WorkflowContext::step;
  using WorkflowContext::transaction_step;

  std::string step(std::string_view name, const std::function<std::string(const StepContext&)>& fn,
                   const StepOptions& options) override {
    guard();
    StepAnswer answer;
    const Steady::time_point sent = Steady::now();
    const int at = position_ + 1;
    try {
      answer = workflows().step(tenant_, run_.run_id, run_.epoch, name, options.timeout, at);
    } catch (const Error& e) {
      interrupt(e);
    }
    if (answer.done) {
      ++counters_.steps_replayed;
      position_ = at;
      return *answer.result;
    }
    if (options.timeout) lease_.cap(sent, *options.timeout);
    std::string result;
    try {
      result = fn(StepContext{answer.idempotency_key});
    } catch (const RunInterrupted&) {
      throw;
    } catch (const std::exception& e) {
      guard();  // past its timeout, the attempt is the next owner's to record
      fail_step(name, e.what(), at);
    }
    guard();
    const std::string canonical = detail::json_param(result, "result");
    try {
      workflows().step_complete(tenant_, run_.run_id, run_.epoch, name, canonical, options.compensation, at);
    } catch (const Error& e) {
      interrupt(e);
    }
    if (options.timeout) lease_.uncap();
    ++counters_.steps_run;
    position_ = at;
    return canonical;
  }

  std::string transaction_step(std::string_view name,
                               const std::function<std::string(Transaction&, const StepContext&)>& fn,
                               const StepOptions& options) override {
    if (options.timeout)
      throw Error(ErrorKind::InvalidArgument, "22023",
                  "transaction step \"" + std::string(name) +
                      "\" cannot have a timeout: its open transaction holds the run, so a hung step could not be "
                      "taken over; run work that may hang in a step()");
    guard();
    std::string result;
    const int at = position_ + 1;
    try {
      std::unique_ptr<Transaction> tx = store_.begin();
      const StepAnswer answer = tx->workflows().step(tenant_, run_.run_id, run_.epoch, name, std::nullopt, at);
      if (answer.done) {
        tx->commit();
        ++counters_.steps_replayed;
        position_ = at;
        return *answer.result;
      }
      try {
        result = detail::json_param(fn(*tx, StepContext{answer.idempotency_key}), "result");
      } catch (const RunInterrupted&) {
        throw;
      } catch (const std::exception& e) {
        // The step's work rolls back; the failure is recorded on its own, at the same position.
        tx.reset();
        fail_step(name, e.what(), at);
      }
      guard();
      tx->workflows().step_complete(tenant_, run_.run_id, run_.epoch, name, result, options.compensation, at);
      tx->commit();
    } catch (const Error& e) {
      interrupt(e);  // the transaction (and the run row it locked) is gone by now
    }
    ++counters_.steps_run;
    position_ = at;
    return result;
  }

  void sleep_for(std::string_view name, Duration delay) override {
    sleep(name, [&](int at) { workflows().sleep_for(tenant_, run_.run_id, run_.epoch, name, delay, at); });
  }
  void sleep_until(std::string_view name, TimePoint until) override {
    sleep(name, [&](int at) { workflows().sleep_until(tenant_, run_.run_id, run_.epoch, name, until, at); });
  }

  std::optional<std::string> wait_signal(std::string_view name, std::string_view signal, Duration timeout) override {
    guard();
    SignalWait answer;
    const int at = position_ + 1;
    try {
      answer = workflows().wait_signal(tenant_, run_.run_id, run_.epoch, name, signal, timeout, at);
    } catch (const Error& e) {
      interrupt(e);
    }
    if (answer.status == SignalWait::Status::Waiting)
      throw Interrupt(Why::sleeping, "waiting for signal \"" + std::string(signal) + "\"");
    position_ = at;
    return answer.payload;
  }

  std::string start_child(std::string_view name, std::string_view workflow, int version, std::string_view input_json,
                          const WorkflowStartOptions& options) override {
    WorkflowStartOptions child = options;
    child.parent = run_.run_id;
    const std::string input = detail::json_param(input_json, "input");
    const std::string id = transaction_step(
        name,
        [&](Transaction& tx, const StepContext& step) {
          return fy::core::json_quote(
              tx.workflows().start(tenant_, workflow, version, step.idempotency_key, input, child));
        },
        std::nullopt);
    return id.substr(1, id.size() - 2);  // a uuid's JSON string: no escapes
  }

  std::optional<std::string> wait_child(std::string_view name, std::string_view child_run_id,
                                        Duration timeout) override {
    return wait_signal(name, "child:" + detail::run_id_param(child_run_id), timeout);
  }

  // What an error of a journal call means for the run: lost, parked, or an error to pass on.
  [[noreturn]] void interrupt(const Error& e) {
    switch (e.kind()) {
      case ErrorKind::StaleFence:
      case ErrorKind::NotFound:
        throw Interrupt(Why::lost, e.what());
      case ErrorKind::Nondeterminism:
        // FY060 aborted the call that met it; the park is a call of its own.
        try {
          workflows().park(tenant_, run_.run_id, run_.epoch, e.what());
        } catch (const Error& lost) {
          throw Interrupt(Why::lost, lost.what());
        }
        throw Interrupt(Why::parked, e.what());
      default:
        throw e;
    }
  }

  void guard() const {
    if (lease_.lost())
      throw Interrupt(Why::lost, "the lease of epoch " + std::to_string(run_.epoch) + " may have run out");
  }

 private:
  Workflows& workflows() { return store_.workflows(); }

  void sleep(std::string_view name, const std::function<void(int)>& start_timer) {
    guard();
    const int at = position_ + 1;
    try {
      if (workflows().step(tenant_, run_.run_id, run_.epoch, name, std::nullopt, at).done) {
        ++counters_.steps_replayed;
        position_ = at;
        return;
      }
      start_timer(at);
    } catch (const Error& e) {
      interrupt(e);
    }
    throw Interrupt(Why::sleeping, "sleeping at step \"" + std::string(name) + "\"");
  }

  [[noreturn]] void fail_step(std::string_view name, const std::string& error, int at) {
    StepFailure outcome = StepFailure::Failed;
    try {
      outcome = workflows().step_fail(tenant_, run_.run_id, run_.epoch, name, error.substr(0, 4096), false, at);
    } catch (const Error& e) {
      interrupt(e);
    }
    if (outcome == StepFailure::Retry)
      throw Interrupt(Why::released, "step \"" + std::string(name) + "\" failed, retried later: " + error);
    throw Interrupt(Why::failed, "step \"" + std::string(name) + "\" failed: " + error);
  }

  Store& store_;
  const std::string& tenant_;
  const ClaimedRun& run_;
  RunLease& lease_;
  Counters& counters_;
  // The steps of this epoch so far: the next step call names position_ + 1 (the store then keeps
  // no cursor for the epoch, and a step that only reads writes nothing).
  int position_ = 0;
};

void count(Counters& c, Why why) {
  switch (why) {
    case Why::lost:
      ++c.lost;
      break;
    case Why::released:
      ++c.released;
      break;
    case Why::failed:
      ++c.failed;
      break;
    case Why::parked:
      ++c.parked;
      break;
    case Why::sleeping:
      ++c.sleeping;
      break;
  }
}

// A compensating run: its compensations newest first, each recorded under the run's epoch.
void run_compensations(Workflows& wf, const std::string& tenant, const ClaimedRun& run,
                       const std::map<std::pair<std::string, std::string>, CompensationFunction>& compensations,
                       const WorkflowContext& context, Counters& counters) {
  const std::string definition = run.workflow + "@" + std::to_string(run.version);
  try {
    for (;;) {
      if (context.lost()) throw Interrupt(Why::lost, "the lease may have run out");
      const std::optional<Compensation> next = wf.compensation(tenant, run.run_id, run.epoch);
      if (!next) throw Interrupt(Why::lost, "no compensation left in a compensating run");
      const auto fn = compensations.find({definition, next->compensation});
      std::optional<std::string> error;
      if (fn == compensations.end()) {
        error = "no compensation \"" + next->compensation + "\" is registered for " + definition;
      } else {
        try {
          fn->second(*next);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (context.lost()) throw Interrupt(Why::lost, "the lease may have run out");
      if (error) {
        const bool permanent = fn == compensations.end();
        const StepFailure outcome =
            wf.compensation_fail(tenant, run.run_id, run.epoch, next->position, error->substr(0, 4096), permanent);
        throw Interrupt(outcome == StepFailure::Retry ? Why::released : Why::failed, *error);
      }
      ++counters.compensations;
      if (wf.compensation_complete(tenant, run.run_id, run.epoch, next->position) != "compensating") {
        ++counters.compensated;
        return;
      }
    }
  } catch (const Interrupt& i) {
    count(counters, i.why());
  } catch (const Error&) {
    ++counters.lost;  // FY001, or the server away: the run is left to its lease
  }
}

}  // namespace

WorkflowWorker::WorkflowWorker(Store& store, WorkflowWorkerOptions options)
    : store_(store), options_(std::move(options)) {}

void WorkflowWorker::add(const std::string& workflow, int version, WorkflowFunction fn) {
  functions_[workflow + "@" + std::to_string(version)] = std::move(fn);
}

void WorkflowWorker::add_compensation(const std::string& workflow, int version, const std::string& name,
                                      CompensationFunction fn) {
  compensations_[{workflow + "@" + std::to_string(version), name}] = std::move(fn);
}

WorkflowWorkerStats WorkflowWorker::run(std::stop_token stop) {
  if (options_.threads < 1) throw Error(ErrorKind::InvalidArgument, "22023", "threads must be at least 1");
  if (functions_.empty()) throw Error(ErrorKind::InvalidArgument, "22023", "no workflow was added to the worker");
  std::vector<std::string> definitions;
  for (const auto& entry : functions_) definitions.push_back(entry.first);
  Counters counters;
  std::mutex failure_mutex;
  std::exception_ptr failure;

  auto execute = [&](const ClaimedRun& run, Steady::time_point claimed) {
    Workflows& wf = store_.workflows();
    RunLease lease(wf, options_.tenant, run, options_.lease, claimed);
    Context context(store_, options_.tenant, run, lease, counters);
    const std::string definition = run.workflow + "@" + std::to_string(run.version);
    if (run.state == "compensating") {
      run_compensations(wf, options_.tenant, run, compensations_, context, counters);
      return;
    }
    const WorkflowFunction& fn = functions_.at(definition);
    try {
      std::string result;
      try {
        result = fn(context);
      } catch (const RunInterrupted&) {
        throw;
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::StaleFence || e.kind() == ErrorKind::NotFound ||
            e.kind() == ErrorKind::Nondeterminism)
          context.interrupt(e);
        if (e.retryable() || e.kind() == ErrorKind::CommitUnknown) throw Interrupt(Why::lost, e.what());
        wf.fail(options_.tenant, run.run_id, run.epoch, std::string(e.what()).substr(0, 4096));
        throw Interrupt(Why::failed, e.what());
      } catch (const std::exception& e) {
        wf.fail(options_.tenant, run.run_id, run.epoch, std::string(e.what()).substr(0, 4096));
        throw Interrupt(Why::failed, e.what());
      }
      context.guard();
      wf.complete(options_.tenant, run.run_id, run.epoch, detail::json_param(result, "result"));
      ++counters.completed;
    } catch (const Interrupt& i) {
      count(counters, i.why());
    } catch (const RunInterrupted&) {
      ++counters.lost;
    } catch (const Error&) {
      // A journal call that failed otherwise (the server away): the run is left to its lease,
      // and the next owner replays it.
      ++counters.lost;
    }
  };

  auto loop = [&] {
    try {
      Workflows& wf = store_.workflows();
      Duration idle = options_.idle_min;
      while (!stop.stop_requested()) {
        std::vector<ClaimedRun> runs;
        const Steady::time_point sent = Steady::now();
        try {
          runs = wf.claim(options_.tenant, options_.worker, definitions, 1, options_.lease);
        } catch (const Error& e) {
          if (!e.retryable()) throw;
          sleep_for(idle, stop);  // busy or away: not idle, try again
          idle = std::min(idle * 2, options_.idle_max);
          continue;
        }
        if (runs.empty()) {
          if (options_.stop_when_idle) return;
          sleep_for(idle, stop);
          idle = std::min(idle * 2, options_.idle_max);
          continue;
        }
        idle = options_.idle_min;
        execute(runs.front(), sent);
      }
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < options_.threads; ++i) threads.emplace_back(loop);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return WorkflowWorkerStats{counters.completed,   counters.failed,       counters.released,  counters.parked,
                             counters.lost,        counters.sleeping,     counters.steps_run, counters.steps_replayed,
                             counters.compensated, counters.compensations};
}

}  // namespace forgeyard
