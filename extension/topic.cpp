// Topics: the event type registry, a topic's life (create, drop, list) and what the topic
// functions share: loading a topic, the routes of an event, delivering it into a subscription
// (docs/sql-api.md#topics).
#include "topic.hpp"

#include <array>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "tenant.hpp"

namespace fy::topic {

std::string topic_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "topic", core::max_topic_name_bytes);
}
std::string subscription_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "subscription", core::max_queue_name_bytes);
}

Topic load(pg::Spi& spi, const std::string& tenant, const std::string& name, Lock lock) {
#define FY_TOPIC_READ                                                 \
  "SELECT max_subscriptions, retention_usecs, dedup_window_usecs"     \
  "  FROM forgeyard.topics WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
  "   AND topic OPERATOR(pg_catalog.=) $2"
  static pg::Statement plain(FY_TOPIC_READ, {TEXTOID, TEXTOID});
  static pg::Statement key_share(FY_TOPIC_READ " FOR KEY SHARE", {TEXTOID, TEXTOID});
  static pg::Statement no_key_update(FY_TOPIC_READ " FOR NO KEY UPDATE", {TEXTOID, TEXTOID});
#undef FY_TOPIC_READ
  Topic topic{tenant, name, pg::text_value(tenant), pg::text_value(name), {}};
  pg::Statement& read = lock == Lock::none ? plain : lock == Lock::key_share ? key_share : no_key_update;
  bool found = false;
  spi.run(read, {topic.t, topic.n}, [&](const pg::Row& r) {
    topic.options.max_subscriptions = static_cast<int>(*r.int8(1));
    topic.options.retention_usecs = *r.int8(2);
    topic.options.dedup_window_usecs = *r.int8(3);
    found = true;
  });
  if (!found) core::throw_unknown_topic(tenant, name);
  return topic;
}

std::vector<Route> routes(pg::Spi& spi, const Topic& topic, const std::string& event_type,
                          const std::optional<std::string>& only) {
  static pg::Statement read(
      "SELECT s.subscription, s.on_full OPERATOR(pg_catalog.=) 'dead_letter', s.event_types IS NOT NULL,"
      "       s.event_types OPERATOR(pg_catalog.?) $3,"
      "       (s.event_types OPERATOR(pg_catalog.->) $3 OPERATOR(pg_catalog.->>) 'min')::pg_catalog.int8,"
      "       (s.event_types OPERATOR(pg_catalog.->) $3 OPERATOR(pg_catalog.->>) 'max')::pg_catalog.int8"
      "  FROM forgeyard.subscriptions s"
      " WHERE s.tenant_id OPERATOR(pg_catalog.=) $1 AND s.topic OPERATOR(pg_catalog.=) $2"
      "   AND ($4::pg_catalog.text IS NULL OR s.subscription OPERATOR(pg_catalog.=) $4)"
      " ORDER BY s.subscription",
      {TEXTOID, TEXTOID, TEXTOID, TEXTOID});
  std::vector<Route> out;
  spi.run(read, {topic.t, topic.n, pg::text_value(event_type), pg::optional_text_value(only)}, [&](const pg::Row& r) {
    Route route{*r.text(1), *r.boolean(2), *r.boolean(3), std::nullopt};
    if (route.filtered && *r.boolean(4)) {
      core::VersionRange range;
      if (auto min = r.int8(5)) range.min = *min;
      if (auto max = r.int8(6)) range.max = *max;
      route.accepted = range;
    }
    out.push_back(std::move(route));
  });
  return out;
}

Delivered deliver(pg::Spi& spi, const queue::Queue& queue, const Route& route, const Event& event, TimestampTz now) {
#define FY_INSERT_EVENT(pass_column, pass_value)                                                                             \
  "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,"             \
  "   payload, bytes, slot, enqueued_at, visible_at" pass_column                                                             \
  ")"                                                                                                                        \
  " VALUES (pg_catalog.nextval('forgeyard.message_ids'), $1, $2, 'pending', $3, $4, $5, $6, NULL, $7, $8, $9, $9" pass_value \
  ")"
  static pg::Statement insert(FY_INSERT_EVENT("", ""),
                              {TEXTOID, TEXTOID, INT2OID, TEXTOID, BOOLOID, UUIDOID, INT8OID, INT2OID, TIMESTAMPTZOID});
  // (A fair subscription queue's message gets its pass, as enqueue gives one.)
  static pg::Statement insert_fair(
      FY_INSERT_EVENT(", pass", ", $10"),
      {TEXTOID, TEXTOID, INT2OID, TEXTOID, BOOLOID, UUIDOID, INT8OID, INT2OID, TIMESTAMPTZOID, INT8OID});
#undef FY_INSERT_EVENT
  // A dead letter never took capacity (dead letters do not count against the bounds).
  static pg::Statement insert_dead(
      "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,"
      "   payload, bytes, slot, enqueued_at, visible_at, last_error, error_class, finished_at)"
      " VALUES (pg_catalog.nextval('forgeyard.message_ids'), $1, $2, 'dead', $3, $4, false, $5, NULL, $6, 0, $7, $7,"
      "         $8, $9, $7)",
      {TEXTOID, TEXTOID, INT2OID, TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID});
  static pg::Statement notify("SELECT pg_catalog.pg_notify('forgeyard_queue', $1)", {TEXTOID});

  auto dead = [&](const std::string& error, const char* error_class) {
    spi.run(insert_dead, {queue.t,
                          queue.q,
                          {Int16GetDatum(event.priority), false},
                          pg::optional_text_value(event.partition_key),
                          pg::uuid_value(event.event_id),
                          pg::int8_value(event.bytes),
                          pg::timestamptz_value(now),
                          pg::text_value(error),
                          pg::text_value(error_class)});
  };
  switch (core::route(route.filtered, route.accepted, event.version)) {
    case core::Routing::skip:
      return Delivered::skipped;
    case core::Routing::quarantine:
      dead(core::quarantine_message(event.event_type, event.version), core::schema_unsupported_class);
      return Delivered::quarantined;
    case core::Routing::deliver:
      break;
  }
  const core::QueueOptions& o = queue.options;
  if (event.bytes > o.max_payload_bytes) core::throw_payload_too_large(queue.name, o, event.bytes);
  if (o.partitioned && !event.partition_key) core::throw_partition_key_required(queue.name);
  int slot = 0;
  try {
    slot = queue::admit(spi, queue, event.priority, event.bytes);
  } catch (const core::Error& e) {
    // admit refuses before it changes anything: the subscription may take the event as a dead letter.
    if (e.sqlstate() != core::sqlstate::queue_full || !route.dead_letter_when_full) throw;
    dead(core::backlog_full_message(queue.name), core::backlog_full_class);
    return Delivered::backlog_full;
  }
  const bool is_head = queue::join_key(spi, queue, core::group_key(o, event.partition_key, std::nullopt)) > 0;
  std::vector<pg::Value> values{queue.t,
                                queue.q,
                                {Int16GetDatum(event.priority), false},
                                pg::optional_text_value(event.partition_key),
                                pg::bool_value(is_head),
                                pg::uuid_value(event.event_id),
                                pg::int8_value(event.bytes),
                                {Int16GetDatum(slot), false},
                                pg::timestamptz_value(now)};
  if (o.fairness) values.push_back(pg::int8_value(queue::fair_passes(spi, queue, event.priority, std::nullopt, 1)[0]));
  spi.run(o.fairness ? insert_fair : insert, std::span<const pg::Value>(values), [](const pg::Row&) {});
  // The same wake-up payload as enqueue: a digest of "<tenant>/<queue>".
  if (o.notify) spi.run(notify, {pg::text_value(core::sha256_hex(queue.tenant + "/" + queue.name).substr(0, 32))});
  return Delivered::message;
}

std::int64_t replay(pg::Spi& spi, const Topic& topic, const std::string& subscription, TimestampTz since,
                    TimestampTz now) {
  static pg::Statement retained(
      "SELECT event_seq, event_id, event_type, version, partition_key, priority,"
      "       pg_catalog.octet_length(payload)::pg_catalog.int8"
      "  FROM forgeyard.topic_events WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND topic OPERATOR(pg_catalog.=) $2"
      "   AND published_at OPERATOR(pg_catalog.>=) $3 AND published_at OPERATOR(pg_catalog.>) $4"
      " ORDER BY event_seq",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  if (topic.options.retention_usecs == 0) return 0;
  std::vector<Event> events;
  spi.run(retained,
          {topic.t, topic.n, pg::timestamptz_value(since), pg::timestamptz_value(now - topic.options.retention_usecs)},
          [&](const pg::Row& r) {
            Event e;
            e.seq = *r.int8(1);
            e.event_id = *r.uuid(2);
            e.event_type = *r.text(3);
            e.version = *r.int8(4);
            e.partition_key = r.text(5);
            e.priority = static_cast<int>(*r.int8(6));
            e.bytes = *r.int8(7);
            events.push_back(std::move(e));
          });
  const queue::Queue queue = queue::load(spi, topic.tenant, subscription, true);
  std::int64_t delivered = 0;
  std::optional<std::string> type_of_route;
  std::vector<Route> route;
  for (const Event& e : events) {
    if (type_of_route != e.event_type) {
      route = routes(spi, topic, e.event_type, subscription);
      type_of_route = e.event_type;
    }
    if (route.empty()) core::throw_unknown_subscription(topic.name, subscription);
    if (deliver(spi, queue, route.front(), e, now) == Delivered::message) ++delivered;
  }
  return delivered;
}

}  // namespace fy::topic

using namespace fy;
using namespace fy::topic;

namespace {

std::string event_type_arg(FunctionCallInfo fcinfo, int n) {
  return pg::name_arg(fcinfo, n, "event_type", core::max_event_type_bytes);
}

}  // namespace

// event_type_register(tenant, event_type, version, options)
FY_FUNCTION(fy_event_type_register) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.event_types (tenant_id, event_type, version, retention_class, registered_at)"
      " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, INT4OID, TEXTOID, TIMESTAMPTZOID});
  static pg::Statement existing(
      "SELECT retention_class FROM forgeyard.event_types WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND event_type OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, INT4OID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string event_type = event_type_arg(fcinfo, 1);
  const std::int32_t version = pg::int4_arg(fcinfo, 2, "version");
  core::check_event_version("version", version);
  pg::Spi spi;
  check_tenant(spi, tenant);
  std::string retention_class = core::default_retention_class;
  if (!pg::arg_is_null(fcinfo, 3))
    for (const auto& [key, value] : pg::jsonb_option_pairs(spi, pg::jsonb_arg(fcinfo, 3, "options"))) {
      if (key != "retention_class")
        throw core::Error(core::sqlstate::invalid_parameter, "event type option " + key + " is unknown");
      core::check_retention_class(value);
      retention_class = value;
    }
  const pg::Value t = pg::text_value(tenant), e = pg::text_value(event_type), v = pg::int4_value(version);
  if (spi.run(insert, {t, e, v, pg::text_value(retention_class), pg::timestamptz_value(pg::now())}) == 0) {
    std::string current;
    spi.run(existing, {t, e, v}, [&](const pg::Row& r) { current = *r.text(1); });
    if (current != retention_class) core::throw_event_type_conflict(event_type, version, current);
  }
  spi.finish();
  return (Datum)0;
}

// event_type_list(tenant) -> (event_type, version, retention_class, registered_at)
FY_FUNCTION(fy_event_type_list) {
  static pg::Statement list(
      "SELECT event_type, version, retention_class, registered_at FROM forgeyard.event_types"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 ORDER BY event_type, version",
      {TEXTOID});
  struct Row {
    std::string type;
    std::int64_t version;
    std::string retention_class;
    TimestampTz at;
  };
  const std::string tenant = queue::tenant_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  std::vector<Row> rows;
  spi.run(list, {pg::text_value(tenant)}, [&](const pg::Row& r) {
    rows.push_back({*r.text(1), *r.int8(2), *r.text(3), *r.timestamptz(4)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const Row& r : rows)
    out.add_row({pg::text_value(r.type), pg::int4_value(static_cast<std::int32_t>(r.version)),
                 pg::text_value(r.retention_class), pg::timestamptz_value(r.at)});
  return (Datum)0;
}

// topic_create(tenant, topic, options)
FY_FUNCTION(fy_topic_create) {
  static pg::Statement create(
      "INSERT INTO forgeyard.topics (tenant_id, topic, max_subscriptions, retention_usecs, dedup_window_usecs,"
      "   created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string name = topic_arg(fcinfo, 1);
  pg::Spi spi;
  check_tenant(spi, tenant);
  core::TopicOptions o;
  if (!pg::arg_is_null(fcinfo, 2))
    for (const auto& [key, value] : pg::jsonb_option_pairs(spi, pg::jsonb_arg(fcinfo, 2, "options"))) {
      if (core::is_topic_duration_option(key))
        core::set_topic_duration(o, key, pg::parse_interval(value, "topic option " + key));
      else
        core::set_topic_option(o, key, value);
    }
  if (spi.run(create, {pg::text_value(tenant), pg::text_value(name), pg::int4_value(o.max_subscriptions),
                       pg::int8_value(o.retention_usecs), pg::int8_value(o.dedup_window_usecs),
                       pg::timestamptz_value(pg::now())}) == 0)
    core::throw_topic_exists(tenant, name);
  spi.finish();
  return (Datum)0;
}

// topic_drop(tenant, topic) -> whether it existed; its subscriptions (queues) and events go too.
FY_FUNCTION(fy_topic_drop) {
  // The topic row goes first: that waits for publishers (FOR KEY SHARE) to commit.
  static pg::Statement drop_topic(
      "DELETE FROM forgeyard.topics WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND topic OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_subscriptions(
      "WITH d AS (DELETE FROM forgeyard.subscriptions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "             AND topic OPERATOR(pg_catalog.=) $2 RETURNING tenant_id, subscription)"
      " SELECT forgeyard.queue_drop(d.tenant_id, d.subscription) FROM d ORDER BY d.subscription",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_events(
      "DELETE FROM forgeyard.topic_events WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND topic OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string name = topic_arg(fcinfo, 1);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value t = pg::text_value(tenant), n = pg::text_value(name);
  const bool dropped = spi.run(drop_topic, {t, n}) > 0;
  spi.run(drop_subscriptions, {t, n});
  spi.run(drop_events, {t, n});
  spi.finish();
  return BoolGetDatum(dropped);
}

// topic_list(tenant) -> (topic, options, subscriptions)
FY_FUNCTION(fy_topic_list) {
  static pg::Statement list(
      "SELECT t.topic, pg_catalog.jsonb_build_object('max_subscriptions', t.max_subscriptions,"
      "  'retention', (t.retention_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'dedup_window', (t.dedup_window_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text"
      "  )::pg_catalog.text,"
      "  COALESCE((SELECT pg_catalog.jsonb_agg(s.subscription ORDER BY s.subscription) FROM forgeyard.subscriptions s"
      "             WHERE s.tenant_id OPERATOR(pg_catalog.=) t.tenant_id AND s.topic OPERATOR(pg_catalog.=) t.topic),"
      "           '[]'::pg_catalog.jsonb)::pg_catalog.text"
      "  FROM forgeyard.topics t WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 ORDER BY t.topic",
      {TEXTOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  std::vector<std::array<std::string, 3>> rows;
  spi.run(list, {pg::text_value(tenant)}, [&](const pg::Row& r) {
    rows.push_back({*r.text(1), *r.text(2), *r.text(3)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const auto& r : rows) out.add_row({pg::text_value(r[0]), pg::jsonb_value(r[1]), pg::jsonb_value(r[2])});
  return (Datum)0;
}
