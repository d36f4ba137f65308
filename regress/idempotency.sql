-- Idempotency keys (SPEC 6.3): begin / replay / mismatch / in progress / takeover after the lock
-- expired, checkpoints that extend the lock, stale attempts, complete, abandon, retention and
-- purge, status, tenants and scopes, every bad input of every function, and tenant binding.
-- Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION forgeyard;

SELECT plan(222);

SET TIME ZONE 'UTC';

-- {sqlstate, message, detail} of the error sql raises (NULL if none).
CREATE FUNCTION pg_temp.err(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN ARRAY[st, msg, det];
END $$;
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
-- A new key: started, attempt 1
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT is_empty($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$, 'idem_status of an unknown key: no row');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$,
                  'begin of a new key: started, no recovery point, no response, attempt 1');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 1::bigint, NULL::text, NULL::bytea, '\x01'::bytea,
                            '2030-01-01 00:05:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz, NULL::timestamptz,
                            '2030-01-02 00:00:00+00'::timestamptz)$$,
                  'stored: in_progress, attempt 1, the digest, locked for 5 minutes, retained 24 hours');
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 1::bigint, NULL::text, '2030-01-01 00:05:00+00'::timestamptz,
                            '2030-01-01 00:00:00+00'::timestamptz + '24 hours'::interval)$$,
                  'idem_status: in_progress with its attempt, lock and expiry');

-------------------------------------------------------------------------------------------------
-- Held by a live lock: FY010; another request under the same key: FY011
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:04:59.999999+00';
CREATE TEMP TABLE k1_before AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010',
                 'idempotency key "k1" is in progress elsewhere', 'begin while the lock is live (1 microsecond left): FY010');
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$),
          ARRAY['FY010', 'idempotency key "k1" is in progress elsewhere', 'attempt 1 holds it; try again later'],
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
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-1', 1)$$,
                'checkpoint by attempt 1');
SELECT results_eq($$SELECT status, attempt, recovery_point, locked_until, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 1::bigint, 'step-1'::text, '2030-01-01 00:09:00+00'::timestamptz,
                            '2030-01-02 00:00:00+00'::timestamptz)$$,
                  'checkpoint stores the recovery point; the lock now lasts 5 minutes from the checkpoint; retention unchanged');
SET forgeyard.now_override = '2030-01-01 00:08:59.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010', NULL,
                 'past the first lock but inside the extended one: FY010');

-------------------------------------------------------------------------------------------------
-- The lock expired: started again with the last recovery point and the next attempt
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:09:00+00';
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 1::bigint, 'step-1'::text, '2030-01-01 00:09:00+00'::timestamptz,
                            '2030-01-02 00:00:00+00'::timestamptz)$$,
                  'idem_status of a key whose lock just expired: still in_progress');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$VALUES ('started'::text, 'step-1'::text, NULL::bytea, 2::bigint)$$,
                  'begin at exactly the end of the lock: started, with the last recovery point, attempt 2');
SELECT results_eq($$SELECT status, attempt, recovery_point, locked_until, created_at, expires_at
                      FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 2::bigint, 'step-1'::text, '2030-01-01 00:14:00+00'::timestamptz,
                            '2030-01-01 00:00:00+00'::timestamptz, '2030-01-02 00:09:00+00'::timestamptz)$$,
                  'takeover: attempt 2 locked for 5 minutes from now; the recovery point and created_at are kept');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$, 'FY010',
                 'idempotency key "k1" is in progress elsewhere', 'attempt 2 now holds a live lock: FY010');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x02')$$, 'FY011', NULL,
                 'and another digest is still FY011');

-------------------------------------------------------------------------------------------------
-- A stale attempt cannot checkpoint, complete or abandon
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:10:00+00';
CREATE TEMP TABLE k1_attempt2 AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', 1)$$, 'FY001',
                 'checkpoint by attempt 1 refused: attempt 2 owns the key now', 'checkpoint by the old attempt 1: FY001');
SELECT is(pg_temp.err($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', 1)$$),
          ARRAY['FY001', 'checkpoint by attempt 1 refused: attempt 2 owns the key now',
                'the lock expired and another caller took the work over'],
          'FY001: the DETAIL says the work was taken over');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x0bad', 1)$$, 'FY001',
                 'complete by attempt 1 refused: attempt 2 owns the key now', 'complete by the old attempt 1: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k1', 1)$$, 'FY001',
                 'abandon by attempt 1 refused: attempt 2 owns the key now', 'abandon by the old attempt 1: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x0bad', 3)$$, 'FY001',
                 'complete by attempt 3 refused: attempt 2 owns the key now', 'complete by an attempt never handed out: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'stale', 0)$$, 'FY001', NULL,
                 'checkpoint by attempt 0: FY001');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$, 'SELECT * FROM k1_attempt2',
                  'the stale calls changed nothing');

SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-2', 2)$$,
                'checkpoint by the current attempt 2');
SET forgeyard.now_override = '2030-01-01 00:11:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'step-3')$$,
                'checkpoint without an attempt (NULL: not checked)');
SELECT results_eq($$SELECT attempt, recovery_point, locked_until FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES (2::bigint, 'step-3'::text, '2030-01-01 00:16:00+00'::timestamptz)$$,
                  'each checkpoint replaces the recovery point and moves the lock to its own time + 5 minutes');

-------------------------------------------------------------------------------------------------
-- complete, then replay
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:12:00+00';
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\xdeadbeef', 2)$$,
                'complete by attempt 2');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('completed'::text, 2::bigint, 'step-3'::text, '\xdeadbeef'::bytea, '\x01'::bytea,
                            '2030-01-01 00:12:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz,
                            '2030-01-01 00:12:00+00'::timestamptz, '2030-01-02 00:12:00+00'::timestamptz)$$,
                  'stored: completed with the response; retained 24 hours from completion');
SELECT results_eq($$SELECT * FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('completed'::text, 2::bigint, 'step-3'::text, '2030-01-01 00:12:00+00'::timestamptz,
                            '2030-01-02 00:12:00+00'::timestamptz)$$,
                  'idem_status: completed');
SET forgeyard.now_override = '2030-01-01 00:13:00+00';
CREATE TEMP TABLE k1_done AS SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$VALUES ('replay'::text, 'step-3'::text, '\xdeadbeef'::bytea, 2::bigint)$$,
                  'begin of a completed key: replay with the recovery point, the stored response and the attempt');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01', '1 minute', '1 hour')$$,
                  $$VALUES ('replay'::text, 'step-3'::text, '\xdeadbeef'::bytea, 2::bigint)$$,
                  'begin again (other lock_ttl and retain): the same replay');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x02')$$, 'FY011',
                 'idempotency key "k1" was used with a different request', 'a completed key with another digest: FY011');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x02', 2)$$, 'FY001',
                 'complete refused: the key is already completed', 'complete of a completed key: FY001');
SELECT is(pg_temp.err($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k1', '\x02')$$),
          ARRAY['FY001', 'complete refused: the key is already completed', 'begin again to get the stored response'],
          'complete of a completed key without an attempt: FY001, the DETAIL says to begin again');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'late', 2)$$, 'FY001',
                 'checkpoint refused: the key is already completed', 'checkpoint of a completed key: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t1', 'run.create:project/42', 'k1', 'late')$$, 'FY001', NULL,
                 'checkpoint of a completed key without an attempt: FY001');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'run.create:project/42', 'k1', 2)$$, 'FY001',
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
                  $$VALUES ('replay'::text, '\xdeadbeef'::bytea, 2::bigint)$$,
                  '1 microsecond before completed_at + 24 hours: replay');
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')), 'completed',
          'idem_status 1 microsecond before the end of retention: completed');
SET forgeyard.now_override = '2030-01-02 00:12:00+00';
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k1')), 'expired',
          'idem_status at exactly completed_at + 24 hours: expired');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k1', '\x01')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$,
                  'begin after the retention: started afresh, attempt 1, no recovery point, no response');
SELECT results_eq($$SELECT * FROM pg_temp.row_of('t1', 'run.create:project/42', 'k1')$$,
                  $$VALUES ('in_progress'::text, 1::bigint, NULL::text, NULL::bytea, '\x01'::bytea,
                            '2030-01-02 00:17:00+00'::timestamptz, '2030-01-02 00:12:00+00'::timestamptz, NULL::timestamptz,
                            '2030-01-03 00:12:00+00'::timestamptz)$$,
                  'the reused key is stored like a new one');

-- A custom retention; after it even another digest starts afresh.
SET forgeyard.now_override = '2030-01-10 00:00:00+00';
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k2', '\x0a', '1 minute', '1 hour')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$, 'begin k2 with lock_ttl 1 minute, retain 1 hour');
SELECT results_eq($$SELECT locked_until, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')$$,
                  $$VALUES ('2030-01-10 00:01:00+00'::timestamptz, '2030-01-10 01:00:00+00'::timestamptz)$$,
                  'the lock and the retention follow the arguments');
SET forgeyard.now_override = '2030-01-10 00:00:30+00';
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'run.create:project/42', 'k2', 'ok', 1)$$, 'complete k2');
SELECT results_eq($$SELECT completed_at, expires_at FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')$$,
                  $$VALUES ('2030-01-10 00:00:30+00'::timestamptz, '2030-01-10 01:00:30+00'::timestamptz)$$,
                  'completed: retained 1 hour from completion');
SET forgeyard.now_override = '2030-01-10 01:00:29.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k2', '\x0b')$$, 'FY011', NULL,
                 'inside the retention another digest is FY011');
SET forgeyard.now_override = '2030-01-10 01:00:30+00';
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k2', '\x0b', '1 minute', '1 hour')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$,
                  'after the retention another digest starts afresh');
SELECT is((SELECT request_digest FROM pg_temp.row_of('t1', 'run.create:project/42', 'k2')), '\x0b'::bytea,
          'and the new digest is stored');

-- An in-progress key past its retention counts as unused too.
SET forgeyard.now_override = '2030-01-10 02:00:30+00';
SELECT is((SELECT status FROM forgeyard.idem_status('t1', 'run.create:project/42', 'k2')), 'expired',
          'idem_status of an in-progress key past its retention: expired');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'run.create:project/42', 'k2', '\x0c')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$,
                  'begin of an in-progress key past its retention: started afresh, attempt 1');

-------------------------------------------------------------------------------------------------
-- abandon: the key is given up, the next begin starts at attempt 1; unknown keys: P0002
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
SELECT results_eq($$SELECT attempt FROM forgeyard.idem_begin('t1', 'ab', 'a1', '\x01')$$, $$VALUES (1::bigint)$$, 'begin a1');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'ab', 'a1', 'half', 1)$$, 'checkpoint a1');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a1', 1)$$, 'abandon a1 by attempt 1');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('t1', 'ab', 'a1')$$, 'abandon deletes the key');
SELECT is_empty($$SELECT * FROM forgeyard.idem_status('t1', 'ab', 'a1')$$, 'idem_status of an abandoned key: no row');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'ab', 'a1', '\x02')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$,
                  'begin after abandon: started, attempt 1, no recovery point (any digest)');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a1')$$, 'abandon without an attempt (NULL: not checked)');
SELECT is_empty($$SELECT * FROM pg_temp.row_of('t1', 'ab', 'a1')$$, 'abandoned again');
-- a takeover, then the old attempt tries to abandon
SELECT results_eq($$SELECT attempt FROM forgeyard.idem_begin('t1', 'ab', 'a2', '\x01', '1 minute')$$, $$VALUES (1::bigint)$$, 'begin a2');
SET forgeyard.now_override = '2030-02-01 00:01:00+00';
SELECT results_eq($$SELECT attempt FROM forgeyard.idem_begin('t1', 'ab', 'a2', '\x01', '1 minute')$$, $$VALUES (2::bigint)$$,
                  'a2 taken over: attempt 2');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a2', 1)$$, 'FY001', NULL, 'the old attempt cannot abandon it');
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'ab', 'a2', 2)$$, 'the current attempt can');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'ab', 'a2', '\x01')$$,
                  $$VALUES ('started'::text, NULL::text, NULL::bytea, 1::bigint)$$, 'and the next begin is attempt 1 again');

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
SELECT results_eq(
    $$SELECT v.n, b.status, b.attempt
        FROM (VALUES (1, 't1', 'sA', '\x01'::bytea), (2, 't1', 'sB', '\x02'), (3, 't2', 'sA', '\x03')) v(n, t, s, d),
             forgeyard.idem_begin(v.t, v.s, 'same', v.d) b ORDER BY v.n$$,
    $$VALUES (1, 'started'::text, 1::bigint), (2, 'started', 1::bigint), (3, 'started', 1::bigint)$$,
    'the same key in (t1, sA), (t1, sB) and (t2, sA): three new keys, each with its own digest');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'sA', 'same', 'r-t1-sA', 1)$$, 'complete (t1, sA)');
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
SELECT lives_ok($$SELECT forgeyard.idem_abandon('t1', 'sB', 'same', 1)$$, 'abandon (t1, sB)');
SELECT results_eq($$SELECT tenant_id, scope, status FROM forgeyard.idempotency_keys WHERE key = 'same' ORDER BY 1, 2$$,
                  $$VALUES ('t1'::text, 'sA'::text, 'completed'::text), ('t2', 'sA', 'in_progress')$$,
                  'abandoning (t1, sB) left (t1, sA) and (t2, sA) alone');

-------------------------------------------------------------------------------------------------
-- A response may be NULL; lock_ttl and retain are per key
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-10 00:00:00+00';
SELECT results_eq($$SELECT status, attempt FROM forgeyard.idem_begin('t1', 'misc', 'null-response', '\x01')$$,
                  $$VALUES ('started'::text, 1::bigint)$$, 'begin null-response');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'misc', 'null-response', NULL, 1)$$, 'complete with a NULL response');
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'misc', 'null-response', '\x01')$$,
                  $$VALUES ('replay'::text, NULL::text, NULL::bytea, 1::bigint)$$, 'replay of a NULL response');

SELECT results_eq($$SELECT status FROM forgeyard.idem_begin('t1', 'misc', 'short-lock', '\x01', '30 seconds', '1 hour')$$,
                  $$VALUES ('started'::text)$$, 'begin with lock_ttl 30 seconds');
SET forgeyard.now_override = '2030-03-10 00:00:20+00';
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'misc', 'short-lock', 'p1', 1)$$, 'checkpoint after 20 seconds');
SELECT is((SELECT locked_until FROM pg_temp.row_of('t1', 'misc', 'short-lock')), '2030-03-10 00:00:50+00'::timestamptz,
          'the checkpoint extends by the key''s own lock_ttl (30 seconds)');
SET forgeyard.now_override = '2030-03-10 00:00:49.999999+00';
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t1', 'misc', 'short-lock', '\x01', '30 seconds', '1 hour')$$, 'FY010', NULL,
                 'inside the extended lock: FY010');
SET forgeyard.now_override = '2030-03-10 00:00:50+00';
SELECT results_eq($$SELECT * FROM forgeyard.idem_begin('t1', 'misc', 'short-lock', '\x01', '2 minutes', '1 hour')$$,
                  $$VALUES ('started'::text, 'p1'::text, NULL::bytea, 2::bigint)$$, 'taken over when the extended lock ends');
SELECT is((SELECT locked_until FROM pg_temp.row_of('t1', 'misc', 'short-lock')), '2030-03-10 00:02:50+00'::timestamptz,
          'the new attempt is locked for its own lock_ttl (2 minutes)');

-------------------------------------------------------------------------------------------------
-- purge: expired keys only, oldest first, bounded by max_keys, optionally one tenant
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-04-01 00:00:00+00';
CREATE TEMP TABLE expired_now AS
    SELECT tenant_id, scope, key FROM forgeyard.idempotency_keys WHERE expires_at <= '2030-04-01 00:00:00+00';
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
                '... the oldest expiry: p4, an in-progress key past its retention');
SELECT is(forgeyard.idem_purge(10, 'pb'), 1, 'purge(10, pb) removes only pb''s expired key p3');
SELECT results_eq($$SELECT key FROM forgeyard.idempotency_keys ORDER BY key$$, $$VALUES ('p2'::text), ('p5')$$,
                  'pa''s p2 and live p5 are left');
SELECT is(forgeyard.idem_purge(1000, 'pa'), 1, 'purge(1000, pa): p2');
SELECT is(forgeyard.idem_purge(), 0, 'purge again: nothing expired is left');
SELECT results_eq($$SELECT status, response FROM forgeyard.idem_begin('pa', 'p', 'p5', '\x01')$$,
                  $$VALUES ('replay'::text, 'r5'::bytea)$$, 'the live key p5 still replays');

-------------------------------------------------------------------------------------------------
-- The longest accepted values
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-05-01 00:00:00+00';
SELECT results_eq(
    $$SELECT b.status, b.attempt FROM forgeyard.idem_begin(repeat('t', 128), repeat('s', 256), repeat('k', 256),
                                                           decode(repeat('ab', 64), 'hex'), '1 day', '90 days') b$$,
    $$VALUES ('started'::text, 1::bigint)$$,
    'tenant of 128 bytes, scope of 256, key of 256, digest of 64 bytes, lock_ttl 1 day, retain 90 days: accepted');
SELECT results_eq($$SELECT status FROM forgeyard.idem_begin(repeat('é', 64), 'limits', 'k', '\x01', '24 hours', '24 hours')$$,
                  $$VALUES ('started'::text)$$, 'tenant of 64 two-byte characters, retain equal to lock_ttl: accepted');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint(repeat('é', 64), 'limits', 'k', repeat('r', 65536), 1)$$,
                'a recovery point of 65536 bytes');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint(repeat('é', 64), 'limits', 'k', '', 1)$$, 'an empty recovery point');
SELECT lives_ok($$SELECT forgeyard.idem_complete(repeat('é', 64), 'limits', 'k', decode(repeat('00', 1048576), 'hex'), 1)$$,
                'a response of 1 MiB');
SELECT is((SELECT length(response) FROM pg_temp.row_of(repeat('é', 64), 'limits', 'k')), 1048576, 'stored whole');
SELECT results_eq($$SELECT locked_until, expires_at FROM pg_temp.row_of(repeat('t', 128), repeat('s', 256), repeat('k', 256))$$,
                  $$VALUES ('2030-05-02 00:00:00+00'::timestamptz, '2030-07-30 00:00:00+00'::timestamptz)$$,
                  'lock_ttl 1 day and retain 90 days: a day counts as 24 hours');

-------------------------------------------------------------------------------------------------
-- Bad input: every argument of every function; a specific SQLSTATE, a message naming the
-- argument, and nothing changes. Targets: 'live' (in progress, attempt 1), 'done' (completed),
-- and the unused key 'free', so that a call that wrongly went through would change a row.
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-06-01 00:00:00+00';
DO $$ BEGIN
    PERFORM forgeyard.idem_begin('t1', 'bad', 'live', '\x01');
    PERFORM forgeyard.idem_begin('t1', 'bad', 'done', '\x01');
    PERFORM forgeyard.idem_complete('t1', 'bad', 'done', 'resp', 1);
END $$;
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
    -- idem_checkpoint(tenant, scope, key, recovery_point, attempt) of 'live'
    ($$forgeyard.idem_checkpoint(NULL, 'bad', 'live', 'rp', 1)$$,            '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_checkpoint('', 'bad', 'live', 'rp', 1)$$,              '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_checkpoint(repeat('t', 129), 'bad', 'live', 'rp', 1)$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_checkpoint('t1', NULL, 'live', 'rp', 1)$$,             '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', '', 'live', 'rp', 1)$$,               '22023', 'scope must not be empty'),
    ($$forgeyard.idem_checkpoint('t1', repeat('s', 257), 'live', 'rp', 1)$$, '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', NULL, 'rp', 1)$$,              '22004', 'key must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', '', 'rp', 1)$$,                '22023', 'key must not be empty'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', repeat('k', 257), 'rp', 1)$$,  '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', NULL, 1)$$,            '22004', 'recovery_point must not be NULL'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', repeat('r', 65537), 1)$$, '22001', 'recovery_point is longer than 65536 bytes'),
    ($$forgeyard.idem_checkpoint('t1', 'bad', 'live', repeat('é', 32769), 1)$$, '22001', 'recovery_point is longer than 65536 bytes'),
    -- idem_complete(tenant, scope, key, response, attempt) of 'live'
    ($$forgeyard.idem_complete(NULL, 'bad', 'live', 'r', 1)$$,               '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_complete('', 'bad', 'live', 'r', 1)$$,                 '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_complete(repeat('t', 129), 'bad', 'live', 'r', 1)$$,   '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_complete('t1', NULL, 'live', 'r', 1)$$,                '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_complete('t1', '', 'live', 'r', 1)$$,                  '22023', 'scope must not be empty'),
    ($$forgeyard.idem_complete('t1', repeat('s', 257), 'live', 'r', 1)$$,    '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_complete('t1', 'bad', NULL, 'r', 1)$$,                 '22004', 'key must not be NULL'),
    ($$forgeyard.idem_complete('t1', 'bad', '', 'r', 1)$$,                   '22023', 'key must not be empty'),
    ($$forgeyard.idem_complete('t1', 'bad', repeat('k', 257), 'r', 1)$$,     '22001', 'key is longer than 256 bytes'),
    ($$forgeyard.idem_complete('t1', 'bad', 'live', decode(repeat('00', 1048577), 'hex'), 1)$$, '22001', 'response is longer than 1048576 bytes'),
    -- idem_abandon(tenant, scope, key, attempt) of 'live'
    ($$forgeyard.idem_abandon(NULL, 'bad', 'live', 1)$$,                     '22004', 'tenant must not be NULL'),
    ($$forgeyard.idem_abandon('', 'bad', 'live', 1)$$,                       '22023', 'tenant must not be empty'),
    ($$forgeyard.idem_abandon(repeat('t', 129), 'bad', 'live', 1)$$,         '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.idem_abandon('t1', NULL, 'live', 1)$$,                      '22004', 'scope must not be NULL'),
    ($$forgeyard.idem_abandon('t1', '', 'live', 1)$$,                        '22023', 'scope must not be empty'),
    ($$forgeyard.idem_abandon('t1', repeat('s', 257), 'live', 1)$$,          '22001', 'scope is longer than 256 bytes'),
    ($$forgeyard.idem_abandon('t1', 'bad', NULL, 1)$$,                       '22004', 'key must not be NULL'),
    ($$forgeyard.idem_abandon('t1', 'bad', '', 1)$$,                         '22023', 'key must not be empty'),
    ($$forgeyard.idem_abandon('t1', 'bad', repeat('k', 257), 1)$$,           '22001', 'key is longer than 256 bytes'),
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
DO $$ BEGIN
    PERFORM forgeyard.idem_begin('t2', 'bound', 'other', '\x01');
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
SET forgeyard.now_override = '2030-07-01 02:00:00+00';
SET ROLE fy_idem_app;
SELECT results_eq($$SELECT status, attempt FROM forgeyard.idem_begin('t1', 'bound', 'mine', '\x01')$$,
                  $$VALUES ('started'::text, 1::bigint)$$, 'bound role: begin for its tenant');
SELECT lives_ok($$SELECT forgeyard.idem_checkpoint('t1', 'bound', 'mine', 'rp', 1)$$, 'bound role: checkpoint for its tenant');
SELECT lives_ok($$SELECT forgeyard.idem_complete('t1', 'bound', 'mine', 'ok', 1)$$, 'bound role: complete for its tenant');
SELECT results_eq($$SELECT status FROM forgeyard.idem_status('t1', 'bound', 'mine')$$, $$VALUES ('completed'::text)$$,
                  'bound role: status for its tenant');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'bound', 'other', '\x01')$$, 'FY040',
                 'tenant "t2" is not allowed for this role', 'bound role: begin for another tenant -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.idem_begin('t2', 'bound', 'new', '\x01')$$, 'FY040', NULL,
                 'bound role: begin of a new key in another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_checkpoint('t2', 'bound', 'other', 'x', 1)$$, 'FY040', NULL,
                 'bound role: checkpoint for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_complete('t2', 'bound', 'other', 'x', 1)$$, 'FY040', NULL,
                 'bound role: complete for another tenant -> FY040');
SELECT throws_ok($$SELECT forgeyard.idem_abandon('t2', 'bound', 'other', 1)$$, 'FY040', NULL,
                 'bound role: abandon for another tenant -> FY040');
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

SELECT * FROM finish();
ROLLBACK;
