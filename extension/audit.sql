-- The PL/pgSQL edition of the audit log: the twin of extension/audit.cpp and of the core's audit
-- files (core/canonical_json.cpp, core/audit_event.cpp, core/audit_verify.cpp). The same events
-- give byte-identical hashes in both editions (tests/vectors/ and regress/audit.sql check it).

-- @helper
-- core::utf8_length: the length of the UTF-8 sequence at byte i of b (1 to 4), 0 when it is not
-- valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF, not cut short).
CREATE FUNCTION forgeyard_pl.audit_utf8_length(b bytea, i integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    size integer := pg_catalog.length(b);
    b0 integer := pg_catalog.get_byte(b, i);
    n integer;
    lo integer := 128;
    hi integer := 191;
    c integer;
BEGIN
    IF b0 < 128 THEN
        RETURN 1;
    ELSIF b0 BETWEEN 194 AND 223 THEN
        n := 2;
    ELSIF b0 BETWEEN 224 AND 239 THEN
        n := 3;
        IF b0 = 224 THEN lo := 160; END IF;
        IF b0 = 237 THEN hi := 159; END IF;
    ELSIF b0 BETWEEN 240 AND 244 THEN
        n := 4;
        IF b0 = 240 THEN lo := 144; END IF;
        IF b0 = 244 THEN hi := 143; END IF;
    ELSE
        RETURN 0;
    END IF;
    IF i + 1 >= size THEN RETURN 0; END IF;
    c := pg_catalog.get_byte(b, i + 1);
    IF c < lo OR c > hi THEN RETURN 0; END IF;
    FOR k IN 2 .. n - 1 LOOP
        IF i + k >= size THEN RETURN 0; END IF;
        c := pg_catalog.get_byte(b, i + k);
        IF c < 128 OR c > 191 THEN RETURN 0; END IF;
    END LOOP;
    RETURN n;
END
$$;

-- core::check_text, for a database whose encoding is not UTF8 (in a UTF8 database PostgreSQL's
-- text is UTF-8 without NUL already): 22021 unless value's bytes are UTF-8.
CREATE FUNCTION forgeyard_pl.audit_check_text(argument text, value text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b bytea := pg_catalog.convert_to(value, pg_catalog.getdatabaseencoding());
    size integer := pg_catalog.length(b);
    i integer := 0;
    n integer;
BEGIN
    WHILE i < size LOOP
        IF pg_catalog.get_byte(b, i) = 0 THEN
            RAISE EXCEPTION USING ERRCODE = '22021', MESSAGE = argument || ' must not contain a NUL character';
        END IF;
        n := forgeyard_pl.audit_utf8_length(b, i);
        IF n = 0 THEN
            RAISE EXCEPTION USING ERRCODE = '22021', MESSAGE = argument || ' is not valid UTF-8';
        END IF;
        i := i + n;
    END LOOP;
END
$$;

-- The failures core::parse_json can find in jsonb's text output (JsonbToCString, what the C++
-- edition parses): an object or array nested deeper than 64 levels, and (in a database that is
-- not UTF8) bytes that are not UTF-8; the first in text order, at its byte offset, as
-- core/canonical_json.cpp words it. Returns when there is none.
CREATE FUNCTION forgeyard_pl.audit_json_scan(d jsonb)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b bytea := pg_catalog.convert_to(d::text, pg_catalog.getdatabaseencoding());
    size integer := pg_catalog.length(b);
    i integer := 0;
    c integer;
    n integer;
    depth integer := 0;
    in_string boolean := false;
BEGIN
    WHILE i < size LOOP
        c := pg_catalog.get_byte(b, i);
        IF in_string THEN
            IF c = 92 THEN          -- a backslash: the escaped character is ASCII
                i := i + 2;
                CONTINUE;
            ELSIF c = 34 THEN
                in_string := false;
            ELSIF c >= 128 THEN
                n := forgeyard_pl.audit_utf8_length(b, i);
                IF n = 0 THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = pg_catalog.format('details is not valid JSON: invalid UTF-8 at byte %s', i);
                END IF;
                i := i + n;
                CONTINUE;
            END IF;
        ELSIF c = 34 THEN
            in_string := true;
        ELSIF c = 123 OR c = 91 THEN
            depth := depth + 1;
            IF depth > 64 THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = pg_catalog.format('details is not valid JSON: nested deeper than 64 levels at byte %s', i);
            END IF;
        ELSIF c = 125 OR c = 93 THEN
            depth := depth - 1;
        END IF;
        i := i + 1;
    END LOOP;
END
$$;

-- core::canonical_json of a jsonb value, without the checks: keys sorted by their UTF-8 bytes
-- (COLLATE "C" compares bytes), no whitespace, numbers without trailing zeros (numeric's text
-- has no exponent, no leading zero and no "-0": only those are left to remove), strings and keys
-- escaped as jsonb escapes them (", \, \b \f \n \r \t, other U+0000..U+001F as \u00xx).
CREATE FUNCTION forgeyard_pl.audit_json(v jsonb)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF pg_catalog.jsonb_typeof(v) = 'object' THEN
        RETURN '{' || coalesce((
            SELECT pg_catalog.string_agg(
                       pg_catalog.to_json(m.key)::text || ':' ||
                       CASE pg_catalog.jsonb_typeof(m.value)
                           WHEN 'object' THEN forgeyard_pl.audit_json(m.value)
                           WHEN 'array' THEN forgeyard_pl.audit_json(m.value)
                           WHEN 'number' THEN
                               CASE WHEN pg_catalog.strpos(m.value::text, '.') > 0
                                    THEN pg_catalog.rtrim(pg_catalog.rtrim(m.value::text, '0'), '.')
                                    ELSE m.value::text END
                           ELSE m.value::text END,
                       ',' ORDER BY m.key COLLATE pg_catalog."C")
              FROM pg_catalog.jsonb_each(v) m), '') || '}';
    ELSIF pg_catalog.jsonb_typeof(v) = 'array' THEN
        RETURN '[' || coalesce((
            SELECT pg_catalog.string_agg(
                       CASE pg_catalog.jsonb_typeof(a.value)
                           WHEN 'object' THEN forgeyard_pl.audit_json(a.value)
                           WHEN 'array' THEN forgeyard_pl.audit_json(a.value)
                           WHEN 'number' THEN
                               CASE WHEN pg_catalog.strpos(a.value::text, '.') > 0
                                    THEN pg_catalog.rtrim(pg_catalog.rtrim(a.value::text, '0'), '.')
                                    ELSE a.value::text END
                           ELSE a.value::text END,
                       ',' ORDER BY a.n)
              FROM pg_catalog.jsonb_array_elements(v) WITH ORDINALITY a(value, n)), '') || ']';
    ELSIF pg_catalog.jsonb_typeof(v) = 'number' AND pg_catalog.strpos(v::text, '.') > 0 THEN
        RETURN pg_catalog.rtrim(pg_catalog.rtrim(v::text, '0'), '.');
    END IF;
    RETURN v::text;
END
$$;

-- core::canonical_details of a details argument (NULL: NULL): 22023 when it is nested deeper
-- than 64 levels, not a JSON object, or over 65536 bytes in canonical form, in that order. The
-- top level is audit_json's object case, inline (one call less on the append path).
CREATE FUNCTION forgeyard_pl.audit_details(d jsonb)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    c text;
BEGIN
    IF d IS NULL THEN
        RETURN NULL;
    END IF;
    IF pg_catalog.getdatabaseencoding() <> 'UTF8'
       OR pg_catalog.jsonb_path_exists(d, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
        PERFORM forgeyard_pl.audit_json_scan(d);
    END IF;
    IF pg_catalog.jsonb_typeof(d) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'details must be a JSON object';
    END IF;
    c := '{' || coalesce((
        SELECT pg_catalog.string_agg(
                   pg_catalog.to_json(m.key)::text || ':' ||
                   CASE pg_catalog.jsonb_typeof(m.value)
                       WHEN 'object' THEN forgeyard_pl.audit_json(m.value)
                       WHEN 'array' THEN forgeyard_pl.audit_json(m.value)
                       WHEN 'number' THEN
                           CASE WHEN pg_catalog.strpos(m.value::text, '.') > 0
                                THEN pg_catalog.rtrim(pg_catalog.rtrim(m.value::text, '0'), '.')
                                ELSE m.value::text END
                       ELSE m.value::text END,
                   ',' ORDER BY m.key COLLATE pg_catalog."C")
          FROM pg_catalog.jsonb_each(d) m), '') || '}';
    IF pg_catalog.octet_length(c) > 65536 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'details is over 65536 bytes in canonical form';
    END IF;
    RETURN c;
END
$$;

-- finite_usecs of extension/audit.cpp and core::check_audit_time: a timestamp argument in
-- microseconds since 1970, finite and within the years 1 to 9999 (22023 naming argument).
CREATE FUNCTION forgeyard_pl.audit_usecs(argument text, t timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    u numeric;
BEGIN
    IF NOT pg_catalog.isfinite(t) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' must be a finite timestamp';
    END IF;
    u := EXTRACT(epoch FROM t) * 1000000;
    IF u < -62135596800000000 OR u > 253402300799999999 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = argument || ' must lie in the years 1 to 9999';
    END IF;
    RETURN u::bigint;
END
$$;

-- pg::unix_usecs of a time the arguments' checks never saw (a stored row audit_verify rehashes): the
-- C++ edition adds the epoch difference to PostgreSQL's int64 in two's complement, so that
-- 'infinity' and the last millennia wrap instead of failing; so does this.
CREATE FUNCTION forgeyard_pl.audit_wrapped_usecs(t timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    n numeric := ('x' || pg_catalog.encode(pg_catalog.timestamptz_send(t), 'hex'))::bit(64)::bigint::numeric
                 + 946684800000000;
BEGIN
    IF n > 9223372036854775807 THEN
        n := n - 18446744073709551616;
    END IF;
    RETURN n::bigint;
END
$$;

-- core::audit_hash: SHA-256(canonical(event) || prev_hash), canonical(event) as
-- docs/architecture.md#the-canonical-encoding defines it ("forgeyard.audit.v1" NUL; text as
-- u32-length-prefixed UTF-8; seq and times (microseconds since 1970) as big-endian int64; the
-- optional fields as 0, or 1 and the field). details is the canonical text.
CREATE FUNCTION forgeyard_pl.audit_event_hash(tenant text, seq bigint, event_id uuid, occurred_at timestamptz,
                                              recorded_at timestamptz, actor text, action text, resource text,
                                              details text, payload_digest bytea, payload_ref text, prev_hash bytea)
    RETURNS bytea LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN pg_catalog.sha256(
        pg_catalog.decode('666f72676579617264' || '2e61756469742e763100', 'hex')
        || pg_catalog.int4send(pg_catalog.octet_length(tenant)) || pg_catalog.convert_to(tenant, 'UTF8')
        || pg_catalog.int8send(seq)
        || pg_catalog.decode('00000010', 'hex') || pg_catalog.uuid_send(event_id)
        || pg_catalog.int8send(CASE WHEN occurred_at < '100000-01-01 00:00:00+00' AND occurred_at > '-infinity'
                                    THEN (EXTRACT(epoch FROM occurred_at) * 1000000)::bigint
                                    ELSE forgeyard_pl.audit_wrapped_usecs(occurred_at) END)
        || pg_catalog.int8send(CASE WHEN recorded_at < '100000-01-01 00:00:00+00' AND recorded_at > '-infinity'
                                    THEN (EXTRACT(epoch FROM recorded_at) * 1000000)::bigint
                                    ELSE forgeyard_pl.audit_wrapped_usecs(recorded_at) END)
        || pg_catalog.int4send(pg_catalog.octet_length(actor)) || pg_catalog.convert_to(actor, 'UTF8')
        || pg_catalog.int4send(pg_catalog.octet_length(action)) || pg_catalog.convert_to(action, 'UTF8')
        || pg_catalog.int4send(pg_catalog.octet_length(resource)) || pg_catalog.convert_to(resource, 'UTF8')
        || CASE WHEN details IS NULL THEN pg_catalog.decode('00', 'hex')
                ELSE pg_catalog.decode('01', 'hex') || pg_catalog.int4send(pg_catalog.octet_length(details))
                     || pg_catalog.convert_to(details, 'UTF8') END
        || CASE WHEN payload_digest IS NULL THEN pg_catalog.decode('00', 'hex')
                ELSE pg_catalog.decode('01', 'hex') || pg_catalog.int4send(pg_catalog.length(payload_digest))
                     || payload_digest END
        || CASE WHEN payload_ref IS NULL THEN pg_catalog.decode('00', 'hex')
                ELSE pg_catalog.decode('01', 'hex') || pg_catalog.int4send(pg_catalog.octet_length(payload_ref))
                     || pg_catalog.convert_to(payload_ref, 'UTF8') END
        || prev_hash);
END
$$;

-- The refusal of a database whose encoding is not UTF8 (0A000): the hashes are over UTF-8 text.
CREATE FUNCTION forgeyard_pl.audit_not_utf8()
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.feature_not_supported@', MESSAGE = 'the audit log needs a database with UTF8 encoding',
        DETAIL = 'its hashes are over UTF-8 text, so that every store and the offline verifier agree';
END
$$;

-- The first append of tenant t (no head row yet): the genesis head, created unless a concurrent
-- append did, then locked FOR UPDATE until the transaction ends; its (seq, hash).
CREATE FUNCTION forgeyard_pl.audit_head_create(t text, OUT seq bigint, OUT hash bytea)
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO forgeyard.audit_heads (tenant_id, seq, hash)
    VALUES (t, 0, pg_catalog.decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex'))
    ON CONFLICT DO NOTHING;
    SELECT h.seq, h.hash INTO seq, hash
      FROM forgeyard.audit_heads h WHERE h.tenant_id = t FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@',
            MESSAGE = 'the audit head of the tenant could not be locked';
    END IF;
END
$$;

-- An append whose event_id is already in the chain (`stored`: that event's seq, occurred_at, actor,
-- action, resource, details, payload_digest, payload_ref): returns when the new event's contents
-- are the stored ones (a retried append: the caller returns the stored (seq, hash)), FY011 when
-- they differ. occurred_at NULL matches any; d is the new event's canonical details.
CREATE FUNCTION forgeyard_pl.audit_replay(stored record, event_id uuid, occurred_at timestamptz, actor text,
                                          action text, resource text, d text, payload_digest bytea, payload_ref text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    IF (occurred_at IS NULL OR stored.occurred_at = occurred_at) AND stored.actor = actor
       AND stored.action = action AND stored.resource = resource
       AND forgeyard_pl.audit_details(stored.details) IS NOT DISTINCT FROM d
       AND stored.payload_digest IS NOT DISTINCT FROM payload_digest
       AND stored.payload_ref IS NOT DISTINCT FROM payload_ref THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_mismatch@',
        MESSAGE = pg_catalog.format('event_id %s is already in the chain with other contents', event_id),
        DETAIL = pg_catalog.format('it is event %s', stored.seq);
END
$$;

-- A stored details value as core::canonical_details gives it (audit_json's object case, inline),
-- or its text where it would refuse it (not an object, nested deeper than 64 levels, over 65536
-- bytes in canonical form): one row, for audit_verify and audit_read (LATERAL, per event). An SQL
-- function returning a set, not strict, with no SET clause: the planner inlines it as the
-- subquery it is, so that no event costs a call.
CREATE FUNCTION forgeyard_pl.audit_stored_details(details jsonb)
    RETURNS SETOF text LANGUAGE sql STABLE
    AS $$
SELECT CASE
    WHEN details IS NULL THEN NULL
    WHEN pg_catalog.jsonb_typeof(details) <> 'object'
         OR pg_catalog.jsonb_path_exists(details,
                'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN details::text
    ELSE (SELECT CASE WHEN pg_catalog.octet_length(o.c) > 65536 THEN details::text ELSE o.c END
            FROM (SELECT '{' || coalesce(pg_catalog.string_agg(
                             pg_catalog.to_json(m.key)::text || ':' ||
                             CASE pg_catalog.jsonb_typeof(m.value)
                                 WHEN 'object' THEN forgeyard_pl.audit_json(m.value)
                                 WHEN 'array' THEN forgeyard_pl.audit_json(m.value)
                                 WHEN 'number' THEN
                                     CASE WHEN pg_catalog.strpos(m.value::text, '.') > 0
                                          THEN pg_catalog.rtrim(pg_catalog.rtrim(m.value::text, '0'), '.')
                                          ELSE m.value::text END
                                 ELSE m.value::text END,
                             ',' ORDER BY m.key COLLATE pg_catalog."C"), '') || '}'
                    FROM pg_catalog.jsonb_each(details) m) o(c))
    END
$$;

-- @body fy_audit_append_only
-- Trigger on audit_events: the log is append-only for every role.
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.append_only@',
        -- (no pinned search_path here: the operator is named in full)
        MESSAGE = pg_catalog.format('forgeyard.audit_events is append-only: %s is not allowed', TG_OP),
        DETAIL = 'audit events are never changed or removed; append a correcting event instead';
END

-- @body fy_audit_append
-- The arguments are checked in the C++ edition's order: tenant; then payload_ref, payload_digest,
-- resource, action and actor (its compiler evaluates make_input's arguments last to first); then
-- make_input: NULL names, details, empty names, payload_ref empty, occurred_at.
DECLARE
    t text := tenant;
    d text;
    head_seq bigint;
    head_hash bytea;
    clock timestamptz;
    new_seq bigint;
    new_hash bytea;
    eid uuid;
    stored record;
BEGIN
    IF t IS NULL OR t = '' OR pg_catalog.octet_length(t) > 128 THEN
        PERFORM forgeyard_pl.name_arg('tenant', t, 128);
    END IF;
    IF pg_catalog.octet_length(payload_ref) > 2048 THEN
        PERFORM forgeyard_pl.text_arg('payload_ref', payload_ref, 2048, true);
    END IF;
    IF pg_catalog.length(payload_digest) NOT BETWEEN 1 AND 64 THEN
        PERFORM forgeyard_pl.bytea_arg('payload_digest', payload_digest, 64, true, 1);
    END IF;
    IF pg_catalog.octet_length(resource) > 512 THEN
        PERFORM forgeyard_pl.text_arg('resource', resource, 512, true);
    END IF;
    IF pg_catalog.octet_length(action) > 128 THEN
        PERFORM forgeyard_pl.text_arg('action', action, 128, true);
    END IF;
    IF pg_catalog.octet_length(actor) > 256 THEN
        PERFORM forgeyard_pl.text_arg('actor', actor, 256, true);
    END IF;
    IF actor IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'actor must not be NULL';
    END IF;
    IF action IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'action must not be NULL';
    END IF;
    IF resource IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'resource must not be NULL';
    END IF;
    IF details IS NOT NULL THEN
        d := forgeyard_pl.audit_details(details);
    END IF;
    IF actor = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'actor must not be empty';
    END IF;
    IF action = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'action must not be empty';
    END IF;
    IF resource = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'resource must not be empty';
    END IF;
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_check_text('tenant', t);
        PERFORM forgeyard_pl.audit_check_text('actor', actor);
        PERFORM forgeyard_pl.audit_check_text('action', action);
        PERFORM forgeyard_pl.audit_check_text('resource', resource);
        IF payload_ref IS NOT NULL THEN
            PERFORM forgeyard_pl.audit_check_text('payload_ref', payload_ref);
        END IF;
    END IF;
    IF payload_ref = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'payload_ref must not be empty';
    END IF;
    IF occurred_at < '0001-01-01 00:00:00+00' OR occurred_at > '9999-12-31 23:59:59.999999+00' THEN
        PERFORM forgeyard_pl.audit_usecs('occurred_at', occurred_at);
    END IF;
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    PERFORM forgeyard_pl.check_tenant(t);
    -- The tenant's head, locked until the transaction ends: appends of one tenant queue here, so
    -- each takes the next seq and links to the hash before it.
    SELECT h.seq, h.hash INTO head_seq, head_hash
      FROM forgeyard.audit_heads h WHERE h.tenant_id = t FOR UPDATE;
    IF NOT FOUND THEN
        SELECT c.seq, c.hash INTO head_seq, head_hash FROM forgeyard_pl.audit_head_create(t) c;
    END IF;
    -- The clock is read under the head lock, so recorded_at never goes backwards along a chain.
    clock := forgeyard.now();
    IF clock < '0001-01-01 00:00:00+00' OR clock > '9999-12-31 23:59:59.999999+00' THEN
        PERFORM forgeyard_pl.audit_usecs('the clock (forgeyard.now())', clock);
    END IF;
    IF event_id IS NOT NULL THEN
        -- An event_id already in the chain: its (seq, hash) when the contents match (a retried
        -- append), FY011 when they differ.
        SELECT e.seq, e.hash, e.occurred_at, e.actor, e.action, e.resource, e.details, e.payload_digest, e.payload_ref
          INTO stored
          FROM forgeyard.audit_events e
         WHERE e.tenant_id = t AND e.event_id = audit_append.event_id;
        IF FOUND THEN
            PERFORM forgeyard_pl.audit_replay(stored, event_id, occurred_at, actor, action, resource, d, payload_digest,
                                              payload_ref);
            seq := stored.seq;
            hash := stored.hash;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    eid := coalesce(event_id, pg_catalog.gen_random_uuid());
    new_seq := head_seq + 1;
    new_hash := forgeyard_pl.audit_event_hash(t, new_seq, eid, coalesce(occurred_at, clock), clock, actor, action,
                                              resource, d, payload_digest, payload_ref, head_hash);
    -- The event is inserted and the head moved in one statement.
    WITH e AS (
        INSERT INTO forgeyard.audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action,
                                            resource, details, payload_digest, payload_ref, prev_hash, hash)
        VALUES (t, new_seq, eid, coalesce(occurred_at, clock), clock, actor, action, resource, d::jsonb,
                payload_digest, payload_ref, head_hash, new_hash))
    UPDATE forgeyard.audit_heads h SET seq = new_seq, hash = new_hash WHERE h.tenant_id = t;
    seq := new_seq;
    hash := new_hash;
    RETURN NEXT;
END

-- @body fy_audit_append_batch
-- Every element is checked before anything is written (all or nothing), then the events are
-- appended in order under one lock of the head; a batch of several moves the head once at the
-- end (a row updated per event would leave a version per event to skip).
DECLARE
    t text := tenant;
    n integer;
    canon text[];
    dg bytea;
    ref text;
    a text;
    head_seq bigint;
    head_hash bytea;
    first_seq bigint;
    clock timestamptz;
    occurred timestamptz;
    eid uuid;
    new_hash bytea;
    stored record;
    eids uuid[];
    prevs bytea[];
    hashes bytea[];
BEGIN
    IF t IS NULL OR t = '' OR pg_catalog.octet_length(t) > 128 THEN
        PERFORM forgeyard_pl.name_arg('tenant', t, 128);
    END IF;
    IF actors IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'actors must not be NULL';
    END IF;
    IF actions IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'actions must not be NULL';
    END IF;
    IF resources IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'resources must not be NULL';
    END IF;
    n := pg_catalog.cardinality(actors);
    IF n > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'a batch holds at most 1000 events';
    END IF;
    IF pg_catalog.cardinality(actions) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'actions must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(resources) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'resources must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(details) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'details must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(payload_digests) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'payload_digests must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(payload_refs) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'payload_refs must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(occurred_ats) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'occurred_ats must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(event_ids) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'event_ids must have as many elements as actors';
    END IF;
    -- The C++ edition reads each array's elements in storage order, whatever its dimensions and
    -- bounds: so do these, from arrays made one-dimensional from 1 where they are not.
    IF pg_catalog.array_ndims(actors) > 1 OR pg_catalog.array_lower(actors, 1) <> 1 THEN
        actors := ARRAY(SELECT pg_catalog.unnest(actors));
    END IF;
    IF pg_catalog.array_ndims(actions) > 1 OR pg_catalog.array_lower(actions, 1) <> 1 THEN
        actions := ARRAY(SELECT pg_catalog.unnest(actions));
    END IF;
    IF pg_catalog.array_ndims(resources) > 1 OR pg_catalog.array_lower(resources, 1) <> 1 THEN
        resources := ARRAY(SELECT pg_catalog.unnest(resources));
    END IF;
    IF pg_catalog.array_ndims(details) > 1 OR pg_catalog.array_lower(details, 1) <> 1 THEN
        details := ARRAY(SELECT pg_catalog.unnest(details));
    END IF;
    IF pg_catalog.array_ndims(payload_digests) > 1 OR pg_catalog.array_lower(payload_digests, 1) <> 1 THEN
        payload_digests := ARRAY(SELECT pg_catalog.unnest(payload_digests));
    END IF;
    IF pg_catalog.array_ndims(payload_refs) > 1 OR pg_catalog.array_lower(payload_refs, 1) <> 1 THEN
        payload_refs := ARRAY(SELECT pg_catalog.unnest(payload_refs));
    END IF;
    IF pg_catalog.array_ndims(occurred_ats) > 1 OR pg_catalog.array_lower(occurred_ats, 1) <> 1 THEN
        occurred_ats := ARRAY(SELECT pg_catalog.unnest(occurred_ats));
    END IF;
    IF pg_catalog.array_ndims(event_ids) > 1 OR pg_catalog.array_lower(event_ids, 1) <> 1 THEN
        event_ids := ARRAY(SELECT pg_catalog.unnest(event_ids));
    END IF;
    -- Each element as make_input checks it.
    canon := pg_catalog.array_fill(NULL::text, ARRAY[n]);
    FOR i IN 1 .. n LOOP
        dg := payload_digests[i];
        IF pg_catalog.length(dg) = 0 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'payload_digests must not contain an empty digest';
        END IF;
        IF actors[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'actors must not contain NULL';
        END IF;
        IF actions[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'actions must not contain NULL';
        END IF;
        IF resources[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'resources must not contain NULL';
        END IF;
        IF details[i] IS NOT NULL THEN
            canon[i] := forgeyard_pl.audit_details(details[i]);
        END IF;
        a := actors[i];
        IF a = '' OR pg_catalog.octet_length(a) > 256 THEN
            PERFORM forgeyard_pl.name_arg('actor', a, 256);
        END IF;
        a := actions[i];
        IF a = '' OR pg_catalog.octet_length(a) > 128 THEN
            PERFORM forgeyard_pl.name_arg('action', a, 128);
        END IF;
        a := resources[i];
        IF a = '' OR pg_catalog.octet_length(a) > 512 THEN
            PERFORM forgeyard_pl.name_arg('resource', a, 512);
        END IF;
        ref := payload_refs[i];
        IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
            PERFORM forgeyard_pl.audit_check_text('tenant', t);
            PERFORM forgeyard_pl.audit_check_text('actor', actors[i]);
            PERFORM forgeyard_pl.audit_check_text('action', actions[i]);
            PERFORM forgeyard_pl.audit_check_text('resource', resources[i]);
            IF ref IS NOT NULL THEN
                PERFORM forgeyard_pl.audit_check_text('payload_ref', ref);
            END IF;
        END IF;
        IF pg_catalog.length(dg) > 64 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'payload_digest is longer than 64 bytes';
        END IF;
        IF ref = '' OR pg_catalog.octet_length(ref) > 2048 THEN
            PERFORM forgeyard_pl.name_arg('payload_ref', ref, 2048);
        END IF;
        IF occurred_ats[i] < '0001-01-01 00:00:00+00' OR occurred_ats[i] > '9999-12-31 23:59:59.999999+00' THEN
            PERFORM forgeyard_pl.audit_usecs('occurred_at', occurred_ats[i]);
        END IF;
    END LOOP;
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    PERFORM forgeyard_pl.check_tenant(t);
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT h.seq, h.hash INTO head_seq, head_hash
      FROM forgeyard.audit_heads h WHERE h.tenant_id = t FOR UPDATE;
    IF NOT FOUND THEN
        SELECT c.seq, c.hash INTO head_seq, head_hash FROM forgeyard_pl.audit_head_create(t) c;
    END IF;
    -- One clock reading, under the head lock, for every event of the batch.
    clock := forgeyard.now();
    IF clock < '0001-01-01 00:00:00+00' OR clock > '9999-12-31 23:59:59.999999+00' THEN
        PERFORM forgeyard_pl.audit_usecs('the clock (forgeyard.now())', clock);
    END IF;
    first_seq := head_seq + 1;
    IF n > 1 AND event_ids IS NULL THEN
        -- No element names its event, so none is a replay: the events are hashed in order, then
        -- inserted and the head moved in one statement (the same rows and head as one INSERT per
        -- event and the UPDATE after them).
        FOR i IN 1 .. n LOOP
            eids[i] := pg_catalog.gen_random_uuid();
            prevs[i] := head_hash;
            head_hash := forgeyard_pl.audit_event_hash(t, first_seq + i - 1, eids[i], coalesce(occurred_ats[i], clock),
                                                       clock, actors[i], actions[i], resources[i], canon[i],
                                                       payload_digests[i], payload_refs[i], prevs[i]);
            hashes[i] := head_hash;
            seq := first_seq + i - 1;
            hash := head_hash;
            RETURN NEXT;
        END LOOP;
        head_seq := first_seq + n - 1;
        WITH e AS (
            INSERT INTO forgeyard.audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action,
                                                resource, details, payload_digest, payload_ref, prev_hash, hash)
            SELECT t, first_seq + u.i - 1, u.eid, coalesce(u.occurred, clock), clock, u.actor, u.action, u.resource,
                   u.d::jsonb, u.digest, u.ref, u.prev, u.h
              FROM ROWS FROM (pg_catalog.unnest(eids), pg_catalog.unnest(occurred_ats), pg_catalog.unnest(actors),
                              pg_catalog.unnest(actions), pg_catalog.unnest(resources), pg_catalog.unnest(canon),
                              pg_catalog.unnest(payload_digests), pg_catalog.unnest(payload_refs),
                              pg_catalog.unnest(prevs), pg_catalog.unnest(hashes))
                   WITH ORDINALITY u(eid, occurred, actor, action, resource, d, digest, ref, prev, h, i))
        UPDATE forgeyard.audit_heads h SET seq = head_seq, hash = head_hash WHERE h.tenant_id = t;
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        IF event_ids[i] IS NOT NULL THEN
            SELECT e.seq, e.hash, e.occurred_at, e.actor, e.action, e.resource, e.details, e.payload_digest, e.payload_ref
              INTO stored
              FROM forgeyard.audit_events e
             WHERE e.tenant_id = t AND e.event_id = event_ids[i];
            IF FOUND THEN
                PERFORM forgeyard_pl.audit_replay(stored, event_ids[i], occurred_ats[i], actors[i], actions[i],
                                                  resources[i], canon[i], payload_digests[i], payload_refs[i]);
                seq := stored.seq;
                hash := stored.hash;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        occurred := coalesce(occurred_ats[i], clock);
        eid := coalesce(event_ids[i], pg_catalog.gen_random_uuid());
        new_hash := forgeyard_pl.audit_event_hash(t, head_seq + 1, eid, occurred, clock, actors[i], actions[i],
                                                  resources[i], canon[i], payload_digests[i], payload_refs[i], head_hash);
        IF n = 1 THEN
            -- One event: inserted and the head moved in one statement, as audit_append does.
            WITH e AS (
                INSERT INTO forgeyard.audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action,
                                                    resource, details, payload_digest, payload_ref, prev_hash, hash)
                VALUES (t, head_seq + 1, eid, occurred, clock, actors[i], actions[i], resources[i], canon[i]::jsonb,
                        payload_digests[i], payload_refs[i], head_hash, new_hash))
            UPDATE forgeyard.audit_heads h SET seq = head_seq + 1, hash = new_hash WHERE h.tenant_id = t;
        ELSE
            INSERT INTO forgeyard.audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action,
                                                resource, details, payload_digest, payload_ref, prev_hash, hash)
            VALUES (t, head_seq + 1, eid, occurred, clock, actors[i], actions[i], resources[i], canon[i]::jsonb,
                    payload_digests[i], payload_refs[i], head_hash, new_hash);
        END IF;
        head_seq := head_seq + 1;
        head_hash := new_hash;
        seq := head_seq;
        hash := head_hash;
        RETURN NEXT;
    END LOOP;
    IF n > 1 AND head_seq >= first_seq THEN
        UPDATE forgeyard.audit_heads h SET seq = head_seq, hash = head_hash WHERE h.tenant_id = t;
    END IF;
END

-- @body fy_audit_head
DECLARE
    t text;
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    t := forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(t);
    SELECT h.seq, h.hash INTO seq, hash FROM forgeyard.audit_heads h WHERE h.tenant_id = t;
    IF NOT FOUND THEN
        seq := 0;
        hash := pg_catalog.decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex');
    END IF;
    RETURN NEXT;
END

-- @body fy_audit_verify
-- core::ChainVerifier over the stored range: from seq 1 the chain links to the genesis hash, from
-- a later seq to the stored hash of event from_seq - 1; the head row is a second witness.
DECLARE
    t text;
    genesis bytea := pg_catalog.decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex');
    head_seq bigint;
    head_hash bytea;
    hash_before bytea;
    prev bytea;
    next_seq bigint := from_seq;
    expected_last bigint;
    e record;
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    t := forgeyard_pl.name_arg('tenant', tenant, 128);
    IF from_seq IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'from_seq must not be NULL';
    END IF;
    PERFORM forgeyard_pl.bytea_arg('anchor_hash', anchor_hash, 1024, true);
    IF (anchor_seq IS NULL) <> (anchor_hash IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'anchor_seq and anchor_hash must be given together';
    END IF;
    -- core::check_verify_range
    IF from_seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'from_seq must be at least 1';
    END IF;
    IF to_seq < from_seq THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'to_seq must not be below from_seq';
    END IF;
    IF anchor_seq IS NOT NULL THEN
        IF pg_catalog.length(anchor_hash) <> 32 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'anchor_hash must be 32 bytes';
        END IF;
        IF anchor_seq < from_seq OR anchor_seq > to_seq THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'anchor_seq must be within from_seq .. to_seq';
        END IF;
    END IF;
    PERFORM forgeyard_pl.check_tenant(t);
    SELECT h.seq, h.hash INTO head_seq, head_hash FROM forgeyard.audit_heads h WHERE h.tenant_id = t;
    IF NOT FOUND THEN
        head_seq := 0;
        head_hash := genesis;
    END IF;
    IF from_seq > 1 THEN
        SELECT p.hash INTO hash_before
          FROM forgeyard.audit_events p WHERE p.tenant_id = t AND p.seq = from_seq - 1;
    END IF;
    ok := true;
    checked := 0;
    IF from_seq = 1 THEN
        prev := genesis;
    ELSE
        prev := coalesce(hash_before, ''::bytea);
        IF hash_before IS NULL AND from_seq - 1 <= head_seq THEN
            ok := false;
            first_bad_seq := from_seq - 1;
            reason := pg_catalog.format('event %s is missing', from_seq - 1);
        END IF;
    END IF;
    IF ok THEN
        -- details as core::canonical_details gives them, or, when it would refuse the stored value,
        -- its text, which cannot hash alike (audit_stored_details).
        FOR e IN
            SELECT s.seq, s.prev_hash, s.hash,
                   forgeyard_pl.audit_event_hash(t, s.seq, s.event_id, s.occurred_at, s.recorded_at, s.actor, s.action,
                                                 s.resource, x.d, s.payload_digest, s.payload_ref, s.prev_hash) AS computed
              FROM forgeyard.audit_events s
              CROSS JOIN LATERAL forgeyard_pl.audit_stored_details(s.details) x(d)
             WHERE s.tenant_id = t AND s.seq >= from_seq AND s.seq <= coalesce(to_seq, 9223372036854775807)
             ORDER BY s.seq
        LOOP
            IF e.seq <> next_seq THEN
                ok := false;
                first_bad_seq := next_seq;
                IF e.seq > next_seq THEN
                    reason := pg_catalog.format('event %s is missing (the next stored event is %s)', next_seq, e.seq);
                ELSE
                    reason := pg_catalog.format('event %s is out of order (expected %s)', e.seq, next_seq);
                END IF;
            ELSIF e.prev_hash <> prev THEN
                ok := false;
                first_bad_seq := next_seq;
                IF next_seq = 1 THEN
                    reason := 'prev_hash of event 1 is not the genesis hash';
                ELSE
                    reason := pg_catalog.format('prev_hash of event %s does not match the hash of event %s',
                                                next_seq, next_seq - 1);
                END IF;
            ELSIF e.computed <> e.hash THEN
                ok := false;
                first_bad_seq := next_seq;
                reason := pg_catalog.format('hash of event %s does not match its contents', next_seq);
            ELSIF anchor_seq = next_seq AND anchor_hash <> e.hash THEN
                ok := false;
                first_bad_seq := next_seq;
                reason := pg_catalog.format('hash of event %s does not match the anchor', next_seq);
            ELSIF head_seq > 0 AND head_seq = next_seq AND head_hash <> e.hash THEN
                ok := false;
                first_bad_seq := next_seq;
                reason := pg_catalog.format('hash of event %s does not match the chain''s head row', next_seq);
            END IF;
            EXIT WHEN NOT ok;
            checked := checked + 1;
            prev := e.hash;
            next_seq := next_seq + 1;
        END LOOP;
    END IF;
    -- finish_range: the chain must reach to_seq, or the head when to_seq is open.
    expected_last := CASE WHEN to_seq < head_seq THEN to_seq ELSE head_seq END;
    IF ok AND anchor_seq >= next_seq THEN
        ok := false;
        first_bad_seq := next_seq;
        reason := pg_catalog.format('the chain ends at seq %s, before the anchor at seq %s: its tail was cut',
                                    next_seq - 1, anchor_seq);
    ELSIF ok AND expected_last >= next_seq THEN
        ok := false;
        first_bad_seq := next_seq;
        reason := pg_catalog.format('event %s is missing (the chain head is at seq %s)', next_seq, expected_last);
    END IF;
    RETURN NEXT;
END

-- @body fy_audit_read
-- Events from from_seq in seq order, details in canonical form (a stored value that is no longer
-- a JSON object keeps its text); rows stop being added once they hold 8 MiB of details.
DECLARE
    t text;
    bytes bigint := 0;
    r record;
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    t := forgeyard_pl.name_arg('tenant', tenant, 128);
    IF from_seq IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'from_seq must not be NULL';
    END IF;
    IF max_events IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'max_events must not be NULL';
    END IF;
    IF from_seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'from_seq must be at least 1';
    END IF;
    IF max_events < 1 OR max_events > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'max_events must be between 1 and 10000';
    END IF;
    PERFORM forgeyard_pl.check_tenant(t);
    -- details as core::canonical_details gives them, or the stored value where it would refuse it
    -- (audit_stored_details); counted in bytes of that text.
    FOR r IN
        SELECT s.seq, s.event_id, s.occurred_at, s.recorded_at, s.actor, s.action, s.resource, x.d,
               s.payload_digest, s.payload_ref, s.prev_hash, s.hash
          FROM (SELECT p.* FROM forgeyard.audit_events p
                 WHERE p.tenant_id = t AND p.seq >= from_seq
                 ORDER BY p.seq
                 LIMIT max_events) s
          CROSS JOIN LATERAL forgeyard_pl.audit_stored_details(s.details) x(d)
         ORDER BY s.seq
    LOOP
        EXIT WHEN bytes >= 8388608;
        seq := r.seq;
        event_id := r.event_id;
        occurred_at := r.occurred_at;
        recorded_at := r.recorded_at;
        actor := r.actor;
        action := r.action;
        resource := r.resource;
        details := r.d::jsonb;
        bytes := bytes + coalesce(pg_catalog.octet_length(r.d), 0);
        payload_digest := r.payload_digest;
        payload_ref := r.payload_ref;
        prev_hash := r.prev_hash;
        hash := r.hash;
        RETURN NEXT;
    END LOOP;
END

-- @body fy_audit_hash
DECLARE
    d text;
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    IF seq IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'seq must not be NULL';
    END IF;
    IF seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'seq must be at least 1';
    END IF;
    IF event_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'event_id must not be NULL';
    END IF;
    IF occurred_at IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'occurred_at must not be NULL';
    END IF;
    IF recorded_at IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'recorded_at must not be NULL';
    END IF;
    PERFORM forgeyard_pl.audit_usecs('occurred_at', occurred_at);
    PERFORM forgeyard_pl.audit_usecs('recorded_at', recorded_at);
    PERFORM forgeyard_pl.name_arg('actor', actor, 256);
    PERFORM forgeyard_pl.name_arg('action', action, 128);
    PERFORM forgeyard_pl.name_arg('resource', resource, 512);
    d := forgeyard_pl.audit_details(details);
    PERFORM forgeyard_pl.bytea_arg('payload_digest', payload_digest, 64, true, 1);
    PERFORM forgeyard_pl.text_arg('payload_ref', payload_ref, 2048, true);
    PERFORM forgeyard_pl.bytea_arg('prev_hash', prev_hash, 1024);
    IF pg_catalog.length(prev_hash) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'prev_hash must be 32 bytes';
    END IF;
    IF payload_ref = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'payload_ref must not be empty';
    END IF;
    RETURN forgeyard_pl.audit_event_hash(tenant, seq, event_id, occurred_at, recorded_at, actor, action, resource, d,
                                         payload_digest, payload_ref, prev_hash);
END

-- @body fy_audit_canonical_details
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    IF details IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'details must not be NULL';
    END IF;
    RETURN forgeyard_pl.audit_details(details);
END
