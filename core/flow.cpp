#include "core/flow.hpp"

#include <algorithm>
#include <string>

#include "core/errors.hpp"

namespace fy::core::flow {

namespace {
std::int64_t emission_usecs(const Rate& r) {
  return (r.per_usecs + r.tokens - 1) / r.tokens;
}
// How far ahead of now the bucket's arrival time may be and still admit: burst - 1 emissions.
std::int64_t tolerance_usecs(const Rate& r) {
  return emission_usecs(r) * (r.tokens - 1);
}
// "1 s", "90 s", "250 ms", "7 us": the largest unit that divides the interval.
std::string per_text(std::int64_t usecs) {
  if (usecs % usecs_per_second == 0) return std::to_string(usecs / usecs_per_second) + " s";
  if (usecs % 1000 == 0) return std::to_string(usecs / 1000) + " ms";
  return std::to_string(usecs) + " us";
}
}  // namespace

std::int64_t take(const Rate& rate, std::optional<std::int64_t>& tat, std::int64_t now, std::int64_t count) {
  if (rate.tokens <= 0 || count <= 0) return 0;
  const std::int64_t t = emission_usecs(rate), tau = tolerance_usecs(rate);
  const std::int64_t from = tat ? std::max(*tat, now) : now;
  if (from - now > tau) return 0;
  const std::int64_t taken = std::min(count, (now + tau - from) / t + 1);
  tat = from + taken * t;
  return taken;
}

std::int64_t wait_usecs(const Rate& rate, const std::optional<std::int64_t>& tat, std::int64_t now) {
  if (!tat) return 0;
  return std::max<std::int64_t>(0, *tat - tolerance_usecs(rate) - now);
}

int admission_slots(const Rate& rate, int capacity_slots) {
  return static_cast<int>(std::clamp<std::int64_t>(rate.tokens, 1, std::max(capacity_slots, 1)));
}

Rate slot_rate(const Rate& rate, int slots, int slot) {
  return {rate.tokens / slots + (slot < rate.tokens % slots ? 1 : 0), rate.per_usecs};
}

std::int64_t check_rate(const char* rate_argument, std::int64_t tokens, const char* per_argument, const Duration& per) {
  if (tokens < 1 || tokens > max_rate_tokens)
    throw Error(sqlstate::invalid_parameter,
                std::string(rate_argument) + " must be between 1 and " + std::to_string(max_rate_tokens),
                "got " + std::to_string(tokens));
  return check_duration(per_argument, per, max_rate_per_usecs);
}

void throw_admission_refused(std::string_view queue, const Rate& rate, std::int64_t wait) {
  const std::int64_t ms = (wait + 999) / 1000;
  throw Error(sqlstate::queue_full, "queue \"" + std::string(queue) + "\" is over its admission limit",
              "the queue admits " + std::to_string(rate.tokens) + " messages per " + per_text(rate.per_usecs) +
                  "; retry after " + std::to_string(ms) + " ms");
}

std::optional<std::int64_t> retry_after_ms(std::string_view detail) {
  constexpr std::string_view mark = "retry after ";
  const std::size_t at = detail.rfind(mark);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = detail.substr(at + mark.size());
  std::int64_t ms = 0;
  std::size_t digits = 0;
  for (; digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 15; ++digits)
    ms = ms * 10 + (rest[digits] - '0');
  if (digits == 0 || rest.substr(digits) != " ms") return std::nullopt;
  return ms;
}

RetryDecision admit_retry(const QueueOptions& o, RetryWindow& w, std::int64_t admitted_now, std::int64_t now) {
  if (!o.retry_budget) return {};
  const std::int64_t length = o.retry_budget_window_usecs;
  if (now >= w.start + length || now < w.start) {
    // The last window's first deliveries carry over only into the window right after it.
    const std::int64_t first = std::max<std::int64_t>(0, admitted_now - w.admitted_base);
    const bool adjacent = now >= w.start && now < w.start + 2 * length;
    w = {adjacent ? w.start + length : now, admitted_now, adjacent ? first : 0, 0, 0};
  }
  const double remaining = 1.0 - static_cast<double>(now - w.start) / static_cast<double>(length);
  const double first = static_cast<double>(std::max<std::int64_t>(0, admitted_now - w.admitted_base)) +
                       static_cast<double>(w.prev_first) * std::max(0.0, remaining);
  const std::int64_t budget = std::max(o.retry_budget_min, static_cast<std::int64_t>(*o.retry_budget * first));
  if (w.retries < budget) {
    ++w.retries;
    return {};
  }
  ++w.delayed;
  return {false, w.start + length};
}

}  // namespace fy::core::flow
