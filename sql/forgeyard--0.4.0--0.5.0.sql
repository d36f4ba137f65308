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
