// Consuming: claim, one statement over the priority classes, and the dead-lettering of deliveries
// that lapsed on every attempt (docs/sql-api.md#queues).
#include <algorithm>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

// The claim: one statement. Per class, highest first, an index range scan of messages_claim that
// stops at the first message not yet visible, skipping rows other claimers hold; the classes are
// the branches of one Append under the limit, so an empty class costs one index descent and a
// class after the limit is filled is never read. The limit is part of the statement text (one
// kept plan per limit asked for), so the generic plan, planned once per backend, is the index
// scan whatever the depth: never a scan or sort of the queue, never planned again per call. The
// rows picked (and locked) are updated by their tuple ids: a nested loop over a Tid Scan, whatever
// the table size was when the plan was made (a row we locked cannot move under us).
std::string claim_sql(int limit) {
  const std::string n = std::to_string(limit);
  std::string picks;
  for (int p = 0; p < core::priority_classes; ++p) {
    if (p > 0) picks += " UNION ALL ";
    picks +=
        "SELECT * FROM (SELECT c.ctid FROM forgeyard.messages c"
        "  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2"
        "    AND c.priority OPERATOR(pg_catalog.=) " +
        std::to_string(p) +
        "::pg_catalog.int2 AND c.state OPERATOR(pg_catalog.=) 'pending' AND c.is_head"
        "    AND c.visible_at OPERATOR(pg_catalog.<=) $5"
        "  ORDER BY c.visible_at, c.msg_id LIMIT " +
        n + " FOR UPDATE SKIP LOCKED) c" + std::to_string(p);
  }
  return "WITH picked AS (" + picks + " LIMIT " + n +
         ")"
         " UPDATE forgeyard.messages m SET claim_token = pg_catalog.nextval('forgeyard.claim_tokens'),"
         "   attempt = m.attempt OPERATOR(pg_catalog.+) 1, visible_at = $3, claimed_by = $4"
         "  FROM picked WHERE m.ctid OPERATOR(pg_catalog.=) picked.ctid"
         " RETURNING m.msg_id, m.event_id, m.partition_key, m.priority, m.attempt, m.claim_token,"
         // A subscription's message has no payload of its own: it is its topic event's (topic_claim.cpp).
         "   COALESCE(m.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e"
         "      ON e.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND e.topic OPERATOR(pg_catalog.=) s.topic"
         "     WHERE s.tenant_id OPERATOR(pg_catalog.=) m.tenant_id AND s.subscription OPERATOR(pg_catalog.=) m.queue"
         "       AND e.event_id OPERATOR(pg_catalog.=) m.event_id)),"
         "   m.enqueued_at, m.slot, m.bytes";
}

pg::Statement& claim_statement(int limit) {
  return pg::Statement::cached(claim_sql(limit), {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID},
                               pg::Planning::generic);
}

std::vector<Claimed> claim(pg::Spi& spi, const Queue& queue, const std::string& consumer, int max_messages,
                           std::int64_t visibility, TimestampTz now) {
  // A delivery that lapsed once too often (its consumer died or hung every time) is not handed
  // out again: it is dead-lettered like a nack after max_attempts.
  static pg::Statement dead(
      "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, is_head = false,"
      "   last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
      "   payload = CASE WHEN $3 THEN payload END"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, BOOLOID});
  std::vector<Claimed> out;
  std::vector<std::int64_t> doomed;
  Releases lapsed;
  const pg::Value c = pg::text_value(consumer);
  // Lapsed deliveries taken by the statement do not count: ask again for the rest (they are
  // now locked and no longer visible, so they are not taken twice).
  for (;;) {
    const int asked = max_messages - static_cast<int>(out.size());
    const std::size_t doomed_before = doomed.size();
    const std::uint64_t taken =
        spi.run(claim_statement(asked),
                {queue.t, queue.q, pg::timestamptz_value(now + visibility), c, pg::timestamptz_value(now)},
                [&](const pg::Row& r) {
                  if (*r.int8(5) > queue.options.max_attempts) {  // (no SPI call while these rows are read)
                    lapsed.add(queue, static_cast<int>(*r.int8(9)), *r.int8(10), r.text(3));
                    doomed.push_back(*r.int8(1));
                    return;
                  }
                  out.push_back({*r.int8(1), r.uuid(2), r.text(3), static_cast<int>(*r.int8(4)), *r.int8(5), *r.int8(6),
                                 r.bytea(7), *r.timestamptz(8)});
                });
    if (doomed.size() == doomed_before || taken < static_cast<std::uint64_t>(asked)) break;
  }
  // Delivery order: class, then oldest first (RETURNING does not keep the scan order).
  std::sort(out.begin(), out.end(), [](const Claimed& a, const Claimed& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.msg_id < b.msg_id;
  });
  for (std::int64_t msg_id : doomed)
    spi.run(dead,
            {pg::int8_value(msg_id), pg::timestamptz_value(now), pg::bool_value(queue.options.keep_dead_payload)});
  apply(spi, queue, lapsed);
  return out;
}

void return_claimed(FunctionCallInfo fcinfo, const std::vector<Claimed>& claimed) {
  pg::TableResult out(fcinfo);
  for (const Claimed& m : claimed)
    out.add_row({pg::int8_value(m.msg_id), pg::optional_uuid_value(m.event_id),
                 pg::optional_text_value(m.partition_key), pg::text_value(core::priority_names[m.priority]),
                 pg::int4_value(static_cast<int>(m.attempt)), pg::int8_value(m.claim_token),
                 pg::optional_bytea_value(m.payload), pg::timestamptz_value(m.enqueued_at)});
}

int max_messages_arg(FunctionCallInfo fcinfo, int n) {
  return positive_int_arg(fcinfo, n, "max_messages", core::max_claim_batch);
}

std::int64_t visibility_arg(FunctionCallInfo fcinfo, int n, const Queue& queue) {
  const std::optional<core::Duration> d = pg::optional_interval_arg(fcinfo, n);
  return d ? core::check_duration("visibility", *d, core::max_queue_duration_usecs) : queue.options.visibility_usecs;
}

}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

// claim(tenant, queue, consumer, max_messages, visibility) -> up to max_messages deliveries
FY_FUNCTION(fy_claim) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::string consumer = pg::name_arg(fcinfo, 2, "consumer", core::max_consumer_bytes);
  const int max_messages = max_messages_arg(fcinfo, 3);
  const std::int64_t visibility = visibility_arg(fcinfo, 4, queue);
  const std::vector<Claimed> claimed = claim(spi, queue, consumer, max_messages, visibility, pg::now());
  spi.finish();
  return_claimed(fcinfo, claimed);
  return (Datum)0;
}
