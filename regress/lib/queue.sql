-- Named messages and claims, table snapshots and counters, for the queue files of regress/.
-- Included with \ir after lib/err.sql; never run on its own (pg_prove runs regress/*.sql).

-- Named messages: the msg_id each enqueue returned. A procedure, so that CALL prints nothing
-- into the TAP stream.
CREATE TEMP TABLE m (k text PRIMARY KEY, msg_id bigint NOT NULL);
CREATE PROCEDURE pg_temp.enq(k text, t text, q text, payload bytea, event_id uuid DEFAULT NULL,
                             partition_key text DEFAULT NULL, priority text DEFAULT 'interactive',
                             delay interval DEFAULT '0')
    LANGUAGE sql AS $$ INSERT INTO m VALUES ($1, forgeyard.enqueue($2, $3, $4, $5, $6, $7, $8)) $$;
CREATE FUNCTION pg_temp.id(k text) RETURNS bigint LANGUAGE sql AS $$ SELECT m.msg_id FROM m WHERE m.k = $1 $$;
CREATE FUNCTION pg_temp.ids(VARIADIC ks text[]) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(m.msg_id ORDER BY u.o), '{}') FROM unnest($1) WITH ORDINALITY u(k, o) JOIN m ON m.k = u.k
$$;

-- Every claim answer, named, in delivery order; pg_temp.claim returns the msg_ids in that order.
CREATE TEMP TABLE cl (k text, ord bigint, msg_id bigint, event_id uuid, partition_key text, priority text,
                      attempt integer, claim_token bigint, payload bytea, enqueued_at timestamptz);
CREATE FUNCTION pg_temp.claim(k text, t text, q text, consumer text, n integer DEFAULT 1, vis interval DEFAULT NULL)
    RETURNS bigint[] LANGUAGE sql AS $$
    WITH c AS (
        INSERT INTO cl
        SELECT $1, c.ord, c.msg_id, c.event_id, c.partition_key, c.priority, c.attempt, c.claim_token, c.payload, c.enqueued_at
          FROM forgeyard.claim($2, $3, $4, $5, $6)
               WITH ORDINALITY AS c(msg_id, event_id, partition_key, priority, attempt, claim_token, payload, enqueued_at, ord)
        RETURNING cl.ord, cl.msg_id)
    SELECT coalesce(array_agg(c.msg_id ORDER BY c.ord), '{}') FROM c
$$;
CREATE FUNCTION pg_temp.ack_claim(k text, t text, q text, consumer text, ids bigint[], tokens bigint[], n integer DEFAULT 1)
    RETURNS bigint[] LANGUAGE sql AS $$
    WITH c AS (
        INSERT INTO cl
        SELECT $1, c.ord, c.msg_id, c.event_id, c.partition_key, c.priority, c.attempt, c.claim_token, c.payload, c.enqueued_at
          FROM forgeyard.ack_and_claim($2, $3, $4, $5, $6, $7)
               WITH ORDINALITY AS c(msg_id, event_id, partition_key, priority, attempt, claim_token, payload, enqueued_at, ord)
        RETURNING cl.ord, cl.msg_id)
    SELECT coalesce(array_agg(c.msg_id ORDER BY c.ord), '{}') FROM c
$$;
-- The claim token a named claim got for a named message.
CREATE FUNCTION pg_temp.tok(claim_k text, msg_k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT cl.claim_token FROM cl WHERE cl.k = $1 AND cl.msg_id = pg_temp.id($2)
$$;
CREATE FUNCTION pg_temp.toks(claim_k text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(cl.claim_token ORDER BY cl.ord), '{}') FROM cl WHERE cl.k = $1
$$;
CREATE FUNCTION pg_temp.claimed(claim_k text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(cl.msg_id ORDER BY cl.ord), '{}') FROM cl WHERE cl.k = $1
$$;

-- Enqueue into t / q with class until n messages went in or the class is refused (FY020);
-- returns how many went in.
CREATE FUNCTION pg_temp.fill(t text, q text, class text, n integer, payload bytea DEFAULT 'x') RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE i integer := 0;
BEGIN
    WHILE i < n LOOP
        BEGIN
            PERFORM forgeyard.enqueue(t, q, payload, NULL, NULL, class);
        EXCEPTION WHEN SQLSTATE 'FY020' THEN
            RETURN i;
        END;
        i := i + 1;
    END LOOP;
    RETURN i;
END $$;

-- The stored row of a named message.
CREATE FUNCTION pg_temp.msg(k text)
    RETURNS TABLE (state text, attempt integer, claim_token bigint, claimed_by text, visible_at timestamptz,
                   last_error text, error_class text, payload bytea, finished_at timestamptz, is_head boolean)
    LANGUAGE sql AS $$
    SELECT x.state, x.attempt, x.claim_token, x.claimed_by, x.visible_at, x.last_error, x.error_class, x.payload,
           x.finished_at, x.is_head
      FROM forgeyard.messages x WHERE x.msg_id = pg_temp.id($1)
$$;
-- Live (pending) messages of a queue, and everything it holds.
CREATE FUNCTION pg_temp.pending(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM forgeyard.messages x WHERE x.tenant_id = $1 AND x.queue = $2 AND x.state = 'pending'
$$;
CREATE FUNCTION pg_temp.stored(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM forgeyard.messages x WHERE x.tenant_id = $1 AND x.queue = $2
$$;
-- Messages of room a queue's slots got back: their release rows and release deltas (an ack adds
-- to a delta row of its generation, folded into the release row later: 0.11.0).
CREATE FUNCTION pg_temp.released(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT ((SELECT COALESCE(sum(r.released_messages), 0) FROM forgeyard.queue_releases r WHERE r.tenant_id = $1 AND r.queue = $2)
          + (SELECT COALESCE(sum(d.released_messages), 0) FROM forgeyard.queue_release_deltas d WHERE d.tenant_id = $1 AND d.queue = $2))::bigint
$$;
-- Messages a queue's slots admitted: their rows and their admission generation rows (a producer
-- adds to its slot's row of the generation, folded into the slot row later: 0.12.0).
CREATE FUNCTION pg_temp.admitted(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT ((SELECT COALESCE(sum(a.admitted_messages), 0) FROM forgeyard.queue_slots a WHERE a.tenant_id = $1 AND a.queue = $2)
          + (SELECT COALESCE(sum(g.admitted_messages), 0) FROM forgeyard.queue_admit_deltas g WHERE g.tenant_id = $1 AND g.queue = $2))::bigint
$$;
CREATE FUNCTION pg_temp.options(t text, q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT l.options FROM forgeyard.queue_list($1) l WHERE l.queue = $2
$$;
-- Everything the queue tables (and the inbox) hold, for "nothing changed" checks.
CREATE FUNCTION pg_temp.snap() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'queues', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue), '[]') FROM forgeyard.queues x),
        'slots', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue, x.slot), '[]') FROM forgeyard.queue_slots x),
        'releases', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue, x.slot), '[]')
                       FROM forgeyard.queue_releases x),
        'release_deltas', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x), '[]')
                             FROM forgeyard.queue_release_deltas x),
        'admit_deltas', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue, x.slot, x.gen), '[]')
                           FROM forgeyard.queue_admit_deltas x),
        'messages', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.msg_id), '[]') FROM forgeyard.messages x),
        'events', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue, x.event_id), '[]')
                     FROM forgeyard.queue_events x),
        'partitions', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.queue, x.partition_key), '[]')
                         FROM forgeyard.queue_partitions x),
        'inbox', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.consumer, x.event_id), '[]') FROM forgeyard.inbox x),
        'idempotency', (SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.scope, x.key), '[]')
                          FROM forgeyard.idempotency_keys x))
$$;
CREATE TEMP TABLE snaps (k text PRIMARY KEY, s jsonb);
