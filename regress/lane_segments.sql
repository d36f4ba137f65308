-- The ready lanes' entries in four segments truncated in rotation (0.13.0, F17 step 3;
-- docs/architecture.md, "Ready lanes"; sql/src/forgeyard.sql, queue_lane_segments_maintain):
-- producers append to the open segment; maintain() truncates a sealed segment once every entry in
-- it is at or below its lane's cursor, re-checked under the lock, and moves the open segment on
-- when it holds entries and the next one is empty; a claim reads its lane across the segments in
-- position order. (A segment whose lock another session holds is skipped without waiting:
-- tests/isolation/specs/lane_segment_skip.spec.) Every file runs in one transaction, whose claims
-- therefore move no cursor (they have written): the tests set cursors as committed work would.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(35);

SET TIME ZONE 'UTC';
\ir lib/err.sql
\ir lib/queue.sql

CREATE FUNCTION pg_temp.in_seg(s integer) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM forgeyard.queue_lane_entries e WHERE e.seg = $1
$$;
CREATE FUNCTION pg_temp.open_seg() RETURNS integer LANGUAGE sql AS $$
    SELECT forgeyard.queue_lane_segment_open()::integer
$$;
CREATE FUNCTION pg_temp.lane(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT x.lanes * 8 + 3 FROM forgeyard.queues x WHERE x.tenant_id = $1 AND x.queue = $2
$$;
CREATE FUNCTION pg_temp.set_cursor(t text, q text, pos bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_catalog.setval(('forgeyard.lane_' || pg_temp.lane($1, $2) || '_cursor')::regclass, $3)
$$;
CREATE FUNCTION pg_temp.segments_pass() RETURNS bigint LANGUAGE sql AS $$
    SELECT "rows" FROM forgeyard.maintain(1000) WHERE task = 'lane_segments'
$$;
CREATE FUNCTION pg_temp.file_of(s integer) RETURNS oid LANGUAGE sql AS $$
    SELECT relfilenode FROM pg_catalog.pg_class WHERE oid = ('forgeyard.queue_lane_entries_' || $1)::regclass
$$;

SELECT is(pg_temp.open_seg(), 0, 'a new install appends to segment 0');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'seg')$$, 'queue_create seg');
CALL pg_temp.enq('a', 't1', 'seg', 'a');
CALL pg_temp.enq('b', 't1', 'seg', 'b');
SELECT is(pg_temp.in_seg(0), 2::bigint, 'the listings go to segment 0');
SELECT is(pg_temp.segments_pass(), 0::bigint, 'maintain() truncates nothing while only the open segment holds entries');
SELECT is(pg_temp.open_seg(), 1, 'and moves the open segment on: it held entries, and the next is empty');
CALL pg_temp.enq('c', 't1', 'seg', 'c');
SELECT is(pg_temp.in_seg(1), 1::bigint, 'the next listing goes to segment 1');
SELECT is((SELECT pos FROM forgeyard.queue_lane_entries WHERE msg_id = pg_temp.id('c')), 3::bigint,
          'at the lane''s next position');

-- Entries above the cursor keep their segment.
SELECT is(pg_temp.segments_pass(), 0::bigint, 'a sealed segment whose entries are above the cursor is not truncated');
SELECT is(pg_temp.in_seg(0), 2::bigint, 'its entries stay');
SELECT is(pg_temp.open_seg(), 2, 'the open segment moves on again (it holds an entry)');

-- A claim reads its lane across the segments in position order: its three listings, the first
-- two from segment 0 and the third from segment 1.
SELECT is(pg_temp.claim('k1', 't1', 'seg', 'w', 3), pg_temp.ids('a', 'b', 'c'), 'a claim takes the three, in order');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'seg', pg_temp.id('a'), pg_temp.tok('k1', 'a'))$$, 'ack a');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'seg', pg_temp.id('b'), pg_temp.tok('k1', 'b'))$$, 'ack b');

-- Consumed up to the cursor: the sealed segment goes in one TRUNCATE.
SELECT pg_temp.file_of(0) AS file_before \gset
SELECT is(pg_temp.set_cursor('t1', 'seg', 1), 1::bigint, 'a cursor at position 1 (of 2 in segment 0)');
SELECT is(pg_temp.segments_pass(), 0::bigint, 'a segment with one entry above its cursor is not truncated');
SELECT is(pg_temp.set_cursor('t1', 'seg', 2), 2::bigint, 'the cursor at position 2');
SELECT is(pg_temp.segments_pass(), 2::bigint, 'maintain() truncates segment 0: its two entries');
SELECT is(pg_temp.in_seg(0), 0::bigint, 'segment 0 is empty');
SELECT isnt(pg_temp.file_of(0), :file_before::oid, 'by TRUNCATE (a new file), not by DELETE');
SELECT is(pg_temp.in_seg(1), 1::bigint, 'segment 1 keeps the entry above the cursor');

-- An entry of a lane whose sequences are gone means nothing: it does not keep its segment.
SELECT is(pg_temp.open_seg(), 2, 'the open segment stays while it is empty');
INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id) VALUES (999999, 7, NULL);
SELECT is(pg_temp.in_seg(2), 1::bigint, 'an entry inserted through the parent goes to the open segment (its default)');
SELECT is(pg_temp.segments_pass(), 0::bigint, 'the open segment is never truncated');
SELECT is(pg_temp.open_seg(), 3, 'it moves on once it holds an entry');
SELECT is(pg_temp.segments_pass(), 1::bigint, 'the entry of a lane without sequences is truncated with its segment');

-- A dump reads a lane's cursor after its rows, so a restore can bring back a cursor past a
-- message the dump still shows listed: claims start above the cursor and would never meet it, and
-- messages_claim holds only messages without a listing. The pass that truncates the entry's
-- segment unlists such a message first. (setval stands in for the restored value.)
SELECT is(pg_temp.open_seg(), 3, 'segment 3 is open');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'healed')$$, 'queue_create healed');
CALL pg_temp.enq('h', 't1', 'healed', 'behind the cursor');
SELECT is((SELECT ready_pos FROM forgeyard.messages WHERE msg_id = pg_temp.id('h')), 1::bigint,
          'the message is listed at position 1 of its lane, in segment 3');
SELECT is(pg_temp.set_cursor('t1', 'healed', 1), 1::bigint, 'a restored cursor at the listing''s position');
SELECT is(pg_temp.claim('k2', 't1', 'healed', 'w', 10), '{}'::bigint[], 'no claim finds a listing behind its cursor');
SELECT is(pg_temp.segments_pass(), 0::bigint, 'the pass while its segment is open moves the open segment on');
SELECT is((SELECT ready_pos FROM forgeyard.messages WHERE msg_id = pg_temp.id('h')), 1::bigint, 'it is still listed');
SELECT is(pg_temp.segments_pass(), 1::bigint, 'the next pass truncates its segment');
SELECT is((SELECT ready_pos FROM forgeyard.messages WHERE msg_id = pg_temp.id('h')), NULL::bigint,
          'and unlists the message first');
SELECT is(pg_temp.claim('k3', 't1', 'healed', 'w', 10), pg_temp.ids('h'), 'the next claim delivers it (messages_claim)');

SELECT * FROM finish();
ROLLBACK;
