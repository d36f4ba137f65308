#include "forgeyard/retry.hpp"

#include "core/core.hpp"

namespace forgeyard {

bool should_retry(const Error& e, int attempt, const RetryPolicy& policy) noexcept {
  if (attempt >= policy.max_attempts || !e.retryable()) return false;
  if (e.kind() == ErrorKind::Unavailable) return policy.idempotent;
  return true;
}

Duration retry_delay(int attempt, const RetryPolicy& policy) {
  return Duration(fy::core::backoff_full_jitter(attempt, policy.base_delay.count(), policy.max_delay.count(),
                                                fy::core::unit_random()));
}

}  // namespace forgeyard
