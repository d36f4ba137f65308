-- Flow control (docs/operations.md, "Flow control"): admission limits of producers and the retry
-- budget of nacks, with every bad input. Time is moved with forgeyard.now_override; nothing
-- sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(166);

SET TIME ZONE 'UTC';
\ir lib/err.sql

CREATE FUNCTION pg_temp.messages(q text) RETURNS bigint LANGUAGE sql AS
$$SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = q$$;
CREATE FUNCTION pg_temp.admitted(q text) RETURNS numeric LANGUAGE sql AS
$$SELECT sum(admitted_messages)
          + coalesce((SELECT sum(g.admitted_messages) FROM forgeyard.queue_admit_deltas g WHERE g.tenant_id = 't1' AND g.queue = q), 0)
     FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = q$$;

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
SELECT results_eq($$SELECT delayed, retries_delayed FROM forgeyard.queue_stats('t1', 'rb')$$, $$VALUES (4::bigint, 2::bigint)$$,
                  'queue_stats: four delayed, two of them by the budget in its window');
SET forgeyard.now_override = '2030-03-03 00:00:59.999999+00';
SELECT is((SELECT retries_delayed FROM forgeyard.queue_stats('t1', 'rb')), 2::bigint, 'counted to the window''s last instant');
-- The delayed ones are claimed after the window; their next failure dead-letters by max_attempts as usual.
SET forgeyard.now_override = '2030-03-03 00:01:00+00';
SELECT is((SELECT retries_delayed FROM forgeyard.queue_stats('t1', 'rb')), 0::bigint, 'and 0 once the window has run out');
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

-------------------------------------------------------------------------------------------------
-- Resources: rate limits, max_in_flight, circuit breakers; shared by every queue of the tenant
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-04 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'ra', '{"max_messages": 1000}');
    PERFORM forgeyard.queue_create('t1', 'rb2', '{"max_messages": 1000}');
END $$;
SELECT lives_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{"rate": 2, "per": "1 minute", "max_in_flight": 3}')$$,
                'resource_limit rate 2 per minute, max_in_flight 3');
SELECT results_eq($$SELECT rate, per_usecs, burst, max_in_flight FROM forgeyard.flow_resources WHERE resource = 'pay'$$,
                  $$VALUES (2::bigint, 60000000::bigint, 2::bigint, 3::bigint)$$, 'stored: burst defaults to the rate');
DO $$ BEGIN
    PERFORM forgeyard.enqueue('t1', 'ra', 'p', resource => 'pay') FROM generate_series(1, 3);
    PERFORM forgeyard.enqueue('t1', 'rb2', 'p', resource => 'pay');
    PERFORM forgeyard.enqueue('t1', 'ra', 'plain');
END $$;
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE queue = 'ra' AND resource = 'pay'), 3::bigint,
          'enqueue stores the resource');
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'ra', 'w', 10, '1 hour')), 3::bigint,
          'the claim hands out the burst of 2 and the message bound to nothing');
SELECT results_eq($$SELECT count(*) FILTER (WHERE claim_token IS NULL), min(attempt) FILTER (WHERE claim_token IS NULL)
                      FROM forgeyard.messages WHERE queue = 'ra'$$,
                  $$VALUES (1::bigint, 0)$$, 'the refused message stays ready with no attempt charged');
SELECT is_empty($$SELECT * FROM forgeyard.claim('t1', 'rb2', 'w', 10)$$,
                'the limit is the resource''s: another queue''s message waits for the same bucket');
SELECT results_eq($$SELECT in_flight, refused FROM forgeyard.flow_resource_state WHERE resource = 'pay'$$,
                  $$VALUES (2::bigint, 2::bigint)$$, 'two in flight, two claims refused');
SELECT results_eq($$SELECT kind, "limit", available, in_flight, refused FROM forgeyard.flow_state WHERE subject = 'pay'$$,
                  $$VALUES ('resource_limit'::text, '2 per 00:01:00 burst 2, max_in_flight 3'::text, 0::bigint, 2::bigint, 2::bigint)$$,
                  'flow_state shows the resource''s tokens, deliveries in flight and refusals');
SET forgeyard.now_override = '2030-03-04 00:01:00+00';
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'ra', 'w', 10, '1 hour'))
          + (SELECT count(*) FROM forgeyard.claim('t1', 'rb2', 'w', 10, '1 hour')), 1::bigint,
          'a minute later two tokens, but max_in_flight 3 lets one more out');
SELECT lives_ok($$SELECT forgeyard.ack('t1', m.queue, m.msg_id, m.claim_token)
                    FROM forgeyard.messages m WHERE m.resource = 'pay' AND m.claim_token IS NOT NULL$$,
                'acking the three');
SELECT is((SELECT in_flight FROM forgeyard.flow_resource_state WHERE resource = 'pay'), 0::bigint,
          'acks give the places back');
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'rb2', 'w', 10)) + (SELECT count(*) FROM forgeyard.claim('t1', 'ra', 'w', 10)),
          1::bigint, 'the last one is handed out');
-- One claim meets three resources: each row is charged once, the one it read last and the
-- others it finds again; an ack of each gives each its place back.
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'r3', '{"max_messages": 1000}');
    PERFORM forgeyard.resource_limit('t1', r, '{"rate": 5, "per": "1 minute", "max_in_flight": 5}')
       FROM unnest(ARRAY['x1', 'x2', 'x3']) r;
    PERFORM forgeyard.enqueue('t1', 'r3', 'p', resource => r) FROM unnest(ARRAY['x1', 'x2', 'x3', 'x1', 'x3', 'x1']) r;
END $$;
CREATE TEMP TABLE r3 AS SELECT * FROM forgeyard.claim('t1', 'r3', 'w', 10);
SELECT is((SELECT count(*) FROM r3), 6::bigint, 'all six handed out');
SELECT results_eq($$SELECT resource, in_flight, tat FROM forgeyard.flow_resource_state WHERE resource IN ('x1', 'x2', 'x3') ORDER BY 1$$,
                  $$VALUES ('x1'::text, 3::bigint, '2030-03-04 00:01:36+00'::timestamptz), ('x2', 1, '2030-03-04 00:01:12+00'),
                           ('x3', 2, '2030-03-04 00:01:24+00')$$,
                  'each resource row charged with its own messages: in flight, and tokens (12 s each)');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'r3', msg_id, claim_token) FROM r3$$, 'acking the six');
SELECT results_eq($$SELECT resource, in_flight FROM forgeyard.flow_resource_state WHERE resource IN ('x1', 'x2', 'x3') ORDER BY 1$$,
                  $$VALUES ('x1'::text, 0::bigint), ('x2', 0), ('x3', 0)$$, 'every place given back');
DO $$ BEGIN
    PERFORM forgeyard.queue_drop('t1', 'r3');
    PERFORM forgeyard.resource_limit('t1', r, '{}') FROM unnest(ARRAY['x1', 'x2', 'x3']) r;
END $$;

-- Large limits are kept in parts (flow_resources.parts, one per 16 of the smallest limit, at most
-- 8) so that concurrent claimers do not queue on one row: each part keeps its share, the parts
-- add up exactly, an ack gives the place back to the part its delivery was counted in, and a
-- change of the limits merges the parts no longer kept into part 0.
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'rp', '{"max_messages": 1000}');
    PERFORM forgeyard.resource_limit('t1', 'wide', '{"rate": 1000, "per": "1 minute", "burst": 100, "max_in_flight": 50}');
    PERFORM forgeyard.enqueue('t1', 'rp', 'p', resource => 'wide') FROM generate_series(1, 60);
END $$;
SELECT is((SELECT parts FROM forgeyard.flow_resources WHERE resource = 'wide'), 3::smallint,
          'a smallest limit of 50 is kept in 3 parts');
SELECT results_eq($$SELECT part::int, in_flight, tat FROM forgeyard.flow_resource_state WHERE resource = 'wide' ORDER BY part$$,
                  $$VALUES (0, 0::bigint, NULL::timestamptz), (1, 0, NULL), (2, 0, NULL)$$,
                  'one state row per part, each a full bucket');
CREATE TEMP TABLE rp AS SELECT * FROM forgeyard.claim('t1', 'rp', 'w', 100, '1 hour');
SELECT is((SELECT count(*) FROM rp), 50::bigint, 'one claim takes the places of every part, and not one more');
SELECT results_eq($$SELECT part::int, in_flight FROM forgeyard.flow_resource_state WHERE resource = 'wide' ORDER BY part$$,
                  $$VALUES (0, 17::bigint), (1, 17), (2, 16)$$,
                  'max_in_flight 50 kept as 17, 17 and 16');
SELECT results_eq($$SELECT resource_part::int, count(*) FROM forgeyard.messages WHERE resource = 'wide' AND claim_token IS NOT NULL
                     GROUP BY 1 ORDER BY 1$$,
                  $$VALUES (0, 17::bigint), (1, 17), (2, 16)$$, 'each delivery records the part it is counted in');
SELECT results_eq($$SELECT available, in_flight, refused FROM forgeyard.flow_state WHERE subject = 'wide'$$,
                  $$VALUES (50::bigint, 50::bigint, 10::bigint)$$,
                  'flow_state adds the parts up: burst 100 (34, 33, 33) less 50 tokens, 50 in flight, 10 refusals');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'rp', msg_id, claim_token) FROM rp WHERE msg_id IN (SELECT msg_id FROM rp ORDER BY msg_id LIMIT 20)$$,
                'acking twenty');
SELECT is((SELECT sum(in_flight) FROM forgeyard.flow_resource_state WHERE resource = 'wide'), 30::numeric,
          'each ack gives its place back to its own part');
SELECT is((SELECT count(*) FROM forgeyard.flow_resource_state WHERE resource = 'wide' AND in_flight < 0), 0::bigint,
          'no part below zero');
SELECT lives_ok($$SELECT forgeyard.breaker_configure('t1', 'wide', '{}')$$, 'a breaker on the resource');
SELECT results_eq($$SELECT r.parts, s.part, s.in_flight, s.refused
                      FROM forgeyard.flow_resources r JOIN forgeyard.flow_resource_state s USING (tenant_id, resource)
                     WHERE resource = 'wide'$$,
                  $$VALUES (1::smallint, 0::smallint, 30::bigint, 10::bigint)$$,
                  'a breaker keeps one part: the others merged into part 0 with their deliveries in flight and refusals');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'rp', msg_id, claim_token) FROM rp$$, 'acking the rest, counted in parts 0 to 2');
SELECT is((SELECT in_flight FROM forgeyard.flow_resource_state WHERE resource = 'wide'), 0::bigint,
          'the acks of deliveries counted in parts no longer kept give their places to part 0');
SELECT lives_ok($$SELECT forgeyard.breaker_configure('t1', 'wide', NULL)$$, 'the breaker removed');
SELECT results_eq($$SELECT part::int, in_flight FROM forgeyard.flow_resource_state WHERE resource = 'wide' ORDER BY part$$,
                  $$VALUES (0, 0::bigint), (1, 0), (2, 0)$$, 'without it, three parts again');
SELECT lives_ok($$SELECT forgeyard.resource_limit('t1', 'wide', '{"rate": 1000000, "max_in_flight": 1000000}')$$,
                'very large limits');
SELECT is((SELECT count(*) FROM forgeyard.flow_resource_state WHERE resource = 'wide'), 8::bigint, 'at most 8 parts');
SELECT lives_ok($$SELECT forgeyard.resource_limit('t1', 'wide', '{"max_in_flight": 31}')$$, 'a limit under 32');
SELECT results_eq($$SELECT r.parts, count(s.*) FROM forgeyard.flow_resources r JOIN forgeyard.flow_resource_state s
                      USING (tenant_id, resource) WHERE resource = 'wide' GROUP BY 1$$,
                  $$VALUES (1::smallint, 1::bigint)$$, 'a small limit is kept in one row, exact to the place');
DO $$ BEGIN
    PERFORM forgeyard.queue_drop('t1', 'rp');
    PERFORM forgeyard.resource_limit('t1', 'wide', '{}');
END $$;
SELECT is_empty($$SELECT 1 FROM forgeyard.flow_resource_state WHERE resource = 'wide'$$, 'a resource removed takes every part with it');

-- A breaker opens, half-opens, closes
SET forgeyard.now_override = '2030-03-05 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'mailq', '{"max_messages": 1000, "backoff_base": "1 ms", "backoff_max": "1 ms", "max_attempts": 50}');
    PERFORM forgeyard.breaker_configure('t1', 'smtp', '{"failure_rate": 0.5, "minimum_calls": 2, "window": 4, "open_for": "1 minute", "half_open_calls": 1}');
    PERFORM forgeyard.enqueue('t1', 'mailq', 'm', resource => 'smtp') FROM generate_series(1, 4);
    PERFORM forgeyard.nack('t1', 'mailq', c.msg_id, c.claim_token, 'down') FROM forgeyard.claim('t1', 'mailq', 'w', 2) c;
END $$;
SELECT results_eq($$SELECT * FROM forgeyard.breaker_state('t1', 'smtp')$$,
                  $$VALUES ('open'::text, 2, 2, '2030-03-05 00:00:00+00'::timestamptz)$$,
                  'two failures of two: open, with the window that tripped it');
SET forgeyard.now_override = '2030-03-05 00:00:30+00';
SELECT is_empty($$SELECT * FROM forgeyard.claim('t1', 'mailq', 'w', 10)$$, 'open: nothing bound to smtp is handed out');
SELECT is((SELECT count(*) FROM forgeyard.messages WHERE queue = 'mailq' AND state = 'dead'), 0::bigint,
          'and nothing is dead-lettered for it');
SET forgeyard.now_override = '2030-03-05 00:01:00+00';
SELECT is((SELECT state FROM forgeyard.breaker_state('t1', 'smtp')), 'half_open', 'after open_for it reads half_open');
CREATE TEMP TABLE trial AS SELECT * FROM forgeyard.claim('t1', 'mailq', 'w', 10);
SELECT is((SELECT count(*) FROM trial), 1::bigint, 'half-open lets half_open_calls through');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'mailq', msg_id, claim_token) FROM trial$$, 'the trial succeeds');
SELECT results_eq($$SELECT state, calls FROM forgeyard.breaker_state('t1', 'smtp')$$, $$VALUES ('closed'::text, 0)$$,
                  'and closes the breaker with a new window');
SELECT results_eq($$SELECT kind, state, transitions FROM forgeyard.flow_state f
                      JOIN forgeyard.flow_resource_state s ON s.resource = f.subject WHERE f.subject = 'smtp'$$,
                  $$VALUES ('breaker'::text, 'closed'::text, 3::bigint)$$,
                  'flow_state: the breaker, three transitions (open, half_open, closed)');

-- Bad input: 22023 naming the option, nothing changed
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{"rate": 0}')$$, '22023',
                 'resource option rate must be an integer between 1 and 1000000000', 'rate 0');
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{"burst": 5}')$$, '22023',
                 'resource option rate is required with per or burst', 'burst without a rate');
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{"per": "1 mon", "rate": 1}')$$, '22023',
                 'resource option per must not have a month or year component', 'per in months');
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{"max_inflight": 1}')$$, '22023',
                 'resource option max_inflight is unknown', 'an unknown option');
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '[1]')$$, '22023', 'options must be a JSON object',
                 'options not an object');
SELECT throws_ok($$SELECT forgeyard.breaker_configure('t1', 'smtp', '{"failure_rate": 0}')$$, '22023',
                 'breaker option failure_rate must be a number above 0 and at most 1', 'failure_rate 0');
SELECT throws_ok($$SELECT forgeyard.breaker_configure('t1', 'smtp', '{"window": 1001}')$$, '22023',
                 'breaker option window must be an integer between 1 and 1000', 'window over 1000');
SELECT throws_ok($$SELECT forgeyard.breaker_configure('t1', 'smtp', '{"minimum_calls": 50, "window": 10}')$$, '22023',
                 'breaker option minimum_calls must not exceed window', 'minimum_calls over window');
SELECT throws_ok($$SELECT forgeyard.resource_limit('t1', '', '{}')$$, '22023', NULL, 'an empty resource name');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'ra', 'x', resource => '')$$, '22023', NULL,
                 'an empty resource on enqueue');
SELECT results_eq($$SELECT rate, max_in_flight, failure_rate FROM forgeyard.flow_resources ORDER BY resource$$,
                  $$VALUES (2::bigint, 3::bigint, NULL::float8), (NULL, NULL, 0.5)$$,
                  'the refused calls changed nothing');
SELECT throws_ok($$SELECT * FROM forgeyard.breaker_state('t1', 'pay')$$, '42704',
                 'resource "pay" has no breaker for tenant "t1"', 'breaker_state of a resource without one: 42704');
-- Removing: {} and NULL forget the resource
SELECT lives_ok($$SELECT forgeyard.resource_limit('t1', 'pay', '{}'); SELECT forgeyard.breaker_configure('t1', 'smtp', NULL)$$,
                'resource_limit {} and breaker_configure NULL');
SELECT is_empty($$SELECT 1 FROM forgeyard.flow_resources UNION ALL SELECT 1 FROM forgeyard.flow_resource_state$$,
                'a resource with neither limits nor a breaker is forgotten');

-------------------------------------------------------------------------------------------------
-- Per-key concurrency limits: max_in_flight_per_key
-------------------------------------------------------------------------------------------------
SELECT forgeyard.queue_create('t1', 'kq', '{"max_in_flight_per_key": 2, "dead_letter_payload": "keep"}');
SELECT is((SELECT max_in_flight_per_key FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'kq'), 2::bigint,
          'queue_create stores max_in_flight_per_key');
SELECT is((SELECT options->'max_in_flight_per_key' FROM forgeyard.queue_list('t1') WHERE queue = 'kq'), '2'::jsonb,
          'queue_list shows it, as queue_create takes it');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'kx', '{"max_in_flight_per_key": 0}')$$),
          ARRAY['22023', 'queue option max_in_flight_per_key must be a positive integer', ''],
          'max_in_flight_per_key 0: 22023 naming it');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'kx', '{"max_in_flight_per_key": "two"}')$$),
          ARRAY['22023', 'queue option max_in_flight_per_key must be a positive integer', ''],
          'max_in_flight_per_key not a number: 22023');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'kx', '{"max_in_flight_per_key": 1000001}')$$),
          ARRAY['22023', 'queue option max_in_flight_per_key must be at most 1000000', ''],
          'max_in_flight_per_key above 1000000: 22023');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'kx', '{"max_in_flight_per_key": 2, "ordering": "partition"}')$$),
          ARRAY['22023', 'queue option max_in_flight_per_key cannot be combined with ordering partition (which hands out one message of a partition_key at a time)', ''],
          'max_in_flight_per_key with ordering partition: 22023');
SELECT is_empty($$SELECT 1 FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'kx'$$, 'the refused queues were not made');

SELECT forgeyard.enqueue('t1', 'kq', 'a', fairness_key => 'A') FROM generate_series(1, 3);
SELECT forgeyard.enqueue_batch('t1', 'kq', ARRAY['b', 'b', 'b']::bytea[], fairness_key => 'B');
SELECT forgeyard.enqueue('t1', 'kq', 'n');
SELECT results_eq($$SELECT fairness_key, is_head FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'kq' ORDER BY msg_id$$,
                  $$VALUES ('A', true), ('A', true), ('A', false), ('B', true), ('B', true), ('B', false), (NULL, true)$$,
                  'each key''s first two are heads (one by one and in a batch), the rest wait; no key, no limit');
SELECT results_eq($$SELECT partition_key, pending, heads FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'kq' ORDER BY 1$$,
                  $$VALUES ('A', 3::bigint, 2::bigint), ('B', 3, 2)$$, 'the keys'' counts: pending and heads');
SELECT results_eq($$SELECT kind, subject, "limit", available, in_flight, counted, delayed FROM forgeyard.flow_state
                    WHERE tenant_id = 't1' AND queue = 'kq' ORDER BY subject$$,
                  $$VALUES ('key_limit', 'A', 'max_in_flight_per_key 2', 0::bigint, 2::bigint, 3::bigint, 1::bigint),
                           ('key_limit', 'B', 'max_in_flight_per_key 2', 0, 2, 3, 1)$$,
                  'flow_state: a row per key, its heads in flight and its waiting messages delayed');
SELECT results_eq($$SELECT ready, waiting FROM forgeyard.queue_stats('t1', 'kq')$$, $$VALUES (7::bigint, 2::bigint)$$,
                  'queue_stats: seven ready, two of them waiting behind their key');
CREATE TEMP TABLE kc AS SELECT * FROM forgeyard.claim('t1', 'kq', 'w', 10);
SELECT is((SELECT count(*) FROM kc), 5::bigint, 'a claim hands out the heads only: two per key and the one without');
SELECT is_empty($$SELECT * FROM forgeyard.claim('t1', 'kq', 'w', 10)$$, 'keys at their limit are skipped');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'kq', msg_id, claim_token) FROM kc
                   WHERE msg_id = (SELECT min(m.msg_id) FROM forgeyard.messages m WHERE m.queue = 'kq' AND m.fairness_key = 'A')$$,
                'ack of A''s first');
SELECT results_eq($$SELECT m.fairness_key, count(*) FILTER (WHERE m.is_head), count(*) FROM forgeyard.messages m
                    WHERE m.tenant_id = 't1' AND m.queue = 'kq' AND m.state = 'pending' GROUP BY 1 ORDER BY 1$$,
                  $$VALUES ('A', 2::bigint, 2::bigint), ('B', 2, 3), (NULL, 1, 1)$$,
                  'the ack promoted A''s waiting message');
SELECT results_eq($$SELECT partition_key, pending, heads FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'kq' ORDER BY 1$$,
                  $$VALUES ('A', 2::bigint, 2::bigint), ('B', 3, 2)$$, 'and counted it');
SELECT results_eq($$SELECT payload FROM forgeyard.claim('t1', 'kq', 'w', 10)$$, $$VALUES ('a'::bytea)$$,
                  'the promoted message is claimable');
-- A dead letter releases its place as an ack does.
SELECT is((SELECT forgeyard.nack('t1', 'kq', msg_id, claim_token, 'bad', true) FROM kc
            WHERE msg_id = (SELECT min(m.msg_id) FROM forgeyard.messages m WHERE m.queue = 'kq' AND m.fairness_key = 'B')),
          'dead', 'a permanent nack of B''s first');
SELECT results_eq($$SELECT partition_key, pending, heads FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'kq' ORDER BY 1$$,
                  $$VALUES ('A', 2::bigint, 2::bigint), ('B', 2, 2)$$, 'a dead letter promoted B''s waiting message');
-- Setting or removing the limit needs an empty queue; changing it does not.
SELECT is(pg_temp.err($$SELECT forgeyard.queue_alter('t1', 'kq', '{"max_in_flight_per_key": null}')$$),
          ARRAY['22023', 'queue option max_in_flight_per_key can be set or removed only while the queue holds no messages',
                'it can be changed to another limit at any time'],
          'removing the limit from a queue with messages: 22023');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'kq', '{"max_in_flight_per_key": 3}')$$, 'raising the limit');
CREATE TEMP TABLE ka AS SELECT forgeyard.enqueue('t1', 'kq', 'a', fairness_key => 'A') AS id;
SELECT results_eq($$SELECT m.is_head FROM forgeyard.messages m JOIN ka ON m.msg_id = ka.id$$,
                  $$VALUES (true)$$, 'a raised limit makes the next message of a key a head');
SELECT forgeyard.queue_create('t1', 'kq2');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'kq2', '{"max_in_flight_per_key": 1}')$$, 'setting the limit on an empty queue');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'kq')$$, 'queue_drop');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'kq'$$,
                'queue_drop removes the keys'' rows');

-------------------------------------------------------------------------------------------------
-- Fair queues: fairness and fairness_weight
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.fairness_weight(text, text, text, integer)'::regprocedure),
          'tenant text, queue text, fairness_key text, weight integer', 'fairness_weight(tenant, queue, fairness_key, weight)');
SELECT ok(obj_description('forgeyard.fairness_weight(text, text, text, integer)'::regprocedure) IS NOT NULL,
          'fairness_weight has a COMMENT');
SELECT ok(NOT has_function_privilege('public', 'forgeyard.fairness_weight(text, text, text, integer)', 'EXECUTE'),
          'PUBLIC cannot execute fairness_weight');
SELECT forgeyard.queue_create('t1', 'fq', '{"fairness": true}');
SELECT is((SELECT fairness FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'fq'), true, 'queue_create stores fairness');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'fx', '{"fairness": 1}')$$),
          ARRAY['22023', 'queue option fairness must be true or false', ''], 'fairness not a boolean: 22023');
SELECT lives_ok($$SELECT forgeyard.fairness_weight('t1', 'fq', 'b', 3)$$, 'fairness_weight b 3');
SELECT is(pg_temp.err($$SELECT forgeyard.fairness_weight('t1', 'fq', 'b', 0)$$),
          ARRAY['22023', 'weight must be between 1 and 1000', ''], 'a weight of 0: 22023');
SELECT is(pg_temp.err($$SELECT forgeyard.fairness_weight('t1', 'fq', 'b', 1001)$$),
          ARRAY['22023', 'weight must be between 1 and 1000', ''], 'a weight above 1000: 22023');
SELECT is(pg_temp.err($$SELECT forgeyard.fairness_weight('t1', 'ra', 'b', 2)$$),
          ARRAY['22023', 'queue "ra" is not fair', 'set its option fairness first: forgeyard.queue_alter(tenant, queue, ''{"fairness": true}'')'],
          'a weight on a queue without fairness: 22023');
SELECT results_eq($$SELECT fairness_key, weight FROM forgeyard.queue_fair_keys WHERE tenant_id = 't1' AND queue = 'fq'$$,
                  $$VALUES ('b'::text, 3)$$, 'the refused weights changed nothing');
SELECT results_eq($$SELECT kind, subject, "limit" FROM forgeyard.flow_state WHERE tenant_id = 't1' AND queue = 'fq'$$,
                  $$VALUES ('fairness_weight'::text, 'b'::text, 'weight 3'::text)$$, 'flow_state shows a weight');
SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'fq', array_fill('a'::bytea, ARRAY[6]), fairness_key => 'a');
SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'fq', array_fill('b'::bytea, ARRAY[6]), fairness_key => 'b');
SELECT results_eq($$SELECT fairness_key, pass FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'fq' ORDER BY msg_id LIMIT 3$$,
                  $$VALUES ('a'::text, 1000000::bigint), ('a', 2000000), ('a', 3000000)$$,
                  'a key of weight 1 in an empty class: passes one unit apart from the start');
SELECT results_eq($$SELECT pass FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'fq' AND fairness_key = 'b' ORDER BY msg_id LIMIT 2$$,
                  $$VALUES (1333333::bigint), (1666666)$$,
                  'a key of weight 3 starts at the class''s lowest pending pass, a third of a unit apart');
SELECT is((SELECT string_agg(convert_from(payload, 'UTF8'), '') FROM forgeyard.claim('t1', 'fq', 'w', 8)), 'abbbabbb',
          'claims go by pass: three of b for each of a');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_alter('t1', 'fq', '{"fairness": false}')$$),
          ARRAY['22023', 'queue option fairness can be set or removed only while the queue holds no messages', ''],
          'removing fairness from a queue with messages: 22023');
SELECT forgeyard.event_type_register('t1', 'fair.ev', 1);
SELECT forgeyard.topic_create('t1', 'fairtopic');
SELECT forgeyard.subscribe('t1', 'fairtopic', 'fairsub');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'fairsub', '{"fairness": true}')$$, 'a subscription''s queue made fair');
SELECT forgeyard.publish('t1', 'fairtopic', 'fair.ev', 1, 'x');
SELECT isnt((SELECT pass FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'fairsub'), NULL,
            'a published event''s message in a fair subscription queue gets a pass');
SELECT is((SELECT count(*) FROM forgeyard.subscription_claim('t1', 'fairsub', 'w', 10)), 1::bigint,
          'and is claimed');
-- A dead letter does not count against the queue, so fairness can change while it is dead; a
-- redrive gives it what the queue's claim reads.
SELECT forgeyard.queue_create('t1', 'fr', '{"fairness": true, "dead_letter_payload": "keep"}');
SELECT forgeyard.enqueue('t1', 'fr', 'r');
SELECT forgeyard.nack('t1', 'fr', msg_id, claim_token, 'bad', true) FROM forgeyard.claim('t1', 'fr', 'w', 1);
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'fr', '{"fairness": false}')$$,
                'fairness removed while the queue holds only a dead letter');
SELECT is(forgeyard.dead_redrive('t1', 'fr', NULL, 10), 1, 'redriven');
SELECT is((SELECT pass FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'fr'), NULL::bigint,
          'a redrive into a queue no longer fair clears the pass');
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'fr', 'w', 10)), 1::bigint, 'and the message is claimed');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'fq')$$, 'queue_drop of a fair queue');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_fair_keys WHERE tenant_id = 't1' AND queue = 'fq'$$,
                'queue_drop removes its keys'' weights and passes');

-------------------------------------------------------------------------------------------------
-- Priority aging
-------------------------------------------------------------------------------------------------
SELECT forgeyard.queue_create('t1', 'aq', '{"aging": "1 minute"}');
SELECT is((SELECT aging_usecs FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'aq'), 60000000::bigint,
          'queue_create stores aging');
SELECT is((SELECT options->>'aging' FROM forgeyard.queue_list('t1') WHERE queue = 'aq'), '00:01:00',
          'queue_list shows it as an interval');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'ax', '{"aging": "31 days"}')$$),
          ARRAY['22023', 'queue option aging is too long', 'the maximum is 2592000 seconds'], 'aging above 30 days: 22023');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'ax', '{"aging": "1 minute", "fairness": true}')$$),
          ARRAY['22023', 'queue option aging cannot be combined with fairness (a fair queue orders a class by pass, not by age)', ''],
          'aging with fairness: 22023');
SET forgeyard.now_override = '2030-04-01 00:00:00+00';
SELECT forgeyard.enqueue('t1', 'aq', 'bulk', priority => 'bulk');
SET forgeyard.now_override = '2030-04-01 01:00:00+00';
SELECT forgeyard.enqueue('t1', 'aq', 'realtime', priority => 'realtime');
SELECT forgeyard.enqueue('t1', 'aq', 'security', priority => 'security_control');
SELECT forgeyard.enqueue('t1', 'aq', 'interactive', priority => 'interactive');
CREATE TEMP TABLE aged (n serial, payload text, priority text);
INSERT INTO aged (payload, priority) SELECT convert_from(payload, 'UTF8'), priority FROM forgeyard.claim('t1', 'aq', 'w', 1);
INSERT INTO aged (payload, priority) SELECT convert_from(payload, 'UTF8'), priority FROM forgeyard.claim('t1', 'aq', 'w', 1);
INSERT INTO aged (payload, priority) SELECT convert_from(payload, 'UTF8'), priority FROM forgeyard.claim('t1', 'aq', 'w', 1);
INSERT INTO aged (payload, priority) SELECT convert_from(payload, 'UTF8'), priority FROM forgeyard.claim('t1', 'aq', 'w', 1);
SELECT results_eq($$SELECT payload, priority FROM aged ORDER BY n$$,
                  $$VALUES ('security'::text, 'security_control'::text), ('bulk', 'bulk'), ('realtime', 'realtime'),
                           ('interactive', 'interactive')$$,
                  'an hour-old bulk message competes as realtime (older than the realtime one), never above security_control; its class stays bulk');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'aq', '{"aging": null}')$$, 'aging null removes it');
SELECT is((SELECT aging_usecs FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'aq'), 0::bigint, 'no aging');
RESET forgeyard.now_override;

SELECT * FROM finish();
ROLLBACK;
