-- The append-only, hash-chained audit log (0.4.0): appends and their chain (seq gap-free from 1
-- per tenant, prev_hash linking, hash = audit_hash of the stored fields), the shipped test vectors
-- (tests/vectors/audit-v1.jsonl and canonical-json.jsonl), the batch form (all or nothing),
-- event_id replay, append-only enforcement (FY030 for every role, ENABLE ALWAYS triggers, no table
-- privileges for applications), audit_verify (edited, deleted, cut and rewritten chains, with and
-- without an anchor), every bad input, tenant binding, the audit_status view, audit_head and audit_read.
-- Time is moved with forgeyard.now_override; nothing sleeps. The extension's own machinery (extconfig,
-- the upgrade from 0.3.0) is checked by regress/cpp_audit.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(371);

SET TIME ZONE 'UTC';
SET client_encoding = 'UTF8';

\ir lib/err.sql

-- 32 zero bytes: the prev_hash of seq 1 and the head of an empty chain.
CREATE FUNCTION pg_temp.genesis() RETURNS bytea LANGUAGE sql IMMUTABLE AS $$ SELECT decode(repeat('00', 32), 'hex') $$;
-- Every audit row and head, for "nothing changed" checks.
CREATE FUNCTION pg_temp.snap() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'events', (SELECT coalesce(jsonb_agg(to_jsonb(e) ORDER BY e.tenant_id, e.seq), '[]') FROM forgeyard.audit_events e),
        'heads', (SELECT coalesce(jsonb_agg(to_jsonb(h) ORDER BY h.tenant_id), '[]') FROM forgeyard.audit_heads h))
$$;
CREATE TEMP TABLE snaps (k text PRIMARY KEY, s jsonb);
-- Named appends: the (seq, hash) each audit_append returned; pg_temp.ap returns the seq.
CREATE TEMP TABLE ap (k text PRIMARY KEY, tenant text, seq bigint, hash bytea);
CREATE FUNCTION pg_temp.ap(k text, t text, actor text, action text, resource text, details jsonb DEFAULT NULL,
                           digest bytea DEFAULT NULL, ref text DEFAULT NULL, occurred timestamptz DEFAULT NULL,
                           eid uuid DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ap SELECT $1, $2, a.seq, a.hash FROM forgeyard.audit_append($2, $3, $4, $5, $6, $7, $8, $9, $10) a
    RETURNING ap.seq
$$;
CREATE FUNCTION pg_temp.hash_of(k text) RETURNS bytea LANGUAGE sql AS $$ SELECT ap.hash FROM ap WHERE ap.k = $1 $$;
-- n events appended to tenant t one by one (actor-i, act.i, res/i, {"i": i}); returns the last seq.
CREATE FUNCTION pg_temp.fill(t text, n integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE s bigint;
BEGIN
    FOR i IN 1..n LOOP
        SELECT a.seq INTO s FROM forgeyard.audit_append(t, 'actor-' || i, 'act.' || i, 'res/' || i, jsonb_build_object('i', i)) a;
    END LOOP;
    RETURN s;
END $$;
-- The hash a stored row's fields give (what audit_verify recomputes).
CREATE FUNCTION pg_temp.rowhash(e forgeyard.audit_events) RETURNS bytea LANGUAGE sql AS $$
    SELECT forgeyard.audit_hash(e.tenant_id, e.seq, e.event_id, e.occurred_at, e.recorded_at, e.actor, e.action, e.resource,
                                e.details, e.payload_digest, e.payload_ref, e.prev_hash)
$$;
-- An independent SQL rendering of canonical(event) (as tests/vectors/make_vectors.py writes it):
-- SHA-256("forgeyard.audit.v1" NUL, tenant, seq, event_id, occurred_at, recorded_at, actor, action,
-- resource, details?, payload_digest?, payload_ref?, then prev_hash); fields are u32-length-prefixed,
-- integers and times (microseconds since 1970) are big-endian int64, optional fields 0 or 1 + field.
CREATE FUNCTION pg_temp.field(b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$ SELECT int4send(length(b)) || b $$;
CREATE FUNCTION pg_temp.opt(b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN b IS NULL THEN '\x00'::bytea ELSE '\x01'::bytea || pg_temp.field(b) END
$$;
CREATE FUNCTION pg_temp.usecs(t timestamptz) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT int8send((extract(epoch FROM t) * 1000000)::bigint)
$$;
CREATE FUNCTION pg_temp.refhash(e forgeyard.audit_events) RETURNS bytea LANGUAGE sql AS $$
    SELECT sha256(convert_to('forgeyard.audit.v1', 'UTF8') || '\x00'::bytea || pg_temp.field(convert_to(e.tenant_id, 'UTF8'))
                  || int8send(e.seq) || pg_temp.field(uuid_send(e.event_id)) || pg_temp.usecs(e.occurred_at)
                  || pg_temp.usecs(e.recorded_at) || pg_temp.field(convert_to(e.actor, 'UTF8'))
                  || pg_temp.field(convert_to(e.action, 'UTF8')) || pg_temp.field(convert_to(e.resource, 'UTF8'))
                  || pg_temp.opt(CASE WHEN e.details IS NOT NULL THEN convert_to(forgeyard.audit_canonical_details(e.details), 'UTF8') END)
                  || pg_temp.opt(e.payload_digest) || pg_temp.opt(convert_to(e.payload_ref, 'UTF8')) || e.prev_hash)
$$;
-- Per stored event of tenant t: seq, prev_hash links to the hash before it (genesis for seq 1), hash is its contents'.
CREATE FUNCTION pg_temp.chain(t text) RETURNS TABLE (seq bigint, linked boolean, hashed boolean) LANGUAGE sql AS $$
    SELECT e.seq,
           e.prev_hash = coalesce(lag(e.hash) OVER (ORDER BY e.seq), CASE WHEN e.seq = 1 THEN pg_temp.genesis() END),
           e.hash = pg_temp.rowhash(e)
      FROM forgeyard.audit_events e WHERE e.tenant_id = $1 ORDER BY e.seq
$$;
-- Anchors taken from audit_head, kept "outside" for audit_verify.
CREATE TEMP TABLE anchors (k text PRIMARY KEY, seq bigint, hash bytea);

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid)'::regprocedure),
          'tenant text, actor text, action text, resource text, details jsonb DEFAULT NULL::jsonb, payload_digest bytea DEFAULT NULL::bytea, payload_ref text DEFAULT NULL::text, occurred_at timestamp with time zone DEFAULT NULL::timestamp with time zone, event_id uuid DEFAULT NULL::uuid',
          'audit_append(tenant, actor, action, resource, details = NULL, payload_digest = NULL, payload_ref = NULL, occurred_at = NULL, event_id = NULL)');
SELECT is(pg_catalog.pg_get_function_result('forgeyard.audit_verify(text, bigint, bigint, bigint, bytea)'::regprocedure),
          'TABLE(ok boolean, checked bigint, first_bad_seq bigint, reason text)', 'audit_verify returns (ok, checked, first_bad_seq, reason)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.audit_verify(text, bigint, bigint, bigint, bytea)'::regprocedure),
          'tenant text, from_seq bigint DEFAULT 1, to_seq bigint DEFAULT NULL::bigint, anchor_seq bigint DEFAULT NULL::bigint, anchor_hash bytea DEFAULT NULL::bytea',
          'audit_verify(tenant, from_seq = 1, to_seq = NULL, anchor_seq = NULL, anchor_hash = NULL)');
SELECT is(pg_catalog.pg_get_function_arguments('forgeyard.audit_read(text, bigint, integer)'::regprocedure),
          'tenant text, from_seq bigint DEFAULT 1, max_events integer DEFAULT 1000', 'audit_read(tenant, from_seq = 1, max_events = 1000)');
CREATE TEMP TABLE audit_api (fn regprocedure PRIMARY KEY, volatility "char");
INSERT INTO audit_api VALUES
    ('forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid)', 'v'),
    ('forgeyard.audit_append_batch(text, text[], text[], text[], jsonb[], bytea[], text[], timestamptz[], uuid[])', 'v'),
    ('forgeyard.audit_head(text)', 's'),
    ('forgeyard.audit_verify(text, bigint, bigint, bigint, bytea)', 's'),
    ('forgeyard.audit_read(text, bigint, integer)', 's'),
    ('forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)', 'i'),
    ('forgeyard.audit_canonical_details(jsonb)', 'i');
SELECT ok((SELECT p.prosecdef AND p.proconfig = '{"search_path=pg_catalog, pg_temp"}' AND p.provolatile = volatility
                  AND obj_description(p.oid, 'pg_proc') IS NOT NULL AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
             FROM pg_catalog.pg_proc p WHERE p.oid = fn),
          fn || ': SECURITY DEFINER, search_path pinned, '
             || CASE volatility WHEN 'v' THEN 'VOLATILE' WHEN 's' THEN 'STABLE' ELSE 'IMMUTABLE' END
             || ', commented, not executable by PUBLIC')
  FROM audit_api ORDER BY fn::text;
SELECT ok((SELECT NOT has_function_privilege('public', p.oid, 'EXECUTE') AND obj_description(p.oid, 'pg_proc') IS NOT NULL
             FROM pg_catalog.pg_proc p WHERE p.oid = 'forgeyard.audit_append_only()'::regprocedure),
          'the trigger function audit_append_only() is commented and not executable by PUBLIC');
SELECT ok(NOT has_table_privilege('public', c, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
          AND obj_description(c, 'pg_class') IS NOT NULL, c || ': commented, nothing granted to PUBLIC')
  FROM unnest(ARRAY['forgeyard.audit_events', 'forgeyard.audit_heads', 'forgeyard.audit_status']::regclass[]) c;

-------------------------------------------------------------------------------------------------
-- Appends: per tenant a gap-free seq from 1 and a hash chain
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-01 00:00:00+00';
SELECT is(pg_temp.ap('ta1', 'ta', 'alice', 'doc.create', 'doc/1'), 1::bigint, 'the first append of tenant ta: seq 1');
SELECT is(pg_temp.ap('tb1', 'tb', 'bob', 'doc.create', 'doc/9', '{"size": 10}'), 1::bigint,
          'the first append of tenant tb (interleaved): seq 1, its own chain');
SET forgeyard.now_override = '2030-01-01 00:00:01.000001+00';
SELECT is(pg_temp.ap('ta2', 'ta', 'alice', 'doc.update', 'doc/1', '{"b": [1, 2.50], "a": "x"}', '\xdeadbeef', 's3://bucket/obj'),
          2::bigint, 'ta: seq 2 (with details, payload_digest and payload_ref)');
SELECT is(pg_temp.ap('tb2', 'tb', 'bob', 'doc.update', 'doc/9'), 2::bigint, 'tb: seq 2');
SELECT is(pg_temp.ap('ta3', 'ta', 'carol', 'doc.delete', 'doc/1', NULL, NULL, NULL, '2029-12-31 23:00:00.5+00'), 3::bigint,
          'ta: seq 3 (with an explicit occurred_at)');
SELECT is((SELECT count(*) FROM forgeyard.audit_events WHERE tenant_id = 'ta'), 3::bigint, 'ta holds 3 events');
-- An append rolled back (to a savepoint) takes no seq.
SET forgeyard.now_override = '2030-01-01 00:00:02+00';
SAVEPOINT before_rollback;
DO $$ BEGIN PERFORM forgeyard.audit_append('ta', 'eve', 'doc.read', 'doc/1'); END $$;
ROLLBACK TO SAVEPOINT before_rollback;
SELECT is(pg_temp.ap('ta4', 'ta', 'dave', 'doc.restore', 'doc/1'), 4::bigint, 'an append rolled back leaves no gap: the next is seq 4');
SELECT is((pg_temp.err($$SELECT forgeyard.audit_append('ta', 'eve', '', 'doc/1')$$))[1], '22023', 'a refused append (empty action): 22023');
SELECT is(pg_temp.ap('ta5', 'ta', 'dave', 'doc.archive', 'doc/1'), 5::bigint, 'a refused append leaves no gap: the next is seq 5');
SELECT is(pg_temp.ap('tb3', 'tb', 'bob', 'doc.delete', 'doc/9'), 3::bigint, 'tb: seq 3');

SELECT results_eq($$SELECT tenant_id, seq FROM forgeyard.audit_events WHERE tenant_id IN ('ta', 'tb') ORDER BY 1, 2$$,
                  $$VALUES ('ta'::text, 1::bigint), ('ta', 2), ('ta', 3), ('ta', 4), ('ta', 5), ('tb', 1), ('tb', 2), ('tb', 3)$$,
                  'stored: per tenant seq 1, 2, 3, ... without gaps, the tenants counted apart');
SELECT results_eq($$SELECT ap.k, e.hash FROM ap JOIN forgeyard.audit_events e ON e.tenant_id = ap.tenant AND e.seq = ap.seq
                     WHERE ap.tenant IN ('ta', 'tb') ORDER BY ap.k$$,
                  $$SELECT ap.k, ap.hash FROM ap WHERE ap.tenant IN ('ta', 'tb') ORDER BY ap.k$$,
                  'the hash each append returned is the stored hash');
SELECT is((SELECT array_agg(DISTINCT octet_length(hash)) FROM forgeyard.audit_events WHERE tenant_id IN ('ta', 'tb')), ARRAY[32],
          'every hash is 32 bytes (SHA-256)');
SELECT results_eq($$SELECT tenant_id, prev_hash FROM forgeyard.audit_events WHERE tenant_id IN ('ta', 'tb') AND seq = 1 ORDER BY 1$$,
                  $$VALUES ('ta'::text, pg_temp.genesis()), ('tb', pg_temp.genesis())$$, 'prev_hash of seq 1 is 32 zero bytes');
SELECT results_eq($$SELECT e.tenant_id, e.seq, e.prev_hash = p.hash FROM forgeyard.audit_events e
                      JOIN forgeyard.audit_events p ON p.tenant_id = e.tenant_id AND p.seq = e.seq - 1
                     WHERE e.tenant_id IN ('ta', 'tb') ORDER BY 1, 2$$,
                  $$VALUES ('ta'::text, 2::bigint, true), ('ta', 3, true), ('ta', 4, true), ('ta', 5, true), ('tb', 2, true), ('tb', 3, true)$$,
                  'each later prev_hash is the hash of the event before it (of the same tenant)');
SELECT results_eq($$SELECT e.tenant_id, e.seq, e.hash = pg_temp.rowhash(e) FROM forgeyard.audit_events e
                     WHERE e.tenant_id IN ('ta', 'tb') ORDER BY 1, 2$$,
                  $$VALUES ('ta'::text, 1::bigint, true), ('ta', 2, true), ('ta', 3, true), ('ta', 4, true), ('ta', 5, true),
                           ('tb', 1, true), ('tb', 2, true), ('tb', 3, true)$$,
                  'every stored hash is forgeyard.audit_hash of the stored row''s fields');
SELECT isnt(pg_temp.hash_of('ta1'), pg_temp.hash_of('tb1'), 'the first events of two tenants have different hashes');
SELECT results_eq($$SELECT seq, occurred_at, recorded_at FROM forgeyard.audit_events WHERE tenant_id = 'ta' ORDER BY seq$$,
                  $$VALUES (1::bigint, '2030-01-01 00:00:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz),
                           (2, '2030-01-01 00:00:01.000001+00', '2030-01-01 00:00:01.000001+00'),
                           (3, '2029-12-31 23:00:00.5+00', '2030-01-01 00:00:01.000001+00'),
                           (4, '2030-01-01 00:00:02+00', '2030-01-01 00:00:02+00'),
                           (5, '2030-01-01 00:00:02+00', '2030-01-01 00:00:02+00')$$,
                  'recorded_at is forgeyard.now() (now_override, to the microsecond); occurred_at defaults to it; an explicit occurred_at is kept');
SELECT is((SELECT recorded_at FROM forgeyard.audit_events WHERE tenant_id = 'ta' AND seq = 5), forgeyard.now(),
          'recorded_at of the last append is forgeyard.now()');
SELECT results_eq($$SELECT seq, actor, action, resource, details, payload_digest, payload_ref FROM forgeyard.audit_events
                     WHERE tenant_id = 'ta' ORDER BY seq$$,
                  $$VALUES (1::bigint, 'alice'::text, 'doc.create'::text, 'doc/1'::text, NULL::jsonb, NULL::bytea, NULL::text),
                           (2, 'alice', 'doc.update', 'doc/1', '{"a": "x", "b": [1, 2.5]}', '\xdeadbeef', 's3://bucket/obj'),
                           (3, 'carol', 'doc.delete', 'doc/1', NULL, NULL, NULL),
                           (4, 'dave', 'doc.restore', 'doc/1', NULL, NULL, NULL),
                           (5, 'dave', 'doc.archive', 'doc/1', NULL, NULL, NULL)$$,
                  'actor, action, resource, details, payload_digest and payload_ref are stored');
SELECT is((SELECT details FROM forgeyard.audit_events WHERE tenant_id = 'tb' AND seq = 1), '{"size": 10}'::jsonb, 'tb: details stored');
SELECT is((SELECT count(DISTINCT event_id) FROM forgeyard.audit_events WHERE tenant_id IN ('ta', 'tb') AND event_id IS NOT NULL),
          8::bigint, 'without an event_id each append gets a new one');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('ta')$$, $$SELECT 5::bigint, pg_temp.hash_of('ta5')$$,
                  'audit_head(ta): the last seq and hash');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('tb')$$, $$SELECT 3::bigint, pg_temp.hash_of('tb3')$$,
                  'audit_head(tb): the last seq and hash');
SELECT results_eq($$SELECT tenant_id, seq, hash FROM forgeyard.audit_heads WHERE tenant_id IN ('ta', 'tb') ORDER BY 1$$,
                  $$VALUES ('ta'::text, 5::bigint, pg_temp.hash_of('ta5')), ('tb', 3, pg_temp.hash_of('tb3'))$$,
                  'forgeyard.audit_heads holds each tenant''s head');

-- Times before 1970 (negative microseconds) and non-ASCII text.
SET forgeyard.now_override = '1969-07-20 20:17:40.123456+00';
SELECT is(pg_temp.ap('old1', 'told', 'ärger ☃', 'mond.landung', 'apollo/11', '{"ü": "☃", "a": 1e-3, "z": [-0, 2.50]}', NULL, NULL,
                     '1900-01-01 00:00:00.000001+00'), 1::bigint, 'an event recorded in 1969 that occurred in 1900 (told): seq 1');
SELECT is(pg_temp.ap('old2', 'told', 'b', 'c', 'd'), 2::bigint, 'told: seq 2');
SELECT results_eq($$SELECT e.tenant_id, e.seq, e.hash = pg_temp.refhash(e) FROM forgeyard.audit_events e
                     WHERE e.tenant_id IN ('ta', 'tb', 'told') ORDER BY 1, 2$$,
                  $$VALUES ('ta'::text, 1::bigint, true), ('ta', 2, true), ('ta', 3, true), ('ta', 4, true), ('ta', 5, true),
                           ('tb', 1, true), ('tb', 2, true), ('tb', 3, true), ('told', 1, true), ('told', 2, true)$$,
                  'every stored hash is SHA-256 of the documented encoding and prev_hash, recomputed independently in SQL (also before 1970)');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('told')$$, $$VALUES (true, 2::bigint, NULL::bigint, NULL::text)$$,
                  'audit_verify(told): ok');

-- audit_hash: every field takes part; names are length-prefixed; details are hashed in canonical form.
CREATE TEMP TABLE hv (n serial, what text, h bytea);
INSERT INTO hv (what, h) SELECT w, forgeyard.audit_hash(t, s, e, o, r, a, c, res, d, pd, pr, p) FROM (VALUES
    ('base',          'ten', 1::bigint, '00000000-0000-4000-8000-000000000001'::uuid, '2030-01-01 00:00:00+00'::timestamptz, '2030-01-01 00:00:00+00'::timestamptz, 'ab', 'c', 'r', NULL::jsonb, NULL::bytea, NULL::text, pg_temp.genesis()),
    ('tenant',        'teN', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('seq',           'ten', 2, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('event_id',      'ten', 1, '00000000-0000-4000-8000-000000000002', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('occurred_at',   'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00.000001+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('recorded_at',   'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00.000001+00', 'ab', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('actor',         'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'aX', 'c', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('actor/action',  'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'a', 'bc', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('action',        'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'X', 'r', NULL, NULL, NULL, pg_temp.genesis()),
    ('resource',      'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'X', NULL, NULL, NULL, pg_temp.genesis()),
    ('details {}',    'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', '{}', NULL, NULL, pg_temp.genesis()),
    ('details',       'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', '{"a": 1}', NULL, NULL, pg_temp.genesis()),
    ('payload_digest','ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, '\x00', NULL, pg_temp.genesis()),
    ('payload_ref',   'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, 'x', pg_temp.genesis()),
    ('prev_hash',     'ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00', 'ab', 'c', 'r', NULL, NULL, NULL, decode(repeat('00', 31) || '01', 'hex'))
) v(w, t, s, e, o, r, a, c, res, d, pd, pr, p);
SELECT is((SELECT count(DISTINCT h) FROM hv), (SELECT count(*) FROM hv),
          'audit_hash: changing any one field (or moving a byte from actor to action) changes the hash');
SELECT is(forgeyard.audit_hash('ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00',
                               'ab', 'c', 'r', '{"b": 1.50, "a": 1e2}', NULL, NULL, pg_temp.genesis()),
          forgeyard.audit_hash('ten', 1, '00000000-0000-4000-8000-000000000001', '2030-01-01 00:00:00+00', '2030-01-01 00:00:00+00',
                               'ab', 'c', 'r', '{"a": 100, "b": 1.5}', NULL, NULL, pg_temp.genesis()),
          'audit_hash: details that differ only in form (key order, 1.50, 1e2) hash alike');

-------------------------------------------------------------------------------------------------
-- Test vectors: tests/vectors/audit-v1.jsonl and tests/vectors/canonical-json.jsonl
-------------------------------------------------------------------------------------------------
\set vectors `cat tests/vectors/audit-v1.jsonl`
\set canonical `cat tests/vectors/canonical-json.jsonl`
CREATE TEMP TABLE vec AS
    SELECT l.n::integer AS n, l.line::jsonb AS j FROM regexp_split_to_table(:'vectors', E'\n') WITH ORDINALITY l(line, n)
     WHERE l.line !~ '^\s*$';
CREATE TEMP TABLE canon AS
    SELECT l.n::integer AS n, l.line::jsonb AS j FROM regexp_split_to_table(:'canonical', E'\n') WITH ORDINALITY l(line, n)
     WHERE l.line !~ '^\s*$';
-- A vector line's details as an argument: JSON null is SQL NULL.
CREATE FUNCTION pg_temp.vdetails(j jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT CASE WHEN jsonb_typeof(j->'details') = 'null' THEN NULL ELSE j->'details' END
$$;
SELECT is((SELECT count(*) FROM vec), 5::bigint, 'audit-v1.jsonl: 5 events');
SELECT is((SELECT array_agg(DISTINCT j->>'tenant') FROM vec), ARRAY['vector-tenant'], 'audit-v1.jsonl: all of tenant vector-tenant');
SELECT is((SELECT count(*) FROM canon), 23::bigint, 'canonical-json.jsonl: 23 cases');

SELECT is(forgeyard.audit_hash(j->>'tenant', (j->>'seq')::bigint, (j->>'event_id')::uuid, (j->>'occurred_at')::timestamptz,
                               (j->>'recorded_at')::timestamptz, j->>'actor', j->>'action', j->>'resource', pg_temp.vdetails(j),
                               decode(j->>'payload_digest', 'hex'), j->>'payload_ref', decode(j->>'prev_hash', 'hex')),
          decode(j->>'hash', 'hex'), format('audit-v1.jsonl line %s: audit_hash of its fields is its hash', n))
  FROM vec ORDER BY n;

-- The same 5 events appended through audit_append get exactly the vector's seq and hash.
CREATE TEMP TABLE vec_out (n integer, seq bigint, hash bytea);
DO $$
DECLARE v record;
BEGIN
    FOR v IN SELECT * FROM vec ORDER BY n LOOP
        PERFORM set_config('forgeyard.now_override', v.j->>'recorded_at', false);
        INSERT INTO vec_out
        SELECT v.n, a.seq, a.hash
          FROM forgeyard.audit_append('vector-tenant', v.j->>'actor', v.j->>'action', v.j->>'resource', pg_temp.vdetails(v.j),
                                      decode(v.j->>'payload_digest', 'hex'), v.j->>'payload_ref',
                                      (v.j->>'occurred_at')::timestamptz, (v.j->>'event_id')::uuid) a;
    END LOOP;
END $$;
SELECT results_eq('SELECT n, seq, hash FROM vec_out ORDER BY n',
                  $$SELECT n, (j->>'seq')::bigint, decode(j->>'hash', 'hex') FROM vec ORDER BY n$$,
                  'audit_append of the 5 vector events (recorded at each line''s recorded_at) returns exactly the vector seq and hash');
SELECT results_eq($$SELECT seq, event_id, occurred_at, recorded_at, actor, action, resource, details, payload_digest, payload_ref, prev_hash, hash
                      FROM forgeyard.audit_read('vector-tenant')$$,
                  $$SELECT (j->>'seq')::bigint, (j->>'event_id')::uuid, (j->>'occurred_at')::timestamptz, (j->>'recorded_at')::timestamptz,
                           j->>'actor', j->>'action', j->>'resource', pg_temp.vdetails(j), decode(j->>'payload_digest', 'hex'),
                           j->>'payload_ref', decode(j->>'prev_hash', 'hex'), decode(j->>'hash', 'hex') FROM vec ORDER BY n$$,
                  'audit_read(vector-tenant) gives back every field of the vector lines');
SELECT results_eq($$SELECT e.seq, pg_temp.refhash(e) FROM forgeyard.audit_events e WHERE e.tenant_id = 'vector-tenant' ORDER BY e.seq$$,
                  $$SELECT (j->>'seq')::bigint, decode(j->>'hash', 'hex') FROM vec ORDER BY n$$,
                  'the SQL rendering of the encoding reproduces the vector hashes too (it checks itself)');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('vector-tenant')$$, $$VALUES (true, 5::bigint, NULL::bigint, NULL::text)$$,
                  'audit_verify(vector-tenant): ok, 5 checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('vector-tenant')$$,
                  $$SELECT 5::bigint, decode(j->>'hash', 'hex') FROM vec WHERE (j->>'seq')::bigint = 5$$,
                  'audit_head(vector-tenant) = (5, the last vector hash)');
SELECT results_eq($$SELECT v.* FROM vec, forgeyard.audit_verify('vector-tenant', 1, NULL, 5, decode(vec.j->>'hash', 'hex')) v
                     WHERE (vec.j->>'seq')::bigint = 5$$,
                  $$VALUES (true, 5::bigint, NULL::bigint, NULL::text)$$, 'audit_verify(vector-tenant) against the last vector hash as anchor: ok');

SELECT is(forgeyard.audit_canonical_details((j->>'input')::jsonb), j->>'canonical',
          format('canonical-json.jsonl line %s: %s -> %s', n, j->>'input', j->>'canonical'))
  FROM canon ORDER BY n;
-- As core's unit test (tests/unit/audit_test.cpp) checks them: canonical text is a fixed point.
SELECT is(forgeyard.audit_canonical_details((j->>'canonical')::jsonb), j->>'canonical',
          format('canonical-json.jsonl line %s: its canonical text %s is a fixed point', n, j->>'canonical'))
  FROM canon ORDER BY n;
-- The depth limit (docs/architecture.md#canonical-details): objects and arrays count, the top level
-- is level 1; the byte named is the offset of the first one at level 65 in jsonb's text output.
SELECT is(forgeyard.audit_canonical_details((repeat('{"a":', 64) || '1' || repeat('}', 64))::jsonb),
          repeat('{"a":', 64) || '1' || repeat('}', 64), '64 objects nested around a number are accepted');
SELECT is((pg_temp.err($$SELECT forgeyard.audit_canonical_details((repeat('{"a":', 65) || '1' || repeat('}', 65))::jsonb)$$))[1:2],
          ARRAY['22023', 'details is not valid JSON: nested deeper than 64 levels at byte 384'], '65 are not: 22023 at byte 384');
SELECT is((pg_temp.err($$SELECT forgeyard.audit_canonical_details(('{"a": "{[", "b":' || repeat('[', 64) || '{}' || repeat(']', 64) || '}')::jsonb)$$))[1:2],
          ARRAY['22023', 'details is not valid JSON: nested deeper than 64 levels at byte 80'],
          'an array at level 65 after a string holding brackets: 22023 at byte 80');
SELECT is((pg_temp.err($$SELECT forgeyard.audit_canonical_details((repeat('[', 64) || '{}' || repeat(']', 64))::jsonb)$$))[1:2],
          ARRAY['22023', 'details is not valid JSON: nested deeper than 64 levels at byte 64'],
          'an array nested 65 levels deep: the depth is reported before "not a JSON object"');


-------------------------------------------------------------------------------------------------
-- audit_append_batch: (seq, hash) per event in order, continuing the chain; all or nothing
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-02 00:00:00+00';
SELECT is(pg_temp.ap('bt1', 'tbatch', 'alice', 'a.one', 'r/1'), 1::bigint, 'tbatch: a single append first, seq 1');
SET forgeyard.now_override = '2030-01-02 00:00:01+00';
CREATE TEMP TABLE bt (k text, ord bigint, seq bigint, hash bytea);
INSERT INTO bt
SELECT 'b1', b.ord, b.seq, b.hash
  FROM forgeyard.audit_append_batch('tbatch', ARRAY['u2', 'u3', 'u4'], ARRAY['a.two', 'a.three', 'a.four'], ARRAY['r/2', 'r/3', 'r/4'],
                                    ARRAY['{"n": 2.0}', NULL, '{}']::jsonb[], ARRAY[NULL, '\x01', NULL]::bytea[],
                                    ARRAY[NULL, NULL, 'ref-4'], ARRAY[NULL, '2030-01-01 12:00:00+00', NULL]::timestamptz[],
                                    ARRAY['00000000-0000-4000-8000-0000000000b2', NULL, NULL]::uuid[])
       WITH ORDINALITY b(seq, hash, ord);
SELECT results_eq($$SELECT ord, seq FROM bt WHERE k = 'b1' ORDER BY ord$$, $$VALUES (1::bigint, 2::bigint), (2, 3), (3, 4)$$,
                  'a batch of 3 after seq 1: seq 2, 3, 4, one row per event, in order');
SELECT results_eq($$SELECT bt.seq, e.hash FROM bt JOIN forgeyard.audit_events e ON e.tenant_id = 'tbatch' AND e.seq = bt.seq
                     WHERE bt.k = 'b1' ORDER BY bt.ord$$,
                  $$SELECT seq, hash FROM bt WHERE k = 'b1' ORDER BY ord$$, 'the batch returns each event''s stored hash');
SELECT is((SELECT prev_hash FROM forgeyard.audit_events WHERE tenant_id = 'tbatch' AND seq = 2), pg_temp.hash_of('bt1'),
          'the first event of the batch links to the hash of the single append before it');
SELECT results_eq($$SELECT * FROM pg_temp.chain('tbatch')$$, $$VALUES (1::bigint, true, true), (2, true, true), (3, true, true), (4, true, true)$$,
                  'tbatch: every prev_hash links, every hash is audit_hash of its row');
SELECT results_eq($$SELECT seq, actor, action, resource, details, payload_digest, payload_ref, occurred_at, recorded_at FROM forgeyard.audit_events
                     WHERE tenant_id = 'tbatch' AND seq > 1 ORDER BY seq$$,
                  $$VALUES (2::bigint, 'u2'::text, 'a.two'::text, 'r/2'::text, '{"n": 2}'::jsonb, NULL::bytea, NULL::text,
                            '2030-01-02 00:00:01+00'::timestamptz, '2030-01-02 00:00:01+00'::timestamptz),
                           (3, 'u3', 'a.three', 'r/3', NULL, '\x01', NULL, '2030-01-01 12:00:00+00', '2030-01-02 00:00:01+00'),
                           (4, 'u4', 'a.four', 'r/4', '{}', NULL, 'ref-4', '2030-01-02 00:00:01+00', '2030-01-02 00:00:01+00')$$,
                  'every field of every batch element is stored; NULL elements of the optional arrays mean "none" / the default');
SELECT is((SELECT event_id FROM forgeyard.audit_events WHERE tenant_id = 'tbatch' AND seq = 2), '00000000-0000-4000-8000-0000000000b2'::uuid,
          'the batch element''s event_id is stored');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('tbatch')$$, $$SELECT seq, hash FROM bt WHERE k = 'b1' AND ord = 3$$,
                  'audit_head after the batch: its last (seq, hash)');
SELECT results_eq($$SELECT b.seq FROM forgeyard.audit_append_batch('tbatch', ARRAY['u5'], ARRAY['a.five'], ARRAY['r/5']) b$$,
                  $$VALUES (5::bigint)$$, 'a batch with only the required arrays: seq 5');
-- event_ids in a batch: an earlier event replayed (same contents) returns its (seq, hash); a repeat within the batch too.
INSERT INTO bt
SELECT 'b2', b.ord, b.seq, b.hash
  FROM forgeyard.audit_append_batch('tbatch', ARRAY['u2', 'u6', 'u6'], ARRAY['a.two', 'a.six', 'a.six'], ARRAY['r/2', 'r/6', 'r/6'],
                                    ARRAY['{"n": 2}', NULL, NULL]::jsonb[], NULL, NULL, NULL,
                                    ARRAY['00000000-0000-4000-8000-0000000000b2', '00000000-0000-4000-8000-0000000000b6',
                                          '00000000-0000-4000-8000-0000000000b6']::uuid[])
       WITH ORDINALITY b(seq, hash, ord);
SELECT results_eq($$SELECT ord, seq FROM bt WHERE k = 'b2' ORDER BY ord$$, $$VALUES (1::bigint, 2::bigint), (2, 6), (3, 6)$$,
                  'a batch replaying event 2 and naming a new event_id twice: seq 2 (replayed), 6, 6');
SELECT results_eq($$SELECT hash FROM bt WHERE k = 'b2' ORDER BY ord$$,
                  $$SELECT e.hash FROM unnest(ARRAY[2, 6, 6]) WITH ORDINALITY u(seq, o)
                      JOIN forgeyard.audit_events e ON e.tenant_id = 'tbatch' AND e.seq = u.seq ORDER BY u.o$$,
                  'the replayed events come back with their stored hashes');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('tbatch')$$, $$SELECT 6::bigint, hash FROM bt WHERE k = 'b2' AND ord = 2$$,
                  'only one event was appended by that batch (head at 6)');

INSERT INTO snaps SELECT 'batch', pg_temp.snap();
INSERT INTO anchors SELECT 'tbatch', h.* FROM forgeyard.audit_head('tbatch') h;
CREATE TEMP TABLE bad_batches (n serial, call text, state text, message text, what text);
INSERT INTO bad_batches (call, state, message, what) VALUES
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y}', '{r,r,r}')$$, '22023',
     'actions must have as many elements as actors', 'actions shorter than actors'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r,r}')$$, '22023',
     'resources must have as many elements as actors', 'resources longer than actors'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r}', ARRAY['{}']::jsonb[])$$, '22023',
     'details must have as many elements as actors', 'details of another length'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r}', NULL, '{"\\x01","\\x02","\\x03"}')$$, '22023',
     'payload_digests must have as many elements as actors', 'payload_digests of another length'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r}', NULL, NULL, '{p}')$$, '22023',
     'payload_refs must have as many elements as actors', 'payload_refs of another length'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r}', NULL, NULL, NULL, '{}')$$, '22023',
     'occurred_ats must have as many elements as actors', 'occurred_ats empty'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b}', '{x,y}', '{r,r}', NULL, NULL, NULL, NULL,
                                                  '{00000000-0000-4000-8000-0000000000c1}')$$, '22023',
     'event_ids must have as many elements as actors', 'event_ids of another length'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,NULL,c}', '{x,y,z}', '{r,r,r}')$$, '22004',
     'actors must not contain NULL', 'a NULL element in actors'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,NULL}', '{r,r,r}')$$, '22004',
     'actions must not contain NULL', 'a NULL element in actions'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{NULL,r,r}')$$, '22004',
     'resources must not contain NULL', 'a NULL element in resources'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', NULL, '{x}', '{r}')$$, '22004', 'actors must not be NULL', 'actors NULL'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a}', NULL, '{r}')$$, '22004', 'actions must not be NULL', 'actions NULL'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a}', '{x}', NULL)$$, '22004', 'resources must not be NULL', 'resources NULL'),
    ($$SELECT * FROM forgeyard.audit_append_batch(NULL, '{a}', '{x}', '{r}')$$, '22004', 'tenant must not be NULL', 'tenant NULL'),
    ($$SELECT * FROM forgeyard.audit_append_batch('', '{a}', '{x}', '{r}')$$, '22023', 'tenant must not be empty', 'tenant empty'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', array_fill('a'::text, ARRAY[1001]), array_fill('x'::text, ARRAY[1001]),
                                                  array_fill('r'::text, ARRAY[1001]))$$, '22023',
     'a batch holds at most 1000 events', '1001 events'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c,d}', '{x,y,"",z}', '{r,r,r,r}')$$, '22023',
     'action must not be empty', 'the 3rd of 4 events has an empty action'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', ARRAY['a', 'b', repeat('c', 257)], '{x,y,z}', '{r,r,r}')$$, '22001',
     'actor is longer than 256 bytes', 'the 3rd event''s actor is over 256 bytes'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', ARRAY['{}', '{}', '[1]']::jsonb[])$$, '22023',
     'details must be a JSON object', 'the 3rd event''s details are not an object'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', NULL, ARRAY[NULL, NULL, '']::bytea[])$$, '22023',
     'payload_digests must not contain an empty digest', 'the 3rd event''s payload_digest is empty'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', NULL,
                                                  ARRAY[NULL, NULL, decode(repeat('ab', 65), 'hex')])$$, '22001',
     NULL, 'the 3rd event''s payload_digest is over 64 bytes'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', NULL, NULL, ARRAY[NULL, NULL, ''])$$, '22023',
     'payload_ref must not be empty', 'the 3rd event''s payload_ref is empty'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', NULL, NULL, NULL,
                                                  ARRAY[NULL, NULL, 'infinity']::timestamptz[])$$, '22023',
     'occurred_at must be a finite timestamp', 'the 3rd event''s occurred_at is infinity'),
    ($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{a,b,c}', '{x,y,z}', '{r,r,r}', NULL, NULL, NULL, NULL,
                                                  '{NULL,NULL,00000000-0000-4000-8000-0000000000b2}')$$, 'FY011',
     'event_id 00000000-0000-4000-8000-0000000000b2 is already in the chain with other contents',
     'the 3rd event reuses event 2''s event_id with other contents (after two were appended)');
SELECT throws_ok(call, state, message, format('audit_append_batch, %s: %s', what, state)) FROM bad_batches ORDER BY n;
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'batch'), 'every refused batch appended nothing: all or nothing');
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('tbatch')$$, $$SELECT seq, hash FROM anchors WHERE k = 'tbatch'$$,
                  'the head of tbatch is unchanged');
SELECT is_empty($$SELECT * FROM forgeyard.audit_append_batch('tbatch', '{}', '{}', '{}')$$, 'an empty batch returns no row');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'batch'), 'an empty batch appended nothing');
SELECT is_empty($$SELECT * FROM forgeyard.audit_append_batch('tbatch-new', '{}', '{}', '{}')$$, 'an empty batch for a new tenant returns no row');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'batch'), 'and creates no head for it either');

-- 1000 events (the most) in one batch, then 500 more: verify pages through all of them.
SET forgeyard.now_override = '2030-01-02 00:01:00+00';
SELECT results_eq($$SELECT count(*), min(b.seq), max(b.seq)
                      FROM forgeyard.audit_append_batch('tbig', array_fill('bot'::text, ARRAY[1000]),
                                                        (SELECT array_agg('act.' || i ORDER BY i) FROM generate_series(1, 1000) i),
                                                        array_fill('r'::text, ARRAY[1000])) b$$,
                  $$VALUES (1000::bigint, 1::bigint, 1000::bigint)$$, 'a batch of 1000 events (the most): seq 1 .. 1000');
SELECT results_eq($$SELECT count(*), min(b.seq), max(b.seq)
                      FROM forgeyard.audit_append_batch('tbig', array_fill('bot'::text, ARRAY[500]),
                                                        (SELECT array_agg('act.' || i ORDER BY i) FROM generate_series(1001, 1500) i),
                                                        array_fill('r'::text, ARRAY[500])) b$$,
                  $$VALUES (500::bigint, 1001::bigint, 1500::bigint)$$, 'a batch of 500 more: seq 1001 .. 1500');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('tbig')$$, $$VALUES (true, 1500::bigint, NULL::bigint, NULL::text)$$,
                  'audit_verify(tbig): 1500 events checked (more than one page)');
SELECT is((SELECT count(*) FROM forgeyard.audit_read('tbig', 1, 10000)), 1500::bigint,
          'audit_read pages through small events up to max_events');

-- Large events: audit_read stops after 8 MiB of details and the caller pages on from the last seq.
SELECT is((SELECT count(*) FROM forgeyard.audit_append_batch('tlarge', array_fill('bot'::text, ARRAY[200]),
                                                             array_fill('big'::text, ARRAY[200]),
                                                             array_fill('r'::text, ARRAY[200]),
                                                             array_fill(jsonb_build_object('blob', repeat('x', 60000)), ARRAY[200]))),
          200::bigint, '200 events with 60 KB of details each');
SELECT ok((SELECT count(*) FROM forgeyard.audit_read('tlarge', 1, 10000)) BETWEEN 1 AND 199,
          'audit_read returns fewer than asked once the rows hold 8 MiB of details');
SELECT is((WITH first AS (SELECT max(seq) AS last FROM forgeyard.audit_read('tlarge', 1, 10000))
           SELECT (SELECT last FROM first) + (SELECT count(*) FROM forgeyard.audit_read('tlarge', (SELECT last FROM first) + 1, 10000))),
          200::bigint, 'the next page from the last seq + 1 returns the rest');

-------------------------------------------------------------------------------------------------
-- event_id replay: the same contents return the first (seq, hash); other contents are FY011
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-03 00:00:00+00';
SELECT is(pg_temp.ap('r1', 'treplay', 'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1',
                     '2030-01-02 23:00:00+00', '00000000-0000-4000-8000-0000000000e1'), 1::bigint, 'treplay: event e1 with every field, seq 1');
SELECT is(pg_temp.ap('r2', 'treplay', 'bob', 'pay', 'inv/2', NULL, NULL, NULL, NULL, '00000000-0000-4000-8000-0000000000e2'), 2::bigint,
          'treplay: event e2 without occurred_at, seq 2');
SET forgeyard.now_override = '2030-01-03 01:00:00+00';
INSERT INTO snaps SELECT 'replay', pg_temp.snap();
SELECT results_eq($$SELECT * FROM forgeyard.audit_append('treplay', 'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1',
                                                          '2030-01-02 23:00:00+00', '00000000-0000-4000-8000-0000000000e1')$$,
                  $$SELECT 1::bigint, pg_temp.hash_of('r1')$$, 'a retry of e1 (an hour later) returns its seq 1 and hash');
SELECT results_eq($$SELECT * FROM forgeyard.audit_append('treplay', 'alice', 'pay', 'inv/1', '{"cur": "EUR", "amount": 10.5}', '\xab', 'ref-1',
                                                          '2030-01-02 23:00:00+00', '00000000-0000-4000-8000-0000000000e1')$$,
                  $$SELECT 1::bigint, pg_temp.hash_of('r1')$$, 'a retry of e1 with details in another form of the same object: a replay');
SELECT results_eq($$SELECT * FROM forgeyard.audit_append('treplay', 'bob', 'pay', 'inv/2', event_id => '00000000-0000-4000-8000-0000000000e2')$$,
                  $$SELECT 2::bigint, pg_temp.hash_of('r2')$$,
                  'a retry of e2 (whose occurred_at defaulted an hour ago), again without occurred_at: its seq 2 and hash');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'replay'), 'the replays appended nothing');
CREATE TEMP TABLE mismatches (n serial, args text, what text);
INSERT INTO mismatches (args, what) VALUES
    ($$'alicE', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'another actor'),
    ($$'alice', 'pay2', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'another action'),
    ($$'alice', 'pay', 'inv/2', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'another resource'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.51, "cur": "EUR"}', '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'other details'),
    ($$'alice', 'pay', 'inv/1', NULL, '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'details NULL'),
    ($$'alice', 'pay', 'inv/1', '{}', '\xab', 'ref-1', '2030-01-02 23:00:00+00'$$, 'details {}'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xac', 'ref-1', '2030-01-02 23:00:00+00'$$, 'another payload_digest'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', NULL, 'ref-1', '2030-01-02 23:00:00+00'$$, 'payload_digest NULL'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-2', '2030-01-02 23:00:00+00'$$, 'another payload_ref'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', NULL, '2030-01-02 23:00:00+00'$$, 'payload_ref NULL'),
    ($$'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1', '2030-01-02 23:00:00.000001+00'$$, 'occurred_at 1 µs later');
SELECT throws_ok(format('SELECT * FROM forgeyard.audit_append(%L, %s, %L)', 'treplay', args, '00000000-0000-4000-8000-0000000000e1'),
                 'FY011', 'event_id 00000000-0000-4000-8000-0000000000e1 is already in the chain with other contents',
                 format('event_id e1 again with %s: FY011', what))
  FROM mismatches ORDER BY n;
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.audit_append('treplay', 'bob', 'pay', 'inv/3', event_id => '00000000-0000-4000-8000-0000000000e2')$$),
          ARRAY['FY011', 'event_id 00000000-0000-4000-8000-0000000000e2 is already in the chain with other contents', 'it is event 2'],
          'FY011 names the event_id, and its DETAIL the seq it has');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'replay'), 'FY011 appended nothing');
SELECT is(pg_temp.ap('r-other', 'treplay2', 'alice', 'pay', 'inv/1', '{"amount": 10.50, "cur": "EUR"}', '\xab', 'ref-1',
                     '2030-01-02 23:00:00+00', '00000000-0000-4000-8000-0000000000e1'), 1::bigint,
          'the same event_id in another tenant is another event (seq 1 of that tenant)');
SELECT isnt(pg_temp.hash_of('r-other'), pg_temp.hash_of('r1'), 'with its own hash');

-------------------------------------------------------------------------------------------------
-- Append-only: UPDATE, DELETE and TRUNCATE fail with FY030 for every role
-------------------------------------------------------------------------------------------------
INSERT INTO snaps SELECT 'append-only', pg_temp.snap();
SELECT throws_ok($$UPDATE forgeyard.audit_events SET actor = 'mallory' WHERE tenant_id = 'ta' AND seq = 1$$, 'FY030',
                 'forgeyard.audit_events is append-only: UPDATE is not allowed', 'the superuser (owner): UPDATE -> FY030');
SELECT throws_ok($$UPDATE forgeyard.audit_events SET details = '{}'$$, 'FY030', NULL, 'the superuser: UPDATE of every row -> FY030');
SELECT throws_ok($$DELETE FROM forgeyard.audit_events WHERE tenant_id = 'ta' AND seq = 5$$, 'FY030',
                 'forgeyard.audit_events is append-only: DELETE is not allowed', 'the superuser: DELETE of the last event -> FY030');
SELECT throws_ok($$DELETE FROM forgeyard.audit_events$$, 'FY030', NULL, 'the superuser: DELETE of every row -> FY030');
SELECT throws_ok($$TRUNCATE forgeyard.audit_events$$, 'FY030',
                 'forgeyard.audit_events is append-only: TRUNCATE is not allowed', 'the superuser: TRUNCATE -> FY030');
SELECT throws_ok($$INSERT INTO forgeyard.audit_events SELECT * FROM forgeyard.audit_events WHERE tenant_id = 'ta' AND seq = 1
                   ON CONFLICT (tenant_id, seq) DO UPDATE SET actor = 'mallory'$$, 'FY030', NULL,
                 'the superuser: INSERT ... ON CONFLICT DO UPDATE -> FY030');
SELECT is((pg_temp.err($$DELETE FROM forgeyard.audit_events WHERE tenant_id = 'ta'$$))[3],
          'audit events are never changed or removed; append a correcting event instead', 'FY030''s DETAIL says what to do instead');
SET session_replication_role = replica;
SELECT throws_ok($$UPDATE forgeyard.audit_events SET actor = 'mallory' WHERE tenant_id = 'ta' AND seq = 1$$, 'FY030', NULL,
                 'session_replication_role = replica: UPDATE -> FY030');
SELECT throws_ok($$DELETE FROM forgeyard.audit_events WHERE tenant_id = 'ta' AND seq = 5$$, 'FY030', NULL,
                 'session_replication_role = replica: DELETE -> FY030');
SELECT throws_ok($$TRUNCATE forgeyard.audit_events$$, 'FY030', NULL, 'session_replication_role = replica: TRUNCATE -> FY030');
RESET session_replication_role;
SELECT results_eq($$SELECT tgname::text COLLATE "default", tgenabled::text FROM pg_catalog.pg_trigger
                     WHERE tgrelid = 'forgeyard.audit_events'::regclass AND NOT tgisinternal ORDER BY 1$$,
                  $$VALUES ('audit_events_no_change'::text, 'A'::text), ('audit_events_no_truncate', 'A')$$,
                  'both triggers are ENABLE ALWAYS');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'append-only'), 'the refused changes changed nothing');

-- An application role: no table privileges; the functions work.
CREATE ROLE fy_aud_app;
SELECT lives_ok($$SELECT forgeyard.grant_usage('fy_aud_app')$$, 'grant_usage(fy_aud_app)');
SET forgeyard.now_override = '2030-01-04 00:00:00+00';
SET ROLE fy_aud_app;
SELECT throws_ok($$INSERT INTO forgeyard.audit_events VALUES ('tapp', 1, gen_random_uuid(), now(), now(), 'a', 'b', 'c', NULL, NULL, NULL,
                                                            decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'))$$,
                 '42501', 'permission denied for table audit_events', 'application role: INSERT INTO audit_events -> 42501');
SELECT throws_ok($$UPDATE forgeyard.audit_events SET actor = 'x'$$, '42501', 'permission denied for table audit_events',
                 'application role: UPDATE audit_events -> 42501');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_events$$, '42501', 'permission denied for table audit_events',
                 'application role: SELECT audit_events -> 42501');
SELECT throws_ok($$DELETE FROM forgeyard.audit_events$$, '42501', NULL, 'application role: DELETE FROM audit_events -> 42501');
SELECT throws_ok($$TRUNCATE forgeyard.audit_events$$, '42501', NULL, 'application role: TRUNCATE audit_events -> 42501');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_heads$$, '42501', NULL, 'application role: SELECT audit_heads -> 42501');
SELECT throws_ok($$UPDATE forgeyard.audit_heads SET seq = 0$$, '42501', NULL, 'application role: UPDATE audit_heads -> 42501');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_status$$, '42501', NULL, 'application role: the audit_status view is for inspect roles');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append('tapp', 'app', 'app.start', 'svc/app', '{"v": 1}')$$, $$VALUES (1::bigint)$$,
                  'application role: audit_append');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append_batch('tapp', '{app,app}', '{app.a,app.b}', '{svc/app,svc/app}')$$,
                  $$VALUES (2::bigint), (3::bigint)$$, 'application role: audit_append_batch');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_head('tapp')$$, $$VALUES (3::bigint)$$, 'application role: audit_head');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('tapp')$$, $$VALUES (true, 3::bigint, NULL::bigint, NULL::text)$$,
                  'application role: audit_verify');
SELECT results_eq($$SELECT seq, action FROM forgeyard.audit_read('tapp')$$, $$VALUES (1::bigint, 'app.start'::text), (2, 'app.a'), (3, 'app.b')$$,
                  'application role: audit_read');
SELECT is(forgeyard.audit_canonical_details('{"b": 1, "a": 2}'), '{"a":2,"b":1}', 'application role: audit_canonical_details');
SELECT is(octet_length(forgeyard.audit_hash('tapp', 1, '00000000-0000-4000-8000-000000000001', now(), now(), 'a', 'b', 'c', NULL, NULL, NULL,
                                            decode(repeat('00', 32), 'hex'))), 32, 'application role: audit_hash');
RESET ROLE;
SELECT results_eq($$SELECT * FROM pg_temp.chain('tapp')$$, $$VALUES (1::bigint, true, true), (2, true, true), (3, true, true)$$,
                  'the application role''s appends form a valid chain');


-------------------------------------------------------------------------------------------------
-- audit_verify: intact chains and ranges; edited, deleted, cut and rewritten chains
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-05 00:00:00+00';
CREATE TEMP TABLE vt (t text PRIMARY KEY, n integer);
INSERT INTO vt VALUES ('v-ok', 6), ('v-edit', 5), ('v-details', 5), ('v-time', 5), ('v-link', 5), ('v-first', 3), ('v-del', 5),
                      ('v-cut', 5), ('v-cut2', 5), ('v-rewrite', 5), ('v-empty', 3), ('v-headrow', 5);
SELECT is(pg_temp.fill(t, n), n::bigint, format('%s: %s events appended', t, n)) FROM vt ORDER BY t;
SELECT is((SELECT count(*) FROM vt, forgeyard.audit_verify(vt.t) v WHERE v.ok AND v.checked = vt.n), 12::bigint,
          'each of the 12 verify tenants verifies ok with all its events checked before anything is tampered with');
-- Anchors, taken from audit_head (and one from an earlier event) and kept aside.
INSERT INTO anchors SELECT vt.t, h.* FROM vt, forgeyard.audit_head(vt.t) h;
INSERT INTO anchors SELECT e.tenant_id || '@' || e.seq, e.seq, e.hash FROM forgeyard.audit_events e
 WHERE (e.tenant_id, e.seq) IN (('v-ok', 3), ('v-ok', 4), ('v-rewrite', 2));
CREATE FUNCTION pg_temp.anchored(t text, anchor text, from_seq bigint DEFAULT 1, to_seq bigint DEFAULT NULL)
    RETURNS TABLE (ok boolean, checked bigint, first_bad_seq bigint, reason text) LANGUAGE sql AS $$
    SELECT v.* FROM anchors a, forgeyard.audit_verify($1, $3, $4, a.seq, a.hash) v WHERE a.k = $2
$$;

-- An intact chain.
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok')$$, $$VALUES (true, 6::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok: ok, checked = the 6 events');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok', 2, 4)$$, $$VALUES (true, 3::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, range 2 .. 4: only those 3 are checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok', 5)$$, $$VALUES (true, 2::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, from 5: 5 and 6 are checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok', 6, 6)$$, $$VALUES (true, 1::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, range 6 .. 6: 1 checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok', 1, 100)$$, $$VALUES (true, 6::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, to_seq past the head: ok, the 6 events checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok', 7)$$, $$VALUES (true, 0::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, from head + 1 (nothing new since the last check): ok, none checked');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-ok', 'v-ok')$$, $$VALUES (true, 6::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok against its head as anchor: ok');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-ok', 'v-ok@3')$$, $$VALUES (true, 6::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok against an anchor at seq 3: ok, all 6 checked');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-ok', 'v-ok@3', 2, 4)$$, $$VALUES (true, 3::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok, range 2 .. 4 against an anchor at seq 3: ok');
SELECT results_eq($$SELECT v.* FROM anchors a, forgeyard.audit_verify('v-ok', 1, NULL, 3, a.hash) v WHERE a.k = 'v-ok@4'$$,
                  $$VALUES (false, 2::bigint, 3::bigint, 'hash of event 3 does not match the anchor'::text)$$,
                  'v-ok against a wrong anchor hash at seq 3: not ok at 3');

-- Tampering, by the superuser bypassing the trigger.
ALTER TABLE forgeyard.audit_events DISABLE TRIGGER audit_events_no_change;
UPDATE forgeyard.audit_events SET actor = 'mallory' WHERE tenant_id = 'v-edit' AND seq = 3;
UPDATE forgeyard.audit_events SET details = details || '{"forged": true}' WHERE tenant_id = 'v-details' AND seq = 2;
UPDATE forgeyard.audit_events SET occurred_at = occurred_at + interval '1 microsecond' WHERE tenant_id = 'v-time' AND seq = 4;
UPDATE forgeyard.audit_events SET action = 'act.forged' WHERE tenant_id = 'v-link' AND seq = 3;
UPDATE forgeyard.audit_events e SET hash = pg_temp.rowhash(e) WHERE tenant_id = 'v-link' AND seq = 3;
UPDATE forgeyard.audit_events SET prev_hash = decode(repeat('11', 32), 'hex') WHERE tenant_id = 'v-first' AND seq = 1;
UPDATE forgeyard.audit_events e SET hash = pg_temp.rowhash(e) WHERE tenant_id = 'v-first' AND seq = 1;
DELETE FROM forgeyard.audit_events WHERE tenant_id = 'v-del' AND seq = 3;
DELETE FROM forgeyard.audit_events WHERE tenant_id = 'v-cut' AND seq > 3;
UPDATE forgeyard.audit_heads SET seq = 3, hash = (SELECT e.hash FROM forgeyard.audit_events e WHERE e.tenant_id = 'v-cut' AND e.seq = 3)
 WHERE tenant_id = 'v-cut';
DELETE FROM forgeyard.audit_events WHERE tenant_id = 'v-cut2' AND seq > 3;
DO $$ BEGIN
    FOR s IN 3..5 LOOP
        UPDATE forgeyard.audit_events e
           SET actor = 'rewritten-' || s,
               prev_hash = (SELECT p.hash FROM forgeyard.audit_events p WHERE p.tenant_id = 'v-rewrite' AND p.seq = s - 1)
         WHERE e.tenant_id = 'v-rewrite' AND e.seq = s;
        UPDATE forgeyard.audit_events e SET hash = pg_temp.rowhash(e) WHERE e.tenant_id = 'v-rewrite' AND e.seq = s;
    END LOOP;
    UPDATE forgeyard.audit_heads
       SET hash = (SELECT e.hash FROM forgeyard.audit_events e WHERE e.tenant_id = 'v-rewrite' AND e.seq = 5)
     WHERE tenant_id = 'v-rewrite';
END $$;
-- The last event rewritten with a recomputed hash, the head row left alone: the head row tells.
UPDATE forgeyard.audit_events SET actor = 'rewritten' WHERE tenant_id = 'v-headrow' AND seq = 5;
UPDATE forgeyard.audit_events e SET hash = pg_temp.rowhash(e) WHERE tenant_id = 'v-headrow' AND seq = 5;
DELETE FROM forgeyard.audit_events WHERE tenant_id = 'v-empty';
DELETE FROM forgeyard.audit_heads WHERE tenant_id = 'v-empty';
UPDATE forgeyard.audit_events SET actor = 'mallory' WHERE tenant_id = 'tbig' AND seq = 1200;
ALTER TABLE forgeyard.audit_events ENABLE ALWAYS TRIGGER audit_events_no_change;

SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-headrow')$$,
                  $$VALUES (false, 4::bigint, 5::bigint, 'hash of event 5 does not match the chain''s head row'::text)$$,
                  'v-headrow (event 5 rewritten with its hash recomputed, head row not moved): not ok at 5');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-edit')$$,
                  $$VALUES (false, 2::bigint, 3::bigint, 'hash of event 3 does not match its contents'::text)$$,
                  'v-edit (actor of event 3 changed): first_bad_seq 3, 2 checked before it');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-edit', 1, 2)$$, $$VALUES (true, 2::bigint, NULL::bigint, NULL::text)$$,
                  'v-edit, range 1 .. 2 (before the edit): ok');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-edit', 3, 3)$$,
                  $$VALUES (false, 0::bigint, 3::bigint, 'hash of event 3 does not match its contents'::text)$$,
                  'v-edit, range 3 .. 3: not ok at 3');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-details')$$,
                  $$VALUES (false, 1::bigint, 2::bigint, 'hash of event 2 does not match its contents'::text)$$,
                  'v-details (a key added to the details of event 2): first_bad_seq 2');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-time')$$,
                  $$VALUES (false, 3::bigint, 4::bigint, 'hash of event 4 does not match its contents'::text)$$,
                  'v-time (occurred_at of event 4 moved by 1 µs): first_bad_seq 4');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-link')$$,
                  $$VALUES (false, 3::bigint, 4::bigint, 'prev_hash of event 4 does not match the hash of event 3'::text)$$,
                  'v-link (event 3 edited and its hash recomputed): event 4 no longer links, first_bad_seq 4');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-first')$$,
                  $$VALUES (false, 0::bigint, 1::bigint, 'prev_hash of event 1 is not the genesis hash'::text)$$,
                  'v-first (prev_hash of event 1 replaced, hash recomputed): first_bad_seq 1');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-del')$$,
                  $$VALUES (false, 2::bigint, 3::bigint, 'event 3 is missing (the next stored event is 4)'::text)$$,
                  'v-del (event 3 deleted): named as missing');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-del', 4)$$,
                  $$VALUES (false, 0::bigint, 3::bigint, 'event 3 is missing'::text)$$,
                  'v-del, from 4: the event before the range (3) is missing');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-cut')$$, $$VALUES (true, 3::bigint, NULL::bigint, NULL::text)$$,
                  'v-cut (events 4 and 5 deleted, head set back to 3): without an anchor it looks intact');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-cut', 'v-cut')$$,
                  $$VALUES (false, 3::bigint, 4::bigint, 'the chain ends at seq 3, before the anchor at seq 5: its tail was cut'::text)$$,
                  'v-cut against the anchor taken at seq 5: the tail was cut');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-cut2')$$,
                  $$VALUES (false, 3::bigint, 4::bigint, 'event 4 is missing (the chain head is at seq 5)'::text)$$,
                  'v-cut2 (events 4 and 5 deleted, the head left at 5): detected without an anchor');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-cut2', 'v-cut2')$$,
                  $$VALUES (false, 3::bigint, 4::bigint, 'the chain ends at seq 3, before the anchor at seq 5: its tail was cut'::text)$$,
                  'v-cut2 against the anchor: the tail was cut');
SELECT results_eq($$SELECT * FROM pg_temp.chain('v-rewrite')$$,
                  $$VALUES (1::bigint, true, true), (2, true, true), (3, true, true), (4, true, true), (5, true, true)$$,
                  'v-rewrite: events 3 .. 5 rewritten with consistent hashes');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-rewrite')$$, $$VALUES (true, 5::bigint, NULL::bigint, NULL::text)$$,
                  'v-rewrite without an anchor: ok (a consistent rewrite is invisible from inside)');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-rewrite', 'v-rewrite')$$,
                  $$VALUES (false, 4::bigint, 5::bigint, 'hash of event 5 does not match the anchor'::text)$$,
                  'v-rewrite against the anchor taken at seq 5: not ok at 5');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-rewrite', 'v-rewrite@2')$$, $$VALUES (true, 5::bigint, NULL::bigint, NULL::text)$$,
                  'v-rewrite against an anchor at seq 2 (before the rewritten part): ok');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-empty')$$, $$VALUES (true, 0::bigint, NULL::bigint, NULL::text)$$,
                  'v-empty (every event and the head deleted): without an anchor it looks like an empty chain');
SELECT results_eq($$SELECT * FROM pg_temp.anchored('v-empty', 'v-empty')$$,
                  $$VALUES (false, 0::bigint, 1::bigint, 'the chain ends at seq 0, before the anchor at seq 3: its tail was cut'::text)$$,
                  'v-empty against the anchor taken at seq 3: the tail was cut');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('tbig')$$,
                  $$VALUES (false, 1199::bigint, 1200::bigint, 'hash of event 1200 does not match its contents'::text)$$,
                  'tbig (event 1200 edited, on the second page): first_bad_seq 1200');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('tbig', 1201)$$, $$VALUES (true, 300::bigint, NULL::bigint, NULL::text)$$,
                  'tbig from 1201: ok, 300 checked');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('v-ok')$$, $$VALUES (true, 6::bigint, NULL::bigint, NULL::text)$$,
                  'v-ok is still ok: the tampering of the other tenants does not touch it');
SELECT results_eq($$SELECT tgname::text COLLATE "default", tgenabled::text FROM pg_catalog.pg_trigger
                     WHERE tgrelid = 'forgeyard.audit_events'::regclass AND NOT tgisinternal ORDER BY 1$$,
                  $$VALUES ('audit_events_no_change'::text, 'A'::text), ('audit_events_no_truncate', 'A')$$,
                  'both triggers are ENABLE ALWAYS again');
SELECT throws_ok($$UPDATE forgeyard.audit_events SET actor = 'x' WHERE tenant_id = 'v-ok'$$, 'FY030', NULL,
                 'UPDATE is refused again (FY030)');

-------------------------------------------------------------------------------------------------
-- Limits: the longest accepted values
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-06 00:00:00+00';
SELECT is(pg_temp.ap('max', repeat('t', 128), repeat('a', 256), repeat('c', 128), repeat('r', 512),
                     jsonb_build_object('k', repeat('x', 65528)), decode(repeat('ab', 64), 'hex'), repeat('f', 2048)), 1::bigint,
          'tenant of 128 bytes, actor of 256, action of 128, resource of 512, details of 65536 bytes in canonical form, a 64-byte payload_digest and a 2048-byte payload_ref are accepted');
SELECT is(octet_length(forgeyard.audit_canonical_details(jsonb_build_object('k', repeat('x', 65528)))), 65536,
          'that details object is exactly 65536 bytes in canonical form');
SELECT is(pg_temp.ap('max-utf8', repeat('é', 64), 'a', 'c', 'r'), 1::bigint, 'a tenant of 64 × é (128 bytes) is accepted');
CREATE TEMP TABLE wide AS SELECT jsonb_object_agg(format('k%s', lpad(i::text, 5, '0')), 1) AS d FROM generate_series(1, 5900) i;
SELECT ok((SELECT octet_length(d::text) > 65536 AND octet_length(forgeyard.audit_canonical_details(d)) <= 65536 FROM wide),
          'a details object over 64 KiB as jsonb text but under it in canonical form');
SELECT is(pg_temp.ap('wide', 'twide', 'a', 'c', 'r', (SELECT d FROM wide)), 1::bigint,
          'is accepted: the limit applies to the canonical form');
SELECT is(pg_temp.ap('deep', 'tdeep', 'a', 'c', 'r', (repeat('{"a":', 10) || '1' || repeat('}', 10))::jsonb), 1::bigint,
          'details nested 10 levels deep are accepted');
SELECT results_eq($$SELECT v.ok, v.checked FROM unnest(ARRAY[repeat('t', 128), repeat('é', 64), 'twide', 'tdeep']) t,
                                                 forgeyard.audit_verify(t) v$$,
                  $$VALUES (true, 1::bigint), (true, 1::bigint), (true, 1::bigint), (true, 1::bigint)$$,
                  'the chains with values at the limits verify');

-------------------------------------------------------------------------------------------------
-- Bad input: each names the argument and changes nothing
-------------------------------------------------------------------------------------------------
INSERT INTO snaps SELECT 'bad', pg_temp.snap();
CREATE TEMP TABLE bad_calls (n serial, call text, state text, message text);
INSERT INTO bad_calls (call, state, message) VALUES
    ($$SELECT * FROM forgeyard.audit_append(NULL, 'a', 'b', 'c')$$, '22004', 'tenant must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', NULL, 'b', 'c')$$, '22004', 'actor must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', NULL, 'c')$$, '22004', 'action must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', NULL)$$, '22004', 'resource must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_append('', 'a', 'b', 'c')$$, '22023', 'tenant must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', '', 'b', 'c')$$, '22023', 'actor must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', '', 'c')$$, '22023', 'action must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', '')$$, '22023', 'resource must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append(repeat('t', 129), 'a', 'b', 'c')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$SELECT * FROM forgeyard.audit_append(repeat('é', 65), 'a', 'b', 'c')$$, '22001', 'tenant is longer than 128 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', repeat('a', 257), 'b', 'c')$$, '22001', 'actor is longer than 256 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', repeat('b', 129), 'c')$$, '22001', 'action is longer than 128 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', repeat('c', 513))$$, '22001', 'resource is longer than 512 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', '[1]')$$, '22023', 'details must be a JSON object'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', '1')$$, '22023', 'details must be a JSON object'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', '"x"')$$, '22023', 'details must be a JSON object'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', 'null'::jsonb)$$, '22023', 'details must be a JSON object'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', jsonb_build_object('k', repeat('x', 65529)))$$, '22023',
     'details is over 65536 bytes in canonical form'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', NULL, '')$$, '22023', 'payload_digest must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', NULL, decode(repeat('ab', 65), 'hex'))$$, '22001',
     'payload_digest is longer than 64 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', NULL, NULL, '')$$, '22023', 'payload_ref must not be empty'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', NULL, NULL, repeat('f', 2049))$$, '22001',
     'payload_ref is longer than 2048 bytes'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', occurred_at => 'infinity')$$, '22023',
     'occurred_at must be a finite timestamp'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', occurred_at => '-infinity')$$, '22023',
     'occurred_at must be a finite timestamp'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', occurred_at => '10000-01-01 00:00:00+00')$$, '22023',
     'occurred_at must lie in the years 1 to 9999'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', occurred_at => '294276-12-31 23:59:59.999999+00')$$, '22023',
     'occurred_at must lie in the years 1 to 9999'),
    ($$SELECT * FROM forgeyard.audit_append('tbad', 'a', 'b', 'c', occurred_at => '0001-12-31 23:59:59+00 BC')$$, '22023',
     'occurred_at must lie in the years 1 to 9999'),
    ($$SELECT * FROM forgeyard.audit_head(NULL)$$, '22004', 'tenant must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_head('')$$, '22023', 'tenant must not be empty'),
    ($$SELECT * FROM forgeyard.audit_head(repeat('t', 129))$$, '22001', 'tenant is longer than 128 bytes'),
    ($$SELECT * FROM forgeyard.audit_verify(NULL)$$, '22004', 'tenant must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 0)$$, '22023', 'from_seq must be at least 1'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', -1)$$, '22023', 'from_seq must be at least 1'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', NULL)$$, '22004', 'from_seq must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 3, 2)$$, '22023', 'to_seq must not be below from_seq'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 1, NULL, 5)$$, '22023', 'anchor_seq and anchor_hash must be given together'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 1, NULL, NULL, decode(repeat('00', 32), 'hex'))$$, '22023',
     'anchor_seq and anchor_hash must be given together'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 1, NULL, 5, decode(repeat('00', 31), 'hex'))$$, '22023', 'anchor_hash must be 32 bytes'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 1, NULL, 5, decode(repeat('00', 33), 'hex'))$$, '22023', 'anchor_hash must be 32 bytes'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 1, NULL, 5, '')$$, '22023', 'anchor_hash must be 32 bytes'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 2, 4, 5, decode(repeat('00', 32), 'hex'))$$, '22023',
     'anchor_seq must be within from_seq .. to_seq'),
    ($$SELECT * FROM forgeyard.audit_verify('ta', 2, NULL, 1, decode(repeat('00', 32), 'hex'))$$, '22023',
     'anchor_seq must be within from_seq .. to_seq'),
    ($$SELECT * FROM forgeyard.audit_read(NULL)$$, '22004', 'tenant must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_read('ta', 1, 0)$$, '22023', 'max_events must be between 1 and 10000'),
    ($$SELECT * FROM forgeyard.audit_read('ta', 1, 10001)$$, '22023', 'max_events must be between 1 and 10000'),
    ($$SELECT * FROM forgeyard.audit_read('ta', 1, -1)$$, '22023', 'max_events must be between 1 and 10000'),
    ($$SELECT * FROM forgeyard.audit_read('ta', 0)$$, '22023', 'from_seq must be at least 1'),
    ($$SELECT * FROM forgeyard.audit_read('ta', NULL)$$, '22004', 'from_seq must not be NULL'),
    ($$SELECT * FROM forgeyard.audit_read('ta', 1, NULL)$$, '22004', 'max_events must not be NULL'),
    ($$SELECT forgeyard.audit_hash('ta', 1, '00000000-0000-4000-8000-000000000001', now(), now(), 'a', 'b', 'c', NULL, NULL, NULL,
                                   decode(repeat('00', 31), 'hex'))$$, '22023', 'prev_hash must be 32 bytes'),
    ($$SELECT forgeyard.audit_hash('ta', 1, '00000000-0000-4000-8000-000000000001', now(), now(), 'a', 'b', 'c', NULL, NULL, NULL, NULL)$$,
     '22004', 'prev_hash must not be NULL'),
    ($$SELECT forgeyard.audit_hash('ta', 0, '00000000-0000-4000-8000-000000000001', now(), now(), 'a', 'b', 'c', NULL, NULL, NULL,
                                   decode(repeat('00', 32), 'hex'))$$, '22023', 'seq must be at least 1'),
    ($$SELECT forgeyard.audit_hash('ta', 1, NULL, now(), now(), 'a', 'b', 'c', NULL, NULL, NULL, decode(repeat('00', 32), 'hex'))$$,
     '22004', 'event_id must not be NULL'),
    ($$SELECT forgeyard.audit_hash('ta', 1, '00000000-0000-4000-8000-000000000001', 'infinity', now(), 'a', 'b', 'c', NULL, NULL, NULL,
                                   decode(repeat('00', 32), 'hex'))$$, '22023', 'occurred_at must be a finite timestamp'),
    ($$SELECT forgeyard.audit_hash('ta', 1, '00000000-0000-4000-8000-000000000001', now(), now(), 'a', 'b', 'c', '[1]', NULL, NULL,
                                   decode(repeat('00', 32), 'hex'))$$, '22023', 'details must be a JSON object'),
    ($$SELECT forgeyard.audit_canonical_details(NULL)$$, '22004', 'details must not be NULL'),
    ($$SELECT forgeyard.audit_canonical_details('[]')$$, '22023', 'details must be a JSON object');
SELECT throws_ok(call, state, message, format('%s: %s %s', regexp_replace(call, '\s+', ' ', 'g'), state, message)) FROM bad_calls ORDER BY n;
SELECT is(pg_temp.err($$SELECT * FROM forgeyard.audit_append('tbad', repeat('a', 257), 'b', 'c')$$),
          ARRAY['22001', 'actor is longer than 256 bytes', 'length is 257 bytes'], 'an over-long name: its length in DETAIL');
SELECT matches(array_to_string(pg_temp.err(format('SELECT * FROM forgeyard.audit_append(%L, %L, %L, %L, %L)', 'tbad', 'a', 'b', 'c',
                                                  repeat('{"a":', 100) || '1' || repeat('}', 100))), '|'),
               '^22023\|details is not valid JSON: nested deeper than 64 levels', 'details nested 100 levels deep: 22023');
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'bad'), 'after every refused call the audit tables are exactly as before');
SELECT is((SELECT count(*) FROM forgeyard.audit_heads WHERE tenant_id = 'tbad'), 0::bigint, 'no head was created for the refused tenant');

-------------------------------------------------------------------------------------------------
-- Tenancy: a bound role acts only for its tenants (FY040); audit_status shows it only those
-------------------------------------------------------------------------------------------------
SET forgeyard.now_override = '2030-01-07 00:00:00+00';
SELECT is(pg_temp.fill('a', 2), 2::bigint, 'tenant a: 2 events');
SET forgeyard.now_override = '2030-01-07 00:00:05+00';
SELECT is(pg_temp.fill('b', 3), 3::bigint, 'tenant b: 3 events');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('b', 6)$$, $$VALUES (true, 0::bigint, NULL::bigint, NULL::text)$$,
                  'a range that starts past the head is empty, not broken');
CREATE ROLE fy_aud_bound;
CREATE ROLE fy_aud_insp;
CREATE ROLE fy_aud_insp_all;
CREATE ROLE fy_aud_grp NOLOGIN;
CREATE ROLE fy_aud_login LOGIN IN ROLE fy_aud_grp;
DO $$ BEGIN
    PERFORM forgeyard.grant_usage('fy_aud_bound');
    PERFORM forgeyard.grant_usage('fy_aud_grp');
    PERFORM forgeyard.grant_inspect('fy_aud_insp');
    PERFORM forgeyard.grant_inspect('fy_aud_insp_all');
    PERFORM forgeyard.bind_tenant('fy_aud_bound', 'a');
    PERFORM forgeyard.bind_tenant('fy_aud_insp', 'a');
    PERFORM forgeyard.bind_tenant('fy_aud_login', 'a');
END $$;
INSERT INTO snaps SELECT 'tenancy', pg_temp.snap();
SET ROLE fy_aud_bound;
SELECT throws_ok($$SELECT * FROM forgeyard.audit_append('b', 'x', 'y', 'z')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'bound to a: audit_append for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_append_batch('b', '{x}', '{y}', '{z}')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'bound to a: audit_append_batch for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_head('b')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'bound to a: audit_head for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_verify('b')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'bound to a: audit_verify for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_read('b')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'bound to a: audit_read for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_append('c', 'x', 'y', 'z')$$, 'FY040', 'tenant "c" is not allowed for this role',
                 'bound to a: audit_append for a new tenant c -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_head('c')$$, 'FY040', NULL,
                 'bound to a: audit_head of a tenant without events -> FY040, not an empty head');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_read('c')$$, 'FY040', NULL, 'bound to a: audit_read of a tenant without events -> FY040');
RESET ROLE;
SELECT is(pg_temp.snap(), (SELECT s FROM snaps WHERE k = 'tenancy'), 'the refused calls for other tenants changed nothing');
SET ROLE fy_aud_bound;
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append('a', 'x', 'y', 'z')$$, $$VALUES (3::bigint)$$, 'bound to a: audit_append for a works');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append_batch('a', '{x}', '{y}', '{z}')$$, $$VALUES (4::bigint)$$,
                  'bound to a: audit_append_batch for a works');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_head('a')$$, $$VALUES (4::bigint)$$, 'bound to a: audit_head for a works');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('a')$$, $$VALUES (true, 4::bigint, NULL::bigint, NULL::text)$$,
                  'bound to a: audit_verify for a works');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('a', 2)$$, $$VALUES (2::bigint), (3::bigint), (4::bigint)$$,
                  'bound to a: audit_read for a works');
RESET ROLE;
-- A login bound to a cannot leave its binding by SET ROLE to an unbound group.
SET ROLE fy_aud_grp;
SELECT results_eq($$SELECT seq FROM forgeyard.audit_head('b')$$, $$VALUES (3::bigint)$$, 'the unbound group alone may act for b');
RESET ROLE;
SET SESSION AUTHORIZATION fy_aud_login;
SET ROLE fy_aud_grp;
SELECT throws_ok($$SELECT * FROM forgeyard.audit_append('b', 'x', 'y', 'z')$$, 'FY040', 'tenant "b" is not allowed for this role',
                 'login bound to a, after SET ROLE to the unbound group: audit_append for b -> FY040');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_read('b')$$, 'FY040', NULL,
                 'login bound to a, after SET ROLE to the unbound group: audit_read for b -> FY040');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_append('a', 'login', 'y', 'z')$$, $$VALUES (5::bigint)$$,
                  'login bound to a, after SET ROLE to the unbound group: audit_append for a works');
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT results_eq($$SELECT seq FROM forgeyard.audit_head('b')$$, $$VALUES (3::bigint)$$, 'b is untouched');

-- audit_status (a's last event was appended by the login fy_aud_login, whose clock is the real one
-- in the PL/pgSQL edition: docs/architecture.md, "Two editions")
SELECT results_eq($$SELECT tenant_id, head_seq, head_hash, last_recorded_at FROM forgeyard.audit_status WHERE tenant_id IN ('a', 'b') ORDER BY 1$$,
                  $$SELECT 'a'::text, h.seq, h.hash, (SELECT e.recorded_at FROM forgeyard.audit_events e
                                                       WHERE e.tenant_id = 'a' AND e.seq = h.seq)
                      FROM forgeyard.audit_head('a') h
                    UNION ALL
                    SELECT 'b', h.seq, h.hash, '2030-01-07 00:00:05+00' FROM forgeyard.audit_head('b') h$$,
                  'audit_status: each tenant''s head (seq, hash, when its last event was recorded)');
SELECT results_eq($$SELECT tenant_id, head_seq FROM forgeyard.audit_status WHERE tenant_id IN ('ta', 'tb', 'vector-tenant', 'tbig') ORDER BY 1$$,
                  $$VALUES ('ta'::text, 5::bigint), ('tb', 3), ('tbig', 1500), ('vector-tenant', 5)$$,
                  'audit_status: the heads of the other tenants');
SELECT is((SELECT count(*) FROM forgeyard.audit_status), (SELECT count(*) FROM forgeyard.audit_heads),
          'audit_status: one row per head (for a role bound to nothing)');
CREATE FUNCTION pg_temp.peek(tenant text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    IF tenant <> 'a' THEN RAISE EXCEPTION 'saw a row of tenant %', tenant; END IF;
    RETURN true;
END $$;
SET ROLE fy_aud_insp;
SELECT results_eq('SELECT tenant_id, head_seq FROM forgeyard.audit_status', $$VALUES ('a'::text, 5::bigint)$$,
                  'an inspection role bound to a: audit_status shows only a');
SELECT lives_ok('SELECT * FROM forgeyard.audit_status WHERE pg_temp.peek(tenant_id)',
                'audit_status: a function in the WHERE clause never sees another tenant''s row (security_barrier)');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_head('a')$$, '42501', NULL, 'an inspection role cannot call audit_head');
SELECT throws_ok($$SELECT * FROM forgeyard.audit_append('a', 'x', 'y', 'z')$$, '42501', NULL, 'an inspection role cannot call audit_append');
SELECT throws_ok('SELECT * FROM forgeyard.audit_events', '42501', NULL, 'an inspection role cannot read forgeyard.audit_events');
RESET ROLE;
SET ROLE fy_aud_insp_all;
SELECT results_eq($$SELECT tenant_id FROM forgeyard.audit_status WHERE tenant_id IN ('a', 'b') ORDER BY 1$$, $$VALUES ('a'::text), ('b')$$,
                  'an unbound inspection role sees every tenant''s head');
RESET ROLE;

-------------------------------------------------------------------------------------------------
-- audit_head of an empty tenant; audit_read: seq order from from_seq, at most max_events
-------------------------------------------------------------------------------------------------
SELECT results_eq($$SELECT * FROM forgeyard.audit_head('tnothing')$$, $$SELECT 0::bigint, pg_temp.genesis()$$,
                  'audit_head of a tenant without events: (0, 32 zero bytes)');
SELECT results_eq($$SELECT * FROM forgeyard.audit_verify('tnothing')$$, $$VALUES (true, 0::bigint, NULL::bigint, NULL::text)$$,
                  'audit_verify of a tenant without events: ok, none checked');
SELECT is_empty($$SELECT * FROM forgeyard.audit_read('tnothing')$$, 'audit_read of a tenant without events: no row');
SELECT is((SELECT count(*) FROM forgeyard.audit_heads WHERE tenant_id = 'tnothing'), 0::bigint, 'reading an empty tenant creates no head');
SET forgeyard.now_override = '2030-01-08 00:00:00+00';
SELECT is(pg_temp.fill('tread', 5), 5::bigint, 'tread: 5 events');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('tread')$$, $$VALUES (1::bigint), (2::bigint), (3::bigint), (4::bigint), (5::bigint)$$,
                  'audit_read(tread): every event in seq order');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('tread', 2, 2)$$, $$VALUES (2::bigint), (3::bigint)$$,
                  'audit_read(tread, 2, 2): 2 events from seq 2');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('tread', 4)$$, $$VALUES (4::bigint), (5::bigint)$$, 'audit_read(tread, 4): 4 and 5');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('tread', 5, 1)$$, $$VALUES (5::bigint)$$, 'audit_read(tread, 5, 1): 5');
SELECT is_empty($$SELECT * FROM forgeyard.audit_read('tread', 6)$$, 'audit_read past the head: no row');
SELECT results_eq($$SELECT * FROM forgeyard.audit_read('tread', 1, 10000)$$,
                  $$SELECT seq, event_id, occurred_at, recorded_at, actor, action, resource, details, payload_digest, payload_ref, prev_hash, hash
                      FROM forgeyard.audit_events WHERE tenant_id = 'tread' ORDER BY seq$$,
                  'audit_read gives every stored field of each event (max_events 10000 accepted)');
SELECT results_eq($$SELECT seq FROM forgeyard.audit_read('ta')$$, $$VALUES (1::bigint), (2::bigint), (3::bigint), (4::bigint), (5::bigint)$$,
                  'audit_read reads only the named tenant');
SELECT results_eq($$SELECT count(*), min(seq), max(seq) FROM forgeyard.audit_read('tbig', 995, 10)$$,
                  $$VALUES (10::bigint, 995::bigint, 1004::bigint)$$, 'audit_read(tbig, 995, 10): 995 .. 1004');
SELECT results_eq($$SELECT count(*), min(seq), max(seq) FROM forgeyard.audit_read('tbig', 1, 10000)$$,
                  $$VALUES (1500::bigint, 1::bigint, 1500::bigint)$$, 'audit_read(tbig, 1, 10000): all 1500');
SELECT results_eq($$SELECT count(*) FROM forgeyard.audit_read('tbig')$$, $$VALUES (1000::bigint)$$, 'audit_read by default: at most 1000');

SELECT * FROM finish();
ROLLBACK;
