// Durable pub/sub: topics of a tenant, subscriptions (consumer groups: each a queue of the tenant
// fed by the topic), an event type registry, replay within retention and lag
// (docs/sql-api.md#topics). Consumers use the Queues API on a subscription unchanged (claim, ack,
// nack, extend, ack_and_claim, Worker); Topics::claim adds each delivery's event metadata.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forgeyard/queues.hpp"
#include "forgeyard/types.hpp"

namespace forgeyard {

enum class RetentionClass { Ephemeral, Short, Operational, Audit };
FORGEYARD_API std::string_view to_string(RetentionClass retention_class) noexcept;

struct TopicOptions {
  int max_subscriptions = 16;                      // 1..256: fan-out is bounded
  Duration retention = Duration::zero();           // how long events stay replayable (0: not at all)
  Duration dedup_window = std::chrono::hours(24);  // a repeated event_id returns the first event
};

// The versions of one event type a subscription accepts; others are quarantined in its dead
// letters with error class schema_unsupported.
struct VersionRange {
  int min = 1;
  int max = 1'000'000;
};

enum class OnFull {
  Reject,     // the publish fails with QueueFull (FY020) naming the subscription
  DeadLetter  // the subscription records the event as a dead letter backlog_full
};
enum class StartAt {
  Now,    // only events published after the subscription exists
  Oldest  // first the events the topic still retains
};

struct SubscriptionOptions {
  QueueOptions queue;  // the subscription's queue: bounds, visibility, retries, dead letters, ordering
  // Accepted types and versions; nullopt: every type and version.
  std::optional<std::map<std::string, VersionRange>> event_types;
  OnFull on_full = OnFull::Reject;
  StartAt start = StartAt::Now;
};

struct Event {
  std::string event_type;
  int version = 1;
  Bytes payload;
  std::optional<std::string> event_id;  // a UUID; a repeat within the dedup window returns the first event_seq
  std::optional<std::string> partition_key;
  Priority priority = Priority::Interactive;
};

// A delivery from a subscription with the event it carries.
struct EventDelivery {
  Delivery delivery;  // ack / nack / extend it through Queues with the subscription as the queue
  std::string topic;
  std::string event_type;
  int version = 0;
  std::int64_t event_seq = 0;
};

struct TopicInfo {
  std::string topic;
  TopicOptions options;
  std::vector<std::string> subscriptions;
};

struct SubscriptionLag {
  std::string topic, subscription;
  std::int64_t backlog = 0, in_flight = 0, dead = 0;
  std::optional<Duration> oldest_unacked_age;
  std::string pressure;  // normal, elevated, saturated
  std::optional<TimePoint> last_ack_at;
};

class FORGEYARD_API Topics {
 public:
  virtual ~Topics() = default;
  // Registering the same pair again is a no-op; with another retention class InvalidArgument (42710).
  virtual void register_event_type(std::string_view tenant, std::string_view event_type, int version,
                                   RetentionClass retention_class = RetentionClass::Operational) = 0;
  virtual void create(std::string_view tenant, std::string_view topic, const TopicOptions& options = {}) = 0;
  // Drops its subscriptions (their queues, messages and dead letters) and events too.
  virtual bool drop(std::string_view tenant, std::string_view topic) = 0;
  virtual std::vector<TopicInfo> list(std::string_view tenant) = 0;
  // InvalidArgument over max_subscriptions, or when a queue of that name exists.
  virtual void subscribe(std::string_view tenant, std::string_view topic, std::string_view subscription,
                         const SubscriptionOptions& options = {}) = 0;
  virtual bool unsubscribe(std::string_view tenant, std::string_view topic, std::string_view subscription) = 0;
  // Inside a Transaction: delivered only after commit, nothing on rollback (the outbox rule).
  // Returns the event_seq (monotonic per topic). SchemaUnsupported (FY050) for an unregistered
  // (type, version), QueueFull naming a full reject subscription, PayloadTooLarge, NotFound.
  virtual std::int64_t publish(std::string_view tenant, std::string_view topic, const Event& event) = 0;
  // Events of one type, version and priority, all or nothing; event_seqs in order.
  virtual std::vector<std::int64_t> publish_batch(std::string_view tenant, std::string_view topic,
                                                  const std::vector<Event>& events) = 0;
  // Delivers the retained events published at or after `since` again; returns how many reached
  // the subscription's consumers. Consumers must be idempotent (Queues::inbox_accept on event_id).
  virtual std::int64_t rewind(std::string_view tenant, std::string_view topic, std::string_view subscription,
                              TimePoint since) = 0;
  // Queues::claim on a subscription, each delivery with its topic, type, version and event_seq.
  virtual std::vector<EventDelivery> claim(std::string_view tenant, std::string_view subscription,
                                           std::string_view consumer, int max_messages = 1,
                                           std::optional<Duration> visibility = std::nullopt) = 0;
  // Per subscription of the topic (PostgreSQL: the subscription_lag view, an inspection role's).
  virtual std::vector<SubscriptionLag> lag(std::string_view tenant, std::string_view topic, ReadClass read = {}) = 0;
};

}  // namespace forgeyard
