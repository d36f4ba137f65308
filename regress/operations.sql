-- Operations figures (docs/sql-api.md#operations): forgeyard.storage_stats(tenant) counts queue
-- depth by state, leases, idempotency keys and audit events by forgeyard.now(); shows table and
-- database sizes and the security findings to unbound callers only; a bound role must name its
-- tenant (FY040); who may call it; bad input. Time is moved with forgeyard.now_override.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(44);

\ir lib/err.sql

-- value of one figure (NULL when there is no such row)
CREATE FUNCTION pg_temp.fig(k text, t text, n text, s text, tenant text DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
    SELECT x.value FROM forgeyard.storage_stats(tenant) x
     WHERE x.kind = k AND x.tenant_id IS NOT DISTINCT FROM t AND x.name IS NOT DISTINCT FROM n AND x.state = s
$$;

SELECT is((SELECT p.prosecdef FROM pg_catalog.pg_proc p WHERE p.oid = 'forgeyard.storage_stats(text)'::regprocedure),
          true, 'storage_stats is SECURITY DEFINER');
SELECT isnt(obj_description('forgeyard.storage_stats(text)'::regprocedure, 'pg_proc'), NULL, 'storage_stats has a COMMENT');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc p WHERE p.oid = 'forgeyard.storage_stats(text)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp', 'jit=off'], 'storage_stats pins search_path (and turns JIT off)');

-------------------------------------------------------------------------------------------------
-- Figures
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
DO $$
DECLARE c record;
BEGIN
    PERFORM forgeyard.queue_create('ops1', 'jobs', '{"max_messages": 4, "max_attempts": 5}');
    PERFORM forgeyard.enqueue('ops1', 'jobs', 'a');
    PERFORM forgeyard.enqueue('ops1', 'jobs', 'b');
    PERFORM forgeyard.enqueue('ops1', 'jobs', 'c');
    PERFORM forgeyard.enqueue('ops1', 'jobs', 'd', NULL, NULL, 'emergency', '1 hour');
    PERFORM forgeyard.claim('ops1', 'jobs', 'w', 1, '10 minutes');
    PERFORM forgeyard.lease_acquire('ops1', 'live', 'o', '10 hours');
    PERFORM forgeyard.lease_acquire('ops1', 'short', 'o', '1 second');
    PERFORM forgeyard.idem_begin('ops1', 's', 'open', '\x01');
    SELECT b.attempt INTO c FROM forgeyard.idem_begin('ops1', 's', 'done', '\x02', '1 minute', '1 hour') b;
    PERFORM forgeyard.idem_complete('ops1', 's', 'done', '\x00', c.attempt);
    PERFORM forgeyard.audit_append('ops1', 'actor', 'act', 'res');
    PERFORM forgeyard.audit_append('ops1', 'actor', 'act', 'res');
    PERFORM forgeyard.queue_create('ops2', 'other');
    PERFORM forgeyard.lease_acquire('ops2', 'x', 'o', '10 hours');
END $$;
SET forgeyard.now_override = '2030-03-01 00:01:00+00';

SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'ready'), 2::bigint, 'enqueue 4 (one delayed), claim 1: ready 2');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'in_flight'), 1::bigint, 'in flight 1');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'delayed'), 1::bigint, 'delayed 1');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'dead'), 0::bigint, 'dead 0');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'max_messages'), 4::bigint, 'max_messages as created');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'pressure'), 2::bigint, '4 of 4 admitted: saturated (2)');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'oldest_ready_age_usecs'), 60000000::bigint,
          'oldest ready age by forgeyard.now(): 60 s');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'retrying'), 0::bigint, 'nothing redelivered yet');
SELECT is(pg_temp.fig('leases', 'ops1', NULL, 'live'), 1::bigint, 'one live lease');
SELECT is(pg_temp.fig('leases', 'ops1', NULL, 'expired'), 1::bigint, 'one lease expired and not reaped');
SELECT is(pg_temp.fig('idempotency', 'ops1', NULL, 'in_progress'), 1::bigint, 'one key in progress');
SELECT is(pg_temp.fig('idempotency', 'ops1', NULL, 'completed'), 1::bigint, 'one key completed');
SELECT is(pg_temp.fig('idempotency', 'ops1', NULL, 'past_retention'), 0::bigint, 'no key past retention yet');
SELECT is(pg_temp.fig('audit', 'ops1', NULL, 'events'), 2::bigint, 'two audit events');

SET forgeyard.now_override = '2030-03-01 02:00:00+00';
SELECT is(pg_temp.fig('idempotency', 'ops1', NULL, 'past_retention'), 1::bigint, 'two hours on: the 1-hour key is past retention');
DO $$
DECLARE c record;
BEGIN
    SELECT x.msg_id, x.claim_token INTO c FROM forgeyard.claim('ops1', 'jobs', 'w', 1) x ORDER BY x.msg_id LIMIT 1;
    PERFORM forgeyard.nack('ops1', 'jobs', c.msg_id, c.claim_token, 'poison', true);
END $$;
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'retrying'), 1::bigint,
          'two hours on, the claimed message''s visibility ran out: it waits for a retry');
DO $$
DECLARE c record;
BEGIN
    SELECT x.msg_id, x.claim_token INTO c FROM forgeyard.claim('ops1', 'jobs', 'w', 1) x;
    PERFORM forgeyard.nack('ops1', 'jobs', c.msg_id, c.claim_token, 'transient');
END $$;
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'retrying'), 2::bigint, 'a message nacked for a retry is retrying too');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'dead'), 1::bigint, 'a permanent nack: one dead letter');
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'dead_last_hour'), 1::bigint, 'dead-lettered within the last hour');
SET forgeyard.now_override = '2030-03-01 04:00:00+00';
SELECT is(pg_temp.fig('queue', 'ops1', 'jobs', 'dead_last_hour'), 0::bigint, 'two hours later it is no longer recent');

SELECT ok(pg_temp.fig('database', NULL, current_database(), 'bytes') > 0, 'database size for all tenants');
SELECT ok(pg_temp.fig('table', NULL, 'messages', 'bytes') > 0, 'table sizes for all tenants');
SELECT is(pg_temp.fig('table', NULL, 'messages', 'autovacuum'), 1::bigint, 'autovacuum is on for messages');
SELECT is((SELECT count(*) FROM forgeyard.storage_stats('ops1') x
            WHERE x.tenant_id IS DISTINCT FROM 'ops1'), 0::bigint,
          'one tenant: only its rows, nothing server-wide');
SELECT is((SELECT count(*) FROM forgeyard.storage_stats() x WHERE x.kind = 'security'
            AND x.state = 'definer_without_search_path'), 0::bigint,
          'every forgeyard SECURITY DEFINER function pins search_path');

-------------------------------------------------------------------------------------------------
-- Security findings
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_ops_dml;
CREATE ROLE fy_ops_app;
CREATE ROLE fy_ops_bound;
CREATE ROLE fy_ops_maint;
CREATE ROLE fy_ops_insp;
GRANT SELECT, UPDATE ON forgeyard.leases TO fy_ops_dml;
SELECT is(pg_temp.fig('security', NULL, 'fy_ops_dml', 'table_privilege'), 2::bigint,
          'a role with SELECT and UPDATE on forgeyard.leases is reported');
GRANT SELECT ON forgeyard.audit_events TO PUBLIC;
SELECT is(pg_temp.fig('security', NULL, 'PUBLIC', 'table_privilege'), 1::bigint, 'a grant to PUBLIC is reported as PUBLIC');
REVOKE SELECT ON forgeyard.audit_events FROM PUBLIC;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_ops_app');
    PERFORM forgeyard.grant_usage('fy_ops_bound');
    PERFORM forgeyard.grant_maintenance('fy_ops_maint');
    PERFORM forgeyard.grant_inspect('fy_ops_insp');
END $$;
SELECT is(pg_temp.fig('security', NULL, 'fy_ops_app', 'unbound_usage'), NULL, 'no bindings in use: no unbound finding');
SELECT forgeyard.bind_tenant('fy_ops_bound', 'ops1');
SELECT is(pg_temp.fig('security', NULL, 'fy_ops_app', 'unbound_usage'), 1::bigint,
          'bindings in use: an application role bound to no tenant is reported');
SELECT is(pg_temp.fig('security', NULL, 'fy_ops_bound', 'unbound_usage'), NULL, 'the bound role is not');
SELECT is(pg_temp.fig('security', NULL, 'fy_ops_maint', 'unbound_usage'), NULL, 'a maintenance role is not');

-------------------------------------------------------------------------------------------------
-- The xmin horizon (0.9.0): one holder, or 'none'; every database's only with a NULL tenant
-------------------------------------------------------------------------------------------------
SELECT is((SELECT count(*) FROM forgeyard.storage_stats()
            WHERE kind = 'horizon' AND state NOT LIKE '%\_usecs'), 1::bigint,
          'one horizon row: the oldest holder of the xmin horizon, or none');
SELECT ok((SELECT bool_and(state IN ('none', 'transaction', 'prepared', 'replication_slot', 'standby',
                                     'transaction_usecs', 'prepared_usecs') AND value >= 0
                           AND (state = 'none') = (name IS NULL))
             FROM forgeyard.storage_stats() WHERE kind = 'horizon'),
          'its kind is one of the holders, its figures are ages, and only none has no name');
SELECT is((SELECT count(*) FROM forgeyard.storage_stats('ops1') WHERE kind = 'horizon'), 0::bigint,
          'a tenant''s stats have no horizon row (server-wide only)');

-------------------------------------------------------------------------------------------------
-- Who may call it
-------------------------------------------------------------------------------------------------
SET ROLE fy_ops_insp;
SELECT is(pg_temp.fig('queue', 'ops2', 'other', 'ready'), 0::bigint, 'an unbound inspection role sees every tenant');
RESET ROLE;
SELECT forgeyard.bind_tenant('fy_ops_insp', 'ops1');
SET ROLE fy_ops_insp;
SELECT is((pg_temp.err('SELECT * FROM forgeyard.storage_stats()'))[1], 'FY040',
          'a bound role asking for every tenant gets FY040');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.storage_stats('ops2')$$))[1], 'FY040', 'and for another tenant too');
SELECT is(pg_temp.fig('leases', 'ops1', NULL, 'live', 'ops1'), 1::bigint, 'its own tenant answers');
RESET ROLE;
SET ROLE fy_ops_app;
SELECT is((pg_temp.err('SELECT * FROM forgeyard.storage_stats()'))[1], '42501', 'an application role may not call it');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- Bad input
-------------------------------------------------------------------------------------------------
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.storage_stats('')$$))[1:2], ARRAY['22023', 'tenant must not be empty'],
          'an empty tenant is 22023');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.storage_stats(repeat('x', 129))$$))[1], '22001',
          'a tenant over 128 bytes is 22001');

SELECT * FROM finish();
ROLLBACK;
