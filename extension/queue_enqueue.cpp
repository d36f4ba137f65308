// Producing: enqueue and enqueue_batch, the transactional outbox, with admission into the capacity
// slots by priority class, event_id deduplication and partition heads (docs/sql-api.md#queues).
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

using core::sqlstate::invalid_parameter;

namespace {

// A slot's admitted side (0.12.0, admission generations): the counts folded into its queue_slots
// row and those of its queue_admit_deltas row of generation admit_gen. Producers hold the slot row
// FOR UPDATE (a lock, no new version) and update the generation row in place; the first producer
// of a later generation (forgeyard.now() in seconds) folds the older row into the slot row,
// deletes it and makes the new one. So the slot row has a version per generation, the generation
// row one per message of its second, and under a held snapshot a producer walks those, not a
// version per message since the snapshot. The generation row is read through a lock: in READ
// COMMITTED that follows it to its newest version; under a transaction snapshot it is 40001 when
// another producer changed it since. A generation row is made only by a transaction that updates
// the slot row too, whose lock is then 40001: so a producer under a transaction snapshot sees
// every admission into the slot, or fails.
class SlotAdmitted {
 public:
  // `slots` holds the slot's row, locked by this transaction; `gens` is queue_admit_deltas
  // (nullptr on a catalog before 0.12.0, where the slot row alone counts).
  SlotAdmitted(pg::Table& slots, DeltaTables* gens, const Queue& queue, int slot)
      : slots_(slots), gens_(gens), queue_(queue), slot_(slot) {}

  // Reads the counts: false when the generation row is not visible to this access's snapshot
  // (READ COMMITTED: its producer committed after the snapshot, before this transaction took the
  // lock), to be read again with a new pg::Access.
  bool read() {
    folded_ = {slots_.int8(slots_.column("admitted_messages")), slots_.int8(slots_.column("admitted_bytes"))};
    if (gens_ == nullptr) return true;
    const int g = slots_.column("admit_gen");
    if (slots_.is_null(g)) return true;
    gen_ = slots_.int8(g);
    pg::Table& row = gens_->at(*gen_);
    if (!row.find(gens_->index_at(*gen_), {{1, pg::Compare::eq, queue_.t},
                                           {2, pg::Compare::eq, queue_.q},
                                           {3, pg::Compare::eq, pg::int4_value(slot_)},
                                           {4, pg::Compare::eq, pg::int8_value(*gen_)}}) ||
        row.lock(pg::LockMode::no_key_update, pg::Wait::block) == pg::Locked::skipped)
      return false;
    current_ = {row.int8(row.column("admitted_messages")), row.int8(row.column("admitted_bytes"))};
    return true;
  }

  core::Usage admitted() const { return {folded_.messages + current_.messages, folded_.bytes + current_.bytes}; }

  // Adds `n` (after read()): to the generation row, or, in a later generation, folded with it into
  // the slot row, the new generation's row made with `n`. Once per read().
  void add(core::Usage n) {
    const int m = slots_.column("admitted_messages"), b = slots_.column("admitted_bytes");
    if (gens_ == nullptr) {
      slots_.update({{m, pg::int8_value(folded_.messages + n.messages)}, {b, pg::int8_value(folded_.bytes + n.bytes)}});
      return;
    }
    const std::int64_t now = pg::unix_usecs(pg::now()) / core::admission_generation_usecs;
    if (gen_ && now <= *gen_) {           // (a clock behind the slot's generation adds to it too)
      pg::Table& row = gens_->at(*gen_);  // (the row read() found and locked)
      row.update({{row.column("admitted_messages"), pg::int8_value(current_.messages + n.messages)},
                  {row.column("admitted_bytes"), pg::int8_value(current_.bytes + n.bytes)}});
      return;
    }
    slots_.update({{m, pg::int8_value(folded_.messages + current_.messages)},
                   {b, pg::int8_value(folded_.bytes + current_.bytes)},
                   {slots_.column("admit_gen"), pg::int8_value(now)}});
    if (gen_) gens_->at(*gen_).remove();
    pg::Table& made = gens_->at(now);
    made.insert({{made.column("tenant_id"), queue_.t},
                 {made.column("queue"), queue_.q},
                 {made.column("slot"), pg::int4_value(slot_)},
                 {made.column("gen"), pg::int8_value(now)},
                 {made.column("admitted_messages"), pg::int8_value(n.messages)},
                 {made.column("admitted_bytes"), pg::int8_value(n.bytes)}});
  }

 private:
  pg::Table& slots_;
  DeltaTables* gens_;
  const Queue& queue_;
  int slot_;
  core::Usage folded_, current_;
  std::optional<std::int64_t> gen_;
};

// The tables an admission reads, in one pg::Access. What the catalog has is asked once
// queue_slots is open: an ALTER EXTENSION UPDATE that made the generation table while this
// waited for the table's lock is seen (its invalidations are taken with the lock).
struct SlotTables {
  explicit SlotTables(pg::Access& access)
      : access(access),
        slots(access, pg::OwnTable::queue_slots),
        releases(access, pg::OwnTable::queue_releases),
        counts(slot_counts()) {
    if (counts == SlotCounts::admit_deltas) gens.emplace(access, Deltas::admit);
  }
  DeltaTables& released() {  // the release deltas, opened when first read
    if (!deltas) deltas.emplace(access, Deltas::release);
    return *deltas;
  }
  void finish() {
    if (deltas) deltas->finish();
    if (gens) gens->finish();
    releases.finish();
    slots.finish();
  }
  pg::Access& access;
  pg::Table slots, releases;
  SlotCounts counts;
  std::optional<DeltaTables> gens, deltas;
};

enum class Tried { taken, no_room, held, gone, unseen };

// One slot: its row locked FOR UPDATE (SKIP LOCKED with Wait::skip: `held` when another producer
// has it), its usage read and, if the class fits (core::admits), the message taken. The release
// deltas are read only when the rows alone leave no room: without them the usage is an
// overcount, which admits nothing the bound would refuse, and reading them walks every version a
// held snapshot keeps of the slot's deltas (one per ack). `used` is the usage before this message
// (an overcount when the rows left room, which only makes a batch come back sooner). `unseen`:
// read it again in a new pg::Access (SlotAdmitted::read()); the lock stays.
Tried try_slot(SlotTables& t, const Queue& queue, int slot, int priority, std::int64_t bytes, pg::Wait wait,
               core::Usage* used) {
  const std::initializer_list<pg::Key> key{
      {1, pg::Compare::eq, queue.t}, {2, pg::Compare::eq, queue.q}, {3, pg::Compare::eq, pg::int4_value(slot)}};
  if (!t.slots.find(pg::OwnIndex::queue_slots_pkey, key)) return Tried::gone;
  if (t.slots.lock(pg::LockMode::update, wait) == pg::Locked::skipped)
    return wait == pg::Wait::skip ? Tried::held : Tried::gone;  // (or deleted: the queue was dropped)
  held_rows().took(held_key(queue, HeldRow::capacity_slot, slot));
  if (!t.releases.find(pg::OwnIndex::queue_releases_pkey, key)) return Tried::gone;
  SlotAdmitted admitted(t.slots, t.gens ? &*t.gens : nullptr, queue, slot);
  if (!admitted.read()) return Tried::unseen;
  const core::Usage in = admitted.admitted();
  core::Usage u{in.messages - t.releases.int8(t.releases.column("released_messages")),
                in.bytes - t.releases.int8(t.releases.column("released_bytes"))};
  const core::Usage budget = core::slot_budget(queue.options, queue.slots, slot);
  if (!core::admits(queue.options, priority, u, budget, bytes) && t.counts != SlotCounts::rows) {
    const core::Usage given = slot_deltas(t.released(), queue, slot);
    u.messages -= given.messages;
    u.bytes -= given.bytes;
  }
  *used = u;
  if (!core::admits(queue.options, priority, u, budget, bytes)) return Tried::no_room;
  admitted.add({1, bytes});
  return Tried::taken;
}

// try_slot() in an access of its own, and in a second one when the first could not see the
// slot's generation row (the lock is this transaction's by then).
Tried try_slot_alone(const Queue& queue, int slot, int priority, std::int64_t bytes, pg::Wait wait, core::Usage* used) {
  for (int attempt = 0;; ++attempt) {
    pg::Access access;
    SlotTables t(access);
    const Tried r = try_slot(t, queue, slot, priority, bytes, wait, used);
    t.finish();
    access.finish();
    if (r != Tried::unseen) return r;
    if (attempt > 0) throw core::Error(core::sqlstate::internal_error, "a capacity slot's generation row is not found");
  }
}

}  // namespace

// Unlocked slots are tried first, so that concurrent producers spread over the slots; only when
// none of them admits does admit wait for a locked one, and only for one it may wait for
// (held_rows()).
int admit(pg::Spi& spi, const Queue& queue, int priority, std::int64_t bytes, core::Usage* seen) {
  // All slots, unlocked, starting at this call's first slot: the candidates.
  static const std::string read_tail = " ORDER BY (a.slot OPERATOR(pg_catalog.+) $3) OPERATOR(pg_catalog.%) $4";
  static pg::Statement read_rows(slot_usage_sql(SlotCounts::rows) + read_tail, {TEXTOID, TEXTOID, INT4OID, INT4OID});
  static pg::Statement read_released(slot_usage_sql(SlotCounts::release_deltas) + read_tail,
                                     {TEXTOID, TEXTOID, INT4OID, INT4OID});
  static pg::Statement read_current(slot_usage_sql(SlotCounts::admit_deltas) + read_tail,
                                    {TEXTOID, TEXTOID, INT4OID, INT4OID});
  // Each call starts one slot further than the last (from this backend's pid): one producer's
  // messages spread over the slots.
  static unsigned rotation = static_cast<unsigned>(MyProcPid);
  const int start = static_cast<int>(rotation++ % static_cast<unsigned>(queue.slots));
  // The common case first, below SPI (pg/table_access.hpp): the first slot from `start` that no
  // other producer holds is locked and tried (try_slot()). A locked slot without room stays locked
  // and the candidates below decide.
  Tried first = Tried::gone;
  int tried = -1;
  core::Usage used;
  {
    pg::Access access;
    SlotTables t(access);
    for (int i = 0; i < queue.slots; ++i) {
      tried = (start + i) % queue.slots;
      first = try_slot(t, queue, tried, priority, bytes, pg::Wait::skip, &used);
      if (first != Tried::held) break;
    }
    t.finish();
    access.finish();
  }
  if (first == Tried::unseen) first = try_slot_alone(queue, tried, priority, bytes, pg::Wait::block, &used);
  if (first == Tried::taken) {
    if (seen) *seen = used;
    return tried;
  }
  // Candidates by the current counts (an undercount of releases only refuses early).
  std::vector<int> candidates;
  const SlotCounts counts = slot_counts();
  spi.run(counts == SlotCounts::admit_deltas     ? read_current
          : counts == SlotCounts::release_deltas ? read_released
                                                 : read_rows,
          {queue.t, queue.q, pg::int4_value(start), pg::int4_value(queue.slots)}, [&](const pg::Row& r) {
            const int slot = static_cast<int>(*r.int8(1));
            if (core::admits(queue.options, priority, {*r.int8(2), *r.int8(3)},
                             core::slot_budget(queue.options, queue.slots, slot), bytes))
              candidates.push_back(slot);
          });
  // Lock one candidate, first one no other producer holds, then waiting for one this transaction
  // may wait for; tried again under the lock.
  for (const bool wait : {false, true}) {
    for (int slot : candidates) {
      if (wait && !held_rows().may_wait(held_key(queue, HeldRow::capacity_slot, slot))) continue;
      if (try_slot_alone(queue, slot, priority, bytes, wait ? pg::Wait::block : pg::Wait::skip, &used) ==
          Tried::taken) {
        if (seen) *seen = used;
        return slot;
      }
    }
  }
  core::throw_queue_full(queue.name, queue.options, priority);
}

std::int64_t join_key(pg::Spi& spi, const Queue& queue, const std::optional<std::string>& key, std::int64_t n) {
  static pg::Statement partition(
      "INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending) VALUES ($1, $2, $3, 1)"
      " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = p.pending OPERATOR(pg_catalog.+) 1"
      " RETURNING pending",
      {TEXTOID, TEXTOID, TEXTOID});
  // A key of a max_in_flight_per_key queue ($5) makes heads of the new messages up to the limit
  // only while none of its messages waits (older ones are promoted first, as heads finish).
  static pg::Statement limited(
      "INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending, heads)"
      " VALUES ($1, $2, $3, $4, pg_catalog.int8smaller($4, $5))"
      " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = p.pending OPERATOR(pg_catalog.+) $4,"
      "   heads = p.heads OPERATOR(pg_catalog.+) CASE WHEN p.pending OPERATOR(pg_catalog.=) p.heads"
      "     AND p.heads OPERATOR(pg_catalog.<) $5 THEN pg_catalog.int8smaller($4, $5 OPERATOR(pg_catalog.-) p.heads)"
      "     ELSE 0 END"
      " RETURNING pending, heads",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID});
  if (!key || n <= 0) return n;
  std::int64_t heads = 0;
  if (queue.options.partitioned) {
    // (One message at a time: the head only if it is the key's only pending message.)
    spi.run(partition, {queue.t, queue.q, pg::text_value(*key)}, [&](const pg::Row& r) { heads = *r.int8(1) == 1; });
    return heads;
  }
  spi.run(
      limited,
      {queue.t, queue.q, pg::text_value(*key), pg::int8_value(n), pg::int8_value(queue.options.max_in_flight_per_key)},
      [&](const pg::Row& r) { heads = core::heads_made(n, *r.int8(1), *r.int8(2)); });
  return heads;
}

std::vector<std::int64_t> fair_passes(pg::Spi& spi, const Queue& queue, int priority,
                                      const std::optional<std::string>& fairness_key, std::int64_t n) {
  static pg::Statement lowest(
      "SELECT pass FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND priority OPERATOR(pg_catalog.=) $3 AND state OPERATOR(pg_catalog.=) 'pending' AND is_head"
      "   AND pass IS NOT NULL ORDER BY pass LIMIT 1",
      {TEXTOID, TEXTOID, INT2OID});
  static pg::Statement highest_key(
      "SELECT pg_catalog.max(last_pass) FROM forgeyard.queue_fair_keys"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement take(
      "INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, last_pass)"
      " VALUES ($1, $2, $3, $4 OPERATOR(pg_catalog.+) ($5 OPERATOR(pg_catalog.*) $6))"
      " ON CONFLICT (tenant_id, queue, fairness_key) DO UPDATE"
      "   SET last_pass = pg_catalog.int8larger(COALESCE(k.last_pass, $4), $4)"
      "       OPERATOR(pg_catalog.+) ($5 OPERATOR(pg_catalog.*) ($6 OPERATOR(pg_catalog./) k.weight))"
      " RETURNING last_pass, weight::pg_catalog.int8",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID});
  std::vector<std::int64_t> passes;
  if (!queue.options.fairness || n <= 0) return passes;
  std::optional<std::int64_t> start;
  spi.run(lowest, {queue.t, queue.q, {Int16GetDatum(static_cast<std::int16_t>(priority)), false}},
          [&](const pg::Row& r) { start = r.int8(1); });
  if (!start) spi.run(highest_key, {queue.t, queue.q}, [&](const pg::Row& r) { start = r.int8(1); });
  std::int64_t last = 0, weight = 1;
  spi.run(take,
          {queue.t, queue.q, pg::text_value(core::fair_key(fairness_key)), pg::int8_value(start.value_or(0)),
           pg::int8_value(n), pg::int8_value(core::pass_unit)},
          [&](const pg::Row& r) {
            last = *r.int8(1);
            weight = *r.int8(2);
          });
  for (std::int64_t i = 0; i < n; ++i) passes.push_back(core::nth_pass(last, weight, n, i));
  return passes;
}

namespace {

// A batch keeps the slot it last locked and counts what it admits there in memory, writing the
// counters once: updating the same row per message leaves a chain of row versions this
// transaction cannot prune, which every later read walks (quadratic in the batch). The row lock
// is held to commit, so no other producer admits into the slot meanwhile; releases it misses only
// refuse early, and when the slot is full the tally is written before admit() reads the slots.
class BatchAdmission {
 public:
  BatchAdmission(pg::Spi& spi, const Queue& queue) : spi_(spi), queue_(queue) {}

  int admit(int priority, std::int64_t bytes) {
    if (slot_ >= 0) {
      const core::Usage used{base_.messages + pending_.messages, base_.bytes + pending_.bytes};
      if (core::admits(queue_.options, priority, used, core::slot_budget(queue_.options, queue_.slots, slot_), bytes)) {
        pending_.messages += 1;
        pending_.bytes += bytes;
        return slot_;
      }
      flush();
    }
    core::Usage seen;
    slot_ = queue::admit(spi_, queue_, priority, bytes, &seen);
    base_ = {seen.messages + 1, seen.bytes + bytes};
    return slot_;
  }

  // Writes the tally of the slot held (SlotAdmitted::add(), below SPI); must run before anything
  // else reads the slot counters.
  void flush() {
    if (slot_ >= 0 && pending_.messages > 0) {
      for (int attempt = 0;; ++attempt) {
        pg::Access access;
        pg::Table slots(access, pg::OwnTable::queue_slots);
        std::optional<DeltaTables> gens;  // (asked once queue_slots is open: SlotTables)
        if (slot_counts() == SlotCounts::admit_deltas) gens.emplace(access, Deltas::admit);
        SlotAdmitted admitted(slots, gens ? &*gens : nullptr, queue_, slot_);
        const bool found = slots.find(pg::OwnIndex::queue_slots_pkey, {{1, pg::Compare::eq, queue_.t},
                                                                       {2, pg::Compare::eq, queue_.q},
                                                                       {3, pg::Compare::eq, pg::int4_value(slot_)}}) &&
                           slots.lock(pg::LockMode::update, pg::Wait::block) != pg::Locked::skipped;
        const bool seen = found && admitted.read();
        if (seen) admitted.add(pending_);
        if (gens) gens->finish();
        slots.finish();
        access.finish();
        if (seen || !found) break;  // (not found: the queue was dropped under this batch)
        if (attempt > 0)
          throw core::Error(core::sqlstate::internal_error, "a capacity slot's generation row is not found");
      }
    }
    slot_ = -1;
    base_ = pending_ = {};
  }

 private:
  pg::Spi& spi_;
  const Queue& queue_;
  int slot_ = -1;
  core::Usage base_, pending_;
};

struct Message {
  std::string payload;
  std::optional<std::string> event_id;  // 16 bytes
  std::optional<std::string> partition_key;
};

// What a call's messages share besides class and delay: the fairness key and the resource
// (arguments 7 and 8, which a catalog before 0.7.0 does not pass).
struct Flow {
  std::optional<std::string> fairness_key, resource;
};

// A message row to insert: what enqueue_one decided for it.
struct NewRow {
  const Message* m;
  std::int64_t msg_id;
  int priority;
  bool is_head;
  std::int64_t bytes;
  int slot;
  TimestampTz visible_at;
  std::int64_t pass = 0;       // (a fair queue's)
  std::int64_t ready_pos = 0;  // its listing's position in its lane (0: none)
};

// The message rows, below SPI (pg/table_access.hpp): constraints checked and every index entry
// made, as the INSERT it replaces. The table and its indexes are opened once for all of them.
void insert_messages(const Queue& queue, const std::vector<NewRow>& rows, TimestampTz now, const Flow& flow) {
  if (rows.empty()) return;
  pg::Access access;
  pg::Table messages(access, pg::OwnTable::messages);
  // Column numbers once per call, the same values array for every row (only its data changes);
  // the columns of 0.7.0 only when given: a catalog before it has neither, and its calls pass neither.
  std::array<std::pair<int, pg::Value>, 18> values{{
      {messages.column("msg_id"), {}},
      {messages.column("tenant_id"), queue.t},
      {messages.column("queue"), queue.q},
      {messages.column("state"), pg::text_value("pending")},
      {messages.column("priority"), {}},
      {messages.column("partition_key"), {}},
      {messages.column("is_head"), {}},
      {messages.column("event_id"), {}},
      {messages.column("payload"), {}},
      {messages.column("bytes"), {}},
      {messages.column("slot"), {}},
      {messages.column("enqueued_at"), pg::timestamptz_value(now)},
      {messages.column("visible_at"), {}},
      {messages.column("attempt"), pg::int4_value(0)},
  }};
  std::size_t n = 14;
  if (flow.fairness_key) values[n++] = {messages.column("fairness_key"), pg::text_value(*flow.fairness_key)};
  if (flow.resource) values[n++] = {messages.column("resource"), pg::text_value(*flow.resource)};
  const std::size_t pass_at = n;
  if (queue.options.fairness) values[n++] = {messages.column("pass"), {}};
  const std::size_t ready_at = n;
  if (queue.lanes > 0) values[n++] = {messages.column("ready_pos"), {}};
  for (const NewRow& r : rows) {
    values[0].second = pg::int8_value(r.msg_id);
    values[4].second = {Int16GetDatum(static_cast<std::int16_t>(r.priority)), false};
    values[5].second = pg::optional_text_value(r.m->partition_key);
    values[6].second = pg::bool_value(r.is_head);
    values[7].second = pg::optional_uuid_value(r.m->event_id);
    values[8].second = pg::bytea_value(r.m->payload);
    values[9].second = pg::int8_value(r.bytes);
    values[10].second = {Int16GetDatum(static_cast<std::int16_t>(r.slot)), false};
    values[12].second = pg::timestamptz_value(r.visible_at);
    if (queue.options.fairness) values[pass_at].second = pg::int8_value(r.pass);
    if (queue.lanes > 0) values[ready_at].second = r.ready_pos > 0 ? pg::int8_value(r.ready_pos) : pg::null_value();
    messages.insert(std::span<const std::pair<int, pg::Value>>(values.data(), n));
  }
  messages.finish();
  access.finish();
}

// Admits one message and takes its event and partition rows; its message row is added to `rows`
// (the caller inserts them: a batch all at once, after the statements above for every message,
// none of which reads the messages table). A repeated event_id adds no row.
std::int64_t enqueue_one(pg::Spi& spi, const Queue& queue, const Message& m, int priority, std::int64_t delay,
                         TimestampTz now, std::vector<NewRow>& rows, BatchAdmission* batch = nullptr) {
  static pg::Statement claim_event(
      "INSERT INTO forgeyard.queue_events (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)"
      " VALUES ($1, $2, $3, $4, $5, $6)"
      " ON CONFLICT (tenant_id, queue, event_id) DO UPDATE SET msg_id = excluded.msg_id,"
      "   payload_digest = excluded.payload_digest, expires_at = excluded.expires_at"
      " WHERE forgeyard.queue_events.expires_at OPERATOR(pg_catalog.<=) $7"
      " RETURNING msg_id",
      {TEXTOID, TEXTOID, UUIDOID, INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement first_event(
      "SELECT msg_id, payload_digest FROM forgeyard.queue_events WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND event_id OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, UUIDOID});

  const core::QueueOptions& o = queue.options;
  const std::int64_t bytes = static_cast<std::int64_t>(m.payload.size());
  if (bytes > o.max_payload_bytes) core::throw_payload_too_large(queue.name, o, bytes);
  if (o.partitioned && !m.partition_key) core::throw_partition_key_required(queue.name);
  if (m.partition_key) core::check_name("partition_key", true, *m.partition_key, core::max_partition_key_bytes);

  const std::int64_t msg_id = pg::next_value(pg::CachedTable::message_ids);
  if (m.event_id) {
    const std::string digest = core::sha256_hex(m.payload);  // (only a deduplicated message needs it)
    // The event row is taken first: a concurrent producer of the same event_id waits for this
    // transaction here and then finds the first message (before any capacity is spent).
    const bool first = spi.run(claim_event, {queue.t, queue.q, pg::uuid_value(*m.event_id), pg::int8_value(msg_id),
                                             pg::text_value(digest), pg::timestamptz_value(now + o.dedup_window_usecs),
                                             pg::timestamptz_value(now)}) > 0;
    if (!first) {
      std::int64_t existing = 0;
      std::string existing_digest;
      spi.run(first_event, {queue.t, queue.q, pg::uuid_value(*m.event_id)}, [&](const pg::Row& r) {
        existing = *r.int8(1);
        existing_digest = *r.text(2);
      });
      if (existing_digest != digest) core::throw_event_id_mismatch(existing);
      return existing;
    }
  }
  const int slot = batch ? batch->admit(priority, bytes) : admit(spi, queue, priority, bytes);
  // (A key of a max_in_flight_per_key queue is joined once per call, for all its new messages.)
  const bool is_head = !o.partitioned || join_key(spi, queue, m.partition_key) > 0;
  rows.push_back({&m, msg_id, priority, is_head, bytes, slot, now + delay});
  // Any role may LISTEN, so the payload names the queue without showing tenant or queue names:
  // the first 32 hex digits of SHA-256 of "<tenant>/<queue>" (listeners compute the same).
  if (o.notify) pg::notify("forgeyard_queue", core::sha256_hex(queue.tenant + "/" + queue.name).substr(0, 32));
  return msg_id;
}

// In a queue with max_in_flight_per_key, the new messages of a call (one fairness key) join the
// key's row at once; the first of them up to the limit are heads, the rest wait.
void join_fairness_key(pg::Spi& spi, const Queue& queue, const Flow& flow, std::vector<NewRow>& rows) {
  if (queue.options.max_in_flight_per_key <= 0 || !flow.fairness_key) return;
  const std::int64_t heads = join_key(spi, queue, flow.fairness_key, static_cast<std::int64_t>(rows.size()));
  for (std::size_t i = static_cast<std::size_t>(heads); i < rows.size(); ++i) rows[i].is_head = false;
}

// The heads a call makes claimable at once (no delay) listed in their lane (queue_lanes.cpp); not
// those bound to a resource, whose limits may keep them ready while others go past (a listing
// left open stops its lane's cursor).
void list_rows(pg::Spi& spi, const Queue& queue, int priority, std::int64_t delay, const Flow& flow,
               std::vector<NewRow>& rows) {
  if (queue.lanes <= 0 || queue.options.fairness || delay > 0 || flow.resource) return;
  std::vector<std::int64_t> heads;
  for (const NewRow& r : rows)
    if (r.is_head) heads.push_back(r.msg_id);
  const std::map<std::int64_t, std::int64_t> positions = list(spi, queue, priority, heads);
  for (NewRow& r : rows)
    if (auto it = positions.find(r.msg_id); it != positions.end()) r.ready_pos = it->second;
}

// In a fair queue, the passes of a call's new messages (one key, one class).
void assign_passes(pg::Spi& spi, const Queue& queue, const Flow& flow, int priority, std::vector<NewRow>& rows) {
  const std::vector<std::int64_t> passes =
      fair_passes(spi, queue, priority, flow.fairness_key, static_cast<std::int64_t>(rows.size()));
  for (std::size_t i = 0; i < passes.size(); ++i) rows[i].pass = passes[i];
}

Flow flow_args(FunctionCallInfo fcinfo) {
  auto key = [&](int n, const char* argument, std::size_t max) -> std::optional<std::string> {
    if (PG_NARGS() <= n || pg::arg_is_null(fcinfo, n)) return std::nullopt;
    return pg::name_arg(fcinfo, n, argument, max);
  };
  return {key(7, "fairness_key", core::max_partition_key_bytes), key(8, "resource", core::max_resource_bytes)};
}

// A delay may be zero (the default); NULL is 22004 like every other required argument.
std::int64_t delay_arg(FunctionCallInfo fcinfo, int n) {
  const std::optional<core::Duration> d = pg::optional_interval_arg(fcinfo, n);
  if (!d) throw core::Error(core::sqlstate::null_value, "delay must not be NULL");
  if (d->months == 0 && d->days == 0 && d->usecs == 0) return 0;
  return core::check_duration("delay", *d, core::max_queue_duration_usecs);
}

}  // namespace
}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

// enqueue(tenant, queue, payload, event_id, partition_key, priority, delay, fairness_key, resource) -> msg_id
FY_FUNCTION(fy_enqueue) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo, true);
  Message m;
  m.payload = *pg::bytea_arg(fcinfo, 2, "payload", std::size_t{1} << 30);
  m.event_id = pg::optional_uuid_arg(fcinfo, 3);
  m.partition_key =
      pg::arg_is_null(fcinfo, 4)
          ? std::nullopt
          : std::optional<std::string>(*pg::text_arg(fcinfo, 4, "partition_key", core::max_partition_key_bytes, false));
  const int priority = core::priority_from_name("priority", pg::name_arg(fcinfo, 5, "priority", 64));
  const std::int64_t delay = delay_arg(fcinfo, 6);
  const Flow flow = flow_args(fcinfo);
  const TimestampTz now = pg::now();
  std::vector<NewRow> rows;
  const std::int64_t msg_id = enqueue_one(spi, queue, m, priority, delay, now, rows);
  admit_rate(spi, queue, static_cast<std::int64_t>(rows.size()), now);
  join_fairness_key(spi, queue, flow, rows);
  assign_passes(spi, queue, flow, priority, rows);
  list_rows(spi, queue, priority, delay, flow, rows);
  insert_messages(queue, rows, now, flow);
  spi.finish();
  return Int64GetDatum(msg_id);
}

// enqueue_batch(tenant, queue, payloads, event_ids, partition_keys, priority, delay, fairness_key, resource)
// -> msg_ids, in order
FY_FUNCTION(fy_enqueue_batch) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo, true);
  const auto payloads = pg::bytea_array_arg(fcinfo, 2);
  const auto event_ids = pg::uuid_array_arg(fcinfo, 3);
  const auto keys = pg::text_array_arg(fcinfo, 4);
  if (!payloads) throw core::Error(core::sqlstate::null_value, "payloads must not be NULL");
  if ((event_ids && event_ids->size() != payloads->size()) || (keys && keys->size() != payloads->size()))
    throw core::Error(core::sqlstate::invalid_parameter, "event_ids and partition_keys must match payloads in length");
  const int priority = core::priority_from_name("priority", pg::name_arg(fcinfo, 5, "priority", 64));
  const std::int64_t delay = delay_arg(fcinfo, 6);
  const Flow flow = flow_args(fcinfo);
  const TimestampTz now = pg::now();
  std::vector<Message> messages;
  messages.reserve(payloads->size());
  for (std::size_t i = 0; i < payloads->size(); ++i) {
    if (!(*payloads)[i]) throw core::Error(core::sqlstate::null_value, "payloads must not contain NULL");
    messages.push_back({*(*payloads)[i], event_ids ? (*event_ids)[i] : std::nullopt, keys ? (*keys)[i] : std::nullopt});
  }
  std::vector<std::int64_t> ids;
  ids.reserve(messages.size());
  std::vector<NewRow> rows;
  rows.reserve(messages.size());
  BatchAdmission admission(spi, queue);
  for (const Message& m : messages) ids.push_back(enqueue_one(spi, queue, m, priority, delay, now, rows, &admission));
  admission.flush();
  admit_rate(spi, queue, static_cast<std::int64_t>(rows.size()), now);
  join_fairness_key(spi, queue, flow, rows);
  assign_passes(spi, queue, flow, priority, rows);
  list_rows(spi, queue, priority, delay, flow, rows);
  insert_messages(queue, rows, now, flow);
  spi.finish();
  pg::TableResult out(fcinfo);
  for (std::int64_t id : ids) out.add_row({pg::int8_value(id)});
  return (Datum)0;
}
