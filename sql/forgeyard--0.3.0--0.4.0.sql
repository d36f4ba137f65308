-- forgeyard 0.3.0 -> 0.4.0: the append-only, hash-chained audit log.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.4.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------------------------

-- hash = SHA-256(canonical(event) || prev_hash); docs/architecture.md#the-audit-chain defines
-- canonical(event). Rows are never updated or deleted (triggers below, ENABLE ALWAYS).
CREATE TABLE forgeyard.audit_events (
    tenant_id      text        NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    event_id       uuid        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    actor          text        NOT NULL,
    action         text        NOT NULL,
    resource       text        NOT NULL,
    details        jsonb,
    payload_digest bytea,
    payload_ref    text,
    prev_hash      bytea       NOT NULL,
    hash           bytea       NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    UNIQUE (tenant_id, event_id)
);
COMMENT ON TABLE forgeyard.audit_events IS
  'The audit log: per tenant a gap-free seq from 1 and a hash chain (hash = SHA-256(canonical(event) || prev_hash), prev_hash of seq 1 = 32 zero bytes). Append-only: UPDATE, DELETE and TRUNCATE fail with FY030 for every role. Written only by audit_append / audit_append_batch.';

-- The head of each tenant's chain. Appenders lock this row, so a tenant's appends take seq and
-- prev_hash one after another and a rolled-back append leaves no gap.
CREATE TABLE forgeyard.audit_heads (
    tenant_id text   NOT NULL PRIMARY KEY,
    seq       bigint NOT NULL CHECK (seq >= 0),
    hash      bytea  NOT NULL
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.audit_heads IS
  'The last seq and hash of each tenant''s audit chain; appends of one tenant serialize on its row.';

CREATE FUNCTION forgeyard.audit_append_only()
    RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'fy_audit_append_only';
COMMENT ON FUNCTION forgeyard.audit_append_only() IS
  'Trigger on forgeyard.audit_events: refuses UPDATE, DELETE and TRUNCATE with FY030.';

CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON forgeyard.audit_events
    FOR EACH ROW EXECUTE FUNCTION forgeyard.audit_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON forgeyard.audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.audit_append_only();
-- ALWAYS: session_replication_role = replica does not switch them off.
ALTER TABLE forgeyard.audit_events ENABLE ALWAYS TRIGGER audit_events_no_change;
ALTER TABLE forgeyard.audit_events ENABLE ALWAYS TRIGGER audit_events_no_truncate;

-------------------------------------------------------------------------------------------------
-- API
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.audit_append(tenant text, actor text, action text, resource text, details jsonb DEFAULT NULL,
                                       payload_digest bytea DEFAULT NULL, payload_ref text DEFAULT NULL,
                                       occurred_at timestamptz DEFAULT NULL, event_id uuid DEFAULT NULL)
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_append';
COMMENT ON FUNCTION forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid) IS
  'Append one event to the tenant''s audit chain; returns its seq (gap-free from 1) and hash. details: a JSON object of at most 64 KiB in canonical form (large payloads go elsewhere: pass their payload_digest and payload_ref). occurred_at defaults to the time of recording. event_id (default: a new UUID) makes a retry safe: an event_id already in the chain with the same contents returns its seq and hash; with other contents it is FY011.';

CREATE FUNCTION forgeyard.audit_append_batch(tenant text, actors text[], actions text[], resources text[],
                                             details jsonb[] DEFAULT NULL, payload_digests bytea[] DEFAULT NULL,
                                             payload_refs text[] DEFAULT NULL, occurred_ats timestamptz[] DEFAULT NULL,
                                             event_ids uuid[] DEFAULT NULL)
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_append_batch';
COMMENT ON FUNCTION forgeyard.audit_append_batch(text, text[], text[], text[], jsonb[], bytea[], text[], timestamptz[], uuid[]) IS
  'Append up to 1000 events in order (the optional arrays, when given, parallel to actors; their elements may be NULL); returns (seq, hash) per event, in order. All or nothing.';

CREATE FUNCTION forgeyard.audit_head(tenant text)
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_head';
COMMENT ON FUNCTION forgeyard.audit_head(text) IS
  'The last seq and hash of the tenant''s chain ((0, 32 zero bytes) when it is empty). Store it outside the database as an anchor for audit_verify: it detects a cut tail and a rewritten chain.';

CREATE FUNCTION forgeyard.audit_verify(tenant text, from_seq bigint DEFAULT 1, to_seq bigint DEFAULT NULL,
                                       anchor_seq bigint DEFAULT NULL, anchor_hash bytea DEFAULT NULL)
    RETURNS TABLE (ok boolean, checked bigint, first_bad_seq bigint, reason text)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_verify';
COMMENT ON FUNCTION forgeyard.audit_verify(text, bigint, bigint, bigint, bytea) IS
  'Recompute the tenant''s chain from from_seq to to_seq (default: its head): every seq present, every prev_hash the hash before it, every hash its contents''. Names the first bad seq and why. With an anchor (seq and hash from audit_head, kept elsewhere) also reports a tail cut below the anchor or a chain rewritten up to it. A chain starting after seq 1 links to the stored hash of event from_seq - 1.';

CREATE FUNCTION forgeyard.audit_read(tenant text, from_seq bigint DEFAULT 1, max_events integer DEFAULT 1000)
    RETURNS TABLE (seq bigint, event_id uuid, occurred_at timestamptz, recorded_at timestamptz, actor text, action text,
                   resource text, details jsonb, payload_digest bytea, payload_ref text, prev_hash bytea, hash bytea)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_read';
COMMENT ON FUNCTION forgeyard.audit_read(text, bigint, integer) IS
  'Up to max_events (at most 10000) events of the tenant''s chain from from_seq on, in seq order (keyset pagination for tail and export). Returns fewer once the rows hold 8 MiB of details: continue from the last seq + 1 until a call returns no row.';

CREATE FUNCTION forgeyard.audit_hash(tenant text, seq bigint, event_id uuid, occurred_at timestamptz,
                                     recorded_at timestamptz, actor text, action text, resource text, details jsonb,
                                     payload_digest bytea, payload_ref text, prev_hash bytea)
    RETURNS bytea LANGUAGE c IMMUTABLE PARALLEL SAFE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_hash';
COMMENT ON FUNCTION forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea) IS
  'The hash an event with these fields gets: SHA-256(canonical(event) || prev_hash), the function audit_append and audit_verify use. For checking the encoding against the shipped test vectors.';

CREATE FUNCTION forgeyard.audit_canonical_details(details jsonb)
    RETURNS text LANGUAGE c IMMUTABLE PARALLEL SAFE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_audit_canonical_details';
COMMENT ON FUNCTION forgeyard.audit_canonical_details(jsonb) IS
  'The canonical text of a details object as it is hashed: keys sorted by UTF-8 bytes, numbers as plain decimals without exponent or trailing zeros, no whitespace.';

CREATE VIEW forgeyard.audit_status WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT h.tenant_id, h.seq AS head_seq, h.hash AS head_hash, e.recorded_at AS last_recorded_at
  FROM forgeyard.audit_heads h
  LEFT JOIN forgeyard.audit_events e ON e.tenant_id = h.tenant_id AND e.seq = h.seq
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR h.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.audit_status IS
  'The head (seq, hash) of every tenant''s audit chain and when its last event was recorded. A role bound to tenants sees only those.';

-------------------------------------------------------------------------------------------------
-- Access kinds now include the audit API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_append_batch(text, text[], text[], text[], jsonb[], bytea[], text[], timestamptz[], uuid[])'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_head(text)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_verify(text, bigint, bigint, bigint, bytea)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_read(text, bigint, integer)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.audit_canonical_details(jsonb)'),
    ('inspect', 'SELECT', 'TABLE forgeyard.audit_status');

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('forgeyard.audit_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.audit_heads', '');
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
