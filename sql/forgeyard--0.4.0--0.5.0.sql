-- forgeyard 0.4.0 -> 0.5.0: faster hot paths, application schema migrations and health, restore
-- safety, topics, hardening. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.5.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.5.0: hot paths (queue claim, ack and enqueue)
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: application schema migrations, daemon registry, health
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: restore safety: fencing values that never rewind, restore_reconcile
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: topics: durable pub/sub and the event type registry
-------------------------------------------------------------------------------------------------

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

-- The access-management functions answer 22004 for a NULL role, tenant or access kind and 42704 for an OID
-- naming no role, like every other function (they answered 23502 or 42601 before).
CREATE OR REPLACE FUNCTION forgeyard.access_objects(access text)
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

CREATE OR REPLACE FUNCTION forgeyard.apply_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    PERFORM forgeyard.check_role(role);
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

CREATE OR REPLACE FUNCTION forgeyard.grant_usage(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_usage(regrole) IS
  'Application role: EXECUTE on the tenant-scoped API, no table privileges, so the semantics cannot be bypassed with DML.';

CREATE OR REPLACE FUNCTION forgeyard.grant_maintenance(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage'), (role, 'maintenance')
        ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_maintenance(regrole) IS
  'Maintenance role: the application API plus the cross-tenant maintenance calls (lease_reap, purges, maintain).';

CREATE OR REPLACE FUNCTION forgeyard.grant_inspect(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'inspect') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_inspect(regrole) IS
  'Inspection role: SELECT on the forgeyard views (for psql), nothing else.';

CREATE OR REPLACE FUNCTION forgeyard.revoke_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
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

CREATE OR REPLACE FUNCTION forgeyard.bind_tenant(role regrole, tenant text)
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

CREATE OR REPLACE FUNCTION forgeyard.unbind_tenant(role regrole, tenant text)
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

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.5.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
