// Topics in the SQLite store: the extension's rules and answers (extension/topic*.cpp), decided by
// the same core code (core/topic.hpp); the queue side through sqlite_queue (queues.hpp).
#pragma once

#include "forgeyard/topics.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

class SqliteTopics final : public Topics {
 public:
  explicit SqliteTopics(SqliteSession& session) : session_(session) {}
  void register_event_type(std::string_view tenant, std::string_view event_type, int version,
                           RetentionClass retention_class) override;
  void create(std::string_view tenant, std::string_view topic, const TopicOptions& options) override;
  bool drop(std::string_view tenant, std::string_view topic) override;
  std::vector<TopicInfo> list(std::string_view tenant) override;
  void subscribe(std::string_view tenant, std::string_view topic, std::string_view subscription,
                 const SubscriptionOptions& options) override;
  bool unsubscribe(std::string_view tenant, std::string_view topic, std::string_view subscription) override;
  std::int64_t publish(std::string_view tenant, std::string_view topic, const Event& event) override;
  std::vector<std::int64_t> publish_batch(std::string_view tenant, std::string_view topic,
                                          const std::vector<Event>& events) override;
  std::int64_t rewind(std::string_view tenant, std::string_view topic, std::string_view subscription,
                      TimePoint since) override;
  std::vector<EventDelivery> claim(std::string_view tenant, std::string_view subscription, std::string_view consumer,
                                   int max_messages, std::optional<Duration> visibility) override;
  std::vector<SubscriptionLag> lag(std::string_view tenant, std::string_view topic, ReadClass read) override;

 private:
  SqliteSession& session_;
};

}  // namespace forgeyard::detail
