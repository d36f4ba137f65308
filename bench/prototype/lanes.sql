-- A prototype of the claim path of docs/queue-storage-design.md ("Lanes and cursors"), in plain
-- PL/pgSQL, to measure the design under a held snapshot before building it (bench/held_xmin.sh,
-- side "lanes"). Not the product: one lane, one segment (no rotation), no classes, bounds, retries
-- or timers. What it keeps of the design: ready entries appended with dense positions from the
-- lane's sequence, the cursor in a sequence moved by blind setval over the run of positions that
-- committed work consumed, message state in a row of its own read by primary key.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS lanes CASCADE;
CREATE SCHEMA lanes;
CREATE TABLE lanes.msgs (
    msg_id      bigint PRIMARY KEY,
    payload     bytea,
    ready_pos   bigint,        -- the lane position that lists it; NULL once claimed
    claim_token bigint,
    deadline    timestamptz,
    state       text NOT NULL  -- 'pending', 'acked'
);
CREATE TABLE lanes.ready (
    lane   integer NOT NULL,
    pos    bigint  NOT NULL,
    msg_id bigint  NOT NULL,
    PRIMARY KEY (lane, pos)
);
CREATE SEQUENCE lanes.msg_ids;
CREATE SEQUENCE lanes.lane_pos;                       -- dense: one lane
CREATE SEQUENCE lanes.lane_cursor MINVALUE 0 START 0;  -- every position <= it is consumed
CREATE SEQUENCE lanes.tokens;

CREATE FUNCTION lanes.enqueue(p bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    id bigint := pg_catalog.nextval('lanes.msg_ids');
    at bigint := pg_catalog.nextval('lanes.lane_pos');
BEGIN
    INSERT INTO lanes.msgs (msg_id, payload, ready_pos, state) VALUES (id, p, at, 'pending');
    INSERT INTO lanes.ready (lane, pos, msg_id) VALUES (1, at, id);
    RETURN id;
END $$;

-- Takes the first listed, unlocked entry above the cursor; moves the cursor over the run of
-- positions above it that committed work consumed, with no hole.
CREATE FUNCTION lanes.claim(OUT msg_id bigint, OUT claim_token bigint) LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
    run_end bigint;
    expect bigint;
    broken boolean := false;  -- the run ended: a hole, an entry still listed, or one we took
    e record;
BEGIN
    SELECT s.last_value INTO c FROM lanes.lane_cursor s;
    run_end := c;
    expect := c + 1;
    FOR e IN SELECT r.pos, r.msg_id AS id FROM lanes.ready r WHERE r.lane = 1 AND r.pos > c ORDER BY r.pos LOOP
        IF e.pos <> expect THEN
            broken := true;  -- a hole: a producer's entry not committed (or rolled back)
        END IF;
        expect := e.pos + 1;
        IF NOT EXISTS (SELECT FROM lanes.msgs m WHERE m.msg_id = e.id AND m.ready_pos = e.pos) THEN
            IF NOT broken THEN
                run_end := e.pos;  -- consumed by committed work
            END IF;
            CONTINUE;
        END IF;
        broken := true;
        UPDATE lanes.msgs m SET ready_pos = NULL, claim_token = pg_catalog.nextval('lanes.tokens'),
                                deadline = pg_catalog.clock_timestamp() + interval '30 seconds'
         WHERE m.msg_id = (SELECT l.msg_id FROM lanes.msgs l WHERE l.msg_id = e.id AND l.ready_pos = e.pos
                            FOR UPDATE SKIP LOCKED)
        RETURNING m.msg_id, m.claim_token INTO msg_id, claim_token;
        IF FOUND THEN
            EXIT;
        END IF;
    END LOOP;
    IF run_end > c THEN
        PERFORM pg_catalog.setval('lanes.lane_cursor', run_end);
    END IF;
END $$;

CREATE FUNCTION lanes.ack(id bigint, token bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE lanes.msgs m SET state = 'acked', claim_token = NULL
     WHERE m.msg_id = id AND m.claim_token = token AND m.state = 'pending';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale claim' USING ERRCODE = 'FY001';
    END IF;
END $$;
