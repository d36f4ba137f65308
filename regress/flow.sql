-- Flow control (docs/operations.md, "Flow control"): admission limits of producers and the retry
-- budget of nacks, with every bad input. Time is moved with forgeyard.now_override; nothing
-- sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION forgeyard;

SELECT plan(49);

SET TIME ZONE 'UTC';
\ir lib/err.sql

CREATE FUNCTION pg_temp.messages(q text) RETURNS bigint LANGUAGE sql AS
$$SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = q$$;
CREATE FUNCTION pg_temp.admitted(q text) RETURNS numeric LANGUAGE sql AS
$$SELECT sum(admitted_messages) FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = q$$;

-------------------------------------------------------------------------------------------------
-- admission_limit: the API
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.admission_limit(text, text, integer, interval)'::regprocedure),
          'tenant text, queue text, rate integer, per interval', 'admission_limit(tenant, queue, rate, per)');
SELECT ok(obj_description('forgeyard.admission_limit(text, text, integer, interval)'::regprocedure) IS NOT NULL,
          'admission_limit has a COMMENT');
SELECT ok(NOT has_function_privilege('public', 'forgeyard.admission_limit(text, text, integer, interval)', 'EXECUTE'),
          'PUBLIC cannot execute admission_limit');

-------------------------------------------------------------------------------------------------
-- One bucket (a queue of one capacity slot): 3 per minute
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
DO $$ BEGIN PERFORM forgeyard.queue_create('t1', 'one', '{"max_messages": 1000}'); END $$;
SELECT lives_ok($$SELECT forgeyard.admission_limit('t1', 'one', 3, '1 minute')$$, 'admission_limit 3 per minute');
SELECT results_eq($$SELECT slot, tokens, per_usecs, tat FROM forgeyard.queue_admission WHERE queue = 'one'$$,
                  $$VALUES (0, 3::bigint, 60000000::bigint, NULL::timestamptz)$$,
                  'one capacity slot: one bucket of the whole limit, full');
SELECT results_eq($$SELECT kind, "limit", available FROM forgeyard.flow_state WHERE queue = 'one'$$,
                  $$VALUES ('admission_limit'::text, '3 per 00:01:00'::text, 3::bigint)$$,
                  'flow_state shows the limit and its full bucket');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'one', 'a'); SELECT forgeyard.enqueue('t1', 'one', 'b');
                  SELECT forgeyard.enqueue('t1', 'one', 'c')$$, 'a full bucket admits its burst of 3 at once');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'one', 'd')$$, 'FY020', 'queue "one" is over its admission limit',
                 'the 4th within the minute: FY020');
SELECT is((pg_temp.err($$SELECT forgeyard.enqueue('t1', 'one', 'd')$$))[3],
          'the queue admits 3 messages per 60 s; retry after 20000 ms',
          'the DETAIL names the limit and the retry-after: one token every 20 s');
SELECT is(pg_temp.messages('one'), 3::bigint, 'the refused enqueue added no message');
SELECT is(pg_temp.admitted('one'), 3::numeric, 'and took no capacity');
SET forgeyard.now_override = '2030-03-01 00:00:05+00';
SELECT is((pg_temp.err($$SELECT forgeyard.enqueue('t1', 'one', 'd')$$))[3],
          'the queue admits 3 messages per 60 s; retry after 15000 ms', '5 s later: retry after 15 s');
SET forgeyard.now_override = '2030-03-01 00:00:20+00';
SELECT is((SELECT available FROM forgeyard.flow_state WHERE queue = 'one'), 1::bigint,
          'flow_state: one token 20 s later');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'one', 'd')$$, '20 s later one more is admitted');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'one', 'e')$$, 'FY020', NULL, 'and only one');
-- A repeated event_id adds no message and takes no token.
SET forgeyard.now_override = '2030-03-01 00:00:40+00';
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'one', 'e', '00000000-0000-0000-0000-0000000000e1')$$,
                'the token of 00:00:40');
SELECT is(forgeyard.enqueue('t1', 'one', 'e', '00000000-0000-0000-0000-0000000000e1'),
          (SELECT max(msg_id) FROM forgeyard.messages WHERE queue = 'one'),
          'a repeated event_id answers the first message without a token');
-- A batch is all or nothing: 3 messages against 1 token.
SET forgeyard.now_override = '2030-03-01 00:01:00+00';
SELECT throws_ok($$SELECT forgeyard.enqueue_batch('t1', 'one', ARRAY['f', 'g', 'h']::bytea[])$$, 'FY020', NULL,
                 'a batch of 3 against 1 token: FY020');
SELECT is(pg_temp.messages('one'), 5::bigint, 'no message of the refused batch was added');
SELECT is((SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'one', ARRAY['f']::bytea[])), 1::bigint,
          'a batch of 1 takes the token');
-- The bucket refills to its burst, not beyond.
SET forgeyard.now_override = '2030-03-01 01:00:00+00';
SELECT is((SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'one', ARRAY['i', 'j', 'k']::bytea[])), 3::bigint,
          'an hour later: a batch of the burst');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'one', 'l')$$, 'FY020', NULL, 'and no more than the burst');
-- Removing the limit.
SELECT lives_ok($$SELECT forgeyard.admission_limit('t1', 'one', NULL, NULL)$$, 'admission_limit NULL removes it');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_admission WHERE queue = 'one'$$, 'its bucket is gone');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'one', 'l'); SELECT forgeyard.enqueue('t1', 'one', 'm')$$,
                'without a limit enqueues are admitted again');

-------------------------------------------------------------------------------------------------
-- Eight capacity slots: the limit split into buckets that add up to it exactly
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-02 00:00:00+00';
DO $$ BEGIN PERFORM forgeyard.queue_create('t1', 'eight'); END $$;
DO $$ BEGIN PERFORM forgeyard.admission_limit('t1', 'eight', 10, '1 minute'); END $$;
SELECT results_eq($$SELECT array_agg(tokens ORDER BY slot) FROM forgeyard.queue_admission WHERE queue = 'eight'$$,
                  $$VALUES (ARRAY[2, 2, 1, 1, 1, 1, 1, 1]::bigint[])$$, '10 over 8 buckets: 2 2 1 1 1 1 1 1');
SELECT is((SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'eight', array_fill('x'::bytea, ARRAY[10]))), 10::bigint,
          'a batch of exactly the limit is admitted across the buckets');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'eight', 'y')$$, 'FY020', NULL, 'the 11th is refused');
DO $$ BEGIN PERFORM forgeyard.admission_limit('t1', 'eight', 3, '1 second'); END $$;
SELECT is((SELECT count(*) FROM forgeyard.queue_admission WHERE queue = 'eight'), 3::bigint,
          'a limit of 3 gets 3 buckets of 1 (never an empty bucket)');

-------------------------------------------------------------------------------------------------
-- admission_limit: bad input is refused and changes nothing
-------------------------------------------------------------------------------------------------
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', 0, '1 minute')$$, '22023',
                 'rate must be between 1 and 1000000000', 'rate 0: 22023');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', -5, '1 minute')$$, '22023', NULL, 'rate -5: 22023');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', 10, '0')$$, '22023', 'per must be positive',
                 'per 0: 22023');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', 10, '1 mon')$$, '22023',
                 'per must not have a month or year component', 'per 1 month: 22023');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', 10, '31 days')$$, '22023', 'per is too long',
                 'per over 30 days: 22023');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'eight', 10, NULL)$$, '22004', 'per must not be NULL',
                 'a rate without per: 22004');
SELECT throws_ok($$SELECT forgeyard.admission_limit('t1', 'nope', 10, '1 minute')$$, '42704', NULL,
                 'unknown queue: 42704');
SELECT throws_ok($$SELECT forgeyard.admission_limit(NULL, 'eight', 10, '1 minute')$$, '22004', NULL,
                 'NULL tenant: 22004');
SELECT results_eq($$SELECT array_agg(tokens ORDER BY slot) FROM forgeyard.queue_admission WHERE queue = 'eight'$$,
                  $$VALUES (ARRAY[1, 1, 1]::bigint[])$$, 'the refused calls left the limit as it was');

-------------------------------------------------------------------------------------------------
-- Retry budget: retries per window within max(min, fraction x admitted); the rest wait
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-03 00:00:00+00';
DO $$ BEGIN PERFORM forgeyard.queue_create('t1', 'rb', '{"max_messages": 1000, "retry_budget": 0.5, "retry_budget_min": 1,
    "retry_budget_window": "1 minute", "backoff_base": "1 second", "backoff_max": "2 seconds", "max_attempts": 2}'); END $$;
DO $$ BEGIN PERFORM forgeyard.enqueue('t1', 'rb', ('m' || i)::bytea) FROM generate_series(1, 4) i; END $$;
CREATE TEMP TABLE got AS SELECT * FROM forgeyard.claim('t1', 'rb', 'w', 10);
SELECT is((SELECT count(*) FROM got), 4::bigint, 'four deliveries');
SELECT results_eq($$SELECT forgeyard.nack('t1', 'rb', msg_id, claim_token, 'down') FROM got ORDER BY msg_id$$,
                  $$VALUES ('retry'), ('retry'), ('retry'), ('retry')$$, 'every nack is a retry');
SELECT results_eq(
    $$SELECT count(*) FILTER (WHERE visible_at <= '2030-03-03 00:00:02+00'),
             count(*) FILTER (WHERE visible_at = '2030-03-03 00:01:00+00')
        FROM forgeyard.messages WHERE queue = 'rb'$$,
    $$VALUES (2::bigint, 2::bigint)$$,
    'budget max(1, 0.5 x 4) = 2: two retries after their backoff, two wait for the window''s end');
SELECT results_eq($$SELECT state, attempt FROM forgeyard.messages WHERE queue = 'rb' GROUP BY 1, 2$$,
                  $$VALUES ('pending'::text, 1)$$, 'no attempt charged for the wait, nothing dead-lettered');
SELECT results_eq($$SELECT window_start, admitted_base, retries, delayed FROM forgeyard.queue_retry_windows WHERE queue = 'rb'$$,
                  $$VALUES ('2030-03-03 00:00:00+00'::timestamptz, 0::bigint, 2::bigint, 2::bigint)$$,
                  'the window: 2 retries, 2 delayed');
SELECT results_eq($$SELECT kind, "limit", counted, delayed, since FROM forgeyard.flow_state WHERE queue = 'rb'$$,
                  $$VALUES ('retry_budget'::text, '0.5 of admitted, at least 1 per 00:01:00'::text, 2::bigint, 2::bigint,
                            '2030-03-03 00:00:00+00'::timestamptz)$$,
                  'flow_state shows the retry budget and its window');
-- The delayed ones are claimed after the window; their next failure dead-letters by max_attempts as usual.
SET forgeyard.now_override = '2030-03-03 00:01:00+00';
DELETE FROM got;
INSERT INTO got SELECT * FROM forgeyard.claim('t1', 'rb', 'w', 10);
SELECT is((SELECT count(*) FROM got), 4::bigint, 'at the window''s end all four are delivered again');
SELECT results_eq($$SELECT forgeyard.nack('t1', 'rb', msg_id, claim_token, 'down') FROM got ORDER BY msg_id$$,
                  $$VALUES ('dead'), ('dead'), ('dead'), ('dead')$$, 'max_attempts still decides dead letters');
-- No budget: no window is kept.
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'nobudget', '{"max_messages": 1000}');
    PERFORM forgeyard.enqueue('t1', 'nobudget', 'x');
    PERFORM forgeyard.nack('t1', 'nobudget', msg_id, claim_token, 'e') FROM forgeyard.claim('t1', 'nobudget', 'w');
END $$;
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_retry_windows WHERE queue = 'nobudget'$$,
                'a queue without retry_budget keeps no window');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'rb'); SELECT forgeyard.queue_drop('t1', 'eight')$$, 'queue_drop');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_retry_windows WHERE queue = 'rb'
                  UNION ALL SELECT 1 FROM forgeyard.queue_admission WHERE queue = 'eight'$$,
                'queue_drop removes the queue''s window and buckets');

SELECT * FROM finish();
ROLLBACK;
