-- The PL/pgSQL edition's tenant rule: the twin of extension/tenant.cpp (check_tenant). The same rule
-- as the views' `scope` in SQL: membership without the superuser shortcut.

-- @helper
-- The role the caller is at the outer level (after SET ROLE), not the definer of the function
-- running: SECURITY DEFINER changes current_user, not the setting `role`.
CREATE FUNCTION forgeyard_pl.outer_user()
    RETURNS oid LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    r text := pg_catalog.current_setting('role');
BEGIN
    IF r OPERATOR(pg_catalog.=) 'none' THEN
        r := session_user;
    END IF;
    RETURN (SELECT a.oid FROM pg_catalog.pg_roles a WHERE a.rolname OPERATOR(pg_catalog.=) r);
END
$$;

-- FY040 unless both the role in effect (after SET ROLE) and the login role may act for tenant
-- (NULL: all tenants): a role bound with bind_tenant, or a member of one (directly or not), may
-- act only for its bound tenants. Usually no role is bound and this reads one empty index.
CREATE FUNCTION forgeyard_pl.check_tenant(tenant text)
    RETURNS void LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    caller oid;
    bound boolean;
    matching boolean;
BEGIN
    IF NOT EXISTS (SELECT FROM forgeyard.tenant_bindings) THEN
        RETURN;
    END IF;
    FOREACH caller IN ARRAY ARRAY[forgeyard_pl.outer_user(),
                                  (SELECT a.oid FROM pg_catalog.pg_roles a
                                    WHERE a.rolname OPERATOR(pg_catalog.=) session_user)]
    LOOP
        WITH RECURSIVE member_of(oid) AS (
            SELECT caller
            UNION
            SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member OPERATOR(pg_catalog.=) member_of.oid
        )
        SELECT count(*) OPERATOR(pg_catalog.>) 0,
               coalesce(bool_or(b.tenant_id OPERATOR(pg_catalog.=) tenant), false)
          INTO bound, matching
          FROM forgeyard.tenant_bindings b
         WHERE b.role_id::oid IN (SELECT oid FROM member_of);
        IF bound AND NOT matching THEN
            IF tenant IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.tenant_denied@',
                    MESSAGE = 'a role bound to tenants must name its tenant',
                    DETAIL = 'this role is bound with forgeyard.bind_tenant; pass one of its tenants';
            END IF;
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.tenant_denied@',
                MESSAGE = format('tenant "%s" is not allowed for this role', tenant),
                DETAIL = 'forgeyard.bind_tenant binds this role to other tenants';
        END IF;
    END LOOP;
END
$$;
