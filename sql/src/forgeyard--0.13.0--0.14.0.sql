-- forgeyard 0.13.0 -> 0.14.0: the capacity counts' delta rows in four segments each, truncated by
-- maintain() once emptied (F17, step 3 of docs/queue-storage-design.md: "As built in 0.14.0";
-- docs/architecture.md, "Capacity slots"). queue_release_deltas and queue_admit_deltas become LIST
-- partitions by the ten-second period of the row's generation; their rows move, and the rows of a
-- library before 0.11.0 (gen NULL) are folded into their release rows. maintain() folds the
-- admission rows of quiet slots and truncates the emptied segments. A session that loaded the
-- 0.13.0 library before the update fails its acks and enqueues with an internal error until it
-- reconnects (docs/operations.md, "Upgrading").
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.14.0'" to load this file. \quit

-- Nothing is written into the old tables while their rows move.
LOCK TABLE forgeyard.queue_release_deltas, forgeyard.queue_admit_deltas IN ACCESS EXCLUSIVE MODE;
UPDATE forgeyard.queue_releases r
   SET released_messages = r.released_messages + d.m, released_bytes = r.released_bytes + d.b
  FROM (SELECT x.tenant_id, x.queue, x.slot, sum(x.released_messages)::bigint AS m, sum(x.released_bytes)::bigint AS b
          FROM forgeyard.queue_release_deltas x WHERE x.gen IS NULL GROUP BY x.tenant_id, x.queue, x.slot) d
 WHERE r.tenant_id = d.tenant_id AND r.queue = d.queue AND r.slot = d.slot;
ALTER TABLE forgeyard.queue_release_deltas RENAME TO queue_release_deltas_before_0_14;
ALTER INDEX forgeyard.queue_release_deltas_slot RENAME TO queue_release_deltas_before_0_14_slot;
ALTER TABLE forgeyard.queue_admit_deltas RENAME TO queue_admit_deltas_before_0_14;
ALTER INDEX forgeyard.queue_admit_deltas_pkey RENAME TO queue_admit_deltas_before_0_14_pkey;

CREATE TABLE forgeyard.queue_admit_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    gen               bigint  NOT NULL,
    admitted_messages bigint  NOT NULL DEFAULT 0,
    admitted_bytes    bigint  NOT NULL DEFAULT 0
) PARTITION BY LIST (((gen / 10) % 4));
COMMENT ON TABLE forgeyard.queue_admit_deltas IS
  'Messages and bytes admitted into a capacity slot in its current admission generation (queue_slots.admit_gen): one row per slot, folded into the slot''s queue_slots row by the first producer of the next generation, or by maintain(). In four segments (partitions) by the ten-second period of gen modulo 4 (segment N also takes -N, a clock before 1970), truncated by maintain() once emptied.';
CREATE TABLE forgeyard.queue_admit_deltas_0 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (0)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_1 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (1, -1)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_2 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (2, -2)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_3 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (3, -3)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_admit_deltas_0_slot ON forgeyard.queue_admit_deltas_0 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_1_slot ON forgeyard.queue_admit_deltas_1 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_2_slot ON forgeyard.queue_admit_deltas_2 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_3_slot ON forgeyard.queue_admit_deltas_3 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_slot ON forgeyard.queue_admit_deltas (tenant_id, queue, slot, gen);
COMMENT ON TABLE forgeyard.queue_admit_deltas_0 IS 'Segment 0 of queue_admit_deltas (the generations whose ten-second period is 0 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_1 IS 'Segment 1 of queue_admit_deltas (the generations whose ten-second period is 1 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_2 IS 'Segment 2 of queue_admit_deltas (the generations whose ten-second period is 2 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_3 IS 'Segment 3 of queue_admit_deltas (the generations whose ten-second period is 3 modulo 4): truncated by maintain() once it holds no row.';

CREATE TABLE forgeyard.queue_release_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL,
    released_bytes    bigint  NOT NULL,
    gen               bigint  NOT NULL
) PARTITION BY LIST (((gen / 100) % 4));
COMMENT ON TABLE forgeyard.queue_release_deltas IS
  'Messages and bytes that left a capacity slot (acked or dead-lettered), per generation of 100 ms: folded into the slot''s queue_releases row by the first ack of a later generation, or by maintain(). In four segments (partitions) by the ten-second period of gen modulo 4 (segment N also takes -N, a clock before 1970), truncated by maintain() once emptied.';
COMMENT ON COLUMN forgeyard.queue_release_deltas.gen IS
  'The generation the room was given back in: forgeyard.now() in units of 100 ms since 1970. An ack updates a row of its generation in place (or adds one when every row of it is held); the older generations are folded into the release row.';
CREATE TABLE forgeyard.queue_release_deltas_0 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (0)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_1 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (1, -1)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_2 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (2, -2)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_3 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (3, -3)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_release_deltas_0_slot ON forgeyard.queue_release_deltas_0 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_1_slot ON forgeyard.queue_release_deltas_1 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_2_slot ON forgeyard.queue_release_deltas_2 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_3_slot ON forgeyard.queue_release_deltas_3 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_slot ON forgeyard.queue_release_deltas (tenant_id, queue, slot, gen);
COMMENT ON TABLE forgeyard.queue_release_deltas_0 IS 'Segment 0 of queue_release_deltas (the generations whose ten-second period is 0 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_1 IS 'Segment 1 of queue_release_deltas (the generations whose ten-second period is 1 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_2 IS 'Segment 2 of queue_release_deltas (the generations whose ten-second period is 2 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_3 IS 'Segment 3 of queue_release_deltas (the generations whose ten-second period is 3 modulo 4): truncated by maintain() once it holds no row.';

SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_3', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_3', '');

INSERT INTO forgeyard.queue_release_deltas (tenant_id, queue, slot, released_messages, released_bytes, gen)
SELECT x.tenant_id, x.queue, x.slot, x.released_messages, x.released_bytes, x.gen
  FROM forgeyard.queue_release_deltas_before_0_14 x WHERE x.gen IS NOT NULL;
INSERT INTO forgeyard.queue_admit_deltas (tenant_id, queue, slot, gen, admitted_messages, admitted_bytes)
SELECT x.tenant_id, x.queue, x.slot, x.gen, x.admitted_messages, x.admitted_bytes
  FROM forgeyard.queue_admit_deltas_before_0_14 x;
-- The views that read the counts read the new tables (the same definitions, made again).
CREATE OR REPLACE VIEW forgeyard.queue_overview WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
)
SELECT q.tenant_id, q.queue, q.ordering, u.messages AS admitted_messages, q.max_messages, u.bytes AS admitted_bytes,
       q.max_bytes,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure
  FROM forgeyard.queues q JOIN used u USING (tenant_id, queue)
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR q.tenant_id IN (SELECT scope.tenant_id FROM scope);
CREATE OR REPLACE VIEW forgeyard.subscription_lag WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
), c AS MATERIALIZED (
    SELECT forgeyard.now() AS now
)
SELECT s.tenant_id, s.topic, s.subscription,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND (m.claim_token IS NULL OR m.visible_at <= c.now)) AS backlog,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > c.now) AS in_flight,
       c.now - min(m.enqueued_at) FILTER (WHERE m.state = 'pending') AS oldest_unacked_age,
       count(m.msg_id) FILTER (WHERE m.state = 'dead') AS dead,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure,
       max(m.finished_at) FILTER (WHERE m.state = 'acked') AS last_ack_at
  FROM forgeyard.subscriptions s
  JOIN forgeyard.queues q ON q.tenant_id = s.tenant_id AND q.queue = s.subscription
  JOIN used u ON u.tenant_id = s.tenant_id AND u.queue = s.subscription
  LEFT JOIN forgeyard.messages m ON m.tenant_id = s.tenant_id AND m.queue = s.subscription
 CROSS JOIN c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR s.tenant_id IN (SELECT scope.tenant_id FROM scope)
 GROUP BY s.tenant_id, s.topic, s.subscription, q.max_messages, q.max_bytes, u.messages, u.bytes, c.now;
-- (Out of the extension first, which also ends their registration for pg_dump.)
ALTER EXTENSION forgeyard DROP TABLE forgeyard.queue_release_deltas_before_0_14;
DROP TABLE forgeyard.queue_release_deltas_before_0_14;
ALTER EXTENSION forgeyard DROP TABLE forgeyard.queue_admit_deltas_before_0_14;
DROP TABLE forgeyard.queue_admit_deltas_before_0_14;

-- The delta rows of the capacity counts (queue_release_deltas, queue_admit_deltas) are updated in
-- place by every ack and every enqueue: under a held snapshot each leaves a dead version. Both
-- tables are LIST partitions by the ten-second period of the row's generation, modulo 4: a
-- generation's rows, and every version of them, are in one segment, which nobody writes once its
-- period is over and its rows are folded. maintain() folds the quiet slots' admission rows
-- (queue_admit_fold) and truncates the emptied segments (queue_usage_segments_maintain), so
-- those versions leave in bulk whatever the snapshot.

-- The admission rows of generations before the current second folded into their slot rows
-- (queue_slots), for slots no producer holds (each locked FOR UPDATE SKIP LOCKED): a slot no
-- producer enqueues into any more keeps no row in a segment, which could then never be truncated.
-- The rows are read in a statement after the lock, which in READ COMMITTED sees what a producer
-- committed before it (a row made since the first statement's snapshot). Up to max_rows slots of
-- `tenant` (NULL: every tenant); only in READ COMMITTED (a transaction snapshot could miss such a
-- row: 0). Returns the slots folded. Both editions' maintain(). (22004 for a NULL max_rows,
-- 22023 for one below 1: maintain() checks it first.)
CREATE FUNCTION forgeyard.queue_admit_fold(max_rows integer, tenant text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g bigint := pg_catalog.floor(pg_catalog.date_part('epoch', forgeyard.now()))::bigint;
    ts text[];
    qs text[];
    ss integer[];
    n bigint;
BEGIN
    IF max_rows IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'max_rows must not be NULL';
    ELSIF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_rows must be positive';
    END IF;
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    WITH l AS (SELECT a.tenant_id, a.queue, a.slot FROM forgeyard.queue_slots a
                WHERE (tenant IS NULL OR a.tenant_id = tenant) AND a.admit_gen < g
                LIMIT max_rows FOR UPDATE OF a SKIP LOCKED)
    SELECT pg_catalog.array_agg(l.tenant_id), pg_catalog.array_agg(l.queue), pg_catalog.array_agg(l.slot)
      INTO ts, qs, ss FROM l;
    IF ts IS NULL THEN
        RETURN 0;
    END IF;
    WITH k AS (SELECT * FROM unnest(ts, qs, ss) k(tenant_id, queue, slot)),
         d AS (DELETE FROM forgeyard.queue_admit_deltas d USING k, forgeyard.queue_slots a
                WHERE a.tenant_id = k.tenant_id AND a.queue = k.queue AND a.slot = k.slot
                  AND d.tenant_id = k.tenant_id AND d.queue = k.queue AND d.slot = k.slot AND d.gen = a.admit_gen
               RETURNING d.tenant_id, d.queue, d.slot, d.admitted_messages, d.admitted_bytes)
    UPDATE forgeyard.queue_slots a
       SET admitted_messages = a.admitted_messages + coalesce(d.admitted_messages, 0),
           admitted_bytes = a.admitted_bytes + coalesce(d.admitted_bytes, 0), admit_gen = NULL
      FROM k LEFT JOIN d USING (tenant_id, queue, slot)
     WHERE a.tenant_id = k.tenant_id AND a.queue = k.queue AND a.slot = k.slot AND a.admit_gen < g;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_admit_fold(integer, text) IS
  'Internal: maintain()''s fold of admission rows of past generations into their slot rows (slots no producer holds; READ COMMITTED only). Not granted to anyone.';

-- The segments of the capacity counts truncated: per table, the first segment other than the
-- current period's that has pages but no row (every row of it folded; the dead versions its
-- updates left are what goes). Its ACCESS EXCLUSIVE lock is taken with lock_timeout 50 ms in a
-- subtransaction; on 55P03 (or a deadlock) it is skipped until the next pass, and no other
-- segment of the table is tried in this one (a pass waits 50 ms a table at most). The check is made
-- again under the lock, where every writer of the segment has ended: a row of a transaction that
-- committed since the first check keeps it. At most one segment a table a pass, last in
-- maintain() (the lock is held to its commit). Only in READ COMMITTED (0). Returns the segments
-- truncated.
CREATE FUNCTION forgeyard.queue_usage_segments_maintain()
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    open_seg integer := pg_catalog.abs(pg_catalog.trunc(pg_catalog.date_part('epoch', forgeyard.now()) / 10)::bigint % 4)::integer;
    tried boolean;
    saved text;
    seg_name text;
    t text;
    live boolean;
    n bigint := 0;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    saved := pg_catalog.current_setting('lock_timeout');
    FOREACH t IN ARRAY ARRAY['queue_release_deltas', 'queue_admit_deltas'] LOOP
        tried := false;
        FOR j IN 0 .. 3 LOOP
            EXIT WHEN tried;
            CONTINUE WHEN j = open_seg;
            seg_name := t || '_' || j;
            CONTINUE WHEN pg_catalog.pg_relation_size(('forgeyard.' || seg_name)::regclass) = 0;
            EXECUTE format('SELECT EXISTS (SELECT FROM forgeyard.%I)', seg_name) INTO live;
            CONTINUE WHEN live;
            -- A transaction idle while it holds a lock on the segment waits for its client, not for
            -- a lock: the lock would time out. Skipped without waiting (where its state is visible:
            -- a role without pg_read_all_stats sees other roles' as NULL, and waits the 50 ms).
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                                    JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
                                   WHERE l.relation OPERATOR(pg_catalog.=) ('forgeyard.' || seg_name)::regclass
                                     AND l.granted AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
                                     AND a.state LIKE 'idle in transaction%');
            tried := true;  -- (one lock a table a pass: one wait of 50 ms at most)
            BEGIN
                PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
                EXECUTE format('LOCK TABLE forgeyard.%I IN ACCESS EXCLUSIVE MODE', seg_name);
                EXECUTE format('SELECT EXISTS (SELECT FROM forgeyard.%I)', seg_name) INTO live;
                IF NOT live THEN
                    EXECUTE format('TRUNCATE forgeyard.%I', seg_name);
                    n := n + 1;
                END IF;
                PERFORM pg_catalog.set_config('lock_timeout', saved, true);
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                NULL;  -- (the subtransaction's end restored lock_timeout)
            END;
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_usage_segments_maintain() IS
  'Internal: maintain()''s truncation of the capacity counts'' emptied segments (queue_release_deltas_N, queue_admit_deltas_N; skipped when the lock is not had within 50 ms; READ COMMITTED only). Not granted to anyone.';

-- maintain()'s pass over the lanes' segments skips one that an idle transaction holds, as the
-- counts' pass does (it would only wait out its lock_timeout).
CREATE OR REPLACE FUNCTION forgeyard.queue_lane_segments_maintain()
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
        -- A transaction idle while it holds a lock on the segment waits for its client: the lock
        -- would time out (0.14.0; where its state is visible to this role).
        CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                                JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
                               WHERE l.relation OPERATOR(pg_catalog.=) ('forgeyard.' || seg_name)::regclass
                                 AND l.granted AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
                                 AND a.state LIKE 'idle in transaction%');
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

REVOKE ALL ON forgeyard.queue_release_deltas, forgeyard.queue_admit_deltas FROM PUBLIC;
REVOKE ALL ON forgeyard.queue_release_deltas_0, forgeyard.queue_release_deltas_1, forgeyard.queue_release_deltas_2, forgeyard.queue_release_deltas_3, forgeyard.queue_admit_deltas_0, forgeyard.queue_admit_deltas_1, forgeyard.queue_admit_deltas_2, forgeyard.queue_admit_deltas_3 FROM PUBLIC;
REVOKE ALL ON FUNCTION forgeyard.queue_admit_fold(integer, text), forgeyard.queue_usage_segments_maintain() FROM PUBLIC;
