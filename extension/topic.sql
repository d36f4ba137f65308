-- The PL/pgSQL edition of extension/topic.cpp and topic.hpp (rules and messages of core/topic.cpp):
-- the event type registry, a topic's life (create, drop, list), and what the topic functions share:
-- delivering one event into one subscription (topic_deliver) and replaying retained events
-- (topic_replay). Publishing is in topic_publish.sql, subscriptions in topic_subscribe.sql,
-- consuming and purging in topic_claim.sql. A subscription is a queue (queue.sql's helpers) fed by
-- its topic; the event's payload is stored once, in forgeyard.topic_events, and the subscription's
-- message refers to it by event_id.
--
-- A route's decision for one event (core::route) is passed around as an integer: 0 deliver,
-- 1 skip (a filtered subscription that does not list the type), 2 quarantine (listed, the version
-- outside its range). What a delivery became (topic::Delivered): 0 a message, 1 quarantined,
-- 2 backlog_full, 3 skipped.

-- @helper
-- core::throw_unknown_topic: 42704.
CREATE FUNCTION forgeyard_pl.topic_unknown_topic(p_tenant text, p_topic text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
        MESSAGE = format('topic "%s" does not exist for tenant "%s"', p_topic, p_tenant);
END
$$;

-- core::throw_unknown_subscription: 42704.
CREATE FUNCTION forgeyard_pl.topic_unknown_subscription(p_topic text, p_subscription text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
        MESSAGE = format('subscription "%s" does not exist on topic "%s"', p_subscription, p_topic);
END
$$;

-- core::check_event_version: 22023 outside 1..1000000 (after the NULL check of int4_arg).
CREATE FUNCTION forgeyard_pl.topic_version_arg(p_argument text, p_version integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = p_argument || ' must not be NULL';
    END IF;
    IF p_version < 1 OR p_version > 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = p_argument || ' must be between 1 and 1000000';
    END IF;
    RETURN p_version;
END
$$;

-- topic::deliver: one event into one subscription queue `q` (a forgeyard.queues row) by the route's
-- decision `routing`, admitted like enqueue (queue_admit, the partition head): FY020 when full and
-- the subscription's on_full is reject (dead_letter false), else a dead letter backlog_full; a
-- quarantined version becomes a dead letter schema_unsupported. FY021 over max_payload_bytes.
-- A dead letter never took capacity (dead letters do not count against the bounds). Returns what
-- the delivery became (0 message, 1 quarantined, 2 backlog_full, 3 skipped).
CREATE FUNCTION forgeyard_pl.topic_deliver(q forgeyard.queues, routing integer, dead_letter boolean, ev_id uuid,
                                           ev_type text, ev_version integer, ev_key text, ev_priority integer,
                                           ev_bytes bigint, at_time timestamptz)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    v_slot integer;
    v_head boolean := true;
    v_pass bigint;
BEGIN
    IF routing = 1 THEN
        RETURN 3;
    END IF;
    IF routing = 2 THEN
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                        payload, bytes, slot, enqueued_at, visible_at, last_error, error_class, finished_at)
        VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'dead', ev_priority, ev_key, false, ev_id,
                NULL, ev_bytes, 0, at_time, at_time,
                format('version %s of event type "%s" is outside the subscription''s accepted range', ev_version, ev_type),
                'schema_unsupported', at_time);
        RETURN 1;
    END IF;
    IF ev_bytes > q.max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.payload_too_large@',
            MESSAGE = format('payload of %s bytes is over the limit of queue "%s"', ev_bytes, q.queue),
            DETAIL = format('max_payload_bytes is %s; store the bytes elsewhere and send a reference', q.max_payload_bytes);
    END IF;
    IF q.ordering = 'partition' AND ev_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('partition_key is required: queue "%s" is partition-ordered', q.queue);
    END IF;
    -- FY020 when full, unless the subscription takes the event as a dead letter: then admission
    -- refuses (NULL) before it changes anything.
    v_slot := (forgeyard_pl.queue_admit(q, ev_priority, ev_bytes, NOT dead_letter)).o_slot;
    IF v_slot IS NULL THEN
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                        payload, bytes, slot, enqueued_at, visible_at, last_error, error_class,
                                        finished_at)
        VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'dead', ev_priority, ev_key, false, ev_id,
                NULL, ev_bytes, 0, at_time, at_time,
                format('subscription "%s" was full when the event was published', q.queue), 'backlog_full', at_time);
        RETURN 2;
    END IF;
    -- The message's key (core::group_key) is its partition_key in a partition-ordered queue; an
    -- event has no fairness_key, so elsewhere every message is a head.
    IF q.ordering = 'partition' THEN
        v_head := forgeyard_pl.queue_join_key(q, ev_key, 1) > 0;
    END IF;
    -- (A fair subscription queue's message gets its pass, as enqueue gives one.)
    IF q.fairness THEN
        v_pass := (forgeyard_pl.queue_fair_passes(q, ev_priority, NULL, 1))[1];
    END IF;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                    payload, bytes, slot, enqueued_at, visible_at, pass)
    VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'pending', ev_priority, ev_key, v_head, ev_id,
            NULL, ev_bytes, v_slot, at_time, at_time, v_pass);
    -- The same wake-up payload as enqueue: a digest of "<tenant>/<queue>".
    IF q.notify THEN
        PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
    END IF;
    RETURN 0;
END
$$;

-- topic::replay: delivers the retained events of topic p_topic (retention p_retention microseconds;
-- 0: none) published at or after p_since to subscription p_subscription, in event_seq order; returns
-- how many reached its consumers. The events are read first, then the subscription's queue is
-- loaded as a producer's, then each event delivered by the subscription's filter (read again when
-- the event type changes). 42704 if the subscription is gone.
CREATE FUNCTION forgeyard_pl.topic_replay(p_tenant text, p_topic text, p_retention bigint, p_subscription text,
                                          p_since timestamptz, at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
    loaded boolean := false;
    ev record;
    delivered bigint := 0;
    type_of_route text;
    r_found boolean := false;
    r_dead_letter boolean;
    r_filtered boolean;
    r_listed boolean;
    r_min bigint;
    r_max bigint;
    routing integer;
BEGIN
    IF p_retention = 0 THEN
        RETURN 0;
    END IF;
    FOR ev IN
        SELECT e.event_seq, e.event_id, e.event_type, e.version, e.partition_key, e.priority::integer AS priority,
               octet_length(e.payload)::bigint AS bytes
          FROM forgeyard.topic_events e
         WHERE e.tenant_id = p_tenant AND e.topic = p_topic
           AND e.published_at >= p_since AND e.published_at > at_time - p_retention * '1 microsecond'::interval
         ORDER BY e.event_seq
    LOOP
        IF NOT loaded THEN
            q := forgeyard_pl.queue_load(p_tenant, p_subscription, true);
            loaded := true;
        END IF;
        IF type_of_route IS DISTINCT FROM ev.event_type THEN
            SELECT s.on_full = 'dead_letter', s.event_types IS NOT NULL, s.event_types ? ev.event_type,
                   (s.event_types -> ev.event_type ->> 'min')::bigint, (s.event_types -> ev.event_type ->> 'max')::bigint
              INTO r_dead_letter, r_filtered, r_listed, r_min, r_max
              FROM forgeyard.subscriptions s
             WHERE s.tenant_id = p_tenant AND s.topic = p_topic AND s.subscription = p_subscription;
            r_found := FOUND;
            type_of_route := ev.event_type;
        END IF;
        IF NOT r_found THEN
            PERFORM forgeyard_pl.topic_unknown_subscription(p_topic, p_subscription);
        END IF;
        routing := CASE WHEN NOT r_filtered THEN 0
                        WHEN NOT r_listed THEN 1
                        WHEN ev.version BETWEEN coalesce(r_min, 1) AND coalesce(r_max, 1000000) THEN 0
                        ELSE 2 END;
        IF forgeyard_pl.topic_deliver(q, routing, r_dead_letter, ev.event_id, ev.event_type, ev.version,
                                      ev.partition_key, ev.priority, ev.bytes, at_time) = 0 THEN
            delivered := delivered + 1;
        END IF;
    END LOOP;
    IF NOT loaded THEN
        q := forgeyard_pl.queue_load(p_tenant, p_subscription, true);
    END IF;
    RETURN delivered;
END
$$;

-- @body fy_event_type_register
DECLARE
    v_tenant text;
    v_type text;
    v_version integer;
    v_class text := 'operational';
    v_current text;
    e record;
    v text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_type := forgeyard_pl.name_arg('event_type', event_type, 128);
    v_version := forgeyard_pl.topic_version_arg('version', version);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
            IF e.key <> 'retention_class' THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = format('event type option %s is unknown', e.key);
            END IF;
            v := coalesce(e.value, 'null');
            IF v NOT IN ('ephemeral', 'short', 'operational', 'audit') THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'retention_class must be ephemeral, short, operational or audit',
                    DETAIL = format('got "%s"', v);
            END IF;
            v_class := v;
        END LOOP;
    END IF;
    INSERT INTO forgeyard.event_types (tenant_id, event_type, version, retention_class, registered_at)
    VALUES (v_tenant, v_type, v_version, v_class, forgeyard.now()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT x.retention_class INTO v_current FROM forgeyard.event_types x
         WHERE x.tenant_id = v_tenant AND x.event_type = v_type AND x.version = v_version;
        v_current := coalesce(v_current, '');
        IF v_current <> v_class THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.duplicate_object@',
                MESSAGE = format('event type "%s" version %s is registered with retention_class %s',
                                 v_type, v_version, v_current);
        END IF;
    END IF;
END

-- @body fy_event_type_list
DECLARE
    v_tenant text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    RETURN QUERY
    SELECT x.event_type, x.version, x.retention_class, x.registered_at FROM forgeyard.event_types x
     WHERE x.tenant_id = v_tenant ORDER BY x.event_type, x.version;
END

-- @body fy_topic_create
-- Options key by key in jsonb's order: max_subscriptions (digits, 1..256), retention (an interval,
-- zero allowed: nothing replayable) and dedup_window, at most 365 days.
DECLARE
    v_tenant text;
    v_topic text;
    v_max integer := 16;
    v_retention bigint := 0;
    v_dedup bigint := 86400000000;
    e record;
    v text;
    iv interval;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
            v := coalesce(e.value, 'null');
            IF e.key IN ('retention', 'dedup_window') THEN
                BEGIN
                    iv := v::interval;
                EXCEPTION WHEN data_exception THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = format('topic option %s must be an interval', e.key), DETAIL = format('got "%s"', v);
                END;
                IF e.key = 'dedup_window' THEN
                    v_dedup := forgeyard_pl.duration_arg('topic option dedup_window', iv, 31536000000000);
                ELSIF extract(year FROM iv) = 0 AND extract(month FROM iv) = 0 AND extract(day FROM iv) = 0
                      AND extract(epoch FROM iv) = 0 THEN
                    v_retention := 0;  -- (zero retention is allowed: nothing is replayable)
                ELSE
                    v_retention := forgeyard_pl.duration_arg('topic option retention', iv, 31536000000000);
                END IF;
            ELSIF e.key = 'max_subscriptions' THEN
                IF v ~ '^[0-9]{1,4}$' THEN
                    v_max := v::integer;
                END IF;
                IF v !~ '^[0-9]{1,4}$' OR v_max NOT BETWEEN 1 AND 256 THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = 'topic option max_subscriptions must be between 1 and 256';
                END IF;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = format('topic option %s is unknown', e.key);
            END IF;
        END LOOP;
    END IF;
    INSERT INTO forgeyard.topics (tenant_id, topic, max_subscriptions, retention_usecs, dedup_window_usecs, created_at)
    VALUES (v_tenant, v_topic, v_max, v_retention, v_dedup, forgeyard.now()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.duplicate_object@',
            MESSAGE = format('topic "%s" already exists for tenant "%s"', v_topic, v_tenant);
    END IF;
END

-- @body fy_topic_drop
-- The topic row goes first: that waits for publishers (FOR KEY SHARE) to commit. Then its
-- subscriptions, each queue dropped with queue_drop in subscription order, then its events.
DECLARE
    v_tenant text;
    v_topic text;
    dropped boolean;
    r record;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    DELETE FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic;
    dropped := FOUND;
    FOR r IN
        WITH d AS (DELETE FROM forgeyard.subscriptions s WHERE s.tenant_id = v_tenant AND s.topic = v_topic
                   RETURNING s.tenant_id, s.subscription)
        SELECT forgeyard.queue_drop(d.tenant_id, d.subscription) FROM d ORDER BY d.subscription
    LOOP
    END LOOP;
    DELETE FROM forgeyard.topic_events e WHERE e.tenant_id = v_tenant AND e.topic = v_topic;
    RETURN dropped;
END

-- @body fy_topic_list
DECLARE
    v_tenant text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    RETURN QUERY
    SELECT t.topic,
           jsonb_build_object('max_subscriptions', t.max_subscriptions,
                              'retention', (t.retention_usecs * '1 microsecond'::interval)::text,
                              'dedup_window', (t.dedup_window_usecs * '1 microsecond'::interval)::text),
           COALESCE((SELECT jsonb_agg(s.subscription ORDER BY s.subscription) FROM forgeyard.subscriptions s
                      WHERE s.tenant_id = t.tenant_id AND s.topic = t.topic), '[]'::jsonb)
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant ORDER BY t.topic;
END
