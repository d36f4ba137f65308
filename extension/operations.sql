-- The PL/pgSQL edition's twin of extension/operations.cpp: forgeyard.storage_stats(tenant).

-- @statement storage_stats
-- The one statement of forgeyard.storage_stats() in both editions ($1 = the tenant or NULL, $2 =
-- forgeyard.now()): extension/operations.cpp runs it through SPI, the body below with EXECUTE.
WITH queues AS (
    SELECT q.tenant_id, q.queue, q.max_messages, st.*,
           (SELECT pg_catalog.count(*) FROM forgeyard.messages m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND m.queue OPERATOR(pg_catalog.=) q.queue
               AND m.state OPERATOR(pg_catalog.=) 'pending'
               AND (m.attempt OPERATOR(pg_catalog.>) 1
                    OR (m.attempt OPERATOR(pg_catalog.=) 1
                        AND (m.claim_token IS NULL OR m.visible_at OPERATOR(pg_catalog.<=) $2)))) AS retrying,
           (SELECT pg_catalog.count(*) FROM forgeyard.messages m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND m.queue OPERATOR(pg_catalog.=) q.queue
               AND m.state OPERATOR(pg_catalog.=) 'dead'
               AND m.finished_at OPERATOR(pg_catalog.>) ($2 OPERATOR(pg_catalog.-) interval '1 hour')) AS dead_last_hour
      FROM forgeyard.queues q, LATERAL forgeyard.queue_stats(q.tenant_id, q.queue) st
     WHERE $1::pg_catalog.text IS NULL OR q.tenant_id OPERATOR(pg_catalog.=) $1
), tenants AS (
    SELECT t.tenant_id FROM (
        SELECT l.tenant_id FROM forgeyard.leases l UNION SELECT k.tenant_id FROM forgeyard.idempotency_keys k
        UNION SELECT h.tenant_id FROM forgeyard.audit_heads h) t
     WHERE $1::pg_catalog.text IS NULL OR t.tenant_id OPERATOR(pg_catalog.=) $1
), everything AS (
    SELECT $1::pg_catalog.text IS NULL AS yes
), segments AS (
    -- The ready lanes' segments (0.13.0) and the capacity counts' (0.14.0), found by name, so that
    -- an older catalog has none: whether each is the open one (the lanes': the sequence's; the
    -- counts': that of the current ten-second period), and whether it has pages.
    SELECT CASE WHEN c.relname OPERATOR(pg_catalog.~) '^queue_lane_entries_' THEN 'lane_segment'
                ELSE 'usage_segment' END AS kind,
           c.oid, c.relname::pg_catalog.text AS relname,
           CASE WHEN c.relname OPERATOR(pg_catalog.~) '^queue_lane_entries_'
                THEN c.relname OPERATOR(pg_catalog.=) ('queue_lane_entries_' OPERATOR(pg_catalog.||)
                       (coalesce(pg_catalog.pg_sequence_last_value(pg_catalog.to_regclass('forgeyard.queue_lane_segment')), 0)
                        OPERATOR(pg_catalog.%) 4))
                ELSE pg_catalog.right(c.relname, 1) OPERATOR(pg_catalog.=)
                       (pg_catalog.abs(pg_catalog.trunc(pg_catalog.date_part('epoch', $2) OPERATOR(pg_catalog./) 10)::pg_catalog.int8
                         OPERATOR(pg_catalog.%) 4)::pg_catalog.text) END AS open,
           pg_catalog.pg_relation_size(c.oid) OPERATOR(pg_catalog.>) 0 AS has_rows
      FROM pg_catalog.pg_class c, everything e
     WHERE e.yes AND c.relnamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace
       AND c.relkind OPERATOR(pg_catalog.=) 'r'
       AND c.relname OPERATOR(pg_catalog.~) '^(queue_lane_entries|queue_release_deltas|queue_admit_deltas)_[0-3]$'
)
SELECT 'database', NULL::pg_catalog.text, pg_catalog.current_database()::pg_catalog.text, 'bytes',
       pg_catalog.pg_database_size(pg_catalog.current_database())
  FROM everything WHERE everything.yes
UNION ALL
SELECT 'table', NULL, t.relname, v.state, v.value
  FROM everything e,
       (SELECT cl.relname::pg_catalog.text AS relname, s.n_live_tup, s.n_dead_tup,
               pg_catalog.pg_total_relation_size(cl.oid) AS bytes,
               CASE WHEN 'autovacuum_enabled=false' OPERATOR(pg_catalog.=) ANY (coalesce(cl.reloptions, '{}'))
                    THEN 0 ELSE 1 END AS autovacuum
          FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) cl.oid
         WHERE cl.relnamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace
           AND cl.relkind OPERATOR(pg_catalog.=) 'r') t,
       LATERAL (VALUES ('rows', t.n_live_tup), ('dead_rows', t.n_dead_tup), ('bytes', t.bytes),
                       ('autovacuum', t.autovacuum::pg_catalog.int8)) v(state, value)
 WHERE e.yes
UNION ALL
SELECT 'server', NULL, NULL, 'autovacuum',
       CASE WHEN pg_catalog.current_setting('autovacuum')::pg_catalog.bool THEN 1 ELSE 0 END
  FROM everything WHERE everything.yes
UNION ALL
(SELECT 'server', NULL, 'pid ' OPERATOR(pg_catalog.||) a.pid OPERATOR(pg_catalog.||) ' ('
                        OPERATOR(pg_catalog.||) coalesce(a.usename::pg_catalog.text, '?') OPERATOR(pg_catalog.||) ', '
                        OPERATOR(pg_catalog.||) coalesce(a.state, '?') OPERATOR(pg_catalog.||) ')',
        'oldest_transaction_usecs',
        (EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start)
         OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8
   FROM pg_catalog.pg_stat_activity a, everything e
  WHERE e.yes AND a.xact_start IS NOT NULL AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
  ORDER BY a.xact_start LIMIT 1)
UNION ALL
SELECT 'server', NULL, s.slot_name::pg_catalog.text, 'slot_xmin_age',
       GREATEST(pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin))::pg_catalog.int8
  FROM pg_catalog.pg_replication_slots s, everything e
 WHERE e.yes AND (s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL)
UNION ALL
-- The oldest holder of this database's xmin horizon, of any kind: what keeps VACUUM from removing
-- any row version of forgeyard's tables that died after it (its age in transactions, and how long
-- it has held it where known); state 'none' when nothing holds it. Since PostgreSQL 14 a session
-- or prepared transaction of another database does not hold this one's tables; a physical slot
-- and a standby's feedback hold every database's; a slot's catalog_xmin holds catalogs only.
-- backend_type and state are hidden from a role without pg_read_all_stats for other roles'
-- sessions (the PL/pgSQL edition's owner): walsenders are left out by name, NULL passes.
SELECT 'horizon', NULL, h.who, v.state, v.value
  FROM everything e
       LEFT JOIN LATERAL
       (SELECT 'transaction' AS holder,
               'pid ' OPERATOR(pg_catalog.||) a.pid OPERATOR(pg_catalog.||) ' ('
                 OPERATOR(pg_catalog.||) coalesce(a.usename::pg_catalog.text, '?') OPERATOR(pg_catalog.||) ', '
                 OPERATOR(pg_catalog.||) coalesce(NULLIF(a.application_name, ''), '?') OPERATOR(pg_catalog.||) ', '
                 OPERATOR(pg_catalog.||) coalesce(a.state, '?') OPERATOR(pg_catalog.||) ')' AS who,
               GREATEST(pg_catalog.age(a.backend_xmin), pg_catalog.age(a.backend_xid))::pg_catalog.int8 AS xids,
               (EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start)
                OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8 AS usecs
          FROM pg_catalog.pg_stat_activity a
         WHERE coalesce(a.backend_type, '') OPERATOR(pg_catalog.<>) 'walsender'
           AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
           AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
           AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
        UNION ALL
        SELECT 'prepared',
               'gid ' OPERATOR(pg_catalog.||) p.gid OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) p.owner::pg_catalog.text
                 OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) p.database::pg_catalog.text OPERATOR(pg_catalog.||) ')',
               pg_catalog.age(p.transaction)::pg_catalog.int8,
               (EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p.prepared)
                OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8
          FROM pg_catalog.pg_prepared_xacts p
         WHERE p.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
        UNION ALL
        SELECT 'replication_slot', s.slot_name::pg_catalog.text, pg_catalog.age(s.xmin)::pg_catalog.int8, NULL
          FROM pg_catalog.pg_replication_slots s
         WHERE s.xmin IS NOT NULL
        UNION ALL
        SELECT 'standby', coalesce(NULLIF(r.application_name, ''), '?') OPERATOR(pg_catalog.||) ' (walsender pid '
                 OPERATOR(pg_catalog.||) r.pid OPERATOR(pg_catalog.||) ')',
               pg_catalog.age(r.backend_xmin)::pg_catalog.int8, NULL
          FROM pg_catalog.pg_stat_replication r
         WHERE r.backend_xmin IS NOT NULL
        ORDER BY xids DESC, usecs DESC NULLS LAST LIMIT 1) h ON true,
       LATERAL (VALUES (coalesce(h.holder, 'none'), coalesce(h.xids, 0)),
                       (h.holder OPERATOR(pg_catalog.||) '_usecs', h.usecs)) v(state, value)
 WHERE e.yes AND v.state IS NOT NULL AND v.value IS NOT NULL
UNION ALL
-- The segments (above), kind lane_segment or usage_segment: each one 'open' (written now) or
-- 'sealed', with 1 when it has pages (rows, or what was deleted from it) and 0 when it was
-- truncated; and per sealed segment with pages, the oldest transaction that holds a lock on it:
-- maintain() cannot truncate it before that transaction ends (name: the segment, then the holder
-- as the horizon's; how long it has been open, -1 where a role without pg_read_all_stats cannot
-- see it).
SELECT s.kind, NULL, s.relname, CASE WHEN s.open THEN 'open' ELSE 'sealed' END,
       CASE WHEN s.has_rows THEN 1 ELSE 0 END::pg_catalog.int8
  FROM segments s
UNION ALL
(SELECT DISTINCT ON (s.relname) s.kind, NULL,
        s.relname OPERATOR(pg_catalog.||) ' pid ' OPERATOR(pg_catalog.||) a.pid OPERATOR(pg_catalog.||) ' ('
          OPERATOR(pg_catalog.||) coalesce(a.usename::pg_catalog.text, '?') OPERATOR(pg_catalog.||) ', '
          OPERATOR(pg_catalog.||) coalesce(NULLIF(a.application_name, ''), '?') OPERATOR(pg_catalog.||) ', '
          OPERATOR(pg_catalog.||) coalesce(a.state, '?') OPERATOR(pg_catalog.||) ')',
        'pinned_usecs',
        coalesce((EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start)
                  OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8, -1)
   FROM segments s
        JOIN pg_catalog.pg_locks l ON l.relation OPERATOR(pg_catalog.=) s.oid AND l.granted
        JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
  WHERE NOT s.open AND s.has_rows AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  ORDER BY s.relname, a.xact_start NULLS LAST)
UNION ALL
SELECT 'queue', q.tenant_id, q.queue, v.state, v.value
  FROM queues q,
       LATERAL (VALUES ('ready', q.ready), ('in_flight', q.in_flight), ('delayed', q.delayed), ('dead', q.dead),
                       ('bytes', q.bytes), ('max_messages', q.max_messages), ('retrying', q.retrying),
                       ('dead_last_hour', q.dead_last_hour),
                       ('oldest_ready_age_usecs',
                        (EXTRACT(epoch FROM q.oldest_ready_age) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8),
                       ('pressure', CASE q.pressure WHEN 'normal' THEN 0 WHEN 'elevated' THEN 1 ELSE 2 END::pg_catalog.int8),
                       -- Read by name: a catalog before 0.7.0's update has no such columns (NULL, no row).
                       ('waiting', (pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.->>) 'waiting')::pg_catalog.int8),
                       ('retries_delayed',
                        (pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.->>) 'retries_delayed')::pg_catalog.int8))
           v(state, value)
 WHERE v.value IS NOT NULL
UNION ALL
SELECT 'leases', t.tenant_id, NULL, v.state, v.value
  FROM tenants t,
       LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) $2) AS live,
                       pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.<=) $2) AS expired
                  FROM forgeyard.leases l
                 WHERE l.tenant_id OPERATOR(pg_catalog.=) t.tenant_id AND l.released_at IS NULL
                   AND l.reaped_at IS NULL) n,
       LATERAL (VALUES ('live', n.live), ('expired', n.expired)) v(state, value)
UNION ALL
SELECT 'idempotency', t.tenant_id, NULL, v.state, v.value
  FROM tenants t,
       LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE k.status OPERATOR(pg_catalog.=) 'in_progress') AS in_progress,
                       pg_catalog.count(*) FILTER (WHERE k.status OPERATOR(pg_catalog.=) 'completed') AS completed,
                       pg_catalog.count(*) FILTER (WHERE k.expires_at OPERATOR(pg_catalog.<=) $2
                           AND (k.status OPERATOR(pg_catalog.=) 'completed'
                                OR k.locked_until OPERATOR(pg_catalog.<=) $2)) AS past_retention
                  FROM forgeyard.idempotency_keys k WHERE k.tenant_id OPERATOR(pg_catalog.=) t.tenant_id) n,
       LATERAL (VALUES ('in_progress', n.in_progress), ('completed', n.completed),
                       ('past_retention', n.past_retention)) v(state, value)
UNION ALL
SELECT 'workflow', r.tenant_id, r.workflow OPERATOR(pg_catalog.||) '@' OPERATOR(pg_catalog.||) r.version::pg_catalog.text,
       r.state, pg_catalog.count(*)
  FROM forgeyard.wf_runs r
 WHERE $1::pg_catalog.text IS NULL OR r.tenant_id OPERATOR(pg_catalog.=) $1
 GROUP BY r.tenant_id, r.workflow, r.version, r.state
UNION ALL
SELECT 'audit', t.tenant_id, NULL, 'events', coalesce(h.seq, 0)
  FROM tenants t LEFT JOIN forgeyard.audit_heads h ON h.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
UNION ALL
SELECT 'security', NULL,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
            ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
       'table_privilege', pg_catalog.count(*)
  FROM pg_catalog.pg_class cl, pg_catalog.aclexplode(cl.relacl) a, everything e
 WHERE e.yes AND cl.relnamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace
   AND cl.relkind IN ('r', 'p') AND a.grantee OPERATOR(pg_catalog.<>) cl.relowner
   AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.oid OPERATOR(pg_catalog.=) a.grantee AND r.rolsuper)
 GROUP BY a.grantee
UNION ALL
SELECT 'security', NULL, a.role_id::pg_catalog.text, 'unbound_usage', 1
  FROM forgeyard.role_access a, everything e
 WHERE e.yes AND a.access OPERATOR(pg_catalog.=) 'usage'
   AND EXISTS (SELECT 1 FROM forgeyard.tenant_bindings)
   AND NOT EXISTS (SELECT 1 FROM forgeyard.role_access m
                    WHERE m.role_id OPERATOR(pg_catalog.=) a.role_id AND m.access OPERATOR(pg_catalog.=) 'maintenance')
   AND NOT EXISTS (SELECT 1 FROM forgeyard.tenant_bindings b
                    WHERE pg_catalog.pg_has_role(a.role_id::pg_catalog.oid, b.role_id::pg_catalog.oid, 'MEMBER'))
UNION ALL
SELECT 'security', NULL, p.oid::pg_catalog.regprocedure::pg_catalog.text, 'definer_without_search_path', 1
  FROM pg_catalog.pg_proc p, everything e
 WHERE e.yes AND p.pronamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace AND p.prosecdef
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) s(setting)
                    WHERE pg_catalog.starts_with(s.setting, 'search_path='))
UNION ALL
SELECT 'security', NULL,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
            ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
       'schema_create', 1
  FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a, everything e
 WHERE e.yes AND n.nspname OPERATOR(pg_catalog.=) 'forgeyard' AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
   AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner

-- @body fy_storage_stats
DECLARE
    tenant_arg text := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    clock timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(tenant_arg);
    RETURN QUERY EXECUTE @statement.storage_stats@ USING tenant_arg, clock;
END
