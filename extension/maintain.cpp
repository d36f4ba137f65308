// forgeyard.maintain(): every clean-up step, bounded, safe from several places at once.
#include <string>
#include <utility>
#include <vector>

#include "maintenance.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/table_cache.hpp"
#include "queue.hpp"
#include "schedule.hpp"
#include "tenant.hpp"

namespace fy::maintenance {

std::uint64_t purge_queue_events(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.queue_events v USING ("
      "  SELECT e.tenant_id, e.queue, e.event_id FROM forgeyard.queue_events e"
      "   WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
      "     AND ($3::pg_catalog.text IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) $3)"
      "   ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) d"
      " WHERE v.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND v.queue OPERATOR(pg_catalog.=) d.queue"
      "   AND v.event_id OPERATOR(pg_catalog.=) d.event_id",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(now), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}

// Acked messages kept for retain_acked, past it.
std::uint64_t purge_acked(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.messages m USING ("
      "  SELECT a.msg_id FROM forgeyard.messages a JOIN forgeyard.queues q"
      "    ON q.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND q.queue OPERATOR(pg_catalog.=) a.queue"
      "   WHERE a.state OPERATOR(pg_catalog.=) 'acked'"
      "     AND a.finished_at OPERATOR(pg_catalog.<=) ($1 OPERATOR(pg_catalog.-)"
      "         (q.retain_acked_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval))"
      "     AND ($3::pg_catalog.text IS NULL OR a.tenant_id OPERATOR(pg_catalog.=) $3)"
      "   LIMIT $2 FOR UPDATE OF a SKIP LOCKED) d"
      " WHERE m.msg_id OPERATOR(pg_catalog.=) d.msg_id",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(now), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}

// Dead letters past their retention, and the oldest beyond each queue's max_dead.
std::uint64_t purge_dead(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.messages m USING ("
      "  SELECT x.msg_id FROM ("
      "    SELECT a.msg_id, a.finished_at, q.dead_retention_usecs, q.max_dead,"
      "           pg_catalog.row_number() OVER (PARTITION BY a.tenant_id, a.queue ORDER BY a.msg_id DESC) AS newest"
      "      FROM forgeyard.messages a JOIN forgeyard.queues q"
      "        ON q.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND q.queue OPERATOR(pg_catalog.=) a.queue"
      "     WHERE a.state OPERATOR(pg_catalog.=) 'dead'"
      "       AND ($3::pg_catalog.text IS NULL OR a.tenant_id OPERATOR(pg_catalog.=) $3)) x"
      "   WHERE x.newest OPERATOR(pg_catalog.>) x.max_dead"
      "      OR x.finished_at OPERATOR(pg_catalog.<=) ($1 OPERATOR(pg_catalog.-)"
      "         (x.dead_retention_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval))"
      "   LIMIT $2) d"
      " WHERE m.msg_id OPERATOR(pg_catalog.=) d.msg_id AND m.state OPERATOR(pg_catalog.=) 'dead'",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(now), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}

std::uint64_t purge_workflow_runs(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant) {
  static pg::Statement purge(
      "WITH d AS ("
      "  SELECT r.tenant_id, r.run_id FROM forgeyard.wf_runs r"
      "   WHERE r.purge_at OPERATOR(pg_catalog.<=) $1"
      "     AND ($3::pg_catalog.text IS NULL OR r.tenant_id OPERATOR(pg_catalog.=) $3)"
      "   ORDER BY r.purge_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
      " j AS (DELETE FROM forgeyard.wf_journal x USING d"
      "   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.run_id OPERATOR(pg_catalog.=) d.run_id),"
      " s AS (DELETE FROM forgeyard.wf_signals x USING d"
      "   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.run_id OPERATOR(pg_catalog.=) d.run_id),"
      " c AS (DELETE FROM forgeyard.wf_cursors x USING d"
      "   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.run_id OPERATOR(pg_catalog.=) d.run_id)"
      " DELETE FROM forgeyard.wf_runs x USING d"
      " WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.run_id OPERATOR(pg_catalog.=) d.run_id",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(now), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}

// Release deltas folded into their release rows (give_back() folds them at an ack that locks the
// row, from 0.11.0 on at the first ack of a generation; consumers under REPEATABLE READ only ever
// add deltas): up to max_rows release rows that have deltas, each locked SKIP LOCKED (a row an ack
// holds is left to it), its deltas deleted and added to it. Not under a transaction snapshot (a
// row changed since would be 40001): 0 there. From 0.11.0 on, the generations before the current
// one and the rows of a library before it (gen NULL), each delta row locked SKIP LOCKED (an ack
// may be adding to one). (A 0.10.0 library's maintain(), in a session that loaded it before the
// update, deletes without SKIP LOCKED: it waits for an ack that holds a row of the current
// generation.)
std::uint64_t fold_release_deltas(pg::Spi& spi, std::int32_t max_rows, const Tenant& tenant) {
  // The release rows that have deltas to fold (`foldable`: more conditions on a delta row x), the
  // deltas deleted (`deleted`, d), their sums (s) added to their rows, and how many were folded.
  const auto fold_sql = [](const char* foldable, const char* deleted) {
    return std::string(
               "WITH r AS (SELECT r.tenant_id, r.queue, r.slot FROM forgeyard.queue_releases r"
               "   WHERE ($2::pg_catalog.text IS NULL OR r.tenant_id OPERATOR(pg_catalog.=) $2)"
               "     AND EXISTS (SELECT 1 FROM forgeyard.queue_release_deltas x"
               "                  WHERE x.tenant_id OPERATOR(pg_catalog.=) r.tenant_id"
               "                   AND x.queue OPERATOR(pg_catalog.=) r.queue AND x.slot OPERATOR(pg_catalog.=) r.slot") +
           foldable +
           ")"
           "   LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED),"
           " d AS (" +
           deleted +
           "      RETURNING x.tenant_id, x.queue, x.slot, x.released_messages, x.released_bytes),"
           " s AS (SELECT d.tenant_id, d.queue, d.slot, pg_catalog.sum(d.released_messages)::pg_catalog.int8 AS m,"
           "              pg_catalog.sum(d.released_bytes)::pg_catalog.int8 AS b, pg_catalog.count(*) AS n"
           "         FROM d GROUP BY d.tenant_id, d.queue, d.slot),"
           " u AS (UPDATE forgeyard.queue_releases q SET released_messages = q.released_messages OPERATOR(pg_catalog.+) s.m,"
           "              released_bytes = q.released_bytes OPERATOR(pg_catalog.+) s.b"
           "         FROM s WHERE q.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND q.queue OPERATOR(pg_catalog.=) s.queue"
           "          AND q.slot OPERATOR(pg_catalog.=) s.slot)"
           " SELECT COALESCE(pg_catalog.sum(s.n), 0)::pg_catalog.int8 FROM s";
  };
  static pg::Statement fold(
      fold_sql(
          "",
          "DELETE FROM forgeyard.queue_release_deltas x USING r WHERE x.tenant_id OPERATOR(pg_catalog.=) r.tenant_id"
          "        AND x.queue OPERATOR(pg_catalog.=) r.queue AND x.slot OPERATOR(pg_catalog.=) r.slot"),
      {INT4OID, TEXTOID});
  // (A row is its table, a segment from 0.14.0, and its ctid there.)
  static pg::Statement fold_generations(
      fold_sql(
          " AND (x.gen IS NULL OR x.gen OPERATOR(pg_catalog.<) $3)",
          "DELETE FROM forgeyard.queue_release_deltas x USING ("
          "        SELECT y.tableoid, y.ctid FROM forgeyard.queue_release_deltas y JOIN r"
          "            ON y.tenant_id OPERATOR(pg_catalog.=) r.tenant_id"
          "           AND y.queue OPERATOR(pg_catalog.=) r.queue AND y.slot OPERATOR(pg_catalog.=) r.slot"
          "         WHERE (y.gen IS NULL OR y.gen OPERATOR(pg_catalog.<) $3) FOR UPDATE OF y SKIP LOCKED) l(rel, tid)"
          " WHERE x.tableoid OPERATOR(pg_catalog.=) l.rel AND x.ctid OPERATOR(pg_catalog.=) l.tid"),
      {INT4OID, TEXTOID, INT8OID});
  if (pg::uses_transaction_snapshot() || !pg::has_table(pg::CachedTable::queue_release_deltas)) return 0;
  std::int64_t folded = 0;
  const auto count = [&](const pg::Row& r) { folded = *r.int8(1); };
  if (pg::has_column(pg::CachedTable::queue_release_deltas, "gen"))
    spi.run(fold_generations,
            {pg::int4_value(max_rows), pg::optional_text_value(tenant),
             pg::int8_value(pg::unix_usecs(pg::now()) / core::release_generation_usecs)},
            count);
  else
    spi.run(fold, {pg::int4_value(max_rows), pg::optional_text_value(tenant)}, count);
  return static_cast<std::uint64_t>(folded);
}

}  // namespace fy::maintenance

using namespace fy;

// maintain(max_rows, tenant) -> (task, rows): one bounded pass of every clean-up, and the runs of
// due workflow schedules started. Leases are not reaped here: lease_reap hands each expired grant
// to its reconciler once.
FY_FUNCTION(fy_maintain) {
  const std::int32_t max_rows = pg::int4_arg(fcinfo, 0, "max_rows");
  if (max_rows <= 0) throw core::Error(core::sqlstate::invalid_parameter, "max_rows must be positive");
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 1, "tenant", core::max_tenant_bytes);
  const TimestampTz now = pg::now();
  constexpr std::int64_t inbox_retention = 7 * core::usecs_per_day;
  pg::Spi spi;
  check_tenant(spi, tenant);
  // The ready lanes first, before anything here writes: their cursors move only over what the
  // snapshot shows consumed by committed work (sql/src/forgeyard.sql, queue_lanes_maintain).
  static pg::Statement lanes("SELECT forgeyard.queue_lanes_maintain($1, $2)", {INT4OID, TEXTOID});
  std::int64_t lane_rows = 0;
  if (queue::lanes_schema())
    spi.run(lanes, {pg::int4_value(max_rows), pg::optional_text_value(tenant)},
            [&](const pg::Row& r) { lane_rows = *r.int8(1); });
  std::vector<std::pair<const char*, std::uint64_t>> done = {
      {"idempotency_keys", maintenance::purge_idempotency_keys(spi, now, max_rows, tenant)},
      {"queue_events", maintenance::purge_queue_events(spi, now, max_rows, tenant)},
      {"acked_messages", maintenance::purge_acked(spi, now, max_rows, tenant)},
      {"dead_letters", maintenance::purge_dead(spi, now, max_rows, tenant)},
      {"inbox", maintenance::purge_inbox(spi, now - inbox_retention, max_rows, tenant)},
      {"workflow_runs", maintenance::purge_workflow_runs(spi, now, max_rows, tenant)},
      {"schedules", static_cast<std::uint64_t>(schedule::tick(spi, tenant, now))},
      {"release_deltas", maintenance::fold_release_deltas(spi, max_rows, tenant)},
  };
  if (queue::lanes_schema()) done.emplace_back("queue_lanes", static_cast<std::uint64_t>(lane_rows));
  // Admission rows of past generations folded into their slots (sql/src/forgeyard.sql,
  // queue_admit_fold; 0.14.0).
  const bool usage_segments = queue::usage_segments_schema();
  if (usage_segments) {
    static pg::Statement fold("SELECT forgeyard.queue_admit_fold($1, $2)", {INT4OID, TEXTOID});
    std::int64_t folded = 0;
    spi.run(fold, {pg::int4_value(max_rows), pg::optional_text_value(tenant)},
            [&](const pg::Row& r) { folded = *r.int8(1); });
    done.emplace_back("admit_deltas", static_cast<std::uint64_t>(folded));
  }
  // The segments last: the lock of one truncated is held only to the commit (sql/src/forgeyard.sql,
  // queue_lane_segments_maintain, 0.13.0; queue_usage_segments_maintain, 0.14.0).
  if (queue::segments_schema()) {
    static pg::Statement segments("SELECT forgeyard.queue_lane_segments_maintain()", {});
    std::int64_t truncated = 0;
    spi.run(segments, {}, [&](const pg::Row& r) { truncated = *r.int8(1); });
    done.emplace_back("lane_segments", static_cast<std::uint64_t>(truncated));
  }
  if (usage_segments) {
    static pg::Statement segments("SELECT forgeyard.queue_usage_segments_maintain()", {});
    std::int64_t truncated = 0;
    spi.run(segments, {}, [&](const pg::Row& r) { truncated = *r.int8(1); });
    done.emplace_back("usage_segments", static_cast<std::uint64_t>(truncated));
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const auto& [task, rows] : done)
    out.add_row({pg::text_value(task), pg::int8_value(static_cast<std::int64_t>(rows))});
  return (Datum)0;
}
