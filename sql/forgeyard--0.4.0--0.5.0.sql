-- forgeyard 0.4.0 -> 0.5.0: faster hot paths, application schema migrations and health, restore
-- safety, topics, hardening. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.5.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.5.0: hot paths (queue claim, ack and enqueue)
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: application schema migrations, daemon registry, health
-------------------------------------------------------------------------------------------------

-- Operations: storage_stats() feeds `storage stats`, `storage status`, `storage doctor` and
-- `forgeyard metrics` (docs/operations.md, "Stats and metrics"). One long, narrow result so the
-- client reads every figure in one round trip: (kind, tenant_id, name, state, value). jit is off
-- for it: its one large statement costs enough to be JIT-compiled, which took seconds for a
-- query that runs in milliseconds.
CREATE FUNCTION forgeyard.storage_stats(tenant text DEFAULT NULL)
    RETURNS TABLE (kind text, tenant_id text, name text, state text, value bigint)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    AS 'MODULE_PATHNAME', 'fy_storage_stats';
COMMENT ON FUNCTION forgeyard.storage_stats(text) IS
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, the oldest open transaction, replication slots holding xmin, and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.storage_stats(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.storage_stats(text)');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: restore safety: fencing values that never rewind, restore_reconcile
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: topics: durable pub/sub and the event type registry
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: hardening: argument checks and attack surface
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.5.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
