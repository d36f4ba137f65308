-- The queue's hot paths below SPI in the C++ edition (docs/architecture.md, "The table-access
-- layer"): what they do behaves as the statements they replace, and the PL/pgSQL edition's
-- statements behave the same: a savepoint rolled back leaves no trace, a transaction sees its own
-- claims and acks, a stale token is still FY001, the bounds still count every ack, no enqueue
-- locks the queue's row, and REPEATABLE READ and SERIALIZABLE answer as before. That the C++
-- edition's steady-state calls run no SQL statement of their own (pg_stat_statements), and its
-- producer lock's kind, are its own machinery: regress/cpp_queue_direct.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(37);

SET TIME ZONE 'UTC';
\ir lib/err.sql
\ir lib/queue.sql

SELECT forgeyard.queue_create('t1', 'direct', '{"max_messages": 10}') IS NULL AS created \gset
SELECT count(forgeyard.enqueue('t1', 'direct', ('m' || i)::bytea)) AS enqueued FROM generate_series(1, 5) i \gset

-- The first calls of a backend fill its caches (queue options, relations, columns).
SELECT msg_id AS w_id, claim_token AS w_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT forgeyard.ack('t1', 'direct', :w_id, :w_tok) \gset
SELECT forgeyard.enqueue('t1', 'direct', 'm6') \gset

-- Each call once more, in steady state.
SELECT msg_id AS c_id, claim_token AS c_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT forgeyard.ack('t1', 'direct', :c_id, :c_tok) IS NULL AS acked \gset
SELECT msg_id AS a_id, claim_token AS a_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT msg_id AS b_id, claim_token AS b_tok
  FROM forgeyard.ack_and_claim('t1', 'direct', 'w', ARRAY[:a_id]::bigint[], ARRAY[:a_tok]::bigint[], 1) \gset
SELECT forgeyard.ack_batch('t1', 'direct', ARRAY[:b_id]::bigint[], ARRAY[:b_tok]::bigint[]) IS NULL AS acked \gset
SELECT forgeyard.enqueue('t1', 'direct', 'e1') AS e_id \gset

-- Leases: a take-over of a released grant, a renewal and a release.
SELECT epoch AS l0 FROM forgeyard.lease_acquire('t1', 'direct-res', 'o', '30 seconds') \gset
SELECT forgeyard.lease_release('t1', 'direct-res', :l0) AS l0_released \gset
SELECT epoch AS l1 FROM forgeyard.lease_acquire('t1', 'direct-res', 'o', '30 seconds') \gset
SELECT forgeyard.lease_renew('t1', 'direct-res', :l1, '60 seconds') IS NOT NULL AS renewed \gset
SELECT forgeyard.lease_release('t1', 'direct-res', :l1) AS l1_released \gset

SELECT is((SELECT xmax FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'direct'), '0'::xid,
          'no enqueue locked the queue''s row (no tuple header written, no WAL, no MultiXact)');
SELECT ok(:l1 > :l0 AND :'l0_released'::boolean AND :'renewed'::boolean AND :'l1_released'::boolean,
          'and they did their work: a new epoch, renewed, released');
SELECT throws_ok(format($$SELECT forgeyard.lease_renew('t1', 'direct-res', %s, '1 minute')$$, :l1), 'FY001', NULL,
                 'a released grant is not renewed: FY001');
SELECT is((SELECT epoch FROM forgeyard.leases WHERE tenant_id = 't1' AND resource = 'direct-res'), :l1::bigint,
          'the row keeps its last epoch');

-- What the direct path did is visible to the same transaction, as a statement's work would be.
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'direct'), 3::bigint,
          'four acks deleted four of seven messages');
SELECT is(pg_temp.released('t1', 'direct'), 4::bigint, 'and released four messages of room');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :a_id, :a_tok),
                'a second ack of an acked message is a no-op');

-- A savepoint rolled back leaves no trace of a claim or an ack.
SAVEPOINT s1;
SELECT msg_id AS s_id, claim_token AS s_tok, attempt AS s_attempt FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT is((SELECT claimed_by FROM forgeyard.messages WHERE msg_id = :s_id), 'w', 'inside the savepoint the claim is seen');
ROLLBACK TO SAVEPOINT s1;
SELECT is((SELECT claim_token FROM forgeyard.messages WHERE msg_id = :s_id), NULL::bigint,
          'after ROLLBACK TO SAVEPOINT the claim left no token');
SELECT is((SELECT attempt FROM forgeyard.messages WHERE msg_id = :s_id), 0, 'and no attempt');
SELECT msg_id AS r_id, claim_token AS r_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT is(:r_id::bigint, :s_id::bigint, 'the same message is claimed again, first in line');
SELECT is((pg_temp.err(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :r_id, :r_tok + 1000)))[1],
          'FY001', 'an ack with a token that is not the current one: FY001');
SAVEPOINT s2;
SELECT forgeyard.ack('t1', 'direct', :r_id, :r_tok) IS NULL AS acked \gset
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE msg_id = :r_id), 0::bigint, 'inside the savepoint the ack deleted it');
ROLLBACK TO SAVEPOINT s2;
SELECT is((SELECT claim_token FROM forgeyard.messages WHERE msg_id = :r_id), :r_tok::bigint,
          'after ROLLBACK TO SAVEPOINT the message is back with its delivery');
SELECT is(pg_temp.released('t1', 'direct'), 4::bigint, 'and the release counter is back too');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :r_id, :r_tok),
                'the delivery can still be acked');

-- A table whose columns moved (ALTER TABLE ADD/DROP COLUMN: relcache invalidation) is read
-- by name again: the attribute numbers are not kept across it.
ALTER TABLE forgeyard.queue_release_deltas ADD COLUMN fy_probe integer;
ALTER TABLE forgeyard.queue_release_deltas DROP COLUMN fy_probe;
SELECT msg_id AS x_id, claim_token AS x_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :x_id, :x_tok),
                'claim and ack work after ALTER TABLE of a table they use');
SELECT is(pg_temp.released('t1', 'direct'), 6::bigint, 'and the release counter counted the ack');
SELECT forgeyard.enqueue('t1', 'direct', 'm7') \gset
REINDEX TABLE forgeyard.messages;
SELECT msg_id AS y_id, claim_token AS y_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SELECT isnt(:y_id::bigint, NULL, 'claim works after REINDEX of the queue table');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :y_id, :y_tok), 'and so does ack');

-- A read-only transaction refuses the direct path's locks and writes with 25006, as it refused
-- the statements (and nothing changes).
SELECT msg_id AS o_id, claim_token AS o_tok FROM forgeyard.claim('t1', 'direct', 'w') \gset
SAVEPOINT ro;
SET LOCAL transaction_read_only = on;
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.claim('t1', 'direct', 'w')$$))[1], '25006',
          'claim in a read-only transaction: 25006');
SELECT is((pg_temp.err(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :o_id, :o_tok)))[1], '25006',
          'ack in a read-only transaction: 25006');
SELECT is((pg_temp.err($$SELECT forgeyard.enqueue('t1', 'direct', 'ro')$$))[1], '25006',
          'enqueue in a read-only transaction: 25006');
ROLLBACK TO SAVEPOINT ro;
SELECT is((SELECT claim_token FROM forgeyard.messages WHERE msg_id = :o_id), :o_tok::bigint,
          'the delivery is as it was');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'direct', :o_id, :o_tok),
                'and is acked once the transaction may write');
SELECT forgeyard.enqueue('t1', 'direct', 'm8') \gset

-- Constraints are checked on the direct path, also one added after the backend prepared the
-- table's CHECK expressions (the invalidation makes it prepare them again), and a NOT VALID one
-- (unchecked for old rows, checked for new ones, as by the INSERT).
ALTER TABLE forgeyard.messages ADD CONSTRAINT fy_probe_small CHECK (bytes < 100) NOT VALID;
SELECT is((pg_temp.err(format('SELECT forgeyard.enqueue(%L, %L, %L::bytea)', 't1', 'direct', repeat('x', 200))))[1],
          '23514', 'an enqueue that breaks a CHECK constraint added since: 23514, as the INSERT would');
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'direct'), 1::bigint,
          'and nothing was enqueued');
ALTER TABLE forgeyard.messages DROP CONSTRAINT fy_probe_small;

-- Bounds: every ack gave its room back, so the queue admits up to its limit again (interactive:
-- 90% of 10).
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'direct'), 1::bigint,
          'one message left');
SELECT is((pg_temp.err(format('SELECT forgeyard.enqueue(%L, %L, %L) FROM generate_series(1, 9)', 't1', 'direct', 'z')))[1],
          'FY020', 'nine more do not fit beside it: FY020');
SELECT is(pg_temp.err(format('SELECT forgeyard.enqueue(%L, %L, %L) FROM generate_series(1, 8)', 't1', 'direct', 'z')),
          NULL, 'eight do (the class''s share of ten is nine)');

-- The claim walks the classes in one index scan, restarting at a class's first row not yet
-- visible: a higher class holding only delayed messages, an empty class between, and a lower
-- class's ready ones behind a row of its own not yet visible.
SELECT forgeyard.queue_create('t1', 'walk');
SELECT forgeyard.enqueue('t1', 'walk', 'emergency later', NULL, NULL, 'emergency', '1 hour') AS w_late \gset
SELECT forgeyard.enqueue('t1', 'walk', 'bulk ready', NULL, NULL, 'bulk') AS w_bulk \gset
SELECT forgeyard.enqueue('t1', 'walk', 'interactive ready', NULL, NULL, 'interactive') AS w_first \gset
SELECT forgeyard.enqueue('t1', 'walk', 'interactive later', NULL, NULL, 'interactive', '1 hour') AS w_ilate \gset
SELECT forgeyard.enqueue('t1', 'walk', 'interactive ready too', NULL, NULL, 'interactive') AS w_second \gset
SELECT results_eq($$SELECT msg_id, priority FROM forgeyard.claim('t1', 'walk', 'w', 10)$$,
                  format($$VALUES (%s::bigint, 'interactive'::text), (%s, 'interactive'), (%s, 'bulk')$$,
                         :w_first, :w_second, :w_bulk),
                  'a claim takes every ready message of the lower classes past a class of delayed ones, in order');
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'walk', 'w', 10)), 0::bigint, 'and nothing not yet visible');
UPDATE forgeyard.messages SET visible_at = now() - interval '1 second' WHERE msg_id IN (:w_late, :w_ilate);
SELECT results_eq($$SELECT msg_id FROM forgeyard.claim('t1', 'walk', 'w', 1)$$, format('VALUES (%s::bigint)', :w_late),
                  'once visible, the higher class comes first');
SELECT results_eq($$SELECT msg_id FROM forgeyard.claim('t1', 'walk', 'w', 5)$$, format('VALUES (%s::bigint)', :w_ilate),
                  'then the lower one');

-- The same for the producers' direct path (SlotAdmitted: a slot's generation row found, locked,
-- updated, deleted and inserted below SPI), the clock moved a second on so that it folds.
ALTER TABLE forgeyard.queue_admit_deltas ADD COLUMN fy_probe integer;
ALTER TABLE forgeyard.queue_admit_deltas DROP COLUMN fy_probe;
SET LOCAL forgeyard.now_override = '2031-01-01 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'walk', 'a'), forgeyard.enqueue('t1', 'walk', 'b')$$,
                'enqueue works after ALTER TABLE of the slots'' generation rows');
SET LOCAL forgeyard.now_override = '2031-01-01 00:00:01+00';
SELECT lives_ok($$SELECT forgeyard.enqueue_batch('t1', 'walk', ARRAY['c', 'd']::bytea[])$$, 'and so does a batch a second later');
SELECT is(pg_temp.admitted('t1', 'walk') - pg_temp.released('t1', 'walk'),
          (SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'walk' AND state = 'pending'),
          'the slots count every pending message');

SELECT * FROM finish();
ROLLBACK;
