-- @edition cpp
-- The audit log's part of the C++ edition's own machinery, the extension: the audit tables are
-- registered for pg_dump (extconfig), and CREATE EXTENSION of the old version 0.3.0 updated to 0.4.0
-- grants the audit API to roles given access before the update. (Moved unchanged from
-- regress/audit.sql, which checks the audit log on both editions; tests/pg/pgtap.sh runs this file on
-- the C++ edition only: the PL/pgSQL edition's plain install is no extension, and its upgrade steps
-- start at 0.8.0.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(8);

SET TIME ZONE 'UTC';
SET client_encoding = 'UTF8';

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT ok((SELECT ARRAY['forgeyard.audit_events', 'forgeyard.audit_heads']::regclass[] <@ e.extconfig::regclass[]
             FROM pg_catalog.pg_extension e WHERE e.extname = 'forgeyard'),
          'audit_events and audit_heads are registered for pg_dump (extconfig); the view is not data');

-------------------------------------------------------------------------------------------------
-- Upgrade 0.3.0 -> 0.4.0: the audit API is granted to roles given access before the upgrade
-------------------------------------------------------------------------------------------------
DROP EXTENSION forgeyard;
CREATE EXTENSION forgeyard VERSION '0.3.0';
CREATE ROLE fy_aud_up_app;
CREATE ROLE fy_aud_up_insp;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_aud_up_app');
    PERFORM forgeyard.grant_inspect('fy_aud_up_insp');
END $$;
ALTER EXTENSION forgeyard UPDATE TO '0.4.0';
SELECT is((SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'forgeyard'), '0.4.0', 'updated from 0.3.0 to 0.4.0');
SELECT results_eq($$SELECT tgname::text COLLATE "default", tgenabled::text FROM pg_catalog.pg_trigger
                     WHERE tgrelid = 'forgeyard.audit_events'::regclass AND NOT tgisinternal ORDER BY 1$$,
                  $$VALUES ('audit_events_no_change'::text, 'A'::text), ('audit_events_no_truncate', 'A')$$,
                  'after the update both triggers are ENABLE ALWAYS');
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
SET ROLE fy_aud_up_app;
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append('up', 'a', 'b', 'c')$$, $$VALUES (1::bigint)$$,
                  'a usage role granted before the update may call audit_append');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('up')$$, $$VALUES (true, 1::bigint, NULL::bigint, NULL::text)$$,
                  'and audit_verify');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_events$$, '42501', NULL, 'but still cannot read audit_events');
RESET ROLE;
SET ROLE fy_aud_up_insp;
SELECT results_eq($$SELECT tenant_id, head_seq FROM forgeyard.audit_status$$, $$VALUES ('up'::text, 1::bigint)$$,
                  'an inspect role granted before the update may read audit_status');
RESET ROLE;
SELECT throws_ok($$DELETE FROM forgeyard.audit_events$$, 'FY030', NULL, 'after the update DELETE is FY030');

SELECT * FROM finish();
ROLLBACK;
