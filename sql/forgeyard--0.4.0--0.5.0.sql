-- forgeyard 0.4.0 -> 0.5.0: faster hot paths, application schema migrations and health, restore
-- safety, topics, hardening. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.5.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.5.0: hot paths (queue claim, ack and enqueue)
-------------------------------------------------------------------------------------------------

-- Per-backend caches of queue options and tenant bindings: a statement trigger on each cached
-- table queues a relcache invalidation of it, which every backend applies before its next use.
CREATE FUNCTION forgeyard.invalidate_caches() RETURNS trigger LANGUAGE c
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_invalidate_caches';
COMMENT ON FUNCTION forgeyard.invalidate_caches() IS
  'Internal statement trigger: makes every backend drop its cached rows of the table (queue options, tenant bindings) when they change.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.queues
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.queues IS
  'Backends cache queue options; any change to this table makes them read the options again.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.tenant_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.tenant_bindings IS
  'Backends cache tenant bindings; any change to this table makes them read the bindings again.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: application schema migrations, daemon registry, health
-------------------------------------------------------------------------------------------------

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
