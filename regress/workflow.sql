-- Durable workflows (docs/workflows.md): runs started in the caller's transaction and idempotent by
-- run_key, handed out through the queue of their definition to workers that declared it, owned
-- under an epoch that fences every journal write (FY001 for a stale owner, with nothing changed),
-- positional steps with replay and nondeterminism (FY060), park and retry, step failures with the
-- queue's retries, complete, fail, cancel, deadlines, takeovers, tenant isolation, the views, and
-- bad input. Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(264);

SET TIME ZONE 'UTC';
\ir lib/err.sql

SET forgeyard.now_override = '2030-01-01 00:00:00+00';

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb)'::regprocedure),
          $$tenant text, workflow text, version integer, run_key text, input jsonb DEFAULT '{}'::jsonb, options jsonb DEFAULT '{}'::jsonb$$,
          'workflow_start(tenant, workflow, version, run_key, input = {}, options = {})');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.workflow_claim(text, text, text[], integer, interval)'::regprocedure),
          'TABLE(run_id uuid, workflow text, version integer, epoch bigint, state text, input jsonb)',
          'workflow_claim returns (run_id, workflow, version, epoch, state, input)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.workflow_step(text, uuid, bigint, text, interval, integer)'::regprocedure),
          'TABLE(status text, result jsonb, idempotency_key text)', 'workflow_step returns (status, result, idempotency_key)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.workflow_step(text, uuid, bigint, text, interval, integer)'::regprocedure),
          'tenant text, run_id uuid, epoch bigint, step text, timeout interval DEFAULT NULL::interval, "position" integer DEFAULT NULL::integer',
          'workflow_step(tenant, run_id, epoch, step, timeout = NULL, position = NULL)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer)'::regprocedure),
          'text', 'workflow_step_fail returns retry or failed');
SELECT ok((SELECT bool_and(obj_description(p.oid, 'pg_proc') IS NOT NULL AND NOT has_function_privilege('public', p.oid, 'EXECUTE'))
             FROM pg_proc p WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.proname LIKE 'workflow\_%'),
          'every workflow function has a COMMENT and is not executable by PUBLIC');
SELECT is((SELECT count(*)::int FROM pg_proc p WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.proname LIKE 'workflow\_%'),
          20, 'twenty workflow functions');

-------------------------------------------------------------------------------------------------
-- Start: in the caller's transaction, idempotent by run_key
-------------------------------------------------------------------------------------------------
SAVEPOINT before_start;
DO $$ BEGIN PERFORM forgeyard.workflow_start('t1', 'order', 1, 'rolled-back', '{}'); END $$;
ROLLBACK TO SAVEPOINT before_start;
SELECT is((SELECT count(*)::int FROM forgeyard.wf_runs), 0, 'a start whose transaction rolls back leaves no run');
SELECT is((SELECT count(*)::int FROM forgeyard.messages), 0, 'and no message');

CREATE TEMP TABLE r (name text PRIMARY KEY, id uuid);
INSERT INTO r VALUES ('a', forgeyard.workflow_start('t1', 'order', 1, 'order-1', '{"sku": "x", "n": 2}'));
SELECT is(forgeyard.workflow_start('t1', 'order', 1, 'order-1', '{"n": 2, "sku": "x"}'), (SELECT id FROM r WHERE name = 'a'),
          'the same run_key and input return the first run');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'order-1', '{"sku": "y"}')$$))[1], 'FY011',
          'the same run_key with other input is FY011');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 2, 'order-1', '{"sku": "x", "n": 2}')$$))[1], 'FY011',
          'the same run_key for another version is FY011');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_runs), 1, 'one run');
SELECT results_eq($$SELECT state, workflow, version, owner, epoch FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'a'))$$,
                  $$VALUES ('pending'::text, 'order'::text, 1, NULL::text, 0::bigint)$$, 'a new run is pending at epoch 0');
SELECT ok(EXISTS (SELECT FROM forgeyard.queue_list('t1') WHERE queue = '_wf.order@1'),
          'the definition''s queue _wf.order@1 was created');
SELECT is((SELECT count(*)::int FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = '_wf.order@1' AND state = 'pending'), 1,
          'and holds one message for the run');
SELECT is(forgeyard.workflow_start('t2', 'order', 1, 'order-1', '{}') <> (SELECT id FROM r WHERE name = 'a'), true,
          'run keys are per tenant');

SELECT is((pg_temp.err($$SELECT forgeyard.queue_create('t1', '_wf.mine@1')$$))[1], '22023', 'queue_create refuses "_wf." names');
SELECT is((pg_temp.err($$SELECT forgeyard.queue_drop('t1', '_wf.order@1')$$))[1], '22023', 'queue_drop refuses them too');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', '_wf.order@1', '{"max_attempts": 3}')$$,
                'queue_alter may change a definition''s queue options');

-- Bad input
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 0, 'k', '{}')$$))[1], '22023', 'version 0 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', repeat('w', 101), 1, 'k', '{}')$$))[1], '22001',
          'a workflow name over 100 bytes is 22001');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, '', '{}')$$))[1], '22023', 'an empty run_key is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', NULL)$$))[1], '22004', 'a NULL input is 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}', '{"colour": "red"}')$$))[1:2],
          ARRAY['22023', 'unknown workflow option colour (the options are deadline, priority, parent and retention)'], 'an unknown option is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}', '{"deadline": "soon"}')$$))[1], '22023',
          'a deadline that is no interval is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}', '{"priority": "urgent"}')$$))[1], '22023',
          'an unknown priority class is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}', '{"parent": "00000000-0000-4000-8000-000000000001"}')$$))[1],
          '42704', 'an unknown parent run is 42704');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}', '[]')$$))[1], '22023',
          'options that are no object are 22023');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_runs WHERE tenant_id = 't1'), 1, 'no refused start left a run');

-------------------------------------------------------------------------------------------------
-- Claim: only declared definitions, one owner at a time
-------------------------------------------------------------------------------------------------
INSERT INTO r VALUES ('v2', forgeyard.workflow_start('t1', 'order', 2, 'order-v2', '{}'));
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w0', ARRAY['invoice@1'])), 0,
          'a worker gets nothing for a definition with no runs');
CREATE TEMP TABLE c AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['order@1'], 10, '1 minute');
SELECT results_eq($$SELECT run_id, workflow, version, state, input FROM c$$,
                  $$SELECT id, 'order'::text, 1, 'running'::text, '{"n": 2, "sku": "x"}'::jsonb FROM r WHERE name = 'a'$$,
                  'a worker that declared order@1 gets the order@1 run, not the order@2 one, with its input');
SELECT is((SELECT epoch FROM c), (SELECT claim_token FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = '_wf.order@1' AND state = 'pending'),
          'its epoch is the claim token of the run''s delivery');
SELECT results_eq($$SELECT state, owner FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'a'))$$,
                  $$VALUES ('running'::text, 'w1'::text)$$, 'the run is running, owned by w1');
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['order@1'])), 0,
          'nobody else gets it while the lease holds');
SELECT results_eq($$SELECT run_id, version FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['order@1', 'order@2', 'order@2'])$$,
                  $$SELECT id, 2 FROM r WHERE name = 'v2'$$, 'a worker that declares both versions gets the other run');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY['order'])$$))[1], '22023', 'a definition without @version is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY['order@0'])$$))[1], '22023', 'version 0 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY['order@1x'])$$))[1], '22023', 'a version that is no number is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY[]::text[])$$))[1], '22023', 'no definitions is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY['order@1', NULL])$$))[1], '22004', 'a NULL definition is 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_claim('t1', 'w', ARRAY['order@1'], 101)$$))[1], '22023', 'max_runs over 100 is 22023');

-------------------------------------------------------------------------------------------------
-- Steps under the owner's epoch
-------------------------------------------------------------------------------------------------
CREATE TEMP VIEW run_a AS SELECT (SELECT id FROM r WHERE name = 'a') AS id, (SELECT epoch FROM c) AS epoch;
SELECT results_eq($$SELECT status, result, idempotency_key FROM run_a, forgeyard.workflow_step('t1', run_a.id, run_a.epoch, 'reserve')$$,
                  $$SELECT 'run'::text, NULL::jsonb, id::text || ':1:reserve' FROM run_a$$,
                  'the first step of a new run is to run, with a stable idempotency key');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'charge', '{}') FROM run_a$$))[1], '22023',
          'completing a step that is not the current one is 22023');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'reserve', '{"reserved": 2}', 'release') FROM run_a$$,
                'the owner records the step''s result with its compensation');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'reserve', '{"reserved": 2}', 'release') FROM run_a$$,
                'recording the same result again is a no-op');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'reserve', '{"reserved": 3}', 'release') FROM run_a$$))[1],
          '22023', 'another result for a recorded step is 22023');
SAVEPOINT step_tx;
DO $$ BEGIN PERFORM forgeyard.workflow_step('t1', id, epoch, 'charge') FROM run_a; END $$;
ROLLBACK TO SAVEPOINT step_tx;
SELECT results_eq($$SELECT status, idempotency_key FROM run_a, forgeyard.workflow_step('t1', run_a.id, run_a.epoch, 'charge')$$,
                  $$SELECT 'run'::text, id::text || ':2:charge' FROM run_a$$,
                  'a step call that rolled back took its cursor move with it: the next call is position 2');
SELECT is((SELECT w.lease_until FROM forgeyard.wf_runs w WHERE w.run_id = (SELECT id FROM run_a)),
          (SELECT m.visible_at FROM forgeyard.messages m, run_a WHERE m.tenant_id = 't1' AND m.claim_token = run_a.epoch),
          'the run keeps its owner''s lease as the claim set it: where the delivery becomes visible again');
SELECT is(forgeyard.workflow_step_fail('t1', id, epoch, 'charge', 'card declined'), 'retry', 'a failed step is retried') FROM run_a;
SELECT is((SELECT lease_until FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_a)), NULL,
          'and its released run keeps no lease');
SELECT results_eq($$SELECT state FROM forgeyard.workflow_status('t1', (SELECT id FROM run_a))$$, $$VALUES ('pending'::text)$$,
                  'the run is released until the backoff ends');
SELECT results_eq($$SELECT position, step, status, error, attempts FROM forgeyard.workflow_journal('t1', (SELECT id FROM run_a))$$,
                  $$VALUES (1, 'reserve'::text, 'done'::text, NULL::text, 1), (2, 'charge', 'failed', 'card declined', 1)$$,
                  'the journal holds the done step and the failed attempt');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'ship') FROM run_a$$))[1], 'FY001',
          'the released owner''s next step is FY001');

-- The retry: a new epoch replays the journal.
SET forgeyard.now_override = '2030-01-01 00:00:30+00';
CREATE TEMP TABLE c2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['order@1'], 1, '1 minute');
SELECT ok((SELECT epoch FROM c2) > (SELECT epoch FROM c), 'after the backoff another worker claims it with a greater epoch');
SELECT is((SELECT takeovers FROM forgeyard.workflow_runs WHERE run_id = (SELECT id FROM run_a)), 0::integer,
          'a retry is no takeover');
CREATE TEMP VIEW run_b AS SELECT (SELECT id FROM r WHERE name = 'a') AS id, (SELECT epoch FROM c2) AS epoch;
SELECT results_eq($$SELECT status, result FROM run_b, forgeyard.workflow_step('t1', run_b.id, run_b.epoch, 'reserve')$$,
                  $$VALUES ('done'::text, '{"reserved": 2}'::jsonb)$$, 'replay returns the recorded result of a done step');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'refund') FROM run_b$$))[1:2],
          ARRAY['FY060', 'workflow run ' || (SELECT id FROM run_b) || ' called step "refund" at position 2, where its journal has step "charge"'],
          'another step name at a journaled position is FY060');
SELECT results_eq($$SELECT status FROM run_b, forgeyard.workflow_step('t1', run_b.id, run_b.epoch, 'charge')$$,
                  $$VALUES ('run'::text)$$, 'the failed step at its position runs again');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'charge', '{"paid": true}') FROM run_b$$,
                'and is recorded done');

-- The stale owner changes nothing.
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'charge', '{"paid": false}') FROM run_a$$))[1],
          'FY001', 'the old epoch''s step_complete is FY001');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_complete('t1', id, epoch, '{}') FROM run_a$$))[1], 'FY001',
          'so is its workflow_complete');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_extend('t1', id, epoch, '1 minute') FROM run_a$$))[1], 'FY001',
          'and its workflow_extend');
SELECT results_eq($$SELECT result FROM forgeyard.workflow_journal('t1', (SELECT id FROM run_a)) WHERE position = 2$$,
                  $$VALUES ('{"paid": true}'::jsonb)$$, 'the journal keeps the owner''s result');

-- Takeover: the owner's lease runs out.
SELECT is(forgeyard.workflow_extend('t1', id, epoch, '2 minutes'), '2030-01-01 00:02:30+00'::timestamptz,
          'the owner extends its lease') FROM run_b;
SELECT is((SELECT lease_until FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_b)), '2030-01-01 00:02:30+00'::timestamptz,
          'and the run keeps the new end');
-- Past the end the run keeps, the delivery decides: a plain queue extend of it still holds.
SAVEPOINT queue_extend;
SELECT is(forgeyard.extend('t1', '_wf.order@1', w.msg_id, run_b.epoch, '10 minutes'), '2030-01-01 00:10:30+00'::timestamptz,
          'a plain extend of the run''s delivery') FROM run_b, forgeyard.wf_runs w WHERE w.run_id = run_b.id;
SET LOCAL forgeyard.now_override = '2030-01-01 00:03:00+00';
SELECT results_eq($$SELECT s.status FROM run_b, forgeyard.workflow_step('t1', run_b.id, run_b.epoch, 'ship') s$$,
                  $$VALUES ('run'::text)$$, 'keeps the owner''s lease past the end the run keeps');
ROLLBACK TO SAVEPOINT queue_extend;
SET forgeyard.now_override = '2030-01-01 00:03:00+00';
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'ship') FROM run_b$$))[1:2],
          ARRAY['FY001', 'workflow run ' || (SELECT id FROM run_b) || ': the lease of epoch ' || (SELECT epoch FROM run_b) || ' ran out'],
          'an owner whose lease ran out is FY001');
SELECT results_eq($$SELECT run_id, reason FROM forgeyard.workflow_stuck WHERE version = 1$$,
                  $$SELECT id, 'the owner''s lease ran out'::text FROM run_b$$, 'workflow_stuck lists the run whose owner lapsed');
CREATE TEMP TABLE c3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w4', ARRAY['order@1'], 1, '1 minute');
SELECT is((SELECT count(*)::int FROM c3), 1, 'the next claim takes the run over');
SELECT results_eq($$SELECT takeovers, previous_owner, taken_over_at, owner FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_b)$$,
                  $$VALUES (1, 'w3'::text, '2030-01-01 00:03:00+00'::timestamptz, 'w4'::text)$$, 'and the takeover is recorded');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'ship') FROM run_b$$))[1], 'FY001',
          'the replaced owner is FY001');
CREATE TEMP VIEW run_c AS SELECT (SELECT id FROM r WHERE name = 'a') AS id, (SELECT epoch FROM c3) AS epoch;
SELECT results_eq($$SELECT s.status FROM run_c, LATERAL (SELECT * FROM forgeyard.workflow_step('t1', run_c.id, run_c.epoch, 'reserve')
                      UNION ALL SELECT * FROM forgeyard.workflow_step('t1', run_c.id, run_c.epoch, 'charge')) s$$,
                  $$VALUES ('done'::text), ('done')$$, 'the new owner replays both steps');

-- Park and retry
SELECT lives_ok($$SELECT forgeyard.workflow_park('t1', id, epoch, 'FY060 at position 3') FROM run_c$$,
                'the owner parks the run after FY060');
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM run_c))$$,
                  $$VALUES ('parked'::text, 'FY060 at position 3'::text)$$, 'the run is parked with the reason');
SELECT results_eq($$SELECT reason FROM forgeyard.workflow_stuck WHERE run_id = (SELECT id FROM run_c)$$,
                  $$VALUES ('parked: FY060 at position 3'::text)$$, 'workflow_stuck lists it');
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w5', ARRAY['order@1'])), 0, 'nobody claims a parked run');
SELECT ok(forgeyard.workflow_retry('t1', id), 'workflow_retry hands it out again') FROM run_c;
SELECT ok(NOT forgeyard.workflow_retry('t1', id), 'a pending run is not retried') FROM run_c;
CREATE TEMP TABLE c4 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w5', ARRAY['order@1'], 1, '1 minute');
SELECT is((SELECT count(*)::int FROM c4), 1, 'and a worker claims it');
CREATE TEMP VIEW run_d AS SELECT (SELECT id FROM r WHERE name = 'a') AS id, (SELECT epoch FROM c4) AS epoch;

-- Complete
SELECT lives_ok($$SELECT forgeyard.workflow_complete('t1', id, epoch, '{"shipped": true}') FROM run_d$$, 'the owner completes the run');
SELECT results_eq($$SELECT state, result FROM forgeyard.workflow_status('t1', (SELECT id FROM run_d))$$,
                  $$VALUES ('completed'::text, '{"shipped": true}'::jsonb)$$, 'completed with its result');
SELECT is((SELECT count(*)::int FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = '_wf.order@1' AND state = 'pending'), 0,
          'its message is acked');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'more') FROM run_d$$))[1:2],
          ARRAY['FY001', 'workflow run ' || (SELECT id FROM run_d) || ' is completed, not running under epoch ' || (SELECT epoch FROM run_d)],
          'a completed run takes no more steps');
SELECT ok(NOT forgeyard.workflow_cancel('t1', id, 'late'), 'cancelling a completed run is false') FROM run_d;

-------------------------------------------------------------------------------------------------
-- Failure, cancel, deadline
-------------------------------------------------------------------------------------------------
INSERT INTO r VALUES ('f', forgeyard.workflow_start('t1', 'mail', 1, 'mail-1', '{}'));
CREATE TEMP TABLE cf AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['mail@1']);
SELECT is(pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'send') FROM cf$$), NULL, 'the owner starts step send');
SELECT is(forgeyard.workflow_step_fail('t1', run_id, epoch, 'send', 'no such address', true), 'failed',
          'a permanent step failure fails the run') FROM cf;
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT run_id FROM cf))$$,
                  $$VALUES ('failed'::text, 'step "send" failed: no such address'::text)$$, 'the run is failed with the step''s error');
SELECT ok(forgeyard.workflow_retry('t1', run_id), 'a failed run can be retried') FROM cf;

-- The queue's max_attempts ends a run whose step keeps failing.
DO $$ BEGIN PERFORM forgeyard.queue_alter('t1', '_wf.mail@1', '{"max_attempts": 2, "backoff_base": "1 second", "backoff_max": "1 second"}'); END $$;
SET forgeyard.now_override = '2030-01-01 01:00:00+00';
CREATE TEMP TABLE cm AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['mail@1']);
SELECT is(pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'send') FROM cm$$), NULL, 'the retried run starts step send');
SELECT is(forgeyard.workflow_step_fail('t1', run_id, epoch, 'send', 'timeout'), 'retry', 'the first failure is retried') FROM cm;
SET forgeyard.now_override = '2030-01-01 01:00:10+00';
CREATE TEMP TABLE cm2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['mail@1']);
SELECT is(pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'send') FROM cm2$$), NULL, 'and again after the backoff');
SELECT is(forgeyard.workflow_step_fail('t1', run_id, epoch, 'send', 'timeout'), 'failed',
          'the failure that exhausts the queue''s max_attempts fails the run') FROM cm2;
SELECT results_eq($$SELECT status, attempts FROM forgeyard.workflow_journal('t1', (SELECT run_id FROM cm2))$$,
                  $$VALUES ('failed'::text, 3)$$, 'the journal counts the step''s three failed attempts');

INSERT INTO r VALUES ('x', forgeyard.workflow_start('t1', 'mail', 1, 'mail-2', '{}'));
CREATE TEMP TABLE cx AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['mail@1']);
SELECT ok(forgeyard.workflow_cancel('t1', run_id, 'customer asked'), 'an operator cancels a running run') FROM cx;
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'send') FROM cx$$))[1], 'FY001',
          'its owner''s next journal write is FY001') FROM cx;
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT run_id FROM cx))$$,
                  $$VALUES ('cancelled'::text, 'customer asked'::text)$$, 'the run is cancelled with the reason');
SELECT ok(NOT forgeyard.workflow_cancel('t1', run_id, 'again'), 'a second cancel is false') FROM cx;

INSERT INTO r VALUES ('d', forgeyard.workflow_start('t1', 'mail', 1, 'mail-3', '{}', '{"deadline": "1 minute"}'));
SET forgeyard.now_override = '2030-01-01 01:05:00+00';
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['mail@1'], 10)), 0,
          'a run past its deadline is not handed out (nor the cancelled run''s message)');
SELECT results_eq($$SELECT state FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'd'))$$,
                  $$VALUES ('timed_out'::text)$$, 'it is timed_out');
SELECT is((SELECT count(*)::int FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = '_wf.mail@1' AND state = 'pending'), 0,
          'and both messages were let go');

SELECT results_eq($$SELECT run_id FROM forgeyard.workflow_list('t1', 'completed')$$,
                  $$SELECT id FROM r WHERE name = 'a'$$, 'workflow_list filters by state');
SELECT results_eq($$SELECT run_id, state FROM forgeyard.workflow_list('t1', NULL, 1)$$,
                  $$SELECT id, 'timed_out'::text FROM r WHERE name = 'd'$$, 'most recently changed first, at most max_runs');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.workflow_list('t1', 'done')$$))[1], '22023', 'an unknown state is 22023');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.workflow_list('t1', NULL, 0)$$))[1], '22023', 'max_runs 0 is 22023');

-------------------------------------------------------------------------------------------------
-- Durable timers
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-02 00:00:00+00';
INSERT INTO r VALUES ('s', forgeyard.workflow_start('t1', 'nap', 1, 'nap-1', '{}'));
CREATE TEMP TABLE cs AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['nap@1'], 1, '1 minute');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_sleep('t1', run_id, epoch, 'wait', '2030-01-02 01:00:00+00') FROM cs$$))[1],
          '22023', 'a sleep is the current step: workflow_step comes first');
SELECT results_eq($$SELECT status FROM cs, forgeyard.workflow_step('t1', cs.run_id, cs.epoch, 'wait')$$, $$VALUES ('run'::text)$$,
                  'the sleep step runs');
SELECT lives_ok($$SELECT forgeyard.workflow_sleep('t1', run_id, epoch, 'wait', '2030-01-02 01:00:00+00') FROM cs$$,
                'the owner starts a one-hour timer');
SELECT results_eq($$SELECT state FROM forgeyard.workflow_status('t1', (SELECT run_id FROM cs))$$, $$VALUES ('sleeping'::text)$$,
                  'the run is sleeping');
SELECT results_eq($$SELECT step, status, result FROM forgeyard.workflow_journal('t1', (SELECT run_id FROM cs))$$,
                  $$VALUES ('wait'::text, 'done'::text, '{"until": "2030-01-02T01:00:00.000000Z"}'::jsonb)$$,
                  'the sleep is journaled with its end');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'next') FROM cs$$))[1], 'FY001',
          'the sleeper''s epoch owns the run no more');
SET forgeyard.now_override = '2030-01-02 00:59:59+00';
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['nap@1'])), 0, 'nobody gets it before its end');
SET forgeyard.now_override = '2030-01-02 01:00:00+00';
CREATE TEMP TABLE cs2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['nap@1'], 1, '1 minute');
SELECT is((SELECT run_id FROM cs2), (SELECT run_id FROM cs), 'at its end the run is handed out again');
SELECT is((SELECT takeovers FROM forgeyard.wf_runs WHERE run_id = (SELECT run_id FROM cs)), 0, 'waking is no takeover');
SELECT results_eq($$SELECT status, result FROM cs2, forgeyard.workflow_step('t1', cs2.run_id, cs2.epoch, 'wait')$$,
                  $$VALUES ('done'::text, '{"until": "2030-01-02T01:00:00.000000Z"}'::jsonb)$$, 'and the sleep replays as done');

-------------------------------------------------------------------------------------------------
-- Signals
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-03 00:00:00+00';
INSERT INTO r VALUES ('g', forgeyard.workflow_start('t1', 'approval', 1, 'approval-1', '{}'));
CREATE TEMP VIEW run_g AS SELECT id FROM r WHERE name = 'g';
SELECT ok(forgeyard.workflow_signal('t1', id, 'approve', '{"by": "ann"}', '00000000-0000-4000-8000-0000000000a1'),
          'a signal sent before the run waits is kept') FROM run_g;
SELECT ok(NOT forgeyard.workflow_signal('t1', id, 'approve', '{"by": "ann"}', '00000000-0000-4000-8000-0000000000a1'),
          'the same signal_id again is false') FROM run_g;
CREATE TEMP TABLE g1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['approval@1'], 1, '1 minute');
SELECT results_eq($$SELECT status, payload FROM g1, forgeyard.workflow_wait_signal('t1', g1.run_id, g1.epoch, 'first', 'approve', '1 hour')$$,
                  $$VALUES ('received'::text, '{"by": "ann"}'::jsonb)$$, 'the wait receives the signal sent before it');
SELECT results_eq($$SELECT status, payload FROM g1, forgeyard.workflow_wait_signal('t1', g1.run_id, g1.epoch, 'second', 'approve', '1 hour')$$,
                  $$VALUES ('waiting'::text, NULL::jsonb)$$, 'with no signal left the run waits');
SELECT results_eq($$SELECT state FROM forgeyard.workflow_status('t1', (SELECT id FROM run_g))$$, $$VALUES ('waiting'::text)$$,
                  'the run is waiting');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'x') FROM g1$$))[1], 'FY001',
          'the waiting run''s epoch owns it no more');
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['approval@1'])), 0,
          'nobody gets a waiting run before a signal or the timeout');
SELECT ok(forgeyard.workflow_signal('t1', id, 'approve', '{"by": "bob"}'), 'a second signal is sent') FROM run_g;
CREATE TEMP TABLE g2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['approval@1'], 1, '1 minute');
SELECT is((SELECT count(*)::int FROM g2), 1, 'the signal hands the run out at once');
SELECT results_eq($$SELECT s.status, s.payload FROM g2, LATERAL (
                      SELECT * FROM forgeyard.workflow_wait_signal('t1', g2.run_id, g2.epoch, 'first', 'approve', '1 hour')
                      UNION ALL SELECT * FROM forgeyard.workflow_wait_signal('t1', g2.run_id, g2.epoch, 'second', 'approve', '1 hour')) s$$,
                  $$VALUES ('received'::text, '{"by": "ann"}'::jsonb), ('received', '{"by": "bob"}')$$,
                  'the replay answers the first wait as recorded, and the second receives the new signal');
SELECT results_eq($$SELECT status FROM g2, forgeyard.workflow_wait_signal('t1', g2.run_id, g2.epoch, 'third', 'approve', '10 minutes')$$,
                  $$VALUES ('waiting'::text)$$, 'a third wait has nothing to receive');
SET forgeyard.now_override = '2030-01-03 00:10:00+00';
CREATE TEMP TABLE g3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['approval@1'], 1, '1 minute');
SELECT is((SELECT count(*)::int FROM g3), 1, 'at its timeout the run is handed out');
SELECT results_eq($$SELECT s.status FROM g3, LATERAL (
                      SELECT * FROM forgeyard.workflow_wait_signal('t1', g3.run_id, g3.epoch, 'first', 'approve', '1 hour')
                      UNION ALL SELECT * FROM forgeyard.workflow_wait_signal('t1', g3.run_id, g3.epoch, 'second', 'approve', '1 hour')
                      UNION ALL SELECT * FROM forgeyard.workflow_wait_signal('t1', g3.run_id, g3.epoch, 'third', 'approve', '1 hour')) s$$,
                  $$VALUES ('received'::text), ('received'), ('timed_out')$$, 'and the third wait times out');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_signal('t1', '00000000-0000-4000-8000-0000000000ff', 'approve')$$))[1], '42704',
          'a signal to an unknown run is 42704');
SELECT lives_ok($$SELECT forgeyard.workflow_complete('t1', run_id, epoch, '{}') FROM g3$$, 'the run completes');
SELECT ok(NOT forgeyard.workflow_signal('t1', id, 'approve'), 'a signal to a finished run is false') FROM run_g;

-------------------------------------------------------------------------------------------------
-- Sagas: compensations newest first, fenced, compensation_failed, retry resumes them
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-04 00:00:00+00';
-- A step run and recorded, in that order.
CREATE FUNCTION pg_temp.wf_done(run_id uuid, epoch bigint, step text, result jsonb, compensation text DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM forgeyard.workflow_step('t1', run_id, epoch, step);
    PERFORM forgeyard.workflow_step_complete('t1', run_id, epoch, step, result, compensation);
END $f$;
INSERT INTO r VALUES ('cp_c', forgeyard.workflow_start('t1', 'trip', 1, 'trip-1', '{}'));
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', '_wf.trip@1', '{"max_attempts": 2}')$$, 'trip runs get two attempts');
CREATE TEMP TABLE cp_c1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['trip@1'], 1, '1 minute');
SELECT lives_ok($x$DO $d$ DECLARE c record; BEGIN
                    SELECT * INTO c FROM cp_c1;
                    PERFORM pg_temp.wf_done(c.run_id, c.epoch, 'book', '{"b": 1}', 'unbook');
                    PERFORM pg_temp.wf_done(c.run_id, c.epoch, 'note', '{}');
                    PERFORM pg_temp.wf_done(c.run_id, c.epoch, 'pay', '{"p": 1}', 'refund');
                    PERFORM forgeyard.workflow_step('t1', c.run_id, c.epoch, 'ship');
                  END $d$$x$, 'three steps done, two of them with a compensation, and a fourth runs');
SELECT is((SELECT forgeyard.workflow_step_fail('t1', run_id, epoch, 'ship', 'no truck', true) FROM cp_c1), 'failed',
          'the fourth fails for good');
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_c'))$$,
                  $$VALUES ('compensating'::text, 'step "ship" failed: no truck'::text)$$,
                  'a failed run with compensations to run is compensating, with the step''s error');
SELECT is((pg_temp.err($$SELECT x.* FROM cp_c1, forgeyard.workflow_compensation('t1', cp_c1.run_id, cp_c1.epoch) x$$))[1], 'FY001',
          'the failed step''s epoch owns no compensation');
SELECT ok(NOT forgeyard.workflow_cancel('t1', id, 'stop'), 'a compensating run is not cancelled') FROM r WHERE name = 'cp_c';
CREATE TEMP TABLE cp_c2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['trip@1'], 1, '1 minute');
SELECT is((SELECT state FROM cp_c2), 'compensating', 'the claim hands it out to compensate');
SELECT is((pg_temp.err($$SELECT x.* FROM cp_c2, forgeyard.workflow_step('t1', cp_c2.run_id, cp_c2.epoch, 'book') x$$))[1], 'FY001',
          'its owner runs no steps');
SELECT results_eq($$SELECT x.position, x.step, x.compensation, x.result, x.idempotency_key = cp_c2.run_id || ':3:pay:compensate'
                      FROM cp_c2, forgeyard.workflow_compensation('t1', cp_c2.run_id, cp_c2.epoch) x$$,
                  $$VALUES (3, 'pay'::text, 'refund'::text, '{"p": 1}'::jsonb, true)$$,
                  'the newest step with a compensation comes first, with its result and a stable key');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_compensation_complete('t1', run_id, epoch, 1) FROM cp_c2$$))[1:2],
          ARRAY['22023', 'the next compensation of workflow run ' || (SELECT run_id FROM cp_c2) || ' is at position 3, not at position 1'],
          'compensations run newest first (22023 out of order)');
SELECT is((SELECT forgeyard.workflow_compensation_fail('t1', run_id, epoch, 3, 'bank down') FROM cp_c2), 'retry',
          'a failed compensation is retried');
SELECT is((pg_temp.err($$SELECT x.* FROM cp_c2, forgeyard.workflow_compensation('t1', cp_c2.run_id, cp_c2.epoch) x$$))[1], 'FY001',
          'and its owner''s epoch is released');
SET forgeyard.now_override = '2030-01-04 01:00:00+00';
CREATE TEMP TABLE cp_c3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['trip@1'], 1, '1 minute');
SELECT is((SELECT forgeyard.workflow_compensation_complete('t1', run_id, epoch, 3) FROM cp_c3), 'compensating',
          'the next owner completes it: one more is left');
SELECT is((SELECT x.position FROM cp_c3, forgeyard.workflow_compensation('t1', cp_c3.run_id, cp_c3.epoch) x), 1,
          'a step without a compensation is passed over');
SELECT is((SELECT forgeyard.workflow_compensation_complete('t1', run_id, epoch, 1) FROM cp_c3), 'failed',
          'after the last the run ends as it was going to');
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_c'))$$,
                  $$VALUES ('failed'::text, 'step "ship" failed: no truck'::text)$$, 'failed, with the step''s error');
SELECT results_eq($$SELECT position, compensation, compensation_status, compensation_error
                      FROM forgeyard.workflow_journal('t1', (SELECT id FROM r WHERE name = 'cp_c'))$$,
                  $$VALUES (1, 'unbook'::text, 'done'::text, NULL::text), (2, NULL, NULL, NULL), (3, 'refund', 'done', NULL), (4, NULL, NULL, NULL)$$,
                  'the journal shows each compensation done');
SELECT ok(NOT forgeyard.workflow_retry('t1', id), 'a run whose steps were compensated is not retried') FROM r WHERE name = 'cp_c';
SELECT is((SELECT count(*)::int FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = '_wf.trip@1' AND state = 'pending'), 0,
          'no message of the run is left');

-- Cancel, compensation_failed, retry
INSERT INTO r VALUES ('cp_e', forgeyard.workflow_start('t1', 'trip', 1, 'trip-2', '{}'));
CREATE TEMP TABLE cp_e1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['trip@1'], 1, '1 minute');
SELECT lives_ok($$SELECT pg_temp.wf_done(run_id, epoch, 'book', '{}', 'unbook') FROM cp_e1$$,
                'a step with a compensation');
SELECT ok(forgeyard.workflow_cancel('t1', id, 'customer left'), 'the run is cancelled') FROM r WHERE name = 'cp_e';
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_e'))$$,
                  $$VALUES ('compensating'::text, 'customer left'::text)$$, 'and compensates first');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'pay') FROM cp_e1$$))[1], 'FY001',
          'its owner''s next write is FY001');
CREATE TEMP TABLE cp_e2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['trip@1'], 1, '1 minute');
SELECT is((SELECT state FROM cp_e2), 'compensating', 'at once handed out to compensate');
SELECT is((SELECT forgeyard.workflow_compensation_fail('t1', run_id, epoch, 1, 'gone', true) FROM cp_e2), 'compensation_failed',
          'a compensation that fails for good ends the run compensation_failed');
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_e'))$$,
                  $$VALUES ('compensation_failed'::text, 'customer left'::text)$$,
                  'keeping the error it was compensating for (the compensation''s is in the journal)');
SELECT results_eq($$SELECT reason FROM forgeyard.workflow_stuck WHERE run_id = (SELECT id FROM r WHERE name = 'cp_e')$$,
                  $$VALUES ('compensation "unbook" of step "book" at position 1 failed: gone'::text)$$, 'workflow_stuck lists it');
SELECT ok(forgeyard.workflow_retry('t1', id), 'retry resumes its compensations') FROM r WHERE name = 'cp_e';
CREATE TEMP TABLE cp_e3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['trip@1'], 1, '1 minute');
SELECT is((SELECT forgeyard.workflow_compensation_complete('t1', run_id, epoch, 1) FROM cp_e3), 'cancelled',
          'and the run ends cancelled once it ran');
SELECT results_eq($$SELECT state, error FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_e'))$$,
                  $$VALUES ('cancelled'::text, 'customer left'::text)$$, 'with its first error');

-- A compensating run whose deliveries lapse on every attempt
INSERT INTO r VALUES ('cp_l', forgeyard.workflow_start('t1', 'lapse', 1, 'lapse-1', '{}'));
DO $$ BEGIN PERFORM forgeyard.queue_alter('t1', '_wf.lapse@1', '{"max_attempts": 1}'); END $$;
CREATE TEMP TABLE cp_l1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['lapse@1'], 1, '1 minute');
SELECT lives_ok($$SELECT pg_temp.wf_done(run_id, epoch, 'hold', '{}', 'unhold') FROM cp_l1$$,
                'a step with a compensation');
SELECT lives_ok($$SELECT forgeyard.workflow_fail('t1', run_id, epoch, 'out of stock') FROM cp_l1$$,
                'the run fails, compensating first');
CREATE TEMP TABLE cp_l2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['lapse@1'], 1, '1 minute');
SELECT is((SELECT state FROM cp_l2), 'compensating', 'handed out to compensate');
SET forgeyard.now_override = '2030-01-04 01:02:00+00';
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['lapse@1'], 1, '1 minute')), 0,
          'its owner dies: with one attempt, the next claim ends the run');
SELECT results_eq($$SELECT s.state, s.error, k.reason
                      FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'cp_l')) s,
                           forgeyard.workflow_stuck k WHERE k.run_id = (SELECT id FROM r WHERE name = 'cp_l')$$,
                  $$VALUES ('compensation_failed'::text, 'out of stock'::text,
                            'its compensation''s deliveries lapsed on every attempt (the definition queue''s max_attempts)'::text)$$,
                  'compensation_failed, keeping the error it was compensating for; workflow_stuck says why');

-- A deadline
INSERT INTO r VALUES ('cp_f', forgeyard.workflow_start('t1', 'trip', 1, 'trip-3', '{}', '{"deadline": "1 hour"}'));
CREATE TEMP TABLE cp_f1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['trip@1'], 1, '1 minute');
SELECT lives_ok($$SELECT pg_temp.wf_done(run_id, epoch, 'book', '{}', 'unbook') FROM cp_f1$$,
                'a step with a compensation');
SET forgeyard.now_override = '2030-01-04 03:00:00+00';
CREATE TEMP TABLE cp_f2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['trip@1'], 1, '1 minute');
SELECT results_eq($$SELECT cp_f2.state, s.state, s.error FROM cp_f2, forgeyard.workflow_status('t1', cp_f2.run_id) s$$,
                  $$VALUES ('compensating'::text, 'compensating'::text, 'the run''s deadline passed'::text)$$,
                  'past its deadline the run is handed out to compensate (the same claim lets the stale messages before it go)');
SELECT is((SELECT forgeyard.workflow_compensation_complete('t1', run_id, epoch, 1) FROM cp_f2), 'timed_out',
          'then ends timed_out');

-------------------------------------------------------------------------------------------------
-- Children: a child tells its parent how it ended
-------------------------------------------------------------------------------------------------
INSERT INTO r VALUES ('cp_p', forgeyard.workflow_start('t1', 'parent', 1, 'parent-1', '{}'));
INSERT INTO r SELECT 'cp_k', forgeyard.workflow_start('t1', 'child', 1, 'child-1', '{}', jsonb_build_object('parent', id)) FROM r WHERE name = 'cp_p';
CREATE TEMP TABLE cp_p1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['parent@1'], 1, '1 minute');
SELECT results_eq($$SELECT s.status FROM cp_p1, forgeyard.workflow_wait_signal('t1', cp_p1.run_id, cp_p1.epoch, 'wait', 'child:' || (SELECT id FROM r WHERE name = 'cp_k'), '1 hour') s$$,
                  $$VALUES ('waiting'::text)$$, 'the parent waits for its child');
CREATE TEMP TABLE cp_k1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['child@1'], 1, '1 minute');
SELECT lives_ok($$SELECT forgeyard.workflow_complete('t1', run_id, epoch, '{"ok": true}') FROM cp_k1$$, 'the child completes');
CREATE TEMP TABLE cp_p2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['parent@1'], 1, '1 minute');
SELECT is((SELECT count(*)::int FROM cp_p2), 1, 'which hands the parent out at once');
SELECT results_eq($$SELECT s.status, s.payload FROM cp_p2, forgeyard.workflow_wait_signal('t1', cp_p2.run_id, cp_p2.epoch, 'wait', 'child:' || (SELECT id FROM r WHERE name = 'cp_k'), '1 hour') s$$,
                  $$VALUES ('received'::text, '{"state": "completed", "result": {"ok": true}, "error": null}'::jsonb)$$,
                  'the parent receives the child''s state and result');
SELECT results_eq($$SELECT signal_id FROM forgeyard.wf_signals WHERE run_id = (SELECT id FROM r WHERE name = 'cp_p')$$,
                  $$SELECT id FROM r WHERE name = 'cp_k'$$, 'once: the signal''s id is the child''s run id');

-------------------------------------------------------------------------------------------------
-- Retention: maintain() removes a finished run past its retention, with its journal and signals
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-05 00:00:00+00';
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'brief', 1, 'b0', '{}', '{"retention": "0.5 seconds"}')$$))[1:2],
          ARRAY['22023', 'workflow option retention must be at least 1 second'], 'a retention under a second is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'brief', 1, 'b0', '{}', '{"retention": "soon"}')$$))[1], '22023',
          'a retention that is no interval is 22023');
INSERT INTO r VALUES ('rt', forgeyard.workflow_start('t1', 'brief', 1, 'b1', '{}', '{"retention": "1 hour"}'));
CREATE TEMP TABLE rt1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['brief@1'], 1, '1 minute');
SELECT lives_ok($x$DO $d$ DECLARE c record; BEGIN
                    SELECT * INTO c FROM rt1;
                    PERFORM pg_temp.wf_done(c.run_id, c.epoch, 'one', '{}');
                    PERFORM forgeyard.workflow_signal('t1', c.run_id, 'late');
                    PERFORM forgeyard.workflow_complete('t1', c.run_id, c.epoch, '{}');
                  END $d$$x$, 'a run with a one-hour retention completes, with a step and a signal');
SET forgeyard.now_override = '2030-01-05 00:59:00+00';
SELECT is((SELECT "rows" FROM forgeyard.maintain() WHERE task = 'workflow_runs'), 0::bigint, 'maintain() keeps it within the hour');
SET forgeyard.now_override = '2030-01-05 01:00:00+00';
SELECT is((SELECT "rows" FROM forgeyard.maintain() WHERE task = 'workflow_runs'), 1::bigint, 'and removes it after');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_journal WHERE run_id = (SELECT id FROM r WHERE name = 'rt'))
          + (SELECT count(*)::int FROM forgeyard.wf_signals WHERE run_id = (SELECT id FROM r WHERE name = 'rt'))
          + (SELECT count(*)::int FROM forgeyard.wf_cursors WHERE run_id = (SELECT id FROM r WHERE name = 'rt')), 0,
          'with its journal, its signals and its step cursor');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.workflow_status('t1', (SELECT id FROM r WHERE name = 'rt'))$$))[1], '42704',
          'the run is gone (42704)');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_runs WHERE state = 'parked' AND purge_at IS NOT NULL), 0,
          'a parked run is never removed (it waits for an operator)');

-------------------------------------------------------------------------------------------------
-- Tenants and roles
-------------------------------------------------------------------------------------------------
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.workflow_status('t2', (SELECT id FROM r WHERE name = 'a'))$$))[1], '42704',
          'tenant t2 cannot see a run of t1 (42704)');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.workflow_journal('t2', (SELECT id FROM r WHERE name = 'a'))$$))[1], '42704',
          'nor its journal');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_cancel('t2', (SELECT id FROM r WHERE name = 'a'), 'x')$$))[1], '42704',
          'nor cancel it');
-------------------------------------------------------------------------------------------------
-- Per-step timeouts: the step's deadline cuts its owner's lease, extend never passes it, and a
-- takeover past it records the attempt as failed
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-05 00:00:00+00';
INSERT INTO r VALUES ('timed', forgeyard.workflow_start('t1', 'timed', 1, 'timed-1', '{}'));
CREATE TEMP TABLE tc1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['timed@1'], 1, '1 hour');
CREATE TEMP VIEW run_t AS SELECT (SELECT id FROM r WHERE name = 'timed') AS id, (SELECT epoch FROM tc1) AS epoch;
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'call', '0 seconds') FROM run_t$$))[1], '22023',
          'a timeout of zero is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', id, epoch, 'call', '1 month') FROM run_t$$))[1], '22023',
          'a timeout in months is 22023');
SELECT is((SELECT position FROM forgeyard.wf_cursors WHERE run_id = (SELECT id FROM run_t)), 0,
          'and neither moved the cursor');
SELECT results_eq($$SELECT s.status FROM run_t, forgeyard.workflow_step('t1', run_t.id, run_t.epoch, 'call', '30 seconds') s$$,
                  $$VALUES ('run'::text)$$, 'a step with a timeout runs');
SELECT is((SELECT m.visible_at FROM forgeyard.messages m JOIN forgeyard.wf_runs w ON m.msg_id = w.msg_id
            WHERE w.run_id = (SELECT id FROM run_t)), '2030-01-05 00:00:30+00'::timestamptz,
          'the owner''s lease of an hour is cut to the step''s deadline');
SELECT is((SELECT lease_until FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_t)), '2030-01-05 00:00:30+00'::timestamptz,
          'and so is the end the run keeps');
SELECT is(forgeyard.workflow_extend('t1', id, epoch, '1 hour'), '2030-01-05 00:00:30+00'::timestamptz,
          'extend does not pass the deadline') FROM run_t;
SET forgeyard.now_override = '2030-01-05 00:00:29+00';
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['timed@1'])), 0,
          'nobody takes the run over before the deadline');
SET forgeyard.now_override = '2030-01-05 00:00:31+00';
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'call', '{}') FROM run_t$$))[1], 'FY001',
          'recording the step past its timeout is FY001');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_journal WHERE run_id = (SELECT id FROM run_t)), 0, 'and records nothing');
CREATE TEMP TABLE tc2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['timed@1'], 1, '1 hour');
SELECT is((SELECT count(*)::int FROM tc2), 1, 'past the deadline another worker takes the run over');
SELECT results_eq($$SELECT position, step, status, error, epoch FROM forgeyard.workflow_journal('t1', (SELECT id FROM run_t))$$,
                  $$SELECT 1, 'call'::text, 'failed'::text, 'step "call" ran past its timeout'::text, epoch FROM run_t$$,
                  'the takeover records the attempt as failed, under the epoch that ran it');
CREATE TEMP VIEW run_t2 AS SELECT (SELECT id FROM r WHERE name = 'timed') AS id, (SELECT epoch FROM tc2) AS epoch;
SELECT results_eq($$SELECT s.status FROM run_t2, forgeyard.workflow_step('t1', run_t2.id, run_t2.epoch, 'call', '30 seconds') s$$,
                  $$VALUES ('run'::text)$$, 'the new owner runs the step again');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'call', '{"ok": true}') FROM run_t2$$,
                'and records it within its timeout');
SELECT ok((SELECT step_deadline IS NULL FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_t)),
          'a step recorded in time lets go of its deadline');
SELECT is(forgeyard.workflow_extend('t1', id, epoch, '1 hour'), '2030-01-05 01:00:31+00'::timestamptz,
          'so extend gives the whole lease again') FROM run_t2;
SELECT results_eq($$SELECT status FROM forgeyard.workflow_journal('t1', (SELECT id FROM run_t))$$, $$VALUES ('done'::text)$$,
                  'the step is done');
-- The deadline is the step's, not the delivery's: a plain queue extend on the definition queue
-- does not move it.
INSERT INTO r VALUES ('timed2', forgeyard.workflow_start('t1', 'timed', 1, 'timed-2', '{}'));
CREATE TEMP TABLE tc3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['timed@1'], 1, '1 hour');
CREATE TEMP VIEW run_t3 AS SELECT (SELECT id FROM r WHERE name = 'timed2') AS id, (SELECT epoch FROM tc3) AS epoch,
                                  (SELECT msg_id FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM r WHERE name = 'timed2')) AS msg_id;
SELECT results_eq($$SELECT s.status FROM run_t3, forgeyard.workflow_step('t1', run_t3.id, run_t3.epoch, 'call', '10 seconds') s$$,
                  $$VALUES ('run'::text)$$, 'another run''s step with a timeout of 10 s');
SELECT lives_ok($$SELECT forgeyard.extend('t1', '_wf.timed@1', msg_id, epoch, '1 hour') FROM run_t3$$,
                'a plain queue extend of its delivery is taken');
SET forgeyard.now_override = '2030-01-05 00:00:42+00';
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', id, epoch, 'call', '{}') FROM run_t3$$))[1], 'FY001',
          'but past the step''s deadline its owner is fenced off all the same');
-- A wait that receives at once moves the cursor on: a deadline of a step before it does not stay
-- behind to cut the lease later.
INSERT INTO r VALUES ('timed3', forgeyard.workflow_start('t1', 'timed', 1, 'timed-3', '{}'));
DO $$ BEGIN PERFORM forgeyard.workflow_signal('t1', (SELECT id FROM r WHERE name = 'timed3'), 'go', '{}'); END $$;
CREATE TEMP TABLE tc4 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w4', ARRAY['timed@1'], 1, '1 hour');
CREATE TEMP VIEW run_t4 AS SELECT (SELECT id FROM r WHERE name = 'timed3') AS id, (SELECT epoch FROM tc4) AS epoch;
SELECT results_eq($$SELECT s.status FROM run_t4, forgeyard.workflow_step('t1', run_t4.id, run_t4.epoch, 'call', '10 seconds') s
                    UNION ALL SELECT w.status FROM run_t4, forgeyard.workflow_wait_signal('t1', run_t4.id, run_t4.epoch, 'wait', 'go', '1 hour') w$$,
                  $$VALUES ('run'::text), ('received')$$, 'a timed step, then a wait that receives at once');
SELECT ok((SELECT step_deadline IS NULL FROM forgeyard.wf_runs WHERE run_id = (SELECT id FROM run_t4)),
          'the wait let go of the step''s deadline');

-------------------------------------------------------------------------------------------------
-- The step cursor: an UNLOGGED table of its own, so that a step call writes no WAL. Without a
-- timeout workflow_step neither locks nor writes the run's row; a cursor that is gone (a crash,
-- a failover or a restore empties the table) or another epoch's is FY001, and the next claim
-- after the lease takes the run over and replays.
-------------------------------------------------------------------------------------------------
INSERT INTO r VALUES ('cur', forgeyard.workflow_start('t1', 'cursor', 1, 'cursor-1', '{}'));
CREATE TEMP TABLE cur1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['cursor@1'], 1, '1 minute');
CREATE TEMP TABLE cur_row AS SELECT ctid AS at FROM forgeyard.wf_runs WHERE run_id = (SELECT run_id FROM cur1);
SELECT is((SELECT position FROM forgeyard.wf_cursors c, cur1 WHERE c.run_id = cur1.run_id AND c.epoch = cur1.epoch), 0,
          'the claim put the new epoch''s cursor at no step');
SELECT results_eq($$SELECT s.status FROM cur1, forgeyard.workflow_step('t1', cur1.run_id, cur1.epoch, 'one') s$$,
                  $$VALUES ('run'::text)$$, 'a step to run');
SELECT is((SELECT (position, step) FROM forgeyard.wf_cursors WHERE run_id = (SELECT run_id FROM cur1)), (1, 'one'::text),
          'the cursor moved to it');
SELECT ok((SELECT w.ctid = (SELECT at FROM cur_row) FROM forgeyard.wf_runs w WHERE w.run_id = (SELECT run_id FROM cur1)),
          'the run''s row was not written by the step (the same version)');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'one', '{"n": 1}') FROM cur1$$,
                'its result is recorded');
DELETE FROM forgeyard.wf_cursors WHERE run_id = (SELECT run_id FROM cur1);
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'two') FROM cur1$$))[1:2],
          ARRAY['FY001', 'workflow run ' || (SELECT run_id FROM cur1) || ': the step cursor of epoch ' || (SELECT epoch FROM cur1)
                || ' is gone (a crash, a failover or a restore emptied it, or the run was taken over)'],
          'with its cursor gone (as after a crash), the owner''s next step is FY001');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'one', '{"n": 1}') FROM cur1$$))[1],
          'FY001', 'and so is a step_complete');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_sleep('t1', run_id, epoch, 'one', '2031-01-01') FROM cur1$$))[1],
          'FY001', 'and a sleep');
SELECT is((pg_temp.err($$SELECT x.* FROM cur1, forgeyard.workflow_wait_signal('t1', cur1.run_id, cur1.epoch, 'two', 'go', '1 hour') x$$))[1],
          'FY001', 'and a wait');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_fail('t1', run_id, epoch, 'one', 'e') FROM cur1$$))[1],
          'FY001', 'and a step_fail');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_journal WHERE run_id = (SELECT run_id FROM cur1)), 1,
          'none of them wrote to the journal');
SET forgeyard.now_override = '2030-01-05 00:01:43+00';
CREATE TEMP TABLE cur2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['cursor@1'], 1, '1 minute');
SELECT ok((SELECT cur2.run_id = cur1.run_id AND cur2.epoch > cur1.epoch FROM cur1, cur2),
          'after the lease, the next claim takes the run over under a new epoch');
SELECT results_eq($$SELECT s.status, s.result FROM cur2, forgeyard.workflow_step('t1', cur2.run_id, cur2.epoch, 'one') s$$,
                  $$VALUES ('done'::text, '{"n": 1}'::jsonb)$$, 'and replays the recorded step');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'two') FROM cur1$$))[1], 'FY001',
          'the old epoch stays fenced (its cursor is the new epoch''s now)');
SELECT is((SELECT count(*)::int FROM forgeyard.wf_cursors c WHERE c.run_id = (SELECT run_id FROM cur1)), 1,
          'one cursor per run');
UPDATE forgeyard.wf_cursors SET epoch = epoch + 1 WHERE run_id = (SELECT run_id FROM cur2);
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'two') FROM cur2$$))[1:2],
          ARRAY['FY001', 'workflow run ' || (SELECT run_id FROM cur2) || ': the step cursor of epoch ' || (SELECT epoch FROM cur2)
                || ' is gone (a crash, a failover or a restore emptied it, or the run was taken over)'],
          'a cursor of another epoch is FY001 even while the run''s row still names this one');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'one', '{"n": 1}') FROM cur2$$))[1],
          'FY001', 'for the calls that record the current step too');
UPDATE forgeyard.wf_cursors SET epoch = epoch - 1 WHERE run_id = (SELECT run_id FROM cur2);
-- WAL per statement, from pg_stat_statements (preloaded by scripts/lib/cluster.sh): the statements
-- below are the only ones over the temporary tables cur3 and cur4.
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
-- (emptied first: with every nested statement tracked, the PL/pgSQL edition's many statements could
-- otherwise push the two measured entries out of pg_stat_statements.max before they are read)
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
INSERT INTO r VALUES ('cur_wal', forgeyard.workflow_start('t1', 'cursor', 1, 'cursor-2', '{}'));
CREATE TEMP TABLE cur3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w3', ARRAY['cursor@1'], 1, '1 minute');
SELECT s.status AS walless_status FROM cur3, forgeyard.workflow_step('t1', cur3.run_id, cur3.epoch, 'plain') s \gset
SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'plain', '{}') IS NULL AS recorded FROM cur3 \gset
CREATE TEMP TABLE cur4 AS SELECT * FROM cur3;
SELECT s.status AS timed_status FROM cur4, forgeyard.workflow_step('t1', cur4.run_id, cur4.epoch, 'timed', '10 seconds') s \gset
CREATE TEMP VIEW step_wal AS
    SELECT coalesce(sum(wal_records) FILTER (WHERE query LIKE 'SELECT s.status AS walless_status %'), -1) AS untimed,
           coalesce(sum(wal_records) FILTER (WHERE query LIKE 'SELECT s.status AS timed_status %'), -1) AS timed
      FROM pg_stat_statements WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database());
SELECT is((SELECT untimed FROM step_wal), 0::numeric,
          'a step without a timeout writes no WAL (its commit does not wait for a flush)');
SELECT cmp_ok((SELECT timed FROM step_wal), '>', 0::numeric,
              'a step with a timeout does (the deadline on the run''s row, the lease cut), as measured the same way');

-------------------------------------------------------------------------------------------------
-- Positions named by the caller: the worker counts its steps and passes each call its position;
-- the calls then read and write no cursor (workflow_step without a timeout writes nothing), the
-- journal stays contiguous (22023 for a position whose step before is not done) and a replay by
-- position answers as by cursor.
-------------------------------------------------------------------------------------------------
INSERT INTO r VALUES ('pos', forgeyard.workflow_start('t1', 'positions', 1, 'positions-1', '{}'));
CREATE TEMP TABLE pos1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['positions@1'], 1, '1 minute');
CREATE TEMP TABLE pos_cursor AS SELECT ctid AS at FROM forgeyard.wf_cursors WHERE run_id = (SELECT run_id FROM pos1);
SELECT results_eq($$SELECT s.status, s.idempotency_key FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'a', NULL, 1) s$$,
                  $$SELECT 'run'::text, run_id || ':1:a' FROM pos1$$, 'position 1: a step to run, keyed by its position');
SELECT ok((SELECT c.ctid = (SELECT at FROM pos_cursor) AND c.position = 0 AND c.step IS NULL
             FROM forgeyard.wf_cursors c WHERE c.run_id = (SELECT run_id FROM pos1)),
          'the cursor was neither moved nor written');
SELECT is((pg_temp.err($$SELECT s.status FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'b', NULL, 2) s$$))[1:2],
          ARRAY['22023', 'workflow_step at position 2 of workflow run ' || (SELECT run_id FROM pos1)
                || ', but the step at position 1 is not recorded'],
          'a position whose step before is not recorded is 22023');
SELECT is((pg_temp.err($$SELECT s.status FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'a', NULL, 0) s$$))[1:2],
          ARRAY['22023', 'position must be 1 or more'], 'position 0 is 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'b', '{}', NULL, 2) FROM pos1$$))[1],
          '22023', 'so is recording a step there');
SELECT lives_ok($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'a', '{"n": 1}', NULL, 1) FROM pos1$$,
                'position 1 recorded');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'a', '{"n": 1}') FROM pos1$$))[1],
          '22023', 'a call without a position then finds no current step: every call of an epoch names one, or none does');
SELECT results_eq($$SELECT s.status, s.result FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'a', NULL, 1) s$$,
                  $$VALUES ('done'::text, '{"n": 1}'::jsonb)$$, 'position 1 again replays its result');
SELECT is((pg_temp.err($$SELECT s.status FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'x', NULL, 1) s$$))[1],
          'FY060', 'another step at a recorded position is FY060');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step_complete('t1', run_id, epoch, 'x', '{}', NULL, 1) FROM pos1$$))[1],
          'FY060', 'and so is recording another step there');
SELECT ok(forgeyard.workflow_signal('t1', id, 'go', '{"k": 1}'), 'a signal sent before the wait') FROM r WHERE name = 'pos';
SELECT results_eq($$SELECT s.status, s.payload FROM pos1, forgeyard.workflow_wait_signal('t1', pos1.run_id, pos1.epoch, 'w', 'go', '1 hour', 2) s$$,
                  $$VALUES ('received'::text, '{"k": 1}'::jsonb)$$, 'a wait at position 2 receives it');
SELECT results_eq($$SELECT s.status FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'c', NULL, 3) s$$,
                  $$VALUES ('run'::text)$$, 'position 3 follows the wait');
SELECT lives_ok($$SELECT forgeyard.workflow_sleep('t1', run_id, epoch, 'c', '2030-01-09', 3) FROM pos1$$, 'a sleep at position 3');
SELECT results_eq($$SELECT position, step, status FROM forgeyard.wf_journal WHERE run_id = (SELECT run_id FROM pos1) ORDER BY 1$$,
                  $$VALUES (1, 'a'::text, 'done'::text), (2, 'w', 'done'), (3, 'c', 'done')$$, 'the journal: a, w, c');
SELECT ok((SELECT c.ctid = (SELECT at FROM pos_cursor) FROM forgeyard.wf_cursors c WHERE c.run_id = (SELECT run_id FROM pos1)),
          'no call wrote the cursor');
SELECT is((pg_temp.err($$SELECT s.status FROM pos1, forgeyard.workflow_step('t1', pos1.run_id, pos1.epoch, 'a', NULL, 1) s$$))[1],
          'FY001', 'the sleeping run''s old epoch is fenced, position or not');
SET forgeyard.now_override = '2030-01-09 00:00:01+00';
CREATE TEMP TABLE pos2 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['positions@1'], 1, '1 minute');
SELECT results_eq($$SELECT s.status, s.result ->> 'until' IS NOT NULL FROM pos2, forgeyard.workflow_step('t1', pos2.run_id, pos2.epoch, 'c', NULL, 3) s$$,
                  $$VALUES ('done'::text, true)$$, 'after the sleep the next epoch replays position 3 as done');
SELECT results_eq($$SELECT s.status FROM pos2, forgeyard.workflow_step('t1', pos2.run_id, pos2.epoch, 'd', NULL, 4) s$$,
                  $$VALUES ('run'::text)$$, 'position 4 runs');
SELECT is(forgeyard.workflow_step_fail('t1', run_id, epoch, 'd', 'refused', true, 4), 'failed',
          'a permanent failure at position 4 fails the run') FROM pos2;
SELECT results_eq($$SELECT position, status, error FROM forgeyard.wf_journal WHERE run_id = (SELECT run_id FROM pos2) AND position = 4$$,
                  $$VALUES (4, 'failed'::text, 'refused'::text)$$, 'recorded at position 4');
-- A step with a timeout by position still moves the cursor: the takeover past its deadline reads
-- the step there and records the attempt failed.
INSERT INTO r VALUES ('pos_t', forgeyard.workflow_start('t1', 'positions', 1, 'positions-2', '{}'));
CREATE TEMP TABLE pos3 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['positions@1'], 1, '1 hour');
SELECT results_eq($$SELECT s.status FROM pos3, forgeyard.workflow_step('t1', pos3.run_id, pos3.epoch, 'timed', '30 seconds', 1) s$$,
                  $$VALUES ('run'::text)$$, 'a timed step by position runs');
SELECT is((SELECT (position, step) FROM forgeyard.wf_cursors WHERE run_id = (SELECT run_id FROM pos3)), (1, 'timed'::text),
          'and moves the cursor to it');
SET forgeyard.now_override = '2030-01-09 00:00:32+00';
SELECT is((SELECT count(*)::int FROM forgeyard.workflow_claim('t1', 'w2', ARRAY['positions@1'], 1, '1 hour')), 1,
          'past its deadline the run is taken over');
SELECT results_eq($$SELECT position, step, status, error FROM forgeyard.workflow_journal('t1', (SELECT run_id FROM pos3))$$,
                  $$VALUES (1, 'timed'::text, 'failed'::text, 'step "timed" ran past its timeout'::text)$$,
                  'and the attempt at position 1 is recorded failed');
SET forgeyard.now_override = '2030-01-05 00:01:43+00';

-- The fence's attribute numbers are kept per backend until a relcache invalidation: a column that
-- moved (two columns of one type swap their names: each name has the other's attribute number
-- now) is read where it is now.
SET forgeyard.now_override = '2030-01-20 00:00:00+00';
INSERT INTO r VALUES ('moved', forgeyard.workflow_start('t1', 'movable', 1, 'moved-1', '{}'));
CREATE TEMP TABLE mc1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['movable@1'], 1, '1 hour');
SELECT results_eq($$SELECT s.status FROM mc1, forgeyard.workflow_step('t1', mc1.run_id, mc1.epoch, 'a', NULL, 1) s$$,
                  $$VALUES ('run'::text)$$, 'a step call reads the run (its columns kept by this backend)');
ALTER TABLE forgeyard.wf_runs RENAME COLUMN lease_until TO fy_swap;
ALTER TABLE forgeyard.wf_runs RENAME COLUMN step_deadline TO lease_until;
ALTER TABLE forgeyard.wf_runs RENAME COLUMN fy_swap TO step_deadline;
UPDATE forgeyard.wf_runs SET lease_until = '2030-01-20 01:00:00+00', step_deadline = NULL
 WHERE run_id = (SELECT run_id FROM mc1);
-- The delivery alone would say the lease ran out: only the run's moved column keeps it.
SELECT is(forgeyard.extend('t1', '_wf.movable@1', w.msg_id, mc1.epoch, '1 second'), '2030-01-20 00:00:01+00'::timestamptz,
          'the delivery''s visibility cut to a second') FROM mc1, forgeyard.wf_runs w WHERE w.run_id = mc1.run_id;
SET forgeyard.now_override = '2030-01-20 00:00:05+00';
SELECT results_eq($$SELECT s.status FROM mc1, forgeyard.workflow_step('t1', mc1.run_id, mc1.epoch, 'a', NULL, 1) s$$,
                  $$VALUES ('run'::text)$$, 'after the column moved the fence reads the lease where it is now');

-- A restore: restore_reconcile releases every claimed delivery, a run's too, and with it the lease
-- the run keeps of it.
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
INSERT INTO r VALUES ('restored', forgeyard.workflow_start('t1', 'restorable', 1, 'restored-1', '{}'));
CREATE TEMP TABLE rc1 AS SELECT * FROM forgeyard.workflow_claim('t1', 'w1', ARRAY['restorable@1'], 1, '1 hour');
SELECT results_eq($$SELECT s.status FROM rc1, forgeyard.workflow_step('t1', rc1.run_id, rc1.epoch, 'a', NULL, 1) s$$,
                  $$VALUES ('run'::text)$$, 'an owner steps while its lease holds');
SELECT ok((SELECT count FROM forgeyard.restore_reconcile() WHERE kind = 'deliveries_released') >= 1,
          'restore_reconcile releases the run''s delivery');
SELECT is((SELECT lease_until FROM forgeyard.wf_runs WHERE run_id = (SELECT run_id FROM rc1)), NULL,
          'and the run keeps no lease');
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_step('t1', run_id, epoch, 'a', NULL, 1) FROM rc1$$))[1], 'FY001',
          'so its owner''s next step call is FY001');

CREATE ROLE fy_wf_app;
CREATE ROLE fy_wf_insp;
DO $$
BEGIN
    PERFORM forgeyard.grant_usage('fy_wf_app');
    PERFORM forgeyard.grant_inspect('fy_wf_insp');
    PERFORM forgeyard.bind_tenant('fy_wf_app', 't2');
    PERFORM forgeyard.bind_tenant('fy_wf_insp', 't2');
END $$;
GRANT SELECT ON r TO fy_wf_app;
SET ROLE fy_wf_app;
SELECT is((pg_temp.err($$SELECT forgeyard.workflow_start('t1', 'order', 1, 'k', '{}')$$))[1], 'FY040',
          'a role bound to t2 cannot start a run for t1');
SELECT lives_ok($$SELECT forgeyard.workflow_start('t2', 'order', 1, 'k', '{}')$$, 'but can for t2');
SELECT throws_ok('SELECT * FROM forgeyard.wf_runs', '42501', NULL, 'an application role cannot read forgeyard.wf_runs');
RESET ROLE;
SET ROLE fy_wf_insp;
SELECT is((SELECT array_agg(DISTINCT tenant_id) FROM forgeyard.workflow_runs), ARRAY['t2'],
          'an inspector bound to t2 sees only t2''s runs in workflow_runs');
SELECT throws_ok($$SELECT forgeyard.workflow_start('t2', 'order', 1, 'k2', '{}')$$, '42501', NULL, 'and cannot start a run');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
