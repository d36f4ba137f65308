// Topic values shared by both backends (topic_values.hpp).
#include "topic_values.hpp"

#include <cstdio>

#include "queue_options.hpp"

namespace forgeyard {

std::string_view to_string(RetentionClass retention_class) noexcept {
  switch (retention_class) {
    case RetentionClass::Ephemeral:
      return "ephemeral";
    case RetentionClass::Short:
      return "short";
    case RetentionClass::Operational:
      return "operational";
    case RetentionClass::Audit:
      return "audit";
  }
  return "operational";
}

namespace detail {

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string subscription_options_json(const SubscriptionOptions& o) {
  std::string json = options_json(o.queue);
  json.pop_back();  // the closing brace
  json += std::string(",\"on_full\":\"") + (o.on_full == OnFull::DeadLetter ? "dead_letter" : "reject") + "\"";
  json += std::string(",\"start\":\"") + (o.start == StartAt::Oldest ? "oldest" : "now") + "\"";
  if (o.event_types) {
    json += ",\"event_types\":{";
    bool first = true;
    for (const auto& [type, range] : *o.event_types) {
      json += (first ? "" : ",") + json_quote(type) + ":{\"min\":" + std::to_string(range.min) +
              ",\"max\":" + std::to_string(range.max) + "}";
      first = false;
    }
    json += "}";
  }
  return json + "}";
}

std::string topic_options_json(const TopicOptions& o) {
  return "{\"max_subscriptions\":" + std::to_string(o.max_subscriptions) + ",\"retention\":\"" +
         std::to_string(o.retention.count()) + " microseconds\",\"dedup_window\":\"" +
         std::to_string(o.dedup_window.count()) + " microseconds\"}";
}

}  // namespace detail
}  // namespace forgeyard
