#include "forgeyard/worker.hpp"

#include <condition_variable>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "forgeyard/error.hpp"
#include "instruments.hpp"

namespace forgeyard {

namespace {

// Keeps every delivery of the current batch invisible until its ack has gone out: the one being
// handled, the ones waiting their turn, and the handled ones whose acks ride on the next claim.
// Extends them every third of the visibility; one that can no longer be extended (it lapsed and
// went to someone else) is marked so that the worker skips it.
class Heartbeat {
 public:
  Heartbeat(Queues& queues, const WorkerOptions& options)
      : queues_(queues), options_(options), thread_([this](std::stop_token s) { run(s); }) {}
  ~Heartbeat() {
    thread_.request_stop();
    changed_.notify_all();
  }
  void watch(const std::vector<Delivery>& batch) {
    std::lock_guard lock(mutex_);
    watched_.clear();
    for (const Delivery& d : batch) watched_.emplace(d.msg_id, d.claim_token);
    changed_.notify_all();
  }
  void forget(std::int64_t msg_id) {
    std::lock_guard lock(mutex_);
    watched_.erase(msg_id);
  }
  bool lapsed(std::int64_t msg_id) {
    std::lock_guard lock(mutex_);
    return lapsed_.contains(msg_id);
  }
  std::uint64_t extended() const { return extended_.load(); }

 private:
  void run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      changed_.wait_for(lock, stop, options_.visibility / 3, [] { return false; });
      if (stop.stop_requested()) return;
      const std::map<std::int64_t, std::int64_t> now_watched = watched_;
      lock.unlock();
      for (const auto& [msg_id, token] : now_watched) {
        try {
          queues_.extend(options_.tenant, options_.queue, msg_id, token, options_.visibility);
          ++extended_;
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::StaleFence) {
            std::lock_guard relock(mutex_);
            lapsed_.insert(msg_id);
            watched_.erase(msg_id);
          } else {
            detail::log().warn("worker could not extend message {}: {}", msg_id, e.what());
          }
        } catch (const std::exception& e) {
          detail::log().warn("worker could not extend message {}: {}", msg_id, e.what());
        }
      }
      lock.lock();
    }
  }

  Queues& queues_;
  const WorkerOptions& options_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::map<std::int64_t, std::int64_t> watched_;  // msg_id -> claim_token
  std::set<std::int64_t> lapsed_;
  std::atomic<std::uint64_t> extended_{0};
  std::jthread thread_;
};

}  // namespace

WorkerStats run_worker(Queues& queues, const WorkerOptions& options, const Handler& handler, std::stop_token stop) {
  WorkerStats stats;
  Heartbeat heartbeat(queues, options);
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
    heartbeat.watch(batch);
    for (const Delivery& d : batch) {
      if (heartbeat.lapsed(d.msg_id)) {  // went to another consumer while it waited its turn
        ++stats.stale;
        continue;
      }
      HandlerResult result;
      try {
        result = handler(d);
      } catch (const std::exception& e) {
        result = HandlerResult::retry(e.what());
      }
      if (result.kind == HandlerResult::Kind::Success) {
        acks.emplace_back(d.msg_id, d.claim_token);  // stays watched until the ack goes out
        continue;
      }
      heartbeat.forget(d.msg_id);
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
  stats.extended = heartbeat.extended();
  return stats;
}

}  // namespace forgeyard
