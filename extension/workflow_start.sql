-- The PL/pgSQL edition of workflow_start and workflow_claim (extension/workflow_start.cpp): a run
-- started in the caller's transaction, idempotent by run_key, handed out through the queue of its
-- definition; a claim owns each run it hands out under the claim token of its delivery (the run's
-- epoch), takes over runs whose owner's lease ran out, and ends runs whose deliveries lapsed on
-- every attempt or whose deadline passed.

-- @helper
-- workflow_claim's rows (its result columns share names with the tables' columns: prefixed here).
-- Claims through forgeyard_pl.queue_claim, the queue's own claim, as queue::claim.
CREATE FUNCTION forgeyard_pl.workflow_claim(p_tenant text, p_worker text, p_definitions text[], p_max_runs integer,
                                            p_lease interval)
    RETURNS TABLE (r_run_id uuid, r_workflow text, r_version integer, r_epoch bigint, r_state text, r_input jsonb)
    LANGUAGE plpgsql
    AS $$
DECLARE
    queues text[] := '{}';
    d text;
    at_bytes integer;
    digits text;
    qname text;
    lease_us bigint := 0;
    now_at timestamptz;
    got integer := 0;
    more boolean;
    q forgeyard.queues%ROWTYPE;
    vis bigint;
    l_ids bigint[];
    l_payloads bytea[];
    h_ids bigint[];
    h_tokens bigint[];
    h_payloads bytea[];
    i integer;
    f record;
    takeover boolean;
    timed_out text;
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    p_worker := forgeyard_pl.name_arg('worker', p_worker, 256);
    IF p_definitions IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'definitions must not be NULL';
    END IF;
    IF cardinality(p_definitions) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'definitions must name at least one ''workflow@version''';
    END IF;
    IF cardinality(p_definitions) > 100 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'at most 100 definitions';
    END IF;
    FOREACH d IN ARRAY p_definitions LOOP
        IF d IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'definitions must not contain NULL';
        END IF;
        -- wf::parse_definition: the last '@' after 1 to 100 bytes, then a version of at least 1.
        at_bytes := octet_length(substring(d FROM '^(.*)@'));
        digits := substring(d FROM '@([^@]*)$');
        IF at_bytes IS NULL OR at_bytes = 0 OR at_bytes > 100 OR digits !~ '^[0-9]+$'
           OR digits::numeric < 1 OR digits::numeric > 2147483647 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'definitions must be ''workflow@version'' with a version of at least 1, not '''
                          || forgeyard_pl.workflow_left_bytes(d, 300) || '''';
        END IF;
        qname := '_wf.' || substring(d FROM '^(.*)@') || '@' || digits::integer;
        IF NOT qname = ANY (queues) THEN
            queues := queues || qname;
        END IF;
    END LOOP;
    p_max_runs := forgeyard_pl.queue_positive_int_arg('max_runs', p_max_runs, 100);
    IF p_lease IS NOT NULL THEN
        -- (0: the queue's visibility timeout)
        lease_us := forgeyard_pl.duration_arg('lease', p_lease, 2592000000000);
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    FOREACH qname IN ARRAY queues LOOP
        EXIT WHEN got >= p_max_runs;
        IF NOT EXISTS (SELECT FROM forgeyard.queues x WHERE x.tenant_id = p_tenant AND x.queue = qname) THEN
            CONTINUE;  -- nothing started yet
        END IF;
        -- Until max_runs or an empty claim: a message that is not its run's live one takes a place
        -- in a claim and is let go.
        more := true;
        WHILE more AND got < p_max_runs LOOP
            q := forgeyard_pl.queue_load(p_tenant, qname, false);
            vis := CASE WHEN lease_us > 0 THEN lease_us ELSE q.visibility_usecs END;
            SELECT coalesce(array_agg(x.c_msg_id ORDER BY x.n) FILTER (WHERE x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_payload ORDER BY x.n) FILTER (WHERE x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_msg_id ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_claim_token ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_payload ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}')
              INTO l_ids, l_payloads, h_ids, h_tokens, h_payloads
              FROM forgeyard_pl.queue_claim(q, p_worker, p_max_runs - got, vis, now_at)
                   WITH ORDINALITY x(c_msg_id, c_event_id, c_partition_key, c_priority, c_attempt, c_claim_token, c_payload,
                                     c_enqueued_at, c_order, c_lapsed, n);
            more := cardinality(l_ids) > 0 OR cardinality(h_ids) > 0;  -- a lapsed run may be compensating now
            -- A run whose deliveries lapsed on every attempt (dead-lettered by the claim) ends:
            -- running failed, compensating compensation_failed.
            FOR i IN 1 .. cardinality(l_ids) LOOP
                SELECT * INTO f FROM forgeyard_pl.workflow_claim_find(p_tenant, qname, l_ids[i], l_payloads[i], now_at);
                IF f.state IS NULL OR f.msg_id IS DISTINCT FROM l_ids[i] OR f.state NOT IN ('running', 'compensating') THEN
                    CONTINUE;
                END IF;
                timed_out := forgeyard_pl.workflow_claim_timeout(p_tenant, f.run_id, f.state, f.past_step_deadline, f.epoch, now_at);
                PERFORM forgeyard_pl.workflow_settle(
                    p_tenant, f.run_id, CASE WHEN f.state = 'compensating' THEN 'compensation_failed' ELSE 'failed' END, NULL,
                    CASE WHEN timed_out IS NULL THEN 'the owner''s lease ran out'
                         ELSE 'step "' || timed_out || '" ran past its timeout' END
                    || ' on every attempt (the definition queue''s max_attempts)', now_at);
            END LOOP;
            FOR i IN 1 .. cardinality(h_ids) LOOP
                SELECT * INTO f FROM forgeyard_pl.workflow_claim_find(p_tenant, qname, h_ids[i], h_payloads[i], now_at);
                -- A message that is not the run's live one (the run was cancelled, retried or has
                -- finished) is let go.
                IF f.state IS NULL OR f.msg_id IS DISTINCT FROM h_ids[i]
                   OR f.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked') THEN
                    PERFORM forgeyard.ack(p_tenant, qname, h_ids[i], h_tokens[i]);
                    CONTINUE;
                END IF;
                -- Past its deadline: timed out, compensating first if it has compensations to run
                -- (their message comes in a later round). A compensating run finishes its
                -- compensations.
                IF f.past_deadline AND f.state <> 'compensating' THEN
                    PERFORM forgeyard.ack(p_tenant, qname, h_ids[i], h_tokens[i]);
                    PERFORM forgeyard_pl.workflow_settle(p_tenant, f.run_id, 'timed_out', NULL, 'the run''s deadline passed', now_at);
                    CONTINUE;
                END IF;
                -- A run still running was claimed again: its owner's lease ran out. One whose step
                -- ran past its timeout records that attempt as failed (the new owner runs it again).
                takeover := f.state = 'running';
                PERFORM forgeyard_pl.workflow_claim_timeout(p_tenant, f.run_id, f.state, f.past_step_deadline, f.epoch, now_at);
                -- The lease ends where the claim made the message visible again.
                UPDATE forgeyard.wf_runs x
                   SET state = CASE WHEN x.state = 'compensating' THEN x.state ELSE 'running' END,
                       epoch = h_tokens[i], owner = p_worker, step_deadline = NULL,
                       lease_until = now_at + vis * interval '1 microsecond',
                       takeovers = x.takeovers + CASE WHEN takeover THEN 1 ELSE 0 END,
                       taken_over_at = CASE WHEN takeover THEN now_at ELSE x.taken_over_at END,
                       previous_owner = CASE WHEN takeover THEN x.owner ELSE x.previous_owner END,
                       updated_at = now_at
                 WHERE x.tenant_id = p_tenant AND x.run_id = f.run_id;
                -- The new epoch's step cursor, at no step yet.
                INSERT INTO forgeyard.wf_cursors AS k (tenant_id, run_id, epoch, position, step)
                VALUES (p_tenant, f.run_id, h_tokens[i], 0, NULL)
                ON CONFLICT (tenant_id, run_id) DO UPDATE SET epoch = excluded.epoch, position = 0, step = NULL;
                got := got + 1;
                r_run_id := f.run_id;
                r_workflow := f.workflow;
                r_version := f.version;
                r_epoch := h_tokens[i];
                r_state := CASE WHEN f.state = 'compensating' THEN 'compensating' ELSE 'running' END;
                r_input := f.input;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;

-- The run a delivery of queue p_queue names, locked (its columns as workflow_claim reads them):
-- XX001 when the message names no run; state NULL when the run is gone.
CREATE FUNCTION forgeyard_pl.workflow_claim_find(p_tenant text, p_queue text, p_msg_id bigint, p_payload bytea,
                                                 p_now timestamptz,
                                                 OUT run_id uuid, OUT state text, OUT msg_id bigint, OUT past_deadline boolean,
                                                 OUT workflow text, OUT version integer, OUT input jsonb,
                                                 OUT past_step_deadline boolean, OUT epoch bigint)
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_payload IS NULL OR octet_length(p_payload) <> 16 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.data_corrupted@',
            MESSAGE = format('workflow queue "%s" holds message %s that names no run', p_queue, p_msg_id);
    END IF;
    run_id := encode(p_payload, 'hex')::uuid;
    SELECT x.state, x.msg_id, coalesce(x.deadline <= p_now, false), x.workflow, x.version, x.input,
           coalesce(x.step_deadline <= p_now, false), x.epoch
      INTO state, msg_id, past_deadline, workflow, version, input, past_step_deadline, epoch
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = workflow_claim_find.run_id FOR UPDATE;
END
$$;

-- record_timeout: a running run whose owner ran past a step's timeout has that attempt recorded as
-- failed (not when the step is not known: the last epoch's cursor was lost to a crash). Returns the
-- step, or NULL.
CREATE FUNCTION forgeyard_pl.workflow_claim_timeout(p_tenant text, p_run uuid, p_state text, p_past boolean,
                                                    p_epoch bigint, p_now timestamptz)
    RETURNS text LANGUAGE plpgsql
    AS $$
DECLARE
    k record;
BEGIN
    IF p_state <> 'running' OR NOT p_past THEN
        RETURN NULL;
    END IF;
    -- The step cursor of the run's last epoch, read after the run's lock.
    SELECT c.position, c.step INTO k FROM forgeyard.wf_cursors c
     WHERE c.tenant_id = p_tenant AND c.run_id = p_run AND c.epoch = p_epoch;
    IF NOT FOUND OR k.step IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM forgeyard_pl.workflow_record_failed(p_tenant, p_run, k.position, k.step,
                                                'step "' || k.step || '" ran past its timeout', p_epoch, p_now);
    RETURN k.step;
END
$$;

-- @body fy_workflow_start
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_workflow text := forgeyard_pl.name_arg('workflow', workflow, 100);
    t_version integer;
    t_run_key text;
    t_input jsonb;
    now_at timestamptz;
    e record;
    o_deadline text;
    o_retention text;
    o_priority integer := 3;
    o_parent uuid;
    d interval;
    deadline_at timestamptz;
    retention bigint := 2592000000000;
    new_id uuid;
    n integer;
    q text;
    msg bigint;
    x record;
BEGIN
    PERFORM forgeyard_pl.not_null('version', version IS NOT NULL);
    t_version := version;
    IF t_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'version must be at least 1, not ' || t_version;
    END IF;
    t_run_key := forgeyard_pl.name_arg('run_key', run_key, 255);
    PERFORM forgeyard_pl.not_null('input', input IS NOT NULL);
    t_input := input;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT j.key, jsonb_typeof(j.value) AS type, coalesce(j.value #>> '{}', '') AS value
                   FROM jsonb_each(options) j LOOP
            IF e.key NOT IN ('deadline', 'priority', 'retention', 'parent') THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'unknown workflow option ' || forgeyard_pl.workflow_left_bytes(e.key, 100)
                              || ' (the options are deadline, priority, parent and retention)';
            END IF;
            IF e.type <> 'string' THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'workflow option ' || e.key || ' must be a string';
            END IF;
            IF e.key = 'deadline' THEN
                o_deadline := e.value;
            ELSIF e.key = 'priority' THEN
                o_priority := forgeyard_pl.queue_priority('priority', e.value);
            ELSIF e.key = 'retention' THEN
                o_retention := e.value;
            ELSE
                -- core::parse_uuid: PostgreSQL's uuid input (8 groups of 4 hex digits, a '-' after
                -- any of the first 7, braces around all or none).
                IF e.value !~ '^[0-9A-Fa-f]{4}(-?[0-9A-Fa-f]{4}){7}$' AND e.value !~ '^\{[0-9A-Fa-f]{4}(-?[0-9A-Fa-f]{4}){7}\}$' THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = 'workflow option parent must be a run id (a uuid), not ''' || e.value || '''';
                END IF;
                o_parent := e.value::uuid;
            END IF;
        END LOOP;
    END IF;
    IF o_deadline IS NOT NULL THEN
        BEGIN
            d := o_deadline::interval;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'workflow option deadline must be an interval', DETAIL = 'got "' || o_deadline || '"';
        END;
        deadline_at := now_at + forgeyard_pl.duration_arg('deadline', d, 31536000000000) * interval '1 microsecond';
    END IF;
    IF o_retention IS NOT NULL THEN
        BEGIN
            d := o_retention::interval;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'workflow option retention must be an interval', DETAIL = 'got "' || o_retention || '"';
        END;
        retention := forgeyard_pl.duration_arg('workflow option retention', d, 31536000000000);
        IF retention < 1000000 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'workflow option retention must be at least 1 second';
        END IF;
    END IF;
    IF o_parent IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = o_parent) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
            MESSAGE = format('parent workflow run %s not found for tenant "%s"', o_parent, t_tenant);
    END IF;
    new_id := gen_random_uuid();
    INSERT INTO forgeyard.wf_runs (tenant_id, run_id, run_key, workflow, version, input, state, priority, deadline,
                                   parent_run_id, created_at, updated_at, retention_usecs)
    VALUES (t_tenant, new_id, t_run_key, t_workflow, t_version, t_input, 'pending', o_priority, deadline_at, o_parent,
            now_at, now_at, retention)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        q := '_wf.' || t_workflow || '@' || t_version;
        PERFORM forgeyard_pl.queue_ensure(t_tenant, q);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, new_id, o_priority);
        UPDATE forgeyard.wf_runs w SET msg_id = msg, lease_until = NULL WHERE w.tenant_id = t_tenant AND w.run_id = new_id;
        RETURN new_id;
    END IF;
    -- The run_key started a run before (or a concurrent start committed it first): the same
    -- definition and input return that run, anything else is FY011.
    SELECT w.run_id, w.workflow = t_workflow AND w.version = t_version AND w.input = t_input AS same,
           w.workflow || '@' || w.version AS first
      INTO x
      FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_key = t_run_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@', MESSAGE = 'workflow_start inserted no run and found none';
    END IF;
    IF NOT x.same THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_mismatch@',
            MESSAGE = format('run_key "%s" already started run %s of %s with other input', t_run_key, x.run_id, x.first),
            DETAIL = 'a run_key names one run: the same workflow, version and input';
    END IF;
    RETURN x.run_id;
END

-- @body fy_workflow_claim sql
SELECT * FROM forgeyard_pl.workflow_claim(tenant, worker, definitions, max_runs, lease);
