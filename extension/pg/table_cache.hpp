// Per-backend caches of rows that rarely change (queue options, tenant bindings), invalidated
// through PostgreSQL's own relcache invalidation: a statement trigger on the watched table
// (forgeyard.invalidate_caches) queues a relcache invalidation of that table, which this backend
// applies at the end of the changing command (so a transaction sees its own change at once, and
// forgets it again if it rolls back) and every other backend applies when it next accepts
// invalidation messages (each call of a cached path accepts them first).
#pragma once

#include <cstdint>

#include "pg/guard.hpp"
#include "pg/postgres.hpp"

namespace fy::pg {

// The forgeyard tables whose rows are cached.
enum class CachedTable {
  queues,
  tenant_bindings,
  message_ids,
  claim_tokens,
  flow_resources,
  queue_release_deltas,
  flow_outcome_deltas,
  queue_admit_deltas,
  queue_lane_segment,
  queue_release_deltas_0
};

// A number that changes whenever the table's cache must be dropped. Read it before running the
// query whose result is cached, and keep the result only while it stays the same.
std::uint64_t cache_generation(CachedTable table);
// Whether the table has the column: false in a database whose extension is still at a version
// before the column (the new library runs the old SQL API until ALTER EXTENSION UPDATE).
bool has_column(CachedTable table, const char* column);
// Whether the table exists: false in a database whose extension is still at a version before it.
bool has_table(CachedTable table);

// nextval of a forgeyard sequence (CachedTable::message_ids, claim_tokens), without a statement: its oid is
// kept while no invalidation of the relation came in. Checks the privilege as nextval does.
std::int64_t next_value(CachedTable sequence);
// The last value of such a sequence (0 before the first), read without a snapshot.
std::int64_t last_value(CachedTable sequence);

// A sequence of schema forgeyard made after the extension (a ready lane's, queue_lanes.cpp), by
// name: InvalidOid if there is none. Its last value (0 before the first), a new value, and a new
// last value (setval: not transactional), each checking the privilege as the SQL functions do.
Oid forgeyard_sequence(const char* name);
std::int64_t sequence_last_value(Oid sequence);
std::int64_t sequence_next_value(Oid sequence);
void sequence_set_value(Oid sequence, std::int64_t value);

// The body of forgeyard.invalidate_caches(), a statement trigger on a cached table: queues a
// relcache invalidation of the trigger's table (applied here at the end of the command, in
// other backends after commit). Internal error when not called as a trigger.
void invalidate_trigger_table(FunctionCallInfo fcinfo);

// Applies the invalidation messages other backends committed (cheap when there are none).
void accept_invalidations();

// Whether the transaction reads under one snapshot (REPEATABLE READ, SERIALIZABLE): what it reads
// may predate a change that committed since, so it must not go into a cache that outlives it.
bool uses_transaction_snapshot();

// This backend's number of its current transaction (its local transaction id, never 0): what a
// backend keeps for one transaction is kept with it and dropped when it changes.
std::uint32_t local_transaction();

}  // namespace fy::pg
