-- forgeyard @VERSION@, the whole SQL API in one script: the source of both editions' full scripts.
-- sql/generate.py makes from it, at build time, the C++ edition's forgeyard--@VERSION@.sql (run by
-- CREATE EXTENSION alone) and the PL/pgSQL edition's scripts (pg_tle and plain install): every
-- declaration here is shared; a function declared LANGUAGE c takes, in the PL/pgSQL edition, the
-- body of the same symbol from the extension/*.sql file beside its C++ twin.
-- Databases created at an older version reach the same catalog through the upgrade scripts
-- forgeyard--U--V.sql; tests/pg/upgrade.sh compares the two paths object by object.
-- Sections, in order: clock; tenancy and roles; leases; compare-and-set; idempotency keys; queues;
-- inbox; maintenance; audit log; views for psql; boundary probes; what each access kind grants;
-- workflows; grants; pg_dump registrations. Each object's COMMENT follows it.
-- Every API function has a pinned search_path and schema-qualified names, and is SECURITY DEFINER
-- unless it works on the caller's own tables with the caller's rights (compare-and-set).
\echo Use "CREATE EXTENSION forgeyard" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- Clock
-------------------------------------------------------------------------------------------------

-- forgeyard.now_override, the setting that moves this clock, is defined by the C++ edition's
-- library when it loads (extension/pg/clock.cpp: superuser-only), not here; in the PL/pgSQL edition
-- it is a placeholder that moves the clock only for superusers and the owner (extension/now.sql).
CREATE FUNCTION forgeyard.now() RETURNS timestamptz
    LANGUAGE c VOLATILE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'fy_now';
COMMENT ON FUNCTION forgeyard.now() IS
  'The clock that decides expiry: clock_timestamp(), or the setting forgeyard.now_override when set (tests) by a superuser or, in the PL/pgSQL edition, the installation''s owner.';

CREATE FUNCTION forgeyard.edition() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT '@EDITION@'::text $$;
COMMENT ON FUNCTION forgeyard.edition() IS
  'Which edition of forgeyard this database runs: cpp (the C++ library, CREATE EXTENSION) or plpgsql (no C: pg_tle or a plain install).';

-- The version installed: the extension's, or (the PL/pgSQL edition's plain install, which is no
-- extension) the last one its installer recorded. PL/pgSQL, so that the C++ edition never plans the
-- second lookup, whose table it does not have.
CREATE FUNCTION forgeyard.version() RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v text;
BEGIN
    SELECT e.extversion INTO v FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'forgeyard';
    IF FOUND THEN
        RETURN v;
    END IF;
    RETURN (SELECT i.version FROM forgeyard_pl.installs i ORDER BY i.n DESC LIMIT 1);
END
$$;
COMMENT ON FUNCTION forgeyard.version() IS
  'The version of forgeyard installed in this database (with edition(): what storage status and health report).';

-------------------------------------------------------------------------------------------------
-- Tenancy and roles
-------------------------------------------------------------------------------------------------

CREATE TABLE forgeyard.role_access (
    role_id regrole NOT NULL,
    access  text    NOT NULL CHECK (access IN ('usage', 'maintenance', 'inspect')),
    PRIMARY KEY (role_id, access)
);
COMMENT ON TABLE forgeyard.role_access IS
  'Roles given access with grant_usage / grant_maintenance / grant_inspect; upgrades re-apply these grants to new objects.';

CREATE TABLE forgeyard.tenant_bindings (
    role_id   regrole NOT NULL,
    tenant_id text    NOT NULL,
    PRIMARY KEY (role_id, tenant_id)
);
COMMENT ON TABLE forgeyard.tenant_bindings IS
  'Tenants a role is bound to (bind_tenant). A role that is, or is a member of, a bound role may act only for the tenants bound to those roles (FY040 otherwise).';

-- What each access kind grants (filled at the end of this script). An upgrade script adds the
-- objects it creates, so it can re-grant them to every recorded role (apply_access).
CREATE TABLE forgeyard.access_catalog (
    access    text NOT NULL CHECK (access IN ('usage', 'maintenance', 'inspect')),
    privilege text NOT NULL CHECK (privilege IN ('EXECUTE', 'SELECT')),
    object    text NOT NULL,
    PRIMARY KEY (access, object)
);
COMMENT ON TABLE forgeyard.access_catalog IS
  'The privileges each access kind (usage, maintenance, inspect) grants; filled by the extension''s scripts.';

CREATE FUNCTION forgeyard.access_objects(access text)
    RETURNS TABLE (privilege text, object text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF access IS NULL THEN
        RAISE EXCEPTION 'access must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY SELECT c.privilege, c.object FROM forgeyard.access_catalog c
                  WHERE c.access OPERATOR(pg_catalog.=) $1 ORDER BY c.object;
END
$$;
COMMENT ON FUNCTION forgeyard.access_objects(text) IS
  'The privileges each access kind (usage, maintenance, inspect) grants, from forgeyard.access_catalog.';

CREATE FUNCTION forgeyard.apply_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    PERFORM forgeyard.check_role(role);
    -- GRANT and REVOKE rewrite the ACL of each object in place: two of them on one function at
    -- once fail with "tuple concurrently updated" (XX000). Access changes take turns instead.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA forgeyard TO %s', role);
    FOR g IN SELECT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege, g.object, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION forgeyard.apply_access(regrole) IS
  'Grant a role everything its recorded access kinds include. Upgrade scripts call it for every recorded role.';

CREATE FUNCTION forgeyard.grant_usage(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_usage(regrole) IS
  'Application role: EXECUTE on the tenant-scoped API, no table privileges, so the semantics cannot be bypassed with DML.';

CREATE FUNCTION forgeyard.grant_maintenance(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage'), (role, 'maintenance')
        ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_maintenance(regrole) IS
  'Maintenance role: the application API plus the cross-tenant maintenance calls (lease_reap, purges, maintain).';

CREATE FUNCTION forgeyard.grant_inspect(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- First, before this call's own row (apply_access takes the same lock): access changes take
    -- turns (see apply_access).
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'inspect') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_inspect(regrole) IS
  'Inspection role: SELECT on the forgeyard views (for psql), nothing else.';

CREATE FUNCTION forgeyard.revoke_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    -- GRANT and REVOKE rewrite the ACL of each object in place: two of them on one function at
    -- once fail with "tuple concurrently updated" (XX000). Access changes take turns instead.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('forgeyard.role_access'));
    PERFORM forgeyard.check_role(role);
    FOR g IN SELECT DISTINCT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s FROM %s', g.privilege, g.object, role);
    END LOOP;
    EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA forgeyard FROM %s', role);
    DELETE FROM forgeyard.role_access a WHERE a.role_id OPERATOR(pg_catalog.=) role;
END
$$;
COMMENT ON FUNCTION forgeyard.revoke_access(regrole) IS
  'Take back every access kind granted to a role (its tenant bindings stay).';

CREATE FUNCTION forgeyard.bind_tenant(role regrole, tenant text)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    PERFORM forgeyard.check_tenant(tenant);
    INSERT INTO forgeyard.tenant_bindings (role_id, tenant_id) VALUES (role, tenant) ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION forgeyard.bind_tenant(regrole, text) IS
  'Restrict a role to its bound tenants: once bound, a call for any other tenant (or for all tenants) fails with FY040.';

CREATE FUNCTION forgeyard.unbind_tenant(role regrole, tenant text)
    RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    PERFORM forgeyard.check_tenant(tenant);
    DELETE FROM forgeyard.tenant_bindings b
     WHERE b.role_id OPERATOR(pg_catalog.=) role AND b.tenant_id OPERATOR(pg_catalog.=) tenant;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION forgeyard.unbind_tenant(regrole, text) IS
  'Remove one tenant binding of a role; returns whether it existed. A role with no bindings left is unrestricted.';

-------------------------------------------------------------------------------------------------
-- Leases
-------------------------------------------------------------------------------------------------

CREATE TABLE forgeyard.leases (
    tenant_id   text        NOT NULL,
    resource    text        NOT NULL,
    owner       text        NOT NULL,
    epoch       bigint      NOT NULL CHECK (epoch > 0),
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    released_at timestamptz,
    reaped_at   timestamptz,
    PRIMARY KEY (tenant_id, resource)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.leases IS
  'One row per (tenant, resource) ever leased. Release keeps the row so an epoch is never handed out twice. Use the API, not DML.';
COMMENT ON COLUMN forgeyard.leases.epoch IS
  'Fencing token of the current or last grant: max(previous + 1, clock in microseconds since 1970).';
COMMENT ON COLUMN forgeyard.leases.reaped_at IS
  'When lease_reap reported this expired grant; NULL until then and again after a new grant.';

CREATE FUNCTION forgeyard.lease_acquire(tenant text, resource text, owner text, ttl interval)
    RETURNS TABLE (acquired boolean, epoch bigint, holder text, expires_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_acquire';
COMMENT ON FUNCTION forgeyard.lease_acquire(text, text, text, interval) IS
  'Acquire the lease on (tenant, resource) for ttl. Free or expired: acquired with a new, strictly greater epoch. Held by owner: same epoch, expiry moved to now + ttl. Held by another: acquired = false and the current holder, epoch and expiry.';

CREATE FUNCTION forgeyard.lease_renew(tenant text, resource text, epoch bigint, ttl interval)
    RETURNS timestamptz
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_renew';
COMMENT ON FUNCTION forgeyard.lease_renew(text, text, bigint, interval) IS
  'Extend the live grant with this epoch to now + ttl and return the new expiry. FY001 if the epoch is not the live grant (expired, released or taken over).';

CREATE FUNCTION forgeyard.lease_release(tenant text, resource text, epoch bigint)
    RETURNS boolean
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_release';
COMMENT ON FUNCTION forgeyard.lease_release(text, text, bigint) IS
  'Release the grant with this epoch. Returns whether it was the live grant. The epoch is never reused.';

CREATE FUNCTION forgeyard.lease_fence(tenant text, resource text, epoch bigint)
    RETURNS void
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_fence';
COMMENT ON FUNCTION forgeyard.lease_fence(text, text, bigint) IS
  'Call inside the transaction of a protected write: FY001 unless the epoch is the live grant; the grant cannot change hands until that transaction ends.';

CREATE FUNCTION forgeyard.lease_reap(max_leases integer DEFAULT 100, tenant text DEFAULT NULL)
    RETURNS TABLE (tenant text, resource text, epoch bigint, holder text, expired_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_reap';
COMMENT ON FUNCTION forgeyard.lease_reap(integer, text) IS
  'Maintenance: return up to max_leases grants that expired without release, each once, for reconcilers. tenant NULL = all tenants. Safe to run from several places at once.';

CREATE FUNCTION forgeyard.lease_get(tenant text, resource text)
    RETURNS TABLE (owner text, epoch bigint, acquired_at timestamptz, expires_at timestamptz, state text)
    LANGUAGE c VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_lease_get';
COMMENT ON FUNCTION forgeyard.lease_get(text, text) IS
  'The stored lease of (tenant, resource): owner, epoch, times and state (live, expired, reaped, released). No row if the resource was never leased.';

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
-- Queues
-------------------------------------------------------------------------------------------------

CREATE TABLE forgeyard.queues (
    tenant_id              text        NOT NULL,
    queue                  text        NOT NULL,
    max_messages           bigint      NOT NULL CHECK (max_messages > 0),
    max_bytes              bigint      NOT NULL CHECK (max_bytes > 0),
    max_payload_bytes      bigint      NOT NULL CHECK (max_payload_bytes > 0),
    visibility_usecs       bigint      NOT NULL CHECK (visibility_usecs > 0),
    max_attempts           bigint      NOT NULL CHECK (max_attempts > 0),
    backoff_base_usecs     bigint      NOT NULL CHECK (backoff_base_usecs > 0),
    backoff_max_usecs      bigint      NOT NULL CHECK (backoff_max_usecs >= backoff_base_usecs),
    ordering               text        NOT NULL CHECK (ordering IN ('none', 'partition')),
    dead_letter_payload    text        NOT NULL CHECK (dead_letter_payload IN ('drop', 'keep')),
    retain_acked_usecs     bigint      NOT NULL CHECK (retain_acked_usecs >= 0),
    max_dead               bigint      NOT NULL CHECK (max_dead > 0),
    dead_retention_usecs   bigint      NOT NULL CHECK (dead_retention_usecs > 0),
    dedup_window_usecs     bigint      NOT NULL CHECK (dedup_window_usecs > 0),
    admit_emergency        bigint      NOT NULL CHECK (admit_emergency BETWEEN 1 AND 100),
    admit_security_control bigint      NOT NULL CHECK (admit_security_control BETWEEN 1 AND 100),
    admit_realtime         bigint      NOT NULL CHECK (admit_realtime BETWEEN 1 AND 100),
    admit_interactive      bigint      NOT NULL CHECK (admit_interactive BETWEEN 1 AND 100),
    admit_background       bigint      NOT NULL CHECK (admit_background BETWEEN 1 AND 100),
    admit_bulk             bigint      NOT NULL CHECK (admit_bulk BETWEEN 1 AND 100),
    notify                 boolean     NOT NULL,
    slots                  integer     NOT NULL CHECK (slots BETWEEN 1 AND 8),
    created_at             timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, queue)
);
COMMENT ON TABLE forgeyard.queues IS
  'One row per queue: its limits and policy (queue_create / queue_alter). Durations are microseconds; admit_<class> is the percentage of the limits up to which the class is admitted.';

-- Capacity is counted in `slots` rows per queue so producers do not serialize on one row: the
-- admitted side is updated by producers, the released side by consumers (ack, dead-letter), so
-- an ack never waits for a producer's open transaction.
CREATE TABLE forgeyard.queue_slots (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    admitted_messages bigint  NOT NULL DEFAULT 0,
    admitted_bytes    bigint  NOT NULL DEFAULT 0,
    admit_gen         bigint,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_slots IS
  'Messages and bytes admitted into each capacity slot of a queue (producers'' side of the bound), up to its last fold: with the slot''s queue_admit_deltas row of generation admit_gen.';
COMMENT ON COLUMN forgeyard.queue_slots.admit_gen IS
  'The admission generation (forgeyard.now() in seconds since 1970) whose queue_admit_deltas row takes the slot''s producers now; NULL: none yet. Set, with that row made, by the first producer of a later generation, which folds the older row into this one.';

-- Admission generations (0.12.0, F17): a producer adds what it admits to its slot's row of the
-- current generation (one second), updated in place under the slot's lock, so the slot row keeps
-- one version per generation instead of one per message, and a held snapshot makes a producer
-- walk at most one generation's versions. The first producer of a generation in a slot folds the
-- older row into the slot row, deletes it, and makes the new one: a row is made only with an
-- update of the slot row, so a producer under a transaction snapshot that saw neither change gets
-- 40001 from its lock of one or the other (docs/architecture.md, "Capacity slots").
CREATE TABLE forgeyard.queue_admit_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    gen               bigint  NOT NULL,
    admitted_messages bigint  NOT NULL DEFAULT 0,
    admitted_bytes    bigint  NOT NULL DEFAULT 0
) PARTITION BY LIST (((gen / 10) % 4));
COMMENT ON TABLE forgeyard.queue_admit_deltas IS
  'Messages and bytes admitted into a capacity slot in its current admission generation (queue_slots.admit_gen): one row per slot, folded into the slot''s queue_slots row by the first producer of the next generation, or by maintain(). In four segments (partitions) by the ten-second period of gen modulo 4 (segment N also takes -N, a clock before 1970), truncated by maintain() once emptied.';
CREATE TABLE forgeyard.queue_admit_deltas_0 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (0)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_1 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (1, -1)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_2 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (2, -2)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_admit_deltas_3 PARTITION OF forgeyard.queue_admit_deltas FOR VALUES IN (3, -3)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_admit_deltas_0_slot ON forgeyard.queue_admit_deltas_0 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_1_slot ON forgeyard.queue_admit_deltas_1 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_2_slot ON forgeyard.queue_admit_deltas_2 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_3_slot ON forgeyard.queue_admit_deltas_3 (tenant_id, queue, slot, gen);
CREATE INDEX queue_admit_deltas_slot ON forgeyard.queue_admit_deltas (tenant_id, queue, slot, gen);
COMMENT ON TABLE forgeyard.queue_admit_deltas_0 IS 'Segment 0 of queue_admit_deltas (the generations whose ten-second period is 0 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_1 IS 'Segment 1 of queue_admit_deltas (the generations whose ten-second period is 1 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_2 IS 'Segment 2 of queue_admit_deltas (the generations whose ten-second period is 2 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_admit_deltas_3 IS 'Segment 3 of queue_admit_deltas (the generations whose ten-second period is 3 modulo 4): truncated by maintain() once it holds no row.';
CREATE TABLE forgeyard.queue_releases (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL DEFAULT 0,
    released_bytes    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_releases IS
  'Messages and bytes that left each capacity slot (acked or dead-lettered): the consumers'' side of the bound.';

-- The room acked messages give back to their slots (0.7.1; by generation of 100 ms from 0.11.0):
-- the slot's usage is its admitted count less its release row and these deltas; acks and
-- maintain() fold older generations into the release row.
CREATE TABLE forgeyard.queue_release_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL,
    released_bytes    bigint  NOT NULL,
    gen               bigint  NOT NULL
) PARTITION BY LIST (((gen / 100) % 4));
COMMENT ON TABLE forgeyard.queue_release_deltas IS
  'Messages and bytes that left a capacity slot (acked or dead-lettered), per generation of 100 ms: folded into the slot''s queue_releases row by the first ack of a later generation, or by maintain(). In four segments (partitions) by the ten-second period of gen modulo 4 (segment N also takes -N, a clock before 1970), truncated by maintain() once emptied.';
COMMENT ON COLUMN forgeyard.queue_release_deltas.gen IS
  'The generation the room was given back in: forgeyard.now() in units of 100 ms since 1970. An ack updates a row of its generation in place (or adds one when every row of it is held); the older generations are folded into the release row.';
CREATE TABLE forgeyard.queue_release_deltas_0 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (0)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_1 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (1, -1)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_2 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (2, -2)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE TABLE forgeyard.queue_release_deltas_3 PARTITION OF forgeyard.queue_release_deltas FOR VALUES IN (3, -3)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_release_deltas_0_slot ON forgeyard.queue_release_deltas_0 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_1_slot ON forgeyard.queue_release_deltas_1 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_2_slot ON forgeyard.queue_release_deltas_2 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_3_slot ON forgeyard.queue_release_deltas_3 (tenant_id, queue, slot, gen);
CREATE INDEX queue_release_deltas_slot ON forgeyard.queue_release_deltas (tenant_id, queue, slot, gen);
COMMENT ON TABLE forgeyard.queue_release_deltas_0 IS 'Segment 0 of queue_release_deltas (the generations whose ten-second period is 0 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_1 IS 'Segment 1 of queue_release_deltas (the generations whose ten-second period is 1 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_2 IS 'Segment 2 of queue_release_deltas (the generations whose ten-second period is 2 modulo 4): truncated by maintain() once it holds no row.';
COMMENT ON TABLE forgeyard.queue_release_deltas_3 IS 'Segment 3 of queue_release_deltas (the generations whose ten-second period is 3 modulo 4): truncated by maintain() once it holds no row.';

CREATE SEQUENCE forgeyard.message_ids;
CREATE SEQUENCE forgeyard.claim_tokens;
COMMENT ON SEQUENCE forgeyard.message_ids IS 'Message ids: enqueue order.';
COMMENT ON SEQUENCE forgeyard.claim_tokens IS 'Claim tokens: one per delivery, the fencing token of ack / nack / extend.';

CREATE TABLE forgeyard.messages (
    msg_id        bigint      PRIMARY KEY,
    tenant_id     text        NOT NULL,
    queue         text        NOT NULL,
    state         text        NOT NULL CHECK (state IN ('pending', 'acked', 'dead')),
    priority      smallint    NOT NULL CHECK (priority BETWEEN 0 AND 5),
    partition_key text,
    is_head       boolean     NOT NULL,
    event_id      uuid,
    payload       bytea,
    bytes         bigint      NOT NULL,
    slot          smallint    NOT NULL,
    enqueued_at   timestamptz NOT NULL,
    visible_at    timestamptz NOT NULL,
    attempt       integer     NOT NULL DEFAULT 0,
    claim_token   bigint,
    claimed_by    text,
    last_error    text,
    error_class   text,
    finished_at   timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0);
-- The claim path: per class, the visible heads in visibility order. Only pending heads are in it.
-- msg_id makes every key of these three unique, so a deduplication pass at a full leaf page
-- could only spend time: it is off.
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head;
CREATE INDEX messages_partition ON forgeyard.messages (tenant_id, queue, partition_key, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND partition_key IS NOT NULL;
CREATE INDEX messages_finished ON forgeyard.messages (tenant_id, queue, msg_id) WITH (deduplicate_items = off)
    WHERE state <> 'pending';
COMMENT ON TABLE forgeyard.messages IS
  'Queued messages: pending (ready, delayed or in flight by visible_at and claim_token), acked (kept for retain_acked) or dead (dead letters). Use the API, not DML.';

CREATE TABLE forgeyard.queue_events (
    tenant_id      text        NOT NULL,
    queue          text        NOT NULL,
    event_id       uuid        NOT NULL,
    msg_id         bigint      NOT NULL,
    payload_digest text        NOT NULL,
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, queue, event_id)
);
CREATE INDEX queue_events_expiry ON forgeyard.queue_events (expires_at);
COMMENT ON TABLE forgeyard.queue_events IS
  'Producer dedup: the first message of each event_id within the queue''s dedup window (also after it was acked).';

CREATE TABLE forgeyard.queue_partitions (
    tenant_id     text   NOT NULL,
    queue         text   NOT NULL,
    partition_key text   NOT NULL,
    pending       bigint NOT NULL CHECK (pending >= 0),
    PRIMARY KEY (tenant_id, queue, partition_key)
) WITH (fillfactor = 70);
-- (Its COMMENT is with max_in_flight_per_key's columns, in the flow-control section.)

CREATE FUNCTION forgeyard.queue_create(tenant text, queue text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_create';
COMMENT ON FUNCTION forgeyard.queue_create(text, text, jsonb) IS
  'Create a queue of the tenant. Options (each validated, 22023 naming it): max_messages, max_bytes, max_payload_bytes (64 KiB), visibility_timeout, max_attempts, backoff_base, backoff_max, ordering (none|partition), dead_letter_payload (drop|keep), retain_acked, max_dead, dead_letter_retention, dedup_window (24 h), admit_<class> percentages (bulk 70, background 80, interactive 90, realtime 95, security_control and emergency 100), notify; flow control: retry_budget, retry_budget_min, retry_budget_window, max_in_flight_per_key (not with ordering partition), fairness (true|false), aging (an interval; 0 or null: none). 42710 if it exists.';

CREATE FUNCTION forgeyard.queue_alter(tenant text, queue text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_alter';
COMMENT ON FUNCTION forgeyard.queue_alter(text, text, jsonb) IS
  'Change the given options of a queue (ordering cannot change; max_in_flight_per_key and fairness can be set or removed only while the queue holds no messages; the limit can be changed any time). 42704 for an unknown queue.';

CREATE FUNCTION forgeyard.queue_drop(tenant text, queue text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_drop';
COMMENT ON FUNCTION forgeyard.queue_drop(text, text) IS
  'Drop a queue with its messages, dead letters and dedup events. Returns whether it existed.';

CREATE FUNCTION forgeyard.queue_list(tenant text)
    RETURNS TABLE (queue text, options jsonb) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_list';
COMMENT ON FUNCTION forgeyard.queue_list(text) IS 'The queues of a tenant with all their options.';

CREATE FUNCTION forgeyard.enqueue(tenant text, queue text, payload bytea, event_id uuid DEFAULT NULL,
                                  partition_key text DEFAULT NULL, priority text DEFAULT 'interactive',
                                  delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                  resource text DEFAULT NULL)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue';
COMMENT ON FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text) IS
  'Enqueue inside the caller''s transaction (visible to consumers after commit, gone on rollback); returns msg_id. A repeated event_id within the dedup window returns the first msg_id (even when full); with another payload FY011. fairness_key is carried with the message; resource names the downstream it will hit (its rate limit, concurrency limit and circuit breaker then govern the claim). FY020 when full for the class or over the admission limit, FY021 over max_payload_bytes, 42704 unknown queue, 22023 bad class or missing partition_key.';

CREATE FUNCTION forgeyard.enqueue_batch(tenant text, queue text, payloads bytea[], event_ids uuid[] DEFAULT NULL,
                                        partition_keys text[] DEFAULT NULL, priority text DEFAULT 'interactive',
                                        delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                        resource text DEFAULT NULL)
    RETURNS TABLE (msg_id bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue_batch';
COMMENT ON FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text) IS
  'Enqueue several messages (event_ids and partition_keys, when given, parallel to payloads; one fairness_key and resource for all); msg_ids in order. All or nothing.';

CREATE FUNCTION forgeyard.claim(tenant text, queue text, consumer text, max_messages integer DEFAULT 1,
                                visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_claim';
COMMENT ON FUNCTION forgeyard.claim(text, text, text, integer, interval) IS
  'Claim up to max_messages visible messages, highest class first, then oldest, each with a new claim_token, invisible to others for visibility (default: the queue''s). Never hands one message to two claimers at once and never waits on producers (SKIP LOCKED). In partition queues only the oldest pending message of each key is claimable.';

CREATE FUNCTION forgeyard.ack_and_claim(tenant text, queue text, consumer text, msg_ids bigint[], claim_tokens bigint[],
                                        max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack_and_claim';
COMMENT ON FUNCTION forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval) IS
  'A worker''s steady state in one round trip: ack the last batch (as ack_batch), then claim the next (as claim).';

CREATE FUNCTION forgeyard.ack(tenant text, queue text, msg_id bigint, claim_token bigint)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack';
COMMENT ON FUNCTION forgeyard.ack(text, text, bigint, bigint) IS
  'Finish a delivery. FY001 if claim_token is not the current delivery (it was claimed again, or nacked). Accepted after the visibility ran out if nobody claimed it since. A no-op for a message already acked, dead or gone (safe to retry).';

CREATE FUNCTION forgeyard.ack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[])
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack_batch';
COMMENT ON FUNCTION forgeyard.ack_batch(text, text, bigint[], bigint[]) IS
  'ack for each (msg_id, claim_token) pair; all or nothing (FY001 for any stale token).';

CREATE FUNCTION forgeyard.nack(tenant text, queue text, msg_id bigint, claim_token bigint, error text,
                               permanent boolean DEFAULT false)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_nack';
COMMENT ON FUNCTION forgeyard.nack(text, text, bigint, bigint, text, boolean) IS
  'Fail a delivery: retry after exponential backoff with full jitter capped at backoff_max (returns retry), or dead-letter after max_attempts or when permanent (returns dead). FY001 for a stale claim_token.';

CREATE FUNCTION forgeyard.nack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[], error text,
                                     permanent boolean DEFAULT false)
    RETURNS TABLE (msg_id bigint, outcome text) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_nack_batch';
COMMENT ON FUNCTION forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean) IS
  'nack for each (msg_id, claim_token) pair, with each outcome; all or nothing.';

CREATE FUNCTION forgeyard.extend(tenant text, queue text, msg_id bigint, claim_token bigint, visibility interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_extend';
COMMENT ON FUNCTION forgeyard.extend(text, text, bigint, bigint, interval) IS
  'Keep a live delivery invisible for visibility from now; returns the new visible_at. FY001 if the token is stale or the visibility already ran out (the delivery lapsed).';

CREATE FUNCTION forgeyard.extend_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[],
                                       visibility interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_extend_batch';
COMMENT ON FUNCTION forgeyard.extend_batch(text, text, bigint[], bigint[], interval) IS
  'extend for each (msg_id, claim_token) pair; all or nothing.';

CREATE FUNCTION forgeyard.queue_stats(tenant text, queue text)
    RETURNS TABLE (ready bigint, in_flight bigint, delayed bigint, dead bigint, bytes bigint,
                   oldest_ready_age interval, pressure text, waiting bigint, retries_delayed bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_stats';
COMMENT ON FUNCTION forgeyard.queue_stats(text, text) IS
  'Depth of a queue: ready (visible), in flight, delayed, dead; bytes admitted; age of the oldest ready message; pressure (normal below 70% of a limit, elevated to 90%, saturated above); waiting: of the ready, those held behind their key (a later message of an ordered partition, or a key at max_in_flight_per_key); retries_delayed: retries the retry budget delayed in its current window.';

CREATE FUNCTION forgeyard.dead_list(tenant text, queue text, after_msg_id bigint DEFAULT 0, max_rows integer DEFAULT 100)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer, error text,
                   error_class text, dead_at timestamptz, payload bytea)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_list';
COMMENT ON FUNCTION forgeyard.dead_list(text, text, bigint, integer) IS
  'Dead letters in msg_id order after after_msg_id (keyset pagination). payload is NULL unless the queue keeps it.';

CREATE FUNCTION forgeyard.dead_redrive(tenant text, queue text, msg_ids bigint[] DEFAULT NULL, max_rows integer DEFAULT 100)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_redrive';
COMMENT ON FUNCTION forgeyard.dead_redrive(text, text, bigint[], integer) IS
  'Put dead letters back in the queue (attempt 0, visible now, admitted like new messages: FY020 when full). Without msg_ids: the oldest max_rows that kept their payload. 22023 for a listed one whose payload was dropped.';

CREATE FUNCTION forgeyard.dead_purge(tenant text, queue text, msg_ids bigint[] DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_purge';
COMMENT ON FUNCTION forgeyard.dead_purge(text, text, bigint[]) IS
  'Delete the listed dead letters of a queue (all of them without msg_ids); returns how many.';

CREATE FUNCTION forgeyard.claim_plan(tenant text, queue text)
    RETURNS TABLE (plan text) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_claim_plan';
COMMENT ON FUNCTION forgeyard.claim_plan(text, text) IS
  'Maintenance: EXPLAIN of the claim statement as claim runs it (an index range scan on messages_claim; never a Seq Scan or a Sort of the queue).';

-------------------------------------------------------------------------------------------------
-- Inbox
-------------------------------------------------------------------------------------------------

CREATE TABLE forgeyard.inbox (
    tenant_id   text        NOT NULL,
    consumer    text        NOT NULL,
    event_id    uuid        NOT NULL,
    accepted_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, consumer, event_id)
);
CREATE INDEX inbox_accepted ON forgeyard.inbox (accepted_at);
COMMENT ON TABLE forgeyard.inbox IS
  'Consumer dedup: events a consumer accepted (inbox_accept), for an exactly-once effect over at-least-once delivery.';

CREATE FUNCTION forgeyard.inbox_accept(tenant text, consumer text, event_id uuid)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_inbox_accept';
COMMENT ON FUNCTION forgeyard.inbox_accept(text, text, uuid) IS
  'Inside the consumer''s transaction: true the first time (do the effect), false for every duplicate (skip it).';

CREATE FUNCTION forgeyard.inbox_purge(older_than interval DEFAULT '7 days', max_rows integer DEFAULT 10000,
                                      tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_inbox_purge';
COMMENT ON FUNCTION forgeyard.inbox_purge(interval, integer, text) IS
  'Maintenance: delete up to max_rows inbox entries accepted more than older_than ago; tenant NULL = all tenants.';

-------------------------------------------------------------------------------------------------
-- Maintenance
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.maintain(max_rows integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS TABLE (task text, "rows" bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_maintain';
COMMENT ON FUNCTION forgeyard.maintain(integer, text) IS
  'Maintenance, one bounded pass (schedule it, e.g. with pg_cron; safe from several places at once): expired idempotency keys, queue dedup events past their window, acked messages past retain_acked, dead letters past retention or over max_dead, inbox entries older than 7 days, finished workflow runs past their retention (with journals and signals); and the runs of due workflow schedules started (schedule_tick). Leases are not reaped here (lease_reap hands each to a reconciler).';

-------------------------------------------------------------------------------------------------
-- Audit log
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

-------------------------------------------------------------------------------------------------
-- Views for psql
-------------------------------------------------------------------------------------------------

-- Every view is security_barrier: the tenant filter runs before any caller-supplied condition, so a
-- bound role cannot see other tenants' rows through a cheap function in its own WHERE clause.
-- scope: the tenants bound to the caller or to any role it is a member of (directly or not);
-- the same rule as check_tenant in extension/tenant.cpp. Superusers get no shortcut here.
CREATE VIEW forgeyard.lease_status WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT l.tenant_id, l.resource, l.owner, l.epoch, l.acquired_at, l.expires_at, l.released_at, l.reaped_at,
       CASE WHEN l.released_at IS NOT NULL THEN 'released'
            WHEN l.reaped_at IS NOT NULL THEN 'reaped'
            WHEN l.expires_at <= c.now THEN 'expired'
            ELSE 'live' END AS state,
       CASE WHEN l.released_at IS NULL AND l.reaped_at IS NULL AND l.expires_at > c.now
            THEN l.expires_at - c.now END AS remaining
  FROM forgeyard.leases l
 CROSS JOIN (SELECT forgeyard.now() AS now) c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR l.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.lease_status IS
  'Every lease with its state (live, expired, reaped, released) and remaining time by forgeyard.now(). A role bound to tenants sees only those.';

CREATE VIEW forgeyard.queue_depth WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT m.tenant_id, m.queue,
       (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[m.priority + 1] AS class,
       CASE WHEN m.state <> 'pending' THEN m.state
            WHEN m.visible_at <= c.now THEN 'ready'
            WHEN m.claim_token IS NOT NULL THEN 'in_flight'
            ELSE 'delayed' END AS state,
       count(*) AS messages, sum(m.bytes) AS bytes, c.now - min(m.enqueued_at) AS oldest_age
  FROM forgeyard.messages m CROSS JOIN (SELECT forgeyard.now() AS now) c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR m.tenant_id IN (SELECT scope.tenant_id FROM scope)
 GROUP BY 1, 2, 3, 4, c.now;
COMMENT ON VIEW forgeyard.queue_depth IS
  'Depth of every queue by class and state (ready, in_flight, delayed, acked, dead) with bytes and the oldest message''s age. A role bound to tenants sees only those.';

CREATE VIEW forgeyard.queue_overview WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
)
SELECT q.tenant_id, q.queue, q.ordering, u.messages AS admitted_messages, q.max_messages, u.bytes AS admitted_bytes,
       q.max_bytes,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure
  FROM forgeyard.queues q JOIN used u USING (tenant_id, queue)
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR q.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.queue_overview IS
  'Every queue with the messages and bytes it holds against its limits and its pressure (normal / elevated / saturated). A role bound to tenants sees only those.';

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
-- Boundary probes (superuser-only; used by the regression suite)
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.boundary_throw(sqlstate text, message text DEFAULT 'boom')
    RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'fy_boundary_throw';
COMMENT ON FUNCTION forgeyard.boundary_throw(text, text) IS
  'Test probe: throws a C++ exception with this SQLSTATE (NULL: a plain std::runtime_error) to prove it surfaces as a clean ERROR.';

CREATE FUNCTION forgeyard.boundary_pg_error(sql text)
    RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'fy_boundary_pg_error';
COMMENT ON FUNCTION forgeyard.boundary_pg_error(text) IS
  'Test probe: runs sql through the guarded SPI path with C++ objects live; a PostgreSQL error comes back unchanged. Runs with the caller''s rights.';

-------------------------------------------------------------------------------------------------
-- Access kinds: what each grants (grant_usage, grant_maintenance, grant_inspect)
-------------------------------------------------------------------------------------------------

-- apply_access() grants exactly these rows; nothing else is granted to anyone.
INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    -- usage
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.now()'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.edition()'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.version()'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_acquire(text, text, text, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_renew(text, text, bigint, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_release(text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_fence(text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_get(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.versioning_trigger()'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.enable_versioning(regclass)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.disable_versioning(regclass)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.cas_update(regclass, jsonb, bigint, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.cas_get(regclass, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.idem_begin(text, text, text, bytea, interval, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.idem_checkpoint(text, text, text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.idem_complete(text, text, text, bytea, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.idem_abandon(text, text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.idem_status(text, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.queue_create(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.queue_alter(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.queue_drop(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.queue_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.claim(text, text, text, integer, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.ack(text, text, bigint, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.ack_batch(text, text, bigint[], bigint[])'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.nack(text, text, bigint, bigint, text, boolean)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.extend(text, text, bigint, bigint, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.extend_batch(text, text, bigint[], bigint[], interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.queue_stats(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.dead_list(text, text, bigint, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.dead_redrive(text, text, bigint[], integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.dead_purge(text, text, bigint[])'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.inbox_accept(text, text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_append_batch(text, text[], text[], text[], jsonb[], bytea[], text[], timestamptz[], uuid[])'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_head(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_verify(text, bigint, bigint, bigint, bytea)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_read(text, bigint, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.audit_canonical_details(jsonb)'),
    -- maintenance
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.lease_reap(integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.idem_purge(integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.inbox_purge(interval, integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.maintain(integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.claim_plan(text, text)'),
    -- inspect
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.now()'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.edition()'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.version()'),
    ('inspect',     'SELECT',  'TABLE forgeyard.lease_status'),
    ('inspect',     'SELECT',  'TABLE forgeyard.queue_depth'),
    ('inspect',     'SELECT',  'TABLE forgeyard.queue_overview'),
    ('inspect',     'SELECT',  'TABLE forgeyard.audit_status');

-------------------------------------------------------------------------------------------------
-- 0.5.0: hot paths (queue claim, ack and enqueue)
-------------------------------------------------------------------------------------------------

-- Per-backend caches of queue options and tenant bindings: a statement trigger on each cached
-- table queues a relcache invalidation of it, which every backend applies before its next use.
CREATE FUNCTION forgeyard.invalidate_caches() RETURNS trigger LANGUAGE c
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_invalidate_caches';
COMMENT ON FUNCTION forgeyard.invalidate_caches() IS
  'Internal statement trigger: makes every backend drop its cached rows of the table (queue options, tenant bindings) when they change.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.queues
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.queues IS
  'Backends cache queue options; any change to this table makes them read the options again.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.tenant_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.tenant_bindings IS
  'Backends cache tenant bindings; any change to this table makes them read the bindings again.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: application schema migrations, daemon registry, health
-------------------------------------------------------------------------------------------------

-- An application's own schema migrations, recorded per application and never rewritten; the
-- application's DDL itself runs through the client with the caller's rights, in the same
-- transaction as its record (docs/operations.md, "Migrating your application's schema").
CREATE TABLE forgeyard.app_migrations (
    application   text        NOT NULL,
    migration_id  integer     NOT NULL CHECK (migration_id OPERATOR(pg_catalog.>) 0),
    name          text        NOT NULL,
    sha256        text        NOT NULL CHECK (sha256 OPERATOR(pg_catalog.~) '^[0-9a-f]{64}$'),
    phase         text        NOT NULL CHECK (phase IN ('expand', 'contract')),
    transactional boolean     NOT NULL,
    applied_at    timestamptz NOT NULL,
    applied_by    text        NOT NULL,
    app_version   text        NOT NULL,
    duration_ms   bigint      NOT NULL CHECK (duration_ms OPERATOR(pg_catalog.>=) 0),
    PRIMARY KEY (application, migration_id)
);
COMMENT ON TABLE forgeyard.app_migrations IS
  'Applied migrations of each application''s own schema (id, file name, SHA-256, phase, who, when, how long). Append-only: UPDATE and DELETE fail with FY030.';

CREATE FUNCTION forgeyard.app_migrations_append_only()
    RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'forgeyard.app_migrations is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'FY030', HINT = 'an applied migration is never rewritten; add a new migration instead';
END
$$;
COMMENT ON FUNCTION forgeyard.app_migrations_append_only() IS
  'Trigger: refuses UPDATE, DELETE and TRUNCATE of forgeyard.app_migrations with FY030.';
CREATE TRIGGER app_migrations_append_only BEFORE UPDATE OR DELETE ON forgeyard.app_migrations
    FOR EACH ROW EXECUTE FUNCTION forgeyard.app_migrations_append_only();
CREATE TRIGGER app_migrations_no_truncate BEFORE TRUNCATE ON forgeyard.app_migrations
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.app_migrations_append_only();
ALTER TABLE forgeyard.app_migrations ENABLE ALWAYS TRIGGER app_migrations_append_only;
ALTER TABLE forgeyard.app_migrations ENABLE ALWAYS TRIGGER app_migrations_no_truncate;

-- Daemons of an application and the schema range each works with; live while expires_at > now.
CREATE TABLE forgeyard.app_daemons (
    application   text        NOT NULL,
    instance      text        NOT NULL,
    min_schema    integer     NOT NULL CHECK (min_schema OPERATOR(pg_catalog.>=) 0),
    max_schema    integer     NOT NULL CHECK (max_schema OPERATOR(pg_catalog.>=) 0),
    registered_at timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (application, instance)
);
COMMENT ON TABLE forgeyard.app_daemons IS
  'Daemons registered by the client at open: the schema range (migration ids) each works with, and a heartbeat lease. A contract migration above a live daemon''s max_schema is held back.';

CREATE TABLE forgeyard.app_backfills (
    application  text        NOT NULL,
    migration_id integer     NOT NULL CHECK (migration_id OPERATOR(pg_catalog.>) 0),
    name         text        NOT NULL,
    "cursor"     text,
    rows_done    bigint      NOT NULL CHECK (rows_done OPERATOR(pg_catalog.>=) 0),
    errors       bigint      NOT NULL CHECK (errors OPERATOR(pg_catalog.>=) 0),
    done         boolean     NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (application, migration_id, name)
);
COMMENT ON TABLE forgeyard.app_backfills IS
  'Progress of each resumable backfill: where the next chunk starts (cursor), rows done, errors, whether it finished.';

-- Argument checks shared by the functions below: NULL 22004, empty 22023, over max bytes 22001.
CREATE FUNCTION forgeyard.app_check_name(argument text, value text, max_bytes integer)
    RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF argument IS NULL OR max_bytes IS NULL THEN
        RAISE EXCEPTION 'app_check_name: argument and max_bytes must not be NULL' USING ERRCODE = '22004';
    ELSIF value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', argument USING ERRCODE = '22004';
    ELSIF value OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION '% must not be empty', argument USING ERRCODE = '22023';
    ELSIF pg_catalog.octet_length(value) OPERATOR(pg_catalog.>) max_bytes THEN
        RAISE EXCEPTION '% is longer than % bytes', argument, max_bytes USING ERRCODE = '22001',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length(value));
    END IF;
END
$$;
COMMENT ON FUNCTION forgeyard.app_check_name(text, text, integer) IS
  'Argument check of the app_* functions: NULL is 22004, empty 22023, longer than max_bytes 22001.';

CREATE FUNCTION forgeyard.app_migration_record(application text, migration_id integer, name text, sha256 text,
                                               phase text, transactional boolean, app_version text,
                                               duration_ms bigint)
    RETURNS TABLE (applied_at timestamptz, applied_by text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    PERFORM forgeyard.app_check_name('name', name, 255);
    IF migration_id IS NULL OR sha256 IS NULL OR phase IS NULL OR transactional IS NULL OR app_version IS NULL
       OR duration_ms IS NULL THEN
        RAISE EXCEPTION 'migration_id, sha256, phase, transactional, app_version and duration_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF migration_id OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION 'migration_id must be positive' USING ERRCODE = '22023';
    END IF;
    IF sha256 OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'sha256 must be 64 lower-case hex digits' USING ERRCODE = '22023';
    END IF;
    IF phase NOT IN ('expand', 'contract') THEN
        RAISE EXCEPTION 'phase must be expand or contract, not %', phase USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.octet_length(app_version) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'app_version is longer than 200 bytes' USING ERRCODE = '22001';
    END IF;
    IF duration_ms OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'duration_ms must not be negative' USING ERRCODE = '22023';
    END IF;
    BEGIN
        INSERT INTO forgeyard.app_migrations AS m
               (application, migration_id, name, sha256, phase, transactional, applied_at, applied_by,
                app_version, duration_ms)
        VALUES (application, migration_id, name, sha256, phase, transactional, now_at, session_user::text,
                app_version, duration_ms);
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'application % already has migration % recorded', application, migration_id
            USING ERRCODE = 'FY030', HINT = 'an applied migration is never rewritten';
    END;
    RETURN QUERY SELECT now_at, session_user::text;
END
$$;
COMMENT ON FUNCTION forgeyard.app_migration_record(text, integer, text, text, text, boolean, text, bigint) IS
  'Record an applied migration of an application (call it in the transaction that ran the file). An id already recorded is FY030: records are never rewritten.';

CREATE FUNCTION forgeyard.app_migration_list(application text)
    RETURNS TABLE (migration_id integer, name text, sha256 text, phase text, transactional boolean,
                   applied_at timestamptz, applied_by text, app_version text, duration_ms bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    RETURN QUERY
        SELECT m.migration_id, m.name, m.sha256, m.phase, m.transactional, m.applied_at, m.applied_by,
               m.app_version, m.duration_ms
          FROM forgeyard.app_migrations m
         WHERE m.application OPERATOR(pg_catalog.=) app_migration_list.application
         ORDER BY m.migration_id;
END
$$;
COMMENT ON FUNCTION forgeyard.app_migration_list(text) IS
  'The applied migrations of an application, by id.';

CREATE FUNCTION forgeyard.app_daemon_register(application text, instance text, min_schema integer,
                                              max_schema integer, lease interval)
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    now_at timestamptz := forgeyard.now();
    expires timestamptz;
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    PERFORM forgeyard.app_check_name('instance', instance, 200);
    IF min_schema IS NULL OR max_schema IS NULL OR lease IS NULL THEN
        RAISE EXCEPTION 'min_schema, max_schema and lease must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF min_schema OPERATOR(pg_catalog.<) 0 OR max_schema OPERATOR(pg_catalog.<) 0
       OR (max_schema OPERATOR(pg_catalog.>) 0 AND max_schema OPERATOR(pg_catalog.<) min_schema) THEN
        RAISE EXCEPTION 'min_schema and max_schema must be >= 0 and min_schema <= max_schema (max 0: no bound)'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.date_part('month', lease) OPERATOR(pg_catalog.<>) 0
       OR pg_catalog.date_part('year', lease) OPERATOR(pg_catalog.<>) 0
       OR lease OPERATOR(pg_catalog.<=) '0'::interval OR lease OPERATOR(pg_catalog.>) '7 days'::interval THEN
        RAISE EXCEPTION 'lease must be positive, at most 7 days, without a month component' USING ERRCODE = '22023';
    END IF;
    expires := now_at OPERATOR(pg_catalog.+) pg_catalog.justify_hours(lease);
    INSERT INTO forgeyard.app_daemons AS d
           (application, instance, min_schema, max_schema, registered_at, heartbeat_at, expires_at)
    VALUES (application, instance, min_schema, max_schema, now_at, now_at, expires)
    ON CONFLICT ON CONSTRAINT app_daemons_pkey DO UPDATE
       SET min_schema = excluded.min_schema, max_schema = excluded.max_schema,
           heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at;
    RETURN expires;
END
$$;
COMMENT ON FUNCTION forgeyard.app_daemon_register(text, text, integer, integer, interval) IS
  'Register (or renew) a daemon of an application with the schema range it works with (max 0: no bound), live until now + lease. Returns the new expiry.';

CREATE FUNCTION forgeyard.app_daemon_release(application text, instance text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    PERFORM forgeyard.app_check_name('instance', instance, 200);
    DELETE FROM forgeyard.app_daemons d
     WHERE d.application OPERATOR(pg_catalog.=) app_daemon_release.application
       AND d.instance OPERATOR(pg_catalog.=) app_daemon_release.instance;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION forgeyard.app_daemon_release(text, text) IS
  'Remove a daemon''s registration (at a clean shutdown). Returns whether it was registered.';

CREATE FUNCTION forgeyard.app_daemon_list(application text)
    RETURNS TABLE (instance text, min_schema integer, max_schema integer, registered_at timestamptz,
                   heartbeat_at timestamptz, expires_at timestamptz, live boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    RETURN QUERY
        SELECT d.instance, d.min_schema, d.max_schema, d.registered_at, d.heartbeat_at, d.expires_at,
               d.expires_at OPERATOR(pg_catalog.>) now_at
          FROM forgeyard.app_daemons d
         WHERE d.application OPERATOR(pg_catalog.=) app_daemon_list.application
         ORDER BY d.instance;
END
$$;
COMMENT ON FUNCTION forgeyard.app_daemon_list(text) IS
  'The registered daemons of an application; live while expires_at > forgeyard.now().';

CREATE FUNCTION forgeyard.app_backfill_save(application text, migration_id integer, name text, "cursor" text,
                                            rows_done bigint, errors bigint, done boolean)
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    PERFORM forgeyard.app_check_name('name', name, 200);
    IF migration_id IS NULL OR rows_done IS NULL OR errors IS NULL OR done IS NULL THEN
        RAISE EXCEPTION 'migration_id, rows_done, errors and done must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF migration_id OPERATOR(pg_catalog.<=) 0 OR rows_done OPERATOR(pg_catalog.<) 0
       OR errors OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'migration_id must be positive, rows_done and errors not negative' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.octet_length("cursor") OPERATOR(pg_catalog.>) 4096 THEN
        RAISE EXCEPTION 'cursor is longer than 4096 bytes' USING ERRCODE = '22001';
    END IF;
    INSERT INTO forgeyard.app_backfills AS b
           (application, migration_id, name, "cursor", rows_done, errors, done, updated_at)
    VALUES (application, migration_id, name, "cursor", rows_done, errors, done, now_at)
    ON CONFLICT ON CONSTRAINT app_backfills_pkey DO UPDATE
       SET "cursor" = excluded."cursor", rows_done = excluded.rows_done, errors = excluded.errors,
           done = excluded.done, updated_at = excluded.updated_at;
    RETURN now_at;
END
$$;
COMMENT ON FUNCTION forgeyard.app_backfill_save(text, integer, text, text, bigint, bigint, boolean) IS
  'Record a backfill''s progress after a chunk: the cursor the next chunk starts from, rows done, errors, done.';

CREATE FUNCTION forgeyard.app_backfill_list(application text)
    RETURNS TABLE (migration_id integer, name text, "cursor" text, rows_done bigint, errors bigint, done boolean,
                   updated_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.app_check_name('application', application, 200);
    RETURN QUERY
        SELECT b.migration_id, b.name, b."cursor", b.rows_done, b.errors, b.done, b.updated_at
          FROM forgeyard.app_backfills b
         WHERE b.application OPERATOR(pg_catalog.=) app_backfill_list.application
         ORDER BY b.migration_id, b.name;
END
$$;
COMMENT ON FUNCTION forgeyard.app_backfill_list(text) IS
  'The backfills of an application and their progress.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_migration_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_daemon_register(text, text, integer, integer, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_daemon_release(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_daemon_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_backfill_save(text, integer, text, text, bigint, bigint, boolean)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.app_backfill_list(text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.app_migration_record(text, integer, text, text, text, boolean, text, bigint)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.app_migration_list(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.app_daemon_list(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.app_backfill_list(text)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.app_migrations', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.app_daemons', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.app_backfills', '');

-- Operations: storage_stats() feeds `storage stats`, `storage status`, `storage doctor` and
-- `forgeyard metrics` (docs/operations.md, "Stats and metrics"). One long, narrow result so the
-- client reads every figure in one round trip: (kind, tenant_id, name, state, value). jit is off
-- for it: its one large statement costs enough to be JIT-compiled, which took seconds for a
-- query that runs in milliseconds.
CREATE FUNCTION forgeyard.storage_stats(tenant text DEFAULT NULL)
    RETURNS TABLE (kind text, tenant_id text, name text, state text, value bigint)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    AS 'MODULE_PATHNAME', 'fy_storage_stats';
COMMENT ON FUNCTION forgeyard.storage_stats(text) IS
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, workflow runs by definition and state, the oldest open transaction, replication slots holding xmin, the oldest holder of the xmin horizon of any kind (a transaction, a prepared transaction, a replication slot or a standby''s feedback: its age in transactions and how long it has held it), and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.storage_stats(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.storage_stats(text)');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: restore safety: fencing values that never rewind, restore_reconcile
-------------------------------------------------------------------------------------------------

-- Where this database was when forgeyard last recorded it: at install or upgrade, and at each
-- restore_reconcile / restore_acknowledge. A restore brings its old rows along (config dump) and
-- CREATE EXTENSION adds a new 'install' row, so restore_status can tell a restored database from
-- the original (docs/architecture.md#fencing-across-a-restore). No key: a restore only INSERTs.
CREATE TABLE forgeyard.store_identity (
    observed_at       timestamptz NOT NULL,
    reason            text        NOT NULL CHECK (reason IN ('install', 'reconcile', 'acknowledge')),
    system_identifier bigint      NOT NULL,
    timeline          bigint      NOT NULL,
    database_oid      oid         NOT NULL,
    database_name     text        NOT NULL
);
COMMENT ON TABLE forgeyard.store_identity IS
  'Where the database was when forgeyard recorded it (install, restore_reconcile, restore_acknowledge): system identifier, timeline, database oid. restore_status compares it with the current one. Kept by pg_dump; rows are only added.';

CREATE FUNCTION forgeyard.current_store_identity()
    RETURNS TABLE (system_identifier bigint, timeline bigint, database_oid oid, database_name text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        SELECT s.system_identifier,
               CASE WHEN pg_catalog.pg_is_in_recovery() THEN c.timeline_id::pg_catalog.int8
                    ELSE (('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.pg_walfile_name(
                              pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32))::pg_catalog.int4::pg_catalog.int8
               END,
               d.oid, d.datname::pg_catalog.text
          FROM pg_catalog.pg_control_system() s, pg_catalog.pg_control_checkpoint() c, pg_catalog.pg_database d
         WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
    END;
COMMENT ON FUNCTION forgeyard.current_store_identity() IS
  'The identity restore_status compares with forgeyard.store_identity: the cluster''s system identifier, its timeline (on a primary the timeline its WAL is written on, which changes at promotion; on a standby that of its last restartpoint), this database''s oid and name.';

INSERT INTO forgeyard.store_identity
    SELECT pg_catalog.clock_timestamp(), 'install', i.system_identifier, i.timeline, i.database_oid, i.database_name
      FROM forgeyard.current_store_identity() i;

CREATE FUNCTION forgeyard.restore_status()
    RETURNS TABLE (state text, detail text, last_reconciled_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    cur record;
    cleared timestamptz;
    foreign_row record;
    installs bigint;
    newest_install timestamptz;
    newest record;
BEGIN
    SELECT * INTO cur FROM forgeyard.current_store_identity();
    -- The last reconcile (or acknowledgement) made here clears everything recorded before it.
    SELECT pg_catalog.max(i.observed_at) INTO cleared FROM forgeyard.store_identity i
     WHERE i.reason OPERATOR(pg_catalog.<>) 'install'
       AND i.system_identifier OPERATOR(pg_catalog.=) cur.system_identifier
       AND i.database_oid OPERATOR(pg_catalog.=) cur.database_oid;
    SELECT pg_catalog.max(i.observed_at) INTO last_reconciled_at FROM forgeyard.store_identity i
     WHERE i.reason OPERATOR(pg_catalog.=) 'reconcile'
       AND i.system_identifier OPERATOR(pg_catalog.=) cur.system_identifier
       AND i.database_oid OPERATOR(pg_catalog.=) cur.database_oid;
    -- Certain: a row recorded in another cluster or database (pg_restore elsewhere), or a second
    -- install row (pg_restore --clean in place: CREATE EXTENSION ran again beside the dumped row).
    SELECT i.* INTO foreign_row FROM forgeyard.store_identity i
     WHERE (i.system_identifier OPERATOR(pg_catalog.<>) cur.system_identifier
            OR i.database_oid OPERATOR(pg_catalog.<>) cur.database_oid)
       AND (cleared IS NULL OR i.observed_at OPERATOR(pg_catalog.>) cleared)
     ORDER BY i.observed_at DESC LIMIT 1;
    IF FOUND THEN
        state := 'restored';
        detail := pg_catalog.format('recorded in database %s (oid %s) of system %s at %s; now database %s (oid %s) of system %s',
                                    foreign_row.database_name, foreign_row.database_oid, foreign_row.system_identifier,
                                    foreign_row.observed_at, cur.database_name, cur.database_oid, cur.system_identifier);
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT pg_catalog.count(*), pg_catalog.max(i.observed_at) INTO installs, newest_install FROM forgeyard.store_identity i
     WHERE i.reason OPERATOR(pg_catalog.=) 'install';
    IF installs OPERATOR(pg_catalog.>) 1 AND (cleared IS NULL OR cleared OPERATOR(pg_catalog.<) newest_install) THEN
        state := 'restored';
        detail := pg_catalog.format('the extension was installed %s times over restored data (pg_restore into this database)', installs);
        RETURN NEXT;
        RETURN;
    END IF;
    -- Suspected: the same cluster on another timeline: a point-in-time recovery, or a promoted
    -- replica (a failover to a synchronous replica loses nothing): only the operator knows.
    SELECT i.* INTO newest FROM forgeyard.store_identity i
     WHERE i.system_identifier OPERATOR(pg_catalog.=) cur.system_identifier
       AND i.database_oid OPERATOR(pg_catalog.=) cur.database_oid
     ORDER BY i.observed_at DESC LIMIT 1;
    IF FOUND AND newest.timeline OPERATOR(pg_catalog.<>) cur.timeline THEN
        state := 'suspected';
        detail := pg_catalog.format('timeline %s recorded at %s, now %s: a point-in-time recovery or a failover; run restore_reconcile() after a recovery, restore_acknowledge() after a failover',
                                    newest.timeline, newest.observed_at, cur.timeline);
        RETURN NEXT;
        RETURN;
    END IF;
    state := 'ok';
    detail := pg_catalog.format('database %s (oid %s) of system %s, timeline %s', cur.database_name, cur.database_oid,
                                cur.system_identifier, cur.timeline);
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION forgeyard.restore_status() IS
  'Whether this database was restored since forgeyard last recorded it: ok; restored (certain: recorded in another database or cluster, or the extension installed again over restored data): run restore_reconcile(); suspected (the timeline changed: a point-in-time recovery or a failover): run restore_reconcile() after a recovery, restore_acknowledge() after a failover. A snapshot of the same cluster restored on the same timeline cannot be told from a crash and restart.';

CREATE FUNCTION forgeyard.restore_acknowledge()
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF (SELECT s.state FROM forgeyard.restore_status() s) OPERATOR(pg_catalog.=) 'restored' THEN
        RAISE EXCEPTION 'this database was restored: run forgeyard.restore_reconcile(), not restore_acknowledge()'
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO forgeyard.store_identity
        SELECT pg_catalog.clock_timestamp(), 'acknowledge', i.system_identifier, i.timeline, i.database_oid, i.database_name
          FROM forgeyard.current_store_identity() i;
END
$$;
COMMENT ON FUNCTION forgeyard.restore_acknowledge() IS
  'Maintenance, after a failover to a replica that lost nothing: record the new timeline as known without expiring leases or claims. Refused (22023) when restore_status is restored.';

CREATE FUNCTION forgeyard.restore_reconcile(anchors jsonb DEFAULT NULL)
    RETURNS TABLE (kind text, tenant text, count bigint, detail text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t timestamptz := forgeyard.now();
    floor_value bigint;
    status_before record;
    n_leases bigint;
    n_deliveries bigint;
    n_keys bigint;
    n_roles bigint;
    n_verified bigint := 0;
    n_failed bigint := 0;
    chain record;
    anchor jsonb;
    anchor_seq bigint;
    anchor_hash bytea;
    v record;
    head_seq bigint;
    failures jsonb := '[]';
    ops record;
BEGIN
    -- A role bound to tenants may not act on all of them: the caller must be allowed the
    -- operations chain (FY040 otherwise; the same check as every tenant-scoped call).
    PERFORM FROM forgeyard.audit_head('_forgeyard.operations');
    IF anchors IS NOT NULL AND pg_catalog.jsonb_typeof(anchors) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'anchors must be a JSON object {"tenant": {"seq": N, "hash": "hex"}}' USING ERRCODE = '22023';
    END IF;
    FOR chain IN SELECT a.key AS tenant, a.value FROM pg_catalog.jsonb_each(anchors) a LOOP
        IF pg_catalog.jsonb_typeof(chain.value) OPERATOR(pg_catalog.<>) 'object'
           OR pg_catalog.jsonb_typeof(chain.value OPERATOR(pg_catalog.->) 'seq') IS DISTINCT FROM 'number'
           OR pg_catalog.jsonb_typeof(chain.value OPERATOR(pg_catalog.->) 'hash') IS DISTINCT FROM 'string'
           OR (chain.value OPERATOR(pg_catalog.->>) 'hash') OPERATOR(pg_catalog.!~) '^[0-9a-fA-F]{64}$'
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq') OPERATOR(pg_catalog.!~) '^[0-9]+$'
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.numeric OPERATOR(pg_catalog.<) 1
           OR (chain.value OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.numeric OPERATOR(pg_catalog.>) 9223372036854775807 THEN
            RAISE EXCEPTION 'anchor of tenant "%" must be {"seq": a positive integer, "hash": 64 hex digits}', chain.tenant
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    SELECT * INTO status_before FROM forgeyard.restore_status();

    -- Every fencing value handed out from here on exceeds the clock in microseconds, hence every
    -- value handed out before the restore (docs/architecture.md#fencing-across-a-restore).
    floor_value := (EXTRACT(epoch FROM t) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8;
    PERFORM pg_catalog.setval('forgeyard.message_ids', floor_value) FROM forgeyard.message_ids s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;
    PERFORM pg_catalog.setval('forgeyard.claim_tokens', floor_value) FROM forgeyard.claim_tokens s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;
    PERFORM pg_catalog.setval('forgeyard.idempotency_attempts', floor_value) FROM forgeyard.idempotency_attempts s
      WHERE s.last_value OPERATOR(pg_catalog.<) floor_value;

    -- Live grants end now; lease_reap reports each once (reaped_at cleared).
    UPDATE forgeyard.leases l SET expires_at = t, reaped_at = NULL
     WHERE l.released_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) t;
    GET DIAGNOSTICS n_leases = ROW_COUNT;
    -- Claimed deliveries (in flight, or lapsed but not re-claimed): claimable now, under a token
    -- nobody holds, so every earlier token's ack / nack / extend is refused (FY001).
    UPDATE forgeyard.messages m
       SET claim_token = pg_catalog.nextval('forgeyard.claim_tokens'), claimed_by = NULL,
           visible_at = LEAST(m.visible_at, t)
     WHERE m.state OPERATOR(pg_catalog.=) 'pending' AND m.claim_token IS NOT NULL AND m.claimed_by IS NOT NULL;
    GET DIAGNOSTICS n_deliveries = ROW_COUNT;
    -- Those of workflow runs: the lease each run keeps of its delivery ends with it (0.7.0).
    UPDATE forgeyard.wf_runs r SET lease_until = NULL WHERE r.lease_until IS NOT NULL;
    -- Locked keys: the lock ends and the attempt becomes one nobody holds; the next begin takes
    -- over from the recovery point with a new attempt.
    UPDATE forgeyard.idempotency_keys k
       SET attempt = pg_catalog.nextval('forgeyard.idempotency_attempts'), locked_until = t
     WHERE k.status OPERATOR(pg_catalog.=) 'in_progress' AND k.locked_until OPERATOR(pg_catalog.>) t;
    GET DIAGNOSTICS n_keys = ROW_COUNT;

    -- Every chain, and every anchored tenant (an anchor of a chain lost entirely is a cut tail too).
    FOR chain IN
        SELECT c.tenant_id, h.seq AS head_seq FROM (
            SELECT a.tenant_id FROM forgeyard.audit_heads a
            UNION SELECT j.key FROM pg_catalog.jsonb_object_keys(COALESCE(anchors, '{}')) j(key)) c
          LEFT JOIN forgeyard.audit_heads h ON h.tenant_id OPERATOR(pg_catalog.=) c.tenant_id
         ORDER BY c.tenant_id
    LOOP
        anchor := anchors OPERATOR(pg_catalog.->) chain.tenant_id;
        anchor_seq := (anchor OPERATOR(pg_catalog.->>) 'seq')::pg_catalog.int8;
        anchor_hash := pg_catalog.decode(anchor OPERATOR(pg_catalog.->>) 'hash', 'hex');
        head_seq := COALESCE(chain.head_seq, 0);
        SELECT * INTO v FROM forgeyard.audit_verify(chain.tenant_id, 1, NULL, anchor_seq, anchor_hash);
        n_verified := n_verified OPERATOR(pg_catalog.+) 1;
        IF NOT v.ok THEN
            n_failed := n_failed OPERATOR(pg_catalog.+) 1;
            failures := failures OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                'tenant', chain.tenant_id, 'first_bad_seq', v.first_bad_seq, 'reason', v.reason);
            IF anchor_seq OPERATOR(pg_catalog.>) head_seq THEN
                kind := 'audit_tail_cut'; tenant := chain.tenant_id; count := anchor_seq;
                detail := pg_catalog.format('events %s..%s were lost with the restore (head %s, anchor %s)',
                                            head_seq OPERATOR(pg_catalog.+) 1, anchor_seq, head_seq, anchor_seq);
            ELSE
                kind := 'audit_chain_failed'; tenant := chain.tenant_id; count := v.first_bad_seq;
                detail := v.reason;
            END IF;
            RETURN NEXT;
        END IF;
    END LOOP;

    -- Grants made while ALTER EXTENSION ... UPDATE ran are recorded as the extension's initial
    -- privileges, which pg_dump leaves out: grant every recorded role its access kinds again.
    SELECT pg_catalog.count(*) INTO n_roles
      FROM (SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r) g;

    INSERT INTO forgeyard.store_identity
        SELECT pg_catalog.clock_timestamp(), 'reconcile', i.system_identifier, i.timeline, i.database_oid, i.database_name
          FROM forgeyard.current_store_identity() i;
    -- The report, in the tenant-neutral operations chain (seed: restores are audited).
    SELECT * INTO ops FROM forgeyard.audit_append('_forgeyard.operations', session_user::pg_catalog.text,
        'storage.reconcile', pg_catalog.current_database()::pg_catalog.text,
        pg_catalog.jsonb_build_object('restore_state', status_before.state, 'leases_expired', n_leases,
            'deliveries_released', n_deliveries, 'idempotency_unlocked', n_keys,
            'audit_chains_verified', n_verified, 'audit_chains_failed', n_failed, 'fencing_floor', floor_value,
            'failures', failures));

    tenant := NULL; detail := NULL;
    kind := 'restore_detected'; count := (status_before.state OPERATOR(pg_catalog.<>) 'ok')::pg_catalog.int4;
    detail := status_before.state OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) status_before.detail; RETURN NEXT;
    detail := NULL;
    kind := 'leases_expired'; count := n_leases; RETURN NEXT;
    kind := 'deliveries_released'; count := n_deliveries; RETURN NEXT;
    kind := 'idempotency_unlocked'; count := n_keys; RETURN NEXT;
    kind := 'audit_chains_verified'; count := n_verified; RETURN NEXT;
    kind := 'audit_chains_failed'; count := n_failed; RETURN NEXT;
    kind := 'fencing_floor'; count := floor_value; RETURN NEXT;
    kind := 'access_reapplied'; count := n_roles; RETURN NEXT;
    kind := 'operations_audit'; tenant := '_forgeyard.operations'; count := ops.seq;
    detail := pg_catalog.encode(ops.hash, 'hex'); RETURN NEXT;
END
$$;
COMMENT ON FUNCTION forgeyard.restore_reconcile(jsonb) IS
  'Maintenance, after every restore (pg_restore, PITR, a snapshot, a copy): raises the message-id, claim-token and idempotency-attempt sequences to at least the clock in microseconds; ends every live lease (lease_reap reports each once); makes claimed deliveries claimable again under new tokens (earlier tokens get FY001); ends the lock of in-progress idempotency keys under a new attempt (they resume from their recovery point); verifies every audit chain, reporting a tail cut below the given anchors ({"tenant": {"seq": N, "hash": "hex"}}); grants every role recorded by grant_usage / grant_maintenance / grant_inspect its access again (grants made during ALTER EXTENSION UPDATE are lost by pg_dump); records the database''s identity and appends its report to the audit chain of tenant _forgeyard.operations. Returns rows (kind, tenant, count, detail): restore_detected, leases_expired, deliveries_released, idempotency_unlocked, audit_chains_verified, audit_chains_failed, fencing_floor, access_reapplied, operations_audit, and one audit_tail_cut or audit_chain_failed per failing chain. Idempotent: a second run changes nothing more than a run at that moment needs.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.restore_status()'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.restore_reconcile(jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.restore_acknowledge()'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.restore_status()');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.store_identity', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: topics: durable pub/sub and the event type registry
-------------------------------------------------------------------------------------------------

-- Event types registered per tenant: publishing an unregistered (event_type, version) is FY050.
CREATE TABLE forgeyard.event_types (
    tenant_id       text        NOT NULL,
    event_type      text        NOT NULL,
    version         integer     NOT NULL CHECK (version > 0),
    retention_class text        NOT NULL CHECK (retention_class IN ('ephemeral', 'short', 'operational', 'audit')),
    registered_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_type, version)
);
COMMENT ON TABLE forgeyard.event_types IS
  'The registry of event types: each (event_type, version) a tenant may publish, with its retention class (event_type_register).';

CREATE TABLE forgeyard.topics (
    tenant_id          text        NOT NULL,
    topic              text        NOT NULL,
    max_subscriptions  integer     NOT NULL CHECK (max_subscriptions BETWEEN 1 AND 256),
    retention_usecs    bigint      NOT NULL CHECK (retention_usecs >= 0),
    dedup_window_usecs bigint      NOT NULL CHECK (dedup_window_usecs > 0),
    created_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, topic)
);
COMMENT ON TABLE forgeyard.topics IS
  'One row per topic (topic_create): its fan-out bound, how long published events stay replayable, and its event_id dedup window. Durations are microseconds.';

-- A subscription is a queue of the tenant (same name) fed by one topic.
CREATE TABLE forgeyard.subscriptions (
    tenant_id    text        NOT NULL,
    subscription text        NOT NULL,
    topic        text        NOT NULL,
    on_full      text        NOT NULL CHECK (on_full IN ('reject', 'dead_letter')),
    event_types  jsonb,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, subscription)
);
CREATE INDEX subscriptions_topic ON forgeyard.subscriptions (tenant_id, topic, subscription);
COMMENT ON TABLE forgeyard.subscriptions IS
  'Subscriptions: the queue of the same name receives the topic''s events. event_types: NULL for every type, else {"<type>": {"min": v, "max": v}} (versions outside the range are quarantined).';

CREATE SEQUENCE forgeyard.topic_event_seqs;
COMMENT ON SEQUENCE forgeyard.topic_event_seqs IS 'Event sequence numbers: publish order, monotonic per topic.';

-- Each published event once, with its payload; a subscription's message carries the event's
-- event_id and no payload, and claim reads the payload from here.
CREATE TABLE forgeyard.topic_events (
    tenant_id      text        NOT NULL,
    topic          text        NOT NULL,
    event_seq      bigint      NOT NULL,
    event_id       uuid        NOT NULL,
    event_type     text        NOT NULL,
    version        integer     NOT NULL,
    partition_key  text,
    priority       smallint    NOT NULL,
    payload        bytea       NOT NULL,
    payload_digest text        NOT NULL,
    published_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, topic, event_seq),
    UNIQUE (tenant_id, topic, event_id)
);
CREATE INDEX topic_events_published ON forgeyard.topic_events (tenant_id, topic, published_at);
COMMENT ON TABLE forgeyard.topic_events IS
  'Published events, each stored once with its payload, kept while a subscription message needs it and for the topic''s retention (replay) and dedup window.';

CREATE FUNCTION forgeyard.event_type_register(tenant text, event_type text, version integer, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_event_type_register';
COMMENT ON FUNCTION forgeyard.event_type_register(text, text, integer, jsonb) IS
  'Register (event_type, version) for the tenant so it can be published. Options: retention_class (ephemeral | short | operational (default) | audit). Registering it again with the same class is a no-op; with another class 42710.';

CREATE FUNCTION forgeyard.event_type_list(tenant text)
    RETURNS TABLE (event_type text, version integer, retention_class text, registered_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_event_type_list';
COMMENT ON FUNCTION forgeyard.event_type_list(text) IS 'The registered event types of a tenant, by type and version.';

CREATE FUNCTION forgeyard.topic_create(tenant text, topic text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_create';
COMMENT ON FUNCTION forgeyard.topic_create(text, text, jsonb) IS
  'Create a topic of the tenant. Options: max_subscriptions (1..256, default 16), retention (interval, default 0: no replay), dedup_window (interval, default 24 hours). 42710 if it exists.';

CREATE FUNCTION forgeyard.topic_drop(tenant text, topic text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_drop';
COMMENT ON FUNCTION forgeyard.topic_drop(text, text) IS
  'Drop a topic with its events and its subscriptions (their queues, messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.topic_list(tenant text)
    RETURNS TABLE (topic text, options jsonb, subscriptions jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_list';
COMMENT ON FUNCTION forgeyard.topic_list(text) IS 'The topics of a tenant with their options and subscriptions.';

CREATE FUNCTION forgeyard.subscribe(tenant text, topic text, subscription text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscribe';
COMMENT ON FUNCTION forgeyard.subscribe(text, text, text, jsonb) IS
  'Create a subscription: a queue of the tenant named subscription (every queue_create option applies) fed by the topic. Also: event_types (["t", ...] or {"t": {"min": 1, "max": 2}}; default every type), on_full (reject: the publish fails with FY020; dead_letter: this subscription dead-letters the event as backlog_full), start (now, or oldest: the retained events are delivered first). 22023 over max_subscriptions, 42710 if the queue exists.';

CREATE FUNCTION forgeyard.unsubscribe(tenant text, topic text, subscription text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_unsubscribe';
COMMENT ON FUNCTION forgeyard.unsubscribe(text, text, text) IS
  'Drop a subscription and its queue (messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.publish(tenant text, topic text, event_type text, version integer, payload bytea,
                                  event_id uuid DEFAULT NULL, partition_key text DEFAULT NULL,
                                  priority text DEFAULT 'interactive')
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_publish';
COMMENT ON FUNCTION forgeyard.publish(text, text, text, integer, bytea, uuid, text, text) IS
  'Publish inside the caller''s transaction: each subscription whose event_types match gets one message (payload stored once); a version outside a subscription''s range is dead-lettered there as schema_unsupported. Returns the event_seq (monotonic per topic). A repeated event_id within the dedup window returns the first event_seq (FY011 for other contents). FY050 unregistered type or version, FY020 a reject subscription is full (named), FY021 payload over a subscription''s max_payload_bytes, 42704 unknown topic.';

CREATE FUNCTION forgeyard.publish_batch(tenant text, topic text, event_type text, version integer, payloads bytea[],
                                        event_ids uuid[] DEFAULT NULL, partition_keys text[] DEFAULT NULL,
                                        priority text DEFAULT 'interactive')
    RETURNS TABLE (event_seq bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_publish_batch';
COMMENT ON FUNCTION forgeyard.publish_batch(text, text, text, integer, bytea[], uuid[], text[], text) IS
  'Publish several events of one type and version (event_ids and partition_keys, when given, parallel to payloads); event_seqs in order. All or nothing.';

CREATE FUNCTION forgeyard.subscription_rewind(tenant text, topic text, subscription text, since timestamptz)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscription_rewind';
COMMENT ON FUNCTION forgeyard.subscription_rewind(text, text, text, timestamptz) IS
  'Deliver again to the subscription every retained event published at or after since (and within the topic''s retention), in event_seq order, admitted like new messages. Returns how many reached the consumer queue. Consumers must be idempotent (inbox_accept on event_id).';

CREATE FUNCTION forgeyard.subscription_claim(tenant text, subscription text, consumer text,
                                             max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz,
                   topic text, event_type text, version integer, event_seq bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscription_claim';
COMMENT ON FUNCTION forgeyard.subscription_claim(text, text, text, integer, interval) IS
  'claim on a subscription, each delivery with its topic, event_type, version and event_seq. ack / nack / extend as for any queue.';

CREATE FUNCTION forgeyard.topic_purge(max_events integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_purge';
COMMENT ON FUNCTION forgeyard.topic_purge(integer, text) IS
  'Maintenance: delete up to max_events events past their topic''s retention and dedup window that no pending message of a subscription still needs, oldest first; tenant NULL = all tenants. Returns how many.';

CREATE VIEW forgeyard.subscription_lag WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
), c AS MATERIALIZED (
    SELECT forgeyard.now() AS now
)
SELECT s.tenant_id, s.topic, s.subscription,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND (m.claim_token IS NULL OR m.visible_at <= c.now)) AS backlog,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > c.now) AS in_flight,
       c.now - min(m.enqueued_at) FILTER (WHERE m.state = 'pending') AS oldest_unacked_age,
       count(m.msg_id) FILTER (WHERE m.state = 'dead') AS dead,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure,
       max(m.finished_at) FILTER (WHERE m.state = 'acked') AS last_ack_at
  FROM forgeyard.subscriptions s
  JOIN forgeyard.queues q ON q.tenant_id = s.tenant_id AND q.queue = s.subscription
  JOIN used u ON u.tenant_id = s.tenant_id AND u.queue = s.subscription
  LEFT JOIN forgeyard.messages m ON m.tenant_id = s.tenant_id AND m.queue = s.subscription
 CROSS JOIN c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR s.tenant_id IN (SELECT scope.tenant_id FROM scope)
 GROUP BY s.tenant_id, s.topic, s.subscription, q.max_messages, q.max_bytes, u.messages, u.bytes, c.now;
COMMENT ON VIEW forgeyard.subscription_lag IS
  'Lag of every subscription, no payloads: backlog (pending, not in flight), in flight, oldest unacked age, dead letters, pressure, last ack (among acked messages still retained). A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.event_type_register(text, text, integer, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.event_type_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_create(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_drop(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscribe(text, text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.unsubscribe(text, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.publish(text, text, text, integer, bytea, uuid, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.publish_batch(text, text, text, integer, bytea[], uuid[], text[], text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscription_rewind(text, text, text, timestamptz)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscription_claim(text, text, text, integer, interval)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.topic_purge(integer, text)'),
    ('inspect',     'SELECT',  'TABLE forgeyard.subscription_lag');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.event_types', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topics', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.subscriptions', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topic_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topic_event_seqs', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: hardening: argument checks and attack surface
-------------------------------------------------------------------------------------------------

-- The argument checks of the access-management functions (grant_*, revoke_access, apply_access,
-- bind_tenant, unbind_tenant): the SQLSTATEs every other function answers (docs/errors.md).
CREATE FUNCTION forgeyard.check_role(role regrole)
    RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role::oid) THEN
        RAISE EXCEPTION 'role with OID % does not exist', role::oid USING ERRCODE = '42704';
    END IF;
END
$$;
COMMENT ON FUNCTION forgeyard.check_role(regrole) IS
  'Internal: 22004 for a NULL role, 42704 for an OID naming no role (the access-management functions call it first).';

CREATE FUNCTION forgeyard.check_tenant(tenant text)
    RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF tenant OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'tenant must not be empty' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.octet_length(tenant) OPERATOR(pg_catalog.>) 128 THEN
        RAISE EXCEPTION 'tenant is longer than 128 bytes' USING ERRCODE = '22001',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length(tenant));
    END IF;
END
$$;
COMMENT ON FUNCTION forgeyard.check_tenant(text) IS
  'Internal: the tenant rules of every API function (22004 NULL, 22023 empty, 22001 over 128 bytes) for bind_tenant and unbind_tenant.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.7.0: durable workflows: runs, a fenced journal (docs/workflows.md)
-------------------------------------------------------------------------------------------------

-- A run of a workflow definition (name, version) for a tenant. Runnable runs are handed to workers
-- through the tenant's queue "_wf.<workflow>@<version>" (msg_id is the run's live message), and
-- the claim token of that delivery is the run's epoch: every journal write carries it (FY001 for
-- a stale owner). The step cursor of the current epoch is in wf_cursors.
CREATE TABLE forgeyard.wf_runs (
    tenant_id      text        NOT NULL,
    run_id         uuid        NOT NULL,
    run_key        text        NOT NULL,
    workflow       text        NOT NULL,
    version        integer     NOT NULL CHECK (version >= 1),
    input          jsonb       NOT NULL,
    state          text        NOT NULL CHECK (state IN ('pending', 'running', 'sleeping', 'waiting', 'compensating',
                                                         'completed', 'failed', 'cancelled', 'timed_out',
                                                         'compensation_failed', 'parked')),
    priority       smallint    NOT NULL CHECK (priority BETWEEN 0 AND 5),
    msg_id         bigint,
    epoch          bigint      NOT NULL DEFAULT 0,
    owner          text,
    step_deadline  timestamptz,
    lease_until    timestamptz,
    result         jsonb,
    error          text,
    deadline       timestamptz,
    parent_run_id  uuid,
    waiting_signal text,
    wait_until     timestamptz,
    wait_position  integer,
    compensate_to  text        CHECK (compensate_to IN ('failed', 'cancelled', 'timed_out')),
    retention_usecs bigint     NOT NULL CHECK (retention_usecs > 0),
    purge_at       timestamptz,
    takeovers      integer     NOT NULL DEFAULT 0,
    taken_over_at  timestamptz,
    previous_owner text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    finished_at    timestamptz,
    -- The run id leads the keys of the run's tables (wf_cursors and wf_journal too): compared first,
    -- a fixed-size value that tells rows apart at once.
    PRIMARY KEY (run_id, tenant_id),
    UNIQUE (tenant_id, run_key)
);
CREATE INDEX wf_runs_state ON forgeyard.wf_runs (tenant_id, state, updated_at);
CREATE INDEX wf_runs_purge ON forgeyard.wf_runs (purge_at) WHERE purge_at IS NOT NULL;
COMMENT ON TABLE forgeyard.wf_runs IS
  'Workflow runs: definition and version (fixed at start), input, state, the owner''s epoch (the claim token of the run''s live message) and the end of its lease as its claim or workflow_extend set it (lease_until: until then a journal write reads no message), result or error, takeovers. Use the API, not DML.';

-- The step cursor of each run's current epoch: how many step calls its owner made and the step
-- announced last (workflow_step moves it, each claim resets it). UNLOGGED, so that moving it
-- writes no WAL: a workflow_step that announces or replays a step commits without waiting for a
-- flush (docs/workflows-design.md, slice 7). A crash, a failover or a restore empties it; a missing
-- row, or one of an older epoch, means the epoch lost the run (FY001), and the next claim takes the
-- run over once its delivery's lease lapsed. Not dumped: it holds nothing a restore could use.
CREATE UNLOGGED TABLE forgeyard.wf_cursors (
    tenant_id text    NOT NULL,
    run_id    uuid    NOT NULL,
    epoch     bigint  NOT NULL,
    position  integer NOT NULL CHECK (position >= 0),
    step      text,
    PRIMARY KEY (run_id, tenant_id)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.wf_cursors IS
  'The step cursor of each workflow run''s current epoch: position of the last step call and its step. UNLOGGED (emptied by a crash, failover or restore: the epoch in flight then loses the run, FY001). Use the API, not DML.';

-- The journal: one row per step position of a run, contiguous from 1. done rows keep the
-- result (replayed), failed rows the last error of a step that will run again. A sleep is a done
-- row with wake_at: it replays as done only from wake_at on.
CREATE TABLE forgeyard.wf_journal (
    tenant_id    text        NOT NULL,
    run_id       uuid        NOT NULL,
    position     integer     NOT NULL CHECK (position >= 1),
    step         text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('done', 'failed')),
    result       jsonb,
    error        text,
    compensation text,
    compensation_status   text CHECK (compensation_status IN ('done', 'failed')),
    compensation_error    text,
    compensation_attempts integer NOT NULL DEFAULT 0,
    compensated_at        timestamptz,
    wake_at      timestamptz,
    attempts     integer     NOT NULL DEFAULT 1,
    epoch        bigint      NOT NULL,
    recorded_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, position, tenant_id)
);
COMMENT ON TABLE forgeyard.wf_journal IS
  'Workflow journals: per run and position the step''s name, done (with its result and compensation) or failed (with its error), the epoch that wrote it. Use the API, not DML.';

-- Signals sent to a run, delivered once (idempotent by signal_id), consumed by the wait at a
-- journal position; one sent before the wait waits here for it.
CREATE TABLE forgeyard.wf_signals (
    tenant_id         text        NOT NULL,
    run_id            uuid        NOT NULL,
    signal_id         uuid        NOT NULL,
    name              text        NOT NULL,
    payload           jsonb       NOT NULL,
    sent_at           timestamptz NOT NULL,
    consumed_at       timestamptz,
    consumed_position integer,
    PRIMARY KEY (tenant_id, run_id, signal_id)
);
CREATE INDEX wf_signals_unconsumed ON forgeyard.wf_signals (tenant_id, run_id, name, sent_at)
    WHERE consumed_at IS NULL;
COMMENT ON TABLE forgeyard.wf_signals IS
  'Signals sent to workflow runs: name, payload, when sent, and when and at which journal position a wait consumed it. Use the API, not DML.';

CREATE FUNCTION forgeyard.workflow_start(tenant text, workflow text, version integer, run_key text,
                                         input jsonb DEFAULT '{}', options jsonb DEFAULT '{}')
    RETURNS uuid LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_start';
COMMENT ON FUNCTION forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb) IS
  'Start a run in the caller''s transaction (no run unless it commits); returns its run_id. run_key is an idempotency key: the same key returns the first run, with another workflow, version or input FY011. Options: deadline (interval), priority (class), parent (run id), retention (interval: how long the run is kept once finished, default 30 days; maintain() removes it then).';

CREATE FUNCTION forgeyard.workflow_claim(tenant text, worker text, definitions text[], max_runs integer DEFAULT 1,
                                         lease interval DEFAULT NULL)
    RETURNS TABLE (run_id uuid, workflow text, version integer, epoch bigint, state text, input jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_claim';
COMMENT ON FUNCTION forgeyard.workflow_claim(text, text, text[], integer, interval) IS
  'Claim up to max_runs runnable runs of the given definitions (''name@version''), each owned by worker under a new epoch for lease (default: the queue''s visibility timeout). A run whose owner''s lease ran out is taken over (recorded in the run; a step that ran past its timeout is recorded failed); one whose deliveries lapsed on every attempt (max_attempts) ends failed, compensating first. Never waits on other claimers.';

CREATE FUNCTION forgeyard.workflow_step(tenant text, run_id uuid, epoch bigint, step text,
                                        timeout interval DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, result jsonb, idempotency_key text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step';
COMMENT ON FUNCTION forgeyard.workflow_step(text, uuid, bigint, text, interval, integer) IS
  'The next step of the run under epoch (the n-th call of an epoch is position n): run (with a stable idempotency key) or done (with the recorded result). With a timeout, a step to run must be recorded within it: the owner''s lease ends by then at the latest, and a run taken over past it records the attempt as failed. With position, the caller counts its steps (1 for its first call of the epoch, then one more per step): the call reads and writes no cursor (without a timeout it writes nothing at all, so its commit waits for no flush); 22023 unless the step before position is recorded done. Pass position to every step call of an epoch or to none. FY060 when the journal has another step at that position; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_complete(tenant text, run_id uuid, epoch bigint, step text, result jsonb,
                                                 compensation text DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step_complete';
COMMENT ON FUNCTION forgeyard.workflow_step_complete(text, uuid, bigint, text, jsonb, text, integer) IS
  'Record the result of the current step in the caller''s transaction (with the step''s own database work, exactly once), with the name of its compensation. With position, of the step at that position (as workflow_step: 22023 unless the step before it is recorded done, FY060 for another step there). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_fail(tenant text, run_id uuid, epoch bigint, step text, error text,
                                             permanent boolean DEFAULT false, "position" integer DEFAULT NULL)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_step_fail';
COMMENT ON FUNCTION forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer) IS
  'Record a failed attempt of the current step: retry (the run is released and handed out again after the queue''s backoff) or failed (permanent, or the queue''s max_attempts reached: the run ends failed). position as for workflow_step_complete. FY001 for a stale owner.';

-- Sagas: a run that fails, is cancelled or times out with steps done that name a compensation is
-- compensating until their compensations ran, newest first; then it ends as it was going to.
CREATE FUNCTION forgeyard.workflow_compensation(tenant text, run_id uuid, epoch bigint)
    RETURNS TABLE ("position" integer, step text, compensation text, result jsonb, idempotency_key text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation';
COMMENT ON FUNCTION forgeyard.workflow_compensation(text, uuid, bigint) IS
  'The next compensation of a compensating run owned under epoch (newest step first): the step''s position, name, compensation and recorded result, and a stable idempotency key for the compensation. No row when none is left. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_complete(tenant text, run_id uuid, epoch bigint, "position" integer)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation_complete';
COMMENT ON FUNCTION forgeyard.workflow_compensation_complete(text, uuid, bigint, integer) IS
  'Record the compensation of the step at position as done, in the caller''s transaction; returns the run''s state: compensating while compensations are left, else the state it ends in (failed, cancelled or timed_out). 22023 unless position is the next compensation; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_fail(tenant text, run_id uuid, epoch bigint, "position" integer,
                                                     error text, permanent boolean DEFAULT false)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_compensation_fail';
COMMENT ON FUNCTION forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean) IS
  'Record a failed attempt of the compensation at position: retry (the run is released for the queue''s backoff) or compensation_failed (permanent, or the queue''s max_attempts reached: the run ends compensation_failed; workflow_retry resumes it). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_sleep(tenant text, run_id uuid, epoch bigint, step text, until timestamptz,
                                         "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_sleep';
COMMENT ON FUNCTION forgeyard.workflow_sleep(text, uuid, bigint, text, timestamptz, integer) IS
  'A durable timer as the current step (workflow_step answered run): the step is journaled with its end, the run is released (sleeping) and handed out again at until, when the step replays as done. A sleep journaled before keeps its first until. position as for workflow_step_complete. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_wait_signal(tenant text, run_id uuid, epoch bigint, step text, signal text,
                                               timeout interval, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, payload jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_wait_signal';
COMMENT ON FUNCTION forgeyard.workflow_wait_signal(text, uuid, bigint, text, text, interval, integer) IS
  'The next step of the run waits for a signal: received (the oldest unconsumed signal of that name, also one sent before the wait, with its payload), waiting (the run is released until the signal or the timeout), or timed_out. Replays answer as first recorded. With position, the step at that position (no cursor moves). FY060, FY001 and position as workflow_step.';

CREATE FUNCTION forgeyard.workflow_signal(tenant text, run_id uuid, signal text, payload jsonb DEFAULT '{}',
                                          signal_id uuid DEFAULT NULL)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_signal';
COMMENT ON FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid) IS
  'Send a signal to a run, in the caller''s transaction; a run waiting for it is handed out at once. False for a repeated signal_id or a run that has finished. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_complete(tenant text, run_id uuid, epoch bigint, result jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_complete';
COMMENT ON FUNCTION forgeyard.workflow_complete(text, uuid, bigint, jsonb) IS
  'End the run completed with its result. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_fail(tenant text, run_id uuid, epoch bigint, error text)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_fail';
COMMENT ON FUNCTION forgeyard.workflow_fail(text, uuid, bigint, text) IS
  'End the run failed with an error. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_park(tenant text, run_id uuid, epoch bigint, reason text)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_park';
COMMENT ON FUNCTION forgeyard.workflow_park(text, uuid, bigint, text) IS
  'Stop the run for an operator (after FY060, in the worker''s next transaction): parked, listed by workflow_stuck, handed out again only by workflow_retry. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_extend(tenant text, run_id uuid, epoch bigint, lease interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_extend';
COMMENT ON FUNCTION forgeyard.workflow_extend(text, uuid, bigint, interval) IS
  'Keep the owner''s lease for lease from now, but not past the deadline of a step with a timeout in progress; returns when it runs out. FY001 for a stale owner or a lease that already ran out.';

CREATE FUNCTION forgeyard.workflow_cancel(tenant text, run_id uuid, reason text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_cancel';
COMMENT ON FUNCTION forgeyard.workflow_cancel(text, uuid, text) IS
  'Cancel a run that has not finished (false if it had, or is compensating); its owner''s next journal write gets FY001. A run with compensations to run is compensating first. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_retry(tenant text, run_id uuid)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_retry';
COMMENT ON FUNCTION forgeyard.workflow_retry(text, uuid) IS
  'Hand a failed or parked run out again (false for a run in another state, or a failed run whose compensations ran): it replays its journal and runs again from the step that failed. A compensation_failed run resumes its compensations. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_status(tenant text, run_id uuid)
    RETURNS TABLE (state text, workflow text, version integer, result jsonb, error text, owner text, epoch bigint,
                   updated_at timestamptz)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_status';
COMMENT ON FUNCTION forgeyard.workflow_status(text, uuid) IS
  'A run''s state, definition, result or error, owner and epoch. 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_journal(tenant text, run_id uuid)
    RETURNS TABLE ("position" integer, step text, status text, result jsonb, epoch bigint, recorded_at timestamptz,
                   error text, attempts integer, compensation text, compensation_status text,
                   compensation_error text)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_journal';
COMMENT ON FUNCTION forgeyard.workflow_journal(text, uuid) IS
  'A run''s journal in position order: each step done (with its result and compensation) or failed (with its last error), its attempts and the epoch that wrote it, and how its compensation went (done, failed with its last error, or not run). 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_list(tenant text, state text DEFAULT NULL, max_runs integer DEFAULT 100)
    RETURNS TABLE (run_id uuid, run_key text, workflow text, version integer, state text, owner text, epoch bigint,
                   error text, updated_at timestamptz)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_workflow_list';
COMMENT ON FUNCTION forgeyard.workflow_list(text, text, integer) IS
  'The tenant''s runs, in one state or all, most recently changed first, at most max_runs (1..1000). 22023 for an unknown state.';

CREATE VIEW forgeyard.workflow_runs WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT r.tenant_id, r.run_id, r.run_key, r.workflow, r.version, r.state, r.owner, r.epoch,
       CASE WHEN r.state = 'running' THEN m.visible_at END AS lease_until,
       (SELECT count(*) FROM forgeyard.wf_journal j
         WHERE j.tenant_id = r.tenant_id AND j.run_id = r.run_id AND j.status = 'done') AS steps_done,
       r.takeovers, r.error, r.deadline, r.parent_run_id, r.created_at, r.updated_at, r.finished_at
  FROM forgeyard.wf_runs r
  LEFT JOIN forgeyard.messages m ON m.msg_id = r.msg_id
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR r.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.workflow_runs IS
  'Every workflow run, no inputs or results: definition, state, owner, epoch, lease, steps done, takeovers, error. A role bound to tenants sees only those.';

CREATE VIEW forgeyard.workflow_stuck WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), c AS MATERIALIZED (
    SELECT forgeyard.now() AS now
)
SELECT s.tenant_id, s.run_id, s.workflow, s.version, s.state, s.owner, s.epoch, s.reason, s.since
  FROM (SELECT r.*,
               CASE WHEN r.state = 'parked' THEN 'parked: ' || coalesce(r.error, '')
                    -- (the run keeps the error it was compensating for; the compensation's is
                    -- in the journal)
                    WHEN r.state = 'compensation_failed' THEN coalesce(
                        (SELECT 'compensation "' || j.compensation || '" of step "' || j.step
                                || '" at position ' || j.position || ' failed: ' || coalesce(j.compensation_error, '')
                           FROM forgeyard.wf_journal j
                          WHERE j.run_id = r.run_id AND j.tenant_id = r.tenant_id AND j.compensation_status = 'failed'
                          ORDER BY j.position DESC LIMIT 1),
                        'its compensation''s deliveries lapsed on every attempt (the definition queue''s max_attempts)')
                    WHEN r.state = 'running' AND m.state = 'pending' AND m.visible_at <= c.now
                        THEN 'the owner''s lease ran out'
                    WHEN r.state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed')
                         AND (m.msg_id IS NULL OR m.state <> 'pending')
                        THEN 'its message is ' || coalesce(m.state, 'gone')
               END AS reason,
               CASE WHEN r.state = 'running' AND m.state = 'pending' THEN m.visible_at ELSE r.updated_at END AS since
          FROM forgeyard.wf_runs r
          LEFT JOIN forgeyard.messages m ON m.msg_id = r.msg_id
         CROSS JOIN c) s
 WHERE s.reason IS NOT NULL
   AND (NOT EXISTS (SELECT 1 FROM scope) OR s.tenant_id IN (SELECT scope.tenant_id FROM scope));
COMMENT ON VIEW forgeyard.workflow_stuck IS
  'Runs that need attention: parked (nondeterminism, until workflow_retry), compensation_failed (a compensation used up its attempts, or its owners died on every attempt: the reason names the newest compensation that failed, if one did; until workflow_retry), running with an owner whose lease ran out (the next claim takes them over), or unfinished with no live message (dead-lettered). A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_claim(text, text, text[], integer, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step(text, uuid, bigint, text, interval, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step_complete(text, uuid, bigint, text, jsonb, text, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation(text, uuid, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation_complete(text, uuid, bigint, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_sleep(text, uuid, bigint, text, timestamptz, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_wait_signal(text, uuid, bigint, text, text, interval, integer)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_complete(text, uuid, bigint, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_fail(text, uuid, bigint, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_park(text, uuid, bigint, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_extend(text, uuid, bigint, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_cancel(text, uuid, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_retry(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_list(text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_cancel(text, uuid, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_retry(text, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_status(text, uuid)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.workflow_journal(text, uuid)'),
    ('inspect',     'SELECT',  'TABLE forgeyard.workflow_runs'),
    ('inspect',     'SELECT',  'TABLE forgeyard.workflow_stuck');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_runs', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_journal', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_signals', '');

-- Schedules: a cron spec in a time zone, or '@every <interval>', that starts a run of its
-- definition at each fire (run_key '<schedule>@<fire time>'); schedule_tick and maintain() start
-- the due fires.
CREATE TABLE forgeyard.wf_schedules (
    tenant_id  text        NOT NULL,
    schedule   text        NOT NULL,
    workflow   text        NOT NULL,
    version    integer     NOT NULL CHECK (version >= 1),
    spec       text        NOT NULL,
    timezone   text        NOT NULL,
    catch_up   integer     NOT NULL CHECK (catch_up BETWEEN 0 AND 1000),
    input      jsonb       NOT NULL,
    next_fire  timestamptz NOT NULL,
    last_fire  timestamptz,
    fires      bigint      NOT NULL DEFAULT 0,
    skipped    bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, schedule)
);
CREATE INDEX wf_schedules_due ON forgeyard.wf_schedules (next_fire);
COMMENT ON TABLE forgeyard.wf_schedules IS
  'Workflow schedules: definition, spec, time zone, catch-up bound, input, the next fire, and how many fires started runs or were skipped. Use the API, not DML.';

CREATE FUNCTION forgeyard.schedule_create(tenant text, schedule text, workflow text, version integer, spec text,
                                          options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_create';
COMMENT ON FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb) IS
  'Create a schedule: spec is 5 cron fields (minute hour day-of-month month day-of-week, read in options.timezone, default UTC), a macro (@hourly, @daily, @weekly, @monthly, @yearly) or ''@every <interval>'' (15m, 1h30m, ...). Options: timezone, catch_up (0..1000 missed fires started besides the newest), input. The same definition again is a no-op; another one 42710.';

CREATE FUNCTION forgeyard.schedule_drop(tenant text, schedule text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_drop';
COMMENT ON FUNCTION forgeyard.schedule_drop(text, text) IS
  'Drop a schedule (false if there was none); runs it started go on.';

CREATE FUNCTION forgeyard.schedule_tick(tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_tick';
COMMENT ON FUNCTION forgeyard.schedule_tick(text) IS
  'Start the runs of the due schedules (of tenant, or all): the newest due fire and up to catch_up missed ones, the rest skipped and counted. Safe from several places at once: each fire starts one run. Returns the runs started. maintain() calls it.';

CREATE FUNCTION forgeyard.schedule_list(tenant text)
    RETURNS TABLE (schedule text, workflow text, version integer, spec text, timezone text, catch_up integer,
                   input jsonb, next_fire timestamptz, last_fire timestamptz, fires bigint, skipped bigint)
    LANGUAGE c STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_schedule_list';
COMMENT ON FUNCTION forgeyard.schedule_list(text) IS
  'The tenant''s schedules by name: definition, spec, time zone, catch-up bound, input, next and last fire, fires started and skipped.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_drop(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_tick(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_drop(text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_tick(text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.schedule_list(text)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.wf_schedules', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.7.0: flow control, first part: admission limits and retry budgets (docs/operations.md,
-- "Flow control")
-------------------------------------------------------------------------------------------------

ALTER TABLE forgeyard.queues
    ADD COLUMN retry_budget              double precision CHECK (retry_budget BETWEEN 0 AND 1),
    ADD COLUMN retry_budget_min          bigint NOT NULL DEFAULT 10 CHECK (retry_budget_min >= 0),
    ADD COLUMN retry_budget_window_usecs bigint NOT NULL DEFAULT 60000000
                                         CHECK (retry_budget_window_usecs BETWEEN 1 AND 2592000000000),
    ADD COLUMN admission_rate            bigint CHECK (admission_rate BETWEEN 1 AND 1000000000),
    ADD COLUMN admission_per_usecs       bigint CHECK (admission_per_usecs BETWEEN 1 AND 2592000000000),
    ADD CONSTRAINT queues_admission_check CHECK ((admission_rate IS NULL) = (admission_per_usecs IS NULL));

-- A queue's admission limit split over up to `slots` buckets (GCRA: `tat` is the bucket's
-- theoretical arrival time, NULL while full), so that concurrent producers take different rows
-- (SKIP LOCKED) and the buckets add up to the queue's limit exactly.
CREATE TABLE forgeyard.queue_admission (
    tenant_id text        NOT NULL,
    queue     text        NOT NULL,
    slot      integer     NOT NULL CHECK (slot BETWEEN 0 AND 7),
    tokens    bigint      NOT NULL CHECK (tokens >= 1),
    per_usecs bigint      NOT NULL CHECK (per_usecs >= 1),
    tat       timestamptz,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.queue_admission IS
  'Admission limits of producers (admission_limit): each row is a bucket of tokens per per_usecs, a share of the queue''s limit; enqueues take a token or fail with FY020 and a retry-after.';

-- A queue's retry window (retry_budget): when it started, the queue's admitted messages then,
-- the first deliveries of the window before it, the retries admitted in it and those it delayed.
CREATE TABLE forgeyard.queue_retry_windows (
    tenant_id     text        NOT NULL,
    queue         text        NOT NULL,
    window_start  timestamptz NOT NULL,
    admitted_base bigint      NOT NULL,
    prev_first    bigint      NOT NULL CHECK (prev_first >= 0),
    retries       bigint      NOT NULL CHECK (retries >= 0),
    delayed       bigint      NOT NULL CHECK (delayed >= 0),
    PRIMARY KEY (tenant_id, queue)
) WITH (fillfactor = 50);
COMMENT ON TABLE forgeyard.queue_retry_windows IS
  'The current retry window of each queue with a retry_budget: retries admitted and delayed since window_start, against the messages admitted since then.';

CREATE FUNCTION forgeyard.admission_limit(tenant text, queue text, rate integer, per interval)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_admission_limit';
COMMENT ON FUNCTION forgeyard.admission_limit(text, text, integer, interval) IS
  'Limit producers of a queue to rate enqueues per interval (a bucket of rate tokens refilled over per; a batch takes one per message). Over it enqueue fails with FY020 whose DETAIL ends in "retry after <n> ms". rate NULL removes the limit. 22023 for a rate outside 1..1e9 or a per that is not a positive interval of at most 30 days.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admission', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_retry_windows', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.7.0: flow control, second part: resources (rate limits, concurrency limits, circuit
-- breakers) shared by every consumer of every queue of a tenant
-------------------------------------------------------------------------------------------------

ALTER TABLE forgeyard.messages
    ADD COLUMN fairness_key  text,
    ADD COLUMN resource      text,
    ADD COLUMN resource_part smallint;
COMMENT ON COLUMN forgeyard.messages.resource_part IS
  'Which part of its resource''s state (flow_resource_state.part) the delivery in flight is counted in; a part the resource no longer has is counted in part 0.';
-- (enqueue and enqueue_batch take fairness_key and resource: see the queue section.)

-- What each resource allows (resource_limit, breaker_configure); backends cache it.
CREATE TABLE forgeyard.flow_resources (
    tenant_id       text             NOT NULL,
    resource        text             NOT NULL,
    rate            bigint           CHECK (rate BETWEEN 1 AND 1000000000),
    per_usecs       bigint           CHECK (per_usecs BETWEEN 1 AND 2592000000000),
    burst           bigint           CHECK (burst BETWEEN 1 AND 1000000000),
    max_in_flight   bigint           CHECK (max_in_flight BETWEEN 1 AND 1000000000),
    failure_rate    double precision CHECK (failure_rate > 0 AND failure_rate <= 1),
    minimum_calls   bigint           CHECK (minimum_calls BETWEEN 1 AND 1000),
    window_calls    bigint           CHECK (window_calls BETWEEN 1 AND 1000),
    open_for_usecs  bigint           CHECK (open_for_usecs BETWEEN 1 AND 2592000000000),
    half_open_calls bigint           CHECK (half_open_calls BETWEEN 1 AND 1000),
    parts           smallint         NOT NULL DEFAULT 1 CHECK (parts BETWEEN 1 AND 8),
    updated_at      timestamptz      NOT NULL,
    PRIMARY KEY (tenant_id, resource),
    CHECK ((rate IS NULL) = (per_usecs IS NULL) AND (rate IS NULL) = (burst IS NULL)),
    CHECK ((failure_rate IS NULL) = (minimum_calls IS NULL) AND (failure_rate IS NULL) = (window_calls IS NULL)
       AND (failure_rate IS NULL) = (open_for_usecs IS NULL) AND (failure_rate IS NULL) = (half_open_calls IS NULL))
);
COMMENT ON TABLE forgeyard.flow_resources IS
  'Resources (the downstreams messages hit) and what each allows: a rate limit (rate per per_usecs, burst), a concurrency limit (max_in_flight) and a circuit breaker; parts is how many rows of flow_resource_state share the limits. Use resource_limit and breaker_configure, not DML.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.flow_resources
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.flow_resources IS
  'Backends cache resource limits; any change to this table makes them read the limits again.';

-- Each resource's shared state, changed by claims (SKIP LOCKED), acks and nacks under its row
-- lock. A resource with large limits and no breaker keeps them in up to 8 parts (rows) that add
-- up exactly, so that concurrent claimers do not queue on one row; the breaker is part 0's.
CREATE TABLE forgeyard.flow_resource_state (
    tenant_id           text        NOT NULL,
    resource            text        NOT NULL,
    part                smallint    NOT NULL DEFAULT 0 CHECK (part BETWEEN 0 AND 7),
    tat                 timestamptz,
    in_flight           bigint      NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    breaker             text        NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half_open')),
    outcomes            text        NOT NULL DEFAULT '' CHECK (outcomes ~ '^[01]*$'),
    changed_at          timestamptz NOT NULL,
    open_until          timestamptz,
    half_open_in_flight bigint      NOT NULL DEFAULT 0 CHECK (half_open_in_flight >= 0),
    half_open_successes bigint      NOT NULL DEFAULT 0 CHECK (half_open_successes >= 0),
    transitions         bigint      NOT NULL DEFAULT 0,
    refused             bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, resource, part)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.flow_resource_state IS
  'The shared state of each resource, in flow_resources.parts rows (part i keeps rate / parts, burst / parts and max_in_flight / parts, the remainders to the first parts): the rate limit''s bucket (tat), deliveries in flight, claims refused, and in part 0 the breaker (state, window of outcomes, open_until, half-open trials, transitions).';

-- The outcomes of deliveries that finished while their part of the resource's state was held by
-- another open transaction (or read under a transaction snapshot): one row per part and call,
-- appended without a row lock, so an ack or nack never waits for another consumer (0.7.1). The
-- next claim, ack or nack that locks the part applies them (in_flight, the breaker) and deletes them.
CREATE TABLE forgeyard.flow_outcome_deltas (
    tenant_id   text        NOT NULL,
    resource    text        NOT NULL,
    part        smallint    NOT NULL,
    successes   bigint      NOT NULL,
    failures    bigint      NOT NULL,
    neutrals    bigint      NOT NULL,
    recorded_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX flow_outcome_deltas_part ON forgeyard.flow_outcome_deltas (tenant_id, resource, part);
COMMENT ON TABLE forgeyard.flow_outcome_deltas IS
  'Outcomes (successes, failures, neutrals) of deliveries that finished while their flow_resource_state part was held by another transaction: each ended one delivery in flight; applied to the part by the next claim, ack or nack that locks it.';

CREATE FUNCTION forgeyard.resource_limit(tenant text, resource text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_resource_limit';
COMMENT ON FUNCTION forgeyard.resource_limit(text, text, jsonb) IS
  'Set what a resource allows its messages (enqueued with resource => ...) across every queue of the tenant: rate (integer) per per (interval, default 1 second) with burst (default rate), and max_in_flight. Replaces the resource''s limits; {} removes them. A message its resource refuses stays ready and is skipped by the claim, no attempt charged. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_configure(tenant text, resource text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_breaker_configure';
COMMENT ON FUNCTION forgeyard.breaker_configure(text, text, jsonb) IS
  'Give a resource a circuit breaker: it opens when at least minimum_calls (10) of the last window (100) outcomes were seen and failure_rate (0.5) of them failed (a nack; a permanent nack does not count), stays open for open_for (30 s: none of its messages is handed out), then lets half_open_calls (1) deliveries through: all succeed, it closes; one fails, it opens again. NULL options remove it. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_state(tenant text, resource text)
    RETURNS TABLE (state text, failures integer, calls integer, changed_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_breaker_state';
COMMENT ON FUNCTION forgeyard.breaker_state(text, text) IS
  'The breaker of a resource: closed, open or half_open (an open breaker whose open_for ran out reads half_open), the failures and outcomes in its window, and when it last changed. 42704 for a resource without a breaker.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.resource_limit(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.breaker_configure(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.resource_limit(text, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.breaker_configure(text, text, jsonb)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.breaker_state(text, text)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_resources', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_resource_state', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_outcome_deltas', '');

-- Per-key concurrency limits (queue option max_in_flight_per_key = k): a fairness key's pending
-- messages of such a queue are counted in queue_partitions, whose `heads` are the ones in
-- messages_claim (ready or in flight, at most k); the rest wait, in msg_id order, in
-- messages_key_waiting, and finishing a head promotes the next under the key's row lock. (In a
-- partition-ordered queue a key's row counts its partition_key's messages and `heads` stays 1.)
ALTER TABLE forgeyard.queues
    ADD COLUMN max_in_flight_per_key bigint CHECK (max_in_flight_per_key BETWEEN 1 AND 1000000);
ALTER TABLE forgeyard.queue_partitions
    ADD COLUMN heads bigint NOT NULL DEFAULT 1 CHECK (heads >= 0);
CREATE INDEX messages_key_waiting ON forgeyard.messages (tenant_id, queue, fairness_key, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND NOT is_head AND fairness_key IS NOT NULL;
COMMENT ON TABLE forgeyard.queue_partitions IS
  'Pending messages (and heads: the claimable ones) per partition key of partition-ordered queues and per fairness key of queues with max_in_flight_per_key.';

-- Fair queues (queue option fairness): within a class, claims take messages by a virtual pass
-- (stride scheduling) instead of by age. Each message's pass is fixed at enqueue: its key's last
-- pass or the lowest pass of its class's pending heads, whichever is later, plus 1,000,000 /
-- weight; so a key with a backlog does not delay another key's next message by more than a few
-- claims, and a key that was idle starts at the present (it banks no credit). The keys' rows are
-- written by producers only.
ALTER TABLE forgeyard.queues ADD COLUMN fairness boolean NOT NULL DEFAULT false;
-- Priority aging (queue option aging): a ready message below realtime competes one class higher
-- per interval waited, never above realtime; nothing is rewritten (the claim reads the oldest of
-- each class and orders them by the class they have aged into). 0: none.
ALTER TABLE forgeyard.queues ADD COLUMN aging_usecs bigint NOT NULL DEFAULT 0
    CHECK (aging_usecs BETWEEN 0 AND 2592000000000);
ALTER TABLE forgeyard.messages ADD COLUMN pass bigint;
CREATE INDEX messages_fair ON forgeyard.messages (tenant_id, queue, priority, pass, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NOT NULL;
-- The age-ordered claim index keeps the messages without a pass only: a fair queue's claims
-- read messages_fair, and an entry in both would cost every enqueue and claim a second insert.
DROP INDEX forgeyard.messages_claim;
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NULL;
CREATE TABLE forgeyard.queue_fair_keys (
    tenant_id    text    NOT NULL,
    queue        text    NOT NULL,
    fairness_key text    NOT NULL,
    weight       integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    last_pass    bigint,
    PRIMARY KEY (tenant_id, queue, fairness_key)
) WITH (fillfactor = 70);
COMMENT ON TABLE forgeyard.queue_fair_keys IS
  'Per key of a fair queue: its weight (fairness_weight) and the pass of its last message (fairness_key '''' is the messages without one).';

CREATE FUNCTION forgeyard.fairness_weight(tenant text, queue text, fairness_key text, weight integer)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_fairness_weight';
COMMENT ON FUNCTION forgeyard.fairness_weight(text, text, text, integer) IS
  'The share of a fairness key in a fair queue (option fairness), relative to other keys (1 each by default): a key of weight 3 gets three messages claimed for each one of a key of weight 1 while both have a backlog. Applies to messages enqueued after it. weight NULL resets it to 1. 22023 for a weight outside 1..1000 or a queue without fairness.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_fair_keys', '');

-- Flow control as operators read it: one row per limit, of a queue (subject NULL) or of a
-- resource (queue NULL, subject the resource). `available`: tokens a rate limit holds now;
-- `in_flight`: deliveries a resource has out; `counted` and `delayed`: the retry budget's window,
-- or a breaker's failures and outcomes in its window; `refused`: claims a resource turned away;
-- `state`: a breaker's; `since`: when the window or the breaker's state began. A key of a queue
-- with max_in_flight_per_key: `in_flight` its heads (ready or in flight), `counted` its pending
-- messages, `delayed` those waiting behind the limit, `available` the heads it may still add.
-- A key of a fair queue with a weight other than 1: `limit` says it.
CREATE VIEW forgeyard.flow_state WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), clock AS (
    SELECT (extract(epoch FROM forgeyard.now()) * 1000000)::bigint AS now_us
), buckets AS (
    -- GCRA: a bucket of `burst` whose arrival time is `tat` holds
    -- floor((now + tolerance - max(tat, now)) / emission) + 1 tokens, at most `burst`.
    SELECT a.tenant_id, a.queue, NULL::text AS resource, a.tokens AS burst, a.per_usecs, a.tokens, a.tat
      FROM forgeyard.queue_admission a
    UNION ALL
    -- a resource's part i keeps rate / parts and burst / parts, the remainders to the first parts
    SELECT r.tenant_id, NULL, r.resource,
           r.burst / r.parts + CASE WHEN coalesce(s.part, 0) < r.burst % r.parts THEN 1 ELSE 0 END,
           r.per_usecs,
           r.rate / r.parts + CASE WHEN coalesce(s.part, 0) < r.rate % r.parts THEN 1 ELSE 0 END, s.tat
      FROM forgeyard.flow_resources r LEFT JOIN forgeyard.flow_resource_state s USING (tenant_id, resource)
     WHERE r.rate IS NOT NULL
), available AS (
    SELECT b.tenant_id, b.queue, b.resource,
           sum(CASE WHEN b.tat IS NULL THEN b.burst
                    ELSE greatest(0, least(b.burst,
                         (c.now_us + e.emission * (b.burst - 1)
                          - greatest((extract(epoch FROM b.tat) * 1000000)::bigint, c.now_us)) / e.emission + 1))
               END)::bigint AS tokens
      FROM buckets b CROSS JOIN clock c
     CROSS JOIN LATERAL (SELECT (b.per_usecs + b.tokens - 1) / b.tokens AS emission) e
     GROUP BY b.tenant_id, b.queue, b.resource
), rows AS (
    SELECT q.tenant_id, q.queue, 'admission_limit'::text AS kind, NULL::text AS subject,
           q.admission_rate || ' per ' || (q.admission_per_usecs * '1 microsecond'::interval)::text AS "limit",
           a.tokens AS available, NULL::bigint AS in_flight, NULL::bigint AS counted, NULL::bigint AS delayed,
           NULL::bigint AS refused, NULL::text AS state, NULL::timestamptz AS since
      FROM forgeyard.queues q
      LEFT JOIN available a ON a.tenant_id = q.tenant_id AND a.queue = q.queue
     WHERE q.admission_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'retry_budget', NULL,
           q.retry_budget || ' of admitted, at least ' || q.retry_budget_min || ' per '
               || (q.retry_budget_window_usecs * '1 microsecond'::interval)::text,
           NULL, NULL, coalesce(w.retries, 0), coalesce(w.delayed, 0), NULL, NULL, w.window_start
      FROM forgeyard.queues q LEFT JOIN forgeyard.queue_retry_windows w USING (tenant_id, queue)
     WHERE q.retry_budget IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'resource_limit', r.resource,
           concat_ws(', ', r.rate || ' per ' || (r.per_usecs * '1 microsecond'::interval)::text || ' burst ' || r.burst,
                     'max_in_flight ' || r.max_in_flight),
           a.tokens, greatest(0, coalesce(s.in_flight, 0) - coalesce(d.finished, 0)), NULL, NULL, coalesce(s.refused, 0),
           NULL, NULL
      FROM forgeyard.flow_resources r
      LEFT JOIN (SELECT tenant_id, resource, sum(in_flight)::bigint AS in_flight, sum(refused)::bigint AS refused
                   FROM forgeyard.flow_resource_state GROUP BY tenant_id, resource) s USING (tenant_id, resource)
      LEFT JOIN (SELECT tenant_id, resource, sum(successes + failures + neutrals)::bigint AS finished
                   FROM forgeyard.flow_outcome_deltas GROUP BY tenant_id, resource) d USING (tenant_id, resource)
      LEFT JOIN available a ON a.tenant_id = r.tenant_id AND a.resource = r.resource
     WHERE r.rate IS NOT NULL OR r.max_in_flight IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'breaker', r.resource,
           'opens at ' || r.failure_rate || ' of the last ' || r.window_calls || ' (at least ' || r.minimum_calls
               || '), open for ' || (r.open_for_usecs * '1 microsecond'::interval)::text || ', '
               || r.half_open_calls || ' half-open',
           NULL, greatest(0, coalesce(s.in_flight, 0) - coalesce(d.finished, 0)),
           length(replace(coalesce(s.outcomes, ''), '0', '')),
           length(coalesce(s.outcomes, '')), coalesce(s.refused, 0),
           CASE WHEN s.breaker = 'open' AND s.open_until <= forgeyard.now() THEN 'half_open'
                ELSE coalesce(s.breaker, 'closed') END,
           s.changed_at
      FROM forgeyard.flow_resources r
      LEFT JOIN forgeyard.flow_resource_state s
        ON s.tenant_id = r.tenant_id AND s.resource = r.resource AND s.part = 0  -- a breaker's resource has one part
      LEFT JOIN (SELECT tenant_id, resource, sum(successes + failures + neutrals)::bigint AS finished
                   FROM forgeyard.flow_outcome_deltas GROUP BY tenant_id, resource) d
        ON d.tenant_id = r.tenant_id AND d.resource = r.resource
     WHERE r.failure_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'key_limit', p.partition_key, 'max_in_flight_per_key ' || q.max_in_flight_per_key,
           greatest(0, q.max_in_flight_per_key - p.heads), p.heads, p.pending, p.pending - p.heads, NULL, NULL, NULL
      FROM forgeyard.queues q JOIN forgeyard.queue_partitions p USING (tenant_id, queue)
     WHERE q.max_in_flight_per_key IS NOT NULL
    UNION ALL
    SELECT k.tenant_id, k.queue, 'fairness_weight', k.fairness_key, 'weight ' || k.weight, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL
      FROM forgeyard.queue_fair_keys k
     WHERE k.weight <> 1
)
SELECT * FROM rows
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR rows.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.flow_state IS
  'Flow control: each admission limit and retry budget of a queue, each key of a queue with max_in_flight_per_key, each fairness weight, each resource limit and breaker, with the tokens a rate limit holds now, deliveries in flight, the retry window''s or breaker window''s counts, claims refused, the breaker''s state. A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('inspect',     'SELECT',  'TABLE forgeyard.flow_state');


-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.10.0: ready lanes, the claim path that does not walk dead entries (F17, step 2 of
-- docs/queue-storage-design.md; docs/architecture.md, "Ready lanes")
-------------------------------------------------------------------------------------------------

-- A lane is the ready list of one queue and class: lane id = queues.lanes * 8 + class. An enqueue
-- that makes a message claimable at once appends an entry at the lane's next position (its
-- sequence forgeyard.lane_<id>, taken inside the INSERT) and writes that position into the
-- message's ready_pos; the entry is never updated. The listing stays open while the message is
-- pending at its position (claimed or not); once the message is finished, nacked, dead or gone it
-- is consumed. The lane's cursor (sequence forgeyard.lane_<id>_cursor) is a position at or below
-- which every entry is consumed: claims read the entries above it only, so what committed work
-- consumed is never walked again, whatever snapshot is held. A claim moves the cursor over the run
-- of positions its snapshot shows consumed, before it has written anything. A position without an
-- entry (a producer still open, or rolled back) stops the cursor until the producer commits or
-- maintain() voids it (an entry without a message) once its producer must have ended. What is not listed (delayed, retried,
-- promoted, redriven, fanned out from a topic, enqueued before 0.10.0) is found as before, in
-- messages_claim, which now holds only the pending heads without a listing.
CREATE SEQUENCE forgeyard.queue_lane_numbers;
COMMENT ON SEQUENCE forgeyard.queue_lane_numbers IS 'The lanes numbers of queues: a queue''s lane ids are lanes * 8 + class.';
ALTER TABLE forgeyard.queues ADD COLUMN lanes bigint UNIQUE;
COMMENT ON COLUMN forgeyard.queues.lanes IS
  'The queue''s ready lanes (lane id = lanes * 8 + class, sequences forgeyard.lane_<id> and lane_<id>_cursor, owned by this column); NULL until queue_create or maintain() gives it lanes.';
ALTER TABLE forgeyard.messages ADD COLUMN ready_pos bigint;
COMMENT ON COLUMN forgeyard.messages.ready_pos IS
  'The position of the message''s open listing in its lane (queue_lane_entries), NULL when it has none: found by claims in messages_claim then. A listing is open only while the message is a pending head: acks and dead-lettering clear it (a library before 0.10.0, still loaded by a session after the update, may leave it on a finished row, where it means nothing); a redrive clears it.';
DROP INDEX forgeyard.messages_claim;
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WITH (deduplicate_items = off) WHERE state = 'pending' AND is_head AND pass IS NULL AND ready_pos IS NULL;
-- The entries live in four segments (0.13.0, F17 step 3: docs/queue-storage-design.md, "As built
-- in 0.13.0"), the LIST partitions of queue_lane_entries by `seg`. Producers append to the open
-- segment (the value of the sequence queue_lane_segment, modulo 4, read without a snapshot);
-- maintain() moves it on and empties a sealed segment with TRUNCATE once every entry in it is at or
-- below its lane's cursor, so consumed entries leave in bulk and no row of them is deleted.
CREATE SEQUENCE forgeyard.queue_lane_segment MINVALUE 0 START 0;
COMMENT ON SEQUENCE forgeyard.queue_lane_segment IS
  'The open segment of the ready lanes'' entries: its value modulo 4 is the partition of queue_lane_entries that producers append to; maintain() moves it on.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_segment', '');
CREATE FUNCTION forgeyard.queue_lane_segment_open()
    RETURNS smallint
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$SELECT (coalesce(pg_catalog.pg_sequence_last_value('forgeyard.queue_lane_segment'::pg_catalog.regclass), 0) % 4)::pg_catalog.int2$$;
COMMENT ON FUNCTION forgeyard.queue_lane_segment_open() IS
  'Internal: the segment of the ready lanes'' entries that producers append to now (queue_lane_entries.seg). Not granted to anyone.';
CREATE TABLE forgeyard.queue_lane_entries (
    lane   bigint   NOT NULL,
    pos    bigint   NOT NULL,
    msg_id bigint,
    seg    smallint NOT NULL DEFAULT forgeyard.queue_lane_segment_open(),
    PRIMARY KEY (lane, pos, seg)
) PARTITION BY LIST (seg);
COMMENT ON TABLE forgeyard.queue_lane_entries IS
  'Ready lanes: entries appended when a message becomes claimable at once (its listing), never updated; msg_id NULL is a void that maintain() put in a position its producer left empty. Entries at or below their lane''s cursor are consumed; maintain() truncates a sealed segment (partition) once all of its entries are.';
COMMENT ON COLUMN forgeyard.queue_lane_entries.seg IS
  'The segment (partition) the entry was appended to: forgeyard.queue_lane_segment_open() when its producer read it.';
CREATE TABLE forgeyard.queue_lane_entries_0 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (0);
CREATE TABLE forgeyard.queue_lane_entries_1 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (1);
CREATE TABLE forgeyard.queue_lane_entries_2 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (2);
CREATE TABLE forgeyard.queue_lane_entries_3 PARTITION OF forgeyard.queue_lane_entries FOR VALUES IN (3);
COMMENT ON TABLE forgeyard.queue_lane_entries_0 IS 'Segment 0 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_1 IS 'Segment 1 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_2 IS 'Segment 2 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
COMMENT ON TABLE forgeyard.queue_lane_entries_3 IS 'Segment 3 of the ready lanes'' entries (queue_lane_entries): truncated by maintain() once sealed and consumed.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_entries_3', '');
CREATE TABLE forgeyard.queue_lane_marks (
    lane bigint PRIMARY KEY,
    pos  bigint NOT NULL,
    next_xid xid8 NOT NULL
);
COMMENT ON TABLE forgeyard.queue_lane_marks IS
  'maintain()''s marks of lanes with gaps: the last position taken and the next transaction id when the mark was made; once every transaction below that id has ended, the gaps at or below the position are voided.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_marks', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_lane_numbers', '');

-- A queue's lanes: its two sequences per class, owned by queues.lanes (dropped with the table),
-- and the queue's row pointing at them; the lanes it has if it has them. Called by queue_create in
-- both editions and by maintain() for a queue without lanes (created before 0.10.0, or copied in
-- by rows). 42704 for an unknown queue.
CREATE FUNCTION forgeyard.queue_lanes_open(tenant text, queue text)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN $1 IS NULL THEN 'tenant' ELSE 'queue' END USING ERRCODE = '22004';
    END IF;
    -- (The row is taken by the update itself: a second caller waits for it, then finds lanes.)
    UPDATE forgeyard.queues x SET lanes = nextval('forgeyard.queue_lane_numbers')
     WHERE x.tenant_id = $1 AND x.queue = $2 AND x.lanes IS NULL
    RETURNING x.lanes INTO n;
    IF NOT FOUND THEN
        SELECT x.lanes INTO n FROM forgeyard.queues x WHERE x.tenant_id = $1 AND x.queue = $2;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'queue "%" does not exist', $2 USING ERRCODE = '42704';
        END IF;
        RETURN n;
    END IF;
    FOR p IN 0..5 LOOP
        EXECUTE format('CREATE SEQUENCE forgeyard.%I OWNED BY forgeyard.queues.lanes', 'lane_' || (n * 8 + p));
        EXECUTE format('CREATE SEQUENCE forgeyard.%I MINVALUE 0 START 0 OWNED BY forgeyard.queues.lanes',
                       'lane_' || (n * 8 + p) || '_cursor');
        EXECUTE format('COMMENT ON SEQUENCE forgeyard.%I IS %L', 'lane_' || (n * 8 + p),
                       format('Positions of the ready lane of queue %s of tenant %s, class %s.', $2, $1, p));
        EXECUTE format('COMMENT ON SEQUENCE forgeyard.%I IS %L', 'lane_' || (n * 8 + p) || '_cursor',
                       format('Cursor of the ready lane of queue %s of tenant %s, class %s: every position at or below it is consumed.', $2, $1, p));
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_open(text, text) IS
  'Internal (queue_create, maintain): gives a queue its ready lanes, or returns those it has. Not granted to anyone.';

-- Takes a queue's lanes away: its entries and sequences dropped, its listed messages unlisted
-- (messages_claim finds them). queue_drop in both editions; false for a queue without lanes.
CREATE FUNCTION forgeyard.queue_lanes_close(tenant text, queue text)
    RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN $1 IS NULL THEN 'tenant' ELSE 'queue' END USING ERRCODE = '22004';
    END IF;
    SELECT x.lanes INTO n FROM forgeyard.queues x WHERE x.tenant_id = $1 AND x.queue = $2 FOR UPDATE;
    IF n IS NULL THEN
        RETURN false;
    END IF;
    UPDATE forgeyard.messages m SET ready_pos = NULL
     WHERE m.tenant_id = $1 AND m.queue = $2 AND m.state = 'pending' AND m.ready_pos IS NOT NULL;
    DELETE FROM forgeyard.queue_lane_entries e WHERE e.lane BETWEEN n * 8 AND n * 8 + 7;
    DELETE FROM forgeyard.queue_lane_marks k WHERE k.lane BETWEEN n * 8 AND n * 8 + 7;
    UPDATE forgeyard.queues x SET lanes = NULL WHERE x.tenant_id = $1 AND x.queue = $2;
    FOR p IN 0..5 LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS forgeyard.%I, forgeyard.%I',
                       'lane_' || (n * 8 + p), 'lane_' || (n * 8 + p) || '_cursor');
    END LOOP;
    RETURN true;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_close(text, text) IS
  'Internal (queue_drop): takes a queue''s ready lanes away, its listed messages back to messages_claim. Not granted to anyone.';

-- maintain()'s part of the lanes (both editions call it first, before anything of theirs writes):
-- each lane's cursor moved over the positions its snapshot shows consumed; the positions their
-- producers left empty (rolled back, or crashed) voided, once no transaction running when they
-- were taken can still be (queue_lane_marks); and the queues without lanes given theirs. Returns
-- the rows it wrote. The entries at or below the cursors leave with their segment
-- (queue_lane_segments_maintain, at the end of maintain()).
CREATE FUNCTION forgeyard.queue_lanes_maintain(max_rows integer, tenant text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    advance boolean := pg_catalog.pg_current_xact_id_if_assigned() IS NULL;
    done bigint := 0;
    n bigint;
    x record;
    e record;
    x_lane bigint;
    x_last bigint;
    x_cursor bigint;
    expect bigint;
    cur bigint;
    l_lanes bigint[];
    l_last bigint[];
    l_cursor bigint[];
    bound xid8;
    sweep bigint;
    gap_lanes bigint[] := '{}';
    gaps bigint[] := '{}';
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'max_rows must not be NULL' USING ERRCODE = '22004';
    ELSIF $1 <= 0 THEN
        RAISE EXCEPTION 'max_rows must be positive' USING ERRCODE = '22023';
    END IF;
    sweep := coalesce((SELECT k.pos FROM forgeyard.queue_lane_marks k WHERE k.lane = -1), 0);
    -- Every lane's last position taken and cursor, of up to 64 queues (each sequence read holds
    -- a lock to the end of the transaction: a pass over every queue could run out of locks), the
    -- next ones after the last pass's (mark row -1 holds where it ended), read in one statement
    -- before anything else;
    -- then, when the transaction has no id yet, its id, taken now: every producer of a position
    -- read above took its transaction id before its position (queue_lanes.sql, lane_list), so its
    -- id is below this one (queue_lane_marks). (Not a snapshot's xmax: that is one past the last
    -- transaction completed, and one still running can have a higher id.)
    SELECT coalesce(array_agg(v.lane ORDER BY v.lane), '{}'), coalesce(array_agg(v.last_pos ORDER BY v.lane), '{}'),
           coalesce(array_agg(v.cursor ORDER BY v.lane), '{}')
      INTO l_lanes, l_last, l_cursor
      FROM (SELECT q.lanes * 8 + p AS lane,
                   coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || (q.lanes * 8 + p))::regclass), 0)
                       AS last_pos,
                   coalesce(pg_catalog.pg_sequence_last_value(('forgeyard.lane_' || (q.lanes * 8 + p) || '_cursor')::regclass), 0)
                       AS cursor
              FROM forgeyard.queues q, pg_catalog.generate_series(0, 5) p
             WHERE q.lanes IN (SELECT w.lanes FROM forgeyard.queues w
                                WHERE w.lanes IS NOT NULL AND ($2 IS NULL OR w.tenant_id = $2)
                                ORDER BY w.lanes <= sweep, w.lanes LIMIT 64)) v;
    -- (The next pass goes on after the last queue read here in the pass's order, the highest at
    -- or below the mark when the pass went round to the first queues; from the first when all
    -- were read.)
    INSERT INTO forgeyard.queue_lane_marks (lane, pos, next_xid)
    VALUES (-1, CASE WHEN pg_catalog.cardinality(l_lanes) >= 64 * 6
                     THEN coalesce((SELECT pg_catalog.max(u.lane / 8) FROM unnest(l_lanes) u(lane) WHERE u.lane / 8 <= sweep),
                                   l_lanes[pg_catalog.cardinality(l_lanes)] / 8)
                     ELSE 0 END,
            '0'::xid8)
        ON CONFLICT (lane) DO UPDATE SET pos = excluded.pos;
    IF advance THEN
        bound := pg_catalog.pg_current_xact_id();
    END IF;
    -- The cursors moved, the gaps found (every position without an entry below the first entry
    -- not consumed, or below the last position taken).
    FOR i IN 1 .. pg_catalog.cardinality(l_lanes) LOOP
        x_lane := l_lanes[i];
        x_last := l_last[i];
        x_cursor := l_cursor[i];
        cur := x_cursor;
        IF x_last > x_cursor THEN
            expect := x_cursor + 1;
            n := 0;
            FOR e IN SELECT l.pos, (m.msg_id IS NULL OR m.ready_pos IS DISTINCT FROM l.pos OR m.state <> 'pending'
                                    OR NOT m.is_head) AS consumed
                       FROM forgeyard.queue_lane_entries l LEFT JOIN forgeyard.messages m ON m.msg_id = l.msg_id
                      WHERE l.lane = x_lane AND l.pos > x_cursor
                      ORDER BY l.pos, l.msg_id NULLS LAST LIMIT $1
            LOOP
                WHILE expect < e.pos AND n < $1 LOOP
                    gap_lanes := gap_lanes || x_lane;
                    gaps := gaps || expect;
                    expect := expect + 1;
                    n := n + 1;
                END LOOP;
                EXIT WHEN NOT e.consumed OR n >= $1;
                IF n = 0 THEN
                    cur := e.pos;
                END IF;
                expect := e.pos + 1;
            END LOOP;
            -- (Past the last entry, the positions taken are gaps too.)
            WHILE expect <= x_last AND n < $1
                  AND NOT EXISTS (SELECT 1 FROM forgeyard.queue_lane_entries l WHERE l.lane = x_lane AND l.pos >= expect) LOOP
                gap_lanes := gap_lanes || x_lane;
                gaps := gaps || expect;
                expect := expect + 1;
                n := n + 1;
            END LOOP;
            IF advance AND cur > x_cursor THEN
                PERFORM pg_catalog.setval(('forgeyard.lane_' || x_lane || '_cursor')::regclass, cur);
            END IF;
        END IF;
    END LOOP;
    -- A gap is voided once no transaction that was running when its position was taken can still
    -- be: the lane's mark (its last position taken, and an id above every producer's of those
    -- positions: the id of the pass that made it) is settled when this snapshot's xmin has passed
    -- that id. A position at or below the mark then belongs to a transaction that committed (its
    -- entry is visible, and the void's insert does nothing) or rolled back: a void never waits,
    -- and never takes a position from a producer still open (tests/model/lanes.pml). Not under a
    -- transaction snapshot (a gap it shows may have been filled since: its insert would be
    -- 40001), nor when the transaction had an id before this pass (no bound).
    IF bound IS NOT NULL AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        FOR x IN SELECT g.lane, k.pos AS mark_pos, k.next_xid AS mark_xid,
                        pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot()) AS now_xmin,
                        l.last_pos
                   FROM (SELECT DISTINCT u.lane FROM unnest(gap_lanes) u(lane)) g
                   JOIN unnest(l_lanes, l_last) l(lane, last_pos) ON l.lane = g.lane
                   LEFT JOIN forgeyard.queue_lane_marks k ON k.lane = g.lane
        LOOP
            IF x.mark_xid IS NOT NULL AND x.mark_xid <= x.now_xmin THEN
                -- (Not where any segment holds the position: the primary key is per segment.)
                INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id)
                SELECT g.lane, g.pos, NULL FROM unnest(gap_lanes, gaps) g(lane, pos)
                 WHERE g.lane = x.lane AND g.pos <= x.mark_pos
                   AND NOT EXISTS (SELECT FROM forgeyard.queue_lane_entries y WHERE y.lane = g.lane AND y.pos = g.pos)
                    ON CONFLICT DO NOTHING;
                GET DIAGNOSTICS n = ROW_COUNT;
                done := done + n;
            END IF;
            -- A new mark once the last one is settled (or none, or one from another cluster's
            -- transaction ids: a restore's, above this pass's own).
            IF x.mark_xid IS NULL OR x.mark_xid <= x.now_xmin OR x.mark_xid > bound THEN
                INSERT INTO forgeyard.queue_lane_marks (lane, pos, next_xid) VALUES (x.lane, x.last_pos, bound)
                    ON CONFLICT (lane) DO UPDATE SET pos = excluded.pos, next_xid = excluded.next_xid;
            END IF;
        END LOOP;
    END IF;
    FOR x IN SELECT q.tenant_id, q.queue FROM forgeyard.queues q
              WHERE q.lanes IS NULL AND ($2 IS NULL OR q.tenant_id OPERATOR(pg_catalog.=) $2)
              ORDER BY q.tenant_id, q.queue LIMIT least($1, 16) FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM forgeyard.queue_lanes_open(x.tenant_id, x.queue);
        done := done + 1;
    END LOOP;
    RETURN done;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lanes_maintain(integer, text) IS
  'Internal: maintain()''s part of the ready lanes (cursors moved, gaps voided, lanes given to queues without them). Not granted to anyone.';

-- The position up to which a lane's entries are consumed: its cursor (0 before its first move); or
-- every position, for a lane whose sequences are gone (its queue dropped: its entries mean nothing).
CREATE FUNCTION forgeyard.queue_lane_consumed_to(lane bigint)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    cursor_seq regclass;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'lane must not be NULL' USING ERRCODE = '22004';
    END IF;
    cursor_seq := pg_catalog.to_regclass('forgeyard.lane_' || $1 || '_cursor');
    IF cursor_seq IS NULL THEN
        RETURN 9223372036854775807;
    END IF;
    RETURN coalesce(pg_catalog.pg_sequence_last_value(cursor_seq), 0);
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lane_consumed_to(bigint) IS
  'Internal: the position at or below which the entries of a ready lane are consumed (its cursor; every position when the lane''s sequences are gone). Not granted to anyone.';

-- maintain()'s rotation of the lanes' entries (both editions call it last, so that the lock of a
-- segment it truncated is held only to the commit): at most one sealed segment a pass is
-- truncated, once every entry in it is at or below its lane's cursor (consumed by committed work;
-- an entry of a lane whose sequences are gone means nothing), found per lane by the highest
-- position, a probe of the segment's index per lane, 256 lanes at a time in a subtransaction
-- rolled back afterwards (reading a sequence locks it to the end of the transaction: a segment of
-- many lanes must not use up the lock table). Every lock is taken with a lock_timeout of 50 ms, and
-- a segment whose lock is not had in that time (a transaction that read it is still open, another
-- pass truncating it) is skipped until the next pass: maintenance never waits longer. The check is
-- made again under the segment's lock, since a producer that read the open segment's number
-- before it moved on may have appended since (docs/queue-storage-design.md, "Rotation and
-- truncation"); then, still under it, a message listed at a position of the segment (its
-- cursor passed it: a restore of a dump whose cursor was read after its rows) is unlisted, and
-- messages_claim finds it. Then the open segment moves on, when it holds entries and the next one
-- is empty. Only in READ COMMITTED: under a transaction snapshot the check could miss an entry
-- committed since (0). Returns the entries truncated.
CREATE FUNCTION forgeyard.queue_lane_segments_maintain()
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    open_seg integer := forgeyard.queue_lane_segment_open();
    seg_name text;
    saved text;
    n bigint := 0;
    live boolean;
    cut boolean;
    after_lane bigint;
    -- For lanes of segment %1$I above $1, 256 at most (by a skip scan of its index): whether any
    -- has an entry above its cursor (its highest position, one probe each), and the last lane read.
    live_check constant text := $q$
        WITH RECURSIVE lanes(lane, k) AS (
            (SELECT e.lane, 1 FROM forgeyard.%1$I e WHERE e.lane > $1 ORDER BY e.lane LIMIT 1)
            UNION ALL
            SELECT (SELECT e.lane FROM forgeyard.%1$I e WHERE e.lane > l.lane ORDER BY e.lane LIMIT 1), l.k + 1
              FROM lanes l WHERE l.lane IS NOT NULL AND l.k < 256)
        SELECT coalesce(pg_catalog.bool_or(
                   (SELECT pg_catalog.max(e.pos) FROM forgeyard.%1$I e WHERE e.lane = l.lane)
                       > forgeyard.queue_lane_consumed_to(l.lane)), false),
               pg_catalog.max(l.lane), pg_catalog.count(*) >= 256
          FROM lanes l WHERE l.lane IS NOT NULL$q$;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    saved := pg_catalog.current_setting('lock_timeout');
    FOR j IN 0 .. 3 LOOP
        CONTINUE WHEN j = open_seg;
        seg_name := 'queue_lane_entries_' || j;
        -- A transaction idle while it holds a lock on the segment waits for its client: the lock
        -- would time out (0.14.0; where its state is visible to this role).
        CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                                JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
                               WHERE l.relation OPERATOR(pg_catalog.=) ('forgeyard.' || seg_name)::regclass
                                 AND l.granted AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
                                 AND a.state LIKE 'idle in transaction%');
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            -- (Pages without a visible row, which a queue_drop leaves, are truncated too.)
            live := pg_catalog.pg_relation_size(('forgeyard.' || seg_name)::regclass) = 0;
            FOR pass IN 1 .. 2 LOOP
                EXIT WHEN live;
                IF pass = 2 THEN
                    EXECUTE format('SELECT pg_catalog.count(*) FROM forgeyard.%I', seg_name) INTO n;
                    EXECUTE format('LOCK TABLE forgeyard.%I IN ACCESS EXCLUSIVE MODE', seg_name);
                END IF;
                -- Every lane's entries consumed? (Before the lock, then under it.)
                live := false;
                after_lane := -1;
                LOOP
                    BEGIN
                        EXECUTE format(live_check, seg_name) USING after_lane INTO live, after_lane, cut;
                        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'forgeyard: the sequences read are unlocked';
                    EXCEPTION WHEN raise_exception THEN
                        NULL;
                    END;
                    EXIT WHEN live OR NOT coalesce(cut, false);
                END LOOP;
                EXIT WHEN live;
            END LOOP;
            -- (live: not truncated, or empty.)
            IF NOT live THEN
                EXECUTE format($q$UPDATE forgeyard.messages m SET ready_pos = NULL
                                    FROM forgeyard.%1$I e
                                   WHERE m.msg_id = e.msg_id AND m.ready_pos = e.pos$q$, seg_name);
                EXECUTE format('TRUNCATE forgeyard.%I', seg_name);
                PERFORM pg_catalog.set_config('lock_timeout', saved, true);
                EXIT;
            END IF;
            PERFORM pg_catalog.set_config('lock_timeout', saved, true);
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;  -- (the subtransaction's end restored lock_timeout)
        END;
        n := 0;  -- (nothing truncated: the count of a segment left is not the answer)
    END LOOP;
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
        IF pg_catalog.pg_relation_size(('forgeyard.queue_lane_entries_' || open_seg)::regclass) > 0
           AND pg_catalog.pg_relation_size(('forgeyard.queue_lane_entries_' || (open_seg + 1) % 4)::regclass) = 0 THEN
            PERFORM pg_catalog.setval('forgeyard.queue_lane_segment',
                                      coalesce(pg_catalog.pg_sequence_last_value('forgeyard.queue_lane_segment'), 0) + 1);
        END IF;
        PERFORM pg_catalog.set_config('lock_timeout', saved, true);
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
    END;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_lane_segments_maintain() IS
  'Internal: maintain()''s rotation of the ready lanes'' entries (a sealed segment truncated once consumed, skipped when its lock is not had within 50 ms; the open segment moved on; READ COMMITTED only). Not granted to anyone.';


-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.14.0: the capacity counts' segments (F17, step 3 of docs/queue-storage-design.md: "As built
-- in 0.14.0"; docs/architecture.md, "Capacity slots")
-------------------------------------------------------------------------------------------------

-- The delta rows of the capacity counts (queue_release_deltas, queue_admit_deltas) are updated in
-- place by every ack and every enqueue: under a held snapshot each leaves a dead version. Both
-- tables are LIST partitions by the ten-second period of the row's generation, modulo 4: a
-- generation's rows, and every version of them, are in one segment, which nobody writes once its
-- period is over and its rows are folded. maintain() folds the quiet slots' admission rows
-- (queue_admit_fold) and truncates the emptied segments (queue_usage_segments_maintain), so
-- those versions leave in bulk whatever the snapshot.

-- The admission rows of generations before the current second folded into their slot rows
-- (queue_slots), for slots no producer holds (each locked FOR UPDATE SKIP LOCKED): a slot no
-- producer enqueues into any more keeps no row in a segment, which could then never be truncated.
-- The rows are read in a statement after the lock, which in READ COMMITTED sees what a producer
-- committed before it (a row made since the first statement's snapshot). Up to max_rows slots of
-- `tenant` (NULL: every tenant); only in READ COMMITTED (a transaction snapshot could miss such a
-- row: 0). Returns the slots folded. Both editions' maintain(). (22004 for a NULL max_rows,
-- 22023 for one below 1: maintain() checks it first.)
CREATE FUNCTION forgeyard.queue_admit_fold(max_rows integer, tenant text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g bigint := pg_catalog.floor(pg_catalog.date_part('epoch', forgeyard.now()))::bigint;
    ts text[];
    qs text[];
    ss integer[];
    n bigint;
BEGIN
    IF max_rows IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'max_rows must not be NULL';
    ELSIF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_rows must be positive';
    END IF;
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    WITH l AS (SELECT a.tenant_id, a.queue, a.slot FROM forgeyard.queue_slots a
                WHERE (tenant IS NULL OR a.tenant_id = tenant) AND a.admit_gen < g
                LIMIT max_rows FOR UPDATE OF a SKIP LOCKED)
    SELECT pg_catalog.array_agg(l.tenant_id), pg_catalog.array_agg(l.queue), pg_catalog.array_agg(l.slot)
      INTO ts, qs, ss FROM l;
    IF ts IS NULL THEN
        RETURN 0;
    END IF;
    WITH k AS (SELECT * FROM unnest(ts, qs, ss) k(tenant_id, queue, slot)),
         d AS (DELETE FROM forgeyard.queue_admit_deltas d USING k, forgeyard.queue_slots a
                WHERE a.tenant_id = k.tenant_id AND a.queue = k.queue AND a.slot = k.slot
                  AND d.tenant_id = k.tenant_id AND d.queue = k.queue AND d.slot = k.slot AND d.gen = a.admit_gen
               RETURNING d.tenant_id, d.queue, d.slot, d.admitted_messages, d.admitted_bytes)
    UPDATE forgeyard.queue_slots a
       SET admitted_messages = a.admitted_messages + coalesce(d.admitted_messages, 0),
           admitted_bytes = a.admitted_bytes + coalesce(d.admitted_bytes, 0), admit_gen = NULL
      FROM k LEFT JOIN d USING (tenant_id, queue, slot)
     WHERE a.tenant_id = k.tenant_id AND a.queue = k.queue AND a.slot = k.slot AND a.admit_gen < g;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_admit_fold(integer, text) IS
  'Internal: maintain()''s fold of admission rows of past generations into their slot rows (slots no producer holds; READ COMMITTED only). Not granted to anyone.';

-- The segments of the capacity counts truncated: per table, the first segment other than the
-- current period's that has pages but no row (every row of it folded; the dead versions its
-- updates left are what goes). Its ACCESS EXCLUSIVE lock is taken with lock_timeout 50 ms in a
-- subtransaction; on 55P03 (or a deadlock) it is skipped until the next pass, and no other
-- segment of the table is tried in this one (a pass waits 50 ms a table at most). The check is made
-- again under the lock, where every writer of the segment has ended: a row of a transaction that
-- committed since the first check keeps it. At most one segment a table a pass, last in
-- maintain() (the lock is held to its commit). Only in READ COMMITTED (0). Returns the segments
-- truncated.
CREATE FUNCTION forgeyard.queue_usage_segments_maintain()
    RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    open_seg integer := pg_catalog.abs(pg_catalog.trunc(pg_catalog.date_part('epoch', forgeyard.now()) / 10)::bigint % 4)::integer;
    tried boolean;
    saved text;
    seg_name text;
    t text;
    live boolean;
    n bigint := 0;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    saved := pg_catalog.current_setting('lock_timeout');
    FOREACH t IN ARRAY ARRAY['queue_release_deltas', 'queue_admit_deltas'] LOOP
        tried := false;
        FOR j IN 0 .. 3 LOOP
            EXIT WHEN tried;
            CONTINUE WHEN j = open_seg;
            seg_name := t || '_' || j;
            CONTINUE WHEN pg_catalog.pg_relation_size(('forgeyard.' || seg_name)::regclass) = 0;
            EXECUTE format('SELECT EXISTS (SELECT FROM forgeyard.%I)', seg_name) INTO live;
            CONTINUE WHEN live;
            -- A transaction idle while it holds a lock on the segment waits for its client, not for
            -- a lock: the lock would time out. Skipped without waiting (where its state is visible:
            -- a role without pg_read_all_stats sees other roles' as NULL, and waits the 50 ms).
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                                    JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
                                   WHERE l.relation OPERATOR(pg_catalog.=) ('forgeyard.' || seg_name)::regclass
                                     AND l.granted AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
                                     AND a.state LIKE 'idle in transaction%');
            tried := true;  -- (one lock a table a pass: one wait of 50 ms at most)
            BEGIN
                PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
                EXECUTE format('LOCK TABLE forgeyard.%I IN ACCESS EXCLUSIVE MODE', seg_name);
                EXECUTE format('SELECT EXISTS (SELECT FROM forgeyard.%I)', seg_name) INTO live;
                IF NOT live THEN
                    EXECUTE format('TRUNCATE forgeyard.%I', seg_name);
                    n := n + 1;
                END IF;
                PERFORM pg_catalog.set_config('lock_timeout', saved, true);
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                NULL;  -- (the subtransaction's end restored lock_timeout)
            END;
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION forgeyard.queue_usage_segments_maintain() IS
  'Internal: maintain()''s truncation of the capacity counts'' emptied segments (queue_release_deltas_N, queue_admit_deltas_N; skipped when the lock is not had within 50 ms; READ COMMITTED only). Not granted to anyone.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.11.0: release generations, an ack that does not walk its release row's versions (F17, step 3
-- of docs/queue-storage-design.md, first part; docs/architecture.md, "Capacity slots")
-------------------------------------------------------------------------------------------------

-- Release generations (F17, step 3 of docs/queue-storage-design.md, its first part): an ack no
-- longer updates its slot's release row. It adds the room it gives back to the slot's delta row of
-- the current generation (gen = forgeyard.now() in units of 100 ms since 1970), updated in place,
-- so under a held snapshot an ack walks at most one generation's versions of one row, not every
-- version since the snapshot was taken. The first ack of a generation in a slot folds the older
-- generations' rows into the release row (once per generation, not per ack); maintain() folds
-- what is left. (The table itself is defined above as 0.14.0 has it: partitioned into segments,
-- gen NOT NULL.) A slot's usage is unchanged: admitted less its release row and all its deltas.
ALTER TABLE forgeyard.queue_releases ADD COLUMN folded_gen bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN forgeyard.queue_releases.folded_gen IS
  'Where an ack''s fold of older generations starts: every delta row below it that the last fold saw was folded (a row it did not see, of a transaction then open, is folded by maintain()).';
COMMENT ON TABLE forgeyard.queue_releases IS
  'Messages and bytes that left each capacity slot (acked or dead-lettered) up to its last fold: the consumers'' side of the bound, with the slot''s queue_release_deltas rows.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Grants
-------------------------------------------------------------------------------------------------

-- New functions are executable by PUBLIC by default; nothing here is meant for PUBLIC.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;

-------------------------------------------------------------------------------------------------
-- pg_dump
-------------------------------------------------------------------------------------------------

-- The tables and sequences that hold data are dumped with the database (access_catalog is this
-- script's own and is not); see docs/operations.md, "pg_dump and restore".
SELECT pg_catalog.pg_extension_config_dump('forgeyard.leases', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.tenant_bindings', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.role_access', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.idempotency_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queues', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_slots', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_releases', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas_3', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_0', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_1', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_2', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas_3', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.messages', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_partitions', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.message_ids', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.claim_tokens', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.audit_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.audit_heads', '');
