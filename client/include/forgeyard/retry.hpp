// Bounded retry with full jitter, for retryable error kinds only.
#pragma once

#include "forgeyard/export.hpp"

#include <chrono>
#include <thread>
#include <type_traits>
#include <utility>

#include "forgeyard/error.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard {

struct RetryPolicy {
  int max_attempts = 5;
  Duration base_delay = std::chrono::milliseconds(10);
  Duration max_delay = std::chrono::seconds(1);
  // Whether the work may run twice: only then is Unavailable (connection lost) retried.
  bool idempotent = false;
};

// Whether `e` on attempt `attempt` (from 1) should be retried under `policy`.
// CommitUnknown never is: the caller reconciles through an idempotency key.
FORGEYARD_API bool should_retry(const Error& e, int attempt, const RetryPolicy& policy) noexcept;
// The sleep before attempt `attempt` + 1: exponential, capped, full jitter.
FORGEYARD_API Duration retry_delay(int attempt, const RetryPolicy& policy);

template <class F>
auto with_retry(F&& work, const RetryPolicy& policy = {}) -> decltype(work()) {
  for (int attempt = 1;; ++attempt) {
    try {
      return work();
    } catch (const Error& e) {
      if (!should_retry(e, attempt, policy)) throw;
    }
    std::this_thread::sleep_for(retry_delay(attempt, policy));
  }
}

// Runs work(Transaction&) in a transaction and commits, retrying the whole unit on retryable
// errors (a serialization failure rolls the transaction back, so a retry is safe).
template <class F>
auto transact(Store& store, F&& work, const RetryPolicy& policy = {}) {
  return with_retry(
      [&] {
        auto tx = store.begin();
        if constexpr (std::is_void_v<decltype(work(*tx))>) {
          work(*tx);
          tx->commit();
        } else {
          auto result = work(*tx);
          tx->commit();
          return result;
        }
      },
      policy);
}

// Runs work(Transaction&) -> Bytes at most once per key: the first call does the work and
// stores its response in the same transaction; every later call (and a concurrent duplicate,
// once the first commits) returns the stored response without running work.
template <class F>
Bytes run_once(Store& store, const IdempotencyKey& key, const Bytes& request_digest, F&& work,
               const RetryPolicy& policy = {}) {
  return transact(
      store,
      [&](Transaction& tx) -> Bytes {
        IdempotencyBegin b = tx.idempotency().begin(key, request_digest);
        if (b.status == IdempotencyBegin::Status::Replay) return b.response.value_or(Bytes{});
        Bytes response = work(tx);
        tx.idempotency().complete(key, response, b.attempt);
        return response;
      },
      policy);
}

}  // namespace forgeyard
