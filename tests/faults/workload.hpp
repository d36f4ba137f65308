// The fault workloads: client threads (and, on SQLite, processes) that run leases with fenced
// writes, compare-and-set read-modify-write, idempotent commands, queue producers and inbox
// consumers and audit appends against one store, recording every operation in a history; then
// the state read back at the end, for the checker (tests/history/checker.hpp).
// Only the public client API is used.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "forgeyard/forgeyard.hpp"
#include "history.hpp"

namespace faults {

// What one run works on; every name carries the run id, so runs on one database never meet.
struct Names {
  explicit Names(const std::string& run);
  std::string tenant;
  std::string work_queue = "work";
  std::string effects_queue = "effects";  // one message per effect (inbox consumer, idempotent command)
  std::string consumer_group;             // the inbox's consumer name, shared by every consumer
  std::string cas_table;                  // an SQL identifier
  int cas_rows = 4;                       // rows 0 .. cas_rows-1: read-modify-write, one row per op
  int pair_rows = 2;                      // rows cas_rows, cas_rows+1: both in one transaction
  std::vector<std::string> lease_resources{"res-0", "res-1"};
  std::string audit_tenant;
  std::string workflow = "fault.steps";  // its runs: workflow_steps steps, each effect a message
  int workflow_steps = 3;
  int max_runs_per_process = 60;
  // The audit chain that records the fenced writes of a lease resource, in commit order.
  std::string lease_log_tenant(const std::string& resource) const { return tenant + "-log-" + resource; }
};

// A new random UUID (version 4), lowercase.
std::string new_uuid();

// Creates the queues, the compare-and-set table and its rows. `exec_sql` runs the backend's own
// DDL (libpq or sqlite3); the rest is the public API. `sqlite` picks the DDL's dialect.
void set_up(forgeyard::Store& store, const Names& names, bool sqlite,
            const std::function<void(const std::string&)>& exec_sql);

class Workload {
 public:
  Workload(const Names& names, history::Recorder& recorder, int process);

  // Each loop runs until `stop`.
  void producer(forgeyard::Store& store, const std::atomic<bool>& stop);
  // stale_sometimes: now and then sleep past the visibility timeout before consuming, so the
  // token goes stale (off while draining after the faults).
  void consumer(forgeyard::Store& store, const std::atomic<bool>& stop, bool stale_sometimes = true);
  void lease_worker(forgeyard::Store& store, const std::atomic<bool>& stop);
  // Read-modify-write of one row at a time, rows [first, first + count).
  void cas_worker(forgeyard::Store& store, const std::atomic<bool>& stop, int first, int count);
  // Both pair rows in one transaction, in random order: under SERIALIZABLE and with row locks
  // taken in opposite orders this provokes serialization failures and deadlocks.
  void pair_worker(forgeyard::Store& store, const std::atomic<bool>& stop);
  void idempotent_worker(forgeyard::Store& store, const std::atomic<bool>& stop);
  void audit_worker(forgeyard::Store& store, const std::atomic<bool>& stop);
  // Starts workflow runs (each retried with its run_key until it answers) and runs a
  // WorkflowWorker over them by turns; each step enqueues its effect "wf:<run_key>/<step>" in the
  // step's transaction, so a step's effect happens once or the checker sees it twice.
  void workflow_worker(forgeyard::Store& store, const std::atomic<bool>& stop);

  // Errors the operations ended with, by "Kind/SQLSTATE".
  std::map<std::string, std::int64_t> errors() const;
  // Sleep this long inside some transactions before COMMIT, so that a kill lands mid-transaction.
  void set_pause_in_transaction(int max_ms) { pause_ms_ = max_ms; }
  // How long an operation that found the server away (Unavailable) waits before the next, at
  // least: the first of up to three times this (default 10 ms). Each reconnect through a
  // multi-host URL may start a backend on a read-only node, so the failover drill waits longer.
  void set_unavailable_backoff(int min_ms) { backoff_ms_ = min_ms; }

 private:
  enum class Phase { InTransaction, Commit };
  // Settles op `id` from the exception in flight: in a transaction before COMMIT nothing took
  // effect (failed); at COMMIT, or an autocommit call, a lost connection, a timeout or an
  // unexpected error leaves the outcome unknown.
  void settle(std::size_t id, Phase phase);
  void produce_many(forgeyard::Store& store, const std::atomic<bool>& stop);
  std::string error_kind();  // "Kind/SQLSTATE" of the exception in flight, counted
  std::string tag();
  int random_below(int n);
  void pause();

  Names names_;
  history::Recorder& rec_;
  int process_;
  std::atomic<std::int64_t> next_{0};
  std::atomic<int> pause_ms_{0};
  std::atomic<int> backoff_ms_{10};
  mutable std::mutex mutex_;
  std::mt19937_64 rng_;
  std::map<std::string, std::int64_t> errors_;
};

// After the faults: a clean store drains the work queue through the inbox consumer (recorded
// like any consume) and finishes the workflow runs it can, then reads everything back into
// `recorder` as observations: effects, fenced writes, compare-and-set rows, audit chains and their
// verification, workflow runs and their steps' effects.
void read_back(forgeyard::Store& store, const Names& names, Workload& workload, history::Recorder& recorder);

// "name=count name=count" of a map.
std::string format_counts(const std::map<std::string, std::int64_t>& counts);

}  // namespace faults
