// Consuming a subscription: subscription_claim (claim plus the event each delivery carries) and
// topic_purge, the maintenance of stored events (docs/sql-api.md#topics).
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "tenant.hpp"
#include "topic.hpp"

using namespace fy;
using namespace fy::topic;

// subscription_claim(tenant, subscription, consumer, max_messages, visibility) -> claim's rows plus
// (topic, event_type, version, event_seq)
FY_FUNCTION(fy_subscription_claim) {
  static pg::Statement subscription_topic(
      "SELECT topic FROM forgeyard.subscriptions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND subscription OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement event(
      "SELECT event_type, version, event_seq FROM forgeyard.topic_events WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND topic OPERATOR(pg_catalog.=) $2 AND event_id OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, UUIDOID});
  struct Meta {
    std::string type;
    std::int64_t version = 0, seq = 0;
  };
  // Arguments first (a NULL is 22004 whatever the queue), then the subscription.
  const std::string consumer = pg::name_arg(fcinfo, 2, "consumer", core::max_consumer_bytes);
  pg::Spi spi;
  const queue::Queue queue = queue::load(spi, fcinfo);
  std::optional<std::string> topic;
  spi.run(subscription_topic, {queue.t, queue.q}, [&](const pg::Row& r) { topic = r.text(1); });
  if (!topic) core::throw_unknown_subscription("(any)", queue.name);
  const int max_messages = queue::max_messages_arg(fcinfo, 3);
  const std::int64_t visibility = queue::visibility_arg(fcinfo, 4, queue);
  const std::vector<queue::Claimed> claimed = queue::claim(spi, queue, consumer, max_messages, visibility, pg::now());
  std::vector<Meta> meta(claimed.size());
  const pg::Value t = pg::text_value(*topic);
  for (std::size_t i = 0; i < claimed.size(); ++i)
    if (claimed[i].event_id)
      spi.run(event, {queue.t, t, pg::uuid_value(*claimed[i].event_id)}, [&](const pg::Row& r) {
        meta[i] = {*r.text(1), *r.int8(2), *r.int8(3)};
      });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    const queue::Claimed& m = claimed[i];
    const bool known = meta[i].seq > 0;
    out.add_row({pg::int8_value(m.msg_id), pg::optional_uuid_value(m.event_id),
                 pg::optional_text_value(m.partition_key), pg::text_value(core::priority_names[m.priority]),
                 pg::int4_value(static_cast<int>(m.attempt)), pg::int8_value(m.claim_token),
                 pg::optional_bytea_value(m.payload), pg::timestamptz_value(m.enqueued_at), pg::text_value(*topic),
                 known ? pg::text_value(meta[i].type) : pg::null_value(),
                 known ? pg::int4_value(static_cast<std::int32_t>(meta[i].version)) : pg::null_value(),
                 known ? pg::int8_value(meta[i].seq) : pg::null_value()});
  }
  return (Datum)0;
}

// topic_purge(max_events, tenant) -> events deleted: past the topic's retention and dedup window,
// and needed by no pending message of a subscription (its payload would be gone).
FY_FUNCTION(fy_topic_purge) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.topic_events d USING ("
      "  SELECT e.tenant_id, e.topic, e.event_seq FROM forgeyard.topic_events e JOIN forgeyard.topics t"
      "    ON t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND t.topic OPERATOR(pg_catalog.=) e.topic"
      "   WHERE ($2::pg_catalog.text IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) $2)"
      "     AND e.published_at OPERATOR(pg_catalog.<=) ($3 OPERATOR(pg_catalog.-)"
      "         (GREATEST(t.retention_usecs, t.dedup_window_usecs) OPERATOR(pg_catalog.*)"
      "          '1 microsecond'::pg_catalog.interval))"
      "     AND NOT EXISTS (SELECT 1 FROM forgeyard.subscriptions s JOIN forgeyard.messages m"
      "           ON m.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND m.queue OPERATOR(pg_catalog.=) s.subscription"
      "         WHERE s.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND s.topic OPERATOR(pg_catalog.=) e.topic"
      "           AND m.event_id OPERATOR(pg_catalog.=) e.event_id AND m.state OPERATOR(pg_catalog.=) 'pending')"
      "   ORDER BY e.published_at LIMIT $1 FOR UPDATE OF e SKIP LOCKED) old"
      " WHERE d.tenant_id OPERATOR(pg_catalog.=) old.tenant_id AND d.topic OPERATOR(pg_catalog.=) old.topic"
      "   AND d.event_seq OPERATOR(pg_catalog.=) old.event_seq",
      {INT4OID, TEXTOID, TIMESTAMPTZOID});
  const std::int32_t max_events = queue::positive_int_arg(fcinfo, 0, "max_events", 1'000'000);
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 1, "tenant", core::max_tenant_bytes);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::int64_t purged = static_cast<std::int64_t>(
      spi.run(purge, {pg::int4_value(max_events), pg::optional_text_value(tenant), pg::timestamptz_value(pg::now())}));
  spi.finish();
  return Int64GetDatum(purged);
}
