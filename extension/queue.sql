-- The PL/pgSQL edition of extension/queue.cpp and queue.hpp: what the queue functions share
-- (loading a queue, its capacity slots, giving room back, the ledger of held counter rows, argument
-- checks). The bodies of the queue functions are in queue_create.sql, queue_enqueue.sql,
-- queue_claim.sql, queue_finish.sql, queue_admin.sql and queue_flow.sql, beside their C++ twins.
--
-- A queue is passed around as a row of forgeyard.queues (a `record` argument: declare the caller's
-- variable `forgeyard.queues%ROWTYPE` and fill it with forgeyard_pl.queue_open or queue_load).
-- Helpers run inside the API functions (search_path pinned, SECURITY DEFINER): they check nothing
-- the caller did not ask for, and qualify every table.

-- @helper
-- The ledger of shared counter rows this transaction holds locked (HeldRows in queue.hpp; the
-- rules are docs/architecture.md, "Locks held to commit"). Only the greatest key matters (a row
-- may be waited for only if its key is greater than every key held), so the ledger is that key,
-- in the transaction-local setting forgeyard_pl.held: reset when the transaction ends, and rolled
-- back with a subtransaction (whose row locks go with it). Keys are the bytes of
-- tenant \0 name \0 kind index (kind: c capacity slot, d admission bucket, p resource part,
-- w retry window), hex-encoded so that text order in collation "C" is their byte order.
CREATE FUNCTION forgeyard_pl.queue_held_key(tenant text, name text, kind text, index integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN encode(convert_to(tenant, 'UTF8'), 'hex') || '00' || encode(convert_to(name, 'UTF8'), 'hex') || '00'
        || to_hex(ascii(kind)) || lpad(to_hex(index), 2, '0');
END
$$;

-- Whether this transaction may wait for the row of `key` (queue_held_key): only after every row it holds.
CREATE FUNCTION forgeyard_pl.queue_held_may_wait(key text)
    RETURNS boolean LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    held text := current_setting('forgeyard_pl.held', true);
BEGIN
    RETURN held IS NULL OR held = '' OR key > held COLLATE "C";
END
$$;

-- Records that this transaction holds the row of `key` locked to its end.
CREATE FUNCTION forgeyard_pl.queue_held_took(key text)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    held text := current_setting('forgeyard_pl.held', true);
BEGIN
    IF held IS NULL OR held = '' OR key > held COLLATE "C" THEN
        PERFORM set_config('forgeyard_pl.held', key, true);
    END IF;
END
$$;

-- A per-backend counter (the C++ edition's `static unsigned rotation = MyProcPid`), one per
-- `counter` name: returns its value modulo n and moves it on, so that one backend's calls start
-- one slot (bucket, part) further each time.
CREATE FUNCTION forgeyard_pl.queue_rotate(counter text, n integer)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    setting text := current_setting('forgeyard_pl.rotation_' || counter, true);
    v bigint;
BEGIN
    IF setting IS NULL OR setting = '' THEN
        v := pg_backend_pid();
    ELSE
        v := setting::bigint;
    END IF;
    PERFORM set_config('forgeyard_pl.rotation_' || counter, ((v + 1) % 4294967296)::text, false);
    RETURN (v % n)::integer;
END
$$;

-- Whether the transaction reads under its own snapshot (REPEATABLE READ or SERIALIZABLE), where a
-- row changed since the snapshot could only be 40001 (pg::uses_transaction_snapshot).
CREATE FUNCTION forgeyard_pl.queue_own_snapshot()
    RETURNS boolean LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN current_setting('transaction_isolation') IN ('repeatable read', 'serializable');
END
$$;

-- The queue's producer lock (pg::lock_queue): a transaction-level advisory lock on a 64-bit hash
-- of the tenant and queue, taken shared by producers (they do not wait for each other) and
-- exclusive by queue_drop (and a queue_alter that toggles max_in_flight_per_key or fairness),
-- which so waits for open producers, and they for it. Nothing is written.
CREATE FUNCTION forgeyard_pl.queue_lock(tenant text, name text, exclusive boolean)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    k bigint := hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0);
BEGIN
    IF exclusive THEN
        PERFORM pg_advisory_xact_lock(k);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(k);
    END IF;
END
$$;

-- queue::load for names already checked: the queue's row of forgeyard.queues (42704 if the tenant
-- has no such queue). `producing`: the call adds messages: it takes the producer lock first (so a
-- producer that waited for a drop finds the queue gone), and under REPEATABLE READ or SERIALIZABLE
-- also locks the row FOR KEY SHARE (a drop it waited for is then 40001, not an enqueue into a
-- dropped queue). Returns a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_load(tenant text, name text, producing boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
BEGIN
    IF producing THEN
        -- (forgeyard_pl.queue_lock, shared)
        PERFORM pg_advisory_xact_lock_shared(
            hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0));
        IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name FOR KEY SHARE OF x;
        ELSE
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
        END IF;
    ELSE
        SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
            MESSAGE = format('queue "%s" does not exist for tenant "%s"', name, tenant);
    END IF;
    RETURN q;
END
$$;

-- queue::load(spi, fcinfo): the tenant and queue arguments checked (queue::tenant_arg,
-- queue::queue_arg: forgeyard_pl.name_arg's rules), the tenant rule (FY040), then queue_load.
-- Returns a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_open(tenant text, name text, producing boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
BEGIN
    IF tenant IS NULL OR tenant = '' OR octet_length(tenant) > 128 THEN
        PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    END IF;
    IF name IS NULL OR name = '' OR octet_length(name) > 128 THEN
        PERFORM forgeyard_pl.name_arg('queue', name, 128);
    END IF;
    -- (forgeyard_pl.check_tenant reads nothing else when no role is bound)
    IF EXISTS (SELECT FROM forgeyard.tenant_bindings) THEN
        PERFORM forgeyard_pl.check_tenant(tenant);
    END IF;
    -- queue_load, inline
    IF producing THEN
        PERFORM pg_advisory_xact_lock_shared(
            hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0));
        IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name FOR KEY SHARE OF x;
        ELSE
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
        END IF;
    ELSE
        SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
            MESSAGE = format('queue "%s" does not exist for tenant "%s"', name, tenant);
    END IF;
    RETURN q;
END
$$;

-- queue::positive_int_arg: 22004 for NULL, 22023 outside 1..max.
CREATE FUNCTION forgeyard_pl.queue_positive_int_arg(argument text, value integer, max integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF value < 1 OR value > max THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('%s must be between 1 and %s', argument, max);
    END IF;
    RETURN value;
END
$$;

-- core::priority_from_name: the class number (0 emergency .. 5 bulk) of a name; 22023 naming the
-- argument otherwise.
CREATE FUNCTION forgeyard_pl.queue_priority(argument text, name text)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    CASE name
        WHEN 'emergency' THEN RETURN 0;
        WHEN 'security_control' THEN RETURN 1;
        WHEN 'realtime' THEN RETURN 2;
        WHEN 'interactive' THEN RETURN 3;
        WHEN 'background' THEN RETURN 4;
        WHEN 'bulk' THEN RETURN 5;
        ELSE
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = argument || ' must be one of emergency, security_control, realtime, interactive, background, bulk',
                DETAIL = format('got "%s"', name);
    END CASE;
END
$$;

-- core::priority_names.
CREATE FUNCTION forgeyard_pl.queue_priority_name(priority integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[priority + 1];
END
$$;

-- The admit_<class> percentage of a queue (a forgeyard.queues row) for class `priority`.
CREATE FUNCTION forgeyard_pl.queue_admit_percent(q record, priority integer)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    CASE priority
        WHEN 0 THEN RETURN q.admit_emergency;
        WHEN 1 THEN RETURN q.admit_security_control;
        WHEN 2 THEN RETURN q.admit_realtime;
        WHEN 3 THEN RETURN q.admit_interactive;
        WHEN 4 THEN RETURN q.admit_background;
        ELSE RETURN q.admit_bulk;
    END CASE;
END
$$;

-- core::slot_budget then core::class_limit: what class `priority` may use of capacity slot `slot`
-- of a queue (a forgeyard.queues row), in messages and bytes.
CREATE FUNCTION forgeyard_pl.queue_class_limit(q record, priority integer, slot integer,
                                               OUT messages bigint, OUT bytes bigint)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    percent bigint := forgeyard_pl.queue_admit_percent(q, priority);
    m bigint := q.max_messages / q.slots + CASE WHEN slot < q.max_messages % q.slots THEN 1 ELSE 0 END;
    b bigint := q.max_bytes / q.slots + CASE WHEN slot < q.max_bytes % q.slots THEN 1 ELSE 0 END;
BEGIN
    messages := m / 100 * percent + m % 100 * percent / 100;
    bytes := b / 100 * percent + b % 100 * percent / 100;
END
$$;

-- A timestamptz from microseconds since 1970 (the inverse of forgeyard_pl.usecs), exact.
CREATE FUNCTION forgeyard_pl.queue_at(us bigint)
    RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN to_timestamp((us / 1000000)::double precision) + (us % 1000000) * interval '1 microsecond';
END
$$;

-- An interval of `us` microseconds (a day is 24 hours: no day or month component).
CREATE FUNCTION forgeyard_pl.queue_usecs_interval(us bigint)
    RETURNS interval LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (us / 1000000) * interval '1 second' + (us % 1000000) * interval '1 microsecond';
END
$$;

-- queue::usage: messages and bytes admitted and not yet released, summed over the slots (each
-- slot's admitted counts, with its admission generation row's, less its release row's and its
-- release deltas').
CREATE FUNCTION forgeyard_pl.queue_usage(tenant text, name text, OUT messages bigint, OUT bytes bigint)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT coalesce(sum(u.m), 0)::bigint, coalesce(sum(u.b), 0)::bigint INTO messages, bytes
      FROM (SELECT a.admitted_messages + COALESCE(g.admitted_messages, 0) - r.released_messages
                   - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                   a.admitted_bytes + COALESCE(g.admitted_bytes, 0) - r.released_bytes
                   - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
              FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
              LEFT JOIN forgeyard.queue_admit_deltas g
                ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
             WHERE a.tenant_id = tenant AND a.queue = name) u(m, b);
END
$$;

-- give_back (queue.cpp) for one slot: the room of `messages` released messages of `bytes` back
-- to slot `slot` of queue `name`, never waiting for a row another transaction holds, into the
-- slot's delta row of the current generation (forgeyard.now() in units of 100 ms since 1970;
-- core::release_generation_usecs): the first one this transaction can lock FOR NO KEY UPDATE SKIP
-- LOCKED is updated in place; when there is none, a new row of the generation is inserted (an
-- INSERT, which waits for nobody). When the generation has no row at all yet, this is its first
-- ack in the slot: the older generations' rows are folded into the release row, at most once a
-- second (core::release_fold_usecs), if this call can lock it SKIP LOCKED (each delta locked SKIP
-- LOCKED too; the next fold starts at the lowest generation left). Under a transaction snapshot
-- (`own`: where a row changed since the snapshot could only be 40001) the room is always a new
-- row and nothing is folded. A slot without a release row (the queue was dropped under us) is
-- passed over.
CREATE FUNCTION forgeyard_pl.queue_give_back_slot(tenant text, name text, slot integer, messages bigint, bytes bigint,
                                                  own boolean)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    g bigint := forgeyard_pl.usecs(forgeyard.now()) / 100000;
    row_id tid;
    from_gen bigint;
    left_gen bigint;
    fm bigint;
    fb bigint;
BEGIN
    IF NOT own THEN
        -- (Locked, then updated by a statement of its own: the lock may have followed the row to a
        -- version newer than this statement's snapshot, which the next statement sees.)
        SELECT y.ctid INTO row_id FROM forgeyard.queue_release_deltas y
         WHERE y.tenant_id = tenant AND y.queue = name AND y.slot = queue_give_back_slot.slot AND y.gen = g
         LIMIT 1 FOR NO KEY UPDATE OF y SKIP LOCKED;
        IF FOUND THEN
            -- (A ctid names a row in each segment: the key and generation name the segment.)
            UPDATE forgeyard.queue_release_deltas d
               SET released_messages = d.released_messages + messages, released_bytes = d.released_bytes + bytes
             WHERE d.ctid = row_id AND d.tenant_id = tenant AND d.queue = name
               AND d.slot = queue_give_back_slot.slot AND d.gen = g;
            RETURN;
        END IF;
        IF NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas y
                        WHERE y.tenant_id = tenant AND y.queue = name AND y.slot = queue_give_back_slot.slot
                          AND y.gen = g) THEN
            -- At most one fold a second (core::release_fold_usecs, 10 generations): folded_gen read
            -- first without the lock (it only grows), then again under it.
            SELECT r.folded_gen INTO from_gen
              FROM forgeyard.queue_releases r
             WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot;
            IF g - from_gen >= 10 THEN
                SELECT r.folded_gen INTO from_gen
                  FROM forgeyard.queue_releases r
                 WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot
                   FOR NO KEY UPDATE OF r SKIP LOCKED;
            END IF;
            IF g - from_gen >= 10 THEN
                -- (The row is ours now: a statement after this one updates its newest version.)
                -- (A row is its segment and its ctid there.)
                WITH l AS (SELECT x.tableoid AS rel, x.ctid AS tid FROM forgeyard.queue_release_deltas x
                            WHERE x.tenant_id = tenant AND x.queue = name AND x.slot = queue_give_back_slot.slot
                              AND x.gen >= from_gen AND x.gen < g
                              FOR UPDATE OF x SKIP LOCKED),
                     f AS (DELETE FROM forgeyard.queue_release_deltas d USING l
                            WHERE d.tableoid = l.rel AND d.ctid = l.tid
                           RETURNING d.released_messages, d.released_bytes)
                SELECT COALESCE(sum(f.released_messages), 0)::bigint, COALESCE(sum(f.released_bytes), 0)::bigint
                  INTO fm, fb FROM f;
                SELECT min(x.gen) INTO left_gen FROM forgeyard.queue_release_deltas x
                 WHERE x.tenant_id = tenant AND x.queue = name AND x.slot = queue_give_back_slot.slot
                   AND x.gen >= from_gen AND x.gen < g;
                left_gen := COALESCE(left_gen, g);
                IF fm <> 0 OR fb <> 0 OR left_gen <> from_gen THEN
                    UPDATE forgeyard.queue_releases r
                       SET released_messages = r.released_messages + fm, released_bytes = r.released_bytes + fb,
                           folded_gen = left_gen
                     WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot;
                END IF;
            END IF;
        END IF;
    END IF;
    IF from_gen IS NOT NULL OR EXISTS (SELECT FROM forgeyard.queue_releases r
                                        WHERE r.tenant_id = tenant AND r.queue = name
                                          AND r.slot = queue_give_back_slot.slot) THEN
        INSERT INTO forgeyard.queue_release_deltas (tenant_id, queue, slot, gen, released_messages, released_bytes)
        VALUES (tenant, name, slot, g, messages, bytes);
    END IF;
END
$$;

-- give_back (queue.cpp): queue_give_back_slot for each slot (slots ascending, one entry per slot).
CREATE FUNCTION forgeyard_pl.queue_give_back(tenant text, name text, slots integer[], messages bigint[], bytes bigint[])
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    own boolean := current_setting('transaction_isolation') IN ('repeatable read', 'serializable');
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(slots, 1), 0) LOOP
        PERFORM forgeyard_pl.queue_give_back_slot(tenant, name, slots[i], messages[i], bytes[i], own);
    END LOOP;
END
$$;

-- leave_key (queue.cpp): `count` messages of a key of a max_in_flight_per_key queue (a
-- forgeyard.queues row) finished: its counts under the key's row lock, then up to the limit of its
-- waiting messages promoted, oldest first.
CREATE FUNCTION forgeyard_pl.queue_leave_key(q record, key text, count bigint)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    v_pending bigint;
    v_heads bigint;
    room bigint;
    waiting bigint;
    promote bigint;
    promoted bigint := 0;
BEGIN
    SELECT p.pending, p.heads INTO v_pending, v_heads FROM forgeyard.queue_partitions p
     WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- (the queue was dropped under us)
    END IF;
    -- (Clamped: a message enqueued while max_in_flight_per_key was being set is not counted.)
    v_pending := v_pending - count;
    v_heads := greatest(0, v_heads - count);
    IF v_pending <= 0 THEN
        DELETE FROM forgeyard.queue_partitions p
         WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key;
        RETURN;
    END IF;
    room := q.max_in_flight_per_key - v_heads;
    waiting := v_pending - v_heads;
    promote := CASE WHEN room <= 0 OR waiting <= 0 THEN 0 ELSE least(room, waiting) END;
    IF promote > 0 THEN
        UPDATE forgeyard.messages m SET is_head = true
         WHERE m.msg_id = ANY (ARRAY(SELECT n.msg_id FROM forgeyard.messages n
                                      WHERE n.tenant_id = q.tenant_id AND n.queue = q.queue AND n.fairness_key = key
                                        AND n.state = 'pending' AND NOT n.is_head
                                      ORDER BY n.msg_id LIMIT promote));
        GET DIAGNOSTICS promoted = ROW_COUNT;
    END IF;
    UPDATE forgeyard.queue_partitions p SET pending = v_pending, heads = v_heads + promoted
     WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key;
END
$$;

-- queue::apply: what left the live queue in one call (acked or dead messages; Releases in
-- queue.hpp) applied once per slot and per key, in ascending order, so that concurrent batches
-- lock the shared counter rows in one order. `slots`, `bytes` and `keys` have one entry per
-- message that left (its slot, its bytes, its core::group_key: the partition_key of a
-- partition-ordered queue, the fairness_key of a max_in_flight_per_key queue, NULL otherwise);
-- `resources`, `parts` and `outcomes` one per delivery bound to a resource that ended (its
-- resource, messages.resource_part, and 0 success, 1 failure, 2 neutral), recorded on the
-- resources with queue_record_outcomes. `q` is a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_apply(q record, slots integer[], bytes bigint[], keys text[],
                                         resources text[], parts integer[], outcomes integer[], at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    agg_slots integer[];
    agg_messages bigint[];
    agg_bytes bigint[];
    k record;
    pending bigint;
BEGIN
    IF coalesce(array_length(slots, 1), 0) = 1 THEN
        PERFORM forgeyard_pl.queue_give_back(q.tenant_id, q.queue, slots, ARRAY[1::bigint], bytes);
    ELSIF coalesce(array_length(slots, 1), 0) > 1 THEN
        SELECT array_agg(g.slot ORDER BY g.slot), array_agg(g.n ORDER BY g.slot), array_agg(g.b ORDER BY g.slot)
          INTO agg_slots, agg_messages, agg_bytes
          FROM (SELECT x.slot, count(*) AS n, sum(x.b)::bigint AS b FROM unnest(slots, bytes) x(slot, b) GROUP BY x.slot) g;
        PERFORM forgeyard_pl.queue_give_back(q.tenant_id, q.queue, agg_slots, agg_messages, agg_bytes);
    END IF;
    IF coalesce(array_length(resources, 1), 0) > 0 THEN
        PERFORM forgeyard_pl.queue_record_outcomes(q, resources, parts, outcomes, at_time);
    END IF;
    IF (q.ordering = 'partition' OR q.max_in_flight_per_key IS NOT NULL) AND coalesce(array_length(keys, 1), 0) > 0 THEN
        FOR k IN SELECT x.key, count(*) AS n FROM unnest(keys) x(key) WHERE x.key IS NOT NULL
                  GROUP BY x.key ORDER BY x.key COLLATE "C" LOOP
            IF q.ordering <> 'partition' THEN
                PERFORM forgeyard_pl.queue_leave_key(q, k.key, k.n);
                CONTINUE;
            END IF;
            pending := 0;
            UPDATE forgeyard.queue_partitions p SET pending = p.pending - k.n
             WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = k.key
            RETURNING p.pending INTO pending;
            IF coalesce(pending, 0) > 0 THEN
                UPDATE forgeyard.messages m SET is_head = true
                 WHERE m.msg_id = (SELECT n.msg_id FROM forgeyard.messages n
                                    WHERE n.tenant_id = q.tenant_id AND n.queue = q.queue AND n.partition_key = k.key
                                      AND n.state = 'pending' ORDER BY n.msg_id LIMIT 1);
            ELSE
                DELETE FROM forgeyard.queue_partitions p
                 WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = k.key AND p.pending = 0;
            END IF;
        END LOOP;
    END IF;
END
$$;

-- The max_messages argument of a claim (1..1000, queue::max_messages_arg).
CREATE FUNCTION forgeyard_pl.queue_max_messages_arg(value integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN forgeyard_pl.queue_positive_int_arg('max_messages', value, 1000);
END
$$;

-- The visibility argument of a claim in microseconds (queue::visibility_arg): the queue's
-- visibility_usecs when NULL, otherwise at most 30 days.
CREATE FUNCTION forgeyard_pl.queue_visibility_arg(value interval, queue_default bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RETURN queue_default;
    END IF;
    RETURN forgeyard_pl.duration_arg('visibility', value, 2592000000000);
END
$$;
