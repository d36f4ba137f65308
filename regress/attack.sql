-- Attacks on the SQL API (docs/sql-api.md#who-may-call-what): a role that owns a schema placed
-- before pg_catalog in its search_path, with functions, operators and types that shadow the ones
-- our SQL uses, calls every API function it may execute: none of its objects runs (each shadow
-- records a hit when it runs). A temp relation named like a forgeyard table is never read.
-- Injection through identifiers and keys (compare-and-set columns and keys, queue names) is data,
-- never SQL. Privilege escalation: a usage role bound to a tenant never reads another tenant's rows,
-- never runs maintenance, never grants itself more, never reaches a table (never moves the clock:
-- regress/cpp_attack.sql).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql
\ir lib/err.sql
\ir lib/api_calls.sql

SELECT plan(23);

SET TIME ZONE 'UTC';
SET forgeyard.now_override = '2030-01-01 00:00:00+00';

CREATE ROLE fy_attacker;
SELECT forgeyard.grant_usage('fy_attacker') \g /dev/null
SELECT forgeyard.bind_tenant('fy_attacker', 'edge') \g /dev/null
CREATE TABLE public.edge_rows (tenant_id text, id integer, name text, entity_version bigint NOT NULL DEFAULT 1,
                               PRIMARY KEY (tenant_id, id));
SELECT forgeyard.enable_versioning('public.edge_rows') \g /dev/null
INSERT INTO public.edge_rows (tenant_id, id, name) VALUES ('edge', 1, 'n'), ('other', 1, 'n');
GRANT SELECT, UPDATE ON public.edge_rows TO fy_attacker;
SELECT pg_temp.fixtures('edge'), pg_temp.fixtures('other') \g /dev/null

-------------------------------------------------------------------------------------------------
-- The attacker's schema: shadows of the functions, operators and types our SQL could use
-------------------------------------------------------------------------------------------------
CREATE SCHEMA attacker AUTHORIZATION fy_attacker;
CREATE TABLE attacker.hits (what text);
GRANT ALL ON attacker.hits TO PUBLIC;
CREATE FUNCTION attacker.hit(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO attacker.hits VALUES (what); RETURN true; END $$;

-- Functions: every pg_catalog function of these names with plain argument and result types gets a
-- twin with the same signature that records a hit and returns NULL (or no rows).
CREATE TEMP TABLE shadowed (kind text, name text);
CREATE FUNCTION pg_temp.shadow_functions() RETURNS void LANGUAGE plpgsql AS $$
DECLARE p record; n integer := 0;
BEGIN
    FOR p IN SELECT f.oid, f.proname, f.proretset, pg_get_function_identity_arguments(f.oid) AS args,
                    format_type(f.prorettype, NULL) AS rettype
               FROM pg_proc f
              WHERE f.pronamespace = 'pg_catalog'::regnamespace AND f.prokind = 'f'
                AND f.proname IN ('now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp',
                                  'md5', 'sha256', 'format', 'length', 'octet_length', 'lower', 'upper', 'left',
                                  'substr', 'substring', 'replace', 'concat', 'btrim', 'trim', 'abs', 'random',
                                  'floor', 'ceil', 'power', 'greatest', 'least', 'nextval', 'setval', 'currval',
                                  'hashtext', 'pg_advisory_xact_lock', 'pg_try_advisory_xact_lock', 'pg_notify',
                                  'set_config', 'current_setting', 'encode', 'decode', 'convert_to', 'to_timestamp',
                                  'date_part', 'extract', 'make_interval', 'jsonb_build_object', 'jsonb_typeof',
                                  'jsonb_each', 'jsonb_each_text', 'jsonb_object_keys', 'to_jsonb', 'jsonb_set',
                                  'generate_series', 'unnest', 'array_length', 'cardinality', 'array_position',
                                  'gen_random_uuid', 'quote_ident', 'quote_literal', 'quote_nullable',
                                  'format_type', 'has_table_privilege', 'has_function_privilege',
                                  'pg_has_role', 'row_number', 'int8', 'int4', 'text', 'bytea', 'timestamptz',
                                  'interval', 'uuid', 'jsonb', 'numeric', 'float8', 'bool', 'to_char')
                AND NOT EXISTS (SELECT FROM unnest(f.proargtypes::oid[]) t(o) JOIN pg_type y ON y.oid = t.o
                                 WHERE y.typtype = 'p')
                AND (SELECT y.typtype FROM pg_type y WHERE y.oid = f.prorettype) <> 'p'
    LOOP
        n := n + 1;
        EXECUTE format('CREATE FUNCTION attacker.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L',
                       p.proname, p.args, CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END, p.rettype,
                       format('BEGIN PERFORM attacker.hit(%L); RETURN%s; END',
                              'function ' || p.proname || '(' || p.args || ')',
                              CASE WHEN p.proretset THEN '' ELSE ' NULL' END));
        INSERT INTO shadowed VALUES ('function', p.proname || '(' || p.args || ')');
    END LOOP;
END $$;
SELECT pg_temp.shadow_functions() \g /dev/null

-- Operators: every comparison, arithmetic and concatenation operator on the types our SQL uses.
CREATE FUNCTION pg_temp.shadow_operators() RETURNS void LANGUAGE plpgsql AS $$
DECLARE o record; n integer := 0;
BEGIN
    FOR o IN SELECT op.oprname, format_type(op.oprleft, NULL) AS l, format_type(op.oprright, NULL) AS r,
                    format_type(op.oprresult, NULL) AS res
               FROM pg_operator op
              WHERE op.oprnamespace = 'pg_catalog'::regnamespace AND op.oprkind = 'b'
                AND op.oprname IN ('=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/', '||', '@>', '<@', '?', '->',
                                   '->>', '#>', '#>>', '~~', '&&')
                AND op.oprleft IN ('text'::regtype, 'bigint'::regtype, 'integer'::regtype, 'smallint'::regtype,
                                   'timestamptz'::regtype, 'interval'::regtype, 'jsonb'::regtype, 'bytea'::regtype,
                                   'uuid'::regtype, 'boolean'::regtype, 'numeric'::regtype, 'oid'::regtype,
                                   'name'::regtype, 'double precision'::regtype)
                AND (SELECT y.typtype FROM pg_type y WHERE y.oid = op.oprright) <> 'p'
                AND (SELECT y.typtype FROM pg_type y WHERE y.oid = op.oprresult) <> 'p'
    LOOP
        n := n + 1;
        EXECUTE format('CREATE FUNCTION attacker.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                       n, o.l, o.r, o.res,
                       format('BEGIN PERFORM attacker.hit(%L); RETURN NULL; END',
                              'operator ' || o.l || ' ' || o.oprname || ' ' || o.r));
        EXECUTE format('CREATE OPERATOR attacker.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = attacker.op_%s)',
                       o.oprname, o.l, o.r, n);
        INSERT INTO shadowed VALUES ('operator', o.l || ' ' || o.oprname || ' ' || o.r);
    END LOOP;
END $$;
SELECT pg_temp.shadow_operators() \g /dev/null

-- Types: a domain named like each type our SQL casts to, whose check records a hit.
CREATE FUNCTION pg_temp.shadow_types() RETURNS void LANGUAGE plpgsql AS $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['text', 'int8', 'bigint', 'int4', 'integer', 'int', 'bytea', 'jsonb', 'json', 'uuid',
                             'timestamptz', 'interval', 'boolean', 'bool', 'numeric', 'regclass', 'regrole'] LOOP
        EXECUTE format('CREATE DOMAIN attacker.%I AS pg_catalog.text CHECK (attacker.hit(%L))', t, 'type ' || t);
        INSERT INTO shadowed VALUES ('type', t);
    END LOOP;
END $$;
SELECT pg_temp.shadow_types() \g /dev/null
ALTER FUNCTION attacker.hit(text) OWNER TO fy_attacker;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA attacker TO PUBLIC;

SELECT cmp_ok((SELECT count(*) FROM shadowed WHERE kind = 'function'), '>', 100::bigint, 'more than 100 functions are shadowed');
SELECT cmp_ok((SELECT count(*) FROM shadowed WHERE kind = 'operator'), '>', 100::bigint, 'more than 100 operators are shadowed');

-- A statement under the attacker's search_path, as the attacker; the error's SQLSTATE or NULL.
CREATE FUNCTION pg_temp.as_attacker(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    PERFORM set_config('role', 'fy_attacker', true);
    PERFORM set_config('search_path', 'attacker, pg_catalog, public', true);
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
    END;
    PERFORM pg_catalog.set_config('search_path', '"$user", public', true);
    PERFORM pg_catalog.set_config('role', 'none', true);
    RETURN st;
END $$;

-- The shadows bite when a statement does not qualify its names, so silence below means something.
SELECT is(pg_temp.as_attacker('SELECT now(), md5(''x''), 1::bigint = 1::bigint, ''x''::text'), NULL, 'an unqualified statement runs');
SELECT ok((SELECT count(DISTINCT what) FROM attacker.hits) >= 3, 'the attacker''s function, operator and type shadows run for unqualified names');
DELETE FROM attacker.hits;

-- A temp view named like each forgeyard table, which records a hit when read.
SELECT pg_temp.as_attacker(string_agg(format('CREATE TEMP VIEW %I AS SELECT attacker.hit(%L) AS h', c.relname,
                                             'temp relation ' || c.relname), '; '))
  FROM pg_class c WHERE c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'v') \g /dev/null

-- Every API function the attacker may execute, with valid arguments: literals of pg_catalog types
-- spelled in full, so the call itself names nothing the attacker shadows.
CREATE FUNCTION pg_temp.qualified(t oid) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN y.typcategory = 'A' THEN (SELECT format('%I.%I[]', n.nspname, e.typname) FROM pg_type e
                                               JOIN pg_namespace n ON n.oid = e.typnamespace WHERE e.oid = y.typelem)
                ELSE format('%I.%I', n.nspname, y.typname) END
      FROM pg_type y JOIN pg_namespace n ON n.oid = y.typnamespace WHERE y.oid = t
$$;
CREATE TEMP TABLE attack_calls (fn regprocedure, sql text, sqlstate text);
CREATE FUNCTION pg_temp.attack_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE f record; args text[]; v text; sql text; j integer;
BEGIN
    FOR f IN SELECT p.oid, p.oid::regprocedure AS fn, p.pronargs, ARRAY(SELECT unnest(p.proargtypes::oid[])) AS types,
                    (p.proargnames)[1:p.pronargs] AS argnames
               FROM pg_proc p
              WHERE p.pronamespace = 'forgeyard'::regnamespace AND p.prorettype <> 'trigger'::regtype
                AND has_function_privilege('fy_attacker', p.oid, 'EXECUTE')
              ORDER BY p.oid::regprocedure::text
    LOOP
        args := '{}';
        FOR j IN 1 .. f.pronargs LOOP
            EXECUTE format('SELECT (%s)::text', pg_temp.valid(f.argnames[j], f.types[j]::regtype)) INTO v;
            args := args || format('%L::%s', v, pg_temp.qualified(f.types[j]));
        END LOOP;
        sql := format('SELECT pg_catalog.string_agg(s.v::pg_catalog.text, '','') FROM (SELECT %s(%s) AS v) s',
                      f.fn::oid::regproc, array_to_string(args, ', '));
        INSERT INTO attack_calls VALUES (f.fn, sql, pg_temp.as_attacker(sql));
    END LOOP;
END $$;
SELECT pg_temp.attack_all() \g /dev/null
-- The compare-and-set trigger runs inside the attacker's own UPDATE, under its search_path.
INSERT INTO attack_calls
SELECT NULL, 'UPDATE', pg_temp.as_attacker($$UPDATE public.edge_rows SET name = 'u', entity_version = 2
    WHERE tenant_id OPERATOR(pg_catalog.=) 'edge' AND id OPERATOR(pg_catalog.=) 1$$);

SELECT cmp_ok((SELECT count(*) FROM attack_calls), '>=', 40::bigint, 'the attacker called every API function it may execute');
SELECT cmp_ok((SELECT count(*) FROM attack_calls WHERE sqlstate IS NULL), '>=', 20::bigint,
              'most of those calls succeeded (they ran their SQL)');
SELECT is_empty($$SELECT fn, sqlstate FROM attack_calls WHERE sqlstate LIKE 'XX%' OR sqlstate = '42883'$$,
                'no call broke on the shadows (no internal error, no missing function)');
SELECT is_empty($$SELECT DISTINCT what FROM attacker.hits$$,
                'none of the attacker''s functions, operators, types or temp relations ran inside the API');

-------------------------------------------------------------------------------------------------
-- Injection through identifiers and keys
-------------------------------------------------------------------------------------------------
CREATE TABLE public."odd""; DROP TABLE public.edge_rows; --" (
    tenant_id text, "k"" OR 1=1 --" integer, "v'); DROP TABLE public.edge_rows; --" text,
    entity_version bigint NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, "k"" OR 1=1 --"));
INSERT INTO public."odd""; DROP TABLE public.edge_rows; --" VALUES ('edge', 1, 'a', 1), ('edge', 2, 'b', 1);
SELECT forgeyard.enable_versioning('public."odd""; DROP TABLE public.edge_rows; --"') \g /dev/null
SELECT lives_ok($$SELECT forgeyard.cas_update('public."odd""; DROP TABLE public.edge_rows; --"',
                  '{"tenant_id": "edge", "k\" OR 1=1 --": 1}', 1, '{"v''); DROP TABLE public.edge_rows; --": "z"}')$$,
                'cas_update on a table and columns whose names hold quotes and SQL works');
SELECT results_eq($$SELECT "k"" OR 1=1 --", "v'); DROP TABLE public.edge_rows; --", entity_version
                      FROM public."odd""; DROP TABLE public.edge_rows; --" ORDER BY 1$$,
                  $$VALUES (1, 'z', 2::bigint), (2, 'b', 1::bigint)$$, 'it changed the one keyed row, and only its column');
SELECT is((pg_temp.err($$SELECT forgeyard.cas_update('public.edge_rows', '{"tenant_id": "edge", "id": "1 OR 1=1"}', 2,
                          '{"name": "x"}')$$))[1], '22P02', 'a key value with SQL in it is a value of the column''s type');
SELECT is((pg_temp.err($$SELECT forgeyard.cas_update('public.edge_rows', '{"tenant_id": "edge", "id": 1}', 2,
                          '{"name = ''x'', entity_version = 99 --": "y"}')$$))[1], '22023', 'a change naming no column is refused');
SELECT lives_ok($$SELECT forgeyard.queue_create('edge', 'q''; DROP TABLE public.edge_rows; --')$$,
                'a queue name with a quote and SQL is just a name');
SELECT has_table('public', 'edge_rows', 'nothing injected ran');
SELECT is((SELECT entity_version FROM public.edge_rows WHERE tenant_id = 'edge' AND id = 1), 2::bigint,
          'the attacker''s own versioned UPDATE went through the trigger');

-------------------------------------------------------------------------------------------------
-- Privilege escalation: a usage role bound to tenant edge
-------------------------------------------------------------------------------------------------
SELECT is(pg_temp.as_attacker(format('SELECT forgeyard.%s', x)), 'FY040', 'another tenant''s rows: ' || x)
  FROM unnest(ARRAY['lease_get(''other'', ''r'')', 'queue_stats(''other'', ''q'')',
                    'audit_read(''other'')', 'idem_status(''other'', ''s'', ''k'')']) x;
SELECT is_empty($$SELECT a.object FROM forgeyard.access_catalog a
                   WHERE a.access = 'maintenance' AND a.privilege = 'EXECUTE'
                     AND pg_temp.as_attacker('SELECT ' || replace(replace(a.object, 'FUNCTION ', ''), '(integer, text)', '(1, ''edge'')')
                                             ) IS DISTINCT FROM '42501'
                     AND a.object LIKE '%(integer, text)'$$,
                'the maintenance calls answer 42501 to a usage role');
SELECT is_empty($$SELECT c.oid::regclass, x.priv FROM pg_class c,
                        unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) x(priv)
                   WHERE c.relnamespace = 'forgeyard'::regnamespace AND c.relkind IN ('r', 'v', 'S', 'p')
                     AND has_table_privilege('fy_attacker', c.oid, x.priv)$$,
                'a usage role has no privilege on any forgeyard table, view or sequence');
SELECT is(pg_temp.as_attacker('SELECT count(*) FROM forgeyard.leases'), '42501', 'a usage role cannot read a table');
SELECT is(pg_temp.as_attacker('SELECT forgeyard.grant_maintenance(''fy_attacker'')'), '42501',
          'a usage role cannot grant itself maintenance');
-- (That a usage role cannot SET forgeyard.now_override, a setting the C++ edition's library
-- defines, is checked in regress/cpp_attack.sql.)

SELECT * FROM finish();
ROLLBACK;
