#include "core/flow.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/errors.hpp"

namespace fy::core::flow {

namespace {
std::int64_t emission_usecs(const Rate& r) {
  return (r.per_usecs + r.tokens - 1) / r.tokens;
}
// How far ahead of now the bucket's arrival time may be and still admit: burst - 1 emissions.
std::int64_t tolerance_usecs(const Rate& r) {
  return emission_usecs(r) * ((r.burst > 0 ? r.burst : r.tokens) - 1);
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

std::int64_t available(const Rate& rate, const std::optional<std::int64_t>& tat, std::int64_t now) {
  const std::int64_t burst = rate.burst > 0 ? rate.burst : rate.tokens;
  if (!tat) return burst;
  const std::int64_t e = emission_usecs(rate);
  return std::clamp<std::int64_t>((now + tolerance_usecs(rate) - std::max(*tat, now)) / e + 1, 0, burst);
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

std::int64_t retries_delayed(const QueueOptions& o, const RetryWindow& w, std::int64_t now) {
  if (!o.retry_budget || now < w.start || now >= w.start + o.retry_budget_window_usecs) return 0;
  return w.delayed;
}

// ---- Resources ---------------------------------------------------------------------------------

const char* to_string(BreakerState s) {
  switch (s) {
    case BreakerState::closed:
      return "closed";
    case BreakerState::open:
      return "open";
    case BreakerState::half_open:
      return "half_open";
  }
  return "closed";
}

BreakerState breaker_state_from(std::string_view name) {
  if (name == "closed") return BreakerState::closed;
  if (name == "open") return BreakerState::open;
  if (name == "half_open") return BreakerState::half_open;
  throw Error(sqlstate::internal_error, "unknown breaker state \"" + std::string(name) + "\" read back");
}

std::int64_t ResourceState::failures() const {
  return static_cast<std::int64_t>(std::count(outcomes.begin(), outcomes.end(), '1'));
}

namespace {
// Opening keeps the window that tripped it (breaker_state shows it); half-open and closed start
// a new one.
void change(ResourceState& s, BreakerState to, std::int64_t now) {
  s.state = to;
  s.changed_at = now;
  if (to != BreakerState::open) s.outcomes.clear();
  s.half_open_in_flight = 0;
  s.half_open_successes = 0;
  ++s.transitions;
}
}  // namespace

int resource_parts(const ResourceConfig& c) {
  if (c.breaker || (!c.rate && !c.max_in_flight)) return 1;
  std::int64_t smallest = std::numeric_limits<std::int64_t>::max();
  if (c.max_in_flight) smallest = std::min(smallest, *c.max_in_flight);
  if (c.rate) smallest = std::min({smallest, c.rate->tokens, c.rate->burst > 0 ? c.rate->burst : c.rate->tokens});
  return static_cast<int>(std::clamp<std::int64_t>(smallest / min_part_share, 1, max_resource_parts));
}

ResourceConfig part_config(const ResourceConfig& c, int part) {
  if (c.parts <= 1) return c;
  auto share = [&](std::int64_t total) { return total / c.parts + (part < total % c.parts ? 1 : 0); };
  ResourceConfig p = c;
  if (c.rate)
    p.rate = Rate{share(c.rate->tokens), c.rate->per_usecs, share(c.rate->burst > 0 ? c.rate->burst : c.rate->tokens)};
  if (c.max_in_flight) p.max_in_flight = share(*c.max_in_flight);
  p.parts = 1;
  return p;
}

Refusal admit_delivery(const ResourceConfig& c, ResourceState& s, std::int64_t now, bool transfer) {
  if (c.breaker) {
    if (s.state == BreakerState::open && now >= s.open_until) change(s, BreakerState::half_open, now);
    if (s.state == BreakerState::open) return Refusal::open;
    if (s.state == BreakerState::half_open &&
        s.half_open_in_flight + s.half_open_successes >= c.breaker->half_open_calls)
      return Refusal::open;
  }
  if (c.max_in_flight && !transfer && s.in_flight >= *c.max_in_flight) return Refusal::in_flight;
  if (c.rate) {
    std::optional<std::int64_t> tat = s.tat;
    if (take(*c.rate, tat, now, 1) == 0) return Refusal::rate;
    s.tat = tat;
  }
  if (!transfer) ++s.in_flight;
  if (c.breaker && s.state == BreakerState::half_open) ++s.half_open_in_flight;
  return Refusal::none;
}

void record_outcome(const ResourceConfig& c, ResourceState& s, Outcome outcome, std::int64_t now) {
  if (s.in_flight > 0) --s.in_flight;
  if (!c.breaker || outcome == Outcome::neutral) {
    if (s.state == BreakerState::half_open && s.half_open_in_flight > 0) --s.half_open_in_flight;
    return;
  }
  const BreakerConfig& b = *c.breaker;
  switch (s.state) {
    case BreakerState::open:
      return;  // a delivery handed out before it opened: the window starts again when it closes
    case BreakerState::half_open:
      if (s.half_open_in_flight > 0) --s.half_open_in_flight;
      if (outcome == Outcome::failure) {
        change(s, BreakerState::open, now);
        s.open_until = now + b.open_for_usecs;
      } else if (++s.half_open_successes >= b.half_open_calls) {
        change(s, BreakerState::closed, now);
      }
      return;
    case BreakerState::closed:
      s.outcomes.push_back(outcome == Outcome::failure ? '1' : '0');
      if (static_cast<std::int64_t>(s.outcomes.size()) > b.window)
        s.outcomes.erase(0, s.outcomes.size() - static_cast<std::size_t>(b.window));
      const auto calls = static_cast<std::int64_t>(s.outcomes.size());
      if (calls >= b.minimum_calls &&
          static_cast<double>(s.failures()) >= b.failure_rate * static_cast<double>(calls)) {
        change(s, BreakerState::open, now);
        s.open_until = now + b.open_for_usecs;
      }
      return;
  }
}

namespace {
[[noreturn]] void bad(const char* what, std::string_view key, const std::string& why) {
  throw Error(sqlstate::invalid_parameter, std::string(what) + " option " + std::string(key) + " " + why);
}

std::int64_t integer(const char* what, std::string_view key, std::string_view value, std::int64_t min,
                     std::int64_t max) {
  std::int64_t v = 0;
  bool ok = !value.empty() && value.size() <= 18;
  for (char ch : value) ok = ok && ch >= '0' && ch <= '9';
  if (ok)
    for (char ch : value) v = v * 10 + (ch - '0');
  if (!ok || v < min || v > max)
    bad(what, key, "must be an integer between " + std::to_string(min) + " and " + std::to_string(max));
  return v;
}

double rate_fraction(std::string_view key, std::string_view value) {
  char* end = nullptr;
  const std::string text(value);
  const double v = text.empty() ? -1 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0) || v > 1)
    bad("breaker", key, "must be a number above 0 and at most 1");
  return v;
}
}  // namespace

bool is_limit_duration(std::string_view key) {
  return key == "per";
}
bool is_breaker_duration(std::string_view key) {
  return key == "open_for";
}

void set_limit_option(ResourceConfig& c, std::string_view key, std::string_view value) {
  if (key == "rate") {
    if (!c.rate) c.rate = Rate{0, usecs_per_second, 0};
    c.rate->tokens = integer("resource", key, value, 1, max_rate_tokens);
  } else if (key == "burst") {
    if (!c.rate) c.rate = Rate{0, usecs_per_second, 0};
    c.rate->burst = integer("resource", key, value, 1, max_rate_tokens);
  } else if (key == "max_in_flight") {
    c.max_in_flight = integer("resource", key, value, 1, max_rate_tokens);
  } else if (key == "per") {
    bad("resource", key, "must be an interval");
  } else {
    bad("resource", key, "is unknown");
  }
}

void set_limit_duration(ResourceConfig& c, std::string_view key, const Duration& value) {
  if (key != "per") bad("resource", key, "is not a duration option");
  if (!c.rate) c.rate = Rate{0, usecs_per_second, 0};
  c.rate->per_usecs = check_duration("resource option per", value, max_rate_per_usecs);
}

void set_breaker_option(BreakerConfig& b, std::string_view key, std::string_view value) {
  if (key == "failure_rate")
    b.failure_rate = rate_fraction(key, value);
  else if (key == "minimum_calls")
    b.minimum_calls = integer("breaker", key, value, 1, max_breaker_window);
  else if (key == "window")
    b.window = integer("breaker", key, value, 1, max_breaker_window);
  else if (key == "half_open_calls")
    b.half_open_calls = integer("breaker", key, value, 1, max_breaker_window);
  else if (key == "open_for")
    bad("breaker", key, "must be an interval");
  else
    bad("breaker", key, "is unknown");
}

void set_breaker_duration(BreakerConfig& b, std::string_view key, const Duration& value) {
  if (key != "open_for") bad("breaker", key, "is not a duration option");
  b.open_for_usecs = check_duration("breaker option open_for", value, max_queue_duration_usecs);
}

void validate(const ResourceConfig& c) {
  if (c.rate && c.rate->tokens == 0) bad("resource", "rate", "is required with per or burst");
  if (c.breaker && c.breaker->minimum_calls > c.breaker->window)
    bad("breaker", "minimum_calls", "must not exceed window");
}

}  // namespace fy::core::flow
