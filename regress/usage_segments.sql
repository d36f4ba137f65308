-- The capacity counts' delta rows in four segments each (0.14.0, F17 step 3; docs/architecture.md,
-- "Capacity slots"; sql/src/forgeyard.sql, queue_admit_fold and queue_usage_segments_maintain):
-- queue_release_deltas and queue_admit_deltas are LIST partitions by the ten-second period of
-- the row's generation, modulo 4; maintain() folds the admission rows of past generations into
-- their slots and truncates, one a table a pass, a segment other than the current period's that
-- has pages but no row. The counts stay exact throughout. (A segment whose lock another session
-- holds is skipped without waiting: tests/pg/lane_segments.sh.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(35);

SET TIME ZONE 'UTC';
\ir lib/err.sql
\ir lib/queue.sql

-- Rows of a segment of table `t` (queue_release_deltas or queue_admit_deltas).
CREATE FUNCTION pg_temp.in_seg(t text, s integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM forgeyard.%I', t || '_' || s) INTO n;
    RETURN n;
END $$;
CREATE FUNCTION pg_temp.file_of(t text, s integer) RETURNS oid LANGUAGE sql AS $$
    SELECT relfilenode FROM pg_catalog.pg_class WHERE oid = ('forgeyard.' || $1 || '_' || $2)::regclass
$$;
CREATE FUNCTION pg_temp.pass(which text) RETURNS bigint LANGUAGE sql AS $$
    SELECT "rows" FROM forgeyard.maintain(1000) WHERE task = $1
$$;
CREATE FUNCTION pg_temp.used(q text) RETURNS text LANGUAGE sql AS $$
    SELECT admitted_messages || '/' || admitted_bytes FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = $1
$$;

SELECT is((SELECT relkind FROM pg_catalog.pg_class WHERE oid = 'forgeyard.queue_release_deltas'::regclass), 'p'::"char",
          'queue_release_deltas is partitioned');
SELECT is((SELECT relkind FROM pg_catalog.pg_class WHERE oid = 'forgeyard.queue_admit_deltas'::regclass), 'p'::"char",
          'queue_admit_deltas is partitioned');
SELECT is((SELECT count(*) FROM pg_catalog.pg_inherits
            WHERE inhparent IN ('forgeyard.queue_release_deltas'::regclass, 'forgeyard.queue_admit_deltas'::regclass)),
          8::bigint, 'into four segments each');

-- 2030-01-01 00:00:05 is in period 189345600 (seconds / 10), segment 0.
SET forgeyard.now_override = '2030-01-01 00:00:05+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'us', '{"max_messages": 10}')$$, 'queue_create us (10 messages)');
CALL pg_temp.enq('a', 't1', 'us', 'aa');
CALL pg_temp.enq('b', 't1', 'us', 'bbb');
SELECT is(pg_temp.in_seg('queue_admit_deltas', 0), (SELECT count(*) FROM forgeyard.queue_admit_deltas),
          'the admission rows of the period go to segment 0');
SELECT is((SELECT sum(admitted_messages) FROM forgeyard.queue_admit_deltas WHERE queue = 'us'), 2::numeric,
          'and count both messages');
SELECT is(pg_temp.claim('k1', 't1', 'us', 'w', 2), pg_temp.ids('a', 'b'), 'both claimed');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'us', pg_temp.id('a'), pg_temp.tok('k1', 'a'))$$, 'ack a');
SELECT is((SELECT count(*) FROM forgeyard.queue_release_deltas_0 WHERE queue = 'us'), 1::bigint,
          'its release row goes to segment 0 too');
SELECT is(pg_temp.used('us'), '1/3', 'the bound counts b only');

-- Ten seconds on: segment 1 is the current one. The pass folds the admission rows (their
-- generation is past) and the release rows into their slots, and segment 0 of each table,
-- emptied, goes by TRUNCATE.
SET forgeyard.now_override = '2030-01-01 00:00:15+00';
SELECT pg_temp.file_of('queue_admit_deltas', 0) AS admit_file \gset
SELECT pg_temp.file_of('queue_release_deltas', 0) AS release_file \gset
CREATE TEMP TABLE pass1 AS SELECT task, "rows" FROM forgeyard.maintain(1000);
SELECT is((SELECT "rows" FROM pass1 WHERE task = 'admit_deltas'),
          (SELECT count(*) FROM forgeyard.queue_slots WHERE queue = 'us' AND admitted_messages > 0),
          'maintain() folds each slot''s admission row of a past generation (task admit_deltas)');
SELECT is((SELECT "rows" FROM pass1 WHERE task = 'release_deltas'), 1::bigint, 'and the release row');
SELECT is((SELECT "rows" FROM pass1 WHERE task = 'usage_segments'), 2::bigint,
          'then truncates the emptied segment 0 of each table (task usage_segments)');
SELECT is(pg_temp.in_seg('queue_admit_deltas', 0) + pg_temp.in_seg('queue_release_deltas', 0), 0::bigint, 'both are empty');
SELECT isnt(pg_temp.file_of('queue_admit_deltas', 0), :admit_file::oid, 'by TRUNCATE (a new file), not by DELETE');
SELECT isnt(pg_temp.file_of('queue_release_deltas', 0), :release_file::oid, 'the release segment too');
SELECT is((SELECT count(*) FROM forgeyard.queue_slots WHERE queue = 'us' AND admit_gen IS NOT NULL), 0::bigint,
          'a folded slot names no admission row');
SELECT is(pg_temp.used('us'), '1/3', 'the bound is the same after the fold and the truncation');

-- The next producer of the slot makes a row in the current segment; it is not truncated.
CALL pg_temp.enq('c', 't1', 'us', 'c');
SELECT is(pg_temp.in_seg('queue_admit_deltas', 1), 1::bigint, 'a new admission row goes to segment 1');
SELECT is(pg_temp.used('us'), '2/4', 'and counts');
SELECT is(pg_temp.pass('usage_segments'), 0::bigint, 'the current segment is never truncated');
SELECT is(pg_temp.in_seg('queue_admit_deltas', 1), 1::bigint, 'its row stays');

-- A sealed segment that still holds a row is not truncated: a release row that no fold takes
-- (its slot has no release row) keeps segment 1 after its period.
INSERT INTO forgeyard.queue_release_deltas (tenant_id, queue, slot, released_messages, released_bytes, gen)
VALUES ('t1', 'no-such-queue', 0, 1, 1, 18934560150);
SELECT is(pg_temp.in_seg('queue_release_deltas', 1), 1::bigint, 'a release row of period 189345601 is in segment 1');
SET forgeyard.now_override = '2030-01-01 00:00:25+00';
CREATE TEMP TABLE pass2 AS SELECT task, "rows" FROM forgeyard.maintain(1000);
SELECT is((SELECT "rows" FROM pass2 WHERE task = 'usage_segments'), 1::bigint,
          'the next period: the admission segment 1, emptied by the fold, is truncated; the release one is not');
SELECT is(pg_temp.in_seg('queue_release_deltas', 1), 1::bigint, 'the row the fold left is still there');
SELECT is(pg_temp.in_seg('queue_admit_deltas', 1), 0::bigint, 'the admission segment is empty');
SELECT is(pg_temp.used('us'), '2/4', 'the bound is still exact');

-- A release after the truncation goes to the current segment; the ack of the rest leaves the
-- queue empty, and its room is all given back.
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'us', pg_temp.id('b'), pg_temp.tok('k1', 'b'))$$, 'ack b');
SELECT is(pg_temp.claim('k2', 't1', 'us', 'w', 1), pg_temp.ids('c'), 'c claimed');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'us', pg_temp.id('c'), pg_temp.tok('k2', 'c'))$$, 'ack c');
SELECT is(pg_temp.used('us'), '0/0', 'every message released: the bound is back to zero');

-- A clock before 1970 (forgeyard.now_override): a period's key is then negative (PostgreSQL's
-- division truncates toward zero, as the C++ edition's), and segment N takes -N too.
SET forgeyard.now_override = '1969-12-31 23:59:35+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'old')$$, 'queue_create old, in 1969');
CALL pg_temp.enq('o', 't1', 'old', 'o');
SELECT is((SELECT tableoid::regclass::text FROM forgeyard.queue_admit_deltas WHERE queue = 'old'),
          'forgeyard.queue_admit_deltas_2', 'an admission 25 s before 1970 (key -2) goes to segment 2');
SELECT is(pg_temp.claim('k3', 't1', 'old', 'w', 1), pg_temp.ids('o'), 'o claimed');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'old', pg_temp.id('o'), pg_temp.tok('k3', 'o'))$$, 'and acked, its release in segment 2 too');

SELECT * FROM finish();
ROLLBACK;
