#include "forgeyard/worker.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "forgeyard/error.hpp"
#include "instruments.hpp"

namespace forgeyard {

namespace {

// Keeps the delivery whose handler is running invisible: extends it every third of the
// visibility until the handler returns.
class Heartbeat {
 public:
  Heartbeat(Queues& queues, const WorkerOptions& options, WorkerStats& stats)
      : queues_(queues), options_(options), stats_(stats), thread_([this](std::stop_token s) { run(s); }) {}
  ~Heartbeat() {
    thread_.request_stop();
    changed_.notify_all();
  }
  void start(const Delivery& d) {
    std::lock_guard lock(mutex_);
    current_ = Ack{d.msg_id, d.claim_token};
    changed_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mutex_);
    current_.reset();
  }

 private:
  void run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    const auto every = options_.visibility / 3;
    while (!stop.stop_requested()) {
      changed_.wait(lock, stop, [&] { return current_.has_value(); });
      if (stop.stop_requested()) return;
      const Ack watched = *current_;
      if (changed_.wait_for(lock, stop, every, [&] { return current_ != watched; })) continue;
      if (stop.stop_requested()) return;
      lock.unlock();
      try {
        queues_.extend(options_.tenant, options_.queue, watched.first, watched.second, options_.visibility);
        ++stats_.extended;
      } catch (const Error& e) {
        detail::log().warn("worker could not extend message {}: {}", watched.first, e.what());
      }
      lock.lock();
    }
  }

  Queues& queues_;
  const WorkerOptions& options_;
  WorkerStats& stats_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::optional<Ack> current_;
  std::jthread thread_;
};

}  // namespace

WorkerStats run_worker(Queues& queues, const WorkerOptions& options, const Handler& handler, std::stop_token stop) {
  WorkerStats stats;
  Heartbeat heartbeat(queues, options, stats);
  std::vector<Ack> acks;
  Duration idle = options.idle_min;
  std::mutex sleep_mutex;
  std::condition_variable_any woken;
  auto ack_one_by_one = [&] {
    for (const Ack& a : acks) {
      try {
        queues.ack(options.tenant, options.queue, a.first, a.second);
        ++stats.acked;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::StaleFence) throw;
        ++stats.stale;  // that delivery lapsed and went to someone else
      }
    }
    acks.clear();
  };
  while (!stop.stop_requested()) {
    std::vector<Delivery> batch;
    try {
      batch = queues.ack_and_claim(options.tenant, options.queue, options.consumer, acks, options.batch,
                                   options.visibility);
      stats.acked += acks.size();
      acks.clear();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::StaleFence) {
        ack_one_by_one();  // one lapsed delivery must not undo the others' acks
        continue;
      }
      if (!e.retryable()) throw;
      // Transient (connection lost, busy): the acks stay pending; try again after a pause.
      detail::log().warn("worker on {}: {}; retrying", options.queue, e.what());
      std::unique_lock lock(sleep_mutex);
      woken.wait_for(lock, stop, idle, [] { return false; });
      idle = std::min(idle * 2, options.idle_max);
      continue;
    }
    if (batch.empty()) {
      ++stats.idle_polls;
      if (options.stop_when_idle) break;
      std::unique_lock lock(sleep_mutex);
      woken.wait_for(lock, stop, idle, [] { return false; });
      idle = std::min(idle * 2, options.idle_max);
      continue;
    }
    idle = options.idle_min;
    for (const Delivery& d : batch) {
      HandlerResult result;
      heartbeat.start(d);
      try {
        result = handler(d);
      } catch (const std::exception& e) {
        result = HandlerResult::retry(e.what());
      }
      heartbeat.stop();
      if (result.kind == HandlerResult::Kind::Success) {
        acks.emplace_back(d.msg_id, d.claim_token);
        continue;
      }
      try {
        const NackOutcome outcome = queues.nack(options.tenant, options.queue, d.msg_id, d.claim_token, result.error,
                                                result.kind == HandlerResult::Kind::Fail);
        ++(outcome == NackOutcome::Dead ? stats.dead : stats.retried);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::StaleFence) throw;
        ++stats.stale;  // the delivery lapsed and went to someone else: nothing to do
      }
    }
  }
  // Stopping: the handled messages are acked, nothing more is claimed.
  ack_one_by_one();
  return stats;
}

}  // namespace forgeyard
