// Topics: the limits, options and decisions that the extension's topic functions and the SQLite
// shim share (docs/sql-api.md#topics), with one text for each error both backends raise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/input.hpp"

namespace fy::core {

inline constexpr std::size_t max_topic_name_bytes = 128;
inline constexpr std::size_t max_event_type_bytes = 128;
inline constexpr int max_event_version = 1'000'000;
inline constexpr int max_topic_subscriptions = 256;
inline constexpr std::int64_t max_topic_retention_usecs = 365 * usecs_per_day;
inline constexpr int max_publish_batch = 10'000;

struct TopicOptions {
  int max_subscriptions = 16;
  std::int64_t retention_usecs = 0;  // 0: events are not replayable
  std::int64_t dedup_window_usecs = usecs_per_day;
};
// Sets one topic option from its JSON text (durations: the caller converts them and calls
// set_topic_duration). 22023 naming the option when unknown or invalid.
void set_topic_option(TopicOptions& options, std::string_view key, std::string_view value);
bool is_topic_duration_option(std::string_view key);
void set_topic_duration(TopicOptions& options, std::string_view key, const Duration& d);

// retention_class of an event type: ephemeral | short | operational | audit (22023 otherwise).
void check_retention_class(std::string_view value);
inline constexpr char default_retention_class[] = "operational";
// An event version: 1..max_event_version (22023 otherwise).
void check_event_version(const char* argument, std::int64_t version);

// Subscription options beside the queue's: on_full (reject | dead_letter) and start (now | oldest).
// 22023 naming the option otherwise.
bool on_full_dead_letter(std::string_view value);
bool start_oldest(std::string_view value);
// The keys of subscribe's options that are the subscription's, not its queue's.
bool is_subscription_option(std::string_view key);

// What one subscription does with one event, from its filter: the type not listed -> skip; listed
// with a version range that excludes the version -> quarantine (dead letter schema_unsupported).
enum class Routing { deliver, skip, quarantine };
struct VersionRange {
  std::int64_t min = 1, max = max_event_version;
};
Routing route(bool filtered, const std::optional<VersionRange>& accepted, std::int64_t version);

// Dead-letter error classes and messages of a subscription.
inline constexpr char schema_unsupported_class[] = "schema_unsupported";
inline constexpr char backlog_full_class[] = "backlog_full";
std::string quarantine_message(std::string_view event_type, std::int64_t version);
std::string backlog_full_message(std::string_view subscription);

// 42704: the tenant has no topic / subscription of this name.
[[noreturn]] void throw_unknown_topic(std::string_view tenant, std::string_view topic);
[[noreturn]] void throw_unknown_subscription(std::string_view topic, std::string_view subscription);
// 42710: the topic exists.
[[noreturn]] void throw_topic_exists(std::string_view tenant, std::string_view topic);
// 22023: the topic has max_subscriptions subscriptions.
[[noreturn]] void throw_too_many_subscriptions(std::string_view topic, int max_subscriptions);
// FY050: (event_type, version) is not registered for the tenant.
[[noreturn]] void throw_unregistered_event_type(std::string_view tenant, std::string_view event_type,
                                                std::int64_t version);
// 42710: registered before with another retention class.
[[noreturn]] void throw_event_type_conflict(std::string_view event_type, std::int64_t version,
                                            std::string_view retention_class);
// FY011: the event_id was published before with other contents (event `first` has it).
[[noreturn]] void throw_published_event_mismatch(std::int64_t first);

}  // namespace fy::core
