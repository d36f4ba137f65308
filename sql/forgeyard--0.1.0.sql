-- forgeyard 0.1.0: leases with fencing epochs, tenant binding, access roles.
-- Every API function is SECURITY DEFINER with a pinned search_path and schema-qualified names.
\echo Use "CREATE EXTENSION forgeyard" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- Access: which roles may call what, and which tenants a role is bound to
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

CREATE FUNCTION forgeyard.now() RETURNS timestamptz
    LANGUAGE c VOLATILE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'fy_now';
COMMENT ON FUNCTION forgeyard.now() IS
  'The clock that decides expiry: clock_timestamp(), or the superuser-only setting forgeyard.now_override when set (tests).';

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

-- security_barrier: the tenant filter runs before any caller-supplied condition, so a bound role
-- cannot see other tenants' rows through a cheap function in its own WHERE clause.
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
-- Access management (run by the extension owner or a superuser)
-------------------------------------------------------------------------------------------------

-- What each access kind grants. Each version's script adds the objects it creates, so an
-- upgrade can re-grant them to every recorded role (apply_access).
CREATE TABLE forgeyard.access_catalog (
    access    text NOT NULL CHECK (access IN ('usage', 'maintenance', 'inspect')),
    privilege text NOT NULL CHECK (privilege IN ('EXECUTE', 'SELECT')),
    object    text NOT NULL,
    PRIMARY KEY (access, object)
);
COMMENT ON TABLE forgeyard.access_catalog IS
  'The privileges each access kind (usage, maintenance, inspect) grants; filled by the extension''s scripts.';
INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.now()'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_acquire(text, text, text, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_renew(text, text, bigint, interval)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_release(text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_fence(text, text, bigint)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.lease_get(text, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.lease_reap(integer, text)'),
    ('inspect',     'EXECUTE', 'FUNCTION forgeyard.now()'),
    ('inspect',     'SELECT',  'TABLE forgeyard.lease_status');

CREATE FUNCTION forgeyard.access_objects(access text)
    RETURNS TABLE (privilege text, object text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT c.privilege, c.object FROM forgeyard.access_catalog c
     WHERE c.access OPERATOR(pg_catalog.=) $1 ORDER BY c.object
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
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage') ON CONFLICT DO NOTHING;
        SELECT forgeyard.apply_access(role);
    END;
COMMENT ON FUNCTION forgeyard.grant_usage(regrole) IS
  'Application role: EXECUTE on the tenant-scoped API, no table privileges, so the semantics cannot be bypassed with DML.';

CREATE FUNCTION forgeyard.grant_maintenance(role regrole)
    RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage'), (role, 'maintenance')
            ON CONFLICT DO NOTHING;
        SELECT forgeyard.apply_access(role);
    END;
COMMENT ON FUNCTION forgeyard.grant_maintenance(regrole) IS
  'Maintenance role: the application API plus the cross-tenant maintenance calls (lease_reap, purges, maintain).';

CREATE FUNCTION forgeyard.grant_inspect(role regrole)
    RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'inspect') ON CONFLICT DO NOTHING;
        SELECT forgeyard.apply_access(role);
    END;
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
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        INSERT INTO forgeyard.tenant_bindings (role_id, tenant_id) VALUES (role, tenant) ON CONFLICT DO NOTHING;
    END;
COMMENT ON FUNCTION forgeyard.bind_tenant(regrole, text) IS
  'Restrict a role to its bound tenants: once bound, a call for any other tenant (or for all tenants) fails with FY040.';

CREATE FUNCTION forgeyard.unbind_tenant(role regrole, tenant text)
    RETURNS boolean
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    BEGIN ATOMIC
        WITH d AS (DELETE FROM forgeyard.tenant_bindings b
                    WHERE b.role_id OPERATOR(pg_catalog.=) role AND b.tenant_id OPERATOR(pg_catalog.=) tenant
                    RETURNING 1)
        SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM d;
    END;
COMMENT ON FUNCTION forgeyard.unbind_tenant(regrole, text) IS
  'Remove one tenant binding of a role; returns whether it existed. A role with no bindings left is unrestricted.';

-------------------------------------------------------------------------------------------------
-- Hardening and pg_dump
-------------------------------------------------------------------------------------------------

-- New functions are executable by PUBLIC by default; nothing here is meant for PUBLIC.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('forgeyard.leases', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.tenant_bindings', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.role_access', '');
