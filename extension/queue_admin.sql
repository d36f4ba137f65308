-- The PL/pgSQL edition of extension/queue_admin.cpp: queue_stats, queue_list, dead_list,
-- dead_redrive, dead_purge, and claim_plan for DBAs.

-- @helper
-- The claim statement of up to `lim` messages (queue_claim.cpp's claim_sql, flow catalog): $1
-- tenant, $2 queue, $3 visible until, $4 consumer, $5 now. claim_plan explains it; the claim
-- (queue_claim.sql) runs it with the picked rows updated by msg_id instead of by tuple id.
CREATE FUNCTION forgeyard_pl.queue_claim_sql(lim integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    picks text := '';
    p integer;
BEGIN
    FOR p IN 0 .. 5 LOOP
        IF p > 0 THEN
            picks := picks || ' UNION ALL ';
        END IF;
        picks := picks || 'SELECT * FROM (SELECT c.ctid FROM forgeyard.messages c'
            || '  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2'
            || '    AND c.priority OPERATOR(pg_catalog.=) ' || p || '::pg_catalog.int2 AND c.state OPERATOR(pg_catalog.=) ''pending'''
            || ' AND c.is_head AND c.pass IS NULL AND c.ready_pos IS NULL'
            || '    AND c.visible_at OPERATOR(pg_catalog.<=) $5'
            || '  ORDER BY c.visible_at, c.msg_id LIMIT ' || lim || ' FOR UPDATE SKIP LOCKED) c' || p;
    END LOOP;
    RETURN 'WITH picked AS (' || picks || ' LIMIT ' || lim || ')'
        || ' UPDATE forgeyard.messages m SET claim_token = pg_catalog.nextval(''forgeyard.claim_tokens''),'
        || '   attempt = m.attempt OPERATOR(pg_catalog.+) 1, visible_at = $3, claimed_by = $4'
        || '  FROM picked WHERE m.ctid OPERATOR(pg_catalog.=) picked.ctid'
        || ' RETURNING m.msg_id, m.event_id, m.partition_key, m.priority, m.attempt, m.claim_token,'
        || '   COALESCE(m.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e'
        || '      ON e.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND e.topic OPERATOR(pg_catalog.=) s.topic'
        || '     WHERE s.tenant_id OPERATOR(pg_catalog.=) m.tenant_id AND s.subscription OPERATOR(pg_catalog.=) m.queue'
        || '       AND e.event_id OPERATOR(pg_catalog.=) m.event_id)),'
        || '   m.enqueued_at, m.slot, m.bytes';
END
$$;

-- @body fy_queue_stats
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_now timestamptz;
    oldest timestamptz;
    w record;
    used record;
    fill double precision;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_now := forgeyard.now();
    SELECT count(*) FILTER (WHERE m.state = 'pending' AND m.visible_at <= v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NULL AND m.visible_at > v_now),
           count(*) FILTER (WHERE m.state = 'dead'),
           min(m.enqueued_at) FILTER (WHERE m.state = 'pending' AND m.visible_at <= v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND NOT m.is_head AND m.visible_at <= v_now)
      INTO ready, in_flight, delayed, dead, oldest, waiting
      FROM forgeyard.messages m WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue;
    retries_delayed := 0;
    IF q.retry_budget IS NOT NULL THEN
        SELECT x.window_start, x.delayed AS n INTO w FROM forgeyard.queue_retry_windows x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
        IF FOUND AND v_now >= w.window_start
           AND forgeyard_pl.usecs(v_now) < forgeyard_pl.usecs(w.window_start) + q.retry_budget_window_usecs THEN
            retries_delayed := w.n;
        END IF;
    END IF;
    used := forgeyard_pl.queue_usage(q.tenant_id, q.queue);
    bytes := used.bytes;
    oldest_ready_age := CASE WHEN oldest IS NULL THEN NULL
                             ELSE forgeyard_pl.queue_usecs_interval(forgeyard_pl.usecs(v_now) - forgeyard_pl.usecs(oldest)) END;
    fill := greatest(used.messages::double precision / q.max_messages::double precision,
                     used.bytes::double precision / q.max_bytes::double precision);
    pressure := CASE WHEN fill < 0.70 THEN 'normal' WHEN fill <= 0.90 THEN 'elevated' ELSE 'saturated' END;
    RETURN NEXT;
END

-- @body fy_queue_list
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(tenant);
    RETURN QUERY
    SELECT x.queue, jsonb_build_object(
        'max_messages', x.max_messages, 'max_bytes', x.max_bytes, 'max_payload_bytes', x.max_payload_bytes,
        'visibility_timeout', (x.visibility_usecs * '1 microsecond'::interval)::text,
        'max_attempts', x.max_attempts,
        'backoff_base', (x.backoff_base_usecs * '1 microsecond'::interval)::text,
        'backoff_max', (x.backoff_max_usecs * '1 microsecond'::interval)::text,
        'ordering', x.ordering, 'dead_letter_payload', x.dead_letter_payload,
        'retain_acked', (x.retain_acked_usecs * '1 microsecond'::interval)::text,
        'max_dead', x.max_dead,
        'dead_letter_retention', (x.dead_retention_usecs * '1 microsecond'::interval)::text,
        'dedup_window', (x.dedup_window_usecs * '1 microsecond'::interval)::text,
        'admit_emergency', x.admit_emergency, 'admit_security_control', x.admit_security_control,
        'admit_realtime', x.admit_realtime, 'admit_interactive', x.admit_interactive,
        'admit_background', x.admit_background, 'admit_bulk', x.admit_bulk, 'notify', x.notify,
        'retry_budget', x.retry_budget, 'retry_budget_min', x.retry_budget_min,
        'retry_budget_window', (x.retry_budget_window_usecs * '1 microsecond'::interval)::text,
        'max_in_flight_per_key', x.max_in_flight_per_key, 'fairness', x.fairness,
        'aging', (x.aging_usecs * '1 microsecond'::interval)::text)
      FROM forgeyard.queues x WHERE x.tenant_id = tenant ORDER BY x.queue;
END

-- @body fy_dead_list
DECLARE
    q forgeyard.queues%ROWTYPE;
    after bigint;
    lim integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    after := coalesce(after_msg_id, 0);
    lim := forgeyard_pl.queue_positive_int_arg('max_rows', max_rows, 10000);
    RETURN QUERY
    SELECT x.msg_id, x.event_id, x.partition_key, forgeyard_pl.queue_priority_name(x.priority), x.attempt, x.last_error,
           x.error_class, x.finished_at, x.payload
      FROM forgeyard.messages x
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead' AND x.msg_id > after
     ORDER BY x.msg_id LIMIT lim;
END

-- @body fy_dead_redrive
-- Dead letters back into the queue (attempt 0, visible now, admitted like new messages: FY020 when
-- full). Without msg_ids, the oldest max_rows that kept their payload; a listed one without
-- payload is 22023. The rows are locked (in msg_id order) before any is admitted.
DECLARE
    q forgeyard.queues%ROWTYPE;
    ids bigint[];
    lim integer;
    v_now timestamptz;
    d_ids bigint[];
    d_priorities integer[];
    d_bytes bigint[];
    d_keys text[];
    d_kept boolean[];
    d_fairness text[];
    v_slot integer;
    v_head boolean;
    v_pass bigint;
    i integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    lim := forgeyard_pl.queue_positive_int_arg('max_rows', max_rows, 10000);
    v_now := forgeyard.now();
    ids := msg_ids;
    SELECT coalesce(array_agg(d.msg_id ORDER BY d.msg_id), '{}'), array_agg(d.priority ORDER BY d.msg_id),
           array_agg(d.bytes ORDER BY d.msg_id), array_agg(d.partition_key ORDER BY d.msg_id),
           array_agg(d.kept ORDER BY d.msg_id), array_agg(d.fairness_key ORDER BY d.msg_id)
      INTO d_ids, d_priorities, d_bytes, d_keys, d_kept, d_fairness
      FROM (SELECT x.msg_id, x.priority::integer AS priority, x.bytes, x.partition_key, x.payload IS NOT NULL AS kept,
                   x.fairness_key
              FROM forgeyard.messages x
             WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead'
               AND (ids IS NULL OR x.msg_id = ANY (ids)) AND (ids IS NOT NULL OR x.payload IS NOT NULL)
             ORDER BY x.msg_id LIMIT CASE WHEN ids IS NULL THEN lim ELSE cardinality(ids) END
             FOR UPDATE OF x) d;
    FOR i IN 1 .. cardinality(d_ids) LOOP
        IF NOT d_kept[i] THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('dead letter %s cannot be redriven: its payload was dropped', d_ids[i]),
                DETAIL = 'the queue has dead_letter_payload = drop';
        END IF;
        v_slot := (forgeyard_pl.queue_admit(q, d_priorities[i], d_bytes[i])).o_slot;
        v_head := forgeyard_pl.queue_join_key(q,
            CASE WHEN q.ordering = 'partition' THEN d_keys[i]
                 WHEN q.max_in_flight_per_key IS NOT NULL THEN d_fairness[i] END, 1) > 0;
        -- (Its pass is taken while it is still dead, so that it is not its own class's lowest.)
        v_pass := CASE WHEN q.fairness THEN (forgeyard_pl.queue_fair_passes(q, d_priorities[i], d_fairness[i], 1))[1] END;
        UPDATE forgeyard.messages x
           SET state = 'pending', attempt = 0, claim_token = NULL, claimed_by = NULL, visible_at = v_now,
               finished_at = NULL, error_class = NULL, slot = v_slot, is_head = v_head, pass = v_pass, ready_pos = NULL
         WHERE x.msg_id = d_ids[i];
    END LOOP;
    RETURN cardinality(d_ids);
END

-- @body fy_dead_purge
DECLARE
    q forgeyard.queues%ROWTYPE;
    ids bigint[] := msg_ids;
    purged integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    DELETE FROM forgeyard.messages x
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead' AND (ids IS NULL OR x.msg_id = ANY (ids));
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END

-- @body fy_claim_plan
-- EXPLAIN of the claim statement as a generic plan (its tenant and queue stay parameters), planned
-- with sequential scans ruled out, as the C++ edition plans the statement it keeps for this.
DECLARE
    q forgeyard.queues%ROWTYPE;
    seqscan text := current_setting('enable_seqscan');
    mode text := current_setting('plan_cache_mode');
    line text;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF EXISTS (SELECT FROM pg_prepared_statements s WHERE s.name = 'forgeyard_pl_claim_plan') THEN
        DEALLOCATE forgeyard_pl_claim_plan;
    END IF;
    EXECUTE 'PREPARE forgeyard_pl_claim_plan(pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz, pg_catalog.text,'
            ' pg_catalog.timestamptz) AS ' || forgeyard_pl.queue_claim_sql(10);
    BEGIN
        PERFORM set_config('enable_seqscan', 'off', true);
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
        FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) EXECUTE forgeyard_pl_claim_plan(%L, %L, %L, %L, %L)',
                                   q.tenant_id, q.queue, forgeyard.now(), '', forgeyard.now()) LOOP
            plan := line;
            RETURN NEXT;
        END LOOP;
        PERFORM set_config('enable_seqscan', seqscan, true);
        PERFORM set_config('plan_cache_mode', mode, true);
    EXCEPTION WHEN OTHERS THEN
        DEALLOCATE forgeyard_pl_claim_plan;
        RAISE;
    END;
    DEALLOCATE forgeyard_pl_claim_plan;
END
