-- Compare-and-set (docs/sql-api.md#compare-and-set): enable_versioning / disable_versioning, the versioning trigger on
-- every UPDATE path (psql included), cas_update and cas_get, typed values bound as data, every
-- bad input, and the caller's own rights (SECURITY INVOKER): a role without UPDATE on a table
-- cannot change it through these functions.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(231);

SET TIME ZONE 'UTC';

\ir lib/err.sql
-- The versioning triggers of a table (enable_versioning installs exactly one).
CREATE FUNCTION pg_temp.triggers(rel regclass) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_catalog.pg_trigger g
     WHERE g.tgrelid = rel AND g.tgfoid = 'forgeyard.versioning_trigger()'::regprocedure
$$;

-------------------------------------------------------------------------------------------------
-- Catalog: the cas functions run with the caller's rights
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE invoker_api (fn regprocedure PRIMARY KEY);
INSERT INTO invoker_api VALUES
    ('forgeyard.enable_versioning(regclass)'),
    ('forgeyard.disable_versioning(regclass)'),
    ('forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'),
    ('forgeyard.cas_get(regclass, jsonb)');
SELECT is((SELECT p.prosecdef FROM pg_catalog.pg_proc p WHERE p.oid = fn), false, fn || ' is SECURITY INVOKER')
  FROM invoker_api ORDER BY fn::text;
SELECT is((SELECT p.prosecdef FROM pg_catalog.pg_proc p WHERE p.oid = 'forgeyard.versioning_trigger()'::regprocedure), false,
          'versioning_trigger() is not SECURITY DEFINER (it runs as whoever writes the row)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.cas_get(regclass, jsonb)'::regprocedure),
          'TABLE("row" jsonb, entity_version bigint)', 'cas_get(rel, key) returns (row jsonb, entity_version bigint)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'::regprocedure),
          'bigint', 'cas_update returns the new version (bigint)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.disable_versioning(regclass)'::regprocedure),
          'boolean', 'disable_versioning returns whether the table was versioned');

-------------------------------------------------------------------------------------------------
-- enable_versioning: the column must be "entity_version bigint NOT NULL DEFAULT 1"
-------------------------------------------------------------------------------------------------
CREATE TABLE public.cas_nocol (id int PRIMARY KEY, name text);
CREATE TABLE public.cas_int (id int PRIMARY KEY, entity_version int NOT NULL DEFAULT 1);
CREATE TABLE public.cas_numeric (id int PRIMARY KEY, entity_version numeric NOT NULL DEFAULT 1);
CREATE TABLE public.cas_nullable (id int PRIMARY KEY, entity_version bigint DEFAULT 1);
CREATE TABLE public.cas_nodefault (id int PRIMARY KEY, entity_version bigint NOT NULL);
CREATE TABLE public.cas_default2 (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT 2);
CREATE TABLE public.cas_default0 (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT 0);
CREATE TABLE public.cas_defexpr (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT (1 + 0));
CREATE SEQUENCE public.cas_defseq;
CREATE TABLE public.cas_defnextval (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT nextval('public.cas_defseq'));
CREATE TABLE public.cas_acct (id int PRIMARY KEY, name text, note text, entity_version bigint NOT NULL DEFAULT 1);
CREATE VIEW public.cas_view AS SELECT id, name, entity_version FROM public.cas_acct;
CREATE SEQUENCE public.cas_seq;

CREATE TEMP TABLE bad_enable (n serial, call text, code char(5), message text);
INSERT INTO bad_enable (call, code, message) VALUES
    ($$forgeyard.enable_versioning('public.cas_nocol')$$,       '42703', 'public.cas_nocol has no entity_version column'),
    ($$forgeyard.enable_versioning('public.cas_int')$$,         '22023', 'entity_version of public.cas_int must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_numeric')$$,     '22023', 'entity_version of public.cas_numeric must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_nullable')$$,    '22023', 'entity_version of public.cas_nullable must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_nodefault')$$,   '22023', 'entity_version of public.cas_nodefault must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_default2')$$,    '22023', 'entity_version of public.cas_default2 must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_default0')$$,    '22023', 'entity_version of public.cas_default0 must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_defexpr')$$,     '22023', 'entity_version of public.cas_defexpr must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_defnextval')$$,  '22023', 'entity_version of public.cas_defnextval must be bigint NOT NULL DEFAULT 1'),
    ($$forgeyard.enable_versioning('public.cas_view')$$,        '22023', 'rel must be a table: public.cas_view'),
    ($$forgeyard.enable_versioning('public.cas_seq')$$,         '22023', 'rel must be a table: public.cas_seq'),
    ($$forgeyard.enable_versioning(NULL)$$,                     '22004', 'rel must not be NULL'),
    ($$forgeyard.disable_versioning(NULL)$$,                    '22004', 'rel must not be NULL'),
    ($$forgeyard.disable_versioning('public.cas_view')$$,       '22023', 'rel must be a table: public.cas_view');
SELECT throws_ok('SELECT ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad_enable ORDER BY n;
SELECT is(pg_temp.err($$SELECT forgeyard.enable_versioning('public.cas_nocol')$$),
          ARRAY['42703', 'public.cas_nocol has no entity_version column', 'add: entity_version bigint NOT NULL DEFAULT 1'],
          'a table without the column: 42703, and the DETAIL says what to add');
SELECT is_empty($$SELECT g.tgrelid::regclass FROM pg_catalog.pg_trigger g
                   WHERE g.tgfoid = 'forgeyard.versioning_trigger()'::regprocedure$$,
                'no rejected enable_versioning installed a trigger');

-- The same default spelled differently is the same default.
CREATE TABLE public.cas_def_text (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT '1');
CREATE TABLE public.cas_def_cast (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT 1::bigint);
CREATE TABLE public.cas_def_textcast (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT '1'::bigint);
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_def_text')$$, $$enable_versioning accepts DEFAULT '1'$$);
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_def_cast')$$, 'enable_versioning accepts DEFAULT 1::bigint');
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_def_textcast')$$, $$enable_versioning accepts DEFAULT '1'::bigint$$);

-------------------------------------------------------------------------------------------------
-- enable_versioning: one trigger, idempotent
-------------------------------------------------------------------------------------------------
SELECT is(pg_temp.triggers('public.cas_acct'), 0::bigint, 'cas_acct has no versioning trigger yet');
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_acct')$$, 'enable_versioning(cas_acct)');
SELECT results_eq(
    $$SELECT g.tgname::text COLLATE "default", g.tgtype::int, g.tgenabled::text FROM pg_catalog.pg_trigger g
       WHERE g.tgrelid = 'public.cas_acct'::regclass$$,
    $$VALUES ('forgeyard_versioning'::text, 23, 'O'::text)$$,
    'one trigger forgeyard_versioning: BEFORE INSERT OR UPDATE FOR EACH ROW (tgtype 1|2|4|16), enabled');
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_acct')$$, 'enable_versioning(cas_acct) again');
SELECT is(pg_temp.triggers('public.cas_acct'), 1::bigint, 'a second enable_versioning adds no second trigger');

-------------------------------------------------------------------------------------------------
-- The trigger: INSERT starts at 1
-------------------------------------------------------------------------------------------------
INSERT INTO public.cas_acct (id, name) VALUES (1, 'one'), (2, 'two');
INSERT INTO public.cas_acct (id, name, entity_version) VALUES (3, 'three', 1);
SELECT results_eq('SELECT id, entity_version FROM public.cas_acct ORDER BY id',
                  $$VALUES (1, 1::bigint), (2, 1::bigint), (3, 1::bigint)$$,
                  'INSERT with the default, or with an explicit 1: version 1');
SELECT throws_ok($$INSERT INTO public.cas_acct (id, name, entity_version) VALUES (4, 'four', 2)$$, '22023',
                 'a new row of public.cas_acct must start at entity_version 1', 'INSERT at version 2: 22023');
SELECT is(pg_temp.err($$INSERT INTO public.cas_acct (id, name, entity_version) VALUES (4, 'four', 7)$$),
          ARRAY['22023', 'a new row of public.cas_acct must start at entity_version 1', 'it was inserted with 7'],
          'INSERT at version 7: 22023, the DETAIL names the value');
SELECT is(pg_temp.err($$INSERT INTO public.cas_acct (id, name, entity_version) VALUES (4, 'four', 0)$$),
          ARRAY['22023', 'a new row of public.cas_acct must start at entity_version 1', 'it was inserted with 0'],
          'INSERT at version 0: 22023');
SELECT is(pg_temp.err($$INSERT INTO public.cas_acct (id, name, entity_version) VALUES (4, 'four', NULL)$$),
          ARRAY['22023', 'a new row of public.cas_acct must start at entity_version 1', 'it was inserted with NULL'],
          'INSERT with a NULL version: 22023');
SELECT lives_ok($$INSERT INTO public.cas_acct (id, name) SELECT 5, 'five' UNION ALL SELECT 6, 'six'$$,
                'INSERT ... SELECT of several rows at the default version works');
SELECT is((SELECT count(*) FROM public.cas_acct WHERE id = 4), 0::bigint, 'no rejected INSERT stored a row');
DELETE FROM public.cas_acct WHERE id IN (5, 6);

-------------------------------------------------------------------------------------------------
-- The trigger: every UPDATE, from plain SQL, must move expected -> expected + 1
-------------------------------------------------------------------------------------------------
UPDATE public.cas_acct SET name = 'one-b', entity_version = entity_version + 1 WHERE id = 1;
SELECT results_eq('SELECT name, entity_version FROM public.cas_acct WHERE id = 1', $$VALUES ('one-b'::text, 2::bigint)$$,
                  'a plain UPDATE that bumps the version by one works');
UPDATE public.cas_acct SET note = 'bulk', entity_version = entity_version + 1 WHERE id IN (2, 3);
SELECT results_eq('SELECT id, note, entity_version FROM public.cas_acct WHERE id IN (2, 3) ORDER BY id',
                  $$VALUES (2, 'bulk'::text, 2::bigint), (3, 'bulk', 2::bigint)$$,
                  'an UPDATE of several rows, each bumped by one, works');
UPDATE public.cas_acct SET name = 'one-c', entity_version = 3 WHERE id = 1 AND entity_version = 2;
SELECT results_eq('SELECT name, entity_version FROM public.cas_acct WHERE id = 1', $$VALUES ('one-c'::text, 3::bigint)$$,
                  'the hand-written pattern "SET entity_version = n + 1 WHERE entity_version = n" works');
UPDATE public.cas_acct SET name = 'lost', entity_version = 3 WHERE id = 1 AND entity_version = 2;
SELECT is((SELECT name FROM public.cas_acct WHERE id = 1), 'one-c', 'the same pattern from a stale version matches no row');

CREATE TEMP TABLE acct_before AS SELECT * FROM public.cas_acct;
SELECT throws_ok($$UPDATE public.cas_acct SET name = 'x' WHERE id = 1$$, 'FY002',
                 'an UPDATE of public.cas_acct must set entity_version to the expected version + 1',
                 'an UPDATE that leaves the version alone: FY002');
SELECT is(pg_temp.err($$UPDATE public.cas_acct SET name = 'x' WHERE id = 1$$),
          ARRAY['FY002', 'an UPDATE of public.cas_acct must set entity_version to the expected version + 1',
                'current version 3; the UPDATE did not change it'],
          'FY002 for an unchanged version: the DETAIL names the current version');
SELECT is(pg_temp.err($$UPDATE public.cas_acct SET name = 'x', entity_version = 3 WHERE id = 1$$),
          ARRAY['FY002', 'an UPDATE of public.cas_acct must set entity_version to the expected version + 1',
                'current version 3; the UPDATE did not change it'],
          'FY002 for an UPDATE that sets the current version explicitly');
SELECT is(pg_temp.err($$UPDATE public.cas_acct SET name = 'x', entity_version = 9 WHERE id = 1$$),
          ARRAY['FY002', 'version conflict on public.cas_acct', 'expected version 8, current version 3'],
          'an UPDATE that jumps to 9 from 3: FY002, expected version 8, current version 3');
SELECT is(pg_temp.err($$UPDATE public.cas_acct SET entity_version = 2 WHERE id = 1$$),
          ARRAY['FY002', 'version conflict on public.cas_acct', 'expected version 1, current version 3'],
          'an UPDATE that goes back: FY002');
SELECT is(pg_temp.err($$UPDATE public.cas_acct SET entity_version = entity_version + 2 WHERE id = 2$$),
          ARRAY['FY002', 'version conflict on public.cas_acct', 'expected version 3, current version 2'],
          'an UPDATE that bumps by two: FY002');
SELECT throws_ok($$UPDATE public.cas_acct SET entity_version = NULL WHERE id = 1$$, '22004',
                 'entity_version of public.cas_acct must not be NULL', 'an UPDATE that sets the version to NULL: 22004');
SELECT throws_ok($$UPDATE public.cas_acct SET note = 'all', entity_version = 3$$, 'FY002', NULL,
                 'one statement setting one fixed version for rows at different versions fails as a whole');
SELECT throws_ok($$INSERT INTO public.cas_acct AS a (id, name) VALUES (1, 'upsert') ON CONFLICT (id) DO UPDATE SET name = 'upsert'$$,
                 'FY002', NULL, 'INSERT ... ON CONFLICT DO UPDATE without a bump: FY002');
SELECT results_eq('SELECT * FROM public.cas_acct ORDER BY id', 'SELECT * FROM acct_before ORDER BY id',
                  'the rejected UPDATEs changed nothing (and the failed statements rolled back as a whole)');
INSERT INTO public.cas_acct AS a (id, name) VALUES (1, 'upsert')
    ON CONFLICT (id) DO UPDATE SET name = excluded.name, entity_version = a.entity_version + 1;
SELECT results_eq('SELECT name, entity_version FROM public.cas_acct WHERE id = 1', $$VALUES ('upsert'::text, 4::bigint)$$,
                  'INSERT ... ON CONFLICT DO UPDATE that bumps by one works');

-- Any path: a role with plain UPDATE and no forgeyard access at all is held to the same rule.
CREATE ROLE fy_cas_psql;
GRANT SELECT, UPDATE ON public.cas_acct TO fy_cas_psql;
SET ROLE fy_cas_psql;
SELECT ok(NOT has_schema_privilege('forgeyard', 'USAGE'), 'fy_cas_psql has no access to schema forgeyard');
SELECT throws_ok($$UPDATE public.cas_acct SET name = 'psql' WHERE id = 1$$, 'FY002', NULL,
                 'a role without forgeyard access: its UPDATE without a bump gets FY002 too');
SELECT throws_ok($$UPDATE public.cas_acct SET name = 'psql', entity_version = 4 WHERE id = 1$$, 'FY002', NULL,
                 'a role without forgeyard access: its UPDATE to the current version gets FY002');
UPDATE public.cas_acct SET name = 'psql', entity_version = entity_version + 1 WHERE id = 1;
RESET ROLE;
SELECT results_eq('SELECT name, entity_version FROM public.cas_acct WHERE id = 1', $$VALUES ('psql'::text, 5::bigint)$$,
                  'a role without forgeyard access: its bumping UPDATE works');

-------------------------------------------------------------------------------------------------
-- cas_update and cas_get
-------------------------------------------------------------------------------------------------
SELECT results_eq($$SELECT * FROM forgeyard.cas_get('public.cas_acct', '{"id": 2}')$$,
                  $$VALUES ('{"id": 2, "name": "two", "note": "bulk", "entity_version": 2}'::jsonb, 2::bigint)$$,
                  'cas_get: the row as jsonb and its version');
SELECT is(forgeyard.cas_update('public.cas_acct', '{"id": 2}', 2, '{"name": "two-b"}'), 3::bigint,
          'cas_update from the current version returns the new version');
SELECT results_eq('SELECT name, note, entity_version FROM public.cas_acct WHERE id = 2',
                  $$VALUES ('two-b'::text, 'bulk'::text, 3::bigint)$$,
                  'cas_update changed the named column, kept the others, and bumped the version');
SELECT results_eq($$SELECT "row" ->> 'name', entity_version FROM forgeyard.cas_get('public.cas_acct', '{"id": 2}')$$,
                  $$VALUES ('two-b'::text, 3::bigint)$$, 'cas_get sees the new value and version');
SELECT is(forgeyard.cas_update('public.cas_acct', '{"id": 2}', 3, '{"name": "two-c", "note": null}'), 4::bigint,
          'cas_update of two columns, one of them to NULL');
SELECT results_eq('SELECT name, note, entity_version FROM public.cas_acct WHERE id = 2',
                  $$VALUES ('two-c'::text, NULL::text, 4::bigint)$$, 'a JSON null sets the column to NULL');

CREATE TEMP TABLE acct_before2 AS SELECT * FROM public.cas_acct;
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 2}', 3, '{"name": "stale"}')$$, 'FY002',
                 'version conflict on public.cas_acct', 'cas_update from a stale version: FY002');
SELECT is(pg_temp.err($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 2}', 3, '{"name": "stale"}')$$),
          ARRAY['FY002', 'version conflict on public.cas_acct', 'expected version 3, current version 4'],
          'FY002 from cas_update: DETAIL expected version 3, current version 4');
SELECT is(pg_temp.err($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 2}', 9, '{"name": "ahead"}')$$),
          ARRAY['FY002', 'version conflict on public.cas_acct', 'expected version 9, current version 4'],
          'cas_update from a version ahead of the row: FY002 too');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 99}', 1, '{"name": "ghost"}')$$, 'P0002',
                 'no row of public.cas_acct matches the key', 'cas_update of a missing key: P0002, not FY002');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": null}', 1, '{"name": "ghost"}')$$, 'P0002', NULL,
                 'cas_update with a NULL key value matches no row: P0002');
SELECT results_eq('SELECT * FROM public.cas_acct ORDER BY id', 'SELECT * FROM acct_before2 ORDER BY id',
                  'conflicts and misses changed nothing');
SELECT is_empty($$SELECT * FROM forgeyard.cas_get('public.cas_acct', '{"id": 99}')$$, 'cas_get of a missing key: no row');
SELECT is_empty($$SELECT * FROM forgeyard.cas_get('public.cas_acct', '{"id": null}')$$, 'cas_get with a NULL key value: no row');

-------------------------------------------------------------------------------------------------
-- Typed conversion: values arrive as jsonb and are typed by the column
-------------------------------------------------------------------------------------------------
-- Columns named t, k and c share their names with the aliases of the generated statements.
CREATE TABLE public.cas_typed (
    id int PRIMARY KEY, n numeric, t text, b boolean, ts timestamptz, j jsonb, a int[], m int[], k int, c text,
    entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('public.cas_typed'); END $$;
INSERT INTO public.cas_typed (id) VALUES (1);
SELECT is(forgeyard.cas_update('public.cas_typed', '{"id": 1}', 1,
              '{"n": 12.50, "t": "text", "b": true, "ts": "2030-01-02T05:04:05.123456+02:00",
                "j": {"k": [1, {"x": null}]}, "a": [1, 2, 3], "m": [[1, 2], [3, 4]], "k": 7, "c": "see"}'), 2::bigint,
          'cas_update of numeric, text, boolean, timestamptz, jsonb, int[] columns');
SELECT results_eq('SELECT n::text, t, b, ts, j, a, m, k, c FROM public.cas_typed WHERE id = 1',
                  $$VALUES ('12.50'::text, 'text'::text, true, '2030-01-02 03:04:05.123456+00'::timestamptz,
                            '{"k": [1, {"x": null}]}'::jsonb, ARRAY[1, 2, 3], ARRAY[[1, 2], [3, 4]], 7, 'see'::text)$$,
                  'each value stored with its column''s type (numeric scale, time zone, nested jsonb, 1-D and 2-D arrays)');
SELECT is(forgeyard.cas_update('public.cas_typed', '{"id": 1}', 2,
              '{"t": 42, "b": "false", "j": "just a string", "n": null, "a": []}'), 3::bigint,
          'cas_update with a number for text, a string for boolean, a string for jsonb, null, an empty array');
SELECT results_eq('SELECT n, t, b, j, a FROM public.cas_typed WHERE id = 1',
                  $$VALUES (NULL::numeric, '42'::text, false, '"just a string"'::jsonb, '{}'::int[])$$,
                  'the conversions follow the column types');
SELECT results_eq($$SELECT "row", entity_version FROM forgeyard.cas_get('public.cas_typed', '{"id": 1}')$$,
                  $$VALUES ('{"a": [], "b": false, "c": "see", "j": "just a string", "k": 7, "m": [[1, 2], [3, 4]], "n": null,
                             "t": "42", "id": 1, "ts": "2030-01-02T03:04:05.123456+00:00", "entity_version": 3}'::jsonb, 3::bigint)$$,
                  'cas_get on a table with columns named t and k: the whole row');

CREATE TEMP TABLE typed_before AS SELECT * FROM public.cas_typed;
CREATE TEMP TABLE bad_types (n serial, changes text, code char(5), message text);
INSERT INTO bad_types (changes, code, message) VALUES
    ('{"n": "abc"}',          '22P02', 'invalid input syntax for type numeric: "abc"'),
    ('{"b": 3}',              '22P02', 'invalid input syntax for type boolean: "3"'),
    ('{"ts": "not a time"}',  '22007', 'invalid input syntax for type timestamp with time zone: "not a time"'),
    ('{"a": "abc"}',          '22P02', 'malformed array literal: "abc"'),
    ('{"a": [1, "x"]}',       '22P02', 'invalid input syntax for type integer: "x"'),
    ('{"k": 1.5}',            '22P02', 'invalid input syntax for type integer: "1.5"'),
    ('{"k": 99999999999}',    '22003', 'value "99999999999" is out of range for type integer');
SELECT throws_ok(format('SELECT forgeyard.cas_update(%L, %L, 3, %L)', 'public.cas_typed', '{"id": 1}', changes),
                 code, message, format('cas_update with %s: %s %s', changes, code, message))
  FROM bad_types ORDER BY n;
SELECT throws_ok($$SELECT * FROM forgeyard.cas_get('public.cas_typed', '{"id": "one"}')$$, '22P02',
                 'invalid input syntax for type integer: "one"', 'cas_get with a key value of the wrong type: 22P02');
SELECT results_eq('SELECT * FROM public.cas_typed', 'SELECT * FROM typed_before',
                  'values that do not convert changed nothing');

-------------------------------------------------------------------------------------------------
-- Values are data, identifiers are quoted: another schema, names that need quoting
-------------------------------------------------------------------------------------------------
CREATE TABLE public.t (id int);
INSERT INTO public.t VALUES (1);
CREATE SCHEMA "Fy Other";
CREATE TABLE "Fy Other"."Odd ""Name""" (
    "Id" int PRIMARY KEY, "we""ird col" text, "Space Col" text, entity_version bigint NOT NULL DEFAULT 1);
SELECT lives_ok($$SELECT forgeyard.enable_versioning('"Fy Other"."Odd ""Name"""')$$,
                'enable_versioning on a table in another schema whose names need quoting');
SELECT lives_ok($$SELECT forgeyard.enable_versioning('"Fy Other"."Odd ""Name"""')$$, '... and again');
SELECT is(pg_temp.triggers('"Fy Other"."Odd ""Name"""'), 1::bigint, '... one trigger');
INSERT INTO "Fy Other"."Odd ""Name""" ("Id") VALUES (1);
SELECT is(pg_temp.err($$UPDATE "Fy Other"."Odd ""Name""" SET "Space Col" = 'x'$$),
          ARRAY['FY002', 'an UPDATE of "Fy Other"."Odd ""Name""" must set entity_version to the expected version + 1',
                'current version 1; the UPDATE did not change it'],
          'the trigger names the quoted table in its FY002');
SELECT is(forgeyard.cas_update('"Fy Other"."Odd ""Name"""', '{"Id": 1}', 1,
                               $j${"we\"ird col": "x'); DROP TABLE t; --", "Space Col": "Robert'); DROP TABLE public.t;--"}$j$),
          2::bigint, 'cas_update of columns with a quote and a space, with SQL in the values');
SELECT results_eq($$SELECT "we""ird col", "Space Col", entity_version FROM "Fy Other"."Odd ""Name"""$$,
                  $$VALUES ($v$x'); DROP TABLE t; --$v$::text, $v$Robert'); DROP TABLE public.t;--$v$::text, 2::bigint)$$,
                  'the values are stored verbatim');
SELECT results_eq('SELECT id FROM public.t', 'VALUES (1)', 'table t is still there: the values were bound as data');
SELECT results_eq($$SELECT "row", entity_version FROM forgeyard.cas_get('"Fy Other"."Odd ""Name"""', '{"Id": 1}')$$,
                  $$VALUES (jsonb_build_object('Id', 1, 'we"ird col', $v$x'); DROP TABLE t; --$v$,
                                               'Space Col', $v$Robert'); DROP TABLE public.t;--$v$, 'entity_version', 2),
                            2::bigint)$$,
                  'cas_get on the quoted table');
SELECT throws_ok($$SELECT forgeyard.cas_update('"Fy Other"."Odd ""Name"""', '{"id": 1}', 2, '{"Space Col": "y"}')$$, '22023',
                 'key names unknown column "id" of "Fy Other"."Odd ""Name"""',
                 'identifiers are case-sensitive: "id" is not "Id"');
SELECT throws_ok($$SELECT forgeyard.cas_update('"Fy Other"."Odd ""Name"""', '{"Id": 1}', 2, '{"space col": "y"}')$$, '22023',
                 'changes name unknown column "space col" of "Fy Other"."Odd ""Name"""',
                 'a changes key must match the column name exactly');
SELECT throws_ok($$SELECT forgeyard.cas_update('"Fy Other"."Odd ""Name"""', '{"Id": 1}', 2, '{"x\"; DROP TABLE t; --": "y"}')$$,
                 '22023', NULL, 'a column name that is SQL is an unknown column, not SQL');
SELECT results_eq('SELECT id FROM public.t', 'VALUES (1)', 'table t is still there');

-- A composite key with upper- and lower-case names, given in either order.
CREATE TABLE public.cas_mk ("B" int, a int, v text, entity_version bigint NOT NULL DEFAULT 1, PRIMARY KEY (a, "B"));
DO $$ BEGIN PERFORM forgeyard.enable_versioning('public.cas_mk'); END $$;
INSERT INTO public.cas_mk ("B", a, v) VALUES (1, 2, 'x'), (2, 1, 'y');
SELECT is(forgeyard.cas_update('public.cas_mk', '{"a": 2, "B": 1}', 1, '{"v": "x2"}'), 2::bigint,
          'cas_update by a composite key ("B", a)');
SELECT results_eq('SELECT "B", a, v, entity_version FROM public.cas_mk ORDER BY a',
                  $$VALUES (2, 1, 'y'::text, 1::bigint), (1, 2, 'x2', 2::bigint)$$,
                  'only the row matching both key columns changed');

-------------------------------------------------------------------------------------------------
-- Tables with tenant_id: the key must carry it; unique indexes other than the primary key
-------------------------------------------------------------------------------------------------
CREATE TABLE public.cas_tk (
    tenant_id text, id int, code text, name text, g int GENERATED ALWAYS AS (id * 10) STORED,
    entity_version bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, id), UNIQUE (tenant_id, code));
CREATE UNIQUE INDEX cas_tk_name ON public.cas_tk (tenant_id, name) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX cas_tk_lower ON public.cas_tk (tenant_id, lower(code));
DO $$ BEGIN PERFORM forgeyard.enable_versioning('public.cas_tk'); END $$;
INSERT INTO public.cas_tk (tenant_id, id, code, name) VALUES ('t1', 1, 'c1', 'n1'), ('t2', 1, 'c1', 'n1');
SELECT is(forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1", "id": 1}', 1, '{"name": "t1-a"}'), 2::bigint,
          'cas_update by (tenant_id, id), the primary key');
SELECT is(forgeyard.cas_update('public.cas_tk', '{"code": "c1", "tenant_id": "t1"}', 2, '{"name": "t1-b"}'), 3::bigint,
          'cas_update by (tenant_id, code), a unique constraint');
SELECT results_eq($$SELECT "row" ->> 'name', ("row" ->> 'g')::int, entity_version
                      FROM forgeyard.cas_get('public.cas_tk', '{"tenant_id": "t1", "code": "c1"}')$$,
                  $$VALUES ('t1-b'::text, 10, 3::bigint)$$, 'cas_get by (tenant_id, code)');
SELECT results_eq('SELECT tenant_id, name, entity_version FROM public.cas_tk ORDER BY tenant_id',
                  $$VALUES ('t1'::text, 't1-b'::text, 3::bigint), ('t2', 'n1', 1::bigint)$$,
                  'the other tenant''s row with the same id and code is untouched');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t3", "id": 1}', 1, '{"name": "x"}')$$, 'P0002',
                 NULL, 'cas_update with a tenant that has no such row: P0002');
SELECT results_eq($$SELECT entity_version FROM forgeyard.cas_get('public.cas_tk', '{"tenant_id": "t2", "id": 1}')$$,
                  $$VALUES (1::bigint)$$, 'cas_get is per tenant');

-------------------------------------------------------------------------------------------------
-- Bad input: every argument of cas_update and cas_get; a specific SQLSTATE, a message naming the
-- argument, and nothing changes
-------------------------------------------------------------------------------------------------
CREATE TABLE public.cas_plain (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
INSERT INTO public.cas_plain VALUES (1, 'p');
CREATE FUNCTION pg_temp.state() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'acct',    (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.id) FROM public.cas_acct x),
        'typed',   (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.id) FROM public.cas_typed x),
        'tk',      (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.tenant_id, x.id) FROM public.cas_tk x),
        'mk',      (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.a) FROM public.cas_mk x),
        'plain',   (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.id) FROM public.cas_plain x),
        'odd',     (SELECT jsonb_agg(to_jsonb(x) ORDER BY x."Id") FROM "Fy Other"."Odd ""Name""" x),
        'triggers', (SELECT jsonb_agg(g.tgrelid::regclass::text ORDER BY g.tgrelid::regclass::text)
                       FROM pg_catalog.pg_trigger g WHERE g.tgfoid = 'forgeyard.versioning_trigger()'::regprocedure))
$$;
CREATE TEMP TABLE state_before AS SELECT pg_temp.state() AS s;

CREATE TEMP TABLE bad (n serial, call text, code char(5), message text);
INSERT INTO bad (call, code, message) VALUES
    -- cas_update(rel, key, expected_version, changes)
    ($$forgeyard.cas_update(NULL, '{"id": 1}', 5, '{"name": "x"}')$$,                      '22004', 'rel must not be NULL'),
    ($$forgeyard.cas_update('public.cas_acct', NULL, 5, '{"name": "x"}')$$,                '22004', 'key must not be NULL'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', NULL, '{"name": "x"}')$$,      '22004', 'expected_version must not be NULL'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, NULL)$$,                    '22004', 'changes must not be NULL'),
    ($$forgeyard.cas_update('public.cas_acct', '[1]', 5, '{"name": "x"}')$$,               '22023', 'key must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '1', 5, '{"name": "x"}')$$,                 '22023', 'key must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '"id"', 5, '{"name": "x"}')$$,              '22023', 'key must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', 'null', 5, '{"name": "x"}')$$,              '22023', 'key must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '{}', 5, '{"name": "x"}')$$,                '22023', 'key must name at least one column'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '[{"name": "x"}]')$$,       '22023', 'changes must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '"x"')$$,                   '22023', 'changes must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, 'null')$$,                  '22023', 'changes must be a JSON object'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{}')$$,                    '22023', 'changes must name at least one column'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{"nope": "x"}')$$,         '22023', 'changes name unknown column "nope" of public.cas_acct'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{"name": "x", "Name": "y"}')$$, '22023', 'changes name unknown column "Name" of public.cas_acct'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{"ctid": "(0,1)"}')$$,     '22023', 'changes name unknown column "ctid" of public.cas_acct'),
    ($$forgeyard.cas_update('public.cas_acct', '{"nope": 1}', 5, '{"name": "x"}')$$,       '22023', 'key names unknown column "nope" of public.cas_acct'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{"id": 7}')$$,             '22023', 'changes must not set key column "id"'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 5, '{"name": "x", "entity_version": 9}')$$, '22023',
        'changes must not set entity_version: cas_update sets it to expected + 1'),
    ($$forgeyard.cas_update('public.cas_acct', '{"name": "psql"}', 5, '{"note": "x"}')$$,  '22023',
        'key columns (name) do not contain the primary key or a unique index of public.cas_acct'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1, "name": "psql"}', 5, '{"name": "x"}')$$, '22023',
        'changes must not set key column "name"'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', 0, '{"name": "x"}')$$,         '22023', 'expected_version must be at least 1'),
    ($$forgeyard.cas_update('public.cas_acct', '{"id": 1}', -5, '{"name": "x"}')$$,        '22023', 'expected_version must be at least 1'),
    ($$forgeyard.cas_update('public.cas_plain', '{"id": 1}', 1, '{"name": "x"}')$$,        '22023', 'public.cas_plain is not under version control'),
    ($$forgeyard.cas_update('public.cas_nocol', '{"id": 1}', 1, '{"name": "x"}')$$,        '22023', 'public.cas_nocol has no entity_version column'),
    ($$forgeyard.cas_update('public.cas_view', '{"id": 1}', 5, '{"name": "x"}')$$,         '22023', 'rel must be a table: public.cas_view'),
    ($$forgeyard.cas_update('public.cas_seq', '{"id": 1}', 5, '{"name": "x"}')$$,          '22023', 'rel must be a table: public.cas_seq'),
    ($$forgeyard.cas_update('public.cas_mk', '{"a": 2}', 2, '{"v": "x"}')$$,               '22023',
        'key columns (a) do not contain the primary key or a unique index of public.cas_mk'),
    ($$forgeyard.cas_update('public.cas_mk', '{"a": 2, "v": "x2"}', 2, '{"v": "x"}')$$,    '22023',
        'key columns (a,v) do not contain the primary key or a unique index of public.cas_mk'),
    -- tables with tenant_id
    ($$forgeyard.cas_update('public.cas_tk', '{"id": 1}', 3, '{"name": "x"}')$$,           '22023',
        'key must include tenant_id: public.cas_tk has a tenant_id column'),
    ($$forgeyard.cas_update('public.cas_tk', '{"code": "c1"}', 3, '{"name": "x"}')$$,      '22023',
        'key must include tenant_id: public.cas_tk has a tenant_id column'),
    ($$forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1", "id": 1}', 3, '{"tenant_id": "t2"}')$$, '22023',
        'changes must not set tenant_id'),
    ($$forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1", "id": 1}', 3, '{"g": 5}')$$, '22023',
        'changes must not set generated column "g"'),
    ($$forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1", "code": "c1"}', 3, '{"code": "c9"}')$$, '22023',
        'changes must not set key column "code"'),
    ($$forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1"}', 3, '{"name": "x"}')$$, '22023',
        'key columns (tenant_id) do not contain the primary key or a unique index of public.cas_tk'),
    -- a partial or an expression unique index is not a key: (tenant_id, name) is unique only where name IS NOT NULL
    ($$forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t1", "name": "t1-b"}', 3, '{"code": "x"}')$$, '22023',
        'key columns (name,tenant_id) do not contain the primary key or a unique index of public.cas_tk'),
    -- cas_get(rel, key)
    ($$forgeyard.cas_get(NULL, '{"id": 1}')$$,                                             '22004', 'rel must not be NULL'),
    ($$forgeyard.cas_get('public.cas_acct', NULL)$$,                                       '22004', 'key must not be NULL'),
    ($$forgeyard.cas_get('public.cas_acct', '[]')$$,                                       '22023', 'key must be a JSON object'),
    ($$forgeyard.cas_get('public.cas_acct', '{}')$$,                                       '22023', 'key must name at least one column'),
    ($$forgeyard.cas_get('public.cas_acct', '{"nope": 1}')$$,                              '22023', 'key names unknown column "nope" of public.cas_acct'),
    ($$forgeyard.cas_get('public.cas_acct', '{"name": "x"}')$$,                            '22023',
        'key columns (name) do not contain the primary key or a unique index of public.cas_acct'),
    ($$forgeyard.cas_get('public.cas_tk', '{"id": 1}')$$,                                  '22023',
        'key must include tenant_id: public.cas_tk has a tenant_id column'),
    ($$forgeyard.cas_get('public.cas_plain', '{"id": 1}')$$,                               '22023', 'public.cas_plain is not under version control'),
    ($$forgeyard.cas_get('public.cas_view', '{"id": 1}')$$,                                '22023', 'rel must be a table: public.cas_view');

SELECT throws_ok('SELECT * FROM ' || call, code, message, format('bad input %s: %s %s', call, code, message))
  FROM bad ORDER BY n;
SELECT is(pg_temp.err($$SELECT forgeyard.cas_update('public.cas_plain', '{"id": 1}', 1, '{"name": "x"}')$$),
          ARRAY['22023', 'public.cas_plain is not under version control',
                $$call forgeyard.enable_versioning('public.cas_plain') first$$],
          'a table not under version control: the DETAIL says what to call');
SELECT is(pg_temp.state(), (SELECT s FROM state_before), 'after every rejected call every table and trigger is exactly as before');

-------------------------------------------------------------------------------------------------
-- A key may carry more columns than a unique key: it must contain the primary key or a unique
-- index, and every column it names must match
-------------------------------------------------------------------------------------------------
SELECT is(forgeyard.cas_update('public.cas_acct', '{"id": 1, "name": "psql"}', 5, '{"note": "extra"}'), 6::bigint,
          'cas_update by (id, name): the key contains the primary key, the extra column is accepted');
SELECT is(pg_temp.state(),
          (SELECT jsonb_set(s, '{acct,0}', s #> '{acct,0}' || '{"note": "extra", "entity_version": 6}') FROM state_before),
          'only row 1 of cas_acct changed (note and version); every other row and table is as before');
SELECT results_eq($$SELECT "row" ->> 'note', entity_version FROM forgeyard.cas_get('public.cas_acct', '{"name": "psql", "id": 1}')$$,
                  $$VALUES ('extra'::text, 6::bigint)$$, 'cas_get by (id, name)');
CREATE TEMP TABLE acct_before3 AS SELECT * FROM public.cas_acct;
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 1, "name": "one"}', 6, '{"note": "wrong"}')$$, 'P0002',
                 'no row of public.cas_acct matches the key', 'an extra key column that does not match the row: P0002');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_acct', '{"id": 2, "name": "psql"}', 4, '{"note": "wrong"}')$$, 'P0002',
                 NULL, 'the id of one row and the name of another: P0002, neither row changes');
SELECT is_empty($$SELECT * FROM forgeyard.cas_get('public.cas_acct', '{"id": 1, "name": "one"}')$$,
                'cas_get with an extra key column that does not match: no row');
SELECT results_eq('SELECT * FROM public.cas_acct ORDER BY id', 'SELECT * FROM acct_before3 ORDER BY id',
                  'the misses changed nothing');
SELECT is(forgeyard.cas_update('public.cas_tk', '{"tenant_id": "t2", "code": "c1", "g": 10}', 1, '{"name": "t2-a"}'),
          2::bigint, 'cas_update by (tenant_id, code, g): contains the unique (tenant_id, code); g is a generated column');
SELECT results_eq('SELECT tenant_id, name, entity_version FROM public.cas_tk ORDER BY tenant_id',
                  $$VALUES ('t1'::text, 't1-b'::text, 3::bigint), ('t2', 't2-a', 2::bigint)$$,
                  'only t2''s row changed');

-- A globally unique primary key in a table with tenant_id: the key is (tenant_id, id).
CREATE TABLE public.cas_tpk (id int PRIMARY KEY, tenant_id text NOT NULL, name text, entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('public.cas_tpk'); END $$;
INSERT INTO public.cas_tpk (id, tenant_id, name) VALUES (1, 't1', 'a'), (2, 't1', 'b'), (3, 't2', 'c');
SELECT is(forgeyard.cas_update('public.cas_tpk', '{"tenant_id": "t1", "id": 1}', 1, '{"name": "a2"}'), 2::bigint,
          'PRIMARY KEY (id) plus tenant_id: cas_update by (tenant_id, id) is accepted');
SELECT results_eq('SELECT id, tenant_id, name, entity_version FROM public.cas_tpk ORDER BY id',
                  $$VALUES (1, 't1'::text, 'a2'::text, 2::bigint), (2, 't1', 'b', 1::bigint), (3, 't2', 'c', 1::bigint)$$,
                  '... and changed only that row');
SELECT results_eq($$SELECT "row" ->> 'name', entity_version FROM forgeyard.cas_get('public.cas_tpk', '{"id": 3, "tenant_id": "t2"}')$$,
                  $$VALUES ('c'::text, 1::bigint)$$, 'cas_get by (tenant_id, id)');
CREATE TEMP TABLE tpk_before AS SELECT * FROM public.cas_tpk;
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_tpk', '{"tenant_id": "t2", "id": 1}', 2, '{"name": "x"}')$$, 'P0002',
                 'no row of public.cas_tpk matches the key', 'another tenant with the row''s id: P0002');
SELECT is_empty($$SELECT * FROM forgeyard.cas_get('public.cas_tpk', '{"tenant_id": "t2", "id": 1}')$$,
                'cas_get by another tenant with the row''s id: no row');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_tpk', '{"id": 1}', 2, '{"name": "x"}')$$, '22023',
                 'key must include tenant_id: public.cas_tpk has a tenant_id column', 'the primary key alone, without the tenant: 22023');
SELECT throws_ok($$SELECT * FROM forgeyard.cas_get('public.cas_tpk', '{"id": 1}')$$, '22023',
                 'key must include tenant_id: public.cas_tpk has a tenant_id column', 'cas_get by the primary key without the tenant: 22023');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_tpk', '{"tenant_id": "t1"}', 2, '{"name": "x"}')$$, '22023',
                 'key columns (tenant_id) do not contain the primary key or a unique index of public.cas_tpk',
                 'the tenant alone, no unique key inside: 22023');
SELECT throws_ok($$SELECT * FROM forgeyard.cas_get('public.cas_tpk', '{"tenant_id": "t1"}')$$, '22023',
                 'key columns (tenant_id) do not contain the primary key or a unique index of public.cas_tpk',
                 'cas_get by the tenant alone: 22023');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_tpk', '{"tenant_id": "t1", "name": "b"}', 1, '{"name": "x"}')$$, '22023',
                 'key columns (name,tenant_id) do not contain the primary key or a unique index of public.cas_tpk',
                 'the tenant and a non-unique column: 22023');
SELECT results_eq('SELECT * FROM public.cas_tpk ORDER BY id', 'SELECT * FROM tpk_before ORDER BY id',
                  'the refused calls and the miss changed nothing');

-------------------------------------------------------------------------------------------------
-- disable_versioning
-------------------------------------------------------------------------------------------------
SELECT is(forgeyard.disable_versioning('public.cas_plain'), false, 'disable_versioning of a table never versioned: false');
SELECT is(forgeyard.disable_versioning('public.cas_mk'), true, 'disable_versioning of a versioned table: true');
SELECT is(pg_temp.triggers('public.cas_mk'), 0::bigint, 'the trigger is gone');
SELECT is(forgeyard.disable_versioning('public.cas_mk'), false, 'disable_versioning again: false');
UPDATE public.cas_mk SET v = 'plain' WHERE a = 1;
INSERT INTO public.cas_mk ("B", a, v, entity_version) VALUES (3, 3, 'z', 42);
SELECT results_eq('SELECT a, v, entity_version FROM public.cas_mk ORDER BY a',
                  $$VALUES (1, 'plain'::text, 1::bigint), (2, 'x2', 2::bigint), (3, 'z', 42::bigint)$$,
                  'after disable_versioning plain UPDATEs and INSERTs work again; column and values stay');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_mk', '{"a": 1, "B": 2}', 1, '{"v": "x"}')$$, '22023',
                 'public.cas_mk is not under version control', 'cas_update after disable_versioning: 22023');
SELECT is(forgeyard.disable_versioning('"Fy Other"."Odd ""Name"""'), true, 'disable_versioning of the quoted table in another schema');
DELETE FROM public.cas_mk WHERE a = 3;
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_mk')$$, 'enable_versioning again after disable');
SELECT throws_ok($$UPDATE public.cas_mk SET v = 'again' WHERE a = 1$$, 'FY002', NULL, 're-enabled: the rule holds again');

-------------------------------------------------------------------------------------------------
-- Renames: a call always acts on the table it was given, never on one that took its old name
-------------------------------------------------------------------------------------------------
CREATE SCHEMA fy_cas_old;
CREATE TABLE fy_cas_old.acct (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('fy_cas_old.acct'); END $$;
INSERT INTO fy_cas_old.acct VALUES (1, 'original');
SELECT results_eq($$SELECT "row" ->> 'name' FROM forgeyard.cas_get('fy_cas_old.acct', '{"id": 1}')$$, $$VALUES ('original'::text)$$,
                  'cas_get of fy_cas_old.acct');
ALTER SCHEMA fy_cas_old RENAME TO fy_cas_new;
CREATE SCHEMA fy_cas_old;
CREATE TABLE fy_cas_old.acct (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('fy_cas_old.acct'); END $$;
INSERT INTO fy_cas_old.acct VALUES (1, 'impostor');
SELECT results_eq($$SELECT "row" ->> 'name' FROM forgeyard.cas_get('fy_cas_new.acct', '{"id": 1}')$$, $$VALUES ('original'::text)$$,
                  'schema renamed, a new table under the old name: cas_get of the renamed table reads the renamed table');
SELECT is(forgeyard.cas_update('fy_cas_new.acct', '{"id": 1}', 1, '{"name": "renamed"}'), 2::bigint,
          'cas_update of the renamed table');
SELECT results_eq($$SELECT 'new', name, entity_version FROM fy_cas_new.acct UNION ALL SELECT 'old', name, entity_version FROM fy_cas_old.acct$$,
                  $$VALUES ('new'::text, 'renamed'::text, 2::bigint), ('old', 'impostor', 1::bigint)$$,
                  'the renamed table changed; the new table that took the old name did not');
SELECT throws_ok($$SELECT forgeyard.cas_update('fy_cas_new.acct', '{"id": 1}', 1, '{"name": "stale"}')$$, 'FY002',
                 'version conflict on fy_cas_new.acct', 'errors name the table by its new name');
ALTER TABLE fy_cas_new.acct RENAME TO acct_renamed;
CREATE TABLE fy_cas_new.acct (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('fy_cas_new.acct'); END $$;
INSERT INTO fy_cas_new.acct VALUES (1, 'second impostor');
SELECT is(forgeyard.cas_update('fy_cas_new.acct_renamed', '{"id": 1}', 2, '{"name": "renamed twice"}'), 3::bigint,
          'table renamed: cas_update of the renamed table');
SELECT results_eq($$SELECT name, entity_version FROM fy_cas_new.acct_renamed UNION ALL SELECT name, entity_version FROM fy_cas_new.acct$$,
                  $$VALUES ('renamed twice'::text, 3::bigint), ('second impostor', 1::bigint)$$,
                  'the renamed table changed; the new table under the old name did not');
-- Catalog changes after a first call are seen by the next one.
CREATE UNIQUE INDEX acct_renamed_name ON fy_cas_new.acct_renamed (name);
SELECT is(forgeyard.cas_update('fy_cas_new.acct_renamed', '{"name": "renamed twice"}', 3, '{"id": 7}'), 4::bigint,
          'a unique index created after the first call is a key at the next one');
DROP TRIGGER forgeyard_versioning ON fy_cas_new.acct_renamed;
SELECT throws_ok($$SELECT forgeyard.cas_update('fy_cas_new.acct_renamed', '{"id": 7}', 4, '{"name": "x"}')$$, '22023',
                 'fy_cas_new.acct_renamed is not under version control', 'the trigger dropped by hand: not under version control');
ALTER TABLE fy_cas_new.acct_renamed RENAME COLUMN name TO label;
DO $$ BEGIN PERFORM forgeyard.enable_versioning('fy_cas_new.acct_renamed'); END $$;
SELECT throws_ok($$SELECT forgeyard.cas_update('fy_cas_new.acct_renamed', '{"id": 7}', 4, '{"name": "x"}')$$, '22023',
                 'changes name unknown column "name" of fy_cas_new.acct_renamed', 'a renamed column is unknown under its old name');
SELECT is(forgeyard.cas_update('fy_cas_new.acct_renamed', '{"id": 7}', 4, '{"label": "relabelled"}'), 5::bigint,
          '... and known under its new name');

-------------------------------------------------------------------------------------------------
-- The caller's own rights: a role without UPDATE cannot change a table through these functions
-------------------------------------------------------------------------------------------------
CREATE TABLE public.cas_sec (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
CREATE TABLE public.cas_sec2 (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
DO $$ BEGIN PERFORM forgeyard.enable_versioning('public.cas_sec'); END $$;
INSERT INTO public.cas_sec VALUES (1, 'owner');
INSERT INTO public.cas_sec2 VALUES (1, 'owner');
CREATE ROLE fy_cas_reader;
DO $$ BEGIN PERFORM forgeyard.grant_usage('fy_cas_reader'); END $$;
GRANT SELECT ON public.cas_sec, public.cas_sec2 TO fy_cas_reader;
GRANT TRIGGER ON public.cas_sec2 TO fy_cas_reader;
CREATE TEMP TABLE sec_before AS
    SELECT (SELECT jsonb_agg(to_jsonb(x)) FROM public.cas_sec x) AS sec, (SELECT jsonb_agg(to_jsonb(x)) FROM public.cas_sec2 x) AS sec2;

SET ROLE fy_cas_reader;
SELECT ok(has_function_privilege('forgeyard.cas_update(regclass, jsonb, bigint, jsonb)', 'EXECUTE')
          AND has_function_privilege('forgeyard.enable_versioning(regclass)', 'EXECUTE'),
          'the reader may EXECUTE cas_update and enable_versioning (grant_usage)');
SELECT ok(has_table_privilege('public.cas_sec', 'SELECT') AND NOT has_table_privilege('public.cas_sec', 'UPDATE'),
          'the reader has SELECT but no UPDATE on cas_sec');
SELECT results_eq($$SELECT "row" ->> 'name', entity_version FROM forgeyard.cas_get('public.cas_sec', '{"id": 1}')$$,
                  $$VALUES ('owner'::text, 1::bigint)$$, 'with SELECT the reader may cas_get');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_sec', '{"id": 1}', 1, '{"name": "reader"}')$$, '42501',
                 'permission denied for table cas_sec', 'without UPDATE: cas_update -> 42501');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_sec', '{"id": 99}', 1, '{"name": "reader"}')$$, '42501', NULL,
                 'without UPDATE: cas_update of a missing key -> 42501 too, not P0002');
SELECT throws_ok($$SELECT forgeyard.enable_versioning('public.cas_sec')$$, '42501',
                 'permission denied: UPDATE on public.cas_sec is needed to version it',
                 'without UPDATE: enable_versioning of a versioned table -> 42501');
SELECT throws_ok($$SELECT forgeyard.enable_versioning('public.cas_sec2')$$, '42501',
                 'permission denied: UPDATE on public.cas_sec2 is needed to version it',
                 'without UPDATE (TRIGGER granted): enable_versioning -> 42501');
SELECT throws_ok($$SELECT forgeyard.disable_versioning('public.cas_sec')$$, '42501', NULL,
                 'not the owner: disable_versioning -> 42501');
SELECT throws_ok($$UPDATE public.cas_sec SET name = 'reader', entity_version = 2$$, '42501', NULL,
                 'and a plain UPDATE is denied as well');
RESET ROLE;
SELECT results_eq($$SELECT (SELECT jsonb_agg(to_jsonb(x)) FROM public.cas_sec x), (SELECT jsonb_agg(to_jsonb(x)) FROM public.cas_sec2 x)$$,
                  'SELECT sec, sec2 FROM sec_before', 'the refused calls changed no row');
SELECT results_eq($$SELECT pg_temp.triggers('public.cas_sec'), pg_temp.triggers('public.cas_sec2')$$,
                  $$VALUES (1::bigint, 0::bigint)$$, 'the refused calls installed or dropped no trigger');

GRANT UPDATE ON public.cas_sec TO fy_cas_reader;
SET ROLE fy_cas_reader;
SELECT is(forgeyard.cas_update('public.cas_sec', '{"id": 1}', 1, '{"name": "reader"}'), 2::bigint,
          'with UPDATE granted: cas_update works');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_sec', '{"id": 1}', 1, '{"name": "again"}')$$, 'FY002', NULL,
                 'with UPDATE granted: a stale cas_update is still FY002');
RESET ROLE;
SELECT results_eq('SELECT name, entity_version FROM public.cas_sec', $$VALUES ('reader'::text, 2::bigint)$$,
                  'the granted cas_update changed the row');

-- enable_versioning creates the trigger with the caller's rights too: UPDATE alone is not enough.
CREATE TABLE public.cas_sec3 (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
GRANT SELECT, UPDATE ON public.cas_sec3 TO fy_cas_reader;
GRANT UPDATE ON public.cas_sec2 TO fy_cas_reader;
SET ROLE fy_cas_reader;
SELECT throws_ok($$SELECT forgeyard.enable_versioning('public.cas_sec3')$$, '42501', 'permission denied for table cas_sec3',
                 'with UPDATE but without TRIGGER: enable_versioning -> 42501');
SELECT lives_ok($$SELECT forgeyard.enable_versioning('public.cas_sec2')$$, 'with UPDATE and TRIGGER: enable_versioning works');
RESET ROLE;
SELECT results_eq($$SELECT pg_temp.triggers('public.cas_sec2'), pg_temp.triggers('public.cas_sec3')$$,
                  $$VALUES (1::bigint, 0::bigint)$$, 'cas_sec2 is versioned now, cas_sec3 is not');

-- A partitioned table is refused: moving a row between partitions re-inserts it.
CREATE TABLE public.cas_parted (id int PRIMARY KEY, entity_version bigint NOT NULL DEFAULT 1) PARTITION BY RANGE (id);
SELECT throws_ok($$SELECT forgeyard.enable_versioning('public.cas_parted')$$, '22023',
                 'rel must be a plain table, not a partitioned one: public.cas_parted',
                 'enable_versioning refuses a partitioned table');

-- Values are typed per column: a NOT NULL domain column the call does not name is no obstacle.
CREATE DOMAIN public.cas_nonempty AS text NOT NULL CHECK (VALUE <> '');
CREATE TABLE public.cas_dom (id int PRIMARY KEY, label public.cas_nonempty DEFAULT 'x', n int,
                             entity_version bigint NOT NULL DEFAULT 1);
SELECT forgeyard.enable_versioning('public.cas_dom');
INSERT INTO public.cas_dom (id, n) VALUES (1, 0);
SELECT is(forgeyard.cas_update('public.cas_dom', '{"id": 1}', 1, '{"n": 5}'), 2::bigint,
          'cas_update of a table with a NOT NULL domain column it does not touch');
SELECT is((SELECT entity_version FROM forgeyard.cas_get('public.cas_dom', '{"id": 1}')), 2::bigint,
          'cas_get of a table with a NOT NULL domain column');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_dom', '{"id": 1}', 2, '{"label": ""}')$$, '23514', NULL,
                 'the domain still checks a value it is given');

-- Scalars into plain columns go as parameters of the columns' own types (no jsonb_to_record);
-- arrays, objects, json(b) and domain columns through jsonb_to_record. Both read a value the same
-- way: the type's input function with the column's typmod.
CREATE TABLE public.cas_scalar (tenant_id text, id int, code varchar(3), n int, price numeric(6, 2), flag text,
                               tags text[], doc jsonb, label public.cas_nonempty DEFAULT 'x',
                               entity_version bigint NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, id));
SELECT forgeyard.enable_versioning('public.cas_scalar');
INSERT INTO public.cas_scalar (tenant_id, id) VALUES ('t1', 1);
SELECT is(forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": "1"}', 1,
                               '{"code": "ab", "n": "7", "price": 1.005, "flag": true}'), 2::bigint,
          'scalars into plain columns: a string number, a number, a boolean');
SELECT row_eq($$SELECT code, n, price, flag FROM public.cas_scalar WHERE id = 1$$,
              ROW('ab'::varchar(3), 7, 1.01::numeric(6, 2), 'true'::text),
              'each read by its type with the column''s typmod (numeric(6,2) rounds)');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 2, '{"code": "abcd"}')$$,
                 '22001', NULL, 'too long for varchar(3): refused, as jsonb_to_record refuses it');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 2, '{"n": 1.5}')$$,
                 '22P02', NULL, 'a fraction for an integer column: refused');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 2, '{"n": "x"}')$$,
                 '22P02', NULL, 'text for an integer column: refused');
SELECT is((SELECT entity_version FROM public.cas_scalar WHERE id = 1), 2::bigint, 'and the refusals changed nothing');
SELECT is(forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 2, '{"n": null, "flag": 12.50}'),
          3::bigint, 'null and a number into text');
SELECT row_eq($$SELECT n, flag FROM public.cas_scalar WHERE id = 1$$, ROW(NULL::int, '12.50'::text),
              'null is NULL, the number keeps its text');
SELECT is(forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 3,
                               '{"tags": ["a", "b"], "doc": {"k": [1]}, "label": "y"}'), 4::bigint,
          'an array, an object and a domain value: through jsonb_to_record');
SELECT row_eq($$SELECT tags, doc, label::text FROM public.cas_scalar WHERE id = 1$$,
              ROW(ARRAY['a', 'b'], '{"k": [1]}'::jsonb, 'y'::text), 'each set as jsonb_to_record sets it');
SELECT is(forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 4, '{"doc": "s", "n": 1}'),
          5::bigint, 'a string into a jsonb column');
SELECT is((SELECT doc FROM public.cas_scalar WHERE id = 1), '"s"'::jsonb, 'is the JSON string');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 4, '{"n": 2}')$$,
                 'FY002', NULL, 'a stale version is still a conflict');
-- The two forms are told apart by the one documented difference: the typed form refuses a bad
-- value before it looks at the row, jsonb_to_record's only for a row it updates.
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 1, '{"price": "abc"}')$$,
                 '22P02', NULL, 'scalars only: the typed form, the bad value is refused first');
SELECT throws_ok($$SELECT forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 1,
                                               '{"price": "abc", "doc": {}}')$$,
                 'FY002', NULL, 'with an object: jsonb_to_record, the stale version is reported');
-- The kept statement of a column set is made again when a column's type changes.
ALTER TABLE public.cas_scalar ALTER COLUMN n TYPE text;
SELECT is(forgeyard.cas_update('public.cas_scalar', '{"tenant_id": "t1", "id": 1}', 5, '{"n": "seven"}'), 6::bigint,
          'after ALTER COLUMN TYPE the same changes are typed anew');
SELECT is((SELECT n FROM public.cas_scalar WHERE id = 1), 'seven', 'with the column''s new type');

SELECT * FROM finish();
ROLLBACK;
