-- The PL/pgSQL edition of extension/maintain.cpp: forgeyard.maintain(), every clean-up step,
-- bounded, safe from several places at once (SKIP LOCKED), and the runs of due workflow schedules.

-- @body fy_maintain
-- One bounded pass of every clean-up, and the runs of due workflow schedules started. Leases are
-- not reaped here: lease_reap hands each expired grant to its reconciler once.
DECLARE
    v_now timestamptz;
    n_keys bigint;
    n_events bigint;
    n_acked bigint;
    n_dead bigint;
    n_inbox bigint;
    n_runs bigint;
    n_schedules bigint;
    n_deltas bigint := 0;
    n_lanes bigint;
    n_segments bigint;
    n_admit bigint;
    n_usage bigint;
    g bigint;
BEGIN
    PERFORM forgeyard_pl.not_null('max_rows', max_rows IS NOT NULL);
    IF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'max_rows must be positive';
    END IF;
    PERFORM forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(tenant);
    -- the ready lanes first, before anything here writes (queue_lanes_maintain)
    n_lanes := forgeyard.queue_lanes_maintain(max_rows, tenant);
    -- idempotency keys whose retention ended (as idem_purge)
    DELETE FROM forgeyard.idempotency_keys i USING (
        SELECT e.tenant_id, e.scope, e.key FROM forgeyard.idempotency_keys e
         WHERE e.expires_at <= v_now AND (e.status = 'completed' OR e.locked_until <= v_now)
           AND (tenant IS NULL OR e.tenant_id = tenant)
         ORDER BY e.expires_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE i.tenant_id = d.tenant_id AND i.scope = d.scope AND i.key = d.key;
    GET DIAGNOSTICS n_keys = ROW_COUNT;
    -- queue dedup events past their window
    DELETE FROM forgeyard.queue_events v USING (
        SELECT e.tenant_id, e.queue, e.event_id FROM forgeyard.queue_events e
         WHERE e.expires_at <= v_now AND (tenant IS NULL OR e.tenant_id = tenant)
         ORDER BY e.expires_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE v.tenant_id = d.tenant_id AND v.queue = d.queue AND v.event_id = d.event_id;
    GET DIAGNOSTICS n_events = ROW_COUNT;
    -- acked messages kept for retain_acked, past it
    DELETE FROM forgeyard.messages m USING (
        SELECT a.msg_id FROM forgeyard.messages a JOIN forgeyard.queues x
            ON x.tenant_id = a.tenant_id AND x.queue = a.queue
         WHERE a.state = 'acked' AND a.finished_at <= (v_now - (x.retain_acked_usecs * '1 microsecond'::interval))
           AND (tenant IS NULL OR a.tenant_id = tenant)
         LIMIT max_rows FOR UPDATE OF a SKIP LOCKED) d
     WHERE m.msg_id = d.msg_id;
    GET DIAGNOSTICS n_acked = ROW_COUNT;
    -- dead letters past their retention, and the oldest beyond each queue's max_dead
    DELETE FROM forgeyard.messages m USING (
        SELECT y.msg_id FROM (
            SELECT a.msg_id, a.finished_at, x.dead_retention_usecs, x.max_dead,
                   row_number() OVER (PARTITION BY a.tenant_id, a.queue ORDER BY a.msg_id DESC) AS newest
              FROM forgeyard.messages a JOIN forgeyard.queues x ON x.tenant_id = a.tenant_id AND x.queue = a.queue
             WHERE a.state = 'dead' AND (tenant IS NULL OR a.tenant_id = tenant)) y
         WHERE y.newest > y.max_dead
            OR y.finished_at <= (v_now - (y.dead_retention_usecs * '1 microsecond'::interval))
         LIMIT max_rows) d
     WHERE m.msg_id = d.msg_id AND m.state = 'dead';
    GET DIAGNOSTICS n_dead = ROW_COUNT;
    -- inbox entries older than 7 days
    n_inbox := forgeyard_pl.queue_purge_inbox(v_now - interval '168 hours', max_rows, tenant);
    -- finished workflow runs past their retention, with their journals, signals and cursors
    WITH d AS (
        SELECT r.tenant_id, r.run_id FROM forgeyard.wf_runs r
         WHERE r.purge_at <= v_now AND (tenant IS NULL OR r.tenant_id = tenant)
         ORDER BY r.purge_at LIMIT max_rows FOR UPDATE SKIP LOCKED),
     j AS (DELETE FROM forgeyard.wf_journal x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id),
     s AS (DELETE FROM forgeyard.wf_signals x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id),
     c AS (DELETE FROM forgeyard.wf_cursors x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id)
    DELETE FROM forgeyard.wf_runs x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id;
    GET DIAGNOSTICS n_runs = ROW_COUNT;
    -- the runs of the due workflow schedules started (schedule::tick, extension/schedule.sql)
    n_schedules := forgeyard_pl.workflow_schedule_tick(tenant, v_now);
    -- release deltas of the generations before this one
    -- folded into their release rows (not under a transaction snapshot, where a row changed since
    -- would be 40001): up to max_rows release rows that have such deltas, each locked SKIP LOCKED
    -- (a row an ack holds is left to it), its deltas locked SKIP LOCKED (an ack may be adding to
    -- one), deleted and added to it
    IF NOT forgeyard_pl.queue_own_snapshot() THEN
        g := forgeyard_pl.usecs(v_now) / 100000;
        WITH r AS (SELECT x.tenant_id, x.queue, x.slot FROM forgeyard.queue_releases x
                    WHERE (tenant IS NULL OR x.tenant_id = tenant)
                      AND EXISTS (SELECT 1 FROM forgeyard.queue_release_deltas y
                                   WHERE y.tenant_id = x.tenant_id AND y.queue = x.queue AND y.slot = x.slot
                                     AND y.gen < g)
                    LIMIT max_rows FOR NO KEY UPDATE SKIP LOCKED),
             l AS (SELECT z.tableoid AS rel, z.ctid AS tid FROM forgeyard.queue_release_deltas z JOIN r
                           ON z.tenant_id = r.tenant_id AND z.queue = r.queue AND z.slot = r.slot
                        WHERE z.gen < g FOR UPDATE OF z SKIP LOCKED),
             d AS (DELETE FROM forgeyard.queue_release_deltas y USING l
                    WHERE y.tableoid = l.rel AND y.ctid = l.tid
                   RETURNING y.tenant_id, y.queue, y.slot, y.released_messages, y.released_bytes),
             s AS (SELECT d.tenant_id, d.queue, d.slot, sum(d.released_messages)::bigint AS m,
                          sum(d.released_bytes)::bigint AS b, count(*) AS n
                     FROM d GROUP BY d.tenant_id, d.queue, d.slot),
             u AS (UPDATE forgeyard.queue_releases x
                      SET released_messages = x.released_messages + s.m, released_bytes = x.released_bytes + s.b
                     FROM s WHERE x.tenant_id = s.tenant_id AND x.queue = s.queue AND x.slot = s.slot)
        SELECT COALESCE(sum(s.n), 0)::bigint INTO n_deltas FROM s;
    END IF;
    -- admission rows of past generations folded into their slots (queue_admit_fold)
    n_admit := forgeyard.queue_admit_fold(max_rows, tenant);
    -- the segments last: the lock of one truncated is held only to the commit
    -- (queue_lane_segments_maintain, queue_usage_segments_maintain)
    n_segments := forgeyard.queue_lane_segments_maintain();
    n_usage := forgeyard.queue_usage_segments_maintain();
    RETURN QUERY VALUES ('idempotency_keys'::text, n_keys), ('queue_events', n_events), ('acked_messages', n_acked),
                        ('dead_letters', n_dead), ('inbox', n_inbox), ('workflow_runs', n_runs),
                        ('schedules', n_schedules), ('release_deltas', n_deltas), ('queue_lanes', n_lanes),
                        ('admit_deltas', n_admit), ('lane_segments', n_segments), ('usage_segments', n_usage);
END
