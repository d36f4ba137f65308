-- The ready lanes (sql/src/forgeyard.sql, 0.10.0; docs/architecture.md, "Ready lanes"): the
-- statements both editions run on them (the C++ edition's in extension/queue_lanes.cpp), and the
-- PL/pgSQL edition's candidates of a claim.

-- @statement lane_ends
-- Per class of a queue with lanes ($1: its queues.lanes): the lane, the last position taken in it
-- and its cursor (0 before the first; not read for a lane never listed in). (The statements'
-- aliases are not names the PL/pgSQL bodies that inline them use.)
SELECT lane_l.class, lane_l.lane, lane_l.last_pos,
       CASE WHEN lane_l.last_pos > 0
            THEN coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || lane_l.lane || '_cursor')::regclass), 0)
            ELSE 0 END AS cursor
  FROM (SELECT lane_p::integer AS class, $1 * 8 + lane_p AS lane,
               coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || ($1 * 8 + lane_p))::regclass), 0)
                   AS last_pos
          FROM pg_catalog.generate_series(0, 5) lane_p OFFSET 0) lane_l

-- @statement lane_walk
-- The entries of lane $1 above position $2, in position order, at most $4: whether each is
-- consumed (its message gone, finished, or no longer listed there: what moves the cursor) and
-- whether it is ready at $3 (a pending head listed there and visible: a candidate, fresh or, when
-- `lapsed`, delivered before and its claim lapsed).
SELECT lane_e.pos, lane_e.msg_id,
       (lane_m.msg_id IS NULL OR lane_m.ready_pos IS DISTINCT FROM lane_e.pos OR lane_m.state <> 'pending'
        OR NOT lane_m.is_head) AS consumed,
       coalesce(lane_m.ready_pos = lane_e.pos AND lane_m.state = 'pending' AND lane_m.is_head
                AND lane_m.visible_at <= $3, false) AS ready,
       lane_m.visible_at, coalesce(lane_m.attempt > 0, false) AS lapsed
  FROM forgeyard.queue_lane_entries lane_e LEFT JOIN forgeyard.messages lane_m ON lane_m.msg_id = lane_e.msg_id
 WHERE lane_e.lane = $1 AND lane_e.pos > $2
 ORDER BY lane_e.pos, lane_e.msg_id NULLS LAST LIMIT $4

-- @statement lane_advance
-- Moves lane $1's cursor to $2 (the caller read it lower): not transactional, and a slower claim
-- may set it lower again, which is safe (every value set is a run of consumed positions).
SELECT pg_catalog.setval(('forgeyard.lane_' || $1 || '_cursor')::regclass, $2)

-- @statement lane_list
-- Lists the messages $2 (ids, not yet inserted) in lane $1: an entry each at the lane's next
-- position, taken inside the INSERT, in the open segment (the column's default), by a transaction
-- that has its id already (maintain() voids only positions whose producers have ended, so none
-- conflicts; one that did would be left without a listing, and messages_claim would find it).
INSERT INTO forgeyard.queue_lane_entries AS lane_e (lane, pos, msg_id)
SELECT $1, pg_catalog.nextval(('forgeyard.lane_' || $1)::regclass), lane_u.id
  FROM pg_catalog.unnest($2::bigint[]) lane_u(id)
    ON CONFLICT DO NOTHING
RETURNING lane_e.msg_id AS listed_id, lane_e.pos AS listed_pos

-- @statement due_candidates
-- The pending heads without a listing that are visible at $3 (delayed, retried, promoted,
-- redriven, fanned out, enqueued before the queue had lanes), up to $4 per class, from
-- messages_claim: one index range per class.
SELECT lane_c.msg_id AS due_id, lane_c.priority::integer AS due_priority, lane_c.visible_at AS due_visible_at
  FROM pg_catalog.generate_series(0, 5) lane_p,
       LATERAL (SELECT lane_m.msg_id, lane_m.priority, lane_m.visible_at FROM forgeyard.messages lane_m
                 WHERE lane_m.tenant_id = $1 AND lane_m.queue = $2 AND lane_m.priority = lane_p::smallint
                   AND lane_m.state = 'pending' AND lane_m.is_head AND lane_m.pass IS NULL AND lane_m.ready_pos IS NULL
                   AND lane_m.visible_at <= $3
                 ORDER BY lane_m.visible_at, lane_m.msg_id LIMIT $4) lane_c

-- @helper
-- queue::candidates: the messages a claim in queue `q` (not a fair one) tries, in no order (the
-- caller orders them by class, then visible_at, then msg_id): per lane with entries above its
-- cursor, up to `want` ready entries, with their positions; then up to `want` ready heads without
-- a listing per class (due_candidates), position NULL. Moves each lane's cursor over the run of
-- consumed positions it read when `advance` (the transaction has written nothing: what it sees
-- consumed is committed). `lanes` and `due`: which of the two it reads. A lapsed delivery still
-- listed (delivered before, ready again) that the walk meets leaves its lane, after the cursors
-- moved, if no one holds it (queue_unlist_lapsed), and is found with the heads without a listing
-- (claim in queue_claim.cpp: the same in the C++ edition).
CREATE FUNCTION forgeyard_pl.queue_candidates(q record, want integer, at_time timestamptz, advance boolean,
                                             lanes boolean DEFAULT true, due boolean DEFAULT true)
    RETURNS TABLE (c_msg_id bigint, c_priority integer, c_pos bigint, c_visible_at timestamptz)
    LANGUAGE plpgsql
    AS $$
DECLARE
    l record;
    e record;
    got integer;
    seen integer;
    after bigint;
    expect bigint;
    run_end bigint;
    lapsed_ids bigint[];
    lapsed_pos bigint[];
BEGIN
    IF lanes AND q.lanes IS NOT NULL THEN
        FOR l IN @statement.lane_ends(q.lanes)@ LOOP
            CONTINUE WHEN l.last_pos <= l.cursor;
            got := 0;
            after := l.cursor;
            expect := l.cursor + 1;
            run_end := l.cursor;
            LOOP
                seen := 0;
                FOR e IN @statement.lane_walk(l.lane, after, at_time, 256)@ LOOP
                    seen := seen + 1;
                    -- (A second entry of a position, a void beside a real one, ordered after it: skipped.)
                    CONTINUE WHEN seen > 1 AND e.pos = after;
                    after := e.pos;
                    IF expect IS NOT NULL AND e.pos = expect AND e.consumed THEN
                        run_end := e.pos;
                        expect := expect + 1;
                    ELSE
                        expect := NULL;
                    END IF;
                    IF e.ready AND e.lapsed THEN
                        lapsed_ids := coalesce(lapsed_ids, '{}') || e.msg_id;
                        lapsed_pos := coalesce(lapsed_pos, '{}') || e.pos;
                    ELSIF e.ready THEN
                        c_msg_id := e.msg_id; c_priority := l.class; c_pos := e.pos; c_visible_at := e.visible_at;
                        RETURN NEXT;
                        got := got + 1;
                        EXIT WHEN got >= want;
                    END IF;
                END LOOP;
                EXIT WHEN seen < 256 OR got >= want;
            END LOOP;
            IF advance AND run_end > l.cursor THEN
                PERFORM FROM (@statement.lane_advance(l.lane, run_end)@) s;
            END IF;
        END LOOP;
        IF lapsed_ids IS NOT NULL THEN
            PERFORM forgeyard_pl.queue_unlist_lapsed(q, lapsed_ids, lapsed_pos, at_time);
        END IF;
    END IF;
    IF NOT due THEN
        RETURN;
    END IF;
    FOR e IN @statement.due_candidates(q.tenant_id, q.queue, at_time, want)@ LOOP
        c_msg_id := e.due_id; c_priority := e.due_priority; c_pos := NULL; c_visible_at := e.due_visible_at;
        RETURN NEXT;
    END LOOP;
END
$$;

-- ack_and_claim's first read of the lanes, before its acks write (queue_claim takes it as its first
-- candidates from the lanes): the read that moves the cursors, which the claim after the acks
-- cannot (it would count the transaction's own acks as consumed). NULL, and the claim reads the
-- lanes itself, for a queue without lanes or a fair one, or when the transaction has written
-- already.
CREATE FUNCTION forgeyard_pl.queue_first_candidates(q record, want integer, at_time timestamptz,
                                                    OUT ids bigint[], OUT positions bigint[])
    LANGUAGE plpgsql
    AS $$
DECLARE
    plan_mode text;
    seqscan text;
BEGIN
    IF q.lanes IS NULL OR q.fairness OR pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN;
    END IF;
    -- (The walk's statements run their generic plans, as in the claim: planned with the call's
    -- values, they were planned again on every call.)
    plan_mode := current_setting('plan_cache_mode');
    seqscan := current_setting('enable_seqscan');
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true);
    SELECT coalesce(array_agg(c.c_msg_id), '{}'), coalesce(array_agg(c.c_pos), '{}') INTO ids, positions
      FROM forgeyard_pl.queue_candidates(q, want, at_time, true, true, false) c;
    PERFORM set_config('plan_cache_mode', plan_mode, true), set_config('enable_seqscan', seqscan, true);
END
$$;

-- The lapsed deliveries a claim's walk met still listed in their lane (ids, at their positions)
-- that are ready at at_time and that no one holds: they leave the lane (queue_candidates).
CREATE FUNCTION forgeyard_pl.queue_unlist_lapsed(q record, ids bigint[], positions bigint[], at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE forgeyard.messages x SET ready_pos = NULL
     WHERE x.ctid = ANY (ARRAY(SELECT m.ctid FROM unnest(ids, positions) k(id, pos)
                                 JOIN forgeyard.messages m ON m.msg_id = k.id
                                WHERE k.pos IS NOT NULL AND m.ready_pos = k.pos AND m.attempt > 0
                                  AND m.state = 'pending' AND m.is_head AND m.pass IS NULL
                                  AND m.visible_at <= at_time AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                                  FOR UPDATE OF m SKIP LOCKED));
END
$$;
