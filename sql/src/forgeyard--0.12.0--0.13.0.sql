-- forgeyard 0.12.0 -> 0.13.0: the ready lanes' entries in four segments truncated in rotation (F17,
-- step 3 of docs/queue-storage-design.md; docs/architecture.md, "Ready lanes"). The entries of
-- queue_lanes move into segment 0 of the new partitioned table queue_lane_entries, and
-- queue_lanes is dropped. maintain() no longer deletes consumed entries: it truncates a sealed
-- segment once all of its entries are consumed. A session that loaded the 0.12.0 library before
-- the update finds no forgeyard.queue_lanes and fails its claims and listings with an internal
-- error until it reconnects (docs/operations.md, "Upgrading").
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.13.0'" to load this file. \quit

-- The entries live in four segments (0.13.0, F17 step 3: docs/queue-storage-design.md, "As built
-- in 0.13.0"), the LIST partitions of queue_lane_entries by `seg`. Producers append to the open
-- segment (the value of the sequence queue_lane_segment, modulo 4, read without a snapshot);
-- maintain() moves it on and empties a sealed segment with TRUNCATE once every entry in it is at or
-- below its lane's cursor, so consumed entries leave in bulk and no row of them is deleted.
CREATE SEQUENCE forgeyard.queue_lane_segment MINVALUE 0 START 0;
COMMENT ON SEQUENCE forgeyard.queue_lane_segment IS
  'The open segment of the ready lanes'' entries: its value modulo 4 is the partition of queue_lane_entries that producers append to; maintain() moves it on.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_segment', '');
CREATE FUNCTION forgeyard.queue_lane_segment_open()
    RETURNS smallint
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$SELECT (coalesce(pg_catalog.pg_sequence_last_value('forgeyard.queue_lane_segment'::pg_catalog.regclass), 0) % 4)::pg_catalog.int2$$;
COMMENT ON FUNCTION forgeyard.queue_lane_segment_open() IS
  'Internal: the segment of the ready lanes'' entries that producers append to now (queue_lane_entries.seg). Not granted to anyone.';
CREATE TABLE forgeyard.queue_lane_entries (
    lane   bigint   NOT NULL,
    pos    bigint   NOT NULL,
    msg_id bigint,
    seg    smallint NOT NULL DEFAULT forgeyard.queue_lane_segment_open(),
    PRIMARY KEY (lane, pos, seg)
) PARTITION BY LIST (seg);
COMMENT ON TABLE forgeyard.queue_lane_entries IS
  'Ready lanes: entries appended when a message becomes claimable at once (its listing), never updated; msg_id NULL is a void that maintain() put in a position its producer left empty. Entries at or below their lane''s cursor are consumed; maintain() truncates a sealed segment (partition) once all of its entries are.';
COMMENT ON COLUMN forgeyard.queue_lane_entries.seg IS
  'The segment (partition) the entry was appended to: forgeyard.queue_lane_segment_open() when its producer read it.';
CREATE TABLE forgeyard.queue_lane_entries_0 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (0);
CREATE TABLE forgeyard.queue_lane_entries_1 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (1);
CREATE TABLE forgeyard.queue_lane_entries_2 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (2);
CREATE TABLE forgeyard.queue_lane_entries_3 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (3);
COMMENT ON TABLE forgeyard.queue_lane_entries_0 IS 'Segment 0 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_1 IS 'Segment 1 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_2 IS 'Segment 2 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_3 IS 'Segment 3 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_3', '');
-- The entries move, in their lanes and positions, to the open segment; the old table goes.
INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id, seg)
SELECT l.lane, l.pos, l.msg_id, 0 FROM forgeyard.queue_lanes l;
-- (Out of the extension first, which also ends its registration for pg_dump.)
ALTER EXTENSION forgeyard DROP TABLE forgeyard.queue_lanes;
DROP TABLE forgeyard.queue_lanes;
COMMENT ON COLUMN forgeyard.messages.ready_pos IS
  'The position of the message''s open listing in its lane (queue_lane_entries), NULL when it has none: found by claims in messages_claim then. A listing is open only while the message is a pending head: acks and dead-lettering clear it (a library before 0.10.0, still loaded by a session after the update, may leave it on a finished row, where it means nothing); a redrive clears it.';

-- Takes a queue's lanes away: its entries and sequences dropped, its listed messages unlisted
-- (messages_claim finds them). queue_drop in both editions; false for a queue without lanes.
CREATE OR REPLACE FUNCTION forgeyard.queue_lanes_close(tenant text, queue text)
    RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN $1 IS NULL THEN 'tenant' ELSE 'queue' END USING ERRCODE = '22004';
    END IF;
    SELECT x.lanes INTO n FROM forgeyard.queues x WHERE x.tenant_id = $1 AND x.queue = $2 FOR UPDATE;
    IF n IS NULL THEN
        RETURN false;
    END IF;
    UPDATE forgeyard.messages m SET ready_pos = NULL
     WHERE m.tenant_id = $1 AND m.queue = $2 AND m.state = 'pending' AND m.ready_pos IS NOT NULL;
    DELETE FROM forgeyard.queue_lane_entries e WHERE e.lane BETWEEN n * 8 AND n * 8 + 7;
    DELETE FROM forgeyard.queue_lane_marks k WHERE k.lane BETWEEN n * 8 AND n * 8 + 7;
    UPDATE forgeyard.queues x SET lanes = NULL WHERE x.tenant_id = $1 AND x.queue = $2;
    FOR p IN 0..5 LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS forgeyard.%I, forgeyard.%I',
                       'lane_' || (n * 8 + p), 'lane_' || (n * 8 + p) || '_cursor');
    END LOOP;
    RETURN true;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_close(text, text) IS
  'Internal (queue_drop): takes a queue''s ready lanes away, its listed messages back to messages_claim. Not granted to anyone.';


-- maintain()'s part of the lanes (both editions call it first, before anything of theirs writes):
-- each lane's cursor moved over the positions its snapshot shows consumed; the positions their
-- producers left empty (rolled back, or crashed) voided, once no transaction running when they
-- were taken can still be (queue_lane_marks); and the queues without lanes given theirs. Returns
-- the rows it wrote. The entries at or below the cursors leave with their segment
-- (queue_lane_segments_maintain, at the end of maintain()).
CREATE OR REPLACE FUNCTION forgeyard.queue_lanes_maintain(max_rows integer, tenant text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    advance boolean := pg_catalog.pg_current_xact_id_if_assigned() IS NULL;
    done bigint := 0;
    n bigint;
    x record;
    e record;
    x_lane bigint;
    x_last bigint;
    x_cursor bigint;
    expect bigint;
    cur bigint;
    l_lanes bigint[];
    l_last bigint[];
    l_cursor bigint[];
    bound xid8;
    sweep bigint;
    gap_lanes bigint[] := '{}';
    gaps bigint[] := '{}';
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'max_rows must not be NULL' USING ERRCODE = '22004';
    ELSIF $1 <= 0 THEN
        RAISE EXCEPTION 'max_rows must be positive' USING ERRCODE = '22023';
    END IF;
    sweep := coalesce((SELECT k.pos FROM forgeyard.queue_lane_marks k WHERE k.lane = -1), 0);
    -- Every lane's last position taken and cursor, of up to 64 queues (each sequence read holds
    -- a lock to the end of the transaction: a pass over every queue could run out of locks), the
    -- next ones after the last pass's (mark row -1 holds where it ended), read in one statement
    -- before anything else;
    -- then, when the transaction has no id yet, its id, taken now: every producer of a position
    -- read above took its transaction id before its position (queue_lanes.sql, lane_list), so its
    -- id is below this one (queue_lane_marks). (Not a snapshot's xmax: that is one past the last
    -- transaction completed, and one still running can have a higher id.)
    SELECT coalesce(array_agg(v.lane ORDER BY v.lane), '{}'), coalesce(array_agg(v.last_pos ORDER BY v.lane), '{}'),
           coalesce(array_agg(v.cursor ORDER BY v.lane), '{}')
      INTO l_lanes, l_last, l_cursor
      FROM (SELECT q.lanes * 8 + p AS lane,
                   coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || (q.lanes * 8 + p))::regclass), 0)
                       AS last_pos,
                   coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || (q.lanes * 8 + p) || '_cursor')::regclass), 0)
                       AS cursor
              FROM forgeyard.queues q, pg_catalog.generate_series(0, 5) p
             WHERE q.lanes IN (SELECT w.lanes FROM forgeyard.queues w
                                WHERE w.lanes IS NOT NULL AND ($2 IS NULL OR w.tenant_id = $2)
                                ORDER BY w.lanes <= sweep, w.lanes LIMIT 64)) v;
    -- (The next pass goes on after the last queue read here in the pass's order, the highest at
    -- or below the mark when the pass went round to the first queues; from the first when all
    -- were read.)
    INSERT INTO forgeyard.queue_lane_marks (lane, pos, next_xid)
    VALUES (-1, CASE WHEN pg_catalog.cardinality(l_lanes) >= 64 * 6
                     THEN coalesce((SELECT pg_catalog.max(u.lane / 8) FROM unnest(l_lanes) u(lane) WHERE u.lane / 8 <= sweep),
                                   l_lanes[pg_catalog.cardinality(l_lanes)] / 8)
                     ELSE 0 END,
            '0'::xid8)
        ON CONFLICT (lane) DO UPDATE SET pos = excluded.pos;
    IF advance THEN
        bound := pg_catalog.pg_current_xact_id();
    END IF;
    -- The cursors moved, the gaps found (every position without an entry below the first entry
    -- not consumed, or below the last position taken).
    FOR i IN 1 .. pg_catalog.cardinality(l_lanes) LOOP
        x_lane := l_lanes[i];
        x_last := l_last[i];
        x_cursor := l_cursor[i];
        cur := x_cursor;
        IF x_last > x_cursor THEN
            expect := x_cursor + 1;
            n := 0;
            FOR e IN SELECT l.pos, (m.msg_id IS NULL OR m.ready_pos IS DISTINCT FROM l.pos OR m.state <> 'pending'
                                    OR NOT m.is_head) AS consumed
                       FROM forgeyard.queue_lane_entries l LEFT JOIN forgeyard.messages m ON m.msg_id = l.msg_id
                      WHERE l.lane = x_lane AND l.pos > x_cursor
                      ORDER BY l.pos, l.msg_id NULLS LAST LIMIT $1
            LOOP
                WHILE expect < e.pos AND n < $1 LOOP
                    gap_lanes := gap_lanes || x_lane;
                    gaps := gaps || expect;
                    expect := expect + 1;
                    n := n + 1;
                END LOOP;
                EXIT WHEN NOT e.consumed OR n >= $1;
                IF n = 0 THEN
                    cur := e.pos;
                END IF;
                expect := e.pos + 1;
            END LOOP;
            -- (Past the last entry, the positions taken are gaps too.)
            WHILE expect <= x_last AND n < $1
                  AND NOT EXISTS (SELECT 1 FROM forgeyard.queue_lane_entries l WHERE l.lane = x_lane AND l.pos >= expect) LOOP
                gap_lanes := gap_lanes || x_lane;
                gaps := gaps || expect;
                expect := expect + 1;
                n := n + 1;
            END LOOP;
            IF advance AND cur > x_cursor THEN
                PERFORM pg_catalog.setval(('forgeyard.lane_' || x_lane || '_cursor')::regclass, cur);
            END IF;
        END IF;
    END LOOP;
    -- A gap is voided once no transaction that was running when its position was taken can still
    -- be: the lane's mark (its last position taken, and an id above every producer's of those
    -- positions: the id of the pass that made it) is settled when this snapshot's xmin has passed
    -- that id. A position at or below the mark then belongs to a transaction that committed (its
    -- entry is visible, and the void's insert does nothing) or rolled back: a void never waits,
    -- and never takes a position from a producer still open (tests/model/lanes.pml). Not under a
    -- transaction snapshot (a gap it shows may have been filled since: its insert would be
    -- 40001), nor when the transaction had an id before this pass (no bound).
    IF bound IS NOT NULL AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        FOR x IN SELECT g.lane, k.pos AS mark_pos, k.next_xid AS mark_xid,
                        pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot()) AS now_xmin,
                        l.last_pos
                   FROM (SELECT DISTINCT u.lane FROM unnest(gap_lanes) u(lane)) g
                   JOIN unnest(l_lanes, l_last) l(lane, last_pos) ON l.lane = g.lane
                   LEFT JOIN forgeyard.queue_lane_marks k ON k.lane = g.lane
        LOOP
            IF x.mark_xid IS NOT NULL AND x.mark_xid <= x.now_xmin THEN
                -- (Not where any segment holds the position: the primary key is per segment.)
                INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id)
                SELECT g.lane, g.pos, NULL FROM unnest(gap_lanes, gaps) g(lane, pos)
                 WHERE g.lane = x.lane AND g.pos <= x.mark_pos
                   AND NOT EXISTS (SELECT FROM forgeyard.queue_lane_entries y WHERE y.lane = g.lane AND y.pos = g.pos)
                    ON CONFLICT DO NOTHING;
                GET DIAGNOSTICS n = ROW_COUNT;
                done := done + n;
            END IF;
            -- A new mark once the last one is settled (or none, or one from another cluster's
            -- transaction ids: a restore's, above this pass's own).
            IF x.mark_xid IS NULL OR x.mark_xid <= x.now_xmin OR x.mark_xid > bound THEN
                INSERT INTO forgeyard.queue_lane_marks (lane, pos, next_xid) VALUES (x.lane, x.last_pos, bound)
                    ON CONFLICT (lane) DO UPDATE SET pos = excluded.pos, next_xid = excluded.next_xid;
            END IF;
        END LOOP;
    END IF;
    FOR x IN SELECT q.tenant_id, q.queue FROM forgeyard.queues q
              WHERE q.lanes IS NULL AND ($2 IS NULL OR q.tenant_id OPERATOR(pg_catalog.=) $2)
              ORDER BY q.tenant_id, q.queue LIMIT least($1, 16) FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM forgeyard.queue_lanes_open(x.tenant_id, x.queue);
        done := done + 1;
    END LOOP;
    RETURN done;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_maintain(integer, text) IS
  'Internal: maintain()''s part of the ready lanes (cursors moved, gaps voided, lanes given to queues without them). Not granted to anyone.';

-- The position up to which a lane's entries are consumed: its cursor (0 before its first move); or
-- every position, for a lane whose sequences are gone (its queue dropped: its entries mean nothing).
CREATE FUNCTION forgeyard.queue_lane_consumed_to(lane bigint)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    cursor_seq regclass;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'lane must not be NULL' USING ERRCODE = '22004';
    END IF;
    cursor_seq := pg_catalog.to_regclass('forgeyard.lane_' || $1 || '_cursor');
    IF cursor_seq IS NULL THEN
        RETURN 9223372036854775807;
    END IF;
    RETURN coalesce(pg_catalog.pg_sequence_last_value(cursor_seq), 0);
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lane_consumed_to(bigint) IS
  'Internal: the position at or below which the entries of a ready lane are consumed (its cursor; every position when the lane''s sequences are gone). Not granted to anyone.';

-- maintain()'s rotation of the lanes' entries (both editions call it last, so that the lock of a
-- segment it truncated is held only to the commit): at most one sealed segment a pass is
-- truncated, once every entry in it is at or below its lane's cursor (consumed by committed work;
-- an entry of a lane whose sequences are gone means nothing), found per lane by the highest
-- position, a probe of the segment's index per lane, 256 lanes at a time in a subtransaction
-- rolled back afterwards (reading a sequence locks it to the end of the transaction: a segment of
-- many lanes must not use up the lock table). Every lock is taken with a lock_timeout of 50 ms, and
-- a segment whose lock is not had in that time (a transaction that read it is still open, another
-- pass truncating it) is skipped until the next pass: maintenance never waits longer. The check is
-- made again under the segment's lock, since a producer that read the open segment's number
-- before it moved on may have appended since (docs/queue-storage-design.md, "Rotation and
-- truncation"); then, still under it, a message listed at a position of the segment (its
-- cursor passed it: a restore of a dump whose cursor was read after its rows) is unlisted, and
-- messages_claim finds it. Then the open segment moves on, when it holds entries and the next one
-- is empty. Only in READ COMMITTED: under a transaction snapshot the check could miss an entry
-- committed since (0). Returns the entries truncated.
CREATE FUNCTION forgeyard.queue_lane_segments_maintain()
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    open_seg integer := forgeyard.queue_lane_segment_open();
    seg_name text;
    saved text;
    n bigint := 0;
    live boolean;
    cut boolean;
    after_lane bigint;
    -- For lanes of segment %1$I above $1, 256 at most (by a skip scan of its index): whether any
    -- has an entry above its cursor (its highest position, one probe each), and the last lane read.
    live_check constant text := $q$
        WITH RECURSIVE lanes(lane, k) AS (
            (SELECT e.lane, 1 FROM forgeyard.%1$I e WHERE e.lane > $1 ORDER BY e.lane LIMIT 1)
            UNION ALL
            SELECT (SELECT e.lane FROM forgeyard.%1$I e WHERE e.lane > l.lane ORDER BY e.lane LIMIT 1), l.k + 1
              FROM lanes l WHERE l.lane IS NOT NULL AND l.k < 256)
        SELECT coalesce(pg_catalog.bool_or(
                   (SELECT pg_catalog.max(e.pos) FROM forgeyard.%1$I e WHERE e.lane = l.lane)
                       > forgeyard.queue_lane_consumed_to(l.lane)), false),
               pg_catalog.max(l.lane), pg_catalog.count(*) >= 256
          FROM lanes l WHERE l.lane IS NOT NULL$q$;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    saved := pg_catalog.current_setting('lock_timeout');
    FOR j IN 0 .. 3 LOOP
        CONTINUE WHEN j = open_seg;
        seg_name := 'queue_lane_entries_' || j;
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            -- (Pages without a visible row, which a queue_drop leaves, are truncated too.)
            live := pg_catalog.pg_relation_size(('forgeyard.' || seg_name)::regclass) = 0;
            FOR pass IN 1 .. 2 LOOP
                EXIT WHEN live;
                IF pass = 2 THEN
                    EXECUTE format('SELECT pg_catalog.count(*) FROM forgeyard.%I', seg_name) INTO n;
                    EXECUTE format('LOCK TABLE forgeyard.%I IN ACCESS EXCLUSIVE MODE', seg_name);
                END IF;
                -- Every lane's entries consumed? (Before the lock, then under it.)
                live := false;
                after_lane := -1;
                LOOP
                    BEGIN
                        EXECUTE format(live_check, seg_name) USING after_lane INTO live, after_lane, cut;
                        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'forgeyard: the sequences read are unlocked';
                    EXCEPTION WHEN raise_exception THEN
                        NULL;
                    END;
                    EXIT WHEN live OR NOT coalesce(cut, false);
                END LOOP;
                EXIT WHEN live;
            END LOOP;
            -- (live: not truncated, or empty.)
            IF NOT live THEN
                EXECUTE format($q$UPDATE forgeyard.messages m SET ready_pos = NULL
                                    FROM forgeyard.%1$I e
                                   WHERE m.msg_id = e.msg_id AND m.ready_pos = e.pos$q$, seg_name);
                EXECUTE format('TRUNCATE forgeyard.%I', seg_name);
                PERFORM pg_catalog.set_config('lock_timeout', saved, true);
                EXIT;
            END IF;
            PERFORM pg_catalog.set_config('lock_timeout', saved, true);
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;  -- (the subtransaction's end restored lock_timeout)
        END;
        n := 0;  -- (nothing truncated: the count of a segment left is not the answer)
    END LOOP;
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
        IF pg_catalog.pg_relation_size(('forgeyard.queue_lane_entries_' || open_seg)::regclass) > 0
           AND pg_catalog.pg_relation_size(('forgeyard.queue_lane_entries_' || (open_seg + 1) % 4)::regclass) = 0 THEN
            PERFORM pg_catalog.setval('forgeyard.queue_lane_segment',
                                      coalesce(pg_catalog.pg_sequence_last_value('forgeyard.queue_lane_segment'), 0) + 1);
        END IF;
        PERFORM pg_catalog.set_config('lock_timeout', saved, true);
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
    END;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lane_segments_maintain() IS
  'Internal: maintain()''s rotation of the ready lanes'' entries (a sealed segment truncated once consumed, skipped when its lock is not had within 50 ms; the open segment moved on; READ COMMITTED only). Not granted to anyone.';

REVOKE ALL ON forgeyard.queue_lane_entries FROM PUBLIC;
REVOKE ALL ON forgeyard.queue_lane_entries_0, forgeyard.queue_lane_entries_1, forgeyard.queue_lane_entries_2,
              forgeyard.queue_lane_entries_3 FROM PUBLIC;
REVOKE ALL ON SEQUENCE forgeyard.queue_lane_segment FROM PUBLIC;
REVOKE ALL ON FUNCTION forgeyard.queue_lane_segment_open(), forgeyard.queue_lane_consumed_to(bigint),
                       forgeyard.queue_lane_segments_maintain() FROM PUBLIC;
