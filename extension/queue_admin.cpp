// Queue inspection and dead letters: stats, list, dead_list / dead_redrive / dead_purge, and the
// claim plan for DBAs (docs/sql-api.md#queues).
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "queue.hpp"
#include "tenant.hpp"

using namespace fy;

// queue_stats(tenant, queue) -> (ready, in_flight, delayed, dead, bytes, oldest_ready_age, pressure,
// waiting, retries_delayed)
FY_FUNCTION(fy_queue_stats) {
  static pg::Statement depth(
      "SELECT pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'pending' AND visible_at OPERATOR(pg_catalog.<=) $3),"
      "       pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'pending' AND claim_token IS NOT NULL"
      "                                    AND visible_at OPERATOR(pg_catalog.>) $3),"
      "       pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'pending' AND claim_token IS NULL"
      "                                    AND visible_at OPERATOR(pg_catalog.>) $3),"
      "       pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'dead'),"
      "       pg_catalog.min(enqueued_at) FILTER (WHERE state OPERATOR(pg_catalog.=) 'pending' AND visible_at OPERATOR(pg_catalog.<=) $3),"
      "       pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'pending' AND NOT is_head"
      "                                    AND visible_at OPERATOR(pg_catalog.<=) $3)"
      "  FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  static pg::Statement retry_window(
      "SELECT window_start, delayed FROM forgeyard.queue_retry_windows"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  pg::Spi spi;
  const queue::Queue q = queue::load(spi, fcinfo);
  const TimestampTz now = pg::now();
  std::int64_t ready = 0, in_flight = 0, delayed = 0, dead = 0, waiting = 0, retries_delayed = 0;
  std::optional<TimestampTz> oldest;
  spi.run(depth, {q.t, q.q, pg::timestamptz_value(now)}, [&](const pg::Row& r) {
    ready = *r.int8(1), in_flight = *r.int8(2), delayed = *r.int8(3), dead = *r.int8(4);
    oldest = r.timestamptz(5);
    waiting = *r.int8(6);
  });
  if (q.options.retry_budget)
    spi.run(retry_window, {q.t, q.q}, [&](const pg::Row& r) {
      core::flow::RetryWindow w;
      w.start = *r.timestamptz(1);
      w.delayed = *r.int8(2);
      retries_delayed = core::flow::retries_delayed(q.options, w, now);
    });
  const core::Usage used = queue::usage(spi, q);
  spi.finish();
  pg::TableResult out(fcinfo);
  out.add_row({pg::int8_value(ready), pg::int8_value(in_flight), pg::int8_value(delayed), pg::int8_value(dead),
               pg::int8_value(used.bytes), oldest ? pg::interval_value(now - *oldest) : pg::null_value(),
               pg::text_value(core::pressure(q.options, used)), pg::int8_value(waiting),
               pg::int8_value(retries_delayed)});
  return (Datum)0;
}

// dead_list(tenant, queue, after_msg_id, max_rows): dead letters in id order, keyset-paginated.
FY_FUNCTION(fy_dead_list) {
  static pg::Statement list(
      "SELECT msg_id, event_id, partition_key, priority, attempt, last_error, error_class, finished_at, payload"
      "  FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND state OPERATOR(pg_catalog.=) 'dead' AND msg_id OPERATOR(pg_catalog.>) $3 ORDER BY msg_id LIMIT $4",
      {TEXTOID, TEXTOID, INT8OID, INT4OID});
  struct Dead {
    std::int64_t msg_id;
    std::optional<std::string> event_id, partition_key;
    std::int64_t priority, attempt;
    std::optional<std::string> error, error_class;
    TimestampTz dead_at;
    std::optional<std::string> payload;
  };
  pg::Spi spi;
  const queue::Queue q = queue::load(spi, fcinfo);
  const std::int64_t after = pg::arg_is_null(fcinfo, 2) ? 0 : pg::int8_arg(fcinfo, 2, "after_msg_id");
  const std::int32_t max_rows = queue::positive_int_arg(fcinfo, 3, "max_rows", 10000);
  std::vector<Dead> rows;
  spi.run(list, {q.t, q.q, pg::int8_value(after), pg::int4_value(max_rows)}, [&](const pg::Row& r) {
    rows.push_back({*r.int8(1), r.uuid(2), r.text(3), *r.int8(4), *r.int8(5), r.text(6), r.text(7), *r.timestamptz(8),
                    r.bytea(9)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const Dead& d : rows)
    out.add_row({pg::int8_value(d.msg_id), pg::optional_uuid_value(d.event_id),
                 pg::optional_text_value(d.partition_key), pg::text_value(core::priority_names[d.priority]),
                 pg::int4_value(static_cast<int>(d.attempt)), pg::optional_text_value(d.error),
                 pg::optional_text_value(d.error_class), pg::timestamptz_value(d.dead_at),
                 pg::optional_bytea_value(d.payload)});
  return (Datum)0;
}

// dead_redrive(tenant, queue, msg_ids, max_rows) -> how many dead letters went back to the
// queue (attempt 0, visible now, admitted like new messages: FY020 when full). Without msg_ids,
// the oldest max_rows that kept their payload; a listed one without payload is 22023.
FY_FUNCTION(fy_dead_redrive) {
#define FY_PICK_DEAD(fairness_key)                                                                                           \
  "SELECT msg_id, priority, bytes, partition_key, payload IS NOT NULL, " fairness_key                                        \
  " FROM forgeyard.messages"                                                                                                 \
  " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"                                           \
  "   AND state OPERATOR(pg_catalog.=) 'dead' AND ($3::pg_catalog.int8[] IS NULL OR msg_id OPERATOR(pg_catalog.=) ANY ($3))" \
  "   AND ($3::pg_catalog.int8[] IS NOT NULL OR payload IS NOT NULL)"                                                        \
  " ORDER BY msg_id LIMIT $4 FOR UPDATE"
  static pg::Statement pick(FY_PICK_DEAD("fairness_key"), {TEXTOID, TEXTOID, INT8ARRAYOID, INT4OID});
  // (A catalog before 0.7.0 has no fairness_key.)
  static pg::Statement pick_old(FY_PICK_DEAD("NULL::pg_catalog.text"), {TEXTOID, TEXTOID, INT8ARRAYOID, INT4OID});
#undef FY_PICK_DEAD
#define FY_REVIVE(pass)                                                                                  \
  "UPDATE forgeyard.messages SET state = 'pending', attempt = 0, claim_token = NULL, claimed_by = NULL," \
  "   visible_at = $2, finished_at = NULL, error_class = NULL, slot = $3, is_head = $4" pass             \
  " WHERE msg_id OPERATOR(pg_catalog.=) $1"
  static pg::Statement revive_old(FY_REVIVE(""), {INT8OID, TIMESTAMPTZOID, INT2OID, BOOLOID});
  // From 0.7.0 on, in a fair queue a redriven message takes a new pass, as a new message would;
  // elsewhere none (fairness may have been set or removed while it was dead: dead letters do not
  // count against the queue, so the option could change).
  static pg::Statement revive(FY_REVIVE(", pass = $5"), {INT8OID, TIMESTAMPTZOID, INT2OID, BOOLOID, INT8OID});
  // From 0.10.0 on, with no listing (a finished row may keep one a library before it left).
  static pg::Statement revive_unlisted(FY_REVIVE(", pass = $5, ready_pos = NULL"),
                                       {INT8OID, TIMESTAMPTZOID, INT2OID, BOOLOID, INT8OID});
#undef FY_REVIVE
  pg::Spi spi;
  const queue::Queue q = queue::load(spi, fcinfo, true);
  const auto ids = pg::int8_array_arg(fcinfo, 2);
  const std::int32_t max_rows = queue::positive_int_arg(fcinfo, 3, "max_rows", 10000);
  const TimestampTz now = pg::now();
  const pg::Value id_array = pg::raw_arg(fcinfo, 2);
  struct Dead {
    std::int64_t msg_id, priority, bytes;
    std::optional<std::string> key;
    bool has_payload;
    std::optional<std::string> fairness_key;
  };
  std::vector<Dead> dead;
  spi.run(q.flow ? pick : pick_old,
          {q.t, q.q, id_array, pg::int4_value(ids ? static_cast<int>(ids->size()) : max_rows)}, [&](const pg::Row& r) {
            dead.push_back({*r.int8(1), *r.int8(2), *r.int8(3), r.text(4), *r.boolean(5), r.text(6)});
          });
  for (const Dead& d : dead) {
    if (!d.has_payload) core::throw_not_redrivable(d.msg_id);
    const int slot = queue::admit(spi, q, static_cast<int>(d.priority), d.bytes);
    const bool is_head = queue::join_key(spi, q, core::group_key(q.options, d.key, d.fairness_key)) > 0;
    const pg::Value id = pg::int8_value(d.msg_id), at = pg::timestamptz_value(now), in = {Int16GetDatum(slot), false},
                    head = pg::bool_value(is_head);
    if (!q.flow) {
      spi.run(revive_old, {id, at, in, head});
      continue;
    }
    // (Its pass is taken while it is still dead, so that it is not its own class's lowest.)
    const pg::Value pass =
        q.options.fairness
            ? pg::int8_value(queue::fair_passes(spi, q, static_cast<int>(d.priority), d.fairness_key, 1)[0])
            : pg::null_value();
    spi.run(queue::lanes_schema() ? revive_unlisted : revive, {id, at, in, head, pass});
  }
  spi.finish();
  return Int32GetDatum(static_cast<std::int32_t>(dead.size()));
}

// dead_purge(tenant, queue, msg_ids) -> dead letters deleted (all of the queue's without msg_ids).
FY_FUNCTION(fy_dead_purge) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND state OPERATOR(pg_catalog.=) 'dead' AND ($3::pg_catalog.int8[] IS NULL OR msg_id OPERATOR(pg_catalog.=) ANY ($3))",
      {TEXTOID, TEXTOID, INT8ARRAYOID});
  pg::Spi spi;
  const queue::Queue q = queue::load(spi, fcinfo);
  const pg::Value ids = pg::raw_arg(fcinfo, 2);
  const std::uint64_t purged = spi.run(purge, {q.t, q.q, ids});
  spi.finish();
  return Int32GetDatum(static_cast<std::int32_t>(purged));
}

// claim_plan(tenant, queue): EXPLAIN of the claim statement as claim runs it (for DBAs and the
// plan-shape test: an index range scan on messages_claim, no Seq Scan, no Sort of the queue).
FY_FUNCTION(fy_claim_plan) {
  pg::Spi spi;
  queue::load(spi, fcinfo);  // 42704 for an unknown queue
  spi.connect();             // (the queue may come from the cache: no statement ran)
  // The one generic plan claim runs (planned once per backend, whatever the arguments).
  const std::string plan = queue::claim_statement(10).explain();
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < plan.size();) {
    std::size_t end = plan.find('\n', at);
    if (end == std::string::npos) end = plan.size();
    if (end > at) lines.push_back(plan.substr(at, end - at));
    at = end + 1;
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const std::string& line : lines) out.add_row({pg::text_value(line)});
  return (Datum)0;
}

// queue_list(tenant) -> (queue, options): every queue of the tenant with all its options.
FY_FUNCTION(fy_queue_list) {
  static const std::string head =
      "SELECT q.queue, pg_catalog.jsonb_build_object("
      "  'max_messages', q.max_messages, 'max_bytes', q.max_bytes, 'max_payload_bytes', q.max_payload_bytes,"
      "  'visibility_timeout', (q.visibility_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'max_attempts', q.max_attempts,"
      "  'backoff_base', (q.backoff_base_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'backoff_max', (q.backoff_max_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'ordering', q.ordering, 'dead_letter_payload', q.dead_letter_payload,"
      "  'retain_acked', (q.retain_acked_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'max_dead', q.max_dead,"
      "  'dead_letter_retention', (q.dead_retention_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'dedup_window', (q.dedup_window_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
      "  'admit_emergency', q.admit_emergency, 'admit_security_control', q.admit_security_control,"
      "  'admit_realtime', q.admit_realtime, 'admit_interactive', q.admit_interactive,"
      "  'admit_background', q.admit_background, 'admit_bulk', q.admit_bulk, 'notify', q.notify";
  static const std::string tail =
      ")::pg_catalog.text FROM forgeyard.queues q WHERE q.tenant_id OPERATOR(pg_catalog.=) $1 ORDER BY q.queue";
  // Flow control's options exist from 0.7.0 on (a database not yet updated lists the others).
  static pg::Statement list(head +
                                ", 'retry_budget', q.retry_budget, 'retry_budget_min', q.retry_budget_min,"
                                "  'retry_budget_window', (q.retry_budget_window_usecs OPERATOR(pg_catalog.*)"
                                "    '1 microsecond'::pg_catalog.interval)::pg_catalog.text,"
                                "  'max_in_flight_per_key', q.max_in_flight_per_key, 'fairness', q.fairness,"
                                "  'aging', (q.aging_usecs OPERATOR(pg_catalog.*)"
                                "    '1 microsecond'::pg_catalog.interval)::pg_catalog.text" +
                                tail,
                            {TEXTOID});
  static pg::Statement list_old(head + tail, {TEXTOID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  pg::Spi spi;
  check_tenant(spi, tenant);
  std::vector<std::pair<std::string, std::string>> rows;
  spi.run(queue::flow_schema() ? list : list_old, {pg::text_value(tenant)},
          [&](const pg::Row& r) { rows.emplace_back(*r.text(1), *r.text(2)); });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const auto& [name, options] : rows) out.add_row({pg::text_value(name), pg::jsonb_value(options)});
  return (Datum)0;
}
