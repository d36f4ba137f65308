-- @edition cpp
-- The clock's part of the C++ edition's own machinery, the setting its library defines:
-- forgeyard.now_override is a superuser-only string setting (a non-superuser's SET, SET LOCAL,
-- set_config and RESET are refused with 42501, under SET ROLE too), and the library reserves the
-- prefix forgeyard. (Moved unchanged from regress/clock.sql, which checks the clock on both
-- editions, the rule "another login role cannot move the clock" included; tests/pg/pgtap.sh runs
-- this file on the C++ edition only: the PL/pgSQL edition loads no library, and there the setting
-- is a placeholder that forgeyard.now() honours only for a superuser or the installation's owner.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(10);

SET TIME ZONE 'UTC';

-------------------------------------------------------------------------------------------------
-- The setting itself
-------------------------------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT context, vartype, boot_val, setting FROM pg_catalog.pg_settings WHERE name = 'forgeyard.now_override'$$,
    $$VALUES ('superuser'::text, 'string'::text, ''::text, ''::text)$$,
    'forgeyard.now_override: a superuser-only string setting, empty by default');

-------------------------------------------------------------------------------------------------
-- Superuser-only
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_clock_app;
DO $$ BEGIN PERFORM forgeyard.grant_usage('fy_clock_app'); END $$;
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SET ROLE fy_clock_app;
SELECT throws_ok($$SET forgeyard.now_override = '2040-01-01 00:00:00+00'$$, '42501', NULL,
                 'a non-superuser cannot SET forgeyard.now_override (42501)');
SELECT throws_ok($$SET LOCAL forgeyard.now_override = '2040-01-01 00:00:00+00'$$, '42501', NULL,
                 'a non-superuser cannot SET LOCAL forgeyard.now_override (42501)');
SELECT throws_ok($$SELECT set_config('forgeyard.now_override', '2040-01-01 00:00:00+00', false)$$, '42501', NULL,
                 'a non-superuser cannot set_config forgeyard.now_override (42501)');
SELECT throws_ok('RESET forgeyard.now_override', '42501', NULL,
                 'a non-superuser cannot RESET forgeyard.now_override (42501)');
SELECT is(forgeyard.now(), '2030-01-01 00:00:00+00'::timestamptz, 'the override is unchanged after the refused attempts');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- The forgeyard. prefix is reserved
-------------------------------------------------------------------------------------------------
SELECT throws_ok($$SET forgeyard.nonexistent = 'x'$$, '42602', NULL, 'SET forgeyard.nonexistent fails: the prefix is reserved');
SELECT throws_ok($$SET forgeyard.now_overide = '2030-01-01'$$, '42602', NULL,
                 'a misspelt forgeyard setting fails instead of silently doing nothing');
SELECT throws_ok($$SELECT set_config('forgeyard.nonexistent', 'x', true)$$, '42602', NULL,
                 'set_config(forgeyard.nonexistent) fails too');
SELECT lives_ok($$SET fy_regress_other.anything = 'x'$$, 'another prefix still takes placeholder settings');

SELECT * FROM finish();
ROLLBACK;
