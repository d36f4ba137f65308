-- forgeyard 0.9.0 -> 0.10.0: ready lanes, the claim path that does not walk the dead entries a held
-- snapshot keeps (F17, step 2 of docs/queue-storage-design.md). Queues that exist keep claiming
-- from messages_claim until maintain() gives them lanes; their messages are never moved by hand.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.10.0'" to load this file. \quit

-- A lane is the ready list of one queue and class: lane id = queues.lanes * 8 + class. An enqueue
-- that makes a message claimable at once appends an entry at the lane's next position (its
-- sequence forgeyard.lane_<id>, taken inside the INSERT) and writes that position into the
-- message's ready_pos; the entry is never updated. The listing stays open while the message is
-- pending at its position (claimed or not); once the message is finished, nacked, dead or gone it
-- is consumed. The lane's cursor (sequence forgeyard.lane_<id>_cursor) is a position at or below
-- which every entry is consumed: claims read the entries above it only, so what committed work
-- consumed is never walked again, whatever snapshot is held. A claim moves the cursor over the run
-- of positions its snapshot shows consumed, before it has written anything. A position without an
-- entry (a producer still open, or rolled back) stops the cursor until the producer commits or
-- maintain() voids it (an entry without a message) once its producer must have ended. What is not listed (delayed, retried,
-- promoted, redriven, fanned out from a topic, enqueued before 0.10.0) is found as before, in
-- messages_claim, which now holds only the pending heads without a listing.
CREATE SEQUENCE forgeyard.queue_lane_numbers;
COMMENT ON SEQUENCE forgeyard.queue_lane_numbers IS 'The lanes numbers of queues: a queue''s lane ids are lanes * 8 + class.';
ALTER TABLE forgeyard.queues ADD COLUMN lanes bigint UNIQUE;
COMMENT ON COLUMN forgeyard.queues.lanes IS
  'The queue''s ready lanes (lane id = lanes * 8 + class, sequences forgeyard.lane_<id> and lane_<id>_cursor, owned by this column); NULL until queue_create or maintain() gives it lanes.';
ALTER TABLE forgeyard.messages ADD COLUMN ready_pos bigint;
COMMENT ON COLUMN forgeyard.messages.ready_pos IS
  'The position of the message''s open listing in its lane (queue_lanes), NULL when it has none: found by claims in messages_claim then. A listing is open only while the message is a pending head: acks and dead-lettering clear it (a library before 0.10.0, still loaded by a session after the update, may leave it on a finished row, where it means nothing); a redrive clears it.';
DROP INDEX forgeyard.messages_claim;
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NULL AND ready_pos IS NULL;
CREATE TABLE forgeyard.queue_lanes (
    lane   bigint NOT NULL,
    pos    bigint NOT NULL,
    msg_id bigint,
    PRIMARY KEY (lane, pos)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_lanes IS
  'Ready lanes: entries appended when a message becomes claimable at once (its listing), never updated; msg_id NULL is a void that maintain() put in a position its producer left empty. Entries at or below their lane''s cursor are consumed and deleted by maintain().';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lanes', '');
CREATE TABLE forgeyard.queue_lane_marks (
    lane bigint PRIMARY KEY,
    pos  bigint NOT NULL,
    next_xid xid8 NOT NULL
);
COMMENT ON TABLE forgeyard.queue_lane_marks IS
  'maintain()''s marks of lanes with gaps: the last position taken and the next transaction id when the mark was made; once every transaction below that id has ended, the gaps at or below the position are voided.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_marks', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_numbers', '');

-- A queue's lanes: its two sequences per class, owned by queues.lanes (dropped with the table),
-- and the queue's row pointing at them; the lanes it has if it has them. Called by queue_create in
-- both editions and by maintain() for a queue without lanes (created before 0.10.0, or copied in
-- by rows). 42704 for an unknown queue.
CREATE FUNCTION forgeyard.queue_lanes_open(tenant text, queue text)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN $1 IS NULL THEN 'tenant' ELSE 'queue' END USING ERRCODE = '22004';
    END IF;
    -- (The row is taken by the update itself: a second caller waits for it, then finds lanes.)
    UPDATE forgeyard.queues x SET lanes = nextval('forgeyard.queue_lane_numbers')
     WHERE x.tenant_id = $1 AND x.queue = $2 AND x.lanes IS NULL
    RETURNING x.lanes INTO n;
    IF NOT FOUND THEN
        SELECT x.lanes INTO n FROM forgeyard.queues x WHERE x.tenant_id = $1 AND x.queue = $2;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'queue "%" does not exist', $2 USING ERRCODE = '42704';
        END IF;
        RETURN n;
    END IF;
    FOR p IN 0..5 LOOP
        EXECUTE format('CREATE SEQUENCE forgeyard.%I OWNED BY forgeyard.queues.lanes', 'lane_' || (n * 8 + p));
        EXECUTE format('CREATE SEQUENCE forgeyard.%I MINVALUE 0 START 0 OWNED BY forgeyard.queues.lanes',
                       'lane_' || (n * 8 + p) || '_cursor');
        EXECUTE format('COMMENT ON SEQUENCE forgeyard.%I IS %L', 'lane_' || (n * 8 + p),
                       format('Positions of the ready lane of queue %s of tenant %s, class %s.', $2, $1, p));
        EXECUTE format('COMMENT ON SEQUENCE forgeyard.%I IS %L', 'lane_' || (n * 8 + p) || '_cursor',
                       format('Cursor of the ready lane of queue %s of tenant %s, class %s: every position at or below it is consumed.', $2, $1, p));
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_open(text, text) IS
  'Internal (queue_create, maintain): gives a queue its ready lanes, or returns those it has. Not granted to anyone.';

-- Takes a queue's lanes away: its entries and sequences dropped, its listed messages unlisted
-- (messages_claim finds them). queue_drop in both editions; false for a queue without lanes.
CREATE FUNCTION forgeyard.queue_lanes_close(tenant text, queue text)
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
    DELETE FROM forgeyard.queue_lanes e WHERE e.lane BETWEEN n * 8 AND n * 8 + 7;
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
-- were taken can still be (queue_lane_marks); the entries at or below the cursor deleted, up to max_rows a lane (a message still listed
-- there, which only a restore of a dump whose cursor was read after its rows can leave, is
-- unlisted: messages_claim finds it); and the queues without lanes given theirs. Returns the rows
-- it wrote.
CREATE FUNCTION forgeyard.queue_lanes_maintain(max_rows integer, tenant text DEFAULT NULL)
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
    lanes bigint[] := '{}';
    cursors bigint[] := '{}';
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
    -- (The next pass goes on after the last queue read here, or from the first when all were.)
    INSERT INTO forgeyard.queue_lane_marks (lane, pos, next_xid)
    VALUES (-1, CASE WHEN pg_catalog.cardinality(l_lanes) >= 64 * 6 THEN l_lanes[pg_catalog.cardinality(l_lanes)] / 8 ELSE 0 END,
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
                       FROM forgeyard.queue_lanes l LEFT JOIN forgeyard.messages m ON m.msg_id = l.msg_id
                      WHERE l.lane = x_lane AND l.pos > x_cursor
                      ORDER BY l.pos LIMIT $1
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
                  AND NOT EXISTS (SELECT 1 FROM forgeyard.queue_lanes l WHERE l.lane = x_lane AND l.pos >= expect) LOOP
                gap_lanes := gap_lanes || x_lane;
                gaps := gaps || expect;
                expect := expect + 1;
                n := n + 1;
            END LOOP;
            IF advance AND cur > x_cursor THEN
                PERFORM pg_catalog.setval(('forgeyard.lane_' || x_lane || '_cursor')::regclass, cur);
            END IF;
        END IF;
        -- (Entries are deleted only at or below a cursor set: one not moved is the sequence's.)
        IF NOT advance THEN
            cur := x_cursor;
        END IF;
        IF cur > 0 THEN
            lanes := lanes || x_lane;
            cursors := cursors || cur;
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
                INSERT INTO forgeyard.queue_lanes (lane, pos, msg_id)
                SELECT g.lane, g.pos, NULL FROM unnest(gap_lanes, gaps) g(lane, pos)
                 WHERE g.lane = x.lane AND g.pos <= x.mark_pos
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
    FOR i IN 1 .. pg_catalog.cardinality(lanes) LOOP
        WITH d AS (
            DELETE FROM forgeyard.queue_lanes l
             WHERE l.ctid = ANY (ARRAY(
                       SELECT y.ctid FROM forgeyard.queue_lanes y
                        WHERE y.lane = lanes[i] AND y.pos <= cursors[i]
                        ORDER BY y.pos LIMIT $1 FOR UPDATE SKIP LOCKED))
            RETURNING l.pos, l.msg_id),
         u AS (UPDATE forgeyard.messages m SET ready_pos = NULL FROM d
                WHERE m.msg_id = d.msg_id AND m.ready_pos = d.pos)
        SELECT pg_catalog.count(*) INTO n FROM d;
        done := done + n;
    END LOOP;
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
  'Internal: maintain()''s part of the ready lanes (cursors moved, gaps voided, consumed entries deleted, lanes given to queues without them). Not granted to anyone.';

REVOKE ALL ON FUNCTION forgeyard.queue_lanes_open(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION forgeyard.queue_lanes_close(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION forgeyard.queue_lanes_maintain(integer, text) FROM PUBLIC;
REVOKE ALL ON TABLE forgeyard.queue_lanes FROM PUBLIC;
REVOKE ALL ON TABLE forgeyard.queue_lane_marks FROM PUBLIC;
REVOKE ALL ON SEQUENCE forgeyard.queue_lane_numbers FROM PUBLIC;
