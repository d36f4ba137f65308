-- Application schema migrations, daemon registry and backfill progress (docs/sql-api.md#application-schema-migrations):
-- records are append-only, every bad input of every function, the daemon lease on forgeyard.now(),
-- access kinds (pg_dump registration: regress/cpp_app_migrations.sql). Time is moved with
-- forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(56);

SET TIME ZONE 'UTC';
SET forgeyard.now_override = '2030-01-01 00:00:00+00';

\ir lib/err.sql

CREATE FUNCTION pg_temp.all_rows() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(
        (SELECT coalesce(jsonb_agg(to_jsonb(m) ORDER BY m.application, m.migration_id), '[]') FROM forgeyard.app_migrations m),
        (SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.application, d.instance), '[]') FROM forgeyard.app_daemons d),
        (SELECT coalesce(jsonb_agg(to_jsonb(b) ORDER BY b.application, b.migration_id, b.name), '[]') FROM forgeyard.app_backfills b))
$$;

-- Tables, dumped with the extension's data.
SELECT has_table('forgeyard', 'app_migrations', 'app_migrations exists');
SELECT has_table('forgeyard', 'app_daemons', 'app_daemons exists');
SELECT has_table('forgeyard', 'app_backfills', 'app_backfills exists');
-- (Their registration with pg_extension_config_dump, the extension's, is checked by
-- regress/cpp_app_migrations.sql.)

-- Recording.
SELECT is((SELECT applied_at FROM forgeyard.app_migration_record('billing', 1, '0001_create.sql', repeat('a', 64), 'expand', true, '1.0.0', 12)),
          '2030-01-01 00:00:00+00'::timestamptz, 'app_migration_record stamps forgeyard.now()');
SELECT is((SELECT applied_by FROM forgeyard.app_migration_record('billing', 2, '0002_drop.sql', repeat('b', 64), 'contract', false, '', 0)),
          session_user::text, 'applied_by is the session user');
SELECT results_eq($$SELECT migration_id, name, phase, transactional, app_version, duration_ms FROM forgeyard.app_migration_list('billing')$$,
                  $$VALUES (1, '0001_create.sql', 'expand', true, '1.0.0', 12::bigint), (2, '0002_drop.sql', 'contract', false, '', 0::bigint)$$,
                  'app_migration_list returns the records by id');
SELECT is((SELECT count(*) FROM forgeyard.app_migration_list('other'))::int, 0, 'another application has its own history');

-- Never rewritten.
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 1, 'x.sql', repeat('c', 64), 'expand', true, '', 0)$$))[1],
          'FY030', 'recording an id again is FY030');
SELECT is((pg_temp.err($$UPDATE forgeyard.app_migrations SET name = 'x' WHERE application = 'billing'$$))[1], 'FY030', 'UPDATE is FY030');
SELECT is((pg_temp.err($$DELETE FROM forgeyard.app_migrations WHERE application = 'billing'$$))[1], 'FY030', 'DELETE is FY030');
SELECT is((pg_temp.err($$TRUNCATE forgeyard.app_migrations$$))[1], 'FY030', 'TRUNCATE is FY030');
SET session_replication_role = replica;
SELECT is((pg_temp.err($$DELETE FROM forgeyard.app_migrations WHERE application = 'billing'$$))[1], 'FY030',
          'DELETE is FY030 under session_replication_role = replica too');
RESET session_replication_role;

-- Bad input: a clear SQLSTATE and no change.
CREATE TEMP TABLE before AS SELECT pg_temp.all_rows() AS v;
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record(NULL, 3, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '22004', 'record: NULL application');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('', 3, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '22023', 'record: empty application');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record(repeat('x', 201), 3, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '22001', 'record: application over 200 bytes');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, NULL, repeat('a', 64), 'expand', true, '', 0)$$))[1], '22004', 'record: NULL name');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, repeat('n', 256), repeat('a', 64), 'expand', true, '', 0)$$))[1], '22001', 'record: name over 255 bytes');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', NULL, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '22004', 'record: NULL migration_id');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 0, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '22023', 'record: migration_id 0');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', NULL, 'expand', true, '', 0)$$))[1], '22004', 'record: NULL sha256');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('A', 64), 'expand', true, '', 0)$$))[1], '22023', 'record: upper-case sha256');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('a', 63), 'expand', true, '', 0)$$))[1], '22023', 'record: short sha256');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('a', 64), 'sideways', true, '', 0)$$))[1], '22023', 'record: unknown phase');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('a', 64), 'expand', NULL, '', 0)$$))[1], '22004', 'record: NULL transactional');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('a', 64), 'expand', true, repeat('v', 201), 0)$$))[1], '22001', 'record: app_version over 200 bytes');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 3, 'n.sql', repeat('a', 64), 'expand', true, '', -1)$$))[1], '22023', 'record: negative duration');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.app_migration_list(NULL)$$))[1], '22004', 'list: NULL application');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', NULL, 1, 2, '1 minute')$$))[1], '22004', 'register: NULL instance');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', 3, 2, '1 minute')$$))[1], '22023', 'register: min_schema above max_schema');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', -1, 0, '1 minute')$$))[1], '22023', 'register: negative min_schema');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', 1, 2, '0 seconds')$$))[1], '22023', 'register: zero lease');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', 1, 2, '1 month')$$))[1], '22023', 'register: a lease with a month');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', 1, 2, '8 days')$$))[1], '22023', 'register: a lease over 7 days');
SELECT is((pg_temp.err($$SELECT forgeyard.app_daemon_register('billing', 'd', 1, 2, NULL)$$))[1], '22004', 'register: NULL lease');
SELECT is((pg_temp.err($$SELECT forgeyard.app_backfill_save('billing', 1, 'fill', NULL, -1, 0, false)$$))[1], '22023', 'backfill: negative rows_done');
SELECT is((pg_temp.err($$SELECT forgeyard.app_backfill_save('billing', 0, 'fill', NULL, 0, 0, false)$$))[1], '22023', 'backfill: migration_id 0');
SELECT is((pg_temp.err($$SELECT forgeyard.app_backfill_save('billing', 1, 'fill', repeat('c', 4097), 0, 0, false)$$))[1], '22001', 'backfill: cursor over 4096 bytes');
SELECT is((pg_temp.err($$SELECT forgeyard.app_backfill_save('billing', 1, '', NULL, 0, 0, false)$$))[1], '22023', 'backfill: empty name');
SELECT is(pg_temp.all_rows(), (SELECT v FROM before), 'no bad call changed anything');

-- Daemons: a lease on forgeyard.now().
SELECT is(forgeyard.app_daemon_register('billing', 'host-a:1', 1, 2, '1 minute'), '2030-01-01 00:01:00+00'::timestamptz,
          'register returns now + lease');
SELECT results_eq($$SELECT instance, min_schema, max_schema, live FROM forgeyard.app_daemon_list('billing')$$,
                  $$VALUES ('host-a:1', 1, 2, true)$$, 'a registered daemon is live');
SET forgeyard.now_override = '2030-01-01 00:00:30+00';
SELECT is(forgeyard.app_daemon_register('billing', 'host-a:1', 1, 3, '1 minute'), '2030-01-01 00:01:30+00'::timestamptz,
          'a heartbeat renews the lease (and the range)');
SELECT is((SELECT registered_at FROM forgeyard.app_daemon_list('billing')), '2030-01-01 00:00:00+00'::timestamptz,
          'a heartbeat keeps registered_at');
SET forgeyard.now_override = '2030-01-01 00:01:30+00';
SELECT is((SELECT live FROM forgeyard.app_daemon_list('billing')), false, 'expires_at <= now is no longer live');
SELECT is((SELECT max_schema FROM forgeyard.app_daemon_list('billing')), 3, 'the renewed range is kept');
SELECT is(forgeyard.app_daemon_release('billing', 'host-a:1'), true, 'release removes a registration');
SELECT is(forgeyard.app_daemon_release('billing', 'host-a:1'), false, 'release of an unknown one is false');
SELECT is((SELECT count(*) FROM forgeyard.app_daemon_list('billing'))::int, 0, 'released daemons are gone');

-- Backfill progress: one row per (application, migration, name), updated in place.
SELECT is(forgeyard.app_backfill_save('billing', 2, 'fill_name', '100', 100, 1, false), '2030-01-01 00:01:30+00'::timestamptz, 'backfill_save stamps now');
SELECT lives_ok($$SELECT forgeyard.app_backfill_save('billing', 2, 'fill_name', '200', 200, 1, true)$$, 'backfill_save updates');
SELECT results_eq($$SELECT migration_id, name, "cursor", rows_done, errors, done FROM forgeyard.app_backfill_list('billing')$$,
                  $$VALUES (2, 'fill_name', '200', 200::bigint, 1::bigint, true)$$, 'app_backfill_list shows the latest progress');

-- Access kinds: an application role registers daemons and saves backfills, a maintenance role
-- records migrations, a role without access gets nothing.
CREATE ROLE fy_appmig_app;
CREATE ROLE fy_appmig_maint;
CREATE ROLE fy_appmig_none;
SELECT forgeyard.grant_usage('fy_appmig_app');
SELECT forgeyard.grant_maintenance('fy_appmig_maint');
SET ROLE fy_appmig_app;
SELECT lives_ok($$SELECT forgeyard.app_daemon_register('billing', 'app-role', 0, 0, '1 minute')$$, 'usage: app_daemon_register');
SELECT is((pg_temp.err($$SELECT forgeyard.app_migration_record('billing', 9, 'n.sql', repeat('a', 64), 'expand', true, '', 0)$$))[1], '42501',
          'usage: no app_migration_record');
SELECT is((pg_temp.err($$SELECT count(*) FROM forgeyard.app_migrations$$))[1], '42501', 'usage: no table access');
RESET ROLE;
SET ROLE fy_appmig_maint;
SELECT lives_ok($$SELECT forgeyard.app_migration_record('billing', 9, '0009_n.sql', repeat('a', 64), 'expand', true, '', 0)$$, 'maintenance: app_migration_record');
RESET ROLE;
SET ROLE fy_appmig_none;
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.app_migration_list('billing')$$))[1], '42501', 'no access: no app_migration_list');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
