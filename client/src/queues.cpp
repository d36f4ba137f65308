#include "forgeyard/queues.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "error_map.hpp"
#include "queue_options.hpp"

namespace forgeyard {

std::string_view to_string(Priority priority) noexcept {
  return fy::core::priority_names[static_cast<int>(priority)];
}

Priority priority_from_string(std::string_view name) {
  return detail::core_guarded([&] { return static_cast<Priority>(fy::core::priority_from_name("priority", name)); });
}

namespace detail {

fy::core::QueueOptions core_options(const QueueOptions& o) {
  fy::core::QueueOptions c;
  c.max_messages = o.max_messages;
  c.max_bytes = o.max_bytes;
  c.max_payload_bytes = o.max_payload_bytes;
  c.visibility_usecs = o.visibility_timeout.count();
  c.max_attempts = o.max_attempts;
  c.backoff_base_usecs = o.backoff_base.count();
  c.backoff_max_usecs = o.backoff_max.count();
  c.partitioned = o.partition_ordered;
  c.keep_dead_payload = o.keep_dead_letter_payload;
  c.retain_acked_usecs = o.retain_acked.count();
  c.max_dead = o.max_dead;
  c.dead_retention_usecs = o.dead_letter_retention.count();
  c.dedup_window_usecs = o.dedup_window.count();
  for (int p = 0; p < fy::core::priority_classes; ++p) c.admit_percent[p] = o.admit_percent[p];
  c.notify = o.notify;
  c.retry_budget = o.retry_budget;
  c.retry_budget_min = o.retry_budget_min;
  c.retry_budget_window_usecs = o.retry_budget_window.count();
  // (0 in the core is "none": a value below 1 becomes -1, which the core's validate() refuses.)
  c.fairness = o.fairness;
  c.aging_usecs = o.aging.count();
  if (o.max_in_flight_per_key) c.max_in_flight_per_key = *o.max_in_flight_per_key > 0 ? *o.max_in_flight_per_key : -1;
  return c;
}

namespace {
// Fixed-point text, as JSON writes a number (no exponent for small fractions).
std::string fraction_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9f", v);
  return text;
}
}  // namespace

std::string options_json(const QueueOptions& o) {
  auto us = [](Duration d) { return "\"" + std::to_string(d.count()) + " microseconds\""; };
  std::string json =
      "{\"max_messages\":" + std::to_string(o.max_messages) + ",\"max_bytes\":" + std::to_string(o.max_bytes) +
      ",\"max_payload_bytes\":" + std::to_string(o.max_payload_bytes) +
      ",\"visibility_timeout\":" + us(o.visibility_timeout) + ",\"max_attempts\":" + std::to_string(o.max_attempts) +
      ",\"backoff_base\":" + us(o.backoff_base) + ",\"backoff_max\":" + us(o.backoff_max) + ",\"ordering\":\"" +
      (o.partition_ordered ? "partition" : "none") + "\",\"dead_letter_payload\":\"" +
      (o.keep_dead_letter_payload ? "keep" : "drop") + "\",\"retain_acked\":" + us(o.retain_acked) +
      ",\"max_dead\":" + std::to_string(o.max_dead) + ",\"dead_letter_retention\":" + us(o.dead_letter_retention) +
      ",\"dedup_window\":" + us(o.dedup_window) + ",\"notify\":" + (o.notify ? "true" : "false");
  for (int p = 0; p < fy::core::priority_classes; ++p)
    json += std::string(",\"admit_") + fy::core::priority_names[p] + "\":" + std::to_string(o.admit_percent[p]);
  if (o.retry_budget) json += ",\"retry_budget\":" + fraction_text(*o.retry_budget);
  if (o.max_in_flight_per_key) json += ",\"max_in_flight_per_key\":" + std::to_string(*o.max_in_flight_per_key);
  if (o.fairness) json += ",\"fairness\":true";
  if (o.aging.count() != 0) json += ",\"aging\":" + us(o.aging);
  json += ",\"retry_budget_min\":" + std::to_string(o.retry_budget_min) +
          ",\"retry_budget_window\":" + us(o.retry_budget_window);
  return json + "}";
}

void sort_flow(std::vector<FlowLimit>& rows) {
  std::sort(rows.begin(), rows.end(), [](const FlowLimit& a, const FlowLimit& b) {
    return std::tie(a.kind, a.queue, a.subject) < std::tie(b.kind, b.queue, b.subject);
  });
}

std::string resource_limits_json(const ResourceLimits& l) {
  std::string json = "{";
  auto add = [&](const std::string& pair) { json += (json.size() > 1 ? "," : "") + pair; };
  if (l.rate) {
    add("\"rate\":" + std::to_string(l.rate->rate));
    add("\"per\":\"" + std::to_string(l.rate->per.count()) + " microseconds\"");
  }
  if (l.burst != 0) add("\"burst\":" + std::to_string(l.burst));
  if (l.max_in_flight) add("\"max_in_flight\":" + std::to_string(*l.max_in_flight));
  return json + "}";
}

std::string breaker_json(const BreakerOptions& b) {
  return "{\"failure_rate\":" + fraction_text(b.failure_rate) +
         ",\"minimum_calls\":" + std::to_string(b.minimum_calls) + ",\"window\":" + std::to_string(b.window) +
         ",\"open_for\":\"" + std::to_string(b.open_for.count()) +
         " microseconds\",\"half_open_calls\":" + std::to_string(b.half_open_calls) + "}";
}

fy::core::flow::ResourceConfig core_resource_config(const ResourceLimits& l, const std::optional<BreakerOptions>& b) {
  // Through the extension's parsers, key by key, so that both backends refuse alike.
  namespace flow = fy::core::flow;
  flow::ResourceConfig c;
  if (l.rate) {
    flow::set_limit_option(c, "rate", std::to_string(l.rate->rate));
    flow::set_limit_duration(c, "per", {0, 0, l.rate->per.count()});
  }
  if (l.burst != 0) flow::set_limit_option(c, "burst", std::to_string(l.burst));
  if (l.max_in_flight) flow::set_limit_option(c, "max_in_flight", std::to_string(*l.max_in_flight));
  if (b) {
    c.breaker.emplace();
    flow::set_breaker_option(*c.breaker, "failure_rate", fraction_text(b->failure_rate));
    flow::set_breaker_option(*c.breaker, "minimum_calls", std::to_string(b->minimum_calls));
    flow::set_breaker_option(*c.breaker, "window", std::to_string(b->window));
    flow::set_breaker_duration(*c.breaker, "open_for", {0, 0, b->open_for.count()});
    flow::set_breaker_option(*c.breaker, "half_open_calls", std::to_string(b->half_open_calls));
  }
  flow::validate(c);
  return c;
}

int priority_index(Priority p) {
  return static_cast<int>(p);
}

Priority priority_at(int index) {
  if (index < 0 || index >= fy::core::priority_classes)
    throw Error(ErrorKind::Corruption, "XX000", "invalid priority class read back: " + std::to_string(index));
  return static_cast<Priority>(index);
}

}  // namespace detail
}  // namespace forgeyard
