-- The PL/pgSQL edition's durable workflows: what the workflow functions share (extension/workflow.cpp's
-- helpers, with the rules of core/workflow.cpp). The bodies are beside their C++ twin's phase:
-- workflow_start.sql (start, claim), workflow_step.sql (steps, compensations, sleep, signals),
-- workflow_finish.sql (complete, fail, park, extend, cancel, retry), workflow_read.sql (status,
-- journal, list).
--
-- The C++ edition reads and locks the run, its cursor and the journal below SPI; here the same
-- rows are read and locked by the statements those reads replace (workflow_owned). A run's queue
-- is "_wf.<workflow>@<version>"; its messages carry the run id's 16 bytes. The queue's own calls
-- (forgeyard.enqueue, ack, nack, extend) are called as the C++ edition calls them, through SQL.

-- @helper
-- wf::throw_unknown_run: 42704 for a run the tenant does not have.
CREATE FUNCTION forgeyard_pl.workflow_unknown_run(p_run uuid, p_tenant text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
        MESSAGE = format('workflow run %s not found for tenant "%s"', p_run, p_tenant);
END
$$;

-- run_args: the tenant and run_id arguments of every function on one run. Returns the tenant.
CREATE FUNCTION forgeyard_pl.workflow_run_arg(p_tenant text, p_run uuid)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    IF p_run IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'run_id must not be NULL';
    END IF;
    RETURN p_tenant;
END
$$;

-- position_arg: NULL (the epoch's cursor counts) or wf::check_position (22023 under 1).
CREATE FUNCTION forgeyard_pl.workflow_position_arg(p_position integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_position IS NOT NULL AND p_position < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'position must be 1 or more',
            DETAIL = 'got ' || p_position;
    END IF;
    RETURN p_position;
END
$$;

-- wf::throw_cursor_lost: FY001 for an owner whose step cursor is gone or another epoch's.
CREATE FUNCTION forgeyard_pl.workflow_cursor_lost(p_epoch bigint, p_run uuid)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
        MESSAGE = format('workflow run %s: the step cursor of epoch %s is gone (a crash, a failover or a restore emptied it, or the run was taken over)',
                         p_run, p_epoch),
        DETAIL = 'stop working on the run; it is handed out again when the lease of this epoch runs out';
END
$$;

-- wf::check_same_step: FY060 when the journal has another step at the position.
CREATE FUNCTION forgeyard_pl.workflow_check_same_step(p_recorded text, p_step text, p_run uuid, p_position integer)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_recorded IS NULL OR p_recorded = p_step THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.nondeterminism@',
        MESSAGE = format('workflow run %s called step "%s" at position %s, where its journal has step "%s"',
                         p_run, p_step, p_position, p_recorded),
        DETAIL = 'the workflow''s code no longer replays its journal; park the run (workflow_park), then fix the code or retry the run (workflow_retry)';
END
$$;

-- wf::check_position_follows: 22023 unless the step before `position` is recorded done.
CREATE FUNCTION forgeyard_pl.workflow_check_follows(p_position integer, p_previous text, p_run uuid, p_function text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_position = 1 OR p_previous = 'done' THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = format('%s at position %s of workflow run %s, but the step at position %s is %s', p_function, p_position,
                         p_run, p_position - 1,
                         CASE WHEN p_previous IS NULL THEN 'not recorded' ELSE 'not done (' || p_previous || ')' END),
        DETAIL = 'count positions from 1 for the first step call of an epoch, one more per step; a step''s position follows a step recorded done';
END
$$;

-- wf::check_current_step: 22023 unless `step` is the epoch's current step.
CREATE FUNCTION forgeyard_pl.workflow_check_current(p_cursor integer, p_cursor_step text, p_step text, p_function text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_cursor >= 1 AND p_cursor_step = p_step THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = format('%s for step "%s", but the run''s current step is %s', p_function, p_step,
                         CASE WHEN p_cursor_step IS NULL THEN 'none' ELSE '"' || p_cursor_step || '"' END),
        DETAIL = 'call workflow_step for the step first, under the same epoch';
END
$$;

-- wf::throw_step_recorded: 22023, the step at `position` is recorded done already.
CREATE FUNCTION forgeyard_pl.workflow_step_recorded(p_step text, p_run uuid, p_position integer, p_failing boolean)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = format('step "%s" of workflow run %s at position %s', p_step, p_run, p_position)
                  || CASE WHEN p_failing THEN ' is recorded as done; it cannot fail'
                          ELSE ' is recorded already, with another result' END,
        DETAIL = 'a step''s recorded result never changes: replay returns it';
END
$$;

-- The journal rows at `position` and the one before it (when with_previous and position > 1), in
-- one descent of the journal's key: the status of the step before, and the row at the position.
CREATE FUNCTION forgeyard_pl.workflow_read_position(p_tenant text, p_run uuid, p_position integer, p_with_previous boolean,
                                                    OUT j_found boolean, OUT j_previous text, OUT j_step text,
                                                    OUT j_status text, OUT j_result jsonb, OUT j_wake_at timestamptz,
                                                    OUT j_compensation text)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT coalesce(bool_or(x.position = p_position), false),
           min(x.status) FILTER (WHERE x.position < p_position),
           min(x.step) FILTER (WHERE x.position = p_position),
           min(x.status) FILTER (WHERE x.position = p_position),
           (array_agg(x.result) FILTER (WHERE x.position = p_position))[1],
           min(x.wake_at) FILTER (WHERE x.position = p_position),
           min(x.compensation) FILTER (WHERE x.position = p_position)
      INTO j_found, j_previous, j_step, j_status, j_result, j_wake_at, j_compensation
      FROM forgeyard.wf_journal x
     WHERE x.run_id = p_run
       AND x.position >= CASE WHEN p_with_previous AND p_position > 1 THEN p_position - 1 ELSE p_position END
       AND x.position <= p_position AND x.tenant_id = p_tenant;
END
$$;

-- check_named_position on a reading of its own: the step before `position` recorded done and, with
-- p_same_step, a row at the position of the same step (FY060 otherwise).
CREATE FUNCTION forgeyard_pl.workflow_check_named(p_tenant text, p_run uuid, p_position integer, p_step text,
                                                  p_function text, p_same_step boolean DEFAULT true)
    RETURNS void LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    jr record;
BEGIN
    SELECT * INTO jr FROM forgeyard_pl.workflow_read_position(p_tenant, p_run, p_position, true);
    IF p_position > 1 THEN
        PERFORM forgeyard_pl.workflow_check_follows(p_position, jr.j_previous, p_run, p_function);
    END IF;
    IF p_same_step AND jr.j_found THEN
        PERFORM forgeyard_pl.workflow_check_same_step(jr.j_step, p_step, p_run, p_position);
    END IF;
END
$$;

-- lock_owned_in (workflow.cpp): the run under its owner's epoch, as the SELECT ... FOR UPDATE it
-- replaces: found and locked (a claim that takes it over waits for this transaction; a newer
-- version followed while waiting is the one read), its message read when it must (under the
-- statement's snapshot, for the version locked), and `epoch` checked to own the run in state p_as
-- (running, compensating, or "owned": either): FY001 otherwise, 42704 for a run the tenant does
-- not have. p_lock false (workflow_step without a timeout): the row is read, not locked, unless it
-- has a step deadline to let go of. Returns the run's row as read: workflow, version, state,
-- msg_id, priority, wait_position, wait_until, compensate_to, error, step_deadline, epoch, live,
-- and with p_cursor_tid the ctid of the run's step cursor as the first reading's snapshot saw it
-- (NULL: none), for workflow_step's lock of the cursor.
CREATE FUNCTION forgeyard_pl.workflow_owned(p_tenant text, p_run uuid, p_epoch bigint, p_now timestamptz, p_as text,
                                            p_lock boolean, p_cursor_tid boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    first_tid tid;
    read_first boolean := false;
BEGIN
    -- (Four statements, one per shape, so that each keeps one generic plan.)
    IF NOT p_lock THEN
        IF p_cursor_tid THEN
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   (SELECT k.ctid FROM forgeyard.wf_cursors k WHERE k.run_id = x.run_id AND k.tenant_id = x.tenant_id) AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant;
        ELSE
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   NULL::tid AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant;
        END IF;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
        END IF;
        IF r.step_deadline IS NOT NULL THEN
            p_lock := true;
            read_first := true;
            first_tid := r.cursor_tid;  -- (the cursor as the first reading found it)
        END IF;
    END IF;
    IF p_lock THEN
        IF p_cursor_tid THEN
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   (SELECT k.ctid FROM forgeyard.wf_cursors k WHERE k.run_id = x.run_id AND k.tenant_id = x.tenant_id) AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant FOR UPDATE;
        ELSE
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   NULL::tid AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant FOR UPDATE;
        END IF;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
        END IF;
        IF read_first THEN
            r.cursor_tid := first_tid;
        END IF;
    END IF;
    -- wf::check_owner. A step with a timeout ends the lease at its deadline, whatever the
    -- delivery says.
    IF r.epoch <> p_epoch THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
            MESSAGE = format('workflow run %s: epoch %s is not the run''s current epoch %s', p_run, p_epoch, r.epoch),
            DETAIL = 'another worker took the run over; stop working on it';
    END IF;
    IF (CASE WHEN p_as = 'owned' THEN r.state NOT IN ('running', 'compensating') ELSE r.state <> p_as END) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
            MESSAGE = format('workflow run %s is %s, not %s under epoch %s', p_run, r.state, p_as, p_epoch),
            DETAIL = 'stop working on it';
    END IF;
    IF NOT r.live OR r.step_deadline <= p_now THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
            MESSAGE = format('workflow run %s: the lease of epoch %s ran out', p_run, p_epoch),
            DETAIL = 'extend the lease (workflow_extend) before it runs out; the run will be handed out again';
    END IF;
    RETURN r;
END
$$;

-- The step cursor of p_epoch, read (not locked) by a statement of its own after the run's lock, so
-- that what a call that held that lock wrote is seen (lock_owned's WithCursor::yes): FY001 when it
-- is gone or another epoch's. Returns (position, step).
CREATE FUNCTION forgeyard_pl.workflow_cursor(p_tenant text, p_run uuid, p_epoch bigint)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
BEGIN
    SELECT k.epoch, k.position, k.step INTO c FROM forgeyard.wf_cursors k WHERE k.run_id = p_run AND k.tenant_id = p_tenant;
    IF NOT FOUND OR c.epoch <> p_epoch THEN
        PERFORM forgeyard_pl.workflow_cursor_lost(p_epoch, p_run);
    END IF;
    RETURN c;
END
$$;

-- The position a step call names (p_named) or, NULL, the epoch's current step (workflow_cursor,
-- and 22023 unless p_step is that step), checked as p_function (workflow_step_fail, workflow_sleep)
-- checks it: a named position by workflow_check_named.
CREATE FUNCTION forgeyard_pl.workflow_step_position(p_tenant text, p_run uuid, p_epoch bigint, p_named integer,
                                                    p_step text, p_function text)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
BEGIN
    IF p_named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(p_tenant, p_run, p_epoch);
        IF NOT (c.position >= 1 AND coalesce(c.step = p_step, false)) THEN
            PERFORM forgeyard_pl.workflow_check_current(c.position, c.step, p_step, p_function);
        END IF;
        RETURN c.position;
    END IF;
    PERFORM forgeyard_pl.workflow_check_named(p_tenant, p_run, p_named, p_step, p_function);
    RETURN p_named;
END
$$;

-- The run's next message (payload: the run id's 16 bytes) on its definition's queue, visible after
-- p_delay microseconds, through forgeyard.enqueue as the C++ edition calls it.
CREATE FUNCTION forgeyard_pl.workflow_enqueue(p_tenant text, p_queue text, p_run uuid, p_priority integer,
                                              p_delay bigint DEFAULT 0)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN forgeyard.enqueue(p_tenant, p_queue, uuid_send(p_run), NULL, NULL,
                             (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[p_priority + 1],
                             p_delay * interval '1 microsecond');
END
$$;

-- wf::timer_delay: how long the message of a timer ending at p_until waits (at most 30 days).
CREATE FUNCTION forgeyard_pl.workflow_timer_delay(p_until timestamptz, p_now timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN least(greatest(forgeyard_pl.usecs(p_until) - forgeyard_pl.usecs(p_now), 0), 2592000000000);
END
$$;

-- A JSON text's nesting (core::parse_json, at most 64 objects and arrays inside each other):
-- 22023 naming the argument and the byte of the first one too deep. (Called for a value whose
-- nesting jsonb_path_exists found too deep.)
CREATE FUNCTION forgeyard_pl.workflow_json_depth(t text, argument text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b bytea := convert_to(t, 'UTF8');
    size integer := length(b);
    i integer := 0;
    c integer;
    depth integer := 0;
    in_string boolean := false;
BEGIN
    WHILE i < size LOOP
        c := get_byte(b, i);
        IF in_string THEN
            IF c = 92 THEN
                i := i + 2;
                CONTINUE;
            ELSIF c = 34 THEN
                in_string := false;
            END IF;
        ELSIF c = 34 THEN
            in_string := true;
        ELSIF c = 123 OR c = 91 THEN
            depth := depth + 1;
            IF depth > 64 THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = format('%s is not valid JSON: nested deeper than 64 levels at byte %s', argument, i);
            END IF;
        ELSIF c = 125 OR c = 93 THEN
            depth := depth - 1;
        END IF;
        i := i + 1;
    END LOOP;
END
$$;

-- core::canonical_json's text of a jsonb value: keys sorted by their UTF-8 bytes, no whitespace,
-- numbers without trailing zeros (jsonb's numbers have no exponent, leading zero or "-0"),
-- strings escaped as jsonb escapes them.
CREATE FUNCTION forgeyard_pl.workflow_canonical_text(v jsonb)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF jsonb_typeof(v) = 'object' THEN
        RETURN '{' || coalesce((SELECT string_agg(to_json(m.key)::text || ':' || forgeyard_pl.workflow_canonical_text(m.value),
                                                  ',' ORDER BY m.key COLLATE "C")
                                  FROM jsonb_each(v) m), '') || '}';
    ELSIF jsonb_typeof(v) = 'array' THEN
        RETURN '[' || coalesce((SELECT string_agg(forgeyard_pl.workflow_canonical_text(a.value), ',' ORDER BY a.n)
                                  FROM jsonb_array_elements(v) WITH ORDINALITY a(value, n)), '') || ']';
    ELSIF jsonb_typeof(v) = 'number' AND strpos(v::text, '.') > 0 THEN
        RETURN rtrim(rtrim(v::text, '0'), '.');
    END IF;
    RETURN v::text;
END
$$;

-- wf::canonical of a jsonb value as the C++ edition reads it (its text): checked (nesting, 22023
-- naming p_argument) and in canonical form, at most p_limit bytes (22023 "... is over N bytes in
-- canonical form"). As jsonb, the canonical form differs only in numbers' trailing zeros.
CREATE FUNCTION forgeyard_pl.workflow_canonical(v jsonb, p_argument text, p_limit bigint)
    RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    t text := v::text;
    c text;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_path_exists(v, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
        PERFORM forgeyard_pl.workflow_json_depth(t, p_argument);
    END IF;
    IF octet_length(t) <= p_limit AND t !~ '\.[0-9]*0($|[^0-9])' THEN
        RETURN v;
    END IF;
    c := forgeyard_pl.workflow_canonical_text(v);
    IF octet_length(c) > p_limit THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('%s is over %s bytes in canonical form', p_argument, p_limit);
    END IF;
    RETURN c::jsonb;
END
$$;

-- wf::signal_result: what a wait is journaled with, {"payload": ..., "status": ...}, checked as the
-- C++ edition checks its canonical text (p_payload is canonical already).
CREATE FUNCTION forgeyard_pl.workflow_signal_result(p_status text, p_payload jsonb)
    RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    prefix text := '{"status":"' || p_status || '","payload":';
BEGIN
    IF p_payload IS NOT NULL THEN
        IF jsonb_path_exists(p_payload, 'strict $.**{63} ? (@.type() == "object" || @.type() == "array")') THEN
            PERFORM forgeyard_pl.workflow_json_depth(prefix || forgeyard_pl.workflow_canonical_text(p_payload) || '}', 'result');
        END IF;
        IF octet_length(p_payload::text) + octet_length(prefix) + 1 > 1048576
           AND octet_length(forgeyard_pl.workflow_canonical_text(p_payload)) + octet_length(prefix) + 1 > 1048576 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'result is over 1048576 bytes in canonical form';
        END IF;
    END IF;
    RETURN jsonb_build_object('status', p_status, 'payload', p_payload);
END
$$;

-- send_signal: sends a run the signal p_name, in the caller's transaction: false for a repeated
-- signal id or a run that has finished; a run waiting for the signal is handed out at once. 42704
-- for a run the tenant does not have, unless p_missing_ok (a parent removed by its retention).
CREATE FUNCTION forgeyard_pl.workflow_send_signal(p_tenant text, p_run uuid, p_name text, p_payload jsonb,
                                                  p_signal_id uuid, p_now timestamptz, p_missing_ok boolean DEFAULT false)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    n integer;
    msg bigint;
BEGIN
    SELECT x.state, x.waiting_signal, x.workflow, x.version, x.priority INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        IF p_missing_ok THEN
            RETURN false;
        END IF;
        PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
    END IF;
    IF r.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked') THEN
        RETURN false;
    END IF;
    INSERT INTO forgeyard.wf_signals (tenant_id, run_id, signal_id, name, payload, sent_at)
    VALUES (p_tenant, p_run, p_signal_id, p_name, p_payload, p_now) ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 AND r.state = 'waiting' AND r.waiting_signal = p_name THEN
        msg := forgeyard_pl.workflow_enqueue(p_tenant, '_wf.' || r.workflow || '@' || r.version, p_run, r.priority);
        UPDATE forgeyard.wf_runs x SET state = 'pending', msg_id = msg, lease_until = NULL, updated_at = p_now
         WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
    END IF;
    RETURN n > 0;
END
$$;

-- tell_parent: a run that has a parent tells it, once, how it ended (core/workflow.hpp, children):
-- the signal "child:<run_id>", its id the child's run id, the payload {"error", "result", "state"}.
CREATE FUNCTION forgeyard_pl.workflow_tell_parent(p_tenant text, p_run uuid, p_now timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    SELECT x.parent_run_id, x.state, x.result, x.error INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = p_run AND x.parent_run_id IS NOT NULL;
    IF NOT FOUND OR r.state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed') THEN
        RETURN;
    END IF;
    PERFORM forgeyard_pl.workflow_send_signal(
        p_tenant, r.parent_run_id, 'child:' || p_run,
        jsonb_build_object('error', r.error, 'result', forgeyard_pl.workflow_canonical(r.result, 'result', 1099511627776),
                           'state', r.state),
        p_run, p_now, true);
END
$$;

-- settle: the run ends in p_state (its delivery let go by the caller). One that fails, is
-- cancelled or times out with compensations to run is compensating first: a new message hands it
-- out for them. One that ends compensation_failed keeps its error. Returns the run's state now.
CREATE FUNCTION forgeyard_pl.workflow_settle(p_tenant text, p_run uuid, p_state text, p_result jsonb, p_error text,
                                             p_now timestamptz)
    RETURNS text LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    q text;
    msg bigint;
BEGIN
    IF p_state IN ('failed', 'cancelled', 'timed_out') THEN
        SELECT x.workflow, x.version, x.priority INTO r
          FROM forgeyard.wf_runs x
         WHERE x.tenant_id = p_tenant AND x.run_id = p_run
           AND EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id = p_tenant AND j.run_id = p_run
                          AND j.status = 'done' AND j.compensation IS NOT NULL
                          AND j.compensation_status IS DISTINCT FROM 'done');
        IF FOUND THEN
            q := '_wf.' || r.workflow || '@' || r.version;
            PERFORM forgeyard_pl.queue_ensure(p_tenant, q);
            msg := forgeyard_pl.workflow_enqueue(p_tenant, q, p_run, r.priority);
            UPDATE forgeyard.wf_runs x
               SET state = 'compensating', compensate_to = p_state, error = p_error, msg_id = msg, lease_until = NULL,
                   updated_at = p_now
             WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
            RETURN 'compensating';
        END IF;
    END IF;
    UPDATE forgeyard.wf_runs x
       SET state = p_state, result = p_result,
           error = CASE WHEN p_state = 'compensation_failed' THEN x.error ELSE p_error END,
           lease_until = NULL, updated_at = p_now,
           finished_at = CASE WHEN p_state = 'parked' THEN NULL ELSE p_now END,
           purge_at = CASE WHEN p_state = 'parked' THEN NULL
                           ELSE p_now + (x.retention_usecs * '1 microsecond'::interval) END
     WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
    PERFORM forgeyard_pl.workflow_tell_parent(p_tenant, p_run, p_now);
    RETURN p_state;
END
$$;

-- record_failed_attempt: a failed attempt of the step at p_position, recorded unless the step is
-- done there (false then).
CREATE FUNCTION forgeyard_pl.workflow_record_failed(p_tenant text, p_run uuid, p_position integer, p_step text,
                                                    p_error text, p_epoch bigint, p_now timestamptz)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    n integer;
BEGIN
    INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, error, epoch, recorded_at)
    VALUES (p_tenant, p_run, p_position, p_step, 'failed', p_error, p_epoch, p_now)
    ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET error = excluded.error, attempts = j.attempts + 1,
        epoch = excluded.epoch, recorded_at = excluded.recorded_at
     WHERE j.status = 'failed';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n <> 0;
END
$$;

-- next_compensation: the newest step done whose compensation has not run.
CREATE FUNCTION forgeyard_pl.workflow_next_compensation(p_tenant text, p_run uuid,
                                                        OUT n_position integer, OUT n_step text, OUT n_compensation text,
                                                        OUT n_result jsonb)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT j.position, j.step, j.compensation, j.result INTO n_position, n_step, n_compensation, n_result
      FROM forgeyard.wf_journal j
     WHERE j.tenant_id = p_tenant AND j.run_id = p_run AND j.status = 'done' AND j.compensation IS NOT NULL
       AND j.compensation_status IS DISTINCT FROM 'done'
     ORDER BY j.position DESC LIMIT 1;
END
$$;

-- wf::check_next_compensation: 22023 unless p_position is the run's next compensation.
CREATE FUNCTION forgeyard_pl.workflow_check_next_compensation(p_next integer, p_position integer, p_run uuid)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_next = p_position THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = format('the next compensation of workflow run %s is %s, not at position %s', p_run,
                         CASE WHEN p_next IS NULL THEN 'none' ELSE 'at position ' || p_next END, p_position),
        DETAIL = 'compensations run newest first: ask workflow_compensation for the next one';
END
$$;
