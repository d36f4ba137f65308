-- Durable queues (docs/sql-api.md#queues), part 2: dead letters (list with keyset pagination,
-- redrive, purge), queue_stats and pressure, the queue_depth and queue_overview views (and what a
-- bound inspection role sees), the claim plan shape, the consumer inbox, forgeyard.maintain(),
-- notify, and every bad input of those functions. regress/queue.sql has the rest.
-- Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(237);

SET TIME ZONE 'UTC';

\ir lib/err.sql
\ir lib/queue.sql

-- Claim the named message alone (it must be the next one) and fail it for good.
CREATE PROCEDURE pg_temp.kill(k text, t text, q text, error text DEFAULT 'poison') LANGUAGE plpgsql AS $$
DECLARE d record;
BEGIN
    SELECT c.msg_id, c.claim_token INTO d FROM forgeyard.claim(t, q, 'killer') c;
    IF d.msg_id IS DISTINCT FROM pg_temp.id(k) THEN
        RAISE EXCEPTION 'kill(%): claimed % instead', k, d.msg_id;
    END IF;
    PERFORM forgeyard.nack(t, q, d.msg_id, d.claim_token, error, true);
END $$;
-- The dead letters of a queue.
CREATE FUNCTION pg_temp.dead(t text, q text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(x.msg_id ORDER BY x.msg_id), '{}') FROM forgeyard.messages x
     WHERE x.tenant_id = $1 AND x.queue = $2 AND x.state = 'dead'
$$;

-------------------------------------------------------------------------------------------------
-- Dead letters: minimal metadata, payload only if the queue keeps it; keyset-paginated list
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dl', '{"max_attempts": 1}')$$, 'queue "dl": 1 attempt, dead payload dropped');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dk', '{"max_attempts": 1, "dead_letter_payload": "keep", "max_messages": 10}')$$,
                'queue "dk": 1 attempt, dead payload kept, 10 messages');
CALL pg_temp.enq('d1', 't1', 'dl', 'd1', '00000000-0000-0000-0000-0000000000d1', 'pk', 'realtime');
CALL pg_temp.enq('d2', 't1', 'dl', 'd2');
CALL pg_temp.enq('d3', 't1', 'dl', 'd3');
CALL pg_temp.enq('d4', 't1', 'dl', 'd4');
CALL pg_temp.enq('d5', 't1', 'dl', 'd5');
SELECT is(pg_temp.claim('dl-1', 't1', 'dl', 'w'), pg_temp.ids('d1'), 'd1 claimed');
SELECT is(forgeyard.nack('t1', 'dl', pg_temp.id('d1'), pg_temp.tok('dl-1', 'd1'), 'upstream 503'), 'dead',
          'd1 fails its only attempt: dead');
SET forgeyard.now_override = '2030-02-01 00:00:01+00';
CALL pg_temp.kill('d2', 't1', 'dl', 'bad json');
CALL pg_temp.kill('d3', 't1', 'dl');
CALL pg_temp.kill('d4', 't1', 'dl');
CALL pg_temp.kill('d5', 't1', 'dl');
SELECT results_eq(
    $$SELECT msg_id, event_id, partition_key, priority, attempt, error, error_class, dead_at, payload
        FROM forgeyard.dead_list('t1', 'dl') LIMIT 2$$,
    $$VALUES (pg_temp.id('d1'), '00000000-0000-0000-0000-0000000000d1'::uuid, 'pk'::text, 'realtime'::text, 1, 'upstream 503'::text,
              'max_attempts'::text, '2030-02-01 00:00:00+00'::timestamptz, NULL::bytea),
             (pg_temp.id('d2'), NULL, NULL, 'interactive', 1, 'bad json', 'permanent', '2030-02-01 00:00:01+00', NULL)$$,
    'dead_list: id, event_id, partition_key, class, attempt, error, error class, when it died; payload dropped (NULL)');
SELECT results_eq($$SELECT msg_id FROM forgeyard.dead_list('t1', 'dl')$$, $$SELECT unnest(pg_temp.ids('d1', 'd2', 'd3', 'd4', 'd5'))$$,
                  'dead_list: every dead letter in msg_id order');
SELECT results_eq($$SELECT msg_id FROM forgeyard.dead_list('t1', 'dl', 0, 2)$$, $$SELECT unnest(pg_temp.ids('d1', 'd2'))$$,
                  'page 1 (after 0, 2 rows): d1, d2');
SELECT results_eq(format('SELECT msg_id FROM forgeyard.dead_list(%L, %L, %s, 2)', 't1', 'dl', pg_temp.id('d2')),
                  $$SELECT unnest(pg_temp.ids('d3', 'd4'))$$, 'page 2 (after d2): d3, d4');
SELECT results_eq(format('SELECT msg_id FROM forgeyard.dead_list(%L, %L, %s, 2)', 't1', 'dl', pg_temp.id('d4')),
                  $$SELECT unnest(pg_temp.ids('d5'))$$, 'page 3 (after d4): d5');
SELECT is_empty(format('SELECT * FROM forgeyard.dead_list(%L, %L, %s, 2)', 't1', 'dl', pg_temp.id('d5')),
                'after the last one: an empty page');
SELECT results_eq(format('SELECT msg_id FROM forgeyard.dead_list(%L, %L, %s)', 't1', 'dl', pg_temp.id('d3') - 1),
                  $$SELECT unnest(pg_temp.ids('d3', 'd4', 'd5'))$$, 'the key need not be a dead letter''s id');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead, bytes FROM forgeyard.queue_stats('t1', 'dl')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 5::bigint, 0::bigint)$$, 'dl: 5 dead letters, no live message, no bytes held');

CALL pg_temp.enq('k1', 't1', 'dk', 'k1', NULL, NULL, 'emergency');
CALL pg_temp.enq('k2', 't1', 'dk', 'k2', NULL, NULL, 'emergency');
CALL pg_temp.enq('k3', 't1', 'dk', 'k3', NULL, NULL, 'emergency');
CALL pg_temp.kill('k1', 't1', 'dk', 'e1');
CALL pg_temp.kill('k2', 't1', 'dk', 'e2');
CALL pg_temp.kill('k3', 't1', 'dk', 'e3');
SELECT results_eq($$SELECT payload, error, error_class FROM forgeyard.dead_list('t1', 'dk')$$,
                  $$VALUES ('k1'::bytea, 'e1'::text, 'permanent'::text), ('k2', 'e2', 'permanent'), ('k3', 'e3', 'permanent')$$,
                  'dead_letter_payload keep: dead_list returns the payloads');

-- Another tenant sees none of them.
SELECT lives_ok($$SELECT forgeyard.queue_create('t2', 'dl')$$, 't2 has a queue "dl" too');
SELECT is_empty($$SELECT * FROM forgeyard.dead_list('t2', 'dl')$$, 'dead_list of t2''s "dl": none of t1''s dead letters');
SELECT is(forgeyard.dead_purge('t2', 'dl', pg_temp.ids('d1', 'd2')), 0, 'dead_purge through t2 with t1''s ids: nothing');
SELECT is(forgeyard.dead_redrive('t2', 'dl', pg_temp.ids('k1')), 0, 'dead_redrive through t2 with t1''s ids: nothing');
SELECT is(pg_temp.dead('t1', 'dl'), pg_temp.ids('d1', 'd2', 'd3', 'd4', 'd5'), 't1''s dead letters are untouched');

-------------------------------------------------------------------------------------------------
-- dead_redrive: back in the queue at attempt 0; never without its payload; within capacity
-------------------------------------------------------------------------------------------------
INSERT INTO snaps SELECT 'redrive', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.dead_redrive(%L, %L, %L)', 't1', 'dl', pg_temp.ids('d1')), '22023',
                 format('dead letter %s cannot be redriven: its payload was dropped', pg_temp.id('d1')),
                 'dead_redrive of a dead letter whose payload was dropped: 22023');
SELECT is(pg_temp.err(format('SELECT forgeyard.dead_redrive(%L, %L, %L)', 't1', 'dl', pg_temp.ids('d2', 'd3'))),
          ARRAY['22023', format('dead letter %s cannot be redriven: its payload was dropped', pg_temp.id('d2')),
                'the queue has dead_letter_payload = drop'], '22023 names the first such dead letter and why');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'redrive'), 'the refused redrives changed nothing');
SELECT is(forgeyard.dead_redrive('t1', 'dl'), 0, 'dead_redrive without msg_ids skips dead letters without payload: 0');
SELECT is(forgeyard.dead_redrive('t1', 'dl', '{}'), 0, 'dead_redrive of an empty list: 0');

SET forgeyard.now_override = '2030-02-01 00:10:00+00';
SELECT is(forgeyard.dead_redrive('t1', 'dk', pg_temp.ids('k2')), 1, 'dead_redrive of k2: 1');
SELECT results_eq($$SELECT state, attempt, claim_token, visible_at, error_class, payload, finished_at FROM pg_temp.msg('k2')$$,
                  $$VALUES ('pending'::text, 0, NULL::bigint, '2030-02-01 00:10:00+00'::timestamptz, NULL::text, 'k2'::bytea, NULL::timestamptz)$$,
                  'a redriven message is pending again: attempt 0, visible now, its payload');
SELECT results_eq($$SELECT ready, dead, bytes FROM forgeyard.queue_stats('t1', 'dk')$$, $$VALUES (1::bigint, 2::bigint, 2::bigint)$$,
                  'redriven: 1 ready (its 2 bytes admitted again), 2 still dead');
SELECT is(pg_temp.claim('dk-1', 't1', 'dk', 'w'), pg_temp.ids('k2'), 'the redriven message is claimed');
SELECT results_eq($$SELECT attempt, payload FROM cl WHERE k = 'dk-1'$$, $$VALUES (1, 'k2'::bytea)$$,
                  'as a fresh delivery: attempt 1, with its payload');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'dk', pg_temp.id('k2'), pg_temp.tok('dk-1', 'k2')), 'and acked');
SELECT is(forgeyard.dead_redrive('t1', 'dk', pg_temp.ids('k2')), 0, 'dead_redrive of a message that is no dead letter: 0');

-- Capacity: a redrive is admitted like a new message.
SELECT is(pg_temp.fill('t1', 'dk', 'emergency', 1000), 10, 'dk is filled with 10 live messages (the 2 dead do not count)');
INSERT INTO snaps SELECT 'redrive-full', pg_temp.snap();
SELECT throws_ok($$SELECT forgeyard.dead_redrive('t1', 'dk')$$, 'FY020', 'queue "dk" is full for priority class emergency',
                 'dead_redrive into a full queue: FY020');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'redrive-full'), 'the refused redrive changed nothing');
DO $$ DECLARE d record; BEGIN
    FOR d IN SELECT * FROM forgeyard.claim('t1', 'dk', 'w', 1) LOOP
        PERFORM forgeyard.ack('t1', 'dk', d.msg_id, d.claim_token);
    END LOOP;
END $$;
SELECT throws_ok($$SELECT forgeyard.dead_redrive('t1', 'dk')$$, 'FY020', NULL,
                 'room for one but two to redrive: FY020, all or nothing');
SELECT is(pg_temp.dead('t1', 'dk'), pg_temp.ids('k1', 'k3'), 'both are still dead letters');
SELECT is(forgeyard.dead_redrive('t1', 'dk', NULL, 1), 1, 'dead_redrive with max_rows 1: the oldest one');
SELECT is(pg_temp.dead('t1', 'dk'), pg_temp.ids('k3'), 'k1 went back, k3 is still dead');

-- In a partition queue a redriven message waits behind the key's head.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dp', '{"ordering": "partition", "dead_letter_payload": "keep"}')$$,
                'queue "dp": partition-ordered, dead payload kept');
CALL pg_temp.enq('p1', 't1', 'dp', 'p1', NULL, 'K');
CALL pg_temp.enq('p2', 't1', 'dp', 'p2', NULL, 'K');
CALL pg_temp.kill('p1', 't1', 'dp');
SELECT is(pg_temp.claim('dp-1', 't1', 'dp', 'w', 10), pg_temp.ids('p2'), 'p1 died; p2 is the head of K and claimed');
SELECT is(forgeyard.dead_redrive('t1', 'dp', pg_temp.ids('p1')), 1, 'p1 redriven while p2 is in flight');
SELECT results_eq($$SELECT state, is_head FROM pg_temp.msg('p1')$$, $$VALUES ('pending'::text, false)$$,
                  'the redriven p1 is pending but not the head of K');
SELECT is(pg_temp.claim('dp-2', 't1', 'dp', 'w', 10), '{}'::bigint[], 'K has p2 in flight: p1 waits');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'dp', pg_temp.id('p2'), pg_temp.tok('dp-1', 'p2')), 'p2 acked');
SELECT is(pg_temp.claim('dp-3', 't1', 'dp', 'w', 10), pg_temp.ids('p1'), 'then p1 is the head of K and claimed');

-------------------------------------------------------------------------------------------------
-- dead_purge
-------------------------------------------------------------------------------------------------
SELECT is(forgeyard.dead_purge('t1', 'dl', pg_temp.ids('d1', 'd3')), 2, 'dead_purge of d1 and d3: 2');
SELECT is(pg_temp.dead('t1', 'dl'), pg_temp.ids('d2', 'd4', 'd5'), 'd2, d4, d5 are left');
SELECT is(forgeyard.dead_purge('t1', 'dl', pg_temp.ids('d1')), 0, 'dead_purge of an already purged one: 0');
SELECT is(forgeyard.dead_purge('t1', 'dp', pg_temp.ids('p1')), 0, 'dead_purge of a pending (in flight) message: 0, untouched');
SELECT is((SELECT state FROM pg_temp.msg('p1')), 'pending', 'p1 is still pending');
SELECT is(forgeyard.dead_purge('t1', 'dl'), 3, 'dead_purge without msg_ids: all the rest (3)');
SELECT is(forgeyard.dead_purge('t1', 'dl'), 0, 'dead_purge again: 0');
SELECT results_eq($$SELECT dead FROM forgeyard.queue_stats('t1', 'dl')$$, $$VALUES (0::bigint)$$, 'dl has no dead letter left');

-------------------------------------------------------------------------------------------------
-- queue_stats: ready, in flight, delayed, dead, bytes, oldest ready age, pressure
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-02 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'st')$$, 'queue "st"');
SELECT results_eq($$SELECT * FROM forgeyard.queue_stats('t1', 'st')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, NULL::interval, 'normal'::text, 0::bigint, 0::bigint)$$,
                  'an empty queue: zeros, no oldest ready age, pressure normal, none waiting or delayed by a budget');
CALL pg_temp.enq('s1', 't1', 'st', '0123456789');
CALL pg_temp.enq('s2', 't1', 'st', '01234567890123456789');
SET forgeyard.now_override = '2030-02-02 00:00:10+00';
CALL pg_temp.enq('s3', 't1', 'st', '012345678901234567890123456789', NULL, NULL, 'interactive', '1 hour');
CALL pg_temp.enq('s4', 't1', 'st', '01234');
CALL pg_temp.enq('s5', 't1', 'st', '0123456', NULL, NULL, 'emergency');
CALL pg_temp.kill('s5', 't1', 'st');
SELECT is(pg_temp.claim('st-1', 't1', 'st', 'w'), pg_temp.ids('s1'), 's1 claimed until 00:00:40');
SET forgeyard.now_override = '2030-02-02 00:00:20+00';
SELECT results_eq($$SELECT * FROM forgeyard.queue_stats('t1', 'st')$$,
                  $$VALUES (2::bigint, 1::bigint, 1::bigint, 1::bigint, 65::bigint, '20 seconds'::interval, 'normal'::text,
                           0::bigint, 0::bigint)$$,
                  'queue_stats: 2 ready (s2, s4), 1 in flight (s1), 1 delayed (s3), 1 dead (s5); 65 bytes held (not the dead 7); oldest ready 20 s old');
SELECT results_eq(
    $$SELECT class, state, messages, bytes, oldest_age FROM forgeyard.queue_depth WHERE tenant_id = 't1' AND queue = 'st'
       ORDER BY class, state$$,
    $$VALUES ('emergency'::text, 'dead'::text, 1::bigint, 7::numeric, '10 seconds'::interval),
             ('interactive', 'delayed', 1, 30, '10 seconds'),
             ('interactive', 'in_flight', 1, 10, '20 seconds'),
             ('interactive', 'ready', 2, 25, '20 seconds')$$,
    'queue_depth: messages, bytes and age by class and state');
SELECT results_eq(
    $$SELECT ordering, admitted_messages, max_messages, admitted_bytes, max_bytes, pressure FROM forgeyard.queue_overview
       WHERE tenant_id = 't1' AND queue = 'st'$$,
    $$VALUES ('none'::text, 4::numeric, 100000::bigint, 65::numeric, 1073741824::bigint, 'normal'::text)$$,
    'queue_overview: messages and bytes held against the limits');
SET forgeyard.now_override = '2030-02-02 00:00:40+00';
SELECT results_eq($$SELECT ready, in_flight, oldest_ready_age FROM forgeyard.queue_stats('t1', 'st')$$,
                  $$VALUES (3::bigint, 0::bigint, '40 seconds'::interval)$$,
                  'a delivery whose visibility ran out counts as ready; the oldest ready is now s1, 40 s old');
SET forgeyard.now_override = '2030-02-02 01:00:10+00';
SELECT results_eq($$SELECT ready, delayed FROM forgeyard.queue_stats('t1', 'st')$$, $$VALUES (4::bigint, 0::bigint)$$,
                  'at its time the delayed message counts as ready');

-- Pressure: normal below 70%, elevated up to 90%, saturated above (queue_stats and queue_overview agree).
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'pr', '{"max_messages": 100}')$$, 'queue "pr" of 100 messages');
CREATE TEMP TABLE pressures (held int, stats text, overview text);
DO $$ DECLARE target int; BEGIN
    FOREACH target IN ARRAY ARRAY[0, 69, 70, 89, 90, 91, 100] LOOP
        PERFORM pg_temp.fill('t1', 'pr', 'emergency', target - (SELECT count(*)::int FROM forgeyard.messages WHERE queue = 'pr'));
        INSERT INTO pressures SELECT target, (SELECT pressure FROM forgeyard.queue_stats('t1', 'pr')),
                                     (SELECT pressure FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'pr');
    END LOOP;
END $$;
SELECT results_eq($$SELECT held, stats, overview FROM pressures ORDER BY held$$,
                  $$VALUES (0, 'normal'::text, 'normal'::text), (69, 'normal', 'normal'), (70, 'elevated', 'elevated'),
                           (89, 'elevated', 'elevated'), (90, 'elevated', 'elevated'), (91, 'saturated', 'saturated'),
                           (100, 'saturated', 'saturated')$$,
                  'pressure at 0 / 69 / 70 / 89 / 90 / 91 / 100 of 100: normal, normal, elevated, elevated, elevated, saturated, saturated');

-------------------------------------------------------------------------------------------------
-- Views: what an inspection role sees
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-03 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t2', 'seen');
    PERFORM forgeyard.enqueue('t2', 'seen', 'x');
    PERFORM forgeyard.queue_create('t3', 'seen');
    PERFORM forgeyard.enqueue('t3', 'seen', 'x');
END $$;
CREATE ROLE fy_q_insp;
CREATE ROLE fy_q_insp_all;
CREATE ROLE fy_q_app;
DO $$ BEGIN
    PERFORM forgeyard.grant_inspect('fy_q_insp');
    PERFORM forgeyard.grant_inspect('fy_q_insp_all');
    PERFORM forgeyard.grant_usage('fy_q_app');
    PERFORM forgeyard.bind_tenant('fy_q_insp', 't2');
END $$;
CREATE FUNCTION pg_temp.peek(tenant text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    IF tenant <> 't2' THEN RAISE EXCEPTION 'saw a row of tenant %', tenant; END IF;
    RETURN true;
END $$;
SET ROLE fy_q_insp;
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.queue_depth', $$VALUES ('t2'::text)$$,
                  'an inspection role bound to t2: queue_depth shows only t2');
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.queue_overview', $$VALUES ('t2'::text)$$,
                  'an inspection role bound to t2: queue_overview shows only t2');
SELECT lives_ok('SELECT * FROM forgeyard.queue_depth WHERE pg_temp.peek(tenant_id)',
                'queue_depth: a function in the WHERE clause never sees another tenant''s row (security_barrier)');
SELECT lives_ok('SELECT * FROM forgeyard.queue_overview WHERE pg_temp.peek(tenant_id)',
                'queue_overview: a function in the WHERE clause never sees another tenant''s row (security_barrier)');
SELECT throws_ok($$SELECT * FROM forgeyard.queue_stats('t2', 'seen')$$, '42501', NULL, 'an inspection role cannot call queue_stats');
SELECT throws_ok('SELECT * FROM forgeyard.messages', '42501', NULL, 'an inspection role cannot read forgeyard.messages');
RESET ROLE;
SET ROLE fy_q_insp_all;
SELECT results_eq('SELECT DISTINCT tenant_id FROM forgeyard.queue_overview ORDER BY 1', $$VALUES ('t1'::text), ('t2'), ('t3')$$,
                  'an unbound inspection role sees every tenant''s queues');
SELECT results_eq($$SELECT messages FROM forgeyard.queue_depth WHERE tenant_id = 't3' AND queue = 'seen'$$, $$VALUES (1::bigint)$$,
                  'an unbound inspection role sees every tenant''s depth');
RESET ROLE;
SET ROLE fy_q_app;
SELECT throws_ok('SELECT * FROM forgeyard.queue_depth', '42501', NULL, 'an application role cannot read queue_depth');
SELECT throws_ok('SELECT * FROM forgeyard.queue_overview', '42501', NULL, 'an application role cannot read queue_overview');
SELECT results_eq($$SELECT ready FROM forgeyard.queue_stats('t3', 'seen')$$, $$VALUES (1::bigint)$$,
                  'an application role reads a queue''s depth with queue_stats');
RESET ROLE;
SELECT lives_ok($$SELECT forgeyard.bind_tenant('fy_q_app', 't2')$$, 'the application role is bound to t2');
SET ROLE fy_q_app;
SELECT throws_ok($$SELECT * FROM forgeyard.queue_stats('t3', 'seen')$$, 'FY040', 'tenant "t3" is not allowed for this role',
                 'a bound application role: queue_stats of another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.enqueue('t3', 'seen', 'x')$$, 'FY040', NULL, 'a bound application role: enqueue for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.claim('t3', 'seen', 'w')$$, 'FY040', NULL, 'a bound application role: claim for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.dead_list('t3', 'seen')$$, 'FY040', NULL, 'a bound application role: dead_list for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.queue_create('t3', 'mine')$$, 'FY040', NULL, 'a bound application role: queue_create for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.inbox_accept('t3', 'c', '00000000-0000-0000-0000-000000000001')$$, 'FY040', NULL,
                 'a bound application role: inbox_accept for another tenant -> FY040');
SELECT results_eq($$SELECT ready FROM forgeyard.queue_stats('t2', 'seen')$$, $$VALUES (1::bigint)$$,
                  'a bound application role: its own tenant works');
RESET ROLE;
SELECT results_eq($$SELECT ready FROM forgeyard.queue_stats('t3', 'seen')$$, $$VALUES (1::bigint)$$, 't3 is untouched');

-------------------------------------------------------------------------------------------------
-- Plan shape: the claim path is an index range scan on messages_claim, never a Seq Scan or a Sort
-------------------------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.plan(t text, q text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(p.plan, E'\n') FROM forgeyard.claim_plan($1, $2) p
$$;
SELECT matches(pg_temp.plan('t1', 'st'), 'Index Scan using messages_claim on messages', 'claim_plan: an Index Scan using messages_claim');
SELECT doesnt_match(pg_temp.plan('t1', 'st'), 'Seq Scan', 'claim_plan: no Seq Scan');
SELECT doesnt_match(pg_temp.plan('t1', 'st'), 'Sort', 'claim_plan: no Sort');
SELECT matches(pg_temp.plan('t1', 'st'), 'LockRows', 'claim_plan: the rows are locked (FOR UPDATE SKIP LOCKED) under the limit');

SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'big', '{"max_messages": 1000000}')$$, 'queue "big"');
DO $$ DECLARE c text; BEGIN
    FOREACH c IN ARRAY ARRAY['bulk', 'interactive', 'emergency', 'background'] LOOP
        PERFORM forgeyard.enqueue_batch('t1', 'big', array_fill('payload'::bytea, ARRAY[2500]), NULL, NULL, c);
    END LOOP;
END $$;
ANALYZE forgeyard.messages;
SELECT cmp_ok((SELECT reltuples FROM pg_class WHERE oid = 'forgeyard.messages'::regclass), '>=', 10000::real,
              'forgeyard.messages holds over 10000 rows, analyzed');
SELECT matches(pg_temp.plan('t1', 'big'), 'Index Scan using messages_claim on messages',
               'claim_plan of a deep queue after ANALYZE: still an Index Scan using messages_claim');
SELECT doesnt_match(pg_temp.plan('t1', 'big'), 'Seq Scan', 'claim_plan of a deep queue after ANALYZE: no Seq Scan');
SELECT doesnt_match(pg_temp.plan('t1', 'big'), 'Sort', 'claim_plan of a deep queue after ANALYZE: no Sort');
SELECT matches(pg_temp.plan('t1', 'st'), 'Index Scan using messages_claim on messages',
               'claim_plan of a small queue beside the deep one: an Index Scan using messages_claim');
SELECT doesnt_match(pg_temp.plan('t1', 'st'), 'Seq Scan|Sort', 'claim_plan of a small queue beside the deep one: no Seq Scan, no Sort');
SELECT is(array_length(pg_temp.claim('big-1', 't1', 'big', 'w', 10), 1), 10, 'claim from the deep queue: 10');
SELECT is((SELECT array_agg(DISTINCT x.priority) FROM cl JOIN forgeyard.messages x USING (msg_id) WHERE cl.k = 'big-1'),
          ARRAY[0::smallint], 'all of them emergency, the highest class present');

-------------------------------------------------------------------------------------------------
-- The inbox: true once, false for every duplicate; per tenant and consumer; transactional
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e1'), true, 'inbox_accept of a new event: true');
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e1'), false, 'the same event again: false');
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e1'), false, 'and again: false');
SELECT is(forgeyard.inbox_accept('t1', 'shipping', '00000000-0000-0000-0000-0000000000e1'), true, 'the same event, another consumer: true');
SELECT is(forgeyard.inbox_accept('t2', 'billing', '00000000-0000-0000-0000-0000000000e1'), true, 'the same event and consumer in another tenant: true');
SELECT results_eq($$SELECT tenant_id, consumer, accepted_at FROM forgeyard.inbox ORDER BY 1, 2$$,
                  $$VALUES ('t1'::text, 'billing'::text, '2030-03-01 00:00:00+00'::timestamptz), ('t1', 'shipping', '2030-03-01 00:00:00+00'),
                           ('t2', 'billing', '2030-03-01 00:00:00+00')$$,
                  'one inbox row per tenant, consumer and event, stamped with forgeyard.now()');
SAVEPOINT inbox;
SELECT forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e2') AS first_accept \gset
ROLLBACK TO SAVEPOINT inbox;
SELECT is(:'first_accept'::boolean, true, 'inside a transaction that then rolls back: true');
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e2'), true,
          'after the rollback the event was never accepted: true again');

-- inbox_purge: entries accepted more than older_than ago, bounded, per tenant.
SET forgeyard.now_override = '2030-03-02 00:00:00+00';
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e3'), true, 'a day later: a third event');
SELECT is(forgeyard.inbox_purge('1 day'), 0, 'inbox_purge 1 day at exactly one day: 0 (strictly older only)');
SET forgeyard.now_override = '2030-03-02 00:00:00.000001+00';
INSERT INTO snaps SELECT 'inbox', pg_temp.snap();
SELECT is(forgeyard.inbox_purge('1 day', 10000, 't2'), 1, 'inbox_purge for t2: its one old entry');
SELECT is(forgeyard.inbox_purge('1 day', 1, 't1'), 1, 'inbox_purge for t1 with max_rows 1: 1');
SELECT is(forgeyard.inbox_purge('1 day', 10000, 't1'), 2, 'the rest of t1''s old entries: 2');
SELECT results_eq($$SELECT event_id FROM forgeyard.inbox$$, $$VALUES ('00000000-0000-0000-0000-0000000000e3'::uuid)$$,
                  'only the entry younger than a day is left');
SELECT is(forgeyard.inbox_accept('t1', 'billing', '00000000-0000-0000-0000-0000000000e1'), true,
          'a purged event is accepted again (purge only what is older than any redelivery)');
SELECT is(forgeyard.inbox_purge(), 0, 'inbox_purge() by default keeps 7 days: nothing');

-------------------------------------------------------------------------------------------------
-- maintain(): expired idempotency keys, dedup events past the window, acked messages past
-- retain_acked, dead letters past retention or over max_dead, old inbox entries
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-04-01 00:00:00+00';
DELETE FROM forgeyard.inbox;
-- (The acks above left their room in delta rows of their generations, all older than this one.)
CREATE TEMP TABLE deltas_before AS SELECT count(*) AS n FROM forgeyard.queue_release_deltas;
-- (The producers above left their slots' admission rows, all of generations before this one; the
-- counts' segments other than this period's (0) that have pages are emptied by the folds, and
-- maintain() truncates one a table: regress/usage_segments.sql.)
CREATE FUNCTION pg_temp.sealed_with_pages() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (VALUES ('queue_release_deltas'), ('queue_admit_deltas')) t(n)
     WHERE EXISTS (SELECT FROM generate_series(1, 3) j
                    WHERE pg_catalog.pg_relation_size(('forgeyard.' || t.n || '_' || j)::regclass) > 0)
$$;
CREATE TEMP TABLE admit_before AS
SELECT (SELECT count(*) FROM forgeyard.queue_slots WHERE admit_gen IS NOT NULL) AS n, pg_temp.sealed_with_pages() AS segs;
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain()$$,
                  $$VALUES ('idempotency_keys'::text, 0::bigint), ('queue_events', 1), ('acked_messages', 0), ('dead_letters', 2), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', (SELECT n FROM deltas_before)), ('queue_lanes', 0), ('admit_deltas', (SELECT n FROM admit_before)), ('lane_segments', 0), ('usage_segments', (SELECT segs FROM admit_before))$$,
                  'maintain() returns each of its tasks with the rows it removed: d1''s dedup event (24 h window long over), k3 and s5 (dead 7 days ago), the acks'' release deltas, the slots'' admission rows and an emptied segment of each count');
SELECT ok((SELECT n FROM deltas_before) > 0 AND NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas),
          'the release deltas of older generations were folded: none is left');
SELECT is(pg_temp.dead('t1', 'dk') || pg_temp.dead('t1', 'st'), '{}'::bigint[], 'the dead letters past the default 7 days are gone');
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain() WHERE task <> 'usage_segments'$$,
                  $$SELECT unnest(ARRAY['idempotency_keys', 'queue_events', 'acked_messages', 'dead_letters', 'inbox', 'workflow_runs', 'schedules', 'release_deltas', 'queue_lanes', 'admit_deltas', 'lane_segments']), 0::bigint$$,
                  'maintain() again: every task, nothing left to remove (but emptied segments, one a pass)');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'mt', '{"dedup_window": "1 hour", "retain_acked": "30 minutes",
                   "dead_letter_retention": "2 hours", "max_dead": 2}')$$,
                'queue "mt": dedup 1 hour, acked kept 30 minutes, dead letters 2 hours, at most 2');
SELECT lives_ok($$SELECT forgeyard.queue_create('t2', 'mt', '{"dead_letter_retention": "2 hours"}')$$, 't2''s "mt": dead letters 2 hours');
DO $$ BEGIN
    PERFORM forgeyard.idem_begin('t1', 'scope', 'k', '\x01', '1 minute', '1 hour');
    PERFORM forgeyard.inbox_accept('t1', 'c', '00000000-0000-0000-0000-0000000000f1');
    PERFORM forgeyard.inbox_accept('t1', 'c', '00000000-0000-0000-0000-0000000000f2');
    PERFORM forgeyard.inbox_accept('t2', 'c', '00000000-0000-0000-0000-0000000000f3');
END $$;
CALL pg_temp.enq('ma', 't1', 'mt', 'acked', '00000000-0000-0000-0000-0000000000aa', NULL, 'emergency');
SELECT is(pg_temp.claim('mt-1', 't1', 'mt', 'w'), pg_temp.ids('ma'), 'ma claimed');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'mt', pg_temp.id('ma'), pg_temp.tok('mt-1', 'ma')), 'ma acked');
SELECT results_eq($$SELECT state, payload, finished_at FROM pg_temp.msg('ma')$$,
                  $$VALUES ('acked'::text, NULL::bytea, '2030-04-01 00:00:00+00'::timestamptz)$$,
                  'retain_acked: the acked message is kept as acked (payload dropped)');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead, bytes FROM forgeyard.queue_stats('t1', 'mt')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)$$, 'a kept acked message holds no capacity');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'mt', pg_temp.id('ma'), pg_temp.tok('mt-1', 'ma')),
                'a second ack of the kept acked message: a no-op');
SELECT is(forgeyard.enqueue('t1', 'mt', 'acked', '00000000-0000-0000-0000-0000000000aa'), pg_temp.id('ma'),
          'its event_id still returns it');
CALL pg_temp.enq('m1', 't1', 'mt', 'm1');
CALL pg_temp.enq('m2', 't1', 'mt', 'm2');
CALL pg_temp.enq('m3', 't1', 'mt', 'm3');
CALL pg_temp.enq('m4', 't1', 'mt', 'm4');
CALL pg_temp.enq('n1', 't2', 'mt', 'n1');
DO $$ BEGIN
    CALL pg_temp.kill('m1', 't1', 'mt');
    CALL pg_temp.kill('m2', 't1', 'mt');
    CALL pg_temp.kill('m3', 't1', 'mt');
    CALL pg_temp.kill('m4', 't1', 'mt');
    CALL pg_temp.kill('n1', 't2', 'mt');
END $$;
SELECT is(pg_temp.dead('t1', 'mt'), pg_temp.ids('m1', 'm2', 'm3', 'm4'), 't1''s mt has 4 dead letters (max_dead 2)');

INSERT INTO snaps SELECT 'maintain-bad', pg_temp.snap();
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain(1000, 't1') WHERE task NOT IN ('admit_deltas', 'usage_segments')$$,
                  $$VALUES ('idempotency_keys'::text, 0::bigint), ('queue_events', 0), ('acked_messages', 0), ('dead_letters', 2), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', 0), ('queue_lanes', 0), ('lane_segments', 0)$$,
                  'maintain at once: the dead letters over max_dead (2)');
SELECT is(pg_temp.dead('t1', 'mt'), pg_temp.ids('m3', 'm4'), 'the newest 2 dead letters are kept');
SELECT results_eq($$SELECT sum("rows") FROM forgeyard.maintain() WHERE task <> 'usage_segments'$$, $$VALUES (0::numeric)$$, 'maintain again: nothing more to do');

SET forgeyard.now_override = '2030-04-01 00:29:59.999999+00';
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain() WHERE task = 'acked_messages'$$, $$VALUES (0::bigint)$$,
                  'before retain_acked is over: the acked message stays');
SET forgeyard.now_override = '2030-04-01 00:30:00+00';
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain() WHERE task NOT IN ('admit_deltas', 'usage_segments')$$,
                  $$VALUES ('idempotency_keys'::text, 0::bigint), ('queue_events', 0), ('acked_messages', 1), ('dead_letters', 0), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', 0), ('queue_lanes', 0), ('lane_segments', 0)$$,
                  'after retain_acked (30 minutes): the acked message is removed');
SELECT is_empty($$SELECT * FROM pg_temp.msg('ma')$$, 'the acked row is gone');

SET forgeyard.now_override = '2030-04-01 01:00:00+00';
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain() WHERE task NOT IN ('admit_deltas', 'usage_segments')$$,
                  $$VALUES ('idempotency_keys'::text, 1::bigint), ('queue_events', 1), ('acked_messages', 0), ('dead_letters', 0), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', 0), ('queue_lanes', 0), ('lane_segments', 0)$$,
                  'after an hour: the expired idempotency key and the dedup event past its window');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_events WHERE tenant_id = 't1' AND queue = 'mt'$$, 'mt keeps no dedup event');
SELECT isnt(forgeyard.enqueue('t1', 'mt', 'other', '00000000-0000-0000-0000-0000000000aa'), pg_temp.id('ma'),
            'the purged event_id is free: a new message');

SET forgeyard.now_override = '2030-04-01 02:00:01+00';
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain(1000, 't2') WHERE task NOT IN ('admit_deltas', 'usage_segments')$$,
                  $$VALUES ('idempotency_keys'::text, 0::bigint), ('queue_events', 0), ('acked_messages', 0), ('dead_letters', 1), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', 0), ('queue_lanes', 0), ('lane_segments', 0)$$,
                  'maintain for t2 only: t2''s dead letter past its 2 hours');
SELECT is(pg_temp.dead('t1', 'mt'), pg_temp.ids('m3', 'm4'), 't1''s dead letters were left alone');
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain(1) WHERE task NOT IN ('admit_deltas', 'usage_segments')$$,
                  $$VALUES ('idempotency_keys'::text, 0::bigint), ('queue_events', 1), ('acked_messages', 0), ('dead_letters', 1), ('inbox', 0), ('workflow_runs', 0), ('schedules', 0), ('release_deltas', 0), ('queue_lanes', 0), ('lane_segments', 0)$$,
                  'maintain(1): at most one row per task (the event of the 01:00 message, one of two dead letters)');
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain(1) WHERE task = 'dead_letters'$$, $$VALUES (1::bigint)$$,
                  'the next bounded pass takes the next one');
SELECT is(pg_temp.dead('t1', 'mt'), '{}'::bigint[], 'dead letters past their retention are gone');

SET forgeyard.now_override = '2030-04-08 00:00:00+00';
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain() WHERE task = 'inbox'$$, $$VALUES (0::bigint)$$,
                  'inbox entries exactly 7 days old stay');
SET forgeyard.now_override = '2030-04-08 00:00:00.000001+00';
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain(1, 't1') WHERE task = 'inbox'$$, $$VALUES (1::bigint)$$,
                  'older than 7 days: purged, bounded by max_rows');
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain() WHERE task = 'inbox'$$, $$VALUES (2::bigint)$$,
                  'the rest, of every tenant');
SELECT is_empty('SELECT * FROM forgeyard.inbox', 'the inbox is empty');

-------------------------------------------------------------------------------------------------
-- notify: opt-in per queue. A NOTIFY is delivered at commit; this file never commits, so what
-- it can show is that enqueue into a notify queue works for a listener and sends nothing early.
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'nt', '{"notify": true}')$$, 'queue "nt" with notify');
SELECT is(pg_temp.claim('nt-0', 't1', 'nt', 'w'), '{}'::bigint[], 'nt starts empty');
LISTEN forgeyard_queue;
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'nt', 'wake up')$$, 'enqueue into a notify queue while listening');
SELECT lives_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'nt', '{a,b}')$$, 'enqueue_batch into a notify queue');
SELECT is(pg_notification_queue_usage(), 0::double precision, 'nothing is in the notification queue before commit');
SELECT is(array_length(pg_temp.claim('nt-1', 't1', 'nt', 'w', 10), 1), 3, 'polling finds the three messages without any notification');
UNLISTEN forgeyard_queue;

-------------------------------------------------------------------------------------------------
-- Bad input of the functions in this file; nothing changes
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-05-01 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.inbox_accept('t1', 'c', '00000000-0000-0000-0000-0000000000f9');
END $$;
INSERT INTO snaps SELECT 'bad', pg_temp.snap();
CREATE TEMP TABLE bad (n serial, call text, code char(5), message text);
INSERT INTO bad (call, code, message) VALUES
    -- queue_stats(tenant, queue)
    ($$forgeyard.queue_stats(NULL, 'st')$$,                      '22004', 'tenant must not be NULL'),
    ($$forgeyard.queue_stats('', 'st')$$,                        '22023', 'tenant must not be empty'),
    ($$forgeyard.queue_stats(repeat('t', 129), 'st')$$,          '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.queue_stats('t1', NULL)$$,                      '22004', 'queue must not be NULL'),
    ($$forgeyard.queue_stats('t1', '')$$,                        '22023', 'queue must not be empty'),
    ($$forgeyard.queue_stats('t1', repeat('q', 129))$$,          '22001', 'queue is longer than 128 bytes'),
    -- dead_list(tenant, queue, after_msg_id, max_rows)
    ($$forgeyard.dead_list(NULL, 'dk')$$,                        '22004', 'tenant must not be NULL'),
    ($$forgeyard.dead_list('t1', NULL)$$,                        '22004', 'queue must not be NULL'),
    ($$forgeyard.dead_list('t1', 'dk', 0, NULL)$$,               '22004', 'max_rows must not be NULL'),
    ($$forgeyard.dead_list('t1', 'dk', 0, 0)$$,                  '22023', 'max_rows must be between 1 and 10000'),
    ($$forgeyard.dead_list('t1', 'dk', 0, -1)$$,                 '22023', 'max_rows must be between 1 and 10000'),
    ($$forgeyard.dead_list('t1', 'dk', 0, 10001)$$,              '22023', 'max_rows must be between 1 and 10000'),
    -- dead_redrive(tenant, queue, msg_ids, max_rows)
    ($$forgeyard.dead_redrive(NULL, 'dk')$$,                     '22004', 'tenant must not be NULL'),
    ($$forgeyard.dead_redrive('t1', '')$$,                       '22023', 'queue must not be empty'),
    ($$forgeyard.dead_redrive('t1', 'dk', NULL, NULL)$$,         '22004', 'max_rows must not be NULL'),
    ($$forgeyard.dead_redrive('t1', 'dk', NULL, 0)$$,            '22023', 'max_rows must be between 1 and 10000'),
    ($$forgeyard.dead_redrive('t1', 'dk', NULL, 10001)$$,        '22023', 'max_rows must be between 1 and 10000'),
    -- dead_purge(tenant, queue, msg_ids)
    ($$forgeyard.dead_purge(NULL, 'dk')$$,                       '22004', 'tenant must not be NULL'),
    ($$forgeyard.dead_purge('t1', NULL)$$,                       '22004', 'queue must not be NULL'),
    ($$forgeyard.dead_purge('t1', repeat('q', 129))$$,           '22001', 'queue is longer than 128 bytes'),
    -- claim_plan(tenant, queue)
    ($$forgeyard.claim_plan(NULL, 'st')$$,                       '22004', 'tenant must not be NULL'),
    ($$forgeyard.claim_plan('t1', NULL)$$,                       '22004', 'queue must not be NULL'),
    -- inbox_accept(tenant, consumer, event_id)
    ($$forgeyard.inbox_accept(NULL, 'c', '00000000-0000-0000-0000-0000000000f8')$$,          '22004', 'tenant must not be NULL'),
    ($$forgeyard.inbox_accept('', 'c', '00000000-0000-0000-0000-0000000000f8')$$,            '22023', 'tenant must not be empty'),
    ($$forgeyard.inbox_accept(repeat('t', 129), 'c', '00000000-0000-0000-0000-0000000000f8')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.inbox_accept('t1', NULL, '00000000-0000-0000-0000-0000000000f8')$$,         '22004', 'consumer must not be NULL'),
    ($$forgeyard.inbox_accept('t1', '', '00000000-0000-0000-0000-0000000000f8')$$,           '22023', 'consumer must not be empty'),
    ($$forgeyard.inbox_accept('t1', repeat('c', 257), '00000000-0000-0000-0000-0000000000f8')$$, '22001', 'consumer is longer than 256 bytes'),
    ($$forgeyard.inbox_accept('t1', 'c', NULL)$$,                '22004', 'event_id must not be NULL'),
    -- inbox_purge(older_than, max_rows, tenant); NULL tenant means all tenants and is valid
    ($$forgeyard.inbox_purge(NULL)$$,                            '22004', 'older_than must not be NULL'),
    ($$forgeyard.inbox_purge('0')$$,                             '22023', 'older_than must be positive'),
    ($$forgeyard.inbox_purge('-1 day')$$,                        '22023', 'older_than must be positive'),
    ($$forgeyard.inbox_purge('1 mon')$$,                         '22023', 'older_than must not have a month or year component'),
    ($$forgeyard.inbox_purge('366 days')$$,                      '22023', 'older_than is too long'),
    ($$forgeyard.inbox_purge('1 day', NULL)$$,                   '22004', 'max_rows must not be NULL'),
    ($$forgeyard.inbox_purge('1 day', 0)$$,                      '22023', 'max_rows must be positive'),
    ($$forgeyard.inbox_purge('1 day', -5)$$,                     '22023', 'max_rows must be positive'),
    ($$forgeyard.inbox_purge('1 day', 10, '')$$,                 '22023', 'tenant must not be empty'),
    ($$forgeyard.inbox_purge('1 day', 10, repeat('t', 129))$$,   '22001', 'tenant is longer than 128 bytes'),
    -- maintain(max_rows, tenant)
    ($$forgeyard.maintain(NULL)$$,                               '22004', 'max_rows must not be NULL'),
    ($$forgeyard.maintain(0)$$,                                  '22023', 'max_rows must be positive'),
    ($$forgeyard.maintain(-1, 't1')$$,                           '22023', 'max_rows must be positive'),
    ($$forgeyard.maintain(10, '')$$,                             '22023', 'tenant must not be empty'),
    ($$forgeyard.maintain(10, repeat('t', 129))$$,               '22001', 'tenant is longer than 128 bytes');
SELECT throws_ok('SELECT * FROM ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad ORDER BY n;
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'bad'), 'after every rejected call the tables are exactly as before');

-------------------------------------------------------------------------------------------------
-- Release deltas (F19, 0.7.1; generations, 0.11.0): an ack gives room back into a row of
-- queue_release_deltas of its generation (forgeyard.now() in 100 ms units), never into the release
-- row itself. A delta of an old generation stands in here for one an ack left, twice. The bound
-- counts each at once; maintain() folds it into the release row, and the first ack of a generation in
-- a slot folds the older generations.
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'rd', '{"max_messages": 100}');
    PERFORM forgeyard.enqueue('t1', 'rd', '0123456789') FROM generate_series(1, 3);
END $$;
CREATE TEMP TABLE rd_claimed AS SELECT msg_id, claim_token FROM forgeyard.claim('t1', 'rd', 'c', 2);
INSERT INTO forgeyard.queue_release_deltas VALUES ('t1', 'rd', 0, 1, 10, 2);
SELECT is((SELECT admitted_messages || '/' || admitted_bytes FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'rd'),
          '2/20', 'a release delta counts against the admitted room at once (queue_overview)');
SELECT is((SELECT bytes FROM forgeyard.queue_stats('t1', 'rd')), 20::bigint, 'and in queue_stats');
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain(1000, 't1') WHERE task = 'release_deltas'$$,
                  $$VALUES ('release_deltas'::text, 1::bigint)$$, 'maintain() folds the delta into its release row');
SELECT is((SELECT released_messages || '/' || released_bytes || '/' || (SELECT count(*) FROM forgeyard.queue_release_deltas)
             FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rd'),
          '1/10/0', 'the release row holds it now and no delta is left');
INSERT INTO forgeyard.queue_release_deltas VALUES ('t1', 'rd', 0, 1, 10, 1);
SET forgeyard.now_override = '2031-06-01 00:00:00+00';
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rd', msg_id, claim_token) FROM rd_claimed ORDER BY msg_id LIMIT 1; END $$;
SELECT is((SELECT released_messages || '/' || released_bytes || '/' || folded_gen || ' '
                  || (SELECT string_agg(d.gen || ':' || d.released_messages || '/' || d.released_bytes, ',')
                        FROM forgeyard.queue_release_deltas d WHERE d.queue = 'rd')
             FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rd'),
          '2/20/19380384000 19380384000:1/10',
          'the first ack of a generation folds the slot''s older deltas into the release row, and adds its room to a delta row of its generation');
SELECT is((SELECT admitted_messages FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'rd'), 0::numeric,
          'the bound counts every release once');
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rd', msg_id, claim_token) FROM rd_claimed ORDER BY msg_id OFFSET 1; END $$;
SELECT is((SELECT released_messages || '/' || released_bytes || ' '
                  || (SELECT string_agg(d.gen || ':' || d.released_messages || '/' || d.released_bytes, ',')
                        FROM forgeyard.queue_release_deltas d WHERE d.queue = 'rd')
             FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rd'),
          '2/20 19380384000:2/20',
          'a second ack of the generation adds to that row in place: the release row is not touched');
SET forgeyard.now_override = '2031-06-01 00:00:00.1+00';
SELECT results_eq($$SELECT task, "rows" FROM forgeyard.maintain(1000, 't1') WHERE task = 'release_deltas'$$,
                  $$VALUES ('release_deltas'::text, 1::bigint)$$, 'maintain() folds the generation once it is past');
SELECT is((SELECT released_messages || '/' || (SELECT count(*) FROM forgeyard.queue_release_deltas WHERE queue = 'rd')
             FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rd'),
          '4/0', 'the release row holds every release now');
DO $$ BEGIN PERFORM forgeyard.enqueue('t1', 'rd', '0123456789'); END $$;
CREATE TEMP TABLE rd_claimed2 AS SELECT msg_id, claim_token FROM forgeyard.claim('t1', 'rd', 'c', 1);
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rd', msg_id, claim_token) FROM rd_claimed2; END $$;
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'rd')$$, 'queue_drop of a queue with a release delta');
SELECT is((SELECT count(*) FROM forgeyard.queue_release_deltas WHERE queue = 'rd'), 0::bigint,
          'queue_drop removes the queue''s deltas with it');
-- Acks fold into the release row at most once a second (0.12.0): every admission reads that
-- row, and under a held snapshot walks a version per fold. (ctid: a row updated gets a new one.)
SET forgeyard.now_override = '2031-07-01 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'rg', '{"max_messages": 100}');
    PERFORM forgeyard.enqueue('t1', 'rg', 'm') FROM generate_series(1, 4);
END $$;
CREATE TEMP TABLE rg_claimed AS SELECT msg_id, claim_token, row_number() OVER (ORDER BY msg_id) AS n
  FROM forgeyard.claim('t1', 'rg', 'c', 4);
CREATE FUNCTION pg_temp.rg() RETURNS text LANGUAGE sql AS $$
    SELECT r.released_messages || ' folded ' || (r.folded_gen - 19406304000) || ' deltas '
           || COALESCE((SELECT string_agg((d.gen - 19406304000) || ':' || d.released_messages, ' ' ORDER BY d.gen)
                          FROM forgeyard.queue_release_deltas d WHERE d.queue = 'rg'), 'none')
      FROM forgeyard.queue_releases r WHERE r.tenant_id = 't1' AND r.queue = 'rg'
$$;
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rg', msg_id, claim_token) FROM rg_claimed WHERE n = 1; END $$;
SELECT ctid::text AS rg_release FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rg' \gset
SET forgeyard.now_override = '2031-07-01 00:00:00.1+00';
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rg', msg_id, claim_token) FROM rg_claimed WHERE n = 2; END $$;
SELECT is(pg_temp.rg() || CASE WHEN (SELECT ctid::text FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'rg')
                                    = :'rg_release' THEN ', release row untouched' ELSE ', release row updated' END,
          '0 folded 0 deltas 0:1 1:1, release row untouched',
          'the first ack of a generation less than a second after the last fold leaves the older deltas and the release row alone');
SET forgeyard.now_override = '2031-07-01 00:00:01+00';
DO $$ BEGIN PERFORM forgeyard.ack('t1', 'rg', msg_id, claim_token) FROM rg_claimed WHERE n = 3; END $$;
SELECT is(pg_temp.rg(), '2 folded 10 deltas 10:1', 'a second after the last fold, the first ack of a generation folds them');
SELECT is((SELECT admitted_messages FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'rg'), 1::numeric,
          'the bound counts every release once');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'rg')$$, 'queue "rg" dropped');

-- A producer reads a slot's release deltas only when its release row alone leaves no room; room
-- that only a delta holds is still found.
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'rf', '{"max_messages": 10}');
    PERFORM forgeyard.enqueue('t1', 'rf', 'a') FROM generate_series(1, 9);
    PERFORM forgeyard.ack('t1', 'rf', c.msg_id, c.claim_token) FROM forgeyard.claim('t1', 'rf', 'c', 1) c;
END $$;
SELECT is((SELECT slots FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'rf'), 1, 'a queue of 10 has one slot (its interactive class admitted up to 9)');
SELECT is((SELECT r.released_messages || '/' || (SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                                  WHERE d.tenant_id = 't1' AND d.queue = 'rf')
             FROM forgeyard.queue_releases r WHERE r.tenant_id = 't1' AND r.queue = 'rf'),
          '0/1', 'a full queue''s ack gave its room back in a delta row, not in the release row');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'rf', 'b')$$, 'a producer finds the room the delta holds');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'rf', 'c')$$, 'FY020', NULL, 'and the bound holds after it');

-- Admission generations (0.12.0): producers add to their slot's row of the generation (forgeyard.now()
-- in seconds) in place, under the slot row's lock, which they do not update; the first producer
-- of a later generation folds that row into the slot row and makes its own. (ctid: a row updated
-- gets a new one.)
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
CREATE FUNCTION pg_temp.ag() RETURNS text LANGUAGE sql AS $$
    SELECT a.admitted_messages || '/' || a.admitted_bytes || ' gen ' || COALESCE((a.admit_gen - 1898553600)::text, 'none')
           || ' rows ' || COALESCE((SELECT string_agg((g.gen - 1898553600) || ':' || g.admitted_messages || '/' || g.admitted_bytes,
                                                      ' ' ORDER BY g.gen)
                                      FROM forgeyard.queue_admit_deltas g WHERE g.tenant_id = 't1' AND g.queue = 'ag'), 'none')
      FROM forgeyard.queue_slots a WHERE a.tenant_id = 't1' AND a.queue = 'ag'
$$;
SELECT is(extract(epoch FROM forgeyard.now())::bigint, 1898553600::bigint, 'the clock at 2030-03-01 is second 1898553600');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'ag', '{"max_messages": 10}')$$, 'queue "ag": one slot of 10');
SELECT is(pg_temp.ag(), '0/0 gen none rows none', 'a new slot has no generation row');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'a')$$, 'a first producer');
SELECT is(pg_temp.ag(), '0/0 gen 0 rows 0:1/1', 'the first producer of the slot makes the generation''s row with its message');
SELECT ctid::text AS ag_slot, (SELECT g.ctid::text FROM forgeyard.queue_admit_deltas g WHERE g.queue = 'ag') AS ag_row
  FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = 'ag' \gset
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'bb')$$, 'a second producer in the same second');
SELECT lives_ok($$SELECT forgeyard.enqueue_batch('t1', 'ag', ARRAY['c', 'd', 'e']::bytea[])$$, 'and a batch of three');
SELECT is(pg_temp.ag(), '0/0 gen 0 rows 0:5/6', 'they add to the generation''s row');
SELECT is((SELECT ctid::text FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = 'ag'), :'ag_slot',
          'and leave the slot row alone (no new version)');
SELECT isnt((SELECT ctid::text FROM forgeyard.queue_admit_deltas WHERE queue = 'ag'), :'ag_row',
            'the generation''s row is updated in place (a new version of it)');
SET forgeyard.now_override = '2030-03-01 00:00:01+00';
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'f')$$, 'a producer a second later');
SELECT is(pg_temp.ag(), '5/6 gen 1 rows 1:1/1',
          'the first producer of a later generation folds the older row into the slot row and makes its own');
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'g')$$, 'a producer whose clock is behind');
SELECT is(pg_temp.ag(), '5/6 gen 1 rows 1:2/2', 'adds to the slot''s generation, which stays');
SELECT is((SELECT admitted_messages || '/' || admitted_bytes FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'ag'),
          '7/8', 'queue_overview counts both rows');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'h'), forgeyard.enqueue('t1', 'ag', 'i')$$, 'two more: 9 of 10');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'ag', 'j')$$, 'FY020', NULL,
                 'the interactive class is full at 9: the bound counts both rows');
SELECT lives_ok($$SELECT forgeyard.queue_drop('t1', 'ag')$$, 'queue_drop of a queue with a generation row');
SELECT is((SELECT count(*) FROM forgeyard.queue_admit_deltas WHERE queue = 'ag'), 0::bigint,
          'queue_drop removes the generation row with the queue');
SET forgeyard.now_override = '';

-- The lanes' part of maintain(): how far one pass reads. (What a restore can leave behind a cursor
-- is regress/lane_segments.sql's.)
-- One pass reads the lanes of 64 queues at most (each sequence read holds a lock to the end of
-- the transaction), from the one after where the last pass ended, round to the first: 70 queues
-- whose only entry is at its cursor take two passes, the first ending at the 64th lowest lane
-- number. (A restored cursor at the listing's position, as above: each pass unlists the listings
-- of the lanes it read.)
DELETE FROM forgeyard.queue_lane_marks WHERE lane = -1;
DO $$ BEGIN
    FOR i IN 0 .. 69 LOOP
        PERFORM forgeyard.queue_create('t9', 'rot' || lpad(i::text, 2, '0'));
        PERFORM forgeyard.enqueue('t9', 'rot' || lpad(i::text, 2, '0'), 'x');
    END LOOP;
END $$;
-- (The cursors set between the passes: a pass reads the cursors of the lanes it visits, so the
-- first pass's lanes are those whose mark moved; pass 1 gives the 64 lowest a gap-free read.)
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain(1000, 't9') WHERE task = 'queue_lanes'$$,
                  $$VALUES (0::bigint)$$, 'the first pass reads 64 queues (no gap, nothing written)');
SELECT is((SELECT pos FROM forgeyard.queue_lane_marks WHERE lane = -1),
          (SELECT lanes FROM forgeyard.queues WHERE tenant_id = 't9' AND queue = 'rot63'), 'it ends at the 64th');
SELECT results_eq($$SELECT "rows" FROM forgeyard.maintain(1000, 't9') WHERE task = 'queue_lanes'$$,
                  $$VALUES (0::bigint)$$, 'the next pass goes on after it');
SELECT is((SELECT pos FROM forgeyard.queue_lane_marks WHERE lane = -1),
          (SELECT lanes FROM forgeyard.queues WHERE tenant_id = 't9' AND queue = 'rot57'),
          'it read the six, then went round to the first 58');
DO $$ BEGIN
    PERFORM pg_catalog.setval(('forgeyard.lane_' || (lanes * 8 + 3) || '_cursor')::regclass, 1)
       FROM forgeyard.queues WHERE tenant_id = 't9';
END $$;
SELECT lives_ok($$SELECT forgeyard.maintain(1000, 't9')$$, 'a pass with every cursor at its listing');
SELECT is((SELECT count(*) FROM forgeyard.queue_lane_entries l JOIN forgeyard.queues q ON l.lane BETWEEN q.lanes * 8 AND q.lanes * 8 + 7
            WHERE q.tenant_id = 't9'), 70::bigint,
          'their entries stay: no entry is deleted, they leave with their segment (its other entries are not consumed)');

SELECT * FROM finish();
ROLLBACK;
