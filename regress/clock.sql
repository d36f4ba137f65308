-- forgeyard.now() and the setting forgeyard.now_override (docs/sql-api.md#clock). The setting as the C++
-- edition's library defines it (superuser-only, the reserved prefix) is checked by regress/cpp_clock.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(34);

SET TIME ZONE 'UTC';

-------------------------------------------------------------------------------------------------
-- Empty override: the real clock, clock_timestamp() (moves within a transaction), not now()
-------------------------------------------------------------------------------------------------
-- Reads clock_timestamp(), forgeyard.now(), clock_timestamp() in this order.
CREATE FUNCTION pg_temp.between_clock_reads() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    a timestamptz := clock_timestamp();
    b timestamptz := forgeyard.now();
    c timestamptz := clock_timestamp();
BEGIN
    RETURN a <= b AND b <= c;
END $$;
-- Spins (no sleeping) until forgeyard.now() passes t; true if it did within the bound.
CREATE FUNCTION pg_temp.clock_passes(t timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..10000000 LOOP
        IF forgeyard.now() > t THEN RETURN true; END IF;
    END LOOP;
    RETURN false;
END $$;
CREATE TEMP TABLE reads (k text PRIMARY KEY, t timestamptz);

SELECT ok(pg_temp.between_clock_reads(), 'empty override: forgeyard.now() is clock_timestamp()');
SELECT ok(forgeyard.now() > now(), 'empty override: forgeyard.now() is later than the transaction start now()');
INSERT INTO reads VALUES ('first', forgeyard.now());
SELECT ok(pg_temp.clock_passes((SELECT t FROM reads WHERE k = 'first')),
          'empty override: forgeyard.now() moves on within one transaction');
SELECT cmp_ok(forgeyard.now(), '>', (SELECT t FROM reads WHERE k = 'first'),
              'a later statement in the same transaction reads a later clock');

-------------------------------------------------------------------------------------------------
-- An override replaces the clock, parsed at each call
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT is(forgeyard.now(), '2030-01-01 00:00:00+00'::timestamptz, 'override: forgeyard.now() returns it');
SELECT is(forgeyard.now(), '2030-01-01 00:00:00+00'::timestamptz, 'override: the clock stands still');
SET forgeyard.now_override = '2030-01-01 00:00:00.000001+00';
SELECT is(forgeyard.now(), '2030-01-01 00:00:00.000001+00'::timestamptz, 'override moved by 1 microsecond is seen at once');
SET forgeyard.now_override = '2001-02-03 04:05:06.789+00';
SELECT is(forgeyard.now(), '2001-02-03 04:05:06.789+00'::timestamptz, 'override moved backwards is seen at once');
SET TIME ZONE 'Asia/Tokyo';
SET forgeyard.now_override = '2030-01-01 09:00:00';
SELECT is(forgeyard.now(), '2030-01-01 00:00:00+00'::timestamptz, 'an override without a zone is read in the session TimeZone');
SET TIME ZONE 'UTC';
SELECT is(forgeyard.now(), '2030-01-01 09:00:00+00'::timestamptz, 'and is parsed again at the next call, in the new TimeZone');

SELECT is(set_config('forgeyard.now_override', '2030-06-01 00:00:00+00', true), '2030-06-01 00:00:00+00',
          'set_config(..., is_local) sets the override');
SELECT is(forgeyard.now(), '2030-06-01 00:00:00+00'::timestamptz, 'forgeyard.now() follows set_config');

-- The lease functions and the view use the same clock.
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT results_eq($$SELECT acquired, epoch, expires_at FROM forgeyard.lease_acquire('t', 'clock', 'alice', '10 seconds')$$,
                  $$VALUES (true, 1893456000000000::bigint, '2030-01-01 00:00:10+00'::timestamptz)$$,
                  'lease_acquire reads the override: epoch and expiry from it');
SET forgeyard.now_override = '2030-01-01 00:00:04+00';
SELECT results_eq($$SELECT state, remaining FROM forgeyard.lease_status WHERE resource = 'clock'$$,
                  $$VALUES ('live'::text, '6 seconds'::interval)$$, 'lease_status reads the override');
SET forgeyard.now_override = '2030-01-01 00:00:10+00';
SELECT results_eq($$SELECT state, remaining FROM forgeyard.lease_status WHERE resource = 'clock'$$,
                  $$VALUES ('expired'::text, NULL::interval)$$, 'moving the override expires the lease');

-- Empty again: back to the real clock.
SET forgeyard.now_override = '';
SELECT ok(pg_temp.between_clock_reads(), 'override set to empty: the real clock again');
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
RESET forgeyard.now_override;
SELECT is(current_setting('forgeyard.now_override'), '', 'RESET empties the override');
SELECT ok(pg_temp.between_clock_reads(), 'after RESET: the real clock');

-------------------------------------------------------------------------------------------------
-- A bad value is an ERROR at each use, and changes nothing
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = 'not a time';
SELECT throws_ok('SELECT forgeyard.now()', '22007', NULL, 'an override that does not parse: forgeyard.now() raises 22007');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t', 'bad-clock', 'alice', '10 seconds')$$, '22007', NULL,
                 'an override that does not parse: lease_acquire raises 22007');
SELECT throws_ok('SELECT * FROM forgeyard.lease_status', '22007', NULL,
                 'an override that does not parse: lease_status raises 22007');
SET forgeyard.now_override = 'infinity';
SELECT throws_ok('SELECT forgeyard.now()', '22023', 'forgeyard.now_override is out of range',
                 'override infinity: forgeyard.now() raises 22023 naming the setting');
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t', 'bad-clock', 'alice', '10 seconds')$$, '22023',
                 'forgeyard.now_override is out of range', 'override infinity: lease_acquire raises 22023');
SET forgeyard.now_override = '-infinity';
SELECT throws_ok('SELECT forgeyard.now()', '22023', 'forgeyard.now_override is out of range',
                 'override -infinity: forgeyard.now() raises 22023');
SET forgeyard.now_override = '294270-01-01 00:00:00+00';
SELECT throws_ok($$SELECT * FROM forgeyard.lease_acquire('t', 'bad-clock', 'alice', '7 days')$$, '22023',
                 'forgeyard.now_override is out of range',
                 'an override at the end of the timestamptz range (now + ttl, epoch would overflow): 22023');
SET forgeyard.now_override = '4713-01-01 00:00:00+00 BC';
SELECT is(forgeyard.now(), '4713-01-01 00:00:00+00 BC'::timestamptz, 'the earliest timestamptz is a valid override');
RESET forgeyard.now_override;
SELECT is((SELECT count(*) FROM forgeyard.leases WHERE resource = 'bad-clock'), 0::bigint,
          'no call under a bad override created a row');
SELECT ok(pg_temp.between_clock_reads(), 'after a bad override is reset, the real clock works');

-------------------------------------------------------------------------------------------------
-- Only a superuser or the installation's owner moves the clock: another login role cannot, whether
-- the setting refuses it (the C++ edition: a superuser-only setting, 42501) or forgeyard.now()
-- ignores what it set (the PL/pgSQL edition, where no library defines the setting). The C++
-- setting's own refusals under SET ROLE are checked by regress/cpp_clock.sql.
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_clock_app;
DO $$ BEGIN PERFORM forgeyard.grant_usage('fy_clock_app'); END $$;
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SET ROLE fy_clock_app;
SELECT is(forgeyard.now(), '2030-01-01 00:00:00+00'::timestamptz,
          'an application role reads the override a superuser set');
RESET ROLE;
-- What forgeyard.now() follows for the session: the real clock, or the fixed time it returns.
CREATE FUNCTION pg_temp.clock_source() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF pg_temp.between_clock_reads() THEN
        RETURN 'real clock';
    END IF;
    RETURN forgeyard.now()::text;
END $$;
-- Runs sql (a 42501 refusal is caught); whether forgeyard.now() follows the same source after it.
CREATE FUNCTION pg_temp.clock_kept(sql text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.clock_source();
BEGIN
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
    RETURN pg_temp.clock_source() = before;
END $$;
CREATE TEMP TABLE clock_before (s text);
GRANT SELECT, INSERT ON clock_before TO fy_clock_app;
SET SESSION AUTHORIZATION fy_clock_app;
INSERT INTO clock_before SELECT pg_temp.clock_source();
SELECT ok(pg_temp.clock_kept($$SET forgeyard.now_override = '2040-01-01 00:00:00+00'$$),
          'a login role that is not superuser: SET forgeyard.now_override does not move its clock');
SELECT ok(pg_temp.clock_kept($$SET LOCAL forgeyard.now_override = '2040-01-01 00:00:00+00'$$),
          'a login role that is not superuser: SET LOCAL forgeyard.now_override does not move its clock');
SELECT ok(pg_temp.clock_kept($$SELECT set_config('forgeyard.now_override', '2040-01-01 00:00:00+00', false)$$),
          'a login role that is not superuser: set_config(forgeyard.now_override) does not move its clock');
SELECT ok(pg_temp.clock_kept('RESET forgeyard.now_override'),
          'a login role that is not superuser: RESET forgeyard.now_override does not move its clock');
SELECT is(pg_temp.clock_source(), (SELECT s FROM clock_before),
          'after all the attempts its clock is what it was before them (never 2040)');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
