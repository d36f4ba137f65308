-- Durable queues (docs/sql-api.md#queues), part 1: queue definitions (create / alter / drop / list,
-- every option and every bad value), queues per tenant, the transactional outbox with event_id
-- dedup, batch enqueue, bounds with reserved capacity per priority class, claim order and
-- visibility, fenced ack / nack / extend and their batch forms, ack_and_claim, partition order,
-- and every bad input of those functions. regress/queue_admin.sql has dead letters, stats and
-- views, the claim plan, the inbox, maintain() and notify.
-- Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(629);

SET TIME ZONE 'UTC';

\ir lib/err.sql
\ir lib/queue.sql

-------------------------------------------------------------------------------------------------
-- Catalog: the queue SQL API
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.queue_create(text, text, jsonb)'::regprocedure),
          $$tenant text, queue text, options jsonb DEFAULT '{}'::jsonb$$, 'queue_create(tenant, queue, options = {})');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'::regprocedure),
          $$tenant text, queue text, payload bytea, event_id uuid DEFAULT NULL::uuid, partition_key text DEFAULT NULL::text, priority text DEFAULT 'interactive'::text, delay interval DEFAULT '00:00:00'::interval, fairness_key text DEFAULT NULL::text, resource text DEFAULT NULL::text$$,
          'enqueue(tenant, queue, payload, event_id = NULL, partition_key = NULL, priority = interactive, delay = 0, fairness_key = NULL, resource = NULL)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'::regprocedure),
          'bigint', 'enqueue returns the msg_id');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.claim(text, text, text, integer, interval)'::regprocedure),
          'tenant text, queue text, consumer text, max_messages integer DEFAULT 1, visibility interval DEFAULT NULL::interval',
          'claim(tenant, queue, consumer, max_messages = 1, visibility = NULL: the queue''s)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.claim(text, text, text, integer, interval)'::regprocedure),
          'TABLE(msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer, claim_token bigint, payload bytea, enqueued_at timestamp with time zone)',
          'claim returns (msg_id, event_id, partition_key, priority, attempt, claim_token, payload, enqueued_at)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval)'::regprocedure),
          pg_catalog.pg_get_function_result('forgeyard.claim(text, text, text, integer, interval)'::regprocedure),
          'ack_and_claim returns what claim returns');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.nack(text, text, bigint, bigint, text, boolean)'::regprocedure),
          'text', 'nack returns its outcome (retry | dead)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.nack(text, text, bigint, bigint, text, boolean)'::regprocedure),
          'tenant text, queue text, msg_id bigint, claim_token bigint, error text, permanent boolean DEFAULT false',
          'nack(tenant, queue, msg_id, claim_token, error, permanent = false)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.extend(text, text, bigint, bigint, interval)'::regprocedure),
          'timestamp with time zone', 'extend returns the new visible_at');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.queue_stats(text, text)'::regprocedure),
          'TABLE(ready bigint, in_flight bigint, delayed bigint, dead bigint, bytes bigint, oldest_ready_age interval, pressure text, waiting bigint, retries_delayed bigint)',
          'queue_stats returns (ready, in_flight, delayed, dead, bytes, oldest_ready_age, pressure, waiting, retries_delayed)');

-------------------------------------------------------------------------------------------------
-- queue_create: defaults, every option stored, queue_list
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
CREATE TEMP TABLE defaults AS SELECT '{"max_messages": 100000, "max_bytes": 1073741824, "max_payload_bytes": 65536,
    "visibility_timeout": "00:00:30", "max_attempts": 5, "backoff_base": "00:00:01", "backoff_max": "00:05:00",
    "ordering": "none", "dead_letter_payload": "drop", "retain_acked": "00:00:00", "max_dead": 100000,
    "dead_letter_retention": "168:00:00", "dedup_window": "24:00:00", "admit_emergency": 100,
    "admit_security_control": 100, "admit_realtime": 95, "admit_interactive": 90, "admit_background": 80,
    "admit_bulk": 70, "notify": false, "retry_budget": null, "retry_budget_min": 10, "retry_budget_window": "00:01:00",
    "max_in_flight_per_key": null, "fairness": false, "aging": "00:00:00"}'::jsonb AS o;

SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dflt')$$, 'queue_create without options');
SELECT is(pg_temp.options('t1', 'dflt'), (SELECT o FROM defaults),
          'defaults: 100000 messages, 1 GiB, 64 KiB payloads, 30 s visibility, 5 attempts, backoff 1 s..5 min, unordered, dead payload dropped, acked not kept, 100000 dead kept 7 days, dedup 24 h, admission bulk 70 / background 80 / interactive 90 / realtime 95 / security_control and emergency 100, no notify');
SELECT results_eq(
    $$SELECT max_messages, visibility_usecs, backoff_base_usecs, backoff_max_usecs, dead_retention_usecs, dedup_window_usecs,
             slots, created_at FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'dflt'$$,
    $$VALUES (100000::bigint, 30000000::bigint, 1000000::bigint, 300000000::bigint, 604800000000::bigint, 86400000000::bigint,
              8, '2030-01-01 00:00:00+00'::timestamptz)$$,
    'stored in microseconds; 8 capacity slots for 100000 messages; created_at by forgeyard.now()');
SELECT results_eq(
    $$SELECT count(*), sum(admitted_messages), sum(admitted_bytes) FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = 'dflt'$$,
    $$VALUES (8::bigint, 0::numeric, 0::numeric)$$, 'queue_create makes its capacity slots, empty');
SELECT results_eq(
    $$SELECT count(*), sum(released_messages), sum(released_bytes) FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'dflt'$$,
    $$VALUES (8::bigint, 0::numeric, 0::numeric)$$, 'queue_create makes the release counters of its slots, at zero');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'nullopts', NULL)$$, 'queue_create with options NULL');
SELECT is(pg_temp.options('t1', 'nullopts'), (SELECT o FROM defaults), 'options NULL: the defaults');

SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'every', '{"max_messages": 5000, "max_bytes": 2000000,
    "max_payload_bytes": 1000, "visibility_timeout": "45 seconds", "max_attempts": 3, "backoff_base": "2 seconds",
    "backoff_max": "1 minute", "ordering": "partition", "dead_letter_payload": "keep", "retain_acked": "1 hour",
    "max_dead": 50, "dead_letter_retention": "2 days", "dedup_window": "90 minutes", "admit_emergency": 100,
    "admit_security_control": 99, "admit_realtime": 90, "admit_interactive": 80, "admit_background": 60,
    "admit_bulk": 50, "notify": true, "retry_budget": 0.25, "retry_budget_min": 3,
    "retry_budget_window": "5 minutes"}')$$, 'queue_create with every option');
SELECT is(pg_temp.options('t1', 'every'),
          '{"max_messages": 5000, "max_bytes": 2000000, "max_payload_bytes": 1000, "visibility_timeout": "00:00:45",
            "max_attempts": 3, "backoff_base": "00:00:02", "backoff_max": "00:01:00", "ordering": "partition",
            "dead_letter_payload": "keep", "retain_acked": "01:00:00", "max_dead": 50, "dead_letter_retention": "48:00:00",
            "dedup_window": "01:30:00", "admit_emergency": 100, "admit_security_control": 99, "admit_realtime": 90,
            "admit_interactive": 80, "admit_background": 60, "admit_bulk": 50, "notify": true, "retry_budget": 0.25,
            "retry_budget_min": 3, "retry_budget_window": "00:05:00", "max_in_flight_per_key": null,
            "fairness": false, "aging": "00:00:00"}'::jsonb,
          'every option is stored and listed as given (a day counts as 24 hours)');
SELECT results_eq(
    $$SELECT visibility_usecs, backoff_base_usecs, backoff_max_usecs, retain_acked_usecs, dead_retention_usecs,
             dedup_window_usecs, ordering, dead_letter_payload, notify, slots
        FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'every'$$,
    $$VALUES (45000000::bigint, 2000000::bigint, 60000000::bigint, 3600000000::bigint, 172800000000::bigint,
              5400000000::bigint, 'partition'::text, 'keep'::text, true, 1)$$,
    'every option stored: durations in microseconds; 1 capacity slot (2000000 bytes hold under 1024 payloads of 1000)');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'strings', '{"max_messages": "250", "notify": "true", "retain_acked": "0"}')$$,
                'numbers and booleans may be given as JSON strings; retain_acked may be zero');
SELECT is(pg_temp.options('t1', 'strings'), (SELECT o FROM defaults) || '{"max_messages": 250, "notify": true}',
          'the string forms are stored as their values');
SELECT results_eq($$SELECT queue FROM forgeyard.queue_list('t1')$$,
                  $$VALUES ('dflt'::text), ('every'), ('nullopts'), ('strings')$$, 'queue_list: the tenant''s queues by name');
SELECT is_empty($$SELECT * FROM forgeyard.queue_list('t9')$$, 'queue_list of a tenant without queues: no row');

-------------------------------------------------------------------------------------------------
-- queue_create: every bad option value is 22023 naming the key, and creates nothing
-------------------------------------------------------------------------------------------------
INSERT INTO snaps SELECT 'options', pg_temp.snap();
CREATE TEMP TABLE bad_options (n serial, options text, message text);
INSERT INTO bad_options (options, message) VALUES
    ('{"nope": 1}',                              'queue option nope is unknown'),
    ('{"max_message": 10}',                      'queue option max_message is unknown'),
    ('{"max_messages": 0}',                      'queue option max_messages must be a positive integer'),
    ('{"max_messages": -1}',                     'queue option max_messages must be a positive integer'),
    ('{"max_messages": 1.5}',                    'queue option max_messages must be a positive integer'),
    ('{"max_messages": "ten"}',                  'queue option max_messages must be a positive integer'),
    ('{"max_messages": null}',                   'queue option max_messages must be a positive integer'),
    ('{"max_messages": true}',                   'queue option max_messages must be a positive integer'),
    ('{"max_messages": 1125899906842625}',       'queue option max_messages must be at most 1125899906842624'),
    ('{"max_bytes": 0}',                         'queue option max_bytes must be a positive integer'),
    ('{"max_bytes": -100}',                      'queue option max_bytes must be a positive integer'),
    ('{"max_payload_bytes": 0}',                 'queue option max_payload_bytes must be a positive integer'),
    ('{"max_payload_bytes": 67108865}',          'queue option max_payload_bytes must be at most 67108864'),
    ('{"max_attempts": 0}',                      'queue option max_attempts must be a positive integer'),
    ('{"max_attempts": 1001}',                   'queue option max_attempts must be at most 1000'),
    ('{"max_dead": 0}',                          'queue option max_dead must be a positive integer'),
    ('{"ordering": "fifo"}',                     'queue option ordering must be none or partition'),
    ('{"ordering": "Partition"}',                'queue option ordering must be none or partition'),
    ('{"ordering": null}',                       'queue option ordering must be none or partition'),
    ('{"dead_letter_payload": "store"}',         'queue option dead_letter_payload must be drop or keep'),
    ('{"dead_letter_payload": true}',            'queue option dead_letter_payload must be drop or keep'),
    ('{"notify": "yes"}',                        'queue option notify must be true or false'),
    ('{"notify": 1}',                            'queue option notify must be true or false'),
    ('{"visibility_timeout": "soon"}',           'queue option visibility_timeout must be an interval'),
    ('{"visibility_timeout": "0"}',              'queue option visibility_timeout must be positive'),
    ('{"visibility_timeout": "-1 second"}',      'queue option visibility_timeout must be positive'),
    ('{"visibility_timeout": "1 mon"}',          'queue option visibility_timeout must not have a month or year component'),
    ('{"visibility_timeout": "31 days"}',        'queue option visibility_timeout is too long'),
    ('{"backoff_base": "never"}',                'queue option backoff_base must be an interval'),
    ('{"backoff_base": "0 seconds"}',            'queue option backoff_base must be positive'),
    ('{"backoff_base": "1 year"}',               'queue option backoff_base must not have a month or year component'),
    ('{"backoff_max": "-5 minutes"}',            'queue option backoff_max must be positive'),
    ('{"backoff_max": "2 mons"}',                'queue option backoff_max must not have a month or year component'),
    ('{"backoff_max": "30 days 1 second"}',      'queue option backoff_max is too long'),
    ('{"retain_acked": "-1 second"}',            'queue option retain_acked must be positive'),
    ('{"retain_acked": "1 mon"}',                'queue option retain_acked must not have a month or year component'),
    ('{"retain_acked": "366 days"}',             'queue option retain_acked is too long'),
    ('{"dead_letter_retention": "0"}',           'queue option dead_letter_retention must be positive'),
    ('{"dead_letter_retention": "1 year"}',      'queue option dead_letter_retention must not have a month or year component'),
    ('{"dead_letter_retention": "x"}',           'queue option dead_letter_retention must be an interval'),
    ('{"dedup_window": "0"}',                    'queue option dedup_window must be positive'),
    ('{"dedup_window": "366 days"}',             'queue option dedup_window is too long'),
    ('{"dedup_window": "1 mon"}',                'queue option dedup_window must not have a month or year component'),
    ('{"retry_budget": 1.5}',                    'queue option retry_budget must be a number between 0 and 1'),
    ('{"retry_budget": -0.1}',                   'queue option retry_budget must be a number between 0 and 1'),
    ('{"retry_budget": "half"}',                 'queue option retry_budget must be a number between 0 and 1'),
    ('{"retry_budget_min": -1}',                 'queue option retry_budget_min must be a non-negative integer'),
    ('{"retry_budget_min": 0.5}',                'queue option retry_budget_min must be a non-negative integer'),
    ('{"retry_budget_window": "0"}',             'queue option retry_budget_window must be positive'),
    ('{"retry_budget_window": "31 days"}',       'queue option retry_budget_window is too long'),
    ('{"admit_bulk": 0}',                        'queue option admit_bulk must be a positive integer'),
    ('{"admit_bulk": 101}',                      'queue option admit_bulk must be at most 100'),
    ('{"admit_emergency": 101}',                 'queue option admit_emergency must be at most 100'),
    ('{"admit_realtime": -5}',                   'queue option admit_realtime must be a positive integer'),
    ('{"admit_urgent": 50}',                     'queue option admit_urgent must be one of emergency, security_control, realtime, interactive, background, bulk'),
    ('{"admit_": 50}',                           'queue option admit_ must be one of emergency, security_control, realtime, interactive, background, bulk'),
    -- cross-field: a lower class is never admitted further than a higher one
    ('{"admit_bulk": 81}',                       'queue option admit_bulk must not exceed admit_background: a lower class is refused earlier'),
    ('{"admit_background": 91}',                 'queue option admit_background must not exceed admit_interactive: a lower class is refused earlier'),
    ('{"admit_interactive": 96}',                'queue option admit_interactive must not exceed admit_realtime: a lower class is refused earlier'),
    ('{"admit_security_control": 99, "admit_realtime": 100}',
                                                 'queue option admit_realtime must not exceed admit_security_control: a lower class is refused earlier'),
    ('{"admit_emergency": 90}',                  'queue option admit_security_control must not exceed admit_emergency: a lower class is refused earlier'),
    ('{"max_payload_bytes": 2000, "max_bytes": 1000}', 'queue option max_payload_bytes must not exceed max_bytes'),
    ('{"max_bytes": 65535}',                     'queue option max_payload_bytes must not exceed max_bytes'),
    ('{"backoff_base": "10 seconds", "backoff_max": "5 seconds"}', 'queue option backoff_base must not exceed backoff_max'),
    ('{"backoff_base": "6 minutes"}',            'queue option backoff_base must not exceed backoff_max'),
    -- not an object
    ('[]',                                       'options must be a JSON object'),
    ('"max_messages"',                           'options must be a JSON object'),
    ('null',                                     'options must be a JSON object'),
    ('42',                                       'options must be a JSON object');

SELECT throws_ok(format('SELECT forgeyard.queue_create(%L, %L, %L)', 't1', 'bad', options), '22023', message,
                 format('queue_create with %s: 22023 %s', options, message))
  FROM bad_options ORDER BY n;
SELECT throws_ok(format('SELECT forgeyard.queue_alter(%L, %L, %L)', 't1', 'dflt', options), '22023', message,
                 format('queue_alter with %s: 22023 %s', options, message))
  FROM bad_options ORDER BY n;
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'options'),
          'no refused queue_create or queue_alter created or changed anything');
SELECT is_empty($$SELECT 1 FROM forgeyard.queues WHERE queue = 'bad'$$, 'no queue "bad" exists');

-- A duplicate is 42710, whatever its options, and changes nothing.
SELECT throws_ok($$SELECT forgeyard.queue_create('t1', 'dflt', '{"max_messages": 7}')$$, '42710',
                 'queue "dflt" already exists for tenant "t1"', 'queue_create of an existing queue: 42710');
SELECT throws_ok($$SELECT forgeyard.queue_create('t1', 'every')$$, '42710',
                 'queue "every" already exists for tenant "t1"', 'queue_create of an existing queue without options: 42710');
SELECT is(pg_temp.err($$SELECT forgeyard.queue_create('t1', 'dflt', '{"max_messages": 7}')$$),
          ARRAY['42710', 'queue "dflt" already exists for tenant "t1"', 'use forgeyard.queue_alter to change its options'],
          '42710 points to queue_alter');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'options'), 'a duplicate queue_create changed nothing');

-------------------------------------------------------------------------------------------------
-- queue_alter: changes the given options, keeps the others; ordering cannot change
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{"max_messages": 500, "notify": true}')$$,
                'queue_alter max_messages and notify');
SELECT is(pg_temp.options('t1', 'dflt'), (SELECT o FROM defaults) || '{"max_messages": 500, "notify": true}',
          'queue_alter changes only the given options');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{"visibility_timeout": "1 minute", "dead_letter_payload": "keep",
                                                              "admit_bulk": 20}')$$,
                'queue_alter other options');
SELECT is(pg_temp.options('t1', 'dflt'),
          (SELECT o FROM defaults) || '{"max_messages": 500, "notify": true, "visibility_timeout": "00:01:00",
                                        "dead_letter_payload": "keep", "admit_bulk": 20}',
          'a second queue_alter keeps what the first one changed');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{}')$$, 'queue_alter with no options');
SELECT lives_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{"ordering": "none"}')$$,
                'queue_alter naming the ordering the queue already has');
SELECT is(pg_temp.options('t1', 'dflt'),
          (SELECT o FROM defaults) || '{"max_messages": 500, "notify": true, "visibility_timeout": "00:01:00",
                                        "dead_letter_payload": "keep", "admit_bulk": 20}',
          'queue_alter with nothing new changes nothing');
SELECT results_eq($$SELECT slots, created_at FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'dflt'$$,
                  $$VALUES (8, '2030-01-01 00:00:00+00'::timestamptz)$$,
                  'queue_alter keeps the capacity slots and created_at');

INSERT INTO snaps SELECT 'alter', pg_temp.snap();
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{"ordering": "partition"}')$$, '22023',
                 'queue option ordering cannot change after the queue is created', 'queue_alter none -> partition: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'every', '{"ordering": "none"}')$$, '22023',
                 'queue option ordering cannot change after the queue is created', 'queue_alter partition -> none: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'dflt', '{"max_messages": 1000, "ordering": "partition"}')$$, '22023',
                 'queue option ordering cannot change after the queue is created',
                 'queue_alter that also changes the ordering: 22023, the other option is not changed either');
-- Cross-field checks are made against the stored options.
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'every', '{"admit_background": 40}')$$, '22023',
                 'queue option admit_bulk must not exceed admit_background: a lower class is refused earlier',
                 'queue_alter admit_background below the stored admit_bulk: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'every', '{"backoff_max": "1 second"}')$$, '22023',
                 'queue option backoff_base must not exceed backoff_max', 'queue_alter backoff_max below the stored backoff_base: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'every', '{"max_bytes": 999}')$$, '22023',
                 'queue option max_payload_bytes must not exceed max_bytes', 'queue_alter max_bytes below the stored max_payload_bytes: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'every', '{"max_dead": 10, "nope": 1}')$$, '22023',
                 'queue option nope is unknown', 'queue_alter with one good and one unknown option: 22023');
SELECT throws_ok($$SELECT forgeyard.queue_alter('t1', 'nope', '{"max_messages": 10}')$$, '42704',
                 'queue "nope" does not exist for tenant "t1"', 'queue_alter of an unknown queue: 42704');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'alter'), 'the refused queue_alter calls changed nothing');

-------------------------------------------------------------------------------------------------
-- Queues are per tenant
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'shared', '{"max_messages": 10}')$$, 't1 creates "shared"');
SELECT lives_ok($$SELECT forgeyard.queue_create('t2', 'shared', '{"max_messages": 20, "ordering": "partition"}')$$,
                't2 creates its own "shared": the same name in another tenant is no duplicate');
SELECT lives_ok($$SELECT forgeyard.queue_create('t2', 'only2')$$, 't2 creates "only2"');
SELECT results_eq($$SELECT options->>'max_messages', options->>'ordering' FROM forgeyard.queue_list('t1') WHERE queue = 'shared'$$,
                  $$VALUES ('10'::text, 'none'::text)$$, 't1''s "shared" has t1''s options');
SELECT results_eq($$SELECT options->>'max_messages', options->>'ordering' FROM forgeyard.queue_list('t2') WHERE queue = 'shared'$$,
                  $$VALUES ('20'::text, 'partition'::text)$$, 't2''s "shared" has t2''s options');
SELECT results_eq($$SELECT queue FROM forgeyard.queue_list('t2')$$, $$VALUES ('only2'::text), ('shared')$$,
                  'queue_list(t2) lists only t2''s queues');

SET forgeyard.now_override = '2030-01-01 00:10:00+00';
CALL pg_temp.enq('s1', 't1', 'shared', 't1 payload', '00000000-0000-0000-0000-000000000051');
CALL pg_temp.enq('s2', 't2', 'shared', 't2 payload', '00000000-0000-0000-0000-000000000051', 'k');
SELECT isnt(pg_temp.id('s1'), pg_temp.id('s2'), 'the same event_id in two tenants'' "shared": two messages');
SELECT results_eq($$SELECT ready FROM forgeyard.queue_stats('t1', 'shared') UNION ALL SELECT ready FROM forgeyard.queue_stats('t2', 'shared')$$,
                  $$VALUES (1::bigint), (1::bigint)$$, 'each tenant''s "shared" holds its own message');
SELECT is(pg_temp.claim('x-t2', 't2', 'shared', 'w', 10), pg_temp.ids('s2'), 'claim from t2''s "shared" gets only t2''s message');
SELECT is(pg_temp.claim('x-t1', 't1', 'shared', 'w', 10), pg_temp.ids('s1'), 'claim from t1''s "shared" gets only t1''s message');
INSERT INTO snaps SELECT 'tenants', pg_temp.snap();
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't2', 'shared', pg_temp.id('s1'), pg_temp.tok('x-t1', 's1')),
                'ack of t1''s message through t2 (with its real id and token) does nothing: not found there');
SELECT throws_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L)', 't2', 'shared', pg_temp.id('s1'), pg_temp.tok('x-t1', 's1'), 'x'),
                 'FY001', NULL, 'nack of t1''s message through t2: FY001');
SELECT throws_ok(format('SELECT forgeyard.extend(%L, %L, %s, %s, %L)', 't2', 'shared', pg_temp.id('s1'), pg_temp.tok('x-t1', 's1'), '1 hour'),
                 'FY001', NULL, 'extend of t1''s message through t2: FY001');
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'only2', pg_temp.id('s2'), pg_temp.tok('x-t2', 's2')),
                 '42704', 'queue "only2" does not exist for tenant "t1"', 't1 naming t2''s queue "only2": 42704');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'tenants'), 'calls through the other tenant changed nothing');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'shared', pg_temp.id('s1'), pg_temp.tok('x-t1', 's1')),
                't1 acks its own message');
SELECT results_eq($$SELECT (SELECT in_flight FROM forgeyard.queue_stats('t1', 'shared')), (SELECT in_flight FROM forgeyard.queue_stats('t2', 'shared'))$$,
                  $$VALUES (0::bigint, 1::bigint)$$, 't1''s ack left t2''s delivery in flight');

-- Unknown queue (including another tenant's queue name): 42704 from every function.
INSERT INTO snaps SELECT 'unknown', pg_temp.snap();
CREATE TEMP TABLE unknown_calls (n serial, call text);
INSERT INTO unknown_calls (call) VALUES
    ($$SELECT forgeyard.queue_alter('t1', '%s', '{}')$$),
    ($$SELECT forgeyard.enqueue('t1', '%s', 'x')$$),
    ($$SELECT * FROM forgeyard.enqueue_batch('t1', '%s', ARRAY['x']::bytea[])$$),
    ($$SELECT * FROM forgeyard.claim('t1', '%s', 'w')$$),
    ($$SELECT * FROM forgeyard.ack_and_claim('t1', '%s', 'w', '{}', '{}')$$),
    ($$SELECT forgeyard.ack('t1', '%s', 1, 1)$$),
    ($$SELECT forgeyard.ack_batch('t1', '%s', '{1}', '{1}')$$),
    ($$SELECT forgeyard.nack('t1', '%s', 1, 1, 'e')$$),
    ($$SELECT * FROM forgeyard.nack_batch('t1', '%s', '{1}', '{1}', 'e')$$),
    ($$SELECT forgeyard.extend('t1', '%s', 1, 1, '1 minute')$$),
    ($$SELECT forgeyard.extend_batch('t1', '%s', '{1}', '{1}', '1 minute')$$),
    ($$SELECT * FROM forgeyard.queue_stats('t1', '%s')$$),
    ($$SELECT * FROM forgeyard.dead_list('t1', '%s')$$),
    ($$SELECT forgeyard.dead_redrive('t1', '%s')$$),
    ($$SELECT forgeyard.dead_purge('t1', '%s')$$),
    ($$SELECT * FROM forgeyard.claim_plan('t1', '%s')$$);
SELECT throws_ok(format(call, q), '42704', format('queue "%s" does not exist for tenant "t1"', q),
                 format('unknown queue %s: %s', q, format(call, q)))
  FROM unknown_calls, unnest(ARRAY['nope', 'only2']) q ORDER BY q, n;
SELECT is(forgeyard.queue_drop('t1', 'only2'), false, 'queue_drop of another tenant''s queue name: false');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'unknown'), 'calls naming an unknown queue changed nothing');

-------------------------------------------------------------------------------------------------
-- queue_drop removes the queue with its messages, dead letters, dedup events and counters
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:20:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'gone', '{"ordering": "partition", "dead_letter_payload": "keep"}');
    PERFORM forgeyard.queue_create('t2', 'gone');
END $$;
CALL pg_temp.enq('g1', 't1', 'gone', 'g1', '00000000-0000-0000-0000-0000000000a1', 'k');
CALL pg_temp.enq('g2', 't1', 'gone', 'g2', '00000000-0000-0000-0000-0000000000a2', 'k');
CALL pg_temp.enq('g3', 't1', 'gone', 'g3', NULL, 'j');
CALL pg_temp.enq('g9', 't2', 'gone', 'g9', '00000000-0000-0000-0000-0000000000a1');
SELECT is(pg_temp.claim('g-c1', 't1', 'gone', 'w', 10), pg_temp.ids('g1', 'g3'), 'the heads of "gone" are claimed');
SELECT is(forgeyard.nack('t1', 'gone', pg_temp.id('g3'), pg_temp.tok('g-c1', 'g3'), 'poison', true), 'dead', 'g3 is dead-lettered');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_events WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'gone')$$,
    $$VALUES (3::bigint, 2::bigint, 1::bigint)$$, 'before the drop: 3 messages (one dead), 2 dedup events, 1 partition');
SELECT is(forgeyard.queue_drop('t1', 'gone'), true, 'queue_drop of an existing queue: true');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_events WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_slots WHERE tenant_id = 't1' AND queue = 'gone'),
             (SELECT count(*) FROM forgeyard.queue_releases WHERE tenant_id = 't1' AND queue = 'gone')$$,
    $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)$$,
    'queue_drop removed the queue, its messages and dead letters, dedup events, partitions and counters');
SELECT results_eq($$SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 't2' AND queue = 'gone'$$, $$VALUES (1::bigint)$$,
                  't2''s queue of the same name keeps its message');
SELECT is(forgeyard.queue_drop('t1', 'gone'), false, 'queue_drop again: false');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'gone', 'x')$$, '42704', 'queue "gone" does not exist for tenant "t1"',
                 'enqueue into a dropped queue: 42704');
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'gone')$$, 'a dropped queue''s name can be created again');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead, bytes FROM forgeyard.queue_stats('t1', 'gone')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)$$, 'the new queue starts empty');
SELECT isnt(forgeyard.enqueue('t1', 'gone', 'another payload', '00000000-0000-0000-0000-0000000000a1'), pg_temp.id('g1'),
            'the dropped queue''s event_ids are forgotten: a new message, no FY011');

-------------------------------------------------------------------------------------------------
-- Transactional outbox: an enqueue is part of the caller's transaction
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 01:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'ob')$$, 'queue "ob"');
INSERT INTO snaps SELECT 'outbox', pg_temp.snap();
SAVEPOINT outbox;
-- Seen by the enqueuing transaction itself (psql variables survive the rollback).
SELECT forgeyard.enqueue('t1', 'ob', 'rolled back', '00000000-0000-0000-0000-0000000000b1') AS ob_msg \gset
SELECT ready AS ob_ready, bytes AS ob_bytes FROM forgeyard.queue_stats('t1', 'ob') \gset
SELECT admitted_messages AS ob_admitted FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'ob' \gset
ROLLBACK TO SAVEPOINT outbox;
SELECT results_eq(format('VALUES (%s::bigint, %s::bigint, %s::numeric)', :'ob_ready', :'ob_bytes', :'ob_admitted'),
                  $$VALUES (1::bigint, 11::bigint, 1::numeric)$$,
                  'before the rollback the transaction saw its message: ready 1, 11 bytes, 1 admitted');
SELECT is_empty(format('SELECT 1 FROM forgeyard.messages WHERE msg_id = %s', :'ob_msg'), 'after the rollback the message is gone');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead, bytes, pressure FROM forgeyard.queue_stats('t1', 'ob')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 'normal'::text)$$,
                  'after the rollback queue_stats shows nothing and no bytes');
SELECT results_eq($$SELECT admitted_messages, admitted_bytes FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'ob'$$,
                  $$VALUES (0::numeric, 0::numeric)$$, 'after the rollback no capacity is used (queue_overview)');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'outbox'), 'after the rollback every queue table is as before');
SELECT is(pg_temp.claim('ob-c0', 't1', 'ob', 'w', 10), '{}'::bigint[], 'nothing to claim after the rollback');
CALL pg_temp.enq('ob1', 't1', 'ob', 'another payload', '00000000-0000-0000-0000-0000000000b1');
SELECT cmp_ok(pg_temp.id('ob1'), '>', :ob_msg::bigint,
              'the rolled-back event_id is free: the same event_id with another payload is a new message, no FY011');
SAVEPOINT kept;
CALL pg_temp.enq('ob2', 't1', 'ob', 'kept');
RELEASE SAVEPOINT kept;
SELECT is(pg_temp.claim('ob-c1', 't1', 'ob', 'w', 10), pg_temp.ids('ob1', 'ob2'),
          'messages enqueued earlier in the transaction (one in a released savepoint) are claimable');

-------------------------------------------------------------------------------------------------
-- event_id dedup: the first msg_id within the dedup window, also after ack, also when full
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-02 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dd', '{"max_messages": 10}')$$, 'queue "dd" of 10 messages');
CALL pg_temp.enq('d1', 't1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1');
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1'), pg_temp.id('d1'),
          'the same event_id and payload again: the first msg_id');
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1', NULL, 'bulk', '1 hour'),
          pg_temp.id('d1'), 'the same event_id and payload with another class and delay: still the first msg_id');
SELECT results_eq($$SELECT pg_temp.stored('t1', 'dd'), (SELECT admitted_messages FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'dd')$$,
                  $$VALUES (1::bigint, 1::numeric)$$, 'a repeated event_id stores nothing and takes no capacity');
INSERT INTO snaps SELECT 'dedup', pg_temp.snap();
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-2', '00000000-0000-0000-0000-0000000000d1')$$, 'FY011',
                 'event_id was enqueued before with a different payload', 'the same event_id with another payload: FY011');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-1 ', '00000000-0000-0000-0000-0000000000d1')$$),
          ARRAY['FY011', 'event_id was enqueued before with a different payload', format('message %s carries this event_id', pg_temp.id('d1'))],
          'FY011 (a payload differing in one byte) names the first message');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'dedup'), 'FY011 changed nothing');
SELECT isnt(forgeyard.enqueue('t1', 'ob', 'payload-1', '00000000-0000-0000-0000-0000000000d1'), pg_temp.id('d1'),
            'the same event_id in another queue of the tenant: its own message');

SELECT is(pg_temp.fill('t1', 'dd', 'emergency', 100), 9, 'dd is filled to its 10 messages');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-x', '00000000-0000-0000-0000-0000000000d2', NULL, 'emergency')$$,
                 'FY020', NULL, 'dd is full: a new event_id is refused');
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1', NULL, 'emergency'), pg_temp.id('d1'),
          'dd is full: the repeated event_id still returns the first msg_id');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-2', '00000000-0000-0000-0000-0000000000d1')$$, 'FY011', NULL,
                 'dd is full: the repeated event_id with another payload is FY011 (not FY020)');

SELECT is(array_length(pg_temp.claim('d-c1', 't1', 'dd', 'w', 10), 1), 10, 'every message of dd is claimed');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'dd', pg_temp.claimed('d-c1'), pg_temp.toks('d-c1')),
                'every message of dd is acked');
SELECT is(pg_temp.stored('t1', 'dd'), 0::bigint, 'the acked messages are gone (retain_acked 0)');
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1'), pg_temp.id('d1'),
          'after the first message was acked: the repeated event_id returns its msg_id');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-2', '00000000-0000-0000-0000-0000000000d1')$$, 'FY011', NULL,
                 'after the first message was acked: another payload is FY011');
SELECT is(pg_temp.stored('t1', 'dd'), 0::bigint, 'the repeated event_id after the ack enqueued nothing');

SET forgeyard.now_override = '2030-01-02 23:59:59.999999+00';
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1'), pg_temp.id('d1'),
          '1 microsecond before the 24 h dedup window ends: the first msg_id');
SET forgeyard.now_override = '2030-01-03 00:00:00+00';
CALL pg_temp.enq('d1b', 't1', 'dd', 'payload-2', '00000000-0000-0000-0000-0000000000d1');
SELECT cmp_ok(pg_temp.id('d1b'), '>', pg_temp.id('d1'),
              'at the end of the dedup window: a new message, and another payload is no FY011');
SELECT is(forgeyard.enqueue('t1', 'dd', 'payload-2', '00000000-0000-0000-0000-0000000000d1'), pg_temp.id('d1b'),
          'the new message is the one the event_id returns from now on');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'dd', 'payload-1', '00000000-0000-0000-0000-0000000000d1')$$, 'FY011', NULL,
                 'the old payload under the event_id is FY011 now');
SELECT results_eq($$SELECT msg_id, expires_at FROM forgeyard.queue_events WHERE tenant_id = 't1' AND queue = 'dd'
                     AND event_id = '00000000-0000-0000-0000-0000000000d1'$$,
                  $$SELECT pg_temp.id('d1b'), '2030-01-04 00:00:00+00'::timestamptz$$,
                  'the dedup event points to the new message, for a new window');

SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'dd1h', '{"dedup_window": "1 hour"}')$$, 'queue "dd1h": dedup window 1 hour');
CALL pg_temp.enq('h1', 't1', 'dd1h', 'h', '00000000-0000-0000-0000-0000000000e1');
SET forgeyard.now_override = '2030-01-03 00:59:59.999999+00';
SELECT is(forgeyard.enqueue('t1', 'dd1h', 'h', '00000000-0000-0000-0000-0000000000e1'), pg_temp.id('h1'),
          'dedup_window 1 hour: the first msg_id until the hour is over');
SET forgeyard.now_override = '2030-01-03 01:00:00+00';
SELECT isnt(forgeyard.enqueue('t1', 'dd1h', 'h', '00000000-0000-0000-0000-0000000000e1'), pg_temp.id('h1'),
            'dedup_window 1 hour: a new message after it');

-------------------------------------------------------------------------------------------------
-- enqueue_batch: ids in order, all or nothing
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-04 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'bt', '{"max_messages": 10}')$$, 'queue "bt" of 10 messages');
CREATE TEMP TABLE bt1 AS
    SELECT b.o, b.msg_id FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['a', 'b', 'c']::bytea[]) WITH ORDINALITY AS b(msg_id, o);
SELECT results_eq($$SELECT x.payload, x.priority::int, x.visible_at FROM bt1 JOIN forgeyard.messages x USING (msg_id) ORDER BY bt1.o$$,
                  $$VALUES ('a'::bytea, 3, '2030-01-04 00:00:00+00'::timestamptz), ('b', 3, '2030-01-04 00:00:00+00'),
                           ('c', 3, '2030-01-04 00:00:00+00')$$,
                  'enqueue_batch returns one msg_id per payload, in the payloads'' order (class interactive, no delay)');
SELECT is((SELECT array_agg(msg_id ORDER BY o) FROM bt1), (SELECT array_agg(msg_id ORDER BY msg_id) FROM bt1),
          'the msg_ids of a batch ascend in the payloads'' order (enqueue order)');
CREATE TEMP TABLE bt2 AS
    SELECT b.o, b.msg_id FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['d', 'e', 'd']::bytea[],
        ARRAY['00000000-0000-0000-0000-0000000000f1', '00000000-0000-0000-0000-0000000000f2', '00000000-0000-0000-0000-0000000000f1']::uuid[],
        ARRAY['kd', NULL, 'kd'], 'realtime', '1 minute') WITH ORDINALITY AS b(msg_id, o);
SELECT results_eq($$SELECT bt2.o, x.payload, x.event_id, x.partition_key, x.priority::int, x.visible_at
                      FROM bt2 JOIN forgeyard.messages x USING (msg_id) ORDER BY bt2.o$$,
                  $$VALUES (1::bigint, 'd'::bytea, '00000000-0000-0000-0000-0000000000f1'::uuid, 'kd'::text, 2, '2030-01-04 00:01:00+00'::timestamptz),
                           (2, 'e', '00000000-0000-0000-0000-0000000000f2', NULL, 2, '2030-01-04 00:01:00+00'),
                           (3, 'd', '00000000-0000-0000-0000-0000000000f1', 'kd', 2, '2030-01-04 00:01:00+00')$$,
                  'event_ids and partition_keys are parallel to the payloads; class and delay apply to each');
SELECT is((SELECT msg_id FROM bt2 WHERE o = 3), (SELECT msg_id FROM bt2 WHERE o = 1),
          'an event_id repeated inside a batch returns the first msg_id');
SELECT is(pg_temp.stored('t1', 'bt'), 5::bigint, 'bt holds 5 messages');
SELECT is_empty($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt', '{}'::bytea[])$$, 'an empty batch: no msg_id');

INSERT INTO snaps SELECT 'batch', pg_temp.snap();
SELECT throws_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['ok1', 'ok2', decode(repeat('00', 65537), 'hex')])$$,
                 'FY021', NULL, 'a batch whose third payload is over size: FY021');
SELECT throws_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['v', 'w', 'x', 'y', 'z']::bytea[])$$, 'FY020',
                 'queue "bt" is full for priority class interactive',
                 'a batch of 5 with room for 4 (interactive up to 9 of 10, 5 held): FY020');
SELECT throws_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['n', 'd2']::bytea[],
                     ARRAY['00000000-0000-0000-0000-0000000000f3', '00000000-0000-0000-0000-0000000000f1']::uuid[])$$,
                 'FY011', NULL, 'a batch whose second event_id was enqueued with another payload: FY011');
SELECT throws_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['p', 'q']::bytea[], NULL, NULL, 'urgent')$$, '22023',
                 'priority must be one of emergency, security_control, realtime, interactive, background, bulk',
                 'a batch with a bad class: 22023');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'batch'), 'every refused batch enqueued nothing: all or nothing');
SELECT is((SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'bt', ARRAY['w', 'x', 'y', 'z']::bytea[])), 4::bigint,
          'a batch of 4 fits exactly (9 interactive of 10)');
-- A large batch counts its admissions in memory and writes the slot counters once: the ids, the
-- in-batch dedup, the counters and the refusal must be what one enqueue per message would give.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'bt10k', '{"max_messages": 100000}')$$, 'queue bt10k');
CREATE TEMP TABLE bt10k AS
  SELECT b.o, b.msg_id FROM forgeyard.enqueue_batch('t1', 'bt10k',
    (SELECT pg_catalog.array_agg(pg_catalog.convert_to('p' || (i % 5000), 'UTF8') ORDER BY i) FROM generate_series(0, 9999) i),
    (SELECT pg_catalog.array_agg(pg_catalog.md5('e' || (i % 5000))::uuid ORDER BY i) FROM generate_series(0, 9999) i))
    WITH ORDINALITY AS b(msg_id, o);
SELECT is((SELECT pg_catalog.count(DISTINCT msg_id) FILTER (WHERE o <= 5000) || '/' || pg_catalog.count(*)
             || '/' || pg_catalog.count(*) FILTER (WHERE o > 5000 AND msg_id = (SELECT x.msg_id FROM bt10k x WHERE x.o = bt10k.o - 5000))
           FROM bt10k), '5000/10000/5000',
          'a batch of 10,000 with each event_id twice: 5,000 messages, the repeat gets the first msg_id');
SELECT is((SELECT pg_catalog.sum(a.admitted_messages + COALESCE(g.admitted_messages, 0) - r.released_messages)
             || '/' || pg_catalog.sum(a.admitted_bytes + COALESCE(g.admitted_bytes, 0) - r.released_bytes)
             || '/' || (SELECT pg_catalog.count(*) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'bt10k')
           FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
           LEFT JOIN forgeyard.queue_admit_deltas g
             ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
          WHERE a.tenant_id = 't1' AND a.queue = 'bt10k'),
          '5000/' || (SELECT pg_catalog.sum(pg_catalog.octet_length('p' || i)) FROM generate_series(0, 4999) i) || '/5000',
          'the slot counters hold exactly the 5,000 messages and their bytes');
SELECT throws_ok($$SELECT * FROM forgeyard.enqueue_batch('t1', 'bt',
                   (SELECT pg_catalog.array_agg(pg_catalog.convert_to('q' || i, 'UTF8')) FROM generate_series(1, 10000) i))$$,
                 'FY020', NULL, 'a batch of 10,000 into the full queue bt: FY020');

-------------------------------------------------------------------------------------------------
-- Bounds: per-class admission with the default thresholds, never past max_messages / max_bytes
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-05 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'cap', '{"max_messages": 100}')$$, 'queue "cap" of 100 messages');
SELECT is(pg_temp.fill('t1', 'cap', 'bulk', 69), 69, '69 bulk messages');
SELECT is((SELECT pressure FROM forgeyard.queue_stats('t1', 'cap')), 'normal', 'pressure at 69%: normal');
SELECT is(pg_temp.fill('t1', 'cap', 'bulk', 1000), 1, 'bulk: the 70th goes in, then bulk is refused');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'bulk')$$, 'FY020',
                 'queue "cap" is full for priority class bulk', 'bulk at 70 of 100: FY020');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'bulk')$$),
          ARRAY['FY020', 'queue "cap" is full for priority class bulk',
                'class bulk is admitted up to 70% of max_messages and max_bytes'],
          'FY020 names the class and its threshold');
SELECT is((SELECT pressure FROM forgeyard.queue_stats('t1', 'cap')), 'elevated', 'pressure at 70%: elevated');
SELECT is(pg_temp.fill('t1', 'cap', 'background', 1000), 10, 'background: admitted up to 80');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'background')$$, 'FY020',
                 'queue "cap" is full for priority class background', 'background at 80 of 100: FY020');
SELECT is(pg_temp.fill('t1', 'cap', 'interactive', 1000), 10, 'interactive: admitted up to 90');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x')$$, 'FY020',
                 'queue "cap" is full for priority class interactive', 'interactive at 90 of 100: FY020');
SELECT is((SELECT pressure FROM forgeyard.queue_stats('t1', 'cap')), 'elevated', 'pressure at 90%: elevated');
SELECT is(pg_temp.fill('t1', 'cap', 'realtime', 1000), 5, 'realtime: admitted up to 95');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'realtime')$$, 'FY020',
                 'queue "cap" is full for priority class realtime', 'realtime at 95 of 100: FY020');
SELECT is((SELECT pressure FROM forgeyard.queue_stats('t1', 'cap')), 'saturated', 'pressure at 95%: saturated');
SELECT is(pg_temp.fill('t1', 'cap', 'security_control', 3), 3, 'security_control: 3 more (98)');
SELECT is(pg_temp.fill('t1', 'cap', 'emergency', 1000), 2, 'emergency: admitted up to 100');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'emergency')$$, 'FY020',
                 'queue "cap" is full for priority class emergency', 'emergency at 100 of 100: FY020');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'security_control')$$, 'FY020',
                 'queue "cap" is full for priority class security_control', 'security_control at 100 of 100: FY020');
SELECT results_eq($$SELECT class, messages FROM forgeyard.queue_depth WHERE tenant_id = 't1' AND queue = 'cap' ORDER BY messages DESC, class$$,
                  $$VALUES ('bulk'::text, 70::bigint), ('background', 10), ('interactive', 10), ('realtime', 5),
                           ('security_control', 3), ('emergency', 2)$$,
                  'cap holds 70 bulk, 10 background, 10 interactive, 5 realtime, 3 security_control, 2 emergency');
SELECT results_eq($$SELECT pg_temp.pending('t1', 'cap'), (SELECT admitted_messages FROM forgeyard.queue_overview WHERE tenant_id = 't1' AND queue = 'cap')$$,
                  $$VALUES (100::bigint, 100::numeric)$$, 'never past max_messages: exactly 100 messages');

-- In-flight messages count; dead letters do not; an ack gives the room back.
SELECT is(pg_temp.claim('cap-c1', 't1', 'cap', 'w', 5), (SELECT array_agg(msg_id ORDER BY priority, msg_id) FROM forgeyard.messages
                                                             WHERE tenant_id = 't1' AND queue = 'cap' AND priority <= 1),
          'the 5 highest-class messages are claimed');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'emergency')$$, 'FY020', NULL,
                 'in-flight messages count: still full for emergency');
SELECT is(forgeyard.nack('t1', 'cap', (pg_temp.claimed('cap-c1'))[1], (pg_temp.toks('cap-c1'))[1], 'poison', true), 'dead',
          'one in-flight message is dead-lettered');
SELECT is(pg_temp.fill('t1', 'cap', 'emergency', 1000), 1, 'a dead letter does not count: one emergency message goes in');
SELECT results_eq($$SELECT ready, in_flight, dead FROM forgeyard.queue_stats('t1', 'cap')$$,
                  $$VALUES (96::bigint, 4::bigint, 1::bigint)$$, 'cap: 96 ready + 4 in flight = 100, and 1 dead beside them');
SELECT is(pg_temp.stored('t1', 'cap'), 101::bigint, '101 rows stored, 100 of them live');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'cap', (pg_temp.claimed('cap-c1'))[2], (pg_temp.toks('cap-c1'))[2]),
                'one in-flight message is acked');
SELECT is(pg_temp.fill('t1', 'cap', 'emergency', 1000), 1, 'after the ack the room is back: one more emergency message');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'cap', 'x', NULL, NULL, 'bulk')$$, 'FY020', NULL,
                 'bulk stays refused: the queue is still above 70%');

-- The room of a lower class comes back with acks too; delayed messages count.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'room', '{"max_messages": 10}')$$, 'queue "room" of 10 messages');
CALL pg_temp.enq('rm1', 't1', 'room', 'delayed', NULL, NULL, 'bulk', '1 hour');
CALL pg_temp.enq('rm2', 't1', 'room', 'delayed', NULL, NULL, 'bulk', '1 hour');
SELECT is(pg_temp.fill('t1', 'room', 'bulk', 1000), 5, 'bulk: 2 delayed + 5 ready = 7 of 10');
SELECT is(array_length(pg_temp.claim('rm-c1', 't1', 'room', 'w', 2), 1), 2, 'two ready messages claimed');
SELECT results_eq($$SELECT ready, in_flight, delayed FROM forgeyard.queue_stats('t1', 'room')$$,
                  $$VALUES (3::bigint, 2::bigint, 2::bigint)$$, 'room: 3 ready, 2 in flight, 2 delayed');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'room', 'x', NULL, NULL, 'bulk')$$, 'FY020', NULL,
                 'ready + delayed + in flight = 7: bulk refused');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'room', (pg_temp.claimed('rm-c1'))[1], (pg_temp.toks('rm-c1'))[1]),
                'one acked');
SELECT is(pg_temp.fill('t1', 'room', 'bulk', 1000), 1, 'after the ack bulk gets exactly that room back');

-- Custom thresholds.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'custom', '{"max_messages": 10, "admit_bulk": 20, "admit_background": 40,
                   "admit_interactive": 60, "admit_realtime": 80, "admit_security_control": 90, "admit_emergency": 100}')$$,
                'queue "custom": 10 messages, admission 20 / 40 / 60 / 80 / 90 / 100');
SELECT results_eq($$SELECT pg_temp.fill('t1', 'custom', c, 1000) FROM unnest(ARRAY['bulk', 'background', 'interactive', 'realtime',
                                                                                     'security_control', 'emergency']) WITH ORDINALITY u(c, o) ORDER BY o$$,
                  $$VALUES (2), (2), (2), (2), (1), (1)$$,
                  'custom thresholds: bulk up to 2, background 4, interactive 6, realtime 8, security_control 9, emergency 10');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', 'custom', 'x', NULL, NULL, 'bulk')$$),
          ARRAY['FY020', 'queue "custom" is full for priority class bulk', 'class bulk is admitted up to 20% of max_messages and max_bytes'],
          'FY020 names the custom threshold');
SELECT is(pg_temp.pending('t1', 'custom'), 10::bigint, 'custom holds exactly its 10 messages');

-- max_bytes is a bound too.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'bytes', '{"max_bytes": 1000, "max_payload_bytes": 300}')$$,
                'queue "bytes": 1000 bytes, payloads up to 300');
SELECT is(pg_temp.fill('t1', 'bytes', 'bulk', 1000, decode(repeat('ab', 300), 'hex')), 2, 'bulk: 600 bytes in, a third 300 would pass 700');
SELECT is((SELECT pressure FROM forgeyard.queue_stats('t1', 'bytes')), 'normal', 'pressure by bytes at 60%: normal');
SELECT is(pg_temp.fill('t1', 'bytes', 'emergency', 1000, decode(repeat('ab', 300), 'hex')), 1, 'emergency: 900 bytes, a fourth 300 would pass 1000');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'bytes', decode(repeat('ab', 100), 'hex'), NULL, NULL, 'emergency')$$,
                'emergency: 100 more bytes fill it exactly');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'bytes', 'x', NULL, NULL, 'emergency')$$, 'FY020', NULL,
                 'one more byte: FY020, though only 4 of 100000 messages are held');
SELECT results_eq($$SELECT ready, bytes, pressure FROM forgeyard.queue_stats('t1', 'bytes')$$,
                  $$VALUES (4::bigint, 1000::bigint, 'saturated'::text)$$, 'bytes: 4 messages, exactly 1000 bytes, saturated');

-- Several capacity slots never add up to more than the limit.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'wide', '{"max_messages": 2048}')$$, 'queue "wide" of 2048 messages');
SELECT is((SELECT slots FROM forgeyard.queues WHERE tenant_id = 't1' AND queue = 'wide'), 2, 'wide spreads its capacity over 2 slots');
SELECT is(pg_temp.fill('t1', 'wide', 'emergency', 3000), 2048, 'emergency fills wide to exactly 2048');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'wide', 'x', NULL, NULL, 'emergency')$$, 'FY020', NULL, 'wide is full');
SELECT results_eq($$WITH s AS (SELECT a.admitted_messages + COALESCE(g.admitted_messages, 0) AS n
                               FROM forgeyard.queue_slots a LEFT JOIN forgeyard.queue_admit_deltas g
                                 ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
                              WHERE a.tenant_id = 't1' AND a.queue = 'wide')
                    SELECT sum(n) FROM s GROUP BY () UNION ALL SELECT max(n) FROM s$$,
                  $$VALUES (2048::numeric), (1024)$$, 'each slot holds at most its share (1024)');

-- Over-size payloads: FY021.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'small', '{"max_payload_bytes": 10}')$$, 'queue "small": payloads up to 10 bytes');
INSERT INTO snaps SELECT 'payload', pg_temp.snap();
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'small', '01234567890')$$, 'FY021',
                 'payload of 11 bytes is over the limit of queue "small"', 'an 11-byte payload into "small": FY021');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', 'small', '01234567890', NULL, NULL, 'emergency')$$),
          ARRAY['FY021', 'payload of 11 bytes is over the limit of queue "small"',
                'max_payload_bytes is 10; store the bytes elsewhere and send a reference'],
          'FY021 gives the limit (whatever the class)');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'nullopts', decode(repeat('00', 65537), 'hex'))$$, 'FY021',
                 'payload of 65537 bytes is over the limit of queue "nullopts"', 'the default limit is 64 KiB: 65537 bytes is FY021');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'payload'), 'FY021 changed nothing');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'small', '0123456789')$$, 'exactly 10 bytes into "small"');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'nullopts', decode(repeat('00', 65536), 'hex'))$$, 'exactly 64 KiB by default');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'small', '')$$, 'an empty payload is a payload');

-------------------------------------------------------------------------------------------------
-- claim: highest class first, then oldest; each delivery with its own claim token
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-06 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'cq')$$, 'queue "cq" (visibility 30 s)');
CALL pg_temp.enq('cb1', 't1', 'cq', 'b1', NULL, NULL, 'bulk');
CALL pg_temp.enq('ci1', 't1', 'cq', 'i1', '00000000-0000-0000-0000-0000000000c1');
CALL pg_temp.enq('ce1', 't1', 'cq', 'e1', NULL, NULL, 'emergency');
CALL pg_temp.enq('ci2', 't1', 'cq', 'i2', NULL, 'key-i2', 'interactive');
CALL pg_temp.enq('cr1', 't1', 'cq', 'r1', NULL, NULL, 'realtime');
CALL pg_temp.enq('cb2', 't1', 'cq', 'b2', NULL, NULL, 'bulk');
CALL pg_temp.enq('cs1', 't1', 'cq', 's1', NULL, NULL, 'security_control');
CALL pg_temp.enq('cg1', 't1', 'cq', 'g1', NULL, NULL, 'background');
SELECT is(pg_temp.claim('cq-1', 't1', 'cq', 'w1', 4), pg_temp.ids('ce1', 'cs1', 'cr1', 'ci1'),
          'claim 4: emergency, security_control, realtime, then the older interactive');
SELECT results_eq($$SELECT msg_id, event_id, partition_key, priority, attempt, payload, enqueued_at FROM cl WHERE k = 'cq-1' ORDER BY ord$$,
                  $$VALUES (pg_temp.id('ce1'), NULL::uuid, NULL::text, 'emergency'::text, 1, 'e1'::bytea, '2030-01-06 00:00:00+00'::timestamptz),
                           (pg_temp.id('cs1'), NULL, NULL, 'security_control', 1, 's1', '2030-01-06 00:00:00+00'),
                           (pg_temp.id('cr1'), NULL, NULL, 'realtime', 1, 'r1', '2030-01-06 00:00:00+00'),
                           (pg_temp.id('ci1'), '00000000-0000-0000-0000-0000000000c1', NULL, 'interactive', 1, 'i1', '2030-01-06 00:00:00+00')$$,
                  'claim returns each message with its event_id, partition_key, class name, attempt 1, payload and enqueued_at');
SELECT is(pg_temp.claim('cq-2', 't1', 'cq', 'w2', 10), pg_temp.ids('ci2', 'cg1', 'cb1', 'cb2'),
          'claim 10 of 4 left: interactive, background, then bulk oldest first');
SELECT is(pg_temp.claim('cq-3', 't1', 'cq', 'w3', 10), '{}'::bigint[], 'everything is in flight: claim returns nothing');
SELECT is((SELECT partition_key FROM cl WHERE k = 'cq-2' AND msg_id = pg_temp.id('ci2')), 'key-i2',
          'a partition_key in an unordered queue is carried to the consumer');
SELECT results_eq($$SELECT count(*), count(DISTINCT claim_token), count(DISTINCT msg_id) FROM cl WHERE k IN ('cq-1', 'cq-2')$$,
                  $$VALUES (8::bigint, 8::bigint, 8::bigint)$$, 'eight deliveries: eight messages, eight distinct claim tokens');
SELECT results_eq(
    $$SELECT x.state, x.attempt, x.claim_token, x.claimed_by, x.visible_at FROM cl JOIN forgeyard.messages x USING (msg_id)
       WHERE cl.k = 'cq-1' ORDER BY cl.ord$$,
    $$SELECT 'pending'::text, 1, cl.claim_token, 'w1'::text, '2030-01-06 00:00:30+00'::timestamptz FROM cl WHERE cl.k = 'cq-1' ORDER BY cl.ord$$,
    'a claimed message stores its token and consumer and is invisible for the queue''s 30 s');
SELECT results_eq($$SELECT ready, in_flight, delayed FROM forgeyard.queue_stats('t1', 'cq')$$,
                  $$VALUES (0::bigint, 8::bigint, 0::bigint)$$, 'queue_stats: 8 in flight');

SET forgeyard.now_override = '2030-01-06 00:00:29.999999+00';
SELECT is(pg_temp.claim('cq-4', 't1', 'cq', 'w3', 10), '{}'::bigint[], '1 microsecond before the visibility ends: nothing to claim');
SET forgeyard.now_override = '2030-01-06 00:00:30+00';
SELECT is(pg_temp.claim('cq-5', 't1', 'cq', 'w3', 10), pg_temp.ids('ce1', 'cs1', 'cr1', 'ci1', 'ci2', 'cg1', 'cb1', 'cb2'),
          'when the visibility ran out every message is claimable again, in class order');
SELECT is((SELECT array_agg(DISTINCT attempt) FROM cl WHERE k = 'cq-5'), ARRAY[2], 'the second delivery of each is attempt 2');
SELECT is_empty($$SELECT claim_token FROM cl WHERE k = 'cq-5' INTERSECT SELECT claim_token FROM cl WHERE k IN ('cq-1', 'cq-2')$$,
                'the second deliveries carry new claim tokens');
SELECT results_eq($$SELECT count(DISTINCT claimed_by), min(claimed_by) FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'cq'$$,
                  $$VALUES (1::bigint, 'w3'::text)$$, 'the messages now belong to the consumer of the new claim');

-- The visibility argument; the queue's visibility_timeout otherwise.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'cv', '{"visibility_timeout": "2 minutes"}')$$, 'queue "cv": visibility 2 minutes');
CALL pg_temp.enq('v1', 't1', 'cv', 'v1');
CALL pg_temp.enq('v2', 't1', 'cv', 'v2');
SELECT is(pg_temp.claim('cv-1', 't1', 'cv', 'w', 1), pg_temp.ids('v1'), 'claim 1 with the queue''s visibility');
SELECT is(pg_temp.claim('cv-2', 't1', 'cv', 'w', 1, '5 seconds'), pg_temp.ids('v2'), 'claim 1 with visibility 5 seconds');
SELECT results_eq($$SELECT visible_at FROM pg_temp.msg('v1') UNION ALL SELECT visible_at FROM pg_temp.msg('v2')$$,
                  $$VALUES ('2030-01-06 00:02:30+00'::timestamptz), ('2030-01-06 00:00:35+00')$$,
                  'visible again after the queue''s 2 minutes, or after the 5 seconds asked for');
SET forgeyard.now_override = '2030-01-06 00:00:35+00';
SELECT is(pg_temp.claim('cv-3', 't1', 'cv', 'w', 10), pg_temp.ids('v2'), 'after 5 seconds only the message claimed for 5 seconds is back');

-- Delay: invisible until its time. Oldest first within a class.
SET forgeyard.now_override = '2030-01-06 01:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'cd')$$, 'queue "cd"');
CALL pg_temp.enq('dl1', 't1', 'cd', 'later', NULL, NULL, 'emergency', '1 minute');
SELECT is(pg_temp.claim('cd-1', 't1', 'cd', 'w', 10), '{}'::bigint[], 'a delayed message is not claimable before its time');
SELECT results_eq($$SELECT ready, in_flight, delayed FROM forgeyard.queue_stats('t1', 'cd')$$,
                  $$VALUES (0::bigint, 0::bigint, 1::bigint)$$, 'queue_stats counts it as delayed');
SET forgeyard.now_override = '2030-01-06 01:00:01+00';
CALL pg_temp.enq('do1', 't1', 'cd', 'o1');
SET forgeyard.now_override = '2030-01-06 01:00:02+00';
CALL pg_temp.enq('do2', 't1', 'cd', 'o2');
CALL pg_temp.enq('do3', 't1', 'cd', 'o3', NULL, NULL, 'realtime');
SET forgeyard.now_override = '2030-01-06 01:00:59.999999+00';
SELECT is(pg_temp.claim('cd-2', 't1', 'cd', 'w', 10), pg_temp.ids('do3', 'do1', 'do2'),
          'realtime first, then the interactive messages oldest first; the delayed one is still invisible 1 microsecond before its time');
SET forgeyard.now_override = '2030-01-06 01:01:00+00';
SELECT is(pg_temp.claim('cd-3', 't1', 'cd', 'w', 10), pg_temp.ids('dl1'), 'at its time the delayed message is claimable');
SELECT is((SELECT enqueued_at FROM cl WHERE k = 'cd-3'), '2030-01-06 01:00:00+00'::timestamptz,
          'its enqueued_at is when it was enqueued, not when it became visible');

-- A claim never hands out one message twice; max_messages is respected.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'many')$$, 'queue "many"');
SELECT is((SELECT count(*) FROM forgeyard.enqueue_batch('t1', 'many', array_fill('m'::bytea, ARRAY[50]))), 50::bigint, '50 messages');
SELECT is(array_length(pg_temp.claim('mn-1', 't1', 'many', 'w', 7), 1), 7, 'claim 7 of 50: 7 rows');
SELECT is(array_length(pg_temp.claim('mn-2', 't1', 'many', 'w', 1000), 1), 43, 'claim 1000 of the 43 left: 43 rows');
SELECT results_eq($$SELECT count(*), count(DISTINCT msg_id), count(DISTINCT claim_token) FROM cl WHERE k IN ('mn-1', 'mn-2')$$,
                  $$VALUES (50::bigint, 50::bigint, 50::bigint)$$, 'the two claims handed out 50 distinct messages, none twice');
SELECT is(array_length(pg_temp.claim('mn-3', 't1', 'many', 'w', 1000), 1), NULL, 'a third claim gets none of them');

-------------------------------------------------------------------------------------------------
-- ack / nack / extend: fenced by the claim token
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-07 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'an', '{"max_attempts": 3, "backoff_base": "2 seconds", "backoff_max": "3 seconds"}')$$,
                'queue "an": 3 attempts, backoff 2 s capped at 3 s');
CALL pg_temp.enq('a1', 't1', 'an', 'a1');
CALL pg_temp.enq('a0', 't1', 'an', 'never claimed', NULL, NULL, 'bulk');
SELECT is(pg_temp.claim('an-1', 't1', 'an', 'w'), pg_temp.ids('a1'), 'a1 claimed');
INSERT INTO snaps SELECT 'ack', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a1'), pg_temp.tok('an-1', 'a1') + 1000), 'FY001',
                 format('claim token %s is not the current delivery of message %s', pg_temp.tok('an-1', 'a1') + 1000, pg_temp.id('a1')),
                 'ack with a token that is not the delivery''s: FY001');
SELECT is((pg_temp.err(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a1'), pg_temp.tok('an-1', 'a1') + 1)))[3],
          'the visibility ran out and the message was claimed again, or it was nacked; stop work on it', 'FY001 tells the worker to stop');
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a0'), pg_temp.tok('an-1', 'a1')), 'FY001', NULL,
                 'ack of a message that was never claimed: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'ack'), 'the refused acks changed nothing');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a1'), pg_temp.tok('an-1', 'a1')),
                'ack with the delivery''s token');
SELECT is_empty($$SELECT * FROM pg_temp.msg('a1')$$, 'the acked message is gone (retain_acked 0)');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead, bytes FROM forgeyard.queue_stats('t1', 'an')$$,
                  $$VALUES (1::bigint, 0::bigint, 0::bigint, 0::bigint, 13::bigint)$$, 'after the ack only a0 (13 bytes) is held');
INSERT INTO snaps SELECT 'acked', pg_temp.snap();
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a1'), pg_temp.tok('an-1', 'a1')),
                'ack again (a retry after a lost connection): no error');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a1'), 12345), 'ack again with any token: no error');
SELECT lives_ok($$SELECT forgeyard.ack('t1', 'an', 999999999, 1)$$, 'ack of an unknown msg_id: no error');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'acked'), 'acks of a gone message change nothing (no capacity given back twice)');

-- The visibility ran out and someone else claimed: the old token is stale for ack, nack, extend.
CALL pg_temp.enq('a2', 't1', 'an', 'a2', NULL, NULL, 'emergency');
SELECT is(pg_temp.claim('an-2', 't1', 'an', 'old-worker'), pg_temp.ids('a2'), 'a2 claimed by old-worker');
SET forgeyard.now_override = '2030-01-07 00:00:30+00';
SELECT is(pg_temp.claim('an-3', 't1', 'an', 'new-worker'), pg_temp.ids('a2'), 'a2''s visibility ran out: new-worker claims it');
SELECT results_eq($$SELECT attempt, claim_token, claimed_by FROM pg_temp.msg('a2')$$,
                  $$VALUES (2, pg_temp.tok('an-3', 'a2'), 'new-worker'::text)$$, 'a2: attempt 2, the new token');
INSERT INTO snaps SELECT 'stale', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-2', 'a2')), 'FY001',
                 format('claim token %s is not the current delivery of message %s', pg_temp.tok('an-2', 'a2'), pg_temp.id('a2')),
                 'a late ack by the old worker: FY001, it cannot complete the new delivery');
SELECT throws_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-2', 'a2'), 'x'), 'FY001', NULL,
                 'a late nack by the old worker: FY001');
SELECT throws_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L, true)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-2', 'a2'), 'x'), 'FY001', NULL,
                 'a late permanent nack by the old worker: FY001');
SELECT throws_ok(format('SELECT forgeyard.extend(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-2', 'a2'), '1 minute'), 'FY001', NULL,
                 'a late extend by the old worker: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'stale'), 'the old worker''s calls changed nothing');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-3', 'a2')),
                'the new worker acks');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a2'), pg_temp.tok('an-2', 'a2')),
                'now the old worker''s ack is a no-op: the message is acked');

-- The visibility ran out but nobody claimed it since: ack (and nack) accepted, extend FY001.
CALL pg_temp.enq('a3', 't1', 'an', 'a3', NULL, NULL, 'emergency');
CALL pg_temp.enq('a4', 't1', 'an', 'a4', NULL, NULL, 'emergency');
CALL pg_temp.enq('a5', 't1', 'an', 'a5', NULL, NULL, 'emergency');
SELECT is(pg_temp.claim('an-4', 't1', 'an', 'w', 3), pg_temp.ids('a3', 'a4', 'a5'), 'a3, a4, a5 claimed until 00:01:00');
SET forgeyard.now_override = '2030-01-07 00:01:00+00';
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a3'), pg_temp.tok('an-4', 'a3')),
                'ack at exactly the end of the visibility, nobody re-claimed: accepted');
SELECT is_empty($$SELECT * FROM pg_temp.msg('a3')$$, 'the late but unchallenged ack completed a3');
INSERT INTO snaps SELECT 'lapsed', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.extend(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a4'), pg_temp.tok('an-4', 'a4'), '1 minute'), 'FY001',
                 format('claim token %s is not the current delivery of message %s', pg_temp.tok('an-4', 'a4'), pg_temp.id('a4')),
                 'extend at exactly the end of the visibility: FY001 (the delivery lapsed)');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'lapsed'), 'the refused extend changed nothing');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a5'), pg_temp.tok('an-4', 'a5'), 'late failure'), 'retry',
          'nack after the visibility ran out, nobody re-claimed: accepted');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a4'), pg_temp.tok('an-4', 'a4')),
                'the lapsed delivery can still be acked after its refused extend');

-- extend keeps a live delivery invisible.
CALL pg_temp.enq('a6', 't1', 'an', 'a6', NULL, NULL, 'emergency');
SELECT is(pg_temp.claim('an-5', 't1', 'an', 'w', 1, '10 seconds'), pg_temp.ids('a6'), 'a6 claimed for 10 seconds (until 00:01:10)');
SET forgeyard.now_override = '2030-01-07 00:01:09+00';
SELECT is(forgeyard.extend('t1', 'an', pg_temp.id('a6'), pg_temp.tok('an-5', 'a6'), '1 minute'), '2030-01-07 00:02:09+00'::timestamptz,
          'extend 1 second before the end: visible_at = now + 1 minute');
SELECT results_eq($$SELECT visible_at, attempt, claim_token FROM pg_temp.msg('a6')$$,
                  $$VALUES ('2030-01-07 00:02:09+00'::timestamptz, 1, pg_temp.tok('an-5', 'a6'))$$,
                  'extend stores the new visible_at; attempt and token stay');
SET forgeyard.now_override = '2030-01-07 00:01:10+00';
SELECT is(pg_temp.claim('an-6', 't1', 'an', 'other', 10, '1 day'), pg_temp.ids('a5', 'a0'),
          'at the old end a6 stays invisible (the retried a5 and the waiting a0 are claimed)');
SET forgeyard.now_override = '2030-01-07 00:02:08.999999+00';
SELECT is(forgeyard.extend('t1', 'an', pg_temp.id('a6'), pg_temp.tok('an-5', 'a6'), '0.5 seconds'), '2030-01-07 00:02:09.499999+00'::timestamptz,
          'extend may also shorten: visible_at = now + 0.5 s');
SET forgeyard.now_override = '2030-01-07 00:02:09.499999+00';
SELECT throws_ok(format('SELECT forgeyard.extend(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a6'), pg_temp.tok('an-5', 'a6'), '1 minute'),
                 'FY001', NULL, 'extend at exactly the extended end: FY001');
SELECT is(pg_temp.claim('an-7', 't1', 'an', 'other', 10), pg_temp.ids('a6'), 'then a6 is claimable again');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'an', ARRAY[pg_temp.id('a5'), pg_temp.id('a6')],
                       ARRAY[pg_temp.tok('an-6', 'a5'), pg_temp.tok('an-7', 'a6')]), 'a5 and a6 acked');

-- nack: retry with backoff (bounded), dead-letter after max_attempts or when permanent.
SET forgeyard.now_override = '2030-01-07 01:00:00+00';
CALL pg_temp.enq('a7', 't1', 'an', 'a7', '00000000-0000-0000-0000-0000000000a7', NULL, 'realtime');
SELECT is(pg_temp.claim('an-8', 't1', 'an', 'w'), pg_temp.ids('a7'), 'a7 claimed: attempt 1');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a7'), pg_temp.tok('an-8', 'a7'), 'timeout talking to x'), 'retry',
          'nack of attempt 1 of 3: retry');
SELECT results_eq($$SELECT state, attempt, claim_token, last_error, error_class FROM pg_temp.msg('a7')$$,
                  $$VALUES ('pending'::text, 1, NULL::bigint, 'timeout talking to x'::text, NULL::text)$$,
                  'a retried message is pending without a claim token, with the error');
SELECT ok((SELECT visible_at BETWEEN '2030-01-07 01:00:00+00' AND '2030-01-07 01:00:02+00' FROM pg_temp.msg('a7')),
          'retry of attempt 1: visible again within [now, now + backoff_base 2 s]');
SELECT throws_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a7'), pg_temp.tok('an-8', 'a7'), 'again'),
                 'FY001', NULL, 'a second nack with the same token: FY001 (the delivery ended)');
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a7'), pg_temp.tok('an-8', 'a7')),
                 'FY001', NULL, 'an ack with the nacked delivery''s token: FY001');
SET forgeyard.now_override = '2030-01-07 01:00:02+00';
SELECT is(pg_temp.claim('an-9', 't1', 'an', 'w'), pg_temp.ids('a7'), 'after the backoff a7 is claimable');
SELECT is((SELECT attempt FROM cl WHERE k = 'an-9'), 2, 'attempt 2');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a7'), pg_temp.tok('an-9', 'a7'), 'timeout again'), 'retry', 'nack of attempt 2 of 3: retry');
SELECT ok((SELECT visible_at BETWEEN '2030-01-07 01:00:02+00' AND '2030-01-07 01:00:05+00' FROM pg_temp.msg('a7')),
          'retry of attempt 2: within [now, now + min(backoff_max 3 s, 2 s * 2)]');
SET forgeyard.now_override = '2030-01-07 01:00:05+00';
SELECT is(pg_temp.claim('an-10', 't1', 'an', 'w'), pg_temp.ids('a7'), 'a7 claimed a third time');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a7'), pg_temp.tok('an-10', 'a7'), 'still failing'), 'dead',
          'nack of attempt 3 of 3: dead');
SELECT results_eq($$SELECT state, attempt, claim_token, last_error, error_class, payload, finished_at FROM pg_temp.msg('a7')$$,
                  $$VALUES ('dead'::text, 3, NULL::bigint, 'still failing'::text, 'max_attempts'::text, NULL::bytea,
                            '2030-01-07 01:00:05+00'::timestamptz)$$,
                  'a dead letter: the error, error class max_attempts, attempt 3, the payload dropped, when it died');
SELECT is(pg_temp.claim('an-11', 't1', 'an', 'w', 10), '{}'::bigint[], 'a dead letter is never claimed');
INSERT INTO snaps SELECT 'dead', pg_temp.snap();
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'an', pg_temp.id('a7'), pg_temp.tok('an-10', 'a7')),
                'ack of a dead message (a retry after a lost connection): no error');
SELECT throws_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L)', 't1', 'an', pg_temp.id('a7'), pg_temp.tok('an-10', 'a7'), 'x'),
                 'FY001', NULL, 'nack of a dead message: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'dead'), 'ack and nack of a dead message changed nothing');
SELECT is(forgeyard.enqueue('t1', 'an', 'a7', '00000000-0000-0000-0000-0000000000a7'), pg_temp.id('a7'),
          'the event_id of a dead message still returns its msg_id');

CALL pg_temp.enq('a8', 't1', 'an', 'a8', NULL, 'key-a8', 'bulk');
SELECT is(pg_temp.claim('an-12', 't1', 'an', 'w', 10), pg_temp.ids('a8'), 'a8 claimed (a0 is still in flight for a day)');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a8'), pg_temp.tok('an-12', 'a8'), 'cannot parse', true), 'dead',
          'nack permanent of attempt 1: dead at once');
SELECT results_eq($$SELECT state, attempt, last_error, error_class, payload FROM pg_temp.msg('a8')$$,
                  $$VALUES ('dead'::text, 1, 'cannot parse'::text, 'permanent'::text, NULL::bytea)$$,
                  'dead by a permanent error: error class permanent, attempt 1');
SELECT is(forgeyard.nack('t1', 'an', pg_temp.id('a0'), pg_temp.tok('an-6', 'a0'), NULL), 'retry', 'nack with error NULL: retry');
SELECT is((SELECT last_error FROM pg_temp.msg('a0')), '', 'error NULL is stored as empty');
SELECT results_eq($$SELECT ready + delayed, in_flight, dead, bytes FROM forgeyard.queue_stats('t1', 'an')$$,
                  $$VALUES (1::bigint, 0::bigint, 2::bigint, 13::bigint)$$, 'an: a0 waits for its retry, two dead letters, only a0''s 13 bytes held');

-- The retry delay is bounded by min(backoff_max, backoff_base * 2^(attempt-1)); jitter is not asserted.
SET forgeyard.now_override = '2030-01-08 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'jit', '{"max_attempts": 20, "backoff_base": "1 second", "backoff_max": "10 seconds"}')$$,
                'queue "jit": 20 attempts, backoff 1 s capped at 10 s');
CALL pg_temp.enq('j1', 't1', 'jit', 'j1');
CREATE TEMP TABLE jit_log (attempt integer, outcome text, at timestamptz, visible_at timestamptz);
DO $$
DECLARE d record; outcome text; v timestamptz;
BEGIN
    FOR i IN 1..12 LOOP
        SELECT c.msg_id, c.claim_token, c.attempt INTO d FROM forgeyard.claim('t1', 'jit', 'w') c;
        outcome := forgeyard.nack('t1', 'jit', d.msg_id, d.claim_token, 'retry me');
        SELECT x.visible_at INTO v FROM forgeyard.messages x WHERE x.msg_id = d.msg_id;
        INSERT INTO jit_log VALUES (d.attempt, outcome, forgeyard.now(), v);
        PERFORM set_config('forgeyard.now_override', v::text, true);
    END LOOP;
END $$;
SELECT results_eq($$SELECT array_agg(attempt ORDER BY attempt), array_agg(DISTINCT outcome) FROM jit_log$$,
                  $$VALUES ('{1,2,3,4,5,6,7,8,9,10,11,12}'::int[], '{retry}'::text[])$$,
                  'twelve deliveries, attempts 1 to 12, each nack a retry');
SELECT is_empty($$SELECT attempt, visible_at - at FROM jit_log
                   WHERE visible_at < at OR visible_at - at > least(interval '10 seconds', interval '1 second' * 2 ^ (attempt - 1))$$,
                'every retry is visible again within [now, now + min(backoff_max, backoff_base * 2^(attempt-1))]');

-------------------------------------------------------------------------------------------------
-- Batch forms: ack_batch / nack_batch / extend_batch (all or nothing), and ack_and_claim
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-09 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'bq')$$, 'queue "bq"');
CALL pg_temp.enq('x1', 't1', 'bq', 'x1');
CALL pg_temp.enq('x2', 't1', 'bq', 'x2');
CALL pg_temp.enq('x3', 't1', 'bq', 'x3');
CALL pg_temp.enq('x4', 't1', 'bq', 'x4');
SELECT is(pg_temp.claim('bq-1', 't1', 'bq', 'w', 4), pg_temp.ids('x1', 'x2', 'x3', 'x4'), 'x1..x4 claimed');
INSERT INTO snaps SELECT 'batch-1', pg_temp.snap();
SELECT throws_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'bq', pg_temp.ids('x1', 'x2', 'x3'),
                        ARRAY[pg_temp.tok('bq-1', 'x1'), pg_temp.tok('bq-1', 'x2'), pg_temp.tok('bq-1', 'x3') + 1000]),
                 'FY001', format('claim token %s is not the current delivery of message %s', pg_temp.tok('bq-1', 'x3') + 1000, pg_temp.id('x3')),
                 'ack_batch with one stale token (the last): FY001');
SELECT throws_ok(format('SELECT forgeyard.extend_batch(%L, %L, %L, %L, %L)', 't1', 'bq', pg_temp.ids('x1', 'x2'),
                        ARRAY[pg_temp.tok('bq-1', 'x1') + 1000, pg_temp.tok('bq-1', 'x2')], '5 minutes'),
                 'FY001', NULL, 'extend_batch with one stale token: FY001');
SELECT throws_ok(format('SELECT * FROM forgeyard.nack_batch(%L, %L, %L, %L, %L)', 't1', 'bq', pg_temp.ids('x3', 'x4'),
                        ARRAY[pg_temp.tok('bq-1', 'x3'), pg_temp.tok('bq-1', 'x3')], 'e'),
                 'FY001', NULL, 'nack_batch with one token of another message: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'batch-1'), 'the refused batches acked, extended and nacked nothing: all or nothing');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'bq', pg_temp.ids('x1', 'x2'),
                       ARRAY[pg_temp.tok('bq-1', 'x1'), pg_temp.tok('bq-1', 'x2')]), 'ack_batch of x1 and x2');
SELECT results_eq($$SELECT msg_id FROM forgeyard.messages WHERE tenant_id = 't1' AND queue = 'bq' ORDER BY msg_id$$,
                  $$SELECT unnest(pg_temp.ids('x3', 'x4'))$$, 'x1 and x2 are gone, x3 and x4 remain');
SELECT lives_ok($$SELECT forgeyard.ack_batch('t1', 'bq', '{}', '{}')$$, 'ack_batch of nothing');
SELECT is(forgeyard.extend_batch('t1', 'bq', pg_temp.ids('x3', 'x4'), ARRAY[pg_temp.tok('bq-1', 'x3'), pg_temp.tok('bq-1', 'x4')], '5 minutes'),
          '2030-01-09 00:05:00+00'::timestamptz, 'extend_batch returns now + visibility');
SELECT results_eq($$SELECT visible_at FROM pg_temp.msg('x3') UNION ALL SELECT visible_at FROM pg_temp.msg('x4')$$,
                  $$VALUES ('2030-01-09 00:05:00+00'::timestamptz), ('2030-01-09 00:05:00+00')$$, 'extend_batch extended both');
SELECT results_eq(format('SELECT * FROM forgeyard.nack_batch(%L, %L, %L, %L, %L)', 't1', 'bq', pg_temp.ids('x4', 'x3'),
                         ARRAY[pg_temp.tok('bq-1', 'x4'), pg_temp.tok('bq-1', 'x3')], 'batch failed'),
                  format('VALUES (%s::bigint, %L::text), (%s, %L)', pg_temp.id('x4'), 'retry', pg_temp.id('x3'), 'retry'),
                  'nack_batch returns each msg_id with its outcome, in the order given');
SET forgeyard.now_override = '2030-01-09 00:00:02+00';
SELECT is(pg_temp.claim('bq-2', 't1', 'bq', 'w', 2), pg_temp.ids('x3', 'x4'), 'x3 and x4 claimed again after the backoff');
SELECT results_eq(format('SELECT outcome FROM forgeyard.nack_batch(%L, %L, %L, %L, %L, true)', 't1', 'bq', pg_temp.ids('x3', 'x4'),
                         ARRAY[pg_temp.tok('bq-2', 'x3'), pg_temp.tok('bq-2', 'x4')], 'bad batch'),
                  $$VALUES ('dead'::text), ('dead')$$, 'nack_batch permanent: both dead');
SELECT results_eq($$SELECT state, error_class FROM pg_temp.msg('x3') UNION ALL SELECT state, error_class FROM pg_temp.msg('x4')$$,
                  $$VALUES ('dead'::text, 'permanent'::text), ('dead', 'permanent')$$, 'both are dead letters');

-- ack_and_claim: a worker's steady state in one call.
CALL pg_temp.enq('y1', 't1', 'bq', 'y1');
CALL pg_temp.enq('y2', 't1', 'bq', 'y2');
CALL pg_temp.enq('y3', 't1', 'bq', 'y3');
SELECT is(pg_temp.ack_claim('bq-3', 't1', 'bq', 'w', '{}', '{}', 2), pg_temp.ids('y1', 'y2'),
          'ack_and_claim with nothing to ack: a plain claim of 2');
CALL pg_temp.enq('y4', 't1', 'bq', 'y4', NULL, NULL, 'emergency');
INSERT INTO snaps SELECT 'ack-claim', pg_temp.snap();
SELECT throws_ok(format('SELECT * FROM forgeyard.ack_and_claim(%L, %L, %L, %L, %L, 2)', 't1', 'bq', 'w', pg_temp.ids('y1', 'y2'),
                        ARRAY[pg_temp.tok('bq-3', 'y1'), pg_temp.tok('bq-3', 'y2') + 1000]),
                 'FY001', NULL, 'ack_and_claim with a stale token: FY001');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'ack-claim'), 'the refused ack_and_claim acked and claimed nothing');
SELECT is(pg_temp.ack_claim('bq-4', 't1', 'bq', 'w', pg_temp.ids('y1', 'y2'), ARRAY[pg_temp.tok('bq-3', 'y1'), pg_temp.tok('bq-3', 'y2')], 2),
          pg_temp.ids('y4', 'y3'), 'ack_and_claim acks y1 and y2 and claims the next two in class order');
SELECT is_empty(format('SELECT 1 FROM forgeyard.messages WHERE msg_id IN (%s, %s)', pg_temp.id('y1'), pg_temp.id('y2')),
                'y1 and y2 were acked');
SELECT results_eq($$SELECT attempt, claim_token FROM cl WHERE k = 'bq-4' ORDER BY ord$$,
                  $$SELECT 1, claim_token FROM cl WHERE k = 'bq-4' AND claim_token IS NOT NULL ORDER BY ord$$,
                  'the new deliveries are attempt 1 with their tokens');
SELECT is(pg_temp.ack_claim('bq-5', 't1', 'bq', 'w', pg_temp.ids('y4', 'y3'), ARRAY[pg_temp.tok('bq-4', 'y4'), pg_temp.tok('bq-4', 'y3')], 5),
          '{}'::bigint[], 'ack_and_claim of the last batch: acked, nothing left to claim');
SELECT results_eq($$SELECT ready, in_flight, delayed, dead FROM forgeyard.queue_stats('t1', 'bq')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 2::bigint)$$, 'bq holds only its two dead letters');

-------------------------------------------------------------------------------------------------
-- Partition order: per key enqueue order, at most one in flight per key, keys independent
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-10 00:00:00+00';
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'pq', '{"ordering": "partition"}')$$, 'queue "pq": partition-ordered');
SELECT throws_ok($$SELECT forgeyard.enqueue('t1', 'pq', 'no key')$$, '22023',
                 'partition_key is required: queue "pq" is partition-ordered', 'a partition queue needs a partition_key: 22023');
CALL pg_temp.enq('A1', 't1', 'pq', 'A1', NULL, 'A', 'bulk');
CALL pg_temp.enq('A2', 't1', 'pq', 'A2', NULL, 'A', 'emergency');
CALL pg_temp.enq('B1', 't1', 'pq', 'B1', NULL, 'B', 'interactive');
CALL pg_temp.enq('A3', 't1', 'pq', 'A3', NULL, 'A', 'interactive');
CALL pg_temp.enq('B2', 't1', 'pq', 'B2', NULL, 'B', 'realtime');
CALL pg_temp.enq('C1', 't1', 'pq', 'C1', NULL, 'C', 'emergency');
SELECT results_eq($$SELECT partition_key, pending FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'pq' ORDER BY 1$$,
                  $$VALUES ('A'::text, 3::bigint), ('B', 2), ('C', 1)$$, 'pending messages per key: A 3, B 2, C 1');
SELECT is(pg_temp.claim('pq-1', 't1', 'pq', 'w', 10), pg_temp.ids('C1', 'B1', 'A1'),
          'claim 10: only the head of each key, heads ordered by class (C1 emergency, B1 interactive, A1 bulk)');
SELECT is(pg_temp.claim('pq-2', 't1', 'pq', 'w', 10), '{}'::bigint[],
          'with every head in flight nothing is claimable: A2 (emergency) waits behind A1 (bulk)');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'pq', pg_temp.id('A1'), pg_temp.tok('pq-1', 'A1')), 'A1 acked');
SELECT is(pg_temp.claim('pq-3', 't1', 'pq', 'w', 10), pg_temp.ids('A2'), 'after A1''s ack the next of key A (A2) is claimable, only it');
SELECT is(forgeyard.nack('t1', 'pq', pg_temp.id('B1'), pg_temp.tok('pq-1', 'B1'), 'poison', true), 'dead', 'B1 dead-lettered');
SELECT is(pg_temp.claim('pq-4', 't1', 'pq', 'w', 10), pg_temp.ids('B2'), 'after B1 died the next of key B (B2) is claimable');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'pq', pg_temp.ids('C1', 'B2'),
                       ARRAY[pg_temp.tok('pq-1', 'C1'), pg_temp.tok('pq-4', 'B2')]), 'C1 and B2 acked');
SELECT results_eq($$SELECT partition_key, pending FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'pq' ORDER BY 1$$,
                  $$VALUES ('A'::text, 2::bigint)$$, 'keys B and C are done and forgotten; A has 2 pending');
SET forgeyard.now_override = '2030-01-10 00:00:30+00';
SELECT is(pg_temp.claim('pq-5', 't1', 'pq', 'w2', 10), pg_temp.ids('A2'),
          'A2''s visibility ran out: A2 again (attempt 2), not A3');
SELECT is(forgeyard.nack('t1', 'pq', pg_temp.id('A2'), pg_temp.tok('pq-5', 'A2'), 'later'), 'retry', 'A2 nacked for a retry');
CREATE TEMP TABLE a2_retry AS SELECT visible_at FROM pg_temp.msg('A2');
SELECT set_config('forgeyard.now_override', (SELECT (visible_at - interval '1 microsecond')::text FROM a2_retry), true) IS NOT NULL AS moved \gset
SELECT is(pg_temp.claim('pq-6', 't1', 'pq', 'w2', 10), '{}'::bigint[],
          '1 microsecond before A2''s retry: nothing, A3 (long ready) is not delivered ahead of it');
SELECT set_config('forgeyard.now_override', (SELECT visible_at::text FROM a2_retry), true) IS NOT NULL AS moved \gset
SELECT is(pg_temp.claim('pq-7', 't1', 'pq', 'w2', 10), pg_temp.ids('A2'), 'at its retry time A2 is delivered again, still ahead of A3');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, %s, %s)', 't1', 'pq', pg_temp.id('A2'), pg_temp.tok('pq-7', 'A2')), 'A2 acked');
CALL pg_temp.enq('D1', 't1', 'pq', 'D1', NULL, 'D', 'bulk');
SELECT is(pg_temp.claim('pq-8', 't1', 'pq', 'w', 10), pg_temp.ids('A3', 'D1'), 'A3 is the head of A now; a new key D is a head at once');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'pq', pg_temp.ids('A3', 'D1'),
                       ARRAY[pg_temp.tok('pq-8', 'A3'), pg_temp.tok('pq-8', 'D1')]), 'A3 and D1 acked');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'pq'$$,
                'every key is done: no partition row left');
CALL pg_temp.enq('A4', 't1', 'pq', 'A4', NULL, 'A', 'bulk');
SELECT is(pg_temp.claim('pq-9', 't1', 'pq', 'w', 10), pg_temp.ids('A4'), 'a key seen before starts over: its new message is the head');

-- An unordered queue carries partition keys without ordering by them.
SELECT lives_ok($$SELECT forgeyard.queue_create('t1', 'np')$$, 'queue "np": ordering none');
CALL pg_temp.enq('n1', 't1', 'np', 'n1', NULL, 'K');
CALL pg_temp.enq('n2', 't1', 'np', 'n2', NULL, 'K');
SELECT is(pg_temp.claim('np-1', 't1', 'np', 'w', 10), pg_temp.ids('n1', 'n2'),
          'ordering none: two messages of one key are claimable at once');
SELECT is_empty($$SELECT 1 FROM forgeyard.queue_partitions WHERE tenant_id = 't1' AND queue = 'np'$$,
                'ordering none keeps no partition rows');
SELECT lives_ok(format('SELECT forgeyard.ack_batch(%L, %L, %L, %L)', 't1', 'np', pg_temp.ids('n1', 'n2'), pg_temp.toks('np-1')),
                'both acked');

-------------------------------------------------------------------------------------------------
-- Bad input: every argument of every function above; a specific SQLSTATE, a message naming the
-- argument, and nothing changes. Targets: queue "tgt" with a live delivery of message tg1 and a
-- waiting tg2, and the partition queue "ptgt".
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-11 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.queue_create('t1', 'tgt');
    PERFORM forgeyard.queue_create('t1', 'ptgt', '{"ordering": "partition"}');
END $$;
CALL pg_temp.enq('tg1', 't1', 'tgt', 'tg1', NULL, NULL, 'emergency');
CALL pg_temp.enq('tg2', 't1', 'tgt', 'tg2');
SELECT is(pg_temp.claim('tg-1', 't1', 'tgt', 'w'), pg_temp.ids('tg1'), 'tg1 is in flight');
INSERT INTO snaps SELECT 'bad', pg_temp.snap();

CREATE TEMP TABLE bad (n serial, call text, code char(5), message text);
INSERT INTO bad (call, code, message) VALUES
    -- queue_create(tenant, queue, options)
    ($$forgeyard.queue_create(NULL, 'new')$$,                               '22004', 'tenant must not be NULL'),
    ($$forgeyard.queue_create('', 'new')$$,                                 '22023', 'tenant must not be empty'),
    ($$forgeyard.queue_create(repeat('t', 129), 'new')$$,                   '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.queue_create('t1', NULL)$$,                                '22004', 'queue must not be NULL'),
    ($$forgeyard.queue_create('t1', '')$$,                                  '22023', 'queue must not be empty'),
    ($$forgeyard.queue_create('t1', repeat('q', 129))$$,                    '22001', 'queue is longer than 128 bytes'),
    ($$forgeyard.queue_create('t1', repeat('é', 65))$$,                     '22001', 'queue is longer than 128 bytes'),
    -- queue_alter(tenant, queue, options)
    ($$forgeyard.queue_alter(NULL, 'tgt', '{}')$$,                          '22004', 'tenant must not be NULL'),
    ($$forgeyard.queue_alter('t1', NULL, '{}')$$,                           '22004', 'queue must not be NULL'),
    ($$forgeyard.queue_alter('t1', '', '{}')$$,                             '22023', 'queue must not be empty'),
    ($$forgeyard.queue_alter('t1', 'tgt', NULL)$$,                          '22004', 'options must not be NULL'),
    ($$forgeyard.queue_alter('t1', 'tgt', '[1]')$$,                         '22023', 'options must be a JSON object'),
    -- queue_drop(tenant, queue), queue_list(tenant)
    ($$forgeyard.queue_drop(NULL, 'tgt')$$,                                 '22004', 'tenant must not be NULL'),
    ($$forgeyard.queue_drop('', 'tgt')$$,                                   '22023', 'tenant must not be empty'),
    ($$forgeyard.queue_drop('t1', NULL)$$,                                  '22004', 'queue must not be NULL'),
    ($$forgeyard.queue_drop('t1', repeat('q', 129))$$,                      '22001', 'queue is longer than 128 bytes'),
    ($$forgeyard.queue_list(NULL)$$,                                        '22004', 'tenant must not be NULL'),
    ($$forgeyard.queue_list('')$$,                                          '22023', 'tenant must not be empty'),
    ($$forgeyard.queue_list(repeat('t', 129))$$,                            '22001', 'tenant is longer than 128 bytes'),
    -- enqueue(tenant, queue, payload, event_id, partition_key, priority, delay)
    ($$forgeyard.enqueue(NULL, 'tgt', 'x')$$,                               '22004', 'tenant must not be NULL'),
    ($$forgeyard.enqueue('', 'tgt', 'x')$$,                                 '22023', 'tenant must not be empty'),
    ($$forgeyard.enqueue(repeat('t', 129), 'tgt', 'x')$$,                   '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.enqueue('t1', NULL, 'x')$$,                                '22004', 'queue must not be NULL'),
    ($$forgeyard.enqueue('t1', '', 'x')$$,                                  '22023', 'queue must not be empty'),
    ($$forgeyard.enqueue('t1', repeat('q', 129), 'x')$$,                    '22001', 'queue is longer than 128 bytes'),
    ($$forgeyard.enqueue('t1', 'tgt', NULL)$$,                              '22004', 'payload must not be NULL'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, '')$$,                     '22023', 'partition_key must not be empty'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, repeat('k', 513))$$,       '22001', 'partition_key is longer than 512 bytes'),
    ($$forgeyard.enqueue('t1', 'ptgt', 'x')$$,                              '22023', 'partition_key is required: queue "ptgt" is partition-ordered'),
    ($$forgeyard.enqueue('t1', 'ptgt', 'x', NULL, '')$$,                    '22023', 'partition_key must not be empty'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, NULL)$$,             '22004', 'priority must not be NULL'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, '')$$,               '22023', 'priority must not be empty'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'urgent')$$,         '22023', 'priority must be one of emergency, security_control, realtime, interactive, background, bulk'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'Emergency')$$,      '22023', 'priority must be one of emergency, security_control, realtime, interactive, background, bulk'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'bulk ')$$,          '22023', 'priority must be one of emergency, security_control, realtime, interactive, background, bulk'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'interactive', NULL)$$,        '22004', 'delay must not be NULL'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'interactive', '-1 second')$$, '22023', 'delay must be positive'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'interactive', '1 mon')$$,     '22023', 'delay must not have a month or year component'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'interactive', '1 year')$$,    '22023', 'delay must not have a month or year component'),
    ($$forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'interactive', '30 days 1 second')$$, '22023', 'delay is too long'),
    -- enqueue_batch(tenant, queue, payloads, event_ids, partition_keys, priority, delay)
    ($$forgeyard.enqueue_batch(NULL, 'tgt', '{x}')$$,                       '22004', 'tenant must not be NULL'),
    ($$forgeyard.enqueue_batch('t1', NULL, '{x}')$$,                        '22004', 'queue must not be NULL'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', NULL)$$,                        '22004', 'payloads must not be NULL'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', ARRAY['x', NULL]::bytea[])$$,   '22004', 'payloads must not contain NULL'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x,y}', '{00000000-0000-0000-0000-000000000001}')$$,
                                                                            '22023', 'event_ids and partition_keys must match payloads in length'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x,y}', NULL, '{a,b,c}')$$,    '22023', 'event_ids and partition_keys must match payloads in length'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, '{""}')$$,          '22023', 'partition_key must not be empty'),
    ($$forgeyard.enqueue_batch('t1', 'ptgt', '{x,y}', NULL, ARRAY['a', NULL])$$, '22023', 'partition_key is required: queue "ptgt" is partition-ordered'),
    ($$forgeyard.enqueue_batch('t1', 'ptgt', '{x}')$$,                      '22023', 'partition_key is required: queue "ptgt" is partition-ordered'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, NULL, NULL)$$,     '22004', 'priority must not be NULL'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, NULL, 'low')$$,    '22023', 'priority must be one of emergency, security_control, realtime, interactive, background, bulk'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, NULL, 'bulk', NULL)$$,  '22004', 'delay must not be NULL'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, NULL, 'bulk', '-1 day')$$, '22023', 'delay must be positive'),
    ($$forgeyard.enqueue_batch('t1', 'tgt', '{x}', NULL, NULL, 'bulk', '1 mon')$$,  '22023', 'delay must not have a month or year component'),
    -- claim(tenant, queue, consumer, max_messages, visibility)
    ($$forgeyard.claim(NULL, 'tgt', 'w')$$,                                 '22004', 'tenant must not be NULL'),
    ($$forgeyard.claim('t1', NULL, 'w')$$,                                  '22004', 'queue must not be NULL'),
    ($$forgeyard.claim('t1', '', 'w')$$,                                    '22023', 'queue must not be empty'),
    ($$forgeyard.claim('t1', 'tgt', NULL)$$,                                '22004', 'consumer must not be NULL'),
    ($$forgeyard.claim('t1', 'tgt', '')$$,                                  '22023', 'consumer must not be empty'),
    ($$forgeyard.claim('t1', 'tgt', repeat('c', 257))$$,                    '22001', 'consumer is longer than 256 bytes'),
    ($$forgeyard.claim('t1', 'tgt', 'w', NULL)$$,                           '22004', 'max_messages must not be NULL'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 0)$$,                              '22023', 'max_messages must be between 1 and 1000'),
    ($$forgeyard.claim('t1', 'tgt', 'w', -1)$$,                             '22023', 'max_messages must be between 1 and 1000'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 1001)$$,                           '22023', 'max_messages must be between 1 and 1000'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 1, '0')$$,                         '22023', 'visibility must be positive'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 1, '-30 seconds')$$,               '22023', 'visibility must be positive'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 1, '1 mon')$$,                     '22023', 'visibility must not have a month or year component'),
    ($$forgeyard.claim('t1', 'tgt', 'w', 1, '31 days')$$,                   '22023', 'visibility is too long'),
    -- ack(tenant, queue, msg_id, claim_token)
    ($$forgeyard.ack(NULL, 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'))$$, '22004', 'tenant must not be NULL'),
    ($$forgeyard.ack('t1', NULL, pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'))$$,  '22004', 'queue must not be NULL'),
    ($$forgeyard.ack('t1', 'tgt', NULL, pg_temp.tok('tg-1', 'tg1'))$$,              '22004', 'msg_id must not be NULL'),
    ($$forgeyard.ack('t1', 'tgt', pg_temp.id('tg1'), NULL)$$,                       '22004', 'claim_token must not be NULL'),
    -- nack(tenant, queue, msg_id, claim_token, error, permanent)
    ($$forgeyard.nack(NULL, 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), 'e')$$, '22004', 'tenant must not be NULL'),
    ($$forgeyard.nack('t1', '', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), 'e')$$,    '22023', 'queue must not be empty'),
    ($$forgeyard.nack('t1', 'tgt', NULL, pg_temp.tok('tg-1', 'tg1'), 'e')$$,              '22004', 'msg_id must not be NULL'),
    ($$forgeyard.nack('t1', 'tgt', pg_temp.id('tg1'), NULL, 'e')$$,                       '22004', 'claim_token must not be NULL'),
    ($$forgeyard.nack('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), repeat('e', 4097))$$, '22001', 'error is longer than 4096 bytes'),
    ($$forgeyard.nack('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), repeat('é', 2049), true)$$, '22001', 'error is longer than 4096 bytes'),
    -- extend(tenant, queue, msg_id, claim_token, visibility)
    ($$forgeyard.extend(NULL, 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '1 minute')$$, '22004', 'tenant must not be NULL'),
    ($$forgeyard.extend('t1', NULL, pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '1 minute')$$,  '22004', 'queue must not be NULL'),
    ($$forgeyard.extend('t1', 'tgt', NULL, pg_temp.tok('tg-1', 'tg1'), '1 minute')$$,              '22004', 'msg_id must not be NULL'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), NULL, '1 minute')$$,                       '22004', 'claim_token must not be NULL'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), NULL)$$,       '22004', 'visibility must not be NULL'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '0')$$,        '22023', 'visibility must be positive'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '-1 minute')$$, '22023', 'visibility must be positive'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '1 mon')$$,    '22023', 'visibility must not have a month or year component'),
    ($$forgeyard.extend('t1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'), '31 days')$$,  '22023', 'visibility is too long'),
    -- ack_batch(tenant, queue, msg_ids, claim_tokens)
    ($$forgeyard.ack_batch(NULL, 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')])$$, '22004', 'tenant must not be NULL'),
    ($$forgeyard.ack_batch('t1', 'tgt', NULL, ARRAY[pg_temp.tok('tg-1', 'tg1')])$$,        '22004', 'msg_ids must not be NULL'),
    ($$forgeyard.ack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], NULL)$$,                 '22004', 'claim_tokens must not be NULL'),
    ($$forgeyard.ack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1'), pg_temp.id('tg2')], ARRAY[pg_temp.tok('tg-1', 'tg1')])$$,
                                                                                           '22023', 'msg_ids and claim_tokens must have the same length'),
    ($$forgeyard.ack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1'), NULL], ARRAY[pg_temp.tok('tg-1', 'tg1'), 1])$$,
                                                                                           '22004', 'msg_ids and claim_tokens must not contain NULL'),
    ($$forgeyard.ack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[NULL::bigint])$$,  '22004', 'msg_ids and claim_tokens must not contain NULL'),
    -- nack_batch(tenant, queue, msg_ids, claim_tokens, error, permanent)
    ($$forgeyard.nack_batch('t1', NULL, ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], 'e')$$, '22004', 'queue must not be NULL'),
    ($$forgeyard.nack_batch('t1', 'tgt', NULL, ARRAY[pg_temp.tok('tg-1', 'tg1')], 'e')$$,  '22004', 'msg_ids must not be NULL'),
    ($$forgeyard.nack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], NULL, 'e')$$,           '22004', 'claim_tokens must not be NULL'),
    ($$forgeyard.nack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], '{}', 'e')$$,           '22023', 'msg_ids and claim_tokens must have the same length'),
    ($$forgeyard.nack_batch('t1', 'tgt', ARRAY[NULL::bigint], ARRAY[pg_temp.tok('tg-1', 'tg1')], 'e')$$, '22004', 'msg_ids and claim_tokens must not contain NULL'),
    ($$forgeyard.nack_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], repeat('e', 4097))$$,
                                                                                           '22001', 'error is longer than 4096 bytes'),
    -- extend_batch(tenant, queue, msg_ids, claim_tokens, visibility)
    ($$forgeyard.extend_batch('t1', 'tgt', NULL, ARRAY[pg_temp.tok('tg-1', 'tg1')], '1 minute')$$, '22004', 'msg_ids must not be NULL'),
    ($$forgeyard.extend_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], NULL, '1 minute')$$,  '22004', 'claim_tokens must not be NULL'),
    ($$forgeyard.extend_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], '{1,2}', '1 minute')$$, '22023', 'msg_ids and claim_tokens must have the same length'),
    ($$forgeyard.extend_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], NULL)$$, '22004', 'visibility must not be NULL'),
    ($$forgeyard.extend_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], '0')$$,  '22023', 'visibility must be positive'),
    ($$forgeyard.extend_batch('t1', 'tgt', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], '2 mons')$$, '22023', 'visibility must not have a month or year component'),
    -- ack_and_claim(tenant, queue, consumer, msg_ids, claim_tokens, max_messages, visibility)
    ($$forgeyard.ack_and_claim(NULL, 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')])$$, '22004', 'tenant must not be NULL'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', NULL, ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')])$$, '22004', 'consumer must not be NULL'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', '', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')])$$,   '22023', 'consumer must not be empty'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', NULL, ARRAY[pg_temp.tok('tg-1', 'tg1')])$$,                     '22004', 'msg_ids must not be NULL'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], NULL)$$,                              '22004', 'claim_tokens must not be NULL'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], '{}')$$,                              '22023', 'msg_ids and claim_tokens must have the same length'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], NULL)$$, '22004', 'max_messages must not be NULL'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], 0)$$,    '22023', 'max_messages must be between 1 and 1000'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], 1001)$$, '22023', 'max_messages must be between 1 and 1000'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], 1, '0')$$, '22023', 'visibility must be positive'),
    ($$forgeyard.ack_and_claim('t1', 'tgt', 'w', ARRAY[pg_temp.id('tg1')], ARRAY[pg_temp.tok('tg-1', 'tg1')], 1, '1 mon')$$, '22023', 'visibility must not have a month or year component');

SELECT throws_ok('SELECT * FROM ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad ORDER BY n;
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'bad'), 'after every rejected call the queue tables are exactly as before');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', repeat('é', 65), 'x')$$),
          ARRAY['22001', 'queue is longer than 128 bytes', 'length is 130 bytes'], '22001 gives the length in bytes');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.claim('t1', 'tgt', 'w', 1, '30 days 1 second')$$),
          ARRAY['22023', 'visibility is too long', 'the maximum is 2592000 seconds'], 'visibility is at most 30 days');
SELECT is(pg_temp.err($$SELECT forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'urgent')$$),
          ARRAY['22023', 'priority must be one of emergency, security_control, realtime, interactive, background, bulk', 'got "urgent"'],
          'a bad class is named in the DETAIL');

-- The limits themselves are accepted.
SELECT lives_ok($$SELECT forgeyard.queue_create(repeat('t', 128), repeat('q', 128))$$, 'tenant and queue of exactly 128 bytes');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'tgt', 'x', NULL, repeat('k', 512), 'bulk', '30 days')$$,
                'a partition_key of 512 bytes and a delay of exactly 30 days');
SELECT lives_ok($$SELECT forgeyard.enqueue('t1', 'tgt', 'x', NULL, NULL, 'bulk', '0')$$, 'a delay of zero (the default)');
SELECT is(array_length(pg_temp.claim('tg-2', 't1', 'tgt', repeat('c', 256), 1000, '30 days'), 1), 2,
          'a consumer of 256 bytes, max_messages 1000 and visibility 30 days: the two ready messages');
SELECT lives_ok(format('SELECT forgeyard.nack(%L, %L, %s, %s, %L)', 't1', 'tgt', pg_temp.id('tg1'), pg_temp.tok('tg-1', 'tg1'),
                       repeat('e', 4096)), 'an error of exactly 4096 bytes');

SELECT * FROM finish();
ROLLBACK;
