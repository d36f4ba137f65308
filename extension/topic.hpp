// What the topic functions share, split by phase like the queue files: topic.cpp (event type
// registry, topic create / drop / list), topic_subscribe.cpp (subscribe, unsubscribe, rewind),
// topic_publish.cpp (publish, publish_batch) and topic_claim.cpp (subscription_claim, purge).
// A subscription is a queue (queue.hpp) fed by its topic; the event's payload is stored once, in
// forgeyard.topic_events, and the subscription's message refers to it by event_id
// (docs/architecture.md#topics).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/topic.hpp"
#include "pg/spi.hpp"
#include "queue.hpp"

namespace fy::topic {

std::string topic_arg(FunctionCallInfo fcinfo, int n);
std::string subscription_arg(FunctionCallInfo fcinfo, int n);

// How a topic row is read: plain, kept from being dropped until commit (publishers), or
// serialized against other subscribes (the max_subscriptions count).
enum class Lock { none, key_share, no_key_update };

struct Topic {
  std::string tenant, name;
  pg::Value t, n;
  core::TopicOptions options;
};
// The topic of a tenant already checked; 42704 if it does not exist.
Topic load(pg::Spi& spi, const std::string& tenant, const std::string& name, Lock lock);

// One published event, as the subscriptions receive it.
struct Event {
  std::int64_t seq = 0;
  std::string event_id;  // 16 bytes
  std::string event_type;
  std::int64_t version = 0;
  std::optional<std::string> partition_key;
  int priority = 0;
  std::int64_t bytes = 0;
};

// A subscription of a topic and what it does with events of one (type, version).
struct Route {
  std::string subscription;
  bool dead_letter_when_full = false;
  bool filtered = false;
  std::optional<core::VersionRange> accepted;  // the type is listed (filtered subscriptions)
};
// The subscriptions of the topic (only `only` when given), in name order, with their filter for
// `event_type`.
std::vector<Route> routes(pg::Spi& spi, const Topic& topic, const std::string& event_type,
                          const std::optional<std::string>& only = std::nullopt);

enum class Delivered { message, quarantined, backlog_full, skipped };
// One event into one subscription queue, admitted like enqueue (queue::admit, the partition
// head): FY020 when full and on_full = reject, else a dead letter backlog_full; a version outside
// the accepted range becomes a dead letter schema_unsupported. FY021 over max_payload_bytes.
Delivered deliver(pg::Spi& spi, const queue::Queue& queue, const Route& route, const Event& event, TimestampTz now);

// Delivers the retained events published at or after `since` to one subscription, in event_seq
// order; returns how many reached its consumers.
std::int64_t replay(pg::Spi& spi, const Topic& topic, const std::string& subscription, TimestampTz since,
                    TimestampTz now);

}  // namespace fy::topic
