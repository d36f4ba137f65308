-- The PL/pgSQL edition of extension/queue_claim.cpp: claim (and the claim half of ack_and_claim),
-- and the dead-lettering of deliveries that lapsed on every attempt.

-- @helper
-- queue::claim: up to max_messages deliveries of queue `q` (a forgeyard.queues row) for consumer,
-- each invisible to others for `visibility` microseconds from at_time, with a new claim token. A
-- claim for longer than 60 s (core::max_listed_claim_usecs) takes the message out of its lane.
-- Returns every row it handed out or dead-lettered: c_lapsed marks a delivery that lapsed on every
-- attempt (dead-lettered here, as a nack after max_attempts; its row carries what it was, payload
-- included, for a caller that owns what it stood for); the others are the deliveries. Delivery
-- order is ORDER BY c_priority, c_order, c_msg_id (c_order: a fair queue's pass, 0 elsewhere).
--
-- Without resources configured for the tenant and without aging, the claim is one statement (as
-- queue_claim.cpp's claim_sql, which claim_plan explains): per class, highest first, an index range
-- scan of messages_claim (messages_fair for a fair queue, by pass) that stops at the first message
-- not yet visible, each row locked FOR UPDATE SKIP LOCKED and updated with its token; run again
-- for the rest of the limit only when deliveries that lapsed on every attempt took places in it.
-- (The rows picked are updated by msg_id, not by tuple id as in claim_sql: a row whose newer
-- version the lock followed is then updated in that version, as the C++ edition's direct path
-- does, where a tuple id the statement's snapshot cannot see would leave it locked, unclaimed.)
-- Otherwise one message at a time, in the same order (aging: the oldest ready heads of each class
-- ordered by the class each has aged into), each locked SKIP LOCKED before its resource is asked:
-- the parts of a resource's state are locked SKIP LOCKED at their first use and charged
-- (queue_part_lock, queue_part_admit); only when every part is held by others, and this claim holds
-- no resource row, is the starting part waited for, if the transaction may wait for it.
CREATE FUNCTION forgeyard_pl.queue_claim(q record, consumer text, max_messages integer, visibility bigint,
                                         at_time timestamptz)
    RETURNS TABLE (c_msg_id bigint, c_event_id uuid, c_partition_key text, c_priority integer, c_attempt integer,
                   c_claim_token bigint, c_payload bytea, c_enqueued_at timestamptz, c_order bigint, c_lapsed boolean)
    LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN QUERY SELECT * FROM forgeyard_pl.queue_claim_from(q, consumer, max_messages, visibility, at_time, NULL, NULL);
END
$$;

-- queue_claim, its first candidates from the lanes given (first_ids, first_pos: what
-- ack_and_claim read before its acks), or read here when they are NULL.
CREATE FUNCTION forgeyard_pl.queue_claim_from(q record, consumer text, max_messages integer, visibility bigint,
                                              at_time timestamptz, first_ids bigint[], first_pos bigint[])
    RETURNS TABLE (c_msg_id bigint, c_event_id uuid, c_partition_key text, c_priority integer, c_attempt integer,
                   c_claim_token bigint, c_payload bytea, c_enqueued_at timestamptz, c_order bigint, c_lapsed boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_until timestamptz := at_time + forgeyard_pl.queue_usecs_interval(visibility);
    plan_mode text;
    seqscan text;
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    got integer := 0;
    lim integer;
    n integer;
    r record;
    l_ids bigint[];
    l_slots integer[];
    l_bytes bigint[];
    l_keys text[];
    k_ids bigint[];
    k_pos bigint[];
    extra integer := 4;
    advance boolean := pg_current_xact_id_if_assigned() IS NULL;
BEGIN
    IF q.aging_usecs > 0 OR EXISTS (SELECT FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id) THEN
        RETURN QUERY SELECT * FROM forgeyard_pl.queue_claim_each(q, consumer, max_messages, visibility, at_time);
        RETURN;
    END IF;
    -- The claim statement runs its one generic plan, planned with sequential scans ruled out,
    -- as the C++ edition plans it (pg::Planning::generic): never planned again per call, and
    -- its shape does not depend on how big the queue was when it was planned.
    plan_mode := current_setting('plan_cache_mode');
    seqscan := current_setting('enable_seqscan');
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true);
    LOOP
        lim := max_messages - got;
        n := 0;
        IF NOT q.fairness THEN
            -- The candidates (ready entries of the lanes, ready heads without a listing), each
            -- locked SKIP LOCKED and still ready where it was found (EvalPlanQual re-checks the
            -- newest version), in delivery order.
            -- (ack_and_claim read the lanes before its acks: first_ids; the heads without a
            -- listing are read now, after them, by the statement queue_candidates would run.)
            IF first_ids IS NULL THEN
                SELECT coalesce(array_agg(c.c_msg_id ORDER BY c.c_priority, c.c_visible_at, c.c_msg_id), '{}'),
                       coalesce(array_agg(c.c_pos ORDER BY c.c_priority, c.c_visible_at, c.c_msg_id), '{}')
                  INTO k_ids, k_pos
                  FROM (SELECT * FROM forgeyard_pl.queue_candidates(q, lim + extra, at_time, advance, true, true)
                        UNION ALL
                        SELECT f.id, m.priority::integer, f.pos, m.visible_at
                          FROM unnest(first_ids, first_pos) f(id, pos) JOIN forgeyard.messages m ON m.msg_id = f.id) c;
            ELSE
                SELECT coalesce(array_agg(c.id ORDER BY c.priority, c.visible_at, c.id), '{}'),
                       coalesce(array_agg(c.pos ORDER BY c.priority, c.visible_at, c.id), '{}')
                  INTO k_ids, k_pos
                  FROM (SELECT f.id, m.priority::integer AS priority, f.pos, m.visible_at
                          FROM unnest(first_ids, first_pos) f(id, pos) JOIN forgeyard.messages m ON m.msg_id = f.id
                        UNION ALL
                        SELECT due.due_id, due.due_priority, NULL, due.due_visible_at
                          FROM (@statement.due_candidates(q.tenant_id, q.queue, at_time, lim + extra)@) due) c;
            END IF;
            advance := false;
            first_ids := NULL;
            FOR r IN
                WITH picked AS (
                    SELECT m.msg_id FROM unnest(k_ids, k_pos) WITH ORDINALITY k(id, pos, o)
                      JOIN forgeyard.messages m ON m.msg_id = k.id
                     WHERE m.state = 'pending' AND m.is_head AND m.pass IS NULL AND m.visible_at <= at_time
                       AND m.ready_pos IS NOT DISTINCT FROM k.pos AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                     ORDER BY k.o LIMIT lim FOR UPDATE OF m SKIP LOCKED)
                UPDATE forgeyard.messages x
                   SET claim_token = nextval('forgeyard.claim_tokens'), attempt = x.attempt + 1, visible_at = v_until,
                       claimed_by = consumer, ready_pos = CASE WHEN visibility <= 60000000 THEN x.ready_pos END
                  FROM picked WHERE x.msg_id = picked.msg_id
                RETURNING x.msg_id, x.event_id, x.partition_key, x.priority, x.attempt, x.claim_token,
                          COALESCE(x.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                                                  ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                                                WHERE s.tenant_id = x.tenant_id AND s.subscription = x.queue
                                                  AND e.event_id = x.event_id)) AS payload,
                          x.payload AS own_payload, x.enqueued_at, x.slot, x.bytes,
                          CASE WHEN key_limit THEN x.fairness_key ELSE x.partition_key END AS key, 0::bigint AS pass
            LOOP
                n := n + 1;
                c_msg_id := r.msg_id; c_event_id := r.event_id; c_partition_key := r.partition_key;
                c_priority := r.priority; c_attempt := r.attempt; c_claim_token := r.claim_token;
                c_enqueued_at := r.enqueued_at; c_order := r.pass;
                c_lapsed := r.attempt > q.max_attempts;
                IF c_lapsed THEN
                    c_payload := r.own_payload;
                    IF l_ids IS NULL THEN
                        l_ids := '{}'; l_slots := '{}'; l_bytes := '{}'; l_keys := '{}';
                    END IF;
                    l_ids := l_ids || r.msg_id;
                    l_slots := l_slots || r.slot::integer;
                    l_bytes := l_bytes || r.bytes;
                    l_keys := l_keys || r.key;
                ELSE
                    c_payload := r.payload;
                    got := got + 1;
                END IF;
                RETURN NEXT;
            END LOOP;
        ELSE
            -- A fair queue's classes are in pass order (messages_fair), where a row not yet
            -- visible says nothing of the rows after it: it is passed over, not a stop.
            FOR r IN
                WITH picked AS (
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 0::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c0
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 1::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c1
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 2::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c2
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 3::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c3
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 4::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c4
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 5::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c5
                    LIMIT lim)
                UPDATE forgeyard.messages x
                   SET claim_token = nextval('forgeyard.claim_tokens'), attempt = x.attempt + 1, visible_at = v_until,
                       claimed_by = consumer
                  FROM picked WHERE x.msg_id = picked.msg_id
                RETURNING x.msg_id, x.event_id, x.partition_key, x.priority, x.attempt, x.claim_token,
                          COALESCE(x.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                                                  ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                                                WHERE s.tenant_id = x.tenant_id AND s.subscription = x.queue
                                                  AND e.event_id = x.event_id)) AS payload,
                          x.payload AS own_payload, x.enqueued_at, x.slot, x.bytes,
                          CASE WHEN key_limit THEN x.fairness_key ELSE x.partition_key END AS key, x.pass
            LOOP
                n := n + 1;
                c_msg_id := r.msg_id; c_event_id := r.event_id; c_partition_key := r.partition_key;
                c_priority := r.priority; c_attempt := r.attempt; c_claim_token := r.claim_token;
                c_enqueued_at := r.enqueued_at; c_order := r.pass;
                c_lapsed := r.attempt > q.max_attempts;
                IF c_lapsed THEN
                    c_payload := r.own_payload;
                    IF l_ids IS NULL THEN
                        l_ids := '{}'; l_slots := '{}'; l_bytes := '{}'; l_keys := '{}';
                    END IF;
                    l_ids := l_ids || r.msg_id;
                    l_slots := l_slots || r.slot::integer;
                    l_bytes := l_bytes || r.bytes;
                    l_keys := l_keys || r.key;
                ELSE
                    c_payload := r.payload;
                    got := got + 1;
                END IF;
                RETURN NEXT;
            END LOOP;
        END IF;
        -- Lapsed deliveries took places in the limit: the rest of it again (they are no longer
        -- visible, so not taken twice). A few more candidates per lane than the limit are read (each
        -- costs a message lookup): others may have taken them since, or hold them now; while the
        -- claim is short and the list may have been cut (it had as many as were asked for), they are
        -- read again from the cursors with eight times more.
        EXIT WHEN got >= max_messages;
        IF n < lim THEN
            EXIT WHEN q.fairness OR extra >= 134217728 OR cardinality(k_ids) < lim + extra;
            extra := extra * 8;
        END IF;
    END LOOP;
    PERFORM set_config('plan_cache_mode', plan_mode, true), set_config('enable_seqscan', seqscan, true);
    IF l_ids IS NOT NULL THEN
        UPDATE forgeyard.messages y
           SET state = 'dead', claim_token = NULL, finished_at = at_time, is_head = false, ready_pos = NULL,
               last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN y.payload END
         WHERE y.msg_id = ANY (l_ids);
        PERFORM forgeyard_pl.queue_apply(q, l_slots, l_bytes, l_keys, '{}', '{}', '{}', at_time);
    END IF;
END
$$;

-- The claim one message at a time (queue_claim with resources configured for the tenant, or
-- aging): the same rows as queue_claim returns.
CREATE FUNCTION forgeyard_pl.queue_claim_each(q record, consumer text, max_messages integer, visibility bigint,
                                         at_time timestamptz)
    RETURNS TABLE (c_msg_id bigint, c_event_id uuid, c_partition_key text, c_priority integer, c_attempt integer,
                   c_claim_token bigint, c_payload bytea, c_enqueued_at timestamptz, c_order bigint, c_lapsed boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_until timestamptz := at_time + forgeyard_pl.queue_usecs_interval(visibility);
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    resources boolean := EXISTS (SELECT FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id);
    got integer := 0;
    m forgeyard.messages%ROWTYPE;
    cur refcursor;
    cur_open boolean := false;
    p integer := 0;
    ai integer := 0;
    a_ids bigint[];
    a_prios integer[];
    a_pos bigint[];
    want integer := max_messages + 32;
    tried bigint[] := '{}';
    mp integer;
    v_attempt integer;
    v_token bigint;
    v_payload bytea;
    allowed boolean;
    transfer boolean;
    admitted_part integer;
    -- the resources this claim met, and per part of their state (index (resource - 1) * 8 + part + 1)
    h_res text[] := '{}';
    h_cfg forgeyard.flow_resources[] := '{}';
    h_n integer[] := '{}';
    h_start integer[] := '{}';
    p_tried boolean[] := '{}';
    p_found boolean[] := '{}';
    p_locked boolean[] := '{}';
    holding boolean := false;
    cfg forgeyard.flow_resources%ROWTYPE;
    found_cfg boolean;
    ri integer;
    np integer;
    k integer;
    i integer;
    ix integer;
    lk integer;
    refusing integer;
    any_found boolean;
    -- what left the live queue (deliveries that lapsed on every attempt)
    l_ids bigint[] := '{}';
    l_slots integer[] := '{}';
    l_bytes bigint[] := '{}';
    l_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
    LOOP
        EXIT WHEN got >= max_messages;
        -- the next candidate, locked SKIP LOCKED and still ready in its class
        IF NOT q.fairness THEN
            ai := ai + 1;
            IF a_ids IS NULL OR (ai > cardinality(a_ids) AND cardinality(a_ids) >= want) THEN
                -- The candidates (queue_candidates: ready entries of the lanes, ready heads without
                -- a listing), by the class each has aged into (its own without aging), then by age;
                -- read again with eight times more, past those tried, while the last read may have
                -- been cut (a resource may refuse many in a row, and others may hold some).
                IF a_ids IS NOT NULL THEN
                    tried := tried || a_ids;
                    want := want * 8;
                END IF;
                SELECT coalesce(array_agg(x.c_msg_id ORDER BY x.aged, x.c_visible_at, x.c_msg_id), '{}'),
                       coalesce(array_agg(x.c_priority ORDER BY x.aged, x.c_visible_at, x.c_msg_id), '{}'),
                       coalesce(array_agg(x.c_pos ORDER BY x.aged, x.c_visible_at, x.c_msg_id), '{}')
                  INTO a_ids, a_prios, a_pos
                  FROM (SELECT c.c_msg_id, c.c_priority, c.c_pos, c.c_visible_at,
                               CASE WHEN q.aging_usecs <= 0 OR c.c_priority <= 2 OR c.waited < q.aging_usecs THEN c.c_priority
                                    WHEN c.waited / q.aging_usecs >= c.c_priority - 2 THEN 2
                                    ELSE c.c_priority - (c.waited / q.aging_usecs)::integer END AS aged
                          FROM (SELECT k.*, forgeyard_pl.usecs(at_time) - forgeyard_pl.usecs(k.c_visible_at) AS waited
                                  FROM forgeyard_pl.queue_candidates(q, want, at_time,
                                                                     pg_current_xact_id_if_assigned() IS NULL) k
                                 WHERE NOT (k.c_msg_id = ANY (tried))) c) x;
                ai := 1;
            END IF;
            EXIT WHEN ai > cardinality(a_ids);
            SELECT y.* INTO m FROM forgeyard.messages y
             WHERE y.msg_id = a_ids[ai] AND y.state = 'pending' AND y.is_head AND y.priority = a_prios[ai]::smallint
               AND y.pass IS NULL AND y.ready_pos IS NOT DISTINCT FROM a_pos[ai]
               AND y.visible_at <= at_time AND y.tenant_id = q.tenant_id AND y.queue = q.queue
             FOR UPDATE OF y SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            mp := a_prios[ai];
        ELSE
            IF NOT cur_open THEN
                EXIT WHEN p > 5;
                OPEN cur NO SCROLL FOR
                    SELECT y.* FROM forgeyard.messages y
                     WHERE y.tenant_id = q.tenant_id AND y.queue = q.queue AND y.priority = p::smallint
                       AND y.state = 'pending' AND y.is_head AND y.pass IS NOT NULL AND y.visible_at <= at_time
                     ORDER BY y.pass, y.msg_id FOR UPDATE OF y SKIP LOCKED;
                cur_open := true;
            END IF;
            FETCH cur INTO m;
            IF NOT FOUND THEN
                CLOSE cur;
                cur_open := false;
                p := p + 1;
                CONTINUE;
            END IF;
            mp := p;
        END IF;
        -- hand it out, dead-letter it (it lapsed on every attempt), or leave it ready (its
        -- resource refuses it: no attempt charged)
        v_attempt := m.attempt + 1;
        admitted_part := -1;
        allowed := true;
        IF resources AND v_attempt <= q.max_attempts AND m.resource IS NOT NULL THEN
            transfer := m.claim_token IS NOT NULL;
            ri := array_position(h_res, m.resource);
            IF ri IS NULL THEN
                SELECT f.* INTO cfg FROM forgeyard.flow_resources f
                 WHERE f.tenant_id = q.tenant_id AND f.resource = m.resource;
                found_cfg := FOUND;
                h_res := h_res || m.resource;
                ri := cardinality(h_res);
                h_cfg := h_cfg || cfg;
                IF found_cfg THEN
                    h_n := h_n || cfg.parts::integer;
                    h_start := h_start || CASE WHEN cfg.parts > 1 THEN forgeyard_pl.queue_rotate('part', cfg.parts) ELSE 0 END;
                ELSE
                    h_n := h_n || 0;
                    h_start := h_start || 0;
                END IF;
                p_tried := p_tried || array_fill(false, ARRAY[8]);
                p_found := p_found || array_fill(false, ARRAY[8]);
                p_locked := p_locked || array_fill(false, ARRAY[8]);
            END IF;
            np := h_n[ri];
            IF np > 0 THEN
                allowed := false;
                refusing := -1;
                any_found := false;
                FOR k IN 0 .. np - 1 LOOP
                    i := (h_start[ri] + k) % np;
                    ix := (ri - 1) * 8 + i + 1;
                    -- Parts are taken without waiting: one another claim holds is passed over.
                    IF NOT p_tried[ix] THEN
                        p_tried[ix] := true;
                        lk := forgeyard_pl.queue_part_lock(q.tenant_id, m.resource, i, np,
                                                          forgeyard_pl.queue_part_config(h_cfg[ri], i), false, at_time);
                        p_found[ix] := lk > 0;
                        p_locked[ix] := lk = 2;
                        holding := holding OR lk = 2;
                    END IF;
                    any_found := any_found OR p_found[ix];
                    CONTINUE WHEN NOT p_locked[ix];
                    IF forgeyard_pl.queue_part_admit(q.tenant_id, m.resource, i,
                                                     forgeyard_pl.queue_part_config(h_cfg[ri], i), at_time, transfer) THEN
                        allowed := true;
                        IF NOT transfer THEN
                            admitted_part := i;
                        END IF;
                        EXIT;
                    END IF;
                    IF refusing < 0 THEN
                        refusing := i;
                    END IF;
                END LOOP;
                IF NOT allowed AND NOT any_found THEN
                    allowed := true;  -- configured a moment ago, its state not yet visible: not limited
                END IF;
                IF NOT allowed THEN
                    -- Every part is held by others and this claim holds no resource row: the
                    -- starting part is waited for, if the transaction may wait for it.
                    i := h_start[ri];
                    ix := (ri - 1) * 8 + i + 1;
                    IF refusing < 0 AND NOT holding AND forgeyard_pl.queue_held_may_wait(
                           forgeyard_pl.queue_held_key(q.tenant_id, m.resource, 'p', i)) THEN
                        IF p_found[ix] THEN
                            p_tried[ix] := true;
                            lk := forgeyard_pl.queue_part_lock(q.tenant_id, m.resource, i, np,
                                                              forgeyard_pl.queue_part_config(h_cfg[ri], i), true, at_time);
                            p_found[ix] := lk > 0;
                            p_locked[ix] := lk = 2;
                            holding := holding OR lk = 2;
                        END IF;
                        IF p_locked[ix] THEN
                            IF forgeyard_pl.queue_part_admit(q.tenant_id, m.resource, i,
                                                             forgeyard_pl.queue_part_config(h_cfg[ri], i), at_time, transfer) THEN
                                allowed := true;
                                IF NOT transfer THEN
                                    admitted_part := i;
                                END IF;
                            ELSE
                                refusing := i;
                            END IF;
                        END IF;
                    END IF;
                    IF NOT allowed AND refusing >= 0 THEN
                        UPDATE forgeyard.flow_resource_state s SET refused = s.refused + 1
                         WHERE s.tenant_id = q.tenant_id AND s.resource = m.resource AND s.part = refusing::smallint;
                    END IF;
                END IF;
            END IF;
        END IF;
        CONTINUE WHEN NOT allowed;
        v_token := nextval('forgeyard.claim_tokens');
        c_msg_id := m.msg_id; c_event_id := m.event_id; c_partition_key := m.partition_key; c_priority := mp;
        c_attempt := v_attempt; c_claim_token := v_token; c_enqueued_at := m.enqueued_at;
        c_order := CASE WHEN q.fairness THEN m.pass ELSE 0 END;
        c_lapsed := v_attempt > q.max_attempts;
        IF c_lapsed THEN
            c_payload := m.payload;
            l_ids := l_ids || m.msg_id;
            l_slots := l_slots || m.slot::integer;
            l_bytes := l_bytes || m.bytes;
            l_keys := l_keys || CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END;
            IF resources AND m.resource IS NOT NULL THEN
                o_res := o_res || m.resource;
                o_parts := o_parts || coalesce(m.resource_part, 0)::integer;
                o_kinds := o_kinds || 2;
            END IF;
        ELSE
            c_payload := m.payload;
            IF c_payload IS NULL AND m.event_id IS NOT NULL THEN
                -- A subscription's message has no payload of its own: it is its topic event's.
                SELECT e.payload INTO c_payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                    ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                 WHERE s.tenant_id = q.tenant_id AND s.subscription = q.queue AND e.event_id = m.event_id;
            END IF;
            got := got + 1;
        END IF;
        RETURN NEXT;
        IF admitted_part >= 0 THEN
            UPDATE forgeyard.messages y
               SET attempt = v_attempt, claim_token = v_token, visible_at = v_until, claimed_by = consumer,
                   resource_part = admitted_part::smallint, ready_pos = CASE WHEN visibility <= 60000000 THEN y.ready_pos END
             WHERE y.msg_id = m.msg_id;
        ELSE
            UPDATE forgeyard.messages y
               SET attempt = v_attempt, claim_token = v_token, visible_at = v_until, claimed_by = consumer,
                   ready_pos = CASE WHEN visibility <= 60000000 THEN y.ready_pos END
             WHERE y.msg_id = m.msg_id;
        END IF;
    END LOOP;
    IF cur_open THEN
        CLOSE cur;
    END IF;
    IF cardinality(l_ids) > 0 THEN
        UPDATE forgeyard.messages y
           SET state = 'dead', claim_token = NULL, finished_at = at_time, is_head = false, ready_pos = NULL,
               last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN y.payload END
         WHERE y.msg_id = ANY (l_ids);
        PERFORM forgeyard_pl.queue_apply(q, l_slots, l_bytes, l_keys, o_res, o_parts, o_kinds, at_time);
    END IF;
END
$$;

-- @body fy_claim
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_consumer text;
    n integer;
    vis bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_consumer := consumer;
    IF consumer IS NULL OR consumer = '' OR octet_length(consumer) > 256 THEN
        PERFORM forgeyard_pl.name_arg('consumer', consumer, 256);
    END IF;
    n := max_messages;
    IF max_messages IS NULL OR max_messages < 1 OR max_messages > 1000 THEN
        PERFORM forgeyard_pl.queue_max_messages_arg(max_messages);
    END IF;
    vis := CASE WHEN visibility IS NULL THEN q.visibility_usecs
                ELSE forgeyard_pl.duration_arg('visibility', visibility, 2592000000000) END;
    RETURN QUERY
    SELECT c.c_msg_id, c.c_event_id, c.c_partition_key,
           (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1],
           c.c_attempt, c.c_claim_token, c.c_payload, c.c_enqueued_at
      FROM forgeyard_pl.queue_claim(q, v_consumer, n, vis, forgeyard.now()) c
     WHERE NOT c.c_lapsed
     ORDER BY c.c_priority, c.c_order, c.c_msg_id;
END
