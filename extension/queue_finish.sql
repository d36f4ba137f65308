-- The PL/pgSQL edition of extension/queue_finish.cpp: ack, nack and extend, one by one and in
-- batches, and ack_and_claim. Whether a claim token may still act is core/delivery.cpp's rule.

-- @helper
-- The ids and tokens of a batch (deliveries_arg), flattened: equal in length, without NULLs.
CREATE FUNCTION forgeyard_pl.queue_deliveries_arg(msg_ids bigint[], claim_tokens bigint[],
                                                  OUT ids bigint[], OUT tokens bigint[])
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF msg_ids IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'msg_ids must not be NULL';
    END IF;
    IF claim_tokens IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'claim_tokens must not be NULL';
    END IF;
    ids := ARRAY(SELECT unnest(msg_ids));
    tokens := ARRAY(SELECT unnest(claim_tokens));
    IF cardinality(ids) <> cardinality(tokens) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'msg_ids and claim_tokens must have the same length';
    END IF;
    IF array_position(ids, NULL) IS NOT NULL OR array_position(tokens, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@',
            MESSAGE = 'msg_ids and claim_tokens must not contain NULL';
    END IF;
END
$$;

-- core::throw_stale_claim: the FY001 of ack, nack and extend.
CREATE FUNCTION forgeyard_pl.queue_stale_claim(msg_id bigint, claim_token bigint)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
        MESSAGE = format('claim token %s is not the current delivery of message %s', claim_token, msg_id),
        DETAIL = 'the visibility ran out and the message was claimed again, or it was nacked; stop work on it';
END
$$;

-- ack for one or many deliveries of queue q (a forgeyard.queues row), then their room back
-- (queue_apply): all or nothing. First every pair that is the current delivery (pending, this
-- tenant and queue, this token) in one statement, its rows locked in msg_id order (waiting, and
-- re-checked if they changed meanwhile) and deleted, or kept as acked for retain_acked; then each
-- pair it did not finish, in the order given, locked FOR UPDATE: a no-op for a message already
-- acked, dead or gone, FY001 for any other token.
CREATE FUNCTION forgeyard_pl.queue_ack(q record, ids bigint[], tokens bigint[], at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    keep boolean := q.retain_acked_usecs > 0;
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    n integer := cardinality(ids);
    r record;
    d record;
    i integer;
    done bigint[] := '{}';
    s_slots integer[] := '{}';
    s_bytes bigint[] := '{}';
    s_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
    IF n = 1 THEN
        IF keep THEN
            UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL, ready_pos = NULL
             WHERE m.msg_id = ids[1] AND m.claim_token = tokens[1] AND m.state = 'pending'
               AND m.tenant_id = q.tenant_id AND m.queue = q.queue
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
        ELSE
            DELETE FROM forgeyard.messages m
             WHERE m.msg_id = ids[1] AND m.claim_token = tokens[1] AND m.state = 'pending'
               AND m.tenant_id = q.tenant_id AND m.queue = q.queue
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
        END IF;
        IF FOUND AND NOT keep AND r.resource IS NULL AND q.ordering <> 'partition' AND NOT key_limit THEN
            -- its room back to its slot
            PERFORM forgeyard_pl.queue_give_back_slot(q.tenant_id, q.queue, r.slot, 1, r.bytes,
                current_setting('transaction_isolation') IN ('repeatable read', 'serializable'));
            RETURN;
        END IF;
        IF FOUND THEN
            done := ARRAY[r.msg_id];
            s_slots := ARRAY[r.slot::integer];
            s_bytes := ARRAY[r.bytes];
            s_keys := ARRAY[r.key];
            IF r.resource IS NOT NULL THEN
                o_res := ARRAY[r.resource];
                o_parts := ARRAY[r.part];
                o_kinds := ARRAY[0];
            END IF;
        END IF;
    ELSIF n > 1 THEN
        FOR r IN
            WITH l AS (SELECT m.msg_id AS id FROM forgeyard.messages m
                         JOIN unnest(ids, tokens) x(id, tok) ON m.msg_id = x.id AND m.claim_token = x.tok
                        WHERE m.msg_id = ANY (ids) AND m.state = 'pending' AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                        ORDER BY m.msg_id FOR UPDATE OF m)
            DELETE FROM forgeyard.messages m USING l
             WHERE m.msg_id = l.id AND NOT keep
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part
        LOOP
            done := done || r.msg_id;
            s_slots := s_slots || r.slot::integer;
            s_bytes := s_bytes || r.bytes;
            s_keys := s_keys || r.key;
            IF r.resource IS NOT NULL THEN
                o_res := o_res || r.resource;
                o_parts := o_parts || r.part;
                o_kinds := o_kinds || 0;
            END IF;
        END LOOP;
        IF keep THEN
            FOR r IN
                WITH l AS (SELECT m.msg_id AS id FROM forgeyard.messages m
                             JOIN unnest(ids, tokens) x(id, tok) ON m.msg_id = x.id AND m.claim_token = x.tok
                            WHERE m.msg_id = ANY (ids) AND m.state = 'pending' AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                            ORDER BY m.msg_id FOR UPDATE OF m)
                UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL, ready_pos = NULL
                  FROM l WHERE m.msg_id = l.id
                RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                          m.resource, coalesce(m.resource_part, 0)::integer AS part
            LOOP
                done := done || r.msg_id;
                s_slots := s_slots || r.slot::integer;
                s_bytes := s_bytes || r.bytes;
                s_keys := s_keys || r.key;
                IF r.resource IS NOT NULL THEN
                    o_res := o_res || r.resource;
                    o_parts := o_parts || r.part;
                    o_kinds := o_kinds || 0;
                END IF;
            END LOOP;
        END IF;
    END IF;
    -- The pairs the first statement did not finish, one by one.
    FOR i IN 1 .. CASE WHEN cardinality(done) = n THEN 0 ELSE n END LOOP
        CONTINUE WHEN ids[i] = ANY (done);
        SELECT m.state, m.claim_token, m.slot, m.bytes,
               CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
               m.resource, coalesce(m.resource_part, 0)::integer AS part INTO d
          FROM forgeyard.messages m WHERE m.msg_id = ids[i] AND m.tenant_id = q.tenant_id AND m.queue = q.queue
           FOR UPDATE OF m;
        CONTINUE WHEN NOT FOUND OR d.state <> 'pending';
        IF d.claim_token IS DISTINCT FROM tokens[i] THEN
            PERFORM forgeyard_pl.queue_stale_claim(ids[i], tokens[i]);
        END IF;
        IF keep THEN
            UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL, ready_pos = NULL WHERE m.msg_id = ids[i];
        ELSE
            DELETE FROM forgeyard.messages m WHERE m.msg_id = ids[i];
        END IF;
        done := done || ids[i];
        s_slots := s_slots || d.slot::integer;
        s_bytes := s_bytes || d.bytes;
        s_keys := s_keys || d.key;
        IF d.resource IS NOT NULL THEN
            o_res := o_res || d.resource;
            o_parts := o_parts || d.part;
            o_kinds := o_kinds || 0;
        END IF;
    END LOOP;
    IF cardinality(s_slots) > 0 OR cardinality(o_res) > 0 THEN
        PERFORM forgeyard_pl.queue_apply(q, s_slots, s_bytes, s_keys, o_res, o_parts, o_kinds, at_time);
    END IF;
END
$$;

-- nack of one delivery of queue q (a forgeyard.queues row): FY001 unless the token is the current
-- delivery; then dead-lettered (permanent, or max_attempts reached) or retried after exponential
-- backoff with full jitter, delayed to its window's end when over the retry budget (no attempt
-- charged). Returns the outcome, and what the caller hands to queue_apply: for a dead letter its
-- slot, bytes and key (o_slot NULL for a retry); for a delivery bound to a resource the resource,
-- its part and the outcome kind (1 failure, 2 neutral for a permanent nack).
CREATE FUNCTION forgeyard_pl.queue_nack_one(q record, msg_id bigint, claim_token bigint, error text, permanent boolean,
                                            at_time timestamptz,
                                            OUT o_outcome text, OUT o_slot integer, OUT o_bytes bigint, OUT o_key text,
                                            OUT o_resource text, OUT o_part integer, OUT o_kind integer)
    LANGUAGE plpgsql
    AS $$
DECLARE
    d record;
    v_attempt integer;
    v_ceiling bigint;
    cap bigint := q.backoff_max_usecs;
    i integer;
    delay bigint;
    visible timestamptz;
    budget record;
BEGIN
    SELECT m.state, m.claim_token AS token, m.attempt, m.slot, m.bytes,
           CASE WHEN q.max_in_flight_per_key IS NOT NULL THEN m.fairness_key
                WHEN q.ordering = 'partition' THEN m.partition_key END AS key,
           m.resource, coalesce(m.resource_part, 0)::integer AS part INTO d
      FROM forgeyard.messages m
     WHERE m.msg_id = queue_nack_one.msg_id AND m.tenant_id = q.tenant_id AND m.queue = q.queue
       FOR UPDATE OF m;
    IF NOT FOUND OR d.state <> 'pending' OR d.token IS DISTINCT FROM claim_token THEN
        PERFORM forgeyard_pl.queue_stale_claim(msg_id, claim_token);
    END IF;
    -- For the resource: a failure, unless the message's own fault.
    o_resource := d.resource;
    o_part := d.part;
    o_kind := CASE WHEN permanent THEN 2 ELSE 1 END;
    IF permanent OR d.attempt >= q.max_attempts THEN
        UPDATE forgeyard.messages m
           SET state = 'dead', claim_token = NULL, finished_at = at_time, last_error = error, ready_pos = NULL,
               error_class = CASE WHEN permanent THEN 'permanent' ELSE 'max_attempts' END, is_head = false,
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN m.payload END
         WHERE m.msg_id = queue_nack_one.msg_id;
        o_outcome := 'dead';
        o_slot := d.slot;
        o_bytes := d.bytes;
        o_key := d.key;
        RETURN;
    END IF;
    -- core::backoff_full_jitter: uniform in [0, min(backoff_max, backoff_base * 2^(attempt - 1))].
    v_attempt := greatest(1, least(d.attempt, 1000));
    delay := 0;
    IF q.backoff_base_usecs > 0 AND cap > 0 THEN
        v_ceiling := q.backoff_base_usecs;
        i := 1;
        WHILE i < v_attempt AND v_ceiling < cap LOOP
            v_ceiling := CASE WHEN v_ceiling > cap / 2 THEN cap ELSE v_ceiling * 2 END;
            i := i + 1;
        END LOOP;
        v_ceiling := least(v_ceiling, cap);
        delay := trunc((v_ceiling + 1)::double precision * random())::bigint;
    END IF;
    visible := at_time + forgeyard_pl.queue_usecs_interval(delay);
    -- Over the queue's retry budget the retry waits for the window's end (no attempt charged).
    budget := forgeyard_pl.queue_admit_retry(q, at_time);
    IF NOT budget.admitted THEN
        visible := greatest(visible, budget.not_before);
    END IF;
    UPDATE forgeyard.messages m SET claim_token = NULL, claimed_by = NULL, visible_at = visible, ready_pos = NULL, last_error = error
     WHERE m.msg_id = queue_nack_one.msg_id;
    o_outcome := 'retry';
END
$$;

-- extend of one delivery of queue q: FY001 unless the token is the current delivery and its
-- visibility has not run out; then visible until at_time + visibility.
CREATE FUNCTION forgeyard_pl.queue_extend_one(q record, msg_id bigint, claim_token bigint, visibility bigint,
                                              at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    d record;
BEGIN
    SELECT m.state, m.claim_token AS token, m.visible_at INTO d FROM forgeyard.messages m
     WHERE m.msg_id = queue_extend_one.msg_id AND m.tenant_id = q.tenant_id AND m.queue = q.queue
       FOR UPDATE OF m;
    IF NOT FOUND OR d.state <> 'pending' OR d.token IS DISTINCT FROM claim_token OR d.visible_at <= at_time THEN
        PERFORM forgeyard_pl.queue_stale_claim(msg_id, claim_token);
    END IF;
    -- (Extended for longer than 60 s, core::max_listed_claim_usecs, it leaves its lane.)
    UPDATE forgeyard.messages m SET visible_at = at_time + forgeyard_pl.queue_usecs_interval(visibility),
                                    ready_pos = CASE WHEN visibility <= 60000000 THEN m.ready_pos END
     WHERE m.msg_id = queue_extend_one.msg_id;
END
$$;

-- @body fy_ack_and_claim
DECLARE
    q forgeyard.queues%ROWTYPE;
    f record;
    v_consumer text;
    d record;
    n integer;
    vis bigint;
    v_now timestamptz;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_consumer := forgeyard_pl.name_arg('consumer', consumer, 256);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    n := forgeyard_pl.queue_max_messages_arg(max_messages);
    vis := forgeyard_pl.queue_visibility_arg(visibility, q.visibility_usecs);
    v_now := forgeyard.now();
    -- The lanes read before the acks write, which moves their cursors (the claim after the acks
    -- cannot: it would count this transaction's own acks as consumed); the claim starts from them.
    f := forgeyard_pl.queue_first_candidates(q, n + 4, v_now);
    IF cardinality(d.ids) > 0 THEN
        PERFORM forgeyard_pl.queue_ack(q, d.ids, d.tokens, v_now);
    END IF;
    RETURN QUERY
    SELECT c.c_msg_id, c.c_event_id, c.c_partition_key,
           (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1],
           c.c_attempt, c.c_claim_token, c.c_payload, c.c_enqueued_at
      FROM forgeyard_pl.queue_claim_from(q, v_consumer, n, vis, v_now, f.ids, f.positions) c
     WHERE NOT c.c_lapsed
     ORDER BY c.c_priority, c.c_order, c.c_msg_id;
END

-- @body fy_ack
-- The ack of the current delivery in the common case (its room back to one slot, no key, no
-- resource) inline; everything else through forgeyard_pl.queue_ack (same order, same rows).
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_now timestamptz;
    r record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF msg_id IS NULL THEN
        PERFORM forgeyard_pl.not_null('msg_id', false);
    END IF;
    IF claim_token IS NULL THEN
        PERFORM forgeyard_pl.not_null('claim_token', false);
    END IF;
    v_now := forgeyard.now();
    IF q.retain_acked_usecs > 0 OR q.ordering = 'partition' OR q.max_in_flight_per_key IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_ack(q, ARRAY[msg_id], ARRAY[claim_token], v_now);
        RETURN;
    END IF;
    DELETE FROM forgeyard.messages m
     WHERE m.msg_id = ack.msg_id AND m.claim_token = ack.claim_token AND m.state = 'pending'
       AND m.tenant_id = q.tenant_id AND m.queue = q.queue
    RETURNING m.slot, m.bytes, m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
    IF NOT FOUND THEN
        -- not the current delivery: a no-op for a message already finished or gone, else FY001
        PERFORM forgeyard_pl.queue_ack(q, ARRAY[msg_id], ARRAY[claim_token], v_now);
        RETURN;
    END IF;
    IF r.resource IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_apply(q, ARRAY[r.slot::integer], ARRAY[r.bytes], ARRAY[NULL::text],
                                         ARRAY[r.resource], ARRAY[r.part], ARRAY[0], v_now);
        RETURN;
    END IF;
    PERFORM forgeyard_pl.queue_give_back_slot(q.tenant_id, q.queue, r.slot, 1, r.bytes,
        current_setting('transaction_isolation') IN ('repeatable read', 'serializable'));
END

-- @body fy_ack_batch
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    IF cardinality(d.ids) > 0 THEN
        PERFORM forgeyard_pl.queue_ack(q, d.ids, d.tokens, forgeyard.now());
    END IF;
END

-- @body fy_nack
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_error text;
    r record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('msg_id', msg_id IS NOT NULL);
    PERFORM forgeyard_pl.not_null('claim_token', claim_token IS NOT NULL);
    v_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    r := forgeyard_pl.queue_nack_one(q, msg_id, claim_token, v_error, coalesce(permanent, false), forgeyard.now());
    IF r.o_slot IS NOT NULL OR r.o_resource IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_apply(q,
            CASE WHEN r.o_slot IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_slot] END,
            CASE WHEN r.o_slot IS NULL THEN '{}'::bigint[] ELSE ARRAY[r.o_bytes] END,
            CASE WHEN r.o_slot IS NULL THEN '{}'::text[] ELSE ARRAY[r.o_key] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::text[] ELSE ARRAY[r.o_resource] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_part] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_kind] END,
            forgeyard.now());
    END IF;
    RETURN r.o_outcome;
END

-- @body fy_nack_batch
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
    v_error text;
    v_permanent boolean;
    v_now timestamptz;
    r record;
    i integer;
    outcomes text[] := '{}';
    s_slots integer[] := '{}';
    s_bytes bigint[] := '{}';
    s_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    v_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    v_permanent := coalesce(permanent, false);
    v_now := forgeyard.now();
    FOR i IN 1 .. cardinality(d.ids) LOOP
        r := forgeyard_pl.queue_nack_one(q, d.ids[i], d.tokens[i], v_error, v_permanent, v_now);
        outcomes := outcomes || r.o_outcome;
        IF r.o_slot IS NOT NULL THEN
            s_slots := s_slots || r.o_slot;
            s_bytes := s_bytes || r.o_bytes;
            s_keys := s_keys || r.o_key;
        END IF;
        IF r.o_resource IS NOT NULL THEN
            o_res := o_res || r.o_resource;
            o_parts := o_parts || r.o_part;
            o_kinds := o_kinds || r.o_kind;
        END IF;
    END LOOP;
    IF cardinality(s_slots) > 0 OR cardinality(o_res) > 0 THEN
        PERFORM forgeyard_pl.queue_apply(q, s_slots, s_bytes, s_keys, o_res, o_parts, o_kinds, v_now);
    END IF;
    RETURN QUERY SELECT x.id, x.outcome FROM unnest(d.ids, outcomes) WITH ORDINALITY x(id, outcome, o) ORDER BY x.o;
END

-- @body fy_extend
DECLARE
    q forgeyard.queues%ROWTYPE;
    vis bigint;
    v_now timestamptz;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('msg_id', msg_id IS NOT NULL);
    PERFORM forgeyard_pl.not_null('claim_token', claim_token IS NOT NULL);
    vis := forgeyard_pl.duration_arg('visibility', visibility, 2592000000000);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_extend_one(q, msg_id, claim_token, vis, v_now);
    RETURN v_now + forgeyard_pl.queue_usecs_interval(vis);
END

-- @body fy_extend_batch
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
    vis bigint;
    v_now timestamptz;
    i integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    vis := forgeyard_pl.duration_arg('visibility', visibility, 2592000000000);
    v_now := forgeyard.now();
    FOR i IN 1 .. cardinality(d.ids) LOOP
        PERFORM forgeyard_pl.queue_extend_one(q, d.ids[i], d.tokens[i], vis, v_now);
    END LOOP;
    RETURN v_now + forgeyard_pl.queue_usecs_interval(vis);
END
