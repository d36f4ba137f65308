-- forgeyard 0.1.0 -> 0.2.0: compare-and-set by entity version, idempotency keys.
-- Run by ALTER EXTENSION forgeyard UPDATE on a database at 0.1.0; a fresh CREATE EXTENSION of the
-- current version runs its full script, forgeyard--<version>.sql, instead.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.2.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- Compare-and-set (SECURITY INVOKER: they act with the caller's own rights on its own tables)
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.versioning_trigger()
    RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'fy_versioning_trigger';
COMMENT ON FUNCTION forgeyard.versioning_trigger() IS
  'Row trigger installed by enable_versioning: a new row must start at entity_version 1; every UPDATE must set entity_version to the current version + 1 (FY002 otherwise, with expected and current versions in DETAIL).';

CREATE FUNCTION forgeyard.enable_versioning(rel regclass)
    RETURNS void
    LANGUAGE c VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enable_versioning';
COMMENT ON FUNCTION forgeyard.enable_versioning(regclass) IS
  'Put a table with "entity_version bigint NOT NULL DEFAULT 1" under version control: from then on every UPDATE, from any path, must move entity_version from expected to expected + 1. Needs UPDATE and TRIGGER rights on the table (runs with the caller''s rights). Idempotent.';

CREATE FUNCTION forgeyard.disable_versioning(rel regclass)
    RETURNS boolean
    LANGUAGE c VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_disable_versioning';
COMMENT ON FUNCTION forgeyard.disable_versioning(regclass) IS
  'Take a table out of version control (drops the trigger; the column and its values stay). Returns whether it was versioned.';

CREATE FUNCTION forgeyard.cas_update(rel regclass, key jsonb, expected_version bigint, changes jsonb)
    RETURNS bigint
    LANGUAGE c VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_cas_update';
COMMENT ON FUNCTION forgeyard.cas_update(regclass, jsonb, bigint, jsonb) IS
  'Update the row of a versioned table named by key (the columns of its primary key or a unique index, tenant_id included where the table has one) from expected_version, applying changes; returns the new version. FY002 if the row is at another version, P0002 if no row matches, 22023 for unknown, key, version or tenant_id columns in changes. Runs with the caller''s rights.';

CREATE FUNCTION forgeyard.cas_get(rel regclass, key jsonb)
    RETURNS TABLE ("row" jsonb, entity_version bigint)
    LANGUAGE c VOLATILE SECURITY INVOKER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_cas_get';
COMMENT ON FUNCTION forgeyard.cas_get(regclass, jsonb) IS
  'Read the row of a versioned table named by key, as jsonb, with its entity_version (the expected version of a following cas_update). No row if none matches. Runs with the caller''s rights.';

-------------------------------------------------------------------------------------------------
-- Idempotency keys
-------------------------------------------------------------------------------------------------

-- Attempt numbers: one counter for all keys, so an attempt number is never handed out twice.
CREATE SEQUENCE forgeyard.idempotency_attempts;
COMMENT ON SEQUENCE forgeyard.idempotency_attempts IS
  'Attempt numbers of idempotency keys: strictly increasing, never reused (the fencing token of checkpoint / complete / abandon).';

CREATE TABLE forgeyard.idempotency_keys (
    tenant_id      text        NOT NULL,
    scope          text        NOT NULL,
    key            text        NOT NULL,
    request_digest bytea       NOT NULL,
    status         text        NOT NULL CHECK (status IN ('in_progress', 'completed')),
    attempt        bigint      NOT NULL CHECK (attempt > 0),
    recovery_point text,
    response       bytea,
    lock_usecs     bigint      NOT NULL CHECK (lock_usecs > 0),
    retain_usecs   bigint      NOT NULL CHECK (retain_usecs > 0),
    locked_until   timestamptz NOT NULL,
    created_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
) WITH (fillfactor = 80);
CREATE INDEX idempotency_keys_expiry ON forgeyard.idempotency_keys (expires_at);
COMMENT ON TABLE forgeyard.idempotency_keys IS
  'One row per (tenant, scope, key): the request digest, in-progress lock and attempt, recovery point, and the stored response once completed. Purged after its retention (idem_purge). Use the API, not DML.';

CREATE FUNCTION forgeyard.idem_begin(tenant text, scope text, key text, request_digest bytea,
                                     lock_ttl interval DEFAULT '5 minutes', retain interval DEFAULT '24 hours')
    RETURNS TABLE (status text, recovery_point text, response bytea, attempt bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_begin';
COMMENT ON FUNCTION forgeyard.idem_begin(text, text, text, bytea, interval, interval) IS
  'Start (status started: do the work, attempt N) or replay (status replay: the stored response) the command under this key. FY011 if the key was used with another request digest, FY010 while a committed begin holds a live lock; an expired lock is taken over with the last recovery point and a new, greater attempt number (attempt numbers are never reused). Inside a transaction a concurrent duplicate waits for the first and then replays (or proceeds if it rolled back).';

CREATE FUNCTION forgeyard.idem_checkpoint(tenant text, scope text, key text, recovery_point text,
                                          attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_checkpoint';
COMMENT ON FUNCTION forgeyard.idem_checkpoint(text, text, text, text, bigint) IS
  'Record the recovery point of multi-step work and extend the lock by its lock_ttl. FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_complete(tenant text, scope text, key text, response bytea,
                                        attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_complete';
COMMENT ON FUNCTION forgeyard.idem_complete(text, text, text, bytea, bigint) IS
  'Store the response; every later begin with the same key and digest replays it until the retention ends. FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_abandon(tenant text, scope text, key text, attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_abandon';
COMMENT ON FUNCTION forgeyard.idem_abandon(text, text, text, bigint) IS
  'Give the key up: the next begin starts afresh (no recovery point, a new attempt number). FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_status(tenant text, scope text, key text)
    RETURNS TABLE (status text, attempt bigint, recovery_point text, locked_until timestamptz, expires_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_status';
COMMENT ON FUNCTION forgeyard.idem_status(text, text, text) IS
  'The state of a key for operators: in_progress, completed or expired (retention over), its attempt, recovery point, lock and expiry. No row for an unknown key.';

CREATE FUNCTION forgeyard.idem_purge(max_keys integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS integer
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_idem_purge';
COMMENT ON FUNCTION forgeyard.idem_purge(integer, text) IS
  'Maintenance: delete up to max_keys keys whose retention ended (oldest first), never one an attempt still holds a live lock on; tenant NULL = all tenants. Safe to run from several places at once.';

-------------------------------------------------------------------------------------------------
-- Access kinds now include the new API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.versioning_trigger()'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.enable_versioning(regclass)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.disable_versioning(regclass)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.cas_get(regclass, jsonb)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.idem_begin(text, text, text, bytea, interval, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.idem_checkpoint(text, text, text, text, bigint)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.idem_complete(text, text, text, bytea, bigint)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.idem_abandon(text, text, text, bigint)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.idem_status(text, text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.idem_purge(integer, text)');

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('forgeyard.idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.idempotency_attempts', '');
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
