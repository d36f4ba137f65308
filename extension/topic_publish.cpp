// Publishing: publish and publish_batch, the transactional outbox of a topic. The event is stored
// once (forgeyard.topic_events); each matching subscription gets one payload-less message that
// refers to it by event_id (docs/architecture.md#topics).
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "tenant.hpp"
#include "topic.hpp"

using namespace fy;
using namespace fy::topic;

namespace {

struct Publisher {
  Topic topic;
  std::string event_type;
  std::int64_t version;
  int priority;
  std::vector<Route> routes;
  std::vector<queue::Queue> queues;  // parallel to routes
};

Publisher start(pg::Spi& spi, FunctionCallInfo fcinfo) {
  // The topic (kept from being dropped until commit) and whether the pair is registered, in one go.
  static pg::Statement topic_and_type(
      "SELECT t.max_subscriptions, t.retention_usecs, t.dedup_window_usecs,"
      "       EXISTS (SELECT 1 FROM forgeyard.event_types e WHERE e.tenant_id OPERATOR(pg_catalog.=) t.tenant_id"
      "                  AND e.event_type OPERATOR(pg_catalog.=) $3 AND e.version OPERATOR(pg_catalog.=) $4)"
      "  FROM forgeyard.topics t WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.topic OPERATOR(pg_catalog.=) $2"
      "   FOR KEY SHARE OF t",
      {TEXTOID, TEXTOID, TEXTOID, INT4OID});
  const std::string tenant = queue::tenant_arg(fcinfo);
  const std::string topic_name = topic_arg(fcinfo, 1);
  const std::string event_type = pg::name_arg(fcinfo, 2, "event_type", core::max_event_type_bytes);
  const std::int32_t version = pg::int4_arg(fcinfo, 3, "version");
  core::check_event_version("version", version);
  const int priority = core::priority_from_name("priority", pg::name_arg(fcinfo, 7, "priority", 64));
  check_tenant(spi, tenant);
  Publisher p{{tenant, topic_name, pg::text_value(tenant), pg::text_value(topic_name), {}},
              event_type,
              version,
              priority,
              {},
              {}};
  bool found = false, registered = false;
  spi.run(topic_and_type, {p.topic.t, p.topic.n, pg::text_value(event_type), pg::int4_value(version)},
          [&](const pg::Row& r) {
            p.topic.options.max_subscriptions = static_cast<int>(*r.int8(1));
            p.topic.options.retention_usecs = *r.int8(2);
            p.topic.options.dedup_window_usecs = *r.int8(3);
            registered = *r.boolean(4);
            found = true;
          });
  if (!found) core::throw_unknown_topic(tenant, topic_name);
  if (!registered) core::throw_unregistered_event_type(tenant, event_type, version);
  p.routes = routes(spi, p.topic, event_type);
  for (const Route& r : p.routes) p.queues.push_back(queue::load(spi, tenant, r.subscription, true));
  return p;
}

struct Published {
  std::string payload;
  std::optional<std::string> event_id, partition_key;
};

std::int64_t publish_one(pg::Spi& spi, const Publisher& p, const Published& m, TimestampTz now) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.topic_events (tenant_id, topic, event_seq, event_id, event_type, version, partition_key,"
      "   priority, payload, payload_digest, published_at)"
      " VALUES ($1, $2, pg_catalog.nextval('forgeyard.topic_event_seqs'), $3, $4, $5, $6, $7, $8, $9, $10)"
      " ON CONFLICT (tenant_id, topic, event_id) DO NOTHING RETURNING event_seq",
      {TEXTOID, TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTOID, INT2OID, BYTEAOID, TEXTOID, TIMESTAMPTZOID});
  static pg::Statement first(
      "SELECT event_seq, event_type OPERATOR(pg_catalog.=) $4 AND version OPERATOR(pg_catalog.=) $5"
      "   AND payload_digest OPERATOR(pg_catalog.=) $6 AND partition_key IS NOT DISTINCT FROM $7"
      "  FROM forgeyard.topic_events WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND topic OPERATOR(pg_catalog.=) $2"
      "   AND event_id OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTOID, TEXTOID});
  if (m.partition_key) core::check_name("partition_key", true, *m.partition_key, core::max_partition_key_bytes);
  Event e;
  e.event_id = m.event_id ? *m.event_id : pg::random_uuid();
  e.event_type = p.event_type;
  e.version = p.version;
  e.partition_key = m.partition_key;
  e.priority = p.priority;
  e.bytes = static_cast<std::int64_t>(m.payload.size());
  const std::string digest = core::sha256_hex(m.payload);
  const pg::Value id = pg::uuid_value(e.event_id), type = pg::text_value(p.event_type),
                  version = pg::int4_value(static_cast<std::int32_t>(p.version)),
                  key = pg::optional_text_value(m.partition_key), d = pg::text_value(digest);
  // A concurrent publisher of the same event_id waits here for this one's transaction, then
  // finds the first event.
  const bool inserted = spi.run(insert,
                                {p.topic.t,
                                 p.topic.n,
                                 id,
                                 type,
                                 version,
                                 key,
                                 {Int16GetDatum(p.priority), false},
                                 pg::bytea_value(m.payload),
                                 d,
                                 pg::timestamptz_value(now)},
                                [&](const pg::Row& r) { e.seq = *r.int8(1); }) > 0;
  if (!inserted) {
    bool same = false;
    spi.run(first, {p.topic.t, p.topic.n, id, type, version, d, key}, [&](const pg::Row& r) {
      e.seq = *r.int8(1);
      same = *r.boolean(2);
    });
    if (!same) core::throw_published_event_mismatch(e.seq);
    return e.seq;
  }
  for (std::size_t i = 0; i < p.routes.size(); ++i) deliver(spi, p.queues[i], p.routes[i], e, now);
  return e.seq;
}

}  // namespace

// publish(tenant, topic, event_type, version, payload, event_id, partition_key, priority) -> event_seq
FY_FUNCTION(fy_publish) {
  pg::Spi spi;
  Published m;
  m.payload = *pg::bytea_arg(fcinfo, 4, "payload", std::size_t{1} << 30);
  m.event_id = pg::optional_uuid_arg(fcinfo, 5);
  m.partition_key =
      pg::arg_is_null(fcinfo, 6)
          ? std::nullopt
          : std::optional<std::string>(*pg::text_arg(fcinfo, 6, "partition_key", core::max_partition_key_bytes, false));
  const Publisher p = start(spi, fcinfo);
  const std::int64_t seq = publish_one(spi, p, m, pg::now());
  spi.finish();
  return Int64GetDatum(seq);
}

// publish_batch(tenant, topic, event_type, version, payloads, event_ids, partition_keys, priority) -> event_seqs
FY_FUNCTION(fy_publish_batch) {
  pg::Spi spi;
  const auto payloads = pg::bytea_array_arg(fcinfo, 4);
  const auto event_ids = pg::uuid_array_arg(fcinfo, 5);
  const auto keys = pg::text_array_arg(fcinfo, 6);
  if (!payloads) throw core::Error(core::sqlstate::null_value, "payloads must not be NULL");
  if (payloads->size() > static_cast<std::size_t>(core::max_publish_batch))
    throw core::Error(core::sqlstate::invalid_parameter,
                      "payloads must hold at most " + std::to_string(core::max_publish_batch) + " events");
  if ((event_ids && event_ids->size() != payloads->size()) || (keys && keys->size() != payloads->size()))
    throw core::Error(core::sqlstate::invalid_parameter, "event_ids and partition_keys must match payloads in length");
  const Publisher p = start(spi, fcinfo);
  const TimestampTz now = pg::now();
  std::vector<std::int64_t> seqs;
  seqs.reserve(payloads->size());
  for (std::size_t i = 0; i < payloads->size(); ++i) {
    if (!(*payloads)[i]) throw core::Error(core::sqlstate::null_value, "payloads must not contain NULL");
    Published m{*(*payloads)[i], event_ids ? (*event_ids)[i] : std::nullopt, keys ? (*keys)[i] : std::nullopt};
    seqs.push_back(publish_one(spi, p, m, now));
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  for (std::int64_t s : seqs) out.add_row({pg::int8_value(s)});
  return (Datum)0;
}
