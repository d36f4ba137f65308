// Flow control's rules, once for both backends (docs/flow-control-design.md): rate limits as GCRA
// (admission limits of producers; resources later), and the retry budget's window. The backends
// only read and write the rows around these functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/input.hpp"
#include "core/queue_options.hpp"

namespace fy::core::flow {

// `tokens` per `per_usecs`, with a burst of `tokens`: a bucket that holds `tokens` and refills one
// token every per_usecs / tokens (rounded up, so never faster than the rate).
struct Rate {
  std::int64_t tokens = 0;
  std::int64_t per_usecs = 0;
};

// GCRA: the bucket is its theoretical arrival time `tat` (none: full). Takes up to `count`
// tokens at `now` and returns how many it took; `tat` moves by the tokens taken.
std::int64_t take(const Rate& rate, std::optional<std::int64_t>& tat, std::int64_t now, std::int64_t count);
// Microseconds from `now` until the bucket holds one token (0: it holds one now).
std::int64_t wait_usecs(const Rate& rate, const std::optional<std::int64_t>& tat, std::int64_t now);
// The part of `rate` that capacity slot `slot` of `slots` keeps, so that the slots' buckets add
// up to the queue's exactly: tokens / slots each, the remainder to the first slots (a slot may get
// none). `slots` is never more than tokens (admission_slots).
Rate slot_rate(const Rate& rate, int slots, int slot);
int admission_slots(const Rate& rate, int capacity_slots);

inline constexpr std::int64_t max_rate_tokens = 1'000'000'000;
inline constexpr std::int64_t max_rate_per_usecs = 30 * usecs_per_day;
// admission_limit's arguments: rate in 1..max_rate_tokens, per a positive interval of at most
// 30 days without months (22023 naming the argument otherwise). Returns per in microseconds.
std::int64_t check_rate(const char* rate_argument, std::int64_t tokens, const char* per_argument, const Duration& per);

// FY020 for an enqueue over the queue's admission limit; the DETAIL names the limit and ends in
// "retry after <n> ms", which the client reads into QueueFull's retry_after.
[[noreturn]] void throw_admission_refused(std::string_view queue, const Rate& rate, std::int64_t wait_usecs);
// The retry-after of an FY020's DETAIL, in milliseconds, if it has one.
std::optional<std::int64_t> retry_after_ms(std::string_view detail);

// ---- Retry budget ----------------------------------------------------------------------------

// One queue's retry window: when it started, the queue's count of admitted messages then (first
// deliveries are counted as messages are admitted: each is delivered once first), the first
// deliveries of the window before it, and the retries admitted and delayed in it. A window
// created with admitted_base 0 counts every message the queue admitted before it.
struct RetryWindow {
  std::int64_t start = 0;
  std::int64_t admitted_base = 0;
  std::int64_t prev_first = 0;
  std::int64_t retries = 0;
  std::int64_t delayed = 0;
};

struct RetryDecision {
  bool admitted = true;
  std::int64_t not_before = 0;  // when not admitted: the window's end, where the retry waits
};

// A nack's retry against the queue's budget (options.retry_budget set). The window rolls over
// when it has run out. First deliveries are those of this window plus the last window's, weighed
// by how much of this window is still to run (a sliding window, approximated); the retry is
// admitted while the window's retries stay within max(retry_budget_min, floor(retry_budget ×
// first deliveries)), and otherwise waits for the window's end (no attempt charged, never
// dead-lettered for it; it is not counted again when it runs).
RetryDecision admit_retry(const QueueOptions& options, RetryWindow& window, std::int64_t admitted_now,
                          std::int64_t now);

}  // namespace fy::core::flow
