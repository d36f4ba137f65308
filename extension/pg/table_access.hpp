// Below SPI: the hot paths read and write forgeyard's own tables through PostgreSQL's table and
// index access methods, the way the logical-replication apply worker does (contract §4, "Below
// SPI"; docs/architecture.md, "The table-access layer"). This file and table_access.cpp are the
// only places that do.
//
// - Relations and indexes are known by OID, resolved by name in schema forgeyard, and forgotten
//   on any relcache invalidation of one of them (ALTER TABLE, REINDEX CONCURRENTLY, DROP
//   EXTENSION): the next call resolves them again. Each call opens them with a lock, as a
//   statement would; VACUUM FULL changes nothing we keep.
// - One Access is one statement's worth of work: a new command id and a pushed snapshot (a fresh
//   one per call in READ COMMITTED, the transaction's above it), as SPI gives each statement.
// - Writes go through ExecSimpleRelationInsert/Update/Delete: constraint checks, index
//   maintenance (partial-index predicates too), row triggers if a DBA added any.
// - Row locks are taken as nodeLockRows.c takes them: the newest version is followed and
//   re-checked in READ COMMITTED; a row changed since the snapshot is 40001 above it.
// - Opening a Table (every one locks or writes rows) in a read-only transaction or on a hot
//   standby is 25006, as the executor refuses the statement when it starts.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "pg/guard.hpp"
#include "pg/spi.hpp"

namespace fy::pg {

// forgeyard's tables and indexes that the hot paths use directly.
enum class OwnTable : int {
  messages,
  queue_releases,
  queue_release_deltas,
  queue_slots,
  queues,
  leases,
  wf_runs,
  wf_journal,
  wf_cursors,
  flow_resource_state,
  flow_outcome_deltas,
  queue_lanes,
  queue_admit_deltas,
  queue_lane_entries_0,
  queue_lane_entries_1,
  queue_lane_entries_2,
  queue_lane_entries_3,
  queue_release_deltas_0,
  queue_release_deltas_1,
  queue_release_deltas_2,
  queue_release_deltas_3,
  queue_admit_deltas_0,
  queue_admit_deltas_1,
  queue_admit_deltas_2,
  queue_admit_deltas_3
};
enum class OwnIndex : int {
  messages_pkey,
  messages_claim,
  messages_fair,
  queue_releases_pkey,
  queue_release_deltas_slot,
  queue_slots_pkey,
  leases_pkey,
  wf_runs_pkey,
  wf_journal_pkey,
  wf_cursors_pkey,
  flow_resource_state_pkey,
  flow_outcome_deltas_part,
  queue_lanes_pkey,
  queue_admit_deltas_pkey,
  queue_lane_entries_0_pkey,
  queue_lane_entries_1_pkey,
  queue_lane_entries_2_pkey,
  queue_lane_entries_3_pkey,
  queue_release_deltas_0_slot,
  queue_release_deltas_1_slot,
  queue_release_deltas_2_slot,
  queue_release_deltas_3_slot,
  queue_admit_deltas_0_slot,
  queue_admit_deltas_1_slot,
  queue_admit_deltas_2_slot,
  queue_admit_deltas_3_slot
};

// One statement's worth of direct access: CommandCounterIncrement and a pushed snapshot, popped
// by finish(). On an error path nothing is undone here: the (sub)transaction abort pops the
// snapshot and releases the relations, buffers and memory, as for a failed SPI statement.
class Access {
 public:
  Access();
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;
  ~Access() = default;
  // The next command: what this call wrote so far becomes visible to what it reads next.
  void next_command();
  void finish();

 private:
  bool open_ = false;
};

enum class Compare { eq, le, lt, ge, gt };
// One scan key: the index's column (1-based), how it compares, and the value (of the column's type).
struct Key {
  int column;
  Compare compare;
  Value value;
};

// How a row lock ended (nodeLockRows.c's cases): locked as read; locked, but a newer version was
// followed (re-check it: it may no longer qualify); or not locked (another transaction holds it,
// under SKIP LOCKED; or the row is gone or was changed by this very command).
enum class Locked { as_read, newer_version, skipped };
enum class Wait { block, skip };
enum class LockMode { update, no_key_update };

// How a table is opened: for writes with RowExclusiveLock, as UPDATE and DELETE open it; for
// rows it only reads and locks with RowShareLock, as SELECT ... FOR UPDATE or FOR KEY SHARE do.
enum class Opened { for_writes, for_row_locks };

// One of forgeyard's tables, opened for one call. Rows are read into the table's slot; update()
// and remove() act on the row last read or locked (only when opened for writes).
class Table {
 public:
  Table(Access& access, OwnTable table, Opened opened = Opened::for_writes);
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;
  ~Table() = default;

  // The attribute number of a column (resolved once per relcache generation); internal error if
  // the table has no such column.
  int column(const char* name) const;

  // Whether the table has no pages (truncated, or never written to): no row, committed or not, is
  // in it, since an insert extends the table before its transaction commits.
  bool empty() const;

  // An index range scan in the index's order, under the access's snapshot.
  class Scan {
   public:
    Scan(Table& table, OwnIndex index, std::span<const Key> keys);
    Scan(Table& table, OwnIndex index, std::initializer_list<Key> keys)
        : Scan(table, index, std::span<const Key>(keys.begin(), keys.size())) {}
    Scan(const Scan&) = delete;
    Scan& operator=(const Scan&) = delete;
    ~Scan() = default;
    // Starts again with other keys (the index stays open: cheaper than a new scan).
    void restart(std::span<const Key> keys);
    // Reads the next row into the table's slot; false at the end.
    bool next();
    void end();

   private:
    Table& table_;
    OwnIndex which_;
    void* scan_ = nullptr;   // IndexScanDesc
    void* index_ = nullptr;  // Relation
  };

  // Reads the row with `keys` on a unique index (every column): false if there is none. The
  // number of keys stays the same for each index.
  bool find(OwnIndex index, std::initializer_list<Key> keys);

  // Locks the row in the slot (read by a scan or find).
  Locked lock(LockMode mode, Wait wait);

  // The row in the slot.
  bool is_null(int column) const;
  std::int64_t int8(int column) const;
  std::int32_t int4(int column) const;
  std::int16_t int2(int column) const;
  bool boolean(int column) const;
  TimestampTz timestamptz(int column) const;
  std::optional<std::string> text(int column) const;
  std::optional<std::string> bytea(int column) const;
  std::optional<std::string> uuid(int column) const;  // 16 bytes
  // A value of the row as it is, to compare or to pass on (valid until the slot changes).
  Value value(int column) const;
  // Whether a text column equals s (no copy).
  bool text_equals(int column, std::string_view s) const;

  // Writes: the row in the slot (locked by this transaction) with some columns changed, or
  // deleted; or a new row (columns not named are NULL). Index entries and constraints follow.
  void update(std::initializer_list<std::pair<int, Value>> changes);
  void remove();
  void insert(std::span<const std::pair<int, Value>> values);
  void insert(std::initializer_list<std::pair<int, Value>> values) {
    insert(std::span<const std::pair<int, Value>>(values.begin(), values.size()));
  }

  // Closes indexes and the executor state; the relation stays locked to the end of the
  // transaction, as after a statement.
  void finish();

 private:
  friend class Scan;
  void writable();
  void use_kept_expressions();
  Access& access_;
  OwnTable which_;
  Opened opened_;
  std::unique_ptr<Scan> finder_;  // find()'s scan, kept open for the next lookup
  OwnIndex finder_index_ = OwnIndex::messages_pkey;
  void* rel_ = nullptr;         // Relation
  void* slot_ = nullptr;        // TupleTableSlot: the row read
  void* new_slot_ = nullptr;    // TupleTableSlot: the row written
  void* estate_ = nullptr;      // EState, for writes
  void* result_rel_ = nullptr;  // ResultRelInfo
  void* epq_ = nullptr;         // EPQState
  bool trigger_query_ = false;
  bool using_kept_ = false;
};

// Counts the relcache invalidations that made this backend forget what it resolved by name
// (relation OIDs, attribute numbers): what a caller keeps of them is valid while it is unchanged.
std::uint64_t relations_generation();

// The attribute numbers of one table that a call reads (a struct of ints constructed from the
// open Table), resolved by name once and kept until the next invalidation of forgeyard's relations.
template <class Columns>
Columns columns_of(const Table& table) {
  static std::optional<Columns> kept;
  static std::uint64_t kept_at = 0;
  const std::uint64_t generation = relations_generation();
  if (kept && kept_at == generation) return *kept;
  Columns columns(table);
  // An invalidation taken in while resolving (a catalog read) keeps nothing.
  if (relations_generation() == generation) {
    kept.emplace(columns);
    kept_at = generation;
  }
  return columns;
}

// A queue's lock for its producers: a heavyweight lock on an object of class forgeyard.queues
// (pg_locks: locktype object, classid forgeyard.queues, objid and objsubid 48 bits of a hash of
// the tenant and queue), held to the end of the transaction. Producers take it shared and do not
// wait for each other; queue_drop takes it exclusive, so it waits for open producers and they
// for it. Unlike a row lock on the queue's row it writes nothing (no tuple header, no WAL, no
// MultiXact for two producers). Invalidations that came in are applied after a wait for it, so
// a producer that waited for a drop sees the queue gone.
enum class QueueLock { produce, drop };
void lock_queue(const std::string& tenant, const std::string& queue, QueueLock mode);

// pg_notify(channel, payload) without a statement: queued for this transaction's commit.
void notify(const std::string& channel, const std::string& payload);

}  // namespace fy::pg
