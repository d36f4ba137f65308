-- Idempotency keys (docs/sql-api.md#idempotency-keys): begin / replay / mismatch / in progress / takeover after the lock
-- expired, checkpoints that extend the lock (and the retention with it), stale attempts, complete,
-- abandon, retention and purge, status, tenants and scopes, every bad input of every function, and
-- tenant binding. Attempt numbers come from one sequence for all keys (strictly increasing, never
-- reused), so the tests capture them and compare instead of expecting fixed numbers.
-- Time is moved with forgeyard.now_override; nothing sleeps. The extension's own machinery (the
-- sequence registered for pg_dump, extconfig) is checked by regress/cpp_idempotency.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(250);

SET TIME ZONE 'UTC';

\ir lib/err.sql
-- The stored key.
CREATE FUNCTION pg_temp.row_of(t text, s text, k text)
    RETURNS TABLE (status text, attempt bigint, recovery_point text, response bytea, request_digest bytea,
                   locked_until timestamptz, created_at timestamptz, completed_at timestamptz, expires_at timestamptz)
    LANGUAGE sql AS $$
    SELECT i.status, i.attempt, i.recovery_point, i.response, i.request_digest,
           i.locked_until, i.created_at, i.completed_at, i.expires_at
      FROM forgeyard.idempotency_keys i WHERE i.tenant_id = t AND i.scope = s AND i.key = k
$$;
-- Every stored key, for "nothing changed" checks.
CREATE FUNCTION pg_temp.all_keys() RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(to_jsonb(i) ORDER BY i.tenant_id, i.scope, i.key), '[]') FROM forgeyard.idempotency_keys i
$$;
-- The idem_begin answers that later assertions need, by label, in call order.
CREATE TEMP TABLE b (n serial, k text PRIMARY KEY, status text, recovery_point text, response bytea, attempt bigint);
-- A procedure, so that CALL prints nothing into the TAP stream.
CREATE PROCEDURE pg_temp.beg(label text, t text, s text, ky text, d bytea,
                             lock_ttl interval DEFAULT '5 minutes', retain interval DEFAULT '24 hours')
    LANGUAGE sql AS $$
    INSERT INTO b (k, status, recovery_point, response, attempt)
    SELECT label, r.status, r.recovery_point, r.response, r.attempt FROM forgeyard.idem_begin(t, s, ky, d, lock_ttl, retain) r
$$;
-- The attempt a labelled begin returned.
CREATE FUNCTION pg_temp.att(label text) RETURNS bigint LANGUAGE sql AS $$ SELECT attempt FROM b WHERE k = label $$;
-- The FY001 message for a stale attempt.
CREATE FUNCTION pg_temp.stale(operation text, mine bigint, owner bigint) RETURNS text LANGUAGE sql
    AS $$ SELECT format('%s by attempt %s refused: attempt %s owns the key now', operation, mine, owner) $$;

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_result('forgeyard.idem_begin(text, text, text, bytea, interval, interval)'::regprocedure),
          'TABLE(status text, recovery_point text, response bytea, attempt bigint)',
          'idem_begin returns (status, recovery_point, response, attempt)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.idem_begin(text, text, text, bytea, interval, interval)'::regprocedure),
          $$tenant text, scope text, key text, request_digest bytea, lock_ttl interval DEFAULT '00:05:00'::interval, retain interval DEFAULT '24:00:00'::interval$$,
          'idem_begin: lock_ttl defaults to 5 minutes, retain to 24 hours');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.idem_status(text, text, text)'::regprocedure),
          'TABLE(status text, attempt bigint, recovery_point text, locked_until timestamp with time zone, expires_at timestamp with time zone)',
          'idem_status returns (status, attempt, recovery_point, locked_until, expires_at)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.idem_purge(integer, text)'::regprocedure),
          'max_keys integer DEFAULT 1000, tenant text DEFAULT NULL::text', 'idem_purge(max_keys 1000, tenant NULL = all) by default');

-------------------------------------------------------------------------------------------------
-- A new key: started, with an attempt number
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT is_empty($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$, 'idem_status of an unknown key: no row');
CALL pg_temp.beg('k1', 't1', 'run.create:project/42', 'k1', '\x01');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > 0 FROM b WHERE k = 'k1'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'begin of a new key: started, no recovery point, no response, an attempt number > 0');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1'), NULL::text, NULL::bytea, '\x01'::bytea,
                           '2030-01-01 00:05:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz, NULL::timestamptz,
                           '2030-01-02 00:00:00+00'::timestamptz$$,
                  'stored: in_progress, the attempt begin returned, the digest, locked for 5 minutes, retained 24 hours');
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1'), NULL::text, '2030-01-01 00:05:00+00'::timestamptz,
                           '2030-01-01 00:00:00+00'::timestamptz + '24 hours'::interval$$,
                  'idem_status: in_progress with its attempt, lock and expiry');

-------------------------------------------------------------------------------------------------
-- Held by a live lock: FY010; another request under the same key: FY011
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:04:59.999999+00';
CREATE TEMP TABLE k1_before AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010',
                 'idempotency key "k1" is in progress elsewhere', 'begin while the lock is live (1 microsecond left): FY010');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$),
          ARRAY['FY010', 'idempotency key "k1" is in progress elsewhere', format('attempt %s holds it; try again later', pg_temp.att('k1'))],
          'FY010: the DETAIL names the attempt that holds it');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x02')$$, 'FY011',
                 'idempotency key "k1" was used with a different request', 'the same key with another digest: FY011');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x0100')$$),
          ARRAY['FY011', 'idempotency key "k1" was used with a different request',
                'the request digest differs from the one stored with the key'],
          'FY011 for a digest that only extends the stored one, with its DETAIL');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$, 'SELECT * FROM k1_before',
                  'FY010 and FY011 changed nothing');

-------------------------------------------------------------------------------------------------
-- checkpoint saves the recovery point and extends the lock from the checkpoint time
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:04:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-1', pg_temp.att('k1'))$$,
                'checkpoint by the attempt begin returned');
SELECT results_eq($$SELECT status, attempt, recovery_point, locked_until, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1'), 'step-1'::text, '2030-01-01 00:09:00+00'::timestamptz,
                           '2030-01-02 00:00:00+00'::timestamptz$$,
                  'checkpoint stores the recovery point; the lock now lasts 5 minutes from the checkpoint; retention unchanged (it outlasts the lock)');
SET forgeyard.now_override = '2030-01-01 00:08:59.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010', NULL,
                 'past the first lock but inside the extended one: FY010');

-------------------------------------------------------------------------------------------------
-- The lock expired: started again with the last recovery point and a new, greater attempt
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:09:00+00';
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1'), 'step-1'::text, '2030-01-01 00:09:00+00'::timestamptz,
                           '2030-01-02 00:00:00+00'::timestamptz$$,
                  'idem_status of a key whose lock just expired: still in_progress');
CALL pg_temp.beg('k1b', 't1', 'run.create:project/42', 'k1', '\x01');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('k1') FROM b WHERE k = 'k1b'$$,
                  $$VALUES ('started'::text, 'step-1'::text, NULL::bytea, true)$$,
                  'begin at exactly the end of the lock: started, with the last recovery point, a new, greater attempt');
SELECT results_eq($$SELECT status, attempt, recovery_point, locked_until, created_at, expires_at
                      FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1b'), 'step-1'::text, '2030-01-01 00:14:00+00'::timestamptz,
                           '2030-01-01 00:00:00+00'::timestamptz, '2030-01-02 00:09:00+00'::timestamptz$$,
                  'takeover: the new attempt is locked for 5 minutes from now; the recovery point and created_at are kept');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010',
                 'idempotency key "k1" is in progress elsewhere', 'the new attempt now holds a live lock: FY010');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x02')$$, 'FY011', NULL,
                 'and another digest is still FY011');

-------------------------------------------------------------------------------------------------
-- A stale attempt cannot checkpoint, complete or abandon
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:10:00+00';
CREATE TEMP TABLE k1_taken_over AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', pg_temp.att('k1'))$$, 'FY001',
                 pg_temp.stale('checkpoint', pg_temp.att('k1'), pg_temp.att('k1b')), 'checkpoint by the old attempt: FY001');
SELECT is(pg_temp.err($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', pg_temp.att('k1'))$$),
          ARRAY['FY001', pg_temp.stale('checkpoint', pg_temp.att('k1'), pg_temp.att('k1b')),
                'the lock expired and another caller took the work over'],
          'FY001: the DETAIL says the work was taken over');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x0bad', pg_temp.att('k1'))$$, 'FY001',
                 pg_temp.stale('complete', pg_temp.att('k1'), pg_temp.att('k1b')), 'complete by the old attempt: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k1', pg_temp.att('k1'))$$, 'FY001',
                 pg_temp.stale('abandon', pg_temp.att('k1'), pg_temp.att('k1b')), 'abandon by the old attempt: FY001');
SELECT throws_ok(format('SELECT forgeyard.idem_complete(%L, %L, %L, %L, %s)', 't1', 'run.create:project/42', 'k1', '\x0bad',
                        (SELECT last_value + 1 FROM forgeyard.idempotency_attempts)), 'FY001',
                 pg_temp.stale('complete', (SELECT last_value + 1 FROM forgeyard.idempotency_attempts), pg_temp.att('k1b')),
                 'complete by an attempt not handed out yet: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', 0)$$, 'FY001', NULL,
                 'checkpoint by attempt 0: FY001');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$, 'SELECT * FROM k1_taken_over',
                  'the stale calls changed nothing');

SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-2', pg_temp.att('k1b'))$$,
                'checkpoint by the current attempt');
SET forgeyard.now_override = '2030-01-01 00:11:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-3')$$,
                'checkpoint without an attempt (NULL: not checked)');
SELECT results_eq($$SELECT attempt, recovery_point, locked_until FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT pg_temp.att('k1b'), 'step-3'::text, '2030-01-01 00:16:00+00'::timestamptz$$,
                  'each checkpoint replaces the recovery point and moves the lock to its own time + 5 minutes');

-------------------------------------------------------------------------------------------------
-- complete, then replay
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:12:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\xdeadbeef', pg_temp.att('k1b'))$$,
                'complete by the current attempt');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'completed'::text, pg_temp.att('k1b'), 'step-3'::text, '\xdeadbeef'::bytea, '\x01'::bytea,
                           '2030-01-01 00:12:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz,
                           '2030-01-01 00:12:00+00'::timestamptz, '2030-01-02 00:12:00+00'::timestamptz$$,
                  'stored: completed with the response and the completing attempt; retained 24 hours from completion');
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'completed'::text, pg_temp.att('k1b'), 'step-3'::text, '2030-01-01 00:12:00+00'::timestamptz,
                           '2030-01-02 00:12:00+00'::timestamptz$$,
                  'idem_status: completed');
SET forgeyard.now_override = '2030-01-01 00:13:00+00';
CREATE TEMP TABLE k1_done AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$SELECT 'replay'::text, 'step-3'::text, '\xdeadbeef'::bytea, pg_temp.att('k1b')$$,
                  'begin of a completed key: replay with the recovery point, the stored response and the attempt that completed it');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01', '1 minute', '1 hour')$$,
                  $$SELECT 'replay'::text, 'step-3'::text, '\xdeadbeef'::bytea, pg_temp.att('k1b')$$,
                  'begin again (other lock_ttl and retain): the same replay');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x02')$$, 'FY011',
                 'idempotency key "k1" was used with a different request', 'a completed key with another digest: FY011');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x02', pg_temp.att('k1b'))$$, 'FY001',
                 'complete refused: the key is already completed', 'complete of a completed key: FY001');
SELECT is(pg_temp.err($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x02')$$),
          ARRAY['FY001', 'complete refused: the key is already completed', 'begin again to get the stored response'],
          'complete of a completed key without an attempt: FY001, the DETAIL says to begin again');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'late', pg_temp.att('k1b'))$$, 'FY001',
                 'checkpoint refused: the key is already completed', 'checkpoint of a completed key: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'late')$$, 'FY001', NULL,
                 'checkpoint of a completed key without an attempt: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k1', pg_temp.att('k1b'))$$, 'FY001',
                 'abandon refused: the key is already completed', 'abandon of a completed key: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k1')$$, 'FY001', NULL,
                 'abandon of a completed key without an attempt: FY001');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$, 'SELECT * FROM k1_done',
                  'replays and the refused calls changed nothing');

-------------------------------------------------------------------------------------------------
-- Retention: a completed key replays until completed_at + retain, then counts as unused
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-02 00:11:59.999999+00';
SELECT results_eq($$SELECT status, response, attempt FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$SELECT 'replay'::text, '\xdeadbeef'::bytea, pg_temp.att('k1b')$$,
                  '1 microsecond before completed_at + 24 hours: replay');
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')), 'completed',
          'idem_status 1 microsecond before the end of retention: completed');
SET forgeyard.now_override = '2030-01-02 00:12:00+00';
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')), 'expired',
          'idem_status at exactly completed_at + 24 hours: expired');
CALL pg_temp.beg('k1c', 't1', 'run.create:project/42', 'k1', '\x01');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('k1b') FROM b WHERE k = 'k1c'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'begin after the retention: started afresh with a new, greater attempt, no recovery point, no response');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k1c'), NULL::text, NULL::bytea, '\x01'::bytea,
                           '2030-01-02 00:17:00+00'::timestamptz, '2030-01-02 00:12:00+00'::timestamptz, NULL::timestamptz,
                           '2030-01-03 00:12:00+00'::timestamptz$$,
                  'the reused key is stored like a new one');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x0bad', pg_temp.att('k1'))$$, 'FY001',
                 pg_temp.stale('complete', pg_temp.att('k1'), pg_temp.att('k1c')),
                 'the first attempt cannot complete the key begun afresh: attempt numbers are never reused');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', pg_temp.att('k1b'))$$, 'FY001',
                 pg_temp.stale('checkpoint', pg_temp.att('k1b'), pg_temp.att('k1c')),
                 'nor can the attempt that completed it before its retention ended');

-- A custom retention; after it even another digest starts afresh.
SET forgeyard.now_override = '2030-01-10 00:00:00+00';
CALL pg_temp.beg('k2', 't1', 'run.create:project/42', 'k2', '\x0a', '1 minute', '1 hour');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('k1c') FROM b WHERE k = 'k2'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'begin k2 with lock_ttl 1 minute, retain 1 hour: an attempt greater than every earlier one, of any key');
SELECT results_eq($$SELECT locked_until, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')$$,
                  $$VALUES ('2030-01-10 00:01:00+00'::timestamptz, '2030-01-10 01:00:00+00'::timestamptz)$$,
                  'the lock and the retention follow the arguments');
SET forgeyard.now_override = '2030-01-10 00:00:30+00';
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k2', 'ok', pg_temp.att('k2'))$$, 'complete k2');
SELECT results_eq($$SELECT completed_at, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')$$,
                  $$VALUES ('2030-01-10 00:00:30+00'::timestamptz, '2030-01-10 01:00:30+00'::timestamptz)$$,
                  'completed: retained 1 hour from completion');
SET forgeyard.now_override = '2030-01-10 01:00:29.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k2', '\x0b')$$, 'FY011', NULL,
                 'inside the retention another digest is FY011');
SET forgeyard.now_override = '2030-01-10 01:00:30+00';
CALL pg_temp.beg('k2b', 't1', 'run.create:project/42', 'k2', '\x0b', '1 minute', '1 hour');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('k2') FROM b WHERE k = 'k2b'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'after the retention another digest starts afresh, with a new, greater attempt');
SELECT is((SELECT request_digest FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')), '\x0b'::bytea,
          'and the new digest is stored');

-- An in-progress key past its retention, and past its lock, counts as unused too.
SET forgeyard.now_override = '2030-01-10 02:00:30+00';
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k2')), 'expired',
          'idem_status of an in-progress key past its retention and its lock: expired');
CALL pg_temp.beg('k2c', 't1', 'run.create:project/42', 'k2', '\x0c');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('k2b') FROM b WHERE k = 'k2c'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'begin of an in-progress key past its retention and its lock: started afresh, a new, greater attempt');
-- The attempt that held it when its retention ended is stale now.
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k2', 'late', pg_temp.att('k2b'))$$, 'FY001',
                 pg_temp.stale('checkpoint', pg_temp.att('k2b'), pg_temp.att('k2c')),
                 'the attempt whose retention ended cannot checkpoint the restarted key: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k2', 'late', pg_temp.att('k2b'))$$, 'FY001',
                 pg_temp.stale('complete', pg_temp.att('k2b'), pg_temp.att('k2c')), '... nor complete it: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k2', pg_temp.att('k2b'))$$, 'FY001',
                 pg_temp.stale('abandon', pg_temp.att('k2b'), pg_temp.att('k2c')), '... nor abandon it: FY001');
SELECT results_eq($$SELECT status, attempt, request_digest FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('k2c'), '\x0c'::bytea$$, 'the restarted key is untouched');

-------------------------------------------------------------------------------------------------
-- abandon: the key is given up, the next begin starts afresh with a new attempt; unknown keys: P0002
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
CALL pg_temp.beg('a1', 't1', 'ab', 'a1', '\x01');
SELECT results_eq($$SELECT status, attempt > pg_temp.att('k2c') FROM b WHERE k = 'a1'$$, $$VALUES ('started'::text, true)$$,
                  'begin a1: an attempt greater than the last one, handed out to another key');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'ab', 'a1', 'half', pg_temp.att('a1'))$$, 'checkpoint a1');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a1', pg_temp.att('a1'))$$, 'abandon a1 by its attempt');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('t1', 'ab', 'a1')$$, 'abandon deletes the key');
SELECT is_empty($$SELECT * FROM forgeyard.idem_status('t1', 'ab', 'a1')$$, 'idem_status of an abandoned key: no row');
CALL pg_temp.beg('a1b', 't1', 'ab', 'a1', '\x02');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('a1') FROM b WHERE k = 'a1b'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'begin after abandon: started, a new, greater attempt, no recovery point (any digest)');
-- The abandoned attempt is stale: it cannot act for the key begun again.
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'ab', 'a1', 'late', pg_temp.att('a1'))$$, 'FY001',
                 pg_temp.stale('checkpoint', pg_temp.att('a1'), pg_temp.att('a1b')),
                 'the abandoned attempt cannot checkpoint the key begun again: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'ab', 'a1', 'late', pg_temp.att('a1'))$$, 'FY001',
                 pg_temp.stale('complete', pg_temp.att('a1'), pg_temp.att('a1b')), '... nor complete it: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a1', pg_temp.att('a1'))$$, 'FY001',
                 pg_temp.stale('abandon', pg_temp.att('a1'), pg_temp.att('a1b')), '... nor abandon it: FY001');
SELECT results_eq($$SELECT status, attempt, recovery_point, request_digest FROM pg_temp.row_of('t1', 'ab', 'a1')$$,
                  $$SELECT 'in_progress'::text, pg_temp.att('a1b'), NULL::text, '\x02'::bytea$$,
                  'the key begun again is untouched by the stale calls');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a1')$$, 'abandon without an attempt (NULL: not checked)');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('t1', 'ab', 'a1')$$, 'abandoned again');
-- a takeover, then the old attempt tries to abandon
CALL pg_temp.beg('a2', 't1', 'ab', 'a2', '\x01', '1 minute');
SELECT results_eq($$SELECT status FROM b WHERE k = 'a2'$$, $$VALUES ('started'::text)$$, 'begin a2');
SET forgeyard.now_override = '2030-02-01 00:01:00+00';
CALL pg_temp.beg('a2b', 't1', 'ab', 'a2', '\x01', '1 minute');
SELECT results_eq($$SELECT status, attempt > pg_temp.att('a2') FROM b WHERE k = 'a2b'$$, $$VALUES ('started'::text, true)$$,
                  'a2 taken over: a new, greater attempt');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a2', pg_temp.att('a2'))$$, 'FY001', NULL, 'the old attempt cannot abandon it');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a2', pg_temp.att('a2b'))$$, 'the current attempt can');
CALL pg_temp.beg('a2c', 't1', 'ab', 'a2', '\x01');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('a2b') FROM b WHERE k = 'a2c'$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, true)$$,
                  'and the next begin gets a new attempt again, greater than both before it');

CREATE TEMP TABLE keys_before_unknown AS SELECT pg_temp.all_keys() AS k;
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'ab', 'nope', 'x')$$, 'P0002',
                 'no idempotency key "nope" in scope "ab"', 'checkpoint of an unknown key: P0002');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'ab', 'nope', 'x', 1)$$, 'P0002',
                 'no idempotency key "nope" in scope "ab"', 'complete of an unknown key: P0002');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'nope')$$, 'P0002',
                 'no idempotency key "nope" in scope "ab"', 'abandon of an unknown key: P0002');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t2', 'ab', 'a2', 'x')$$, 'P0002', NULL,
                 'complete of another tenant''s key name: P0002 (keys are per tenant)');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'other-scope', 'a2')$$, 'P0002', NULL,
                 'abandon of the same key name in another scope: P0002 (keys are per scope)');
SELECT is(pg_temp.all_keys(), (SELECT k FROM keys_before_unknown), 'calls on unknown keys created and changed nothing');

-------------------------------------------------------------------------------------------------
-- Tenants and scopes are independent
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
CALL pg_temp.beg('same-t1-sA', 't1', 'sA', 'same', '\x01');
CALL pg_temp.beg('same-t1-sB', 't1', 'sB', 'same', '\x02');
CALL pg_temp.beg('same-t2-sA', 't2', 'sA', 'same', '\x03');
SELECT results_eq($$SELECT k, status FROM b WHERE k LIKE 'same-%' ORDER BY n$$,
                  $$VALUES ('same-t1-sA'::text, 'started'::text), ('same-t1-sB', 'started'), ('same-t2-sA', 'started')$$,
                  'the same key in (t1, sA), (t1, sB) and (t2, sA): three new keys, each with its own digest');
SELECT is((SELECT count(DISTINCT attempt) FROM b WHERE k LIKE 'same-%'), 3::bigint,
          '... and three different attempt numbers: keys do not share attempts');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'sA', 'same', 'r-t1-sA', pg_temp.att('same-t1-sA'))$$, 'complete (t1, sA)');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t2', 'sA', 'same', 'r-t1-sA', pg_temp.att('same-t1-sA'))$$, 'FY001',
                 pg_temp.stale('complete', pg_temp.att('same-t1-sA'), pg_temp.att('same-t2-sA')),
                 '(t1, sA)''s attempt cannot complete (t2, sA)');
SELECT results_eq($$SELECT status, response FROM forgeyard.idem_begin('t1', 'sA', 'same', '\x01')$$,
                  $$VALUES ('replay'::text, 'r-t1-sA'::bytea)$$, '(t1, sA) replays');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'sB', 'same', '\x02')$$, 'FY010', NULL,
                 '(t1, sB) is still in progress: completing (t1, sA) did not touch it');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'sA', 'same', '\x03')$$, 'FY010', NULL,
                 '(t2, sA) is still in progress');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'sA', 'same', '\x01')$$, 'FY011', NULL,
                 '(t2, sA) has its own digest: (t1, sA)''s digest is a mismatch there');
SELECT results_eq(
    $$SELECT v.n, s.status FROM (VALUES (1, 't1', 'sA'), (2, 't1', 'sB'), (3, 't2', 'sA')) v(n, t, sc),
             forgeyard.idem_status(v.t, v.sc, 'same') s ORDER BY v.n$$,
    $$VALUES (1, 'completed'::text), (2, 'in_progress'), (3, 'in_progress')$$, 'idem_status per tenant and scope');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'sB', 'same', pg_temp.att('same-t1-sB'))$$, 'abandon (t1, sB)');
SELECT results_eq($$SELECT tenant_id, scope, status FROM forgeyard.idempotency_keys WHERE key = 'same' ORDER BY 1, 2$$,
                  $$VALUES ('t1'::text, 'sA'::text, 'completed'::text), ('t2', 'sA', 'in_progress')$$,
                  'abandoning (t1, sB) left (t1, sA) and (t2, sA) alone');

-------------------------------------------------------------------------------------------------
-- A response may be NULL; lock_ttl and retain are per key
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-10 00:00:00+00';
CALL pg_temp.beg('null-response', 't1', 'misc', 'null-response', '\x01');
SELECT results_eq($$SELECT status FROM b WHERE k = 'null-response'$$, $$VALUES ('started'::text)$$, 'begin null-response');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'misc', 'null-response', NULL, pg_temp.att('null-response'))$$,
                'complete with a NULL response');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'misc', 'null-response', '\x01')$$,
                  $$SELECT 'replay'::text, NULL::text, NULL::bytea, pg_temp.att('null-response')$$, 'replay of a NULL response');

CALL pg_temp.beg('short-lock', 't1', 'misc', 'short-lock', '\x01', '30 seconds', '1 hour');
SELECT results_eq($$SELECT status FROM b WHERE k = 'short-lock'$$, $$VALUES ('started'::text)$$, 'begin with lock_ttl 30 seconds');
SET forgeyard.now_override = '2030-03-10 00:00:20+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'misc', 'short-lock', 'p1', pg_temp.att('short-lock'))$$,
                'checkpoint after 20 seconds');
SELECT is((SELECT locked_until FROM pg_temp.row_of('t1', 'misc', 'short-lock')), '2030-03-10 00:00:50+00'::timestamptz,
          'the checkpoint extends by the key''s own lock_ttl (30 seconds)');
SET forgeyard.now_override = '2030-03-10 00:00:49.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'misc', 'short-lock', '\x01', '30 seconds', '1 hour')$$, 'FY010', NULL,
                 'inside the extended lock: FY010');
SET forgeyard.now_override = '2030-03-10 00:00:50+00';
CALL pg_temp.beg('short-lock-2', 't1', 'misc', 'short-lock', '\x01', '2 minutes', '1 hour');
SELECT results_eq($$SELECT status, recovery_point, response, attempt > pg_temp.att('short-lock') FROM b WHERE k = 'short-lock-2'$$,
                  $$VALUES ('started'::text, 'p1'::text, NULL::bytea, true)$$,
                  'taken over when the extended lock ends, with a new, greater attempt');
SELECT is((SELECT locked_until FROM pg_temp.row_of('t1', 'misc', 'short-lock')), '2030-03-10 00:02:50+00'::timestamptz,
          'the new attempt is locked for its own lock_ttl (2 minutes)');

-------------------------------------------------------------------------------------------------
-- purge: expired keys only (completed, or in progress with the lock over too), oldest first,
-- bounded by max_keys, optionally one tenant
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-04-01 00:00:00+00';
CREATE TEMP TABLE expired_now AS
    SELECT tenant_id, scope, key FROM forgeyard.idempotency_keys
     WHERE expires_at <= '2030-04-01 00:00:00+00' AND (status = 'completed' OR locked_until <= '2030-04-01 00:00:00+00');
SELECT cmp_ok((SELECT count(*) FROM expired_now), '>=', 5::bigint, 'the keys of the earlier sections have expired by now');
SELECT is(forgeyard.idem_purge(), (SELECT count(*)::int FROM expired_now),
          'idem_purge() with the defaults removes every expired key of every tenant and returns the count');
SELECT is_empty('SELECT * FROM forgeyard.idempotency_keys', 'nothing is left');

DO $$ BEGIN
    PERFORM forgeyard.idem_begin('pa', 'p', 'p1', '\x01', '1 minute', '1 hour');            -- expires 01:00
    PERFORM forgeyard.idem_complete('pa', 'p', 'p1', 'r1');                                  -- completed: expires 01:00
    PERFORM forgeyard.idem_begin('pa', 'p', 'p2', '\x01', '1 minute', '2 hours');           -- expires 02:00
    PERFORM forgeyard.idem_complete('pa', 'p', 'p2', 'r2');
    PERFORM forgeyard.idem_begin('pb', 'p', 'p3', '\x01', '1 minute', '90 minutes');        -- expires 01:30
    PERFORM forgeyard.idem_complete('pb', 'p', 'p3', 'r3');
    PERFORM forgeyard.idem_begin('pa', 'p', 'p5', '\x01', '1 minute', '24 hours');          -- expires tomorrow
    PERFORM forgeyard.idem_complete('pa', 'p', 'p5', 'r5');
END $$;
SET forgeyard.now_override = '2030-04-01 00:00:30+00';
DO $$ BEGIN PERFORM forgeyard.idem_begin('pb', 'p', 'p4', '\x01', '1 minute', '1 hour'); END $$;  -- in progress, expires 01:00:30

SET forgeyard.now_override = '2030-04-01 00:59:59.999999+00';
SELECT is(forgeyard.idem_purge(10, 'pa'), 0, 'purge 1 microsecond before the first expiry: nothing');
SET forgeyard.now_override = '2030-04-01 01:00:00+00';
SELECT is(forgeyard.idem_purge(10, 'pb'), 0, 'purge of tenant pb at 01:00: none of pb''s keys has expired');
SELECT is(forgeyard.idem_purge(10, 'pa'), 1, 'purge of tenant pa at exactly 01:00: p1');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('pa', 'p', 'p1')$$, 'p1 is gone');
SET forgeyard.now_override = '2030-04-01 03:00:00+00';
SELECT results_eq($$SELECT tenant_id, key, status FROM forgeyard.idempotency_keys ORDER BY key$$,
                  $$VALUES ('pa'::text, 'p2'::text, 'completed'::text), ('pb', 'p3', 'completed'), ('pb', 'p4', 'in_progress'),
                           ('pa', 'p5', 'completed')$$, 'before the bounded purges: p2, p3, p4 expired, p5 live');
SELECT is(forgeyard.idem_purge(1), 1, 'purge(1) across tenants removes one key ...');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('pb', 'p', 'p4')$$,
                '... the oldest expiry: p4, an in-progress key past its retention and its lock');
SELECT is(forgeyard.idem_purge(10, 'pb'), 1, 'purge(10, pb) removes only pb''s expired key p3');
SELECT results_eq($$SELECT key FROM forgeyard.idempotency_keys ORDER BY key$$, $$VALUES ('p2'::text), ('p5')$$,
                  'pa''s p2 and live p5 are left');
SELECT is(forgeyard.idem_purge(1000, 'pa'), 1, 'purge(1000, pa): p2');
SELECT is(forgeyard.idem_purge(), 0, 'purge again: nothing expired is left');
SELECT results_eq($$SELECT status, response FROM forgeyard.idem_begin('pa', 'p', 'p5', '\x01')$$,
                  $$VALUES ('replay'::text, 'r5'::bytea)$$, 'the live key p5 still replays');

-------------------------------------------------------------------------------------------------
-- Retention never ends under a live lock: checkpoint extends expires_at to at least the new
-- locked_until; a key past expires_at whose lock is live is still in progress, and not purged
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-04-10 00:00:00+00';
CALL pg_temp.beg('lk1', 'lk', 'ret', 'r1', '\x01', '1 hour', '1 hour');      -- in progress: lock and retention end at 01:00
CALL pg_temp.beg('lk2', 'lk', 'ret', 'r2', '\x01', '1 minute', '1 hour');    -- in progress: lock 00:01, retention 01:00
CALL pg_temp.beg('lk3', 'lk', 'ret', 'r3', '\x01', '1 minute', '1 hour');    -- completed below: retention 01:00
DO $$ BEGIN PERFORM forgeyard.idem_complete('lk', 'ret', 'r3', 'done', pg_temp.att('lk3')); END $$;
SELECT results_eq($$SELECT locked_until, expires_at FROM pg_temp.row_of('lk', 'ret', 'r1')$$,
                  $$VALUES ('2030-04-10 01:00:00+00'::timestamptz, '2030-04-10 01:00:00+00'::timestamptz)$$,
                  'lock_ttl equal to retain: the lock and the retention end together');
SET forgeyard.now_override = '2030-04-10 00:30:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('lk', 'ret', 'r1', 'half', pg_temp.att('lk1'))$$, 'checkpoint r1 after 30 minutes');
SELECT results_eq($$SELECT recovery_point, locked_until, expires_at FROM pg_temp.row_of('lk', 'ret', 'r1')$$,
                  $$VALUES ('half'::text, '2030-04-10 01:30:00+00'::timestamptz, '2030-04-10 01:30:00+00'::timestamptz)$$,
                  'the checkpoint moves the lock to 01:30 and extends the retention to it');
SET forgeyard.now_override = '2030-04-10 01:00:00+00';
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('lk', 'ret', 'r1', '\x01', '1 hour', '1 hour')$$),
          ARRAY['FY010', 'idempotency key "r1" is in progress elsewhere', format('attempt %s holds it; try again later', pg_temp.att('lk1'))],
          'at the end of the first retention the checkpointed key is still in progress: FY010, not unused');
SELECT is(forgeyard.idem_purge(10, 'lk'), 2,
          'purge at 01:00: the completed r3 and the in-progress r2 (its lock and its retention are over)');
SELECT results_eq($$SELECT key FROM forgeyard.idempotency_keys WHERE tenant_id = 'lk'$$, $$VALUES ('r1'::text)$$,
                  'r1 is kept: the checkpoint extended its retention');

-- The API keeps expires_at >= locked_until; a row from before that rule may not. Made by hand:
-- retention ended at 00:45, the lock lasts until 01:30.
UPDATE forgeyard.idempotency_keys SET expires_at = '2030-04-10 00:45:00+00' WHERE tenant_id = 'lk' AND key = 'r1';
CREATE TEMP TABLE r1_before AS SELECT * FROM pg_temp.row_of('lk', 'ret', 'r1');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('lk', 'ret', 'r1', '\x01')$$),
          ARRAY['FY010', 'idempotency key "r1" is in progress elsewhere', format('attempt %s holds it; try again later', pg_temp.att('lk1'))],
          'past its retention but under a live lock: FY010, not started afresh');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('lk', 'ret', 'r1', '\x02')$$, 'FY011', NULL,
                 'past its retention but under a live lock: another digest is FY011, not a fresh start');
SELECT is((SELECT status FROM forgeyard.idem_status('lk', 'ret', 'r1')), 'in_progress',
          'idem_status past the retention under a live lock: in_progress (not expired)');
SELECT is(forgeyard.idem_purge(10, 'lk'), 0, 'purge does not delete an in-progress key whose lock is live, past its retention or not');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('lk', 'ret', 'r1')$$, 'SELECT * FROM r1_before', 'the key is untouched');
SET forgeyard.now_override = '2030-04-10 01:29:59.999999+00';
SELECT is(forgeyard.idem_purge(10, 'lk'), 0, 'purge 1 microsecond before the lock ends: nothing');
SET forgeyard.now_override = '2030-04-10 01:30:00+00';
SELECT is(forgeyard.idem_purge(10, 'lk'), 1, 'purge once the lock is over too: the key is deleted');
SELECT is_empty($$SELECT * FROM forgeyard.idempotency_keys WHERE tenant_id = 'lk'$$, 'nothing of tenant lk is left');

-------------------------------------------------------------------------------------------------
-- The longest accepted values
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-05-01 00:00:00+00';
SELECT results_eq(
    $$SELECT b.status, b.attempt > 0 FROM forgeyard.idem_begin(repeat('t', 128), repeat('s', 256), repeat('k', 256),
                                                               decode(repeat('ab', 64), 'hex'), '1 day', '90 days') b$$,
    $$VALUES ('started'::text, true)$$,
    'tenant of 128 bytes, scope of 256, key of 256, digest of 64 bytes, lock_ttl 1 day, retain 90 days: accepted');
CALL pg_temp.beg('limits', repeat('é', 64), 'limits', 'k', '\x01', '24 hours', '24 hours');
SELECT results_eq($$SELECT status FROM b WHERE k = 'limits'$$,
                  $$VALUES ('started'::text)$$, 'tenant of 64 two-byte characters, retain equal to lock_ttl: accepted');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint(repeat('é', 64), 'limits', 'k', repeat('r', 65536), pg_temp.att('limits'))$$,
                'a recovery point of 65536 bytes');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint(repeat('é', 64), 'limits', 'k', '', pg_temp.att('limits'))$$, 'an empty recovery point');
SELECT lives_ok($$SELECT forgeyard.idem_complete(repeat('é', 64), 'limits', 'k', decode(repeat('00', 1048576), 'hex'), pg_temp.att('limits'))$$,
                'a response of 1 MiB');
SELECT is((SELECT length(response) FROM pg_temp.row_of(repeat('é', 64), 'limits', 'k')), 1048576, 'stored whole');
SELECT results_eq($$SELECT locked_until, expires_at FROM pg_temp.row_of(repeat('t', 128), repeat('s', 256), repeat('k', 256))$$,
                  $$VALUES ('2030-05-02 00:00:00+00'::timestamptz, '2030-07-30 00:00:00+00'::timestamptz)$$,
                  'lock_ttl 1 day and retain 90 days: a day counts as 24 hours');

-------------------------------------------------------------------------------------------------
-- Bad input: every argument of every function; a specific SQLSTATE, a message naming the
-- argument, and nothing changes. Targets: 'live' (in progress, called with its own attempt),
-- 'done' (completed), and the unused key 'free', so that a call that wrongly went through would
-- change a row.
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-06-01 00:00:00+00';
CALL pg_temp.beg('live', 't1', 'bad', 'live', '\x01');
CALL pg_temp.beg('done', 't1', 'bad', 'done', '\x01');
DO $$ BEGIN PERFORM forgeyard.idem_complete('t1', 'bad', 'done', 'resp', pg_temp.att('done')); END $$;
CREATE TEMP TABLE keys_before AS SELECT pg_temp.all_keys() AS k;

CREATE TEMP TABLE bad (n serial, call text, code char(5), message text);
INSERT INTO bad (call, code, message) VALUES
    -- idem_begin(tenant, scope, key, request_digest, lock_ttl, retain) of the unused key 'free'
    ($$forgeyard.idem_begin(NULL, 'bad', 'free', '\x01')$$,                  '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_begin('', 'bad', 'free', '\x01')$$,                    '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_begin(repeat('t', 129), 'bad', 'free', '\x01')$$,      '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_begin(repeat('é', 65), 'bad', 'free', '\x01')$$,       '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_begin('t1', NULL, 'free', '\x01')$$,                   '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_begin('t1', '', 'free', '\x01')$$,                     '22023', 'scope must not be empty'),
    ($$forgeyard.idem_begin('t1', repeat('s', 257), 'free', '\x01')$$,       '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_begin('t1', 'bad', NULL, '\x01')$$,                    '22004', 'key must not be NULL'),
    ($$forgeyard.idem_begin('t1', 'bad', '', '\x01')$$,                      '22023', 'key must not be empty'),
    ($$forgeyard.idem_begin('t1', 'bad', repeat('k', 257), '\x01')$$,        '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_begin('t1', 'bad', repeat('é', 129), '\x01')$$,        '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', NULL)$$,                    '22004', 'request_digest must not be NULL'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '')$$,                      '22023', 'request_digest must not be empty'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', decode(repeat('ab', 65), 'hex'))$$, '22001', 'request_digest is longer than 64 bytes'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', NULL)$$,            '22004', 'lock_ttl must not be NULL'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '0')$$,             '22023', 'lock_ttl must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '-1 second')$$,     '22023', 'lock_ttl must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '-1 day 1 hour')$$, '22023', 'lock_ttl must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 mon')$$,         '22023', 'lock_ttl must not have a month or year component'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 year')$$,        '22023', 'lock_ttl must not have a month or year component'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 day 0.000001 seconds')$$, '22023', 'lock_ttl is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '25 hours')$$,      '22023', 'lock_ttl is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '2 days')$$,        '22023', 'lock_ttl is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', NULL)$$,         '22004', 'retain must not be NULL'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '0')$$,          '22023', 'retain must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '-1 hour')$$,    '22023', 'retain must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '1 mon')$$,      '22023', 'retain must not have a month or year component'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '90 days 0.000001 seconds')$$, '22023', 'retain is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '2161 hours')$$, '22023', 'retain is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '5 minutes', '91 days')$$,    '22023', 'retain is too long'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '10 minutes', '5 minutes')$$, '22023', 'retain must not be shorter than lock_ttl'),
    ($$forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 day', '23 hours 59 minutes')$$, '22023', 'retain must not be shorter than lock_ttl'),
    ($$forgeyard.idem_begin('t1', 'bad', 'live', '\x01', '0')$$,             '22023', 'lock_ttl must be positive'),
    ($$forgeyard.idem_begin('t1', 'bad', 'done', '\x01', '5 minutes', '2 minutes')$$, '22023', 'retain must not be shorter than lock_ttl'),
    -- idem_checkpoint(tenant, scope, key, recovery_point, attempt) of 'live' with its attempt
    ($$forgeyard.idem_checkpoint(NULL, 'bad', 'live', 'rp', pg_temp.att('live'))$$,            '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_checkpoint('', 'bad', 'live', 'rp', pg_temp.att('live'))$$,              '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_checkpoint(repeat('t', 129), 'bad', 'live', 'rp', pg_temp.att('live'))$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_checkpoint('t1', NULL, 'live', 'rp', pg_temp.att('live'))$$,             '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', '', 'live', 'rp', pg_temp.att('live'))$$,               '22023', 'scope must not be empty'),
    ($$forgeyard.idem_checkpoint('t1', repeat('s', 257), 'live', 'rp', pg_temp.att('live'))$$, '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', NULL, 'rp', pg_temp.att('live'))$$,              '22004', 'key must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', '', 'rp', pg_temp.att('live'))$$,                '22023', 'key must not be empty'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', repeat('k', 257), 'rp', pg_temp.att('live'))$$,  '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', NULL, pg_temp.att('live'))$$,            '22004', 'recovery_point must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', repeat('r', 65537), pg_temp.att('live'))$$, '22001', 'recovery_point is longer than 65536 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', repeat('é', 32769), pg_temp.att('live'))$$, '22001', 'recovery_point is longer than 65536 bytes'),
    -- idem_complete(tenant, scope, key, response, attempt) of 'live' with its attempt
    ($$forgeyard.idem_complete(NULL, 'bad', 'live', 'r', pg_temp.att('live'))$$,               '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_complete('', 'bad', 'live', 'r', pg_temp.att('live'))$$,                 '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_complete(repeat('t', 129), 'bad', 'live', 'r', pg_temp.att('live'))$$,   '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_complete('t1', NULL, 'live', 'r', pg_temp.att('live'))$$,                '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_complete('t1', '', 'live', 'r', pg_temp.att('live'))$$,                  '22023', 'scope must not be empty'),
    ($$forgeyard.idem_complete('t1', repeat('s', 257), 'live', 'r', pg_temp.att('live'))$$,    '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_complete('t1', 'bad', NULL, 'r', pg_temp.att('live'))$$,                 '22004', 'key must not be NULL'),
    ($$forgeyard.idem_complete('t1', 'bad', '', 'r', pg_temp.att('live'))$$,                   '22023', 'key must not be empty'),
    ($$forgeyard.idem_complete('t1', 'bad', repeat('k', 257), 'r', pg_temp.att('live'))$$,     '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_complete('t1', 'bad', 'live', decode(repeat('00', 1048577), 'hex'), pg_temp.att('live'))$$, '22001', 'response is longer than 1048576 bytes'),
    -- idem_abandon(tenant, scope, key, attempt) of 'live' with its attempt
    ($$forgeyard.idem_abandon(NULL, 'bad', 'live', pg_temp.att('live'))$$,                     '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_abandon('', 'bad', 'live', pg_temp.att('live'))$$,                       '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_abandon(repeat('t', 129), 'bad', 'live', pg_temp.att('live'))$$,         '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_abandon('t1', NULL, 'live', pg_temp.att('live'))$$,                      '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_abandon('t1', '', 'live', pg_temp.att('live'))$$,                        '22023', 'scope must not be empty'),
    ($$forgeyard.idem_abandon('t1', repeat('s', 257), 'live', pg_temp.att('live'))$$,          '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_abandon('t1', 'bad', NULL, pg_temp.att('live'))$$,                       '22004', 'key must not be NULL'),
    ($$forgeyard.idem_abandon('t1', 'bad', '', pg_temp.att('live'))$$,                         '22023', 'key must not be empty'),
    ($$forgeyard.idem_abandon('t1', 'bad', repeat('k', 257), pg_temp.att('live'))$$,           '22001', 'key is longer than 256 bytes'),
    -- idem_status(tenant, scope, key) of 'live'
    ($$forgeyard.idem_status(NULL, 'bad', 'live')$$,                         '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_status('', 'bad', 'live')$$,                           '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_status(repeat('t', 129), 'bad', 'live')$$,             '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_status('t1', NULL, 'live')$$,                          '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_status('t1', '', 'live')$$,                            '22023', 'scope must not be empty'),
    ($$forgeyard.idem_status('t1', repeat('s', 257), 'live')$$,              '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_status('t1', 'bad', NULL)$$,                           '22004', 'key must not be NULL'),
    ($$forgeyard.idem_status('t1', 'bad', '')$$,                             '22023', 'key must not be empty'),
    ($$forgeyard.idem_status('t1', 'bad', repeat('k', 257))$$,               '22001', 'key is longer than 256 bytes'),
    -- idem_purge(max_keys, tenant); NULL tenant means all tenants and is valid
    ($$forgeyard.idem_purge(NULL, 't1')$$,                                   '22004', 'max_keys must not be NULL'),
    ($$forgeyard.idem_purge(0, 't1')$$,                                      '22023', 'max_keys must be positive'),
    ($$forgeyard.idem_purge(-1, NULL)$$,                                     '22023', 'max_keys must be positive'),
    ($$forgeyard.idem_purge(10, '')$$,                                       '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_purge(10, repeat('t', 129))$$,                         '22001', 'tenant is longer than 128 bytes');

SELECT throws_ok('SELECT * FROM ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad ORDER BY n;

SELECT is(pg_temp.all_keys(), (SELECT k FROM keys_before), 'after every rejected call the keys are exactly as before');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('t1', 'bad', 'free')$$, 'no rejected begin created a key');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin(repeat('é', 65), 'bad', 'free', '\x01')$$),
          ARRAY['22001', 'tenant is longer than 128 bytes', 'length is 130 bytes'], '22001 detail gives the length in bytes');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 day 1 second')$$),
          ARRAY['22023', 'lock_ttl is too long', 'the maximum is 86400 seconds'], 'lock_ttl is at most 1 day');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('t1', 'bad', 'free', '\x01', '1 hour', '91 days')$$),
          ARRAY['22023', 'retain is too long', 'the maximum is 7776000 seconds'], 'retain is at most 90 days');

-- What is not checked: an absent attempt, a NULL response.
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'bad', 'live', 'rp', NULL)$$, 'checkpoint with attempt NULL is accepted');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'bad', 'live', NULL, NULL)$$,
                'complete with response NULL and attempt NULL is accepted');
SELECT results_eq($$SELECT status, recovery_point, response FROM pg_temp.row_of('t1', 'bad', 'live')$$,
                  $$VALUES ('completed'::text, 'rp'::text, NULL::bytea)$$, 'and they took effect');

-------------------------------------------------------------------------------------------------
-- A role bound to a tenant: FY040 for any other tenant, and for purge of all tenants
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-07-01 00:00:00+00';
CALL pg_temp.beg('other', 't2', 'bound', 'other', '\x01');
DO $$ BEGIN
    PERFORM forgeyard.idem_begin('t2', 'bound', 'other-done', '\x01', '1 minute', '1 hour');
    PERFORM forgeyard.idem_complete('t2', 'bound', 'other-done', 'r');
END $$;
CREATE ROLE fy_idem_app;
DO $$ BEGIN
    PERFORM forgeyard.grant_maintenance('fy_idem_app');
    PERFORM forgeyard.bind_tenant('fy_idem_app', 't1');
END $$;
CREATE TEMP TABLE t2_before AS
    SELECT jsonb_agg(to_jsonb(i) ORDER BY i.key) AS k FROM forgeyard.idempotency_keys i WHERE i.tenant_id = 't2';
GRANT SELECT ON t2_before TO fy_idem_app;
GRANT SELECT, INSERT ON b TO fy_idem_app;   -- pg_temp.beg records its answers there
GRANT USAGE ON SEQUENCE b_n_seq TO fy_idem_app;
SET forgeyard.now_override = '2030-07-01 02:00:00+00';
SET ROLE fy_idem_app;
CALL pg_temp.beg('mine', 't1', 'bound', 'mine', '\x01');
SELECT results_eq($$SELECT status, attempt > pg_temp.att('other') FROM b WHERE k = 'mine'$$,
                  $$VALUES ('started'::text, true)$$, 'bound role: begin for its tenant');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'bound', 'mine', 'rp', pg_temp.att('mine'))$$, 'bound role: checkpoint for its tenant');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'bound', 'mine', 'ok', pg_temp.att('mine'))$$, 'bound role: complete for its tenant');
SELECT results_eq($$SELECT status FROM forgeyard.idem_status('t1', 'bound', 'mine')$$, $$VALUES ('completed'::text)$$,
                  'bound role: status for its tenant');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'bound', 'other', '\x01')$$, 'FY040',
                 'tenant "t2" is not allowed for this role', 'bound role: begin for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'bound', 'new', '\x01')$$, 'FY040', NULL,
                 'bound role: begin of a new key in another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t2', 'bound', 'other', 'x', pg_temp.att('other'))$$, 'FY040', NULL,
                 'bound role: checkpoint for another tenant (with its attempt) -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t2', 'bound', 'other', 'x', pg_temp.att('other'))$$, 'FY040', NULL,
                 'bound role: complete for another tenant (with its attempt) -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t2', 'bound', 'other', pg_temp.att('other'))$$, 'FY040', NULL,
                 'bound role: abandon for another tenant (with its attempt) -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_status('t2', 'bound', 'other')$$, 'FY040', NULL,
                 'bound role: status for another tenant -> FY040, not its state');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_status('t2', 'bound', 'never')$$, 'FY040', NULL,
                 'bound role: status of an unknown key of another tenant -> FY040, not an empty answer');
SELECT throws_ok($$SELECT forgeyard.idem_purge(10, NULL)$$, 'FY040', 'a role bound to tenants must name its tenant',
                 'bound role: purge of all tenants (NULL) -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_purge()$$, 'FY040', NULL, 'bound role: purge() with the defaults -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_purge(10, 't2')$$, 'FY040', NULL, 'bound role: purge of another tenant -> FY040');
SELECT is(forgeyard.idem_purge(10, 't1'), 2, 'bound role: purge of its own tenant (the two expired keys of the bad-input section)');
SELECT throws_ok('SELECT * FROM forgeyard.idempotency_keys', '42501', NULL, 'bound role: the table itself is closed');
SELECT is((SELECT k FROM t2_before) IS NOT NULL, true, 'the other tenant has keys to protect (the checks are not vacuous)');
RESET ROLE;
SELECT is((SELECT jsonb_agg(to_jsonb(i) ORDER BY i.key) FROM forgeyard.idempotency_keys i WHERE i.tenant_id = 't2'),
          (SELECT k FROM t2_before), 'the other tenant''s keys are untouched (other-done expired but was not purged)');

-------------------------------------------------------------------------------------------------
-- Attempt numbers over the whole file: every begin that started work, of any key and tenant,
-- got an attempt greater than every begin before it
-------------------------------------------------------------------------------------------------
SELECT cmp_ok((SELECT count(*) FROM b WHERE status = 'started'), '>=', 25::bigint, 'many started begins were recorded');
SELECT is_empty($$SELECT k, attempt, prev FROM (SELECT k, attempt, lag(attempt) OVER (ORDER BY n) AS prev FROM b
                                                 WHERE status = 'started') s
                   WHERE attempt <= prev$$,
                'attempts are strictly increasing across all keys: never reused, never handed out twice');

SELECT * FROM finish();
ROLLBACK;
