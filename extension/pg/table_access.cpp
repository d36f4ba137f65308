#include "pg/table_access.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "commands/async.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "tcop/utility.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include <array>
#include <map>

namespace fy::pg {

namespace {

// What is resolved by name and kept until a relcache invalidation of any of it.
struct Named {
  const char* name;
  Oid oid = InvalidOid;
};
std::array<Named, 25> tables{{{"messages"},
                              {"queue_releases"},
                              {"queue_release_deltas"},
                              {"queue_slots"},
                              {"queues"},
                              {"leases"},
                              {"wf_runs"},
                              {"wf_journal"},
                              {"wf_cursors"},
                              {"flow_resource_state"},
                              {"flow_outcome_deltas"},
                              {"queue_lanes"},
                              {"queue_admit_deltas"},
                              {"queue_lane_entries_0"},
                              {"queue_lane_entries_1"},
                              {"queue_lane_entries_2"},
                              {"queue_lane_entries_3"},
                              {"queue_release_deltas_0"},
                              {"queue_release_deltas_1"},
                              {"queue_release_deltas_2"},
                              {"queue_release_deltas_3"},
                              {"queue_admit_deltas_0"},
                              {"queue_admit_deltas_1"},
                              {"queue_admit_deltas_2"},
                              {"queue_admit_deltas_3"}}};
std::array<Named, 26> indexes{{{"messages_pkey"},
                               {"messages_claim"},
                               {"messages_fair"},
                               {"queue_releases_pkey"},
                               {"queue_release_deltas_slot"},
                               {"queue_slots_pkey"},
                               {"leases_pkey"},
                               {"wf_runs_pkey"},
                               {"wf_journal_pkey"},
                               {"wf_cursors_pkey"},
                               {"flow_resource_state_pkey"},
                               {"flow_outcome_deltas_part"},
                               {"queue_lanes_pkey"},
                               {"queue_admit_deltas_pkey"},
                               {"queue_lane_entries_0_pkey"},
                               {"queue_lane_entries_1_pkey"},
                               {"queue_lane_entries_2_pkey"},
                               {"queue_lane_entries_3_pkey"},
                               {"queue_release_deltas_0_slot"},
                               {"queue_release_deltas_1_slot"},
                               {"queue_release_deltas_2_slot"},
                               {"queue_release_deltas_3_slot"},
                               {"queue_admit_deltas_0_slot"},
                               {"queue_admit_deltas_1_slot"},
                               {"queue_admit_deltas_2_slot"},
                               {"queue_admit_deltas_3_slot"}}};
// Per table: column name -> attribute number.
std::array<std::map<std::string, int, std::less<>>, tables.size()> columns;
// Per index: (column, strategy) -> comparison function, and the column's collation.
constexpr int max_index_columns = 8;
constexpr int strategies = BTMaxStrategyNumber + 1;
struct IndexInfoCache {
  RegProcedure procs[max_index_columns][strategies] = {};
  Oid collations[max_index_columns] = {};
  bool known = false;
};
std::array<IndexInfoCache, indexes.size()> index_cache;
bool callback_registered = false;

// Per table: the CHECK constraints' and partial-index predicates' expression states, prepared once
// in a memory context of their own rather than for every call (the executor parses and plans
// them for each statement it starts). An invalidation marks them stale; they are dropped only once
// no Table of theirs is open, because one can arrive in the middle of a call (while a lock is
// taken) whose writes still use them. At the end of each transaction no Table is open.
struct KeptExprs {
  MemoryContext context = nullptr;
  ExprState** checks = nullptr;
  int nchecks = -1;
  std::map<Oid, ExprState*> predicates;  // by index OID
  ExprState* partition_check = nullptr;  // a segment's partition constraint (0.14.0)
  bool partition_known = false;
  bool stale = false;
  int users = 0;
};
std::array<KeptExprs, tables.size()> kept;

// How many times everything was forgotten (a filling that saw it change keeps nothing).
std::uint64_t forgotten = 0;

void forget_all() {
  ++forgotten;
  for (Named& t : tables) t.oid = InvalidOid;
  for (Named& i : indexes) i.oid = InvalidOid;
  for (auto& c : columns) c.clear();
  for (IndexInfoCache& c : index_cache) c = IndexInfoCache{};
  for (KeptExprs& k : kept) k.stale = true;
}

void transaction_callback(XactEvent event, void*) {
  if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
      event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
    for (KeptExprs& k : kept) k.users = 0;
}

void relation_callback(Datum, Oid relid) {
  if (relid == InvalidOid) {
    forget_all();
    return;
  }
  for (const Named& n : tables)
    if (n.oid == relid) return forget_all();
  for (const Named& n : indexes)
    if (n.oid == relid) return forget_all();
}

Oid resolve(Named& n) {
  if (!callback_registered) {
    guard([]() noexcept {
      CacheRegisterRelcacheCallback(relation_callback, (Datum)0);
      RegisterXactCallback(transaction_callback, nullptr);
    });
    callback_registered = true;
  }
  if (n.oid == InvalidOid) {
    const char* name = n.name;
    n.oid = guard([&]() noexcept {
      const Oid schema = get_namespace_oid("forgeyard", true);
      return schema == InvalidOid ? InvalidOid : get_relname_relid(name, schema);
    });
    if (n.oid == InvalidOid)
      throw core::Error(core::sqlstate::internal_error, std::string("relation forgeyard.") + n.name + " is missing");
  }
  return n.oid;
}

Relation rel_of(void* p) {
  return static_cast<Relation>(p);
}
TupleTableSlot* slot_of(void* p) {
  return static_cast<TupleTableSlot*>(p);
}

StrategyNumber strategy_of(Compare c) {
  switch (c) {
    case Compare::eq:
      return BTEqualStrategyNumber;
    case Compare::le:
      return BTLessEqualStrategyNumber;
    case Compare::lt:
      return BTLessStrategyNumber;
    case Compare::ge:
      return BTGreaterEqualStrategyNumber;
    case Compare::gt:
      return BTGreaterStrategyNumber;
  }
  return BTEqualStrategyNumber;
}

// Fills `out` with the scan keys, their functions and collations from the index's operator
// families (cached per index).
void make_keys(OwnIndex which, Relation index, std::span<const Key> keys, ScanKeyData* out) {
  IndexInfoCache& kept_info = index_cache[static_cast<int>(which)];
  IndexInfoCache filled;
  const IndexInfoCache* info = &kept_info;
  if (!kept_info.known) {
    // Filled aside from the open index: the catalog lookups can take in an invalidation, whose
    // callback clears the cache (forget_all) halfway through the filling, and which may be of
    // this very index (dropped and made again with other operator classes). Kept only if none
    // came in; this call uses what it read from the index it holds open either way.
    const std::uint64_t before = forgotten;
    const int n = std::min<int>(IndexRelationGetNumberOfKeyAttributes(index), max_index_columns);
    guard([&]() noexcept {
      for (int c = 0; c < n; ++c) {
        filled.collations[c] = index->rd_indcollation[c];
        for (int s = 1; s < strategies; ++s) {
          const Oid op = get_opfamily_member(index->rd_opfamily[c], index->rd_opcintype[c], index->rd_opcintype[c],
                                             static_cast<int16>(s));
          filled.procs[c][s] = op == InvalidOid ? InvalidOid : get_opcode(op);
        }
      }
    });
    filled.known = true;
    if (forgotten == before) kept_info = filled;
    info = &filled;
  }
  int i = 0;
  for (const Key& k : keys) {
    const StrategyNumber s = strategy_of(k.compare);
    if (k.column < 1 || k.column > max_index_columns || info->procs[k.column - 1][s] == InvalidOid)
      throw core::Error(core::sqlstate::internal_error, "no comparison for a scan key");
    if (k.value.is_null) throw core::Error(core::sqlstate::internal_error, "a scan key is NULL");
    ScanKeyData* key = &out[i++];
    guard([&]() noexcept {
      ScanKeyEntryInitialize(key, 0, static_cast<AttrNumber>(k.column), s, InvalidOid, info->collations[k.column - 1],
                             info->procs[k.column - 1][s], k.value.datum);
    });
  }
}

// Every Table locks or writes rows: a read-only transaction (or a hot standby) refuses it with
// 25006, and parallel mode with its own error, as the executor refuses the statement it replaces
// when it starts, rows or no rows.
void refuse_if_read_only(const char* table) {
  if (!XactReadOnly && !IsInParallelMode()) return;
  const std::string command = std::string("a write to forgeyard.") + table;
  const char* c = command.c_str();
  guard([&]() noexcept {
    PreventCommandIfReadOnly(c);
    PreventCommandIfParallelMode(c);
  });
}

}  // namespace

std::uint64_t relations_generation() {
  return forgotten;
}

// ---- Access ----------------------------------------------------------------------------------

Access::Access() {
  guard([]() noexcept {
    CommandCounterIncrement();
    PushActiveSnapshot(GetTransactionSnapshot());
    UpdateActiveSnapshotCommandId();
  });
  open_ = true;
}

void Access::next_command() {
  guard([]() noexcept {
    CommandCounterIncrement();
    UpdateActiveSnapshotCommandId();
  });
}

void Access::finish() {
  if (!open_) return;
  open_ = false;
  guard([]() noexcept { PopActiveSnapshot(); });
}

// ---- Table -----------------------------------------------------------------------------------

Table::Table(Access& access, OwnTable table, Opened opened) : access_(access), which_(table), opened_(opened) {
  Named& named = tables[static_cast<int>(table)];
  refuse_if_read_only(named.name);
  const LOCKMODE mode = opened == Opened::for_writes ? RowExclusiveLock : RowShareLock;
  Oid relid = resolve(named);
  Relation rel = guard([&]() noexcept { return try_table_open(relid, mode); });
  if (rel == nullptr) {  // dropped and made again since it was resolved: resolve once more
    forget_all();
    relid = resolve(named);
    rel = guard([&]() noexcept { return table_open(relid, mode); });
  }
  // A partitioned table has no storage to read or write here. Ours are partitioned from the start,
  // so the catalog changed under this call after it chose the table (ALTER EXTENSION UPDATE to
  // 0.14.0 made queue_release_deltas a parent of segments while the call waited for its lock):
  // the call is retried, and then opens the segments. (The transaction's abort closes `rel`.)
  if (rel->rd_rel->relkind != RELKIND_RELATION)
    throw core::Error(core::sqlstate::serialization_failure,
                      std::string("forgeyard.") + named.name + " changed under this call (ALTER EXTENSION UPDATE)");
  rel_ = rel;
  slot_ = guard([&]() noexcept { return table_slot_create(rel, nullptr); });
}

bool Table::empty() const {
  return guard([&]() noexcept { return RelationGetNumberOfBlocks(rel_of(rel_)) == 0; });
}

int Table::column(const char* name) const {
  auto& known = columns[static_cast<int>(which_)];
  if (auto it = known.find(name); it != known.end()) return it->second;
  Relation rel = rel_of(rel_);
  const AttrNumber n = guard([&]() noexcept { return get_attnum(RelationGetRelid(rel), name); });
  if (n == InvalidAttrNumber)
    throw core::Error(core::sqlstate::internal_error, std::string("column ") + name + " of forgeyard." +
                                                          tables[static_cast<int>(which_)].name + " is missing");
  known.emplace(name, n);
  return n;
}

Table::Scan::Scan(Table& table, OwnIndex index, std::span<const Key> keys) : table_(table), which_(index) {
  const Oid idxoid = resolve(indexes[static_cast<int>(index)]);
  Relation rel = rel_of(table.rel_);
  Relation idx = guard([&]() noexcept { return index_open(idxoid, AccessShareLock); });
  // As the planner: an index not valid, or built over broken HOT chains too recently for this
  // transaction's snapshots to use (indcheckxmin), is not used.
  const auto usable = [&](Relation i) {
    const bool too_new = i->rd_index->indcheckxmin &&
                         !TransactionIdPrecedes(HeapTupleHeaderGetXmin(i->rd_indextuple->t_data), TransactionXmin);
    return i->rd_index->indisvalid && !too_new && i->rd_index->indrelid == RelationGetRelid(rel);
  };
  // The OID was resolved before index_open took its lock and, with it, the invalidations that came
  // in since: REINDEX CONCURRENTLY may have swapped the name onto the new index and left the old
  // one invalid under this OID. Resolve the name once more.
  if (!usable(idx)) {
    forget_all();
    const Oid again = resolve(indexes[static_cast<int>(index)]);
    if (again != idxoid) {
      guard([&]() noexcept { index_close(idx, AccessShareLock); });
      idx = guard([&]() noexcept { return index_open(again, AccessShareLock); });
    }
  }
  index_ = idx;
  if (!usable(idx))
    throw core::Error(core::sqlstate::internal_error,
                      std::string("index forgeyard.") + indexes[static_cast<int>(index)].name + " is not usable");
  ScanKeyData scan_keys[max_index_columns];
  if (keys.size() > static_cast<std::size_t>(max_index_columns))
    throw core::Error(core::sqlstate::internal_error, "too many scan keys");
  make_keys(index, idx, keys, scan_keys);
  const int n = static_cast<int>(keys.size());
  scan_ = guard([&]() noexcept {
    IndexScanDesc s = index_beginscan(rel, idx, GetActiveSnapshot(), n, 0);
    index_rescan(s, scan_keys, n, nullptr, 0);
    return s;
  });
}

void Table::Scan::restart(std::span<const Key> keys) {
  if (scan_ == nullptr) throw core::Error(core::sqlstate::internal_error, "restart of an ended scan");
  IndexScanDesc s = static_cast<IndexScanDesc>(scan_);
  if (keys.size() != static_cast<std::size_t>(s->numberOfKeys))
    throw core::Error(core::sqlstate::internal_error, "a restarted scan keeps its number of keys");
  ScanKeyData scan_keys[max_index_columns];
  make_keys(which_, rel_of(index_), keys, scan_keys);
  const int n = static_cast<int>(keys.size());
  guard([&]() noexcept { index_rescan(s, scan_keys, n, nullptr, 0); });
}

bool Table::Scan::next() {
  if (scan_ == nullptr) return false;
  IndexScanDesc s = static_cast<IndexScanDesc>(scan_);
  TupleTableSlot* slot = slot_of(table_.slot_);
  return guard([&]() noexcept {
    if (!index_getnext_slot(s, ForwardScanDirection, slot)) return false;
    slot_getallattrs(slot);
    return true;
  });
}

void Table::Scan::end() {
  if (scan_ == nullptr) return;
  IndexScanDesc s = static_cast<IndexScanDesc>(scan_);
  Relation idx = rel_of(index_);
  scan_ = nullptr;
  guard([&]() noexcept {
    index_endscan(s);
    index_close(idx, NoLock);
  });
}

bool Table::find(OwnIndex index, std::initializer_list<Key> keys) {
  const std::span<const Key> k(keys.begin(), keys.size());
  // One scan per table and index, restarted for each lookup (an ack of a batch finds each row).
  if (finder_ && finder_index_ == index) {
    finder_->restart(k);
  } else {
    if (finder_) finder_->end();
    finder_ = std::make_unique<Scan>(*this, index, k);
    finder_index_ = index;
  }
  return finder_->next();  // (the slot keeps its own pin on the row's buffer)
}

Locked Table::lock(LockMode mode, Wait wait) {
  Relation rel = rel_of(rel_);
  TupleTableSlot* slot = slot_of(slot_);
  const LockTupleMode lock_mode = mode == LockMode::update ? LockTupleExclusive : LockTupleNoKeyExclusive;
  const LockWaitPolicy policy = wait == Wait::skip ? LockWaitSkip : LockWaitBlock;
  TM_FailureData failure{};
  // READ COMMITTED follows the update chain to the newest version (the caller re-checks it);
  // above it, the transaction's snapshot must not be overtaken (40001 below).
  const bool xact_snapshot = IsolationUsesXactSnapshot();
  // As nodeLockRows.c: a version whose update is still in progress is locked too (a KEY SHARE
  // lock must hold against the newest version, or queue_drop would not wait for it).
  const int flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS | (xact_snapshot ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION);
  const TM_Result result = guard([&]() noexcept {
    ItemPointerData tid = slot->tts_tid;
    const TM_Result r = table_tuple_lock(rel, &tid, GetActiveSnapshot(), slot, GetCurrentCommandId(true), lock_mode,
                                         policy, static_cast<uint8>(flags), &failure);
    if (r == TM_Ok) slot_getallattrs(slot);
    return r;
  });
  switch (result) {
    case TM_Ok:
      return failure.traversed ? Locked::newer_version : Locked::as_read;
    case TM_WouldBlock:    // another transaction holds it (SKIP LOCKED)
    case TM_SelfModified:  // changed by this very command: as nodeLockRows, not returned
      return Locked::skipped;
    case TM_Updated:
    case TM_Deleted:
      if (xact_snapshot)  // PostgreSQL's own error, as nodeLockRows.c raises it
        guard([]() noexcept {
          ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                          errmsg("could not serialize access due to concurrent update")));
        });
      if (result == TM_Deleted) return Locked::skipped;
      throw core::Error(core::sqlstate::internal_error, "unexpected result of a row lock: updated");
    case TM_Invisible:
    case TM_BeingModified:
      break;
  }
  throw core::Error(core::sqlstate::internal_error, "unexpected result of a row lock");
}

bool Table::is_null(int column) const {
  return slot_of(slot_)->tts_isnull[column - 1];
}
std::int64_t Table::int8(int column) const {
  return DatumGetInt64(slot_of(slot_)->tts_values[column - 1]);
}
std::int32_t Table::int4(int column) const {
  return DatumGetInt32(slot_of(slot_)->tts_values[column - 1]);
}
std::int16_t Table::int2(int column) const {
  return DatumGetInt16(slot_of(slot_)->tts_values[column - 1]);
}
bool Table::boolean(int column) const {
  return DatumGetBool(slot_of(slot_)->tts_values[column - 1]);
}
TimestampTz Table::timestamptz(int column) const {
  return DatumGetTimestampTz(slot_of(slot_)->tts_values[column - 1]);
}
Value Table::value(int column) const {
  TupleTableSlot* slot = slot_of(slot_);
  return {slot->tts_values[column - 1], slot->tts_isnull[column - 1]};
}

namespace {
// A text or bytea datum of the slot, detoasted if it must be (the copy lives in the current context).
varlena* varlena_of(Datum d) {
  return guard([&]() noexcept { return pg_detoast_datum_packed(reinterpret_cast<varlena*>(DatumGetPointer(d))); });
}
}  // namespace

std::optional<std::string> Table::text(int column) const {
  if (is_null(column)) return std::nullopt;
  varlena* v = varlena_of(slot_of(slot_)->tts_values[column - 1]);
  return std::string(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
}
std::optional<std::string> Table::bytea(int column) const {
  return text(column);  // the same bytes
}
std::optional<std::string> Table::uuid(int column) const {
  if (is_null(column)) return std::nullopt;
  const pg_uuid_t* u = DatumGetUUIDP(slot_of(slot_)->tts_values[column - 1]);
  return std::string(reinterpret_cast<const char*>(u->data), UUID_LEN);
}
bool Table::text_equals(int column, std::string_view s) const {
  if (is_null(column)) return false;
  varlena* v = varlena_of(slot_of(slot_)->tts_values[column - 1]);
  return VARSIZE_ANY_EXHDR(v) == s.size() && memcmp(VARDATA_ANY(v), s.data(), s.size()) == 0;
}

void Table::writable() {
  if (estate_ != nullptr) return;
  if (opened_ != Opened::for_writes)
    throw core::Error(core::sqlstate::internal_error,
                      std::string("forgeyard.") + tables[static_cast<int>(which_)].name + " was opened for row locks");
  Relation rel = rel_of(rel_);
  bool triggers = false;
  guard([&]() noexcept {
    EState* estate = CreateExecutorState();
    // The executor's own structures in the executor state's memory, freed with it (a call that
    // opens a Table per row, as enqueue_batch does, would otherwise hold them all to its end).
    const MemoryContext caller = MemoryContextSwitchTo(estate->es_query_cxt);
    RangeTblEntry* rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = RelationGetRelid(rel);
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = RowExclusiveLock;
    ExecInitRangeTable(estate, list_make1(rte));
    ResultRelInfo* rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rri, rel, 1, nullptr, 0);
    // Where AFTER triggers look for it (not found, they would open the table again and leak it).
    estate->es_opened_result_relations = lappend(estate->es_opened_result_relations, rri);
    estate->es_output_cid = GetCurrentCommandId(true);
    estate->es_snapshot = GetActiveSnapshot();
    ExecOpenIndices(rri, false);
    EPQState* epq = static_cast<EPQState*>(palloc0(sizeof(EPQState)));
    EvalPlanQualInit(epq, estate, nullptr, NIL, -1);
    MemoryContextSwitchTo(caller);
    // Row triggers (a DBA's, if any) fire as for a statement.
    if (rel->trigdesc != nullptr) {
      AfterTriggerBeginQuery();
      triggers = true;
    }
    estate_ = estate;
    result_rel_ = rri;
    epq_ = epq;
    new_slot_ = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
  });
  trigger_query_ = triggers;
  use_kept_expressions();
}

void Table::use_kept_expressions() {
  KeptExprs& k = kept[static_cast<int>(which_)];
  if (k.stale && k.users == 0) {
    MemoryContext old = k.context;
    k = KeptExprs{};
    if (old != nullptr) guard([&]() noexcept { MemoryContextDelete(old); });
  }
  if (k.stale) return;  // another Table of this table is open in this call: prepared per call
  Relation rel = rel_of(rel_);
  ResultRelInfo* rri = static_cast<ResultRelInfo*>(result_rel_);
  if (k.context == nullptr)
    k.context = guard([]() noexcept {
      return AllocSetContextCreate(CacheMemoryContext, "forgeyard kept expressions", ALLOCSET_SMALL_SIZES);
    });
  MemoryContext context = k.context;
  TupleConstr* constr = rel->rd_att->constr;
  const int nchecks = constr != nullptr ? constr->num_check : 0;
  if (k.nchecks < 0) {
    k.checks = guard([&]() noexcept {
      if (nchecks == 0) return static_cast<ExprState**>(nullptr);
      MemoryContext caller = MemoryContextSwitchTo(context);
      ExprState** checks = static_cast<ExprState**>(palloc0(sizeof(ExprState*) * nchecks));
      for (int i = 0; i < nchecks; ++i)
        checks[i] = ExecInitExpr(expression_planner(static_cast<Expr*>(stringToNode(constr->check[i].ccbin))), nullptr);
      MemoryContextSwitchTo(caller);
      return checks;
    });
    k.nchecks = nchecks;
  }
  if (k.nchecks != nchecks) return;  // (not the relation they were made for: left to the executor)
  // A partition's constraint, which ExecSimpleRelationInsert/Update check on every write of a
  // segment (the executor would plan it once per call).
  if (!k.partition_known) {
    k.partition_check = guard([&]() noexcept {
      if (!rel->rd_rel->relispartition) return static_cast<ExprState*>(nullptr);
      MemoryContext caller = MemoryContextSwitchTo(context);
      List* qual = static_cast<List*>(copyObjectImpl(RelationGetPartitionQual(rel)));
      ExprState* st =
          ExecInitCheck(reinterpret_cast<List*>(expression_planner(reinterpret_cast<Expr*>(qual))), nullptr);
      MemoryContextSwitchTo(caller);
      return st;
    });
    k.partition_known = true;
  }
  ++k.users;
  using_kept_ = true;
  rri->ri_ConstraintExprs = k.checks;
  if (k.partition_check != nullptr) rri->ri_PartitionCheckExpr = k.partition_check;
  for (int i = 0; i < rri->ri_NumIndices; ++i) {
    IndexInfo* info = rri->ri_IndexRelationInfo[i];
    if (info == nullptr || info->ii_Predicate == NIL) continue;
    const Oid index = RelationGetRelid(rri->ri_IndexRelationDescs[i]);
    auto it = k.predicates.find(index);
    if (it == k.predicates.end()) {
      ExprState* predicate = guard([&]() noexcept {
        MemoryContext caller = MemoryContextSwitchTo(context);
        ExprState* st = ExecInitQual(
            reinterpret_cast<List*>(expression_planner(static_cast<Expr*>(copyObjectImpl(info->ii_Predicate)))),
            nullptr);
        MemoryContextSwitchTo(caller);
        return st;
      });
      it = k.predicates.emplace(index, predicate).first;
    }
    info->ii_PredicateState = it->second;
  }
}

void Table::update(std::initializer_list<std::pair<int, Value>> changes) {
  writable();
  TupleTableSlot* old_slot = slot_of(slot_);
  TupleTableSlot* slot = slot_of(new_slot_);
  EState* estate = static_cast<EState*>(estate_);
  ResultRelInfo* rri = static_cast<ResultRelInfo*>(result_rel_);
  EPQState* epq = static_cast<EPQState*>(epq_);
  guard([&]() noexcept {
    ExecClearTuple(slot);
    const int natts = slot->tts_tupleDescriptor->natts;
    slot_getallattrs(old_slot);
    memcpy(slot->tts_values, old_slot->tts_values, sizeof(Datum) * natts);
    memcpy(slot->tts_isnull, old_slot->tts_isnull, sizeof(bool) * natts);
    for (const auto& [column, v] : changes) {
      slot->tts_values[column - 1] = v.datum;
      slot->tts_isnull[column - 1] = v.is_null;
    }
    ExecStoreVirtualTuple(slot);
    // The columns this update sets, as a statement's range table entry names them: for the
    // triggers of UPDATE OF those columns, and for the indexes' "unchanged by this update" hint
    // (decided once per statement and index: again for each update here).
    RangeTblEntry* rte = exec_rt_fetch(rri->ri_RangeTableIndex, estate);
    const MemoryContext caller = MemoryContextSwitchTo(estate->es_query_cxt);
    bms_free(rte->updatedCols);
    rte->updatedCols = nullptr;
    for (const auto& change : changes)
      rte->updatedCols = bms_add_member(rte->updatedCols, change.first - FirstLowInvalidHeapAttributeNumber);
    MemoryContextSwitchTo(caller);
    for (int i = 0; i < rri->ri_NumIndices; ++i)
      if (rri->ri_IndexRelationInfo[i] != nullptr) rri->ri_IndexRelationInfo[i]->ii_CheckedUnchanged = false;
    ExecSimpleRelationUpdate(rri, estate, epq, old_slot, slot);
  });
}

void Table::remove() {
  writable();
  TupleTableSlot* old_slot = slot_of(slot_);
  EState* estate = static_cast<EState*>(estate_);
  ResultRelInfo* rri = static_cast<ResultRelInfo*>(result_rel_);
  EPQState* epq = static_cast<EPQState*>(epq_);
  guard([&]() noexcept { ExecSimpleRelationDelete(rri, estate, epq, old_slot); });
}

void Table::insert(std::span<const std::pair<int, Value>> values) {
  writable();
  TupleTableSlot* slot = slot_of(new_slot_);
  EState* estate = static_cast<EState*>(estate_);
  ResultRelInfo* rri = static_cast<ResultRelInfo*>(result_rel_);
  guard([&]() noexcept {
    ExecClearTuple(slot);
    const int natts = slot->tts_tupleDescriptor->natts;
    for (int i = 0; i < natts; ++i) {
      slot->tts_values[i] = (Datum)0;
      slot->tts_isnull[i] = true;
    }
    for (const auto& [column, v] : values) {
      slot->tts_values[column - 1] = v.datum;
      slot->tts_isnull[column - 1] = v.is_null;
    }
    ExecStoreVirtualTuple(slot);
    ExecSimpleRelationInsert(rri, estate, slot);
  });
}

void Table::finish() {
  if (rel_ == nullptr) return;
  if (finder_) {
    finder_->end();
    finder_.reset();
  }
  Relation rel = rel_of(rel_);
  TupleTableSlot* slot = slot_of(slot_);
  TupleTableSlot* new_slot = slot_of(new_slot_);
  EState* estate = static_cast<EState*>(estate_);
  ResultRelInfo* rri = static_cast<ResultRelInfo*>(result_rel_);
  EPQState* epq = static_cast<EPQState*>(epq_);
  const bool triggers = trigger_query_;
  rel_ = nullptr;
  if (using_kept_) {
    using_kept_ = false;
    KeptExprs& k = kept[static_cast<int>(which_)];
    if (k.users > 0) --k.users;
  }
  guard([&]() noexcept {
    if (estate != nullptr) {
      if (triggers) AfterTriggerEndQuery(estate);
      EvalPlanQualEnd(epq);
      ExecCloseIndices(rri);
      ExecResetTupleTable(estate->es_tupleTable, false);
      FreeExecutorState(estate);
    }
    if (new_slot != nullptr) ExecDropSingleTupleTableSlot(new_slot);
    ExecDropSingleTupleTableSlot(slot);
    table_close(rel, NoLock);
  });
}

void lock_queue(const std::string& tenant, const std::string& queue, QueueLock mode) {
  const Oid queues = resolve(tables[static_cast<int>(OwnTable::queues)]);
  std::string key = tenant;
  key.push_back('\0');
  key += queue;
  guard([&]() noexcept {
    const uint64 h =
        hash_bytes_extended(reinterpret_cast<const unsigned char*>(key.data()), static_cast<int>(key.size()), 0);
    // LockDatabaseObject applies the invalidations that came in when it had to take the lock.
    LockDatabaseObject(queues, static_cast<Oid>(h >> 32), static_cast<uint16>(h & 0xffffU),
                       mode == QueueLock::produce ? AccessShareLock : AccessExclusiveLock);
  });
}

void notify(const std::string& channel, const std::string& payload) {
  const char* c = channel.c_str();
  const char* p = payload.c_str();
  guard([&]() noexcept {
    DirectFunctionCall2(pg_notify, PointerGetDatum(cstring_to_text(c)), PointerGetDatum(cstring_to_text(p)));
  });
}

}  // namespace fy::pg
