-- The PL/pgSQL edition of extension/topic_publish.cpp: publish and publish_batch, the
-- transactional outbox of a topic. The event is stored once (forgeyard.topic_events); each
-- matching subscription gets one payload-less message that refers to it by event_id
-- (topic_deliver in topic.sql).

-- @helper
-- start (topic_publish.cpp): the arguments tenant, topic, event_type, version and priority checked
-- in the C++ edition's order, the tenant rule; the topic (kept from being dropped until commit,
-- FOR KEY SHARE) and whether the pair is registered, in one statement (42704, FY050); then the
-- topic's subscriptions in name order, each with its decision for this type and version (0 deliver,
-- 1 skip, 2 quarantine) and its queue loaded as a producer's (parallel arrays).
CREATE FUNCTION forgeyard_pl.topic_start(p_tenant text, p_topic text, p_event_type text, p_version integer,
                                         p_priority text, OUT o_priority integer, OUT o_queues forgeyard.queues[],
                                         OUT o_routing integer[], OUT o_dead_letter boolean[])
    LANGUAGE plpgsql
    AS $$
DECLARE
    registered boolean;
    r record;
    q forgeyard.queues%ROWTYPE;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', p_tenant, 128);
    PERFORM forgeyard_pl.name_arg('topic', p_topic, 128);
    PERFORM forgeyard_pl.name_arg('event_type', p_event_type, 128);
    PERFORM forgeyard_pl.topic_version_arg('version', p_version);
    o_priority := forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', p_priority, 64));
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    SELECT EXISTS (SELECT FROM forgeyard.event_types e
                    WHERE e.tenant_id = t.tenant_id AND e.event_type = p_event_type AND e.version = p_version)
      INTO registered
      FROM forgeyard.topics t WHERE t.tenant_id = p_tenant AND t.topic = p_topic
       FOR KEY SHARE OF t;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(p_tenant, p_topic);
    END IF;
    IF NOT registered THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.schema_unsupported@',
            MESSAGE = format('event type "%s" version %s is not registered for tenant "%s"', p_event_type, p_version, p_tenant),
            DETAIL = 'register it with event_type_register first';
    END IF;
    o_queues := '{}';
    o_routing := '{}';
    o_dead_letter := '{}';
    FOR r IN
        SELECT s.subscription, s.on_full = 'dead_letter' AS dead_letter,
               CASE WHEN s.event_types IS NULL THEN 0
                    WHEN NOT (s.event_types ? p_event_type) THEN 1
                    WHEN p_version BETWEEN coalesce((s.event_types -> p_event_type ->> 'min')::bigint, 1)
                                       AND coalesce((s.event_types -> p_event_type ->> 'max')::bigint, 1000000) THEN 0
                    ELSE 2 END AS routing
          FROM forgeyard.subscriptions s
         WHERE s.tenant_id = p_tenant AND s.topic = p_topic
         ORDER BY s.subscription
    LOOP
        q := forgeyard_pl.queue_load(p_tenant, r.subscription, true);
        o_queues := array_append(o_queues, q);
        o_routing := array_append(o_routing, r.routing);
        o_dead_letter := array_append(o_dead_letter, r.dead_letter);
    END LOOP;
END
$$;

-- publish_one (topic_publish.cpp): one event of the publisher (topic_start's result) stored and
-- delivered to each subscription; its event_seq. A repeated event_id returns the first event's
-- event_seq, or FY011 for other contents: a concurrent publisher of the same event_id waits in the
-- INSERT for this one's transaction, then finds the first event.
CREATE FUNCTION forgeyard_pl.topic_publish_one(p_tenant text, p_topic text, p_event_type text, p_version integer,
                                               p_priority integer, p_payload bytea, p_event_id uuid, p_key text,
                                               p_queues forgeyard.queues[], p_routing integer[],
                                               p_dead_letter boolean[], at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    v_id uuid;
    v_digest text;
    v_bytes bigint;
    v_seq bigint;
    v_same boolean;
    i integer;
BEGIN
    IF p_key IS NOT NULL THEN
        PERFORM forgeyard_pl.name_arg('partition_key', p_key, 512);
    END IF;
    v_id := coalesce(p_event_id, gen_random_uuid());
    v_bytes := octet_length(p_payload);
    v_digest := encode(sha256(p_payload), 'hex');
    INSERT INTO forgeyard.topic_events AS e (tenant_id, topic, event_seq, event_id, event_type, version, partition_key,
                                             priority, payload, payload_digest, published_at)
    VALUES (p_tenant, p_topic, nextval('forgeyard.topic_event_seqs'), v_id, p_event_type, p_version, p_key,
            p_priority, p_payload, v_digest, at_time)
    ON CONFLICT (tenant_id, topic, event_id) DO NOTHING
    RETURNING e.event_seq INTO v_seq;
    IF NOT FOUND THEN
        SELECT e.event_seq, e.event_type = p_event_type AND e.version = p_version AND e.payload_digest = v_digest
                            AND e.partition_key IS NOT DISTINCT FROM p_key
          INTO v_seq, v_same
          FROM forgeyard.topic_events e WHERE e.tenant_id = p_tenant AND e.topic = p_topic AND e.event_id = v_id;
        IF v_same IS NOT TRUE THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_mismatch@',
                MESSAGE = 'event_id was published before with other contents',
                DETAIL = format('event_seq %s carries this event_id', coalesce(v_seq, 0));
        END IF;
        RETURN v_seq;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        PERFORM forgeyard_pl.topic_deliver(p_queues[i], p_routing[i], p_dead_letter[i], v_id, p_event_type, p_version,
                                           p_key, p_priority, v_bytes, at_time);
    END LOOP;
    RETURN v_seq;
END
$$;

-- @body fy_publish
-- The payload and partition_key are checked before the publisher's other arguments, as in the C++
-- edition.
DECLARE
    v_payload bytea;
    v_key text;
    s record;
BEGIN
    v_payload := forgeyard_pl.bytea_arg('payload', payload, 1073741824);
    IF partition_key IS NOT NULL THEN
        v_key := forgeyard_pl.text_arg('partition_key', partition_key, 512);
    END IF;
    SELECT x.o_priority, x.o_queues, x.o_routing, x.o_dead_letter INTO s
      FROM forgeyard_pl.topic_start(tenant, topic, event_type, version, priority) x;
    RETURN forgeyard_pl.topic_publish_one(tenant, topic, event_type, version, s.o_priority, v_payload, event_id, v_key,
                                          s.o_queues, s.o_routing, s.o_dead_letter, forgeyard.now());
END

-- @body fy_publish_batch
-- All or nothing: the arrays checked first (payloads present, at most 10000, event_ids and
-- partition_keys of its length when given), then the publisher, then each event in order (a NULL
-- payload is 22004 when its turn comes). Arrays of any shape count their elements in storage order.
DECLARE
    n integer;
    v_now timestamptz;
    s record;
    i integer;
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'payloads must not be NULL';
    END IF;
    n := cardinality(payloads);
    IF n > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'payloads must hold at most 10000 events';
    END IF;
    IF (event_ids IS NOT NULL AND cardinality(event_ids) <> n)
       OR (partition_keys IS NOT NULL AND cardinality(partition_keys) <> n) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'event_ids and partition_keys must match payloads in length';
    END IF;
    SELECT x.o_priority, x.o_queues, x.o_routing, x.o_dead_letter INTO s
      FROM forgeyard_pl.topic_start(tenant, topic, event_type, version, priority) x;
    v_now := forgeyard.now();
    IF n = 0 THEN
        RETURN;
    END IF;
    IF array_ndims(payloads) > 1 OR array_lower(payloads, 1) <> 1 THEN
        payloads := ARRAY(SELECT unnest(payloads));
    END IF;
    IF array_ndims(event_ids) > 1 OR array_lower(event_ids, 1) <> 1 THEN
        event_ids := ARRAY(SELECT unnest(event_ids));
    END IF;
    IF array_ndims(partition_keys) > 1 OR array_lower(partition_keys, 1) <> 1 THEN
        partition_keys := ARRAY(SELECT unnest(partition_keys));
    END IF;
    FOR i IN 1 .. n LOOP
        IF payloads[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'payloads must not contain NULL';
        END IF;
        event_seq := forgeyard_pl.topic_publish_one(tenant, topic, event_type, version, s.o_priority, payloads[i],
                                                    event_ids[i], partition_keys[i], s.o_queues, s.o_routing,
                                                    s.o_dead_letter, v_now);
        RETURN NEXT;
    END LOOP;
END
