#include "core/topic.hpp"

#include <string>

#include "core/errors.hpp"

namespace fy::core {

namespace {
[[noreturn]] void bad(std::string_view what, std::string_view key, const std::string& why) {
  throw Error(sqlstate::invalid_parameter, std::string(what) + " " + std::string(key) + " " + why);
}
}  // namespace

void set_topic_option(TopicOptions& o, std::string_view key, std::string_view value) {
  if (key == "max_subscriptions") {
    int v = 0;
    if (value.empty() || value.size() > 4) bad("topic option", key, "must be between 1 and 256");
    for (char c : value) {
      if (c < '0' || c > '9') bad("topic option", key, "must be between 1 and 256");
      v = v * 10 + (c - '0');
    }
    if (v < 1 || v > max_topic_subscriptions) bad("topic option", key, "must be between 1 and 256");
    o.max_subscriptions = v;
  } else if (is_topic_duration_option(key)) {
    bad("topic option", key, "must be an interval");
  } else {
    bad("topic option", key, "is unknown");
  }
}

bool is_topic_duration_option(std::string_view key) {
  return key == "retention" || key == "dedup_window";
}

void set_topic_duration(TopicOptions& o, std::string_view key, const Duration& d) {
  if (key == "retention") {
    // Zero retention is allowed: nothing is replayable.
    o.retention_usecs = (d.months == 0 && d.days == 0 && d.usecs == 0)
                            ? 0
                            : check_duration("topic option retention", d, max_topic_retention_usecs);
  } else if (key == "dedup_window") {
    o.dedup_window_usecs = check_duration("topic option dedup_window", d, max_topic_retention_usecs);
  } else {
    bad("topic option", key, "is not a duration option");
  }
}

void check_retention_class(std::string_view v) {
  if (v != "ephemeral" && v != "short" && v != "operational" && v != "audit")
    throw Error(sqlstate::invalid_parameter, "retention_class must be ephemeral, short, operational or audit",
                "got \"" + std::string(v) + "\"");
}

void check_event_version(const char* argument, std::int64_t version) {
  if (version < 1 || version > max_event_version)
    throw Error(sqlstate::invalid_parameter,
                std::string(argument) + " must be between 1 and " + std::to_string(max_event_version));
}

bool on_full_dead_letter(std::string_view v) {
  if (v == "reject") return false;
  if (v == "dead_letter") return true;
  bad("subscription option", "on_full", "must be reject or dead_letter");
}

bool start_oldest(std::string_view v) {
  if (v == "now") return false;
  if (v == "oldest") return true;
  bad("subscription option", "start", "must be now or oldest");
}

bool is_subscription_option(std::string_view key) {
  return key == "event_types" || key == "on_full" || key == "start";
}

Routing route(bool filtered, const std::optional<VersionRange>& accepted, std::int64_t version) {
  if (!filtered) return Routing::deliver;
  if (!accepted) return Routing::skip;
  return version >= accepted->min && version <= accepted->max ? Routing::deliver : Routing::quarantine;
}

std::string quarantine_message(std::string_view event_type, std::int64_t version) {
  return "version " + std::to_string(version) + " of event type \"" + std::string(event_type) +
         "\" is outside the subscription's accepted range";
}

std::string backlog_full_message(std::string_view subscription) {
  return "subscription \"" + std::string(subscription) + "\" was full when the event was published";
}

void throw_unknown_topic(std::string_view tenant, std::string_view topic) {
  throw Error(sqlstate::undefined_object,
              "topic \"" + std::string(topic) + "\" does not exist for tenant \"" + std::string(tenant) + "\"");
}

void throw_unknown_subscription(std::string_view topic, std::string_view subscription) {
  throw Error(sqlstate::undefined_object, "subscription \"" + std::string(subscription) +
                                              "\" does not exist on topic \"" + std::string(topic) + "\"");
}

void throw_topic_exists(std::string_view tenant, std::string_view topic) {
  throw Error(sqlstate::duplicate_object,
              "topic \"" + std::string(topic) + "\" already exists for tenant \"" + std::string(tenant) + "\"");
}

void throw_too_many_subscriptions(std::string_view topic, int max_subscriptions) {
  throw Error(sqlstate::invalid_parameter,
              "topic \"" + std::string(topic) + "\" has its max_subscriptions of " + std::to_string(max_subscriptions),
              "fan-out is bounded; unsubscribe one first");
}

void throw_unregistered_event_type(std::string_view tenant, std::string_view event_type, std::int64_t version) {
  throw Error(sqlstate::schema_unsupported,
              "event type \"" + std::string(event_type) + "\" version " + std::to_string(version) +
                  " is not registered for tenant \"" + std::string(tenant) + "\"",
              "register it with event_type_register first");
}

void throw_event_type_conflict(std::string_view event_type, std::int64_t version, std::string_view retention_class) {
  throw Error(sqlstate::duplicate_object, "event type \"" + std::string(event_type) + "\" version " +
                                              std::to_string(version) + " is registered with retention_class " +
                                              std::string(retention_class));
}

void throw_published_event_mismatch(std::int64_t first) {
  throw Error(sqlstate::idempotency_mismatch, "event_id was published before with other contents",
              "event_seq " + std::to_string(first) + " carries this event_id");
}

}  // namespace fy::core
