-- Access (docs/sql-api.md#who-may-call-what): the three kinds of role, tenant binding, SECURITY DEFINER with a pinned
-- search_path (SECURITY INVOKER for compare-and-set, docs/sql-api.md#compare-and-set), nothing for PUBLIC, comments on
-- everything, tables and sequences registered for pg_dump; for the lease, idempotency, cas and
-- queue APIs, the queue maintenance calls and the queue views.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(441);

SET TIME ZONE 'UTC';

-------------------------------------------------------------------------------------------------
-- Catalog: the API functions are SECURITY DEFINER with search_path pinned
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE api (fn regprocedure PRIMARY KEY);
INSERT INTO api VALUES
    ('forgeyard.lease_acquire(text, text, text, interval)'),
    ('forgeyard.lease_renew(text, text, bigint, interval)'),
    ('forgeyard.lease_release(text, text, bigint)'),
    ('forgeyard.lease_fence(text, text, bigint)'),
    ('forgeyard.lease_get(text, text)'),
    ('forgeyard.lease_reap(integer, text)'),
    ('forgeyard.idem_begin(text, text, text, bytea, interval, interval)'),
    ('forgeyard.idem_checkpoint(text, text, text, text, bigint)'),
    ('forgeyard.idem_complete(text, text, text, bytea, bigint)'),
    ('forgeyard.idem_abandon(text, text, text, bigint)'),
    ('forgeyard.idem_status(text, text, text)'),
    ('forgeyard.idem_purge(integer, text)'),
    ('forgeyard.queue_create(text, text, jsonb)'),
    ('forgeyard.queue_alter(text, text, jsonb)'),
    ('forgeyard.admission_limit(text, text, integer, interval)'),
    ('forgeyard.resource_limit(text, text, jsonb)'),
    ('forgeyard.breaker_configure(text, text, jsonb)'),
    ('forgeyard.breaker_state(text, text)'),
    ('forgeyard.queue_drop(text, text)'),
    ('forgeyard.queue_list(text)'),
    ('forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'),
    ('forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text)'),
    ('forgeyard.claim(text, text, text, integer, interval)'),
    ('forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval)'),
    ('forgeyard.ack(text, text, bigint, bigint)'),
    ('forgeyard.ack_batch(text, text, bigint[], bigint[])'),
    ('forgeyard.nack(text, text, bigint, bigint, text, boolean)'),
    ('forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean)'),
    ('forgeyard.extend(text, text, bigint, bigint, interval)'),
    ('forgeyard.extend_batch(text, text, bigint[], bigint[], interval)'),
    ('forgeyard.queue_stats(text, text)'),
    ('forgeyard.dead_list(text, text, bigint, integer)'),
    ('forgeyard.dead_redrive(text, text, bigint[], integer)'),
    ('forgeyard.dead_purge(text, text, bigint[])'),
    ('forgeyard.claim_plan(text, text)'),
    ('forgeyard.inbox_accept(text, text, uuid)'),
    ('forgeyard.inbox_purge(interval, integer, text)'),
    ('forgeyard.maintain(integer, text)');

SELECT ok((SELECT p.prosecdef FROM pg_catalog.pg_proc p WHERE p.oid = fn), fn || ' is SECURITY DEFINER')
  FROM api ORDER BY fn::text;
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc p WHERE p.oid = fn), '{"search_path=pg_catalog, pg_temp"}'::text[],
          fn || ' pins search_path = pg_catalog, pg_temp')
  FROM api ORDER BY fn::text;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.prosecdef
         AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))$$,
    'no SECURITY DEFINER function in schema forgeyard lacks the pinned search_path');

-- Compare-and-set acts on the caller's own tables with the caller's rights: SECURITY INVOKER,
-- search_path still pinned. The trigger function is neither: no arguments, no settings.
CREATE TEMP TABLE invoker_api (fn regprocedure PRIMARY KEY);
INSERT INTO invoker_api VALUES
    ('forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'),
    ('forgeyard.cas_get(regclass, jsonb)'),
    ('forgeyard.enable_versioning(regclass)'),
    ('forgeyard.disable_versioning(regclass)');
SELECT ok((SELECT NOT p.prosecdef FROM pg_catalog.pg_proc p WHERE p.oid = fn), fn || ' is SECURITY INVOKER')
  FROM invoker_api ORDER BY fn::text;
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc p WHERE p.oid = fn), '{"search_path=pg_catalog, pg_temp"}'::text[],
          fn || ' pins search_path = pg_catalog, pg_temp')
  FROM invoker_api ORDER BY fn::text;
SELECT results_eq(
    $$SELECT p.prosecdef, p.proconfig, p.pronargs::int, p.prorettype::regtype::text
        FROM pg_catalog.pg_proc p WHERE p.oid = 'forgeyard.versioning_trigger()'::regprocedure$$,
    $$VALUES (false, NULL::text[], 0, 'trigger'::text)$$,
    'versioning_trigger() is a trigger function: not SECURITY DEFINER, no settings, no arguments');

-- Every API function, old and new: commented and not executable by PUBLIC (checked one by one;
-- the schema-wide checks below catch anything not listed here).
CREATE TEMP TABLE all_api (fn regprocedure PRIMARY KEY);
INSERT INTO all_api SELECT fn FROM api UNION ALL SELECT fn FROM invoker_api
    UNION ALL VALUES ('forgeyard.versioning_trigger()'::regprocedure), ('forgeyard.now()');
SELECT ok(obj_description(fn, 'pg_proc') IS NOT NULL AND NOT has_function_privilege('public', fn, 'EXECUTE'),
          fn || ' has a COMMENT and is not executable by PUBLIC')
  FROM all_api ORDER BY fn::text;

-------------------------------------------------------------------------------------------------
-- Catalog: nothing for PUBLIC
-------------------------------------------------------------------------------------------------
SELECT cmp_ok((SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'forgeyard'::regnamespace), '>=', 50::bigint,
              'schema forgeyard has its functions (the checks below are not vacuous)');
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'forgeyard'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
    'no function in schema forgeyard is executable by PUBLIC (has_function_privilege)');
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'forgeyard'::regnamespace
         AND (p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0))$$,
    'no function in schema forgeyard has a default ACL or a PUBLIC entry (aclexplode)');
SELECT is_empty(
    $$SELECT c.oid::regclass FROM pg_catalog.pg_class c
       WHERE c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'S')
         AND (has_table_privilege('public', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
              OR EXISTS (SELECT 1 FROM aclexplode(c.relacl) a WHERE a.grantee = 0))$$,
    'no table, view or sequence in schema forgeyard grants anything to PUBLIC');
SELECT ok(NOT has_schema_privilege('public', 'forgeyard', 'USAGE, CREATE'), 'PUBLIC has no privilege on schema forgeyard');

-------------------------------------------------------------------------------------------------
-- Catalog: comments, pg_dump registration, not relocatable
-------------------------------------------------------------------------------------------------
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'forgeyard'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL$$,
    'every function in schema forgeyard has a COMMENT');
SELECT is_empty(
    $$SELECT c.oid::regclass FROM pg_catalog.pg_class c
       WHERE c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'S')
         AND obj_description(c.oid, 'pg_class') IS NULL$$,
    'every table, view and sequence in schema forgeyard has a COMMENT');
SELECT set_eq(
    $$SELECT c.oid::regclass::text FROM pg_catalog.pg_class c
       WHERE c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'S')$$,
    ARRAY['forgeyard.leases', 'forgeyard.tenant_bindings', 'forgeyard.role_access', 'forgeyard.idempotency_keys',
          'forgeyard.lease_status', 'forgeyard.queues', 'forgeyard.queue_slots', 'forgeyard.queue_admit_deltas', 'forgeyard.queue_releases', 'forgeyard.queue_release_deltas',
          'forgeyard.messages', 'forgeyard.queue_events', 'forgeyard.queue_partitions', 'forgeyard.inbox',
          'forgeyard.message_ids', 'forgeyard.claim_tokens', 'forgeyard.queue_depth', 'forgeyard.queue_overview',
          'forgeyard.idempotency_attempts', 'forgeyard.access_catalog', 'forgeyard.audit_events',
          'forgeyard.event_types', 'forgeyard.topics', 'forgeyard.subscriptions', 'forgeyard.topic_events',
          'forgeyard.topic_event_seqs', 'forgeyard.subscription_lag',
          'forgeyard.audit_heads', 'forgeyard.audit_status',
          'forgeyard.app_migrations', 'forgeyard.app_daemons', 'forgeyard.app_backfills',
          'forgeyard.store_identity', 'forgeyard.wf_runs', 'forgeyard.wf_journal', 'forgeyard.wf_signals',
          'forgeyard.wf_schedules', 'forgeyard.wf_cursors', 'forgeyard.workflow_runs', 'forgeyard.workflow_stuck',
          'forgeyard.queue_admission', 'forgeyard.queue_retry_windows', 'forgeyard.flow_state',
          'forgeyard.flow_resources', 'forgeyard.flow_resource_state', 'forgeyard.flow_outcome_deltas',
          'forgeyard.queue_fair_keys', 'forgeyard.queue_lane_entries', 'forgeyard.queue_lane_entries_0', 'forgeyard.queue_lane_entries_1',
          'forgeyard.queue_lane_entries_2', 'forgeyard.queue_lane_entries_3', 'forgeyard.queue_lane_segment', 'forgeyard.queue_lane_numbers',
          'forgeyard.queue_lane_marks',
          'forgeyard.queue_release_deltas_0', 'forgeyard.queue_release_deltas_1', 'forgeyard.queue_release_deltas_2', 'forgeyard.queue_release_deltas_3',
          'forgeyard.queue_admit_deltas_0', 'forgeyard.queue_admit_deltas_1', 'forgeyard.queue_admit_deltas_2', 'forgeyard.queue_admit_deltas_3'],
    'schema forgeyard holds exactly these tables, views and sequences (the lists below are complete)');
SELECT is((SELECT relpersistence FROM pg_catalog.pg_class WHERE oid = 'forgeyard.wf_cursors'::regclass), 'u'::"char",
          'the step cursors are UNLOGGED (moving one writes no WAL); every other table is logged');
SELECT is((SELECT count(*) FROM pg_catalog.pg_class
            WHERE relnamespace = 'forgeyard'::regnamespace AND relkind = 'r' AND relpersistence <> 'p'), 1::bigint,
          'one unlogged table');

-------------------------------------------------------------------------------------------------
-- Roles
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_acc_app;
CREATE ROLE fy_acc_maint;
CREATE ROLE fy_acc_insp;
CREATE ROLE fy_acc_none;
CREATE ROLE fy_acc_schema_only;
GRANT USAGE ON SCHEMA forgeyard TO fy_acc_schema_only;
SELECT lives_ok($$SELECT forgeyard.grant_usage('fy_acc_app')$$, 'grant_usage');
SELECT lives_ok($$SELECT forgeyard.grant_maintenance('fy_acc_maint')$$, 'grant_maintenance');
SELECT lives_ok($$SELECT forgeyard.grant_inspect('fy_acc_insp')$$, 'grant_inspect');
SELECT lives_ok($$SELECT forgeyard.grant_usage('fy_acc_app')$$, 'grant_usage again is harmless');
SELECT results_eq(
    $$SELECT role_id::text, access FROM forgeyard.role_access WHERE role_id::text LIKE 'fy_acc_%' ORDER BY 1, 2$$,
    $$VALUES ('fy_acc_app'::text, 'usage'::text), ('fy_acc_insp', 'inspect'),
             ('fy_acc_maint', 'maintenance'), ('fy_acc_maint', 'usage')$$,
    'role_access records each role''s access kinds once');

-- The whole EXECUTE / SELECT matrix.
CREATE TEMP TABLE objects (n int, kind text, obj text);
INSERT INTO objects VALUES
    (1, 'function', 'forgeyard.lease_acquire(text, text, text, interval)'),
    (2, 'function', 'forgeyard.lease_renew(text, text, bigint, interval)'),
    (3, 'function', 'forgeyard.lease_release(text, text, bigint)'),
    (4, 'function', 'forgeyard.lease_fence(text, text, bigint)'),
    (5, 'function', 'forgeyard.lease_get(text, text)'),
    (6, 'function', 'forgeyard.lease_reap(integer, text)'),
    (7, 'function', 'forgeyard.now()'),
    (8, 'function', 'forgeyard.grant_usage(regrole)'),
    (9, 'function', 'forgeyard.bind_tenant(regrole, text)'),
    (10, 'function', 'forgeyard.boundary_throw(text, text)'),
    (11, 'table', 'forgeyard.leases'),
    (12, 'table', 'forgeyard.tenant_bindings'),
    (13, 'table', 'forgeyard.role_access'),
    (14, 'table', 'forgeyard.lease_status'),
    (15, 'function', 'forgeyard.idem_begin(text, text, text, bytea, interval, interval)'),
    (16, 'function', 'forgeyard.idem_checkpoint(text, text, text, text, bigint)'),
    (17, 'function', 'forgeyard.idem_complete(text, text, text, bytea, bigint)'),
    (18, 'function', 'forgeyard.idem_abandon(text, text, text, bigint)'),
    (19, 'function', 'forgeyard.idem_status(text, text, text)'),
    (20, 'function', 'forgeyard.idem_purge(integer, text)'),
    (21, 'function', 'forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'),
    (22, 'function', 'forgeyard.cas_get(regclass, jsonb)'),
    (23, 'function', 'forgeyard.enable_versioning(regclass)'),
    (24, 'function', 'forgeyard.disable_versioning(regclass)'),
    (25, 'function', 'forgeyard.versioning_trigger()'),
    (26, 'table', 'forgeyard.idempotency_keys'),
    (27, 'function', 'forgeyard.queue_create(text, text, jsonb)'),
    (28, 'function', 'forgeyard.queue_alter(text, text, jsonb)'),
    (29, 'function', 'forgeyard.queue_drop(text, text)'),
    (30, 'function', 'forgeyard.queue_list(text)'),
    (31, 'function', 'forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'),
    (32, 'function', 'forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text)'),
    (33, 'function', 'forgeyard.claim(text, text, text, integer, interval)'),
    (34, 'function', 'forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval)'),
    (35, 'function', 'forgeyard.ack(text, text, bigint, bigint)'),
    (36, 'function', 'forgeyard.ack_batch(text, text, bigint[], bigint[])'),
    (37, 'function', 'forgeyard.nack(text, text, bigint, bigint, text, boolean)'),
    (38, 'function', 'forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean)'),
    (39, 'function', 'forgeyard.extend(text, text, bigint, bigint, interval)'),
    (40, 'function', 'forgeyard.extend_batch(text, text, bigint[], bigint[], interval)'),
    (41, 'function', 'forgeyard.queue_stats(text, text)'),
    (42, 'function', 'forgeyard.dead_list(text, text, bigint, integer)'),
    (43, 'function', 'forgeyard.dead_redrive(text, text, bigint[], integer)'),
    (44, 'function', 'forgeyard.dead_purge(text, text, bigint[])'),
    (45, 'function', 'forgeyard.inbox_accept(text, text, uuid)'),
    (46, 'function', 'forgeyard.inbox_purge(interval, integer, text)'),
    (47, 'function', 'forgeyard.maintain(integer, text)'),
    (48, 'function', 'forgeyard.claim_plan(text, text)'),
    (49, 'table', 'forgeyard.queues'),
    (50, 'table', 'forgeyard.queue_slots'),
    (51, 'table', 'forgeyard.queue_releases'),
    (52, 'table', 'forgeyard.messages'),
    (53, 'table', 'forgeyard.queue_events'),
    (54, 'table', 'forgeyard.queue_partitions'),
    (55, 'table', 'forgeyard.inbox'),
    (56, 'view', 'forgeyard.queue_depth'),
    (57, 'view', 'forgeyard.queue_overview'),
    (58, 'sequence', 'forgeyard.message_ids'),
    (59, 'sequence', 'forgeyard.claim_tokens'),
    (60, 'sequence', 'forgeyard.idempotency_attempts');
SELECT results_eq(
    $$SELECT r, string_agg(CASE WHEN CASE kind WHEN 'function' THEN has_function_privilege(r, obj, 'EXECUTE')
                                          WHEN 'sequence' THEN has_sequence_privilege(r, obj, 'USAGE, SELECT, UPDATE')
                                          ELSE has_table_privilege(r, obj, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
                                     END THEN 'Y' ELSE '-' END, '' ORDER BY n)
        FROM objects, unnest(ARRAY['fy_acc_app', 'fy_acc_maint', 'fy_acc_insp', 'fy_acc_none', 'fy_acc_schema_only']) r
       GROUP BY r ORDER BY r$$,
    --                acq ren rel fen get reap now grant bind probe leases bindings access status
    --                  idem: begin ckpt complete abandon status purge  cas: update get enable disable trigger  idempotency_keys
    --                  queue usage: create alter drop list enqueue batch claim ack_and_claim ack ack_batch nack nack_batch
    --                               extend extend_batch stats dead_list redrive purge inbox_accept
    --                  queue maintenance: inbox_purge maintain claim_plan
    --                  queue tables: queues slots releases messages events partitions inbox; views: depth overview;
    --                  sequences: message_ids claim_tokens idempotency_attempts
    $$VALUES ('fy_acc_app'::text,         'YYYYY-Y-------' || 'YYYYY-' || 'YYYYY' || '-' || 'YYYYYYYYYYYYYYYYYYY' || '---' || '-------' || '--' || '---'),
             ('fy_acc_insp',              '------Y------Y' || '------' || '-----' || '-' || '-------------------' || '---' || '-------' || 'YY' || '---'),
             ('fy_acc_maint',             'YYYYYYY-------' || 'YYYYYY' || 'YYYYY' || '-' || 'YYYYYYYYYYYYYYYYYYY' || 'YYY' || '-------' || '--' || '---'),
             ('fy_acc_none',              '--------------' || '------' || '-----' || '-' || '-------------------' || '---' || '-------' || '--' || '---'),
             ('fy_acc_schema_only',       '--------------' || '------' || '-----' || '-' || '-------------------' || '---' || '-------' || '--' || '---')$$,
    'privilege matrix: usage = lease, idempotency, cas and queue API + now(); maintenance adds lease_reap, idem_purge, inbox_purge, maintain, claim_plan; inspect = now() + lease_status, queue_depth, queue_overview; no table or sequence privileges');

-- Seed leases as the superuser (unbound: any tenant).
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.lease_acquire('t2', 'seed', 'bob', '1 hour');        -- epoch 1893456000000000
    PERFORM forgeyard.lease_acquire('t1', 'expired', 'carl', '1 second');  -- expires 00:00:01
    PERFORM forgeyard.lease_acquire('t1', 'expired2', 'dan', '2 seconds'); -- expires 00:00:02
END $$;
SET forgeyard.now_override = '2030-01-01 00:00:10+00';
DO $$ BEGIN PERFORM forgeyard.lease_acquire('t1', 'seed', 'alice', '1 hour'); END $$;
-- And a queue with one message in each of t1 and t2.
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'acc-q');
    PERFORM forgeyard.queue_create('t2', 'acc-q');
    PERFORM forgeyard.enqueue('t1', 'acc-q', 'seed-1');
    PERFORM forgeyard.enqueue('t2', 'acc-q', 'seed-2');
END $$;

-------------------------------------------------------------------------------------------------
-- Application role: the lease API, no tables, no maintenance, no views
-------------------------------------------------------------------------------------------------
SET ROLE fy_acc_app;
SELECT results_eq($$SELECT * FROM forgeyard.lease_acquire('t1', 'app', 'app-1', '1 minute')$$,
                  $$VALUES (true, 1893456010000000::bigint, 'app-1'::text, '2030-01-01 00:01:10+00'::timestamptz)$$,
                  'usage role: lease_acquire');
SELECT is(forgeyard.lease_renew('t1', 'app', 1893456010000000, '2 minutes'), '2030-01-01 00:02:10+00'::timestamptz,
          'usage role: lease_renew');
SELECT lives_ok($$SELECT forgeyard.lease_fence('t1', 'app', 1893456010000000)$$, 'usage role: lease_fence');
SELECT is(forgeyard.lease_release('t1', 'app', 1893456010000000), true, 'usage role: lease_release');
SELECT results_eq($$SELECT * FROM forgeyard.lease_get('t1', 'seed')$$,
                  $$VALUES ('alice'::text, 1893456010000000::bigint, '2030-01-01 00:00:10+00'::timestamptz,
                            '2030-01-01 01:00:10+00'::timestamptz, 'live'::text)$$,
                  'usage role: lease_get');
SELECT is(forgeyard.now(), '2030-01-01 00:00:10+00'::timestamptz, 'usage role: forgeyard.now()');
SELECT throws_ok('SELECT * FROM forgeyard.leases', '42501', 'permission denied for table leases',
                 'usage role: SELECT forgeyard.leases is denied');
SELECT throws_ok('UPDATE forgeyard.leases SET epoch = 1', '42501', NULL, 'usage role: UPDATE forgeyard.leases is denied');
SELECT throws_ok($$INSERT INTO forgeyard.leases VALUES ('t1', 'x', 'o', 1, now(), now() + '1 day', NULL, NULL)$$, '42501', NULL,
                 'usage role: INSERT INTO forgeyard.leases is denied');
SELECT throws_ok('DELETE FROM forgeyard.leases', '42501', NULL, 'usage role: DELETE FROM forgeyard.leases is denied');
SELECT throws_ok('DELETE FROM forgeyard.tenant_bindings', '42501', NULL, 'usage role: cannot unbind itself through the table');
SELECT throws_ok($$INSERT INTO forgeyard.role_access VALUES ('fy_acc_app', 'maintenance')$$, '42501', NULL,
                 'usage role: cannot grant itself maintenance through the table');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', '42501', 'permission denied for function lease_reap',
                 'usage role: lease_reap is denied');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'acc', 'app-key', '\x01')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$, 'usage role: idem_begin');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'acc', 'app-key', 'rp', 1)$$, 'usage role: idem_checkpoint');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'acc', 'app-key', 'done', 1)$$, 'usage role: idem_complete');
SELECT results_eq($$SELECT status, attempt FROM forgeyard.idem_status('t1', 'acc', 'app-key')$$,
                  $$VALUES ('completed'::text, 1::bigint)$$, 'usage role: idem_status');
SELECT results_eq($$SELECT attempt FROM forgeyard.idem_begin('t1', 'acc', 'app-key2', '\x01')$$, $$VALUES (2::bigint)$$,
                  'usage role: idem_begin of a second key (attempt numbers come from one counter: 2)');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'acc', 'app-key2', 2)$$, 'usage role: idem_abandon');
SELECT throws_ok('SELECT forgeyard.idem_purge(10, NULL)', '42501', 'permission denied for function idem_purge',
                 'usage role: idem_purge is denied');
SELECT throws_ok('SELECT * FROM forgeyard.idempotency_keys', '42501', 'permission denied for table idempotency_keys',
                 'usage role: SELECT forgeyard.idempotency_keys is denied');
SELECT throws_ok($$UPDATE forgeyard.idempotency_keys SET status = 'completed'$$, '42501', NULL,
                 'usage role: UPDATE forgeyard.idempotency_keys is denied');
SELECT throws_ok('DELETE FROM forgeyard.idempotency_keys', '42501', NULL,
                 'usage role: DELETE FROM forgeyard.idempotency_keys is denied');
SELECT throws_ok('SELECT * FROM forgeyard.lease_status', '42501', NULL, 'usage role: lease_status is denied');
SELECT throws_ok($$SELECT forgeyard.grant_maintenance('fy_acc_app')$$, '42501', NULL, 'usage role: grant_maintenance is denied');
SELECT throws_ok($$SELECT forgeyard.unbind_tenant('fy_acc_app', 't1')$$, '42501', NULL, 'usage role: unbind_tenant is denied');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('SELECT 1')$$, '42501', NULL, 'usage role: the boundary probes are denied');
-- The queue API, but not the queue tables, sequences, views or maintenance calls.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'app-q', '{"max_messages": 10}')$$, 'usage role: queue_create');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'app-q', '{"max_attempts": 2}')$$, 'usage role: queue_alter');
SELECT results_eq($$SELECT queue FROM forgeyard.queue_list('t1')$$, $$VALUES ('acc-q'::text), ('app-q')$$, 'usage role: queue_list');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'app-q', 'hello', '00000000-0000-0000-0000-0000000000a1')$$, 'usage role: enqueue');
SELECT lives_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'app-q', '{a,b}')$$, 'usage role: enqueue_batch');
CREATE TEMP TABLE app_claims AS SELECT * FROM forgeyard.claim('t1', 'app-q', 'app-worker', 3);
SELECT results_eq('SELECT payload FROM app_claims ORDER BY msg_id', $$VALUES ('hello'::bytea), ('a'), ('b')$$, 'usage role: claim');
SELECT is(forgeyard.extend('t1', 'app-q', (SELECT min(msg_id) FROM app_claims), (SELECT claim_token FROM app_claims ORDER BY msg_id LIMIT 1),
                           '1 minute'), '2030-01-01 00:01:10+00'::timestamptz, 'usage role: extend');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'app-q', (SELECT min(msg_id) FROM app_claims), (SELECT claim_token FROM app_claims ORDER BY msg_id LIMIT 1))$$,
                'usage role: ack');
SELECT is(forgeyard.nack('t1', 'app-q', (SELECT max(msg_id) FROM app_claims), (SELECT claim_token FROM app_claims ORDER BY msg_id DESC LIMIT 1),
                         'boom', true), 'dead', 'usage role: nack');
SELECT lives_ok($$SELECT forgeyard.extend_batch('t1', 'app-q', ARRAY[(SELECT msg_id FROM app_claims ORDER BY msg_id OFFSET 1 LIMIT 1)],
                                                ARRAY[(SELECT claim_token FROM app_claims ORDER BY msg_id OFFSET 1 LIMIT 1)], '1 minute')$$,
                'usage role: extend_batch');
SELECT results_eq($$SELECT outcome FROM forgeyard.nack_batch('t1', 'app-q', ARRAY[(SELECT msg_id FROM app_claims ORDER BY msg_id OFFSET 1 LIMIT 1)],
                                                            ARRAY[(SELECT claim_token FROM app_claims ORDER BY msg_id OFFSET 1 LIMIT 1)], 'again')$$,
                  $$VALUES ('retry'::text)$$, 'usage role: nack_batch');
SELECT lives_ok($$SELECT forgeyard.ack_batch('t1', 'app-q', '{}', '{}')$$, 'usage role: ack_batch');
SELECT lives_ok($$SELECT * FROM forgeyard.ack_and_claim('t1', 'app-q', 'app-worker', '{}', '{}', 1, '1 second')$$, 'usage role: ack_and_claim');
SELECT results_eq($$SELECT ready + delayed + in_flight, dead FROM forgeyard.queue_stats('t1', 'app-q')$$, $$VALUES (1::bigint, 1::bigint)$$,
                  'usage role: queue_stats');
SELECT is((SELECT count(*) FROM forgeyard.dead_list('t1', 'app-q')), 1::bigint, 'usage role: dead_list');
SELECT is(forgeyard.dead_redrive('t1', 'app-q'), 0, 'usage role: dead_redrive');
SELECT is(forgeyard.dead_purge('t1', 'app-q'), 1, 'usage role: dead_purge');
SELECT is(forgeyard.inbox_accept('t1', 'app-worker', '00000000-0000-0000-0000-0000000000a1'), true, 'usage role: inbox_accept');
SELECT is(forgeyard.queue_drop('t1', 'app-q'), true, 'usage role: queue_drop');
SELECT throws_ok('SELECT * FROM forgeyard.maintain()', '42501', 'permission denied for function maintain', 'usage role: maintain is denied');
SELECT throws_ok('SELECT forgeyard.inbox_purge()', '42501', 'permission denied for function inbox_purge', 'usage role: inbox_purge is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.claim_plan('t1', 'acc-q')$$, '42501', 'permission denied for function claim_plan',
                 'usage role: claim_plan is denied');
SELECT throws_ok('SELECT * FROM forgeyard.messages', '42501', 'permission denied for table messages',
                 'usage role: SELECT forgeyard.messages is denied');
SELECT throws_ok($$UPDATE forgeyard.messages SET state = 'acked'$$, '42501', NULL, 'usage role: UPDATE forgeyard.messages is denied');
SELECT throws_ok('UPDATE forgeyard.queue_releases SET released_messages = released_messages + 1', '42501', NULL,
                 'usage role: UPDATE forgeyard.queue_releases is denied (the bound cannot be bypassed)');
SELECT throws_ok($$INSERT INTO forgeyard.queue_release_deltas SELECT 't1', 'acc-q', 0, 1, 1, 1$$, '42501', NULL,
                 'usage role: INSERT INTO forgeyard.queue_release_deltas is denied (the bound cannot be bypassed)');
SELECT throws_ok('DELETE FROM forgeyard.queue_admit_deltas', '42501', NULL,
                 'usage role: DELETE FROM forgeyard.queue_admit_deltas is denied (the bound cannot be bypassed)');
SELECT throws_ok('DELETE FROM forgeyard.inbox', '42501', NULL, 'usage role: DELETE FROM forgeyard.inbox is denied');
SELECT throws_ok($$SELECT nextval('forgeyard.claim_tokens')$$, '42501', NULL, 'usage role: nextval of claim_tokens is denied');
SELECT throws_ok('SELECT * FROM forgeyard.queue_depth', '42501', NULL, 'usage role: queue_depth is denied');
SELECT throws_ok('SELECT * FROM forgeyard.queue_overview', '42501', NULL, 'usage role: queue_overview is denied');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- Maintenance role: the API plus lease_reap
-------------------------------------------------------------------------------------------------
SET ROLE fy_acc_maint;
SELECT results_eq($$SELECT tenant, resource, holder FROM forgeyard.lease_reap(1, NULL)$$,
                  $$VALUES ('t1'::text, 'expired'::text, 'carl'::text)$$, 'maintenance role: lease_reap across tenants');
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t1', 'maint', 'm-1', '1 minute')$$,
                  $$VALUES (true, 'm-1'::text)$$, 'maintenance role: lease_acquire too');
SELECT throws_ok('SELECT * FROM forgeyard.leases', '42501', NULL, 'maintenance role: SELECT forgeyard.leases is denied');
SELECT throws_ok('UPDATE forgeyard.leases SET reaped_at = NULL', '42501', NULL, 'maintenance role: UPDATE forgeyard.leases is denied');
SELECT is(forgeyard.idem_purge(10, NULL), 0, 'maintenance role: idem_purge across tenants (nothing expired yet)');
SELECT results_eq($$SELECT status FROM forgeyard.idem_begin('t2', 'acc', 'maint-key', '\x01')$$, $$VALUES ('started'::text)$$,
                  'maintenance role: idem_begin too');
SELECT throws_ok('DELETE FROM forgeyard.idempotency_keys', '42501', NULL,
                 'maintenance role: DELETE FROM forgeyard.idempotency_keys is denied');
SELECT throws_ok('SELECT * FROM forgeyard.lease_status', '42501', NULL, 'maintenance role: lease_status is denied');
SELECT results_eq($$SELECT task FROM forgeyard.maintain()$$,
                  $$VALUES ('idempotency_keys'::text), ('queue_events'), ('acked_messages'), ('dead_letters'), ('inbox'), ('workflow_runs'), ('schedules'), ('release_deltas'), ('queue_lanes'), ('admit_deltas'), ('lane_segments'), ('usage_segments')$$,
                  'maintenance role: maintain() across tenants');
SELECT is(forgeyard.inbox_purge(), 0, 'maintenance role: inbox_purge across tenants');
SELECT matches((SELECT string_agg(plan, E'\n') FROM forgeyard.claim_plan('t2', 'acc-q')), 'Index Scan using messages_claim',
               'maintenance role: claim_plan');
SELECT lives_ok($$SELECT forgeyard.enqueue('t2', 'acc-q', 'from maint')$$, 'maintenance role: the queue API too');
SELECT throws_ok('SELECT * FROM forgeyard.messages', '42501', NULL, 'maintenance role: SELECT forgeyard.messages is denied');
SELECT throws_ok('DELETE FROM forgeyard.queue_events', '42501', NULL, 'maintenance role: DELETE FROM forgeyard.queue_events is denied');
SELECT throws_ok('SELECT * FROM forgeyard.queue_overview', '42501', NULL, 'maintenance role: queue_overview is denied');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- Inspection role: the views, nothing else
-------------------------------------------------------------------------------------------------
SET ROLE fy_acc_insp;
SELECT results_eq($$SELECT tenant_id, resource, state FROM forgeyard.lease_status WHERE resource IN ('seed', 'expired') ORDER BY 1, 2$$,
                  $$VALUES ('t1'::text, 'expired'::text, 'reaped'::text), ('t1', 'seed', 'live'), ('t2', 'seed', 'live')$$,
                  'inspection role: lease_status shows every tenant while unbound');
SELECT is(forgeyard.now(), '2030-01-01 00:00:10+00'::timestamptz, 'inspection role: forgeyard.now()');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t1', 'insp', 'i', '1 minute')$$, '42501',
                 'permission denied for function lease_acquire', 'inspection role: lease_acquire is denied');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t1', 'seed', 1893456010000000, '1 minute')$$, '42501', NULL,
                 'inspection role: lease_renew is denied');
SELECT throws_ok($$SELECT forgeyard.lease_release('t1', 'seed', 1893456010000000)$$, '42501', NULL,
                 'inspection role: lease_release is denied');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t1', 'seed', 1893456010000000)$$, '42501', NULL,
                 'inspection role: lease_fence is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t1', 'seed')$$, '42501', 'permission denied for function lease_get',
                 'inspection role: lease_get is denied');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', '42501', NULL, 'inspection role: lease_reap is denied');
SELECT throws_ok('SELECT * FROM forgeyard.leases', '42501', NULL, 'inspection role: SELECT forgeyard.leases is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'acc', 'insp-key', '\x01')$$, '42501',
                 'permission denied for function idem_begin', 'inspection role: idem_begin is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_status('t1', 'acc', 'app-key')$$, '42501', NULL,
                 'inspection role: idem_status is denied');
SELECT throws_ok('SELECT forgeyard.idem_purge()', '42501', NULL, 'inspection role: idem_purge is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.cas_get(NULL, '{}')$$, '42501', 'permission denied for function cas_get',
                 'inspection role: cas_get is denied');
SELECT throws_ok($$SELECT forgeyard.cas_update(NULL, '{}', 1, '{}')$$, '42501', NULL, 'inspection role: cas_update is denied');
SELECT throws_ok('SELECT * FROM forgeyard.idempotency_keys', '42501', NULL,
                 'inspection role: SELECT forgeyard.idempotency_keys is denied');
SELECT results_eq($$SELECT tenant_id, queue, admitted_messages FROM forgeyard.queue_overview WHERE queue = 'acc-q' ORDER BY 1$$,
                  $$VALUES ('t1'::text, 'acc-q'::text, 1::numeric), ('t2', 'acc-q', 2)$$,
                  'inspection role: queue_overview shows every tenant''s queues while unbound');
SELECT results_eq($$SELECT tenant_id, state, messages FROM forgeyard.queue_depth WHERE queue = 'acc-q' ORDER BY 1$$,
                  $$VALUES ('t1'::text, 'ready'::text, 1::bigint), ('t2', 'ready', 2)$$,
                  'inspection role: queue_depth shows every tenant''s depth while unbound');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'acc-q', 'x')$$, '42501', 'permission denied for function enqueue',
                 'inspection role: enqueue is denied');
SELECT throws_ok($$SELECT * FROM forgeyard.queue_stats('t1', 'acc-q')$$, '42501', NULL, 'inspection role: queue_stats is denied');
SELECT throws_ok('SELECT * FROM forgeyard.maintain()', '42501', NULL, 'inspection role: maintain is denied');
SELECT throws_ok('SELECT * FROM forgeyard.messages', '42501', NULL, 'inspection role: SELECT forgeyard.messages is denied');
SELECT throws_ok('SELECT * FROM forgeyard.queues', '42501', NULL, 'inspection role: SELECT forgeyard.queues is denied');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- A role with nothing: 42501 on everything (schema and function level)
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE calls (n int, call text);
INSERT INTO calls VALUES
    (1, $$SELECT * FROM forgeyard.lease_acquire('t1', 'none', 'n', '1 minute')$$),
    (2, $$SELECT forgeyard.lease_renew('t1', 'seed', 1893456010000000, '1 minute')$$),
    (3, $$SELECT forgeyard.lease_release('t1', 'seed', 1893456010000000)$$),
    (4, $$SELECT forgeyard.lease_fence('t1', 'seed', 1893456010000000)$$),
    (5, $$SELECT * FROM forgeyard.lease_get('t1', 'seed')$$),
    (6, $$SELECT * FROM forgeyard.lease_reap(10, NULL)$$),
    (7, $$SELECT forgeyard.now()$$),
    (8, $$SELECT * FROM forgeyard.lease_status$$),
    (9, $$SELECT forgeyard.bind_tenant('fy_acc_none', 't1')$$),
    (10, $$SELECT * FROM forgeyard.idem_begin('t1', 'acc', 'none-key', '\x01')$$),
    (11, $$SELECT forgeyard.idem_checkpoint('t1', 'acc', 'app-key', 'x')$$),
    (12, $$SELECT forgeyard.idem_complete('t1', 'acc', 'app-key', 'x')$$),
    (13, $$SELECT forgeyard.idem_abandon('t1', 'acc', 'app-key')$$),
    (14, $$SELECT * FROM forgeyard.idem_status('t1', 'acc', 'app-key')$$),
    (15, $$SELECT forgeyard.idem_purge(10, NULL)$$),
    (16, $$SELECT forgeyard.cas_update(NULL, '{}', 1, '{}')$$),
    (17, $$SELECT * FROM forgeyard.cas_get(NULL, '{}')$$),
    (18, $$SELECT forgeyard.enable_versioning(NULL)$$),
    (19, $$SELECT forgeyard.disable_versioning(NULL)$$),
    (20, $$SELECT * FROM forgeyard.idempotency_keys$$),
    (21, $$SELECT forgeyard.queue_create('t1', 'none-q')$$),
    (22, $$SELECT forgeyard.queue_alter('t1', 'acc-q', '{"max_attempts": 1}')$$),
    (23, $$SELECT forgeyard.queue_drop('t1', 'acc-q')$$),
    (24, $$SELECT * FROM forgeyard.queue_list('t1')$$),
    (25, $$SELECT forgeyard.enqueue('t1', 'acc-q', 'x')$$),
    (26, $$SELECT * FROM forgeyard.enqueue_batch('t1', 'acc-q', '{x}')$$),
    (27, $$SELECT * FROM forgeyard.claim('t1', 'acc-q', 'w')$$),
    (28, $$SELECT * FROM forgeyard.ack_and_claim('t1', 'acc-q', 'w', '{}', '{}')$$),
    (29, $$SELECT forgeyard.ack('t1', 'acc-q', 1, 1)$$),
    (30, $$SELECT forgeyard.ack_batch('t1', 'acc-q', '{1}', '{1}')$$),
    (31, $$SELECT forgeyard.nack('t1', 'acc-q', 1, 1, 'e')$$),
    (32, $$SELECT * FROM forgeyard.nack_batch('t1', 'acc-q', '{1}', '{1}', 'e')$$),
    (33, $$SELECT forgeyard.extend('t1', 'acc-q', 1, 1, '1 minute')$$),
    (34, $$SELECT forgeyard.extend_batch('t1', 'acc-q', '{1}', '{1}', '1 minute')$$),
    (35, $$SELECT * FROM forgeyard.queue_stats('t1', 'acc-q')$$),
    (36, $$SELECT * FROM forgeyard.dead_list('t1', 'acc-q')$$),
    (37, $$SELECT forgeyard.dead_redrive('t1', 'acc-q')$$),
    (38, $$SELECT forgeyard.dead_purge('t1', 'acc-q')$$),
    (39, $$SELECT * FROM forgeyard.claim_plan('t1', 'acc-q')$$),
    (40, $$SELECT forgeyard.inbox_accept('t1', 'c', '00000000-0000-0000-0000-000000000001')$$),
    (41, $$SELECT forgeyard.inbox_purge()$$),
    (42, $$SELECT * FROM forgeyard.maintain()$$),
    (43, $$SELECT * FROM forgeyard.queue_depth$$),
    (44, $$SELECT * FROM forgeyard.queue_overview$$),
    (45, $$SELECT * FROM forgeyard.messages$$),
    (46, $$SELECT nextval('forgeyard.message_ids')$$);
GRANT SELECT ON calls TO PUBLIC;
SET ROLE fy_acc_none;
SELECT throws_ok(call, '42501', 'permission denied for schema forgeyard', 'role with nothing: ' || call) FROM calls ORDER BY n;
RESET ROLE;
SET ROLE fy_acc_schema_only;
SELECT throws_ok(call, '42501', NULL, 'role with only schema USAGE: ' || call) FROM calls ORDER BY n;
RESET ROLE;
SELECT results_eq($$SELECT owner, epoch, released_at FROM forgeyard.leases WHERE tenant_id = 't1' AND resource = 'seed'$$,
                  $$VALUES ('alice'::text, 1893456010000000::bigint, NULL::timestamptz)$$,
                  'the refused calls changed nothing');
SELECT results_eq($$SELECT tenant_id, scope, key, status FROM forgeyard.idempotency_keys ORDER BY 1, 2, 3$$,
                  $$VALUES ('t1'::text, 'acc'::text, 'app-key'::text, 'completed'::text), ('t2', 'acc', 'maint-key', 'in_progress')$$,
                  'the refused idempotency calls created, changed and removed no key');
SELECT results_eq($$SELECT tenant_id, queue, payload, state, claim_token FROM forgeyard.messages WHERE queue = 'acc-q' ORDER BY msg_id$$,
                  $$VALUES ('t1'::text, 'acc-q'::text, 'seed-1'::bytea, 'pending'::text, NULL::bigint), ('t2', 'acc-q', 'seed-2', 'pending', NULL),
                           ('t2', 'acc-q', 'from maint', 'pending', NULL)$$,
                  'the refused queue calls enqueued, claimed and removed nothing');
SELECT results_eq($$SELECT tenant_id, queue FROM forgeyard.queues ORDER BY 1, 2$$, $$VALUES ('t1'::text, 'acc-q'::text), ('t2', 'acc-q')$$,
                  'the refused queue calls created and dropped no queue');

-------------------------------------------------------------------------------------------------
-- Tenant binding: FY040 for any other tenant, and for "all tenants"
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_app', 't1')$$, 'bind_tenant(app, t1)');
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_app', 't1')$$, 'bind_tenant again is harmless');
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_maint', 't1')$$, 'bind_tenant(maint, t1)');
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_insp', 't1')$$, 'bind_tenant(insp, t1)');

SET ROLE fy_acc_app;
SELECT results_eq($$SELECT acquired, epoch FROM forgeyard.lease_acquire('t1', 'bound', 'b-1', '1 minute')$$,
                  $$VALUES (true, 1893456010000000::bigint)$$, 'bound role: lease_acquire for its tenant');
SELECT is(forgeyard.lease_renew('t1', 'bound', 1893456010000000, '1 minute'), '2030-01-01 00:01:10+00'::timestamptz,
          'bound role: lease_renew for its tenant');
SELECT lives_ok($$SELECT forgeyard.lease_fence('t1', 'bound', 1893456010000000)$$, 'bound role: lease_fence for its tenant');
SELECT is(forgeyard.lease_release('t1', 'bound', 1893456010000000), true, 'bound role: lease_release for its tenant');
SELECT results_eq($$SELECT owner, epoch, state FROM forgeyard.lease_get('t1', 'bound')$$,
                  $$VALUES ('b-1'::text, 1893456010000000::bigint, 'released'::text)$$, 'bound role: lease_get for its tenant');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t2', 'seed', 'b-1', '1 minute')$$, 'FY040',
                 'tenant "t2" is not allowed for this role', 'bound role: lease_acquire for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t2', 'seed', 1893456000000000, '1 minute')$$, 'FY040', NULL,
                 'bound role: lease_renew for another tenant (with its real epoch) -> FY040');
SELECT throws_ok($$SELECT forgeyard.lease_release('t2', 'seed', 1893456000000000)$$, 'FY040', NULL,
                 'bound role: lease_release for another tenant -> FY040, not just false');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t2', 'seed', 1893456000000000)$$, 'FY040', NULL,
                 'bound role: lease_fence for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t2', 'new-resource', 'b-1', '1 minute')$$, 'FY040', NULL,
                 'bound role: lease_acquire of a new resource in another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', 'tenant "t2" is not allowed for this role',
                 'bound role: lease_get for another tenant -> FY040, not that tenant''s lease');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'never-leased')$$, 'FY040', NULL,
                 'bound role: lease_get of a never-leased resource in another tenant -> FY040, not an empty answer');
SELECT results_eq($$SELECT ready FROM forgeyard.queue_stats('t1', 'acc-q')$$, $$VALUES (1::bigint)$$, 'bound role: queue_stats for its tenant');
SELECT throws_ok($$SELECT forgeyard.enqueue('t2', 'acc-q', 'x')$$, 'FY040', 'tenant "t2" is not allowed for this role',
                 'bound role: enqueue for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.claim('t2', 'acc-q', 'w')$$, 'FY040', NULL, 'bound role: claim for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.queue_create('t2', 'mine')$$, 'FY040', NULL, 'bound role: queue_create for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.queue_drop('t2', 'acc-q')$$, 'FY040', NULL, 'bound role: queue_drop for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.queue_list('t2')$$, 'FY040', NULL, 'bound role: queue_list for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.inbox_accept('t2', 'c', '00000000-0000-0000-0000-000000000001')$$, 'FY040', NULL,
                 'bound role: inbox_accept for another tenant -> FY040');
RESET ROLE;
SELECT results_eq($$SELECT tenant_id, owner, epoch, expires_at, released_at FROM forgeyard.leases WHERE tenant_id = 't2'$$,
                  $$VALUES ('t2'::text, 'bob'::text, 1893456000000000::bigint, '2030-01-01 01:00:00+00'::timestamptz, NULL::timestamptz)$$,
                  'the other tenant''s lease is untouched and no row was created there');

SET ROLE fy_acc_maint;
SELECT results_eq($$SELECT tenant, resource, holder FROM forgeyard.lease_reap(10, 't1')$$,
                  $$VALUES ('t1'::text, 'expired2'::text, 'dan'::text)$$, 'bound maintenance role: lease_reap for its tenant');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', 'FY040', 'a role bound to tenants must name its tenant',
                 'bound maintenance role: lease_reap for all tenants (NULL) -> FY040');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap()', 'FY040', NULL,
                 'bound maintenance role: lease_reap() with the default (all tenants) -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_reap(10, 't2')$$, 'FY040', NULL,
                 'bound maintenance role: lease_reap for another tenant -> FY040');
SELECT is((SELECT count(*) FROM forgeyard.maintain(10, 't1')), 12::bigint, 'bound maintenance role: maintain for its tenant');
SELECT throws_ok('SELECT * FROM forgeyard.maintain()', 'FY040', 'a role bound to tenants must name its tenant',
                 'bound maintenance role: maintain() for all tenants -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.maintain(10, 't2')$$, 'FY040', NULL, 'bound maintenance role: maintain for another tenant -> FY040');
SELECT throws_ok('SELECT forgeyard.inbox_purge()', 'FY040', NULL, 'bound maintenance role: inbox_purge for all tenants -> FY040');
SELECT is(forgeyard.inbox_purge('1 day', 10, 't1'), 0, 'bound maintenance role: inbox_purge for its tenant');
SELECT throws_ok($$SELECT * FROM forgeyard.claim_plan('t2', 'acc-q')$$, 'FY040', NULL, 'bound maintenance role: claim_plan for another tenant -> FY040');
RESET ROLE;

-- lease_status shows a bound role only its tenants, even with a cheap function of its own in WHERE.
CREATE FUNCTION pg_temp.peek(tenant text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    IF tenant <> 't1' THEN RAISE EXCEPTION 'saw a row of tenant %', tenant; END IF;
    RETURN true;
END $$;
SET ROLE fy_acc_insp;
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status', $$VALUES ('t1'::text)$$,
                  'bound inspection role: lease_status shows only its tenant');
SELECT lives_ok('SELECT * FROM forgeyard.lease_status WHERE pg_temp.peek(tenant_id)',
                'bound inspection role: a function in its WHERE clause never sees another tenant''s row (security_barrier)');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.queue_depth', $$VALUES ('t1'::text)$$,
                  'bound inspection role: queue_depth shows only its tenant');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.queue_overview', $$VALUES ('t1'::text)$$,
                  'bound inspection role: queue_overview shows only its tenant');
SELECT lives_ok('SELECT * FROM forgeyard.queue_depth WHERE pg_temp.peek(tenant_id)',
                'bound inspection role: queue_depth never shows a WHERE function another tenant''s row');
SELECT lives_ok('SELECT * FROM forgeyard.queue_overview WHERE pg_temp.peek(tenant_id)',
                'bound inspection role: queue_overview never shows a WHERE function another tenant''s row');
RESET ROLE;
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1', $$VALUES ('t1'::text), ('t2')$$,
                  'an unbound role (the superuser) sees every tenant');

-- Several bindings, unbinding.
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_app', 't3')$$, 'bind_tenant(app, t3): a second tenant');
SET ROLE fy_acc_app;
SELECT results_eq($$SELECT acquired FROM forgeyard.lease_acquire('t3', 'r', 'b-1', '1 minute')$$, $$VALUES (true)$$,
                  'bound to t1 and t3: t3 works');
SELECT results_eq($$SELECT acquired FROM forgeyard.lease_acquire('t1', 'r', 'b-1', '1 minute')$$, $$VALUES (true)$$,
                  'bound to t1 and t3: t1 works');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t2', 'r', 'b-1', '1 minute')$$, 'FY040', NULL,
                 'bound to t1 and t3: t2 is still denied');
RESET ROLE;
SELECT is(forgeyard.unbind_tenant('fy_acc_app', 't1'), true, 'unbind_tenant(app, t1) returns true');
SELECT is(forgeyard.unbind_tenant('fy_acc_app', 't1'), false, 'unbind_tenant(app, t1) again returns false');
SET ROLE fy_acc_app;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t1', 'r', 'b-1', '1 minute')$$, 'FY040', NULL,
                 'still bound to t3: t1 is now denied');
RESET ROLE;
SELECT is(forgeyard.unbind_tenant('fy_acc_app', 't3'), true, 'unbind_tenant(app, t3)');
SET ROLE fy_acc_app;
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t2', 'seed', 'b-1', '1 minute')$$,
                  $$VALUES (false, 'bob'::text)$$, 'no bindings left: the role is unrestricted (t2 answers with its holder)');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- revoke_access takes everything back
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.revoke_access('fy_acc_app')$$, 'revoke_access(app)');
SELECT is_empty($$SELECT 1 FROM forgeyard.role_access WHERE role_id = 'fy_acc_app'::regrole$$,
                'revoke_access removes the role''s access records');
SELECT ok(NOT has_function_privilege('fy_acc_app', 'forgeyard.lease_acquire(text, text, text, interval)', 'EXECUTE')
          AND NOT has_schema_privilege('fy_acc_app', 'forgeyard', 'USAGE'),
          'revoke_access removes EXECUTE and schema USAGE');
SET ROLE fy_acc_app;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t1', 'r', 'b-1', '1 minute')$$, '42501', NULL,
                 'after revoke_access: lease_acquire is denied');
RESET ROLE;
SELECT ok(has_function_privilege('fy_acc_maint', 'forgeyard.lease_acquire(text, text, text, interval)', 'EXECUTE'),
          'revoking one role leaves the others alone');

-------------------------------------------------------------------------------------------------
-- Bindings follow role membership: a role that is a member (directly or transitively) of a bound
-- role is bound, to the union of the tenants bound to itself and to every role it is a member of.
-- Same rule in check_tenant (every call) and in the lease_status view.
-------------------------------------------------------------------------------------------------
-- Group roles carry the access and the bindings; the login roles only their memberships.
CREATE ROLE fy_acc_grp1;                                   -- bound to t1
CREATE ROLE fy_acc_grp2;                                   -- bound to t2
CREATE ROLE fy_acc_team IN ROLE fy_acc_grp1;               -- member of grp1, bound to nothing itself
CREATE ROLE fy_acc_login LOGIN IN ROLE fy_acc_grp1;        -- direct member of grp1
CREATE ROLE fy_acc_deep LOGIN IN ROLE fy_acc_team;         -- member of grp1 only through fy_acc_team
DO $$ BEGIN
    PERFORM forgeyard.grant_maintenance('fy_acc_grp1');
    PERFORM forgeyard.grant_inspect('fy_acc_grp1');
    PERFORM forgeyard.grant_maintenance('fy_acc_grp2');
    PERFORM forgeyard.grant_inspect('fy_acc_grp2');
END $$;
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_grp1', 't1')$$, 'bind_tenant(grp1, t1)');
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_grp2', 't2')$$, 'bind_tenant(grp2, t2)');
SELECT is_empty(
    $$SELECT role_id FROM forgeyard.tenant_bindings
       WHERE role_id IN ('fy_acc_login'::regrole, 'fy_acc_deep'::regrole, 'fy_acc_team'::regrole)$$,
    'the login roles and fy_acc_team have no binding of their own (any restriction below comes from membership)');

-- Expired grants in three tenants for the reapers, and a fourth tenant.
SET forgeyard.now_override = '2030-01-01 00:00:05+00';
DO $$ BEGIN
    PERFORM forgeyard.lease_acquire('t1', 'grp-expired', 'x', '1 second');
    PERFORM forgeyard.lease_acquire('t2', 'grp-expired', 'y', '1 second');
    PERFORM forgeyard.lease_acquire('t3', 'grp-expired', 'z', '1 second');
    PERFORM forgeyard.lease_acquire('t4', 'seed', 'dora', '1 hour');
END $$;
SET forgeyard.now_override = '2030-01-01 00:00:10+00';

-- A login role that is a member of a group bound to t1.
SET ROLE fy_acc_login;
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t1', 'grp', 'login-1', '1 minute')$$,
                  $$VALUES (true, 'login-1'::text)$$, 'member of a group bound to t1: lease_acquire for t1');
SELECT results_eq($$SELECT owner, state FROM forgeyard.lease_get('t1', 'seed')$$, $$VALUES ('alice'::text, 'live'::text)$$,
                  'member of a group bound to t1: lease_get for t1');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t2', 'grp', 'login-1', '1 minute')$$, 'FY040',
                 'tenant "t2" is not allowed for this role', 'member of a group bound to t1: lease_acquire for t2 -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', NULL,
                 'member of a group bound to t1: lease_get for t2 -> FY040');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t2', 'seed', 1893456000000000, '1 minute')$$, 'FY040', NULL,
                 'member of a group bound to t1: lease_renew for t2 (with its real epoch) -> FY040');
SELECT throws_ok($$SELECT forgeyard.lease_release('t2', 'seed', 1893456000000000)$$, 'FY040', NULL,
                 'member of a group bound to t1: lease_release for t2 -> FY040');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t2', 'seed', 1893456000000000)$$, 'FY040', NULL,
                 'member of a group bound to t1: lease_fence for t2 -> FY040');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', 'FY040', 'a role bound to tenants must name its tenant',
                 'member of a group bound to t1: lease_reap for all tenants (NULL) -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_reap(10, 't2')$$, 'FY040', NULL,
                 'member of a group bound to t1: lease_reap for t2 -> FY040');
SELECT results_eq($$SELECT tenant, resource, holder FROM forgeyard.lease_reap(10, 't1')$$,
                  $$VALUES ('t1'::text, 'grp-expired'::text, 'x'::text)$$,
                  'member of a group bound to t1: lease_reap for t1');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status', $$VALUES ('t1'::text)$$,
                  'member of a group bound to t1: lease_status shows only t1');
SELECT lives_ok('SELECT * FROM forgeyard.lease_status WHERE pg_temp.peek(tenant_id)',
                'member of a group bound to t1: a function in its WHERE clause never sees another tenant''s row');
RESET ROLE;
SELECT results_eq(
    $$SELECT resource, owner, epoch, released_at, reaped_at FROM forgeyard.leases WHERE tenant_id = 't2' ORDER BY resource$$,
    $$VALUES ('grp-expired'::text, 'y'::text, 1893456005000000::bigint, NULL::timestamptz, NULL::timestamptz),
             ('seed', 'bob', 1893456000000000, NULL, NULL)$$,
    'the member''s refused calls left t2 alone (no new row, nothing released or reaped)');

-- Transitive: fy_acc_deep -> fy_acc_team -> fy_acc_grp1 (bound to t1).
SET ROLE fy_acc_deep;
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t1', 'deep', 'deep-1', '1 minute')$$,
                  $$VALUES (true, 'deep-1'::text)$$, 'member of a member of a group bound to t1 (transitive): t1 works');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', NULL,
                 'transitive member of a group bound to t1: lease_get for t2 -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t3', 'deep', 'deep-1', '1 minute')$$, 'FY040', NULL,
                 'transitive member of a group bound to t1: lease_acquire for t3 -> FY040');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', 'FY040', NULL,
                 'transitive member of a group bound to t1: lease_reap for all tenants -> FY040');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status', $$VALUES ('t1'::text)$$,
                  'transitive member of a group bound to t1: lease_status shows only t1');
RESET ROLE;

-- Two groups: bound to t1 and t2, the member may use both, and nothing else.
GRANT fy_acc_grp2 TO fy_acc_login;
SET ROLE fy_acc_login;
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t2', 'grp', 'login-1', '1 minute')$$,
                  $$VALUES (true, 'login-1'::text)$$, 'member of groups bound to t1 and t2: t2 works');
SELECT results_eq($$SELECT owner FROM forgeyard.lease_get('t1', 'grp')$$, $$VALUES ('login-1'::text)$$,
                  'member of groups bound to t1 and t2: t1 still works');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t3', 'grp-expired')$$, 'FY040', 'tenant "t3" is not allowed for this role',
                 'member of groups bound to t1 and t2: t3 -> FY040');
SELECT throws_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', 'FY040', NULL,
                 'member of groups bound to t1 and t2: lease_reap for all tenants -> FY040');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1', $$VALUES ('t1'::text), ('t2')$$,
                  'member of groups bound to t1 and t2: lease_status shows exactly t1 and t2');
RESET ROLE;
SET ROLE fy_acc_deep;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', NULL,
                 'grp2 is fy_acc_login''s group, not fy_acc_team''s: fy_acc_deep still gets FY040 for t2');
RESET ROLE;

-- The member's own binding joins the union.
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_acc_login', 't4')$$, 'bind_tenant(login, t4): the member itself');
SET ROLE fy_acc_login;
SELECT results_eq($$SELECT owner, state FROM forgeyard.lease_get('t4', 'seed')$$, $$VALUES ('dora'::text, 'live'::text)$$,
                  'bound to t4 itself and to t1, t2 through groups: t4 works');
SELECT results_eq($$SELECT owner FROM forgeyard.lease_get('t2', 'grp')$$, $$VALUES ('login-1'::text)$$,
                  'bound to t4 itself and to t1, t2 through groups: t2 works');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t3', 'grp-expired')$$, 'FY040', NULL,
                 'bound to t4 itself and to t1, t2 through groups: t3 -> FY040');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1', $$VALUES ('t1'::text), ('t2'), ('t4')$$,
                  'lease_status shows the union: t1, t2 (groups) and t4 (own binding)');
RESET ROLE;

-- A superuser bound to nothing and a member of no bound role is unrestricted.
SELECT is_empty($$SELECT 1 FROM forgeyard.tenant_bindings WHERE role_id = current_user::regrole$$,
                'the superuser running this file is bound to nothing itself');
SELECT results_eq($$SELECT owner, state FROM forgeyard.lease_get('t3', 'grp-expired')$$, $$VALUES ('z'::text, 'expired'::text)$$,
                  'unbound superuser: lease_get for t3, which no role around it is bound to');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1',
                  $$VALUES ('t1'::text), ('t2'), ('t3'), ('t4')$$,
                  'unbound superuser: lease_status shows every tenant');
SELECT results_eq($$SELECT tenant, resource FROM forgeyard.lease_reap(10, NULL) ORDER BY tenant$$,
                  $$VALUES ('t2'::text, 'grp-expired'::text), ('t3', 'grp-expired')$$,
                  'unbound superuser: lease_reap for all tenants');
-- No superuser shortcut: a superuser that is a member of a bound group is bound.
CREATE ROLE fy_acc_su SUPERUSER IN ROLE fy_acc_grp1;
SET ROLE fy_acc_su;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', NULL,
                 'a superuser that is a member of a group bound to t1: t2 -> FY040');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status', $$VALUES ('t1'::text)$$,
                  'a superuser that is a member of a group bound to t1: lease_status shows only t1');
RESET ROLE;
REVOKE fy_acc_grp1 FROM fy_acc_su;
SET ROLE fy_acc_su;
SELECT results_eq($$SELECT owner FROM forgeyard.lease_get('t2', 'seed')$$, $$VALUES ('bob'::text)$$,
                  'membership revoked: that superuser is unrestricted again');
RESET ROLE;

-- Unbinding a group frees its members once nothing else binds them.
SELECT is(forgeyard.unbind_tenant('fy_acc_grp2', 't2'), true, 'unbind_tenant(grp2, t2)');
SET ROLE fy_acc_login;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'seed')$$, 'FY040', NULL,
                 'grp2 unbound, still bound through grp1 and itself: t2 -> FY040');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1', $$VALUES ('t1'::text), ('t4')$$,
                  'grp2 unbound: lease_status shows t1 and t4');
RESET ROLE;
SELECT is(forgeyard.unbind_tenant('fy_acc_login', 't4'), true, 'unbind_tenant(login, t4)');
SET ROLE fy_acc_login;
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t4', 'seed')$$, 'FY040', NULL,
                 'own binding gone, still bound through grp1: t4 -> FY040');
RESET ROLE;
SELECT is(forgeyard.unbind_tenant('fy_acc_grp1', 't1'), true, 'unbind_tenant(grp1, t1): nothing binds the members any more');
SET ROLE fy_acc_login;
SELECT results_eq($$SELECT owner FROM forgeyard.lease_get('t3', 'r')$$, $$VALUES ('b-1'::text)$$,
                  'all unbound: the member is unrestricted (t3)');
SELECT lives_ok('SELECT * FROM forgeyard.lease_reap(10, NULL)', 'all unbound: the member may reap all tenants');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.lease_status ORDER BY 1',
                  $$VALUES ('t1'::text), ('t2'), ('t3'), ('t4')$$, 'all unbound: the member sees every tenant');
RESET ROLE;
SET ROLE fy_acc_deep;
SELECT results_eq($$SELECT owner FROM forgeyard.lease_get('t2', 'seed')$$, $$VALUES ('bob'::text)$$,
                  'all unbound: the transitive member is unrestricted too (t2)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
