-- The PL/pgSQL edition of the workflow reads (extension/workflow_read.cpp): a run's status and journal,
-- and the tenant's runs.

-- @helper
-- workflow_list's statement (its argument state shares its name with a result column, which
-- PL/pgSQL refuses in the API function itself).
CREATE FUNCTION forgeyard_pl.workflow_list(p_tenant text, p_state text, p_max_runs integer)
    RETURNS TABLE (r_run_id uuid, r_run_key text, r_workflow text, r_version integer, r_state text, r_owner text,
                   r_epoch bigint, r_error text, r_updated_at timestamptz)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    p_state := forgeyard_pl.text_arg('state', p_state, 4096, true);
    IF p_state IS NOT NULL THEN
        -- wf::check_state
        IF octet_length(p_state) > 64 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'state is longer than 64 bytes';
        END IF;
        IF p_state NOT IN ('pending', 'running', 'sleeping', 'waiting', 'compensating', 'completed', 'failed', 'cancelled',
                           'timed_out', 'compensation_failed', 'parked') THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'state must be one of pending, running, sleeping, waiting, compensating, completed, failed, '
                          'cancelled, timed_out, compensation_failed, parked; not '''
                          || forgeyard_pl.workflow_left_bytes(p_state, 100) || '''';
        END IF;
    END IF;
    p_max_runs := forgeyard_pl.queue_positive_int_arg('max_runs', p_max_runs, 1000);
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    RETURN QUERY
    SELECT w.run_id, w.run_key, w.workflow, w.version, w.state, w.owner, w.epoch, w.error, w.updated_at
      FROM forgeyard.wf_runs w
     WHERE w.tenant_id = p_tenant AND (p_state IS NULL OR w.state = p_state)
     ORDER BY w.updated_at DESC, w.run_id LIMIT p_max_runs;
END
$$;

-- @body fy_workflow_status
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT w.state, w.workflow, w.version, w.result, w.error, w.owner, w.epoch, w.updated_at
      FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = t_run;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
END

-- @body fy_workflow_journal
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF NOT EXISTS (SELECT 1 FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = t_run) THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    RETURN QUERY
    SELECT j.position, j.step, j.status, j.result, j.epoch, j.recorded_at, j.error, j.attempts, j.compensation,
           j.compensation_status, j.compensation_error
      FROM forgeyard.wf_journal j WHERE j.tenant_id = t_tenant AND j.run_id = t_run ORDER BY j.position;
END

-- @body fy_workflow_list sql
SELECT * FROM forgeyard_pl.workflow_list(tenant, state, max_runs);
