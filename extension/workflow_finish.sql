-- The PL/pgSQL edition of the calls that end, stop, extend or resume a workflow run
-- (extension/workflow_finish.cpp): complete, fail and park by its owner (end_run), extend, and cancel
-- and retry by an operator.

-- @helper
-- end_run: the owner ends the run in p_state (completed, failed, parked) and lets its delivery go.
CREATE FUNCTION forgeyard_pl.workflow_end_run(p_tenant text, p_run uuid, p_epoch bigint, p_state text, p_result jsonb,
                                              p_error text)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz;
    o record;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', p_epoch IS NOT NULL);
    IF p_state = 'completed' THEN
        PERFORM forgeyard_pl.not_null('result', p_result IS NOT NULL);
    ELSE
        p_error := coalesce(forgeyard_pl.text_arg(CASE WHEN p_state = 'failed' THEN 'error' ELSE 'reason' END, p_error, 4096, true), '');
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    o := forgeyard_pl.workflow_owned(p_tenant, p_run, p_epoch, now_at, 'running', true);
    PERFORM forgeyard.ack(p_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, p_epoch);
    PERFORM forgeyard_pl.workflow_settle(p_tenant, p_run, p_state, p_result, p_error, now_at);
END
$$;

-- @body fy_workflow_complete
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'completed',
                                          result, NULL);
END

-- @body fy_workflow_fail
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'failed',
                                          NULL, error);
END

-- @body fy_workflow_park
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'parked',
                                          NULL, reason);
END

-- @body fy_workflow_extend
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    now_at timestamptz;
    o record;
    capped interval;
    months numeric;
    days numeric;
    total numeric;
    left_us bigint;
    until timestamptz;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('lease', lease IS NOT NULL);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'owned', true);
    -- Not past the deadline of a step with a timeout (a lease that is not a plain duration goes
    -- through as it is, for extend's own checks).
    capped := lease;
    IF o.step_deadline IS NOT NULL THEN
        months := extract(year FROM lease) * 12 + extract(month FROM lease);
        days := extract(day FROM lease);
        total := extract(epoch FROM lease) * 1000000;
        left_us := forgeyard_pl.usecs(o.step_deadline) - forgeyard_pl.usecs(now_at);
        IF months = 0 AND days * 86400000000 BETWEEN -9223372036854775808 AND 9223372036854775807
           AND total BETWEEN -9223372036854775808 AND 9223372036854775807 AND total > 0 AND total > left_us THEN
            capped := left_us * interval '1 microsecond';
        END IF;
    END IF;
    until := forgeyard.extend(t_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, t_epoch, capped);
    UPDATE forgeyard.wf_runs x SET lease_until = until WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    RETURN until;
END

-- @body fy_workflow_cancel
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_reason text := coalesce(forgeyard_pl.text_arg('reason', reason, 4096, true), '');
    now_at timestamptz := forgeyard.now();
    t_state text;
    cancelled boolean;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    SELECT x.state INTO t_state FROM forgeyard.wf_runs x WHERE x.tenant_id = t_tenant AND x.run_id = t_run FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    -- A compensating run finishes its compensations first. Its message stays until the next claim
    -- of the definition lets it go; an owner's next journal write gets FY001.
    cancelled := t_state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked', 'compensating');
    IF cancelled THEN
        PERFORM forgeyard_pl.workflow_settle(t_tenant, t_run, 'cancelled', NULL, t_reason, now_at);
    END IF;
    RETURN cancelled;
END

-- @body fy_workflow_retry
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    now_at timestamptz := forgeyard.now();
    r record;
    retried boolean;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    SELECT x.state, x.workflow, x.version, x.priority,
           EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id = t_tenant AND j.run_id = t_run
                      AND j.compensation_status = 'done') AS compensated
      INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = t_tenant AND x.run_id = t_run FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    -- A failed run whose steps were compensated cannot replay them as done.
    retried := r.state IN ('failed', 'parked', 'compensation_failed') AND (r.state = 'compensation_failed' OR NOT r.compensated);
    IF retried THEN
        q := '_wf.' || r.workflow || '@' || r.version;
        PERFORM forgeyard_pl.queue_ensure(t_tenant, q);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, r.priority);
        -- A compensation_failed run resumes its compensations; another starts again where it failed.
        UPDATE forgeyard.wf_runs x
           SET state = CASE WHEN x.state = 'compensation_failed' THEN 'compensating' ELSE 'pending' END,
               msg_id = msg, lease_until = NULL,
               error = CASE WHEN x.state = 'compensation_failed' THEN x.error END,
               finished_at = NULL, purge_at = NULL, updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    END IF;
    RETURN retried;
END
