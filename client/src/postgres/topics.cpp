// Topics over the forgeyard extension's SQL API (docs/sql-api.md#topics).
#include "postgres/topics.hpp"

#include "core/core.hpp"
#include "core/timestamp.hpp"
#include "queue_options.hpp"
#include "topic_values.hpp"

namespace forgeyard::detail {

namespace {

#define FY_INTERVAL_USECS(expr) "(EXTRACT(epoch FROM " expr ") * 1000000)::pg_catalog.int8"

const PgStatement event_type_register_sql{"fy_event_type_register",
                                          "SELECT forgeyard.event_type_register($1, $2, $3, $4::pg_catalog.jsonb)", 4};
const PgStatement topic_create_sql{"fy_topic_create", "SELECT forgeyard.topic_create($1, $2, $3::pg_catalog.jsonb)", 3};
const PgStatement topic_drop_sql{"fy_topic_drop", "SELECT forgeyard.topic_drop($1, $2)", 2};
const PgStatement topic_list_sql{
    "fy_topic_list",
    "SELECT t.topic, (t.options OPERATOR(pg_catalog.->>) 'max_subscriptions')::pg_catalog.int8,"
    " " FY_INTERVAL_USECS("(t.options OPERATOR(pg_catalog.->>) 'retention')::pg_catalog.interval") ","
    " " FY_INTERVAL_USECS("(t.options OPERATOR(pg_catalog.->>) 'dedup_window')::pg_catalog.interval") ", s.s"
    " FROM forgeyard.topic_list($1) t"
    " LEFT JOIN LATERAL pg_catalog.jsonb_array_elements_text(t.subscriptions) WITH ORDINALITY AS s(s, n) ON true"
    " ORDER BY t.topic, s.n",
    1};
const PgStatement subscribe_sql{"fy_subscribe", "SELECT forgeyard.subscribe($1, $2, $3, $4::pg_catalog.jsonb)", 4};
const PgStatement unsubscribe_sql{"fy_unsubscribe", "SELECT forgeyard.unsubscribe($1, $2, $3)", 3};
const PgStatement publish_sql{
    "fy_publish", "SELECT forgeyard.publish($1, $2, $3, $4, $5::pg_catalog.bytea, $6::pg_catalog.uuid, $7, $8)", 8};
const PgStatement publish_batch_sql{
    "fy_publish_batch",
    "SELECT event_seq FROM forgeyard.publish_batch($1, $2, $3, $4, $5::pg_catalog.bytea[],"
    " $6::pg_catalog.uuid[], $7::pg_catalog.text[], $8)",
    8};
const PgStatement rewind_sql{"fy_subscription_rewind",
                             "SELECT forgeyard.subscription_rewind($1, $2, $3, $4::pg_catalog.timestamptz)", 4};
const PgStatement subscription_claim_sql{"fy_subscription_claim",
                            "SELECT msg_id, event_id, partition_key, priority, attempt, claim_token, payload, " FY_USECS(
                                "enqueued_at") ", topic, event_type, version, event_seq"
                                               " FROM forgeyard.subscription_claim($1, $2, $3, $4, $5::pg_catalog.interval)",
                            5};
const PgStatement lag_sql{"fy_subscription_lag",
                          "SELECT subscription, backlog, in_flight, dead, " FY_INTERVAL_USECS(
                              "oldest_unacked_age") ", pressure, " FY_USECS("last_ack_at")
                                                    " FROM forgeyard.subscription_lag WHERE tenant_id OPERATOR(pg_catalog.=) $1"
                                                    " AND topic OPERATOR(pg_catalog.=) $2 ORDER BY subscription",
                          2};

std::string retention_json(RetentionClass c) {
  return "{\"retention_class\":\"" + std::string(to_string(c)) + "\"}";
}

}  // namespace

void PgTopics::register_event_type(std::string_view tenant, std::string_view event_type, int version,
                                   RetentionClass retention_class) {
  session_.measure("topic.register_event_type", [&] {
    session_.run(event_type_register_sql, {text_param(tenant), text_param(event_type), std::to_string(version),
                                           retention_json(retention_class)});
  });
}

void PgTopics::create(std::string_view tenant, std::string_view topic, const TopicOptions& options) {
  session_.measure("topic.create", [&] {
    session_.run(topic_create_sql, {text_param(tenant), text_param(topic), topic_options_json(options)});
  });
}

bool PgTopics::drop(std::string_view tenant, std::string_view topic) {
  return session_.measure("topic.drop", [&] {
    PgResult r = session_.run(topic_drop_sql, {text_param(tenant), text_param(topic)});
    return r.text(0, 0) == "t";
  });
}

std::vector<TopicInfo> PgTopics::list(std::string_view tenant) {
  return session_.measure("topic.list", [&] {
    PgResult r = session_.run(topic_list_sql, {text_param(tenant)});
    std::vector<TopicInfo> out;
    for (int i = 0; i < r.rows(); ++i) {
      if (out.empty() || out.back().topic != r.text(i, 0)) {
        TopicInfo t;
        t.topic = r.text(i, 0);
        t.options.max_subscriptions = static_cast<int>(r.int8(i, 1));
        t.options.retention = Duration(r.int8(i, 2));
        t.options.dedup_window = Duration(r.int8(i, 3));
        out.push_back(std::move(t));
      }
      if (!r.is_null(i, 4)) out.back().subscriptions.push_back(r.text(i, 4));
    }
    return out;
  });
}

void PgTopics::subscribe(std::string_view tenant, std::string_view topic, std::string_view subscription,
                         const SubscriptionOptions& options) {
  session_.measure("topic.subscribe", [&] {
    session_.run(subscribe_sql,
                 {text_param(tenant), text_param(topic), text_param(subscription), subscription_options_json(options)});
  });
}

bool PgTopics::unsubscribe(std::string_view tenant, std::string_view topic, std::string_view subscription) {
  return session_.measure("topic.unsubscribe", [&] {
    PgResult r = session_.run(unsubscribe_sql, {text_param(tenant), text_param(topic), text_param(subscription)});
    return r.text(0, 0) == "t";
  });
}

std::int64_t PgTopics::publish(std::string_view tenant, std::string_view topic, const Event& e) {
  return session_.measure("topic.publish", [&] {
    PgResult r = session_.run(
        publish_sql, {text_param(tenant), text_param(topic), e.event_type, std::to_string(e.version),
                      bytea_param(e.payload), e.event_id, e.partition_key, std::string(to_string(e.priority))});
    return r.int8(0, 0);
  });
}

std::vector<std::int64_t> PgTopics::publish_batch(std::string_view tenant, std::string_view topic,
                                                  const std::vector<Event>& events) {
  return session_.measure("topic.publish_batch", [&] {
    if (events.empty()) return std::vector<std::int64_t>{};
    std::vector<std::optional<std::string>> payloads, ids, keys;
    bool any_id = false, any_key = false;
    for (const Event& e : events) {
      if (e.event_type != events.front().event_type || e.version != events.front().version ||
          e.priority != events.front().priority)
        throw Error(ErrorKind::InvalidArgument, "22023",
                    "a batch's events must share event_type, version and priority");
      payloads.push_back(bytea_param(e.payload));
      ids.push_back(e.event_id);
      keys.push_back(e.partition_key);
      any_id = any_id || e.event_id;
      any_key = any_key || e.partition_key;
    }
    const Event& f = events.front();
    PgResult r = session_.run(
        publish_batch_sql,
        {text_param(tenant), text_param(topic), f.event_type, std::to_string(f.version), array_param(payloads),
         any_id ? std::optional<std::string>(array_param(ids)) : std::nullopt,
         any_key ? std::optional<std::string>(array_param(keys)) : std::nullopt, std::string(to_string(f.priority))});
    std::vector<std::int64_t> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.int8(i, 0));
    return out;
  });
}

std::int64_t PgTopics::rewind(std::string_view tenant, std::string_view topic, std::string_view subscription,
                              TimePoint since) {
  return session_.measure("topic.rewind", [&] {
    PgResult r = session_.run(rewind_sql, {text_param(tenant), text_param(topic), text_param(subscription),
                                           fy::core::format_timestamp(unix_usecs(since))});
    return r.int8(0, 0);
  });
}

std::vector<EventDelivery> PgTopics::claim(std::string_view tenant, std::string_view subscription,
                                           std::string_view consumer, int max_messages,
                                           std::optional<Duration> visibility) {
  return session_.measure("topic.claim", [&] {
    PgResult r =
        session_.run(subscription_claim_sql,
                     {text_param(tenant), text_param(subscription), text_param(consumer), std::to_string(max_messages),
                      visibility ? std::optional<std::string>(interval_param(*visibility)) : std::nullopt});
    std::vector<EventDelivery> out;
    for (int i = 0; i < r.rows(); ++i) {
      EventDelivery e;
      Delivery& d = e.delivery;
      d.msg_id = r.int8(i, 0);
      if (!r.is_null(i, 1)) d.event_id = r.text(i, 1);
      if (!r.is_null(i, 2)) d.partition_key = r.text(i, 2);
      d.priority = priority_from_string(r.text(i, 3));
      d.attempt = static_cast<int>(r.int8(i, 4));
      d.claim_token = r.int8(i, 5);
      d.payload = r.bytea(i, 6);
      d.enqueued_at = from_unix_usecs(r.int8(i, 7));
      e.topic = r.text(i, 8);
      if (r.is_null(i, 11))
        throw Error(ErrorKind::Corruption, "XX000",
                    "a delivery of subscription " + text_param(subscription) + " refers to no stored event");
      e.event_type = r.text(i, 9);
      e.version = static_cast<int>(r.int8(i, 10));
      e.event_seq = r.int8(i, 11);
      out.push_back(std::move(e));
    }
    return out;
  });
}

std::vector<SubscriptionLag> PgTopics::lag(std::string_view tenant, std::string_view topic, ReadClass read) {
  return session_.measure("topic.lag", [&] {
    PgResult r = session_.read(lag_sql, {text_param(tenant), text_param(topic)}, read);
    std::vector<SubscriptionLag> out;
    for (int i = 0; i < r.rows(); ++i) {
      SubscriptionLag l;
      l.topic = text_param(topic);
      l.subscription = r.text(i, 0);
      l.backlog = r.int8(i, 1);
      l.in_flight = r.int8(i, 2);
      l.dead = r.int8(i, 3);
      if (!r.is_null(i, 4)) l.oldest_unacked_age = Duration(r.int8(i, 4));
      l.pressure = r.text(i, 5);
      if (!r.is_null(i, 6)) l.last_ack_at = from_unix_usecs(r.int8(i, 6));
      out.push_back(std::move(l));
    }
    return out;
  });
}

}  // namespace forgeyard::detail
