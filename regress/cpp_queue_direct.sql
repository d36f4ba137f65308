-- @edition cpp
-- The C++ edition's own machinery on the queue's hot paths (docs/architecture.md, "The table-access
-- layer"): a steady-state claim, ack, ack_batch, ack_and_claim and enqueue (and lease_acquire,
-- lease_renew and lease_release) run no SQL statement of their own below SPI (counted with
-- pg_stat_statements, nested statements included: scripts/lib/cluster.sh preloads it), and the
-- producer lock is a heavyweight lock of class forgeyard.queues (pg::lock_queue). Moved unchanged
-- from regress/queue_direct.sql, which checks on both editions what the direct path must behave
-- like; tests/pg/pgtap.sh runs this file on the C++ edition only: the PL/pgSQL edition runs
-- statements (its producer lock is a transaction advisory lock, which it can take from SQL).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;

SELECT plan(13);

SET TIME ZONE 'UTC';
\ir lib/err.sql

SELECT ok(current_setting('shared_preload_libraries') ~ 'pg_stat_statements',
          'pg_stat_statements is preloaded (shared_preload_libraries), so nested statements are counted');
SET LOCAL pg_stat_statements.track = 'all';

SELECT forgeyard.queue_create('t1', 'direct', '{"max_messages": 10}') IS NULL AS created \gset
SELECT count(forgeyard.enqueue('t1', 'direct', ('m' || i)::bytea)) AS enqueued FROM generate_series(1, 5) i \gset

-- The first calls of a backend fill its caches (queue options, relations, columns).
SELECT msg_id AS w_id, claim_token AS w_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT forgeyard.ack('t1', 'direct', :w_id, :w_tok) \gset
SELECT forgeyard.enqueue('t1', 'direct', 'm6') \gset

-- Each call alone between a reset and a count of the nested statements of this database.
CREATE TEMP VIEW nested AS
    SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements
     WHERE NOT toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database());
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT msg_id AS c_id, claim_token AS c_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT n AS after_claim FROM nested \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT forgeyard.ack('t1', 'direct', :c_id, :c_tok) IS NULL AS acked \gset
SELECT n AS after_ack FROM nested \gset
SELECT msg_id AS a_id, claim_token AS a_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT msg_id AS b_id, claim_token AS b_tok
  FROM forgeyard.ack_and_claim('t1', 'direct', 'w', ARRAY[:a_id]::bigint[], ARRAY[:a_tok]::bigint[], 1) \gset
SELECT n AS after_ack_and_claim FROM nested \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT forgeyard.ack_batch('t1', 'direct', ARRAY[:b_id]::bigint[], ARRAY[:b_tok]::bigint[]) IS NULL AS acked \gset
SELECT n AS after_ack_batch FROM nested \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT forgeyard.enqueue('t1', 'direct', 'e1') AS e_id \gset
SELECT n AS after_enqueue FROM nested \gset

-- Leases: a take-over of a released grant, a renewal and a release.
SELECT epoch AS l0 FROM forgeyard.lease_acquire('t1', 'direct-res', 'o', '30 seconds') \gset
SELECT forgeyard.lease_release('t1', 'direct-res', :l0) AS l0_released \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT epoch AS l1 FROM forgeyard.lease_acquire('t1', 'direct-res', 'o', '30 seconds') \gset
SELECT n AS after_acquire FROM nested \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT forgeyard.lease_renew('t1', 'direct-res', :l1, '60 seconds') IS NOT NULL AS renewed \gset
SELECT n AS after_renew FROM nested \gset
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT forgeyard.lease_release('t1', 'direct-res', :l1) AS l1_released \gset
SELECT n AS after_release FROM nested \gset

SELECT is(:after_claim::bigint, 0::bigint, 'a steady-state claim runs no nested statement');
SELECT is(:after_ack::bigint, 0::bigint, 'a steady-state ack runs no nested statement');
SELECT is(:after_ack_and_claim::bigint, 0::bigint, 'a steady-state ack_and_claim runs no nested statement');
SELECT is(:after_ack_batch::bigint, 0::bigint, 'a steady-state ack_batch runs no nested statement');
SELECT is(:after_enqueue::bigint, 0::bigint, 'a steady-state enqueue runs no nested statement');
SELECT ok((SELECT bool_or(mode = 'AccessShareLock') AND bool_and(granted) FROM pg_locks
            WHERE locktype = 'object' AND classid = 'forgeyard.queues'::regclass AND pid = pg_backend_pid()),
          'its producer lock is a heavyweight lock of class forgeyard.queues, held to commit (queue_drop waits for it)');
SELECT is(:after_acquire::bigint, 0::bigint, 'a lease_acquire that takes over a released grant runs no nested statement');
SELECT is(:after_renew::bigint, 0::bigint, 'a lease_renew runs no nested statement');
SELECT is(:after_release::bigint, 0::bigint, 'a lease_release runs no nested statement');
-- The counter itself works: a call that does run statements is seen.
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
SELECT count(*) AS listed FROM forgeyard.queue_list('t1') \gset
SELECT cmp_ok((SELECT n FROM nested), '>', 0::bigint, 'a call that runs SQL (queue_list) is counted: the count is not blind');

-- The backend keeps its lanes' sequence oids (queue_lanes.cpp) until forgeyard's relations are
-- invalidated: after DROP EXTENSION the lane numbers start again, so a new queue gets the lane ids
-- the backend knew, with new sequences.
SELECT (SELECT lanes FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'direct') AS old_lanes \gset
DROP EXTENSION forgeyard CASCADE;
CREATE EXTENSION forgeyard;
SELECT forgeyard.queue_create('t1', 'again') IS NULL AS created \gset
SELECT forgeyard.enqueue('t1', 'again', 'after') AS again_id \gset
SELECT is((SELECT lanes FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'again'), :old_lanes::bigint,
          'after DROP and CREATE EXTENSION a new queue gets the lanes number this backend used before');
SELECT is((SELECT msg_id FROM forgeyard.claim('t1', 'again', 'w')), :again_id::bigint,
          'and its claim reads the new lane sequences: the kept oids were forgotten');

SELECT * FROM finish();
ROLLBACK;
