-- The PL/pgSQL edition of extension/topic_subscribe.cpp: subscribe (a queue of the tenant fed by the
-- topic, created through queue_create with its options), unsubscribe, and subscription_rewind.

-- @helper
-- check_event_types (topic_subscribe.cpp): event_types is ["type", ...] or {"type": {"min": v,
-- "max": v}} (either bound optional). Every entry is checked, the first error is raised (22023 with
-- its message, whatever the check), then an empty list.
CREATE FUNCTION forgeyard_pl.topic_check_event_types(p_options jsonb)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    shape text := jsonb_typeof(p_options -> 'event_types');
    r record;
    n integer := 0;
    err text;
    v_name text;
    w text;
    txt text;
    v bigint;
    v_lo bigint;
    v_hi bigint;
BEGIN
    IF shape IS NULL OR shape NOT IN ('array', 'object') THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'subscription option event_types must be an array of type names or an object of version ranges';
    END IF;
    FOR r IN
        WITH f AS (SELECT p_options -> 'event_types' AS f)
        SELECT 'array' AS src, jsonb_typeof(e) AS kind, e #>> '{}' AS name, NULL::text AS lo, NULL::text AS hi,
               0::bigint AS extra
          FROM f, jsonb_array_elements(f.f) e WHERE jsonb_typeof(f.f) = 'array'
        UNION ALL
        SELECT 'object', jsonb_typeof(e.value), e.key,
               CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value -> 'min' #>> '{}' END,
               CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value -> 'max' #>> '{}' END,
               CASE WHEN jsonb_typeof(e.value) = 'object'
                    THEN (SELECT count(*) FROM jsonb_object_keys(e.value) k WHERE k <> ALL ('{min,max}'::text[])) ELSE 0 END
          FROM f, jsonb_each(f.f) e WHERE jsonb_typeof(f.f) = 'object'
    LOOP
        n := n + 1;
        CONTINUE WHEN err IS NOT NULL;
        v_name := coalesce(r.name, '');
        IF r.src = 'array' AND r.kind <> 'string' THEN
            err := 'subscription option event_types must list type names (strings)';
            CONTINUE;
        END IF;
        IF r.src = 'object' AND r.kind <> 'object' THEN
            err := format('subscription option event_types: the value of "%s" must be an object {"min": v, "max": v}', v_name);
            CONTINUE;
        END IF;
        IF v_name = '' THEN
            err := 'event_types entry must not be empty';
            CONTINUE;
        END IF;
        IF octet_length(v_name) > 128 THEN
            err := 'event_types entry is longer than 128 bytes';
            CONTINUE;
        END IF;
        IF r.extra > 0 THEN
            err := 'subscription option event_types: only min and max are allowed';
            CONTINUE;
        END IF;
        v_lo := 1;
        v_hi := 1000000;
        FOREACH w IN ARRAY ARRAY['min', 'max'] LOOP
            txt := CASE w WHEN 'min' THEN r.lo ELSE r.hi END;
            CONTINUE WHEN txt IS NULL;
            IF txt !~ '^[0-9]{1,7}$' THEN
                err := format('event_types %s must be a version between 1 and 1000000', w);
                EXIT;
            END IF;
            v := txt::bigint;
            IF v < 1 OR v > 1000000 THEN
                err := format('event_types %s must be between 1 and 1000000', w);
                EXIT;
            END IF;
            IF w = 'min' THEN
                v_lo := v;
            ELSE
                v_hi := v;
            END IF;
        END LOOP;
        CONTINUE WHEN err IS NOT NULL;
        IF v_lo > v_hi THEN
            err := 'event_types min must not be over max';
        END IF;
    END LOOP;
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = err;
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'subscription option event_types must list at least one type';
    END IF;
END
$$;

-- parse_subscription_options (topic_subscribe.cpp): the subscription's own options (on_full,
-- start, event_types) in jsonb's order; the rest are its queue's. event_types null is no filter.
CREATE FUNCTION forgeyard_pl.topic_subscription_options(p_options jsonb, OUT o_dead_letter boolean,
                                                        OUT o_oldest boolean, OUT o_filtered boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    e record;
    v text;
BEGIN
    IF jsonb_typeof(p_options) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
    END IF;
    o_dead_letter := false;
    o_oldest := false;
    o_filtered := false;
    FOR e IN SELECT x.key, jsonb_typeof(x.value) AS kind, x.value #>> '{}' AS value FROM jsonb_each(p_options) x
              WHERE x.key = ANY ('{event_types,on_full,start}'::text[]) LOOP
        v := CASE WHEN e.kind = 'string' THEN coalesce(e.value, '') ELSE '' END;
        IF e.key = 'on_full' THEN
            IF v = 'reject' THEN
                o_dead_letter := false;
            ELSIF v = 'dead_letter' THEN
                o_dead_letter := true;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'subscription option on_full must be reject or dead_letter';
            END IF;
        ELSIF e.key = 'start' THEN
            IF v = 'now' THEN
                o_oldest := false;
            ELSIF v = 'oldest' THEN
                o_oldest := true;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'subscription option start must be now or oldest';
            END IF;
        ELSIF e.kind <> 'null' THEN
            PERFORM forgeyard_pl.topic_check_event_types(p_options);
            o_filtered := true;
        END IF;
    END LOOP;
END
$$;

-- @body fy_subscribe
-- Subscribes of one topic take turns on the topic row (FOR NO KEY UPDATE: the max_subscriptions
-- count); publishers (FOR KEY SHARE) are not blocked. The queue is created by queue_create with the
-- options that are not the subscription's; event_types is stored normalized to
-- {"type": {"min": v, "max": v}} (bounds left out stay out).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    v_options jsonb;
    o record;
    v_max integer;
    v_retention bigint;
    n bigint;
    v_now timestamptz;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    v_options := coalesce(options, '{}'::jsonb);
    SELECT x.o_dead_letter, x.o_oldest, x.o_filtered INTO o FROM forgeyard_pl.topic_subscription_options(v_options) x;
    SELECT t.max_subscriptions, t.retention_usecs INTO v_max, v_retention
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    SELECT count(*) INTO n FROM forgeyard.subscriptions s WHERE s.tenant_id = v_tenant AND s.topic = v_topic;
    IF n >= v_max THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('topic "%s" has its max_subscriptions of %s', v_topic, v_max),
            DETAIL = 'fan-out is bounded; unsubscribe one first';
    END IF;
    PERFORM forgeyard.queue_create(v_tenant, v_subscription, v_options - '{event_types,on_full,start}'::text[]);
    v_now := forgeyard.now();
    INSERT INTO forgeyard.subscriptions (tenant_id, subscription, topic, on_full, event_types, created_at)
    SELECT v_tenant, v_subscription, v_topic, CASE WHEN o.o_dead_letter THEN 'dead_letter' ELSE 'reject' END,
           CASE WHEN NOT o.o_filtered THEN NULL
                WHEN jsonb_typeof(v_options -> 'event_types') = 'array' THEN
                     (SELECT jsonb_object_agg(e #>> '{}', '{}'::jsonb) FROM jsonb_array_elements(v_options -> 'event_types') e)
                ELSE (SELECT jsonb_object_agg(e.key, jsonb_strip_nulls(jsonb_build_object(
                                 'min', (e.value ->> 'min')::bigint, 'max', (e.value ->> 'max')::bigint)))
                        FROM jsonb_each(v_options -> 'event_types') e) END,
           v_now;
    IF o.o_oldest THEN
        PERFORM forgeyard_pl.topic_replay(v_tenant, v_topic, v_retention, v_subscription, '-infinity', v_now);
    END IF;
END

-- @body fy_unsubscribe
-- Whether the subscription existed; its queue goes too (queue_drop).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    removed boolean;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    PERFORM FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    DELETE FROM forgeyard.subscriptions s
     WHERE s.tenant_id = v_tenant AND s.topic = v_topic AND s.subscription = v_subscription;
    removed := FOUND;
    IF removed THEN
        PERFORM forgeyard.queue_drop(v_tenant, v_subscription);
    END IF;
    RETURN removed;
END

-- @body fy_subscription_rewind
-- The events retained (within the topic's retention) and published at or after since, delivered
-- again in event_seq order; the topic row is kept from being dropped until commit (FOR KEY SHARE).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    v_retention bigint;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    IF since IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'since must not be NULL';
    END IF;
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    SELECT t.retention_usecs INTO v_retention
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic
       FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    PERFORM FROM forgeyard.subscriptions s
     WHERE s.tenant_id = v_tenant AND s.topic = v_topic AND s.subscription = v_subscription;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_subscription(v_topic, v_subscription);
    END IF;
    RETURN forgeyard_pl.topic_replay(v_tenant, v_topic, v_retention, v_subscription, since, forgeyard.now());
END
