-- forgeyard 0.6.0 -> 0.7.0: durable workflows (first part: runs and the fenced journal). Each section is
-- self-contained: its objects, their COMMENTs, the REVOKE from PUBLIC, pg_dump registrations and
-- access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.7.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.7.0: durable workflows: runs, a fenced journal (docs/workflows.md)
-------------------------------------------------------------------------------------------------

-- A run of a workflow definition (name, version) for a tenant. Runnable runs are handed to workers
-- through the tenant's queue "_wf.<workflow>@<version>" (msg_id is the run's live message), and
-- the claim token of that delivery is the run's epoch: every journal write carries it (FY001 for
-- a stale owner). The step cursor of the current epoch is in wf_cursors.
CREATE TABLE forgeyard.wf_runs (
    tenant_id      text        NOT NULL,
    run_id         uuid        NOT NULL,
    run_key        text        NOT NULL,
    workflow       text        NOT NULL,
    version        integer     NOT NULL CHECK (version >= 1),
    input          jsonb       NOT NULL,
    state          text        NOT NULL CHECK (state IN ('pending', 'running', 'sleeping', 'waiting', 'compensating',
                                                         'completed', 'failed', 'cancelled', 'timed_out',
                                                         'compensation_failed', 'parked')),
    priority       smallint    NOT NULL CHECK (priority BETWEEN 0 AND 5),
    msg_id         bigint,
    epoch          bigint      NOT NULL DEFAULT 0,
    owner          text,
    step_deadline  timestamptz,
    lease_until    timestamptz,
    result         jsonb,
    error          text,
    deadline       timestamptz,
    parent_run_id  uuid,
    waiting_signal text,
    wait_until     timestamptz,
    wait_position  integer,
    compensate_to  text        CHECK (compensate_to IN ('failed', 'cancelled', 'timed_out')),
    retention_usecs bigint     NOT NULL CHECK (retention_usecs > 0),
    purge_at       timestamptz,
    takeovers      integer     NOT NULL DEFAULT 0,
    taken_over_at  timestamptz,
    previous_owner text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    finished_at    timestamptz,
    -- The run id leads the keys of the run's tables (wf_cursors and wf_journal too): compared first,
    -- a fixed-size value that tells rows apart at once.
    PRIMARY KEY (run_id, tenant_id),
    UNIQUE (tenant_id, run_key)
);
CREATE INDEX wf_runs_state ON forgeyard.wf_runs (tenant_id, state, updated_at);
CREATE INDEX wf_runs_purge ON forgeyard.wf_runs (purge_at) WHERE purge_at IS NOT NULL;
COMMENT ON TABLE forgeyard.wf_runs IS
  'Workflow runs: definition and version (fixed at start), input, state, the owner''s epoch (the claim token of the run''s live message) and the end of its lease as its claim or workflow_extend set it (lease_until: until then a journal write reads no message), result or error, takeovers. Use the API, not DML.';

-- The step cursor of each run's current epoch: how many step calls its owner made and the step
-- announced last (workflow_step moves it, each claim resets it). UNLOGGED, so that moving it
-- writes no WAL: a workflow_step that announces or replays a step commits without waiting for a
-- flush (docs/workflows-design.md, slice 7). A crash, a failover or a restore empties it; a missing
-- row, or one of an older epoch, means the epoch lost the run (FY001), and the next claim takes the
-- run over once its delivery's lease lapsed. Not dumped: it holds nothing a restore could use.
CREATE UNLOGGED TABLE forgeyard.wf_cursors (
    tenant_id text    NOT NULL,
    run_id    uuid    NOT NULL,
    epoch     bigint  NOT NULL,
    position  integer NOT NULL CHECK (position >= 0),
    step      text,
    PRIMARY KEY (run_id, tenant_id)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.wf_cursors IS
  'The step cursor of each workflow run''s current epoch: position of the last step call and its step. UNLOGGED (emptied by a crash, failover or restore: the epoch in flight then loses the run, FY001). Use the API, not DML.';

-- The journal: one row per step position of a run, contiguous from 1. done rows keep the
-- result (replayed), failed rows the last error of a step that will run again. A sleep is a done
-- row with wake_at: it replays as done only from wake_at on.
CREATE TABLE forgeyard.wf_journal (
    tenant_id    text        NOT NULL,
    run_id       uuid        NOT NULL,
    position     integer     NOT NULL CHECK (position >= 1),
    step         text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('done', 'failed')),
    result       jsonb,
    error        text,
    compensation text,
    compensation_status   text CHECK (compensation_status IN ('done', 'failed')),
    compensation_error    text,
    compensation_attempts integer NOT NULL DEFAULT 0,
    compensated_at        timestamptz,
    wake_at      timestamptz,
    attempts     integer     NOT NULL DEFAULT 1,
    epoch        bigint      NOT NULL,
    recorded_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, position, tenant_id)
);
COMMENT ON TABLE forgeyard.wf_journal IS
  'Workflow journals: per run and position the step''s name, done (with its result and compensation) or failed (with its error), the epoch that wrote it. Use the API, not DML.';

-- Signals sent to a run, delivered once (idempotent by signal_id), consumed by the wait at a
-- journal position; one sent before the wait waits here for it.
CREATE TABLE forgeyard.wf_signals (
    tenant_id         text        NOT NULL,
    run_id            uuid        NOT NULL,
    signal_id         uuid        NOT NULL,
    name              text        NOT NULL,
    payload           jsonb       NOT NULL,
    sent_at           timestamptz NOT NULL,
    consumed_at       timestamptz,
    consumed_position integer,
    PRIMARY KEY (tenant_id, run_id, signal_id)
);
CREATE INDEX wf_signals_unconsumed ON forgeyard.wf_signals (tenant_id, run_id, name, sent_at)
    WHERE consumed_at IS NULL;
COMMENT ON TABLE forgeyard.wf_signals IS
  'Signals sent to workflow runs: name, payload, when sent, and when and at which journal position a wait consumed it. Use the API, not DML.';

CREATE FUNCTION forgeyard.workflow_start(tenant text, workflow text, version integer, run_key text,
                                         input jsonb DEFAULT '{}', options jsonb DEFAULT '{}')
    RETURNS uuid LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_start';
COMMENT ON FUNCTION forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb) IS
  'Start a run in the caller''s transaction (no run unless it commits); returns its run_id. run_key is an idempotency key: the same key returns the first run, with another workflow, version or input FY011. Options: deadline (interval), priority (class), parent (run id), retention (interval: how long the run is kept once finished, default 30 days; maintain() removes it then).';

CREATE FUNCTION forgeyard.workflow_claim(tenant text, worker text, definitions text[], max_runs integer DEFAULT 1,
                                         lease interval DEFAULT NULL)
    RETURNS TABLE (run_id uuid, workflow text, version integer, epoch bigint, state text, input jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_claim';
COMMENT ON FUNCTION forgeyard.workflow_claim(text, text, text[], integer, interval) IS
  'Claim up to max_runs runnable runs of the given definitions (''name@version''), each owned by worker under a new epoch for lease (default: the queue''s visibility timeout). A run whose owner''s lease ran out is taken over (recorded in the run; a step that ran past its timeout is recorded failed); one whose deliveries lapsed on every attempt (max_attempts) ends failed, compensating first. Never waits on other claimers.';

CREATE FUNCTION forgeyard.workflow_step(tenant text, run_id uuid, epoch bigint, step text,
                                        timeout interval DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, result jsonb, idempotency_key text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step';
COMMENT ON FUNCTION forgeyard.workflow_step(text, uuid, bigint, text, interval, integer) IS
  'The next step of the run under epoch (the n-th call of an epoch is position n): run (with a stable idempotency key) or done (with the recorded result). With a timeout, a step to run must be recorded within it: the owner''s lease ends by then at the latest, and a run taken over past it records the attempt as failed. With position, the caller counts its steps (1 for its first call of the epoch, then one more per step): the call reads and writes no cursor (without a timeout it writes nothing at all, so its commit waits for no flush); 22023 unless the step before position is recorded done. Pass position to every step call of an epoch or to none. FY060 when the journal has another step at that position; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_complete(tenant text, run_id uuid, epoch bigint, step text, result jsonb,
                                                 compensation text DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step_complete';
COMMENT ON FUNCTION forgeyard.workflow_step_complete(text, uuid, bigint, text, jsonb, text, integer) IS
  'Record the result of the current step in the caller''s transaction (with the step''s own database work, exactly once), with the name of its compensation. With position, of the step at that position (as workflow_step: 22023 unless the step before it is recorded done, FY060 for another step there). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_fail(tenant text, run_id uuid, epoch bigint, step text, error text,
                                             permanent boolean DEFAULT false, "position" integer DEFAULT NULL)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step_fail';
COMMENT ON FUNCTION forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer) IS
  'Record a failed attempt of the current step: retry (the run is released and handed out again after the queue''s backoff) or failed (permanent, or the queue''s max_attempts reached: the run ends failed). position as for workflow_step_complete. FY001 for a stale owner.';

-- Sagas: a run that fails, is cancelled or times out with steps done that name a compensation is
-- compensating until their compensations ran, newest first; then it ends as it was going to.
CREATE FUNCTION forgeyard.workflow_compensation(tenant text, run_id uuid, epoch bigint)
    RETURNS TABLE ("position" integer, step text, compensation text, result jsonb, idempotency_key text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation';
COMMENT ON FUNCTION forgeyard.workflow_compensation(text, uuid, bigint) IS
  'The next compensation of a compensating run owned under epoch (newest step first): the step''s position, name, compensation and recorded result, and a stable idempotency key for the compensation. No row when none is left. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_complete(tenant text, run_id uuid, epoch bigint, "position" integer)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation_complete';
COMMENT ON FUNCTION forgeyard.workflow_compensation_complete(text, uuid, bigint, integer) IS
  'Record the compensation of the step at position as done, in the caller''s transaction; returns the run''s state: compensating while compensations are left, else the state it ends in (failed, cancelled or timed_out). 22023 unless position is the next compensation; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_fail(tenant text, run_id uuid, epoch bigint, "position" integer,
                                                     error text, permanent boolean DEFAULT false)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation_fail';
COMMENT ON FUNCTION forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean) IS
  'Record a failed attempt of the compensation at position: retry (the run is released for the queue''s backoff) or compensation_failed (permanent, or the queue''s max_attempts reached: the run ends compensation_failed; workflow_retry resumes it). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_sleep(tenant text, run_id uuid, epoch bigint, step text, until timestamptz,
                                         "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_sleep';
COMMENT ON FUNCTION forgeyard.workflow_sleep(text, uuid, bigint, text, timestamptz, integer) IS
  'A durable timer as the current step (workflow_step answered run): the step is journaled with its end, the run is released (sleeping) and handed out again at until, when the step replays as done. A sleep journaled before keeps its first until. position as for workflow_step_complete. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_wait_signal(tenant text, run_id uuid, epoch bigint, step text, signal text,
                                               timeout interval, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, payload jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_wait_signal';
COMMENT ON FUNCTION forgeyard.workflow_wait_signal(text, uuid, bigint, text, text, interval, integer) IS
  'The next step of the run waits for a signal: received (the oldest unconsumed signal of that name, also one sent before the wait, with its payload), waiting (the run is released until the signal or the timeout), or timed_out. Replays answer as first recorded. With position, the step at that position (no cursor moves). FY060, FY001 and position as workflow_step.';

CREATE FUNCTION forgeyard.workflow_signal(tenant text, run_id uuid, signal text, payload jsonb DEFAULT '{}',
                                          signal_id uuid DEFAULT NULL)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_signal';
COMMENT ON FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid) IS
  'Send a signal to a run, in the caller''s transaction; a run waiting for it is handed out at once. False for a repeated signal_id or a run that has finished. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_complete(tenant text, run_id uuid, epoch bigint, result jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_complete';
COMMENT ON FUNCTION forgeyard.workflow_complete(text, uuid, bigint, jsonb) IS
  'End the run completed with its result. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_fail(tenant text, run_id uuid, epoch bigint, error text)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_fail';
COMMENT ON FUNCTION forgeyard.workflow_fail(text, uuid, bigint, text) IS
  'End the run failed with an error. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_park(tenant text, run_id uuid, epoch bigint, reason text)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_park';
COMMENT ON FUNCTION forgeyard.workflow_park(text, uuid, bigint, text) IS
  'Stop the run for an operator (after FY060, in the worker''s next transaction): parked, listed by workflow_stuck, handed out again only by workflow_retry. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_extend(tenant text, run_id uuid, epoch bigint, lease interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_extend';
COMMENT ON FUNCTION forgeyard.workflow_extend(text, uuid, bigint, interval) IS
  'Keep the owner''s lease for lease from now, but not past the deadline of a step with a timeout in progress; returns when it runs out. FY001 for a stale owner or a lease that already ran out.';

CREATE FUNCTION forgeyard.workflow_cancel(tenant text, run_id uuid, reason text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_cancel';
COMMENT ON FUNCTION forgeyard.workflow_cancel(text, uuid, text) IS
  'Cancel a run that has not finished (false if it had, or is compensating); its owner''s next journal write gets FY001. A run with compensations to run is compensating first. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_retry(tenant text, run_id uuid)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_retry';
COMMENT ON FUNCTION forgeyard.workflow_retry(text, uuid) IS
  'Hand a failed or parked run out again (false for a run in another state, or a failed run whose compensations ran): it replays its journal and runs again from the step that failed. A compensation_failed run resumes its compensations. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_status(tenant text, run_id uuid)
    RETURNS TABLE (state text, workflow text, version integer, result jsonb, error text, owner text, epoch bigint,
                   updated_at timestamptz)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_status';
COMMENT ON FUNCTION forgeyard.workflow_status(text, uuid) IS
  'A run''s state, definition, result or error, owner and epoch. 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_journal(tenant text, run_id uuid)
    RETURNS TABLE ("position" integer, step text, status text, result jsonb, epoch bigint, recorded_at timestamptz,
                   error text, attempts integer, compensation text, compensation_status text,
                   compensation_error text)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_journal';
COMMENT ON FUNCTION forgeyard.workflow_journal(text, uuid) IS
  'A run''s journal in position order: each step done (with its result and compensation) or failed (with its last error), its attempts and the epoch that wrote it, and how its compensation went (done, failed with its last error, or not run). 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_list(tenant text, state text DEFAULT NULL, max_runs integer DEFAULT 100)
    RETURNS TABLE (run_id uuid, run_key text, workflow text, version integer, state text, owner text, epoch bigint,
                   error text, updated_at timestamptz)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_list';
COMMENT ON FUNCTION forgeyard.workflow_list(text, text, integer) IS
  'The tenant''s runs, in one state or all, most recently changed first, at most max_runs (1..1000). 22023 for an unknown state.';

CREATE VIEW forgeyard.workflow_runs WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT r.tenant_id, r.run_id, r.run_key, r.workflow, r.version, r.state, r.owner, r.epoch,
       CASE WHEN r.state = 'running' THEN m.visible_at END AS lease_until,
       (SELECT count(*) FROM forgeyard.wf_journal j
         WHERE j.tenant_id = r.tenant_id AND j.run_id = r.run_id AND j.status = 'done') AS steps_done,
       r.takeovers, r.error, r.deadline, r.parent_run_id, r.created_at, r.updated_at, r.finished_at
  FROM forgeyard.wf_runs r
  LEFT JOIN forgeyard.messages m ON m.msg_id = r.msg_id
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR r.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.workflow_runs IS
  'Every workflow run, no inputs or results: definition, state, owner, epoch, lease, steps done, takeovers, error. A role bound to tenants sees only those.';

CREATE VIEW forgeyard.workflow_stuck WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), c AS MATERIALIZED (
    SELECT forgeyard.now() AS now
)
SELECT s.tenant_id, s.run_id, s.workflow, s.version, s.state, s.owner, s.epoch, s.reason, s.since
  FROM (SELECT r.*,
               CASE WHEN r.state = 'parked' THEN 'parked: ' || coalesce(r.error, '')
                    -- (the run keeps the error it was compensating for; the compensation's is
                    -- in the journal)
                    WHEN r.state = 'compensation_failed' THEN coalesce(
                        (SELECT 'compensation "' || j.compensation || '" of step "' || j.step
                                || '" at position ' || j.position || ' failed: ' || coalesce(j.compensation_error, '')
                           FROM forgeyard.wf_journal j
                          WHERE j.run_id = r.run_id AND j.tenant_id = r.tenant_id AND j.compensation_status = 'failed'
                          ORDER BY j.position DESC LIMIT 1),
                        'its compensation''s deliveries lapsed on every attempt (the definition queue''s max_attempts)')
                    WHEN r.state = 'running' AND m.state = 'pending' AND m.visible_at <= c.now
                        THEN 'the owner''s lease ran out'
                    WHEN r.state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed')
                         AND (m.msg_id IS NULL OR m.state <> 'pending')
                        THEN 'its message is ' || coalesce(m.state, 'gone')
               END AS reason,
               CASE WHEN r.state = 'running' AND m.state = 'pending' THEN m.visible_at ELSE r.updated_at END AS since
          FROM forgeyard.wf_runs r
          LEFT JOIN forgeyard.messages m ON m.msg_id = r.msg_id
         CROSS JOIN c) s
 WHERE s.reason IS NOT NULL
   AND (NOT EXISTS (SELECT 1 FROM scope) OR s.tenant_id IN (SELECT scope.tenant_id FROM scope));
COMMENT ON VIEW forgeyard.workflow_stuck IS
  'Runs that need attention: parked (nondeterminism, until workflow_retry), compensation_failed (a compensation used up its attempts, or its owners died on every attempt: the reason names the newest compensation that failed, if one did; until workflow_retry), running with an owner whose lease ran out (the next claim takes them over), or unfinished with no live message (dead-lettered). A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_claim(text, text, text[], integer, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step(text, uuid, bigint, text, interval, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step_complete(text, uuid, bigint, text, jsonb, text, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation(text, uuid, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation_complete(text, uuid, bigint, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_sleep(text, uuid, bigint, text, timestamptz, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_wait_signal(text, uuid, bigint, text, text, interval, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_complete(text, uuid, bigint, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_fail(text, uuid, bigint, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_park(text, uuid, bigint, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_extend(text, uuid, bigint, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_cancel(text, uuid, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_retry(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_cancel(text, uuid, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_retry(text, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('inspect',     'SELECT',  'TABLE forgeyard.workflow_runs'),
    ('inspect',     'SELECT',  'TABLE forgeyard.workflow_stuck');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_runs', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_journal', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_signals', '');

-- Schedules: a cron spec in a time zone, or '@every <interval>', that starts a run of its
-- definition at each fire (run_key '<schedule>@<fire time>'); schedule_tick and maintain() start
-- the due fires.
CREATE TABLE forgeyard.wf_schedules (
    tenant_id  text        NOT NULL,
    schedule   text        NOT NULL,
    workflow   text        NOT NULL,
    version    integer     NOT NULL CHECK (version >= 1),
    spec       text        NOT NULL,
    timezone   text        NOT NULL,
    catch_up   integer     NOT NULL CHECK (catch_up BETWEEN 0 AND 1000),
    input      jsonb       NOT NULL,
    next_fire  timestamptz NOT NULL,
    last_fire  timestamptz,
    fires      bigint      NOT NULL DEFAULT 0,
    skipped    bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, schedule)
);
CREATE INDEX wf_schedules_due ON forgeyard.wf_schedules (next_fire);
COMMENT ON TABLE forgeyard.wf_schedules IS
  'Workflow schedules: definition, spec, time zone, catch-up bound, input, the next fire, and how many fires started runs or were skipped. Use the API, not DML.';

CREATE FUNCTION forgeyard.schedule_create(tenant text, schedule text, workflow text, version integer, spec text,
                                          options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_create';
COMMENT ON FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb) IS
  'Create a schedule: spec is 5 cron fields (minute hour day-of-month month day-of-week, read in options.timezone, default UTC), a macro (@hourly, @daily, @weekly, @monthly, @yearly) or ''@every <interval>'' (15m, 1h30m, ...). Options: timezone, catch_up (0..1000 missed fires started besides the newest), input. The same definition again is a no-op; another one 42710.';

CREATE FUNCTION forgeyard.schedule_drop(tenant text, schedule text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_drop';
COMMENT ON FUNCTION forgeyard.schedule_drop(text, text) IS
  'Drop a schedule (false if there was none); runs it started go on.';

CREATE FUNCTION forgeyard.schedule_tick(tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_tick';
COMMENT ON FUNCTION forgeyard.schedule_tick(text) IS
  'Start the runs of the due schedules (of tenant, or all): the newest due fire and up to catch_up missed ones, the rest skipped and counted. Safe from several places at once: each fire starts one run. Returns the runs started. maintain() calls it.';

CREATE FUNCTION forgeyard.schedule_list(tenant text)
    RETURNS TABLE (schedule text, workflow text, version integer, spec text, timezone text, catch_up integer,
                   input jsonb, next_fire timestamptz, last_fire timestamptz, fires bigint, skipped bigint)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_list';
COMMENT ON FUNCTION forgeyard.schedule_list(text) IS
  'The tenant''s schedules by name: definition, spec, time zone, catch-up bound, input, next and last fire, fires started and skipped.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_drop(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_tick(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_drop(text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_tick(text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_schedules', '');

COMMENT ON FUNCTION forgeyard.storage_stats(text) IS
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, workflow runs by definition and state, the oldest open transaction, replication slots holding xmin, and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';

COMMENT ON FUNCTION forgeyard.maintain(integer, text) IS
  'Maintenance, one bounded pass (schedule it, e.g. with pg_cron; safe from several places at once): expired idempotency keys, queue dedup events past their window, acked messages past retain_acked, dead letters past retention or over max_dead, inbox entries older than 7 days, finished workflow runs past their retention (with journals and signals); and the runs of due workflow schedules started (schedule_tick). Leases are not reaped here (lease_reap hands each to a reconciler).';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.7.0: flow control, first part: admission limits and retry budgets (docs/operations.md,
-- "Flow control")
-------------------------------------------------------------------------------------------------

ALTER TABLE forgeyard.queues
    ADD COLUMN retry_budget              double precision CHECK (retry_budget BETWEEN 0 AND 1),
    ADD COLUMN retry_budget_min          bigint NOT NULL DEFAULT 10 CHECK (retry_budget_min >= 0),
    ADD COLUMN retry_budget_window_usecs bigint NOT NULL DEFAULT 60000000
                                         CHECK (retry_budget_window_usecs BETWEEN 1 AND 2592000000000),
    ADD COLUMN admission_rate            bigint CHECK (admission_rate BETWEEN 1 AND 1000000000),
    ADD COLUMN admission_per_usecs       bigint CHECK (admission_per_usecs BETWEEN 1 AND 2592000000000),
    ADD CONSTRAINT queues_admission_check CHECK ((admission_rate IS NULL) = (admission_per_usecs IS NULL));

-- A queue's admission limit split over up to `slots` buckets (GCRA: `tat` is the bucket's
-- theoretical arrival time, NULL while full), so that concurrent producers take different rows
-- (SKIP LOCKED) and the buckets add up to the queue's limit exactly.
CREATE TABLE forgeyard.queue_admission (
    tenant_id text        NOT NULL,
    queue     text        NOT NULL,
    slot      integer     NOT NULL CHECK (slot BETWEEN 0 AND 7),
    tokens    bigint      NOT NULL CHECK (tokens >= 1),
    per_usecs bigint      NOT NULL CHECK (per_usecs >= 1),
    tat       timestamptz,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.queue_admission IS
  'Admission limits of producers (admission_limit): each row is a bucket of tokens per per_usecs, a share of the queue''s limit; enqueues take a token or fail with FY020 and a retry-after.';

-- A queue's retry window (retry_budget): when it started, the queue's admitted messages then,
-- the first deliveries of the window before it, the retries admitted in it and those it delayed.
CREATE TABLE forgeyard.queue_retry_windows (
    tenant_id     text        NOT NULL,
    queue         text        NOT NULL,
    window_start  timestamptz NOT NULL,
    admitted_base bigint      NOT NULL,
    prev_first    bigint      NOT NULL CHECK (prev_first >= 0),
    retries       bigint      NOT NULL CHECK (retries >= 0),
    delayed       bigint      NOT NULL CHECK (delayed >= 0),
    PRIMARY KEY (tenant_id, queue)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.queue_retry_windows IS
  'The current retry window of each queue with a retry_budget: retries admitted and delayed since window_start, against the messages admitted since then.';

CREATE FUNCTION forgeyard.admission_limit(tenant text, queue text, rate integer, per interval)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_admission_limit';
COMMENT ON FUNCTION forgeyard.admission_limit(text, text, integer, interval) IS
  'Limit producers of a queue to rate enqueues per interval (a bucket of rate tokens refilled over per; a batch takes one per message). Over it enqueue fails with FY020 whose DETAIL ends in "retry after <n> ms". rate NULL removes the limit. 22023 for a rate outside 1..1e9 or a per that is not a positive interval of at most 30 days.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admission', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_retry_windows', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.7.0: flow control, second part: resources (rate limits, concurrency limits, circuit
-- breakers) shared by every consumer of every queue of a tenant
-------------------------------------------------------------------------------------------------

ALTER TABLE forgeyard.messages
    ADD COLUMN fairness_key  text,
    ADD COLUMN resource      text,
    ADD COLUMN resource_part smallint;
COMMENT ON COLUMN forgeyard.messages.resource_part IS
  'Which part of its resource''s state (flow_resource_state.part) the delivery in flight is counted in; a part the resource no longer has is counted in part 0.';

-- enqueue and enqueue_batch gain fairness_key and resource, at the end.
DROP FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval);
DROP FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval);
CREATE FUNCTION forgeyard.enqueue(tenant text, queue text, payload bytea, event_id uuid DEFAULT NULL,
                                  partition_key text DEFAULT NULL, priority text DEFAULT 'interactive',
                                  delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                  resource text DEFAULT NULL)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue';
COMMENT ON FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text) IS
  'Enqueue inside the caller''s transaction (visible to consumers after commit, gone on rollback); returns msg_id. A repeated event_id within the dedup window returns the first msg_id (even when full); with another payload FY011. fairness_key is carried with the message; resource names the downstream it will hit (its rate limit, concurrency limit and circuit breaker then govern the claim). FY020 when full for the class or over the admission limit, FY021 over max_payload_bytes, 42704 unknown queue, 22023 bad class or missing partition_key.';

CREATE FUNCTION forgeyard.enqueue_batch(tenant text, queue text, payloads bytea[], event_ids uuid[] DEFAULT NULL,
                                        partition_keys text[] DEFAULT NULL, priority text DEFAULT 'interactive',
                                        delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                        resource text DEFAULT NULL)
    RETURNS TABLE (msg_id bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue_batch';
COMMENT ON FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text) IS
  'Enqueue several messages (event_ids and partition_keys, when given, parallel to payloads; one fairness_key and resource for all); msg_ids in order. All or nothing.';
UPDATE forgeyard.access_catalog
   SET object = 'FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'
 WHERE object = 'FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval)';
UPDATE forgeyard.access_catalog
   SET object = 'FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text)'
 WHERE object = 'FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval)';

-- What each resource allows (resource_limit, breaker_configure); backends cache it.
CREATE TABLE forgeyard.flow_resources (
    tenant_id       text             NOT NULL,
    resource        text             NOT NULL,
    rate            bigint           CHECK (rate BETWEEN 1 AND 1000000000),
    per_usecs       bigint           CHECK (per_usecs BETWEEN 1 AND 2592000000000),
    burst           bigint           CHECK (burst BETWEEN 1 AND 1000000000),
    max_in_flight   bigint           CHECK (max_in_flight BETWEEN 1 AND 1000000000),
    failure_rate    double precision CHECK (failure_rate > 0 AND failure_rate <= 1),
    minimum_calls   bigint           CHECK (minimum_calls BETWEEN 1 AND 1000),
    window_calls    bigint           CHECK (window_calls BETWEEN 1 AND 1000),
    open_for_usecs  bigint           CHECK (open_for_usecs BETWEEN 1 AND 2592000000000),
    half_open_calls bigint           CHECK (half_open_calls BETWEEN 1 AND 1000),
    parts           smallint         NOT NULL DEFAULT 1 CHECK (parts BETWEEN 1 AND 8),
    updated_at      timestamptz      NOT NULL,
    PRIMARY KEY (tenant_id, resource),
    CHECK ((rate IS NULL) = (per_usecs IS NULL) AND (rate IS NULL) = (burst IS NULL)),
    CHECK ((failure_rate IS NULL) = (minimum_calls IS NULL) AND (failure_rate IS NULL) = (window_calls IS NULL)
       AND (failure_rate IS NULL) = (open_for_usecs IS NULL) AND (failure_rate IS NULL) = (half_open_calls IS NULL))
);
COMMENT ON TABLE forgeyard.flow_resources IS
  'Resources (the downstreams messages hit) and what each allows: a rate limit (rate per per_usecs, burst), a concurrency limit (max_in_flight) and a circuit breaker; parts is how many rows of flow_resource_state share the limits. Use resource_limit and breaker_configure, not DML.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.flow_resources
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.flow_resources IS
  'Backends cache resource limits; any change to this table makes them read the limits again.';

-- Each resource's shared state, changed by claims (SKIP LOCKED), acks and nacks under its row
-- lock. A resource with large limits and no breaker keeps them in up to 8 parts (rows) that add
-- up exactly, so that concurrent claimers do not queue on one row; the breaker is part 0's.
CREATE TABLE forgeyard.flow_resource_state (
    tenant_id           text        NOT NULL,
    resource            text        NOT NULL,
    part                smallint    NOT NULL DEFAULT 0 CHECK (part BETWEEN 0 AND 7),
    tat                 timestamptz,
    in_flight           bigint      NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    breaker             text        NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half_open')),
    outcomes            text        NOT NULL DEFAULT '' CHECK (outcomes ~ '^[01]*$'),
    changed_at          timestamptz NOT NULL,
    open_until          timestamptz,
    half_open_in_flight bigint      NOT NULL DEFAULT 0 CHECK (half_open_in_flight >= 0),
    half_open_successes bigint      NOT NULL DEFAULT 0 CHECK (half_open_successes >= 0),
    transitions         bigint      NOT NULL DEFAULT 0,
    refused             bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, resource, part)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.flow_resource_state IS
  'The shared state of each resource, in flow_resources.parts rows (part i keeps rate / parts, burst / parts and max_in_flight / parts, the remainders to the first parts): the rate limit''s bucket (tat), deliveries in flight, claims refused, and in part 0 the breaker (state, window of outcomes, open_until, half-open trials, transitions).';

CREATE FUNCTION forgeyard.resource_limit(tenant text, resource text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_resource_limit';
COMMENT ON FUNCTION forgeyard.resource_limit(text, text, jsonb) IS
  'Set what a resource allows its messages (enqueued with resource => ...) across every queue of the tenant: rate (integer) per per (interval, default 1 second) with burst (default rate), and max_in_flight. Replaces the resource''s limits; {} removes them. A message its resource refuses stays ready and is skipped by the claim, no attempt charged. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_configure(tenant text, resource text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_breaker_configure';
COMMENT ON FUNCTION forgeyard.breaker_configure(text, text, jsonb) IS
  'Give a resource a circuit breaker: it opens when at least minimum_calls (10) of the last window (100) outcomes were seen and failure_rate (0.5) of them failed (a nack; a permanent nack does not count), stays open for open_for (30 s: none of its messages is handed out), then lets half_open_calls (1) deliveries through: all succeed, it closes; one fails, it opens again. NULL options remove it. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_state(tenant text, resource text)
    RETURNS TABLE (state text, failures integer, calls integer, changed_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_breaker_state';
COMMENT ON FUNCTION forgeyard.breaker_state(text, text) IS
  'The breaker of a resource: closed, open or half_open (an open breaker whose open_for ran out reads half_open), the failures and outcomes in its window, and when it last changed. 42704 for a resource without a breaker.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.resource_limit(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.breaker_configure(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.resource_limit(text, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.breaker_configure(text, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_resources', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_resource_state', '');

-- Per-key concurrency limits (queue option max_in_flight_per_key = k): a fairness key's pending
-- messages of such a queue are counted in queue_partitions, whose `heads` are the ones in
-- messages_claim (ready or in flight, at most k); the rest wait, in msg_id order, in
-- messages_key_waiting, and finishing a head promotes the next under the key's row lock. (In a
-- partition-ordered queue a key's row counts its partition_key's messages and `heads` stays 1.)
ALTER TABLE forgeyard.queues
    ADD COLUMN max_in_flight_per_key bigint CHECK (max_in_flight_per_key BETWEEN 1 AND 1000000);
ALTER TABLE forgeyard.queue_partitions
    ADD COLUMN heads bigint NOT NULL DEFAULT 1 CHECK (heads >= 0);
CREATE INDEX messages_key_waiting ON forgeyard.messages (tenant_id, queue, fairness_key, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND NOT is_head AND fairness_key IS NOT NULL;
COMMENT ON FUNCTION forgeyard.queue_create(text, text, jsonb) IS
  'Create a queue of the tenant. Options (each validated, 22023 naming it): max_messages, max_bytes, max_payload_bytes (64 KiB), visibility_timeout, max_attempts, backoff_base, backoff_max, ordering (none|partition), dead_letter_payload (drop|keep), retain_acked, max_dead, dead_letter_retention, dedup_window (24 h), admit_<class> percentages (bulk 70, background 80, interactive 90, realtime 95, security_control and emergency 100), notify; flow control: retry_budget, retry_budget_min, retry_budget_window, max_in_flight_per_key (not with ordering partition), fairness (true|false), aging (an interval; 0 or null: none). 42710 if it exists.';
COMMENT ON FUNCTION forgeyard.queue_alter(text, text, jsonb) IS
  'Change the given options of a queue (ordering cannot change; max_in_flight_per_key and fairness can be set or removed only while the queue holds no messages; the limit can be changed any time). 42704 for an unknown queue.';
COMMENT ON TABLE forgeyard.queue_partitions IS
  'Pending messages (and heads: the claimable ones) per partition key of partition-ordered queues and per fairness key of queues with max_in_flight_per_key.';

-- Fair queues (queue option fairness): within a class, claims take messages by a virtual pass
-- (stride scheduling) instead of by age. Each message's pass is fixed at enqueue: its key's last
-- pass or the lowest pass of its class's pending heads, whichever is later, plus 1,000,000 /
-- weight; so a key with a backlog does not delay another key's next message by more than a few
-- claims, and a key that was idle starts at the present (it banks no credit). The keys' rows are
-- written by producers only.
ALTER TABLE forgeyard.queues ADD COLUMN fairness boolean NOT NULL DEFAULT false;
-- Priority aging (queue option aging): a ready message below realtime competes one class higher
-- per interval waited, never above realtime; nothing is rewritten (the claim reads the oldest of
-- each class and orders them by the class they have aged into). 0: none.
ALTER TABLE forgeyard.queues ADD COLUMN aging_usecs bigint NOT NULL DEFAULT 0
    CHECK (aging_usecs BETWEEN 0 AND 2592000000000);
ALTER TABLE forgeyard.messages ADD COLUMN pass bigint;
CREATE INDEX messages_fair ON forgeyard.messages (tenant_id, queue, priority, pass, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NOT NULL;
-- The age-ordered claim index keeps the messages without a pass only: a fair queue's claims
-- read messages_fair, and an entry in both would cost every enqueue and claim a second insert.
DROP INDEX forgeyard.messages_claim;
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NULL;
CREATE TABLE forgeyard.queue_fair_keys (
    tenant_id    text    NOT NULL,
    queue        text    NOT NULL,
    fairness_key text    NOT NULL,
    weight       integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    last_pass    bigint,
    PRIMARY KEY (tenant_id, queue, fairness_key)
) WITH (fillfactor = 70);
COMMENT ON TABLE forgeyard.queue_fair_keys IS
  'Per key of a fair queue: its weight (fairness_weight) and the pass of its last message (fairness_key '''' is the messages without one).';

CREATE FUNCTION forgeyard.fairness_weight(tenant text, queue text, fairness_key text, weight integer)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_fairness_weight';
COMMENT ON FUNCTION forgeyard.fairness_weight(text, text, text, integer) IS
  'The share of a fairness key in a fair queue (option fairness), relative to other keys (1 each by default): a key of weight 3 gets three messages claimed for each one of a key of weight 1 while both have a backlog. Applies to messages enqueued after it. weight NULL resets it to 1. 22023 for a weight outside 1..1000 or a queue without fairness.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_fair_keys', '');

-- queue_stats gains waiting (held behind their key) and retries_delayed (by the retry budget), at the end.
DROP FUNCTION forgeyard.queue_stats(text, text);
CREATE FUNCTION forgeyard.queue_stats(tenant text, queue text)
    RETURNS TABLE (ready bigint, in_flight bigint, delayed bigint, dead bigint, bytes bigint,
                   oldest_ready_age interval, pressure text, waiting bigint, retries_delayed bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_stats';
COMMENT ON FUNCTION forgeyard.queue_stats(text, text) IS
  'Depth of a queue: ready (visible), in flight, delayed, dead; bytes admitted; age of the oldest ready message; pressure (normal below 70% of a limit, elevated to 90%, saturated above); waiting: of the ready, those held behind their key (a later message of an ordered partition, or a key at max_in_flight_per_key); retries_delayed: retries the retry budget delayed in its current window.';

-- Flow control as operators read it: one row per limit, of a queue (subject NULL) or of a
-- resource (queue NULL, subject the resource). `available`: tokens a rate limit holds now;
-- `in_flight`: deliveries a resource has out; `counted` and `delayed`: the retry budget's window,
-- or a breaker's failures and outcomes in its window; `refused`: claims a resource turned away;
-- `state`: a breaker's; `since`: when the window or the breaker's state began. A key of a queue
-- with max_in_flight_per_key: `in_flight` its heads (ready or in flight), `counted` its pending
-- messages, `delayed` those waiting behind the limit, `available` the heads it may still add.
-- A key of a fair queue with a weight other than 1: `limit` says it.
CREATE VIEW forgeyard.flow_state WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), clock AS (
    SELECT (extract(epoch FROM forgeyard.now()) * 1000000)::bigint AS now_us
), buckets AS (
    -- GCRA: a bucket of `burst` whose arrival time is `tat` holds
    -- floor((now + tolerance - max(tat, now)) / emission) + 1 tokens, at most `burst`.
    SELECT a.tenant_id, a.queue, NULL::text AS resource, a.tokens AS burst, a.per_usecs, a.tokens, a.tat
      FROM forgeyard.queue_admission a
    UNION ALL
    -- a resource's part i keeps rate / parts and burst / parts, the remainders to the first parts
    SELECT r.tenant_id, NULL, r.resource,
           r.burst / r.parts + CASE WHEN coalesce(s.part, 0) < r.burst % r.parts THEN 1 ELSE 0 END,
           r.per_usecs,
           r.rate / r.parts + CASE WHEN coalesce(s.part, 0) < r.rate % r.parts THEN 1 ELSE 0 END, s.tat
      FROM forgeyard.flow_resources r LEFT JOIN forgeyard.flow_resource_state s USING (tenant_id, resource)
     WHERE r.rate IS NOT NULL
), available AS (
    SELECT b.tenant_id, b.queue, b.resource,
           sum(CASE WHEN b.tat IS NULL THEN b.burst
                    ELSE greatest(0, least(b.burst,
                         (c.now_us + e.emission * (b.burst - 1)
                          - greatest((extract(epoch FROM b.tat) * 1000000)::bigint, c.now_us)) / e.emission + 1))
               END)::bigint AS tokens
      FROM buckets b CROSS JOIN clock c
     CROSS JOIN LATERAL (SELECT (b.per_usecs + b.tokens - 1) / b.tokens AS emission) e
     GROUP BY b.tenant_id, b.queue, b.resource
), rows AS (
    SELECT q.tenant_id, q.queue, 'admission_limit'::text AS kind, NULL::text AS subject,
           q.admission_rate || ' per ' || (q.admission_per_usecs * '1 microsecond'::interval)::text AS "limit",
           a.tokens AS available, NULL::bigint AS in_flight, NULL::bigint AS counted, NULL::bigint AS delayed,
           NULL::bigint AS refused, NULL::text AS state, NULL::timestamptz AS since
      FROM forgeyard.queues q
      LEFT JOIN available a ON a.tenant_id = q.tenant_id AND a.queue = q.queue
     WHERE q.admission_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'retry_budget', NULL,
           q.retry_budget || ' of admitted, at least ' || q.retry_budget_min || ' per '
               || (q.retry_budget_window_usecs * '1 microsecond'::interval)::text,
           NULL, NULL, coalesce(w.retries, 0), coalesce(w.delayed, 0), NULL, NULL, w.window_start
      FROM forgeyard.queues q LEFT JOIN forgeyard.queue_retry_windows w USING (tenant_id, queue)
     WHERE q.retry_budget IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'resource_limit', r.resource,
           concat_ws(', ', r.rate || ' per ' || (r.per_usecs * '1 microsecond'::interval)::text || ' burst ' || r.burst,
                     'max_in_flight ' || r.max_in_flight),
           a.tokens, coalesce(s.in_flight, 0), NULL, NULL, coalesce(s.refused, 0), NULL, NULL
      FROM forgeyard.flow_resources r
      LEFT JOIN (SELECT tenant_id, resource, sum(in_flight)::bigint AS in_flight, sum(refused)::bigint AS refused
                   FROM forgeyard.flow_resource_state GROUP BY tenant_id, resource) s USING (tenant_id, resource)
      LEFT JOIN available a ON a.tenant_id = r.tenant_id AND a.resource = r.resource
     WHERE r.rate IS NOT NULL OR r.max_in_flight IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'breaker', r.resource,
           'opens at ' || r.failure_rate || ' of the last ' || r.window_calls || ' (at least ' || r.minimum_calls
               || '), open for ' || (r.open_for_usecs * '1 microsecond'::interval)::text || ', '
               || r.half_open_calls || ' half-open',
           NULL, coalesce(s.in_flight, 0), length(replace(coalesce(s.outcomes, ''), '0', '')),
           length(coalesce(s.outcomes, '')), coalesce(s.refused, 0),
           CASE WHEN s.breaker = 'open' AND s.open_until <= forgeyard.now() THEN 'half_open'
                ELSE coalesce(s.breaker, 'closed') END,
           s.changed_at
      FROM forgeyard.flow_resources r
      LEFT JOIN forgeyard.flow_resource_state s
        ON s.tenant_id = r.tenant_id AND s.resource = r.resource AND s.part = 0  -- a breaker's resource has one part
     WHERE r.failure_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'key_limit', p.partition_key, 'max_in_flight_per_key ' || q.max_in_flight_per_key,
           greatest(0, q.max_in_flight_per_key - p.heads), p.heads, p.pending, p.pending - p.heads, NULL, NULL, NULL
      FROM forgeyard.queues q JOIN forgeyard.queue_partitions p USING (tenant_id, queue)
     WHERE q.max_in_flight_per_key IS NOT NULL
    UNION ALL
    SELECT k.tenant_id, k.queue, 'fairness_weight', k.fairness_key, 'weight ' || k.weight, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL
      FROM forgeyard.queue_fair_keys k
     WHERE k.weight <> 1
)
SELECT * FROM rows
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR rows.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.flow_state IS
  'Flow control: each admission limit and retry budget of a queue, each key of a queue with max_in_flight_per_key, each fairness weight, each resource limit and breaker, with the tokens a rate limit holds now, deliveries in flight, the retry window''s or breaker window''s counts, claims refused, the breaker''s state. A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('inspect',     'SELECT',  'TABLE forgeyard.flow_state');


-- (end of section)

-------------------------------------------------------------------------------------------------
-- The message indexes without deduplication (msg_id makes every key unique: the pass only spent time)
-------------------------------------------------------------------------------------------------

ALTER INDEX forgeyard.messages_claim SET (deduplicate_items = off);
ALTER INDEX forgeyard.messages_partition SET (deduplicate_items = off);
ALTER INDEX forgeyard.messages_finished SET (deduplicate_items = off);

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access changes take turns (two grants on one object at once failed with XX000)
-------------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION forgeyard.apply_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    PERFORM forgeyard.check_role(role);
    -- GRANT and REVOKE rewrite the ACL of each object in place: two of them on one function at
    -- once fail with "tuple concurrently updated" (XX000). Access changes take turns instead.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA forgeyard TO %s', role);
    FOR g IN SELECT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege, g.object, role);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION forgeyard.grant_usage(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;

CREATE OR REPLACE FUNCTION forgeyard.grant_maintenance(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage'), (role, 'maintenance')
        ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;

CREATE OR REPLACE FUNCTION forgeyard.grant_inspect(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'inspect') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;

CREATE OR REPLACE FUNCTION forgeyard.revoke_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    -- GRANT and REVOKE rewrite the ACL of each object in place: two of them on one function at
    -- once fail with "tuple concurrently updated" (XX000). Access changes take turns instead.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    FOR g IN SELECT DISTINCT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s FROM %s', g.privilege, g.object, role);
    END LOOP;
    EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA forgeyard FROM %s', role);
    DELETE FROM forgeyard.role_access a WHERE a.role_id OPERATOR(pg_catalog.=) role;
END
$$;

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.7.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;

-- restore_reconcile also ends the lease a workflow run keeps of its delivery (wf_runs.lease_until),
-- as it releases the delivery.
CREATE OR REPLACE FUNCTION forgeyard.restore_reconcile(anchors jsonb DEFAULT NULL)
    RETURNS TABLE (kind text, tenant text, count bigint, detail text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timestamptz := forgeyard.now();
    floor_value bigint;
    status_before record;
    n_leases bigint;
    n_deliveries bigint;
    n_keys bigint;
    n_roles bigint;
    n_verified bigint := 0;
    n_failed bigint := 0;
    chain record;
    anchor jsonb;
    anchor_seq bigint;
    anchor_hash bytea;
    v record;
    head_seq bigint;
    failures jsonb := '[]';
    ops record;
BEGIN
    -- A role bound to tenants may not act on all of them: the caller must be allowed the
    -- operations chain (FY040 otherwise; the same check as every tenant-scoped call).
    PERFORM FROM forgeyard.audit_head('_forgeyard.operations');
    IF anchors IS NOT NULL AND pg_catalog.jsonb_typeof(anchors) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'anchors must be a JSON object {"tenant": {"seq": N, "hash": "hex"}}' USING ERRCODE = '22023';
    END IF;
    FOR chain IN SELECT a.key AS tenant, a.value FROM pg_catalog.jsonb_each(anchors) a LOOP
        IF pg_catalog.jsonb_typeof(chain.value) OPERATOR(pg_catalog.<>) 'object'
           OR pg_catalog.jsonb_typeof(chain.value OPERATOR(pg_catalog.->) 'seq') IS DISTINCT FROM 'number'
           OR pg_catalog.jsonb_typeof(chain.value OPERATOR(pg_catalog.->) 'hash') IS DISTINCT FROM 'string'
           OR (chain.value OPERATOR(pg_catalog.->>) 'hash') OPERATOR(pg_catalog.!~) '^[0-9a-fA-F]{64}$'
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq') OPERATOR(pg_catalog.!~) '^[0-9]+$'
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.numeric OPERATOR(pg_catalog.<) 1
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.numeric OPERATOR(pg_catalog.>) 9223372036854775807 THEN
            RAISE EXCEPTION 'anchor of tenant "%" must be {"seq": a positive integer, "hash": 64 hex digits}', chain.tenant
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    SELECT * INTO status_before FROM forgeyard.restore_status();

    -- Every fencing value handed out from here on exceeds the clock in microseconds, hence every
    -- value handed out before the restore (docs/architecture.md#fencing-across-a-restore).
    floor_value := (EXTRACT(epoch FROM t) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8;
    PERFORM pg_catalog.setval('forgeyard.message_ids', floor_value) FROM forgeyard.message_ids s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;
    PERFORM pg_catalog.setval('forgeyard.claim_tokens', floor_value) FROM forgeyard.claim_tokens s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;
    PERFORM pg_catalog.setval('forgeyard.idempotency_attempts', floor_value) FROM forgeyard.idempotency_attempts s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;

    -- Live grants end now; lease_reap reports each once (reaped_at cleared).
    UPDATE forgeyard.leases l SET expires_at = t, reaped_at = NULL
     WHERE l.released_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) t;
    GET DIAGNOSTICS n_leases = ROW_COUNT;
    -- Claimed deliveries (in flight, or lapsed but not re-claimed): claimable now, under a token
    -- nobody holds, so every earlier token's ack / nack / extend is refused (FY001).
    UPDATE forgeyard.messages m
       SET claim_token = pg_catalog.nextval('forgeyard.claim_tokens'), claimed_by = NULL,
           visible_at = LEAST(m.visible_at, t)
     WHERE m.state OPERATOR(pg_catalog.=) 'pending' AND m.claim_token IS NOT NULL AND m.claimed_by IS NOT NULL;
    GET DIAGNOSTICS n_deliveries = ROW_COUNT;
    -- Those of workflow runs: the lease each run keeps of its delivery ends with it (0.7.0).
    UPDATE forgeyard.wf_runs r SET lease_until = NULL WHERE r.lease_until IS NOT NULL;
    -- Locked keys: the lock ends and the attempt becomes one nobody holds; the next begin takes
    -- over from the recovery point with a new attempt.
    UPDATE forgeyard.idempotency_keys k
       SET attempt = pg_catalog.nextval('forgeyard.idempotency_attempts'), locked_until = t
     WHERE k.status OPERATOR(pg_catalog.=) 'in_progress' AND k.locked_until OPERATOR(pg_catalog.>) t;
    GET DIAGNOSTICS n_keys = ROW_COUNT;

    -- Every chain, and every anchored tenant (an anchor of a chain lost entirely is a cut tail too).
    FOR chain IN
        SELECT c.tenant_id, h.seq AS head_seq FROM (
            SELECT a.tenant_id FROM forgeyard.audit_heads a
            UNION SELECT j.key FROM pg_catalog.jsonb_object_keys(COALESCE(anchors, '{}')) j(key)) c
          LEFT JOIN forgeyard.audit_heads h ON h.tenant_id OPERATOR(pg_catalog.=) c.tenant_id
         ORDER BY c.tenant_id
    LOOP
        anchor := anchors OPERATOR(pg_catalog.->) chain.tenant_id;
        anchor_seq := (anchor OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.int8;
        anchor_hash := pg_catalog.decode(anchor OPERATOR(pg_catalog.->>) 'hash', 'hex');
        head_seq := COALESCE(chain.head_seq, 0);
        SELECT * INTO v FROM forgeyard.audit_verify(chain.tenant_id, 1, NULL, anchor_seq, anchor_hash);
        n_verified := n_verified OPERATOR(pg_catalog.+) 1;
        IF NOT v.ok THEN
            n_failed := n_failed OPERATOR(pg_catalog.+) 1;
            failures := failures OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                'tenant', chain.tenant_id, 'first_bad_seq', v.first_bad_seq, 'reason', v.reason);
            IF anchor_seq OPERATOR(pg_catalog.>) head_seq THEN
                kind := 'audit_tail_cut'; tenant := chain.tenant_id; count := anchor_seq;
                detail := pg_catalog.format('events %s..%s were lost with the restore (head %s, anchor %s)',
                                            head_seq OPERATOR(pg_catalog.+) 1, anchor_seq, head_seq, anchor_seq);
            ELSE
                kind := 'audit_chain_failed'; tenant := chain.tenant_id; count := v.first_bad_seq;
                detail := v.reason;
            END IF;
            RETURN NEXT;
        END IF;
    END LOOP;

    -- Grants made while ALTER EXTENSION ... UPDATE ran are recorded as the extension's initial
    -- privileges, which pg_dump leaves out: grant every recorded role its access kinds again.
    SELECT pg_catalog.count(*) INTO n_roles
      FROM (SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r) g;

    INSERT INTO forgeyard.store_identity
        SELECT pg_catalog.clock_timestamp(), 'reconcile', i.system_identifier, i.timeline, i.database_oid, i.database_name
          FROM forgeyard.current_store_identity() i;
    -- The report, in the tenant-neutral operations chain (seed: restores are audited).
    SELECT * INTO ops FROM forgeyard.audit_append('_forgeyard.operations', session_user::pg_catalog.text,
        'storage.reconcile', pg_catalog.current_database()::pg_catalog.text,
        pg_catalog.jsonb_build_object('restore_state', status_before.state, 'leases_expired', n_leases,
            'deliveries_released', n_deliveries, 'idempotency_unlocked', n_keys,
            'audit_chains_verified', n_verified, 'audit_chains_failed', n_failed, 'fencing_floor', floor_value,
            'failures', failures));

    tenant := NULL; detail := NULL;
    kind := 'restore_detected'; count := (status_before.state OPERATOR(pg_catalog.<>) 'ok')::pg_catalog.int4;
    detail := status_before.state OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) status_before.detail; RETURN NEXT;
    detail := NULL;
    kind := 'leases_expired'; count := n_leases; RETURN NEXT;
    kind := 'deliveries_released'; count := n_deliveries; RETURN NEXT;
    kind := 'idempotency_unlocked'; count := n_keys; RETURN NEXT;
    kind := 'audit_chains_verified'; count := n_verified; RETURN NEXT;
    kind := 'audit_chains_failed'; count := n_failed; RETURN NEXT;
    kind := 'fencing_floor'; count := floor_value; RETURN NEXT;
    kind := 'access_reapplied'; count := n_roles; RETURN NEXT;
    kind := 'operations_audit'; tenant := '_forgeyard.operations'; count := ops.seq;
    detail := pg_catalog.encode(ops.hash, 'hex'); RETURN NEXT;
END
$$;
