-- forgeyard 0.5.0 -> 0.6.0. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.6.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.6.0: a promotion is seen at once
-------------------------------------------------------------------------------------------------

-- The timeline restore_status compares was that of the last checkpoint, which a promoted standby
-- reaches only at its first checkpoint after the promotion: until then a failover looked like no
-- change, and a restore_reconcile or restore_acknowledge run in that window recorded the old
-- timeline, so the store reported the failover again afterwards. On a primary the timeline is now
-- the one its WAL is written on.
CREATE OR REPLACE FUNCTION forgeyard.current_store_identity()
    RETURNS TABLE (system_identifier bigint, timeline bigint, database_oid oid, database_name text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        SELECT s.system_identifier,
               CASE WHEN pg_catalog.pg_is_in_recovery() THEN c.timeline_id::pg_catalog.int8
                    ELSE (('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.pg_walfile_name(
                              pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32))::pg_catalog.int4::pg_catalog.int8
               END,
               d.oid, d.datname::pg_catalog.text
          FROM pg_catalog.pg_control_system() s, pg_catalog.pg_control_checkpoint() c, pg_catalog.pg_database d
         WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
    END;
COMMENT ON FUNCTION forgeyard.current_store_identity() IS
  'The identity restore_status compares with forgeyard.store_identity: the cluster''s system identifier, its timeline (on a primary the timeline its WAL is written on, which changes at promotion; on a standby that of its last restartpoint), this database''s oid and name.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.6.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
