-- The PL/pgSQL edition of extension/topic_claim.cpp: subscription_claim (claim plus the event each
-- delivery carries) and topic_purge, the maintenance of stored events.

-- @body fy_subscription_claim
-- Arguments first (a NULL consumer is 22004 whatever the queue), then the subscription's queue, its
-- topic (42704 naming topic "(any)" for a queue that is no subscription), max_messages and
-- visibility, the claim (queue_claim; deliveries that lapsed on every attempt are dead-lettered
-- there and not returned), and then each delivery's event looked up by its event_id.
DECLARE
    v_consumer text;
    q forgeyard.queues%ROWTYPE;
    v_topic text;
    n integer;
    vis bigint;
    c record;
BEGIN
    v_consumer := forgeyard_pl.name_arg('consumer', consumer, 256);
    q := forgeyard_pl.queue_open(tenant, subscription);
    SELECT s.topic INTO v_topic FROM forgeyard.subscriptions s WHERE s.tenant_id = q.tenant_id AND s.subscription = q.queue;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_subscription('(any)', q.queue);
    END IF;
    n := forgeyard_pl.queue_max_messages_arg(max_messages);
    vis := forgeyard_pl.queue_visibility_arg(visibility, q.visibility_usecs);
    FOR c IN
        SELECT x.c_msg_id, x.c_event_id, x.c_partition_key, x.c_priority, x.c_attempt, x.c_claim_token, x.c_payload,
               x.c_enqueued_at
          FROM forgeyard_pl.queue_claim(q, v_consumer, n, vis, forgeyard.now()) x
         WHERE NOT x.c_lapsed
         ORDER BY x.c_priority, x.c_order, x.c_msg_id
    LOOP
        msg_id := c.c_msg_id;
        event_id := c.c_event_id;
        partition_key := c.c_partition_key;
        priority := (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1];
        attempt := c.c_attempt;
        claim_token := c.c_claim_token;
        payload := c.c_payload;
        enqueued_at := c.c_enqueued_at;
        topic := v_topic;
        event_type := NULL;
        version := NULL;
        event_seq := NULL;
        IF c.c_event_id IS NOT NULL THEN
            SELECT e.event_type, e.version, e.event_seq INTO event_type, version, event_seq
              FROM forgeyard.topic_events e
             WHERE e.tenant_id = q.tenant_id AND e.topic = v_topic AND e.event_id = c.c_event_id;
        END IF;
        RETURN NEXT;
    END LOOP;
END

-- @body fy_topic_purge
-- Events past their topic's retention and dedup window that no pending message of a subscription
-- still needs (its payload would be gone), oldest first, SKIP LOCKED so that purgers never wait
-- for each other.
DECLARE
    v_max integer;
    v_tenant text;
    v_now timestamptz;
    purged bigint;
BEGIN
    v_max := forgeyard_pl.queue_positive_int_arg('max_events', max_events, 1000000);
    v_tenant := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    v_now := forgeyard.now();
    DELETE FROM forgeyard.topic_events d USING (
        SELECT e.tenant_id, e.topic, e.event_seq FROM forgeyard.topic_events e JOIN forgeyard.topics t
            ON t.tenant_id = e.tenant_id AND t.topic = e.topic
         WHERE (v_tenant IS NULL OR e.tenant_id = v_tenant)
           AND e.published_at <= (v_now - (GREATEST(t.retention_usecs, t.dedup_window_usecs) * '1 microsecond'::interval))
           AND NOT EXISTS (SELECT 1 FROM forgeyard.subscriptions s JOIN forgeyard.messages m
                                ON m.tenant_id = s.tenant_id AND m.queue = s.subscription
                            WHERE s.tenant_id = e.tenant_id AND s.topic = e.topic
                              AND m.event_id = e.event_id AND m.state = 'pending')
         ORDER BY e.published_at LIMIT v_max FOR UPDATE OF e SKIP LOCKED) old
     WHERE d.tenant_id = old.tenant_id AND d.topic = old.topic AND d.event_seq = old.event_seq;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
