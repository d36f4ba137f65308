// The ready lanes (sql/src/forgeyard.sql, 0.10.0; docs/architecture.md, "Ready lanes"): a claim's
// candidates, the cursors moved, an enqueue's listing, below SPI (pg/table_access.hpp) as the
// statements of extension/queue_lanes.sql that the PL/pgSQL edition runs: the same reads, rows
// and sequences, so that a claim, an ack_and_claim and an enqueue run no statement of their own.
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "queue.hpp"

namespace fy::queue {

bool lanes_schema() {
  return pg::has_column(pg::CachedTable::queues, "lanes");
}

bool segments_schema() {
  return pg::has_table(pg::CachedTable::queue_lane_segment);
}

namespace {

// A lane's two sequences (lane_<id> and lane_<id>_cursor), looked up by name (a syscache probe)
// and kept per backend until forgeyard's relations are invalidated (pg::relations_generation: a
// DROP EXTENSION, after which lane ids start again). A lane id is never given twice otherwise: a
// queue's lanes are dropped only with their number (queue_drop, queue_lanes_close).
struct LaneSequences {
  Oid positions, cursor;
};
LaneSequences lane_sequences(std::int64_t lane) {
  static std::map<std::int64_t, LaneSequences> kept;
  static std::uint64_t kept_at = 0;
  if (kept_at != pg::relations_generation() || kept.size() > 4096) {
    kept.clear();
    kept_at = pg::relations_generation();
  }
  if (const auto found = kept.find(lane); found != kept.end()) return found->second;
  const std::string name = "lane_" + std::to_string(lane);
  const LaneSequences s{pg::forgeyard_sequence(name.c_str()), pg::forgeyard_sequence((name + "_cursor").c_str())};
  if (s.positions == InvalidOid || s.cursor == InvalidOid)
    throw core::Error(core::sqlstate::internal_error, "the sequences of ready lane " + std::to_string(lane) +
                                                          " are missing (maintain() gives the queue new lanes "
                                                          "once forgeyard.queue_lanes_close has run for it)");
  kept.emplace(lane, s);
  return s;
}

struct LaneColumns {
  int pos, msg_id;
  explicit LaneColumns(const pg::Table& t) : pos(t.column("pos")), msg_id(t.column("msg_id")) {}
};
struct ReadColumns {
  int ready_pos, visible_at, state, is_head, attempt;
  explicit ReadColumns(const pg::Table& m)
      : ready_pos(m.column("ready_pos")),
        visible_at(m.column("visible_at")),
        state(m.column("state")),
        is_head(m.column("is_head")),
        attempt(m.column("attempt")) {}
};

// The tables that hold the lanes' entries: the four segments of queue_lane_entries (0.13.0: the
// partitions, read and written here directly), or queue_lanes before ALTER EXTENSION UPDATE.
struct EntryTable {
  pg::OwnTable table;
  pg::OwnIndex pkey;
};
constexpr std::array<EntryTable, 4> segments{
    {{pg::OwnTable::queue_lane_entries_0, pg::OwnIndex::queue_lane_entries_0_pkey},
     {pg::OwnTable::queue_lane_entries_1, pg::OwnIndex::queue_lane_entries_1_pkey},
     {pg::OwnTable::queue_lane_entries_2, pg::OwnIndex::queue_lane_entries_2_pkey},
     {pg::OwnTable::queue_lane_entries_3, pg::OwnIndex::queue_lane_entries_3_pkey}}};
constexpr EntryTable unsegmented{pg::OwnTable::queue_lanes, pg::OwnIndex::queue_lanes_pkey};

// The entry tables a claim reads, opened: every segment that has a page (one that has none holds
// no entry, committed or not), or the one table before 0.13.0.
struct EntryTables {
  std::array<std::optional<pg::Table>, segments.size()> tables;
  std::array<pg::OwnIndex, segments.size()> pkeys{};
  int count = 0;
  explicit EntryTables(pg::Access& access) {
    if (!segments_schema()) {
      tables[0].emplace(access, unsegmented.table, pg::Opened::for_row_locks);
      pkeys[0] = unsegmented.pkey;
      count = 1;
      return;
    }
    for (const EntryTable& seg : segments) {
      tables[count].emplace(access, seg.table, pg::Opened::for_row_locks);
      if (tables[count]->empty()) {
        tables[count]->finish();
        tables[count].reset();
        continue;
      }
      pkeys[count++] = seg.pkey;
    }
  }
  void finish() {
    for (int i = 0; i < count; ++i) tables[i]->finish();
  }
};

// Whether entry a comes before entry b in a lane's walk: by position, and a real entry before a void
// of the same position. maintain() voids only positions no segment holds, but the primary key is
// per segment, so a second entry of a position is possible (by hand, say): the real one decides.
bool before(const pg::Table& a, const LaneColumns& ca, const pg::Table& b, const LaneColumns& cb) {
  const std::int64_t pa = a.int8(ca.pos), pb = b.int8(cb.pos);
  if (pa != pb) return pa < pb;
  return !a.is_null(ca.msg_id) && b.is_null(cb.msg_id);
}

// Walks one lane from its cursor (extension/queue_lanes.sql, lane_walk): its ready entries, up to
// `want`, into `out`; returns the end of the run of consumed positions above the cursor. An entry
// is consumed when its message is gone, finished or no longer listed at its position, ready when
// it is a pending head listed there and visible at `now`. The entries of the segments are read in
// position order, one index scan per segment merged.
std::int64_t walk_lane(EntryTables& entries, pg::Table& m, std::int64_t lane, int priority, std::int64_t cursor,
                       int want, TimestampTz now, std::vector<Candidate>* out, std::int64_t* last_read, bool* cut) {
  const ReadColumns c = pg::columns_of<ReadColumns>(m);
  int got = 0;
  std::int64_t run_end = cursor;
  bool in_run = true;
  const int n = entries.count;
  std::array<std::optional<pg::Table::Scan>, segments.size()> scans;
  std::array<std::optional<LaneColumns>, segments.size()> cols;
  std::array<bool, segments.size()> has{};
  std::int64_t previous = cursor;  // (every entry read is above the cursor)
  for (int i = 0; i < n; ++i) {
    cols[i].emplace(*entries.tables[i]);  // (per table: a partition attached by hand may number them apart)
    scans[i].emplace(*entries.tables[i], entries.pkeys[i],
                     std::initializer_list<pg::Key>{{1, pg::Compare::eq, pg::int8_value(lane)},
                                                    {2, pg::Compare::gt, pg::int8_value(cursor)}});
    has[i] = scans[i]->next();
  }
  for (;;) {
    int at = -1;
    for (int i = 0; i < n; ++i)
      if (has[i] && (at < 0 || before(*entries.tables[i], *cols[i], *entries.tables[at], *cols[at]))) at = i;
    if (at < 0) break;
    pg::Table& lanes = *entries.tables[at];
    const LaneColumns& l = *cols[at];
    const std::int64_t pos = lanes.int8(l.pos);
    // (A second entry of a position, a void beside a real one, comes after it: skipped.)
    if (pos == previous) {
      has[at] = scans[at]->next();
      continue;
    }
    previous = pos;
    bool consumed = true, ready = false, lapsed = false;
    TimestampTz visible_at = 0;
    std::int64_t msg_id = 0;
    if (!lanes.is_null(l.msg_id)) {
      msg_id = lanes.int8(l.msg_id);
      if (m.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(msg_id)}}) &&
          !m.is_null(c.ready_pos) && m.int8(c.ready_pos) == pos && m.text_equals(c.state, "pending") &&
          m.boolean(c.is_head)) {
        consumed = false;
        visible_at = m.timestamptz(c.visible_at);
        ready = visible_at <= now;
        lapsed = ready && m.int4(c.attempt) > 0;
      }
    }
    if (in_run && pos == run_end + 1 && consumed)
      run_end = pos;
    else
      in_run = false;
    if (ready && got < want) {
      out->push_back({msg_id, priority, priority, pos, visible_at, lapsed});
      ++got;
    }
    if (last_read != nullptr) *last_read = pos;
    // (A ready entry ends the run: once `want` are found, the run has ended too.)
    if (got >= want && !in_run) {
      if (cut != nullptr && want > 0) *cut = true;
      break;
    }
    has[at] = scans[at]->next();
  }
  for (int i = 0; i < n; ++i) scans[i]->end();
  return run_end;
}

// Per class of the queue, walks its lane if it has entries above its cursor (or above where
// `reads` got to), and moves the cursor over the consumed run when `advance`.
void walk_lanes(const Queue& queue, int want, TimestampTz now, bool advance, std::vector<Candidate>* out,
                LaneReads* reads) {
  std::array<LaneSequences, core::priority_classes> sequences;
  std::array<std::int64_t, core::priority_classes> last{}, cursor{};
  bool any = false;
  // (A lane never listed in has no position taken: its cursor is not read.)
  for (int p = 0; p < core::priority_classes; ++p) {
    sequences[p] = lane_sequences(queue.lanes * 8 + p);
    last[p] = pg::sequence_last_value(sequences[p].positions);
    cursor[p] = last[p] > 0 ? pg::sequence_last_value(sequences[p].cursor) : 0;
    any = any || last[p] > cursor[p];
  }
  if (!any) return;
  pg::Access access;
  EntryTables entries(access);
  pg::Table m(access, pg::OwnTable::messages, pg::Opened::for_row_locks);
  for (int p = 0; p < core::priority_classes; ++p) {
    const std::int64_t from = reads != nullptr ? std::max(cursor[p], reads->after[p]) : cursor[p];
    if (last[p] <= from) continue;
    const std::int64_t run_end =
        walk_lane(entries, m, queue.lanes * 8 + p, p, from, want, now, out,
                  reads != nullptr ? &reads->after[p] : nullptr, reads != nullptr ? &reads->cut : nullptr);
    if (advance && from == cursor[p] && run_end > cursor[p]) pg::sequence_set_value(sequences[p].cursor, run_end);
  }
  m.finish();
  entries.finish();
  access.finish();
}

// What the snapshot shows consumed is committed only while this transaction has written nothing.
bool may_advance() {
  return !TransactionIdIsValid(GetTopTransactionIdIfAny());
}

// The pending heads without a listing that are visible at `now` (extension/queue_lanes.sql,
// due_candidates), up to `want` per class, from messages_claim: one scan from the highest class
// down, restarted at the next class once a class's first row not yet visible (or the want-th) is
// read, so an empty class costs nothing. Before 0.10.0 (before ALTER EXTENSION UPDATE) it holds
// every pending head of a queue without fairness.
void due_candidates(const Queue& queue, int want, TimestampTz now, std::vector<Candidate>& out, bool* cut) {
  pg::Access access;
  pg::Table m(access, pg::OwnTable::messages, pg::Opened::for_row_locks);
  const int msg_id = m.column("msg_id"), priority = m.column("priority"), visible = m.column("visible_at"),
            state = m.column("state"), is_head = m.column("is_head");
  const int ready_pos = lanes_schema() ? m.column("ready_pos") : 0;
  auto from_class = [&](int p) {
    return std::array<pg::Key, 3>{{{1, pg::Compare::eq, queue.t},
                                   {2, pg::Compare::eq, queue.q},
                                   {3, pg::Compare::ge, {Int16GetDatum(static_cast<std::int16_t>(p)), false}}}};
  };
  const std::array<pg::Key, 3> first = from_class(0);
  pg::Table::Scan scan(m, pg::OwnIndex::messages_claim, first);
  int current = -1, got = 0;
  while (scan.next()) {
    const int p = m.int2(priority);
    if (p != current) {
      current = p;
      got = 0;
    }
    const TimestampTz at = m.timestamptz(visible);
    if (at > now || got >= want) {
      if (at <= now && cut != nullptr) *cut = true;
      if (p + 1 >= core::priority_classes) break;
      const std::array<pg::Key, 3> next = from_class(p + 1);
      scan.restart(next);
      continue;
    }
    // (The version visible may be newer than the entry's: the claim checks it again under its lock.)
    if (!m.text_equals(state, "pending") || !m.boolean(is_head) || (ready_pos != 0 && !m.is_null(ready_pos))) continue;
    out.push_back({m.int8(msg_id), p, p, 0, at});
    ++got;
  }
  scan.end();
  m.finish();
  access.finish();
}

}  // namespace

std::vector<Candidate> candidates(pg::Spi&, const Queue& queue, int want, int due_want, TimestampTz now,
                                  LaneReads* reads, bool lanes) {
  std::vector<Candidate> out;
  if (lanes && queue.lanes > 0) walk_lanes(queue, want, now, may_advance(), &out, reads);
  due_candidates(queue, due_want, now, out, reads != nullptr ? &reads->cut : nullptr);
  return out;
}

std::optional<FirstCandidates> first_candidates(pg::Spi&, const Queue& queue, int want, TimestampTz now) {
  if (queue.lanes <= 0 || queue.options.fairness || !may_advance()) return std::nullopt;
  FirstCandidates first;
  walk_lanes(queue, want, now, true, &first.lanes, &first.reads);
  return first;
}

std::map<std::int64_t, std::int64_t> list(pg::Spi&, const Queue& queue, int priority,
                                          const std::vector<std::int64_t>& msg_ids) {
  std::map<std::int64_t, std::int64_t> positions;
  if (queue.lanes <= 0 || queue.options.fairness || msg_ids.empty()) return positions;
  // The transaction's id first: maintain() voids a position only once every transaction that was
  // running when the position was taken has ended (forgeyard.queue_lanes_maintain).
  pg::guard([]() noexcept { GetTopTransactionId(); });
  const std::int64_t lane = queue.lanes * 8 + priority;
  const LaneSequences s = lane_sequences(lane);
  // (Into the open segment, as its number reads now: maintain() may move it on meanwhile, and the
  // entry in a sealed segment keeps it until the entry is consumed.)
  const bool segmented = segments_schema();
  const std::int64_t open = segmented ? pg::last_value(pg::CachedTable::queue_lane_segment) % 4 : 0;
  pg::Access access;
  pg::Table lanes(access, segmented ? segments[static_cast<std::size_t>(open)].table : unsegmented.table);
  const LaneColumns l(lanes);
  const int lane_col = lanes.column("lane");
  const int seg_col = segmented ? lanes.column("seg") : 0;
  for (const std::int64_t id : msg_ids) {
    const std::int64_t pos = pg::sequence_next_value(s.positions);
    if (segmented)
      lanes.insert({{lane_col, pg::int8_value(lane)},
                    {l.pos, pg::int8_value(pos)},
                    {l.msg_id, pg::int8_value(id)},
                    {seg_col, {Int16GetDatum(static_cast<std::int16_t>(open)), false}}});
    else
      lanes.insert({{lane_col, pg::int8_value(lane)}, {l.pos, pg::int8_value(pos)}, {l.msg_id, pg::int8_value(id)}});
    positions[id] = pos;
  }
  lanes.finish();
  access.finish();
  return positions;
}

}  // namespace fy::queue
