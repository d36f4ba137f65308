#include "pg/table_cache.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "storage/proc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace fy::pg {

namespace {

struct Watched {
  const char* name;
  Oid relid = InvalidOid;  // resolved on first use, forgotten when the relation is invalidated
  std::uint64_t generation = 1;
};
Watched watched[] = {{"queues"},
                     {"tenant_bindings"},
                     {"message_ids"},
                     {"claim_tokens"},
                     {"flow_resources"},
                     {"queue_release_deltas"},
                     {"flow_outcome_deltas"},
                     {"queue_admit_deltas"},
                     {"queue_lane_segment"},
                     {"queue_release_deltas_0"}};
bool registered = false;

void relation_callback(Datum, Oid relid) {
  for (Watched& w : watched) {
    if (relid != InvalidOid && relid != w.relid) continue;
    ++w.generation;
    w.relid = InvalidOid;  // the table may have been dropped and made again (DROP EXTENSION)
  }
}

}  // namespace

std::uint64_t cache_generation(CachedTable table) {
  Watched& w = watched[static_cast<int>(table)];
  if (!registered) {
    guard([]() noexcept { CacheRegisterRelcacheCallback(relation_callback, (Datum)0); });
    registered = true;
  }
  if (w.relid == InvalidOid) {
    // Until the relation is known, no invalidation can be matched to it: change the generation
    // so nothing cached before counts.
    ++w.generation;
    w.relid = guard([&]() noexcept {
      const Oid schema = get_namespace_oid("forgeyard", true);
      return schema == InvalidOid ? InvalidOid : get_relname_relid(w.name, schema);
    });
  }
  return w.generation;
}

bool has_column(CachedTable table, const char* column) {
  cache_generation(table);  // resolves the oid
  const Oid relid = watched[static_cast<int>(table)].relid;
  if (relid == InvalidOid) return false;
  return guard([&]() noexcept { return get_attnum(relid, column) != InvalidAttrNumber; });
}

bool has_table(CachedTable table) {
  cache_generation(table);  // resolves the oid
  return watched[static_cast<int>(table)].relid != InvalidOid;
}

std::int64_t last_value(CachedTable sequence) {
  cache_generation(sequence);  // resolves the oid
  const Oid relid = watched[static_cast<int>(sequence)].relid;
  if (relid == InvalidOid)
    throw core::Error(core::sqlstate::internal_error,
                      std::string("sequence forgeyard.") + watched[static_cast<int>(sequence)].name + " is missing");
  return sequence_last_value(relid);
}

std::int64_t next_value(CachedTable sequence) {
  cache_generation(sequence);  // resolves the oid
  const Oid relid = watched[static_cast<int>(sequence)].relid;
  if (relid == InvalidOid)
    throw core::Error(core::sqlstate::internal_error,
                      std::string("sequence forgeyard.") + watched[static_cast<int>(sequence)].name + " is missing");
  return guard([&]() noexcept { return nextval_internal(relid, true); });
}

Oid forgeyard_sequence(const char* name) {
  return guard([&]() noexcept {
    const Oid schema = get_namespace_oid("forgeyard", true);
    return schema == InvalidOid ? InvalidOid : get_relname_relid(name, schema);
  });
}

std::int64_t sequence_last_value(Oid sequence) {
  return guard([&]() noexcept {
    LOCAL_FCINFO(call, 1);
    InitFunctionCallInfoData(*call, nullptr, 1, InvalidOid, nullptr, nullptr);
    call->args[0].value = ObjectIdGetDatum(sequence);
    call->args[0].isnull = false;
    const Datum last = pg_sequence_last_value(call);
    return call->isnull ? std::int64_t{0} : static_cast<std::int64_t>(DatumGetInt64(last));
  });
}

std::int64_t sequence_next_value(Oid sequence) {
  return guard([&]() noexcept { return static_cast<std::int64_t>(nextval_internal(sequence, true)); });
}

void sequence_set_value(Oid sequence, std::int64_t value) {
  guard([&]() noexcept { DirectFunctionCall2(setval_oid, ObjectIdGetDatum(sequence), Int64GetDatum(value)); });
}

void invalidate_trigger_table(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    throw core::Error(core::sqlstate::internal_error, "invalidate_caches must be called as a trigger");
  Relation rel = reinterpret_cast<TriggerData*>(fcinfo->context)->tg_relation;
  guard([&]() noexcept { CacheInvalidateRelcache(rel); });
}

std::uint32_t local_transaction() {
  return MyProc->lxid;
}

bool uses_transaction_snapshot() {
  return IsolationUsesXactSnapshot();
}

void accept_invalidations() {
  guard([]() noexcept { AcceptInvalidationMessages(); });
}

}  // namespace fy::pg
