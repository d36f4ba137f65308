-- @edition cpp
-- The C++ edition's own machinery (docs/architecture.md#the-boundary-between-c-and-postgresql):
-- probes that are C functions of forgeyard.so which no install script names, so they exist in the
-- C++ edition only. pg::parse_input turns bad input into 22023 and lets anything else (a cancel)
-- through; invoke() restores PostgreSQL's error stacks and cuts long texts at a character
-- boundary; audit_verify and audit_read keep their memory to a scratch context per page.
-- (Moved unchanged from regress/boundary.sql, which checks what boundary_throw and
-- boundary_pg_error answer on both editions; tests/pg/pgtap.sh runs this file on the C++ edition.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(25);

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

CREATE TEMP TABLE mem (k text PRIMARY KEY, bytes bigint);

-------------------------------------------------------------------------------------------------
-- Probes defined only here: C functions of forgeyard.so that no install script names
-------------------------------------------------------------------------------------------------
CREATE SCHEMA boundary_probe;
CREATE FUNCTION boundary_probe.parse_input(type regtype, input text) RETURNS boolean
    LANGUAGE c AS '$libdir/forgeyard', 'fy_boundary_parse_input';
CREATE FUNCTION boundary_probe.throw_repeat(sqlstate text, piece text, times int) RETURNS void
    LANGUAGE c AS '$libdir/forgeyard', 'fy_boundary_throw_repeat';
CREATE FUNCTION boundary_probe.break_stacks(exception_stack boolean, context_stack boolean, then_throw boolean)
    RETURNS boolean LANGUAGE c AS '$libdir/forgeyard', 'fy_boundary_break_stacks';
CREATE FUNCTION boundary_probe.peak_memory(sql text) RETURNS bigint
    LANGUAGE c AS '$libdir/forgeyard', 'fy_boundary_peak_memory';
-- {sqlstate, message, context} of the error sql raises.
CREATE FUNCTION pg_temp.caught_context(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; msg text; ctx text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
    RETURN ARRAY[st, msg, ctx];
END $$;

-------------------------------------------------------------------------------------------------
-- No PostgreSQL error is caught to carry on: bad input becomes 22023 inside a subtransaction,
-- anything else (a cancel above all) comes back unchanged
-------------------------------------------------------------------------------------------------
-- pg::parse_input is what pg::parse_interval (queue options) runs. A domain over interval lets
-- the input step run SQL: a CHECK that sleeps (and is cancelled) or fails.
CREATE FUNCTION boundary_probe.sleepy(ok boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(10);
    RETURN ok;
END $$;
CREATE DOMAIN boundary_probe.slow_interval AS interval CHECK (boundary_probe.sleepy(VALUE IS NOT NULL));
CREATE DOMAIN boundary_probe.short_interval AS interval CHECK (VALUE < '1 day');

SELECT is(boundary_probe.parse_input('interval', '1 hour 30 minutes'), true, 'parse_input reads a good interval');
SELECT is(pg_temp.caught($$SELECT boundary_probe.parse_input('interval', 'nonsense')$$),
          ARRAY['22023', 'input must be a value of that type', 'got "nonsense"', ''],
          'bad syntax (22007) becomes 22023 naming the argument');
SELECT is(pg_temp.caught($$SELECT boundary_probe.parse_input('interval', '2000000000 years')$$),
          ARRAY['22023', 'input must be a value of that type', 'got "2000000000 years"', ''],
          'a value out of range (class 22) becomes 22023 too');
SELECT is((pg_temp.caught($$SELECT boundary_probe.parse_input('boundary_probe.short_interval', '2 days')$$))[1:2],
          ARRAY['23514', 'value for domain boundary_probe.short_interval violates check constraint "short_interval_check"'],
          'an error that is not a data exception (a failed CHECK, 23514) comes back unchanged');
SET LOCAL statement_timeout = '200ms';
SELECT is((pg_temp.caught($$SELECT boundary_probe.parse_input('boundary_probe.slow_interval', '1 hour')$$))[1:2],
          ARRAY['57014', 'canceling statement due to statement timeout'],
          'a cancel (statement_timeout) while the input is read comes back as 57014, not as "must be"');
RESET statement_timeout;
SELECT is(boundary_probe.parse_input('boundary_probe.short_interval', '1 hour'), true,
          'after the cancel the subtransaction is gone and parse_input works again');
SELECT is(pg_temp.error_loop(100), 100, 'and so do 100 more caught errors');

-------------------------------------------------------------------------------------------------
-- invoke() checks that PostgreSQL's error stacks are as it found them
-------------------------------------------------------------------------------------------------
SELECT is(pg_temp.caught($$SELECT boundary_probe.break_stacks(false, true, false)$$),
          ARRAY['XX000', 'forgeyard: a function body returned with PostgreSQL''s error context stack (error_context_stack) changed', '', ''],
          'a body that returns with an extra error context frame: XX000');
SELECT is(pg_temp.caught($$SELECT boundary_probe.break_stacks(true, false, false)$$),
          ARRAY['XX000', 'forgeyard: a function body returned with PostgreSQL''s exception stack (PG_exception_stack) changed', '', ''],
          'a body that returns with PG_exception_stack changed: XX000');
SELECT is(pg_temp.caught($$SELECT boundary_probe.break_stacks(true, true, true)$$),
          ARRAY['XX000', 'forgeyard: a function body returned with PostgreSQL''s exception stack and error context stack changed',
                'the error it raised: thrown after breaking the stacks', ''],
          'a body that throws with both changed: XX000, its own error in the detail');
-- Had PG_exception_stack stayed NULL, this ERROR would have been promoted to FATAL (the session
-- ends); had the frame stayed, it would show in the error's context.
SELECT is(ARRAY[c[1], c[2], (c[3] LIKE '%left behind%')::text], ARRAY['22012', 'division by zero', 'false'],
          'after them an ERROR is an ERROR again, with no frame left behind in its context')
  FROM pg_temp.caught_context($$SELECT 1/0$$) c;

-------------------------------------------------------------------------------------------------
-- Messages and details over invoke()'s 1024-byte buffers are cut at a character boundary
-------------------------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.valid_utf8(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RETURN convert_from(convert_to(t, 'UTF8'), 'UTF8') = t;
EXCEPTION WHEN OTHERS THEN
    RETURN false;  -- 22021: invalid byte sequence
END $$;
CREATE TEMP TABLE long_error AS
SELECT piece, pg_temp.caught(format('SELECT boundary_probe.throw_repeat(%L, %L, %s)', 'FY001', piece, 1100)) AS e
  FROM unnest(ARRAY['é', '€', '😀', 'x']) piece;
SELECT is((SELECT e FROM long_error WHERE piece = 'é'), ARRAY['FY001', repeat('é', 511), repeat('é', 511), ''],
          '2-byte characters: message and detail cut to 1022 bytes, not inside a character');
SELECT is((SELECT e FROM long_error WHERE piece = '😀'), ARRAY['FY001', repeat('😀', 255), repeat('😀', 255), ''],
          '4-byte characters: cut to 1020 bytes');
SELECT is((SELECT e FROM long_error WHERE piece = '€'), ARRAY['FY001', repeat('€', 341), repeat('€', 341), ''],
          '3-byte characters: exactly 1023 bytes fit');
SELECT is((SELECT e FROM long_error WHERE piece = 'x'), ARRAY['FY001', repeat('x', 1023), repeat('x', 1023), ''],
          'ASCII: 1023 bytes');
SELECT is((SELECT count(*) FROM long_error, unnest(e[2:3]) t
            WHERE pg_temp.valid_utf8(t) AND octet_length(t) <= 1023), 8::bigint,
          'every cut message and detail is valid UTF-8 of at most 1023 bytes');

-------------------------------------------------------------------------------------------------
-- Memory: audit_verify and audit_read over a chain of 200,000 events stay within a small bound
-------------------------------------------------------------------------------------------------
-- boundary_probe.peak_memory(sql) samples the sum pg_backend_memory_contexts shows at the end
-- of every statement sql runs (each page read is one), and returns the peak over the start.
-- A growing plpgsql string of 4 MB shows up in it, so the probe sees what a body keeps:
SELECT cmp_ok(boundary_probe.peak_memory($q$DO $d$ DECLARE a text := ''; BEGIN
                  FOR i IN 1..1000 LOOP a := a || repeat('x', 4000); PERFORM FROM pg_class LIMIT 1; END LOOP; END $d$$q$),
              '>', 4000000::bigint, 'the probe sees 4 MB held across statements');
SELECT is((SELECT count(*) FROM generate_series(0, 199) b,
                  LATERAL forgeyard.audit_append_batch('mem', array_fill('actor-' || b, ARRAY[1000]),
                                                       array_fill('action.memory'::text, ARRAY[1000]),
                                                       array_fill('resource/' || b, ARRAY[1000]),
                                                       array_fill('{"k": "v"}'::jsonb, ARRAY[1000])) a),
          200000::bigint, '200,000 events appended in batches of 1000');
SELECT results_eq($$SELECT ok, checked FROM forgeyard.audit_verify('mem', 1, 1000)$$, $$VALUES (true, 1000::bigint)$$,
                  'warm-up: the first 1000 events verify (plans prepared)');
SELECT is((SELECT count(*) FROM forgeyard.audit_read('mem', 1, 100)), 100::bigint, 'warm-up: audit_read');
-- Without a scratch context per page, each event's text columns would stay until the end of
-- the call: about 30 MB for verify and 4 MB for a read of 10,000 events. Measured with it:
-- about 250 kB for either.
INSERT INTO mem SELECT 'verify_before', sum(total_bytes) FROM pg_backend_memory_contexts;
INSERT INTO mem SELECT 'verify_peak', boundary_probe.peak_memory($$SELECT ok FROM forgeyard.audit_verify('mem')$$);
INSERT INTO mem SELECT 'verify_after', sum(total_bytes) FROM pg_backend_memory_contexts;
SELECT cmp_ok((SELECT bytes FROM mem WHERE k = 'verify_peak'), '<', 1048576::bigint,
              format('verifying 200,000 events grows memory by under 1 MB at its peak (was %s bytes)',
                     (SELECT bytes FROM mem WHERE k = 'verify_peak')));
SELECT cmp_ok((SELECT a.bytes - b.bytes FROM mem a, mem b WHERE a.k = 'verify_after' AND b.k = 'verify_before'), '<', 131072::bigint,
              'and keeps under 128 kB of it after the call');
SELECT results_eq($$SELECT ok, checked FROM forgeyard.audit_verify('mem')$$, $$VALUES (true, 200000::bigint)$$,
                  'the chain of 200,000 events verifies');
-- The result rows are memory by nature: a small work_mem sends the tuplestore to disk.
SET LOCAL work_mem = '64kB';
INSERT INTO mem SELECT 'read_peak', boundary_probe.peak_memory($$SELECT count(*) FROM forgeyard.audit_read('mem', 150001, 10000)$$);
SELECT cmp_ok((SELECT bytes FROM mem WHERE k = 'read_peak'), '<', 1048576::bigint,
              format('reading 10,000 events grows memory by under 1 MB at its peak (was %s bytes)',
                     (SELECT bytes FROM mem WHERE k = 'read_peak')));
SELECT results_eq($$SELECT min(seq), max(seq), count(*), count(DISTINCT actor), bool_and(details = '{"k": "v"}')
                      FROM forgeyard.audit_read('mem', 150001, 10000)$$,
                  $$VALUES (150001::bigint, 160000::bigint, 10000::bigint, 10::bigint, true)$$,
                  'audit_read returns those 10,000 events whole (its rows spilled to disk)');
RESET work_mem;

SELECT * FROM finish();
ROLLBACK;
