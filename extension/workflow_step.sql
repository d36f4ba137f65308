-- The PL/pgSQL edition of the journal writes of workflow runs (extension/workflow_step.cpp): steps,
-- their results and failures, compensations, durable timers, waits for signals and signals. Every
-- write is fenced by the owner's epoch (forgeyard_pl.workflow_owned: FY001 for a stale owner).

-- @body fy_workflow_step
-- The fence, the journal row at the position, and the cursor move. Without a timeout (and no
-- deadline of an earlier step to let go of) the run's row is read, not locked, and the only write
-- is the cursor's, in an UNLOGGED table: the call writes no WAL. Two step calls of a run are
-- serialized by the cursor's row lock, and a claim that takes the run over moves the cursor to
-- its epoch (FY001 here after the wait). The run's row is locked before the cursor's, as every
-- call that locks both takes them.
DECLARE
    t_tenant text := tenant;
    t_run uuid := run_id;
    t_epoch bigint := epoch;
    t_step text := step;
    t_timeout bigint := 0;
    named integer := position;
    with_cursor boolean;
    now_at timestamptz;
    o record;
    c record;
    pos integer;
    jr record;
    recorded boolean;
    j_step text;
    j_status text;
    j_result jsonb;
    j_wake_at timestamptz;
    is_done boolean := false;
    timed boolean;
    t_deadline timestamptz;
BEGIN
    -- The argument checks of args.sql, called only to raise their errors (this call is the hot path).
    IF t_tenant IS NULL OR t_tenant = '' OR octet_length(t_tenant) > 128 OR t_run IS NULL THEN
        PERFORM forgeyard_pl.workflow_run_arg(t_tenant, t_run);
    END IF;
    IF t_epoch IS NULL THEN
        PERFORM forgeyard_pl.not_null('epoch', false);
    END IF;
    IF t_step IS NULL OR t_step = '' OR octet_length(t_step) > 200 THEN
        PERFORM forgeyard_pl.name_arg('step', t_step, 200);
    END IF;
    IF timeout IS NOT NULL THEN
        t_timeout := forgeyard_pl.duration_arg('timeout', timeout, 2592000000000);
    END IF;
    IF named < 1 THEN
        PERFORM forgeyard_pl.workflow_position_arg(named);
    END IF;
    -- The cursor is read and moved unless the caller names the position, and also then for a
    -- step with a timeout: a claim that takes the run over past it reads the step from the cursor.
    with_cursor := named IS NULL OR t_timeout > 0;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', t_timeout > 0, with_cursor);
    IF with_cursor THEN
        -- The cursor locked against other step calls of the run: FY001 when it is gone or another
        -- epoch's (after a wait, the newest version is read: a claim that took the run over moved
        -- it); 40001 when another step call of this epoch moved it since the run was read.
        IF o.cursor_tid IS NULL THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
        SELECT k.ctid AS tid, k.epoch, k.position, k.step INTO c FROM forgeyard.wf_cursors k
         WHERE k.run_id = t_run AND k.tenant_id = t_tenant FOR NO KEY UPDATE;
        IF NOT FOUND OR c.epoch <> t_epoch THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
        IF c.tid <> o.cursor_tid THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.serialization_failure@',
                MESSAGE = format('workflow run %s: another step call of this epoch moved the step cursor while this one waited', t_run),
                DETAIL = 'make one step call of a run at a time; retry this one';
        END IF;
    END IF;
    IF named IS NULL THEN
        pos := c.position + 1;
        SELECT j.step, j.status, j.result, j.wake_at INTO j_step, j_status, j_result, j_wake_at FROM forgeyard.wf_journal j
         WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
        recorded := FOUND;
    ELSE
        -- One descent of the journal's key for the step before the position and the row at it.
        pos := named;
        jr := forgeyard_pl.workflow_read_position(t_tenant, t_run, pos, true);
        IF pos > 1 THEN
            PERFORM forgeyard_pl.workflow_check_follows(pos, jr.j_previous, t_run, 'workflow_step');
        END IF;
        recorded := jr.j_found;
        j_step := jr.j_step;
        j_status := jr.j_status;
        j_result := jr.j_result;
        j_wake_at := jr.j_wake_at;
    END IF;
    -- wf::decide_step: a step done replays (a sleep only once its end is reached).
    IF recorded THEN
        IF j_step <> t_step THEN
            PERFORM forgeyard_pl.workflow_check_same_step(j_step, t_step, t_run, pos);
        END IF;
        is_done := j_status = 'done' AND NOT coalesce(j_wake_at > now_at, false);
    END IF;
    -- A step to run with a timeout: its deadline, and the owner's lease cut to it.
    timed := NOT is_done AND t_timeout > 0;
    t_deadline := now_at + t_timeout * interval '1 microsecond';
    IF with_cursor THEN
        UPDATE forgeyard.wf_cursors k SET position = pos, step = t_step
         WHERE k.run_id = t_run AND k.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
    END IF;
    -- A deadline to set, or an earlier step's to let go of: the fence locked the run's row then.
    -- The owner's lease ends by the deadline at the latest, as its message's visibility below.
    IF timed OR o.step_deadline IS NOT NULL THEN
        UPDATE forgeyard.wf_runs x
           SET step_deadline = CASE WHEN timed THEN t_deadline END,
               lease_until = CASE WHEN timed AND x.lease_until > t_deadline THEN t_deadline ELSE x.lease_until END
         WHERE x.run_id = t_run AND x.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
        END IF;
    END IF;
    IF timed THEN
        -- Still this epoch's delivery. Not waited for: a claim that holds it is taking the run
        -- over (and waits for this transaction's lock on the run), so the cut is moot.
        UPDATE forgeyard.messages m SET visible_at = t_deadline
         WHERE m.msg_id = (SELECT y.msg_id FROM forgeyard.messages y WHERE y.msg_id = o.msg_id
                              FOR NO KEY UPDATE SKIP LOCKED)
           AND m.claim_token = t_epoch AND m.visible_at > t_deadline;
    END IF;
    status := CASE WHEN is_done THEN 'done' ELSE 'run' END;
    result := CASE WHEN is_done THEN j_result END;
    idempotency_key := t_run || ':' || pos || ':' || t_step;
    RETURN NEXT;
END

-- @body fy_workflow_step_complete
-- The fence first, a statement of its own: a retry of this call that waited for the first
-- attempt's lock sees its journal row and answers as a replay. The run's lock serializes every
-- journal write of the run, and the journal is read after it, so the row found is the row to
-- write. A named position is checked on that reading: one descent for the step before it and
-- the row at it.
DECLARE
    t_tenant text := tenant;
    t_run uuid := run_id;
    t_epoch bigint := epoch;
    t_step text := step;
    t_result jsonb := result;
    t_compensation text := compensation;
    named integer := position;
    now_at timestamptz;
    o record;
    c record;
    pos integer;
    jr record;
BEGIN
    -- The argument checks of args.sql, called only to raise their errors (this call is the hot path).
    IF t_tenant IS NULL OR t_tenant = '' OR octet_length(t_tenant) > 128 OR t_run IS NULL THEN
        PERFORM forgeyard_pl.workflow_run_arg(t_tenant, t_run);
    END IF;
    IF t_epoch IS NULL THEN
        PERFORM forgeyard_pl.not_null('epoch', false);
    END IF;
    IF t_step IS NULL OR t_step = '' OR octet_length(t_step) > 200 THEN
        PERFORM forgeyard_pl.name_arg('step', t_step, 200);
    END IF;
    IF t_result IS NULL THEN
        PERFORM forgeyard_pl.not_null('result', false);
    END IF;
    IF t_compensation = '' OR octet_length(t_compensation) > 200 THEN
        PERFORM forgeyard_pl.name_arg('compensation', t_compensation, 200);
    END IF;
    IF named < 1 THEN
        PERFORM forgeyard_pl.workflow_position_arg(named);
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    IF named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(t_tenant, t_run, t_epoch);
        IF NOT (c.position >= 1 AND coalesce(c.step = t_step, false)) THEN
            PERFORM forgeyard_pl.workflow_check_current(c.position, c.step, t_step, 'workflow_step_complete');
        END IF;
        pos := c.position;
        SELECT true AS j_found, j.status AS j_status, j.result AS j_result, j.compensation AS j_compensation INTO jr
          FROM forgeyard.wf_journal j WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
    ELSE
        pos := named;
        jr := forgeyard_pl.workflow_read_position(t_tenant, t_run, pos, true);
        IF pos > 1 THEN
            PERFORM forgeyard_pl.workflow_check_follows(pos, jr.j_previous, t_run, 'workflow_step_complete');
        END IF;
        IF jr.j_found THEN
            PERFORM forgeyard_pl.workflow_check_same_step(jr.j_step, t_step, t_run, pos);
        END IF;
    END IF;
    IF jr.j_found THEN
        IF jr.j_status = 'failed' THEN
            UPDATE forgeyard.wf_journal j
               SET status = 'done', result = t_result, error = NULL, compensation = t_compensation, epoch = t_epoch,
                   recorded_at = now_at
             WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
        ELSIF NOT (jr.j_result IS NOT NULL AND jr.j_result = t_result AND jr.j_compensation IS NOT DISTINCT FROM t_compensation) THEN
            -- Recorded before (a retried call, or a replayed step): only the same result is a no-op.
            PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, false);
        END IF;
    ELSE
        INSERT INTO forgeyard.wf_journal (tenant_id, run_id, position, step, status, result, compensation, attempts,
                                          compensation_attempts, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done', t_result, t_compensation, 1, 0, t_epoch, now_at);
    END IF;
    IF o.step_deadline IS NOT NULL THEN
        -- The step is recorded in time: its deadline no longer holds the lease.
        UPDATE forgeyard.wf_runs x SET step_deadline = NULL WHERE x.run_id = t_run AND x.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
        END IF;
    END IF;
END

-- @body fy_workflow_step_fail
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_error text;
    t_permanent boolean := coalesce(permanent, false);
    named integer;
    now_at timestamptz;
    o record;
    pos integer;
    q text;
    outcome text := 'failed';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    t_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    pos := forgeyard_pl.workflow_step_position(t_tenant, t_run, t_epoch, named, t_step, 'workflow_step_fail');
    IF NOT forgeyard_pl.workflow_record_failed(t_tenant, t_run, pos, t_step, t_error, t_epoch, now_at) THEN
        PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, true);
    END IF;
    q := '_wf.' || o.workflow || '@' || o.version;
    IF NOT t_permanent THEN
        outcome := forgeyard.nack(t_tenant, q, o.msg_id, t_epoch, t_error, false);
    END IF;
    IF outcome = 'retry' THEN
        UPDATE forgeyard.wf_runs x SET state = 'pending', lease_until = NULL, updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    ELSE
        -- Permanent, or the queue's max_attempts reached (nack dead-lettered the message): the run
        -- fails, compensating first if it has compensations to run.
        IF t_permanent THEN
            PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
        END IF;
        PERFORM forgeyard_pl.workflow_settle(t_tenant, t_run, 'failed', NULL,
                                             'step "' || t_step || '" failed: ' || t_error, now_at);
        outcome := 'failed';
    END IF;
    RETURN outcome;
END

-- @body fy_workflow_compensation
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    now_at timestamptz;
    n record;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    PERFORM forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    SELECT * INTO n FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run);
    IF n.n_position IS NOT NULL THEN
        position := n.n_position;
        step := n.n_step;
        compensation := n.n_compensation;
        result := n.n_result;
        idempotency_key := t_run || ':' || n.n_position || ':' || n.n_step || ':compensate';
        RETURN NEXT;
    END IF;
END

-- @body fy_workflow_compensation_complete
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_position integer;
    now_at timestamptz;
    o record;
    t_state text := 'compensating';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('position', position IS NOT NULL);
    t_position := position;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    PERFORM forgeyard_pl.workflow_check_next_compensation(
        (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n), t_position, t_run);
    UPDATE forgeyard.wf_journal j
       SET compensation_status = 'done', compensation_error = NULL, compensated_at = now_at,
           compensation_attempts = j.compensation_attempts + 1
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = t_position;
    IF (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n) IS NULL THEN
        -- The last one: the run ends as it was going to.
        PERFORM forgeyard.ack(t_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, t_epoch);
        t_state := forgeyard_pl.workflow_settle(t_tenant, t_run, coalesce(o.compensate_to, 'failed'), NULL, o.error, now_at);
    END IF;
    RETURN t_state;
END

-- @body fy_workflow_compensation_fail
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_position integer;
    t_error text;
    t_permanent boolean := coalesce(permanent, false);
    now_at timestamptz;
    o record;
    q text;
    outcome text := 'compensation_failed';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('position', position IS NOT NULL);
    t_position := position;
    t_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    PERFORM forgeyard_pl.workflow_check_next_compensation(
        (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n), t_position, t_run);
    UPDATE forgeyard.wf_journal j
       SET compensation_status = 'failed', compensation_error = t_error,
           compensation_attempts = j.compensation_attempts + 1
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = t_position;
    q := '_wf.' || o.workflow || '@' || o.version;
    IF NOT t_permanent THEN
        outcome := forgeyard.nack(t_tenant, q, o.msg_id, t_epoch, t_error, false);
    ELSE
        PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
    END IF;
    IF outcome = 'retry' THEN
        -- The run stays compensating, its delivery let go: its owner's lease ends with it.
        UPDATE forgeyard.wf_runs x SET lease_until = NULL WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    ELSE
        -- Permanent, or the queue's max_attempts reached (the message is a dead letter now). The
        -- run keeps its error; the compensation's is in the journal (recorded above).
        outcome := forgeyard_pl.workflow_settle(t_tenant, t_run, 'compensation_failed', NULL, NULL, now_at);
    END IF;
    RETURN outcome;
END

-- @body fy_workflow_sleep
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_until timestamptz;
    named integer;
    now_at timestamptz;
    o record;
    pos integer;
    rec record;
    wake timestamptz;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    PERFORM forgeyard_pl.not_null('until', until IS NOT NULL);
    t_until := until;
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    pos := forgeyard_pl.workflow_step_position(t_tenant, t_run, t_epoch, named, t_step, 'workflow_sleep');
    SELECT j.status, j.wake_at INTO rec FROM forgeyard.wf_journal j
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = pos;
    -- A sleep journaled before keeps its end (replayed code may compute another one).
    IF rec.status = 'done' AND rec.wake_at IS NULL THEN
        PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, false);
    END IF;
    wake := rec.wake_at;
    IF wake IS NULL THEN
        wake := t_until;
        INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, wake_at, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done',
                ('{"until":"' || forgeyard_pl.workflow_iso(forgeyard_pl.usecs(t_until)) || '"}')::jsonb, t_until, t_epoch,
                now_at)
        ON CONFLICT ON CONSTRAINT wf_journal_pkey DO UPDATE SET status = 'done', result = excluded.result, error = NULL,
            wake_at = excluded.wake_at, epoch = excluded.epoch, recorded_at = excluded.recorded_at;
    END IF;
    q := '_wf.' || o.workflow || '@' || o.version;
    PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
    msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, o.priority, forgeyard_pl.workflow_timer_delay(wake, now_at));
    UPDATE forgeyard.wf_runs x SET state = 'sleeping', msg_id = msg, lease_until = NULL, updated_at = now_at
     WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
END

-- @body fy_workflow_wait_signal
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_signal text;
    t_timeout bigint;
    named integer;
    now_at timestamptz;
    now_us bigint;
    o record;
    c record;
    pos integer;
    rec record;
    recorded boolean;
    sig record;
    sig_found boolean := false;
    action text;
    answer_payload jsonb;
    until_us bigint;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    t_signal := forgeyard_pl.name_arg('signal', signal, 200);
    t_timeout := forgeyard_pl.duration_arg('timeout', timeout, 31536000000000);
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    IF named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(t_tenant, t_run, t_epoch);
        pos := c.position + 1;
    ELSE
        -- The step is compared below (FY060 for another step at the position).
        PERFORM forgeyard_pl.workflow_check_named(t_tenant, t_run, named, t_step, 'workflow_wait_signal', false);
        pos := named;
    END IF;
    SELECT j.step, j.status, j.result INTO rec FROM forgeyard.wf_journal j
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = pos;
    recorded := FOUND;
    IF NOT recorded OR rec.status <> 'done' THEN
        SELECT s.signal_id, s.payload INTO sig FROM forgeyard.wf_signals s
         WHERE s.tenant_id = t_tenant AND s.run_id = t_run AND s.name = t_signal AND s.consumed_at IS NULL
         ORDER BY s.sent_at, s.signal_id LIMIT 1 FOR UPDATE;
        sig_found := FOUND;
    END IF;
    -- wf::decide_wait
    IF recorded THEN
        PERFORM forgeyard_pl.workflow_check_same_step(rec.step, t_step, t_run, pos);
    END IF;
    now_us := forgeyard_pl.usecs(now_at);
    IF recorded AND rec.status = 'done' THEN
        action := 'replay';
    ELSIF sig_found THEN
        action := 'receive';
    ELSIF o.wait_position = pos AND o.wait_until IS NOT NULL AND o.wait_until <= now_at THEN
        action := 'time_out';
    ELSE
        action := 'wait';
    END IF;
    IF action = 'replay' THEN
        -- wf::parse_signal_result
        IF jsonb_path_exists(rec.result, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
            PERFORM forgeyard_pl.workflow_json_depth(rec.result::text, 'result');
        END IF;
        IF jsonb_typeof(rec.result -> 'status') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.data_corrupted@', MESSAGE = 'a signal wait''s journal result has no status';
        END IF;
        status := rec.result ->> 'status';
        IF jsonb_typeof(rec.result -> 'payload') <> 'null' THEN
            payload := forgeyard_pl.workflow_canonical(rec.result -> 'payload', 'payload', 1048576);
        END IF;
    ELSIF action = 'receive' THEN
        status := 'received';
        payload := forgeyard_pl.workflow_canonical(sig.payload, 'payload', 1048576);
        UPDATE forgeyard.wf_signals s SET consumed_at = now_at, consumed_position = pos
         WHERE s.tenant_id = t_tenant AND s.run_id = t_run AND s.signal_id = sig.signal_id;
    ELSIF action = 'time_out' THEN
        status := 'timed_out';
    ELSE
        -- The end of the wait at this position: the one recorded, else now + timeout.
        until_us := CASE WHEN o.wait_position = pos AND o.wait_until IS NOT NULL THEN forgeyard_pl.usecs(o.wait_until)
                         ELSE now_us + t_timeout END;
        q := '_wf.' || o.workflow || '@' || o.version;
        PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, o.priority,
                                             least(greatest(until_us - now_us, 0), 2592000000000));
        UPDATE forgeyard.wf_runs x
           SET state = 'waiting', msg_id = msg, lease_until = NULL, waiting_signal = t_signal,
               wait_until = now_at + (until_us - now_us) * interval '1 microsecond', wait_position = pos,
               updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
        status := 'waiting';
    END IF;
    -- Received or timed out: journaled, so a replay answers the same; either way but waiting, the
    -- cursor moves past the step (a caller that names positions has none).
    IF action IN ('receive', 'time_out') THEN
        answer_payload := forgeyard_pl.workflow_signal_result(status, payload);
        INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done', answer_payload, t_epoch, now_at)
        ON CONFLICT ON CONSTRAINT wf_journal_pkey DO UPDATE SET status = 'done', result = excluded.result, error = NULL,
            epoch = excluded.epoch, recorded_at = excluded.recorded_at;
    END IF;
    IF action <> 'wait' THEN
        IF named IS NULL THEN
            UPDATE forgeyard.wf_cursors k SET position = pos, step = t_step
             WHERE k.tenant_id = t_tenant AND k.run_id = t_run AND k.epoch = t_epoch;
            IF NOT FOUND THEN
                PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
            END IF;
        END IF;
        -- Past the wait: the run lets go of the wait and of a step deadline.
        UPDATE forgeyard.wf_runs x
           SET step_deadline = NULL,
               waiting_signal = CASE WHEN x.wait_position = pos THEN NULL ELSE x.waiting_signal END,
               wait_until = CASE WHEN x.wait_position = pos THEN NULL ELSE x.wait_until END,
               wait_position = CASE WHEN x.wait_position = pos THEN NULL ELSE x.wait_position END,
               updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run AND (x.step_deadline IS NOT NULL OR x.wait_position = pos);
    END IF;
    RETURN NEXT;
END

-- @body fy_workflow_signal
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_signal text := forgeyard_pl.name_arg('signal', signal, 200);
    now_at timestamptz;
BEGIN
    PERFORM forgeyard_pl.not_null('payload', payload IS NOT NULL);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN forgeyard_pl.workflow_send_signal(t_tenant, run_id, t_signal, payload, coalesce(signal_id, gen_random_uuid()),
                                             now_at);
END
