// A small connection pool used by both backends: min/max size, acquire timeout, idle timeout,
// max lifetime, and counters. Conn must provide `bool reusable() const` (healthy, no open
// transaction); a connection that is not reusable when it comes back is closed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>

#include "forgeyard/error.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {

template <class Conn>
class Pool {
  using Steady = std::chrono::steady_clock;
  struct Slot {
    std::unique_ptr<Conn> conn;
    Steady::time_point created;
    Steady::time_point idle_since;
    std::thread::id last_user;
  };

 public:
  using Factory = std::function<std::unique_ptr<Conn>()>;

  // A connection on loan; it goes back to the pool when destroyed.
  class Handle {
   public:
    Handle(Pool* pool, Slot slot) : pool_(pool), slot_(std::move(slot)) {}
    Handle(Handle&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), slot_(std::move(other.slot_)) {}
    Handle& operator=(Handle&&) = delete;
    ~Handle() {
      if (pool_ != nullptr) pool_->give_back(std::move(slot_));
    }
    Conn& operator*() const { return *slot_.conn; }
    Conn* operator->() const { return slot_.conn.get(); }

   private:
    Pool* pool_;
    Slot slot_;
  };

  Pool(PoolOptions options, Factory factory) : options_(options), factory_(std::move(factory)) {
    if (options_.max_connections < 1)
      throw Error(ErrorKind::InvalidArgument, "22023", "pool max_connections must be >= 1");
    for (int i = 0; i < options_.min_connections && i < options_.max_connections; ++i) {
      auto now = Steady::now();
      idle_.push_back(Slot{factory_(), now, now, {}});
      ++stats_.created;
    }
  }

  Handle acquire() {
    std::unique_lock lock(mutex_);
    const auto deadline = Steady::now() + options_.acquire_timeout;
    bool waited = false;
    for (;;) {
      while (!idle_.empty()) {
        // Prefer the connection this thread used last (as HikariCP's thread-local bag does):
        // a thread keeps talking to the same server backend, which on small machines avoids
        // a cross-CPU wake-up per call and doubled throughput with two threads.
        auto pick = std::prev(idle_.end());
        for (auto it = idle_.begin(); it != idle_.end(); ++it)
          if (it->last_user == std::this_thread::get_id()) pick = it;
        Slot slot = std::move(*pick);
        idle_.erase(pick);
        if (expired(slot, Steady::now())) {
          ++stats_.closed;
          continue;
        }
        ++in_use_, ++stats_.acquired;
        return Handle(this, std::move(slot));
      }
      if (in_use_ + opening_ < options_.max_connections) {
        ++opening_;
        lock.unlock();
        std::unique_ptr<Conn> conn;
        try {
          conn = factory_();
        } catch (...) {
          lock.lock();
          --opening_;
          available_.notify_one();
          throw;
        }
        lock.lock();
        --opening_;
        ++in_use_, ++stats_.created, ++stats_.acquired;
        auto now = Steady::now();
        return Handle(this, Slot{std::move(conn), now, now, {}});
      }
      if (!waited) ++stats_.waited, waited = true;
      if (available_.wait_until(lock, deadline) == std::cv_status::timeout && Steady::now() >= deadline) {
        ++stats_.timed_out;
        throw Error(ErrorKind::Timeout, "57014", "timed out waiting for a free connection in the pool");
      }
    }
  }

  PoolStats stats() const {
    std::lock_guard lock(mutex_);
    PoolStats s = stats_;
    s.in_use = in_use_;
    s.idle = static_cast<int>(idle_.size());
    return s;
  }

 private:
  bool expired(const Slot& slot, Steady::time_point now) const {
    return now - slot.created >= options_.max_lifetime || now - slot.idle_since >= options_.idle_timeout;
  }

  void give_back(Slot slot) {
    const bool keep = slot.conn->reusable() && Steady::now() - slot.created < options_.max_lifetime;
    std::unique_ptr<Conn> closing;
    {
      std::lock_guard lock(mutex_);
      --in_use_;
      if (keep) {
        slot.idle_since = Steady::now();
        slot.last_user = std::this_thread::get_id();
        idle_.push_back(std::move(slot));
      } else {
        ++stats_.closed;
        closing = std::move(slot.conn);
      }
    }
    available_.notify_one();
  }

  const PoolOptions options_;
  const Factory factory_;
  mutable std::mutex mutex_;
  std::condition_variable available_;
  std::deque<Slot> idle_;
  int in_use_ = 0;
  int opening_ = 0;
  PoolStats stats_;
};

}  // namespace forgeyard::detail
