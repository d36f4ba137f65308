-- The C++ / PostgreSQL boundary (docs/architecture.md#the-boundary-between-c-and-postgresql): a C++ exception becomes a clean ERROR with the right
-- SQLSTATE; a PostgreSQL error raised inside guarded C++ code comes back unchanged (SQLSTATE,
-- message, detail, hint, constraint), leaks nothing and leaves the session usable.
-- The probes boundary_throw and boundary_pg_error exist in both editions and answer the same (the
-- PL/pgSQL edition raises what the C++ edition's exception becomes); the probes of the C++
-- machinery itself (C functions no install script names) are in regress/cpp_boundary.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(53);

SET TIME ZONE 'UTC';

-- {sqlstate, message, detail, hint} of the error sql raises (NULL if none). Catches what
-- throws_ok cannot: query_canceled (57014) is not part of WHEN OTHERS.
CREATE FUNCTION pg_temp.caught(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hnt text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    RETURN ARRAY[st, msg, det, hnt];
END $$;
CREATE FUNCTION pg_temp.caught_object(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; sch text; tab text; con text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, sch = SCHEMA_NAME, tab = TABLE_NAME, con = CONSTRAINT_NAME;
    RETURN ARRAY[st, sch, tab, con];
END $$;

-------------------------------------------------------------------------------------------------
-- A C++ exception becomes an ERROR with its SQLSTATE, message and detail
-------------------------------------------------------------------------------------------------
SELECT throws_ok($$SELECT forgeyard.boundary_throw('FY001', 'x')$$, 'FY001', 'x', 'boundary_throw(FY001, x): ERROR FY001 "x"');
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_throw('FY001', 'x')$$),
          ARRAY['FY001', 'x', 'raised by forgeyard.boundary_throw', ''], 'the exception''s detail comes through too');
SELECT throws_ok($$SELECT forgeyard.boundary_throw(NULL, 'y')$$, 'XX000', 'y',
                 'a plain std::runtime_error: ERROR XX000 with its what()');
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_throw(NULL, 'y')$$), ARRAY['XX000', 'y', '', ''],
          'a plain std::runtime_error has no detail');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('40001', 'serialize')$$, '40001', 'serialize', '40001 survives');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('40P01', 'deadlock')$$, '40P01', 'deadlock', '40P01 survives');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('22023', 'bad')$$, '22023', 'bad', '22023 survives');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('FY040', 'tenant')$$, 'FY040', 'tenant', 'FY040 survives');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('XX001', 'corrupt')$$, 'XX001', 'corrupt', 'XX001 survives');
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_throw('57014', 'cancel')$$),
          ARRAY['57014', 'cancel', 'raised by forgeyard.boundary_throw', ''],
          '57014 survives (caught as query_canceled, not WHEN OTHERS)');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('FY002')$$, 'FY002', 'boom', 'the message defaults to boom');
SELECT is((pg_temp.caught(format('SELECT forgeyard.boundary_throw(%L, %L)', 'FY001', repeat('é', 500))))[2],
          repeat('é', 500), 'a 1000-byte message arrives whole');
-- A code that is not a SQLSTATE must not be packed into a garbage code: XX000, message kept.
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_throw('abc', 'm1')$$),
          ARRAY['XX000', 'm1', 'raised by forgeyard.boundary_throw', ''], 'a 3-character code: XX000, message kept');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('fy001', 'm2')$$, 'XX000', 'm2', 'a lower-case code: XX000');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('FY#01', 'm3')$$, 'XX000', 'm3', 'a code with a symbol: XX000');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('00000', 'm4')$$, 'XX000', 'm4', 'class 00 (success) as an error: XX000');
-- The probe's own arguments are checked like any other.
SELECT throws_ok($$SELECT forgeyard.boundary_throw('', 'm')$$, '22023', 'sqlstate must not be empty', 'empty sqlstate: 22023');
SELECT throws_ok($$SELECT forgeyard.boundary_throw('FY0011', 'm')$$, '22001', 'sqlstate is longer than 5 bytes',
                 'a 6-character sqlstate: 22001');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error(NULL)$$, '22004', 'sql must not be NULL', 'boundary_pg_error(NULL): 22004');

-------------------------------------------------------------------------------------------------
-- A PostgreSQL error inside guarded C++ code comes back unchanged
-------------------------------------------------------------------------------------------------
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('SELECT 1/0')$$, '22012', 'division by zero',
                 'SELECT 1/0 through the guard: 22012 "division by zero"');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('SELEC 1')$$, '42601', NULL, 'a syntax error: 42601');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('SELECT * FROM no_such_table_anywhere')$$, '42P01',
                 'relation "no_such_table_anywhere" does not exist', 'an unknown table: 42P01 with its message');
SELECT is(pg_temp.caught($q$SELECT forgeyard.boundary_pg_error(
              $s$DO $d$ BEGIN RAISE EXCEPTION 'custom' USING ERRCODE = '40P01', DETAIL = 'd1', HINT = 'h1'; END $d$$s$)$q$),
          ARRAY['40P01', 'custom', 'd1', 'h1'], 'RAISE 40P01 with DETAIL and HINT: all preserved');
SELECT is(pg_temp.caught($q$SELECT forgeyard.boundary_pg_error(
              $s$DO $d$ BEGIN RAISE EXCEPTION 'retry me' USING ERRCODE = 'serialization_failure'; END $d$$s$)$q$),
          ARRAY['40001', 'retry me', '', ''], 'RAISE 40001: preserved');
SELECT is(pg_temp.caught($q$SELECT forgeyard.boundary_pg_error(
              $s$DO $d$ BEGIN RAISE EXCEPTION 'stale' USING ERRCODE = 'FY001', DETAIL = 'epoch 7'; END $d$$s$)$q$),
          ARRAY['FY001', 'stale', 'epoch 7', ''], 'RAISE FY001 (our own code) from SQL: preserved');
SELECT is(pg_temp.caught($q$SELECT forgeyard.boundary_pg_error(
              $s$DO $d$ BEGIN RAISE EXCEPTION 'cancelled' USING ERRCODE = 'query_canceled'; END $d$$s$)$q$),
          ARRAY['57014', 'cancelled', '', ''], 'RAISE 57014: preserved');
-- Statements that cannot run inside a function: 0A000 on both editions.
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('COMMIT')$$, '0A000', NULL,
                 'transaction control inside the probe: 0A000');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('COPY (SELECT 1) TO STDOUT')$$, '0A000', NULL,
                 'COPY to the client inside the probe: 0A000');
CREATE TEMP TABLE uniq (a int CONSTRAINT uniq_a_key PRIMARY KEY);
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_pg_error('INSERT INTO uniq VALUES (1), (1)')$$),
          ARRAY['23505', 'duplicate key value violates unique constraint "uniq_a_key"', 'Key (a)=(1) already exists.', ''],
          'a unique violation: SQLSTATE, message and detail preserved');
SELECT is((pg_temp.caught_object($$SELECT forgeyard.boundary_pg_error('INSERT INTO uniq VALUES (1), (1)')$$))[3:4],
          ARRAY['uniq', 'uniq_a_key'], 'a unique violation: table and constraint name preserved');

-- Nested: C++ -> SPI -> C++ -> exception, and C++ -> SPI -> lease function -> FY001.
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_pg_error('SELECT forgeyard.boundary_throw(''40001'', ''inner'')')$$),
          ARRAY['40001', 'inner', 'raised by forgeyard.boundary_throw', ''],
          'an exception of a nested forgeyard call crosses two boundaries unchanged');
SELECT is(pg_temp.caught($$SELECT forgeyard.boundary_pg_error('SELECT forgeyard.lease_fence(''t'', ''none'', 7)')$$),
          ARRAY['FY001', 'lease epoch 7 is not the live grant of "none"',
                'the lease expired, was released, or was taken over; stop work', ''],
          'FY001 of a nested lease_fence crosses the boundary unchanged');

-- A real cancel (statement_timeout) while guarded code runs a long statement.
SET LOCAL statement_timeout = '100ms';
SELECT is((pg_temp.caught($$SELECT forgeyard.boundary_pg_error('SELECT count(*) FROM generate_series(1, 10000000000)')$$))[1:2],
          ARRAY['57014', 'canceling statement due to statement timeout'],
          'statement_timeout inside guarded code: 57014 comes back');
RESET statement_timeout;

-------------------------------------------------------------------------------------------------
-- The ok path, and the session after errors
-------------------------------------------------------------------------------------------------
SELECT is(forgeyard.boundary_pg_error('SELECT g FROM generate_series(1, 5) g'), 5::bigint,
          'boundary_pg_error returns the row count');
SELECT is(forgeyard.boundary_pg_error('CREATE TEMP TABLE bpe (a int); INSERT INTO bpe SELECT generate_series(1, 3)'), 3::bigint,
          'several statements: the row count of the last');
SELECT is((SELECT count(*) FROM bpe), 3::bigint, 'the work done through SPI is part of the caller''s transaction');
SELECT is(forgeyard.boundary_pg_error('SELECT 1'), 1::bigint, 'after the errors above the guarded SPI path still works');
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t', 'after-errors', 'alice', '1 minute')$$,
                  $$VALUES (true, 'alice'::text)$$, 'after the errors above a lease call works');

-- n caught errors in a row, each in its own subtransaction (EXCEPTION block). Each iteration
-- first writes (a lease), then fails in guarded code; the subtransaction undoes the write.
-- Returns how many errors came back with the expected SQLSTATE.
CREATE FUNCTION pg_temp.error_loop(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    right_code int := 0;
    expected text;
BEGIN
    FOR i IN 1..n LOOP
        BEGIN
            PERFORM forgeyard.lease_acquire('loop', 'r' || (i % 50), 'w', '1 minute');
            CASE i % 4
                WHEN 0 THEN expected := '22012'; PERFORM forgeyard.boundary_pg_error('SELECT 1/0');
                WHEN 1 THEN expected := '40001'; PERFORM forgeyard.boundary_throw('40001', 'again');
                WHEN 2 THEN expected := 'FY001'; PERFORM forgeyard.lease_renew('loop', 'none', i, '1 minute');
                ELSE        expected := '40P01'; PERFORM forgeyard.boundary_pg_error(
                                'SELECT forgeyard.boundary_throw(''40P01'', ''nested'')');
            END CASE;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE = expected THEN right_code := right_code + 1; END IF;
        END;
    END LOOP;
    RETURN right_code;
END $$;

SELECT is(pg_temp.error_loop(1000), 1000, '1000 caught errors in one transaction, each with the right SQLSTATE');
SELECT is((SELECT count(*) FROM forgeyard.leases WHERE tenant_id = 'loop'), 0::bigint,
          'every write before a caught error was rolled back with its subtransaction');
SELECT results_eq($$SELECT acquired, holder FROM forgeyard.lease_acquire('t', 'after-loop', 'bob', '1 minute')$$,
                  $$VALUES (true, 'bob'::text)$$, 'after 1000 caught errors a lease call works in the same transaction');
SELECT is(forgeyard.lease_release('t', 'after-loop', (SELECT epoch FROM forgeyard.leases WHERE resource = 'after-loop')), true,
          'and so does release');
SELECT is(forgeyard.boundary_pg_error('SELECT g FROM generate_series(1, 7) g'), 7::bigint,
          'after 1000 caught errors the guarded SPI path works');
SELECT throws_ok($$SELECT forgeyard.boundary_pg_error('SELECT 1/0')$$, '22012', 'division by zero',
                 'after 1000 caught errors an error still comes back unchanged');

-------------------------------------------------------------------------------------------------
-- Memory: 2000 more caught errors do not grow the backend's memory
-------------------------------------------------------------------------------------------------
-- The loop above warmed every cache this loop touches. A leak of one ErrorData (or any ~64 bytes)
-- per error would add well over 128 kB; measured growth without a leak is 0 to a few kB.
CREATE TEMP TABLE mem (k text PRIMARY KEY, bytes bigint);
INSERT INTO mem SELECT 'before', sum(total_bytes) FROM pg_backend_memory_contexts;
SELECT is(pg_temp.error_loop(2000), 2000, '2000 more caught errors');
INSERT INTO mem SELECT 'after', sum(total_bytes) FROM pg_backend_memory_contexts;
SELECT cmp_ok((SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'after' AND b.k = 'before'), '<', 131072::bigint,
              format('memory growth after 2000 caught errors is under 128 kB (was %s bytes)',
                     (SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'after' AND b.k = 'before')));

-- The same for the C++-only path (no PostgreSQL error inside) and the PG-error-only path.
CREATE FUNCTION pg_temp.throw_loop(n int, sql text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE caught int := 0;
BEGIN
    FOR i IN 1..n LOOP
        BEGIN
            EXECUTE sql;
        EXCEPTION WHEN OTHERS THEN
            caught := caught + 1;
        END;
    END LOOP;
    RETURN caught;
END $$;
SELECT is(pg_temp.throw_loop(200, $$SELECT forgeyard.boundary_throw('FY001', repeat('x', 900))$$), 200, 'warm-up: C++ exceptions');
SELECT is(pg_temp.throw_loop(200, $$SELECT forgeyard.boundary_pg_error('SELECT 1/0')$$), 200, 'warm-up: PostgreSQL errors');
INSERT INTO mem SELECT 'before2', sum(total_bytes) FROM pg_backend_memory_contexts;
SELECT is(pg_temp.throw_loop(2000, $$SELECT forgeyard.boundary_throw('FY001', repeat('x', 900))$$), 2000, '2000 C++ exceptions');
SELECT is(pg_temp.throw_loop(2000, $$SELECT forgeyard.boundary_pg_error('SELECT 1/0')$$), 2000, '2000 PostgreSQL errors through the guard');
INSERT INTO mem SELECT 'after2', sum(total_bytes) FROM pg_backend_memory_contexts;
SELECT cmp_ok((SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'after2' AND b.k = 'before2'), '<', 131072::bigint,
              format('memory growth after 2000 C++ exceptions and 2000 guarded PostgreSQL errors is under 128 kB (was %s bytes)',
                     (SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'after2' AND b.k = 'before2')));

-- C++ exception objects live in malloc'd memory, which pg_backend_memory_contexts cannot see
-- (e.g. an ereport from inside a catch block would skip __cxa_end_catch and leak each exception
-- with its 900-byte message). The backend's private resident memory (RssAnon, Linux) can.
CREATE FUNCTION pg_temp.rss_anon() RETURNS bigint LANGUAGE sql AS $$
    SELECT (regexp_match(pg_read_file('/proc/self/status'), 'RssAnon:\s+(\d+) kB'))[1]::bigint * 1024
$$;
INSERT INTO mem SELECT 'rss_before', pg_temp.rss_anon();
SELECT is(pg_temp.throw_loop(4000, $$SELECT forgeyard.boundary_throw('FY001', repeat('x', 900))$$), 4000, '4000 C++ exceptions');
INSERT INTO mem SELECT 'rss_after', pg_temp.rss_anon();
SELECT cmp_ok((SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'rss_after' AND b.k = 'rss_before'), '<', 1048576::bigint,
              format('private resident memory growth after 4000 C++ exceptions is under 1 MB (was %s bytes)',
                     (SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'rss_after' AND b.k = 'rss_before')));

SELECT * FROM finish();
ROLLBACK;
