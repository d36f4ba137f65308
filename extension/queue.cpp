// What the queue functions share (queue.hpp): loading a queue and its options, the usage of its
// capacity slots, giving capacity back, and argument checks (docs/sql-api.md#queues).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

std::string tenant_arg(FunctionCallInfo fcinfo) {
  return pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
}
std::string queue_arg(FunctionCallInfo fcinfo) {
  return pg::name_arg(fcinfo, 1, "queue", core::max_queue_name_bytes);
}

namespace {

// The columns of forgeyard.queues, in the order load_queue reads them.
#define FY_QUEUE_COLUMNS                                                                                                \
  "max_messages, max_bytes, max_payload_bytes, visibility_usecs, max_attempts, backoff_base_usecs,"                     \
  " backoff_max_usecs, ordering OPERATOR(pg_catalog.=) 'partition', dead_letter_payload OPERATOR(pg_catalog.=) 'keep'," \
  " retain_acked_usecs, max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency,"                           \
  " admit_security_control, admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots"
// Flow control's columns (0.7.0): a database still at 0.6.0 reads the defaults instead.
#define FY_QUEUE_FLOW_COLUMNS                                                                         \
  ", retry_budget, retry_budget_min, retry_budget_window_usecs, admission_rate, admission_per_usecs," \
  " max_in_flight_per_key, fairness, aging_usecs"
#define FY_QUEUE_NO_FLOW_COLUMNS                                                                                             \
  ", NULL::pg_catalog.float8, 10::pg_catalog.int8, 60000000::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8," \
  " NULL::pg_catalog.int8, false, 0::pg_catalog.int8"

core::QueueOptions options_from(const pg::Row& r, int* slots) {
  core::QueueOptions o;
  o.max_messages = *r.int8(1);
  o.max_bytes = *r.int8(2);
  o.max_payload_bytes = *r.int8(3);
  o.visibility_usecs = *r.int8(4);
  o.max_attempts = *r.int8(5);
  o.backoff_base_usecs = *r.int8(6);
  o.backoff_max_usecs = *r.int8(7);
  o.partitioned = *r.boolean(8);
  o.keep_dead_payload = *r.boolean(9);
  o.retain_acked_usecs = *r.int8(10);
  o.max_dead = *r.int8(11);
  o.dead_retention_usecs = *r.int8(12);
  o.dedup_window_usecs = *r.int8(13);
  for (int p = 0; p < core::priority_classes; ++p) o.admit_percent[p] = *r.int8(14 + p);
  o.notify = *r.boolean(20);
  if (slots != nullptr) *slots = static_cast<int>(*r.int8(21));
  o.retry_budget = r.float8(22);
  o.retry_budget_min = *r.int8(23);
  o.retry_budget_window_usecs = *r.int8(24);
  o.admission_rate = r.int8(25).value_or(0);
  o.admission_per_usecs = r.int8(26).value_or(0);
  o.max_in_flight_per_key = r.int8(27).value_or(0);
  o.fairness = *r.boolean(28);
  o.aging_usecs = *r.int8(29);
  return o;
}

}  // namespace

Queue load(pg::Spi& spi, FunctionCallInfo fcinfo, bool producing) {
  const std::string tenant = tenant_arg(fcinfo);
  const std::string name = queue_arg(fcinfo);
  check_tenant(spi, tenant);
  return load(spi, tenant, name, producing);
}

bool flow_schema() {
  return pg::has_column(pg::CachedTable::queues, "retry_budget");
}

Queue load(pg::Spi& spi, const std::string& tenant, const std::string& name, bool producing) {
#define FY_QUEUE_READ(flow)       \
  "SELECT " FY_QUEUE_COLUMNS flow \
  " FROM forgeyard.queues"        \
  " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
  static pg::Statement read(FY_QUEUE_READ(FY_QUEUE_FLOW_COLUMNS), {TEXTOID, TEXTOID});
  static pg::Statement read_old(FY_QUEUE_READ(FY_QUEUE_NO_FLOW_COLUMNS), {TEXTOID, TEXTOID});
  // Under REPEATABLE READ or SERIALIZABLE a producer locks the queue row too, as before the
  // producer lock: its snapshot may predate a drop it waited for, and the row lock makes that
  // 40001 rather than an enqueue into a dropped queue.
  static pg::Statement read_for_producer(FY_QUEUE_READ(FY_QUEUE_FLOW_COLUMNS) " FOR KEY SHARE", {TEXTOID, TEXTOID});
  static pg::Statement read_for_producer_old(FY_QUEUE_READ(FY_QUEUE_NO_FLOW_COLUMNS) " FOR KEY SHARE",
                                             {TEXTOID, TEXTOID});
#undef FY_QUEUE_READ
  // Options are read from this backend's cache (pg/table_cache.hpp): a queue_alter applies from
  // the next command of its own transaction and, in other sessions, from their next call after it
  // committed. Producers first take the queue's producer lock (pg/table_access.hpp), which keeps
  // queue_drop from deleting the queue under them until they commit: taken before the cache is
  // consulted, so a producer that waited for a drop finds the queue gone (42704). What a
  // transaction-snapshot read returns is never cached.
  struct Cached {
    core::QueueOptions options;
    int slots;
    std::int64_t lanes;
  };
  // (Read apart from the options: a catalog before 0.10.0 has no such column.)
  static pg::Statement read_lanes(
      "SELECT lanes FROM forgeyard.queues WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static std::map<std::string, Cached> cache;
  static std::uint64_t cache_generation = 0;
  constexpr std::size_t max_cached = 4096;
  Queue queue;
  queue.tenant = tenant;
  queue.name = name;
  queue.t = pg::text_value(queue.tenant);
  queue.q = pg::text_value(queue.name);
  queue.flow = flow_schema();
  const std::string key = queue.tenant + std::string(1, '\0') + queue.name;
  const bool own_snapshot = pg::uses_transaction_snapshot();
  if (producing) pg::lock_queue(queue.tenant, queue.name, pg::QueueLock::produce);
  const std::uint64_t generation = pg::cache_generation(pg::CachedTable::queues);
  if (generation != cache_generation) {
    cache.clear();
    cache_generation = generation;
  }
  if (auto it = cache.find(key); it != cache.end() && !(producing && own_snapshot)) {
    queue.options = it->second.options;
    queue.slots = it->second.slots;
    queue.lanes = it->second.lanes;
    return queue;
  }
  bool found = false;
  const bool flow = queue.flow;
  pg::Statement& statement =
      producing && own_snapshot ? (flow ? read_for_producer : read_for_producer_old) : (flow ? read : read_old);
  spi.run(statement, {queue.t, queue.q}, [&](const pg::Row& r) {
    queue.options = options_from(r, &queue.slots);
    found = true;
  });
  if (!found) core::throw_unknown_queue(queue.tenant, queue.name);
  if (lanes_schema())
    spi.run(read_lanes, {queue.t, queue.q}, [&](const pg::Row& r) { queue.lanes = r.int8(1).value_or(0); });
  // Kept only if no invalidation came in while the row was read.
  if (!own_snapshot && pg::cache_generation(pg::CachedTable::queues) == cache_generation) {
    if (cache.size() >= max_cached) cache.clear();
    cache[key] = {queue.options, queue.slots, queue.lanes};
  }
  return queue;
}

// The deltas of a slot's release row (0.7.1, give_back()), as a subquery of the slot `a`.
#define FY_SLOT_DELTAS(column)                                                                       \
  "(SELECT pg_catalog.sum(d." column                                                                 \
  ") FROM forgeyard.queue_release_deltas d"                                                          \
  " WHERE d.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND d.queue OPERATOR(pg_catalog.=) a.queue" \
  "   AND d.slot OPERATOR(pg_catalog.=) a.slot)"

// A slot's row of its admission generation (0.12.0), as a subquery of the slot `a`.
#define FY_SLOT_GENERATION(column)                                                                   \
  "(SELECT g." column                                                                                \
  " FROM forgeyard.queue_admit_deltas g"                                                             \
  " WHERE g.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND g.queue OPERATOR(pg_catalog.=) a.queue" \
  "   AND g.slot OPERATOR(pg_catalog.=) a.slot AND g.gen OPERATOR(pg_catalog.=) a.admit_gen)"

SlotCounts slot_counts() {
  if (pg::has_table(pg::CachedTable::queue_admit_deltas)) return SlotCounts::admit_deltas;
  return pg::has_table(pg::CachedTable::queue_release_deltas) ? SlotCounts::release_deltas : SlotCounts::rows;
}

std::string slot_usage_sql(SlotCounts counts) {
  const bool deltas = counts != SlotCounts::rows, gens = counts == SlotCounts::admit_deltas;
  return std::string("SELECT a.slot, a.admitted_messages") +
         (gens ? " OPERATOR(pg_catalog.+) COALESCE(" FY_SLOT_GENERATION("admitted_messages") ", 0)" : "") +
         " OPERATOR(pg_catalog.-) r.released_messages" +
         (deltas ? " OPERATOR(pg_catalog.-) COALESCE(" FY_SLOT_DELTAS("released_messages") ", 0)::pg_catalog.int8"
                 : "") +
         ", a.admitted_bytes" +
         (gens ? " OPERATOR(pg_catalog.+) COALESCE(" FY_SLOT_GENERATION("admitted_bytes") ", 0)" : "") +
         " OPERATOR(pg_catalog.-) r.released_bytes" +
         (deltas ? " OPERATOR(pg_catalog.-) COALESCE(" FY_SLOT_DELTAS("released_bytes") ", 0)::pg_catalog.int8" : "") +
         "  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r"
         "    ON r.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND r.queue OPERATOR(pg_catalog.=) a.queue"
         "   AND r.slot OPERATOR(pg_catalog.=) a.slot"
         " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.queue OPERATOR(pg_catalog.=) $2";
}

core::Usage usage(pg::Spi& spi, const Queue& queue) {
  auto sum = [](SlotCounts counts) {
    return "SELECT pg_catalog.sum(u.m)::pg_catalog.int8, pg_catalog.sum(u.b)::pg_catalog.int8 FROM (" +
           slot_usage_sql(counts) + ") u(slot, m, b)";
  };
  static pg::Statement rows(sum(SlotCounts::rows), {TEXTOID, TEXTOID});
  static pg::Statement released(sum(SlotCounts::release_deltas), {TEXTOID, TEXTOID});
  static pg::Statement current(sum(SlotCounts::admit_deltas), {TEXTOID, TEXTOID});
  const SlotCounts counts = slot_counts();
  core::Usage used;
  spi.run(counts == SlotCounts::admit_deltas     ? current
          : counts == SlotCounts::release_deltas ? released
                                                 : rows,
          {queue.t, queue.q}, [&](const pg::Row& r) {
            used.messages = r.int8(1).value_or(0);
            used.bytes = r.int8(2).value_or(0);
          });
  return used;
}

bool usage_segments_schema() {
  return pg::has_table(pg::CachedTable::queue_release_deltas_0);
}

DeltaTables::DeltaTables(pg::Access& access, Deltas kind)
    : access_(access), kind_(kind), segmented_(usage_segments_schema()) {}

namespace {
// Generations a segment's period holds (100 of release, 10 of admission).
std::int64_t per_segment(Deltas kind) {
  return core::usage_segment_usecs /
         (kind == Deltas::release ? core::release_generation_usecs : core::admission_generation_usecs);
}
// The segment of a period: its partition key, (gen / per) % 4, as PostgreSQL computes it (truncated
// toward zero; segment N also takes -N, a clock before 1970).
int segment_of_period(std::int64_t period) {
  return static_cast<int>(std::abs(period % core::usage_segments));
}
}  // namespace

int DeltaTables::segment_of(std::int64_t gen) const {
  return segmented_ ? segment_of_period(gen / per_segment(kind_)) : 0;
}

std::vector<int> DeltaTables::holding(std::int64_t from, std::int64_t to) const {
  if (!segmented_) return {0};
  const std::int64_t first = from / per_segment(kind_), last = (to - 1) / per_segment(kind_);
  if (to <= from) return {};
  if (last - first >= core::usage_segments - 1) return {0, 1, 2, 3};
  std::vector<int> out;
  for (std::int64_t p = first; p <= last; ++p) out.push_back(segment_of_period(p));
  std::sort(out.begin(), out.end());  // (periods -N and N, across 1970, share segment N)
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

pg::Table& DeltaTables::segment(int i) {
  static constexpr std::array<pg::OwnTable, 4> release{
      pg::OwnTable::queue_release_deltas_0, pg::OwnTable::queue_release_deltas_1, pg::OwnTable::queue_release_deltas_2,
      pg::OwnTable::queue_release_deltas_3};
  static constexpr std::array<pg::OwnTable, 4> admit{
      pg::OwnTable::queue_admit_deltas_0, pg::OwnTable::queue_admit_deltas_1, pg::OwnTable::queue_admit_deltas_2,
      pg::OwnTable::queue_admit_deltas_3};
  std::optional<pg::Table>& t = tables_.at(static_cast<std::size_t>(i));
  if (!t) {
    if (!segmented_)
      t.emplace(access_,
                kind_ == Deltas::release ? pg::OwnTable::queue_release_deltas : pg::OwnTable::queue_admit_deltas);
    else
      t.emplace(access_, (kind_ == Deltas::release ? release : admit).at(static_cast<std::size_t>(i)));
  }
  return *t;
}

pg::OwnIndex DeltaTables::index(int i) const {
  static constexpr std::array<pg::OwnIndex, 4> release{
      pg::OwnIndex::queue_release_deltas_0_slot, pg::OwnIndex::queue_release_deltas_1_slot,
      pg::OwnIndex::queue_release_deltas_2_slot, pg::OwnIndex::queue_release_deltas_3_slot};
  static constexpr std::array<pg::OwnIndex, 4> admit{
      pg::OwnIndex::queue_admit_deltas_0_slot, pg::OwnIndex::queue_admit_deltas_1_slot,
      pg::OwnIndex::queue_admit_deltas_2_slot, pg::OwnIndex::queue_admit_deltas_3_slot};
  if (!segmented_)
    return kind_ == Deltas::release ? pg::OwnIndex::queue_release_deltas_slot : pg::OwnIndex::queue_admit_deltas_pkey;
  return (kind_ == Deltas::release ? release : admit).at(static_cast<std::size_t>(i));
}

void DeltaTables::finish() {
  for (std::optional<pg::Table>& t : tables_)
    if (t) t->finish();
}

core::Usage slot_deltas(DeltaTables& deltas, const Queue& queue, int slot) {
  core::Usage sum;
  for (int i = 0; i < deltas.count(); ++i) {
    pg::Table& d = deltas.segment(i);
    if (d.empty()) continue;  // (a truncated segment: no row, committed or not)
    const int messages = d.column("released_messages"), bytes = d.column("released_bytes");
    pg::Table::Scan scan(
        d, deltas.index(i),
        {{1, pg::Compare::eq, queue.t}, {2, pg::Compare::eq, queue.q}, {3, pg::Compare::eq, pg::int4_value(slot)}});
    while (scan.next()) {
      sum.messages += d.int8(messages);
      sum.bytes += d.int8(bytes);
    }
    scan.end();
  }
  return sum;
}

std::string held_key(const std::string& tenant, const std::string& name, HeldRow kind, int index) {
  std::string k = tenant;
  k.push_back('\0');
  k += name;
  k.push_back('\0');
  k.push_back(static_cast<char>(kind));
  k.push_back(static_cast<char>(index));  // slots, buckets and parts are 0..7
  return k;
}

bool HeldRows::may_wait(const std::string& key) {
  reset_if_new_transaction();
  return held_.empty() || key > *held_.rbegin();
}

void HeldRows::took(const std::string& key) {
  reset_if_new_transaction();
  held_.insert(key);
}

void HeldRows::reset_if_new_transaction() {
  const std::uint32_t now = pg::local_transaction();
  if (transaction_ == now) return;
  transaction_ = now;
  held_.clear();
}

HeldRows& held_rows() {
  static HeldRows rows;
  return rows;
}

std::int32_t positive_int_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int32_t max) {
  const std::int32_t v = pg::int4_arg(fcinfo, n, argument);
  if (v < 1 || v > max)
    throw core::Error(core::sqlstate::invalid_parameter,
                      std::string(argument) + " must be between 1 and " + std::to_string(max));
  return v;
}

void Releases::add(const Queue& queue, int slot, std::int64_t bytes, const std::optional<std::string>& key) {
  core::Usage& u = slots[slot];
  u.messages += 1;
  u.bytes += bytes;
  if (key && (queue.options.partitioned || queue.options.max_in_flight_per_key > 0)) keys[*key] += 1;
}

void Releases::outcome(const std::optional<std::string>& resource, int part, core::flow::Outcome o) {
  if (resource) outcomes[{*resource, part}][static_cast<int>(o)] += 1;
}

namespace {

// The older generations' delta rows of a slot folded into its release row (the first ack of a
// generation in the slot, at most once per core::release_fold_usecs: folded_gen is where the last
// fold stopped, a generation it did not fold): false when the slot has no release row (the queue
// was dropped).
bool fold_generations(pg::Access& access, DeltaTables& deltas, const Queue& queue, const pg::Value& s, std::int64_t gen,
                      bool own_snapshot) {
  constexpr std::int64_t fold_every = core::release_fold_usecs / core::release_generation_usecs;
  pg::Table r(access, pg::OwnTable::queue_releases);
  if (!r.find(pg::OwnIndex::queue_releases_pkey,
              {{1, pg::Compare::eq, queue.t}, {2, pg::Compare::eq, queue.q}, {3, pg::Compare::eq, s}})) {
    r.finish();
    return false;  // the queue was dropped under us
  }
  const int messages = r.column("released_messages"), bytes = r.column("released_bytes"),
            folded = r.column("folded_gen");
  // (folded_gen only grows: read before the lock it can only make this fold sooner, and the lock
  // reads the newest version again.)
  if (own_snapshot || gen - r.int8(folded) < fold_every ||
      r.lock(pg::LockMode::no_key_update, pg::Wait::skip) == pg::Locked::skipped || gen - r.int8(folded) < fold_every) {
    r.finish();
    return true;  // folded less than a second ago, or another ack folds (or none under a transaction snapshot)
  }
  const std::int64_t from = r.int8(folded);
  // (A row another transaction holds, or one deleted meanwhile, is left: the next fold starts at
  // its generation. A row of a transaction still open is not seen here: maintain() folds it.)
  std::int64_t next_from = gen;
  core::Usage total;
  for (int i : deltas.holding(from, gen)) {  // (the segments of the generations folded)
    pg::Table& d = deltas.segment(i);
    if (d.empty()) continue;
    const int d_gen = d.column("gen"), d_messages = d.column("released_messages"), d_bytes = d.column("released_bytes");
    pg::Table::Scan older(d, deltas.index(i),
                          {{1, pg::Compare::eq, queue.t},
                           {2, pg::Compare::eq, queue.q},
                           {3, pg::Compare::eq, s},
                           {4, pg::Compare::ge, pg::int8_value(from)},
                           {4, pg::Compare::lt, pg::int8_value(gen)}});
    while (older.next()) {
      const std::int64_t row_gen = d.int8(d_gen);
      if (d.lock(pg::LockMode::update, pg::Wait::skip) == pg::Locked::skipped) {
        next_from = std::min(next_from, row_gen);
        continue;
      }
      total.messages += d.int8(d_messages);
      total.bytes += d.int8(d_bytes);
      d.remove();
    }
    older.end();
  }
  if (total.messages != 0 || total.bytes != 0 || next_from != from)
    r.update({{messages, pg::int8_value(r.int8(messages) + total.messages)},
              {bytes, pg::int8_value(r.int8(bytes) + total.bytes)},
              {folded, pg::int8_value(next_from)}});
  r.finish();
  return true;
}

// From 0.11.0 on (release generations): the room goes to the slot's delta row of the current
// generation instead, updated in place, and the release row is not touched by an ack. Per slot,
// the first delta row of the generation locked FOR NO KEY UPDATE SKIP LOCKED gets the room; when
// there is none this transaction can lock (each is held by another ack, or there is none yet), a
// new row of the generation is inserted, which waits for nobody. When the generation has no row
// at all yet, this is its first ack in the slot: the older generations' rows are folded into the
// release row (fold_generations()), if this ack can lock it without waiting. Under a transaction
// snapshot the room is always a new row, and nothing is folded (a row changed since the snapshot
// could only be 40001). So under a held snapshot an ack walks the versions of one generation's
// row, never the release row's, whose versions are one per fold. From 0.14.0 the generation's
// rows are in the segment of its period (DeltaTables), the only one an ack that folds nothing opens.
void give_back_by_generation(const Queue& queue, const std::map<int, core::Usage>& slots, bool own_snapshot) {
  const std::int64_t gen = pg::unix_usecs(pg::now()) / core::release_generation_usecs;
  const pg::Value g = pg::int8_value(gen);
  pg::Access access;
  DeltaTables deltas(access, Deltas::release);
  pg::Table& d = deltas.at(gen);
  const int d_gen = d.column("gen"), d_messages = d.column("released_messages"), d_bytes = d.column("released_bytes");
  for (const auto& [slot, used] : slots) {
    const pg::Value s = pg::int4_value(slot);
    bool seen = false;
    bool added = false;
    if (!own_snapshot) {
      pg::Table::Scan rows(d, deltas.index_at(gen),
                           {{1, pg::Compare::eq, queue.t},
                            {2, pg::Compare::eq, queue.q},
                            {3, pg::Compare::eq, s},
                            {4, pg::Compare::eq, g}});
      while (!added && rows.next()) {
        seen = true;
        if (d.lock(pg::LockMode::no_key_update, pg::Wait::skip) == pg::Locked::skipped) continue;
        d.update({{d_messages, pg::int8_value(d.int8(d_messages) + used.messages)},
                  {d_bytes, pg::int8_value(d.int8(d_bytes) + used.bytes)}});
        added = true;
      }
      rows.end();
    }
    if (added) continue;
    if (!seen && !fold_generations(access, deltas, queue, s, gen, own_snapshot)) continue;
    d.insert({{1, queue.t},
              {2, queue.q},
              {3, s},
              {d_gen, g},
              {d_messages, pg::int8_value(used.messages)},
              {d_bytes, pg::int8_value(used.bytes)}});
  }
  deltas.finish();
  access.finish();
}

// The room of released messages back to their slots, below SPI (pg/table_access.hpp), never
// waiting for a row another transaction holds (give_back_by_generation() from 0.11.0 on). On a
// catalog before 0.11.0, per slot: its release row locked FOR NO KEY UPDATE SKIP LOCKED, the
// slot's committed deltas folded into it (each delta locked SKIP LOCKED, so one another folder
// took is left to it, and deleted), and the room added. A release row another transaction holds,
// or any under a transaction snapshot (where a row changed since the snapshot could only be
// 40001), gets the room as a delta row of its own instead: an INSERT, which waits for nobody. So
// no two acks wait for each other, in any order of slots (docs/architecture.md, "Locks held to
// commit"). A database still at 0.7.0 has no deltas: there the row is waited for.
void give_back(const Queue& queue, const std::map<int, core::Usage>& slots) {
  const bool deltas = pg::has_table(pg::CachedTable::queue_release_deltas);
  const bool own_snapshot = pg::uses_transaction_snapshot();
  if (deltas && pg::has_column(pg::CachedTable::queue_release_deltas, "gen")) {
    give_back_by_generation(queue, slots, own_snapshot);
    return;
  }
  pg::Access access;
  pg::Table r(access, pg::OwnTable::queue_releases);
  std::optional<pg::Table> d;
  const int messages = r.column("released_messages"), bytes = r.column("released_bytes");
  for (const auto& [slot, used] : slots) {
    const pg::Value s = pg::int4_value(slot);
    if (!r.find(pg::OwnIndex::queue_releases_pkey,
                {{1, pg::Compare::eq, queue.t}, {2, pg::Compare::eq, queue.q}, {3, pg::Compare::eq, s}}))
      continue;  // the queue was dropped under us (as the UPDATE would find no row)
    if (deltas) {
      if (!d) d.emplace(access, pg::OwnTable::queue_release_deltas);
      const int d_messages = d->column("released_messages"), d_bytes = d->column("released_bytes");
      if (own_snapshot || r.lock(pg::LockMode::no_key_update, pg::Wait::skip) == pg::Locked::skipped) {
        d->insert({{1, queue.t},
                   {2, queue.q},
                   {3, s},
                   {d_messages, pg::int8_value(used.messages)},
                   {d_bytes, pg::int8_value(used.bytes)}});
        continue;
      }
      core::Usage total = used;
      pg::Table::Scan folded(*d, pg::OwnIndex::queue_release_deltas_slot,
                             {{1, pg::Compare::eq, queue.t}, {2, pg::Compare::eq, queue.q}, {3, pg::Compare::eq, s}});
      while (folded.next()) {
        if (d->lock(pg::LockMode::update, pg::Wait::skip) == pg::Locked::skipped) continue;
        total.messages += d->int8(d_messages);
        total.bytes += d->int8(d_bytes);
        d->remove();
      }
      folded.end();
      r.update({{messages, pg::int8_value(r.int8(messages) + total.messages)},
                {bytes, pg::int8_value(r.int8(bytes) + total.bytes)}});
      continue;
    }
    if (r.lock(pg::LockMode::no_key_update, pg::Wait::block) == pg::Locked::skipped) continue;
    r.update({{messages, pg::int8_value(r.int8(messages) + used.messages)},
              {bytes, pg::int8_value(r.int8(bytes) + used.bytes)}});
  }
  if (d) d->finish();
  r.finish();
  access.finish();
}

}  // namespace

// The heads of a key of a max_in_flight_per_key queue that finished: its counts under the key's
// row lock, then up to the limit of its waiting messages promoted, oldest first.
void leave_key(pg::Spi& spi, const Queue& queue, const pg::Value& key, std::int64_t count) {
  static pg::Statement lock_key(
      "SELECT pending, heads FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND partition_key OPERATOR(pg_catalog.=) $3 FOR NO KEY UPDATE",
      {TEXTOID, TEXTOID, TEXTOID});
  static pg::Statement set_key(
      "UPDATE forgeyard.queue_partitions SET pending = $4, heads = $5 WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND partition_key OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID});
  static pg::Statement drop_key(
      "DELETE FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND partition_key OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, TEXTOID});
  static pg::Statement promote(
      "UPDATE forgeyard.messages SET is_head = true WHERE msg_id OPERATOR(pg_catalog.=) ANY (ARRAY("
      "  SELECT n.msg_id FROM forgeyard.messages n WHERE n.tenant_id OPERATOR(pg_catalog.=) $1"
      "     AND n.queue OPERATOR(pg_catalog.=) $2 AND n.fairness_key OPERATOR(pg_catalog.=) $3"
      "     AND n.state OPERATOR(pg_catalog.=) 'pending' AND NOT n.is_head ORDER BY n.msg_id LIMIT $4))",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID});
  std::optional<std::pair<std::int64_t, std::int64_t>> counts;
  spi.run(lock_key, {queue.t, queue.q, key}, [&](const pg::Row& r) { counts = {{*r.int8(1), *r.int8(2)}}; });
  if (!counts) return;  // (the queue was dropped under us)
  // (Clamped: a message enqueued while max_in_flight_per_key was being set is not counted.)
  const std::int64_t pending = counts->first - count, heads = std::max<std::int64_t>(0, counts->second - count);
  if (pending <= 0) {
    spi.run(drop_key, {queue.t, queue.q, key});
    return;
  }
  const std::int64_t promote_n = core::heads_to_promote(queue.options.max_in_flight_per_key, pending, heads);
  const std::uint64_t promoted =
      promote_n > 0 ? spi.run(promote, {queue.t, queue.q, key, pg::int8_value(promote_n)}) : 0;
  spi.run(set_key, {queue.t, queue.q, key, pg::int8_value(pending),
                    pg::int8_value(heads + static_cast<std::int64_t>(promoted))});
}

void apply(pg::Spi& spi, const Queue& queue, const Releases& releases) {
  static pg::Statement leave_partition(
      "UPDATE forgeyard.queue_partitions SET pending = pending OPERATOR(pg_catalog.-) $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND partition_key OPERATOR(pg_catalog.=) $3 RETURNING pending",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID});
  static pg::Statement drop_partition(
      "DELETE FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND partition_key OPERATOR(pg_catalog.=) $3"
      "   AND pending OPERATOR(pg_catalog.=) 0",
      {TEXTOID, TEXTOID, TEXTOID});
  static pg::Statement next_head(
      "UPDATE forgeyard.messages SET is_head = true WHERE msg_id OPERATOR(pg_catalog.=) ("
      "  SELECT n.msg_id FROM forgeyard.messages n WHERE n.tenant_id OPERATOR(pg_catalog.=) $1"
      "     AND n.queue OPERATOR(pg_catalog.=) $2 AND n.partition_key OPERATOR(pg_catalog.=) $3"
      "     AND n.state OPERATOR(pg_catalog.=) 'pending' ORDER BY n.msg_id LIMIT 1)",
      {TEXTOID, TEXTOID, TEXTOID});
  if (!releases.slots.empty()) give_back(queue, releases.slots);
  if (!releases.outcomes.empty()) record_outcomes(spi, queue, releases, pg::now());
  for (const auto& [key, count] : releases.keys) {
    const pg::Value k = pg::text_value(key);
    if (!queue.options.partitioned) {
      leave_key(spi, queue, k, count);
      continue;
    }
    std::int64_t pending = 0;
    spi.run(leave_partition, {queue.t, queue.q, k, pg::int8_value(count)},
            [&](const pg::Row& r) { pending = *r.int8(1); });
    if (pending > 0)
      spi.run(next_head, {queue.t, queue.q, k});
    else
      spi.run(drop_partition, {queue.t, queue.q, k});
  }
}

}  // namespace fy::queue

// invalidate_caches(): statement trigger (AFTER INSERT, UPDATE, DELETE, TRUNCATE) on
// forgeyard.queues and forgeyard.tenant_bindings, whose rows backends cache.
FY_FUNCTION(fy_invalidate_caches) {
  fy::pg::invalidate_trigger_table(fcinfo);
  return PointerGetDatum(nullptr);
}
