-- Leases with fencing epochs (docs/sql-api.md#leases): grants, epochs, contention, renew, release, fence, reap
-- (a reaped grant is never live again), lease_get, tenants, every bad input of every lease
-- function, and a login's tenant binding that SET ROLE cannot leave.
-- Time is moved with forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(203);

SET TIME ZONE 'UTC';

-- Microseconds since 1970: the unit of epochs.
CREATE FUNCTION pg_temp.us(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;

-- Every lease_acquire answer, in call order.
CREATE TEMP TABLE g (
    n serial, k text PRIMARY KEY, tenant text, resource text,
    acquired boolean, epoch bigint, holder text, expires_at timestamptz);
-- A procedure, so that CALL prints nothing into the TAP stream.
CREATE PROCEDURE pg_temp.acq(k text, tenant text, resource text, owner text, ttl interval)
    LANGUAGE sql AS $$
    INSERT INTO g (k, tenant, resource, acquired, epoch, holder, expires_at)
    SELECT k, tenant, resource, a.acquired, a.epoch, a.holder, a.expires_at
      FROM forgeyard.lease_acquire(tenant, resource, owner, ttl) a
$$;
CREATE FUNCTION pg_temp.ep(key text) RETURNS bigint LANGUAGE sql AS $$ SELECT epoch FROM g WHERE k = key $$;
CREATE FUNCTION pg_temp.row_of(t text, r text)
    RETURNS TABLE (owner text, epoch bigint, acquired_at timestamptz, expires_at timestamptz,
                   released_at timestamptz, reaped_at timestamptz)
    LANGUAGE sql AS $$
    SELECT owner, epoch, acquired_at, expires_at, released_at, reaped_at
      FROM forgeyard.leases WHERE tenant_id = t AND resource = r
$$;
CREATE FUNCTION pg_temp.state_of(t text, r text) RETURNS text LANGUAGE sql
    AS $$ SELECT state FROM forgeyard.lease_status WHERE tenant_id = t AND resource = r $$;

-------------------------------------------------------------------------------------------------
-- First grant: epoch = the clock in microseconds
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT is(pg_catalog.pg_get_function_result('forgeyard.lease_get(text, text)'::regprocedure),
          'TABLE(owner text, epoch bigint, acquired_at timestamp with time zone, expires_at timestamp with time zone, state text)',
          'lease_get(tenant, resource) returns (owner, epoch, acquired_at, expires_at, state)');
SELECT is_empty($$SELECT * FROM forgeyard.lease_get('t1', 'r1')$$, 'lease_get of a never-leased resource: no row');
SELECT is_empty($$SELECT * FROM forgeyard.leases$$, 'lease_get of a never-leased resource creates no row');
CALL pg_temp.acq('a1', 't1', 'r1', 'alice', '30 seconds');

SELECT results_eq(
    $$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 'a1'$$,
    $$VALUES (true, pg_temp.us('2030-01-01 00:00:00+00'), 'alice'::text, '2030-01-01 00:00:30+00'::timestamptz)$$,
    'first acquire: granted, epoch = clock in microseconds, expiry = now + ttl');
SELECT is(pg_temp.ep('a1'), 1893456000000000::bigint, 'first epoch of 2030-01-01T00:00:00Z is 1893456000000000');
SELECT results_eq(
    $$SELECT * FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:00:00+00'::timestamptz,
              '2030-01-01 00:00:30+00'::timestamptz, NULL::timestamptz, NULL::timestamptz)$$,
    'first acquire stores owner, epoch, acquired_at, expires_at; not released, not reaped');
SELECT is(pg_temp.state_of('t1', 'r1'), 'live', 'lease_status: a fresh grant is live');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_get('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:00:00+00'::timestamptz,
              '2030-01-01 00:00:30+00'::timestamptz, 'live'::text)$$,
    'lease_get: owner, epoch, acquired_at, expires_at of a fresh grant; state live');
SELECT is((SELECT remaining FROM forgeyard.lease_status WHERE tenant_id = 't1' AND resource = 'r1'),
          '30 seconds'::interval, 'lease_status: remaining time by forgeyard.now()');

-------------------------------------------------------------------------------------------------
-- Contention: an answer, not an error; nothing changes
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:10+00';
CALL pg_temp.acq('c1', 't1', 'r1', 'bob', '60 seconds');
SELECT results_eq(
    $$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 'c1'$$,
    $$VALUES (false, 1893456000000000::bigint, 'alice'::text, '2030-01-01 00:00:30+00'::timestamptz)$$,
    'contention: acquired = false with the current holder, epoch and expiry');
SELECT results_eq(
    $$SELECT owner, epoch, expires_at FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:00:30+00'::timestamptz)$$,
    'contention changes nothing');
SELECT results_eq($$SELECT owner, epoch, state FROM forgeyard.lease_get('t1', 'r1')$$,
                  $$VALUES ('alice'::text, 1893456000000000::bigint, 'live'::text)$$,
                  'lease_get under contention: the holder''s grant, not the contender');

-------------------------------------------------------------------------------------------------
-- Same owner again: idempotent, same epoch, expiry moved to now + ttl when that is later
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:20+00';
CALL pg_temp.acq('i1', 't1', 'r1', 'alice', '1 minute');
SELECT results_eq(
    $$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 'i1'$$,
    $$VALUES (true, 1893456000000000::bigint, 'alice'::text, '2030-01-01 00:01:20+00'::timestamptz)$$,
    'same owner re-acquires: acquired, same epoch, expiry = now + ttl');
SELECT results_eq(
    $$SELECT owner, epoch, acquired_at, expires_at FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:00:00+00'::timestamptz,
              '2030-01-01 00:01:20+00'::timestamptz)$$,
    'same-owner re-acquire keeps the grant (epoch, acquired_at) and moves expires_at');
SELECT results_eq($$SELECT acquired_at, expires_at FROM forgeyard.lease_get('t1', 'r1')$$,
                  $$VALUES ('2030-01-01 00:00:00+00'::timestamptz, '2030-01-01 00:01:20+00'::timestamptz)$$,
                  'lease_get after a same-owner re-acquire: acquired_at kept, expires_at moved');
CALL pg_temp.acq('i2', 't1', 'r1', 'alice', '5 seconds');
SELECT results_eq(
    $$SELECT acquired, epoch, expires_at FROM g WHERE k = 'i2'$$,
    $$VALUES (true, 1893456000000000::bigint, '2030-01-01 00:01:20+00'::timestamptz)$$,
    'same-owner re-acquire with a shorter ttl never shortens the lease (a keeper may hold it longer)');

-------------------------------------------------------------------------------------------------
-- Renew
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:24+00';
SELECT is(forgeyard.lease_renew('t1', 'r1', 1893456000000000, '40 seconds'),
          '2030-01-01 00:01:04+00'::timestamptz, 'renew returns the new expiry now + ttl');
SELECT results_eq(
    $$SELECT owner, epoch, expires_at FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:01:04+00'::timestamptz)$$,
    'renew stores the new expiry and keeps the epoch');
SELECT results_eq($$SELECT epoch, expires_at, state FROM forgeyard.lease_get('t1', 'r1')$$,
                  $$VALUES (1893456000000000::bigint, '2030-01-01 00:01:04+00'::timestamptz, 'live'::text)$$,
                  'lease_get after renew: the new expiry');
SELECT is(forgeyard.lease_renew('t1', 'r1', 1893456000000000, '1.5 seconds'),
          '2030-01-01 00:00:25.5+00'::timestamptz, 'renew with a fractional ttl: exact microseconds');
SELECT is(forgeyard.lease_renew('t1', 'r1', 1893456000000000, '40 seconds'),
          '2030-01-01 00:01:04+00'::timestamptz, 'renew again');

-------------------------------------------------------------------------------------------------
-- "Expired" means expires_at <= now: the boundary is exact
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:01:03.999999+00';
SELECT lives_ok($$SELECT forgeyard.lease_fence('t1', 'r1', 1893456000000000)$$,
                'fence 1 microsecond before expiry: live');
CALL pg_temp.acq('c2', 't1', 'r1', 'bob', '30 seconds');
SELECT results_eq($$SELECT acquired, holder FROM g WHERE k = 'c2'$$, $$VALUES (false, 'alice'::text)$$,
                  'another owner 1 microsecond before expiry: still contention');
SELECT is(pg_temp.state_of('t1', 'r1'), 'live', 'lease_status: live 1 microsecond before expiry');
SELECT is((SELECT state FROM forgeyard.lease_get('t1', 'r1')), 'live', 'lease_get: live 1 microsecond before expiry');

SET forgeyard.now_override = '2030-01-01 00:01:04+00';
SELECT is(pg_temp.state_of('t1', 'r1'), 'expired', 'lease_status: expired at exactly expires_at');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_get('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:00:00+00'::timestamptz,
              '2030-01-01 00:01:04+00'::timestamptz, 'expired'::text)$$,
    'lease_get at exactly expires_at: the last grant, state expired');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t1', 'r1', 1893456000000000)$$, 'FY001', NULL,
                 'fence at exactly expires_at: FY001');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t1', 'r1', 1893456000000000, '1 minute')$$, 'FY001',
                 'lease epoch 1893456000000000 is not the live grant of "r1"',
                 'renew at exactly expires_at: FY001 (an expired lease cannot be renewed)');
SELECT is(forgeyard.lease_release('t1', 'r1', 1893456000000000), false,
          'release at exactly expires_at: false');
SELECT results_eq(
    $$SELECT owner, epoch, expires_at, released_at FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('alice'::text, 1893456000000000::bigint, '2030-01-01 00:01:04+00'::timestamptz, NULL::timestamptz)$$,
    'failed renew / release of an expired lease change nothing');

-------------------------------------------------------------------------------------------------
-- Takeover after expiry: a new, strictly greater epoch
-------------------------------------------------------------------------------------------------
CALL pg_temp.acq('t1', 't1', 'r1', 'bob', '30 seconds');
SELECT results_eq(
    $$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 't1'$$,
    $$VALUES (true, pg_temp.us('2030-01-01 00:01:04+00'), 'bob'::text, '2030-01-01 00:01:34+00'::timestamptz)$$,
    'takeover at exactly expires_at: granted, epoch = clock in microseconds');
SELECT cmp_ok(pg_temp.ep('t1'), '>', pg_temp.ep('a1'), 'takeover epoch > previous epoch');
SELECT results_eq(
    $$SELECT owner, acquired_at, released_at, reaped_at FROM pg_temp.row_of('t1', 'r1')$$,
    $$VALUES ('bob'::text, '2030-01-01 00:01:04+00'::timestamptz, NULL::timestamptz, NULL::timestamptz)$$,
    'takeover rewrites the row for the new grant');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_get('t1', 'r1')$$,
    $$SELECT 'bob'::text, pg_temp.ep('t1'), '2030-01-01 00:01:04+00'::timestamptz,
             '2030-01-01 00:01:34+00'::timestamptz, 'live'::text$$,
    'lease_get after takeover: the new owner, epoch, acquired_at and expiry; live');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t1', 'r1', 1893456000000000, '1 minute')$$, 'FY001', NULL,
                 'renew with a superseded epoch: FY001');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t1', 'r1', 1893456000000000)$$, 'FY001', NULL,
                 'fence with a superseded epoch: FY001');
SELECT is(forgeyard.lease_release('t1', 'r1', 1893456000000000), false, 'release with a superseded epoch: false');
SELECT results_eq($$SELECT owner, epoch, released_at FROM pg_temp.row_of('t1', 'r1')$$,
                  $$SELECT 'bob'::text, pg_temp.ep('t1'), NULL::timestamptz$$,
                  'stale renew / fence / release leave the new grant alone');
SELECT lives_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 't1', 'r1', pg_temp.ep('t1')),
                'fence with the live epoch passes');

-- Unknown epoch and unknown resource
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 't1', 'r1', pg_temp.ep('t1') + 12345, '1 minute'),
                 'FY001', NULL, 'renew with an unknown epoch: FY001');
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 't1', 'r1', pg_temp.ep('t1') + 12345),
                 'FY001', NULL, 'fence with an unknown epoch: FY001');
SELECT is(forgeyard.lease_release('t1', 'r1', pg_temp.ep('t1') + 12345), false, 'release with an unknown epoch: false');
SELECT throws_ok($$SELECT forgeyard.lease_renew('t1', 'nope', 1, '1 minute')$$, 'FY001', NULL,
                 'renew of an unknown resource: FY001');
SELECT throws_ok($$SELECT forgeyard.lease_fence('t1', 'nope', 1)$$, 'FY001', NULL,
                 'fence of an unknown resource: FY001');
SELECT is(forgeyard.lease_release('t1', 'nope', 1), false, 'release of an unknown resource: false');
SELECT is((SELECT count(*) FROM forgeyard.leases WHERE resource = 'nope'), 0::bigint,
          'renew / fence / release of an unknown resource create no row');

-------------------------------------------------------------------------------------------------
-- Release: true only for the live grant; the row and its epoch stay
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:01:10+00';
SELECT is(forgeyard.lease_release('t1', 'r1', pg_temp.ep('t1')), true, 'release of the live grant: true');
SELECT results_eq($$SELECT owner, epoch, expires_at, released_at FROM pg_temp.row_of('t1', 'r1')$$,
                  $$SELECT 'bob'::text, pg_temp.ep('t1'), '2030-01-01 00:01:34+00'::timestamptz,
                           '2030-01-01 00:01:10+00'::timestamptz$$,
                  'release keeps the row and its epoch, stamps released_at');
SELECT is(pg_temp.state_of('t1', 'r1'), 'released', 'lease_status: released');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_get('t1', 'r1')$$,
    $$SELECT 'bob'::text, pg_temp.ep('t1'), '2030-01-01 00:01:04+00'::timestamptz,
             '2030-01-01 00:01:34+00'::timestamptz, 'released'::text$$,
    'lease_get after release: the released grant keeps owner, epoch and times; state released');
SELECT is(forgeyard.lease_release('t1', 'r1', pg_temp.ep('t1')), false, 'second release: false');
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 't1', 'r1', pg_temp.ep('t1'), '1 minute'),
                 'FY001', NULL, 'renew of a released grant: FY001');
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 't1', 'r1', pg_temp.ep('t1')),
                 'FY001', NULL, 'fence of a released grant: FY001');

-- Taken after release (before the released grant would have expired): a new epoch
SET forgeyard.now_override = '2030-01-01 00:01:11+00';
CALL pg_temp.acq('t2', 't1', 'r1', 'carol', '30 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 't2'$$,
                  $$VALUES (true, pg_temp.us('2030-01-01 00:01:11+00'), 'carol'::text)$$,
                  'acquire after release: granted with epoch = clock');
-- The same owner after its own release gets a new grant, not its old epoch back.
SET forgeyard.now_override = '2030-01-01 00:01:12+00';
SELECT is(forgeyard.lease_release('t1', 'r1', pg_temp.ep('t2')), true, 'carol releases');
CALL pg_temp.acq('t3', 't1', 'r1', 'carol', '30 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 't3'$$,
                  $$VALUES (true, pg_temp.us('2030-01-01 00:01:12+00'), 'carol'::text)$$,
                  'same owner after its release: a new epoch');
-- The same owner after its own expiry gets a new grant too.
SET forgeyard.now_override = '2030-01-01 00:01:42+00';
CALL pg_temp.acq('t4', 't1', 'r1', 'carol', '30 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 't4'$$,
                  $$VALUES (true, pg_temp.us('2030-01-01 00:01:42+00'), 'carol'::text)$$,
                  'same owner after its expiry: a new epoch');

-------------------------------------------------------------------------------------------------
-- Epoch = max(previous + 1, clock): the clock moved backwards
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-06-01 00:00:00+00';
CALL pg_temp.acq('b1', 't1', 'back', 'alice', '10 seconds');
SELECT is(pg_temp.ep('b1'), pg_temp.us('2030-06-01 00:00:00+00'), 'back: first epoch = clock');
SELECT is(forgeyard.lease_release('t1', 'back', pg_temp.ep('b1')), true, 'back: released');
SET forgeyard.now_override = '2029-01-01 00:00:00+00';
CALL pg_temp.acq('b2', 't1', 'back', 'bob', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 'b2'$$,
                  $$SELECT true, pg_temp.ep('b1') + 1, 'bob'::text, '2029-01-01 00:00:10+00'::timestamptz$$,
                  'clock moved back a year, after release: epoch = previous + 1');
SET forgeyard.now_override = '2029-01-01 00:00:10+00';
CALL pg_temp.acq('b3', 't1', 'back', 'carol', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 'b3'$$,
                  $$SELECT true, pg_temp.ep('b1') + 2, 'carol'::text$$,
                  'clock still behind, takeover after expiry: epoch = previous + 1');
SET forgeyard.now_override = '2020-01-01 00:00:00+00';
CALL pg_temp.acq('b4', 't1', 'back', 'dave', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 'b4'$$,
                  $$SELECT false, pg_temp.ep('b1') + 2, 'carol'::text$$,
                  'clock moved back before the grant: the grant is live again, contention (no new epoch)');
SELECT is(forgeyard.lease_release('t1', 'back', pg_temp.ep('b3')), true, 'back: carol releases');
CALL pg_temp.acq('b5', 't1', 'back', 'dave', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch FROM g WHERE k = 'b5'$$,
                  $$SELECT true, pg_temp.ep('b1') + 3$$,
                  'clock ten years back: epoch still previous + 1');
SET forgeyard.now_override = '2031-01-01 00:00:00+00';
CALL pg_temp.acq('b6', 't1', 'back', 'erin', '10 seconds');
SELECT is(pg_temp.ep('b6'), pg_temp.us('2031-01-01 00:00:00+00'), 'clock overtakes the epoch again: epoch = clock');

SELECT is_empty(
    $$SELECT resource, k FROM (
          SELECT resource, k, epoch, lag(epoch) OVER (PARTITION BY tenant, resource ORDER BY n) AS prev
            FROM g WHERE acquired AND k NOT IN ('i1', 'i2')) s
       WHERE epoch <= prev$$,
    'every new grant of a resource has a strictly greater epoch than the grant before it');
SELECT is((SELECT count(DISTINCT epoch) FROM g WHERE resource IN ('r1', 'back') AND acquired AND k NOT IN ('i1', 'i2')),
          (SELECT count(*) FROM g WHERE resource IN ('r1', 'back') AND acquired AND k NOT IN ('i1', 'i2')),
          'no epoch of a resource is handed out twice');

-- Before 1970 the clock is negative: epoch = max(0 + 1, clock) = 1.
SET forgeyard.now_override = '1969-12-31 23:59:59+00';
CALL pg_temp.acq('old', 't1', 'ancient', 'alice', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch, expires_at FROM g WHERE k = 'old'$$,
                  $$VALUES (true, 1::bigint, '1970-01-01 00:00:09+00'::timestamptz)$$,
                  'a clock before 1970: first epoch is 1');

-------------------------------------------------------------------------------------------------
-- Durations: a day counts as 24 hours (not a calendar day), 7 days is the maximum
-------------------------------------------------------------------------------------------------
SET TIME ZONE 'America/New_York';
SET forgeyard.now_override = '2030-03-09 12:00:00-05';   -- daylight saving starts 2030-03-10 02:00
CALL pg_temp.acq('day', 't1', 'dst', 'alice', '1 day');
SELECT is((SELECT expires_at FROM g WHERE k = 'day'), '2030-03-10 17:00:00+00'::timestamptz,
          'ttl 1 day across a DST change = 24 hours');
SELECT is(forgeyard.lease_renew('t1', 'dst', pg_temp.ep('day'), '2 days'), '2030-03-11 17:00:00+00'::timestamptz,
          'renew ttl 2 days across a DST change = 48 hours');
SET TIME ZONE 'UTC';
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
CALL pg_temp.acq('week', 't1', 'week', 'alice', '7 days');
SELECT results_eq($$SELECT acquired, expires_at FROM g WHERE k = 'week'$$,
                  $$VALUES (true, '2030-01-08 00:00:00+00'::timestamptz)$$, 'ttl of exactly 7 days is accepted');
SELECT is(forgeyard.lease_renew('t1', 'week', pg_temp.ep('week'), '168 hours'), '2030-01-08 00:00:00+00'::timestamptz,
          'renew ttl of 168 hours is accepted');
CALL pg_temp.acq('tiny', 't1', 'tiny', 'alice', '1 microsecond');
SELECT results_eq($$SELECT acquired, expires_at FROM g WHERE k = 'tiny'$$,
                  $$VALUES (true, '2030-01-01 00:00:00.000001+00'::timestamptz)$$, 'ttl of 1 microsecond is accepted');

-------------------------------------------------------------------------------------------------
-- Reap: expired (not released) grants, each once; max_leases; tenant filter
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-02-01 00:00:00+00';
SELECT results_eq(
    $$SELECT tenant, resource, holder, expired_at FROM forgeyard.lease_reap(100, NULL) ORDER BY resource$$,
    $$VALUES ('t1'::text, 'ancient'::text, 'alice'::text, '1970-01-01 00:00:09+00'::timestamptz),
             ('t1', 'r1', 'carol', '2030-01-01 00:02:12+00'),
             ('t1', 'tiny', 'alice', '2030-01-01 00:00:00.000001+00'),
             ('t1', 'week', 'alice', '2030-01-08 00:00:00+00')$$,
    'reap(100, all tenants): every expired grant so far, not the released or live ones');
CALL pg_temp.acq('pa', 'rp1', 'a', 'alice', '10 seconds');
CALL pg_temp.acq('pb', 'rp1', 'b', 'bob', '20 seconds');
CALL pg_temp.acq('pc', 'rp1', 'c', 'carol', '30 seconds');
CALL pg_temp.acq('pd', 'rp1', 'd', 'dave', '1 hour');
CALL pg_temp.acq('qa', 'rp2', 'a', 'erin', '15 seconds');
CALL pg_temp.acq('qb', 'rp2', 'b', 'frank', '25 seconds');
SET forgeyard.now_override = '2030-02-01 00:00:01+00';
SELECT is(forgeyard.lease_release('rp1', 'c', pg_temp.ep('pc')), true, 'reap setup: rp1/c released');
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, NULL)$$, 'reap with nothing expired: no rows');

SET forgeyard.now_override = '2030-02-01 00:00:40+00';
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_reap(1, 'rp1')$$,
    $$SELECT 'rp1'::text, 'a'::text, pg_temp.ep('pa'), 'alice'::text, '2030-02-01 00:00:10+00'::timestamptz$$,
    'reap(1, rp1): the earliest expired grant with tenant, resource, epoch, holder, expired_at');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_reap(100, 'rp1')$$,
    $$SELECT 'rp1'::text, 'b'::text, pg_temp.ep('pb'), 'bob'::text, '2030-02-01 00:00:20+00'::timestamptz$$,
    'reap(100, rp1): the rest, not the one already reaped, not the released one, not the live one');
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, 'rp1')$$, 'reap(100, rp1) again: nothing (each grant once)');
SELECT results_eq(
    $$SELECT resource, reaped_at FROM forgeyard.leases WHERE tenant_id = 'rp1' ORDER BY resource$$,
    $$VALUES ('a'::text, '2030-02-01 00:00:40+00'::timestamptz), ('b', '2030-02-01 00:00:40+00'),
             ('c', NULL), ('d', NULL)$$,
    'reap marks reaped_at on the reaped grants only');
SELECT results_eq(
    $$SELECT resource, reaped_at FROM forgeyard.leases WHERE tenant_id = 'rp2' ORDER BY resource$$,
    $$VALUES ('a'::text, NULL::timestamptz), ('b', NULL)$$,
    'reap with a tenant leaves other tenants alone');
SELECT results_eq(
    $$SELECT resource, state FROM forgeyard.lease_status WHERE tenant_id = 'rp1' ORDER BY resource$$,
    $$VALUES ('a'::text, 'reaped'::text), ('b', 'reaped'), ('c', 'released'), ('d', 'live')$$,
    'lease_status: reaped, released, live');
SELECT results_eq(
    $$SELECT t, r, g.owner, g.epoch, g.state
        FROM (VALUES ('rp1', 'a'), ('rp1', 'b'), ('rp1', 'c'), ('rp1', 'd'), ('rp2', 'a')) v(t, r),
             forgeyard.lease_get(v.t, v.r) g ORDER BY t, r$$,
    $$VALUES ('rp1'::text, 'a'::text, 'alice'::text, pg_temp.ep('pa'), 'reaped'::text),
             ('rp1', 'b', 'bob', pg_temp.ep('pb'), 'reaped'),
             ('rp1', 'c', 'carol', pg_temp.ep('pc'), 'released'),
             ('rp1', 'd', 'dave', pg_temp.ep('pd'), 'live'),
             ('rp2', 'a', 'erin', pg_temp.ep('qa'), 'expired')$$,
    'lease_get: reaped, reaped, released (also past its expiry), live, expired (not yet reaped)');
-- lease_get agrees with the table and with lease_status on every stored lease, and reads only.
CREATE TEMP TABLE leases_snapshot AS SELECT * FROM forgeyard.leases;
SELECT set_eq('SELECT DISTINCT state FROM forgeyard.lease_status', ARRAY['live', 'expired', 'reaped', 'released'],
              'all four states are present (the next check is not vacuous)');
SELECT is_empty(
    $$SELECT s.tenant_id, s.resource FROM forgeyard.lease_status s
        LEFT JOIN LATERAL forgeyard.lease_get(s.tenant_id, s.resource) g ON true
       WHERE (g.owner, g.epoch, g.acquired_at, g.expires_at, g.state)
             IS DISTINCT FROM (s.owner, s.epoch, s.acquired_at, s.expires_at, s.state)$$,
    'lease_get returns the stored owner, epoch, times and the lease_status state of every lease');
SELECT results_eq('SELECT * FROM forgeyard.leases ORDER BY tenant_id, resource',
                  'SELECT * FROM leases_snapshot ORDER BY tenant_id, resource',
                  'lease_get changes nothing (an expired lease is not reaped by reading it)');

-- rp2/a expired but is taken again before a reaper sees it: not reported.
CALL pg_temp.acq('qa2', 'rp2', 'a', 'erin2', '10 seconds');
SELECT is((SELECT acquired FROM g WHERE k = 'qa2'), true, 'rp2/a re-acquired after expiry');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_reap(100, NULL)$$,
    $$SELECT 'rp2'::text, 'b'::text, pg_temp.ep('qb'), 'frank'::text, '2030-02-01 00:00:25+00'::timestamptz$$,
    'reap(100, all tenants): only rp2/b; the re-acquired rp2/a is not reported');
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, NULL)$$, 'reap all again: nothing');

-- A reaped resource granted again is reaped again (once) when the new grant expires.
CALL pg_temp.acq('pa2', 'rp1', 'a', 'alice2', '5 seconds');
SELECT results_eq($$SELECT owner, reaped_at FROM pg_temp.row_of('rp1', 'a')$$,
                  $$VALUES ('alice2'::text, NULL::timestamptz)$$, 'a new grant clears reaped_at');
SELECT results_eq($$SELECT owner, epoch, state FROM forgeyard.lease_get('rp1', 'a')$$,
                  $$SELECT 'alice2'::text, pg_temp.ep('pa2'), 'live'::text$$,
                  'lease_get: a reaped resource granted again is live');
SET forgeyard.now_override = '2030-02-01 00:00:50+00';   -- rp1/a expired at :45, rp2/a at :50
SELECT is((SELECT state FROM forgeyard.lease_get('rp1', 'a')), 'expired',
          'lease_get: the new grant expired, not yet reaped: expired (not the old reaped state)');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_reap(1)$$,
    $$SELECT 'rp1'::text, 'a'::text, pg_temp.ep('pa2'), 'alice2'::text, '2030-02-01 00:00:45+00'::timestamptz$$,
    'reap(1): one row, the earliest expiry, the new grant''s epoch and holder');
SELECT is((SELECT state FROM forgeyard.lease_get('rp1', 'a')), 'reaped', 'lease_get: reaped after lease_reap reported it');
SELECT results_eq(
    $$SELECT * FROM forgeyard.lease_reap(1)$$,
    $$SELECT 'rp2'::text, 'a'::text, pg_temp.ep('qa2'), 'erin2'::text, '2030-02-01 00:00:50+00'::timestamptz$$,
    'reap(1) again: the next one (expired at exactly now)');
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap()$$, 'reap() with defaults: nothing left');

-- The expiry boundary for reap.
SET forgeyard.now_override = '2030-02-02 00:00:00+00';
CALL pg_temp.acq('x', 'rp3', 'x', 'alice', '10 seconds');
SET forgeyard.now_override = '2030-02-02 00:00:09.999999+00';
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, 'rp3')$$, 'reap 1 microsecond before expiry: nothing');
SET forgeyard.now_override = '2030-02-02 00:00:10+00';
SELECT results_eq($$SELECT resource, epoch FROM forgeyard.lease_reap(100, 'rp3')$$,
                  $$SELECT 'x'::text, pg_temp.ep('x')$$, 'reap at exactly expires_at: reported');
SELECT is(forgeyard.lease_release('rp3', 'x', pg_temp.ep('x')), false, 'release after reap: false (it had expired)');
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 'rp3', 'x', pg_temp.ep('x'), '1 minute'),
                 'FY001', NULL, 'renew after reap: FY001');
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 'rp3', 'x', pg_temp.ep('x')),
                 'FY001', NULL, 'fence after reap: FY001');

-- A reaped grant is not live again when a caller's clock is behind: its reconciler was told it expired.
SET forgeyard.now_override = '2030-02-02 00:00:05+00';   -- before the reaped grant's expires_at (00:00:10)
CREATE TEMP TABLE reaped_before AS SELECT * FROM forgeyard.leases WHERE tenant_id = 'rp3';
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 'rp3', 'x', pg_temp.ep('x')), 'FY001',
                 format('lease epoch %s is not the live grant of "x"', pg_temp.ep('x')),
                 'clock moved back before expires_at of a reaped grant: fence -> FY001');
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 'rp3', 'x', pg_temp.ep('x'), '1 minute'), 'FY001',
                 format('lease epoch %s is not the live grant of "x"', pg_temp.ep('x')),
                 'clock moved back before expires_at of a reaped grant: renew -> FY001');
SELECT is(forgeyard.lease_release('rp3', 'x', pg_temp.ep('x')), false,
          'clock moved back before expires_at of a reaped grant: release -> false');
SELECT results_eq('SELECT * FROM forgeyard.leases WHERE tenant_id = ''rp3''', 'SELECT * FROM reaped_before',
                  'the refused renew / fence / release changed nothing');
SELECT results_eq($$SELECT (SELECT state FROM forgeyard.lease_get('rp3', 'x')), pg_temp.state_of('rp3', 'x')$$,
                  $$VALUES ('reaped'::text, 'reaped'::text)$$,
                  'lease_get and lease_status agree with fence: a reaped grant is reaped, not live, with the clock behind');
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, 'rp3')$$, 'and it is not reported again');
CALL pg_temp.acq('x2', 'rp3', 'x', 'alice', '10 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder, expires_at FROM g WHERE k = 'x2'$$,
                  $$VALUES (true, pg_temp.us('2030-02-02 00:00:05+00'), 'alice'::text, '2030-02-02 00:00:15+00'::timestamptz)$$,
                  'the same owner acquires the reaped resource: a new grant (epoch = clock), not the reaped one extended');
SELECT cmp_ok(pg_temp.ep('x2'), '>', pg_temp.ep('x'), 'the new grant''s epoch is greater than the reaped one''s');
SELECT results_eq($$SELECT owner, epoch, acquired_at, reaped_at FROM pg_temp.row_of('rp3', 'x')$$,
                  $$SELECT 'alice'::text, pg_temp.ep('x2'), '2030-02-02 00:00:05+00'::timestamptz, NULL::timestamptz$$,
                  'the new grant: acquired now, reaped_at cleared');
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 'rp3', 'x', pg_temp.ep('x')),
                 'FY001', NULL, 'the reaped epoch is still refused');
SELECT lives_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 'rp3', 'x', pg_temp.ep('x2')), 'the new epoch is live');

-------------------------------------------------------------------------------------------------
-- Tenants are independent
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-03-01 00:00:00+00';
CALL pg_temp.acq('ta', 'ta', 'shared', 'alice', '30 seconds');
SET forgeyard.now_override = '2030-03-01 00:00:01+00';
CALL pg_temp.acq('tb', 'tb', 'shared', 'bob', '30 seconds');
SELECT results_eq($$SELECT k, acquired, holder FROM g WHERE k IN ('ta', 'tb') ORDER BY k$$,
                  $$VALUES ('ta'::text, true, 'alice'::text), ('tb', true, 'bob')$$,
                  'the same resource name in two tenants: two grants');
CALL pg_temp.acq('tc', 'tb', 'shared', 'carol', '30 seconds');
SELECT results_eq($$SELECT acquired, epoch, holder FROM g WHERE k = 'tc'$$,
                  $$SELECT false, pg_temp.ep('tb'), 'bob'::text$$,
                  'contention is per tenant: tb''s holder is reported, not ta''s');
SELECT throws_ok(format('SELECT forgeyard.lease_fence(%L, %L, %s)', 'ta', 'shared', pg_temp.ep('tb')),
                 'FY001', NULL, 'fence in ta with tb''s epoch: FY001');
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 'ta', 'shared', pg_temp.ep('tb'), '1 minute'),
                 'FY001', NULL, 'renew in ta with tb''s epoch: FY001');
SELECT is(forgeyard.lease_release('ta', 'shared', pg_temp.ep('tb')), false, 'release in ta with tb''s epoch: false');
SELECT is(forgeyard.lease_release('tb', 'shared', pg_temp.ep('tb')), true, 'release in tb');
SELECT results_eq($$SELECT owner, epoch, released_at FROM pg_temp.row_of('ta', 'shared')$$,
                  $$SELECT 'alice'::text, pg_temp.ep('ta'), NULL::timestamptz$$,
                  'ta''s grant is untouched by everything done in tb');
SELECT results_eq(
    $$SELECT t, g.owner, g.epoch, g.state FROM unnest(ARRAY['ta', 'tb']) t, forgeyard.lease_get(t, 'shared') g ORDER BY t$$,
    $$VALUES ('ta'::text, 'alice'::text, pg_temp.ep('ta'), 'live'::text), ('tb', 'bob', pg_temp.ep('tb'), 'released')$$,
    'lease_get is per tenant: the same resource name answers with each tenant''s own lease');
SELECT is_empty($$SELECT * FROM forgeyard.lease_get('tc', 'shared')$$,
                'lease_get in a tenant that never leased the resource: no row, whatever other tenants hold');
SET forgeyard.now_override = '2030-03-01 00:00:30+00';
SELECT is_empty($$SELECT * FROM forgeyard.lease_reap(100, 'tb')$$, 'reap(tb) does not report ta''s expired grant');
SELECT results_eq($$SELECT tenant, resource FROM forgeyard.lease_reap(100, 'ta')$$,
                  $$VALUES ('ta'::text, 'shared'::text)$$, 'reap(ta) reports it');

-------------------------------------------------------------------------------------------------
-- Limits: the longest accepted names (bytes, not characters)
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-04-01 00:00:00+00';
CALL pg_temp.acq('lt', repeat('t', 128), 'r', 'o', '1 minute');
CALL pg_temp.acq('lr', 't1', repeat('r', 512), 'o', '1 minute');
CALL pg_temp.acq('lo', 't1', 'long-owner', repeat('o', 256), '1 minute');
CALL pg_temp.acq('lm', repeat('é', 64), 'r', 'o', '1 minute');
SELECT results_eq($$SELECT k, acquired FROM g WHERE k IN ('lt', 'lr', 'lo', 'lm') ORDER BY k$$,
                  $$VALUES ('lm'::text, true), ('lo', true), ('lr', true), ('lt', true)$$,
                  'tenant of 128 bytes, resource of 512, owner of 256, tenant of 64 two-byte characters: accepted');
SELECT results_eq(
    $$SELECT g.owner, g.state FROM (VALUES (1, repeat('t', 128), 'r'), (2, 't1', repeat('r', 512)), (3, repeat('é', 64), 'r')) v(n, t, r),
             forgeyard.lease_get(v.t, v.r) g ORDER BY v.n$$,
    $$VALUES ('o'::text, 'live'::text), ('o', 'live'), ('o', 'live')$$,
    'lease_get with a tenant of 128 bytes, a resource of 512, a tenant of 64 two-byte characters: found');

-------------------------------------------------------------------------------------------------
-- Bad input: every argument of every lease function; a specific SQLSTATE, a message naming the
-- argument, and nothing changes. Otherwise-valid arguments target a live grant ('t1'/'live') or
-- a free resource ('t1'/'free'), so a call that wrongly went through would change a row.
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-05-01 00:00:00+00';
CALL pg_temp.acq('live', 't1', 'live', 'alice', '1 hour');
CREATE TEMP TABLE leases_before AS SELECT * FROM forgeyard.leases;

CREATE TEMP TABLE bad (n serial, call text, code char(5), message text);
INSERT INTO bad (call, code, message) VALUES
    -- lease_acquire(tenant, resource, owner, ttl)
    ($$forgeyard.lease_acquire(NULL, 'free', 'o', '1 minute')$$,            '22004', 'tenant must not be NULL'),
    ($$forgeyard.lease_acquire('', 'free', 'o', '1 minute')$$,              '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_acquire(repeat('t', 129), 'free', 'o', '1 minute')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_acquire(repeat('é', 65), 'free', 'o', '1 minute')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_acquire('t1', NULL, 'o', '1 minute')$$,              '22004', 'resource must not be NULL'),
    ($$forgeyard.lease_acquire('t1', '', 'o', '1 minute')$$,                '22023', 'resource must not be empty'),
    ($$forgeyard.lease_acquire('t1', repeat('r', 513), 'o', '1 minute')$$,  '22001', 'resource is longer than 512 bytes'),
    ($$forgeyard.lease_acquire('t1', 'free', NULL, '1 minute')$$,           '22004', 'owner must not be NULL'),
    ($$forgeyard.lease_acquire('t1', 'free', '', '1 minute')$$,             '22023', 'owner must not be empty'),
    ($$forgeyard.lease_acquire('t1', 'free', repeat('o', 257), '1 minute')$$, '22001', 'owner is longer than 256 bytes'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', NULL)$$,                  '22004', 'ttl must not be NULL'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '0')$$,                   '22023', 'ttl must be positive'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '-1 second')$$,           '22023', 'ttl must be positive'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '-1 day 1 hour')$$,       '22023', 'ttl must be positive'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '7 days 0.000001 seconds')$$, '22023', 'ttl is too long'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '169 hours')$$,           '22023', 'ttl is too long'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '8 days')$$,              '22023', 'ttl is too long'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '100000000 days')$$,      '22023', 'ttl is too long'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '1 mon')$$,               '22023', 'ttl must not have a month or year component'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '1 year')$$,              '22023', 'ttl must not have a month or year component'),
    ($$forgeyard.lease_acquire('t1', 'free', 'o', '1 mon -30 days')$$,      '22023', 'ttl must not have a month or year component'),
    -- lease_renew(tenant, resource, epoch, ttl) on the live grant
    ($$forgeyard.lease_renew(NULL, 'live', pg_temp.ep('live'), '1 minute')$$,  '22004', 'tenant must not be NULL'),
    ($$forgeyard.lease_renew('', 'live', pg_temp.ep('live'), '1 minute')$$,    '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_renew(repeat('t', 129), 'live', pg_temp.ep('live'), '1 minute')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_renew('t1', NULL, pg_temp.ep('live'), '1 minute')$$,    '22004', 'resource must not be NULL'),
    ($$forgeyard.lease_renew('t1', '', pg_temp.ep('live'), '1 minute')$$,      '22023', 'resource must not be empty'),
    ($$forgeyard.lease_renew('t1', repeat('r', 513), pg_temp.ep('live'), '1 minute')$$, '22001', 'resource is longer than 512 bytes'),
    ($$forgeyard.lease_renew('t1', 'live', NULL, '1 minute')$$,                '22004', 'epoch must not be NULL'),
    ($$forgeyard.lease_renew('t1', 'live', pg_temp.ep('live'), NULL)$$,        '22004', 'ttl must not be NULL'),
    ($$forgeyard.lease_renew('t1', 'live', pg_temp.ep('live'), '0')$$,         '22023', 'ttl must be positive'),
    ($$forgeyard.lease_renew('t1', 'live', pg_temp.ep('live'), '-5 minutes')$$, '22023', 'ttl must be positive'),
    ($$forgeyard.lease_renew('t1', 'live', pg_temp.ep('live'), '7 days 1 second')$$, '22023', 'ttl is too long'),
    ($$forgeyard.lease_renew('t1', 'live', pg_temp.ep('live'), '1 mon')$$,     '22023', 'ttl must not have a month or year component'),
    -- lease_release(tenant, resource, epoch) on the live grant
    ($$forgeyard.lease_release(NULL, 'live', pg_temp.ep('live'))$$,           '22004', 'tenant must not be NULL'),
    ($$forgeyard.lease_release('', 'live', pg_temp.ep('live'))$$,             '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_release(repeat('t', 129), 'live', pg_temp.ep('live'))$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_release('t1', NULL, pg_temp.ep('live'))$$,             '22004', 'resource must not be NULL'),
    ($$forgeyard.lease_release('t1', '', pg_temp.ep('live'))$$,               '22023', 'resource must not be empty'),
    ($$forgeyard.lease_release('t1', repeat('r', 513), pg_temp.ep('live'))$$, '22001', 'resource is longer than 512 bytes'),
    ($$forgeyard.lease_release('t1', 'live', NULL)$$,                         '22004', 'epoch must not be NULL'),
    -- lease_fence(tenant, resource, epoch)
    ($$forgeyard.lease_fence(NULL, 'live', pg_temp.ep('live'))$$,             '22004', 'tenant must not be NULL'),
    ($$forgeyard.lease_fence('', 'live', pg_temp.ep('live'))$$,               '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_fence(repeat('t', 129), 'live', pg_temp.ep('live'))$$, '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_fence('t1', NULL, pg_temp.ep('live'))$$,               '22004', 'resource must not be NULL'),
    ($$forgeyard.lease_fence('t1', '', pg_temp.ep('live'))$$,                 '22023', 'resource must not be empty'),
    ($$forgeyard.lease_fence('t1', repeat('r', 513), pg_temp.ep('live'))$$,   '22001', 'resource is longer than 512 bytes'),
    ($$forgeyard.lease_fence('t1', 'live', NULL)$$,                           '22004', 'epoch must not be NULL'),
    -- lease_get(tenant, resource) of the live grant
    ($$forgeyard.lease_get(NULL, 'live')$$,                                   '22004', 'tenant must not be NULL'),
    ($$forgeyard.lease_get('', 'live')$$,                                     '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_get(repeat('t', 129), 'live')$$,                       '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_get(repeat('é', 65), 'live')$$,                        '22001', 'tenant is longer than 128 bytes'),
    ($$forgeyard.lease_get('t1', NULL)$$,                                     '22004', 'resource must not be NULL'),
    ($$forgeyard.lease_get('t1', '')$$,                                       '22023', 'resource must not be empty'),
    ($$forgeyard.lease_get('t1', repeat('r', 513))$$,                         '22001', 'resource is longer than 512 bytes'),
    ($$forgeyard.lease_get(NULL, NULL)$$,                                     '22004', 'tenant must not be NULL'),
    -- lease_reap(max_leases, tenant); NULL tenant means all tenants and is valid
    ($$forgeyard.lease_reap(NULL, 't1')$$,                                    '22004', 'max_leases must not be NULL'),
    ($$forgeyard.lease_reap(0, 't1')$$,                                       '22023', 'max_leases must be positive'),
    ($$forgeyard.lease_reap(-1, NULL)$$,                                      '22023', 'max_leases must be positive'),
    ($$forgeyard.lease_reap(10, '')$$,                                        '22023', 'tenant must not be empty'),
    ($$forgeyard.lease_reap(10, repeat('t', 129))$$,                          '22001', 'tenant is longer than 128 bytes');

SELECT throws_ok('SELECT * FROM ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad ORDER BY n;

SELECT results_eq('SELECT * FROM forgeyard.leases ORDER BY tenant_id, resource',
                  'SELECT * FROM leases_before ORDER BY tenant_id, resource',
                  'after every rejected call the leases table is exactly as before');
SELECT is((SELECT count(*) FROM forgeyard.leases WHERE resource = 'free'), 0::bigint,
          'no rejected acquire created a row');

-- A 22001 carries the actual length in its DETAIL.
CREATE FUNCTION pg_temp.err_detail(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN d;
END $$;
SELECT is(pg_temp.err_detail($$SELECT forgeyard.lease_acquire(repeat('é', 65), 'free', 'o', '1 minute')$$),
          'length is 130 bytes', '22001 detail gives the length in bytes');
SELECT is(pg_temp.err_detail($$SELECT forgeyard.lease_fence('t1', 'nope', 1)$$),
          'the lease expired, was released, or was taken over; stop work', 'FY001 detail tells the worker to stop');
SELECT is(pg_temp.err_detail($$SELECT * FROM forgeyard.lease_get('t1', repeat('r', 513))$$),
          'length is 513 bytes', 'lease_get: 22001 detail gives the length in bytes');

-------------------------------------------------------------------------------------------------
-- lease_get as an application role bound to a tenant (privileges in detail: access.sql)
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_lease_reader;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_lease_reader');
    PERFORM forgeyard.bind_tenant('fy_lease_reader', 't1');
END $$;
SET ROLE fy_lease_reader;
SELECT results_eq($$SELECT * FROM forgeyard.lease_get('t1', 'live')$$,
                  $$SELECT 'alice'::text, pg_temp.us('2030-05-01 00:00:00+00'), '2030-05-01 00:00:00+00'::timestamptz,
                           '2030-05-01 01:00:00+00'::timestamptz, 'live'::text$$,
                  'application role bound to t1: lease_get for t1');
SELECT is_empty($$SELECT * FROM forgeyard.lease_get('t1', 'free')$$,
                'application role bound to t1: lease_get of a never-leased resource of t1: no row');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('ta', 'shared')$$, 'FY040', 'tenant "ta" is not allowed for this role',
                 'application role bound to t1: lease_get for another tenant with a lease -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('tc', 'shared')$$, 'FY040', NULL,
                 'application role bound to t1: lease_get for another tenant without a lease -> FY040, not an empty answer');
SELECT throws_ok('SELECT * FROM forgeyard.leases', '42501', NULL,
                 'application role: the table itself stays closed (lease_get is the way to read a lease)');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- SET ROLE does not leave a binding: a login bound to t1 that SETs ROLE to an unbound group is
-- still bound (both the role in effect and the session's login role are checked)
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_lease_group NOLOGIN;
CREATE ROLE fy_lease_login LOGIN IN ROLE fy_lease_group;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_lease_group');
    PERFORM forgeyard.bind_tenant('fy_lease_login', 't1');
END $$;
GRANT SELECT, INSERT ON g TO fy_lease_group;   -- pg_temp.acq records its answers there
GRANT USAGE ON SEQUENCE g_n_seq TO fy_lease_group;
SET ROLE fy_lease_group;
CALL pg_temp.acq('grp', 't2', 'setrole', 'group', '1 minute');
RESET ROLE;
SELECT results_eq($$SELECT acquired, holder FROM g WHERE k = 'grp'$$, $$VALUES (true, 'group'::text)$$,
                  'the group alone (from an unbound session) is not bound: it may act for t2');
SET SESSION AUTHORIZATION fy_lease_login;
SET ROLE fy_lease_group;
SELECT results_eq('SELECT current_user::text COLLATE "default", session_user::text COLLATE "default"', $$VALUES ('fy_lease_group'::text, 'fy_lease_login'::text)$$,
                  'logged in as fy_lease_login (bound to t1), SET ROLE to fy_lease_group (unbound)');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t2', 'setrole-new', 'login', '1 minute')$$, 'FY040',
                 'tenant "t2" is not allowed for this role', 'after SET ROLE to the unbound group: acquire for t2 -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_get('t2', 'setrole')$$, 'FY040', NULL,
                 'after SET ROLE to the unbound group: lease_get for t2 -> FY040');
SELECT throws_ok(format('SELECT forgeyard.lease_release(%L, %L, %s)', 't2', 'setrole', pg_temp.ep('grp')), 'FY040', NULL,
                 'after SET ROLE to the unbound group: release of t2''s grant -> FY040');
CALL pg_temp.acq('login', 't1', 'setrole', 'login', '1 minute');
SELECT results_eq($$SELECT acquired, holder FROM g WHERE k = 'login'$$, $$VALUES (true, 'login'::text)$$,
                  'after SET ROLE to the unbound group: acquire for t1, the login''s tenant, works');
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT results_eq($$SELECT tenant_id, resource, owner, released_at FROM forgeyard.leases WHERE resource LIKE 'setrole%' ORDER BY 1$$,
                  $$VALUES ('t1'::text, 'setrole'::text, 'login'::text, NULL::timestamptz), ('t2', 'setrole', 'group', NULL)$$,
                  't2''s grant is untouched and the refused acquire created no row');

SELECT * FROM finish();
ROLLBACK;
