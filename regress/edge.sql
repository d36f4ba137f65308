-- Bad input (docs/errors.md): every function of the SQL API, taken from the catalog so that a new
-- function is covered without editing this file, is called with edge-case arguments (NULL, empty,
-- huge, control characters, extremes, wrong shapes, another tenant's ids), one argument at a time
-- on top of valid ones. Each call answers a documented SQLSTATE, never an internal error; a call
-- that fails changes nothing (every forgeyard table and sequence hashed before and after); a NULL
-- for a required argument is 22004; and a call for one tenant never changes another tenant's rows,
-- whatever its outcome.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql
\ir lib/err.sql
\ir lib/api_calls.sql

SELECT plan(13);

SET TIME ZONE 'UTC';
SET forgeyard.now_override = '2030-01-01 00:00:00+00';

-------------------------------------------------------------------------------------------------
-- Fixtures: the same objects for tenant 'edge' (the one every call names) and tenant 'other'
-------------------------------------------------------------------------------------------------
CREATE ROLE fy_edge_role;
CREATE TABLE public.edge_rows (tenant_id text, id integer, name text, entity_version bigint NOT NULL DEFAULT 1,
                               PRIMARY KEY (tenant_id, id));
SELECT forgeyard.enable_versioning('public.edge_rows') \g /dev/null
INSERT INTO public.edge_rows (tenant_id, id, name) VALUES ('edge', 1, 'n'), ('other', 1, 'n');

SELECT pg_temp.fixtures('edge'), pg_temp.fixtures('other') \g /dev/null

-- Every forgeyard table and sequence (and the compare-and-set table), hashed: one text.
CREATE FUNCTION pg_temp.state_hash(only_tenant text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record; acc text := ''; h text;
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, c.relkind,
                    EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id') AS tenanted
               FROM pg_class c
              WHERE (c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'S'))
                 OR c.oid = 'public.edge_rows'::regclass
              ORDER BY c.oid::regclass::text
    LOOP
        IF r.relkind = 'S' THEN
            CONTINUE WHEN only_tenant IS NOT NULL;
            EXECUTE format('SELECT last_value::text || is_called::text FROM %s', r.rel) INTO h;
        ELSIF only_tenant IS NOT NULL THEN
            CONTINUE WHEN NOT r.tenanted;
            EXECUTE format('SELECT md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text), '''')) FROM %s t WHERE t.tenant_id = $1',
                           r.rel) INTO h USING only_tenant;
        ELSE
            EXECUTE format('SELECT md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text), '''')) FROM %s t', r.rel) INTO h;
        END IF;
        acc := acc || r.rel::text || ':' || h || ';';
    END LOOP;
    RETURN acc;
END $$;
-- The relations whose hash differs between two state_hash() results.
CREATE FUNCTION pg_temp.changed_relations(a text, b text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(x, ' ') FROM (SELECT unnest(string_to_array(b, ';')) EXCEPT SELECT unnest(string_to_array(a, ';'))) d(x)
$$;

-------------------------------------------------------------------------------------------------
-- The calls
-------------------------------------------------------------------------------------------------
-- Functions that are not part of the API: trigger functions (no SQL call) and the boundary test
-- probes, which raise whatever SQLSTATE they are told to.
CREATE TEMP VIEW api AS
SELECT p.oid::regprocedure AS fn, p.proname::text AS name, p.pronargs, p.pronargdefaults,
       ARRAY(SELECT unnest(p.proargtypes::oid[])) AS types, (p.proargnames)[1:p.pronargs] AS argnames, p.proretset
  FROM pg_proc p
 WHERE p.pronamespace = 'forgeyard'::regnamespace
   AND p.prorettype <> 'trigger'::regtype
   AND p.proname NOT IN ('boundary_throw', 'boundary_pg_error');

-- Edge values by type (each one replaces one argument); NULL for every type.
CREATE TEMP TABLE edge (typ regtype, label text, expr text);
INSERT INTO edge VALUES
    ('text', 'empty', ''''''),
    ('text', 'huge (1 MB)', 'repeat(''x'', 1000000)'),
    ('text', 'control characters', 'E''a\x01\x1b[2J\x7f\n\r\t'''),
    ('text', 'quote and injection', '''x''''); DROP TABLE public.edge_rows; --'''),
    ('text', 'other tenant''s name', '''other'''),
    ('text', 'non-ASCII', '''ü日本''' ),
    ('bigint', 'zero', '0'), ('bigint', 'negative', '-1'),
    ('bigint', 'max', '9223372036854775807'), ('bigint', 'min', '(-9223372036854775807 - 1)'),
    ('integer', 'zero', '0'), ('integer', 'negative', '-1'),
    ('integer', 'max', '2147483647'), ('integer', 'min', '(-2147483647 - 1)'),
    ('interval', 'zero', '''0''::interval'), ('interval', 'negative', '''-1 second''::interval'),
    ('interval', 'a month', '''1 month''::interval'), ('interval', 'huge', '''100000000 days''::interval'),
    ('interval', 'max', '''2147483647 days 2562047788 hours''::interval'),
    ('interval', 'one microsecond', '''1 microsecond''::interval'),
    ('bytea', 'empty', '''''::bytea'), ('bytea', 'huge (2 MB)', 'decode(repeat(''ab'', 2000000), ''hex'')'),
    ('jsonb', 'null', '''null''::jsonb'), ('jsonb', 'array', '''[1, 2]''::jsonb'), ('jsonb', 'string', '''"s"''::jsonb'),
    ('jsonb', 'number', '''1e308''::jsonb'),
    ('jsonb', 'deep', 'repeat(''{"a": '', 200)::text || ''1'' || repeat(''}'', 200)'),
    ('jsonb', 'wrong shape', '''{"no_such": [1, {"x": null}], "tenant_id": 7, "entity_version": "x"}''::jsonb'),
    ('jsonb', 'big', '(SELECT jsonb_object_agg(''k'' || i, repeat(''v'', 100)) FROM generate_series(1, 5000) i)'),
    ('uuid', 'nil', '''00000000-0000-0000-0000-000000000000''::uuid'),
    ('uuid', 'max', '''ffffffff-ffff-ffff-ffff-ffffffffffff''::uuid'),
    ('regclass', 'no relation', '0::oid::regclass'), ('regclass', 'a catalog', '''pg_catalog.pg_class''::regclass'),
    ('regclass', 'a forgeyard table', '''forgeyard.leases''::regclass'),
    ('regclass', 'a forgeyard view', '''forgeyard.queue_depth''::regclass'),
    ('regrole', 'no role', '0::oid::regrole'), ('regrole', 'a dropped role OID', '4000000000::oid::regrole'),
    ('timestamptz', 'infinity', '''infinity''::timestamptz'), ('timestamptz', '-infinity', '''-infinity''::timestamptz'),
    ('timestamptz', 'year 4713 BC', '''4713-01-01 00:00:00+00 BC''::timestamptz'),
    ('timestamptz', 'year 294276', '''294276-12-31 23:59:59+00''::timestamptz'),
    ('text[]', 'empty', '''{}''::text[]'), ('text[]', 'NULL element', 'ARRAY[NULL]::text[]'),
    ('text[]', 'two elements', 'ARRAY[''x'', ''y'']'), ('text[]', 'two dimensions', 'ARRAY[[''x''], [''y'']]'),
    ('text[]', 'huge', 'array_fill(''x''::text, ARRAY[10001])'),
    ('bytea[]', 'empty', '''{}''::bytea[]'), ('bytea[]', 'NULL element', 'ARRAY[NULL]::bytea[]'),
    ('bytea[]', 'two elements', 'ARRAY[''\x01''::bytea, ''\x02''::bytea]'),
    ('bytea[]', 'huge', 'array_fill(''\x01''::bytea, ARRAY[10001])'),
    ('bigint[]', 'empty', '''{}''::bigint[]'), ('bigint[]', 'NULL element', 'ARRAY[NULL]::bigint[]'),
    ('bigint[]', 'two elements', 'ARRAY[1, 2]::bigint[]'), ('bigint[]', 'two dimensions', 'ARRAY[[1], [2]]::bigint[]'),
    ('bigint[]', 'extremes', 'ARRAY[9223372036854775807, -9223372036854775807 - 1, 0]::bigint[]'),
    ('bigint[]', 'huge', 'array_fill(1::bigint, ARRAY[10001])'),
    ('uuid[]', 'empty', '''{}''::uuid[]'), ('uuid[]', 'NULL element', 'ARRAY[NULL]::uuid[]'),
    ('uuid[]', 'two elements', 'ARRAY[gen_random_uuid(), gen_random_uuid()]'),
    ('jsonb[]', 'empty', '''{}''::jsonb[]'), ('jsonb[]', 'NULL element', 'ARRAY[NULL]::jsonb[]'),
    ('jsonb[]', 'not objects', 'ARRAY[''[1]''::jsonb]'),
    ('timestamptz[]', 'empty', '''{}''::timestamptz[]'), ('timestamptz[]', 'infinity', 'ARRAY[''infinity''::timestamptz]');
-- Another tenant's ids where this tenant's are expected.
INSERT INTO edge SELECT 'bigint', 'other tenant''s ' || i.name, i.v::text FROM ids i WHERE i.tenant = 'other';
INSERT INTO edge SELECT 'bigint[]', 'other tenant''s ' || i.name, format('ARRAY[%s]::bigint[]', i.v)
  FROM ids i WHERE i.tenant = 'other' AND i.name IN ('msg_id', 'claim_token', 'dead_msg_id');

-- One row per call: which argument got which edge value, and what came back.
CREATE TEMP TABLE outcome (fn regprocedure, arg text, optional boolean, label text, sqlstate text, message text,
                           changed text, other_changed boolean);

CREATE FUNCTION pg_temp.run_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    f record; e record; i integer; args text[]; sql text; st text; msg text;
    before text; other_before text; after text;
BEGIN
    FOR f IN SELECT * FROM api ORDER BY fn::text LOOP
        FOR i IN 1 .. f.pronargs LOOP
            FOR e IN SELECT NULL::text AS label, 'NULL' AS expr
                     UNION ALL
                     SELECT x.label, x.expr FROM edge x
                      WHERE x.typ = f.types[i]::regtype
                        AND NOT (f.argnames[i] = 'tenant' AND x.label = 'other tenant''s name')
            LOOP
                args := ARRAY(SELECT CASE WHEN j = i THEN format('(%s)::%s', e.expr, f.types[j]::regtype)
                                          ELSE format('(%s)::%s', pg_temp.valid(f.argnames[j], f.types[j]::regtype), f.types[j]::regtype) END
                                FROM generate_series(1, f.pronargs) j ORDER BY j);
                -- The result is read, so that a STABLE function is not planned away.
                sql := format('SELECT md5(string_agg(s.v::text, '','')) FROM (SELECT %s(%s) AS v) s',
                              f.fn::oid::regproc, array_to_string(args, ', '));
                before := pg_temp.state_hash();
                other_before := pg_temp.state_hash('other');
                st := NULL; msg := NULL;
                BEGIN
                    EXECUTE sql;
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
                END;
                after := pg_temp.state_hash();
                INSERT INTO outcome VALUES (f.fn, f.argnames[i], i > f.pronargs - f.pronargdefaults,
                                            coalesce(e.label, 'NULL'), st, left(msg, 200),
                                            pg_temp.changed_relations(before, after),
                                            pg_temp.state_hash('other') IS DISTINCT FROM other_before);
            END LOOP;
        END LOOP;
    END LOOP;
END $$;
SELECT pg_temp.run_all() \g /dev/null

-------------------------------------------------------------------------------------------------
-- What the calls answered
-------------------------------------------------------------------------------------------------
-- The SQLSTATEs docs/errors.md documents for the SQL API: our FY codes, class 22 (invalid
-- argument), not found, permission, and the transient ones.
-- Arguments without a default that may still be NULL, and why.
CREATE TEMP TABLE nullable (fn regprocedure, arg text, why text);
INSERT INTO nullable VALUES
    ('forgeyard.idem_complete(text, text, text, bytea, bigint)', 'response', 'a NULL response is stored (docs/sql-api.md)'),
    ('forgeyard.nack(text, text, bigint, bigint, text, boolean)', 'error', 'NULL is stored as an empty error'),
    ('forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean)', 'error', 'NULL is stored as an empty error'),
    ('forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)',
     'details', 'an audit event''s details are optional'),
    ('forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)',
     'payload_digest', 'an audit event''s payload digest is optional'),
    ('forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)',
     'payload_ref', 'an audit event''s payload reference is optional'),
    ('forgeyard.app_backfill_save(text, integer, text, text, bigint, bigint, boolean)', 'cursor',
     'a backfill that has not read a row yet has no cursor'),
    ('forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer)', 'error', 'NULL is stored as an empty error'),
    ('forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean)', 'error',
     'NULL is stored as an empty error'),
    ('forgeyard.workflow_fail(text, uuid, bigint, text)', 'error', 'NULL is stored as an empty error'),
    ('forgeyard.workflow_park(text, uuid, bigint, text)', 'reason', 'NULL is stored as an empty reason'),
    ('forgeyard.workflow_cancel(text, uuid, text)', 'reason', 'NULL is stored as an empty reason'),
    ('forgeyard.workflow_signal(text, uuid, text, jsonb, uuid)', 'signal_id', 'NULL: a new signal id'),
    ('forgeyard.admission_limit(text, text, integer, interval)', 'rate', 'NULL removes the limit'),
    ('forgeyard.breaker_configure(text, text, jsonb)', 'options', 'NULL removes the breaker'),
    ('forgeyard.fairness_weight(text, text, text, integer)', 'weight', 'NULL resets the weight to 1');

CREATE TEMP VIEW undocumented AS
SELECT fn, arg, label, sqlstate, message FROM outcome
 WHERE sqlstate IS NOT NULL
   AND sqlstate NOT LIKE 'FY0__' AND sqlstate NOT LIKE '22___'
   AND sqlstate NOT IN ('42704', '42P01', '42703', '42710', 'P0002', '42501', '40001', '40P01', '57014');

SELECT cmp_ok((SELECT count(*) FROM outcome), '>', 1000::bigint, 'more than 1000 edge-case calls were made');
SELECT is_empty($$SELECT a.fn FROM api a WHERE a.pronargs > 0 AND NOT EXISTS (SELECT FROM outcome o WHERE o.fn = a.fn)$$,
                'every API function with arguments was called (the list comes from pg_proc)');
SELECT is_empty($$SELECT fn, arg, label, message FROM outcome WHERE sqlstate LIKE 'XX%'$$,
                'no call answers an internal error (XX000) or corruption (XX001/XX002)');
SELECT is_empty($$SELECT * FROM undocumented$$, 'every failing call answers a SQLSTATE documented in docs/errors.md');
-- Sequences are not transactional in PostgreSQL: a failed call may leave a gap in the message ids
-- (never reuse one), so they are listed apart.
SELECT is_empty($$SELECT fn, arg, label, sqlstate, changed FROM outcome
                   WHERE sqlstate IS NOT NULL AND changed IS NOT NULL
                     AND EXISTS (SELECT FROM regexp_split_to_table(changed, ' ') r(x)
                                  WHERE split_part(r.x, ':', 1)::regclass NOT IN
                                        (SELECT c.oid FROM pg_class c WHERE c.relkind = 'S'))$$,
                'a failing call changes nothing: every table hashes the same before and after');
SELECT diag('failing calls that left a sequence gap: ' || count(*)) FROM outcome
 WHERE sqlstate IS NOT NULL AND changed IS NOT NULL;
SELECT is_empty($$SELECT fn, arg, label, sqlstate FROM outcome
                   WHERE other_changed AND fn::text NOT LIKE 'forgeyard.maintain(%'
                     -- reconcile after a restore works on the whole store by design (no tenant argument)
                     AND fn::text NOT LIKE 'forgeyard.restore_reconcile(%'$$,
                'a call for tenant edge never changes tenant other''s rows, whatever its outcome');
SELECT is_empty($$SELECT fn, arg, sqlstate, message FROM outcome
                   WHERE label = 'NULL' AND NOT optional AND sqlstate IS DISTINCT FROM '22004'
                     AND (fn, arg) NOT IN (SELECT n.fn, n.arg FROM nullable n)$$,
                'a NULL for a required argument is 22004');
SELECT is_empty($$SELECT fn, arg, label, sqlstate FROM outcome WHERE label LIKE 'huge%' AND sqlstate = '54000'$$,
                'a huge value never reaches an index (no 54000)');
SELECT is_empty($$SELECT fn, arg, label FROM outcome WHERE label = 'quote and injection' AND sqlstate = '42601'$$,
                'a quote in a text argument is data, never SQL (no syntax error)');
SELECT has_table('public', 'edge_rows', 'the injected DROP TABLE never ran');
SELECT is(
    (SELECT array_agg(DISTINCT sqlstate ORDER BY sqlstate) FROM outcome
      WHERE fn::text ~ '^forgeyard\.(grant_usage|grant_maintenance|grant_inspect|revoke_access|apply_access|bind_tenant|unbind_tenant)\('
        AND arg = 'role' AND label = 'NULL'),
    ARRAY['22004'], 'the access-management functions answer 22004 for a NULL role (not 23502 or 42601)');
SELECT is(
    (SELECT array_agg(DISTINCT sqlstate ORDER BY sqlstate) FROM outcome
      WHERE fn::text ~ '^forgeyard\.(grant_usage|grant_maintenance|grant_inspect|revoke_access|apply_access|bind_tenant|unbind_tenant)\('
        AND arg = 'role' AND label IN ('no role', 'a dropped role OID')),
    ARRAY['42704'], 'the access-management functions answer 42704 for an OID naming no role');
SELECT results_eq(
    $$SELECT label, sqlstate FROM outcome WHERE fn = 'forgeyard.bind_tenant(regrole, text)'::regprocedure AND arg = 'tenant'
       AND label IN ('NULL', 'empty', 'huge (1 MB)') ORDER BY label$$,
    $$VALUES ('NULL', '22004'), ('empty', '22023'), ('huge (1 MB)', '22001')$$,
    'bind_tenant checks its tenant like every other function: 22004 NULL, 22023 empty, 22001 over 128 bytes');

SELECT * FROM finish();
ROLLBACK;
