// Subscriptions: subscribe (a queue of the tenant fed by the topic, created through queue_create
// with its options), unsubscribe, and subscription_rewind (docs/sql-api.md#topics).
#include <array>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "tenant.hpp"
#include "topic.hpp"

using namespace fy;
using namespace fy::topic;

namespace {

using core::sqlstate::invalid_parameter;

// The subscription's own options (event_types, on_full, start); the rest are the queue's.
struct SubscriptionOptions {
  bool dead_letter_when_full = false;
  bool start_oldest = false;
  bool filtered = false;
};

// Checks event_types: ["type", ...] or {"type": {"min": v, "max": v}} (either bound optional).
void check_event_types(pg::Spi& spi, const pg::Value& options) {
  static pg::Statement entries(
      "WITH f AS (SELECT $1 OPERATOR(pg_catalog.->) 'event_types' AS f)"
      " SELECT 'array', pg_catalog.jsonb_typeof(e), e OPERATOR(pg_catalog.#>>) '{}', NULL, NULL, 0::pg_catalog.int8"
      "   FROM f, pg_catalog.jsonb_array_elements(f.f) e WHERE pg_catalog.jsonb_typeof(f.f) OPERATOR(pg_catalog.=) 'array'"
      " UNION ALL"
      " SELECT 'object', pg_catalog.jsonb_typeof(e.value), e.key,"
      "        CASE WHEN pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.=) 'object'"
      "             THEN e.value OPERATOR(pg_catalog.->) 'min' OPERATOR(pg_catalog.#>>) '{}' END,"
      "        CASE WHEN pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.=) 'object'"
      "             THEN e.value OPERATOR(pg_catalog.->) 'max' OPERATOR(pg_catalog.#>>) '{}' END,"
      "        CASE WHEN pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.=) 'object'"
      "             THEN (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(e.value) k"
      "                    WHERE k OPERATOR(pg_catalog.<>) ALL ('{min,max}'::pg_catalog.text[])) ELSE 0 END"
      "   FROM f, pg_catalog.jsonb_each(f.f) e WHERE pg_catalog.jsonb_typeof(f.f) OPERATOR(pg_catalog.=) 'object'",
      {JSONBOID});
  static pg::Statement kind("SELECT pg_catalog.jsonb_typeof($1 OPERATOR(pg_catalog.->) 'event_types')", {JSONBOID});
  std::string shape;
  spi.run(kind, {options}, [&](const pg::Row& r) { shape = r.text(1).value_or(""); });
  if (shape != "array" && shape != "object")
    throw core::Error(invalid_parameter,
                      "subscription option event_types must be an array of type names or an object of version ranges");
  auto version = [](const std::optional<std::string>& text, const char* which) -> std::int64_t {
    const std::string argument = std::string("event_types ") + which;
    if (!text || text->empty() || text->size() > 7 || text->find_first_not_of("0123456789") != std::string::npos)
      throw core::Error(invalid_parameter,
                        argument + " must be a version between 1 and " + std::to_string(core::max_event_version));
    const std::int64_t v = std::stoll(*text);
    core::check_event_version(argument.c_str(), v);
    return v;
  };
  int count = 0;
  std::vector<std::string> errors;
  spi.run(entries, {options}, [&](const pg::Row& r) {
    ++count;
    const std::string element_kind = *r.text(2);
    const std::string name = r.text(3).value_or("");
    if (*r.text(1) == "array" && element_kind != "string") {
      errors.push_back("subscription option event_types must list type names (strings)");
      return;
    }
    if (*r.text(1) == "object" && element_kind != "object") {
      errors.push_back("subscription option event_types: the value of \"" + name +
                       "\" must be an object {\"min\": v, \"max\": v}");
      return;
    }
    try {
      core::check_name("event_types entry", true, name, core::max_event_type_bytes);
      if (*r.int8(6) > 0)
        throw core::Error(invalid_parameter, "subscription option event_types: only min and max are allowed");
      std::int64_t min = 1, max = core::max_event_version;
      if (!r.is_null(4)) min = version(r.text(4), "min");
      if (!r.is_null(5)) max = version(r.text(5), "max");
      if (min > max) throw core::Error(invalid_parameter, "event_types min must not be over max");
    } catch (const core::Error& e) {
      errors.push_back(e.what());
    }
  });
  if (!errors.empty()) throw core::Error(invalid_parameter, errors.front());
  if (count == 0) throw core::Error(invalid_parameter, "subscription option event_types must list at least one type");
}

SubscriptionOptions parse_subscription_options(pg::Spi& spi, const pg::Value& options) {
  static pg::Statement entries(
      "SELECT e.key, pg_catalog.jsonb_typeof(e.value), e.value OPERATOR(pg_catalog.#>>) '{}'"
      "  FROM pg_catalog.jsonb_each($1) e WHERE e.key OPERATOR(pg_catalog.=) ANY ('{event_types,on_full,start}'::pg_catalog.text[])",
      {JSONBOID});
  if (!pg::jsonb_object_keys(options)) throw core::Error(invalid_parameter, "options must be a JSON object");
  SubscriptionOptions o;
  std::vector<std::array<std::string, 3>> pairs;
  spi.run(entries, {options}, [&](const pg::Row& r) {
    pairs.push_back({*r.text(1), *r.text(2), r.text(3).value_or("")});
  });
  for (const auto& [key, type, value] : pairs) {
    if (key == "on_full")
      o.dead_letter_when_full = core::on_full_dead_letter(type == "string" ? value : "");
    else if (key == "start")
      o.start_oldest = core::start_oldest(type == "string" ? value : "");
    else if (type != "null") {
      check_event_types(spi, options);
      o.filtered = true;
    }
  }
  return o;
}

}  // namespace

// subscribe(tenant, topic, subscription, options)
FY_FUNCTION(fy_subscribe) {
  static pg::Statement count(
      "SELECT pg_catalog.count(*) FROM forgeyard.subscriptions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND topic OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement create_queue(
      "SELECT forgeyard.queue_create($1, $2, $3 OPERATOR(pg_catalog.-) '{event_types,on_full,start}'::pg_catalog.text[])",
      {TEXTOID, TEXTOID, JSONBOID});
  // event_types normalized to {"type": {"min": v, "max": v}} (bounds left out stay out).
  static pg::Statement insert(
      "INSERT INTO forgeyard.subscriptions (tenant_id, subscription, topic, on_full, event_types, created_at)"
      " SELECT $1, $2, $3, $4, CASE WHEN NOT $5 THEN NULL"
      "   WHEN pg_catalog.jsonb_typeof($6 OPERATOR(pg_catalog.->) 'event_types') OPERATOR(pg_catalog.=) 'array' THEN"
      "     (SELECT pg_catalog.jsonb_object_agg(e OPERATOR(pg_catalog.#>>) '{}', '{}'::pg_catalog.jsonb)"
      "        FROM pg_catalog.jsonb_array_elements($6 OPERATOR(pg_catalog.->) 'event_types') e)"
      "   ELSE (SELECT pg_catalog.jsonb_object_agg(e.key, pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object("
      "           'min', (e.value OPERATOR(pg_catalog.->>) 'min')::pg_catalog.int8,"
      "           'max', (e.value OPERATOR(pg_catalog.->>) 'max')::pg_catalog.int8)))"
      "           FROM pg_catalog.jsonb_each($6 OPERATOR(pg_catalog.->) 'event_types') e) END, $7",
      {TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, JSONBOID, TIMESTAMPTZOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string topic_name = topic_arg(fcinfo, 1);
  const std::string subscription = subscription_arg(fcinfo, 2);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value options = pg::arg_is_null(fcinfo, 3) ? pg::jsonb_value("{}") : pg::jsonb_arg(fcinfo, 3, "options");
  const SubscriptionOptions o = parse_subscription_options(spi, options);
  // Subscribes of one topic take turns here; publishers (FOR KEY SHARE) are not blocked.
  const Topic topic = load(spi, tenant, topic_name, Lock::no_key_update);
  std::int64_t subscriptions = 0;
  spi.run(count, {topic.t, topic.n}, [&](const pg::Row& r) { subscriptions = *r.int8(1); });
  if (subscriptions >= topic.options.max_subscriptions)
    core::throw_too_many_subscriptions(topic_name, topic.options.max_subscriptions);
  const pg::Value s = pg::text_value(subscription);
  spi.run(create_queue, {topic.t, s, options});
  const TimestampTz now = pg::now();
  spi.run(insert, {topic.t, s, topic.n, pg::text_value(o.dead_letter_when_full ? "dead_letter" : "reject"),
                   pg::bool_value(o.filtered), options, pg::timestamptz_value(now)});
  if (o.start_oldest) replay(spi, topic, subscription, DT_NOBEGIN, now);
  spi.finish();
  return (Datum)0;
}

// unsubscribe(tenant, topic, subscription) -> whether it existed; its queue goes too.
FY_FUNCTION(fy_unsubscribe) {
  static pg::Statement remove(
      "DELETE FROM forgeyard.subscriptions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND topic OPERATOR(pg_catalog.=) $2 AND subscription OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, TEXTOID});
  static pg::Statement drop_queue("SELECT forgeyard.queue_drop($1, $2)", {TEXTOID, TEXTOID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string topic_name = topic_arg(fcinfo, 1);
  const std::string subscription = subscription_arg(fcinfo, 2);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const Topic topic = load(spi, tenant, topic_name, Lock::none);
  const pg::Value s = pg::text_value(subscription);
  const bool removed = spi.run(remove, {topic.t, topic.n, s}) > 0;
  if (removed) spi.run(drop_queue, {topic.t, s});
  spi.finish();
  return BoolGetDatum(removed);
}

// subscription_rewind(tenant, topic, subscription, since) -> events delivered again
FY_FUNCTION(fy_subscription_rewind) {
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string topic_name = topic_arg(fcinfo, 1);
  const std::string subscription = subscription_arg(fcinfo, 2);
  const std::optional<TimestampTz> since = pg::optional_timestamptz_arg(fcinfo, 3);
  if (!since) throw core::Error(core::sqlstate::null_value, "since must not be NULL");
  pg::Spi spi;
  check_tenant(spi, tenant);
  const Topic topic = load(spi, tenant, topic_name, Lock::key_share);
  if (routes(spi, topic, "", subscription).empty()) core::throw_unknown_subscription(topic_name, subscription);
  const std::int64_t delivered = replay(spi, topic, subscription, *since, pg::now());
  spi.finish();
  return Int64GetDatum(delivered);
}
