// Flow control's rules, once for both backends (docs/flow-control-design.md): rate limits as GCRA
// (admission limits of producers, and resources), the retry budget's window, and a resource's
// concurrency limit and circuit breaker. The backends only read and write the rows around these
// functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/input.hpp"
#include "core/queue_options.hpp"

namespace fy::core::flow {

// `tokens` per `per_usecs`, with a burst of `burst` (0: `tokens`): a bucket that holds the burst
// and refills one token every per_usecs / tokens (rounded up, so never faster than the rate).
struct Rate {
  std::int64_t tokens = 0;
  std::int64_t per_usecs = 0;
  std::int64_t burst = 0;
};

// GCRA: the bucket is its theoretical arrival time `tat` (none: full). Takes up to `count`
// tokens at `now` and returns how many it took; `tat` moves by the tokens taken.
std::int64_t take(const Rate& rate, std::optional<std::int64_t>& tat, std::int64_t now, std::int64_t count);
// The tokens the bucket holds at `now` (at most its burst), as forgeyard.flow_state shows them.
std::int64_t available(const Rate& rate, const std::optional<std::int64_t>& tat, std::int64_t now);
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

// The retries the budget delayed in the window running at `now`: the window's count while it
// runs, 0 once it has run out (the next retry starts a new one) or without a budget.
std::int64_t retries_delayed(const QueueOptions& options, const RetryWindow& window, std::int64_t now);

// ---- Resources: rate limits, concurrency limits and circuit breakers -----------------------

inline constexpr std::int64_t max_breaker_window = 1000;

struct BreakerConfig {
  double failure_rate = 0.5;        // of the outcomes in the window, to open
  std::int64_t minimum_calls = 10;  // outcomes the window must hold before it may open
  std::int64_t window = 100;        // the last this many outcomes
  std::int64_t open_for_usecs = 30 * usecs_per_second;
  std::int64_t half_open_calls = 1;  // deliveries let through half-open; all must succeed to close
};

// What a resource (the downstream a message hits) allows; each limit optional. `parts`: how many
// rows share its state on PostgreSQL (resource_parts; SQLite keeps one).
struct ResourceConfig {
  std::optional<Rate> rate;
  std::optional<std::int64_t> max_in_flight;
  std::optional<BreakerConfig> breaker;
  int parts = 1;
};

// How many parts a resource's state is split into so that concurrent claimers do not all queue on
// one row lock: one per min_part_share of its smallest limit (max_in_flight, rate, burst), at most
// max_resource_parts; one for a resource with a breaker (its window is one sequence of outcomes)
// or with no limit. Small limits are not split: the limit itself is the bottleneck there, and one
// row keeps it exact to the token.
inline constexpr int max_resource_parts = 8;
inline constexpr std::int64_t min_part_share = 16;
int resource_parts(const ResourceConfig& config);
// Part `part` of `parts`: rate, burst and max_in_flight divided, the remainders to the first
// parts, so that the parts add up to the resource's limits exactly (the breaker is unchanged).
ResourceConfig part_config(const ResourceConfig& config, int part);

enum class BreakerState { closed, open, half_open };
const char* to_string(BreakerState state);
BreakerState breaker_state_from(std::string_view name);  // internal error for an unknown name

// A resource's shared state, one row per resource, changed only under its row lock.
struct ResourceState {
  std::optional<std::int64_t> tat;  // the rate limit's bucket
  std::int64_t in_flight = 0;       // deliveries handed out and not yet finished
  BreakerState state = BreakerState::closed;
  std::string outcomes;  // the breaker's window, oldest first: '1' a failure, '0' a success
  std::int64_t changed_at = 0;
  std::int64_t open_until = 0;
  std::int64_t half_open_in_flight = 0;
  std::int64_t half_open_successes = 0;
  std::int64_t transitions = 0;
  std::int64_t failures() const;
};

enum class Refusal { none, rate, in_flight, open };

// A claim meets a ready message bound to the resource. `transfer`: the message's last delivery
// lapsed and still counts in in_flight, so it needs no new place. Refused: the message is skipped
// and stays ready (no attempt charged). Admitted: a token and a place are taken, and half-open a
// trial call.
Refusal admit_delivery(const ResourceConfig& config, ResourceState& state, std::int64_t now, bool transfer);

// How a delivery ended, for the resource: an ack is a success, a nack a failure unless permanent
// (the message's own fault: neutral, like a delivery that lapsed on every attempt).
enum class Outcome { success, failure, neutral };
void record_outcome(const ResourceConfig& config, ResourceState& state, Outcome outcome, std::int64_t now);

// resource_limit's and breaker_configure's options, one key at a time as JSON gives them (text;
// durations already parsed), then checked as a whole: 22023 naming the option.
void set_limit_option(ResourceConfig& config, std::string_view key, std::string_view value);
void set_limit_duration(ResourceConfig& config, std::string_view key, const Duration& value);
void set_breaker_option(BreakerConfig& config, std::string_view key, std::string_view value);
void set_breaker_duration(BreakerConfig& config, std::string_view key, const Duration& value);
bool is_limit_duration(std::string_view key);
bool is_breaker_duration(std::string_view key);
void validate(const ResourceConfig& config);

}  // namespace fy::core::flow
