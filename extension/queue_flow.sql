-- The PL/pgSQL edition of extension/queue_flow.cpp (rules of core/flow.cpp): admission limits of
-- producers (admission_limit, taken by enqueue), the retry budget (taken by nack), fairness
-- weights, and resources with rate limits, concurrency limits and circuit breakers
-- (resource_limit, breaker_configure, breaker_state; charged by the claim, given back by ack and
-- nack). Times in microseconds since 1970 where core/flow.cpp computes with them.

-- @helper
-- core::flow::take (GCRA): a bucket of `tokens` per `per_usecs` with a burst of `burst` (0:
-- tokens) whose theoretical arrival time is `tat` (NULL: full). Takes up to `count` tokens at
-- at_time: how many it took, and the bucket's new tat.
CREATE FUNCTION forgeyard_pl.queue_gcra(tokens bigint, per_usecs bigint, burst bigint, tat timestamptz,
                                        at_time timestamptz, count bigint, OUT taken bigint, OUT new_tat timestamptz)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    t bigint;
    tau bigint;
    now_us bigint := forgeyard_pl.usecs(at_time);
    from_us bigint;
BEGIN
    taken := 0;
    new_tat := tat;
    IF tokens <= 0 OR count <= 0 THEN
        RETURN;
    END IF;
    t := (per_usecs + tokens - 1) / tokens;
    tau := t * ((CASE WHEN burst > 0 THEN burst ELSE tokens END) - 1);
    from_us := CASE WHEN tat IS NULL THEN now_us ELSE greatest(forgeyard_pl.usecs(tat), now_us) END;
    IF from_us - now_us > tau THEN
        RETURN;
    END IF;
    taken := least(count, (now_us + tau - from_us) / t + 1);
    new_tat := forgeyard_pl.queue_at(from_us + taken * t);
END
$$;

-- core::flow::part_config: part `part` of a resource's configuration (a forgeyard.flow_resources
-- row): rate, burst and max_in_flight divided over its parts, the remainders to the first parts.
CREATE FUNCTION forgeyard_pl.queue_part_config(c record, part integer)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    r forgeyard.flow_resources%ROWTYPE := c;
    n bigint := c.parts;
BEGIN
    IF n <= 1 THEN
        RETURN r;
    END IF;
    IF c.rate IS NOT NULL THEN
        r.rate := c.rate / n + CASE WHEN part < c.rate % n THEN 1 ELSE 0 END;
        r.burst := coalesce(nullif(c.burst, 0), c.rate) / n
                   + CASE WHEN part < coalesce(nullif(c.burst, 0), c.rate) % n THEN 1 ELSE 0 END;
    END IF;
    IF c.max_in_flight IS NOT NULL THEN
        r.max_in_flight := c.max_in_flight / n + CASE WHEN part < c.max_in_flight % n THEN 1 ELSE 0 END;
    END IF;
    r.parts := 1;
    RETURN r;
END
$$;

-- core::flow::record_outcome: a delivery bound to the resource ended (outcome 0 success, 1 failure,
-- 2 neutral) at at_time: one fewer in flight, and the breaker's window (a forgeyard.flow_resources
-- row `c`, a forgeyard.flow_resource_state row `s`; returns `s` changed).
CREATE FUNCTION forgeyard_pl.queue_outcome(c record, s record, outcome integer, at_time timestamptz)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    calls integer;
    to_state text := NULL;
BEGIN
    IF s.in_flight > 0 THEN
        s.in_flight := s.in_flight - 1;
    END IF;
    IF c.failure_rate IS NULL OR outcome = 2 THEN
        IF s.breaker = 'half_open' AND s.half_open_in_flight > 0 THEN
            s.half_open_in_flight := s.half_open_in_flight - 1;
        END IF;
        RETURN s;
    END IF;
    IF s.breaker = 'open' THEN
        RETURN s;  -- a delivery handed out before it opened: the window starts again when it closes
    ELSIF s.breaker = 'half_open' THEN
        IF s.half_open_in_flight > 0 THEN
            s.half_open_in_flight := s.half_open_in_flight - 1;
        END IF;
        IF outcome = 1 THEN
            to_state := 'open';
        ELSE
            s.half_open_successes := s.half_open_successes + 1;
            IF s.half_open_successes >= c.half_open_calls THEN
                to_state := 'closed';
            END IF;
        END IF;
    ELSE
        s.outcomes := s.outcomes || CASE WHEN outcome = 1 THEN '1' ELSE '0' END;
        IF length(s.outcomes) > c.window_calls THEN
            s.outcomes := right(s.outcomes, c.window_calls::integer);
        END IF;
        calls := length(s.outcomes);
        IF calls >= c.minimum_calls
           AND (calls - length(replace(s.outcomes, '1', '')))::double precision >= c.failure_rate * calls::double precision THEN
            to_state := 'open';
        END IF;
    END IF;
    IF to_state IS NOT NULL THEN
        -- Opening keeps the window that tripped it (breaker_state shows it); closing starts a new one.
        s.breaker := to_state;
        s.changed_at := at_time;
        IF to_state <> 'open' THEN
            s.outcomes := '';
        END IF;
        s.half_open_in_flight := 0;
        s.half_open_successes := 0;
        s.transitions := s.transitions + 1;
        IF to_state = 'open' THEN
            s.open_until := at_time + forgeyard_pl.queue_usecs_interval(c.open_for_usecs);
        END IF;
    END IF;
    RETURN s;
END
$$;

-- write_resource_state: a forgeyard.flow_resource_state row `s` (locked by this transaction)
-- written back, all but its count of refusals.
CREATE FUNCTION forgeyard_pl.queue_part_write(s record)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE forgeyard.flow_resource_state x
       SET tat = s.tat, in_flight = s.in_flight, breaker = s.breaker, outcomes = s.outcomes, changed_at = s.changed_at,
           open_until = s.open_until, half_open_in_flight = s.half_open_in_flight,
           half_open_successes = s.half_open_successes, transitions = s.transitions
     WHERE x.tenant_id = s.tenant_id AND x.resource = s.resource AND x.part = s.part;
END
$$;

-- fold_outcomes: the outcomes recorded for a part while another transaction held it
-- (flow_outcome_deltas) applied to it, its row being locked by the caller, and deleted; each is
-- locked SKIP LOCKED first, so one that another caller folds is left to it. Part 0 also takes those
-- of parts at or past `parts` (the resource's number of parts now). `c` is the part's share of the
-- configuration. Writes the row if any was applied; returns whether any was.
CREATE FUNCTION forgeyard_pl.queue_part_fold(tenant text, resource text, part integer, parts integer, c record,
                                             at_time timestamptz)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    s forgeyard.flow_resource_state%ROWTYPE;
    d record;
    tids tid[] := '{}';
    at_when timestamptz;
    j bigint;
BEGIN
    FOR d IN SELECT y.ctid AS tid, y.successes, y.failures, y.neutrals, y.recorded_at
               FROM forgeyard.flow_outcome_deltas y
              WHERE y.tenant_id = tenant AND y.resource = queue_part_fold.resource
                AND (y.part = queue_part_fold.part::smallint OR (queue_part_fold.part = 0 AND y.part >= greatest(parts, 1)))
              ORDER BY y.part, y.ctid
              FOR UPDATE OF y SKIP LOCKED LOOP
        IF cardinality(tids) = 0 THEN
            SELECT x.* INTO s FROM forgeyard.flow_resource_state x
             WHERE x.tenant_id = tenant AND x.resource = queue_part_fold.resource AND x.part = queue_part_fold.part::smallint;
        END IF;
        -- A state change (the breaker opening) counts from now, not from when the outcome was
        -- recorded and waited to be folded.
        at_when := greatest(d.recorded_at, at_time);
        FOR j IN 1 .. d.successes LOOP
            s := forgeyard_pl.queue_outcome(c, s, 0, at_when);
        END LOOP;
        FOR j IN 1 .. d.failures LOOP
            s := forgeyard_pl.queue_outcome(c, s, 1, at_when);
        END LOOP;
        FOR j IN 1 .. d.neutrals LOOP
            s := forgeyard_pl.queue_outcome(c, s, 2, at_when);
        END LOOP;
        tids := tids || d.tid;
    END LOOP;
    IF cardinality(tids) = 0 THEN
        RETURN false;
    END IF;
    DELETE FROM forgeyard.flow_outcome_deltas y WHERE y.ctid = ANY (tids);
    PERFORM forgeyard_pl.queue_part_write(s);
    RETURN true;
END
$$;

-- A claim's lock of part `part` of a resource's state (lock_part in queue_claim.cpp): FOR NO KEY
-- UPDATE, SKIP LOCKED unless `wait`. 0: no such row (made a moment ago, not yet visible); 1: held
-- by another transaction; 2: locked, entered in the ledger of held rows, and the outcomes recorded
-- while others held it folded in. `c` is the part's share of the configuration.
CREATE FUNCTION forgeyard_pl.queue_part_lock(tenant text, resource text, part integer, parts integer, c record,
                                             wait boolean, at_time timestamptz)
    RETURNS integer LANGUAGE plpgsql
    AS $$
BEGIN
    IF wait THEN
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource AND x.part = queue_part_lock.part::smallint
         FOR NO KEY UPDATE OF x;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
    ELSE
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource AND x.part = queue_part_lock.part::smallint
         FOR NO KEY UPDATE OF x SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN CASE WHEN EXISTS (SELECT FROM forgeyard.flow_resource_state x
                                      WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource
                                        AND x.part = queue_part_lock.part::smallint) THEN 1 ELSE 0 END;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(tenant, resource, 'p', part));
    PERFORM forgeyard_pl.queue_part_fold(tenant, resource, part, parts, c, at_time);
    RETURN 2;
END
$$;

-- core::flow::admit_delivery on a part this transaction holds: a claim meets a ready message bound
-- to the resource (`transfer`: its last delivery lapsed and still counts in flight). Admitted: a
-- token and a place are taken, and half-open a trial call; refused: it stays ready. The part's row
-- is written either way (an open breaker whose time ran out turns half-open). `c` is the part's
-- share of the configuration. Whether it was admitted.
CREATE FUNCTION forgeyard_pl.queue_part_admit(tenant text, resource text, part integer, c record, at_time timestamptz,
                                              transfer boolean)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    s forgeyard.flow_resource_state%ROWTYPE;
    v_refused boolean := false;
    g record;
BEGIN
    SELECT x.* INTO s FROM forgeyard.flow_resource_state x
     WHERE x.tenant_id = tenant AND x.resource = queue_part_admit.resource AND x.part = queue_part_admit.part::smallint;
    IF c.failure_rate IS NOT NULL THEN
        IF s.breaker = 'open' AND at_time >= coalesce(s.open_until, '-infinity') THEN
            s.breaker := 'half_open';
            s.changed_at := at_time;
            s.outcomes := '';
            s.half_open_in_flight := 0;
            s.half_open_successes := 0;
            s.transitions := s.transitions + 1;
        END IF;
        IF s.breaker = 'open' THEN
            v_refused := true;
        ELSIF s.breaker = 'half_open' AND s.half_open_in_flight + s.half_open_successes >= c.half_open_calls THEN
            v_refused := true;
        END IF;
    END IF;
    IF NOT v_refused AND c.max_in_flight IS NOT NULL AND NOT transfer AND s.in_flight >= c.max_in_flight THEN
        v_refused := true;
    END IF;
    IF NOT v_refused AND c.rate IS NOT NULL THEN
        g := forgeyard_pl.queue_gcra(c.rate, c.per_usecs, c.burst, s.tat, at_time, 1);
        IF g.taken = 0 THEN
            v_refused := true;
        ELSE
            s.tat := g.new_tat;
        END IF;
    END IF;
    IF NOT v_refused THEN
        IF NOT transfer THEN
            s.in_flight := s.in_flight + 1;
        END IF;
        IF c.failure_rate IS NOT NULL AND s.breaker = 'half_open' THEN
            s.half_open_in_flight := s.half_open_in_flight + 1;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_part_write(s);
    RETURN NOT v_refused;
END
$$;

-- queue::record_outcomes: how deliveries bound to resources ended (one entry per delivery: its
-- resource, messages.resource_part, and 0 success, 1 failure, 2 neutral), per resource in name
-- order and per part in order, never waiting for a part another transaction holds: the part the
-- delivery was counted in (one the resource no longer has: part 0) locked SKIP LOCKED, earlier
-- deltas folded in and the outcomes recorded; a part another transaction holds, or any under a
-- transaction snapshot, gets them as a row of flow_outcome_deltas instead. Resources not
-- configured are not counted. `q` is a forgeyard.queues row.
CREATE FUNCTION forgeyard_pl.queue_record_outcomes(q record, resources text[], parts integer[], outcomes integer[],
                                                   at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    own boolean := forgeyard_pl.queue_own_snapshot();
    g record;
    cfg forgeyard.flow_resources%ROWTYPE;
    share forgeyard.flow_resources%ROWTYPE;
    s forgeyard.flow_resource_state%ROWTYPE;
    j bigint;
BEGIN
    FOR g IN SELECT x.resource, CASE WHEN x.part < f.parts THEN x.part ELSE 0 END AS part,
                    count(*) FILTER (WHERE x.outcome = 0) AS successes,
                    count(*) FILTER (WHERE x.outcome = 1) AS failures,
                    count(*) FILTER (WHERE x.outcome = 2) AS neutrals
               FROM unnest(resources, parts, outcomes) x(resource, part, outcome)
               JOIN forgeyard.flow_resources f ON f.tenant_id = q.tenant_id AND f.resource = x.resource
              GROUP BY 1, 2 ORDER BY x.resource COLLATE "C", 2 LOOP
        IF own THEN
            IF EXISTS (SELECT FROM forgeyard.flow_resource_state x
                        WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint) THEN
                INSERT INTO forgeyard.flow_outcome_deltas (tenant_id, resource, part, successes, failures, neutrals, recorded_at)
                VALUES (q.tenant_id, g.resource, g.part, g.successes, g.failures, g.neutrals, at_time);
            END IF;
            CONTINUE;
        END IF;
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint
         FOR NO KEY UPDATE OF x SKIP LOCKED;
        IF NOT FOUND THEN
            IF EXISTS (SELECT FROM forgeyard.flow_resource_state x
                        WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint) THEN
                INSERT INTO forgeyard.flow_outcome_deltas (tenant_id, resource, part, successes, failures, neutrals, recorded_at)
                VALUES (q.tenant_id, g.resource, g.part, g.successes, g.failures, g.neutrals, at_time);
            END IF;
            CONTINUE;
        END IF;
        -- Held to commit: a claim of this transaction may wait only for parts after it.
        PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(q.tenant_id, g.resource, 'p', g.part));
        SELECT f.* INTO cfg FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id AND f.resource = g.resource;
        share := forgeyard_pl.queue_part_config(cfg, g.part);
        PERFORM forgeyard_pl.queue_part_fold(q.tenant_id, g.resource, g.part, cfg.parts, share, at_time);
        SELECT x.* INTO s FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint;
        FOR j IN 1 .. g.successes LOOP
            s := forgeyard_pl.queue_outcome(share, s, 0, at_time);
        END LOOP;
        FOR j IN 1 .. g.failures LOOP
            s := forgeyard_pl.queue_outcome(share, s, 1, at_time);
        END LOOP;
        FOR j IN 1 .. g.neutrals LOOP
            s := forgeyard_pl.queue_outcome(share, s, 2, at_time);
        END LOOP;
        PERFORM forgeyard_pl.queue_part_write(s);
    END LOOP;
END
$$;

-- One admission bucket of admit_rate, locked (waiting unless `skip`): tokens taken (up to n) and
-- the bucket's wait until its next token. o_found: whether it was locked.
CREATE FUNCTION forgeyard_pl.queue_bucket_take(q record, slot integer, skip boolean, n bigint, at_time timestamptz,
                                               OUT o_found boolean, OUT o_taken bigint, OUT o_wait bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    b record;
    g record;
    tau bigint;
BEGIN
    IF skip THEN
        SELECT x.tokens, x.per_usecs, x.tat INTO b FROM forgeyard.queue_admission x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot FOR UPDATE OF x SKIP LOCKED;
    ELSE
        SELECT x.tokens, x.per_usecs, x.tat INTO b FROM forgeyard.queue_admission x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot FOR UPDATE OF x;
    END IF;
    o_found := FOUND;
    o_taken := 0;
    o_wait := 0;
    IF NOT o_found THEN
        RETURN;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'd', slot));
    g := forgeyard_pl.queue_gcra(b.tokens, b.per_usecs, 0, b.tat, at_time, n);
    o_taken := g.taken;
    IF o_taken > 0 THEN
        UPDATE forgeyard.queue_admission x SET tat = g.new_tat
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot;
    END IF;
    IF g.new_tat IS NOT NULL THEN
        tau := (b.per_usecs + b.tokens - 1) / b.tokens * (b.tokens - 1);
        o_wait := greatest(0, forgeyard_pl.usecs(g.new_tat) - tau - forgeyard_pl.usecs(at_time));
    END IF;
END
$$;

-- core::flow::throw_admission_refused: FY020 whose DETAIL names the limit and ends in
-- "retry after <n> ms".
CREATE FUNCTION forgeyard_pl.queue_admission_refused(q record, wait_usecs bigint)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    per bigint := q.admission_per_usecs;
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.queue_full@',
        MESSAGE = format('queue "%s" is over its admission limit', q.queue),
        DETAIL = format('the queue admits %s messages per %s; retry after %s ms', q.admission_rate,
                        CASE WHEN per % 1000000 = 0 THEN (per / 1000000) || ' s'
                             WHEN per % 1000 = 0 THEN (per / 1000) || ' ms'
                             ELSE per || ' us' END,
                        (wait_usecs + 999) / 1000);
END
$$;

-- queue::admit_rate: takes `count` tokens of queue q's admission limit, if it has one (FY020 with a
-- retry-after otherwise). The buckets are tried from a bucket that moves with each call, each
-- locked SKIP LOCKED; only a producer that holds no bucket from this call waits, for one its
-- transaction may wait for, and is refused if there is none. Never admitted past the limit.
CREATE FUNCTION forgeyard_pl.queue_admit_rate(q record, n bigint, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    buckets integer;
    start integer;
    remaining bigint := n;
    wait bigint := 9223372036854775807;
    held boolean := false;
    skipped boolean := false;
    waited boolean := false;
    i integer;
    slot integer;
    t record;
BEGIN
    IF q.admission_rate IS NULL OR n <= 0 THEN
        RETURN;
    END IF;
    buckets := greatest(1, least(q.admission_rate, greatest(q.slots, 1)));
    start := forgeyard_pl.queue_rotate('admission', buckets);
    FOR i IN 0 .. buckets - 1 LOOP
        EXIT WHEN remaining <= 0;
        slot := (start + i) % buckets;
        t := forgeyard_pl.queue_bucket_take(q, slot, true, remaining, at_time);
        IF NOT t.o_found THEN
            skipped := true;
            CONTINUE;
        END IF;
        held := true;
        remaining := remaining - t.o_taken;
        IF remaining > 0 THEN
            wait := least(wait, t.o_wait);
        END IF;
    END LOOP;
    IF remaining > 0 AND NOT held AND skipped THEN
        -- Every bucket is held by others (or gone): the first from `start` that this transaction
        -- may wait for is waited for; with none, the producer is refused (one emission interval as
        -- its retry-after).
        FOR i IN 0 .. buckets - 1 LOOP
            slot := (start + i) % buckets;
            CONTINUE WHEN NOT forgeyard_pl.queue_held_may_wait(forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'd', slot));
            waited := true;
            t := forgeyard_pl.queue_bucket_take(q, slot, false, remaining, at_time);
            IF t.o_found THEN
                held := true;
                remaining := remaining - t.o_taken;
                IF remaining > 0 THEN
                    wait := least(wait, t.o_wait);
                END IF;
            END IF;
            EXIT;
        END LOOP;
        IF NOT waited THEN
            PERFORM forgeyard_pl.queue_admission_refused(q,
                (q.admission_per_usecs + q.admission_rate - 1) / q.admission_rate);
        END IF;
    END IF;
    -- (No bucket at all: the limit was removed meanwhile.)
    IF remaining > 0 AND held THEN
        PERFORM forgeyard_pl.queue_admission_refused(q, wait);
    END IF;
END
$$;

-- queue::admit_retry: whether a nack's retry fits queue q's retry budget (a budget set), and when
-- not, when it may run (the window's end). The window row is waited for only where this
-- transaction may wait for it; otherwise a window another transaction holds makes the retry wait
-- for that window's end (or one window from now), and no window at all admits it uncounted.
CREATE FUNCTION forgeyard_pl.queue_admit_retry(q record, at_time timestamptz,
                                               OUT admitted boolean, OUT not_before timestamptz)
    LANGUAGE plpgsql
    AS $$
DECLARE
    w_key text;
    w record;
    got boolean := false;
    w_start bigint := 0;
    w_base bigint := 0;
    w_prev bigint := 0;
    w_retries bigint := 0;
    w_delayed bigint := 0;
    peek timestamptz;
    window_end timestamptz;
    now_us bigint := forgeyard_pl.usecs(at_time);
    len bigint := q.retry_budget_window_usecs;
    admitted_now bigint;
    v_first bigint;
    adjacent boolean;
    remaining double precision;
    weighed double precision;
    budget bigint;
BEGIN
    admitted := true;
    not_before := NULL;
    IF q.retry_budget IS NULL THEN
        RETURN;
    END IF;
    w_key := forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'w', 0);
    IF NOT forgeyard_pl.queue_held_may_wait(w_key) THEN
        SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
          FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue
           FOR UPDATE OF x SKIP LOCKED;
        got := FOUND;
        IF NOT got THEN
            SELECT x.window_start INTO peek FROM forgeyard.queue_retry_windows x
             WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
            IF NOT FOUND THEN
                RETURN;  -- no window yet: nothing has been retried, well within any budget
            END IF;
            window_end := peek + forgeyard_pl.queue_usecs_interval(len);
            admitted := false;
            not_before := CASE WHEN window_end > at_time THEN window_end
                               ELSE at_time + forgeyard_pl.queue_usecs_interval(len) END;
            RETURN;
        END IF;
    ELSE
        SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
          FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue FOR UPDATE OF x;
        got := FOUND;
        IF NOT got THEN
            INSERT INTO forgeyard.queue_retry_windows (tenant_id, queue, window_start, admitted_base, prev_first, retries, delayed)
            VALUES (q.tenant_id, q.queue, at_time, 0, 0, 0, 0) ON CONFLICT DO NOTHING;
            SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
              FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue FOR UPDATE OF x;
            got := FOUND;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(w_key);
    IF got THEN
        w_start := forgeyard_pl.usecs(w.window_start);
        w_base := w.admitted_base;
        w_prev := w.prev_first;
        w_retries := w.retries;
        w_delayed := w.delayed;
    END IF;
    SELECT coalesce(sum(a.admitted_messages + COALESCE(g.admitted_messages, 0)), 0)::bigint INTO admitted_now
      FROM forgeyard.queue_slots a LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue;
    -- core::flow::admit_retry
    IF now_us >= w_start + len OR now_us < w_start THEN
        -- The last window's v_first deliveries carry over only into the window right after it.
        v_first := greatest(0, admitted_now - w_base);
        adjacent := now_us >= w_start AND now_us < w_start + 2 * len;
        w_start := CASE WHEN adjacent THEN w_start + len ELSE now_us END;
        w_base := admitted_now;
        w_prev := CASE WHEN adjacent THEN v_first ELSE 0 END;
        w_retries := 0;
        w_delayed := 0;
    END IF;
    remaining := 1.0::double precision - (now_us - w_start)::double precision / len::double precision;
    weighed := greatest(0, admitted_now - w_base)::double precision
               + w_prev::double precision * greatest(0.0::double precision, remaining);
    budget := greatest(q.retry_budget_min, trunc(q.retry_budget * weighed)::bigint);
    IF w_retries < budget THEN
        w_retries := w_retries + 1;
    ELSE
        w_delayed := w_delayed + 1;
        admitted := false;
        not_before := forgeyard_pl.queue_at(w_start + len);
    END IF;
    UPDATE forgeyard.queue_retry_windows x
       SET window_start = forgeyard_pl.queue_at(w_start), admitted_base = w_base, prev_first = w_prev,
           retries = w_retries, delayed = w_delayed
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
END
$$;

-- core::flow::integer of resource_limit's and breaker_configure's options: digits only (at most
-- 18), in min..max; 22023 naming the option otherwise.
CREATE FUNCTION forgeyard_pl.queue_flow_integer(what text, key text, value text, min bigint, max bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v bigint;
BEGIN
    IF value ~ '^[0-9]{1,18}$' THEN
        v := value::bigint;
        IF v >= min AND v <= max THEN
            RETURN v;
        END IF;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = format('%s option %s must be an integer between %s and %s', what, key, min, max);
END
$$;

-- pg::parse_interval for an option: 22023 "<argument> must be an interval" for text that is not one.
CREATE FUNCTION forgeyard_pl.queue_interval_option(argument text, value text)
    RETURNS interval LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN value::interval;
EXCEPTION WHEN data_exception THEN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' must be an interval',
        DETAIL = format('got "%s"', value);
END
$$;

-- ensure_resource: the resource's configuration row (made if missing).
CREATE FUNCTION forgeyard_pl.queue_ensure_resource(tenant text, resource text, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO forgeyard.flow_resources (tenant_id, resource, updated_at)
    VALUES (tenant, queue_ensure_resource.resource, at_time)
    ON CONFLICT ON CONSTRAINT flow_resources_pkey DO UPDATE SET updated_at = excluded.updated_at;
END
$$;

-- drop_if_empty: a resource with neither limits nor a breaker is forgotten, its state too.
CREATE FUNCTION forgeyard_pl.queue_drop_resource_if_empty(tenant text, resource text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    WITH d AS (DELETE FROM forgeyard.flow_resources x
                WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource
                  AND x.rate IS NULL AND x.max_in_flight IS NULL AND x.failure_rate IS NULL RETURNING 1)
    DELETE FROM forgeyard.flow_resource_state x
     WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource AND EXISTS (SELECT 1 FROM d);
    DELETE FROM forgeyard.flow_outcome_deltas x
     WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource
       AND NOT EXISTS (SELECT 1 FROM forgeyard.flow_resources r
                        WHERE r.tenant_id = tenant AND r.resource = queue_drop_resource_if_empty.resource);
END
$$;

-- settle_parts: after the limits or the breaker changed, the parts the state is split into
-- (core::flow::resource_parts), each made if missing; the parts no longer kept merged into part 0
-- (what they count in flight and refused), where their deliveries' acks will find it.
CREATE FUNCTION forgeyard_pl.queue_settle_parts(tenant text, resource text, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
    n_parts integer;
    smallest bigint;
BEGIN
    SELECT x.rate, x.per_usecs, x.burst, x.max_in_flight, x.failure_rate IS NOT NULL AS breaker INTO c
      FROM forgeyard.flow_resources x WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource;
    IF NOT FOUND THEN
        RETURN;  -- dropped: drop_if_empty removed its state too
    END IF;
    IF c.breaker OR (c.rate IS NULL AND c.max_in_flight IS NULL) THEN
        n_parts := 1;
    ELSE
        smallest := 9223372036854775807;
        IF c.max_in_flight IS NOT NULL THEN
            smallest := least(smallest, c.max_in_flight);
        END IF;
        IF c.rate IS NOT NULL THEN
            smallest := least(smallest, c.rate, CASE WHEN c.burst > 0 THEN c.burst ELSE c.rate END);
        END IF;
        n_parts := greatest(1, least(8, smallest / 16));
    END IF;
    UPDATE forgeyard.flow_resources x SET parts = n_parts::smallint
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.parts <> n_parts::smallint;
    INSERT INTO forgeyard.flow_resource_state (tenant_id, resource, part, changed_at)
    SELECT tenant, queue_settle_parts.resource, p::smallint, at_time FROM generate_series(0, n_parts - 1) p
    ON CONFLICT ON CONSTRAINT flow_resource_state_pkey DO NOTHING;
    WITH d AS (DELETE FROM forgeyard.flow_resource_state x
                WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part >= n_parts
                RETURNING x.in_flight, x.refused)
    UPDATE forgeyard.flow_resource_state x
       SET in_flight = x.in_flight + (SELECT sum(d.in_flight) FROM d)::bigint,
           refused = x.refused + (SELECT sum(d.refused) FROM d)::bigint
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part = 0 AND EXISTS (SELECT 1 FROM d);
    UPDATE forgeyard.flow_outcome_deltas x SET part = 0
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part >= n_parts::smallint;
END
$$;

-- pg::jsonb_option_pairs: the members of an options object as (key, text of the value; 'null' for
-- a JSON null), in jsonb's order; 22023 for anything but an object.
CREATE FUNCTION forgeyard_pl.queue_option_pairs(options jsonb)
    RETURNS TABLE (o_key text, o_value text) LANGUAGE plpgsql
    AS $$
BEGIN
    IF jsonb_typeof(options) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
    END IF;
    RETURN QUERY SELECT x.key, coalesce(x.value #>> '{}', 'null') FROM jsonb_each(options) x;
END
$$;

-- @body fy_admission_limit
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_per bigint;
    buckets integer;
    s integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF rate IS NOT NULL THEN
        IF per IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'per must not be NULL';
        END IF;
        IF rate < 1 OR rate > 1000000000 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'rate must be between 1 and 1000000000', DETAIL = 'got ' || rate;
        END IF;
        v_per := forgeyard_pl.duration_arg('per', per, 2592000000000);
    END IF;
    UPDATE forgeyard.queues x SET admission_rate = rate, admission_per_usecs = v_per
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
    DELETE FROM forgeyard.queue_admission x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
    IF rate IS NOT NULL THEN
        buckets := greatest(1, least(rate, greatest(q.slots, 1)));
        FOR s IN 0 .. buckets - 1 LOOP
            INSERT INTO forgeyard.queue_admission (tenant_id, queue, slot, tokens, per_usecs)
            VALUES (q.tenant_id, q.queue, s, rate / buckets + CASE WHEN s < rate % buckets THEN 1 ELSE 0 END,
                    v_per);
        END LOOP;
    END IF;
END

-- @body fy_fairness_weight
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_key text;
    v_weight integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_key := forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    v_weight := coalesce(weight, 1);
    IF v_weight < 1 OR v_weight > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'weight must be between 1 and 1000';
    END IF;
    IF NOT q.fairness THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = format('queue "%s" is not fair', q.queue),
            DETAIL = 'set its option fairness first: forgeyard.queue_alter(tenant, queue, ''{"fairness": true}'')';
    END IF;
    INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, weight)
    VALUES (q.tenant_id, q.queue, v_key, v_weight)
    ON CONFLICT ON CONSTRAINT queue_fair_keys_pkey DO UPDATE SET weight = excluded.weight;
END

-- @body fy_resource_limit
DECLARE
    v_resource text;
    e record;
    has_rate boolean := false;
    v_rate bigint := 0;
    v_per bigint := 1000000;
    v_burst bigint := 0;
    v_max bigint;
    v_now timestamptz;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    PERFORM forgeyard_pl.not_null('options', options IS NOT NULL);
    FOR e IN SELECT x.o_key, x.o_value FROM forgeyard_pl.queue_option_pairs(options) x LOOP
        CASE e.o_key
            WHEN 'per' THEN
                has_rate := true;
                v_per := forgeyard_pl.duration_arg('resource option per',
                    forgeyard_pl.queue_interval_option('resource option per', e.o_value), 2592000000000);
            WHEN 'rate' THEN
                has_rate := true;
                v_rate := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            WHEN 'burst' THEN
                has_rate := true;
                v_burst := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            WHEN 'max_in_flight' THEN
                v_max := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            ELSE
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = format('resource option %s is unknown', e.o_key);
        END CASE;
    END LOOP;
    IF has_rate AND v_rate = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'resource option rate is required with per or burst';
    END IF;
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_ensure_resource(tenant, v_resource, v_now);
    UPDATE forgeyard.flow_resources x
       SET rate = CASE WHEN has_rate THEN v_rate END, per_usecs = CASE WHEN has_rate THEN v_per END,
           burst = CASE WHEN has_rate THEN CASE WHEN v_burst > 0 THEN v_burst ELSE v_rate END END, max_in_flight = v_max
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    PERFORM forgeyard_pl.queue_drop_resource_if_empty(tenant, v_resource);
    PERFORM forgeyard_pl.queue_settle_parts(tenant, v_resource, forgeyard.now());
END

-- @body fy_breaker_configure
DECLARE
    v_resource text;
    e record;
    v_rate double precision := 0.5;
    v_minimum bigint := 10;
    v_window bigint := 100;
    v_open bigint := 30000000;
    v_half bigint := 1;
    v_now timestamptz;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    IF options IS NOT NULL THEN
        FOR e IN SELECT x.o_key, x.o_value FROM forgeyard_pl.queue_option_pairs(options) x LOOP
            CASE e.o_key
                WHEN 'open_for' THEN
                    v_open := forgeyard_pl.duration_arg('breaker option open_for',
                        forgeyard_pl.queue_interval_option('breaker option open_for', e.o_value), 2592000000000);
                WHEN 'failure_rate' THEN
                    -- strtod's number (no trailing characters), above 0 and at most 1
                    BEGIN
                        IF e.o_value = '' OR e.o_value ~ '\s$' THEN
                            RAISE EXCEPTION USING ERRCODE = '22P02';
                        END IF;
                        v_rate := e.o_value::double precision;
                    EXCEPTION WHEN data_exception THEN
                        v_rate := -1;
                    END;
                    IF NOT (v_rate > 0) OR v_rate > 1 THEN
                        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                            MESSAGE = format('breaker option %s must be a number above 0 and at most 1', e.o_key);
                    END IF;
                WHEN 'minimum_calls' THEN
                    v_minimum := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                WHEN 'window' THEN
                    v_window := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                WHEN 'half_open_calls' THEN
                    v_half := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                ELSE
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = format('breaker option %s is unknown', e.o_key);
            END CASE;
        END LOOP;
        IF v_minimum > v_window THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'breaker option minimum_calls must not exceed window';
        END IF;
    END IF;
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_ensure_resource(tenant, v_resource, v_now);
    UPDATE forgeyard.flow_resources x
       SET failure_rate = CASE WHEN options IS NOT NULL THEN v_rate END,
           minimum_calls = CASE WHEN options IS NOT NULL THEN v_minimum END,
           window_calls = CASE WHEN options IS NOT NULL THEN v_window END,
           open_for_usecs = CASE WHEN options IS NOT NULL THEN v_open END,
           half_open_calls = CASE WHEN options IS NOT NULL THEN v_half END
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    UPDATE forgeyard.flow_resource_state x
       SET breaker = 'closed', outcomes = '', open_until = NULL, half_open_in_flight = 0, half_open_successes = 0,
           changed_at = v_now
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    PERFORM forgeyard_pl.queue_drop_resource_if_empty(tenant, v_resource);
    PERFORM forgeyard_pl.queue_settle_parts(tenant, v_resource, v_now);
END

-- @body fy_breaker_state
DECLARE
    v_resource text;
    b record;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    SELECT s.breaker, s.outcomes, s.changed_at AS changed, s.open_until <= forgeyard.now() AS lapsed INTO b
      FROM forgeyard.flow_resources c JOIN forgeyard.flow_resource_state s
        ON s.tenant_id = c.tenant_id AND s.resource = c.resource
     WHERE c.tenant_id = tenant AND c.resource = v_resource AND c.failure_rate IS NOT NULL AND s.part = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@',
            MESSAGE = format('resource "%s" has no breaker for tenant "%s"', v_resource, tenant);
    END IF;
    -- An open breaker whose time ran out lets the next claim through: it reads half_open.
    state := CASE WHEN b.breaker = 'open' AND coalesce(b.lapsed, false) THEN 'half_open' ELSE b.breaker END;
    failures := length(b.outcomes) - length(replace(b.outcomes, '1', ''));
    calls := length(b.outcomes);
    changed_at := b.changed;
    RETURN NEXT;
END
