-- The PL/pgSQL edition of extension/queue_create.cpp: queue_create, queue_alter (options from jsonb,
-- checked with core/queue_options.cpp's rules and messages) and queue_drop; and insert_queue /
-- ensure_queue, which workflows use for a definition's queue.

-- @helper
-- core::bad_option: 22023 "queue option <key> <why>".
CREATE FUNCTION forgeyard_pl.queue_bad_option(key text, why text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = format('queue option %s %s', key, why);
END
$$;

-- core::positive_integer (queue_options.cpp): digits only, at most max (checked digit by digit,
-- so the first digit that would pass max decides), above 0.
CREATE FUNCTION forgeyard_pl.queue_positive_integer(key text, value text, max bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v bigint := 0;
    d integer;
    i integer;
BEGIN
    IF value = '' THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
    END IF;
    FOR i IN 1 .. length(value) LOOP
        d := ascii(substr(value, i, 1)) - 48;
        IF d < 0 OR d > 9 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
        END IF;
        IF v > (max - d) / 10 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be at most ' || max);
        END IF;
        v := v * 10 + d;
    END LOOP;
    IF v <= 0 THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
    END IF;
    RETURN v;
END
$$;

-- core::fraction (queue_options.cpp): digits with at most one point, no exponent, in [0, 1];
-- computed in double precision step by step as the C++ edition computes it.
CREATE FUNCTION forgeyard_pl.queue_fraction(key text, value text)
    RETURNS double precision LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    whole double precision := 0;
    scale double precision := 1;
    point boolean := false;
    digits boolean := false;
    c integer;
    i integer;
BEGIN
    FOR i IN 1 .. length(value) LOOP
        c := ascii(substr(value, i, 1));
        IF c = 46 AND NOT point THEN
            point := true;
        ELSIF c BETWEEN 48 AND 57 THEN
            digits := true;
            CONTINUE WHEN point AND scale < 1e-12;  -- past double's precision
            IF point THEN
                scale := scale / 10;
                whole := whole + (c - 48) * scale;
            ELSE
                whole := whole * 10 + (c - 48);
            END IF;
        ELSE
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
        END IF;
        IF whole > 1 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
        END IF;
    END LOOP;
    IF NOT digits THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
    END IF;
    RETURN whole;
END
$$;

-- The defaults of every option (core::QueueOptions), as a forgeyard.queues row of the queue.
CREATE FUNCTION forgeyard_pl.queue_defaults(tenant text, name text)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    o forgeyard.queues%ROWTYPE;
BEGIN
    o.tenant_id := tenant;
    o.queue := name;
    o.max_messages := 100000;
    o.max_bytes := 1073741824;
    o.max_payload_bytes := 65536;
    o.visibility_usecs := 30000000;
    o.max_attempts := 5;
    o.backoff_base_usecs := 1000000;
    o.backoff_max_usecs := 300000000;
    o.ordering := 'none';
    o.dead_letter_payload := 'drop';
    o.retain_acked_usecs := 0;
    o.max_dead := 100000;
    o.dead_retention_usecs := 604800000000;
    o.dedup_window_usecs := 86400000000;
    o.admit_emergency := 100;
    o.admit_security_control := 100;
    o.admit_realtime := 95;
    o.admit_interactive := 90;
    o.admit_background := 80;
    o.admit_bulk := 70;
    o.notify := false;
    o.retry_budget := NULL;
    o.retry_budget_min := 10;
    o.retry_budget_window_usecs := 60000000;
    o.admission_rate := NULL;
    o.admission_per_usecs := NULL;
    o.max_in_flight_per_key := NULL;
    o.fairness := false;
    o.aging_usecs := 0;
    RETURN o;
END
$$;

-- core::set_queue_option: one option other than a duration from its JSON text, over `o` (a
-- forgeyard.queues row); 22023 naming the option when unknown or invalid.
CREATE FUNCTION forgeyard_pl.queue_set_option(o record, key text, value text)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    big constant bigint := 1125899906842624;
    p integer;
    v bigint;
BEGIN
    CASE key
        WHEN 'max_messages' THEN o.max_messages := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'max_bytes' THEN o.max_bytes := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'max_payload_bytes' THEN o.max_payload_bytes := forgeyard_pl.queue_positive_integer(key, value, 67108864);
        WHEN 'max_attempts' THEN o.max_attempts := forgeyard_pl.queue_positive_integer(key, value, 1000);
        WHEN 'max_dead' THEN o.max_dead := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'notify', 'fairness' THEN
            IF value NOT IN ('true', 'false') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be true or false');
            END IF;
            IF key = 'notify' THEN
                o.notify := value = 'true';
            ELSE
                o.fairness := value = 'true';
            END IF;
        WHEN 'retry_budget' THEN
            o.retry_budget := CASE WHEN value = 'null' THEN NULL ELSE forgeyard_pl.queue_fraction(key, value) END;
        WHEN 'max_in_flight_per_key' THEN
            o.max_in_flight_per_key := CASE WHEN value = 'null' THEN NULL
                                            ELSE forgeyard_pl.queue_positive_integer(key, value, 1000000) END;
        WHEN 'retry_budget_min' THEN
            IF value = '0' THEN
                o.retry_budget_min := 0;
            ELSE
                IF value = '' OR ascii(value) NOT BETWEEN 49 AND 57 THEN
                    PERFORM forgeyard_pl.queue_bad_option(key, 'must be a non-negative integer');
                END IF;
                o.retry_budget_min := forgeyard_pl.queue_positive_integer(key, value, big);
            END IF;
        WHEN 'ordering' THEN
            IF value NOT IN ('none', 'partition') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be none or partition');
            END IF;
            o.ordering := value;
        WHEN 'dead_letter_payload' THEN
            IF value NOT IN ('drop', 'keep') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be drop or keep');
            END IF;
            o.dead_letter_payload := value;
        ELSE
            IF left(key, 6) = 'admit_' THEN
                p := forgeyard_pl.queue_priority('queue option ' || key, substr(key, 7));
                v := forgeyard_pl.queue_positive_integer(key, value, 100);
                CASE p
                    WHEN 0 THEN o.admit_emergency := v;
                    WHEN 1 THEN o.admit_security_control := v;
                    WHEN 2 THEN o.admit_realtime := v;
                    WHEN 3 THEN o.admit_interactive := v;
                    WHEN 4 THEN o.admit_background := v;
                    ELSE o.admit_bulk := v;
                END CASE;
            ELSIF key IN ('visibility_timeout', 'backoff_base', 'backoff_max', 'retain_acked', 'dead_letter_retention',
                          'dedup_window', 'retry_budget_window', 'aging') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be an interval');
            ELSE
                PERFORM forgeyard_pl.queue_bad_option(key, 'is unknown');
            END IF;
    END CASE;
    RETURN o;
END
$$;

-- core::validate(QueueOptions): the cross-field checks, in the C++ edition's order.
CREATE FUNCTION forgeyard_pl.queue_validate(o record)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    names constant text[] := ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'];
    admit bigint[] := ARRAY[o.admit_emergency, o.admit_security_control, o.admit_realtime, o.admit_interactive,
                            o.admit_background, o.admit_bulk];
    positive_keys constant text[] := ARRAY['max_messages', 'max_bytes', 'max_payload_bytes', 'visibility_timeout',
                                           'max_attempts', 'backoff_base', 'backoff_max', 'max_dead',
                                           'dead_letter_retention', 'dedup_window', 'retry_budget_window'];
    positive bigint[] := ARRAY[o.max_messages, o.max_bytes, o.max_payload_bytes, o.visibility_usecs, o.max_attempts,
                               o.backoff_base_usecs, o.backoff_max_usecs, o.max_dead, o.dead_retention_usecs,
                               o.dedup_window_usecs, o.retry_budget_window_usecs];
    key_limit bigint := coalesce(o.max_in_flight_per_key, 0);
    i integer;
BEGIN
    FOR i IN 1 .. 11 LOOP
        IF positive[i] <= 0 THEN
            PERFORM forgeyard_pl.queue_bad_option(positive_keys[i], 'must be positive');
        END IF;
    END LOOP;
    IF o.max_attempts > 1000 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_attempts', 'must be at most 1000');
    END IF;
    IF o.retain_acked_usecs < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('retain_acked', 'must not be negative');
    END IF;
    IF o.aging_usecs < 0 OR o.aging_usecs > 2592000000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('aging', 'must be an interval of at least 0 and at most 30 days');
    END IF;
    IF o.aging_usecs > 0 AND o.fairness THEN
        PERFORM forgeyard_pl.queue_bad_option('aging',
            'cannot be combined with fairness (a fair queue orders a class by pass, not by age)');
    END IF;
    IF o.retry_budget IS NOT NULL AND (o.retry_budget < 0 OR o.retry_budget > 1) THEN
        PERFORM forgeyard_pl.queue_bad_option('retry_budget', 'must be a number between 0 and 1');
    END IF;
    IF o.retry_budget_min < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('retry_budget_min', 'must not be negative');
    END IF;
    IF key_limit < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key', 'must be a positive integer');
    END IF;
    IF key_limit > 1000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key', 'must be at most 1000000');
    END IF;
    IF o.ordering = 'partition' AND key_limit > 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key',
            'cannot be combined with ordering partition (which hands out one message of a partition_key at a time)');
    END IF;
    IF o.visibility_usecs > 2592000000000 OR o.backoff_max_usecs > 2592000000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('visibility_timeout', 'and backoff_max must be at most 30 days');
    END IF;
    FOR i IN 1 .. 6 LOOP
        IF admit[i] < 1 OR admit[i] > 100 THEN
            PERFORM forgeyard_pl.queue_bad_option('admit_' || names[i], 'must be between 1 and 100');
        END IF;
    END LOOP;
    IF o.max_payload_bytes > o.max_bytes THEN
        PERFORM forgeyard_pl.queue_bad_option('max_payload_bytes', 'must not exceed max_bytes');
    END IF;
    IF o.backoff_base_usecs > o.backoff_max_usecs THEN
        PERFORM forgeyard_pl.queue_bad_option('backoff_base', 'must not exceed backoff_max');
    END IF;
    FOR i IN 2 .. 6 LOOP
        IF admit[i] > admit[i - 1] THEN
            PERFORM forgeyard_pl.queue_bad_option('admit_' || names[i],
                'must not exceed admit_' || names[i - 1] || ': a lower class is refused earlier');
        END IF;
    END LOOP;
END
$$;

-- parse_options (queue_create.cpp): the options of a jsonb object over `base` (a forgeyard.queues
-- row), key by key in jsonb's order (numbers and names as text, durations as interval text), then
-- core::validate. 22023 for anything but an object.
CREATE FUNCTION forgeyard_pl.queue_parse_options(options jsonb, base record)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    o forgeyard.queues%ROWTYPE := base;
    e record;
    v text;
    iv interval;
    us bigint;
BEGIN
    IF jsonb_typeof(options) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
    END IF;
    FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
        v := coalesce(e.value, 'null');
        IF e.key = 'aging' AND v = 'null' THEN  -- (null: no aging, as 0)
            o.aging_usecs := 0;
        ELSIF e.key IN ('visibility_timeout', 'backoff_base', 'backoff_max', 'retain_acked', 'dead_letter_retention',
                        'dedup_window', 'retry_budget_window', 'aging') THEN
            BEGIN
                iv := v::interval;
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = format('queue option %s must be an interval', e.key), DETAIL = format('got "%s"', v);
            END;
            -- retain_acked may be zero: acked messages are then deleted at once; aging zero is none.
            IF e.key IN ('retain_acked', 'aging') AND extract(year FROM iv) = 0 AND extract(month FROM iv) = 0
               AND extract(day FROM iv) = 0 AND extract(epoch FROM iv) = 0 THEN
                us := 0;
            ELSE
                us := forgeyard_pl.duration_arg('queue option ' || e.key, iv,
                    CASE WHEN e.key IN ('retain_acked', 'dead_letter_retention', 'dedup_window')
                         THEN 31536000000000 ELSE 2592000000000 END);
            END IF;
            CASE e.key
                WHEN 'visibility_timeout' THEN o.visibility_usecs := us;
                WHEN 'backoff_base' THEN o.backoff_base_usecs := us;
                WHEN 'backoff_max' THEN o.backoff_max_usecs := us;
                WHEN 'retain_acked' THEN o.retain_acked_usecs := us;
                WHEN 'dead_letter_retention' THEN o.dead_retention_usecs := us;
                WHEN 'dedup_window' THEN o.dedup_window_usecs := us;
                WHEN 'retry_budget_window' THEN o.retry_budget_window_usecs := us;
                ELSE o.aging_usecs := us;
            END CASE;
        ELSE
            o := forgeyard_pl.queue_set_option(o, e.key, v);
        END IF;
    END LOOP;
    PERFORM forgeyard_pl.queue_validate(o);
    RETURN o;
END
$$;

-- core::workflow::refuse_reserved_queue: queue names starting "_wf." belong to workflows.
CREATE FUNCTION forgeyard_pl.queue_refuse_reserved(name text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF left(name, 4) = '_wf.' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'queue names starting "_wf." are reserved for workflows',
            DETAIL = 'workflow_start creates the queue of a definition; queue_alter may change its options';
    END IF;
END
$$;

-- queue::insert_queue: a queue with options `o` (a forgeyard.queues row) and its capacity slots
-- (core::capacity_slots) and release counters; false, and nothing changed, if it exists.
CREATE FUNCTION forgeyard_pl.queue_insert(tenant text, name text, o record)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    slots integer := greatest(1, least(8, least(o.max_messages / 1024, o.max_bytes / 1024 / o.max_payload_bytes)));
BEGIN
    INSERT INTO forgeyard.queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,
        max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,
        max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,
        admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots, created_at,
        retry_budget, retry_budget_min, retry_budget_window_usecs, max_in_flight_per_key, fairness, aging_usecs)
    VALUES (tenant, name, o.max_messages, o.max_bytes, o.max_payload_bytes, o.visibility_usecs,
        o.max_attempts, o.backoff_base_usecs, o.backoff_max_usecs, o.ordering, o.dead_letter_payload,
        o.retain_acked_usecs, o.max_dead, o.dead_retention_usecs, o.dedup_window_usecs, o.admit_emergency,
        o.admit_security_control, o.admit_realtime, o.admit_interactive, o.admit_background, o.admit_bulk, o.notify,
        slots, forgeyard.now(), o.retry_budget, o.retry_budget_min, o.retry_budget_window_usecs,
        o.max_in_flight_per_key, o.fairness, o.aging_usecs)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO forgeyard.queue_slots (tenant_id, queue, slot) SELECT tenant, name, s FROM generate_series(0, slots - 1) s;
    INSERT INTO forgeyard.queue_releases (tenant_id, queue, slot) SELECT tenant, name, s FROM generate_series(0, slots - 1) s;
    PERFORM forgeyard.queue_lanes_open(tenant, name);
    RETURN true;
END
$$;

-- queue::ensure_queue: the queue with default options unless it exists (a workflow's definition
-- queue). Names already checked.
CREATE FUNCTION forgeyard_pl.queue_ensure(tenant text, name text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name) THEN
        PERFORM forgeyard_pl.queue_insert(tenant, name, forgeyard_pl.queue_defaults(tenant, name));
    END IF;
END
$$;

-- @body fy_queue_create
DECLARE
    o forgeyard.queues%ROWTYPE;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.name_arg('queue', queue, 128);
    PERFORM forgeyard_pl.queue_refuse_reserved(queue);
    PERFORM forgeyard_pl.check_tenant(tenant);
    o := forgeyard_pl.queue_defaults(tenant, queue);
    IF options IS NOT NULL THEN
        o := forgeyard_pl.queue_parse_options(options, o);
    END IF;
    IF NOT forgeyard_pl.queue_insert(tenant, queue, o) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.duplicate_object@',
            MESSAGE = format('queue "%s" already exists for tenant "%s"', queue, tenant),
            DETAIL = 'use forgeyard.queue_alter to change its options';
    END IF;
END

-- @body fy_queue_alter
DECLARE
    q forgeyard.queues%ROWTYPE;
    o forgeyard.queues%ROWTYPE;
    toggles_key_limit boolean;
    toggles_fairness boolean;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('options', options IS NOT NULL);
    o := forgeyard_pl.queue_parse_options(options, q);
    IF o.ordering <> q.ordering THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'queue option ordering cannot change after the queue is created';
    END IF;
    -- Setting or removing the per-key limit while messages are pending would leave their keys
    -- uncounted, or their waiting messages with nothing to promote them; setting or removing
    -- fairness, without a pass or with one the claim no longer reads. The queue's drop lock waits
    -- for open producers, which enqueued under the old options.
    toggles_key_limit := (o.max_in_flight_per_key IS NOT NULL) <> (q.max_in_flight_per_key IS NOT NULL);
    toggles_fairness := o.fairness <> q.fairness;
    IF toggles_key_limit OR toggles_fairness THEN
        PERFORM forgeyard_pl.queue_lock(q.tenant_id, q.queue, true);
        IF (SELECT u.messages FROM forgeyard_pl.queue_usage(q.tenant_id, q.queue) u) > 0 THEN
            IF toggles_fairness THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'queue option fairness can be set or removed only while the queue holds no messages';
            END IF;
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'queue option max_in_flight_per_key can be set or removed only while the queue holds no messages',
                DETAIL = 'it can be changed to another limit at any time';
        END IF;
    END IF;
    UPDATE forgeyard.queues x
       SET max_messages = o.max_messages, max_bytes = o.max_bytes, max_payload_bytes = o.max_payload_bytes,
           visibility_usecs = o.visibility_usecs, max_attempts = o.max_attempts,
           backoff_base_usecs = o.backoff_base_usecs, backoff_max_usecs = o.backoff_max_usecs, ordering = o.ordering,
           dead_letter_payload = o.dead_letter_payload, retain_acked_usecs = o.retain_acked_usecs,
           max_dead = o.max_dead, dead_retention_usecs = o.dead_retention_usecs,
           dedup_window_usecs = o.dedup_window_usecs, admit_emergency = o.admit_emergency,
           admit_security_control = o.admit_security_control, admit_realtime = o.admit_realtime,
           admit_interactive = o.admit_interactive, admit_background = o.admit_background, admit_bulk = o.admit_bulk,
           notify = o.notify, retry_budget = o.retry_budget, retry_budget_min = o.retry_budget_min,
           retry_budget_window_usecs = o.retry_budget_window_usecs, max_in_flight_per_key = o.max_in_flight_per_key,
           fairness = o.fairness, aging_usecs = o.aging_usecs
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
END

-- @body fy_queue_drop
-- The queue's producer lock first (exclusive): that waits for open producers to commit, and the
-- deletes after it then see their messages.
DECLARE
    dropped integer;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.name_arg('queue', queue, 128);
    PERFORM forgeyard_pl.queue_refuse_reserved(queue);
    PERFORM forgeyard_pl.check_tenant(tenant);
    PERFORM forgeyard_pl.queue_lock(tenant, queue, true);
    PERFORM forgeyard.queue_lanes_close(tenant, queue);
    DELETE FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    GET DIAGNOSTICS dropped = ROW_COUNT;
    WITH dm AS (DELETE FROM forgeyard.messages x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         de AS (DELETE FROM forgeyard.queue_events x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         dp AS (DELETE FROM forgeyard.queue_partitions x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         ds AS (DELETE FROM forgeyard.queue_slots x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue)
    DELETE FROM forgeyard.queue_releases x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    DELETE FROM forgeyard.queue_release_deltas x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    DELETE FROM forgeyard.queue_admit_deltas x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    WITH da AS (DELETE FROM forgeyard.queue_admission x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         dk AS (DELETE FROM forgeyard.queue_fair_keys x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue)
    DELETE FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    RETURN dropped > 0;
END
