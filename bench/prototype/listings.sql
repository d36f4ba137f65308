-- A second prototype of docs/queue-storage-design.md: the open question's leading candidate,
-- "state lives with the listing", in plain PL/pgSQL, measured by bench/held_xmin.sh (side
-- "listings"). Not the product: one lane, K = 4 segments as LIST partitions (no rotation in this
-- run: the queue is filled before it), no classes, bounds or delays. What it keeps of the design:
--   - a listing (ready entry) carries the message's content and is never updated;
--   - its claim is a receipt, its end a closure: rows of `events`, unique per listing and kind, in
--     the listing's own segment; nothing is updated or deleted, so nothing leaves a dead version;
--   - the cursor (a sequence, blind setval) passes the run of listings closed by committed work;
--   - a claim walks the listings above the cursor: closed ones, the ones in flight (a lapsed one
--     is closed and listed again at the end of the lane), and takes the first unclaimed one,
--     locking it FOR UPDATE SKIP LOCKED and inserting its receipt (ON CONFLICT: taken already).
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS listings CASCADE;
CREATE SCHEMA listings;
CREATE TABLE listings.entries (
    seg     integer NOT NULL,
    lane    integer NOT NULL,
    pos     bigint  NOT NULL,
    msg_id  bigint  NOT NULL,
    attempt integer NOT NULL,
    payload bytea,
    PRIMARY KEY (seg, lane, pos)
) PARTITION BY LIST (seg);
CREATE TABLE listings.events (
    seg      integer NOT NULL,
    lane     integer NOT NULL,
    pos      bigint  NOT NULL,
    kind     text    NOT NULL,  -- 'claim' (a receipt) or 'close' (acked, lapsed: listed again)
    token    bigint,
    deadline timestamptz,
    outcome  text,
    PRIMARY KEY (seg, lane, pos, kind)
) PARTITION BY LIST (seg);
DO $$
BEGIN
    FOR s IN 0..3 LOOP
        EXECUTE format('CREATE TABLE listings.entries_%s PARTITION OF listings.entries FOR VALUES IN (%s)', s, s);
        EXECUTE format('CREATE TABLE listings.events_%s PARTITION OF listings.events FOR VALUES IN (%s)', s, s);
        EXECUTE format('CREATE INDEX ON listings.events_%s (token) WHERE kind = ''claim''', s);
    END LOOP;
END $$;
-- The lane's order across segments: positions are the lane's, whatever the segment.
CREATE INDEX entries_lane ON listings.entries (lane, pos);
CREATE SEQUENCE listings.msg_ids;
CREATE SEQUENCE listings.lane_pos;
CREATE SEQUENCE listings.lane_cursor MINVALUE 0 START 0;
CREATE SEQUENCE listings.open_seg MINVALUE 0 START 0;
CREATE SEQUENCE listings.tokens;

CREATE FUNCTION listings.list(id bigint, tries integer, p bytea) RETURNS void LANGUAGE sql AS $$
    INSERT INTO listings.entries (seg, lane, pos, msg_id, attempt, payload)
    SELECT (SELECT s.last_value FROM listings.open_seg s)::integer, 1, pg_catalog.nextval('listings.lane_pos'), id, tries, p
$$;

CREATE FUNCTION listings.enqueue(p bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    id bigint := pg_catalog.nextval('listings.msg_ids');
BEGIN
    PERFORM listings.list(id, 0, p);
    RETURN id;
END $$;

-- enable_seqscan off: the queue is filled with no events yet, and a plan cached while events_0 is
-- empty would scan it whole on every call until autovacuum's ANALYZE invalidates it; jit off: the
-- cost enable_seqscan gives the one plan of a sequence read would have it JIT-compiled every call.
CREATE FUNCTION listings.claim(OUT msg_id bigint, OUT claim_token bigint) LANGUAGE plpgsql
    SET enable_seqscan = off SET jit = off AS $$
DECLARE
    c bigint;
    run_end bigint;
    expect bigint;
    broken boolean := false;
    e record;
    claimed record;
    closed boolean;
    tok bigint;
BEGIN
    SELECT s.last_value INTO c FROM listings.lane_cursor s;
    run_end := c;
    expect := c + 1;
    -- LIMIT: without it the generic plan of a cursor sorts the lane. A prototype's shortcut: with
    -- more than 1,000 closed listings above an unclosed one (a crashed consumer's claim, a hole) no
    -- claim reaches a ready listing (docs/queue-storage-design.md, the open questions).
    FOR e IN SELECT n.seg, n.pos, n.msg_id AS id, n.attempt, n.payload FROM listings.entries n
              WHERE n.lane = 1 AND n.pos > c ORDER BY n.pos LIMIT 1000 LOOP
        IF e.pos <> expect THEN
            broken := true;  -- a hole
        END IF;
        expect := e.pos + 1;
        SELECT v.deadline INTO claimed FROM listings.events v
         WHERE v.seg = e.seg AND v.lane = 1 AND v.pos = e.pos AND v.kind = 'claim';
        IF FOUND THEN
            closed := EXISTS (SELECT FROM listings.events v
                               WHERE v.seg = e.seg AND v.lane = 1 AND v.pos = e.pos AND v.kind = 'close');
            IF closed THEN
                IF NOT broken THEN
                    run_end := e.pos;
                END IF;
                CONTINUE;
            END IF;
            broken := true;  -- in flight
            IF claimed.deadline < pg_catalog.clock_timestamp() THEN
                -- Lapsed: close it (unless its ack or another claim's rescue did) and list it again.
                INSERT INTO listings.events (seg, lane, pos, kind, outcome)
                VALUES (e.seg, 1, e.pos, 'close', 'lapsed') ON CONFLICT DO NOTHING;
                IF FOUND THEN
                    PERFORM listings.list(e.id, e.attempt + 1, e.payload);
                END IF;
            END IF;
            CONTINUE;
        END IF;
        broken := true;
        PERFORM FROM listings.entries n WHERE n.seg = e.seg AND n.lane = 1 AND n.pos = e.pos FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            CONTINUE;  -- another claim holds it
        END IF;
        tok := pg_catalog.nextval('listings.tokens') * 4 + e.seg;
        INSERT INTO listings.events (seg, lane, pos, kind, token, deadline)
        VALUES (e.seg, 1, e.pos, 'claim', tok, pg_catalog.clock_timestamp() + interval '30 seconds')
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            msg_id := e.id;
            claim_token := tok;
            EXIT;
        END IF;
    END LOOP;
    IF run_end > c THEN
        PERFORM pg_catalog.setval('listings.lane_cursor', run_end);
    END IF;
END $$;

CREATE FUNCTION listings.ack(id bigint, token bigint) RETURNS void LANGUAGE plpgsql
    SET enable_seqscan = off SET jit = off AS $$
DECLARE
    r record;
BEGIN
    SELECT v.seg, v.pos INTO r FROM listings.events v
     WHERE v.seg = (ack.token % 4)::integer AND v.token = ack.token AND v.kind = 'claim';
    IF FOUND THEN
        INSERT INTO listings.events (seg, lane, pos, kind, outcome)
        VALUES (r.seg, 1, r.pos, 'close', 'acked') ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    RAISE EXCEPTION 'stale claim' USING ERRCODE = 'FY001';
END $$;
