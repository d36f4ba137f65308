-- Workflow schedules (docs/workflows.md#schedules): cron specs in a time zone and intervals, each
-- fire one run with run_key '<schedule>@<fire time>', missed fires started up to catch_up and the
-- rest skipped and counted, maintain() ticking, tenants, and bad input. Time is moved with
-- forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(38);

SET TIME ZONE 'UTC';
\ir lib/err.sql

SET forgeyard.now_override = '2030-01-01 00:07:00+00';

SELECT ok((SELECT bool_and(obj_description(p.oid, 'pg_proc') IS NOT NULL AND NOT has_function_privilege('public', p.oid, 'EXECUTE'))
             FROM pg_proc p WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.proname LIKE 'schedule\_%'),
          'every schedule function has a COMMENT and is not executable by PUBLIC');
SELECT is((SELECT count(*)::int FROM pg_proc p WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.proname LIKE 'schedule\_%'),
          4, 'four schedule functions');

-- Bad input
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '* * * *')$$))[1:2],
          ARRAY['22023', 'schedule spec ''* * * *'' is not valid: cron takes 5 fields, not 4'], 'four cron fields are 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '61 * * * *')$$))[1], '22023',
          'a minute of 61 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '@every 0s')$$))[1], '22023',
          'an interval under a second is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '0 0 30 2 *')$$))[1:2],
          ARRAY['22023', 'the schedule never fires within 5 years'], 'a spec that never fires is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '@daily', '{"timezone": "Mars/Olympus"}')$$))[1],
          '22023', 'an unknown time zone is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '@daily', '{"catch_up": 1001}')$$))[1],
          '22023', 'catch_up over 1000 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, '@daily', '{"colour": "red"}')$$))[1:2],
          ARRAY['22023', 'unknown schedule option colour (the options are timezone, catch_up and input)'], 'an unknown option is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 0, '@daily')$$))[1], '22023', 'version 0 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 's', 'report', 1, NULL)$$))[1], '22004', 'a NULL spec is 22004');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_schedules), 0, 'bad input created nothing');

-- An interval: fires at its multiples
SELECT lives_ok($$SELECT forgeyard.schedule_create('t1', 'quarter', 'report', 1, '@every 15m', '{"input": {"kind": "q"}}')$$,
                'a schedule every 15 minutes');
SELECT results_eq($$SELECT next_fire, last_fire, fires, skipped FROM forgeyard.schedule_list('t1')$$,
                  $$VALUES ('2030-01-01 00:15:00+00'::timestamptz, NULL::timestamptz, 0::bigint, 0::bigint)$$,
                  'its next fire is the next quarter hour');
SELECT lives_ok($$SELECT forgeyard.schedule_create('t1', 'quarter', 'report', 1, '@every 15m', '{"input": {"kind": "q"}}')$$,
                'the same definition again is a no-op');
SELECT is((pg_temp.err($$SELECT forgeyard.schedule_create('t1', 'quarter', 'report', 1, '@every 10m')$$))[1], '42710',
          'another definition under the name is 42710');
SELECT is(forgeyard.schedule_tick(), 0, 'nothing is due before 00:15');
SET forgeyard.now_override = '2030-01-01 00:15:00+00';
SELECT is(forgeyard.schedule_tick('t1'), 1, 'at 00:15 one run starts');
SELECT results_eq($$SELECT run_key, workflow, version, input FROM forgeyard.wf_runs$$,
                  $$VALUES ('quarter@2030-01-01T00:15:00.000000Z'::text, 'report'::text, 1, '{"kind": "q"}'::jsonb)$$,
                  'its run_key is the schedule and the fire time, with the schedule''s definition and input');
SELECT is(forgeyard.schedule_tick(), 0, 'a second tick starts nothing');
SET forgeyard.now_override = '2030-01-01 02:05:00+00';
SELECT is(forgeyard.schedule_tick(), 1, 'after seven missed fires, one run starts (catch_up 0)');
SELECT results_eq($$SELECT next_fire, last_fire, fires, skipped FROM forgeyard.schedule_list('t1')$$,
                  $$VALUES ('2030-01-01 02:15:00+00'::timestamptz, '2030-01-01 02:00:00+00'::timestamptz, 2::bigint, 6::bigint)$$,
                  'the newest fire started, six skipped and counted');

-- catch_up starts the newest missed fires too, oldest first
SELECT lives_ok($$SELECT forgeyard.schedule_create('t1', 'hourly', 'sweep', 2, '@hourly', '{"catch_up": 2}')$$,
                'an hourly schedule that catches up two missed fires');
SET forgeyard.now_override = '2030-01-01 08:30:00+00';
SELECT is(forgeyard.schedule_tick('t1'), 4, 'three hourly runs and one quarter-hour run start');
SELECT results_eq($$SELECT run_key FROM forgeyard.wf_runs WHERE workflow = 'sweep' ORDER BY created_at, run_key$$,
                  $$VALUES ('hourly@2030-01-01T06:00:00.000000Z'::text), ('hourly@2030-01-01T07:00:00.000000Z'),
                           ('hourly@2030-01-01T08:00:00.000000Z')$$, 'the newest three of six due fires');
SELECT results_eq($$SELECT fires, skipped FROM forgeyard.schedule_list('t1') WHERE schedule = 'hourly'$$,
                  $$VALUES (3::bigint, 3::bigint)$$, 'three started, three skipped');

-- Cron in a time zone, across a spring-forward: 02:30 does not exist in Berlin on 2030-03-31
SET forgeyard.now_override = '2030-03-29 12:00:00+00';
SELECT lives_ok($$SELECT forgeyard.schedule_create('t1', 'berlin', 'report', 1, '30 2 * * *', '{"timezone": "Europe/Berlin"}')$$,
                'a schedule at 02:30 Berlin time');
SELECT is((SELECT next_fire FROM forgeyard.schedule_list('t1') WHERE schedule = 'berlin'), '2030-03-30 01:30:00+00'::timestamptz,
          '02:30 CET is 01:30 UTC');
SET forgeyard.now_override = '2030-03-30 02:00:00+00';
SELECT is(forgeyard.schedule_tick('t1') > 0, true, 'it fires');
SELECT is((SELECT next_fire FROM forgeyard.schedule_list('t1') WHERE schedule = 'berlin'), '2030-04-01 00:30:00+00'::timestamptz,
          'the next fire skips the day whose 02:30 does not exist, and is 02:30 CEST');

-- maintain() ticks
SET forgeyard.now_override = '2030-04-01 00:31:00+00';
SELECT cmp_ok((SELECT "rows" FROM forgeyard.maintain() WHERE task = 'schedules'), '>=', 1::bigint,
              'maintain() starts the due runs and reports them as task schedules');
SELECT is(forgeyard.schedule_tick(), 0, 'after which nothing is due');

-- Tenants, drop
SELECT is((SELECT count(*)::int FROM forgeyard.schedule_list('t2')), 0, 'tenant t2 sees none of t1''s schedules');
SELECT ok(NOT forgeyard.schedule_drop('t2', 'quarter'), 'nor drops them');
SELECT ok(forgeyard.schedule_drop('t1', 'quarter'), 'a drop');
SELECT ok(NOT forgeyard.schedule_drop('t1', 'quarter'), 'a second drop is false');
SET forgeyard.now_override = '2030-04-01 09:00:00+00';
SELECT is((SELECT count(*)::int FROM forgeyard.wf_runs WHERE run_key LIKE 'quarter@%'), 5, 'the dropped schedule''s runs stay');
SELECT is(forgeyard.schedule_tick(), 3, 'and it starts no more (the hourly one catches up three)');

SELECT * FROM finish();
ROLLBACK;
