-- forgeyard 0.11.0 -> 0.11.1: maintain()'s pass over the ready lanes goes on, after a pass that went
-- round to the first queues, from the last queue it read (it started again from the first).
-- (The PL/pgSQL edition's step also carries its claim's bodies: the lane walk planned once per
-- session, the heads without a listing read in the claim's own statement.)
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.11.1'" to load this file. \quit

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
