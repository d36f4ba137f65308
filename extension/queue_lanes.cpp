// The ready lanes (sql/src/forgeyard.sql, 0.10.0; docs/architecture.md, "Ready lanes"): a claim's
// candidates, the cursors moved, an enqueue's listing. The statements are extension/queue_lanes.sql's,
// which the PL/pgSQL edition runs too (sql/gen/statements.hpp).
#include <map>
#include <string>
#include <vector>

#include "pg/table_cache.hpp"
#include "queue.hpp"
#include "sql/gen/statements.hpp"

extern "C" {
#include <access/xact.h>
#include <utils/array.h>
}

namespace fy::queue {

bool lanes_schema() {
  return pg::has_column(pg::CachedTable::queues, "lanes");
}

namespace {

constexpr int walk_batch = 256;

pg::Value int8_array_value(const std::vector<std::int64_t>& values) {
  std::vector<Datum> datums;
  datums.reserve(values.size());
  for (std::int64_t v : values) datums.push_back(Int64GetDatum(v));
  ArrayType* array = nullptr;
  pg::guard([&]() noexcept {
    array = construct_array(datums.data(), static_cast<int>(datums.size()), INT8OID, sizeof(std::int64_t),
                            FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
  });
  return {PointerGetDatum(array), false};
}

// Walks one lane from its cursor: its ready entries (up to `want`) into `out`, and the end of the
// run of consumed positions above the cursor.
std::int64_t walk_lane(pg::Spi& spi, std::int64_t lane, int priority, std::int64_t cursor, int want, TimestampTz now,
                       std::vector<Candidate>* out) {
  static pg::Statement walk(statements::lane_walk, {INT8OID, INT8OID, TIMESTAMPTZOID, INT4OID}, pg::Planning::generic);
  int got = 0;
  std::int64_t after = cursor, run_end = cursor;
  bool in_run = true;
  for (;;) {
    int seen = 0;
    spi.run(walk, {pg::int8_value(lane), pg::int8_value(after), pg::timestamptz_value(now), pg::int4_value(walk_batch)},
            [&](const pg::Row& r) {
              ++seen;
              const std::int64_t pos = *r.int8(1);
              after = pos;
              if (in_run && pos == run_end + 1 && *r.boolean(3))
                run_end = pos;
              else
                in_run = false;
              if (got < want && *r.boolean(4)) {
                out->push_back({*r.int8(2), priority, priority, pos, *r.timestamptz(5)});
                ++got;
              }
            });
    // (A ready entry ends the run: once `want` are found, the run has ended too.)
    if (seen < walk_batch || (got >= want && !in_run)) break;
  }
  return run_end;
}

}  // namespace

std::vector<Candidate> candidates(pg::Spi& spi, const Queue& queue, int max_messages, TimestampTz now) {
  static pg::Statement ends(statements::lane_ends, {INT8OID}, pg::Planning::generic);
  static pg::Statement advance(statements::lane_advance, {INT8OID, INT8OID});
  static pg::Statement due(statements::due_candidates, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID},
                           pg::Planning::generic);
  // The rows other claimers hold are skipped: up to 32 more per lane than asked for.
  const int want = max_messages + 32;
  std::vector<Candidate> out;
  if (queue.lanes > 0) {
    // What the snapshot shows consumed is committed only while this transaction has written nothing.
    const bool may_advance = !TransactionIdIsValid(GetTopTransactionIdIfAny());
    struct End {
      int priority;
      std::int64_t lane, last, cursor;
    };
    std::vector<End> lanes;
    spi.run(ends, {pg::int8_value(queue.lanes)}, [&](const pg::Row& r) {
      lanes.push_back({static_cast<int>(*r.int8(1)), *r.int8(2), *r.int8(3), *r.int8(4)});
    });
    for (const End& l : lanes) {
      if (l.last <= l.cursor) continue;
      const std::int64_t run_end = walk_lane(spi, l.lane, l.priority, l.cursor, want, now, &out);
      if (may_advance && run_end > l.cursor) spi.run(advance, {pg::int8_value(l.lane), pg::int8_value(run_end)});
    }
  }
  // Before 0.10.0 (before ALTER EXTENSION UPDATE) messages_claim holds every pending head (of a
  // queue without fairness, from 0.7.0 on).
#define FY_DUE_OLD(pass)                                                                                         \
  "SELECT c.msg_id, c.priority::pg_catalog.int8, c.visible_at FROM pg_catalog.generate_series(0, 5) p,"          \
  " LATERAL (SELECT m.msg_id, m.priority, m.visible_at FROM forgeyard.messages m"                                \
  "   WHERE m.tenant_id OPERATOR(pg_catalog.=) $1 AND m.queue OPERATOR(pg_catalog.=) $2"                         \
  "     AND m.priority OPERATOR(pg_catalog.=) p::pg_catalog.int2 AND m.state OPERATOR(pg_catalog.=) 'pending'"   \
  "     AND m.is_head" pass " AND m.visible_at OPERATOR(pg_catalog.<=) $3"                                       \
  "   ORDER BY m.visible_at, m.msg_id LIMIT $4) c"
  static pg::Statement due_flow(FY_DUE_OLD(" AND m.pass IS NULL"), {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID});
  static pg::Statement due_old(FY_DUE_OLD(""), {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID});
#undef FY_DUE_OLD
  pg::Statement& due_now = lanes_schema() ? due : queue.flow ? due_flow : due_old;
  spi.run(due_now, {queue.t, queue.q, pg::timestamptz_value(now), pg::int4_value(want)}, [&](const pg::Row& r) {
    const int p = static_cast<int>(*r.int8(2));
    out.push_back({*r.int8(1), p, p, 0, *r.timestamptz(3)});
  });
  return out;
}

void advance_lanes(pg::Spi& spi, const Queue& queue, TimestampTz now) {
  if (queue.lanes <= 0 || queue.options.fairness || TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
  static pg::Statement ends(statements::lane_ends, {INT8OID}, pg::Planning::generic);
  static pg::Statement advance(statements::lane_advance, {INT8OID, INT8OID});
  std::vector<std::array<std::int64_t, 3>> lanes;
  spi.run(ends, {pg::int8_value(queue.lanes)},
          [&](const pg::Row& r) { lanes.push_back({*r.int8(2), *r.int8(3), *r.int8(4)}); });
  for (const auto& [lane, last, cursor] : lanes) {
    if (last <= cursor) continue;
    const std::int64_t run_end = walk_lane(spi, lane, 0, cursor, 0, now, nullptr);
    if (run_end > cursor) spi.run(advance, {pg::int8_value(lane), pg::int8_value(run_end)});
  }
}

std::map<std::int64_t, std::int64_t> list(pg::Spi& spi, const Queue& queue, int priority,
                                         const std::vector<std::int64_t>& msg_ids) {
  static pg::Statement insert(statements::lane_list, {INT8OID, INT8ARRAYOID}, pg::Planning::generic);
  std::map<std::int64_t, std::int64_t> positions;
  if (queue.lanes <= 0 || queue.options.fairness || msg_ids.empty()) return positions;
  spi.run(insert, {pg::int8_value(queue.lanes * 8 + priority), int8_array_value(msg_ids)},
          [&](const pg::Row& r) { positions[*r.int8(1)] = *r.int8(2); });
  return positions;
}

}  // namespace fy::queue
