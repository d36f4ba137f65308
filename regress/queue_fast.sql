-- Queue hot paths (docs/performance.md#hot-paths): what the fast claim and ack must preserve.
-- The claim is one statement over the priority classes with one generic plan per backend; the
-- ack of the current delivery is one statement; queue options and tenant bindings are cached per
-- backend and dropped through relcache invalidation. Pinned here: the plan shape (also under
-- plan_cache_mode = force_generic_plan), class order, delayed classes not blocking, no double
-- claim, fencing (FY001), exact bounds (FY020 at the limit, room back after each ack), partition
-- heads, lapsed deliveries, and cache invalidation within one transaction (and its rollback).
-- Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(60);

SET TIME ZONE 'UTC';

\ir lib/err.sql
\ir lib/queue.sql

CREATE FUNCTION pg_temp.plan(t text, q text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(p.plan, E'\n') FROM forgeyard.claim_plan($1, $2) p
$$;
CREATE FUNCTION pg_temp.used(t text, q text) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_temp.admitted($1, $2) - pg_temp.released($1, $2)
$$;

-------------------------------------------------------------------------------------------------
-- Plan shape: one statement, one index range scan per class, rows updated by tuple id
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2031-01-01 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'fast')$$, 'queue "fast"');
SELECT is((SELECT count(*)::integer FROM regexp_matches(pg_temp.plan('t1', 'fast'), 'Index Scan using messages_claim on messages', 'g')),
          6, 'the claim plan: one index range scan of messages_claim per priority class, in one statement');
SELECT is((SELECT count(*)::integer FROM regexp_matches(pg_temp.plan('t1', 'fast'), 'Update on messages', 'g')),
          1, 'the claim plan: one UPDATE');
SELECT matches(pg_temp.plan('t1', 'fast'), 'Tid Scan on messages m', 'the claimed rows are updated by tuple id (Tid Scan)');
SELECT doesnt_match(pg_temp.plan('t1', 'fast'), 'Seq Scan|Sort|Hash', 'the claim plan of an almost empty table: no Seq Scan, no Sort, no Hash');
SELECT matches(pg_temp.plan('t1', 'fast'), 'Append', 'the classes are branches of one Append under the limit');
SELECT matches(pg_temp.plan('t1', 'fast'), '\$1', 'the plan is generic: the tenant stays a parameter');
SET LOCAL plan_cache_mode = force_generic_plan;
SELECT doesnt_match(pg_temp.plan('t1', 'fast'), 'Seq Scan|Sort', 'under force_generic_plan: no Seq Scan, no Sort');
CALL pg_temp.enq('f1', 't1', 'fast', 'f1');
SELECT is(pg_temp.claim('f-c1', 't1', 'fast', 'w'), pg_temp.ids('f1'), 'under force_generic_plan a claim finds its message');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('f1'), pg_temp.tok('f-c1', 'f1')),
                'under force_generic_plan the ack of the current delivery works');
SELECT is(pg_temp.stored('t1', 'fast'), 0::bigint, 'and deleted it');
RESET plan_cache_mode;

-------------------------------------------------------------------------------------------------
-- Class order, oldest first, delayed classes do not block, no double claim
-------------------------------------------------------------------------------------------------
CALL pg_temp.enq('b1', 't1', 'fast', 'b1', NULL, NULL, 'bulk');
CALL pg_temp.enq('i1', 't1', 'fast', 'i1', NULL, NULL, 'interactive');
CALL pg_temp.enq('e1', 't1', 'fast', 'e1', NULL, NULL, 'emergency');
CALL pg_temp.enq('i2', 't1', 'fast', 'i2', NULL, NULL, 'interactive');
CALL pg_temp.enq('d1', 't1', 'fast', 'd1', NULL, NULL, 'emergency', '1 hour');
CALL pg_temp.enq('r1', 't1', 'fast', 'r1', NULL, NULL, 'realtime', '1 hour');
SELECT is(pg_temp.claim('o-1', 't1', 'fast', 'w', 3, '2 hours'), pg_temp.ids('e1', 'i1', 'i2'),
          'claim 3: the highest class first, then oldest first; delayed emergency/realtime messages do not block');
SELECT is((SELECT array_agg(priority ORDER BY ord) FROM cl WHERE k = 'o-1'), ARRAY['emergency', 'interactive', 'interactive'],
          'each delivery names its class');
SELECT is(pg_temp.claim('o-2', 't1', 'fast', 'w', 10, '2 hours'), pg_temp.ids('b1'), 'the next claim gets only what is left (no double claim)');
SELECT is(pg_temp.claim('o-3', 't1', 'fast', 'w', 10), '{}'::bigint[], 'nothing visible: an empty claim');
SELECT is((SELECT count(DISTINCT msg_id)::integer FROM cl WHERE k LIKE 'o-%'), 4, 'four deliveries, four distinct messages');
SET forgeyard.now_override = '2031-01-01 01:00:00+00';
SELECT is(pg_temp.claim('o-4', 't1', 'fast', 'w', 1), pg_temp.ids('d1'),
          'once visible, the delayed emergency message comes first');

-------------------------------------------------------------------------------------------------
-- Fencing: the one-statement ack acts only for the current delivery
-------------------------------------------------------------------------------------------------
INSERT INTO snaps SELECT 'fence', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('d1'), pg_temp.tok('o-4', 'd1') + 1000),
                 'FY001', format('claim token %s is not the current delivery of message %s', pg_temp.tok('o-4', 'd1') + 1000, pg_temp.id('d1')),
                 'ack with a token that is not the current one: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'fence'), 'the refused ack changed nothing');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('d1'), pg_temp.tok('o-4', 'd1')),
                'ack of d1 with its current token');
-- e1's delivery lapsed (2 hours visibility) and is claimed again: the old token is stale.
SET forgeyard.now_override = '2031-01-01 03:00:00+00';
SELECT is(pg_temp.claim('o-5', 't1', 'fast', 'w', 1), pg_temp.ids('e1'), 'the lapsed emergency delivery is claimed again');
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('e1'), pg_temp.tok('o-1', 'e1')),
                 'FY001', NULL, 'ack with the token of the lapsed delivery: FY001');
SELECT is((SELECT attempt FROM pg_temp.msg('e1')), 2, 'e1 is on its second attempt');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('e1'), pg_temp.tok('o-5', 'e1')),
                'ack with the current token');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'fast', pg_temp.id('e1'), pg_temp.tok('o-5', 'e1')),
                'ack again: a no-op');
SELECT is(pg_temp.stored('t1', 'fast'), 4::bigint, 'd1 and e1 are gone, the others stay');
SELECT is(pg_temp.used('t1', 'fast'), 4::bigint, 'their room went back to their slots, once each');
SELECT is(pg_temp.claim('o-6', 't1', 'fast', 'w', 1), pg_temp.ids('r1'), 'then the realtime message, before the lapsed interactive ones');
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't2', 'fast', pg_temp.id('i1'), pg_temp.tok('o-1', 'i1')),
                 '42704', NULL, 'ack naming another tenant: the queue does not exist there');

-------------------------------------------------------------------------------------------------
-- Bounds exact: FY020 at the limit, one message of room back after each ack
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'tight', '{"max_messages": 3, "admit_realtime": 100, "admit_interactive": 100}')$$, 'queue "tight" (3)');
SELECT is(pg_temp.fill('t1', 'tight', 'interactive', 10), 3, 'exactly 3 messages admitted');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'tight', 'x')$$, 'FY020', NULL, 'the 4th: FY020');
SELECT is(array_length(pg_temp.claim('t-1', 't1', 'tight', 'w', 3), 1), 3, 'claim all 3');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'tight', c.msg_id, c.claim_token), 'ack one')
  FROM cl c WHERE c.k = 't-1' AND c.ord = 1;
SELECT is(pg_temp.fill('t1', 'tight', 'interactive', 10), 1, 'after one ack exactly one more is admitted');
SELECT is(pg_temp.used('t1', 'tight'), 3::bigint, 'the counters match the live messages');

-------------------------------------------------------------------------------------------------
-- Partition heads: the ack of a head makes the next message of its key the head
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'part', '{"ordering": "partition"}')$$, 'queue "part"');
CALL pg_temp.enq('p1', 't1', 'part', 'p1', NULL, 'k');
CALL pg_temp.enq('p2', 't1', 'part', 'p2', NULL, 'k');
CALL pg_temp.enq('q1', 't1', 'part', 'q1', NULL, 'j');
SELECT is(pg_temp.claim('p-1', 't1', 'part', 'w', 10), pg_temp.ids('p1', 'q1'), 'only the heads of k and j');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'part', pg_temp.id('p1'), pg_temp.tok('p-1', 'p1')), 'ack the head of k');
SELECT is((SELECT is_head FROM pg_temp.msg('p2')), true, 'p2 is the head of k now');
SELECT is(pg_temp.claim('p-2', 't1', 'part', 'w', 10), pg_temp.ids('p2'), 'and is claimed next');

-------------------------------------------------------------------------------------------------
-- A delivery that lapsed on every attempt is dead-lettered and the claim takes the next one
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2031-01-02 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'lapse', '{"max_attempts": 1}')$$, 'queue "lapse" (1 attempt)');
CALL pg_temp.enq('l1', 't1', 'lapse', 'l1');
SELECT is(pg_temp.claim('l-1', 't1', 'lapse', 'w', 1), pg_temp.ids('l1'), 'l1 claimed, then its visibility runs out');
SET forgeyard.now_override = '2031-01-02 00:01:00+00';
CALL pg_temp.enq('l2', 't1', 'lapse', 'l2');
SELECT is(pg_temp.claim('l-2', 't1', 'lapse', 'w', 1), pg_temp.ids('l2'), 'the next claim of 1 dead-letters l1 and still returns one: l2');
SELECT is((SELECT state FROM pg_temp.msg('l1')), 'dead', 'l1 is dead');

-------------------------------------------------------------------------------------------------
-- Cached queue options: a change applies to the next call of the same transaction; a rolled
-- back change is forgotten
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2031-01-03 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'opts')$$, 'queue "opts" (30 s visibility)');
CALL pg_temp.enq('c1', 't1', 'opts', 'c1');
CALL pg_temp.enq('c2', 't1', 'opts', 'c2');
CALL pg_temp.enq('c3', 't1', 'opts', 'c3');
SELECT is(pg_temp.claim('c-1', 't1', 'opts', 'w', 1), pg_temp.ids('c1'), 'claim with the options cached');
SELECT is((SELECT visible_at FROM pg_temp.msg('c1')), '2031-01-03 00:00:30+00'::timestamptz, 'visible again after 30 s');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'opts', '{"visibility_timeout": "5 minutes"}')$$, 'alter: 5 minutes');
SELECT is(pg_temp.claim('c-2', 't1', 'opts', 'w', 1), pg_temp.ids('c2'), 'claim after the alter, same transaction');
SELECT is((SELECT visible_at FROM pg_temp.msg('c2')), '2031-01-03 00:05:00+00'::timestamptz, 'the new visibility applies at once');
SAVEPOINT s;
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'opts', '{"visibility_timeout": "1 hour"}')$$, 'alter: 1 hour, then roll back');
ROLLBACK TO SAVEPOINT s;
SELECT is(pg_temp.claim('c-3', 't1', 'opts', 'w', 1), pg_temp.ids('c3'), 'claim after the rollback');
SELECT is((SELECT visible_at FROM pg_temp.msg('c3')), '2031-01-03 00:05:00+00'::timestamptz, 'the rolled-back option is forgotten');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'opts')$$, 'drop "opts"');
SELECT throws_ok($$SELECT * FROM forgeyard.claim('t1', 'opts', 'w')$$, '42704', NULL, 'a claim right after the drop: 42704, not the cached queue');

-------------------------------------------------------------------------------------------------
-- Cached tenant bindings: a binding applies to the next call of the same transaction
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_fast_worker;
SELECT lives_ok($$SELECT forgeyard.grant_usage('fy_fast_worker')$$, 'grant usage to a worker role');
SET LOCAL ROLE fy_fast_worker;
SELECT is((SELECT count(*) FROM forgeyard.claim('t1', 'fast', 'w', 1)), 1::bigint, 'an unbound role claims for t1 (bindings cached: none)');
RESET ROLE;
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_fast_worker', 't2')$$, 'bind it to t2');
SET LOCAL ROLE fy_fast_worker;
SELECT throws_ok($$SELECT * FROM forgeyard.claim('t1', 'fast', 'w')$$, 'FY040', NULL, 'bound to t2 in the same transaction: t1 is refused at once');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
