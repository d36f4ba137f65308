-- The PL/pgSQL edition of extension/queue_enqueue.cpp: enqueue and enqueue_batch (the
-- transactional outbox), with admission into the capacity slots by class, event_id dedup,
-- partition heads, per-key limits and fair passes; and the helpers topics use to deliver
-- (queue_admit, queue_join_key, queue_fair_passes).

-- @helper
-- SlotAdmitted::read (queue_enqueue.cpp): the counts of slot `slot`'s admission generation row
-- `gen` (0, 0 when NULL: none yet), locked FOR NO KEY UPDATE. Called in a statement after the one
-- that locked the slot row: in READ COMMITTED it reads the newest row; under a transaction
-- snapshot a row another producer changed since is 40001.
CREATE FUNCTION forgeyard_pl.queue_slot_generation(tenant text, name text, slot integer, gen bigint,
                                                   OUT messages bigint, OUT bytes bigint)
    LANGUAGE plpgsql
    AS $$
BEGIN
    messages := 0;
    bytes := 0;
    IF gen IS NULL THEN
        RETURN;
    END IF;
    SELECT d.admitted_messages, d.admitted_bytes INTO messages, bytes
      FROM forgeyard.queue_admit_deltas d
     WHERE d.tenant_id = tenant AND d.queue = name AND d.slot = queue_slot_generation.slot
       AND d.gen = queue_slot_generation.gen
       FOR NO KEY UPDATE OF d;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@',
            MESSAGE = 'a capacity slot''s generation row is not found';
    END IF;
END
$$;

-- @helper
-- SlotAdmitted::add (queue_enqueue.cpp): `messages` and `bytes` admitted into slot `slot` of queue
-- `name`, whose queue_slots row this transaction holds FOR UPDATE. They go to the slot's row of
-- its admission generation (admit_gen), in place; in a later generation (forgeyard.now() in
-- seconds since 1970, core::admission_generation_usecs) that row is folded into the slot row and
-- deleted, and the new generation's row is made with them. Each statement runs after the lock: in
-- READ COMMITTED it sees the newest rows; under a transaction snapshot a row changed since is 40001.
CREATE FUNCTION forgeyard_pl.queue_slot_add(tenant text, name text, slot integer, messages bigint, bytes bigint)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    g bigint := forgeyard_pl.usecs(forgeyard.now()) / 1000000;
    ag bigint;
    gm bigint;
    gb bigint;
BEGIN
    SELECT a.admit_gen INTO ag FROM forgeyard.queue_slots a
     WHERE a.tenant_id = tenant AND a.queue = name AND a.slot = queue_slot_add.slot;
    IF ag IS NOT NULL AND g <= ag THEN  -- (a clock behind the slot's generation adds to it too)
        UPDATE forgeyard.queue_admit_deltas d
           SET admitted_messages = d.admitted_messages + messages, admitted_bytes = d.admitted_bytes + bytes
         WHERE d.tenant_id = tenant AND d.queue = name AND d.slot = queue_slot_add.slot AND d.gen = ag;
        RETURN;
    END IF;
    DELETE FROM forgeyard.queue_admit_deltas d
     WHERE d.tenant_id = tenant AND d.queue = name AND d.slot = queue_slot_add.slot AND d.gen = ag
    RETURNING d.admitted_messages, d.admitted_bytes INTO gm, gb;
    UPDATE forgeyard.queue_slots a
       SET admitted_messages = a.admitted_messages + COALESCE(gm, 0),
           admitted_bytes = a.admitted_bytes + COALESCE(gb, 0), admit_gen = g
     WHERE a.tenant_id = tenant AND a.queue = name AND a.slot = queue_slot_add.slot;
    INSERT INTO forgeyard.queue_admit_deltas (tenant_id, queue, slot, gen, admitted_messages, admitted_bytes)
    VALUES (tenant, name, queue_slot_add.slot, g, messages, bytes);
END
$$;

-- @helper
-- queue::admit: takes room for one message of `bytes` of class `priority` in a capacity slot of
-- queue `q` (a forgeyard.queues row) and returns the slot, with its usage read under its lock
-- before this message (o_messages, o_bytes: an overcount when the slot's rows alone left room,
-- which only makes a batch come back sooner). FY020 when no slot admits the class; with `refuse`
-- false, NULLs instead (topic_deliver's dead-letter subscriptions: admission refuses before it
-- changes anything, and an EXCEPTION block around it would release the slot locks it took and,
-- its subtransaction per delivery, slow long publish transactions with every event). The first slot
-- from this call's starting slot (one further per call of the backend) that no other producer
-- holds is locked FOR UPDATE SKIP LOCKED and, if the class still fits, takes the message.
-- Otherwise every slot is read without a lock (the candidates: those that would admit it), and
-- one candidate at a time is locked: first only one no other producer holds, then, waiting, one
-- this transaction may wait for (queue_held_may_wait); re-checked under the lock. The admitted
-- side is the slot row's and its generation row's (queue_slot_generation, queue_slot_add).
CREATE FUNCTION forgeyard_pl.queue_admit(q record, priority integer, bytes bigint, refuse boolean DEFAULT true,
                                         OUT o_slot integer, OUT o_messages bigint, OUT o_bytes bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    rotation text := current_setting('forgeyard_pl.rotation_admit', true);
    rot bigint;
    start integer;
    n integer := q.slots;
    pct bigint := CASE priority WHEN 0 THEN q.admit_emergency WHEN 1 THEN q.admit_security_control
                                WHEN 2 THEN q.admit_realtime WHEN 3 THEN q.admit_interactive
                                WHEN 4 THEN q.admit_background ELSE q.admit_bulk END;
    -- queue_held_key(tenant, queue, 'c', slot) is this prefix and the slot's two hex digits
    key_prefix text := encode(convert_to(q.tenant_id, 'UTF8'), 'hex') || '00' || encode(convert_to(q.queue, 'UTF8'), 'hex')
                       || '0063';
    g bigint := forgeyard_pl.usecs(forgeyard.now()) / 1000000;
    held text;
    key text;
    s integer;
    i integer;
    um bigint;
    ub bigint;
    ag bigint;
    gen_row record;
    share bigint;
    lim_m bigint;
    lim_b bigint;
    candidates integer[] := '{}';
    wait boolean;
    chosen integer := -1;
BEGIN
    -- Each call starts one slot further than the last (from this backend's pid): one producer's
    -- messages spread over the slots (forgeyard_pl.queue_rotate, inline).
    rot := CASE WHEN rotation IS NULL OR rotation = '' THEN pg_backend_pid() ELSE rotation::bigint END;
    PERFORM set_config('forgeyard_pl.rotation_admit', ((rot + 1) % 4294967296)::text, false);
    start := (rot % n)::integer;
    FOR i IN 0 .. n - 1 LOOP
        s := (start + i) % n;
        SELECT a.admitted_messages - r.released_messages, a.admitted_bytes - r.released_bytes, a.admit_gen
          INTO um, ub, ag
          FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
            ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
         WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
         FOR UPDATE OF a SKIP LOCKED;
        IF NOT FOUND THEN
            EXIT WHEN NOT EXISTS (SELECT FROM forgeyard.queue_slots a
                                   WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s);
            CONTINUE;  -- another producer's
        END IF;
        -- (forgeyard_pl.queue_held_took, inline)
        key := key_prefix || lpad(to_hex(s), 2, '0');
        held := current_setting('forgeyard_pl.held', true);
        IF held IS NULL OR held = '' OR key > held COLLATE "C" THEN
            PERFORM set_config('forgeyard_pl.held', key, true);
        END IF;
        -- (forgeyard_pl.queue_class_limit, inline)
        share := q.max_messages / n + CASE WHEN s < q.max_messages % n THEN 1 ELSE 0 END;
        lim_m := share / 100 * pct + share % 100 * pct / 100;
        share := q.max_bytes / n + CASE WHEN s < q.max_bytes % n THEN 1 ELSE 0 END;
        lim_b := share / 100 * pct + share % 100 * pct / 100;
        -- Within the slot's generation, its row takes the message in place when the class fits
        -- with it (a statement after the lock: the newest row in READ COMMITTED, 40001 under a
        -- transaction snapshot when it changed since).
        IF ag >= g THEN
            UPDATE forgeyard.queue_admit_deltas d
               SET admitted_messages = d.admitted_messages + 1, admitted_bytes = d.admitted_bytes + bytes
             WHERE d.tenant_id = q.tenant_id AND d.queue = q.queue AND d.slot = s AND d.gen = ag
               AND um + d.admitted_messages + 1 <= lim_m AND ub + d.admitted_bytes + bytes <= lim_b
            RETURNING um + d.admitted_messages - 1, ub + d.admitted_bytes - bytes INTO o_messages, o_bytes;
            IF FOUND THEN
                o_slot := s;
                RETURN;
            END IF;
        END IF;
        gen_row := forgeyard_pl.queue_slot_generation(q.tenant_id, q.queue, s, ag);
        um := um + gen_row.messages;
        ub := ub + gen_row.bytes;
        -- The release deltas only when the rows alone leave no room (as queue::admit): without
        -- them the usage is an overcount, and reading them walks every version a held snapshot
        -- keeps of the slot's deltas. (Read in a later statement: a fold committed in between has
        -- moved deltas into the release row read before, which only undercounts.)
        IF um + 1 > lim_m OR ub + bytes > lim_b THEN
            SELECT um - COALESCE(sum(d.released_messages), 0)::bigint, ub - COALESCE(sum(d.released_bytes), 0)::bigint
              INTO um, ub
              FROM forgeyard.queue_release_deltas d
             WHERE d.tenant_id = q.tenant_id AND d.queue = q.queue AND d.slot = s;
        END IF;
        IF um + 1 <= lim_m AND ub + bytes <= lim_b THEN
            PERFORM forgeyard_pl.queue_slot_add(q.tenant_id, q.queue, s, 1, bytes);
            o_slot := s;
            o_messages := um;
            o_bytes := ub;
            RETURN;
        END IF;
        EXIT;
    END LOOP;
    -- Candidates by the current counts (an undercount of releases only refuses early).
    FOR s, um, ub IN
        SELECT a.slot, a.admitted_messages
                          + COALESCE((SELECT x.admitted_messages FROM forgeyard.queue_admit_deltas x
                                       WHERE x.tenant_id = a.tenant_id AND x.queue = a.queue AND x.slot = a.slot
                                         AND x.gen = a.admit_gen), 0)
                          - r.released_messages
                          - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                       WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                      a.admitted_bytes
                          + COALESCE((SELECT x.admitted_bytes FROM forgeyard.queue_admit_deltas x
                                       WHERE x.tenant_id = a.tenant_id AND x.queue = a.queue AND x.slot = a.slot
                                         AND x.gen = a.admit_gen), 0)
                          - r.released_bytes
                          - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                       WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
          FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
            ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
         WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue
         ORDER BY (a.slot + start) % n
    LOOP
        IF um + 1 <= (forgeyard_pl.queue_class_limit(q, priority, s)).messages
           AND ub + bytes <= (forgeyard_pl.queue_class_limit(q, priority, s)).bytes THEN
            candidates := candidates || s;
        END IF;
    END LOOP;
    -- One candidate at a time: first one no other producer holds, then, waiting, one this
    -- transaction may wait for; re-checked under the lock, with the slot's generation row read
    -- in a later statement.
    FOREACH wait IN ARRAY ARRAY[false, true] LOOP
        FOREACH s IN ARRAY candidates LOOP
            CONTINUE WHEN wait AND NOT forgeyard_pl.queue_held_may_wait(key_prefix || lpad(to_hex(s), 2, '0'));
            IF wait THEN
                SELECT a.admitted_messages - r.released_messages
                           - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admitted_bytes - r.released_bytes
                           - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admit_gen
                  INTO um, ub, ag
                  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                    ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
                 WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
                 FOR UPDATE OF a;
            ELSE
                SELECT a.admitted_messages - r.released_messages
                           - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admitted_bytes - r.released_bytes
                           - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admit_gen
                  INTO um, ub, ag
                  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                    ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
                 WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
                 FOR UPDATE OF a SKIP LOCKED;
            END IF;
            IF FOUND THEN
                gen_row := forgeyard_pl.queue_slot_generation(q.tenant_id, q.queue, s, ag);
                um := um + gen_row.messages;
                ub := ub + gen_row.bytes;
                IF chosen < 0 AND um + 1 <= (forgeyard_pl.queue_class_limit(q, priority, s)).messages
                   AND ub + bytes <= (forgeyard_pl.queue_class_limit(q, priority, s)).bytes THEN
                    chosen := s;
                END IF;
                PERFORM forgeyard_pl.queue_held_took(key_prefix || lpad(to_hex(s), 2, '0'));
            END IF;
            EXIT WHEN chosen >= 0;
        END LOOP;
        EXIT WHEN chosen >= 0;
    END LOOP;
    IF chosen < 0 THEN
        IF NOT refuse THEN
            RETURN;  -- (o_slot, o_messages, o_bytes NULL)
        END IF;
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.queue_full@',
            MESSAGE = format('queue "%s" is full for priority class %s', q.queue, forgeyard_pl.queue_priority_name(priority)),
            DETAIL = format('class %s is admitted up to %s%% of max_messages and max_bytes',
                            forgeyard_pl.queue_priority_name(priority), pct);
    END IF;
    PERFORM forgeyard_pl.queue_slot_add(q.tenant_id, q.queue, chosen, 1, bytes);
    o_slot := chosen;
    o_messages := um;
    o_bytes := ub;
END
$$;

-- queue::join_key: counts `n` new pending messages into their key's row of queue_partitions (key:
-- core::group_key, the partition_key of a partition-ordered queue, the fairness_key of a queue
-- with max_in_flight_per_key) and returns how many of them, from the first, are heads
-- (claimable): all of them for a message of no key. `q` is a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_join_key(q record, key text, n bigint DEFAULT 1)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    lim bigint := coalesce(q.max_in_flight_per_key, 0);
    pending bigint;
    heads bigint;
BEGIN
    IF key IS NULL OR n <= 0 THEN
        RETURN n;
    END IF;
    IF q.ordering = 'partition' THEN
        -- (One message at a time: the head only if it is the key's only pending message.)
        INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending)
        VALUES (q.tenant_id, q.queue, key, 1)
        ON CONFLICT ON CONSTRAINT queue_partitions_pkey DO UPDATE SET pending = p.pending + 1
        RETURNING p.pending INTO pending;
        RETURN CASE WHEN pending = 1 THEN 1 ELSE 0 END;
    END IF;
    -- A key of a max_in_flight_per_key queue makes heads of the new messages up to the limit only
    -- while none of its messages waits (older ones are promoted first, as heads finish).
    INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending, heads)
    VALUES (q.tenant_id, q.queue, key, n, least(n, lim))
    ON CONFLICT ON CONSTRAINT queue_partitions_pkey DO UPDATE
       SET pending = p.pending + n,
           heads = p.heads + CASE WHEN p.pending = p.heads AND p.heads < lim THEN least(n, lim - p.heads) ELSE 0 END
    RETURNING p.pending, p.heads INTO pending, heads;
    RETURN CASE WHEN pending - heads >= n THEN 0 ELSE n - (pending - heads) END;
END
$$;

-- queue::fair_passes: a fair queue's passes for `n` new messages of one key and class: after the
-- key's last pass or the class's lowest pending pass, whichever is later (the queue's highest
-- last pass when the class has none), one step of the key's weight apart. Empty elsewhere.
-- `q` is a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_fair_passes(q record, priority integer, fairness_key text, n bigint)
    RETURNS bigint[] LANGUAGE plpgsql
    AS $$
DECLARE
    start bigint;
    last bigint;
    weight bigint;
BEGIN
    IF NOT q.fairness OR n <= 0 THEN
        RETURN '{}';
    END IF;
    SELECT m.pass INTO start FROM forgeyard.messages m
     WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue AND m.priority = queue_fair_passes.priority::smallint
       AND m.state = 'pending'
       AND m.is_head AND m.pass IS NOT NULL
     ORDER BY m.pass LIMIT 1;
    IF NOT FOUND THEN
        SELECT max(k.last_pass) INTO start FROM forgeyard.queue_fair_keys k
         WHERE k.tenant_id = q.tenant_id AND k.queue = q.queue;
    END IF;
    start := coalesce(start, 0);
    INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, last_pass)
    VALUES (q.tenant_id, q.queue, coalesce(queue_fair_passes.fairness_key, ''), start + n * 1000000)
    ON CONFLICT ON CONSTRAINT queue_fair_keys_pkey DO UPDATE
       SET last_pass = greatest(COALESCE(k.last_pass, start), start) + n * (1000000 / k.weight)
    RETURNING k.last_pass, k.weight INTO last, weight;
    RETURN ARRAY(SELECT last - (n - 1 - i) * (1000000 / weight) FROM generate_series(0, n - 1) i ORDER BY i);
END
$$;

-- The delay argument of enqueue (microseconds): zero allowed, otherwise at most 30 days.
CREATE FUNCTION forgeyard_pl.queue_delay_arg(value interval)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'delay must not be NULL';
    END IF;
    IF extract(year FROM value) = 0 AND extract(month FROM value) = 0 AND extract(day FROM value) = 0
       AND extract(epoch FROM value) = 0 THEN
        RETURN 0;
    END IF;
    RETURN forgeyard_pl.duration_arg('delay', value, 2592000000000);
END
$$;

-- The wake-up of a queue with notify (any role may LISTEN, so the payload shows no names): the
-- first 32 hex digits of SHA-256 of "<tenant>/<queue>", queued for commit.
CREATE FUNCTION forgeyard_pl.queue_notify(tenant text, name text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('forgeyard_queue', left(encode(sha256(convert_to(tenant || '/' || name, 'UTF8')), 'hex'), 32));
END
$$;

-- The checks of one message before it is admitted (enqueue_one): FY021 over max_payload_bytes,
-- 22023 without a partition_key in a partition-ordered queue, the partition_key's rules.
CREATE FUNCTION forgeyard_pl.queue_check_message(q record, payload_bytes bigint, partition_key text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF payload_bytes > q.max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.payload_too_large@',
            MESSAGE = format('payload of %s bytes is over the limit of queue "%s"', payload_bytes, q.queue),
            DETAIL = format('max_payload_bytes is %s; store the bytes elsewhere and send a reference', q.max_payload_bytes);
    END IF;
    IF q.ordering = 'partition' AND partition_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('partition_key is required: queue "%s" is partition-ordered', q.queue);
    END IF;
    IF partition_key IS NOT NULL THEN
        PERFORM forgeyard_pl.name_arg('partition_key', partition_key, 512);
    END IF;
END
$$;

-- The event row of an event_id (enqueue_one), taken before any capacity is spent: a new event (or
-- one past its window, replaced) is recorded for message `msg_id` and NULL returned; a repeated one
-- returns the first message's id, or raises FY011 for another payload. A concurrent producer of the
-- same event_id waits here for the first one's transaction.
CREATE FUNCTION forgeyard_pl.queue_take_event(q record, event_id uuid, msg_id bigint, payload bytea, at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    digest text := encode(sha256(payload), 'hex');
    existing bigint;
    existing_digest text;
BEGIN
    INSERT INTO forgeyard.queue_events AS e (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)
    VALUES (q.tenant_id, q.queue, queue_take_event.event_id, queue_take_event.msg_id, digest,
            at_time + forgeyard_pl.queue_usecs_interval(q.dedup_window_usecs))
    ON CONFLICT ON CONSTRAINT queue_events_pkey DO UPDATE
       SET msg_id = excluded.msg_id, payload_digest = excluded.payload_digest, expires_at = excluded.expires_at
     WHERE e.expires_at <= at_time;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    SELECT e.msg_id, e.payload_digest INTO existing, existing_digest FROM forgeyard.queue_events e
     WHERE e.tenant_id = q.tenant_id AND e.queue = q.queue AND e.event_id = queue_take_event.event_id;
    IF existing_digest IS DISTINCT FROM digest THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_mismatch@',
            MESSAGE = 'event_id was enqueued before with a different payload',
            DETAIL = format('message %s carries this event_id', coalesce(existing, 0));
    END IF;
    RETURN existing;
END
$$;

-- @body fy_enqueue
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_payload bytea;
    v_key text;
    v_priority integer;
    v_delay bigint;
    v_fkey text;
    v_resource text;
    v_now timestamptz;
    v_bytes bigint;
    v_id bigint;
    v_first bigint;
    v_slot integer;
    v_head boolean;
    v_pass bigint;
    v_pos bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    -- The argument checks of forgeyard_pl.bytea_arg, text_arg, name_arg, queue_priority and
    -- queue_delay_arg, called only to raise their errors.
    v_payload := payload;
    IF payload IS NULL OR octet_length(payload) > 1073741824 THEN
        PERFORM forgeyard_pl.bytea_arg('payload', payload, 1073741824);
    END IF;
    v_key := partition_key;
    IF octet_length(partition_key) > 512 THEN
        PERFORM forgeyard_pl.text_arg('partition_key', partition_key, 512);
    END IF;
    v_priority := CASE priority WHEN 'interactive' THEN 3 WHEN 'emergency' THEN 0 WHEN 'security_control' THEN 1
                                WHEN 'realtime' THEN 2 WHEN 'background' THEN 4 WHEN 'bulk' THEN 5 END;
    IF v_priority IS NULL THEN
        PERFORM forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', priority, 64));
    END IF;
    IF delay IS NOT NULL AND extract(epoch FROM delay) = 0 AND extract(day FROM delay) = 0
       AND extract(month FROM delay) = 0 AND extract(year FROM delay) = 0 THEN
        v_delay := 0;
    ELSE
        v_delay := forgeyard_pl.queue_delay_arg(delay);
    END IF;
    v_fkey := fairness_key;
    IF fairness_key = '' OR octet_length(fairness_key) > 512 THEN
        PERFORM forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    END IF;
    v_resource := resource;
    IF resource = '' OR octet_length(resource) > 512 THEN
        PERFORM forgeyard_pl.name_arg('resource', resource, 512);
    END IF;
    v_now := forgeyard.now();
    v_bytes := octet_length(v_payload);
    -- (forgeyard_pl.queue_check_message, inline)
    IF v_bytes > q.max_payload_bytes OR (q.ordering = 'partition' AND v_key IS NULL) OR v_key = '' THEN
        PERFORM forgeyard_pl.queue_check_message(q, v_bytes, v_key);
    END IF;
    v_id := nextval('forgeyard.message_ids');
    IF event_id IS NOT NULL THEN
        v_first := forgeyard_pl.queue_take_event(q, event_id, v_id, v_payload, v_now);
        IF v_first IS NOT NULL THEN
            RETURN v_first;
        END IF;
    END IF;
    v_slot := (forgeyard_pl.queue_admit(q, v_priority, v_bytes)).o_slot;
    v_head := true;
    IF q.ordering = 'partition' THEN
        v_head := forgeyard_pl.queue_join_key(q, v_key, 1) > 0;
    END IF;
    IF q.notify THEN
        PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
    END IF;
    IF q.admission_rate IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_admit_rate(q, 1, v_now);
    END IF;
    IF q.max_in_flight_per_key IS NOT NULL AND v_fkey IS NOT NULL THEN
        IF forgeyard_pl.queue_join_key(q, v_fkey, 1) < 1 THEN
            v_head := false;
        END IF;
    END IF;
    IF q.fairness THEN
        v_pass := (forgeyard_pl.queue_fair_passes(q, v_priority, v_fkey, 1))[1];
    END IF;
    -- Claimable at once: listed in its lane (queue_lanes.sql, lane_list); not one bound to a
    -- resource, which its limits may keep ready while others go past (it would stop the cursor).
    IF v_head AND v_delay = 0 AND q.lanes IS NOT NULL AND NOT q.fairness AND v_resource IS NULL THEN
        -- (The transaction's id before the position: forgeyard.queue_lanes_maintain.)
        PERFORM pg_current_xact_id();
        WITH l AS (@statement.lane_list(q.lanes * 8 + v_priority, ARRAY[v_id])@) SELECT l.listed_pos INTO v_pos FROM l;
    END IF;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id, payload,
                                    bytes, slot, enqueued_at, visible_at, attempt, fairness_key, resource, pass, ready_pos)
    VALUES (v_id, q.tenant_id, q.queue, 'pending', v_priority, v_key, v_head, enqueue.event_id, v_payload, v_bytes, v_slot,
            v_now, CASE WHEN v_delay = 0 THEN v_now ELSE v_now + forgeyard_pl.queue_usecs_interval(v_delay) END, 0,
            v_fkey, v_resource, v_pass, v_pos);
    RETURN v_id;
END

-- @body fy_enqueue_batch
-- A batch keeps the slot it last locked and counts what it admits there, writing the counters once
-- (BatchAdmission): the row lock is held to commit, so no other producer admits into the slot
-- meanwhile; when the slot is full the tally is written before queue_admit reads the slots.
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_payloads bytea[];
    v_events uuid[];
    v_keys text[];
    v_priority integer;
    v_delay bigint;
    v_fkey text;
    v_resource text;
    v_now timestamptz;
    n integer;
    i integer;
    v_bytes bigint;
    v_id bigint;
    v_first bigint;
    v_slot integer;
    lim record;
    a record;
    b_slot integer := -1;
    b_base_m bigint := 0;
    b_base_b bigint := 0;
    b_pend_m bigint := 0;
    b_pend_b bigint := 0;
    b_lim_m bigint;
    b_lim_b bigint;
    ids bigint[] := '{}';
    r_index integer[] := '{}';
    r_ids bigint[] := '{}';
    r_slots integer[] := '{}';
    r_heads boolean[] := '{}';
    r_passes bigint[];
    l_ids bigint[];
    l_pos bigint[];
    v_visible timestamptz;
    heads bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    IF payloads IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'payloads must not be NULL';
    END IF;
    v_payloads := ARRAY(SELECT unnest(payloads));
    n := cardinality(v_payloads);
    IF event_ids IS NOT NULL THEN
        v_events := ARRAY(SELECT unnest(event_ids));
    END IF;
    IF partition_keys IS NOT NULL THEN
        v_keys := ARRAY(SELECT unnest(partition_keys));
    END IF;
    IF (v_events IS NOT NULL AND cardinality(v_events) <> n) OR (v_keys IS NOT NULL AND cardinality(v_keys) <> n) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'event_ids and partition_keys must match payloads in length';
    END IF;
    v_priority := forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', priority, 64));
    v_delay := forgeyard_pl.queue_delay_arg(delay);
    IF fairness_key IS NOT NULL THEN
        v_fkey := forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    END IF;
    IF resource IS NOT NULL THEN
        v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    END IF;
    v_now := forgeyard.now();
    IF array_position(v_payloads, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'payloads must not contain NULL';
    END IF;
    FOR i IN 1 .. n LOOP
        v_bytes := octet_length(v_payloads[i]);
        IF v_bytes > q.max_payload_bytes OR (q.ordering = 'partition' AND v_keys[i] IS NULL) OR v_keys[i] = ''
           OR octet_length(v_keys[i]) > 512 THEN
            PERFORM forgeyard_pl.queue_check_message(q, v_bytes, v_keys[i]);
        END IF;
        v_id := nextval('forgeyard.message_ids');
        IF v_events[i] IS NOT NULL THEN
            v_first := forgeyard_pl.queue_take_event(q, v_events[i], v_id, v_payloads[i], v_now);
            IF v_first IS NOT NULL THEN
                ids := ids || v_first;
                CONTINUE;
            END IF;
        END IF;
        -- admission: the slot held while the class fits there (b_lim_*: the class's limit in
        -- it), else queue_admit
        IF b_slot >= 0 AND b_base_m + b_pend_m + 1 <= b_lim_m AND b_base_b + b_pend_b + v_bytes <= b_lim_b THEN
            b_pend_m := b_pend_m + 1;
            b_pend_b := b_pend_b + v_bytes;
        ELSE
            IF b_slot >= 0 AND b_pend_m > 0 THEN
                PERFORM forgeyard_pl.queue_slot_add(q.tenant_id, q.queue, b_slot, b_pend_m, b_pend_b);
            END IF;
            a := forgeyard_pl.queue_admit(q, v_priority, v_bytes);
            b_slot := a.o_slot;
            b_base_m := a.o_messages + 1;
            b_base_b := a.o_bytes + v_bytes;
            b_pend_m := 0;
            b_pend_b := 0;
            lim := forgeyard_pl.queue_class_limit(q, v_priority, b_slot);
            b_lim_m := lim.messages;
            b_lim_b := lim.bytes;
        END IF;
        IF q.ordering = 'partition' THEN
            r_heads := r_heads || (forgeyard_pl.queue_join_key(q, v_keys[i], 1) > 0);
        ELSE
            r_heads := r_heads || true;
        END IF;
        r_index := r_index || i;
        r_ids := r_ids || v_id;
        r_slots := r_slots || b_slot;
        ids := ids || v_id;
        IF q.notify THEN
            PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
        END IF;
    END LOOP;
    IF b_slot >= 0 AND b_pend_m > 0 THEN
        PERFORM forgeyard_pl.queue_slot_add(q.tenant_id, q.queue, b_slot, b_pend_m, b_pend_b);
    END IF;
    IF q.admission_rate IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_admit_rate(q, cardinality(r_ids), v_now);
    END IF;
    -- In a queue with max_in_flight_per_key, the new messages of the call (one fairness key) join
    -- the key's row at once; the first of them up to the limit are heads, the rest wait.
    IF q.max_in_flight_per_key IS NOT NULL AND v_fkey IS NOT NULL THEN
        heads := forgeyard_pl.queue_join_key(q, v_fkey, cardinality(r_ids));
        FOR i IN heads + 1 .. cardinality(r_ids) LOOP
            r_heads[i] := false;
        END LOOP;
    END IF;
    IF q.fairness THEN
        r_passes := forgeyard_pl.queue_fair_passes(q, v_priority, v_fkey, cardinality(r_ids));
    END IF;
    v_visible := CASE WHEN v_delay = 0 THEN v_now ELSE v_now + forgeyard_pl.queue_usecs_interval(v_delay) END;
    -- The heads claimable at once: listed in their lane (queue_lanes.sql, lane_list).
    IF v_delay = 0 AND q.lanes IS NOT NULL AND NOT q.fairness AND v_resource IS NULL AND cardinality(r_ids) > 0 THEN
        l_ids := ARRAY(SELECT r.id FROM unnest(r_ids, r_heads) WITH ORDINALITY r(id, head, o) WHERE r.head ORDER BY r.o);
        PERFORM pg_current_xact_id();
        WITH l AS (@statement.lane_list(q.lanes * 8 + v_priority, l_ids)@)
        SELECT array_agg(l.listed_id), array_agg(l.listed_pos) INTO l_ids, l_pos FROM l;
    END IF;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id, payload,
                                    bytes, slot, enqueued_at, visible_at, attempt, fairness_key, resource, pass, ready_pos)
    SELECT r.id, q.tenant_id, q.queue, 'pending', v_priority, v_keys[r.ix], r.head, v_events[r.ix], v_payloads[r.ix],
           octet_length(v_payloads[r.ix]), r.slot, v_now, v_visible, 0, v_fkey, v_resource, r_passes[r.o],
           l_pos[array_position(l_ids, r.id)]
      FROM unnest(r_index, r_ids, r_heads, r_slots) WITH ORDINALITY r(ix, id, head, slot, o)
     ORDER BY r.o;
    RETURN QUERY SELECT x.id FROM unnest(ids) WITH ORDINALITY x(id, o) ORDER BY x.o;
END
