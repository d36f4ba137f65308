-- Topics: durable pub/sub and the event type registry (docs/sql-api.md#topics): the registry and
-- FY050, topics and their options, subscriptions (queues fed by a topic) with filters, on_full and
-- max_subscriptions, publish in the publisher's transaction with the payload stored once, event_id
-- dedup, quarantine of unaccepted versions, publish_batch, subscription_claim, replay (start =
-- oldest, subscription_rewind) within retention, topic_purge, the subscription_lag view, tenant
-- isolation, roles, and every bad input. Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(146);

SET TIME ZONE 'UTC';
\ir lib/err.sql

SET forgeyard.now_override = '2030-01-01 00:00:00+00';

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.publish(text, text, text, integer, bytea, uuid, text, text)'::regprocedure),
          $$tenant text, topic text, event_type text, version integer, payload bytea, event_id uuid DEFAULT NULL::uuid, partition_key text DEFAULT NULL::text, priority text DEFAULT 'interactive'::text$$,
          'publish(tenant, topic, event_type, version, payload, event_id = NULL, partition_key = NULL, priority = interactive)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.publish(text, text, text, integer, bytea, uuid, text, text)'::regprocedure),
          'bigint', 'publish returns the event_seq');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.subscribe(text, text, text, jsonb)'::regprocedure),
          $$tenant text, topic text, subscription text, options jsonb DEFAULT '{}'::jsonb$$, 'subscribe(tenant, topic, subscription, options = {})');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.event_type_register(text, text, integer, jsonb)'::regprocedure),
          $$tenant text, event_type text, version integer, options jsonb DEFAULT '{}'::jsonb$$, 'event_type_register(tenant, event_type, version, options = {})');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.subscription_rewind(text, text, text, timestamptz)'::regprocedure),
          'bigint', 'subscription_rewind returns how many events it delivered again');
SELECT ok((SELECT bool_and(obj_description(p.oid, 'pg_proc') IS NOT NULL) FROM pg_proc p
            WHERE p.pronamespace = 'forgeyard'::regnamespace
              AND p.proname IN ('event_type_register', 'event_type_list', 'topic_create', 'topic_drop', 'topic_list',
                                'subscribe', 'unsubscribe', 'publish', 'publish_batch', 'subscription_rewind',
                                'subscription_claim', 'topic_purge')),
          'every topic function has a COMMENT');
SELECT is((SELECT count(*)::int FROM pg_proc p WHERE p.pronamespace = 'forgeyard'::regnamespace
            AND p.proname IN ('event_type_register', 'event_type_list', 'topic_create', 'topic_drop', 'topic_list',
                              'subscribe', 'unsubscribe', 'publish', 'publish_batch', 'subscription_rewind',
                              'subscription_claim', 'topic_purge')
            AND has_function_privilege('public', p.oid, 'EXECUTE')), 0, 'no topic function is executable by PUBLIC');
SELECT is((SELECT count(*)::int FROM forgeyard.access_catalog WHERE object LIKE '%topic%' OR object LIKE '%subscri%'
            OR object LIKE '%publish%' OR object LIKE '%event_type%'), 13, 'the 13 topic objects are in the access catalog');
SELECT ok(obj_description('forgeyard.subscription_lag'::regclass, 'pg_class') IS NOT NULL, 'subscription_lag has a COMMENT');

-------------------------------------------------------------------------------------------------
-- Event type registry
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.event_type_register('t1', 'order.created', 1)$$, 'register order.created v1');
SELECT lives_ok($$SELECT forgeyard.event_type_register('t1', 'order.created', 2, '{"retention_class": "audit"}')$$,
                'register order.created v2 with retention_class audit');
SELECT lives_ok($$SELECT forgeyard.event_type_register('t1', 'order.created', 1)$$, 'registering the same pair again is a no-op');
SELECT is(pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'order.created', 2, '{"retention_class": "short"}')$$),
          ARRAY['42710', 'event type "order.created" version 2 is registered with retention_class audit', ''],
          'the same pair with another retention class -> 42710');
SELECT results_eq($$SELECT event_type, version, retention_class FROM forgeyard.event_type_list('t1')$$,
                  $$VALUES ('order.created'::text, 1, 'operational'::text), ('order.created', 2, 'audit')$$,
                  'event_type_list: by type and version, operational by default');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'x', 1, '{"retention_class": "forever"}')$$))[1], '22023',
          'an unknown retention_class -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'x', 1, '{"ttl": 1}')$$))[1:2],
          ARRAY['22023', 'event type option ttl is unknown'], 'an unknown option -> 22023 naming it');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'x', 0)$$))[1:2],
          ARRAY['22023', 'version must be between 1 and 1000000'], 'version 0 -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'x', NULL)$$))[1], '22004', 'NULL version -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', NULL, 1)$$))[1], '22004', 'NULL event_type -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', '', 1)$$))[1], '22023', 'empty event_type -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', repeat('e', 129), 1)$$))[1], '22001', 'event_type over 128 bytes -> 22001');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register(NULL, 'x', 1)$$))[1], '22004', 'NULL tenant -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.event_type_register('t1', 'x', 1, '[]')$$))[1], '22023', 'options not an object -> 22023');
SELECT is((SELECT count(*)::int FROM forgeyard.event_types WHERE event_type = 'x'), 0, 'bad registrations changed nothing');

-------------------------------------------------------------------------------------------------
-- Topics
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.topic_create('t1', 'orders', '{"retention": "1 hour"}')$$, 'create topic orders with 1 hour retention');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'orders')$$))[1:2],
          ARRAY['42710', 'topic "orders" already exists for tenant "t1"'], 'creating it again -> 42710');
SELECT results_eq($$SELECT topic, options FROM forgeyard.topic_list('t1')$$,
                  $$VALUES ('orders'::text, '{"retention": "01:00:00", "dedup_window": "24:00:00", "max_subscriptions": 16}'::jsonb)$$,
                  'topic_list: options with defaults (max_subscriptions 16, dedup_window 24 h)');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"max_subscriptions": 0}')$$))[1:2],
          ARRAY['22023', 'topic option max_subscriptions must be between 1 and 256'], 'max_subscriptions 0 -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"max_subscriptions": 257}')$$))[1], '22023', 'max_subscriptions 257 -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"retention": "1 month"}')$$))[1], '22023', 'a retention with months -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"retention": "-1 hour"}')$$))[1], '22023', 'a negative retention -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"dedup_window": "0"}')$$))[1], '22023', 'a zero dedup_window -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', 'bad', '{"fanout": 2}')$$))[1:2],
          ARRAY['22023', 'topic option fanout is unknown'], 'an unknown topic option -> 22023 naming it');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', repeat('t', 129))$$))[1], '22001', 'a topic name over 128 bytes -> 22001');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_create('t1', NULL)$$))[1], '22004', 'NULL topic -> 22004');
SELECT is((SELECT count(*)::int FROM forgeyard.topics WHERE topic <> 'orders'), 0, 'bad topic_create calls changed nothing');

-------------------------------------------------------------------------------------------------
-- Subscriptions
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'orders', 'billing')$$, 'subscribe billing (every type)');
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'orders', 'v1only', '{"event_types": {"order.created": {"max": 1}}, "visibility_timeout": "10 seconds"}')$$,
                'subscribe v1only: order.created up to version 1, a queue option beside it');
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'orders', 'shipped', '{"event_types": ["order.shipped"]}')$$,
                'subscribe shipped: only order.shipped');
SELECT results_eq($$SELECT queue, options->>'visibility_timeout' FROM forgeyard.queue_list('t1') ORDER BY 1$$,
                  $$VALUES ('billing'::text, '00:00:30'::text), ('shipped', '00:00:30'), ('v1only', '00:00:10')$$,
                  'a subscription is a queue of the tenant, created with its queue options');
SELECT is((SELECT subscriptions FROM forgeyard.topic_list('t1')), '["billing", "shipped", "v1only"]'::jsonb, 'topic_list names the subscriptions');
SELECT is((SELECT event_types FROM forgeyard.subscriptions WHERE subscription = 'v1only'), '{"order.created": {"max": 1}}'::jsonb,
          'a filter is stored normalized');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 'billing')$$))[1], '42710', 'a subscription named like an existing queue -> 42710');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'nope', 's')$$))[1:2],
          ARRAY['42704', 'topic "nope" does not exist for tenant "t1"'], 'subscribe to an unknown topic -> 42704');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"on_full": "drop"}')$$))[1:2],
          ARRAY['22023', 'subscription option on_full must be reject or dead_letter'], 'on_full drop -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"start": "yesterday"}')$$))[1:2],
          ARRAY['22023', 'subscription option start must be now or oldest'], 'start yesterday -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": "order.created"}')$$))[1], '22023', 'event_types a string -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": []}')$$))[1:2],
          ARRAY['22023', 'subscription option event_types must list at least one type'], 'event_types empty -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": [1]}')$$))[1], '22023', 'event_types [1] -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": {"a": {"min": 3, "max": 2}}}')$$))[1:2],
          ARRAY['22023', 'event_types min must not be over max'], 'min over max -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": {"a": {"min": 0}}}')$$))[1], '22023', 'min 0 -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": {"a": {"min": "x"}}}')$$))[1], '22023', 'min not a number -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": {"a": {"from": 1}}}')$$))[1:2],
          ARRAY['22023', 'subscription option event_types: only min and max are allowed'], 'an unknown range key -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"event_types": {"a": 1}}')$$))[1], '22023', 'a range not an object -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', 's', '{"max_messages": 0}')$$))[1], '22023', 'a bad queue option -> 22023 (queue_create)');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', NULL)$$))[1], '22004', 'NULL subscription -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'orders', repeat('s', 129))$$))[1], '22001', 'a subscription name over 128 bytes -> 22001');
SELECT is((SELECT count(*)::int FROM forgeyard.queues WHERE queue = 's'), 0, 'bad subscribes created no queue');

-- max_subscriptions
SELECT lives_ok($$SELECT forgeyard.topic_create('t1', 'small', '{"max_subscriptions": 2}')$$, 'a topic with max_subscriptions 2');
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'small', 'small_a'); SELECT forgeyard.subscribe('t1', 'small', 'small_b')$$, 'two subscriptions');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t1', 'small', 'small_c')$$))[1:2],
          ARRAY['22023', 'topic "small" has its max_subscriptions of 2'], 'a third -> 22023: fan-out is bounded');
SELECT is((SELECT count(*)::int FROM forgeyard.queues WHERE queue = 'small_c'), 0, 'the refused subscription left no queue');
SELECT ok(forgeyard.unsubscribe('t1', 'small', 'small_b'), 'unsubscribe returns true for an existing one');
SELECT ok(NOT forgeyard.unsubscribe('t1', 'small', 'small_b'), 'and false the second time');
SELECT is((SELECT count(*)::int FROM forgeyard.queues WHERE queue = 'small_b'), 0, 'unsubscribe dropped its queue');
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'small', 'small_c')$$, 'after an unsubscribe there is room again');
SELECT is((pg_temp.err($$SELECT forgeyard.unsubscribe('t1', 'nope', 'x')$$))[1], '42704', 'unsubscribe on an unknown topic -> 42704');

-------------------------------------------------------------------------------------------------
-- Publish: FY050, fan-out, payload once, filters and quarantine
-------------------------------------------------------------------------------------------------
SELECT is(pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 3, 'x')$$),
          ARRAY['FY050', 'event type "order.created" version 3 is not registered for tenant "t1"', 'register it with event_type_register first'],
          'an unregistered version -> FY050');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.deleted', 1, 'x')$$))[1], 'FY050', 'an unregistered type -> FY050');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events), 0, 'a refused publish stored nothing');
SELECT is(forgeyard.publish('t1', 'orders', 'order.created', 1, '\x0101', '00000000-0000-4000-8000-000000000001'), 1::bigint,
          'publish returns the first event_seq');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events WHERE payload = '\x0101'), 1, 'the payload is stored once');
SELECT results_eq($$SELECT queue, state, payload IS NULL, bytes, error_class FROM forgeyard.messages ORDER BY queue$$,
                  $$VALUES ('billing'::text, 'pending'::text, true, 2::bigint, NULL::text), ('v1only', 'pending', true, 2, NULL)$$,
                  'each matching subscription got one payload-less message (shipped filters the type out)');
SELECT results_eq($$SELECT payload, event_id FROM forgeyard.claim('t1', 'billing', 'c1')$$,
                  $$VALUES ('\x0101'::bytea, '00000000-0000-4000-8000-000000000001'::uuid)$$,
                  'claim on a subscription delivers the event''s payload and event_id');
SELECT results_eq($$SELECT topic, event_type, version, event_seq, payload FROM forgeyard.subscription_claim('t1', 'v1only', 'c1')$$,
                  $$VALUES ('orders'::text, 'order.created'::text, 1, 1::bigint, '\x0101'::bytea)$$,
                  'subscription_claim carries topic, event_type, version and event_seq');
SELECT is(forgeyard.publish('t1', 'orders', 'order.created', 2, '\x02'), 2::bigint, 'publish v2');
SELECT results_eq($$SELECT state, error_class, last_error FROM forgeyard.messages m
                    WHERE queue = 'v1only' AND event_id = (SELECT event_id FROM forgeyard.topic_events WHERE event_seq = 2)$$,
                  $$VALUES ('dead'::text, 'schema_unsupported'::text, 'version 2 of event type "order.created" is outside the subscription''s accepted range'::text)$$,
                  'v2 is quarantined in v1only''s dead letters as schema_unsupported');
SELECT is((SELECT count(*)::int FROM forgeyard.subscription_claim('t1', 'v1only', 'c1', 10)), 0, 'and never reaches v1only''s consumer');
SELECT results_eq($$SELECT version FROM forgeyard.subscription_claim('t1', 'billing', 'c1', 10)$$, $$VALUES (2)$$,
                  'billing (every version) gets v2');
SELECT is((SELECT count(*)::int FROM forgeyard.dead_list('t1', 'v1only')), 1, 'the quarantined event is listed by dead_list');

-- The outbox rule: nothing survives a rollback.
SAVEPOINT before_rollback;
SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, 'rolled back') \gset ignored_
ROLLBACK TO SAVEPOINT before_rollback;
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events WHERE payload = 'rolled back'), 0, 'a rolled-back publish leaves no event');
SELECT is((SELECT count(*)::int FROM forgeyard.claim('t1', 'billing', 'c1', 10)), 0, 'and delivers nothing');

-- event_id dedup
SELECT is(forgeyard.publish('t1', 'orders', 'order.created', 1, '\x0101', '00000000-0000-4000-8000-000000000001'), 1::bigint,
          'the same event_id with the same contents returns the first event_seq');
SELECT is((SELECT count(*)::int FROM forgeyard.messages WHERE queue = 'billing'), 2, 'and delivers nothing again');
SELECT is(pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, '\x09', '00000000-0000-4000-8000-000000000001')$$),
          ARRAY['FY011', 'event_id was published before with other contents', 'event_seq 1 carries this event_id'],
          'the same event_id with another payload -> FY011');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 2, '\x0101', '00000000-0000-4000-8000-000000000001')$$))[1],
          'FY011', 'the same event_id with another version -> FY011');

-- Bad input
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'nope', 'order.created', 1, 'x')$$))[1:2],
          ARRAY['42704', 'topic "nope" does not exist for tenant "t1"'], 'publish to an unknown topic -> 42704');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, NULL)$$))[1], '22004', 'NULL payload -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', NULL, 'x')$$))[1], '22004', 'NULL version -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, 'x', NULL, NULL, 'urgent')$$))[1], '22023', 'an unknown priority -> 22023');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, 'x', NULL, repeat('k', 513))$$))[1], '22001', 'a partition_key over 512 bytes -> 22001');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, decode(repeat('00', 65537), 'hex'))$$))[1:2],
          ARRAY['FY021', 'payload of 65537 bytes is over the limit of queue "billing"'], 'a payload over a subscription''s max_payload_bytes -> FY021');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events), 2, 'bad publishes stored nothing');

-------------------------------------------------------------------------------------------------
-- on_full: reject (FY020 naming the subscription) or dead_letter (backlog_full)
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.event_type_register('t1', 'tick', 1);
                  SELECT forgeyard.topic_create('t1', 'ticks');
                  SELECT forgeyard.subscribe('t1', 'ticks', 'tick_strict', '{"max_messages": 2, "admit_realtime": 100, "admit_interactive": 100}');
                  SELECT forgeyard.subscribe('t1', 'ticks', 'tick_lossy', '{"max_messages": 1, "admit_realtime": 100, "admit_interactive": 100, "on_full": "dead_letter"}')$$,
                'topic ticks: a strict subscription of 2 and a dead-lettering one of 1');
SELECT ok(forgeyard.publish('t1', 'ticks', 'tick', 1, 'a') > 2::bigint, 'the first tick fits both (event_seq keeps growing)');
SELECT lives_ok($$SELECT forgeyard.publish('t1', 'ticks', 'tick', 1, 'b')$$, 'the second: tick_lossy is full and dead-letters it');
SELECT results_eq($$SELECT state, error_class, last_error FROM forgeyard.messages WHERE queue = 'tick_lossy' ORDER BY msg_id$$,
                  $$VALUES ('pending'::text, NULL::text, NULL::text), ('dead', 'backlog_full', 'subscription "tick_lossy" was full when the event was published')$$,
                  'a full dead_letter subscription records the event as a dead letter backlog_full (counted, visible)');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'ticks', 'tick', 1, 'c')$$))[1:2],
          ARRAY['FY020', 'queue "tick_strict" is full for priority class interactive'], 'a full reject subscription: publish -> FY020 naming it');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events WHERE topic = 'ticks'), 2, 'the refused publish stored nothing');
SELECT results_eq($$SELECT admitted_messages FROM forgeyard.queue_overview WHERE queue IN ('tick_strict', 'tick_lossy') ORDER BY queue$$,
                  $$VALUES (1::numeric), (2::numeric)$$, 'the counters admitted exactly what was delivered (dead letters do not count)');

-------------------------------------------------------------------------------------------------
-- Partition-ordered subscriptions and publish_batch
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'ticks', 'tick_ordered', '{"ordering": "partition"}')$$, 'a partition-ordered subscription');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'ticks', 'tick', 1, 'd', NULL, 'k')$$))[1:2],
          ARRAY['FY020', 'queue "tick_strict" is full for priority class interactive'], 'tick_strict is still full');
SELECT lives_ok($$SELECT forgeyard.unsubscribe('t1', 'ticks', 'tick_strict')$$, 'drop tick_strict');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'ticks', 'tick', 1, 'd')$$))[1:2],
          ARRAY['22023', 'partition_key is required: queue "tick_ordered" is partition-ordered'], 'a partition subscription needs a partition_key');
SELECT results_eq($$SELECT count(*)::int FROM forgeyard.publish_batch('t1', 'ticks', 'tick', 1, ARRAY['p1'::bytea, 'p2', 'p3'], NULL, ARRAY['k', 'k', 'j'])$$,
                  $$VALUES (3)$$, 'publish_batch publishes three keyed events');
SELECT results_eq($$SELECT payload FROM forgeyard.claim('t1', 'tick_ordered', 'c1', 10) ORDER BY msg_id$$,
                  $$VALUES ('p1'::bytea), ('p3')$$, 'partition order holds on a subscription: one in flight per key');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.publish_batch('t1', 'ticks', 'tick', 1, ARRAY['x'::bytea, NULL], NULL, ARRAY['k', 'k'])$$))[1],
          '22004', 'publish_batch with a NULL payload -> 22004');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.publish_batch('t1', 'ticks', 'tick', 1, ARRAY['x'::bytea], NULL, ARRAY['k', 'k'])$$))[1],
          '22023', 'publish_batch with partition_keys of another length -> 22023');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.publish_batch('t1', 'ticks', 'tick', 1, NULL)$$))[1], '22004', 'publish_batch with NULL payloads -> 22004');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.publish_batch('t1', 'ticks', 'tick', 9, ARRAY['x'::bytea])$$))[1], 'FY050', 'publish_batch of an unregistered version -> FY050');

-------------------------------------------------------------------------------------------------
-- Replay within retention: start = oldest, subscription_rewind, topic_purge
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'orders', 'late', '{"start": "oldest"}')$$, 'a new subscription starting at the oldest retained event');
SELECT results_eq($$SELECT event_seq FROM forgeyard.subscription_claim('t1', 'late', 'c1', 10) ORDER BY event_seq$$,
                  $$VALUES (1::bigint), (2)$$, 'it gets the retained events in event_seq order');
SELECT lives_ok($$SELECT forgeyard.subscribe('t1', 'orders', 'fresh')$$, 'a new subscription starting now (the default)');
SELECT is((SELECT count(*)::int FROM forgeyard.claim('t1', 'fresh', 'c1', 10)), 0, 'it gets nothing published before');
SET forgeyard.now_override = '2030-01-01 00:30:00+00';
SELECT is(forgeyard.subscription_rewind('t1', 'orders', 'fresh', '2029-12-31 00:00:00+00'), 2::bigint, 'rewind delivers the retained events again');
SELECT is(forgeyard.subscription_rewind('t1', 'orders', 'v1only', '2029-12-31 00:00:00+00'), 1::bigint,
          'rewind on a filtered subscription counts what reached its consumers (v2 is quarantined again)');
SET forgeyard.now_override = '2030-01-01 02:00:00+00';
SELECT is(forgeyard.subscription_rewind('t1', 'orders', 'fresh', '2029-12-31 00:00:00+00'), 0::bigint, 'past the retention nothing is replayed');
SELECT is((pg_temp.err($$SELECT forgeyard.subscription_rewind('t1', 'orders', 'ghost', now())$$))[1:2],
          ARRAY['42704', 'subscription "ghost" does not exist on topic "orders"'], 'rewind of an unknown subscription -> 42704');
SELECT is((pg_temp.err($$SELECT forgeyard.subscription_rewind('t1', 'orders', 'fresh', NULL)$$))[1], '22004', 'rewind since NULL -> 22004');
SELECT is((pg_temp.err($$SELECT forgeyard.subscription_rewind('t1', 'nope', 'fresh', now())$$))[1], '42704', 'rewind on an unknown topic -> 42704');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.subscription_claim('t1', 'nope', 'c1')$$))[1], '42704', 'subscription_claim on an unknown queue -> 42704');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.subscription_claim('t1', 'small_a', 'c1', 0)$$))[1], '22023', 'subscription_claim max_messages 0 -> 22023');
-- Purge: an event still pending in a subscription keeps its payload.
SET forgeyard.now_override = '2030-01-03 00:00:00+00';
SELECT ok(forgeyard.topic_purge(1000, 't1') >= 0, 'topic_purge runs');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events e WHERE e.topic = 'orders'), 2,
          'events that a pending subscription message needs are kept past retention');
SELECT lives_ok($$SELECT forgeyard.dead_purge('t1', q) FROM unnest(ARRAY['billing', 'v1only', 'late', 'fresh']) q;
                  DELETE FROM forgeyard.messages WHERE queue IN ('billing', 'v1only', 'late', 'fresh')$$, 'the subscriptions are emptied');
SELECT is(forgeyard.topic_purge(1000, 't1'), 2::bigint, 'then topic_purge deletes the orders events past retention and dedup window');
SELECT is((pg_temp.err($$SELECT forgeyard.topic_purge(0)$$))[1], '22023', 'topic_purge max_events 0 -> 22023');

-------------------------------------------------------------------------------------------------
-- Tenant isolation, roles, subscription_lag
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.event_type_register('t2', 'order.created', 1)$$, 't2 registers its own type');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t2', 'orders', 'order.created', 1, 'x')$$))[1:2],
          ARRAY['42704', 'topic "orders" does not exist for tenant "t2"'], 'tenant t2 cannot publish to t1''s topic (42704)');
SELECT is((pg_temp.err($$SELECT forgeyard.subscribe('t2', 'orders', 'spy')$$))[1], '42704', 'nor subscribe to it (42704)');
SELECT is((pg_temp.err($$SELECT forgeyard.subscription_rewind('t2', 'orders', 'billing', '-infinity')$$))[1], '42704', 'nor rewind it (42704)');
SELECT is((pg_temp.err($$SELECT * FROM forgeyard.subscription_claim('t2', 'billing', 'c1')$$))[1], '42704', 'nor claim t1''s subscription (42704)');
SELECT lives_ok($$SELECT forgeyard.topic_create('t2', 'own')$$, 't2 creates a topic');
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t2', 'own', 'tick', 1, 'x')$$))[1], 'FY050', 'registrations are per tenant: t1''s tick is unregistered for t2');
SELECT results_eq($$SELECT topic FROM forgeyard.topic_list('t2')$$, $$VALUES ('own'::text)$$, 't2 lists only its own topic');
CREATE ROLE fy_t_app;
CREATE ROLE fy_t_insp;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_t_app');
    PERFORM forgeyard.grant_inspect('fy_t_insp');
    PERFORM forgeyard.bind_tenant('fy_t_app', 't2');
    PERFORM forgeyard.bind_tenant('fy_t_insp', 't2');
    PERFORM forgeyard.topic_create('t2', 'other');
    PERFORM forgeyard.subscribe('t2', 'other', 'other_sub');
END $$;
SET ROLE fy_t_app;
SELECT is((pg_temp.err($$SELECT forgeyard.publish('t1', 'orders', 'order.created', 1, 'x')$$))[1], 'FY040', 'a role bound to t2 publishing for t1 -> FY040');
SELECT lives_ok($$SELECT forgeyard.publish('t2', 'other', 'order.created', 1, 'x')$$, 'an application role publishes for its tenant');
SELECT throws_ok('SELECT * FROM forgeyard.subscription_lag', '42501', NULL, 'an application role cannot read subscription_lag');
SELECT throws_ok('SELECT * FROM forgeyard.topic_events', '42501', NULL, 'nor forgeyard.topic_events');
SELECT throws_ok('SELECT forgeyard.topic_purge()', '42501', NULL, 'nor run topic_purge (maintenance)');
RESET ROLE;
SET ROLE fy_t_insp;
SELECT results_eq('SELECT tenant_id, subscription, backlog, dead FROM forgeyard.subscription_lag',
                  $$VALUES ('t2'::text, 'other_sub'::text, 1::bigint, 0::bigint)$$,
                  'an inspection role bound to t2 sees only t2''s subscription lag');
RESET ROLE;
SELECT results_eq($$SELECT subscription, backlog, in_flight, dead, pressure FROM forgeyard.subscription_lag WHERE topic = 'ticks' ORDER BY 1$$,
                  $$VALUES ('tick_lossy'::text, 1::bigint, 0::bigint, 4::bigint, 'saturated'::text), ('tick_ordered', 3, 0, 0, 'normal')$$,
                  'subscription_lag: backlog (a lapsed delivery counts again), in flight, dead letters and pressure per subscription');

-------------------------------------------------------------------------------------------------
-- topic_drop
-------------------------------------------------------------------------------------------------
SELECT ok(forgeyard.topic_drop('t1', 'ticks'), 'topic_drop returns true');
SELECT is((SELECT count(*)::int FROM forgeyard.queues WHERE queue LIKE 'tick%'), 0, 'its subscriptions'' queues are gone');
SELECT is((SELECT count(*)::int FROM forgeyard.topic_events WHERE topic = 'ticks'), 0, 'its events are gone');
SELECT ok(NOT forgeyard.topic_drop('t1', 'ticks'), 'and false the second time');

SELECT * FROM finish();
ROLLBACK;
