-- The PL/pgSQL edition's plain install as released at 0.8.0 (what `storage install --print plpgsql`
-- printed then, generated from that version's sources): where tests/pg/editions.sh starts the
-- PL/pgSQL edition's upgrade path. A released script is never edited.
SET check_function_bodies = off;
CREATE SCHEMA forgeyard;
-- The PL/pgSQL edition's own functions (extension/*.sql, @helper), at the end of this script: not
-- part of the API, executable only by the API's owner.
CREATE SCHEMA forgeyard_pl;
COMMENT ON SCHEMA forgeyard_pl IS
  'The PL/pgSQL edition''s internal functions; not an API: call the functions of schema forgeyard.';

-- The plain install's record: each install and upgrade step adds its version (forgeyard.version()
-- reads the last). An extension has pg_extension.extversion instead.
CREATE TABLE forgeyard_pl.installs (
    n            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version      text        NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    installed_by name        NOT NULL DEFAULT current_user
);

-- forgeyard 0.8.0, the whole SQL API in one script: the source of both editions' full scripts.
-- sql/generate.py makes from it, at build time, the C++ edition's forgeyard--0.8.0.sql (run by
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

-------------------------------------------------------------------------------------------------
-- Clock
-------------------------------------------------------------------------------------------------

-- forgeyard.now_override, the setting that moves this clock, is defined by the C++ edition's
-- library when it loads (extension/pg/clock.cpp: superuser-only), not here; in the PL/pgSQL edition
-- it is a placeholder that moves the clock only for superusers and the owner (extension/now.sql).
CREATE FUNCTION forgeyard.now() RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    AS $fy_body$
-- forgeyard.now_override is a placeholder setting here (no library defines it), which any role
-- may set: it moves the clock only when the session's login role is a superuser or owns the
-- installation (the schema forgeyard), so that no other role can move lease expiry. now() pins no
-- search_path (it is the one clock of the caller's queries too), so every name here is qualified.
DECLARE
    setting pg_catalog.text := pg_catalog.current_setting('forgeyard.now_override', true);
    t pg_catalog.timestamptz;
BEGIN
    IF setting IS NULL OR setting OPERATOR(pg_catalog.=) '' THEN
        RETURN pg_catalog.clock_timestamp();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) session_user
                      AND (r.rolsuper OR r.oid OPERATOR(pg_catalog.=)
                           (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                             WHERE n.nspname OPERATOR(pg_catalog.=) 'forgeyard'))) THEN
        RETURN pg_catalog.clock_timestamp();
    END IF;
    t := setting::pg_catalog.timestamptz;
    -- 'infinity' and the last years of the range would overflow now + duration and the epoch:
    -- the bound is the end of timestamptz's range less 36525 days, as in extension/pg/clock.cpp.
    IF NOT pg_catalog.isfinite(t)
       OR t OPERATOR(pg_catalog.>) '294176-12-31 00:00:00+00'::pg_catalog.timestamptz THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'forgeyard.now_override is out of range',
            DETAIL = 'it must be a finite timestamptz at least 100 years before the end of the timestamptz range';
    END IF;
    RETURN t;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.now() IS
  'The clock that decides expiry: clock_timestamp(), or the setting forgeyard.now_override when set (tests) by a superuser or, in the PL/pgSQL edition, the installation''s owner.';

CREATE FUNCTION forgeyard.edition() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 'plpgsql'::text $$;
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
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The row is read locked FOR UPDATE; only a first grant is an INSERT, and a concurrent first
-- grant makes it a no-op: the loop then locks that row. A row deleted while we waited for its
-- lock is no row.
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_resource text := forgeyard_pl.name_arg('resource', resource, 512);
    t_owner text := forgeyard_pl.name_arg('owner', owner, 256);
    ttl_us bigint := forgeyard_pl.duration_arg('ttl', ttl, 604800000000);
    now_at timestamptz := forgeyard.now();
    until timestamptz := now_at OPERATOR(pg_catalog.+) (ttl_us OPERATOR(pg_catalog.*) '00:00:00.000001'::pg_catalog.interval);
    now_us bigint;
    next_epoch bigint;
    cur record;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    now_us := forgeyard_pl.usecs(now_at);
    LOOP
        SELECT l.owner, l.epoch, l.expires_at, l.released_at IS NOT NULL AS released, l.reaped_at IS NOT NULL AS reaped
          INTO cur
          FROM forgeyard.leases l
         WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource
           FOR UPDATE;
        IF NOT FOUND THEN
            -- First grant: epoch = max(0 + 1, clock).
            next_epoch := CASE WHEN 1 > now_us THEN 1 ELSE now_us END;
            INSERT INTO forgeyard.leases (tenant_id, resource, owner, epoch, acquired_at, expires_at)
            VALUES (t_tenant, t_resource, t_owner, next_epoch, now_at, until) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                CONTINUE;
            END IF;
            acquired := true;
            epoch := next_epoch;
            holder := t_owner;
            expires_at := until;
        ELSIF cur.released OR cur.reaped OR cur.expires_at OPERATOR(pg_catalog.<=) now_at THEN
            -- Free, released, expired or reaped: a new grant with a new, strictly greater epoch.
            IF cur.epoch OPERATOR(pg_catalog.=) 9223372036854775807 THEN
                RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'lease epoch space exhausted';
            END IF;
            next_epoch := CASE WHEN cur.epoch + 1 > now_us THEN cur.epoch + 1 ELSE now_us END;
            UPDATE forgeyard.leases l
               SET owner = t_owner, epoch = next_epoch, acquired_at = now_at, expires_at = until,
                   released_at = NULL, reaped_at = NULL
             WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource;
            acquired := true;
            epoch := next_epoch;
            holder := t_owner;
            expires_at := until;
        ELSIF cur.owner OPERATOR(pg_catalog.=) t_owner THEN
            -- Live and held by the same owner: same epoch, expiry never shortened (a keeper may
            -- hold it for longer).
            acquired := true;
            epoch := cur.epoch;
            holder := t_owner;
            expires_at := CASE WHEN cur.expires_at OPERATOR(pg_catalog.>) until THEN cur.expires_at ELSE until END;
            UPDATE forgeyard.leases l SET expires_at = lease_acquire.expires_at
             WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource;
        ELSE
            -- Live and held by another owner: not granted.
            acquired := false;
            epoch := cur.epoch;
            holder := cur.owner;
            expires_at := cur.expires_at;
        END IF;
        RETURN NEXT;
        RETURN;
    END LOOP;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_acquire(text, text, text, interval) IS
  'Acquire the lease on (tenant, resource) for ttl. Free or expired: acquired with a new, strictly greater epoch. Held by owner: same epoch, expiry moved to now + ttl. Held by another: acquired = false and the current holder, epoch and expiry.';

CREATE FUNCTION forgeyard.lease_renew(tenant text, resource text, epoch bigint, ttl interval)
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- A no-key UPDATE of the live grant: it locks the row only if the version read qualifies (a stale
-- caller waits on nobody), FOR NO KEY UPDATE (lease_fence's KEY SHARE does not stop the holder),
-- and re-checks a newer version it followed while locking.
DECLARE
    t_tenant text;
    t_resource text;
    t_epoch bigint;
    ttl_us bigint;
    now_at timestamptz;
    until timestamptz;
BEGIN
    t_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_resource := forgeyard_pl.name_arg('resource', resource, 512);
    t_epoch := epoch;
    IF t_epoch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'epoch must not be NULL';
    END IF;
    ttl_us := forgeyard_pl.duration_arg('ttl', ttl, 604800000000);
    now_at := forgeyard.now();
    until := now_at OPERATOR(pg_catalog.+) (ttl_us OPERATOR(pg_catalog.*) '00:00:00.000001'::pg_catalog.interval);
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    UPDATE forgeyard.leases l SET expires_at = until
     WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource
       AND l.epoch OPERATOR(pg_catalog.=) t_epoch
       AND l.released_at IS NULL AND l.reaped_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) now_at;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.lease_stale(t_epoch, t_resource);
    END IF;
    RETURN until;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_renew(text, text, bigint, interval) IS
  'Extend the live grant with this epoch to now + ttl and return the new expiry. FY001 if the epoch is not the live grant (expired, released or taken over).';

CREATE FUNCTION forgeyard.lease_release(tenant text, resource text, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Whether epoch was the live grant. The row stays, so its epoch is never handed out again. The
-- same no-key UPDATE as renew.
DECLARE
    t_tenant text;
    t_resource text;
    t_epoch bigint;
    now_at timestamptz;
BEGIN
    t_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_resource := forgeyard_pl.name_arg('resource', resource, 512);
    t_epoch := epoch;
    IF t_epoch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'epoch must not be NULL';
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    UPDATE forgeyard.leases l SET released_at = now_at
     WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource
       AND l.epoch OPERATOR(pg_catalog.=) t_epoch
       AND l.released_at IS NULL AND l.reaped_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) now_at;
    RETURN FOUND;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_release(text, text, bigint) IS
  'Release the grant with this epoch. Returns whether it was the live grant. The epoch is never reused.';

CREATE FUNCTION forgeyard.lease_fence(tenant text, resource text, epoch bigint)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- FY001 unless epoch is the live grant. The KEY SHARE lock blocks lease_acquire's FOR UPDATE
-- until the caller's transaction ends, while the holder's own renewals (no-key updates) go through.
DECLARE
    t_tenant text;
    t_resource text;
    t_epoch bigint;
    now_at timestamptz;
BEGIN
    t_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_resource := forgeyard_pl.name_arg('resource', resource, 512);
    t_epoch := epoch;
    IF t_epoch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'epoch must not be NULL';
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    PERFORM 1 FROM forgeyard.leases l
     WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource
       AND l.epoch OPERATOR(pg_catalog.=) t_epoch
       AND l.released_at IS NULL AND l.reaped_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) now_at
       FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.lease_stale(t_epoch, t_resource);
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_fence(text, text, bigint) IS
  'Call inside the transaction of a protected write: FY001 unless the epoch is the live grant; the grant cannot change hands until that transaction ends.';

CREATE FUNCTION forgeyard.lease_reap(max_leases integer DEFAULT 100, tenant text DEFAULT NULL)
    RETURNS TABLE (tenant text, resource text, epoch bigint, holder text, expired_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
SELECT * FROM forgeyard_pl.lease_reap($1, $2);
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_reap(integer, text) IS
  'Maintenance: return up to max_leases grants that expired without release, each once, for reconcilers. tenant NULL = all tenants. Safe to run from several places at once.';

CREATE FUNCTION forgeyard.lease_get(tenant text, resource text)
    RETURNS TABLE (owner text, epoch bigint, acquired_at timestamptz, expires_at timestamptz, state text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The stored lease and its state by the clock read before the row: released, reaped, expired
-- (expires_at <= now) or live. No row if the resource was never leased. Reads only.
DECLARE
    t_tenant text;
    t_resource text;
    now_at timestamptz;
BEGIN
    t_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_resource := forgeyard_pl.name_arg('resource', resource, 512);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT l.owner, l.epoch, l.acquired_at, l.expires_at,
           CASE WHEN l.released_at IS NOT NULL THEN 'released'
                WHEN l.reaped_at IS NOT NULL THEN 'reaped'
                WHEN l.expires_at OPERATOR(pg_catalog.<=) now_at THEN 'expired'
                ELSE 'live' END
      FROM forgeyard.leases l
     WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.lease_get(text, text) IS
  'The stored lease of (tenant, resource): owner, epoch, times and state (live, expired, reaped, released). No row if the resource was never leased.';

-------------------------------------------------------------------------------------------------
-- Compare-and-set (SECURITY INVOKER: they act with the caller's own rights on its own tables)
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.versioning_trigger()
    RETURNS trigger
    LANGUAGE plpgsql
    AS $fy_body$
-- INSERT starts at 1; UPDATE moves expected -> expected + 1. It runs no SQL, and runs with the
-- search_path of whoever writes the row: every name is qualified.
DECLARE
    next_version bigint;
    current_version bigint;
BEGIN
    IF TG_WHEN OPERATOR(pg_catalog.<>) 'BEFORE' OR TG_LEVEL OPERATOR(pg_catalog.<>) 'ROW' THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000',
            MESSAGE = 'the versioning trigger must fire BEFORE, FOR EACH ROW';
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        next_version := NEW.entity_version;
        IF next_version IS NULL OR next_version OPERATOR(pg_catalog.<>) 1 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('a new row of %I.%I must start at entity_version 1', TG_TABLE_SCHEMA, TG_TABLE_NAME),
                DETAIL = pg_catalog.format('it was inserted with %s', COALESCE(next_version::pg_catalog.text, 'NULL'));
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        next_version := NEW.entity_version;
    ELSE
        next_version := OLD.entity_version;   -- the C++ reads the trigger tuple for any other event
    END IF;
    current_version := COALESCE(OLD.entity_version, 0);
    IF next_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = pg_catalog.format('entity_version of %I.%I must not be NULL', TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF next_version OPERATOR(pg_catalog.=) current_version THEN
        RAISE EXCEPTION USING ERRCODE = 'FY002',
            MESSAGE = pg_catalog.format('an UPDATE of %I.%I must set entity_version to the expected version + 1',
                                        TG_TABLE_SCHEMA, TG_TABLE_NAME),
            DETAIL = pg_catalog.format('current version %s; the UPDATE did not change it', current_version);
    END IF;
    IF next_version OPERATOR(pg_catalog.<>) (current_version OPERATOR(pg_catalog.+) 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'FY002',
            MESSAGE = pg_catalog.format('version conflict on %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME),
            DETAIL = pg_catalog.format('expected version %s, current version %s',
                                       next_version OPERATOR(pg_catalog.-) 1, current_version);
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.versioning_trigger() IS
  'Row trigger installed by enable_versioning: a new row must start at entity_version 1; every UPDATE must set entity_version to the current version + 1 (FY002 otherwise, with expected and current versions in DETAIL).';

CREATE FUNCTION forgeyard.enable_versioning(rel regclass)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Every UPDATE of rel must then move entity_version from expected to expected + 1. The trigger is
-- created with the caller's rights.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    is_bigint boolean;
    not_null boolean;
    default_one boolean;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'rel must not be NULL';
    END IF;
    SELECT rel::pg_catalog.regclass::pg_catalog.text, c.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning')
      INTO t_name, kind, t_versioned
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- DEFAULT 1, '1', 1::bigint and '1'::bigint are the same default.
    SELECT a.atttypid = 'pg_catalog.int8'::regtype, a.attnotnull,
           pg_get_expr(d.adbin, d.adrelid) = ANY (ARRAY['1', '''1''::bigint', '(1)::bigint'])
      INTO is_bigint, not_null, default_one
      FROM pg_catalog.pg_attribute a
      LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = rel AND a.attname = 'entity_version' AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42703', MESSAGE = t_name || ' has no entity_version column',
            DETAIL = 'add: entity_version bigint NOT NULL DEFAULT 1';
    END IF;
    IF NOT is_bigint OR NOT not_null OR NOT coalesce(default_one, false) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'entity_version of ' || t_name || ' must be bigint NOT NULL DEFAULT 1';
    END IF;
    IF NOT has_table_privilege(rel, 'UPDATE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'permission denied: UPDATE on ' || t_name || ' is needed to version it';
    END IF;
    IF NOT t_versioned THEN
        EXECUTE 'CREATE TRIGGER forgeyard_versioning BEFORE INSERT OR UPDATE ON ' || t_name
                || ' FOR EACH ROW EXECUTE FUNCTION forgeyard.versioning_trigger()';
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.enable_versioning(regclass) IS
  'Put a table with "entity_version bigint NOT NULL DEFAULT 1" under version control: from then on every UPDATE, from any path, must move entity_version from expected to expected + 1. Needs UPDATE and TRIGGER rights on the table (runs with the caller''s rights). Idempotent.';

CREATE FUNCTION forgeyard.disable_versioning(rel regclass)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Drops the trigger again (the column and its values stay); whether the table was versioned.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'rel must not be NULL';
    END IF;
    SELECT rel::pg_catalog.regclass::pg_catalog.text, c.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning')
      INTO t_name, kind, t_versioned
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    IF t_versioned THEN
        EXECUTE 'DROP TRIGGER forgeyard_versioning ON ' || t_name;
    END IF;
    RETURN t_versioned;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.disable_versioning(regclass) IS
  'Take a table out of version control (drops the trigger; the column and its values stay). Returns whether it was versioned.';

CREATE FUNCTION forgeyard.cas_update(rel regclass, key jsonb, expected_version bigint, changes jsonb)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The UPDATE through jsonb_to_record (docs/architecture.md, step 4). The C++ edition binds the
-- values of "the typed form" (every value a JSON scalar, every column plain, at most 32
-- parameters) as parameters of the columns' own types, made by the types' input functions with
-- the columns' typmods before its statement runs: a value its column refuses is refused before
-- the row is looked at (and before the statement's privilege check). Here those values are made
-- first by jsonb_to_record, which reads them the same way (the changes, then the key, each in
-- column-name order), and then the UPDATE runs as in the other form.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    key_names text[];
    change_names text[];
    known text[];
    has_tenant boolean;
    has_version boolean;
    generated text[];
    key_record text;
    key_cond text;
    change_record text;
    set_list text;
    value_list text;
    typed boolean;
    key_unique boolean;
    c text;
    new_version bigint;
    n bigint;
    current_version bigint;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'rel must not be NULL';
    END IF;
    -- read_table(), for the columns the call names (and tenant_id, entity_version): the table's
    -- regclass name and kind, its trigger, the arguments' top-level keys (sorted in byte order;
    -- none unless an object), which named columns exist (and which are generated), the pieces of
    -- the statements (column definition lists of jsonb_to_record, the key condition, the SET
    -- lists), whether the call takes the typed form (every named column plain: a base, enum,
    -- range or multirange type that is not an array, json or jsonb; every value a JSON scalar),
    -- and whether the key contains every column of the primary key or of a unique index (no
    -- expressions, no predicates).
    SELECT rel::pg_catalog.regclass::pg_catalog.text, rc.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning'),
           kx.key_names, kx.change_names, coalesce(ax.known, '{}'), coalesce(ax.has_tenant, false),
           coalesce(ax.has_version, false), coalesce(ax.generated, '{}'), ax.key_record, ax.key_cond, ax.change_record,
           ax.set_list, ax.value_list, coalesce(ax.typed, false),
           EXISTS (SELECT FROM pg_catalog.pg_index i
                    WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND i.indisunique AND i.indpred IS NULL
                      AND i.indexprs IS NULL AND i.indkey::pg_catalog.int2[] OPERATOR(pg_catalog.<@) ax.key_nums)
      INTO t_name, kind, t_versioned, key_names, change_names, known, has_tenant, has_version, generated,
           key_record, key_cond, change_record, set_list, value_list, typed, key_unique
      FROM pg_catalog.pg_class rc,
           LATERAL (SELECT ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(key) OPERATOR(pg_catalog.=) 'object' THEN key END) j(k)
                                  ORDER BY j.k COLLATE "C") AS key_names,
                           ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(changes) OPERATOR(pg_catalog.=) 'object' THEN changes END) j(k)
                                  ORDER BY j.k COLLATE "C") AS change_names
                    OFFSET 0) kx,
           LATERAL (SELECT pg_catalog.array_agg(x.name) AS known,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'tenant_id') AS has_tenant,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'entity_version') AS has_version,
                           pg_catalog.array_agg(x.name) FILTER (WHERE x.generated) AS generated,
                           pg_catalog.array_agg(x.attnum) FILTER (WHERE x.is_key) AS key_nums,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_record,
                           pg_catalog.string_agg('t.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||)
                                                 ' OPERATOR(pg_catalog.=) k.' OPERATOR(pg_catalog.||) x.q, ' AND '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_cond,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS change_record,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS set_list,
                           pg_catalog.string_agg('c.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS value_list,
                           pg_catalog.bool_and(x.plain AND pg_catalog.jsonb_typeof(
                                                   CASE WHEN x.is_key THEN key ELSE changes END OPERATOR(pg_catalog.->) x.name)
                                                 OPERATOR(pg_catalog.<>) ALL ('{object,array}'::pg_catalog.text[]))
                             FILTER (WHERE x.is_key OR x.is_change) AS typed
                      FROM (SELECT at.attname::pg_catalog.text AS name, pg_catalog.quote_ident(at.attname) AS q, at.attnum,
                                   at.attgenerated OPERATOR(pg_catalog.<>) '' AS generated,
                                   pg_catalog.format_type(at.atttypid, at.atttypmod) AS type,
                                   y.typtype OPERATOR(pg_catalog.=) ANY ('{b,e,r,m}'::pg_catalog."char"[])
                                     AND y.typcategory OPERATOR(pg_catalog.<>) 'A'
                                     AND y.oid OPERATOR(pg_catalog.<>) ALL ('{114,3802}'::pg_catalog.oid[]) AS plain,   -- json, jsonb
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names) AS is_key,
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names) AS is_change
                              FROM pg_catalog.pg_attribute at
                              JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) at.atttypid
                             WHERE at.attrelid OPERATOR(pg_catalog.=) rel AND at.attnum OPERATOR(pg_catalog.>) 0
                               AND NOT at.attisdropped
                               AND (at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names)
                                    OR at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names)
                                    OR at.attname OPERATOR(pg_catalog.=) ANY ('{tenant_id,entity_version}'::pg_catalog.name[]))) x) ax
     WHERE rc.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- versioned_table(): the table must have entity_version and the trigger.
    IF NOT has_version THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = t_name || ' has no entity_version column';
    END IF;
    IF NOT t_versioned THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = t_name || ' is not under version control',
            DETAIL = format('call forgeyard.enable_versioning(''%s'') first', t_name);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'key must not be NULL';
    END IF;
    IF expected_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'expected_version must not be NULL';
    END IF;
    IF changes IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'changes must not be NULL';
    END IF;
    IF expected_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'expected_version must be at least 1';
    END IF;
    IF jsonb_typeof(key) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'key must be a JSON object';
    END IF;
    IF jsonb_typeof(changes) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'changes must be a JSON object';
    END IF;
    -- check_key(): existing columns, tenant_id where the table has one, and the columns of the
    -- primary key or of a unique index (tenant_id may come on top of a globally unique id).
    IF cardinality(key_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'key must name at least one column';
    END IF;
    FOREACH c IN ARRAY key_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('key names unknown column "%s" of %s', c, t_name);
        END IF;
    END LOOP;
    IF has_tenant AND NOT 'tenant_id' = ANY (key_names) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'key must include tenant_id: ' || t_name || ' has a tenant_id column';
    END IF;
    IF NOT key_unique THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('key columns (%s) do not contain the primary key or a unique index of %s',
                             array_to_string(key_names, ','), t_name);
    END IF;
    -- check_changes(): existing columns, not the version, tenant_id, a key or a generated column.
    IF cardinality(change_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'changes must name at least one column';
    END IF;
    FOREACH c IN ARRAY change_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('changes name unknown column "%s" of %s', c, t_name);
        END IF;
        IF c = 'entity_version' THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'changes must not set entity_version: cas_update sets it to expected + 1';
        END IF;
        IF c = 'tenant_id' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'changes must not set tenant_id';
        END IF;
        IF c = ANY (key_names) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('changes must not set key column "%s"', c);
        END IF;
        IF c = ANY (generated) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('changes must not set generated column "%s"', c);
        END IF;
    END LOOP;
    IF typed AND 1 + cardinality(change_names) + cardinality(key_names) <= 32 THEN
        EXECUTE 'SELECT (SELECT true FROM pg_catalog.jsonb_to_record($1) AS c(' || change_record || '))'
                || ' AND (SELECT true FROM pg_catalog.jsonb_to_record($2) AS k(' || key_record || '))'
          USING changes, key;
    END IF;
    EXECUTE 'UPDATE ' || t_name || ' t SET (' || set_list || 'entity_version) = (SELECT ' || value_list
            || '$3 OPERATOR(pg_catalog.+) 1 FROM pg_catalog.jsonb_to_record($2) AS c(' || change_record || '))'
            || ' FROM pg_catalog.jsonb_to_record($1) AS k(' || key_record || ') WHERE ' || key_cond
            || ' AND t.entity_version OPERATOR(pg_catalog.=) $3 RETURNING t.entity_version'
       INTO new_version
      USING key, changes, expected_version;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000',
            MESSAGE = 'cas_update matched more than one row of ' || t_name;
    END IF;
    IF n = 0 THEN
        -- Tell the answers apart: no row (P0002) or another version (FY002).
        EXECUTE 'SELECT t.entity_version FROM ' || t_name || ' t, pg_catalog.jsonb_to_record($1) AS k(' || key_record
                || ') WHERE ' || key_cond
           INTO current_version
          USING key;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n = 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'P0002',
                MESSAGE = 'no row of ' || t_name || ' matches the key';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'FY002', MESSAGE = 'version conflict on ' || t_name,
            DETAIL = format('expected version %s, current version %s', expected_version, coalesce(current_version, 0));
    END IF;
    RETURN coalesce(new_version, 0);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.cas_update(regclass, jsonb, bigint, jsonb) IS
  'Update the row of a versioned table named by key (the columns of its primary key or a unique index, tenant_id included where the table has one) from expected_version, applying changes; returns the new version. FY002 if the row is at another version, P0002 if no row matches, 22023 for unknown, key, version or tenant_id columns in changes. Runs with the caller''s rights.';

CREATE FUNCTION forgeyard.cas_get(rel regclass, key jsonb)
    RETURNS TABLE ("row" jsonb, entity_version bigint)
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The row named by key as jsonb, with its entity_version; no row when the key matches none.
-- t.*, not t: a column named "t" would make the bare alias ambiguous (42702).
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    key_names text[];
    change_names text[];
    known text[];
    has_tenant boolean;
    has_version boolean;
    generated text[];
    key_record text;
    key_cond text;
    change_record text;
    set_list text;
    value_list text;
    typed boolean;
    key_unique boolean;
    c text;
    r record;
    found_row boolean := false;
    row_json jsonb;
    row_version bigint;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'rel must not be NULL';
    END IF;
    -- read_table(), for the columns the call names (and tenant_id, entity_version): the table's
    -- regclass name and kind, its trigger, the arguments' top-level keys (sorted in byte order;
    -- none unless an object), which named columns exist (and which are generated), the pieces of
    -- the statements (column definition lists of jsonb_to_record, the key condition, the SET
    -- lists), whether the call takes the typed form (every named column plain: a base, enum,
    -- range or multirange type that is not an array, json or jsonb; every value a JSON scalar),
    -- and whether the key contains every column of the primary key or of a unique index (no
    -- expressions, no predicates).
    SELECT rel::pg_catalog.regclass::pg_catalog.text, rc.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning'),
           kx.key_names, kx.change_names, coalesce(ax.known, '{}'), coalesce(ax.has_tenant, false),
           coalesce(ax.has_version, false), coalesce(ax.generated, '{}'), ax.key_record, ax.key_cond, ax.change_record,
           ax.set_list, ax.value_list, coalesce(ax.typed, false),
           EXISTS (SELECT FROM pg_catalog.pg_index i
                    WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND i.indisunique AND i.indpred IS NULL
                      AND i.indexprs IS NULL AND i.indkey::pg_catalog.int2[] OPERATOR(pg_catalog.<@) ax.key_nums)
      INTO t_name, kind, t_versioned, key_names, change_names, known, has_tenant, has_version, generated,
           key_record, key_cond, change_record, set_list, value_list, typed, key_unique
      FROM pg_catalog.pg_class rc,
           LATERAL (SELECT ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(key) OPERATOR(pg_catalog.=) 'object' THEN key END) j(k)
                                  ORDER BY j.k COLLATE "C") AS key_names,
                           '{}'::pg_catalog.text[] AS change_names
                    OFFSET 0) kx,
           LATERAL (SELECT pg_catalog.array_agg(x.name) AS known,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'tenant_id') AS has_tenant,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'entity_version') AS has_version,
                           pg_catalog.array_agg(x.name) FILTER (WHERE x.generated) AS generated,
                           pg_catalog.array_agg(x.attnum) FILTER (WHERE x.is_key) AS key_nums,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_record,
                           pg_catalog.string_agg('t.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||)
                                                 ' OPERATOR(pg_catalog.=) k.' OPERATOR(pg_catalog.||) x.q, ' AND '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_cond,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS change_record,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS set_list,
                           pg_catalog.string_agg('c.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS value_list,
                           pg_catalog.bool_and(x.plain AND pg_catalog.jsonb_typeof(
                                                   CASE WHEN x.is_key THEN key ELSE NULL::pg_catalog.jsonb END OPERATOR(pg_catalog.->) x.name)
                                                 OPERATOR(pg_catalog.<>) ALL ('{object,array}'::pg_catalog.text[]))
                             FILTER (WHERE x.is_key OR x.is_change) AS typed
                      FROM (SELECT at.attname::pg_catalog.text AS name, pg_catalog.quote_ident(at.attname) AS q, at.attnum,
                                   at.attgenerated OPERATOR(pg_catalog.<>) '' AS generated,
                                   pg_catalog.format_type(at.atttypid, at.atttypmod) AS type,
                                   y.typtype OPERATOR(pg_catalog.=) ANY ('{b,e,r,m}'::pg_catalog."char"[])
                                     AND y.typcategory OPERATOR(pg_catalog.<>) 'A'
                                     AND y.oid OPERATOR(pg_catalog.<>) ALL ('{114,3802}'::pg_catalog.oid[]) AS plain,   -- json, jsonb
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names) AS is_key,
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names) AS is_change
                              FROM pg_catalog.pg_attribute at
                              JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) at.atttypid
                             WHERE at.attrelid OPERATOR(pg_catalog.=) rel AND at.attnum OPERATOR(pg_catalog.>) 0
                               AND NOT at.attisdropped
                               AND (at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names)
                                    OR at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names)
                                    OR at.attname OPERATOR(pg_catalog.=) ANY ('{tenant_id,entity_version}'::pg_catalog.name[]))) x) ax
     WHERE rc.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- versioned_table(): the table must have entity_version and the trigger.
    IF NOT has_version THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = t_name || ' has no entity_version column';
    END IF;
    IF NOT t_versioned THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = t_name || ' is not under version control',
            DETAIL = format('call forgeyard.enable_versioning(''%s'') first', t_name);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'key must not be NULL';
    END IF;
    IF jsonb_typeof(key) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'key must be a JSON object';
    END IF;
    -- check_key(): existing columns, tenant_id where the table has one, and the columns of the
    -- primary key or of a unique index (tenant_id may come on top of a globally unique id).
    IF cardinality(key_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'key must name at least one column';
    END IF;
    FOREACH c IN ARRAY key_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('key names unknown column "%s" of %s', c, t_name);
        END IF;
    END LOOP;
    IF has_tenant AND NOT 'tenant_id' = ANY (key_names) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'key must include tenant_id: ' || t_name || ' has a tenant_id column';
    END IF;
    IF NOT key_unique THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('key columns (%s) do not contain the primary key or a unique index of %s',
                             array_to_string(key_names, ','), t_name);
    END IF;
    -- Every matching row is read and the last one kept, as the C++ does (a key names one row).
    FOR r IN EXECUTE 'SELECT pg_catalog.to_jsonb(t.*) AS j, t.entity_version AS v FROM ' || t_name
                     || ' t, pg_catalog.jsonb_to_record($1) AS k(' || key_record || ') WHERE ' || key_cond
               USING key LOOP
        found_row := true;
        row_json := r.j;
        row_version := coalesce(r.v, 0);
    END LOOP;
    IF found_row THEN
        RETURN QUERY SELECT row_json, row_version;
    END IF;
END
$fy_body$;
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
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- A new key is one INSERT. If the key exists, or a concurrent first begin holds it uncommitted
-- (the INSERT waits for that transaction, then does nothing if it committed), the decision is
-- taken on the row locked FOR UPDATE: a concurrent caller waits there until this one's
-- transaction ends, then sees what it committed.
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_scope text := forgeyard_pl.name_arg('scope', scope, 256);
    t_key text := forgeyard_pl.name_arg('key', key, 256);
    digest bytea := forgeyard_pl.bytea_arg('request_digest', request_digest, 64, false, 1);
    lock_us bigint := forgeyard_pl.duration_arg('lock_ttl', lock_ttl, 86400000000);
    retain_us bigint := forgeyard_pl.duration_arg('retain', retain, 7776000000000);
    now_at timestamptz;
    locked timestamptz;
    expires timestamptz;
    resume boolean;
    stored record;
BEGIN
    IF retain_us < lock_us THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'retain must not be shorter than lock_ttl';
    END IF;
    now_at := forgeyard.now();
    locked := now_at + (lock_us * '00:00:00.000001'::interval);
    expires := now_at + (retain_us * '00:00:00.000001'::interval);
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    status := 'started';
    LOOP
        INSERT INTO forgeyard.idempotency_keys AS i (tenant_id, scope, key, request_digest, status, attempt,
                                                     locked_until, lock_usecs, retain_usecs, created_at, expires_at)
        VALUES (t_tenant, t_scope, t_key, digest, 'in_progress', nextval('forgeyard.idempotency_attempts'),
                locked, lock_us, retain_us, now_at, expires)
        ON CONFLICT DO NOTHING
        RETURNING i.attempt INTO attempt;
        EXIT WHEN FOUND;
        SELECT i.request_digest, i.status = 'completed' AS completed, i.attempt, i.locked_until, i.expires_at,
               i.recovery_point, i.response
          INTO stored
          FROM forgeyard.idempotency_keys i
         WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;   -- deleted meanwhile (abandon, purge): insert again
        IF stored.expires_at <= now_at AND (stored.completed OR stored.locked_until <= now_at) THEN
            -- Past its retention (and not under a live lock): the key counts as unused.
            resume := false;
        ELSIF stored.request_digest <> digest THEN
            RAISE EXCEPTION USING ERRCODE = 'FY011',
                MESSAGE = format('idempotency key "%s" was used with a different request', t_key),
                DETAIL = 'the request digest differs from the one stored with the key';
        ELSIF stored.completed THEN
            status := 'replay';
            attempt := stored.attempt;
            recovery_point := stored.recovery_point;
            response := stored.response;
            EXIT;
        ELSIF stored.locked_until > now_at THEN
            RAISE EXCEPTION USING ERRCODE = 'FY010',
                MESSAGE = format('idempotency key "%s" is in progress elsewhere', t_key),
                DETAIL = format('attempt %s holds it; try again later', stored.attempt);
        ELSE
            -- The lock expired: taken over with the last recovery point.
            resume := true;
            recovery_point := stored.recovery_point;
        END IF;
        -- A new attempt on the existing row; resume keeps its recovery point and created_at.
        UPDATE forgeyard.idempotency_keys i
           SET request_digest = digest, status = 'in_progress',
               attempt = nextval('forgeyard.idempotency_attempts'),
               recovery_point = CASE WHEN resume THEN i.recovery_point END,
               response = NULL, completed_at = NULL, locked_until = locked, lock_usecs = lock_us,
               retain_usecs = retain_us,
               created_at = CASE WHEN resume THEN i.created_at ELSE now_at END, expires_at = expires
         WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key
        RETURNING i.attempt INTO attempt;
        EXIT;
    END LOOP;
    RETURN NEXT;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.idem_begin(text, text, text, bytea, interval, interval) IS
  'Start (status started: do the work, attempt N) or replay (status replay: the stored response) the command under this key. FY011 if the key was used with another request digest, FY010 while a committed begin holds a live lock; an expired lock is taken over with the last recovery point and a new, greater attempt number (attempt numbers are never reused). Inside a transaction a concurrent duplicate waits for the first and then replays (or proceeds if it rolled back).';

CREATE FUNCTION forgeyard.idem_checkpoint(tenant text, scope text, key text, recovery_point text,
                                          attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Records the recovery point and extends the lock (and the retention to at least the lock).
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_scope text := forgeyard_pl.name_arg('scope', scope, 256);
    t_key text := forgeyard_pl.name_arg('key', key, 256);
    point text := forgeyard_pl.text_arg('recovery_point', recovery_point, 65536);
    t_attempt bigint := attempt;
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    UPDATE forgeyard.idempotency_keys i
       SET recovery_point = point,
           locked_until = now_at + (i.lock_usecs * '00:00:00.000001'::interval),
           expires_at = GREATEST(i.expires_at, now_at + (i.lock_usecs * '00:00:00.000001'::interval))
     WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key AND i.status = 'in_progress'
       AND (t_attempt IS NULL OR i.attempt = t_attempt);
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.lease_idem_unchanged(t_tenant, t_scope, t_key, t_attempt, 'checkpoint');
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.idem_checkpoint(text, text, text, text, bigint) IS
  'Record the recovery point of multi-step work and extend the lock by its lock_ttl. FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_complete(tenant text, scope text, key text, response bytea,
                                        attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Stores the response; later begins replay it until the retention ends.
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_scope text := forgeyard_pl.name_arg('scope', scope, 256);
    t_key text := forgeyard_pl.name_arg('key', key, 256);
    t_response bytea := forgeyard_pl.bytea_arg('response', response, 1048576, true);
    t_attempt bigint := attempt;
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    UPDATE forgeyard.idempotency_keys i
       SET status = 'completed', response = t_response, completed_at = now_at, locked_until = now_at,
           expires_at = now_at + (i.retain_usecs * '00:00:00.000001'::interval)
     WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key AND i.status = 'in_progress'
       AND (t_attempt IS NULL OR i.attempt = t_attempt);
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.lease_idem_unchanged(t_tenant, t_scope, t_key, t_attempt, 'complete');
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.idem_complete(text, text, text, bytea, bigint) IS
  'Store the response; every later begin with the same key and digest replays it until the retention ends. FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_abandon(tenant text, scope text, key text, attempt bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Gives the key up so that the next begin starts afresh (a new attempt, no recovery point).
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_scope text := forgeyard_pl.name_arg('scope', scope, 256);
    t_key text := forgeyard_pl.name_arg('key', key, 256);
    t_attempt bigint := attempt;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    DELETE FROM forgeyard.idempotency_keys i
     WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key AND i.status = 'in_progress'
       AND (t_attempt IS NULL OR i.attempt = t_attempt);
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.lease_idem_unchanged(t_tenant, t_scope, t_key, t_attempt, 'abandon');
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.idem_abandon(text, text, text, bigint) IS
  'Give the key up: the next begin starts afresh (no recovery point, a new attempt number). FY001 for a stale attempt or a completed key; P0002 for an unknown key.';

CREATE FUNCTION forgeyard.idem_status(tenant text, scope text, key text)
    RETURNS TABLE (status text, attempt bigint, recovery_point text, locked_until timestamptz, expires_at timestamptz)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- For operators: in_progress, completed, or expired (past its retention and not under a live lock).
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_scope text := forgeyard_pl.name_arg('scope', scope, 256);
    t_key text := forgeyard_pl.name_arg('key', key, 256);
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT CASE WHEN i.expires_at <= now_at AND (i.status = 'completed' OR i.locked_until <= now_at)
                THEN 'expired' ELSE i.status END,
           i.attempt, i.recovery_point, i.locked_until, i.expires_at
      FROM forgeyard.idempotency_keys i
     WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.idem_status(text, text, text) IS
  'The state of a key for operators: in_progress, completed or expired (retention over), its attempt, recovery point, lock and expiry. No row for an unknown key.';

CREATE FUNCTION forgeyard.idem_purge(max_keys integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Keys deleted whose retention ended. Bounded; safe from several places at once.
DECLARE
    p_tenant text;
    now_at timestamptz;
BEGIN
    IF max_keys IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'max_keys must not be NULL';
    END IF;
    IF max_keys <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_keys must be positive';
    END IF;
    p_tenant := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    RETURN forgeyard_pl.lease_idem_purge(now_at, max_keys, p_tenant);
END
$fy_body$;
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
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_slots IS
  'Messages and bytes admitted into each capacity slot of a queue (producers'' side of the bound).';

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

-- Room given back while the slot's release row is held by another open transaction (or read
-- under a transaction snapshot): one row per slot and call, appended without a row lock, so an
-- ack never waits for another consumer (0.7.1). The slot's usage is its admitted count less its
-- release row and its deltas; whoever next locks the release row folds the deltas into it.
CREATE TABLE forgeyard.queue_release_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL,
    released_bytes    bigint  NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_release_deltas_slot ON forgeyard.queue_release_deltas (tenant_id, queue, slot);
COMMENT ON TABLE forgeyard.queue_release_deltas IS
  'Messages and bytes that left a capacity slot while its queue_releases row was held by another transaction: added to that row''s counts, and folded into it by the next ack that locks it.';

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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    o forgeyard.queues%ROWTYPE;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.name_arg('queue', queue, 128);
    PERFORM forgeyard_pl.queue_refuse_reserved(queue);
    PERFORM forgeyard_pl.check_tenant(tenant);
    o := forgeyard_pl.queue_defaults(tenant, queue);
    IF options IS NOT NULL THEN
        o := forgeyard_pl.queue_parse_options(options, o);
    END IF;
    IF NOT forgeyard_pl.queue_insert(tenant, queue, o) THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('queue "%s" already exists for tenant "%s"', queue, tenant),
            DETAIL = 'use forgeyard.queue_alter to change its options';
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.queue_create(text, text, jsonb) IS
  'Create a queue of the tenant. Options (each validated, 22023 naming it): max_messages, max_bytes, max_payload_bytes (64 KiB), visibility_timeout, max_attempts, backoff_base, backoff_max, ordering (none|partition), dead_letter_payload (drop|keep), retain_acked, max_dead, dead_letter_retention, dedup_window (24 h), admit_<class> percentages (bulk 70, background 80, interactive 90, realtime 95, security_control and emergency 100), notify; flow control: retry_budget, retry_budget_min, retry_budget_window, max_in_flight_per_key (not with ordering partition), fairness (true|false), aging (an interval; 0 or null: none). 42710 if it exists.';

CREATE FUNCTION forgeyard.queue_alter(tenant text, queue text, options jsonb)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    o forgeyard.queues%ROWTYPE;
    toggles_key_limit boolean;
    toggles_fairness boolean;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('options', options IS NOT NULL);
    o := forgeyard_pl.queue_parse_options(options, q);
    IF o.ordering <> q.ordering THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'queue option ordering cannot change after the queue is created';
    END IF;
    -- Setting or removing the per-key limit while messages are pending would leave their keys
    -- uncounted, or their waiting messages with nothing to promote them; setting or removing
    -- fairness, without a pass or with one the claim no longer reads. The queue's drop lock waits
    -- for open producers, which enqueued under the old options.
    toggles_key_limit := (o.max_in_flight_per_key IS NOT NULL) <> (q.max_in_flight_per_key IS NOT NULL);
    toggles_fairness := o.fairness <> q.fairness;
    IF toggles_key_limit OR toggles_fairness THEN
        PERFORM forgeyard_pl.queue_lock(q.tenant_id, q.queue, true);
        IF (SELECT u.messages FROM forgeyard_pl.queue_usage(q.tenant_id, q.queue) u) > 0 THEN
            IF toggles_fairness THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'queue option fairness can be set or removed only while the queue holds no messages';
            END IF;
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'queue option max_in_flight_per_key can be set or removed only while the queue holds no messages',
                DETAIL = 'it can be changed to another limit at any time';
        END IF;
    END IF;
    UPDATE forgeyard.queues x
       SET max_messages = o.max_messages, max_bytes = o.max_bytes, max_payload_bytes = o.max_payload_bytes,
           visibility_usecs = o.visibility_usecs, max_attempts = o.max_attempts,
           backoff_base_usecs = o.backoff_base_usecs, backoff_max_usecs = o.backoff_max_usecs, ordering = o.ordering,
           dead_letter_payload = o.dead_letter_payload, retain_acked_usecs = o.retain_acked_usecs,
           max_dead = o.max_dead, dead_retention_usecs = o.dead_retention_usecs,
           dedup_window_usecs = o.dedup_window_usecs, admit_emergency = o.admit_emergency,
           admit_security_control = o.admit_security_control, admit_realtime = o.admit_realtime,
           admit_interactive = o.admit_interactive, admit_background = o.admit_background, admit_bulk = o.admit_bulk,
           notify = o.notify, retry_budget = o.retry_budget, retry_budget_min = o.retry_budget_min,
           retry_budget_window_usecs = o.retry_budget_window_usecs, max_in_flight_per_key = o.max_in_flight_per_key,
           fairness = o.fairness, aging_usecs = o.aging_usecs
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.queue_alter(text, text, jsonb) IS
  'Change the given options of a queue (ordering cannot change; max_in_flight_per_key and fairness can be set or removed only while the queue holds no messages; the limit can be changed any time). 42704 for an unknown queue.';

CREATE FUNCTION forgeyard.queue_drop(tenant text, queue text)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The queue's producer lock first (exclusive): that waits for open producers to commit, and the
-- deletes after it then see their messages.
DECLARE
    dropped integer;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.name_arg('queue', queue, 128);
    PERFORM forgeyard_pl.queue_refuse_reserved(queue);
    PERFORM forgeyard_pl.check_tenant(tenant);
    PERFORM forgeyard_pl.queue_lock(tenant, queue, true);
    DELETE FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    GET DIAGNOSTICS dropped = ROW_COUNT;
    WITH dm AS (DELETE FROM forgeyard.messages x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         de AS (DELETE FROM forgeyard.queue_events x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         dp AS (DELETE FROM forgeyard.queue_partitions x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         ds AS (DELETE FROM forgeyard.queue_slots x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue)
    DELETE FROM forgeyard.queue_releases x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    DELETE FROM forgeyard.queue_release_deltas x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    WITH da AS (DELETE FROM forgeyard.queue_admission x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue),
         dk AS (DELETE FROM forgeyard.queue_fair_keys x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue)
    DELETE FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = tenant AND x.queue = queue_drop.queue;
    RETURN dropped > 0;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.queue_drop(text, text) IS
  'Drop a queue with its messages, dead letters and dedup events. Returns whether it existed.';

CREATE FUNCTION forgeyard.queue_list(tenant text)
    RETURNS TABLE (queue text, options jsonb) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(tenant);
    RETURN QUERY
    SELECT x.queue, jsonb_build_object(
        'max_messages', x.max_messages, 'max_bytes', x.max_bytes, 'max_payload_bytes', x.max_payload_bytes,
        'visibility_timeout', (x.visibility_usecs * '1 microsecond'::interval)::text,
        'max_attempts', x.max_attempts,
        'backoff_base', (x.backoff_base_usecs * '1 microsecond'::interval)::text,
        'backoff_max', (x.backoff_max_usecs * '1 microsecond'::interval)::text,
        'ordering', x.ordering, 'dead_letter_payload', x.dead_letter_payload,
        'retain_acked', (x.retain_acked_usecs * '1 microsecond'::interval)::text,
        'max_dead', x.max_dead,
        'dead_letter_retention', (x.dead_retention_usecs * '1 microsecond'::interval)::text,
        'dedup_window', (x.dedup_window_usecs * '1 microsecond'::interval)::text,
        'admit_emergency', x.admit_emergency, 'admit_security_control', x.admit_security_control,
        'admit_realtime', x.admit_realtime, 'admit_interactive', x.admit_interactive,
        'admit_background', x.admit_background, 'admit_bulk', x.admit_bulk, 'notify', x.notify,
        'retry_budget', x.retry_budget, 'retry_budget_min', x.retry_budget_min,
        'retry_budget_window', (x.retry_budget_window_usecs * '1 microsecond'::interval)::text,
        'max_in_flight_per_key', x.max_in_flight_per_key, 'fairness', x.fairness,
        'aging', (x.aging_usecs * '1 microsecond'::interval)::text)
      FROM forgeyard.queues x WHERE x.tenant_id = tenant ORDER BY x.queue;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.queue_list(text) IS 'The queues of a tenant with all their options.';

CREATE FUNCTION forgeyard.enqueue(tenant text, queue text, payload bytea, event_id uuid DEFAULT NULL,
                                  partition_key text DEFAULT NULL, priority text DEFAULT 'interactive',
                                  delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                  resource text DEFAULT NULL)
    RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_payload bytea;
    v_key text;
    v_priority integer;
    v_delay bigint;
    v_fkey text;
    v_resource text;
    v_now timestamptz;
    v_bytes bigint;
    v_id bigint;
    v_first bigint;
    v_slot integer;
    v_head boolean;
    v_pass bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    -- The argument checks of forgeyard_pl.bytea_arg, text_arg, name_arg, queue_priority and
    -- queue_delay_arg, called only to raise their errors.
    v_payload := payload;
    IF payload IS NULL OR octet_length(payload) > 1073741824 THEN
        PERFORM forgeyard_pl.bytea_arg('payload', payload, 1073741824);
    END IF;
    v_key := partition_key;
    IF octet_length(partition_key) > 512 THEN
        PERFORM forgeyard_pl.text_arg('partition_key', partition_key, 512);
    END IF;
    v_priority := CASE priority WHEN 'interactive' THEN 3 WHEN 'emergency' THEN 0 WHEN 'security_control' THEN 1
                                WHEN 'realtime' THEN 2 WHEN 'background' THEN 4 WHEN 'bulk' THEN 5 END;
    IF v_priority IS NULL THEN
        PERFORM forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', priority, 64));
    END IF;
    IF delay IS NOT NULL AND extract(epoch FROM delay) = 0 AND extract(day FROM delay) = 0
       AND extract(month FROM delay) = 0 AND extract(year FROM delay) = 0 THEN
        v_delay := 0;
    ELSE
        v_delay := forgeyard_pl.queue_delay_arg(delay);
    END IF;
    v_fkey := fairness_key;
    IF fairness_key = '' OR octet_length(fairness_key) > 512 THEN
        PERFORM forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    END IF;
    v_resource := resource;
    IF resource = '' OR octet_length(resource) > 512 THEN
        PERFORM forgeyard_pl.name_arg('resource', resource, 512);
    END IF;
    v_now := forgeyard.now();
    v_bytes := octet_length(v_payload);
    -- (forgeyard_pl.queue_check_message, inline)
    IF v_bytes > q.max_payload_bytes OR (q.ordering = 'partition' AND v_key IS NULL) OR v_key = '' THEN
        PERFORM forgeyard_pl.queue_check_message(q, v_bytes, v_key);
    END IF;
    v_id := nextval('forgeyard.message_ids');
    IF event_id IS NOT NULL THEN
        v_first := forgeyard_pl.queue_take_event(q, event_id, v_id, v_payload, v_now);
        IF v_first IS NOT NULL THEN
            RETURN v_first;
        END IF;
    END IF;
    v_slot := (forgeyard_pl.queue_admit(q, v_priority, v_bytes)).o_slot;
    v_head := true;
    IF q.ordering = 'partition' THEN
        v_head := forgeyard_pl.queue_join_key(q, v_key, 1) > 0;
    END IF;
    IF q.notify THEN
        PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
    END IF;
    IF q.admission_rate IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_admit_rate(q, 1, v_now);
    END IF;
    IF q.max_in_flight_per_key IS NOT NULL AND v_fkey IS NOT NULL THEN
        IF forgeyard_pl.queue_join_key(q, v_fkey, 1) < 1 THEN
            v_head := false;
        END IF;
    END IF;
    IF q.fairness THEN
        v_pass := (forgeyard_pl.queue_fair_passes(q, v_priority, v_fkey, 1))[1];
    END IF;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id, payload,
                                    bytes, slot, enqueued_at, visible_at, attempt, fairness_key, resource, pass)
    VALUES (v_id, q.tenant_id, q.queue, 'pending', v_priority, v_key, v_head, enqueue.event_id, v_payload, v_bytes, v_slot,
            v_now, CASE WHEN v_delay = 0 THEN v_now ELSE v_now + forgeyard_pl.queue_usecs_interval(v_delay) END, 0,
            v_fkey, v_resource, v_pass);
    RETURN v_id;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval, text, text) IS
  'Enqueue inside the caller''s transaction (visible to consumers after commit, gone on rollback); returns msg_id. A repeated event_id within the dedup window returns the first msg_id (even when full); with another payload FY011. fairness_key is carried with the message; resource names the downstream it will hit (its rate limit, concurrency limit and circuit breaker then govern the claim). FY020 when full for the class or over the admission limit, FY021 over max_payload_bytes, 42704 unknown queue, 22023 bad class or missing partition_key.';

CREATE FUNCTION forgeyard.enqueue_batch(tenant text, queue text, payloads bytea[], event_ids uuid[] DEFAULT NULL,
                                        partition_keys text[] DEFAULT NULL, priority text DEFAULT 'interactive',
                                        delay interval DEFAULT '0', fairness_key text DEFAULT NULL,
                                        resource text DEFAULT NULL)
    RETURNS TABLE (msg_id bigint) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- A batch keeps the slot it last locked and counts what it admits there, writing the counters once
-- (BatchAdmission): the row lock is held to commit, so no other producer admits into the slot
-- meanwhile; when the slot is full the tally is written before queue_admit reads the slots.
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_payloads bytea[];
    v_events uuid[];
    v_keys text[];
    v_priority integer;
    v_delay bigint;
    v_fkey text;
    v_resource text;
    v_now timestamptz;
    n integer;
    i integer;
    v_bytes bigint;
    v_id bigint;
    v_first bigint;
    v_slot integer;
    lim record;
    a record;
    b_slot integer := -1;
    b_base_m bigint := 0;
    b_base_b bigint := 0;
    b_pend_m bigint := 0;
    b_pend_b bigint := 0;
    b_lim_m bigint;
    b_lim_b bigint;
    ids bigint[] := '{}';
    r_index integer[] := '{}';
    r_ids bigint[] := '{}';
    r_slots integer[] := '{}';
    r_heads boolean[] := '{}';
    r_passes bigint[];
    v_visible timestamptz;
    heads bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    IF payloads IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'payloads must not be NULL';
    END IF;
    v_payloads := ARRAY(SELECT unnest(payloads));
    n := cardinality(v_payloads);
    IF event_ids IS NOT NULL THEN
        v_events := ARRAY(SELECT unnest(event_ids));
    END IF;
    IF partition_keys IS NOT NULL THEN
        v_keys := ARRAY(SELECT unnest(partition_keys));
    END IF;
    IF (v_events IS NOT NULL AND cardinality(v_events) <> n) OR (v_keys IS NOT NULL AND cardinality(v_keys) <> n) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'event_ids and partition_keys must match payloads in length';
    END IF;
    v_priority := forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', priority, 64));
    v_delay := forgeyard_pl.queue_delay_arg(delay);
    IF fairness_key IS NOT NULL THEN
        v_fkey := forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    END IF;
    IF resource IS NOT NULL THEN
        v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    END IF;
    v_now := forgeyard.now();
    IF array_position(v_payloads, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'payloads must not contain NULL';
    END IF;
    FOR i IN 1 .. n LOOP
        v_bytes := octet_length(v_payloads[i]);
        IF v_bytes > q.max_payload_bytes OR (q.ordering = 'partition' AND v_keys[i] IS NULL) OR v_keys[i] = ''
           OR octet_length(v_keys[i]) > 512 THEN
            PERFORM forgeyard_pl.queue_check_message(q, v_bytes, v_keys[i]);
        END IF;
        v_id := nextval('forgeyard.message_ids');
        IF v_events[i] IS NOT NULL THEN
            v_first := forgeyard_pl.queue_take_event(q, v_events[i], v_id, v_payloads[i], v_now);
            IF v_first IS NOT NULL THEN
                ids := ids || v_first;
                CONTINUE;
            END IF;
        END IF;
        -- admission: the slot held while the class fits there (b_lim_*: the class's limit in
        -- it), else queue_admit
        IF b_slot >= 0 AND b_base_m + b_pend_m + 1 <= b_lim_m AND b_base_b + b_pend_b + v_bytes <= b_lim_b THEN
            b_pend_m := b_pend_m + 1;
            b_pend_b := b_pend_b + v_bytes;
        ELSE
            IF b_slot >= 0 AND b_pend_m > 0 THEN
                UPDATE forgeyard.queue_slots x
                   SET admitted_messages = x.admitted_messages + b_pend_m, admitted_bytes = x.admitted_bytes + b_pend_b
                 WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = b_slot;
            END IF;
            a := forgeyard_pl.queue_admit(q, v_priority, v_bytes);
            b_slot := a.o_slot;
            b_base_m := a.o_messages + 1;
            b_base_b := a.o_bytes + v_bytes;
            b_pend_m := 0;
            b_pend_b := 0;
            lim := forgeyard_pl.queue_class_limit(q, v_priority, b_slot);
            b_lim_m := lim.messages;
            b_lim_b := lim.bytes;
        END IF;
        IF q.ordering = 'partition' THEN
            r_heads := r_heads || (forgeyard_pl.queue_join_key(q, v_keys[i], 1) > 0);
        ELSE
            r_heads := r_heads || true;
        END IF;
        r_index := r_index || i;
        r_ids := r_ids || v_id;
        r_slots := r_slots || b_slot;
        ids := ids || v_id;
        IF q.notify THEN
            PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
        END IF;
    END LOOP;
    IF b_slot >= 0 AND b_pend_m > 0 THEN
        UPDATE forgeyard.queue_slots x
           SET admitted_messages = x.admitted_messages + b_pend_m, admitted_bytes = x.admitted_bytes + b_pend_b
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = b_slot;
    END IF;
    IF q.admission_rate IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_admit_rate(q, cardinality(r_ids), v_now);
    END IF;
    -- In a queue with max_in_flight_per_key, the new messages of the call (one fairness key) join
    -- the key's row at once; the first of them up to the limit are heads, the rest wait.
    IF q.max_in_flight_per_key IS NOT NULL AND v_fkey IS NOT NULL THEN
        heads := forgeyard_pl.queue_join_key(q, v_fkey, cardinality(r_ids));
        FOR i IN heads + 1 .. cardinality(r_ids) LOOP
            r_heads[i] := false;
        END LOOP;
    END IF;
    IF q.fairness THEN
        r_passes := forgeyard_pl.queue_fair_passes(q, v_priority, v_fkey, cardinality(r_ids));
    END IF;
    v_visible := CASE WHEN v_delay = 0 THEN v_now ELSE v_now + forgeyard_pl.queue_usecs_interval(v_delay) END;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id, payload,
                                    bytes, slot, enqueued_at, visible_at, attempt, fairness_key, resource, pass)
    SELECT r.id, q.tenant_id, q.queue, 'pending', v_priority, v_keys[r.ix], r.head, v_events[r.ix], v_payloads[r.ix],
           octet_length(v_payloads[r.ix]), r.slot, v_now, v_visible, 0, v_fkey, v_resource, r_passes[r.o]
      FROM unnest(r_index, r_ids, r_heads, r_slots) WITH ORDINALITY r(ix, id, head, slot, o)
     ORDER BY r.o;
    RETURN QUERY SELECT x.id FROM unnest(ids) WITH ORDINALITY x(id, o) ORDER BY x.o;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval, text, text) IS
  'Enqueue several messages (event_ids and partition_keys, when given, parallel to payloads; one fairness_key and resource for all); msg_ids in order. All or nothing.';

CREATE FUNCTION forgeyard.claim(tenant text, queue text, consumer text, max_messages integer DEFAULT 1,
                                visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_consumer text;
    n integer;
    vis bigint;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_consumer := consumer;
    IF consumer IS NULL OR consumer = '' OR octet_length(consumer) > 256 THEN
        PERFORM forgeyard_pl.name_arg('consumer', consumer, 256);
    END IF;
    n := max_messages;
    IF max_messages IS NULL OR max_messages < 1 OR max_messages > 1000 THEN
        PERFORM forgeyard_pl.queue_max_messages_arg(max_messages);
    END IF;
    vis := CASE WHEN visibility IS NULL THEN q.visibility_usecs
                ELSE forgeyard_pl.duration_arg('visibility', visibility, 2592000000000) END;
    RETURN QUERY
    SELECT c.c_msg_id, c.c_event_id, c.c_partition_key,
           (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1],
           c.c_attempt, c.c_claim_token, c.c_payload, c.c_enqueued_at
      FROM forgeyard_pl.queue_claim(q, v_consumer, n, vis, forgeyard.now()) c
     WHERE NOT c.c_lapsed
     ORDER BY c.c_priority, c.c_order, c.c_msg_id;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.claim(text, text, text, integer, interval) IS
  'Claim up to max_messages visible messages, highest class first, then oldest, each with a new claim_token, invisible to others for visibility (default: the queue''s). Never hands one message to two claimers at once and never waits on producers (SKIP LOCKED). In partition queues only the oldest pending message of each key is claimable.';

CREATE FUNCTION forgeyard.ack_and_claim(tenant text, queue text, consumer text, msg_ids bigint[], claim_tokens bigint[],
                                        max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_consumer text;
    d record;
    n integer;
    vis bigint;
    v_now timestamptz;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_consumer := forgeyard_pl.name_arg('consumer', consumer, 256);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    n := forgeyard_pl.queue_max_messages_arg(max_messages);
    vis := forgeyard_pl.queue_visibility_arg(visibility, q.visibility_usecs);
    v_now := forgeyard.now();
    IF cardinality(d.ids) > 0 THEN
        PERFORM forgeyard_pl.queue_ack(q, d.ids, d.tokens, v_now);
    END IF;
    RETURN QUERY
    SELECT c.c_msg_id, c.c_event_id, c.c_partition_key,
           (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1],
           c.c_attempt, c.c_claim_token, c.c_payload, c.c_enqueued_at
      FROM forgeyard_pl.queue_claim(q, v_consumer, n, vis, v_now) c
     WHERE NOT c.c_lapsed
     ORDER BY c.c_priority, c.c_order, c.c_msg_id;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval) IS
  'A worker''s steady state in one round trip: ack the last batch (as ack_batch), then claim the next (as claim).';

CREATE FUNCTION forgeyard.ack(tenant text, queue text, msg_id bigint, claim_token bigint)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The ack of the current delivery in the common case (its room back to one slot, no key, no
-- resource) inline; everything else through forgeyard_pl.queue_ack (same order, same rows).
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_now timestamptz;
    r record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF msg_id IS NULL THEN
        PERFORM forgeyard_pl.not_null('msg_id', false);
    END IF;
    IF claim_token IS NULL THEN
        PERFORM forgeyard_pl.not_null('claim_token', false);
    END IF;
    v_now := forgeyard.now();
    IF q.retain_acked_usecs > 0 OR q.ordering = 'partition' OR q.max_in_flight_per_key IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_ack(q, ARRAY[msg_id], ARRAY[claim_token], v_now);
        RETURN;
    END IF;
    DELETE FROM forgeyard.messages m
     WHERE m.msg_id = ack.msg_id AND m.claim_token = ack.claim_token AND m.state = 'pending'
       AND m.tenant_id = q.tenant_id AND m.queue = q.queue
    RETURNING m.slot, m.bytes, m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
    IF NOT FOUND THEN
        -- not the current delivery: a no-op for a message already finished or gone, else FY001
        PERFORM forgeyard_pl.queue_ack(q, ARRAY[msg_id], ARRAY[claim_token], v_now);
        RETURN;
    END IF;
    IF r.resource IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_apply(q, ARRAY[r.slot::integer], ARRAY[r.bytes], ARRAY[NULL::text],
                                         ARRAY[r.resource], ARRAY[r.part], ARRAY[0], v_now);
        RETURN;
    END IF;
    PERFORM forgeyard_pl.queue_give_back_slot(q.tenant_id, q.queue, r.slot, 1, r.bytes,
        current_setting('transaction_isolation') IN ('repeatable read', 'serializable'));
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.ack(text, text, bigint, bigint) IS
  'Finish a delivery. FY001 if claim_token is not the current delivery (it was claimed again, or nacked). Accepted after the visibility ran out if nobody claimed it since. A no-op for a message already acked, dead or gone (safe to retry).';

CREATE FUNCTION forgeyard.ack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[])
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    IF cardinality(d.ids) > 0 THEN
        PERFORM forgeyard_pl.queue_ack(q, d.ids, d.tokens, forgeyard.now());
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.ack_batch(text, text, bigint[], bigint[]) IS
  'ack for each (msg_id, claim_token) pair; all or nothing (FY001 for any stale token).';

CREATE FUNCTION forgeyard.nack(tenant text, queue text, msg_id bigint, claim_token bigint, error text,
                               permanent boolean DEFAULT false)
    RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_error text;
    r record;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('msg_id', msg_id IS NOT NULL);
    PERFORM forgeyard_pl.not_null('claim_token', claim_token IS NOT NULL);
    v_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    r := forgeyard_pl.queue_nack_one(q, msg_id, claim_token, v_error, coalesce(permanent, false), forgeyard.now());
    IF r.o_slot IS NOT NULL OR r.o_resource IS NOT NULL THEN
        PERFORM forgeyard_pl.queue_apply(q,
            CASE WHEN r.o_slot IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_slot] END,
            CASE WHEN r.o_slot IS NULL THEN '{}'::bigint[] ELSE ARRAY[r.o_bytes] END,
            CASE WHEN r.o_slot IS NULL THEN '{}'::text[] ELSE ARRAY[r.o_key] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::text[] ELSE ARRAY[r.o_resource] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_part] END,
            CASE WHEN r.o_resource IS NULL THEN '{}'::integer[] ELSE ARRAY[r.o_kind] END,
            forgeyard.now());
    END IF;
    RETURN r.o_outcome;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.nack(text, text, bigint, bigint, text, boolean) IS
  'Fail a delivery: retry after exponential backoff with full jitter capped at backoff_max (returns retry), or dead-letter after max_attempts or when permanent (returns dead). FY001 for a stale claim_token.';

CREATE FUNCTION forgeyard.nack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[], error text,
                                     permanent boolean DEFAULT false)
    RETURNS TABLE (msg_id bigint, outcome text) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
    v_error text;
    v_permanent boolean;
    v_now timestamptz;
    r record;
    i integer;
    outcomes text[] := '{}';
    s_slots integer[] := '{}';
    s_bytes bigint[] := '{}';
    s_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    v_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    v_permanent := coalesce(permanent, false);
    v_now := forgeyard.now();
    FOR i IN 1 .. cardinality(d.ids) LOOP
        r := forgeyard_pl.queue_nack_one(q, d.ids[i], d.tokens[i], v_error, v_permanent, v_now);
        outcomes := outcomes || r.o_outcome;
        IF r.o_slot IS NOT NULL THEN
            s_slots := s_slots || r.o_slot;
            s_bytes := s_bytes || r.o_bytes;
            s_keys := s_keys || r.o_key;
        END IF;
        IF r.o_resource IS NOT NULL THEN
            o_res := o_res || r.o_resource;
            o_parts := o_parts || r.o_part;
            o_kinds := o_kinds || r.o_kind;
        END IF;
    END LOOP;
    IF cardinality(s_slots) > 0 OR cardinality(o_res) > 0 THEN
        PERFORM forgeyard_pl.queue_apply(q, s_slots, s_bytes, s_keys, o_res, o_parts, o_kinds, v_now);
    END IF;
    RETURN QUERY SELECT x.id, x.outcome FROM unnest(d.ids, outcomes) WITH ORDINALITY x(id, outcome, o) ORDER BY x.o;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean) IS
  'nack for each (msg_id, claim_token) pair, with each outcome; all or nothing.';

CREATE FUNCTION forgeyard.extend(tenant text, queue text, msg_id bigint, claim_token bigint, visibility interval)
    RETURNS timestamptz LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    vis bigint;
    v_now timestamptz;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    PERFORM forgeyard_pl.not_null('msg_id', msg_id IS NOT NULL);
    PERFORM forgeyard_pl.not_null('claim_token', claim_token IS NOT NULL);
    vis := forgeyard_pl.duration_arg('visibility', visibility, 2592000000000);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_extend_one(q, msg_id, claim_token, vis, v_now);
    RETURN v_now + forgeyard_pl.queue_usecs_interval(vis);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.extend(text, text, bigint, bigint, interval) IS
  'Keep a live delivery invisible for visibility from now; returns the new visible_at. FY001 if the token is stale or the visibility already ran out (the delivery lapsed).';

CREATE FUNCTION forgeyard.extend_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[],
                                       visibility interval)
    RETURNS timestamptz LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    d record;
    vis bigint;
    v_now timestamptz;
    i integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    d := forgeyard_pl.queue_deliveries_arg(msg_ids, claim_tokens);
    vis := forgeyard_pl.duration_arg('visibility', visibility, 2592000000000);
    v_now := forgeyard.now();
    FOR i IN 1 .. cardinality(d.ids) LOOP
        PERFORM forgeyard_pl.queue_extend_one(q, d.ids[i], d.tokens[i], vis, v_now);
    END LOOP;
    RETURN v_now + forgeyard_pl.queue_usecs_interval(vis);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.extend_batch(text, text, bigint[], bigint[], interval) IS
  'extend for each (msg_id, claim_token) pair; all or nothing.';

CREATE FUNCTION forgeyard.queue_stats(tenant text, queue text)
    RETURNS TABLE (ready bigint, in_flight bigint, delayed bigint, dead bigint, bytes bigint,
                   oldest_ready_age interval, pressure text, waiting bigint, retries_delayed bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_now timestamptz;
    oldest timestamptz;
    w record;
    used record;
    fill double precision;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_now := forgeyard.now();
    SELECT count(*) FILTER (WHERE m.state = 'pending' AND m.visible_at <= v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NULL AND m.visible_at > v_now),
           count(*) FILTER (WHERE m.state = 'dead'),
           min(m.enqueued_at) FILTER (WHERE m.state = 'pending' AND m.visible_at <= v_now),
           count(*) FILTER (WHERE m.state = 'pending' AND NOT m.is_head AND m.visible_at <= v_now)
      INTO ready, in_flight, delayed, dead, oldest, waiting
      FROM forgeyard.messages m WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue;
    retries_delayed := 0;
    IF q.retry_budget IS NOT NULL THEN
        SELECT x.window_start, x.delayed AS n INTO w FROM forgeyard.queue_retry_windows x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
        IF FOUND AND v_now >= w.window_start
           AND forgeyard_pl.usecs(v_now) < forgeyard_pl.usecs(w.window_start) + q.retry_budget_window_usecs THEN
            retries_delayed := w.n;
        END IF;
    END IF;
    used := forgeyard_pl.queue_usage(q.tenant_id, q.queue);
    bytes := used.bytes;
    oldest_ready_age := CASE WHEN oldest IS NULL THEN NULL
                             ELSE forgeyard_pl.queue_usecs_interval(forgeyard_pl.usecs(v_now) - forgeyard_pl.usecs(oldest)) END;
    fill := greatest(used.messages::double precision / q.max_messages::double precision,
                     used.bytes::double precision / q.max_bytes::double precision);
    pressure := CASE WHEN fill < 0.70 THEN 'normal' WHEN fill <= 0.90 THEN 'elevated' ELSE 'saturated' END;
    RETURN NEXT;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.queue_stats(text, text) IS
  'Depth of a queue: ready (visible), in flight, delayed, dead; bytes admitted; age of the oldest ready message; pressure (normal below 70% of a limit, elevated to 90%, saturated above); waiting: of the ready, those held behind their key (a later message of an ordered partition, or a key at max_in_flight_per_key); retries_delayed: retries the retry budget delayed in its current window.';

CREATE FUNCTION forgeyard.dead_list(tenant text, queue text, after_msg_id bigint DEFAULT 0, max_rows integer DEFAULT 100)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer, error text,
                   error_class text, dead_at timestamptz, payload bytea)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    after bigint;
    lim integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    after := coalesce(after_msg_id, 0);
    lim := forgeyard_pl.queue_positive_int_arg('max_rows', max_rows, 10000);
    RETURN QUERY
    SELECT x.msg_id, x.event_id, x.partition_key, forgeyard_pl.queue_priority_name(x.priority), x.attempt, x.last_error,
           x.error_class, x.finished_at, x.payload
      FROM forgeyard.messages x
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead' AND x.msg_id > after
     ORDER BY x.msg_id LIMIT lim;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.dead_list(text, text, bigint, integer) IS
  'Dead letters in msg_id order after after_msg_id (keyset pagination). payload is NULL unless the queue keeps it.';

CREATE FUNCTION forgeyard.dead_redrive(tenant text, queue text, msg_ids bigint[] DEFAULT NULL, max_rows integer DEFAULT 100)
    RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Dead letters back into the queue (attempt 0, visible now, admitted like new messages: FY020 when
-- full). Without msg_ids, the oldest max_rows that kept their payload; a listed one without
-- payload is 22023. The rows are locked (in msg_id order) before any is admitted.
DECLARE
    q forgeyard.queues%ROWTYPE;
    ids bigint[];
    lim integer;
    v_now timestamptz;
    d_ids bigint[];
    d_priorities integer[];
    d_bytes bigint[];
    d_keys text[];
    d_kept boolean[];
    d_fairness text[];
    v_slot integer;
    v_head boolean;
    v_pass bigint;
    i integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue, true);
    lim := forgeyard_pl.queue_positive_int_arg('max_rows', max_rows, 10000);
    v_now := forgeyard.now();
    ids := msg_ids;
    SELECT coalesce(array_agg(d.msg_id ORDER BY d.msg_id), '{}'), array_agg(d.priority ORDER BY d.msg_id),
           array_agg(d.bytes ORDER BY d.msg_id), array_agg(d.partition_key ORDER BY d.msg_id),
           array_agg(d.kept ORDER BY d.msg_id), array_agg(d.fairness_key ORDER BY d.msg_id)
      INTO d_ids, d_priorities, d_bytes, d_keys, d_kept, d_fairness
      FROM (SELECT x.msg_id, x.priority::integer AS priority, x.bytes, x.partition_key, x.payload IS NOT NULL AS kept,
                   x.fairness_key
              FROM forgeyard.messages x
             WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead'
               AND (ids IS NULL OR x.msg_id = ANY (ids)) AND (ids IS NOT NULL OR x.payload IS NOT NULL)
             ORDER BY x.msg_id LIMIT CASE WHEN ids IS NULL THEN lim ELSE cardinality(ids) END
             FOR UPDATE OF x) d;
    FOR i IN 1 .. cardinality(d_ids) LOOP
        IF NOT d_kept[i] THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('dead letter %s cannot be redriven: its payload was dropped', d_ids[i]),
                DETAIL = 'the queue has dead_letter_payload = drop';
        END IF;
        v_slot := (forgeyard_pl.queue_admit(q, d_priorities[i], d_bytes[i])).o_slot;
        v_head := forgeyard_pl.queue_join_key(q,
            CASE WHEN q.ordering = 'partition' THEN d_keys[i]
                 WHEN q.max_in_flight_per_key IS NOT NULL THEN d_fairness[i] END, 1) > 0;
        -- (Its pass is taken while it is still dead, so that it is not its own class's lowest.)
        v_pass := CASE WHEN q.fairness THEN (forgeyard_pl.queue_fair_passes(q, d_priorities[i], d_fairness[i], 1))[1] END;
        UPDATE forgeyard.messages x
           SET state = 'pending', attempt = 0, claim_token = NULL, claimed_by = NULL, visible_at = v_now,
               finished_at = NULL, error_class = NULL, slot = v_slot, is_head = v_head, pass = v_pass
         WHERE x.msg_id = d_ids[i];
    END LOOP;
    RETURN cardinality(d_ids);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.dead_redrive(text, text, bigint[], integer) IS
  'Put dead letters back in the queue (attempt 0, visible now, admitted like new messages: FY020 when full). Without msg_ids: the oldest max_rows that kept their payload. 22023 for a listed one whose payload was dropped.';

CREATE FUNCTION forgeyard.dead_purge(tenant text, queue text, msg_ids bigint[] DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    ids bigint[] := msg_ids;
    purged integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    DELETE FROM forgeyard.messages x
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.state = 'dead' AND (ids IS NULL OR x.msg_id = ANY (ids));
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.dead_purge(text, text, bigint[]) IS
  'Delete the listed dead letters of a queue (all of them without msg_ids); returns how many.';

CREATE FUNCTION forgeyard.claim_plan(tenant text, queue text)
    RETURNS TABLE (plan text) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- EXPLAIN of the claim statement as a generic plan (its tenant and queue stay parameters), planned
-- with sequential scans ruled out, as the C++ edition plans the statement it keeps for this.
DECLARE
    q forgeyard.queues%ROWTYPE;
    seqscan text := current_setting('enable_seqscan');
    mode text := current_setting('plan_cache_mode');
    line text;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF EXISTS (SELECT FROM pg_prepared_statements s WHERE s.name = 'forgeyard_pl_claim_plan') THEN
        DEALLOCATE forgeyard_pl_claim_plan;
    END IF;
    EXECUTE 'PREPARE forgeyard_pl_claim_plan(pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz, pg_catalog.text,'
            ' pg_catalog.timestamptz) AS ' || forgeyard_pl.queue_claim_sql(10);
    BEGIN
        PERFORM set_config('enable_seqscan', 'off', true);
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
        FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) EXECUTE forgeyard_pl_claim_plan(%L, %L, %L, %L, %L)',
                                   q.tenant_id, q.queue, forgeyard.now(), '', forgeyard.now()) LOOP
            plan := line;
            RETURN NEXT;
        END LOOP;
        PERFORM set_config('enable_seqscan', seqscan, true);
        PERFORM set_config('plan_cache_mode', mode, true);
    EXCEPTION WHEN OTHERS THEN
        DEALLOCATE forgeyard_pl_claim_plan;
        RAISE;
    END;
    DEALLOCATE forgeyard_pl_claim_plan;
END
$fy_body$;
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
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Inside the consumer's transaction: if it rolls back, the event was never accepted.
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.name_arg('consumer', consumer, 256);
    PERFORM forgeyard_pl.not_null('event_id', event_id IS NOT NULL);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(tenant);
    INSERT INTO forgeyard.inbox (tenant_id, consumer, event_id, accepted_at)
    VALUES (tenant, inbox_accept.consumer, inbox_accept.event_id, v_now)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.inbox_accept(text, text, uuid) IS
  'Inside the consumer''s transaction: true the first time (do the effect), false for every duplicate (skip it).';

CREATE FUNCTION forgeyard.inbox_purge(older_than interval DEFAULT '7 days', max_rows integer DEFAULT 10000,
                                      tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    older bigint;
    v_now timestamptz;
BEGIN
    older := forgeyard_pl.duration_arg('older_than', older_than, 31536000000000);
    PERFORM forgeyard_pl.not_null('max_rows', max_rows IS NOT NULL);
    IF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_rows must be positive';
    END IF;
    PERFORM forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(tenant);
    RETURN forgeyard_pl.queue_purge_inbox(v_now - forgeyard_pl.queue_usecs_interval(older), max_rows, tenant);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.inbox_purge(interval, integer, text) IS
  'Maintenance: delete up to max_rows inbox entries accepted more than older_than ago; tenant NULL = all tenants.';

-------------------------------------------------------------------------------------------------
-- Maintenance
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.maintain(max_rows integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS TABLE (task text, "rows" bigint) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- One bounded pass of every clean-up, and the runs of due workflow schedules started. Leases are
-- not reaped here: lease_reap hands each expired grant to its reconciler once.
DECLARE
    v_now timestamptz;
    n_keys bigint;
    n_events bigint;
    n_acked bigint;
    n_dead bigint;
    n_inbox bigint;
    n_runs bigint;
    n_schedules bigint;
    n_deltas bigint := 0;
BEGIN
    PERFORM forgeyard_pl.not_null('max_rows', max_rows IS NOT NULL);
    IF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_rows must be positive';
    END IF;
    PERFORM forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(tenant);
    -- idempotency keys whose retention ended (as idem_purge)
    DELETE FROM forgeyard.idempotency_keys i USING (
        SELECT e.tenant_id, e.scope, e.key FROM forgeyard.idempotency_keys e
         WHERE e.expires_at <= v_now AND (e.status = 'completed' OR e.locked_until <= v_now)
           AND (tenant IS NULL OR e.tenant_id = tenant)
         ORDER BY e.expires_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE i.tenant_id = d.tenant_id AND i.scope = d.scope AND i.key = d.key;
    GET DIAGNOSTICS n_keys = ROW_COUNT;
    -- queue dedup events past their window
    DELETE FROM forgeyard.queue_events v USING (
        SELECT e.tenant_id, e.queue, e.event_id FROM forgeyard.queue_events e
         WHERE e.expires_at <= v_now AND (tenant IS NULL OR e.tenant_id = tenant)
         ORDER BY e.expires_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE v.tenant_id = d.tenant_id AND v.queue = d.queue AND v.event_id = d.event_id;
    GET DIAGNOSTICS n_events = ROW_COUNT;
    -- acked messages kept for retain_acked, past it
    DELETE FROM forgeyard.messages m USING (
        SELECT a.msg_id FROM forgeyard.messages a JOIN forgeyard.queues x
            ON x.tenant_id = a.tenant_id AND x.queue = a.queue
         WHERE a.state = 'acked' AND a.finished_at <= (v_now - (x.retain_acked_usecs * '1 microsecond'::interval))
           AND (tenant IS NULL OR a.tenant_id = tenant)
         LIMIT max_rows FOR UPDATE OF a SKIP LOCKED) d
     WHERE m.msg_id = d.msg_id;
    GET DIAGNOSTICS n_acked = ROW_COUNT;
    -- dead letters past their retention, and the oldest beyond each queue's max_dead
    DELETE FROM forgeyard.messages m USING (
        SELECT y.msg_id FROM (
            SELECT a.msg_id, a.finished_at, x.dead_retention_usecs, x.max_dead,
                   row_number() OVER (PARTITION BY a.tenant_id, a.queue ORDER BY a.msg_id DESC) AS newest
              FROM forgeyard.messages a JOIN forgeyard.queues x ON x.tenant_id = a.tenant_id AND x.queue = a.queue
             WHERE a.state = 'dead' AND (tenant IS NULL OR a.tenant_id = tenant)) y
         WHERE y.newest > y.max_dead
            OR y.finished_at <= (v_now - (y.dead_retention_usecs * '1 microsecond'::interval))
         LIMIT max_rows) d
     WHERE m.msg_id = d.msg_id AND m.state = 'dead';
    GET DIAGNOSTICS n_dead = ROW_COUNT;
    -- inbox entries older than 7 days
    n_inbox := forgeyard_pl.queue_purge_inbox(v_now - interval '168 hours', max_rows, tenant);
    -- finished workflow runs past their retention, with their journals, signals and cursors
    WITH d AS (
        SELECT r.tenant_id, r.run_id FROM forgeyard.wf_runs r
         WHERE r.purge_at <= v_now AND (tenant IS NULL OR r.tenant_id = tenant)
         ORDER BY r.purge_at LIMIT max_rows FOR UPDATE SKIP LOCKED),
     j AS (DELETE FROM forgeyard.wf_journal x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id),
     s AS (DELETE FROM forgeyard.wf_signals x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id),
     c AS (DELETE FROM forgeyard.wf_cursors x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id)
    DELETE FROM forgeyard.wf_runs x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id;
    GET DIAGNOSTICS n_runs = ROW_COUNT;
    -- the runs of the due workflow schedules started (schedule::tick, extension/schedule.sql)
    n_schedules := forgeyard_pl.workflow_schedule_tick(tenant, v_now);
    -- release deltas folded into their release rows (not under a transaction snapshot, where a row
    -- changed since would be 40001): up to max_rows release rows that have deltas, each locked
    -- SKIP LOCKED (a row an ack holds is left to it), its deltas deleted and added to it
    IF NOT forgeyard_pl.queue_own_snapshot() THEN
        WITH r AS (SELECT x.tenant_id, x.queue, x.slot FROM forgeyard.queue_releases x
                    WHERE (tenant IS NULL OR x.tenant_id = tenant)
                      AND EXISTS (SELECT 1 FROM forgeyard.queue_release_deltas y
                                   WHERE y.tenant_id = x.tenant_id AND y.queue = x.queue AND y.slot = x.slot)
                    LIMIT max_rows FOR NO KEY UPDATE SKIP LOCKED),
             d AS (DELETE FROM forgeyard.queue_release_deltas y USING r
                    WHERE y.tenant_id = r.tenant_id AND y.queue = r.queue AND y.slot = r.slot
                   RETURNING y.tenant_id, y.queue, y.slot, y.released_messages, y.released_bytes),
             s AS (SELECT d.tenant_id, d.queue, d.slot, sum(d.released_messages)::bigint AS m,
                          sum(d.released_bytes)::bigint AS b, count(*) AS n
                     FROM d GROUP BY d.tenant_id, d.queue, d.slot),
             u AS (UPDATE forgeyard.queue_releases x
                      SET released_messages = x.released_messages + s.m, released_bytes = x.released_bytes + s.b
                     FROM s WHERE x.tenant_id = s.tenant_id AND x.queue = s.queue AND x.slot = s.slot)
        SELECT COALESCE(sum(s.n), 0)::bigint INTO n_deltas FROM s;
    END IF;
    RETURN QUERY VALUES ('idempotency_keys'::text, n_keys), ('queue_events', n_events), ('acked_messages', n_acked),
                        ('dead_letters', n_dead), ('inbox', n_inbox), ('workflow_runs', n_runs),
                        ('schedules', n_schedules), ('release_deltas', n_deltas);
END
$fy_body$;
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
    LANGUAGE plpgsql
    AS $fy_body$
-- Trigger on audit_events: the log is append-only for every role.
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FY030',
        -- (no pinned search_path here: the operator is named in full)
        MESSAGE = pg_catalog.format('forgeyard.audit_events is append-only: %s is not allowed', TG_OP),
        DETAIL = 'audit events are never changed or removed; append a correcting event instead';
END
$fy_body$;
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
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
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
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'actor must not be NULL';
    END IF;
    IF action IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'action must not be NULL';
    END IF;
    IF resource IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'resource must not be NULL';
    END IF;
    IF details IS NOT NULL THEN
        d := forgeyard_pl.audit_details(details);
    END IF;
    IF actor = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'actor must not be empty';
    END IF;
    IF action = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'action must not be empty';
    END IF;
    IF resource = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'resource must not be empty';
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
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload_ref must not be empty';
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
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_append(text, text, text, text, jsonb, bytea, text, timestamptz, uuid) IS
  'Append one event to the tenant''s audit chain; returns its seq (gap-free from 1) and hash. details: a JSON object of at most 64 KiB in canonical form (large payloads go elsewhere: pass their payload_digest and payload_ref). occurred_at defaults to the time of recording. event_id (default: a new UUID) makes a retry safe: an event_id already in the chain with the same contents returns its seq and hash; with other contents it is FY011.';

CREATE FUNCTION forgeyard.audit_append_batch(tenant text, actors text[], actions text[], resources text[],
                                             details jsonb[] DEFAULT NULL, payload_digests bytea[] DEFAULT NULL,
                                             payload_refs text[] DEFAULT NULL, occurred_ats timestamptz[] DEFAULT NULL,
                                             event_ids uuid[] DEFAULT NULL)
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
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
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'actors must not be NULL';
    END IF;
    IF actions IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'actions must not be NULL';
    END IF;
    IF resources IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'resources must not be NULL';
    END IF;
    n := pg_catalog.cardinality(actors);
    IF n > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a batch holds at most 1000 events';
    END IF;
    IF pg_catalog.cardinality(actions) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'actions must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(resources) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'resources must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(details) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'details must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(payload_digests) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'payload_digests must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(payload_refs) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload_refs must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(occurred_ats) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'occurred_ats must have as many elements as actors';
    END IF;
    IF pg_catalog.cardinality(event_ids) <> n THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'event_ids must have as many elements as actors';
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
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'payload_digests must not contain an empty digest';
        END IF;
        IF actors[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'actors must not contain NULL';
        END IF;
        IF actions[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'actions must not contain NULL';
        END IF;
        IF resources[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'resources must not contain NULL';
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
            RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'payload_digest is longer than 64 bytes';
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
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_append_batch(text, text[], text[], text[], jsonb[], bytea[], text[], timestamptz[], uuid[]) IS
  'Append up to 1000 events in order (the optional arrays, when given, parallel to actors; their elements may be NULL); returns (seq, hash) per event, in order. All or nothing.';

CREATE FUNCTION forgeyard.audit_head(tenant text)
    RETURNS TABLE (seq bigint, hash bytea) LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
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
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_head(text) IS
  'The last seq and hash of the tenant''s chain ((0, 32 zero bytes) when it is empty). Store it outside the database as an anchor for audit_verify: it detects a cut tail and a rewritten chain.';

CREATE FUNCTION forgeyard.audit_verify(tenant text, from_seq bigint DEFAULT 1, to_seq bigint DEFAULT NULL,
                                       anchor_seq bigint DEFAULT NULL, anchor_hash bytea DEFAULT NULL)
    RETURNS TABLE (ok boolean, checked bigint, first_bad_seq bigint, reason text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
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
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'from_seq must not be NULL';
    END IF;
    PERFORM forgeyard_pl.bytea_arg('anchor_hash', anchor_hash, 1024, true);
    IF (anchor_seq IS NULL) <> (anchor_hash IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'anchor_seq and anchor_hash must be given together';
    END IF;
    -- core::check_verify_range
    IF from_seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'from_seq must be at least 1';
    END IF;
    IF to_seq < from_seq THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'to_seq must not be below from_seq';
    END IF;
    IF anchor_seq IS NOT NULL THEN
        IF pg_catalog.length(anchor_hash) <> 32 THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'anchor_hash must be 32 bytes';
        END IF;
        IF anchor_seq < from_seq OR anchor_seq > to_seq THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
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
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_verify(text, bigint, bigint, bigint, bytea) IS
  'Recompute the tenant''s chain from from_seq to to_seq (default: its head): every seq present, every prev_hash the hash before it, every hash its contents''. Names the first bad seq and why. With an anchor (seq and hash from audit_head, kept elsewhere) also reports a tail cut below the anchor or a chain rewritten up to it. A chain starting after seq 1 links to the stored hash of event from_seq - 1.';

CREATE FUNCTION forgeyard.audit_read(tenant text, from_seq bigint DEFAULT 1, max_events integer DEFAULT 1000)
    RETURNS TABLE (seq bigint, event_id uuid, occurred_at timestamptz, recorded_at timestamptz, actor text, action text,
                   resource text, details jsonb, payload_digest bytea, payload_ref text, prev_hash bytea, hash bytea)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
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
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'from_seq must not be NULL';
    END IF;
    IF max_events IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'max_events must not be NULL';
    END IF;
    IF from_seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'from_seq must be at least 1';
    END IF;
    IF max_events < 1 OR max_events > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_events must be between 1 and 10000';
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
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_read(text, bigint, integer) IS
  'Up to max_events (at most 10000) events of the tenant''s chain from from_seq on, in seq order (keyset pagination for tail and export). Returns fewer once the rows hold 8 MiB of details: continue from the last seq + 1 until a call returns no row.';

CREATE FUNCTION forgeyard.audit_hash(tenant text, seq bigint, event_id uuid, occurred_at timestamptz,
                                     recorded_at timestamptz, actor text, action text, resource text, details jsonb,
                                     payload_digest bytea, payload_ref text, prev_hash bytea)
    RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    d text;
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    IF seq IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'seq must not be NULL';
    END IF;
    IF seq < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'seq must be at least 1';
    END IF;
    IF event_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'event_id must not be NULL';
    END IF;
    IF occurred_at IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'occurred_at must not be NULL';
    END IF;
    IF recorded_at IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'recorded_at must not be NULL';
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
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'prev_hash must be 32 bytes';
    END IF;
    IF payload_ref = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload_ref must not be empty';
    END IF;
    RETURN forgeyard_pl.audit_event_hash(tenant, seq, event_id, occurred_at, recorded_at, actor, action, resource, d,
                                         payload_digest, payload_ref, prev_hash);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.audit_hash(text, bigint, uuid, timestamptz, timestamptz, text, text, text, jsonb, bytea, text, bytea) IS
  'The hash an event with these fields gets: SHA-256(canonical(event) || prev_hash), the function audit_append and audit_verify use. For checking the encoding against the shipped test vectors.';

CREATE FUNCTION forgeyard.audit_canonical_details(details jsonb)
    RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        PERFORM forgeyard_pl.audit_not_utf8();
    END IF;
    IF details IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'details must not be NULL';
    END IF;
    RETURN forgeyard_pl.audit_details(details);
END
$fy_body$;
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
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
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
    LANGUAGE plpgsql VOLATILE
    AS $fy_body$
-- The arguments are checked in the C++ order (message first); the error is what invoke() makes of
-- the exception: the code when it is a SQLSTATE PostgreSQL can carry (five of 0-9 A-Z, not class
-- 00), else XX000; a NULL sqlstate is a plain std::runtime_error (XX000, no detail).
DECLARE
    msg pg_catalog.text := 'boom';
    code pg_catalog.text := $1;
BEGIN
    IF $2 IS NOT NULL THEN
        IF $2 OPERATOR(pg_catalog.=) '' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'message must not be empty';
        END IF;
        IF pg_catalog.octet_length($2) OPERATOR(pg_catalog.>) 1000 THEN
            RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'message is longer than 1000 bytes',
                DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length($2));
        END IF;
        msg := $2;
    END IF;
    IF code IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = msg;
    END IF;
    IF code OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'sqlstate must not be empty';
    END IF;
    IF pg_catalog.octet_length(code) OPERATOR(pg_catalog.>) 5 THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'sqlstate is longer than 5 bytes',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length(code));
    END IF;
    IF code OPERATOR(pg_catalog.!~) '^[0-9A-Z]{5}$' OR pg_catalog.starts_with(code, '00') THEN
        code := 'XX000';
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg, DETAIL = 'raised by forgeyard.boundary_throw';
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.boundary_throw(text, text) IS
  'Test probe: throws a C++ exception with this SQLSTATE (NULL: a plain std::runtime_error) to prove it surfaces as a clean ERROR.';

CREATE FUNCTION forgeyard.boundary_pg_error(sql text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    AS $fy_body$
-- Runs sql with the caller's rights (the declaration is not SECURITY DEFINER) as one SPI_execute,
-- as Spi::run_once does: the row count of its last statement; an error comes back unchanged.
-- Transaction control and COPY to or from the client: 0A000, PL/pgSQL's own refusal, as the C++
-- edition answers SPI_execute's. One difference remains: PL/pgSQL's EXECUTE refuses a string
-- whose last statement is SELECT ... INTO (0A000), which SPI_execute runs.
DECLARE
    n pg_catalog.int8;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'sql must not be NULL';
    END IF;
    IF $1 OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'sql must not be empty';
    END IF;
    IF pg_catalog.octet_length($1) OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'sql is longer than 10000 bytes',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length($1));
    END IF;
    EXECUTE $1;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fy_body$;
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
CREATE FUNCTION forgeyard.invalidate_caches() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    RETURN NULL;
END
$fy_body$;
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


-- Operations: storage_stats() feeds `storage stats`, `storage status`, `storage doctor` and
-- `forgeyard metrics` (docs/operations.md, "Stats and metrics"). One long, narrow result so the
-- client reads every figure in one round trip: (kind, tenant_id, name, state, value). jit is off
-- for it: its one large statement costs enough to be JIT-compiled, which took seconds for a
-- query that runs in milliseconds.
CREATE FUNCTION forgeyard.storage_stats(tenant text DEFAULT NULL)
    RETURNS TABLE (kind text, tenant_id text, name text, state text, value bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    AS $fy_body$
-- The one statement of extension/operations.cpp, with $1 = tenant_arg and $2 = clock. Its column
-- references are all qualified, so the OUT columns (kind, tenant_id, name, state, value) never
-- stand for them.
DECLARE
    tenant_arg text := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    clock timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(tenant_arg);
    RETURN QUERY
WITH queues AS (
    SELECT q.tenant_id, q.queue, q.max_messages, st.*,
           (SELECT pg_catalog.count(*) FROM forgeyard.messages m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND m.queue OPERATOR(pg_catalog.=) q.queue
               AND m.state OPERATOR(pg_catalog.=) 'pending'
               AND (m.attempt OPERATOR(pg_catalog.>) 1
                    OR (m.attempt OPERATOR(pg_catalog.=) 1
                        AND (m.claim_token IS NULL OR m.visible_at OPERATOR(pg_catalog.<=) clock)))) AS retrying,
           (SELECT pg_catalog.count(*) FROM forgeyard.messages m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND m.queue OPERATOR(pg_catalog.=) q.queue
               AND m.state OPERATOR(pg_catalog.=) 'dead'
               AND m.finished_at OPERATOR(pg_catalog.>) (clock OPERATOR(pg_catalog.-) interval '1 hour')) AS dead_last_hour
      FROM forgeyard.queues q, LATERAL forgeyard.queue_stats(q.tenant_id, q.queue) st
     WHERE tenant_arg IS NULL OR q.tenant_id OPERATOR(pg_catalog.=) tenant_arg
), tenants AS (
    SELECT t.tenant_id FROM (
        SELECT l.tenant_id FROM forgeyard.leases l UNION SELECT k.tenant_id FROM forgeyard.idempotency_keys k
        UNION SELECT h.tenant_id FROM forgeyard.audit_heads h) t
     WHERE tenant_arg IS NULL OR t.tenant_id OPERATOR(pg_catalog.=) tenant_arg
), everything AS (
    SELECT tenant_arg IS NULL AS yes
)
SELECT 'database', NULL::pg_catalog.text, pg_catalog.current_database()::pg_catalog.text, 'bytes',
       pg_catalog.pg_database_size(pg_catalog.current_database())
  FROM everything WHERE everything.yes
UNION ALL
SELECT 'table', NULL, t.relname, v.state, v.value
  FROM everything e,
       (SELECT cl.relname::pg_catalog.text AS relname, s.n_live_tup, s.n_dead_tup,
               pg_catalog.pg_total_relation_size(cl.oid) AS bytes,
               CASE WHEN 'autovacuum_enabled=false' OPERATOR(pg_catalog.=) ANY (coalesce(cl.reloptions, '{}'))
                    THEN 0 ELSE 1 END AS autovacuum
          FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) cl.oid
         WHERE cl.relnamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace
           AND cl.relkind OPERATOR(pg_catalog.=) 'r') t,
       LATERAL (VALUES ('rows', t.n_live_tup), ('dead_rows', t.n_dead_tup), ('bytes', t.bytes),
                       ('autovacuum', t.autovacuum::pg_catalog.int8)) v(state, value)
 WHERE e.yes
UNION ALL
SELECT 'server', NULL, NULL, 'autovacuum',
       CASE WHEN pg_catalog.current_setting('autovacuum')::pg_catalog.bool THEN 1 ELSE 0 END
  FROM everything WHERE everything.yes
UNION ALL
(SELECT 'server', NULL, 'pid ' OPERATOR(pg_catalog.||) a.pid OPERATOR(pg_catalog.||) ' ('
                        OPERATOR(pg_catalog.||) coalesce(a.usename::pg_catalog.text, '?') OPERATOR(pg_catalog.||) ', '
                        OPERATOR(pg_catalog.||) coalesce(a.state, '?') OPERATOR(pg_catalog.||) ')',
        'oldest_transaction_usecs',
        (EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start)
         OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8
   FROM pg_catalog.pg_stat_activity a, everything e
  WHERE e.yes AND a.xact_start IS NOT NULL AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
  ORDER BY a.xact_start LIMIT 1)
UNION ALL
SELECT 'server', NULL, s.slot_name::pg_catalog.text, 'slot_xmin_age',
       GREATEST(pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin))::pg_catalog.int8
  FROM pg_catalog.pg_replication_slots s, everything e
 WHERE e.yes AND (s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL)
UNION ALL
SELECT 'queue', q.tenant_id, q.queue, v.state, v.value
  FROM queues q,
       LATERAL (VALUES ('ready', q.ready), ('in_flight', q.in_flight), ('delayed', q.delayed), ('dead', q.dead),
                       ('bytes', q.bytes), ('max_messages', q.max_messages), ('retrying', q.retrying),
                       ('dead_last_hour', q.dead_last_hour),
                       ('oldest_ready_age_usecs',
                        (EXTRACT(epoch FROM q.oldest_ready_age) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8),
                       ('pressure', CASE q.pressure WHEN 'normal' THEN 0 WHEN 'elevated' THEN 1 ELSE 2 END::pg_catalog.int8),
                       -- Read by name: a catalog before 0.7.0's update has no such columns (NULL, no row).
                       ('waiting', (pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.->>) 'waiting')::pg_catalog.int8),
                       ('retries_delayed',
                        (pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.->>) 'retries_delayed')::pg_catalog.int8))
           v(state, value)
 WHERE v.value IS NOT NULL
UNION ALL
SELECT 'leases', t.tenant_id, NULL, v.state, v.value
  FROM tenants t,
       LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) clock) AS live,
                       pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.<=) clock) AS expired
                  FROM forgeyard.leases l
                 WHERE l.tenant_id OPERATOR(pg_catalog.=) t.tenant_id AND l.released_at IS NULL
                   AND l.reaped_at IS NULL) n,
       LATERAL (VALUES ('live', n.live), ('expired', n.expired)) v(state, value)
UNION ALL
SELECT 'idempotency', t.tenant_id, NULL, v.state, v.value
  FROM tenants t,
       LATERAL (SELECT pg_catalog.count(*) FILTER (WHERE k.status OPERATOR(pg_catalog.=) 'in_progress') AS in_progress,
                       pg_catalog.count(*) FILTER (WHERE k.status OPERATOR(pg_catalog.=) 'completed') AS completed,
                       pg_catalog.count(*) FILTER (WHERE k.expires_at OPERATOR(pg_catalog.<=) clock
                           AND (k.status OPERATOR(pg_catalog.=) 'completed'
                                OR k.locked_until OPERATOR(pg_catalog.<=) clock)) AS past_retention
                  FROM forgeyard.idempotency_keys k WHERE k.tenant_id OPERATOR(pg_catalog.=) t.tenant_id) n,
       LATERAL (VALUES ('in_progress', n.in_progress), ('completed', n.completed),
                       ('past_retention', n.past_retention)) v(state, value)
UNION ALL
SELECT 'workflow', r.tenant_id, r.workflow OPERATOR(pg_catalog.||) '@' OPERATOR(pg_catalog.||) r.version::pg_catalog.text,
       r.state, pg_catalog.count(*)
  FROM forgeyard.wf_runs r
 WHERE tenant_arg IS NULL OR r.tenant_id OPERATOR(pg_catalog.=) tenant_arg
 GROUP BY r.tenant_id, r.workflow, r.version, r.state
UNION ALL
SELECT 'audit', t.tenant_id, NULL, 'events', coalesce(h.seq, 0)
  FROM tenants t LEFT JOIN forgeyard.audit_heads h ON h.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
UNION ALL
SELECT 'security', NULL,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
            ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
       'table_privilege', pg_catalog.count(*)
  FROM pg_catalog.pg_class cl, pg_catalog.aclexplode(cl.relacl) a, everything e
 WHERE e.yes AND cl.relnamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace
   AND cl.relkind IN ('r', 'p') AND a.grantee OPERATOR(pg_catalog.<>) cl.relowner
   AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.oid OPERATOR(pg_catalog.=) a.grantee AND r.rolsuper)
 GROUP BY a.grantee
UNION ALL
SELECT 'security', NULL, a.role_id::pg_catalog.text, 'unbound_usage', 1
  FROM forgeyard.role_access a, everything e
 WHERE e.yes AND a.access OPERATOR(pg_catalog.=) 'usage'
   AND EXISTS (SELECT 1 FROM forgeyard.tenant_bindings)
   AND NOT EXISTS (SELECT 1 FROM forgeyard.role_access m
                    WHERE m.role_id OPERATOR(pg_catalog.=) a.role_id AND m.access OPERATOR(pg_catalog.=) 'maintenance')
   AND NOT EXISTS (SELECT 1 FROM forgeyard.tenant_bindings b
                    WHERE pg_catalog.pg_has_role(a.role_id::pg_catalog.oid, b.role_id::pg_catalog.oid, 'MEMBER'))
UNION ALL
SELECT 'security', NULL, p.oid::pg_catalog.regprocedure::pg_catalog.text, 'definer_without_search_path', 1
  FROM pg_catalog.pg_proc p, everything e
 WHERE e.yes AND p.pronamespace OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace AND p.prosecdef
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) s(setting)
                    WHERE pg_catalog.starts_with(s.setting, 'search_path='))
UNION ALL
SELECT 'security', NULL,
       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
            ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
       'schema_create', 1
  FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a, everything e
 WHERE e.yes AND n.nspname OPERATOR(pg_catalog.=) 'forgeyard' AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
   AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.storage_stats(text) IS
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, workflow runs by definition and state, the oldest open transaction, replication slots holding xmin, and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';

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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_tenant text;
    v_type text;
    v_version integer;
    v_class text := 'operational';
    v_current text;
    e record;
    v text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_type := forgeyard_pl.name_arg('event_type', event_type, 128);
    v_version := forgeyard_pl.topic_version_arg('version', version);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
            IF e.key <> 'retention_class' THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = format('event type option %s is unknown', e.key);
            END IF;
            v := coalesce(e.value, 'null');
            IF v NOT IN ('ephemeral', 'short', 'operational', 'audit') THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'retention_class must be ephemeral, short, operational or audit',
                    DETAIL = format('got "%s"', v);
            END IF;
            v_class := v;
        END LOOP;
    END IF;
    INSERT INTO forgeyard.event_types (tenant_id, event_type, version, retention_class, registered_at)
    VALUES (v_tenant, v_type, v_version, v_class, forgeyard.now()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT x.retention_class INTO v_current FROM forgeyard.event_types x
         WHERE x.tenant_id = v_tenant AND x.event_type = v_type AND x.version = v_version;
        v_current := coalesce(v_current, '');
        IF v_current <> v_class THEN
            RAISE EXCEPTION USING ERRCODE = '42710',
                MESSAGE = format('event type "%s" version %s is registered with retention_class %s',
                                 v_type, v_version, v_current);
        END IF;
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.event_type_register(text, text, integer, jsonb) IS
  'Register (event_type, version) for the tenant so it can be published. Options: retention_class (ephemeral | short | operational (default) | audit). Registering it again with the same class is a no-op; with another class 42710.';

CREATE FUNCTION forgeyard.event_type_list(tenant text)
    RETURNS TABLE (event_type text, version integer, retention_class text, registered_at timestamptz)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_tenant text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    RETURN QUERY
    SELECT x.event_type, x.version, x.retention_class, x.registered_at FROM forgeyard.event_types x
     WHERE x.tenant_id = v_tenant ORDER BY x.event_type, x.version;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.event_type_list(text) IS 'The registered event types of a tenant, by type and version.';

CREATE FUNCTION forgeyard.topic_create(tenant text, topic text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Options key by key in jsonb's order: max_subscriptions (digits, 1..256), retention (an interval,
-- zero allowed: nothing replayable) and dedup_window, at most 365 days.
DECLARE
    v_tenant text;
    v_topic text;
    v_max integer := 16;
    v_retention bigint := 0;
    v_dedup bigint := 86400000000;
    e record;
    v text;
    iv interval;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
            v := coalesce(e.value, 'null');
            IF e.key IN ('retention', 'dedup_window') THEN
                BEGIN
                    iv := v::interval;
                EXCEPTION WHEN data_exception THEN
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = format('topic option %s must be an interval', e.key), DETAIL = format('got "%s"', v);
                END;
                IF e.key = 'dedup_window' THEN
                    v_dedup := forgeyard_pl.duration_arg('topic option dedup_window', iv, 31536000000000);
                ELSIF extract(year FROM iv) = 0 AND extract(month FROM iv) = 0 AND extract(day FROM iv) = 0
                      AND extract(epoch FROM iv) = 0 THEN
                    v_retention := 0;  -- (zero retention is allowed: nothing is replayable)
                ELSE
                    v_retention := forgeyard_pl.duration_arg('topic option retention', iv, 31536000000000);
                END IF;
            ELSIF e.key = 'max_subscriptions' THEN
                IF v ~ '^[0-9]{1,4}$' THEN
                    v_max := v::integer;
                END IF;
                IF v !~ '^[0-9]{1,4}$' OR v_max NOT BETWEEN 1 AND 256 THEN
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = 'topic option max_subscriptions must be between 1 and 256';
                END IF;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = format('topic option %s is unknown', e.key);
            END IF;
        END LOOP;
    END IF;
    INSERT INTO forgeyard.topics (tenant_id, topic, max_subscriptions, retention_usecs, dedup_window_usecs, created_at)
    VALUES (v_tenant, v_topic, v_max, v_retention, v_dedup, forgeyard.now()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('topic "%s" already exists for tenant "%s"', v_topic, v_tenant);
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.topic_create(text, text, jsonb) IS
  'Create a topic of the tenant. Options: max_subscriptions (1..256, default 16), retention (interval, default 0: no replay), dedup_window (interval, default 24 hours). 42710 if it exists.';

CREATE FUNCTION forgeyard.topic_drop(tenant text, topic text)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The topic row goes first: that waits for publishers (FOR KEY SHARE) to commit. Then its
-- subscriptions, each queue dropped with queue_drop in subscription order, then its events.
DECLARE
    v_tenant text;
    v_topic text;
    dropped boolean;
    r record;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    DELETE FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic;
    dropped := FOUND;
    FOR r IN
        WITH d AS (DELETE FROM forgeyard.subscriptions s WHERE s.tenant_id = v_tenant AND s.topic = v_topic
                   RETURNING s.tenant_id, s.subscription)
        SELECT forgeyard.queue_drop(d.tenant_id, d.subscription) FROM d ORDER BY d.subscription
    LOOP
    END LOOP;
    DELETE FROM forgeyard.topic_events e WHERE e.tenant_id = v_tenant AND e.topic = v_topic;
    RETURN dropped;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.topic_drop(text, text) IS
  'Drop a topic with its events and its subscriptions (their queues, messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.topic_list(tenant text)
    RETURNS TABLE (topic text, options jsonb, subscriptions jsonb)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_tenant text;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    RETURN QUERY
    SELECT t.topic,
           jsonb_build_object('max_subscriptions', t.max_subscriptions,
                              'retention', (t.retention_usecs * '1 microsecond'::interval)::text,
                              'dedup_window', (t.dedup_window_usecs * '1 microsecond'::interval)::text),
           COALESCE((SELECT jsonb_agg(s.subscription ORDER BY s.subscription) FROM forgeyard.subscriptions s
                      WHERE s.tenant_id = t.tenant_id AND s.topic = t.topic), '[]'::jsonb)
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant ORDER BY t.topic;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.topic_list(text) IS 'The topics of a tenant with their options and subscriptions.';

CREATE FUNCTION forgeyard.subscribe(tenant text, topic text, subscription text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Subscribes of one topic take turns on the topic row (FOR NO KEY UPDATE: the max_subscriptions
-- count); publishers (FOR KEY SHARE) are not blocked. The queue is created by queue_create with the
-- options that are not the subscription's; event_types is stored normalized to
-- {"type": {"min": v, "max": v}} (bounds left out stay out).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    v_options jsonb;
    o record;
    v_max integer;
    v_retention bigint;
    n bigint;
    v_now timestamptz;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    v_options := coalesce(options, '{}'::jsonb);
    SELECT x.o_dead_letter, x.o_oldest, x.o_filtered INTO o FROM forgeyard_pl.topic_subscription_options(v_options) x;
    SELECT t.max_subscriptions, t.retention_usecs INTO v_max, v_retention
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    SELECT count(*) INTO n FROM forgeyard.subscriptions s WHERE s.tenant_id = v_tenant AND s.topic = v_topic;
    IF n >= v_max THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('topic "%s" has its max_subscriptions of %s', v_topic, v_max),
            DETAIL = 'fan-out is bounded; unsubscribe one first';
    END IF;
    PERFORM forgeyard.queue_create(v_tenant, v_subscription, v_options - '{event_types,on_full,start}'::text[]);
    v_now := forgeyard.now();
    INSERT INTO forgeyard.subscriptions (tenant_id, subscription, topic, on_full, event_types, created_at)
    SELECT v_tenant, v_subscription, v_topic, CASE WHEN o.o_dead_letter THEN 'dead_letter' ELSE 'reject' END,
           CASE WHEN NOT o.o_filtered THEN NULL
                WHEN jsonb_typeof(v_options -> 'event_types') = 'array' THEN
                     (SELECT jsonb_object_agg(e #>> '{}', '{}'::jsonb) FROM jsonb_array_elements(v_options -> 'event_types') e)
                ELSE (SELECT jsonb_object_agg(e.key, jsonb_strip_nulls(jsonb_build_object(
                                 'min', (e.value ->> 'min')::bigint, 'max', (e.value ->> 'max')::bigint)))
                        FROM jsonb_each(v_options -> 'event_types') e) END,
           v_now;
    IF o.o_oldest THEN
        PERFORM forgeyard_pl.topic_replay(v_tenant, v_topic, v_retention, v_subscription, '-infinity', v_now);
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.subscribe(text, text, text, jsonb) IS
  'Create a subscription: a queue of the tenant named subscription (every queue_create option applies) fed by the topic. Also: event_types (["t", ...] or {"t": {"min": 1, "max": 2}}; default every type), on_full (reject: the publish fails with FY020; dead_letter: this subscription dead-letters the event as backlog_full), start (now, or oldest: the retained events are delivered first). 22023 over max_subscriptions, 42710 if the queue exists.';

CREATE FUNCTION forgeyard.unsubscribe(tenant text, topic text, subscription text)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Whether the subscription existed; its queue goes too (queue_drop).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    removed boolean;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    PERFORM FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    DELETE FROM forgeyard.subscriptions s
     WHERE s.tenant_id = v_tenant AND s.topic = v_topic AND s.subscription = v_subscription;
    removed := FOUND;
    IF removed THEN
        PERFORM forgeyard.queue_drop(v_tenant, v_subscription);
    END IF;
    RETURN removed;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.unsubscribe(text, text, text) IS
  'Drop a subscription and its queue (messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.publish(tenant text, topic text, event_type text, version integer, payload bytea,
                                  event_id uuid DEFAULT NULL, partition_key text DEFAULT NULL,
                                  priority text DEFAULT 'interactive')
    RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The payload and partition_key are checked before the publisher's other arguments, as in the C++
-- edition.
DECLARE
    v_payload bytea;
    v_key text;
    s record;
BEGIN
    v_payload := forgeyard_pl.bytea_arg('payload', payload, 1073741824);
    IF partition_key IS NOT NULL THEN
        v_key := forgeyard_pl.text_arg('partition_key', partition_key, 512);
    END IF;
    SELECT x.o_priority, x.o_queues, x.o_routing, x.o_dead_letter INTO s
      FROM forgeyard_pl.topic_start(tenant, topic, event_type, version, priority) x;
    RETURN forgeyard_pl.topic_publish_one(tenant, topic, event_type, version, s.o_priority, v_payload, event_id, v_key,
                                          s.o_queues, s.o_routing, s.o_dead_letter, forgeyard.now());
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.publish(text, text, text, integer, bytea, uuid, text, text) IS
  'Publish inside the caller''s transaction: each subscription whose event_types match gets one message (payload stored once); a version outside a subscription''s range is dead-lettered there as schema_unsupported. Returns the event_seq (monotonic per topic). A repeated event_id within the dedup window returns the first event_seq (FY011 for other contents). FY050 unregistered type or version, FY020 a reject subscription is full (named), FY021 payload over a subscription''s max_payload_bytes, 42704 unknown topic.';

CREATE FUNCTION forgeyard.publish_batch(tenant text, topic text, event_type text, version integer, payloads bytea[],
                                        event_ids uuid[] DEFAULT NULL, partition_keys text[] DEFAULT NULL,
                                        priority text DEFAULT 'interactive')
    RETURNS TABLE (event_seq bigint) LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- All or nothing: the arrays checked first (payloads present, at most 10000, event_ids and
-- partition_keys of its length when given), then the publisher, then each event in order (a NULL
-- payload is 22004 when its turn comes). Arrays of any shape count their elements in storage order.
DECLARE
    n integer;
    v_now timestamptz;
    s record;
    i integer;
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'payloads must not be NULL';
    END IF;
    n := cardinality(payloads);
    IF n > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payloads must hold at most 10000 events';
    END IF;
    IF (event_ids IS NOT NULL AND cardinality(event_ids) <> n)
       OR (partition_keys IS NOT NULL AND cardinality(partition_keys) <> n) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'event_ids and partition_keys must match payloads in length';
    END IF;
    SELECT x.o_priority, x.o_queues, x.o_routing, x.o_dead_letter INTO s
      FROM forgeyard_pl.topic_start(tenant, topic, event_type, version, priority) x;
    v_now := forgeyard.now();
    IF n = 0 THEN
        RETURN;
    END IF;
    IF array_ndims(payloads) > 1 OR array_lower(payloads, 1) <> 1 THEN
        payloads := ARRAY(SELECT unnest(payloads));
    END IF;
    IF array_ndims(event_ids) > 1 OR array_lower(event_ids, 1) <> 1 THEN
        event_ids := ARRAY(SELECT unnest(event_ids));
    END IF;
    IF array_ndims(partition_keys) > 1 OR array_lower(partition_keys, 1) <> 1 THEN
        partition_keys := ARRAY(SELECT unnest(partition_keys));
    END IF;
    FOR i IN 1 .. n LOOP
        IF payloads[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'payloads must not contain NULL';
        END IF;
        event_seq := forgeyard_pl.topic_publish_one(tenant, topic, event_type, version, s.o_priority, payloads[i],
                                                    event_ids[i], partition_keys[i], s.o_queues, s.o_routing,
                                                    s.o_dead_letter, v_now);
        RETURN NEXT;
    END LOOP;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.publish_batch(text, text, text, integer, bytea[], uuid[], text[], text) IS
  'Publish several events of one type and version (event_ids and partition_keys, when given, parallel to payloads); event_seqs in order. All or nothing.';

CREATE FUNCTION forgeyard.subscription_rewind(tenant text, topic text, subscription text, since timestamptz)
    RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The events retained (within the topic's retention) and published at or after since, delivered
-- again in event_seq order; the topic row is kept from being dropped until commit (FOR KEY SHARE).
DECLARE
    v_tenant text;
    v_topic text;
    v_subscription text;
    v_retention bigint;
BEGIN
    v_tenant := forgeyard_pl.name_arg('tenant', tenant, 128);
    v_topic := forgeyard_pl.name_arg('topic', topic, 128);
    v_subscription := forgeyard_pl.name_arg('subscription', subscription, 128);
    IF since IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'since must not be NULL';
    END IF;
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    SELECT t.retention_usecs INTO v_retention
      FROM forgeyard.topics t WHERE t.tenant_id = v_tenant AND t.topic = v_topic
       FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(v_tenant, v_topic);
    END IF;
    PERFORM FROM forgeyard.subscriptions s
     WHERE s.tenant_id = v_tenant AND s.topic = v_topic AND s.subscription = v_subscription;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_subscription(v_topic, v_subscription);
    END IF;
    RETURN forgeyard_pl.topic_replay(v_tenant, v_topic, v_retention, v_subscription, since, forgeyard.now());
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.subscription_rewind(text, text, text, timestamptz) IS
  'Deliver again to the subscription every retained event published at or after since (and within the topic''s retention), in event_seq order, admitted like new messages. Returns how many reached the consumer queue. Consumers must be idempotent (inbox_accept on event_id).';

CREATE FUNCTION forgeyard.subscription_claim(tenant text, subscription text, consumer text,
                                             max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz,
                   topic text, event_type text, version integer, event_seq bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Arguments first (a NULL consumer is 22004 whatever the queue), then the subscription's queue, its
-- topic (42704 naming topic "(any)" for a queue that is no subscription), max_messages and
-- visibility, the claim (queue_claim; deliveries that lapsed on every attempt are dead-lettered
-- there and not returned), and then each delivery's event looked up by its event_id.
DECLARE
    v_consumer text;
    q forgeyard.queues%ROWTYPE;
    v_topic text;
    n integer;
    vis bigint;
    c record;
BEGIN
    v_consumer := forgeyard_pl.name_arg('consumer', consumer, 256);
    q := forgeyard_pl.queue_open(tenant, subscription);
    SELECT s.topic INTO v_topic FROM forgeyard.subscriptions s WHERE s.tenant_id = q.tenant_id AND s.subscription = q.queue;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_subscription('(any)', q.queue);
    END IF;
    n := forgeyard_pl.queue_max_messages_arg(max_messages);
    vis := forgeyard_pl.queue_visibility_arg(visibility, q.visibility_usecs);
    FOR c IN
        SELECT x.c_msg_id, x.c_event_id, x.c_partition_key, x.c_priority, x.c_attempt, x.c_claim_token, x.c_payload,
               x.c_enqueued_at
          FROM forgeyard_pl.queue_claim(q, v_consumer, n, vis, forgeyard.now()) x
         WHERE NOT x.c_lapsed
         ORDER BY x.c_priority, x.c_order, x.c_msg_id
    LOOP
        msg_id := c.c_msg_id;
        event_id := c.c_event_id;
        partition_key := c.c_partition_key;
        priority := (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[c.c_priority + 1];
        attempt := c.c_attempt;
        claim_token := c.c_claim_token;
        payload := c.c_payload;
        enqueued_at := c.c_enqueued_at;
        topic := v_topic;
        event_type := NULL;
        version := NULL;
        event_seq := NULL;
        IF c.c_event_id IS NOT NULL THEN
            SELECT e.event_type, e.version, e.event_seq INTO event_type, version, event_seq
              FROM forgeyard.topic_events e
             WHERE e.tenant_id = q.tenant_id AND e.topic = v_topic AND e.event_id = c.c_event_id;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.subscription_claim(text, text, text, integer, interval) IS
  'claim on a subscription, each delivery with its topic, event_type, version and event_seq. ack / nack / extend as for any queue.';

CREATE FUNCTION forgeyard.topic_purge(max_events integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- Events past their topic's retention and dedup window that no pending message of a subscription
-- still needs (its payload would be gone), oldest first, SKIP LOCKED so that purgers never wait
-- for each other.
DECLARE
    v_max integer;
    v_tenant text;
    v_now timestamptz;
    purged bigint;
BEGIN
    v_max := forgeyard_pl.queue_positive_int_arg('max_events', max_events, 1000000);
    v_tenant := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    PERFORM forgeyard_pl.check_tenant(v_tenant);
    v_now := forgeyard.now();
    DELETE FROM forgeyard.topic_events d USING (
        SELECT e.tenant_id, e.topic, e.event_seq FROM forgeyard.topic_events e JOIN forgeyard.topics t
            ON t.tenant_id = e.tenant_id AND t.topic = e.topic
         WHERE (v_tenant IS NULL OR e.tenant_id = v_tenant)
           AND e.published_at <= (v_now - (GREATEST(t.retention_usecs, t.dedup_window_usecs) * '1 microsecond'::interval))
           AND NOT EXISTS (SELECT 1 FROM forgeyard.subscriptions s JOIN forgeyard.messages m
                                ON m.tenant_id = s.tenant_id AND m.queue = s.subscription
                            WHERE s.tenant_id = e.tenant_id AND s.topic = e.topic
                              AND m.event_id = e.event_id AND m.state = 'pending')
         ORDER BY e.published_at LIMIT v_max FOR UPDATE OF e SKIP LOCKED) old
     WHERE d.tenant_id = old.tenant_id AND d.topic = old.topic AND d.event_seq = old.event_seq;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$fy_body$;
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
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
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
    RETURNS uuid LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_workflow text := forgeyard_pl.name_arg('workflow', workflow, 100);
    t_version integer;
    t_run_key text;
    t_input jsonb;
    now_at timestamptz;
    e record;
    o_deadline text;
    o_retention text;
    o_priority integer := 3;
    o_parent uuid;
    d interval;
    deadline_at timestamptz;
    retention bigint := 2592000000000;
    new_id uuid;
    n integer;
    q text;
    msg bigint;
    x record;
BEGIN
    PERFORM forgeyard_pl.not_null('version', version IS NOT NULL);
    t_version := version;
    IF t_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'version must be at least 1, not ' || t_version;
    END IF;
    t_run_key := forgeyard_pl.name_arg('run_key', run_key, 255);
    PERFORM forgeyard_pl.not_null('input', input IS NOT NULL);
    t_input := input;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT j.key, jsonb_typeof(j.value) AS type, coalesce(j.value #>> '{}', '') AS value
                   FROM jsonb_each(options) j LOOP
            IF e.key NOT IN ('deadline', 'priority', 'retention', 'parent') THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'unknown workflow option ' || forgeyard_pl.workflow_left_bytes(e.key, 100)
                              || ' (the options are deadline, priority, parent and retention)';
            END IF;
            IF e.type <> 'string' THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'workflow option ' || e.key || ' must be a string';
            END IF;
            IF e.key = 'deadline' THEN
                o_deadline := e.value;
            ELSIF e.key = 'priority' THEN
                o_priority := forgeyard_pl.queue_priority('priority', e.value);
            ELSIF e.key = 'retention' THEN
                o_retention := e.value;
            ELSE
                -- core::parse_uuid: PostgreSQL's uuid input (8 groups of 4 hex digits, a '-' after
                -- any of the first 7, braces around all or none).
                IF e.value !~ '^[0-9A-Fa-f]{4}(-?[0-9A-Fa-f]{4}){7}$' AND e.value !~ '^\{[0-9A-Fa-f]{4}(-?[0-9A-Fa-f]{4}){7}\}$' THEN
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = 'workflow option parent must be a run id (a uuid), not ''' || e.value || '''';
                END IF;
                o_parent := e.value::uuid;
            END IF;
        END LOOP;
    END IF;
    IF o_deadline IS NOT NULL THEN
        BEGIN
            d := o_deadline::interval;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'workflow option deadline must be an interval', DETAIL = 'got "' || o_deadline || '"';
        END;
        deadline_at := now_at + forgeyard_pl.duration_arg('deadline', d, 31536000000000) * interval '1 microsecond';
    END IF;
    IF o_retention IS NOT NULL THEN
        BEGIN
            d := o_retention::interval;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'workflow option retention must be an interval', DETAIL = 'got "' || o_retention || '"';
        END;
        retention := forgeyard_pl.duration_arg('workflow option retention', d, 31536000000000);
        IF retention < 1000000 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'workflow option retention must be at least 1 second';
        END IF;
    END IF;
    IF o_parent IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = o_parent) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('parent workflow run %s not found for tenant "%s"', o_parent, t_tenant);
    END IF;
    new_id := gen_random_uuid();
    INSERT INTO forgeyard.wf_runs (tenant_id, run_id, run_key, workflow, version, input, state, priority, deadline,
                                   parent_run_id, created_at, updated_at, retention_usecs)
    VALUES (t_tenant, new_id, t_run_key, t_workflow, t_version, t_input, 'pending', o_priority, deadline_at, o_parent,
            now_at, now_at, retention)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        q := '_wf.' || t_workflow || '@' || t_version;
        PERFORM forgeyard_pl.queue_ensure(t_tenant, q);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, new_id, o_priority);
        UPDATE forgeyard.wf_runs w SET msg_id = msg, lease_until = NULL WHERE w.tenant_id = t_tenant AND w.run_id = new_id;
        RETURN new_id;
    END IF;
    -- The run_key started a run before (or a concurrent start committed it first): the same
    -- definition and input return that run, anything else is FY011.
    SELECT w.run_id, w.workflow = t_workflow AND w.version = t_version AND w.input = t_input AS same,
           w.workflow || '@' || w.version AS first
      INTO x
      FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_key = t_run_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'workflow_start inserted no run and found none';
    END IF;
    IF NOT x.same THEN
        RAISE EXCEPTION USING ERRCODE = 'FY011',
            MESSAGE = format('run_key "%s" already started run %s of %s with other input', t_run_key, x.run_id, x.first),
            DETAIL = 'a run_key names one run: the same workflow, version and input';
    END IF;
    RETURN x.run_id;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_start(text, text, integer, text, jsonb, jsonb) IS
  'Start a run in the caller''s transaction (no run unless it commits); returns its run_id. run_key is an idempotency key: the same key returns the first run, with another workflow, version or input FY011. Options: deadline (interval), priority (class), parent (run id), retention (interval: how long the run is kept once finished, default 30 days; maintain() removes it then).';

CREATE FUNCTION forgeyard.workflow_claim(tenant text, worker text, definitions text[], max_runs integer DEFAULT 1,
                                         lease interval DEFAULT NULL)
    RETURNS TABLE (run_id uuid, workflow text, version integer, epoch bigint, state text, input jsonb)
    LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
SELECT * FROM forgeyard_pl.workflow_claim(tenant, worker, definitions, max_runs, lease);
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_claim(text, text, text[], integer, interval) IS
  'Claim up to max_runs runnable runs of the given definitions (''name@version''), each owned by worker under a new epoch for lease (default: the queue''s visibility timeout). A run whose owner''s lease ran out is taken over (recorded in the run; a step that ran past its timeout is recorded failed); one whose deliveries lapsed on every attempt (max_attempts) ends failed, compensating first. Never waits on other claimers.';

CREATE FUNCTION forgeyard.workflow_step(tenant text, run_id uuid, epoch bigint, step text,
                                        timeout interval DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, result jsonb, idempotency_key text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The fence, the journal row at the position, and the cursor move. Without a timeout (and no
-- deadline of an earlier step to let go of) the run's row is read, not locked, and the only write
-- is the cursor's, in an UNLOGGED table: the call writes no WAL. Two step calls of a run are
-- serialized by the cursor's row lock, and a claim that takes the run over moves the cursor to
-- its epoch (FY001 here after the wait). The run's row is locked before the cursor's, as every
-- call that locks both takes them.
DECLARE
    t_tenant text := tenant;
    t_run uuid := run_id;
    t_epoch bigint := epoch;
    t_step text := step;
    t_timeout bigint := 0;
    named integer := position;
    with_cursor boolean;
    now_at timestamptz;
    o record;
    c record;
    pos integer;
    jr record;
    recorded boolean;
    j_step text;
    j_status text;
    j_result jsonb;
    j_wake_at timestamptz;
    is_done boolean := false;
    timed boolean;
    t_deadline timestamptz;
BEGIN
    -- The argument checks of args.sql, called only to raise their errors (this call is the hot path).
    IF t_tenant IS NULL OR t_tenant = '' OR octet_length(t_tenant) > 128 OR t_run IS NULL THEN
        PERFORM forgeyard_pl.workflow_run_arg(t_tenant, t_run);
    END IF;
    IF t_epoch IS NULL THEN
        PERFORM forgeyard_pl.not_null('epoch', false);
    END IF;
    IF t_step IS NULL OR t_step = '' OR octet_length(t_step) > 200 THEN
        PERFORM forgeyard_pl.name_arg('step', t_step, 200);
    END IF;
    IF timeout IS NOT NULL THEN
        t_timeout := forgeyard_pl.duration_arg('timeout', timeout, 2592000000000);
    END IF;
    IF named < 1 THEN
        PERFORM forgeyard_pl.workflow_position_arg(named);
    END IF;
    -- The cursor is read and moved unless the caller names the position, and also then for a
    -- step with a timeout: a claim that takes the run over past it reads the step from the cursor.
    with_cursor := named IS NULL OR t_timeout > 0;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', t_timeout > 0, with_cursor);
    IF with_cursor THEN
        -- The cursor locked against other step calls of the run: FY001 when it is gone or another
        -- epoch's (after a wait, the newest version is read: a claim that took the run over moved
        -- it); 40001 when another step call of this epoch moved it since the run was read.
        IF o.cursor_tid IS NULL THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
        SELECT k.ctid AS tid, k.epoch, k.position, k.step INTO c FROM forgeyard.wf_cursors k
         WHERE k.run_id = t_run AND k.tenant_id = t_tenant FOR NO KEY UPDATE;
        IF NOT FOUND OR c.epoch <> t_epoch THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
        IF c.tid <> o.cursor_tid THEN
            RAISE EXCEPTION USING ERRCODE = '40001',
                MESSAGE = format('workflow run %s: another step call of this epoch moved the step cursor while this one waited', t_run),
                DETAIL = 'make one step call of a run at a time; retry this one';
        END IF;
    END IF;
    IF named IS NULL THEN
        pos := c.position + 1;
        SELECT j.step, j.status, j.result, j.wake_at INTO j_step, j_status, j_result, j_wake_at FROM forgeyard.wf_journal j
         WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
        recorded := FOUND;
    ELSE
        -- One descent of the journal's key for the step before the position and the row at it.
        pos := named;
        jr := forgeyard_pl.workflow_read_position(t_tenant, t_run, pos, true);
        IF pos > 1 THEN
            PERFORM forgeyard_pl.workflow_check_follows(pos, jr.j_previous, t_run, 'workflow_step');
        END IF;
        recorded := jr.j_found;
        j_step := jr.j_step;
        j_status := jr.j_status;
        j_result := jr.j_result;
        j_wake_at := jr.j_wake_at;
    END IF;
    -- wf::decide_step: a step done replays (a sleep only once its end is reached).
    IF recorded THEN
        IF j_step <> t_step THEN
            PERFORM forgeyard_pl.workflow_check_same_step(j_step, t_step, t_run, pos);
        END IF;
        is_done := j_status = 'done' AND NOT coalesce(j_wake_at > now_at, false);
    END IF;
    -- A step to run with a timeout: its deadline, and the owner's lease cut to it.
    timed := NOT is_done AND t_timeout > 0;
    t_deadline := now_at + t_timeout * interval '1 microsecond';
    IF with_cursor THEN
        UPDATE forgeyard.wf_cursors k SET position = pos, step = t_step
         WHERE k.run_id = t_run AND k.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
        END IF;
    END IF;
    -- A deadline to set, or an earlier step's to let go of: the fence locked the run's row then.
    -- The owner's lease ends by the deadline at the latest, as its message's visibility below.
    IF timed OR o.step_deadline IS NOT NULL THEN
        UPDATE forgeyard.wf_runs x
           SET step_deadline = CASE WHEN timed THEN t_deadline END,
               lease_until = CASE WHEN timed AND x.lease_until > t_deadline THEN t_deadline ELSE x.lease_until END
         WHERE x.run_id = t_run AND x.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
        END IF;
    END IF;
    IF timed THEN
        -- Still this epoch's delivery. Not waited for: a claim that holds it is taking the run
        -- over (and waits for this transaction's lock on the run), so the cut is moot.
        UPDATE forgeyard.messages m SET visible_at = t_deadline
         WHERE m.msg_id = (SELECT y.msg_id FROM forgeyard.messages y WHERE y.msg_id = o.msg_id
                              FOR NO KEY UPDATE SKIP LOCKED)
           AND m.claim_token = t_epoch AND m.visible_at > t_deadline;
    END IF;
    status := CASE WHEN is_done THEN 'done' ELSE 'run' END;
    result := CASE WHEN is_done THEN j_result END;
    idempotency_key := t_run || ':' || pos || ':' || t_step;
    RETURN NEXT;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_step(text, uuid, bigint, text, interval, integer) IS
  'The next step of the run under epoch (the n-th call of an epoch is position n): run (with a stable idempotency key) or done (with the recorded result). With a timeout, a step to run must be recorded within it: the owner''s lease ends by then at the latest, and a run taken over past it records the attempt as failed. With position, the caller counts its steps (1 for its first call of the epoch, then one more per step): the call reads and writes no cursor (without a timeout it writes nothing at all, so its commit waits for no flush); 22023 unless the step before position is recorded done. Pass position to every step call of an epoch or to none. FY060 when the journal has another step at that position; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_complete(tenant text, run_id uuid, epoch bigint, step text, result jsonb,
                                                 compensation text DEFAULT NULL, "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
-- The fence first, a statement of its own: a retry of this call that waited for the first
-- attempt's lock sees its journal row and answers as a replay. The run's lock serializes every
-- journal write of the run, and the journal is read after it, so the row found is the row to
-- write. A named position is checked on that reading: one descent for the step before it and
-- the row at it.
DECLARE
    t_tenant text := tenant;
    t_run uuid := run_id;
    t_epoch bigint := epoch;
    t_step text := step;
    t_result jsonb := result;
    t_compensation text := compensation;
    named integer := position;
    now_at timestamptz;
    o record;
    c record;
    pos integer;
    jr record;
BEGIN
    -- The argument checks of args.sql, called only to raise their errors (this call is the hot path).
    IF t_tenant IS NULL OR t_tenant = '' OR octet_length(t_tenant) > 128 OR t_run IS NULL THEN
        PERFORM forgeyard_pl.workflow_run_arg(t_tenant, t_run);
    END IF;
    IF t_epoch IS NULL THEN
        PERFORM forgeyard_pl.not_null('epoch', false);
    END IF;
    IF t_step IS NULL OR t_step = '' OR octet_length(t_step) > 200 THEN
        PERFORM forgeyard_pl.name_arg('step', t_step, 200);
    END IF;
    IF t_result IS NULL THEN
        PERFORM forgeyard_pl.not_null('result', false);
    END IF;
    IF t_compensation = '' OR octet_length(t_compensation) > 200 THEN
        PERFORM forgeyard_pl.name_arg('compensation', t_compensation, 200);
    END IF;
    IF named < 1 THEN
        PERFORM forgeyard_pl.workflow_position_arg(named);
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    IF named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(t_tenant, t_run, t_epoch);
        IF NOT (c.position >= 1 AND coalesce(c.step = t_step, false)) THEN
            PERFORM forgeyard_pl.workflow_check_current(c.position, c.step, t_step, 'workflow_step_complete');
        END IF;
        pos := c.position;
        SELECT true AS j_found, j.status AS j_status, j.result AS j_result, j.compensation AS j_compensation INTO jr
          FROM forgeyard.wf_journal j WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
    ELSE
        pos := named;
        jr := forgeyard_pl.workflow_read_position(t_tenant, t_run, pos, true);
        IF pos > 1 THEN
            PERFORM forgeyard_pl.workflow_check_follows(pos, jr.j_previous, t_run, 'workflow_step_complete');
        END IF;
        IF jr.j_found THEN
            PERFORM forgeyard_pl.workflow_check_same_step(jr.j_step, t_step, t_run, pos);
        END IF;
    END IF;
    IF jr.j_found THEN
        IF jr.j_status = 'failed' THEN
            UPDATE forgeyard.wf_journal j
               SET status = 'done', result = t_result, error = NULL, compensation = t_compensation, epoch = t_epoch,
                   recorded_at = now_at
             WHERE j.run_id = t_run AND j.position = pos AND j.tenant_id = t_tenant;
        ELSIF NOT (jr.j_result IS NOT NULL AND jr.j_result = t_result AND jr.j_compensation IS NOT DISTINCT FROM t_compensation) THEN
            -- Recorded before (a retried call, or a replayed step): only the same result is a no-op.
            PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, false);
        END IF;
    ELSE
        INSERT INTO forgeyard.wf_journal (tenant_id, run_id, position, step, status, result, compensation, attempts,
                                          compensation_attempts, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done', t_result, t_compensation, 1, 0, t_epoch, now_at);
    END IF;
    IF o.step_deadline IS NOT NULL THEN
        -- The step is recorded in time: its deadline no longer holds the lease.
        UPDATE forgeyard.wf_runs x SET step_deadline = NULL WHERE x.run_id = t_run AND x.tenant_id = t_tenant;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
        END IF;
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_step_complete(text, uuid, bigint, text, jsonb, text, integer) IS
  'Record the result of the current step in the caller''s transaction (with the step''s own database work, exactly once), with the name of its compensation. With position, of the step at that position (as workflow_step: 22023 unless the step before it is recorded done, FY060 for another step there). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_step_fail(tenant text, run_id uuid, epoch bigint, step text, error text,
                                             permanent boolean DEFAULT false, "position" integer DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_error text;
    t_permanent boolean := coalesce(permanent, false);
    named integer;
    now_at timestamptz;
    o record;
    pos integer;
    q text;
    outcome text := 'failed';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    t_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    pos := forgeyard_pl.workflow_step_position(t_tenant, t_run, t_epoch, named, t_step, 'workflow_step_fail');
    IF NOT forgeyard_pl.workflow_record_failed(t_tenant, t_run, pos, t_step, t_error, t_epoch, now_at) THEN
        PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, true);
    END IF;
    q := '_wf.' || o.workflow || '@' || o.version;
    IF NOT t_permanent THEN
        outcome := forgeyard.nack(t_tenant, q, o.msg_id, t_epoch, t_error, false);
    END IF;
    IF outcome = 'retry' THEN
        UPDATE forgeyard.wf_runs x SET state = 'pending', lease_until = NULL, updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    ELSE
        -- Permanent, or the queue's max_attempts reached (nack dead-lettered the message): the run
        -- fails, compensating first if it has compensations to run.
        IF t_permanent THEN
            PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
        END IF;
        PERFORM forgeyard_pl.workflow_settle(t_tenant, t_run, 'failed', NULL,
                                             'step "' || t_step || '" failed: ' || t_error, now_at);
        outcome := 'failed';
    END IF;
    RETURN outcome;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_step_fail(text, uuid, bigint, text, text, boolean, integer) IS
  'Record a failed attempt of the current step: retry (the run is released and handed out again after the queue''s backoff) or failed (permanent, or the queue''s max_attempts reached: the run ends failed). position as for workflow_step_complete. FY001 for a stale owner.';

-- Sagas: a run that fails, is cancelled or times out with steps done that name a compensation is
-- compensating until their compensations ran, newest first; then it ends as it was going to.
CREATE FUNCTION forgeyard.workflow_compensation(tenant text, run_id uuid, epoch bigint)
    RETURNS TABLE ("position" integer, step text, compensation text, result jsonb, idempotency_key text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    now_at timestamptz;
    n record;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    PERFORM forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    SELECT * INTO n FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run);
    IF n.n_position IS NOT NULL THEN
        position := n.n_position;
        step := n.n_step;
        compensation := n.n_compensation;
        result := n.n_result;
        idempotency_key := t_run || ':' || n.n_position || ':' || n.n_step || ':compensate';
        RETURN NEXT;
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_compensation(text, uuid, bigint) IS
  'The next compensation of a compensating run owned under epoch (newest step first): the step''s position, name, compensation and recorded result, and a stable idempotency key for the compensation. No row when none is left. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_complete(tenant text, run_id uuid, epoch bigint, "position" integer)
    RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_position integer;
    now_at timestamptz;
    o record;
    t_state text := 'compensating';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('position', position IS NOT NULL);
    t_position := position;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    PERFORM forgeyard_pl.workflow_check_next_compensation(
        (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n), t_position, t_run);
    UPDATE forgeyard.wf_journal j
       SET compensation_status = 'done', compensation_error = NULL, compensated_at = now_at,
           compensation_attempts = j.compensation_attempts + 1
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = t_position;
    IF (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n) IS NULL THEN
        -- The last one: the run ends as it was going to.
        PERFORM forgeyard.ack(t_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, t_epoch);
        t_state := forgeyard_pl.workflow_settle(t_tenant, t_run, coalesce(o.compensate_to, 'failed'), NULL, o.error, now_at);
    END IF;
    RETURN t_state;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_compensation_complete(text, uuid, bigint, integer) IS
  'Record the compensation of the step at position as done, in the caller''s transaction; returns the run''s state: compensating while compensations are left, else the state it ends in (failed, cancelled or timed_out). 22023 unless position is the next compensation; FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_compensation_fail(tenant text, run_id uuid, epoch bigint, "position" integer,
                                                     error text, permanent boolean DEFAULT false)
    RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_position integer;
    t_error text;
    t_permanent boolean := coalesce(permanent, false);
    now_at timestamptz;
    o record;
    q text;
    outcome text := 'compensation_failed';
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('position', position IS NOT NULL);
    t_position := position;
    t_error := coalesce(forgeyard_pl.text_arg('error', error, 4096, true), '');
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'compensating', true);
    PERFORM forgeyard_pl.workflow_check_next_compensation(
        (SELECT n.n_position FROM forgeyard_pl.workflow_next_compensation(t_tenant, t_run) n), t_position, t_run);
    UPDATE forgeyard.wf_journal j
       SET compensation_status = 'failed', compensation_error = t_error,
           compensation_attempts = j.compensation_attempts + 1
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = t_position;
    q := '_wf.' || o.workflow || '@' || o.version;
    IF NOT t_permanent THEN
        outcome := forgeyard.nack(t_tenant, q, o.msg_id, t_epoch, t_error, false);
    ELSE
        PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
    END IF;
    IF outcome = 'retry' THEN
        -- The run stays compensating, its delivery let go: its owner's lease ends with it.
        UPDATE forgeyard.wf_runs x SET lease_until = NULL WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    ELSE
        -- Permanent, or the queue's max_attempts reached (the message is a dead letter now). The
        -- run keeps its error; the compensation's is in the journal (recorded above).
        outcome := forgeyard_pl.workflow_settle(t_tenant, t_run, 'compensation_failed', NULL, NULL, now_at);
    END IF;
    RETURN outcome;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_compensation_fail(text, uuid, bigint, integer, text, boolean) IS
  'Record a failed attempt of the compensation at position: retry (the run is released for the queue''s backoff) or compensation_failed (permanent, or the queue''s max_attempts reached: the run ends compensation_failed; workflow_retry resumes it). FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_sleep(tenant text, run_id uuid, epoch bigint, step text, until timestamptz,
                                         "position" integer DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_until timestamptz;
    named integer;
    now_at timestamptz;
    o record;
    pos integer;
    rec record;
    wake timestamptz;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    PERFORM forgeyard_pl.not_null('until', until IS NOT NULL);
    t_until := until;
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    pos := forgeyard_pl.workflow_step_position(t_tenant, t_run, t_epoch, named, t_step, 'workflow_sleep');
    SELECT j.status, j.wake_at INTO rec FROM forgeyard.wf_journal j
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = pos;
    -- A sleep journaled before keeps its end (replayed code may compute another one).
    IF rec.status = 'done' AND rec.wake_at IS NULL THEN
        PERFORM forgeyard_pl.workflow_step_recorded(t_step, t_run, pos, false);
    END IF;
    wake := rec.wake_at;
    IF wake IS NULL THEN
        wake := t_until;
        INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, wake_at, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done',
                ('{"until":"' || forgeyard_pl.workflow_iso(forgeyard_pl.usecs(t_until)) || '"}')::jsonb, t_until, t_epoch,
                now_at)
        ON CONFLICT ON CONSTRAINT wf_journal_pkey DO UPDATE SET status = 'done', result = excluded.result, error = NULL,
            wake_at = excluded.wake_at, epoch = excluded.epoch, recorded_at = excluded.recorded_at;
    END IF;
    q := '_wf.' || o.workflow || '@' || o.version;
    PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
    msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, o.priority, forgeyard_pl.workflow_timer_delay(wake, now_at));
    UPDATE forgeyard.wf_runs x SET state = 'sleeping', msg_id = msg, lease_until = NULL, updated_at = now_at
     WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_sleep(text, uuid, bigint, text, timestamptz, integer) IS
  'A durable timer as the current step (workflow_step answered run): the step is journaled with its end, the run is released (sleeping) and handed out again at until, when the step replays as done. A sleep journaled before keeps its first until. position as for workflow_step_complete. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_wait_signal(tenant text, run_id uuid, epoch bigint, step text, signal text,
                                               timeout interval, "position" integer DEFAULT NULL)
    RETURNS TABLE (status text, payload jsonb)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    t_step text;
    t_signal text;
    t_timeout bigint;
    named integer;
    now_at timestamptz;
    now_us bigint;
    o record;
    c record;
    pos integer;
    rec record;
    recorded boolean;
    sig record;
    sig_found boolean := false;
    action text;
    answer_payload jsonb;
    until_us bigint;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    t_step := forgeyard_pl.name_arg('step', step, 200);
    t_signal := forgeyard_pl.name_arg('signal', signal, 200);
    t_timeout := forgeyard_pl.duration_arg('timeout', timeout, 31536000000000);
    named := forgeyard_pl.workflow_position_arg(position);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'running', true);
    IF named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(t_tenant, t_run, t_epoch);
        pos := c.position + 1;
    ELSE
        -- The step is compared below (FY060 for another step at the position).
        PERFORM forgeyard_pl.workflow_check_named(t_tenant, t_run, named, t_step, 'workflow_wait_signal', false);
        pos := named;
    END IF;
    SELECT j.step, j.status, j.result INTO rec FROM forgeyard.wf_journal j
     WHERE j.tenant_id = t_tenant AND j.run_id = t_run AND j.position = pos;
    recorded := FOUND;
    IF NOT recorded OR rec.status <> 'done' THEN
        SELECT s.signal_id, s.payload INTO sig FROM forgeyard.wf_signals s
         WHERE s.tenant_id = t_tenant AND s.run_id = t_run AND s.name = t_signal AND s.consumed_at IS NULL
         ORDER BY s.sent_at, s.signal_id LIMIT 1 FOR UPDATE;
        sig_found := FOUND;
    END IF;
    -- wf::decide_wait
    IF recorded THEN
        PERFORM forgeyard_pl.workflow_check_same_step(rec.step, t_step, t_run, pos);
    END IF;
    now_us := forgeyard_pl.usecs(now_at);
    IF recorded AND rec.status = 'done' THEN
        action := 'replay';
    ELSIF sig_found THEN
        action := 'receive';
    ELSIF o.wait_position = pos AND o.wait_until IS NOT NULL AND o.wait_until <= now_at THEN
        action := 'time_out';
    ELSE
        action := 'wait';
    END IF;
    IF action = 'replay' THEN
        -- wf::parse_signal_result
        IF jsonb_path_exists(rec.result, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
            PERFORM forgeyard_pl.workflow_json_depth(rec.result::text, 'result');
        END IF;
        IF jsonb_typeof(rec.result -> 'status') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'XX001', MESSAGE = 'a signal wait''s journal result has no status';
        END IF;
        status := rec.result ->> 'status';
        IF jsonb_typeof(rec.result -> 'payload') <> 'null' THEN
            payload := forgeyard_pl.workflow_canonical(rec.result -> 'payload', 'payload', 1048576);
        END IF;
    ELSIF action = 'receive' THEN
        status := 'received';
        payload := forgeyard_pl.workflow_canonical(sig.payload, 'payload', 1048576);
        UPDATE forgeyard.wf_signals s SET consumed_at = now_at, consumed_position = pos
         WHERE s.tenant_id = t_tenant AND s.run_id = t_run AND s.signal_id = sig.signal_id;
    ELSIF action = 'time_out' THEN
        status := 'timed_out';
    ELSE
        -- The end of the wait at this position: the one recorded, else now + timeout.
        until_us := CASE WHEN o.wait_position = pos AND o.wait_until IS NOT NULL THEN forgeyard_pl.usecs(o.wait_until)
                         ELSE now_us + t_timeout END;
        q := '_wf.' || o.workflow || '@' || o.version;
        PERFORM forgeyard.ack(t_tenant, q, o.msg_id, t_epoch);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, o.priority,
                                             least(greatest(until_us - now_us, 0), 2592000000000));
        UPDATE forgeyard.wf_runs x
           SET state = 'waiting', msg_id = msg, lease_until = NULL, waiting_signal = t_signal,
               wait_until = now_at + (until_us - now_us) * interval '1 microsecond', wait_position = pos,
               updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
        status := 'waiting';
    END IF;
    -- Received or timed out: journaled, so a replay answers the same; either way but waiting, the
    -- cursor moves past the step (a caller that names positions has none).
    IF action IN ('receive', 'time_out') THEN
        answer_payload := forgeyard_pl.workflow_signal_result(status, payload);
        INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, result, epoch, recorded_at)
        VALUES (t_tenant, t_run, pos, t_step, 'done', answer_payload, t_epoch, now_at)
        ON CONFLICT ON CONSTRAINT wf_journal_pkey DO UPDATE SET status = 'done', result = excluded.result, error = NULL,
            epoch = excluded.epoch, recorded_at = excluded.recorded_at;
    END IF;
    IF action <> 'wait' THEN
        IF named IS NULL THEN
            UPDATE forgeyard.wf_cursors k SET position = pos, step = t_step
             WHERE k.tenant_id = t_tenant AND k.run_id = t_run AND k.epoch = t_epoch;
            IF NOT FOUND THEN
                PERFORM forgeyard_pl.workflow_cursor_lost(t_epoch, t_run);
            END IF;
        END IF;
        -- Past the wait: the run lets go of the wait and of a step deadline.
        UPDATE forgeyard.wf_runs x
           SET step_deadline = NULL,
               waiting_signal = CASE WHEN x.wait_position = pos THEN NULL ELSE x.waiting_signal END,
               wait_until = CASE WHEN x.wait_position = pos THEN NULL ELSE x.wait_until END,
               wait_position = CASE WHEN x.wait_position = pos THEN NULL ELSE x.wait_position END,
               updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run AND (x.step_deadline IS NOT NULL OR x.wait_position = pos);
    END IF;
    RETURN NEXT;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_wait_signal(text, uuid, bigint, text, text, interval, integer) IS
  'The next step of the run waits for a signal: received (the oldest unconsumed signal of that name, also one sent before the wait, with its payload), waiting (the run is released until the signal or the timeout), or timed_out. Replays answer as first recorded. With position, the step at that position (no cursor moves). FY060, FY001 and position as workflow_step.';

CREATE FUNCTION forgeyard.workflow_signal(tenant text, run_id uuid, signal text, payload jsonb DEFAULT '{}',
                                          signal_id uuid DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_signal text := forgeyard_pl.name_arg('signal', signal, 200);
    now_at timestamptz;
BEGIN
    PERFORM forgeyard_pl.not_null('payload', payload IS NOT NULL);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN forgeyard_pl.workflow_send_signal(t_tenant, run_id, t_signal, payload, coalesce(signal_id, gen_random_uuid()),
                                             now_at);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_signal(text, uuid, text, jsonb, uuid) IS
  'Send a signal to a run, in the caller''s transaction; a run waiting for it is handed out at once. False for a repeated signal_id or a run that has finished. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_complete(tenant text, run_id uuid, epoch bigint, result jsonb)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'completed',
                                          result, NULL);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_complete(text, uuid, bigint, jsonb) IS
  'End the run completed with its result. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_fail(tenant text, run_id uuid, epoch bigint, error text)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'failed',
                                          NULL, error);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_fail(text, uuid, bigint, text) IS
  'End the run failed with an error. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_park(tenant text, run_id uuid, epoch bigint, reason text)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
BEGIN
    PERFORM forgeyard_pl.workflow_end_run(forgeyard_pl.workflow_run_arg(tenant, run_id), run_id, epoch, 'parked',
                                          NULL, reason);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_park(text, uuid, bigint, text) IS
  'Stop the run for an operator (after FY060, in the worker''s next transaction): parked, listed by workflow_stuck, handed out again only by workflow_retry. FY001 for a stale owner.';

CREATE FUNCTION forgeyard.workflow_extend(tenant text, run_id uuid, epoch bigint, lease interval)
    RETURNS timestamptz LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_epoch bigint;
    now_at timestamptz;
    o record;
    capped interval;
    months numeric;
    days numeric;
    total numeric;
    left_us bigint;
    until timestamptz;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', epoch IS NOT NULL);
    t_epoch := epoch;
    PERFORM forgeyard_pl.not_null('lease', lease IS NOT NULL);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    o := forgeyard_pl.workflow_owned(t_tenant, t_run, t_epoch, now_at, 'owned', true);
    -- Not past the deadline of a step with a timeout (a lease that is not a plain duration goes
    -- through as it is, for extend's own checks).
    capped := lease;
    IF o.step_deadline IS NOT NULL THEN
        months := extract(year FROM lease) * 12 + extract(month FROM lease);
        days := extract(day FROM lease);
        total := extract(epoch FROM lease) * 1000000;
        left_us := forgeyard_pl.usecs(o.step_deadline) - forgeyard_pl.usecs(now_at);
        IF months = 0 AND days * 86400000000 BETWEEN -9223372036854775808 AND 9223372036854775807
           AND total BETWEEN -9223372036854775808 AND 9223372036854775807 AND total > 0 AND total > left_us THEN
            capped := left_us * interval '1 microsecond';
        END IF;
    END IF;
    until := forgeyard.extend(t_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, t_epoch, capped);
    UPDATE forgeyard.wf_runs x SET lease_until = until WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    RETURN until;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_extend(text, uuid, bigint, interval) IS
  'Keep the owner''s lease for lease from now, but not past the deadline of a step with a timeout in progress; returns when it runs out. FY001 for a stale owner or a lease that already ran out.';

CREATE FUNCTION forgeyard.workflow_cancel(tenant text, run_id uuid, reason text)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    t_reason text := coalesce(forgeyard_pl.text_arg('reason', reason, 4096, true), '');
    now_at timestamptz := forgeyard.now();
    t_state text;
    cancelled boolean;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    SELECT x.state INTO t_state FROM forgeyard.wf_runs x WHERE x.tenant_id = t_tenant AND x.run_id = t_run FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    -- A compensating run finishes its compensations first. Its message stays until the next claim
    -- of the definition lets it go; an owner's next journal write gets FY001.
    cancelled := t_state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked', 'compensating');
    IF cancelled THEN
        PERFORM forgeyard_pl.workflow_settle(t_tenant, t_run, 'cancelled', NULL, t_reason, now_at);
    END IF;
    RETURN cancelled;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_cancel(text, uuid, text) IS
  'Cancel a run that has not finished (false if it had, or is compensating); its owner''s next journal write gets FY001. A run with compensations to run is compensating first. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_retry(tenant text, run_id uuid)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
    now_at timestamptz := forgeyard.now();
    r record;
    retried boolean;
    q text;
    msg bigint;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    SELECT x.state, x.workflow, x.version, x.priority,
           EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id = t_tenant AND j.run_id = t_run
                      AND j.compensation_status = 'done') AS compensated
      INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = t_tenant AND x.run_id = t_run FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    -- A failed run whose steps were compensated cannot replay them as done.
    retried := r.state IN ('failed', 'parked', 'compensation_failed') AND (r.state = 'compensation_failed' OR NOT r.compensated);
    IF retried THEN
        q := '_wf.' || r.workflow || '@' || r.version;
        PERFORM forgeyard_pl.queue_ensure(t_tenant, q);
        msg := forgeyard_pl.workflow_enqueue(t_tenant, q, t_run, r.priority);
        -- A compensation_failed run resumes its compensations; another starts again where it failed.
        UPDATE forgeyard.wf_runs x
           SET state = CASE WHEN x.state = 'compensation_failed' THEN 'compensating' ELSE 'pending' END,
               msg_id = msg, lease_until = NULL,
               error = CASE WHEN x.state = 'compensation_failed' THEN x.error END,
               finished_at = NULL, purge_at = NULL, updated_at = now_at
         WHERE x.tenant_id = t_tenant AND x.run_id = t_run;
    END IF;
    RETURN retried;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_retry(text, uuid) IS
  'Hand a failed or parked run out again (false for a run in another state, or a failed run whose compensations ran): it replays its journal and runs again from the step that failed. A compensation_failed run resumes its compensations. 42704 for an unknown run.';

CREATE FUNCTION forgeyard.workflow_status(tenant text, run_id uuid)
    RETURNS TABLE (state text, workflow text, version integer, result jsonb, error text, owner text, epoch bigint,
                   updated_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT w.state, w.workflow, w.version, w.result, w.error, w.owner, w.epoch, w.updated_at
      FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = t_run;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_status(text, uuid) IS
  'A run''s state, definition, result or error, owner and epoch. 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_journal(tenant text, run_id uuid)
    RETURNS TABLE ("position" integer, step text, status text, result jsonb, epoch bigint, recorded_at timestamptz,
                   error text, attempts integer, compensation text, compensation_status text,
                   compensation_error text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.workflow_run_arg(tenant, run_id);
    t_run uuid := run_id;
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF NOT EXISTS (SELECT 1 FROM forgeyard.wf_runs w WHERE w.tenant_id = t_tenant AND w.run_id = t_run) THEN
        PERFORM forgeyard_pl.workflow_unknown_run(t_run, t_tenant);
    END IF;
    RETURN QUERY
    SELECT j.position, j.step, j.status, j.result, j.epoch, j.recorded_at, j.error, j.attempts, j.compensation,
           j.compensation_status, j.compensation_error
      FROM forgeyard.wf_journal j WHERE j.tenant_id = t_tenant AND j.run_id = t_run ORDER BY j.position;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.workflow_journal(text, uuid) IS
  'A run''s journal in position order: each step done (with its result and compensation) or failed (with its last error), its attempts and the epoch that wrote it, and how its compensation went (done, failed with its last error, or not run). 42704 for a run the tenant does not have.';

CREATE FUNCTION forgeyard.workflow_list(tenant text, state text DEFAULT NULL, max_runs integer DEFAULT 100)
    RETURNS TABLE (run_id uuid, run_key text, workflow text, version integer, state text, owner text, epoch bigint,
                   error text, updated_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
SELECT * FROM forgeyard_pl.workflow_list(tenant, state, max_runs);
$fy_body$;
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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_schedule text := forgeyard_pl.name_arg('schedule', schedule, 200);
    t_workflow text := forgeyard_pl.name_arg('workflow', workflow, 100);
    t_version integer;
    t_spec text;
    parsed bigint[];
    now_at timestamptz;
    now_us bigint;
    o_timezone text := 'UTC';
    o_catch_up integer := 0;
    o_input text := '{}';
    e record;
    n integer;
    next_us bigint;
    equal boolean;
BEGIN
    PERFORM forgeyard_pl.not_null('version', version IS NOT NULL);
    t_version := version;
    IF t_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'version must be at least 1, not ' || t_version;
    END IF;
    t_spec := forgeyard_pl.text_arg('spec', spec, 200);
    parsed := forgeyard_pl.workflow_sched_parse(t_spec);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT j.key, jsonb_typeof(j.value) AS type,
                        CASE WHEN j.key = 'input' THEN j.value::text ELSE j.value #>> '{}' END AS value
                   FROM jsonb_each(options) j LOOP
            IF e.key = 'timezone' THEN
                IF e.type <> 'string' THEN
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = 'schedule option timezone must be a string';
                END IF;
                o_timezone := forgeyard_pl.workflow_sched_zone(e.value);
            ELSIF e.key = 'catch_up' THEN
                o_catch_up := -1;
                IF e.type = 'number' AND e.value ~ '^[0-9]{1,4}$' THEN
                    o_catch_up := e.value::integer;
                END IF;
                IF o_catch_up < 0 OR o_catch_up > 1000 THEN
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = 'schedule option catch_up must be a whole number from 0 to 1000';
                END IF;
            ELSIF e.key = 'input' THEN
                o_input := coalesce(e.value, '');
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'unknown schedule option ' || forgeyard_pl.workflow_left_bytes(e.key, 100)
                              || ' (the options are timezone, catch_up and input)';
            END IF;
        END LOOP;
    END IF;
    now_us := forgeyard_pl.usecs(now_at);
    next_us := (forgeyard_pl.workflow_sched_fires(parsed, o_timezone, now_us, now_us, 0, 0)).following;
    INSERT INTO forgeyard.wf_schedules (tenant_id, schedule, workflow, version, spec, timezone, catch_up, input,
                                        next_fire, created_at, updated_at)
    VALUES (t_tenant, t_schedule, t_workflow, t_version, t_spec, o_timezone, o_catch_up, o_input::jsonb,
            now_at + (next_us - now_us) * interval '1 microsecond', now_at, now_at)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        -- There already: the same definition is a no-op, another one 42710.
        SELECT s.workflow = t_workflow AND s.version = t_version AND s.spec = t_spec AND s.timezone = o_timezone
               AND s.catch_up = o_catch_up AND s.input = o_input::jsonb
          INTO equal
          FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant AND s.schedule = t_schedule;
        IF NOT coalesce(equal, false) THEN
            RAISE EXCEPTION USING ERRCODE = '42710',
                MESSAGE = format('schedule "%s" already exists for tenant "%s" with another definition', t_schedule, t_tenant),
                DETAIL = 'drop it first (schedule_drop), or create it under another name';
        END IF;
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.schedule_create(text, text, text, integer, text, jsonb) IS
  'Create a schedule: spec is 5 cron fields (minute hour day-of-month month day-of-week, read in options.timezone, default UTC), a macro (@hourly, @daily, @weekly, @monthly, @yearly) or ''@every <interval>'' (15m, 1h30m, ...). Options: timezone, catch_up (0..1000 missed fires started besides the newest), input. The same definition again is a no-op; another one 42710.';

CREATE FUNCTION forgeyard.schedule_drop(tenant text, schedule text)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_schedule text := forgeyard_pl.name_arg('schedule', schedule, 200);
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    DELETE FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant AND s.schedule = t_schedule;
    RETURN FOUND;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.schedule_drop(text, text) IS
  'Drop a schedule (false if there was none); runs it started go on.';

CREATE FUNCTION forgeyard.schedule_tick(tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN forgeyard_pl.workflow_schedule_tick(t_tenant, now_at)::integer;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.schedule_tick(text) IS
  'Start the runs of the due schedules (of tenant, or all): the newest due fire and up to catch_up missed ones, the rest skipped and counted. Safe from several places at once: each fire starts one run. Returns the runs started. maintain() calls it.';

CREATE FUNCTION forgeyard.schedule_list(tenant text)
    RETURNS TABLE (schedule text, workflow text, version integer, spec text, timezone text, catch_up integer,
                   input jsonb, next_fire timestamptz, last_fire timestamptz, fires bigint, skipped bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT s.schedule, s.workflow, s.version, s.spec, s.timezone, s.catch_up, s.input, s.next_fire, s.last_fire,
           s.fires, s.skipped
      FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant ORDER BY s.schedule COLLATE "C";
END
$fy_body$;
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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_per bigint;
    buckets integer;
    s integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    IF rate IS NOT NULL THEN
        IF per IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'per must not be NULL';
        END IF;
        IF rate < 1 OR rate > 1000000000 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'rate must be between 1 and 1000000000', DETAIL = 'got ' || rate;
        END IF;
        v_per := forgeyard_pl.duration_arg('per', per, 2592000000000);
    END IF;
    UPDATE forgeyard.queues x SET admission_rate = rate, admission_per_usecs = v_per
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
    DELETE FROM forgeyard.queue_admission x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
    IF rate IS NOT NULL THEN
        buckets := greatest(1, least(rate, greatest(q.slots, 1)));
        FOR s IN 0 .. buckets - 1 LOOP
            INSERT INTO forgeyard.queue_admission (tenant_id, queue, slot, tokens, per_usecs)
            VALUES (q.tenant_id, q.queue, s, rate / buckets + CASE WHEN s < rate % buckets THEN 1 ELSE 0 END,
                    v_per);
        END LOOP;
    END IF;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.admission_limit(text, text, integer, interval) IS
  'Limit producers of a queue to rate enqueues per interval (a bucket of rate tokens refilled over per; a batch takes one per message). Over it enqueue fails with FY020 whose DETAIL ends in "retry after <n> ms". rate NULL removes the limit. 22023 for a rate outside 1..1e9 or a per that is not a positive interval of at most 30 days.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.admission_limit(text, text, integer, interval)');


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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_resource text;
    e record;
    has_rate boolean := false;
    v_rate bigint := 0;
    v_per bigint := 1000000;
    v_burst bigint := 0;
    v_max bigint;
    v_now timestamptz;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    PERFORM forgeyard_pl.not_null('options', options IS NOT NULL);
    FOR e IN SELECT x.o_key, x.o_value FROM forgeyard_pl.queue_option_pairs(options) x LOOP
        CASE e.o_key
            WHEN 'per' THEN
                has_rate := true;
                v_per := forgeyard_pl.duration_arg('resource option per',
                    forgeyard_pl.queue_interval_option('resource option per', e.o_value), 2592000000000);
            WHEN 'rate' THEN
                has_rate := true;
                v_rate := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            WHEN 'burst' THEN
                has_rate := true;
                v_burst := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            WHEN 'max_in_flight' THEN
                v_max := forgeyard_pl.queue_flow_integer('resource', e.o_key, e.o_value, 1, 1000000000);
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = format('resource option %s is unknown', e.o_key);
        END CASE;
    END LOOP;
    IF has_rate AND v_rate = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'resource option rate is required with per or burst';
    END IF;
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_ensure_resource(tenant, v_resource, v_now);
    UPDATE forgeyard.flow_resources x
       SET rate = CASE WHEN has_rate THEN v_rate END, per_usecs = CASE WHEN has_rate THEN v_per END,
           burst = CASE WHEN has_rate THEN CASE WHEN v_burst > 0 THEN v_burst ELSE v_rate END END, max_in_flight = v_max
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    PERFORM forgeyard_pl.queue_drop_resource_if_empty(tenant, v_resource);
    PERFORM forgeyard_pl.queue_settle_parts(tenant, v_resource, forgeyard.now());
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.resource_limit(text, text, jsonb) IS
  'Set what a resource allows its messages (enqueued with resource => ...) across every queue of the tenant: rate (integer) per per (interval, default 1 second) with burst (default rate), and max_in_flight. Replaces the resource''s limits; {} removes them. A message its resource refuses stays ready and is skipped by the claim, no attempt charged. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_configure(tenant text, resource text, options jsonb)
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_resource text;
    e record;
    v_rate double precision := 0.5;
    v_minimum bigint := 10;
    v_window bigint := 100;
    v_open bigint := 30000000;
    v_half bigint := 1;
    v_now timestamptz;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    IF options IS NOT NULL THEN
        FOR e IN SELECT x.o_key, x.o_value FROM forgeyard_pl.queue_option_pairs(options) x LOOP
            CASE e.o_key
                WHEN 'open_for' THEN
                    v_open := forgeyard_pl.duration_arg('breaker option open_for',
                        forgeyard_pl.queue_interval_option('breaker option open_for', e.o_value), 2592000000000);
                WHEN 'failure_rate' THEN
                    -- strtod's number (no trailing characters), above 0 and at most 1
                    BEGIN
                        IF e.o_value = '' OR e.o_value ~ '\s$' THEN
                            RAISE EXCEPTION USING ERRCODE = '22P02';
                        END IF;
                        v_rate := e.o_value::double precision;
                    EXCEPTION WHEN data_exception THEN
                        v_rate := -1;
                    END;
                    IF NOT (v_rate > 0) OR v_rate > 1 THEN
                        RAISE EXCEPTION USING ERRCODE = '22023',
                            MESSAGE = format('breaker option %s must be a number above 0 and at most 1', e.o_key);
                    END IF;
                WHEN 'minimum_calls' THEN
                    v_minimum := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                WHEN 'window' THEN
                    v_window := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                WHEN 'half_open_calls' THEN
                    v_half := forgeyard_pl.queue_flow_integer('breaker', e.o_key, e.o_value, 1, 1000);
                ELSE
                    RAISE EXCEPTION USING ERRCODE = '22023',
                        MESSAGE = format('breaker option %s is unknown', e.o_key);
            END CASE;
        END LOOP;
        IF v_minimum > v_window THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'breaker option minimum_calls must not exceed window';
        END IF;
    END IF;
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.queue_ensure_resource(tenant, v_resource, v_now);
    UPDATE forgeyard.flow_resources x
       SET failure_rate = CASE WHEN options IS NOT NULL THEN v_rate END,
           minimum_calls = CASE WHEN options IS NOT NULL THEN v_minimum END,
           window_calls = CASE WHEN options IS NOT NULL THEN v_window END,
           open_for_usecs = CASE WHEN options IS NOT NULL THEN v_open END,
           half_open_calls = CASE WHEN options IS NOT NULL THEN v_half END
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    UPDATE forgeyard.flow_resource_state x
       SET breaker = 'closed', outcomes = '', open_until = NULL, half_open_in_flight = 0, half_open_successes = 0,
           changed_at = v_now
     WHERE x.tenant_id = tenant AND x.resource = v_resource;
    PERFORM forgeyard_pl.queue_drop_resource_if_empty(tenant, v_resource);
    PERFORM forgeyard_pl.queue_settle_parts(tenant, v_resource, v_now);
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.breaker_configure(text, text, jsonb) IS
  'Give a resource a circuit breaker: it opens when at least minimum_calls (10) of the last window (100) outcomes were seen and failure_rate (0.5) of them failed (a nack; a permanent nack does not count), stays open for open_for (30 s: none of its messages is handed out), then lets half_open_calls (1) deliveries through: all succeed, it closes; one fails, it opens again. NULL options remove it. 22023 naming a bad option.';

CREATE FUNCTION forgeyard.breaker_state(tenant text, resource text)
    RETURNS TABLE (state text, failures integer, calls integer, changed_at timestamptz)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    v_resource text;
    b record;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    v_resource := forgeyard_pl.name_arg('resource', resource, 512);
    PERFORM forgeyard_pl.check_tenant(tenant);
    SELECT s.breaker, s.outcomes, s.changed_at AS changed, s.open_until <= forgeyard.now() AS lapsed INTO b
      FROM forgeyard.flow_resources c JOIN forgeyard.flow_resource_state s
        ON s.tenant_id = c.tenant_id AND s.resource = c.resource
     WHERE c.tenant_id = tenant AND c.resource = v_resource AND c.failure_rate IS NOT NULL AND s.part = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('resource "%s" has no breaker for tenant "%s"', v_resource, tenant);
    END IF;
    -- An open breaker whose time ran out lets the next claim through: it reads half_open.
    state := CASE WHEN b.breaker = 'open' AND coalesce(b.lapsed, false) THEN 'half_open' ELSE b.breaker END;
    failures := length(b.outcomes) - length(replace(b.outcomes, '1', ''));
    calls := length(b.outcomes);
    changed_at := b.changed;
    RETURN NEXT;
END
$fy_body$;
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
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fy_body$
DECLARE
    q forgeyard.queues%ROWTYPE;
    v_key text;
    v_weight integer;
BEGIN
    q := forgeyard_pl.queue_open(tenant, queue);
    v_key := forgeyard_pl.name_arg('fairness_key', fairness_key, 512);
    v_weight := coalesce(weight, 1);
    IF v_weight < 1 OR v_weight > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'weight must be between 1 and 1000';
    END IF;
    IF NOT q.fairness THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('queue "%s" is not fair', q.queue),
            DETAIL = 'set its option fairness first: forgeyard.queue_alter(tenant, queue, ''{"fairness": true}'')';
    END IF;
    INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, weight)
    VALUES (q.tenant_id, q.queue, v_key, v_weight)
    ON CONFLICT ON CONSTRAINT queue_fair_keys_pkey DO UPDATE SET weight = excluded.weight;
END
$fy_body$;
COMMENT ON FUNCTION forgeyard.fairness_weight(text, text, text, integer) IS
  'The share of a fairness key in a fair queue (option fairness), relative to other keys (1 each by default): a key of weight 3 gets three messages claimed for each one of a key of weight 1 while both have a backlog. Applies to messages enqueued after it. weight NULL resets it to 1. 22023 for a weight outside 1..1000 or a queue without fairness.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.fairness_weight(text, text, text, integer)');


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

-- The PL/pgSQL edition's own functions (extension/*.sql, @helper).
-- (extension/args.sql)
-- Raises code with message and detail (NULL: none): for SQL bodies, which have no RAISE.
CREATE OR REPLACE FUNCTION forgeyard_pl.fail(code text, message text, detail text DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    IF detail IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = detail;
END
$$;

-- core::check_name: 22004 NULL, 22023 empty, 22001 over max_bytes. Returns the value.
CREATE OR REPLACE FUNCTION forgeyard_pl.name_arg(argument text, value text, max_bytes integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF value = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' must not be empty';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '22001',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::optional_name_arg: NULL allowed (e.g. "all tenants"), otherwise name_arg's rules.
CREATE OR REPLACE FUNCTION forgeyard_pl.optional_name_arg(argument text, value text, max_bytes integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN forgeyard_pl.name_arg(argument, value, max_bytes);
END
$$;

-- pg::text_arg: any text up to max_bytes (22001), empty allowed; NULL is 22004 unless optional.
CREATE OR REPLACE FUNCTION forgeyard_pl.text_arg(argument text, value text, max_bytes integer, optional boolean DEFAULT false)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        IF optional THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '22001',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::bytea_arg: 22004 NULL (unless optional), 22023 under min_bytes ("must not be empty"),
-- 22001 over max_bytes.
CREATE OR REPLACE FUNCTION forgeyard_pl.bytea_arg(argument text, value bytea, max_bytes integer,
                                       optional boolean DEFAULT false, min_bytes integer DEFAULT 0)
    RETURNS bytea LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        IF optional THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF octet_length(value) < min_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' must not be empty';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '22001',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::int8_arg / int4_arg / regclass_arg / jsonb_arg: 22004 "<argument> must not be NULL".
CREATE OR REPLACE FUNCTION forgeyard_pl.not_null(argument text, present boolean)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF NOT present THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
END
$$;

-- core::check_duration: no month component, a day is 24 hours, 0 < total <= max_usecs; the
-- total in microseconds. NULL is 22004 (pg::duration_arg).
CREATE OR REPLACE FUNCTION forgeyard_pl.duration_arg(argument text, value interval, max_usecs bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    months numeric;
    days numeric;
    total numeric;
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
    months := extract(year FROM value) * 12 + extract(month FROM value);
    IF months <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = argument || ' must not have a month or year component',
            DETAIL = 'months and years have no fixed length; use days or hours';
    END IF;
    days := extract(day FROM value);
    -- With no months, the epoch of an interval is days * 86400 plus its time, exactly (numeric).
    total := extract(epoch FROM value) * 1000000;
    IF days * 86400000000 NOT BETWEEN -9223372036854775808 AND 9223372036854775807
       OR total NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' is out of range';
    END IF;
    IF total <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' must be positive';
    END IF;
    IF total > max_usecs THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' is too long',
            DETAIL = format('the maximum is %s seconds', max_usecs / 1000000);
    END IF;
    RETURN total::bigint;
END
$$;

-- Microseconds since 1970 of a timestamptz (the unit of epochs and fencing tokens).
CREATE OR REPLACE FUNCTION forgeyard_pl.usecs(t timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (extract(epoch FROM t) * 1000000)::bigint;
END
$$;

-- (extension/audit.sql)
-- core::utf8_length: the length of the UTF-8 sequence at byte i of b (1 to 4), 0 when it is not
-- valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF, not cut short).
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_utf8_length(b bytea, i integer)
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_check_text(argument text, value text)
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_json_scan(d jsonb)
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
                    RAISE EXCEPTION USING ERRCODE = '22023',
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
                RAISE EXCEPTION USING ERRCODE = '22023',
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_json(v jsonb)
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_details(d jsonb)
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
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'details must be a JSON object';
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
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'details is over 65536 bytes in canonical form';
    END IF;
    RETURN c;
END
$$;

-- finite_usecs of extension/audit.cpp and core::check_audit_time: a timestamp argument in
-- microseconds since 1970, finite and within the years 1 to 9999 (22023 naming argument).
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_usecs(argument text, t timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    u numeric;
BEGIN
    IF NOT pg_catalog.isfinite(t) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' must be a finite timestamp';
    END IF;
    u := EXTRACT(epoch FROM t) * 1000000;
    IF u < -62135596800000000 OR u > 253402300799999999 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = argument || ' must lie in the years 1 to 9999';
    END IF;
    RETURN u::bigint;
END
$$;

-- pg::unix_usecs of a time the arguments' checks never saw (a stored row audit_verify rehashes): the
-- C++ edition adds the epoch difference to PostgreSQL's int64 in two's complement, so that
-- 'infinity' and the last millennia wrap instead of failing; so does this.
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_wrapped_usecs(t timestamptz)
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_event_hash(tenant text, seq bigint, event_id uuid, occurred_at timestamptz,
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
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_not_utf8()
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = 'the audit log needs a database with UTF8 encoding',
        DETAIL = 'its hashes are over UTF-8 text, so that every store and the offline verifier agree';
END
$$;

-- The first append of tenant t (no head row yet): the genesis head, created unless a concurrent
-- append did, then locked FOR UPDATE until the transaction ends; its (seq, hash).
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_head_create(t text, OUT seq bigint, OUT hash bytea)
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO forgeyard.audit_heads (tenant_id, seq, hash)
    VALUES (t, 0, pg_catalog.decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex'))
    ON CONFLICT DO NOTHING;
    SELECT h.seq, h.hash INTO seq, hash
      FROM forgeyard.audit_heads h WHERE h.tenant_id = t FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'XX000',
            MESSAGE = 'the audit head of the tenant could not be locked';
    END IF;
END
$$;

-- An append whose event_id is already in the chain (`stored`: that event's seq, occurred_at, actor,
-- action, resource, details, payload_digest, payload_ref): returns when the new event's contents
-- are the stored ones (a retried append: the caller returns the stored (seq, hash)), FY011 when
-- they differ. occurred_at NULL matches any; d is the new event's canonical details.
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_replay(stored record, event_id uuid, occurred_at timestamptz, actor text,
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
    RAISE EXCEPTION USING ERRCODE = 'FY011',
        MESSAGE = pg_catalog.format('event_id %s is already in the chain with other contents', event_id),
        DETAIL = pg_catalog.format('it is event %s', stored.seq);
END
$$;

-- A stored details value as core::canonical_details gives it (audit_json's object case, inline),
-- or its text where it would refuse it (not an object, nested deeper than 64 levels, over 65536
-- bytes in canonical form): one row, for audit_verify and audit_read (LATERAL, per event). An SQL
-- function returning a set, not strict, with no SET clause: the planner inlines it as the
-- subquery it is, so that no event costs a call.
CREATE OR REPLACE FUNCTION forgeyard_pl.audit_stored_details(details jsonb)
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

-- (extension/idempotency.sql)
-- checkpoint / complete / abandon changed no row (their statement matches only an in-progress key
-- with the caller's attempt): say why, from the row locked FOR UPDATE. P0002 for an unknown key;
-- FY001 for another attempt (when one is given) or a completed key.
CREATE OR REPLACE FUNCTION forgeyard_pl.lease_idem_unchanged(t_tenant text, t_scope text, t_key text, t_attempt bigint,
                                                  operation text)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    stored_completed boolean;
    stored_attempt bigint;
BEGIN
    SELECT i.status = 'completed', i.attempt INTO stored_completed, stored_attempt
      FROM forgeyard.idempotency_keys i
     WHERE i.tenant_id = t_tenant AND i.scope = t_scope AND i.key = t_key
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002',
            MESSAGE = format('no idempotency key "%s" in scope "%s"', t_key, t_scope);
    END IF;
    IF t_attempt IS NOT NULL AND t_attempt <> stored_attempt THEN
        RAISE EXCEPTION USING ERRCODE = 'FY001',
            MESSAGE = format('%s by attempt %s refused: attempt %s owns the key now', operation, t_attempt, stored_attempt),
            DETAIL = 'the lock expired and another caller took the work over';
    END IF;
    IF stored_completed THEN
        RAISE EXCEPTION USING ERRCODE = 'FY001',
            MESSAGE = operation || ' refused: the key is already completed',
            DETAIL = 'begin again to get the stored response';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = operation || ' changed no row';
END
$$;

-- maintenance::purge_idempotency_keys (idem_purge, and maintain's task): up to max_rows keys whose
-- retention ended, oldest first, never one an attempt still holds a live lock on; SKIP LOCKED so
-- that purges from several places never wait for each other. Returns how many were deleted.
CREATE OR REPLACE FUNCTION forgeyard_pl.lease_idem_purge(now_at timestamptz, max_rows integer, p_tenant text)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    purged bigint;
BEGIN
    DELETE FROM forgeyard.idempotency_keys i USING (
        SELECT e.tenant_id, e.scope, e.key FROM forgeyard.idempotency_keys e
         WHERE e.expires_at <= now_at
           AND (e.status = 'completed' OR e.locked_until <= now_at)
           AND (p_tenant IS NULL OR e.tenant_id = p_tenant)
         ORDER BY e.expires_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE i.tenant_id = d.tenant_id AND i.scope = d.scope AND i.key = d.key;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;

-- (extension/inbox.sql)
-- maintenance::purge_inbox: up to max_rows entries accepted before `before` (tenant NULL: all
-- tenants), oldest first, each locked SKIP LOCKED (another purger takes the others). How many.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_purge_inbox(before timestamptz, max_rows integer, tenant text)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    purged bigint;
BEGIN
    DELETE FROM forgeyard.inbox i USING (
        SELECT e.tenant_id, e.consumer, e.event_id FROM forgeyard.inbox e
         WHERE e.accepted_at < before AND (tenant IS NULL OR e.tenant_id = tenant)
         ORDER BY e.accepted_at LIMIT max_rows FOR UPDATE SKIP LOCKED) d
     WHERE i.tenant_id = d.tenant_id AND i.consumer = d.consumer AND i.event_id = d.event_id;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;

-- (extension/lease.sql)
-- lease_reap's statement (its result columns share the name tenant with an argument, which
-- PL/pgSQL refuses in the API function itself): grants that expired without release, each
-- reported once, SKIP LOCKED so that reapers never wait for each other.
CREATE OR REPLACE FUNCTION forgeyard_pl.lease_reap(p_max integer, p_tenant text)
    RETURNS TABLE (r_tenant text, r_resource text, r_epoch bigint, r_holder text, r_expired_at timestamptz)
    LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz;
BEGIN
    IF p_max IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'max_leases must not be NULL';
    END IF;
    IF p_max <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_leases must be positive';
    END IF;
    p_tenant := forgeyard_pl.optional_name_arg('tenant', p_tenant, 128);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    RETURN QUERY
    UPDATE forgeyard.leases l SET reaped_at = now_at
      FROM (SELECT e.tenant_id, e.resource FROM forgeyard.leases e
             WHERE e.released_at IS NULL AND e.reaped_at IS NULL
               AND e.expires_at OPERATOR(pg_catalog.<=) now_at
               AND (p_tenant IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) p_tenant)
             ORDER BY e.expires_at LIMIT p_max FOR UPDATE SKIP LOCKED) d
     WHERE l.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND l.resource OPERATOR(pg_catalog.=) d.resource
    RETURNING l.tenant_id, l.resource, l.epoch, l.owner, l.expires_at;
END
$$;

-- FY001 for renew and fence: epoch is not the live grant of resource.
CREATE OR REPLACE FUNCTION forgeyard_pl.lease_stale(p_epoch bigint, p_resource text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FY001',
        MESSAGE = pg_catalog.format('lease epoch %s is not the live grant of "%s"', p_epoch, p_resource),
        DETAIL = 'the lease expired, was released, or was taken over; stop work';
END
$$;

-- (extension/queue.sql)
-- The ledger of shared counter rows this transaction holds locked (HeldRows in queue.hpp; the
-- rules are docs/architecture.md, "Locks held to commit"). Only the greatest key matters (a row
-- may be waited for only if its key is greater than every key held), so the ledger is that key,
-- in the transaction-local setting forgeyard_pl.held: reset when the transaction ends, and rolled
-- back with a subtransaction (whose row locks go with it). Keys are the bytes of
-- tenant \0 name \0 kind index (kind: c capacity slot, d admission bucket, p resource part,
-- w retry window), hex-encoded so that text order in collation "C" is their byte order.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_held_key(tenant text, name text, kind text, index integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN encode(convert_to(tenant, 'UTF8'), 'hex') || '00' || encode(convert_to(name, 'UTF8'), 'hex') || '00'
        || to_hex(ascii(kind)) || lpad(to_hex(index), 2, '0');
END
$$;

-- Whether this transaction may wait for the row of `key` (queue_held_key): only after every row it holds.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_held_may_wait(key text)
    RETURNS boolean LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    held text := current_setting('forgeyard_pl.held', true);
BEGIN
    RETURN held IS NULL OR held = '' OR key > held COLLATE "C";
END
$$;

-- Records that this transaction holds the row of `key` locked to its end.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_held_took(key text)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    held text := current_setting('forgeyard_pl.held', true);
BEGIN
    IF held IS NULL OR held = '' OR key > held COLLATE "C" THEN
        PERFORM set_config('forgeyard_pl.held', key, true);
    END IF;
END
$$;

-- A per-backend counter (the C++ edition's `static unsigned rotation = MyProcPid`), one per
-- `counter` name: returns its value modulo n and moves it on, so that one backend's calls start
-- one slot (bucket, part) further each time.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_rotate(counter text, n integer)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    setting text := current_setting('forgeyard_pl.rotation_' || counter, true);
    v bigint;
BEGIN
    IF setting IS NULL OR setting = '' THEN
        v := pg_backend_pid();
    ELSE
        v := setting::bigint;
    END IF;
    PERFORM set_config('forgeyard_pl.rotation_' || counter, ((v + 1) % 4294967296)::text, false);
    RETURN (v % n)::integer;
END
$$;

-- Whether the transaction reads under its own snapshot (REPEATABLE READ or SERIALIZABLE), where a
-- row changed since the snapshot could only be 40001 (pg::uses_transaction_snapshot).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_own_snapshot()
    RETURNS boolean LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN current_setting('transaction_isolation') IN ('repeatable read', 'serializable');
END
$$;

-- The queue's producer lock (pg::lock_queue): a transaction-level advisory lock on a 64-bit hash
-- of the tenant and queue, taken shared by producers (they do not wait for each other) and
-- exclusive by queue_drop (and a queue_alter that toggles max_in_flight_per_key or fairness),
-- which so waits for open producers, and they for it. Nothing is written.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_lock(tenant text, name text, exclusive boolean)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    k bigint := hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0);
BEGIN
    IF exclusive THEN
        PERFORM pg_advisory_xact_lock(k);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(k);
    END IF;
END
$$;

-- queue::load for names already checked: the queue's row of forgeyard.queues (42704 if the tenant
-- has no such queue). `producing`: the call adds messages: it takes the producer lock first (so a
-- producer that waited for a drop finds the queue gone), and under REPEATABLE READ or SERIALIZABLE
-- also locks the row FOR KEY SHARE (a drop it waited for is then 40001, not an enqueue into a
-- dropped queue). Returns a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_load(tenant text, name text, producing boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
BEGIN
    IF producing THEN
        -- (forgeyard_pl.queue_lock, shared)
        PERFORM pg_advisory_xact_lock_shared(
            hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0));
        IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name FOR KEY SHARE OF x;
        ELSE
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
        END IF;
    ELSE
        SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('queue "%s" does not exist for tenant "%s"', name, tenant);
    END IF;
    RETURN q;
END
$$;

-- queue::load(spi, fcinfo): the tenant and queue arguments checked (queue::tenant_arg,
-- queue::queue_arg: forgeyard_pl.name_arg's rules), the tenant rule (FY040), then queue_load.
-- Returns a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_open(tenant text, name text, producing boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
BEGIN
    IF tenant IS NULL OR tenant = '' OR octet_length(tenant) > 128 THEN
        PERFORM forgeyard_pl.name_arg('tenant', tenant, 128);
    END IF;
    IF name IS NULL OR name = '' OR octet_length(name) > 128 THEN
        PERFORM forgeyard_pl.name_arg('queue', name, 128);
    END IF;
    -- (forgeyard_pl.check_tenant reads nothing else when no role is bound)
    IF EXISTS (SELECT FROM forgeyard.tenant_bindings) THEN
        PERFORM forgeyard_pl.check_tenant(tenant);
    END IF;
    -- queue_load, inline
    IF producing THEN
        PERFORM pg_advisory_xact_lock_shared(
            hashtextextended('forgeyard.queues:' || octet_length(tenant) || ':' || tenant || '/' || name, 0));
        IF current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name FOR KEY SHARE OF x;
        ELSE
            SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
        END IF;
    ELSE
        SELECT x.* INTO q FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('queue "%s" does not exist for tenant "%s"', name, tenant);
    END IF;
    RETURN q;
END
$$;

-- queue::positive_int_arg: 22004 for NULL, 22023 outside 1..max.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_positive_int_arg(argument text, value integer, max integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF value < 1 OR value > max THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('%s must be between 1 and %s', argument, max);
    END IF;
    RETURN value;
END
$$;

-- core::priority_from_name: the class number (0 emergency .. 5 bulk) of a name; 22023 naming the
-- argument otherwise.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_priority(argument text, name text)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    CASE name
        WHEN 'emergency' THEN RETURN 0;
        WHEN 'security_control' THEN RETURN 1;
        WHEN 'realtime' THEN RETURN 2;
        WHEN 'interactive' THEN RETURN 3;
        WHEN 'background' THEN RETURN 4;
        WHEN 'bulk' THEN RETURN 5;
        ELSE
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = argument || ' must be one of emergency, security_control, realtime, interactive, background, bulk',
                DETAIL = format('got "%s"', name);
    END CASE;
END
$$;

-- core::priority_names.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_priority_name(priority integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[priority + 1];
END
$$;

-- The admit_<class> percentage of a queue (a forgeyard.queues row) for class `priority`.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_admit_percent(q record, priority integer)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    CASE priority
        WHEN 0 THEN RETURN q.admit_emergency;
        WHEN 1 THEN RETURN q.admit_security_control;
        WHEN 2 THEN RETURN q.admit_realtime;
        WHEN 3 THEN RETURN q.admit_interactive;
        WHEN 4 THEN RETURN q.admit_background;
        ELSE RETURN q.admit_bulk;
    END CASE;
END
$$;

-- core::slot_budget then core::class_limit: what class `priority` may use of capacity slot `slot`
-- of a queue (a forgeyard.queues row), in messages and bytes.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_class_limit(q record, priority integer, slot integer,
                                               OUT messages bigint, OUT bytes bigint)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    percent bigint := forgeyard_pl.queue_admit_percent(q, priority);
    m bigint := q.max_messages / q.slots + CASE WHEN slot < q.max_messages % q.slots THEN 1 ELSE 0 END;
    b bigint := q.max_bytes / q.slots + CASE WHEN slot < q.max_bytes % q.slots THEN 1 ELSE 0 END;
BEGIN
    messages := m / 100 * percent + m % 100 * percent / 100;
    bytes := b / 100 * percent + b % 100 * percent / 100;
END
$$;

-- A timestamptz from microseconds since 1970 (the inverse of forgeyard_pl.usecs), exact.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_at(us bigint)
    RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN to_timestamp((us / 1000000)::double precision) + (us % 1000000) * interval '1 microsecond';
END
$$;

-- An interval of `us` microseconds (a day is 24 hours: no day or month component).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_usecs_interval(us bigint)
    RETURNS interval LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (us / 1000000) * interval '1 second' + (us % 1000000) * interval '1 microsecond';
END
$$;

-- queue::usage: messages and bytes admitted and not yet released, summed over the slots (each
-- slot's admitted counts less its release row's and its release deltas').
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_usage(tenant text, name text, OUT messages bigint, OUT bytes bigint)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT coalesce(sum(u.m), 0)::bigint, coalesce(sum(u.b), 0)::bigint INTO messages, bytes
      FROM (SELECT a.admitted_messages - r.released_messages
                   - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                   a.admitted_bytes - r.released_bytes
                   - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
              FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
             WHERE a.tenant_id = tenant AND a.queue = name) u(m, b);
END
$$;

-- give_back (queue.cpp) for one slot: the room of `messages` released messages of `bytes` back
-- to slot `slot` of queue `name`, never waiting for a row another transaction holds: its release
-- row locked FOR NO KEY UPDATE SKIP LOCKED, the slot's committed deltas folded into it (each delta
-- locked SKIP LOCKED, so one another folder took is left to it, and deleted) and the room added. A
-- release row another transaction holds, or any under a transaction snapshot (`own`: where a row
-- changed since the snapshot could only be 40001), gets the room as a delta row of its own (an
-- INSERT, which waits for nobody). A slot without a release row (the queue was dropped under us)
-- is passed over.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_give_back_slot(tenant text, name text, slot integer, messages bigint, bytes bigint,
                                                  own boolean)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    deltas boolean;
BEGIN
    IF NOT own THEN
        SELECT EXISTS (SELECT FROM forgeyard.queue_release_deltas d
                        WHERE d.tenant_id = tenant AND d.queue = name AND d.slot = queue_give_back_slot.slot)
          INTO deltas
          FROM forgeyard.queue_releases r
         WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot
           FOR NO KEY UPDATE OF r SKIP LOCKED;
        IF FOUND THEN
            -- (The row is ours now: a statement after this one updates its newest version.)
            IF deltas THEN
                WITH f AS (DELETE FROM forgeyard.queue_release_deltas d
                            WHERE d.ctid = ANY (ARRAY(SELECT x.ctid FROM forgeyard.queue_release_deltas x
                                                       WHERE x.tenant_id = tenant AND x.queue = name
                                                         AND x.slot = queue_give_back_slot.slot
                                                       FOR UPDATE OF x SKIP LOCKED))
                           RETURNING d.released_messages, d.released_bytes)
                UPDATE forgeyard.queue_releases r
                   SET released_messages = r.released_messages + messages
                           + COALESCE((SELECT sum(f.released_messages) FROM f), 0)::bigint,
                       released_bytes = r.released_bytes + bytes + COALESCE((SELECT sum(f.released_bytes) FROM f), 0)::bigint
                 WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot;
            ELSE
                UPDATE forgeyard.queue_releases r
                   SET released_messages = r.released_messages + messages, released_bytes = r.released_bytes + bytes
                 WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot;
            END IF;
            RETURN;
        END IF;
    END IF;
    IF EXISTS (SELECT FROM forgeyard.queue_releases r
                WHERE r.tenant_id = tenant AND r.queue = name AND r.slot = queue_give_back_slot.slot) THEN
        INSERT INTO forgeyard.queue_release_deltas (tenant_id, queue, slot, released_messages, released_bytes)
        VALUES (tenant, name, slot, messages, bytes);
    END IF;
END
$$;

-- give_back (queue.cpp): queue_give_back_slot for each slot (slots ascending, one entry per slot).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_give_back(tenant text, name text, slots integer[], messages bigint[], bytes bigint[])
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    own boolean := current_setting('transaction_isolation') IN ('repeatable read', 'serializable');
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(slots, 1), 0) LOOP
        PERFORM forgeyard_pl.queue_give_back_slot(tenant, name, slots[i], messages[i], bytes[i], own);
    END LOOP;
END
$$;

-- leave_key (queue.cpp): `count` messages of a key of a max_in_flight_per_key queue (a
-- forgeyard.queues row) finished: its counts under the key's row lock, then up to the limit of its
-- waiting messages promoted, oldest first.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_leave_key(q record, key text, count bigint)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    v_pending bigint;
    v_heads bigint;
    room bigint;
    waiting bigint;
    promote bigint;
    promoted bigint := 0;
BEGIN
    SELECT p.pending, p.heads INTO v_pending, v_heads FROM forgeyard.queue_partitions p
     WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- (the queue was dropped under us)
    END IF;
    -- (Clamped: a message enqueued while max_in_flight_per_key was being set is not counted.)
    v_pending := v_pending - count;
    v_heads := greatest(0, v_heads - count);
    IF v_pending <= 0 THEN
        DELETE FROM forgeyard.queue_partitions p
         WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key;
        RETURN;
    END IF;
    room := q.max_in_flight_per_key - v_heads;
    waiting := v_pending - v_heads;
    promote := CASE WHEN room <= 0 OR waiting <= 0 THEN 0 ELSE least(room, waiting) END;
    IF promote > 0 THEN
        UPDATE forgeyard.messages m SET is_head = true
         WHERE m.msg_id = ANY (ARRAY(SELECT n.msg_id FROM forgeyard.messages n
                                      WHERE n.tenant_id = q.tenant_id AND n.queue = q.queue AND n.fairness_key = key
                                        AND n.state = 'pending' AND NOT n.is_head
                                      ORDER BY n.msg_id LIMIT promote));
        GET DIAGNOSTICS promoted = ROW_COUNT;
    END IF;
    UPDATE forgeyard.queue_partitions p SET pending = v_pending, heads = v_heads + promoted
     WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = key;
END
$$;

-- queue::apply: what left the live queue in one call (acked or dead messages; Releases in
-- queue.hpp) applied once per slot and per key, in ascending order, so that concurrent batches
-- lock the shared counter rows in one order. `slots`, `bytes` and `keys` have one entry per
-- message that left (its slot, its bytes, its core::group_key: the partition_key of a
-- partition-ordered queue, the fairness_key of a max_in_flight_per_key queue, NULL otherwise);
-- `resources`, `parts` and `outcomes` one per delivery bound to a resource that ended (its
-- resource, messages.resource_part, and 0 success, 1 failure, 2 neutral), recorded on the
-- resources with queue_record_outcomes. `q` is a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_apply(q record, slots integer[], bytes bigint[], keys text[],
                                         resources text[], parts integer[], outcomes integer[], at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    agg_slots integer[];
    agg_messages bigint[];
    agg_bytes bigint[];
    k record;
    pending bigint;
BEGIN
    IF coalesce(array_length(slots, 1), 0) = 1 THEN
        PERFORM forgeyard_pl.queue_give_back(q.tenant_id, q.queue, slots, ARRAY[1::bigint], bytes);
    ELSIF coalesce(array_length(slots, 1), 0) > 1 THEN
        SELECT array_agg(g.slot ORDER BY g.slot), array_agg(g.n ORDER BY g.slot), array_agg(g.b ORDER BY g.slot)
          INTO agg_slots, agg_messages, agg_bytes
          FROM (SELECT x.slot, count(*) AS n, sum(x.b)::bigint AS b FROM unnest(slots, bytes) x(slot, b) GROUP BY x.slot) g;
        PERFORM forgeyard_pl.queue_give_back(q.tenant_id, q.queue, agg_slots, agg_messages, agg_bytes);
    END IF;
    IF coalesce(array_length(resources, 1), 0) > 0 THEN
        PERFORM forgeyard_pl.queue_record_outcomes(q, resources, parts, outcomes, at_time);
    END IF;
    IF (q.ordering = 'partition' OR q.max_in_flight_per_key IS NOT NULL) AND coalesce(array_length(keys, 1), 0) > 0 THEN
        FOR k IN SELECT x.key, count(*) AS n FROM unnest(keys) x(key) WHERE x.key IS NOT NULL
                  GROUP BY x.key ORDER BY x.key COLLATE "C" LOOP
            IF q.ordering <> 'partition' THEN
                PERFORM forgeyard_pl.queue_leave_key(q, k.key, k.n);
                CONTINUE;
            END IF;
            pending := 0;
            UPDATE forgeyard.queue_partitions p SET pending = p.pending - k.n
             WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = k.key
            RETURNING p.pending INTO pending;
            IF coalesce(pending, 0) > 0 THEN
                UPDATE forgeyard.messages m SET is_head = true
                 WHERE m.msg_id = (SELECT n.msg_id FROM forgeyard.messages n
                                    WHERE n.tenant_id = q.tenant_id AND n.queue = q.queue AND n.partition_key = k.key
                                      AND n.state = 'pending' ORDER BY n.msg_id LIMIT 1);
            ELSE
                DELETE FROM forgeyard.queue_partitions p
                 WHERE p.tenant_id = q.tenant_id AND p.queue = q.queue AND p.partition_key = k.key AND p.pending = 0;
            END IF;
        END LOOP;
    END IF;
END
$$;

-- The max_messages argument of a claim (1..1000, queue::max_messages_arg).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_max_messages_arg(value integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN forgeyard_pl.queue_positive_int_arg('max_messages', value, 1000);
END
$$;

-- The visibility argument of a claim in microseconds (queue::visibility_arg): the queue's
-- visibility_usecs when NULL, otherwise at most 30 days.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_visibility_arg(value interval, queue_default bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RETURN queue_default;
    END IF;
    RETURN forgeyard_pl.duration_arg('visibility', value, 2592000000000);
END
$$;

-- (extension/queue_admin.sql)
-- The claim statement of up to `lim` messages (queue_claim.cpp's claim_sql, flow catalog): $1
-- tenant, $2 queue, $3 visible until, $4 consumer, $5 now. claim_plan explains it; the claim
-- (queue_claim.sql) runs it with the picked rows updated by msg_id instead of by tuple id.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_claim_sql(lim integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    picks text := '';
    p integer;
BEGIN
    FOR p IN 0 .. 5 LOOP
        IF p > 0 THEN
            picks := picks || ' UNION ALL ';
        END IF;
        picks := picks || 'SELECT * FROM (SELECT c.ctid FROM forgeyard.messages c'
            || '  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2'
            || '    AND c.priority OPERATOR(pg_catalog.=) ' || p || '::pg_catalog.int2 AND c.state OPERATOR(pg_catalog.=) ''pending'''
            || ' AND c.is_head AND c.pass IS NULL'
            || '    AND c.visible_at OPERATOR(pg_catalog.<=) $5'
            || '  ORDER BY c.visible_at, c.msg_id LIMIT ' || lim || ' FOR UPDATE SKIP LOCKED) c' || p;
    END LOOP;
    RETURN 'WITH picked AS (' || picks || ' LIMIT ' || lim || ')'
        || ' UPDATE forgeyard.messages m SET claim_token = pg_catalog.nextval(''forgeyard.claim_tokens''),'
        || '   attempt = m.attempt OPERATOR(pg_catalog.+) 1, visible_at = $3, claimed_by = $4'
        || '  FROM picked WHERE m.ctid OPERATOR(pg_catalog.=) picked.ctid'
        || ' RETURNING m.msg_id, m.event_id, m.partition_key, m.priority, m.attempt, m.claim_token,'
        || '   COALESCE(m.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e'
        || '      ON e.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND e.topic OPERATOR(pg_catalog.=) s.topic'
        || '     WHERE s.tenant_id OPERATOR(pg_catalog.=) m.tenant_id AND s.subscription OPERATOR(pg_catalog.=) m.queue'
        || '       AND e.event_id OPERATOR(pg_catalog.=) m.event_id)),'
        || '   m.enqueued_at, m.slot, m.bytes';
END
$$;

-- (extension/queue_claim.sql)
-- queue::claim: up to max_messages deliveries of queue `q` (a forgeyard.queues row) for consumer,
-- each invisible to others for `visibility` microseconds from at_time, with a new claim token.
-- Returns every row it handed out or dead-lettered: c_lapsed marks a delivery that lapsed on every
-- attempt (dead-lettered here, as a nack after max_attempts; its row carries what it was, payload
-- included, for a caller that owns what it stood for); the others are the deliveries. Delivery
-- order is ORDER BY c_priority, c_order, c_msg_id (c_order: a fair queue's pass, 0 elsewhere).
--
-- Without resources configured for the tenant and without aging, the claim is one statement (as
-- queue_claim.cpp's claim_sql, which claim_plan explains): per class, highest first, an index range
-- scan of messages_claim (messages_fair for a fair queue, by pass) that stops at the first message
-- not yet visible, each row locked FOR UPDATE SKIP LOCKED and updated with its token; run again
-- for the rest of the limit only when deliveries that lapsed on every attempt took places in it.
-- (The rows picked are updated by msg_id, not by tuple id as in claim_sql: a row whose newer
-- version the lock followed is then updated in that version, as the C++ edition's direct path
-- does, where a tuple id the statement's snapshot cannot see would leave it locked, unclaimed.)
-- Otherwise one message at a time, in the same order (aging: the oldest ready heads of each class
-- ordered by the class each has aged into), each locked SKIP LOCKED before its resource is asked:
-- the parts of a resource's state are locked SKIP LOCKED at their first use and charged
-- (queue_part_lock, queue_part_admit); only when every part is held by others, and this claim holds
-- no resource row, is the starting part waited for, if the transaction may wait for it.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_claim(q record, consumer text, max_messages integer, visibility bigint,
                                         at_time timestamptz)
    RETURNS TABLE (c_msg_id bigint, c_event_id uuid, c_partition_key text, c_priority integer, c_attempt integer,
                   c_claim_token bigint, c_payload bytea, c_enqueued_at timestamptz, c_order bigint, c_lapsed boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_until timestamptz := at_time + forgeyard_pl.queue_usecs_interval(visibility);
    plan_mode text;
    seqscan text;
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    got integer := 0;
    lim integer;
    n integer;
    r record;
    l_ids bigint[];
    l_slots integer[];
    l_bytes bigint[];
    l_keys text[];
BEGIN
    IF q.aging_usecs > 0 OR EXISTS (SELECT FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id) THEN
        RETURN QUERY SELECT * FROM forgeyard_pl.queue_claim_each(q, consumer, max_messages, visibility, at_time);
        RETURN;
    END IF;
    -- The claim statement runs its one generic plan, planned with sequential scans ruled out,
    -- as the C++ edition plans it (pg::Planning::generic): never planned again per call, and
    -- its shape does not depend on how big the queue was when it was planned.
    plan_mode := current_setting('plan_cache_mode');
    seqscan := current_setting('enable_seqscan');
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true);
    LOOP
        lim := max_messages - got;
        n := 0;
        IF NOT q.fairness THEN
            FOR r IN
                WITH picked AS (
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 0::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c0
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 1::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c1
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 2::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c2
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 3::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c3
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 4::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c4
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 5::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NULL AND c.visible_at <= at_time
                                    ORDER BY c.visible_at, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c5
                    LIMIT lim)
                UPDATE forgeyard.messages x
                   SET claim_token = nextval('forgeyard.claim_tokens'), attempt = x.attempt + 1, visible_at = v_until,
                       claimed_by = consumer
                  FROM picked WHERE x.msg_id = picked.msg_id
                RETURNING x.msg_id, x.event_id, x.partition_key, x.priority, x.attempt, x.claim_token,
                          COALESCE(x.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                                                  ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                                                WHERE s.tenant_id = x.tenant_id AND s.subscription = x.queue
                                                  AND e.event_id = x.event_id)) AS payload,
                          x.payload AS own_payload, x.enqueued_at, x.slot, x.bytes,
                          CASE WHEN key_limit THEN x.fairness_key ELSE x.partition_key END AS key, 0::bigint AS pass
            LOOP
                n := n + 1;
                c_msg_id := r.msg_id; c_event_id := r.event_id; c_partition_key := r.partition_key;
                c_priority := r.priority; c_attempt := r.attempt; c_claim_token := r.claim_token;
                c_enqueued_at := r.enqueued_at; c_order := r.pass;
                c_lapsed := r.attempt > q.max_attempts;
                IF c_lapsed THEN
                    c_payload := r.own_payload;
                    IF l_ids IS NULL THEN
                        l_ids := '{}'; l_slots := '{}'; l_bytes := '{}'; l_keys := '{}';
                    END IF;
                    l_ids := l_ids || r.msg_id;
                    l_slots := l_slots || r.slot::integer;
                    l_bytes := l_bytes || r.bytes;
                    l_keys := l_keys || r.key;
                ELSE
                    c_payload := r.payload;
                    got := got + 1;
                END IF;
                RETURN NEXT;
            END LOOP;
        ELSE
            -- A fair queue's classes are in pass order (messages_fair), where a row not yet
            -- visible says nothing of the rows after it: it is passed over, not a stop.
            FOR r IN
                WITH picked AS (
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 0::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c0
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 1::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c1
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 2::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c2
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 3::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c3
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 4::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c4
                    UNION ALL
                    SELECT * FROM (SELECT c.msg_id FROM forgeyard.messages c
                                    WHERE c.tenant_id = q.tenant_id AND c.queue = q.queue AND c.priority = 5::smallint
                                      AND c.state = 'pending' AND c.is_head AND c.pass IS NOT NULL AND c.visible_at <= at_time
                                    ORDER BY c.pass, c.msg_id LIMIT lim FOR UPDATE SKIP LOCKED) c5
                    LIMIT lim)
                UPDATE forgeyard.messages x
                   SET claim_token = nextval('forgeyard.claim_tokens'), attempt = x.attempt + 1, visible_at = v_until,
                       claimed_by = consumer
                  FROM picked WHERE x.msg_id = picked.msg_id
                RETURNING x.msg_id, x.event_id, x.partition_key, x.priority, x.attempt, x.claim_token,
                          COALESCE(x.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                                                  ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                                                WHERE s.tenant_id = x.tenant_id AND s.subscription = x.queue
                                                  AND e.event_id = x.event_id)) AS payload,
                          x.payload AS own_payload, x.enqueued_at, x.slot, x.bytes,
                          CASE WHEN key_limit THEN x.fairness_key ELSE x.partition_key END AS key, x.pass
            LOOP
                n := n + 1;
                c_msg_id := r.msg_id; c_event_id := r.event_id; c_partition_key := r.partition_key;
                c_priority := r.priority; c_attempt := r.attempt; c_claim_token := r.claim_token;
                c_enqueued_at := r.enqueued_at; c_order := r.pass;
                c_lapsed := r.attempt > q.max_attempts;
                IF c_lapsed THEN
                    c_payload := r.own_payload;
                    IF l_ids IS NULL THEN
                        l_ids := '{}'; l_slots := '{}'; l_bytes := '{}'; l_keys := '{}';
                    END IF;
                    l_ids := l_ids || r.msg_id;
                    l_slots := l_slots || r.slot::integer;
                    l_bytes := l_bytes || r.bytes;
                    l_keys := l_keys || r.key;
                ELSE
                    c_payload := r.payload;
                    got := got + 1;
                END IF;
                RETURN NEXT;
            END LOOP;
        END IF;
        -- Lapsed deliveries took places in the limit: the rest of it again (they are no longer
        -- visible, so not taken twice).
        EXIT WHEN n < lim OR got >= max_messages;
    END LOOP;
    PERFORM set_config('plan_cache_mode', plan_mode, true), set_config('enable_seqscan', seqscan, true);
    IF l_ids IS NOT NULL THEN
        UPDATE forgeyard.messages y
           SET state = 'dead', claim_token = NULL, finished_at = at_time, is_head = false,
               last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN y.payload END
         WHERE y.msg_id = ANY (l_ids);
        PERFORM forgeyard_pl.queue_apply(q, l_slots, l_bytes, l_keys, '{}', '{}', '{}', at_time);
    END IF;
END
$$;

-- The claim one message at a time (queue_claim with resources configured for the tenant, or
-- aging): the same rows as queue_claim returns.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_claim_each(q record, consumer text, max_messages integer, visibility bigint,
                                         at_time timestamptz)
    RETURNS TABLE (c_msg_id bigint, c_event_id uuid, c_partition_key text, c_priority integer, c_attempt integer,
                   c_claim_token bigint, c_payload bytea, c_enqueued_at timestamptz, c_order bigint, c_lapsed boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_until timestamptz := at_time + forgeyard_pl.queue_usecs_interval(visibility);
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    resources boolean := EXISTS (SELECT FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id);
    got integer := 0;
    m forgeyard.messages%ROWTYPE;
    cur refcursor;
    cur_open boolean := false;
    p integer := 0;
    ai integer := 0;
    a_ids bigint[];
    a_prios integer[];
    mp integer;
    v_attempt integer;
    v_token bigint;
    v_payload bytea;
    allowed boolean;
    transfer boolean;
    admitted_part integer;
    -- the resources this claim met, and per part of their state (index (resource - 1) * 8 + part + 1)
    h_res text[] := '{}';
    h_cfg forgeyard.flow_resources[] := '{}';
    h_n integer[] := '{}';
    h_start integer[] := '{}';
    p_tried boolean[] := '{}';
    p_found boolean[] := '{}';
    p_locked boolean[] := '{}';
    holding boolean := false;
    cfg forgeyard.flow_resources%ROWTYPE;
    found_cfg boolean;
    ri integer;
    np integer;
    k integer;
    i integer;
    ix integer;
    lk integer;
    refusing integer;
    any_found boolean;
    -- what left the live queue (deliveries that lapsed on every attempt)
    l_ids bigint[] := '{}';
    l_slots integer[] := '{}';
    l_bytes bigint[] := '{}';
    l_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
        IF q.aging_usecs > 0 THEN
        -- Aging: the oldest ready heads of each class, up to max_messages (and 32 more, for the
        -- rows other claimers hold) each, by the class each has aged into, then by age.
        SELECT coalesce(array_agg(x.msg_id ORDER BY x.aged, x.visible_at, x.msg_id), '{}'),
               coalesce(array_agg(x.priority ORDER BY x.aged, x.visible_at, x.msg_id), '{}')
          INTO a_ids, a_prios
          FROM (SELECT c.msg_id, c.priority, c.visible_at,
                       CASE WHEN c.priority <= 2 OR c.waited < q.aging_usecs THEN c.priority
                            WHEN c.waited / q.aging_usecs >= c.priority - 2 THEN 2
                            ELSE c.priority - (c.waited / q.aging_usecs)::integer END AS aged
                  FROM generate_series(0, 5) g,
                       LATERAL (SELECT y.msg_id, y.priority::integer AS priority, y.visible_at,
                                       forgeyard_pl.usecs(at_time) - forgeyard_pl.usecs(y.visible_at) AS waited
                                  FROM forgeyard.messages y
                                 WHERE y.tenant_id = q.tenant_id AND y.queue = q.queue AND y.priority = g::smallint
                                   AND y.state = 'pending' AND y.is_head AND y.pass IS NULL AND y.visible_at <= at_time
                                 ORDER BY y.visible_at, y.msg_id LIMIT max_messages + 32) c) x;
    END IF;
    LOOP
        EXIT WHEN got >= max_messages;
        -- the next candidate, locked SKIP LOCKED and still ready in its class
        IF q.aging_usecs > 0 THEN
            ai := ai + 1;
            EXIT WHEN ai > cardinality(a_ids);
            SELECT y.* INTO m FROM forgeyard.messages y
             WHERE y.msg_id = a_ids[ai] AND y.state = 'pending' AND y.is_head AND y.priority = a_prios[ai]::smallint
               AND y.visible_at <= at_time AND y.tenant_id = q.tenant_id AND y.queue = q.queue
             FOR UPDATE OF y SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            mp := a_prios[ai];
        ELSE
            IF NOT cur_open THEN
                EXIT WHEN p > 5;
                IF q.fairness THEN
                    OPEN cur NO SCROLL FOR
                        SELECT y.* FROM forgeyard.messages y
                         WHERE y.tenant_id = q.tenant_id AND y.queue = q.queue AND y.priority = p::smallint
                           AND y.state = 'pending' AND y.is_head AND y.pass IS NOT NULL AND y.visible_at <= at_time
                         ORDER BY y.pass, y.msg_id FOR UPDATE OF y SKIP LOCKED;
                ELSE
                    OPEN cur NO SCROLL FOR
                        SELECT y.* FROM forgeyard.messages y
                         WHERE y.tenant_id = q.tenant_id AND y.queue = q.queue AND y.priority = p::smallint
                           AND y.state = 'pending' AND y.is_head AND y.pass IS NULL AND y.visible_at <= at_time
                         ORDER BY y.visible_at, y.msg_id FOR UPDATE OF y SKIP LOCKED;
                END IF;
                cur_open := true;
            END IF;
            FETCH cur INTO m;
            IF NOT FOUND THEN
                CLOSE cur;
                cur_open := false;
                p := p + 1;
                CONTINUE;
            END IF;
            mp := p;
        END IF;
        -- hand it out, dead-letter it (it lapsed on every attempt), or leave it ready (its
        -- resource refuses it: no attempt charged)
        v_attempt := m.attempt + 1;
        admitted_part := -1;
        allowed := true;
        IF resources AND v_attempt <= q.max_attempts AND m.resource IS NOT NULL THEN
            transfer := m.claim_token IS NOT NULL;
            ri := array_position(h_res, m.resource);
            IF ri IS NULL THEN
                SELECT f.* INTO cfg FROM forgeyard.flow_resources f
                 WHERE f.tenant_id = q.tenant_id AND f.resource = m.resource;
                found_cfg := FOUND;
                h_res := h_res || m.resource;
                ri := cardinality(h_res);
                h_cfg := h_cfg || cfg;
                IF found_cfg THEN
                    h_n := h_n || cfg.parts::integer;
                    h_start := h_start || CASE WHEN cfg.parts > 1 THEN forgeyard_pl.queue_rotate('part', cfg.parts) ELSE 0 END;
                ELSE
                    h_n := h_n || 0;
                    h_start := h_start || 0;
                END IF;
                p_tried := p_tried || array_fill(false, ARRAY[8]);
                p_found := p_found || array_fill(false, ARRAY[8]);
                p_locked := p_locked || array_fill(false, ARRAY[8]);
            END IF;
            np := h_n[ri];
            IF np > 0 THEN
                allowed := false;
                refusing := -1;
                any_found := false;
                FOR k IN 0 .. np - 1 LOOP
                    i := (h_start[ri] + k) % np;
                    ix := (ri - 1) * 8 + i + 1;
                    -- Parts are taken without waiting: one another claim holds is passed over.
                    IF NOT p_tried[ix] THEN
                        p_tried[ix] := true;
                        lk := forgeyard_pl.queue_part_lock(q.tenant_id, m.resource, i, np,
                                                          forgeyard_pl.queue_part_config(h_cfg[ri], i), false, at_time);
                        p_found[ix] := lk > 0;
                        p_locked[ix] := lk = 2;
                        holding := holding OR lk = 2;
                    END IF;
                    any_found := any_found OR p_found[ix];
                    CONTINUE WHEN NOT p_locked[ix];
                    IF forgeyard_pl.queue_part_admit(q.tenant_id, m.resource, i,
                                                     forgeyard_pl.queue_part_config(h_cfg[ri], i), at_time, transfer) THEN
                        allowed := true;
                        IF NOT transfer THEN
                            admitted_part := i;
                        END IF;
                        EXIT;
                    END IF;
                    IF refusing < 0 THEN
                        refusing := i;
                    END IF;
                END LOOP;
                IF NOT allowed AND NOT any_found THEN
                    allowed := true;  -- configured a moment ago, its state not yet visible: not limited
                END IF;
                IF NOT allowed THEN
                    -- Every part is held by others and this claim holds no resource row: the
                    -- starting part is waited for, if the transaction may wait for it.
                    i := h_start[ri];
                    ix := (ri - 1) * 8 + i + 1;
                    IF refusing < 0 AND NOT holding AND forgeyard_pl.queue_held_may_wait(
                           forgeyard_pl.queue_held_key(q.tenant_id, m.resource, 'p', i)) THEN
                        IF p_found[ix] THEN
                            p_tried[ix] := true;
                            lk := forgeyard_pl.queue_part_lock(q.tenant_id, m.resource, i, np,
                                                              forgeyard_pl.queue_part_config(h_cfg[ri], i), true, at_time);
                            p_found[ix] := lk > 0;
                            p_locked[ix] := lk = 2;
                            holding := holding OR lk = 2;
                        END IF;
                        IF p_locked[ix] THEN
                            IF forgeyard_pl.queue_part_admit(q.tenant_id, m.resource, i,
                                                             forgeyard_pl.queue_part_config(h_cfg[ri], i), at_time, transfer) THEN
                                allowed := true;
                                IF NOT transfer THEN
                                    admitted_part := i;
                                END IF;
                            ELSE
                                refusing := i;
                            END IF;
                        END IF;
                    END IF;
                    IF NOT allowed AND refusing >= 0 THEN
                        UPDATE forgeyard.flow_resource_state s SET refused = s.refused + 1
                         WHERE s.tenant_id = q.tenant_id AND s.resource = m.resource AND s.part = refusing::smallint;
                    END IF;
                END IF;
            END IF;
        END IF;
        CONTINUE WHEN NOT allowed;
        v_token := nextval('forgeyard.claim_tokens');
        c_msg_id := m.msg_id; c_event_id := m.event_id; c_partition_key := m.partition_key; c_priority := mp;
        c_attempt := v_attempt; c_claim_token := v_token; c_enqueued_at := m.enqueued_at;
        c_order := CASE WHEN q.fairness THEN m.pass ELSE 0 END;
        c_lapsed := v_attempt > q.max_attempts;
        IF c_lapsed THEN
            c_payload := m.payload;
            l_ids := l_ids || m.msg_id;
            l_slots := l_slots || m.slot::integer;
            l_bytes := l_bytes || m.bytes;
            l_keys := l_keys || CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END;
            IF resources AND m.resource IS NOT NULL THEN
                o_res := o_res || m.resource;
                o_parts := o_parts || coalesce(m.resource_part, 0)::integer;
                o_kinds := o_kinds || 2;
            END IF;
        ELSE
            c_payload := m.payload;
            IF c_payload IS NULL AND m.event_id IS NOT NULL THEN
                -- A subscription's message has no payload of its own: it is its topic event's.
                SELECT e.payload INTO c_payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e
                    ON e.tenant_id = s.tenant_id AND e.topic = s.topic
                 WHERE s.tenant_id = q.tenant_id AND s.subscription = q.queue AND e.event_id = m.event_id;
            END IF;
            got := got + 1;
        END IF;
        RETURN NEXT;
        IF admitted_part >= 0 THEN
            UPDATE forgeyard.messages y
               SET attempt = v_attempt, claim_token = v_token, visible_at = v_until, claimed_by = consumer,
                   resource_part = admitted_part::smallint
             WHERE y.msg_id = m.msg_id;
        ELSE
            UPDATE forgeyard.messages y
               SET attempt = v_attempt, claim_token = v_token, visible_at = v_until, claimed_by = consumer
             WHERE y.msg_id = m.msg_id;
        END IF;
    END LOOP;
    IF cur_open THEN
        CLOSE cur;
    END IF;
    IF cardinality(l_ids) > 0 THEN
        UPDATE forgeyard.messages y
           SET state = 'dead', claim_token = NULL, finished_at = at_time, is_head = false,
               last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN y.payload END
         WHERE y.msg_id = ANY (l_ids);
        PERFORM forgeyard_pl.queue_apply(q, l_slots, l_bytes, l_keys, o_res, o_parts, o_kinds, at_time);
    END IF;
END
$$;

-- (extension/queue_create.sql)
-- core::bad_option: 22023 "queue option <key> <why>".
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_bad_option(key text, why text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('queue option %s %s', key, why);
END
$$;

-- core::positive_integer (queue_options.cpp): digits only, at most max (checked digit by digit,
-- so the first digit that would pass max decides), above 0.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_positive_integer(key text, value text, max bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v bigint := 0;
    d integer;
    i integer;
BEGIN
    IF value = '' THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
    END IF;
    FOR i IN 1 .. length(value) LOOP
        d := ascii(substr(value, i, 1)) - 48;
        IF d < 0 OR d > 9 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
        END IF;
        IF v > (max - d) / 10 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be at most ' || max);
        END IF;
        v := v * 10 + d;
    END LOOP;
    IF v <= 0 THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a positive integer');
    END IF;
    RETURN v;
END
$$;

-- core::fraction (queue_options.cpp): digits with at most one point, no exponent, in [0, 1];
-- computed in double precision step by step as the C++ edition computes it.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_fraction(key text, value text)
    RETURNS double precision LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    whole double precision := 0;
    scale double precision := 1;
    point boolean := false;
    digits boolean := false;
    c integer;
    i integer;
BEGIN
    FOR i IN 1 .. length(value) LOOP
        c := ascii(substr(value, i, 1));
        IF c = 46 AND NOT point THEN
            point := true;
        ELSIF c BETWEEN 48 AND 57 THEN
            digits := true;
            CONTINUE WHEN point AND scale < 1e-12;  -- past double's precision
            IF point THEN
                scale := scale / 10;
                whole := whole + (c - 48) * scale;
            ELSE
                whole := whole * 10 + (c - 48);
            END IF;
        ELSE
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
        END IF;
        IF whole > 1 THEN
            PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
        END IF;
    END LOOP;
    IF NOT digits THEN
        PERFORM forgeyard_pl.queue_bad_option(key, 'must be a number between 0 and 1');
    END IF;
    RETURN whole;
END
$$;

-- The defaults of every option (core::QueueOptions), as a forgeyard.queues row of the queue.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_defaults(tenant text, name text)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    o forgeyard.queues%ROWTYPE;
BEGIN
    o.tenant_id := tenant;
    o.queue := name;
    o.max_messages := 100000;
    o.max_bytes := 1073741824;
    o.max_payload_bytes := 65536;
    o.visibility_usecs := 30000000;
    o.max_attempts := 5;
    o.backoff_base_usecs := 1000000;
    o.backoff_max_usecs := 300000000;
    o.ordering := 'none';
    o.dead_letter_payload := 'drop';
    o.retain_acked_usecs := 0;
    o.max_dead := 100000;
    o.dead_retention_usecs := 604800000000;
    o.dedup_window_usecs := 86400000000;
    o.admit_emergency := 100;
    o.admit_security_control := 100;
    o.admit_realtime := 95;
    o.admit_interactive := 90;
    o.admit_background := 80;
    o.admit_bulk := 70;
    o.notify := false;
    o.retry_budget := NULL;
    o.retry_budget_min := 10;
    o.retry_budget_window_usecs := 60000000;
    o.admission_rate := NULL;
    o.admission_per_usecs := NULL;
    o.max_in_flight_per_key := NULL;
    o.fairness := false;
    o.aging_usecs := 0;
    RETURN o;
END
$$;

-- core::set_queue_option: one option other than a duration from its JSON text, over `o` (a
-- forgeyard.queues row); 22023 naming the option when unknown or invalid.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_set_option(o record, key text, value text)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    big constant bigint := 1125899906842624;
    p integer;
    v bigint;
BEGIN
    CASE key
        WHEN 'max_messages' THEN o.max_messages := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'max_bytes' THEN o.max_bytes := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'max_payload_bytes' THEN o.max_payload_bytes := forgeyard_pl.queue_positive_integer(key, value, 67108864);
        WHEN 'max_attempts' THEN o.max_attempts := forgeyard_pl.queue_positive_integer(key, value, 1000);
        WHEN 'max_dead' THEN o.max_dead := forgeyard_pl.queue_positive_integer(key, value, big);
        WHEN 'notify', 'fairness' THEN
            IF value NOT IN ('true', 'false') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be true or false');
            END IF;
            IF key = 'notify' THEN
                o.notify := value = 'true';
            ELSE
                o.fairness := value = 'true';
            END IF;
        WHEN 'retry_budget' THEN
            o.retry_budget := CASE WHEN value = 'null' THEN NULL ELSE forgeyard_pl.queue_fraction(key, value) END;
        WHEN 'max_in_flight_per_key' THEN
            o.max_in_flight_per_key := CASE WHEN value = 'null' THEN NULL
                                            ELSE forgeyard_pl.queue_positive_integer(key, value, 1000000) END;
        WHEN 'retry_budget_min' THEN
            IF value = '0' THEN
                o.retry_budget_min := 0;
            ELSE
                IF value = '' OR ascii(value) NOT BETWEEN 49 AND 57 THEN
                    PERFORM forgeyard_pl.queue_bad_option(key, 'must be a non-negative integer');
                END IF;
                o.retry_budget_min := forgeyard_pl.queue_positive_integer(key, value, big);
            END IF;
        WHEN 'ordering' THEN
            IF value NOT IN ('none', 'partition') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be none or partition');
            END IF;
            o.ordering := value;
        WHEN 'dead_letter_payload' THEN
            IF value NOT IN ('drop', 'keep') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be drop or keep');
            END IF;
            o.dead_letter_payload := value;
        ELSE
            IF left(key, 6) = 'admit_' THEN
                p := forgeyard_pl.queue_priority('queue option ' || key, substr(key, 7));
                v := forgeyard_pl.queue_positive_integer(key, value, 100);
                CASE p
                    WHEN 0 THEN o.admit_emergency := v;
                    WHEN 1 THEN o.admit_security_control := v;
                    WHEN 2 THEN o.admit_realtime := v;
                    WHEN 3 THEN o.admit_interactive := v;
                    WHEN 4 THEN o.admit_background := v;
                    ELSE o.admit_bulk := v;
                END CASE;
            ELSIF key IN ('visibility_timeout', 'backoff_base', 'backoff_max', 'retain_acked', 'dead_letter_retention',
                          'dedup_window', 'retry_budget_window', 'aging') THEN
                PERFORM forgeyard_pl.queue_bad_option(key, 'must be an interval');
            ELSE
                PERFORM forgeyard_pl.queue_bad_option(key, 'is unknown');
            END IF;
    END CASE;
    RETURN o;
END
$$;

-- core::validate(QueueOptions): the cross-field checks, in the C++ edition's order.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_validate(o record)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    names constant text[] := ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'];
    admit bigint[] := ARRAY[o.admit_emergency, o.admit_security_control, o.admit_realtime, o.admit_interactive,
                            o.admit_background, o.admit_bulk];
    positive_keys constant text[] := ARRAY['max_messages', 'max_bytes', 'max_payload_bytes', 'visibility_timeout',
                                           'max_attempts', 'backoff_base', 'backoff_max', 'max_dead',
                                           'dead_letter_retention', 'dedup_window', 'retry_budget_window'];
    positive bigint[] := ARRAY[o.max_messages, o.max_bytes, o.max_payload_bytes, o.visibility_usecs, o.max_attempts,
                               o.backoff_base_usecs, o.backoff_max_usecs, o.max_dead, o.dead_retention_usecs,
                               o.dedup_window_usecs, o.retry_budget_window_usecs];
    key_limit bigint := coalesce(o.max_in_flight_per_key, 0);
    i integer;
BEGIN
    FOR i IN 1 .. 11 LOOP
        IF positive[i] <= 0 THEN
            PERFORM forgeyard_pl.queue_bad_option(positive_keys[i], 'must be positive');
        END IF;
    END LOOP;
    IF o.max_attempts > 1000 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_attempts', 'must be at most 1000');
    END IF;
    IF o.retain_acked_usecs < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('retain_acked', 'must not be negative');
    END IF;
    IF o.aging_usecs < 0 OR o.aging_usecs > 2592000000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('aging', 'must be an interval of at least 0 and at most 30 days');
    END IF;
    IF o.aging_usecs > 0 AND o.fairness THEN
        PERFORM forgeyard_pl.queue_bad_option('aging',
            'cannot be combined with fairness (a fair queue orders a class by pass, not by age)');
    END IF;
    IF o.retry_budget IS NOT NULL AND (o.retry_budget < 0 OR o.retry_budget > 1) THEN
        PERFORM forgeyard_pl.queue_bad_option('retry_budget', 'must be a number between 0 and 1');
    END IF;
    IF o.retry_budget_min < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('retry_budget_min', 'must not be negative');
    END IF;
    IF key_limit < 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key', 'must be a positive integer');
    END IF;
    IF key_limit > 1000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key', 'must be at most 1000000');
    END IF;
    IF o.ordering = 'partition' AND key_limit > 0 THEN
        PERFORM forgeyard_pl.queue_bad_option('max_in_flight_per_key',
            'cannot be combined with ordering partition (which hands out one message of a partition_key at a time)');
    END IF;
    IF o.visibility_usecs > 2592000000000 OR o.backoff_max_usecs > 2592000000000 THEN
        PERFORM forgeyard_pl.queue_bad_option('visibility_timeout', 'and backoff_max must be at most 30 days');
    END IF;
    FOR i IN 1 .. 6 LOOP
        IF admit[i] < 1 OR admit[i] > 100 THEN
            PERFORM forgeyard_pl.queue_bad_option('admit_' || names[i], 'must be between 1 and 100');
        END IF;
    END LOOP;
    IF o.max_payload_bytes > o.max_bytes THEN
        PERFORM forgeyard_pl.queue_bad_option('max_payload_bytes', 'must not exceed max_bytes');
    END IF;
    IF o.backoff_base_usecs > o.backoff_max_usecs THEN
        PERFORM forgeyard_pl.queue_bad_option('backoff_base', 'must not exceed backoff_max');
    END IF;
    FOR i IN 2 .. 6 LOOP
        IF admit[i] > admit[i - 1] THEN
            PERFORM forgeyard_pl.queue_bad_option('admit_' || names[i],
                'must not exceed admit_' || names[i - 1] || ': a lower class is refused earlier');
        END IF;
    END LOOP;
END
$$;

-- parse_options (queue_create.cpp): the options of a jsonb object over `base` (a forgeyard.queues
-- row), key by key in jsonb's order (numbers and names as text, durations as interval text), then
-- core::validate. 22023 for anything but an object.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_parse_options(options jsonb, base record)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    o forgeyard.queues%ROWTYPE := base;
    e record;
    v text;
    iv interval;
    us bigint;
BEGIN
    IF jsonb_typeof(options) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
    END IF;
    FOR e IN SELECT x.key, x.value #>> '{}' AS value FROM jsonb_each(options) x LOOP
        v := coalesce(e.value, 'null');
        IF e.key = 'aging' AND v = 'null' THEN  -- (null: no aging, as 0)
            o.aging_usecs := 0;
        ELSIF e.key IN ('visibility_timeout', 'backoff_base', 'backoff_max', 'retain_acked', 'dead_letter_retention',
                        'dedup_window', 'retry_budget_window', 'aging') THEN
            BEGIN
                iv := v::interval;
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = format('queue option %s must be an interval', e.key), DETAIL = format('got "%s"', v);
            END;
            -- retain_acked may be zero: acked messages are then deleted at once; aging zero is none.
            IF e.key IN ('retain_acked', 'aging') AND extract(year FROM iv) = 0 AND extract(month FROM iv) = 0
               AND extract(day FROM iv) = 0 AND extract(epoch FROM iv) = 0 THEN
                us := 0;
            ELSE
                us := forgeyard_pl.duration_arg('queue option ' || e.key, iv,
                    CASE WHEN e.key IN ('retain_acked', 'dead_letter_retention', 'dedup_window')
                         THEN 31536000000000 ELSE 2592000000000 END);
            END IF;
            CASE e.key
                WHEN 'visibility_timeout' THEN o.visibility_usecs := us;
                WHEN 'backoff_base' THEN o.backoff_base_usecs := us;
                WHEN 'backoff_max' THEN o.backoff_max_usecs := us;
                WHEN 'retain_acked' THEN o.retain_acked_usecs := us;
                WHEN 'dead_letter_retention' THEN o.dead_retention_usecs := us;
                WHEN 'dedup_window' THEN o.dedup_window_usecs := us;
                WHEN 'retry_budget_window' THEN o.retry_budget_window_usecs := us;
                ELSE o.aging_usecs := us;
            END CASE;
        ELSE
            o := forgeyard_pl.queue_set_option(o, e.key, v);
        END IF;
    END LOOP;
    PERFORM forgeyard_pl.queue_validate(o);
    RETURN o;
END
$$;

-- core::workflow::refuse_reserved_queue: queue names starting "_wf." belong to workflows.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_refuse_reserved(name text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF left(name, 4) = '_wf.' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'queue names starting "_wf." are reserved for workflows',
            DETAIL = 'workflow_start creates the queue of a definition; queue_alter may change its options';
    END IF;
END
$$;

-- queue::insert_queue: a queue with options `o` (a forgeyard.queues row) and its capacity slots
-- (core::capacity_slots) and release counters; false, and nothing changed, if it exists.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_insert(tenant text, name text, o record)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    slots integer := greatest(1, least(8, least(o.max_messages / 1024, o.max_bytes / 1024 / o.max_payload_bytes)));
BEGIN
    INSERT INTO forgeyard.queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,
        max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,
        max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,
        admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots, created_at,
        retry_budget, retry_budget_min, retry_budget_window_usecs, max_in_flight_per_key, fairness, aging_usecs)
    VALUES (tenant, name, o.max_messages, o.max_bytes, o.max_payload_bytes, o.visibility_usecs,
        o.max_attempts, o.backoff_base_usecs, o.backoff_max_usecs, o.ordering, o.dead_letter_payload,
        o.retain_acked_usecs, o.max_dead, o.dead_retention_usecs, o.dedup_window_usecs, o.admit_emergency,
        o.admit_security_control, o.admit_realtime, o.admit_interactive, o.admit_background, o.admit_bulk, o.notify,
        slots, forgeyard.now(), o.retry_budget, o.retry_budget_min, o.retry_budget_window_usecs,
        o.max_in_flight_per_key, o.fairness, o.aging_usecs)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO forgeyard.queue_slots (tenant_id, queue, slot) SELECT tenant, name, s FROM generate_series(0, slots - 1) s;
    INSERT INTO forgeyard.queue_releases (tenant_id, queue, slot) SELECT tenant, name, s FROM generate_series(0, slots - 1) s;
    RETURN true;
END
$$;

-- queue::ensure_queue: the queue with default options unless it exists (a workflow's definition
-- queue). Names already checked.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_ensure(tenant text, name text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM forgeyard.queues x WHERE x.tenant_id = tenant AND x.queue = name) THEN
        PERFORM forgeyard_pl.queue_insert(tenant, name, forgeyard_pl.queue_defaults(tenant, name));
    END IF;
END
$$;

-- (extension/queue_enqueue.sql)
-- queue::admit: takes room for one message of `bytes` of class `priority` in a capacity slot of
-- queue `q` (a forgeyard.queues row) and returns the slot, with its usage read under its lock
-- before this message (o_messages, o_bytes). FY020 when no slot admits the class; with `refuse`
-- false, NULLs instead (topic_deliver's dead-letter subscriptions: admission refuses before it
-- changes anything, and an EXCEPTION block around it would release the slot locks it took and,
-- its subtransaction per delivery, slow long publish transactions with every event). The first slot
-- from this call's starting slot (one further per call of the backend) that no other producer
-- holds is locked FOR UPDATE SKIP LOCKED and, if the class still fits, takes the message.
-- Otherwise every slot is read without a lock (the candidates: those that would admit it), and
-- one candidate at a time is locked: first only one no other producer holds, then, waiting, one
-- this transaction may wait for (queue_held_may_wait); re-checked under the lock.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_admit(q record, priority integer, bytes bigint, refuse boolean DEFAULT true,
                                         OUT o_slot integer, OUT o_messages bigint, OUT o_bytes bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    rotation text := current_setting('forgeyard_pl.rotation_admit', true);
    rot bigint;
    start integer;
    n integer := q.slots;
    pct bigint := CASE priority WHEN 0 THEN q.admit_emergency WHEN 1 THEN q.admit_security_control
                                WHEN 2 THEN q.admit_realtime WHEN 3 THEN q.admit_interactive
                                WHEN 4 THEN q.admit_background ELSE q.admit_bulk END;
    -- queue_held_key(tenant, queue, 'c', slot) is this prefix and the slot's two hex digits
    key_prefix text := encode(convert_to(q.tenant_id, 'UTF8'), 'hex') || '00' || encode(convert_to(q.queue, 'UTF8'), 'hex')
                       || '0063';
    held text;
    key text;
    s integer;
    i integer;
    um bigint;
    ub bigint;
    share bigint;
    lim_m bigint;
    lim_b bigint;
    candidates integer[] := '{}';
    wait boolean;
    chosen integer := -1;
BEGIN
    -- Each call starts one slot further than the last (from this backend's pid): one producer's
    -- messages spread over the slots (forgeyard_pl.queue_rotate, inline).
    rot := CASE WHEN rotation IS NULL OR rotation = '' THEN pg_backend_pid() ELSE rotation::bigint END;
    PERFORM set_config('forgeyard_pl.rotation_admit', ((rot + 1) % 4294967296)::text, false);
    start := (rot % n)::integer;
    FOR i IN 0 .. n - 1 LOOP
        s := (start + i) % n;
        SELECT a.admitted_messages - r.released_messages
                   - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
               a.admitted_bytes - r.released_bytes
                   - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
          INTO um, ub
          FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
            ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
         WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
         FOR UPDATE OF a SKIP LOCKED;
        IF NOT FOUND THEN
            EXIT WHEN NOT EXISTS (SELECT FROM forgeyard.queue_slots a
                                   WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s);
            CONTINUE;  -- another producer's
        END IF;
        -- (forgeyard_pl.queue_held_took, inline)
        key := key_prefix || lpad(to_hex(s), 2, '0');
        held := current_setting('forgeyard_pl.held', true);
        IF held IS NULL OR held = '' OR key > held COLLATE "C" THEN
            PERFORM set_config('forgeyard_pl.held', key, true);
        END IF;
        -- (forgeyard_pl.queue_class_limit, inline)
        share := q.max_messages / n + CASE WHEN s < q.max_messages % n THEN 1 ELSE 0 END;
        lim_m := share / 100 * pct + share % 100 * pct / 100;
        share := q.max_bytes / n + CASE WHEN s < q.max_bytes % n THEN 1 ELSE 0 END;
        lim_b := share / 100 * pct + share % 100 * pct / 100;
        IF um + 1 <= lim_m AND ub + bytes <= lim_b THEN
            UPDATE forgeyard.queue_slots a
               SET admitted_messages = a.admitted_messages + 1, admitted_bytes = a.admitted_bytes + bytes
             WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s;
            o_slot := s;
            o_messages := um;
            o_bytes := ub;
            RETURN;
        END IF;
        EXIT;
    END LOOP;
    -- Candidates by the current counts (an undercount of releases only refuses early).
    FOR s, um, ub IN
        SELECT a.slot, a.admitted_messages - r.released_messages
                          - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                       WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                      a.admitted_bytes - r.released_bytes
                          - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                       WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
          FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
            ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
         WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue
         ORDER BY (a.slot + start) % n
    LOOP
        IF um + 1 <= (forgeyard_pl.queue_class_limit(q, priority, s)).messages
           AND ub + bytes <= (forgeyard_pl.queue_class_limit(q, priority, s)).bytes THEN
            candidates := candidates || s;
        END IF;
    END LOOP;
    -- One candidate at a time: first one no other producer holds, then, waiting, one this
    -- transaction may wait for; re-checked under the lock.
    FOREACH wait IN ARRAY ARRAY[false, true] LOOP
        FOREACH s IN ARRAY candidates LOOP
            CONTINUE WHEN wait AND NOT forgeyard_pl.queue_held_may_wait(key_prefix || lpad(to_hex(s), 2, '0'));
            IF wait THEN
                SELECT a.admitted_messages - r.released_messages
                           - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admitted_bytes - r.released_bytes
                           - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
                  INTO um, ub
                  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                    ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
                 WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
                 FOR UPDATE OF a;
            ELSE
                SELECT a.admitted_messages - r.released_messages
                           - COALESCE((SELECT sum(d.released_messages) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint,
                       a.admitted_bytes - r.released_bytes
                           - COALESCE((SELECT sum(d.released_bytes) FROM forgeyard.queue_release_deltas d
                                        WHERE d.tenant_id = a.tenant_id AND d.queue = a.queue AND d.slot = a.slot), 0)::bigint
                  INTO um, ub
                  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r
                    ON r.tenant_id = a.tenant_id AND r.queue = a.queue AND r.slot = a.slot
                 WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = s
                 FOR UPDATE OF a SKIP LOCKED;
            END IF;
            IF FOUND THEN
                IF chosen < 0 AND um + 1 <= (forgeyard_pl.queue_class_limit(q, priority, s)).messages
                   AND ub + bytes <= (forgeyard_pl.queue_class_limit(q, priority, s)).bytes THEN
                    chosen := s;
                END IF;
                PERFORM forgeyard_pl.queue_held_took(key_prefix || lpad(to_hex(s), 2, '0'));
            END IF;
            EXIT WHEN chosen >= 0;
        END LOOP;
        EXIT WHEN chosen >= 0;
    END LOOP;
    IF chosen < 0 THEN
        IF NOT refuse THEN
            RETURN;  -- (o_slot, o_messages, o_bytes NULL)
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'FY020',
            MESSAGE = format('queue "%s" is full for priority class %s', q.queue, forgeyard_pl.queue_priority_name(priority)),
            DETAIL = format('class %s is admitted up to %s%% of max_messages and max_bytes',
                            forgeyard_pl.queue_priority_name(priority), pct);
    END IF;
    UPDATE forgeyard.queue_slots a
       SET admitted_messages = a.admitted_messages + 1, admitted_bytes = a.admitted_bytes + bytes
     WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue AND a.slot = chosen;
    o_slot := chosen;
    o_messages := um;
    o_bytes := ub;
END
$$;

-- queue::join_key: counts `n` new pending messages into their key's row of queue_partitions (key:
-- core::group_key, the partition_key of a partition-ordered queue, the fairness_key of a queue
-- with max_in_flight_per_key) and returns how many of them, from the first, are heads
-- (claimable): all of them for a message of no key. `q` is a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_join_key(q record, key text, n bigint DEFAULT 1)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    lim bigint := coalesce(q.max_in_flight_per_key, 0);
    pending bigint;
    heads bigint;
BEGIN
    IF key IS NULL OR n <= 0 THEN
        RETURN n;
    END IF;
    IF q.ordering = 'partition' THEN
        -- (One message at a time: the head only if it is the key's only pending message.)
        INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending)
        VALUES (q.tenant_id, q.queue, key, 1)
        ON CONFLICT ON CONSTRAINT queue_partitions_pkey DO UPDATE SET pending = p.pending + 1
        RETURNING p.pending INTO pending;
        RETURN CASE WHEN pending = 1 THEN 1 ELSE 0 END;
    END IF;
    -- A key of a max_in_flight_per_key queue makes heads of the new messages up to the limit only
    -- while none of its messages waits (older ones are promoted first, as heads finish).
    INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending, heads)
    VALUES (q.tenant_id, q.queue, key, n, least(n, lim))
    ON CONFLICT ON CONSTRAINT queue_partitions_pkey DO UPDATE
       SET pending = p.pending + n,
           heads = p.heads + CASE WHEN p.pending = p.heads AND p.heads < lim THEN least(n, lim - p.heads) ELSE 0 END
    RETURNING p.pending, p.heads INTO pending, heads;
    RETURN CASE WHEN pending - heads >= n THEN 0 ELSE n - (pending - heads) END;
END
$$;

-- queue::fair_passes: a fair queue's passes for `n` new messages of one key and class: after the
-- key's last pass or the class's lowest pending pass, whichever is later (the queue's highest
-- last pass when the class has none), one step of the key's weight apart. Empty elsewhere.
-- `q` is a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_fair_passes(q record, priority integer, fairness_key text, n bigint)
    RETURNS bigint[] LANGUAGE plpgsql
    AS $$
DECLARE
    start bigint;
    last bigint;
    weight bigint;
BEGIN
    IF NOT q.fairness OR n <= 0 THEN
        RETURN '{}';
    END IF;
    SELECT m.pass INTO start FROM forgeyard.messages m
     WHERE m.tenant_id = q.tenant_id AND m.queue = q.queue AND m.priority = queue_fair_passes.priority::smallint
       AND m.state = 'pending'
       AND m.is_head AND m.pass IS NOT NULL
     ORDER BY m.pass LIMIT 1;
    IF NOT FOUND THEN
        SELECT max(k.last_pass) INTO start FROM forgeyard.queue_fair_keys k
         WHERE k.tenant_id = q.tenant_id AND k.queue = q.queue;
    END IF;
    start := coalesce(start, 0);
    INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, last_pass)
    VALUES (q.tenant_id, q.queue, coalesce(queue_fair_passes.fairness_key, ''), start + n * 1000000)
    ON CONFLICT ON CONSTRAINT queue_fair_keys_pkey DO UPDATE
       SET last_pass = greatest(COALESCE(k.last_pass, start), start) + n * (1000000 / k.weight)
    RETURNING k.last_pass, k.weight INTO last, weight;
    RETURN ARRAY(SELECT last - (n - 1 - i) * (1000000 / weight) FROM generate_series(0, n - 1) i ORDER BY i);
END
$$;

-- The delay argument of enqueue (microseconds): zero allowed, otherwise at most 30 days.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_delay_arg(value interval)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'delay must not be NULL';
    END IF;
    IF extract(year FROM value) = 0 AND extract(month FROM value) = 0 AND extract(day FROM value) = 0
       AND extract(epoch FROM value) = 0 THEN
        RETURN 0;
    END IF;
    RETURN forgeyard_pl.duration_arg('delay', value, 2592000000000);
END
$$;

-- The wake-up of a queue with notify (any role may LISTEN, so the payload shows no names): the
-- first 32 hex digits of SHA-256 of "<tenant>/<queue>", queued for commit.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_notify(tenant text, name text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('forgeyard_queue', left(encode(sha256(convert_to(tenant || '/' || name, 'UTF8')), 'hex'), 32));
END
$$;

-- The checks of one message before it is admitted (enqueue_one): FY021 over max_payload_bytes,
-- 22023 without a partition_key in a partition-ordered queue, the partition_key's rules.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_check_message(q record, payload_bytes bigint, partition_key text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF payload_bytes > q.max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'FY021',
            MESSAGE = format('payload of %s bytes is over the limit of queue "%s"', payload_bytes, q.queue),
            DETAIL = format('max_payload_bytes is %s; store the bytes elsewhere and send a reference', q.max_payload_bytes);
    END IF;
    IF q.ordering = 'partition' AND partition_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('partition_key is required: queue "%s" is partition-ordered', q.queue);
    END IF;
    IF partition_key IS NOT NULL THEN
        PERFORM forgeyard_pl.name_arg('partition_key', partition_key, 512);
    END IF;
END
$$;

-- The event row of an event_id (enqueue_one), taken before any capacity is spent: a new event (or
-- one past its window, replaced) is recorded for message `msg_id` and NULL returned; a repeated one
-- returns the first message's id, or raises FY011 for another payload. A concurrent producer of the
-- same event_id waits here for the first one's transaction.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_take_event(q record, event_id uuid, msg_id bigint, payload bytea, at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    digest text := encode(sha256(payload), 'hex');
    existing bigint;
    existing_digest text;
BEGIN
    INSERT INTO forgeyard.queue_events AS e (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)
    VALUES (q.tenant_id, q.queue, queue_take_event.event_id, queue_take_event.msg_id, digest,
            at_time + forgeyard_pl.queue_usecs_interval(q.dedup_window_usecs))
    ON CONFLICT ON CONSTRAINT queue_events_pkey DO UPDATE
       SET msg_id = excluded.msg_id, payload_digest = excluded.payload_digest, expires_at = excluded.expires_at
     WHERE e.expires_at <= at_time;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    SELECT e.msg_id, e.payload_digest INTO existing, existing_digest FROM forgeyard.queue_events e
     WHERE e.tenant_id = q.tenant_id AND e.queue = q.queue AND e.event_id = queue_take_event.event_id;
    IF existing_digest IS DISTINCT FROM digest THEN
        RAISE EXCEPTION USING ERRCODE = 'FY011',
            MESSAGE = 'event_id was enqueued before with a different payload',
            DETAIL = format('message %s carries this event_id', coalesce(existing, 0));
    END IF;
    RETURN existing;
END
$$;

-- (extension/queue_finish.sql)
-- The ids and tokens of a batch (deliveries_arg), flattened: equal in length, without NULLs.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_deliveries_arg(msg_ids bigint[], claim_tokens bigint[],
                                                  OUT ids bigint[], OUT tokens bigint[])
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF msg_ids IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'msg_ids must not be NULL';
    END IF;
    IF claim_tokens IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'claim_tokens must not be NULL';
    END IF;
    ids := ARRAY(SELECT unnest(msg_ids));
    tokens := ARRAY(SELECT unnest(claim_tokens));
    IF cardinality(ids) <> cardinality(tokens) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'msg_ids and claim_tokens must have the same length';
    END IF;
    IF array_position(ids, NULL) IS NOT NULL OR array_position(tokens, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = 'msg_ids and claim_tokens must not contain NULL';
    END IF;
END
$$;

-- core::throw_stale_claim: the FY001 of ack, nack and extend.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_stale_claim(msg_id bigint, claim_token bigint)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FY001',
        MESSAGE = format('claim token %s is not the current delivery of message %s', claim_token, msg_id),
        DETAIL = 'the visibility ran out and the message was claimed again, or it was nacked; stop work on it';
END
$$;

-- ack for one or many deliveries of queue q (a forgeyard.queues row), then their room back
-- (queue_apply): all or nothing. First every pair that is the current delivery (pending, this
-- tenant and queue, this token) in one statement, its rows locked in msg_id order (waiting, and
-- re-checked if they changed meanwhile) and deleted, or kept as acked for retain_acked; then each
-- pair it did not finish, in the order given, locked FOR UPDATE: a no-op for a message already
-- acked, dead or gone, FY001 for any other token.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_ack(q record, ids bigint[], tokens bigint[], at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    keep boolean := q.retain_acked_usecs > 0;
    key_limit boolean := q.max_in_flight_per_key IS NOT NULL;
    n integer := cardinality(ids);
    r record;
    d record;
    i integer;
    done bigint[] := '{}';
    s_slots integer[] := '{}';
    s_bytes bigint[] := '{}';
    s_keys text[] := '{}';
    o_res text[] := '{}';
    o_parts integer[] := '{}';
    o_kinds integer[] := '{}';
BEGIN
    IF n = 1 THEN
        IF keep THEN
            UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL
             WHERE m.msg_id = ids[1] AND m.claim_token = tokens[1] AND m.state = 'pending'
               AND m.tenant_id = q.tenant_id AND m.queue = q.queue
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
        ELSE
            DELETE FROM forgeyard.messages m
             WHERE m.msg_id = ids[1] AND m.claim_token = tokens[1] AND m.state = 'pending'
               AND m.tenant_id = q.tenant_id AND m.queue = q.queue
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part INTO r;
        END IF;
        IF FOUND AND NOT keep AND r.resource IS NULL AND q.ordering <> 'partition' AND NOT key_limit THEN
            -- its room back to its slot
            PERFORM forgeyard_pl.queue_give_back_slot(q.tenant_id, q.queue, r.slot, 1, r.bytes,
                current_setting('transaction_isolation') IN ('repeatable read', 'serializable'));
            RETURN;
        END IF;
        IF FOUND THEN
            done := ARRAY[r.msg_id];
            s_slots := ARRAY[r.slot::integer];
            s_bytes := ARRAY[r.bytes];
            s_keys := ARRAY[r.key];
            IF r.resource IS NOT NULL THEN
                o_res := ARRAY[r.resource];
                o_parts := ARRAY[r.part];
                o_kinds := ARRAY[0];
            END IF;
        END IF;
    ELSIF n > 1 THEN
        FOR r IN
            WITH l AS (SELECT m.msg_id AS id FROM forgeyard.messages m
                         JOIN unnest(ids, tokens) x(id, tok) ON m.msg_id = x.id AND m.claim_token = x.tok
                        WHERE m.msg_id = ANY (ids) AND m.state = 'pending' AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                        ORDER BY m.msg_id FOR UPDATE OF m)
            DELETE FROM forgeyard.messages m USING l
             WHERE m.msg_id = l.id AND NOT keep
            RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                      m.resource, coalesce(m.resource_part, 0)::integer AS part
        LOOP
            done := done || r.msg_id;
            s_slots := s_slots || r.slot::integer;
            s_bytes := s_bytes || r.bytes;
            s_keys := s_keys || r.key;
            IF r.resource IS NOT NULL THEN
                o_res := o_res || r.resource;
                o_parts := o_parts || r.part;
                o_kinds := o_kinds || 0;
            END IF;
        END LOOP;
        IF keep THEN
            FOR r IN
                WITH l AS (SELECT m.msg_id AS id FROM forgeyard.messages m
                             JOIN unnest(ids, tokens) x(id, tok) ON m.msg_id = x.id AND m.claim_token = x.tok
                            WHERE m.msg_id = ANY (ids) AND m.state = 'pending' AND m.tenant_id = q.tenant_id AND m.queue = q.queue
                            ORDER BY m.msg_id FOR UPDATE OF m)
                UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL
                  FROM l WHERE m.msg_id = l.id
                RETURNING m.msg_id, m.slot, m.bytes, CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
                          m.resource, coalesce(m.resource_part, 0)::integer AS part
            LOOP
                done := done || r.msg_id;
                s_slots := s_slots || r.slot::integer;
                s_bytes := s_bytes || r.bytes;
                s_keys := s_keys || r.key;
                IF r.resource IS NOT NULL THEN
                    o_res := o_res || r.resource;
                    o_parts := o_parts || r.part;
                    o_kinds := o_kinds || 0;
                END IF;
            END LOOP;
        END IF;
    END IF;
    -- The pairs the first statement did not finish, one by one.
    FOR i IN 1 .. CASE WHEN cardinality(done) = n THEN 0 ELSE n END LOOP
        CONTINUE WHEN ids[i] = ANY (done);
        SELECT m.state, m.claim_token, m.slot, m.bytes,
               CASE WHEN key_limit THEN m.fairness_key ELSE m.partition_key END AS key,
               m.resource, coalesce(m.resource_part, 0)::integer AS part INTO d
          FROM forgeyard.messages m WHERE m.msg_id = ids[i] AND m.tenant_id = q.tenant_id AND m.queue = q.queue
           FOR UPDATE OF m;
        CONTINUE WHEN NOT FOUND OR d.state <> 'pending';
        IF d.claim_token IS DISTINCT FROM tokens[i] THEN
            PERFORM forgeyard_pl.queue_stale_claim(ids[i], tokens[i]);
        END IF;
        IF keep THEN
            UPDATE forgeyard.messages m SET state = 'acked', finished_at = at_time, payload = NULL WHERE m.msg_id = ids[i];
        ELSE
            DELETE FROM forgeyard.messages m WHERE m.msg_id = ids[i];
        END IF;
        done := done || ids[i];
        s_slots := s_slots || d.slot::integer;
        s_bytes := s_bytes || d.bytes;
        s_keys := s_keys || d.key;
        IF d.resource IS NOT NULL THEN
            o_res := o_res || d.resource;
            o_parts := o_parts || d.part;
            o_kinds := o_kinds || 0;
        END IF;
    END LOOP;
    IF cardinality(s_slots) > 0 OR cardinality(o_res) > 0 THEN
        PERFORM forgeyard_pl.queue_apply(q, s_slots, s_bytes, s_keys, o_res, o_parts, o_kinds, at_time);
    END IF;
END
$$;

-- nack of one delivery of queue q (a forgeyard.queues row): FY001 unless the token is the current
-- delivery; then dead-lettered (permanent, or max_attempts reached) or retried after exponential
-- backoff with full jitter, delayed to its window's end when over the retry budget (no attempt
-- charged). Returns the outcome, and what the caller hands to queue_apply: for a dead letter its
-- slot, bytes and key (o_slot NULL for a retry); for a delivery bound to a resource the resource,
-- its part and the outcome kind (1 failure, 2 neutral for a permanent nack).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_nack_one(q record, msg_id bigint, claim_token bigint, error text, permanent boolean,
                                            at_time timestamptz,
                                            OUT o_outcome text, OUT o_slot integer, OUT o_bytes bigint, OUT o_key text,
                                            OUT o_resource text, OUT o_part integer, OUT o_kind integer)
    LANGUAGE plpgsql
    AS $$
DECLARE
    d record;
    v_attempt integer;
    v_ceiling bigint;
    cap bigint := q.backoff_max_usecs;
    i integer;
    delay bigint;
    visible timestamptz;
    budget record;
BEGIN
    SELECT m.state, m.claim_token AS token, m.attempt, m.slot, m.bytes,
           CASE WHEN q.max_in_flight_per_key IS NOT NULL THEN m.fairness_key
                WHEN q.ordering = 'partition' THEN m.partition_key END AS key,
           m.resource, coalesce(m.resource_part, 0)::integer AS part INTO d
      FROM forgeyard.messages m
     WHERE m.msg_id = queue_nack_one.msg_id AND m.tenant_id = q.tenant_id AND m.queue = q.queue
       FOR UPDATE OF m;
    IF NOT FOUND OR d.state <> 'pending' OR d.token IS DISTINCT FROM claim_token THEN
        PERFORM forgeyard_pl.queue_stale_claim(msg_id, claim_token);
    END IF;
    -- For the resource: a failure, unless the message's own fault.
    o_resource := d.resource;
    o_part := d.part;
    o_kind := CASE WHEN permanent THEN 2 ELSE 1 END;
    IF permanent OR d.attempt >= q.max_attempts THEN
        UPDATE forgeyard.messages m
           SET state = 'dead', claim_token = NULL, finished_at = at_time, last_error = error,
               error_class = CASE WHEN permanent THEN 'permanent' ELSE 'max_attempts' END, is_head = false,
               payload = CASE WHEN q.dead_letter_payload = 'keep' THEN m.payload END
         WHERE m.msg_id = queue_nack_one.msg_id;
        o_outcome := 'dead';
        o_slot := d.slot;
        o_bytes := d.bytes;
        o_key := d.key;
        RETURN;
    END IF;
    -- core::backoff_full_jitter: uniform in [0, min(backoff_max, backoff_base * 2^(attempt - 1))].
    v_attempt := greatest(1, least(d.attempt, 1000));
    delay := 0;
    IF q.backoff_base_usecs > 0 AND cap > 0 THEN
        v_ceiling := q.backoff_base_usecs;
        i := 1;
        WHILE i < v_attempt AND v_ceiling < cap LOOP
            v_ceiling := CASE WHEN v_ceiling > cap / 2 THEN cap ELSE v_ceiling * 2 END;
            i := i + 1;
        END LOOP;
        v_ceiling := least(v_ceiling, cap);
        delay := trunc((v_ceiling + 1)::double precision * random())::bigint;
    END IF;
    visible := at_time + forgeyard_pl.queue_usecs_interval(delay);
    -- Over the queue's retry budget the retry waits for the window's end (no attempt charged).
    budget := forgeyard_pl.queue_admit_retry(q, at_time);
    IF NOT budget.admitted THEN
        visible := greatest(visible, budget.not_before);
    END IF;
    UPDATE forgeyard.messages m SET claim_token = NULL, claimed_by = NULL, visible_at = visible, last_error = error
     WHERE m.msg_id = queue_nack_one.msg_id;
    o_outcome := 'retry';
END
$$;

-- extend of one delivery of queue q: FY001 unless the token is the current delivery and its
-- visibility has not run out; then visible until at_time + visibility.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_extend_one(q record, msg_id bigint, claim_token bigint, visibility bigint,
                                              at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    d record;
BEGIN
    SELECT m.state, m.claim_token AS token, m.visible_at INTO d FROM forgeyard.messages m
     WHERE m.msg_id = queue_extend_one.msg_id AND m.tenant_id = q.tenant_id AND m.queue = q.queue
       FOR UPDATE OF m;
    IF NOT FOUND OR d.state <> 'pending' OR d.token IS DISTINCT FROM claim_token OR d.visible_at <= at_time THEN
        PERFORM forgeyard_pl.queue_stale_claim(msg_id, claim_token);
    END IF;
    UPDATE forgeyard.messages m SET visible_at = at_time + forgeyard_pl.queue_usecs_interval(visibility)
     WHERE m.msg_id = queue_extend_one.msg_id;
END
$$;

-- (extension/queue_flow.sql)
-- core::flow::take (GCRA): a bucket of `tokens` per `per_usecs` with a burst of `burst` (0:
-- tokens) whose theoretical arrival time is `tat` (NULL: full). Takes up to `count` tokens at
-- at_time: how many it took, and the bucket's new tat.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_gcra(tokens bigint, per_usecs bigint, burst bigint, tat timestamptz,
                                        at_time timestamptz, count bigint, OUT taken bigint, OUT new_tat timestamptz)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    t bigint;
    tau bigint;
    now_us bigint := forgeyard_pl.usecs(at_time);
    from_us bigint;
BEGIN
    taken := 0;
    new_tat := tat;
    IF tokens <= 0 OR count <= 0 THEN
        RETURN;
    END IF;
    t := (per_usecs + tokens - 1) / tokens;
    tau := t * ((CASE WHEN burst > 0 THEN burst ELSE tokens END) - 1);
    from_us := CASE WHEN tat IS NULL THEN now_us ELSE greatest(forgeyard_pl.usecs(tat), now_us) END;
    IF from_us - now_us > tau THEN
        RETURN;
    END IF;
    taken := least(count, (now_us + tau - from_us) / t + 1);
    new_tat := forgeyard_pl.queue_at(from_us + taken * t);
END
$$;

-- core::flow::part_config: part `part` of a resource's configuration (a forgeyard.flow_resources
-- row): rate, burst and max_in_flight divided over its parts, the remainders to the first parts.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_part_config(c record, part integer)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    r forgeyard.flow_resources%ROWTYPE := c;
    n bigint := c.parts;
BEGIN
    IF n <= 1 THEN
        RETURN r;
    END IF;
    IF c.rate IS NOT NULL THEN
        r.rate := c.rate / n + CASE WHEN part < c.rate % n THEN 1 ELSE 0 END;
        r.burst := coalesce(nullif(c.burst, 0), c.rate) / n
                   + CASE WHEN part < coalesce(nullif(c.burst, 0), c.rate) % n THEN 1 ELSE 0 END;
    END IF;
    IF c.max_in_flight IS NOT NULL THEN
        r.max_in_flight := c.max_in_flight / n + CASE WHEN part < c.max_in_flight % n THEN 1 ELSE 0 END;
    END IF;
    r.parts := 1;
    RETURN r;
END
$$;

-- core::flow::record_outcome: a delivery bound to the resource ended (outcome 0 success, 1 failure,
-- 2 neutral) at at_time: one fewer in flight, and the breaker's window (a forgeyard.flow_resources
-- row `c`, a forgeyard.flow_resource_state row `s`; returns `s` changed).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_outcome(c record, s record, outcome integer, at_time timestamptz)
    RETURNS record LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    calls integer;
    to_state text := NULL;
BEGIN
    IF s.in_flight > 0 THEN
        s.in_flight := s.in_flight - 1;
    END IF;
    IF c.failure_rate IS NULL OR outcome = 2 THEN
        IF s.breaker = 'half_open' AND s.half_open_in_flight > 0 THEN
            s.half_open_in_flight := s.half_open_in_flight - 1;
        END IF;
        RETURN s;
    END IF;
    IF s.breaker = 'open' THEN
        RETURN s;  -- a delivery handed out before it opened: the window starts again when it closes
    ELSIF s.breaker = 'half_open' THEN
        IF s.half_open_in_flight > 0 THEN
            s.half_open_in_flight := s.half_open_in_flight - 1;
        END IF;
        IF outcome = 1 THEN
            to_state := 'open';
        ELSE
            s.half_open_successes := s.half_open_successes + 1;
            IF s.half_open_successes >= c.half_open_calls THEN
                to_state := 'closed';
            END IF;
        END IF;
    ELSE
        s.outcomes := s.outcomes || CASE WHEN outcome = 1 THEN '1' ELSE '0' END;
        IF length(s.outcomes) > c.window_calls THEN
            s.outcomes := right(s.outcomes, c.window_calls::integer);
        END IF;
        calls := length(s.outcomes);
        IF calls >= c.minimum_calls
           AND (calls - length(replace(s.outcomes, '1', '')))::double precision >= c.failure_rate * calls::double precision THEN
            to_state := 'open';
        END IF;
    END IF;
    IF to_state IS NOT NULL THEN
        -- Opening keeps the window that tripped it (breaker_state shows it); closing starts a new one.
        s.breaker := to_state;
        s.changed_at := at_time;
        IF to_state <> 'open' THEN
            s.outcomes := '';
        END IF;
        s.half_open_in_flight := 0;
        s.half_open_successes := 0;
        s.transitions := s.transitions + 1;
        IF to_state = 'open' THEN
            s.open_until := at_time + forgeyard_pl.queue_usecs_interval(c.open_for_usecs);
        END IF;
    END IF;
    RETURN s;
END
$$;

-- write_resource_state: a forgeyard.flow_resource_state row `s` (locked by this transaction)
-- written back, all but its count of refusals.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_part_write(s record)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE forgeyard.flow_resource_state x
       SET tat = s.tat, in_flight = s.in_flight, breaker = s.breaker, outcomes = s.outcomes, changed_at = s.changed_at,
           open_until = s.open_until, half_open_in_flight = s.half_open_in_flight,
           half_open_successes = s.half_open_successes, transitions = s.transitions
     WHERE x.tenant_id = s.tenant_id AND x.resource = s.resource AND x.part = s.part;
END
$$;

-- fold_outcomes: the outcomes recorded for a part while another transaction held it
-- (flow_outcome_deltas) applied to it, its row being locked by the caller, and deleted; each is
-- locked SKIP LOCKED first, so one that another caller folds is left to it. Part 0 also takes those
-- of parts at or past `parts` (the resource's number of parts now). `c` is the part's share of the
-- configuration. Writes the row if any was applied; returns whether any was.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_part_fold(tenant text, resource text, part integer, parts integer, c record,
                                             at_time timestamptz)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    s forgeyard.flow_resource_state%ROWTYPE;
    d record;
    tids tid[] := '{}';
    at_when timestamptz;
    j bigint;
BEGIN
    FOR d IN SELECT y.ctid AS tid, y.successes, y.failures, y.neutrals, y.recorded_at
               FROM forgeyard.flow_outcome_deltas y
              WHERE y.tenant_id = tenant AND y.resource = queue_part_fold.resource
                AND (y.part = queue_part_fold.part::smallint OR (queue_part_fold.part = 0 AND y.part >= greatest(parts, 1)))
              ORDER BY y.part, y.ctid
              FOR UPDATE OF y SKIP LOCKED LOOP
        IF cardinality(tids) = 0 THEN
            SELECT x.* INTO s FROM forgeyard.flow_resource_state x
             WHERE x.tenant_id = tenant AND x.resource = queue_part_fold.resource AND x.part = queue_part_fold.part::smallint;
        END IF;
        -- A state change (the breaker opening) counts from now, not from when the outcome was
        -- recorded and waited to be folded.
        at_when := greatest(d.recorded_at, at_time);
        FOR j IN 1 .. d.successes LOOP
            s := forgeyard_pl.queue_outcome(c, s, 0, at_when);
        END LOOP;
        FOR j IN 1 .. d.failures LOOP
            s := forgeyard_pl.queue_outcome(c, s, 1, at_when);
        END LOOP;
        FOR j IN 1 .. d.neutrals LOOP
            s := forgeyard_pl.queue_outcome(c, s, 2, at_when);
        END LOOP;
        tids := tids || d.tid;
    END LOOP;
    IF cardinality(tids) = 0 THEN
        RETURN false;
    END IF;
    DELETE FROM forgeyard.flow_outcome_deltas y WHERE y.ctid = ANY (tids);
    PERFORM forgeyard_pl.queue_part_write(s);
    RETURN true;
END
$$;

-- A claim's lock of part `part` of a resource's state (lock_part in queue_claim.cpp): FOR NO KEY
-- UPDATE, SKIP LOCKED unless `wait`. 0: no such row (made a moment ago, not yet visible); 1: held
-- by another transaction; 2: locked, entered in the ledger of held rows, and the outcomes recorded
-- while others held it folded in. `c` is the part's share of the configuration.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_part_lock(tenant text, resource text, part integer, parts integer, c record,
                                             wait boolean, at_time timestamptz)
    RETURNS integer LANGUAGE plpgsql
    AS $$
BEGIN
    IF wait THEN
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource AND x.part = queue_part_lock.part::smallint
         FOR NO KEY UPDATE OF x;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
    ELSE
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource AND x.part = queue_part_lock.part::smallint
         FOR NO KEY UPDATE OF x SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN CASE WHEN EXISTS (SELECT FROM forgeyard.flow_resource_state x
                                      WHERE x.tenant_id = tenant AND x.resource = queue_part_lock.resource
                                        AND x.part = queue_part_lock.part::smallint) THEN 1 ELSE 0 END;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(tenant, resource, 'p', part));
    PERFORM forgeyard_pl.queue_part_fold(tenant, resource, part, parts, c, at_time);
    RETURN 2;
END
$$;

-- core::flow::admit_delivery on a part this transaction holds: a claim meets a ready message bound
-- to the resource (`transfer`: its last delivery lapsed and still counts in flight). Admitted: a
-- token and a place are taken, and half-open a trial call; refused: it stays ready. The part's row
-- is written either way (an open breaker whose time ran out turns half-open). `c` is the part's
-- share of the configuration. Whether it was admitted.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_part_admit(tenant text, resource text, part integer, c record, at_time timestamptz,
                                              transfer boolean)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    s forgeyard.flow_resource_state%ROWTYPE;
    v_refused boolean := false;
    g record;
BEGIN
    SELECT x.* INTO s FROM forgeyard.flow_resource_state x
     WHERE x.tenant_id = tenant AND x.resource = queue_part_admit.resource AND x.part = queue_part_admit.part::smallint;
    IF c.failure_rate IS NOT NULL THEN
        IF s.breaker = 'open' AND at_time >= coalesce(s.open_until, '-infinity') THEN
            s.breaker := 'half_open';
            s.changed_at := at_time;
            s.outcomes := '';
            s.half_open_in_flight := 0;
            s.half_open_successes := 0;
            s.transitions := s.transitions + 1;
        END IF;
        IF s.breaker = 'open' THEN
            v_refused := true;
        ELSIF s.breaker = 'half_open' AND s.half_open_in_flight + s.half_open_successes >= c.half_open_calls THEN
            v_refused := true;
        END IF;
    END IF;
    IF NOT v_refused AND c.max_in_flight IS NOT NULL AND NOT transfer AND s.in_flight >= c.max_in_flight THEN
        v_refused := true;
    END IF;
    IF NOT v_refused AND c.rate IS NOT NULL THEN
        g := forgeyard_pl.queue_gcra(c.rate, c.per_usecs, c.burst, s.tat, at_time, 1);
        IF g.taken = 0 THEN
            v_refused := true;
        ELSE
            s.tat := g.new_tat;
        END IF;
    END IF;
    IF NOT v_refused THEN
        IF NOT transfer THEN
            s.in_flight := s.in_flight + 1;
        END IF;
        IF c.failure_rate IS NOT NULL AND s.breaker = 'half_open' THEN
            s.half_open_in_flight := s.half_open_in_flight + 1;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_part_write(s);
    RETURN NOT v_refused;
END
$$;

-- queue::record_outcomes: how deliveries bound to resources ended (one entry per delivery: its
-- resource, messages.resource_part, and 0 success, 1 failure, 2 neutral), per resource in name
-- order and per part in order, never waiting for a part another transaction holds: the part the
-- delivery was counted in (one the resource no longer has: part 0) locked SKIP LOCKED, earlier
-- deltas folded in and the outcomes recorded; a part another transaction holds, or any under a
-- transaction snapshot, gets them as a row of flow_outcome_deltas instead. Resources not
-- configured are not counted. `q` is a forgeyard.queues row.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_record_outcomes(q record, resources text[], parts integer[], outcomes integer[],
                                                   at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    own boolean := forgeyard_pl.queue_own_snapshot();
    g record;
    cfg forgeyard.flow_resources%ROWTYPE;
    share forgeyard.flow_resources%ROWTYPE;
    s forgeyard.flow_resource_state%ROWTYPE;
    j bigint;
BEGIN
    FOR g IN SELECT x.resource, CASE WHEN x.part < f.parts THEN x.part ELSE 0 END AS part,
                    count(*) FILTER (WHERE x.outcome = 0) AS successes,
                    count(*) FILTER (WHERE x.outcome = 1) AS failures,
                    count(*) FILTER (WHERE x.outcome = 2) AS neutrals
               FROM unnest(resources, parts, outcomes) x(resource, part, outcome)
               JOIN forgeyard.flow_resources f ON f.tenant_id = q.tenant_id AND f.resource = x.resource
              GROUP BY 1, 2 ORDER BY x.resource COLLATE "C", 2 LOOP
        IF own THEN
            IF EXISTS (SELECT FROM forgeyard.flow_resource_state x
                        WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint) THEN
                INSERT INTO forgeyard.flow_outcome_deltas (tenant_id, resource, part, successes, failures, neutrals, recorded_at)
                VALUES (q.tenant_id, g.resource, g.part, g.successes, g.failures, g.neutrals, at_time);
            END IF;
            CONTINUE;
        END IF;
        PERFORM FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint
         FOR NO KEY UPDATE OF x SKIP LOCKED;
        IF NOT FOUND THEN
            IF EXISTS (SELECT FROM forgeyard.flow_resource_state x
                        WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint) THEN
                INSERT INTO forgeyard.flow_outcome_deltas (tenant_id, resource, part, successes, failures, neutrals, recorded_at)
                VALUES (q.tenant_id, g.resource, g.part, g.successes, g.failures, g.neutrals, at_time);
            END IF;
            CONTINUE;
        END IF;
        -- Held to commit: a claim of this transaction may wait only for parts after it.
        PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(q.tenant_id, g.resource, 'p', g.part));
        SELECT f.* INTO cfg FROM forgeyard.flow_resources f WHERE f.tenant_id = q.tenant_id AND f.resource = g.resource;
        share := forgeyard_pl.queue_part_config(cfg, g.part);
        PERFORM forgeyard_pl.queue_part_fold(q.tenant_id, g.resource, g.part, cfg.parts, share, at_time);
        SELECT x.* INTO s FROM forgeyard.flow_resource_state x
         WHERE x.tenant_id = q.tenant_id AND x.resource = g.resource AND x.part = g.part::smallint;
        FOR j IN 1 .. g.successes LOOP
            s := forgeyard_pl.queue_outcome(share, s, 0, at_time);
        END LOOP;
        FOR j IN 1 .. g.failures LOOP
            s := forgeyard_pl.queue_outcome(share, s, 1, at_time);
        END LOOP;
        FOR j IN 1 .. g.neutrals LOOP
            s := forgeyard_pl.queue_outcome(share, s, 2, at_time);
        END LOOP;
        PERFORM forgeyard_pl.queue_part_write(s);
    END LOOP;
END
$$;

-- One admission bucket of admit_rate, locked (waiting unless `skip`): tokens taken (up to n) and
-- the bucket's wait until its next token. o_found: whether it was locked.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_bucket_take(q record, slot integer, skip boolean, n bigint, at_time timestamptz,
                                               OUT o_found boolean, OUT o_taken bigint, OUT o_wait bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    b record;
    g record;
    tau bigint;
BEGIN
    IF skip THEN
        SELECT x.tokens, x.per_usecs, x.tat INTO b FROM forgeyard.queue_admission x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot FOR UPDATE OF x SKIP LOCKED;
    ELSE
        SELECT x.tokens, x.per_usecs, x.tat INTO b FROM forgeyard.queue_admission x
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot FOR UPDATE OF x;
    END IF;
    o_found := FOUND;
    o_taken := 0;
    o_wait := 0;
    IF NOT o_found THEN
        RETURN;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'd', slot));
    g := forgeyard_pl.queue_gcra(b.tokens, b.per_usecs, 0, b.tat, at_time, n);
    o_taken := g.taken;
    IF o_taken > 0 THEN
        UPDATE forgeyard.queue_admission x SET tat = g.new_tat
         WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue AND x.slot = queue_bucket_take.slot;
    END IF;
    IF g.new_tat IS NOT NULL THEN
        tau := (b.per_usecs + b.tokens - 1) / b.tokens * (b.tokens - 1);
        o_wait := greatest(0, forgeyard_pl.usecs(g.new_tat) - tau - forgeyard_pl.usecs(at_time));
    END IF;
END
$$;

-- core::flow::throw_admission_refused: FY020 whose DETAIL names the limit and ends in
-- "retry after <n> ms".
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_admission_refused(q record, wait_usecs bigint)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    per bigint := q.admission_per_usecs;
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FY020',
        MESSAGE = format('queue "%s" is over its admission limit', q.queue),
        DETAIL = format('the queue admits %s messages per %s; retry after %s ms', q.admission_rate,
                        CASE WHEN per % 1000000 = 0 THEN (per / 1000000) || ' s'
                             WHEN per % 1000 = 0 THEN (per / 1000) || ' ms'
                             ELSE per || ' us' END,
                        (wait_usecs + 999) / 1000);
END
$$;

-- queue::admit_rate: takes `count` tokens of queue q's admission limit, if it has one (FY020 with a
-- retry-after otherwise). The buckets are tried from a bucket that moves with each call, each
-- locked SKIP LOCKED; only a producer that holds no bucket from this call waits, for one its
-- transaction may wait for, and is refused if there is none. Never admitted past the limit.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_admit_rate(q record, n bigint, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    buckets integer;
    start integer;
    remaining bigint := n;
    wait bigint := 9223372036854775807;
    held boolean := false;
    skipped boolean := false;
    waited boolean := false;
    i integer;
    slot integer;
    t record;
BEGIN
    IF q.admission_rate IS NULL OR n <= 0 THEN
        RETURN;
    END IF;
    buckets := greatest(1, least(q.admission_rate, greatest(q.slots, 1)));
    start := forgeyard_pl.queue_rotate('admission', buckets);
    FOR i IN 0 .. buckets - 1 LOOP
        EXIT WHEN remaining <= 0;
        slot := (start + i) % buckets;
        t := forgeyard_pl.queue_bucket_take(q, slot, true, remaining, at_time);
        IF NOT t.o_found THEN
            skipped := true;
            CONTINUE;
        END IF;
        held := true;
        remaining := remaining - t.o_taken;
        IF remaining > 0 THEN
            wait := least(wait, t.o_wait);
        END IF;
    END LOOP;
    IF remaining > 0 AND NOT held AND skipped THEN
        -- Every bucket is held by others (or gone): the first from `start` that this transaction
        -- may wait for is waited for; with none, the producer is refused (one emission interval as
        -- its retry-after).
        FOR i IN 0 .. buckets - 1 LOOP
            slot := (start + i) % buckets;
            CONTINUE WHEN NOT forgeyard_pl.queue_held_may_wait(forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'd', slot));
            waited := true;
            t := forgeyard_pl.queue_bucket_take(q, slot, false, remaining, at_time);
            IF t.o_found THEN
                held := true;
                remaining := remaining - t.o_taken;
                IF remaining > 0 THEN
                    wait := least(wait, t.o_wait);
                END IF;
            END IF;
            EXIT;
        END LOOP;
        IF NOT waited THEN
            PERFORM forgeyard_pl.queue_admission_refused(q,
                (q.admission_per_usecs + q.admission_rate - 1) / q.admission_rate);
        END IF;
    END IF;
    -- (No bucket at all: the limit was removed meanwhile.)
    IF remaining > 0 AND held THEN
        PERFORM forgeyard_pl.queue_admission_refused(q, wait);
    END IF;
END
$$;

-- queue::admit_retry: whether a nack's retry fits queue q's retry budget (a budget set), and when
-- not, when it may run (the window's end). The window row is waited for only where this
-- transaction may wait for it; otherwise a window another transaction holds makes the retry wait
-- for that window's end (or one window from now), and no window at all admits it uncounted.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_admit_retry(q record, at_time timestamptz,
                                               OUT admitted boolean, OUT not_before timestamptz)
    LANGUAGE plpgsql
    AS $$
DECLARE
    w_key text;
    w record;
    got boolean := false;
    w_start bigint := 0;
    w_base bigint := 0;
    w_prev bigint := 0;
    w_retries bigint := 0;
    w_delayed bigint := 0;
    peek timestamptz;
    window_end timestamptz;
    now_us bigint := forgeyard_pl.usecs(at_time);
    len bigint := q.retry_budget_window_usecs;
    admitted_now bigint;
    v_first bigint;
    adjacent boolean;
    remaining double precision;
    weighed double precision;
    budget bigint;
BEGIN
    admitted := true;
    not_before := NULL;
    IF q.retry_budget IS NULL THEN
        RETURN;
    END IF;
    w_key := forgeyard_pl.queue_held_key(q.tenant_id, q.queue, 'w', 0);
    IF NOT forgeyard_pl.queue_held_may_wait(w_key) THEN
        SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
          FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue
           FOR UPDATE OF x SKIP LOCKED;
        got := FOUND;
        IF NOT got THEN
            SELECT x.window_start INTO peek FROM forgeyard.queue_retry_windows x
             WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
            IF NOT FOUND THEN
                RETURN;  -- no window yet: nothing has been retried, well within any budget
            END IF;
            window_end := peek + forgeyard_pl.queue_usecs_interval(len);
            admitted := false;
            not_before := CASE WHEN window_end > at_time THEN window_end
                               ELSE at_time + forgeyard_pl.queue_usecs_interval(len) END;
            RETURN;
        END IF;
    ELSE
        SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
          FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue FOR UPDATE OF x;
        got := FOUND;
        IF NOT got THEN
            INSERT INTO forgeyard.queue_retry_windows (tenant_id, queue, window_start, admitted_base, prev_first, retries, delayed)
            VALUES (q.tenant_id, q.queue, at_time, 0, 0, 0, 0) ON CONFLICT DO NOTHING;
            SELECT x.window_start, x.admitted_base, x.prev_first, x.retries, x.delayed INTO w
              FROM forgeyard.queue_retry_windows x WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue FOR UPDATE OF x;
            got := FOUND;
        END IF;
    END IF;
    PERFORM forgeyard_pl.queue_held_took(w_key);
    IF got THEN
        w_start := forgeyard_pl.usecs(w.window_start);
        w_base := w.admitted_base;
        w_prev := w.prev_first;
        w_retries := w.retries;
        w_delayed := w.delayed;
    END IF;
    SELECT coalesce(sum(a.admitted_messages), 0)::bigint INTO admitted_now FROM forgeyard.queue_slots a
     WHERE a.tenant_id = q.tenant_id AND a.queue = q.queue;
    -- core::flow::admit_retry
    IF now_us >= w_start + len OR now_us < w_start THEN
        -- The last window's v_first deliveries carry over only into the window right after it.
        v_first := greatest(0, admitted_now - w_base);
        adjacent := now_us >= w_start AND now_us < w_start + 2 * len;
        w_start := CASE WHEN adjacent THEN w_start + len ELSE now_us END;
        w_base := admitted_now;
        w_prev := CASE WHEN adjacent THEN v_first ELSE 0 END;
        w_retries := 0;
        w_delayed := 0;
    END IF;
    remaining := 1.0::double precision - (now_us - w_start)::double precision / len::double precision;
    weighed := greatest(0, admitted_now - w_base)::double precision
               + w_prev::double precision * greatest(0.0::double precision, remaining);
    budget := greatest(q.retry_budget_min, trunc(q.retry_budget * weighed)::bigint);
    IF w_retries < budget THEN
        w_retries := w_retries + 1;
    ELSE
        w_delayed := w_delayed + 1;
        admitted := false;
        not_before := forgeyard_pl.queue_at(w_start + len);
    END IF;
    UPDATE forgeyard.queue_retry_windows x
       SET window_start = forgeyard_pl.queue_at(w_start), admitted_base = w_base, prev_first = w_prev,
           retries = w_retries, delayed = w_delayed
     WHERE x.tenant_id = q.tenant_id AND x.queue = q.queue;
END
$$;

-- core::flow::integer of resource_limit's and breaker_configure's options: digits only (at most
-- 18), in min..max; 22023 naming the option otherwise.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_flow_integer(what text, key text, value text, min bigint, max bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v bigint;
BEGIN
    IF value ~ '^[0-9]{1,18}$' THEN
        v := value::bigint;
        IF v >= min AND v <= max THEN
            RETURN v;
        END IF;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('%s option %s must be an integer between %s and %s', what, key, min, max);
END
$$;

-- pg::parse_interval for an option: 22023 "<argument> must be an interval" for text that is not one.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_interval_option(argument text, value text)
    RETURNS interval LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN value::interval;
EXCEPTION WHEN data_exception THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = argument || ' must be an interval',
        DETAIL = format('got "%s"', value);
END
$$;

-- ensure_resource: the resource's configuration row (made if missing).
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_ensure_resource(tenant text, resource text, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO forgeyard.flow_resources (tenant_id, resource, updated_at)
    VALUES (tenant, queue_ensure_resource.resource, at_time)
    ON CONFLICT ON CONSTRAINT flow_resources_pkey DO UPDATE SET updated_at = excluded.updated_at;
END
$$;

-- drop_if_empty: a resource with neither limits nor a breaker is forgotten, its state too.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_drop_resource_if_empty(tenant text, resource text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    WITH d AS (DELETE FROM forgeyard.flow_resources x
                WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource
                  AND x.rate IS NULL AND x.max_in_flight IS NULL AND x.failure_rate IS NULL RETURNING 1)
    DELETE FROM forgeyard.flow_resource_state x
     WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource AND EXISTS (SELECT 1 FROM d);
    DELETE FROM forgeyard.flow_outcome_deltas x
     WHERE x.tenant_id = tenant AND x.resource = queue_drop_resource_if_empty.resource
       AND NOT EXISTS (SELECT 1 FROM forgeyard.flow_resources r
                        WHERE r.tenant_id = tenant AND r.resource = queue_drop_resource_if_empty.resource);
END
$$;

-- settle_parts: after the limits or the breaker changed, the parts the state is split into
-- (core::flow::resource_parts), each made if missing; the parts no longer kept merged into part 0
-- (what they count in flight and refused), where their deliveries' acks will find it.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_settle_parts(tenant text, resource text, at_time timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
    n_parts integer;
    smallest bigint;
BEGIN
    SELECT x.rate, x.per_usecs, x.burst, x.max_in_flight, x.failure_rate IS NOT NULL AS breaker INTO c
      FROM forgeyard.flow_resources x WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource;
    IF NOT FOUND THEN
        RETURN;  -- dropped: drop_if_empty removed its state too
    END IF;
    IF c.breaker OR (c.rate IS NULL AND c.max_in_flight IS NULL) THEN
        n_parts := 1;
    ELSE
        smallest := 9223372036854775807;
        IF c.max_in_flight IS NOT NULL THEN
            smallest := least(smallest, c.max_in_flight);
        END IF;
        IF c.rate IS NOT NULL THEN
            smallest := least(smallest, c.rate, CASE WHEN c.burst > 0 THEN c.burst ELSE c.rate END);
        END IF;
        n_parts := greatest(1, least(8, smallest / 16));
    END IF;
    UPDATE forgeyard.flow_resources x SET parts = n_parts::smallint
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.parts <> n_parts::smallint;
    INSERT INTO forgeyard.flow_resource_state (tenant_id, resource, part, changed_at)
    SELECT tenant, queue_settle_parts.resource, p::smallint, at_time FROM generate_series(0, n_parts - 1) p
    ON CONFLICT ON CONSTRAINT flow_resource_state_pkey DO NOTHING;
    WITH d AS (DELETE FROM forgeyard.flow_resource_state x
                WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part >= n_parts
                RETURNING x.in_flight, x.refused)
    UPDATE forgeyard.flow_resource_state x
       SET in_flight = x.in_flight + (SELECT sum(d.in_flight) FROM d)::bigint,
           refused = x.refused + (SELECT sum(d.refused) FROM d)::bigint
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part = 0 AND EXISTS (SELECT 1 FROM d);
    UPDATE forgeyard.flow_outcome_deltas x SET part = 0
     WHERE x.tenant_id = tenant AND x.resource = queue_settle_parts.resource AND x.part >= n_parts::smallint;
END
$$;

-- pg::jsonb_option_pairs: the members of an options object as (key, text of the value; 'null' for
-- a JSON null), in jsonb's order; 22023 for anything but an object.
CREATE OR REPLACE FUNCTION forgeyard_pl.queue_option_pairs(options jsonb)
    RETURNS TABLE (o_key text, o_value text) LANGUAGE plpgsql
    AS $$
BEGIN
    IF jsonb_typeof(options) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
    END IF;
    RETURN QUERY SELECT x.key, coalesce(x.value #>> '{}', 'null') FROM jsonb_each(options) x;
END
$$;

-- (extension/schedule.sql)
-- s cut to at most n bytes (at a character boundary): std::string::substr(0, n) of a message.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_left_bytes(s text, n integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    k integer;
BEGIN
    IF octet_length(s) <= n THEN
        RETURN s;
    END IF;
    k := n;
    WHILE octet_length(left(s, k)) > n LOOP
        k := k - 1;
    END LOOP;
    RETURN left(s, k);
END
$$;

-- core::format_timestamp: ISO 8601 UTC to the microsecond ("2030-01-01T00:15:00.000000Z"), in
-- integer arithmetic (H. Hinnant's civil_from_days).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_iso(us bigint)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    secs bigint := CASE WHEN us >= 0 OR us % 1000000 = 0 THEN us / 1000000 ELSE us / 1000000 - 1 END;
    micros bigint := us - secs * 1000000;
    days bigint := CASE WHEN secs >= 0 OR secs % 86400 = 0 THEN secs / 86400 ELSE secs / 86400 - 1 END;
    rest bigint := secs - days * 86400;
    z bigint := days + 719468;
    era bigint := CASE WHEN z >= 0 OR z % 146097 = 0 THEN z / 146097 ELSE z / 146097 - 1 END;
    doe bigint := z - era * 146097;
    yoe bigint := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy bigint := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp bigint := (5 * doy + 2) / 153;
    d bigint := doy - (153 * mp + 2) / 5 + 1;
    m bigint := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    y bigint := yoe + era * 400 + CASE WHEN m <= 2 THEN 1 ELSE 0 END;
BEGIN
    RETURN CASE WHEN y < 0 THEN '-' || lpad((-y)::text, 3, '0') ELSE lpad(y::text, 4, '0') END
        || '-' || lpad(m::text, 2, '0') || '-' || lpad(d::text, 2, '0')
        || 'T' || lpad((rest / 3600)::text, 2, '0') || ':' || lpad((rest / 60 % 60)::text, 2, '0')
        || ':' || lpad((rest % 60)::text, 2, '0') || '.' || lpad(micros::text, 6, '0') || 'Z';
END
$$;

-- bad_spec: 22023 naming the spec and why, with the spec grammar as the detail.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_bad(spec text, why text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = 'schedule spec ''' || forgeyard_pl.workflow_left_bytes(spec, 200) || ''' is not valid: ' || why,
        DETAIL = 'a spec is 5 cron fields (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, '
                 '@monthly, @yearly, or ''@every <interval>'' such as ''@every 15m''';
END
$$;

-- ASCII lower case (std::tolower in the C locale).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_lower(s text)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN translate(s, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
END
$$;

-- parse_every: "1h30m", "90s", "15 minutes", "1 day 2 hours" in microseconds.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_every(spec text, s text)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    pos integer := 1;
    len integer := length(s);
    total bigint := 0;
    any_part boolean := false;
    n bigint;
    ulen integer;
    unit text;
    seconds bigint;
BEGIN
    LOOP
        WHILE pos <= len AND substr(s, pos, 1) = ' ' LOOP
            pos := pos + 1;
        END LOOP;
        EXIT WHEN pos > len;
        IF substr(s, pos, 1) NOT BETWEEN '0' AND '9' OR octet_length(substr(s, pos, 1)) <> 1 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'an interval is numbers with units');
        END IF;
        n := 0;
        WHILE pos <= len AND octet_length(substr(s, pos, 1)) = 1 AND substr(s, pos, 1) BETWEEN '0' AND '9' LOOP
            n := n * 10 + ascii(substr(s, pos, 1)) - 48;
            IF n > 1000000000 THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is too long');
            END IF;
            pos := pos + 1;
        END LOOP;
        WHILE pos <= len AND substr(s, pos, 1) = ' ' LOOP
            pos := pos + 1;
        END LOOP;
        ulen := 0;
        WHILE pos + ulen <= len AND substr(s, pos + ulen, 1) ~ '^[A-Za-z]$' LOOP
            ulen := ulen + 1;
        END LOOP;
        unit := forgeyard_pl.workflow_sched_lower(substr(s, pos, ulen));
        pos := pos + ulen;
        seconds := CASE
            WHEN unit IN ('s', 'sec', 'secs', 'second', 'seconds') THEN 1
            WHEN unit IN ('m', 'min', 'mins', 'minute', 'minutes') THEN 60
            WHEN unit IN ('h', 'hour', 'hours') THEN 3600
            WHEN unit IN ('d', 'day', 'days') THEN 86400 END;
        IF seconds IS NULL THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the units of an interval are s, m, h and d');
        END IF;
        total := total + n * seconds;
        IF total > 366 * 86400 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is longer than 366 days');
        END IF;
        any_part := true;
    END LOOP;
    IF NOT any_part THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, '@every needs an interval');
    END IF;
    IF total * 1000000 < 1000000 THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is shorter than 1 second');
    END IF;
    RETURN total * 1000000;
END
$$;

-- field_value: a number (at most 4 digits), or a month (field 3) or weekday (field 4) by name.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_value(spec text, t text, field integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    name text := forgeyard_pl.workflow_sched_lower(t);
    i integer;
BEGIN
    IF field = 3 THEN
        i := array_position(ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'], name);
        IF i IS NOT NULL THEN
            RETURN i;
        END IF;
    ELSIF field = 4 THEN
        i := array_position(ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'], name);
        IF i IS NOT NULL THEN
            RETURN i - 1;
        END IF;
    END IF;
    IF t = '' OR octet_length(t) > 4 OR t !~ '^[0-9]+$' THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, '''' || t || ''' is not a value');
    END IF;
    RETURN t::integer;
END
$$;

-- parse_field: one cron field (values lo..hi) as bits.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_field(spec text, t text, field integer, lo integer, hi integer)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    bits bigint := 0;
    tl integer := length(t);
    start integer := 1;
    next_start integer;
    comma integer;
    item text;
    step integer;
    slash integer;
    dash integer;
    v_from integer;
    v_to integer;
    top integer;
    v integer;
BEGIN
    WHILE start <= tl + 1 LOOP
        comma := strpos(substr(t, start), ',');
        IF comma = 0 THEN
            item := substr(t, start);
            next_start := tl + 2;
        ELSE
            item := substr(t, start, comma - 1);
            next_start := start + comma;
        END IF;
        step := 1;
        slash := strpos(item, '/');
        IF slash > 0 THEN
            step := forgeyard_pl.workflow_sched_value(spec, substr(item, slash + 1), -1);
            IF step < 1 THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, 'a step must be at least 1');
            END IF;
            item := left(item, slash - 1);
        END IF;
        v_from := lo;
        v_to := hi;
        IF item <> '*' THEN
            dash := strpos(item, '-');
            IF dash = 0 THEN
                v_from := forgeyard_pl.workflow_sched_value(spec, item, field);
                v_to := CASE WHEN step > 1 THEN hi ELSE v_from END;
            ELSE
                v_from := forgeyard_pl.workflow_sched_value(spec, left(item, dash - 1), field);
                v_to := forgeyard_pl.workflow_sched_value(spec, substr(item, dash + 1), field);
            END IF;
            top := CASE WHEN field = 4 THEN 7 ELSE hi END;
            IF v_from < lo OR v_to > top OR v_from > v_to THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, format('the %s field takes %s-%s, not ''%s''',
                    (ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week'])[field + 1], lo, top, item));
            END IF;
        END IF;
        v := v_from;
        WHILE v <= v_to LOOP
            bits := bits | (1::bigint << (CASE WHEN field = 4 THEN v % 7 ELSE v END));
            v := v + step;
        END LOOP;
        start := next_start;
    END LOOP;
    RETURN bits;
END
$$;

-- core::schedule::parse_spec.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_parse(spec text)
    RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    s text;
    word text;
    cron text;
    fields text[];
    n integer;
BEGIN
    IF octet_length(spec) > 200 THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'spec is longer than 200 bytes';
    END IF;
    s := ltrim(rtrim(spec, ' '), ' ');
    cron := s;
    IF left(s, 1) = '@' THEN
        word := forgeyard_pl.workflow_sched_lower(split_part(s, ' ', 1));
        IF word = '@every' THEN
            RETURN ARRAY[forgeyard_pl.workflow_sched_every(spec, substr(s, 7)), 0, 0, 0, 0, 0, 1, 1];
        END IF;
        IF strpos(s, ' ') > 0 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'unknown macro');
        END IF;
        cron := CASE
            WHEN word = '@hourly' THEN '0 * * * *'
            WHEN word IN ('@daily', '@midnight') THEN '0 0 * * *'
            WHEN word = '@weekly' THEN '0 0 * * 0'
            WHEN word = '@monthly' THEN '0 0 1 * *'
            WHEN word IN ('@yearly', '@annually') THEN '0 0 1 1 *' END;
        IF cron IS NULL THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'unknown macro');
        END IF;
    END IF;
    SELECT coalesce(array_agg(m.f[1] ORDER BY m.i), '{}') INTO fields
      FROM regexp_matches(cron, E'[^ \t]+', 'g') WITH ORDINALITY m(f, i);
    n := coalesce(array_length(fields, 1), 0);
    IF n <> 5 THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, 'cron takes 5 fields, not ' || n);
    END IF;
    RETURN ARRAY[0,
                 forgeyard_pl.workflow_sched_field(spec, fields[1], 0, 0, 59),
                 forgeyard_pl.workflow_sched_field(spec, fields[2], 1, 0, 23),
                 forgeyard_pl.workflow_sched_field(spec, fields[3], 2, 1, 31),
                 forgeyard_pl.workflow_sched_field(spec, fields[4], 3, 1, 12),
                 forgeyard_pl.workflow_sched_field(spec, fields[5], 4, 0, 6),
                 CASE WHEN left(fields[3], 1) = '*' THEN 1 ELSE 0 END,
                 CASE WHEN left(fields[5], 1) = '*' THEN 1 ELSE 0 END];
END
$$;

-- Zone::load's checks of a zone name (22023 "unknown time zone"); returns the name. A name is a
-- zone when a file of the tz database has it exactly: PostgreSQL's setting TimeZone finds a file
-- whatever the case of the name and shows the file's own spelling, so a name that the setting
-- takes and shows unchanged is a file, if it cannot be a POSIX TZ rule or an offset (it has a '/',
-- or only letters). Other names, and the names refused, are looked up in pg_timezone_names.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_zone(name text)
    RETURNS text LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    norm text;
    stem text;
    probe text;
    saved text;
    canon text;
    is_file boolean;
    is_dir boolean;
    why text;
BEGIN
    IF name = 'UTC' THEN
        RETURN name;
    END IF;
    IF name = '' OR octet_length(name) > 100 OR left(name, 1) IN ('/', '.') OR name !~ '^[A-Za-z0-9/_+-]+$'
       OR strpos(name, '..') > 0 THEN
        why := 'a zone is a name such as Europe/Berlin';
    ELSE
        -- (The file system reads "a//b" as "a/b".)
        norm := regexp_replace(name, '/{2,}', '/', 'g');
        stem := rtrim(norm, '/');
        -- right/X: the zone X with leap seconds, for every X but posix/..., localtime and posixrules.
        probe := CASE WHEN left(norm, 6) = 'right/' THEN substr(norm, 7) ELSE norm END;
        IF norm = stem AND (strpos(probe, '/') > 0 OR probe ~ '^[A-Za-z_]+$')
           AND (left(norm, 6) <> 'right/' OR (probe NOT IN ('localtime', 'posixrules') AND left(probe, 6) <> 'posix/')) THEN
            BEGIN
                saved := current_setting('TimeZone');
                PERFORM set_config('TimeZone', probe, true);
                canon := current_setting('TimeZone');
                PERFORM set_config('TimeZone', saved, true);
            EXCEPTION WHEN OTHERS THEN
                canon := NULL;
            END;
            IF canon = probe THEN
                RETURN name;
            END IF;
        END IF;
        SELECT coalesce(bool_or(z.name = stem OR (left(stem, 6) = 'right/' AND z.name = substr(stem, 7)
                                                  AND z.name NOT IN ('localtime', 'posixrules')
                                                  AND left(z.name, 6) <> 'posix/')), false),
               coalesce(bool_or(left(z.name, length(stem) + 1) = stem || '/'
                                OR (left(stem, 6) = 'right/' AND left(z.name, length(stem) - 5) = substr(stem, 7) || '/'
                                    AND left(z.name, 6) <> 'posix/')), false)
                 OR stem IN ('right', 'posix')
          INTO is_file, is_dir
          FROM pg_catalog.pg_timezone_names z;
        IF is_file AND norm = stem THEN
            RETURN name;
        ELSIF is_dir OR (stem = 'leapseconds' AND norm = stem) THEN
            -- (The C++ edition reads a directory's name as a file, and fails with XX000.)
            why := 'not a TZif file';
        ELSE
            why := 'no such zone in the tz database';
        END IF;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = 'unknown time zone "' || forgeyard_pl.workflow_left_bytes(name, 100) || '" (' || why || ')';
END
$$;

-- Zone::offset_at: seconds east of UTC at `utc` (seconds since 1970) in `zone` read in `mode`
-- (workflow_sched_fires: 0 UTC, 1 timezone(zone, t), 2 the setting TimeZone, 3 a right/ zone).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_offset(zone text, mode integer, utc bigint)
    RETURNS bigint LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    o bigint;
BEGIN
    IF mode = 1 THEN
        RETURN extract(epoch FROM pg_catalog.timezone(zone, to_timestamp(utc::double precision)))::bigint - utc;
    ELSIF mode = 2 THEN
        RETURN extract(timezone FROM to_timestamp(utc::double precision))::bigint;
    ELSIF mode = 3 THEN
        o := extract(epoch FROM pg_catalog.timezone(zone, to_timestamp(utc::double precision)))::bigint - utc;
        IF utc >= 78710400 THEN  -- leap seconds: from 1972-07-01 on
            o := o + ((-o) % 60 + 60) % 60;
        END IF;
        RETURN o;
    END IF;
    RETURN 0;
END
$$;

-- The fires of a spec in `zone` after `after`, up to `upto`, counted up to max_count (each as
-- next_fire(spec, zone, previous) finds it): how many were counted, the newest `keep` of them
-- (ascending), and the fire after the last one counted (`following`: > upto, or the next once
-- max_count were counted). With max_count 0, `following` is next_fire(spec, zone, after).
-- 22023 when a search finds no fire within 5 years. A cron fire is a local minute of the zone:
-- one in a gap does not fire, one in an overlap fires at its first instant.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_fires(spec bigint[], zone text, after bigint, upto bigint,
                                                  max_count integer, keep integer,
                                                  OUT counted integer, OUT newest bigint[], OUT following bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    every bigint := spec[1];
    minute_bits bigint := spec[2];
    hour_bits bigint := spec[3];
    day_bits bigint := spec[4];
    month_bits bigint := spec[5];
    weekday_bits bigint := spec[6];
    either boolean := spec[7] = 1 OR spec[8] = 1;
    first bigint;
    k integer;
    mode integer;
    z text;
    saved text;
    s bigint;
    loc bigint;
    dayno bigint;
    rest bigint;
    era bigint;
    doe bigint;
    yoe bigint;
    doy bigint;
    mp bigint;
    y bigint;
    mo integer;
    d integer;
    h integer;
    mi integer;
    wd integer;
    dim integer;
    last_year bigint;
    prev bigint := after;
    ring bigint[];
    at_local bigint;
    o1 bigint;
    o2 bigint;
    u bigint;
    front bigint;
    fire bigint;
    next_minute integer[];
    next_hour integer[];
    i integer;
BEGIN
    counted := 0;
    newest := '{}';
    IF every > 0 THEN
        first := (CASE WHEN after >= 0 OR after % every = 0 THEN after / every ELSE after / every - 1 END + 1) * every;
        IF first <= upto THEN
            counted := least((upto - first) / every + 1, max_count::bigint);
        END IF;
        k := least(keep, counted);
        SELECT coalesce(array_agg(first + (counted - k + g) * every ORDER BY g), '{}') INTO newest
          FROM generate_series(0, k - 1) g;
        following := first + counted * every;
        RETURN;
    END IF;
    IF zone = 'UTC' THEN
        mode := 0;
    ELSIF left(zone, 6) = 'right/' THEN
        mode := 3;
        z := regexp_replace(zone, '/{2,}', '/', 'g');
    ELSIF strpos(zone, '/') > 0 THEN
        mode := 1;
        z := regexp_replace(zone, '/{2,}', '/', 'g');
    ELSE
        mode := 2;
        z := zone;
        saved := current_setting('TimeZone');
        PERFORM set_config('TimeZone', zone, true);
    END IF;
    -- The next set minute (hour) from each one on; 60 (24): none.
    next_minute := array_fill(60, ARRAY[61], ARRAY[0]);
    FOR i IN REVERSE 59 .. 0 LOOP
        next_minute[i] := CASE WHEN (minute_bits >> i) & 1 = 1 THEN i ELSE next_minute[i + 1] END;
    END LOOP;
    next_hour := array_fill(24, ARRAY[25], ARRAY[0]);
    FOR i IN REVERSE 23 .. 0 LOOP
        next_hour[i] := CASE WHEN (hour_bits >> i) & 1 = 1 THEN i ELSE next_hour[i + 1] END;
    END LOOP;
    IF keep > 0 THEN
        ring := array_fill(0::bigint, ARRAY[keep]);
    END IF;
    -- The local minute of `after`, as a civil time.
    s := CASE WHEN after >= 0 OR after % 1000000 = 0 THEN after / 1000000 ELSE after / 1000000 - 1 END;
    loc := s + CASE mode WHEN 0 THEN 0 ELSE forgeyard_pl.workflow_sched_offset(z, mode, s) END;
    loc := (CASE WHEN loc >= 0 OR loc % 60 = 0 THEN loc / 60 ELSE loc / 60 - 1 END) * 60;
    dayno := CASE WHEN loc >= 0 OR loc % 86400 = 0 THEN loc / 86400 ELSE loc / 86400 - 1 END;
    rest := loc - dayno * 86400;
    era := CASE WHEN dayno + 719468 >= 0 OR (dayno + 719468) % 146097 = 0 THEN (dayno + 719468) / 146097
                ELSE (dayno + 719468) / 146097 - 1 END;
    doe := dayno + 719468 - era * 146097;
    yoe := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp := (5 * doy + 2) / 153;
    d := doy - (153 * mp + 2) / 5 + 1;
    mo := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    y := yoe + era * 400 + CASE WHEN mo <= 2 THEN 1 ELSE 0 END;
    h := rest / 3600;
    mi := rest % 3600 / 60;
    wd := ((dayno + 4) % 7 + 7) % 7;
    last_year := y + 5;
    LOOP
        IF y > last_year THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'the schedule never fires within 5 years';
        END IF;
        dim := CASE WHEN mo = 2 THEN CASE WHEN (y % 4 = 0 AND y % 100 <> 0) OR y % 400 = 0 THEN 29 ELSE 28 END
                    WHEN mo IN (4, 6, 9, 11) THEN 30 ELSE 31 END;
        IF (month_bits >> mo) & 1 = 0 THEN
            -- To the month's last day, then the next day.
            dayno := dayno + (dim - d);
            wd := (wd + (dim - d)) % 7;
            d := dim;
            h := 24;
        ELSIF NOT (CASE WHEN either THEN (day_bits >> d) & 1 = 1 AND (weekday_bits >> wd) & 1 = 1
                        ELSE (day_bits >> d) & 1 = 1 OR (weekday_bits >> wd) & 1 = 1 END) THEN
            h := 24;
        ELSE
            IF (hour_bits >> h) & 1 = 0 THEN
                h := next_hour[h];
                mi := 0;
            ELSE
                mi := next_minute[mi];
                IF mi > 59 THEN
                    mi := 0;
                    h := h + 1;
                ELSE
                    at_local := dayno * 86400 + h * 3600 + mi * 60;
                    -- Zone::from_local, its first instant.
                    IF mode = 0 THEN
                        front := at_local;
                    ELSE
                        front := NULL;
                        o1 := forgeyard_pl.workflow_sched_offset(z, mode, at_local - 86400);
                        o2 := forgeyard_pl.workflow_sched_offset(z, mode, at_local + 86400);
                        u := at_local - o1;
                        IF u + forgeyard_pl.workflow_sched_offset(z, mode, u) = at_local THEN
                            front := u;
                        END IF;
                        IF o2 <> o1 THEN
                            u := at_local - o2;
                            IF u + forgeyard_pl.workflow_sched_offset(z, mode, u) = at_local AND (front IS NULL OR u < front) THEN
                                front := u;
                            END IF;
                        END IF;
                    END IF;
                    IF front IS NOT NULL AND front * 1000000 > prev THEN
                        fire := front * 1000000;
                        IF counted >= max_count OR fire > upto THEN
                            following := fire;
                            EXIT;
                        END IF;
                        IF keep > 0 THEN
                            ring[counted % keep + 1] := fire;
                        END IF;
                        counted := counted + 1;
                        prev := fire;
                        last_year := y + 5;
                    END IF;
                    mi := mi + 1;
                    IF mi > 59 THEN
                        mi := 0;
                        h := h + 1;
                    END IF;
                END IF;
            END IF;
        END IF;
        IF h > 23 THEN
            -- The next day.
            h := 0;
            mi := 0;
            d := d + 1;
            dayno := dayno + 1;
            wd := (wd + 1) % 7;
            IF d > dim THEN
                d := 1;
                mo := mo + 1;
                IF mo > 12 THEN
                    mo := 1;
                    y := y + 1;
                END IF;
            END IF;
        END IF;
    END LOOP;
    IF mode = 2 THEN
        PERFORM set_config('TimeZone', saved, true);
    END IF;
    k := least(keep, counted);
    IF k > 0 THEN
        SELECT array_agg(ring[(counted - k + g) % keep + 1] ORDER BY g) INTO newest FROM generate_series(0, k - 1) g;
    END IF;
END
$$;

-- core::schedule::due: what a tick at `now` does with a schedule whose next fire is `next`: the
-- fires to start (the newest catch_up + 1 of those due, oldest first), the count of the others
-- (skipped, counted one by one up to 100,000), and the schedule's next fire after now.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_sched_due(spec bigint[], zone text, next bigint, now_us bigint, catch_up integer,
                                                OUT start bigint[], OUT skipped bigint, OUT next_after bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    keep integer := catch_up + 1;
    g record;
    counted bigint;
    f bigint;
    win bigint;
    w_from bigint;
BEGIN
    IF next > now_us THEN
        start := '{}';
        skipped := 0;
        next_after := next;
        RETURN;
    END IF;
    -- `next` and then the fires after it, up to 100,000.
    SELECT * INTO g FROM forgeyard_pl.workflow_sched_fires(spec, zone, next, now_us, 99999, keep);
    counted := 1 + g.counted;
    start := ARRAY[next] || g.newest;
    IF cardinality(start) > keep THEN
        start := start[cardinality(start) - keep + 1 :];
    END IF;
    f := g.following;
    IF f <= now_us THEN
        -- Too many to count: the newest fires are found in a window before now that doubles until
        -- it holds enough of them (or reaches back to the fires counted).
        win := 60000000;
        LOOP
            w_from := greatest(now_us - win, f - 1);
            SELECT * INTO g FROM forgeyard_pl.workflow_sched_fires(spec, zone, w_from, now_us, 100000, keep);
            IF cardinality(g.newest) >= keep OR w_from = f - 1 THEN
                start := start || g.newest;
                IF cardinality(start) > keep THEN
                    start := start[cardinality(start) - keep + 1 :];
                END IF;
                EXIT;
            END IF;
            win := win * 2;
        END LOOP;
    END IF;
    skipped := greatest(counted - cardinality(start), 0);
    next_after := (forgeyard_pl.workflow_sched_fires(spec, zone, now_us, now_us, 0, 0)).following;
END
$$;

-- schedule::tick: starts the runs of every due schedule (of `tenant`, or all), at most 1000
-- schedules a call, each once however many tickers run at once; returns the runs started.
-- maintain() runs it too (the caller checked the tenant).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_schedule_tick(p_tenant text, now_at timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    due_rows forgeyard.wf_schedules[];
    sch forgeyard.wf_schedules;
    now_us bigint := forgeyard_pl.usecs(now_at);
    d record;
    fire bigint;
    started bigint := 0;
    n integer;
BEGIN
    -- Each due schedule once: another ticker skips the rows this one holds, and finds their
    -- next_fire moved once it commits. All of them are locked before the first run starts.
    SELECT array_agg(q.s) INTO due_rows
      FROM (SELECT s FROM forgeyard.wf_schedules s
             WHERE (p_tenant IS NULL OR s.tenant_id = p_tenant) AND s.next_fire <= now_at
             ORDER BY s.next_fire LIMIT 1000 FOR UPDATE SKIP LOCKED) q;
    IF due_rows IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH sch IN ARRAY due_rows LOOP
        SELECT * INTO d FROM forgeyard_pl.workflow_sched_due(forgeyard_pl.workflow_sched_parse(sch.spec), sch.timezone,
                                                             forgeyard_pl.usecs(sch.next_fire), now_us, sch.catch_up);
        FOREACH fire IN ARRAY d.start LOOP
            PERFORM forgeyard.workflow_start(sch.tenant_id, sch.workflow, sch.version,
                                             sch.schedule || '@' || forgeyard_pl.workflow_iso(fire), sch.input);
        END LOOP;
        n := cardinality(d.start);
        started := started + n;
        UPDATE forgeyard.wf_schedules s
           SET next_fire = now_at + (d.next_after - now_us) * interval '1 microsecond',
               last_fire = coalesce(now_at + (d.start[n] - now_us) * interval '1 microsecond', s.last_fire),
               fires = s.fires + n, skipped = s.skipped + d.skipped, updated_at = now_at
         WHERE s.tenant_id = sch.tenant_id AND s.schedule = sch.schedule;
    END LOOP;
    RETURN started;
END
$$;

-- (extension/tenant.sql)
-- The role the caller is at the outer level (after SET ROLE), not the definer of the function
-- running: SECURITY DEFINER changes current_user, not the setting `role`.
CREATE OR REPLACE FUNCTION forgeyard_pl.outer_user()
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
CREATE OR REPLACE FUNCTION forgeyard_pl.check_tenant(tenant text)
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
                RAISE EXCEPTION USING ERRCODE = 'FY040',
                    MESSAGE = 'a role bound to tenants must name its tenant',
                    DETAIL = 'this role is bound with forgeyard.bind_tenant; pass one of its tenants';
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'FY040',
                MESSAGE = format('tenant "%s" is not allowed for this role', tenant),
                DETAIL = 'forgeyard.bind_tenant binds this role to other tenants';
        END IF;
    END LOOP;
END
$$;

-- (extension/topic.sql)
-- core::throw_unknown_topic: 42704.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_unknown_topic(p_tenant text, p_topic text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '42704',
        MESSAGE = format('topic "%s" does not exist for tenant "%s"', p_topic, p_tenant);
END
$$;

-- core::throw_unknown_subscription: 42704.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_unknown_subscription(p_topic text, p_subscription text)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '42704',
        MESSAGE = format('subscription "%s" does not exist on topic "%s"', p_subscription, p_topic);
END
$$;

-- core::check_event_version: 22023 outside 1..1000000 (after the NULL check of int4_arg).
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_version_arg(p_argument text, p_version integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = p_argument || ' must not be NULL';
    END IF;
    IF p_version < 1 OR p_version > 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = p_argument || ' must be between 1 and 1000000';
    END IF;
    RETURN p_version;
END
$$;

-- topic::deliver: one event into one subscription queue `q` (a forgeyard.queues row) by the route's
-- decision `routing`, admitted like enqueue (queue_admit, the partition head): FY020 when full and
-- the subscription's on_full is reject (dead_letter false), else a dead letter backlog_full; a
-- quarantined version becomes a dead letter schema_unsupported. FY021 over max_payload_bytes.
-- A dead letter never took capacity (dead letters do not count against the bounds). Returns what
-- the delivery became (0 message, 1 quarantined, 2 backlog_full, 3 skipped).
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_deliver(q forgeyard.queues, routing integer, dead_letter boolean, ev_id uuid,
                                           ev_type text, ev_version integer, ev_key text, ev_priority integer,
                                           ev_bytes bigint, at_time timestamptz)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    v_slot integer;
    v_head boolean := true;
    v_pass bigint;
BEGIN
    IF routing = 1 THEN
        RETURN 3;
    END IF;
    IF routing = 2 THEN
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                        payload, bytes, slot, enqueued_at, visible_at, last_error, error_class, finished_at)
        VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'dead', ev_priority, ev_key, false, ev_id,
                NULL, ev_bytes, 0, at_time, at_time,
                format('version %s of event type "%s" is outside the subscription''s accepted range', ev_version, ev_type),
                'schema_unsupported', at_time);
        RETURN 1;
    END IF;
    IF ev_bytes > q.max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'FY021',
            MESSAGE = format('payload of %s bytes is over the limit of queue "%s"', ev_bytes, q.queue),
            DETAIL = format('max_payload_bytes is %s; store the bytes elsewhere and send a reference', q.max_payload_bytes);
    END IF;
    IF q.ordering = 'partition' AND ev_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('partition_key is required: queue "%s" is partition-ordered', q.queue);
    END IF;
    -- FY020 when full, unless the subscription takes the event as a dead letter: then admission
    -- refuses (NULL) before it changes anything.
    v_slot := (forgeyard_pl.queue_admit(q, ev_priority, ev_bytes, NOT dead_letter)).o_slot;
    IF v_slot IS NULL THEN
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                        payload, bytes, slot, enqueued_at, visible_at, last_error, error_class,
                                        finished_at)
        VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'dead', ev_priority, ev_key, false, ev_id,
                NULL, ev_bytes, 0, at_time, at_time,
                format('subscription "%s" was full when the event was published', q.queue), 'backlog_full', at_time);
        RETURN 2;
    END IF;
    -- The message's key (core::group_key) is its partition_key in a partition-ordered queue; an
    -- event has no fairness_key, so elsewhere every message is a head.
    IF q.ordering = 'partition' THEN
        v_head := forgeyard_pl.queue_join_key(q, ev_key, 1) > 0;
    END IF;
    -- (A fair subscription queue's message gets its pass, as enqueue gives one.)
    IF q.fairness THEN
        v_pass := (forgeyard_pl.queue_fair_passes(q, ev_priority, NULL, 1))[1];
    END IF;
    INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,
                                    payload, bytes, slot, enqueued_at, visible_at, pass)
    VALUES (nextval('forgeyard.message_ids'), q.tenant_id, q.queue, 'pending', ev_priority, ev_key, v_head, ev_id,
            NULL, ev_bytes, v_slot, at_time, at_time, v_pass);
    -- The same wake-up payload as enqueue: a digest of "<tenant>/<queue>".
    IF q.notify THEN
        PERFORM forgeyard_pl.queue_notify(q.tenant_id, q.queue);
    END IF;
    RETURN 0;
END
$$;

-- topic::replay: delivers the retained events of topic p_topic (retention p_retention microseconds;
-- 0: none) published at or after p_since to subscription p_subscription, in event_seq order; returns
-- how many reached its consumers. The events are read first, then the subscription's queue is
-- loaded as a producer's, then each event delivered by the subscription's filter (read again when
-- the event type changes). 42704 if the subscription is gone.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_replay(p_tenant text, p_topic text, p_retention bigint, p_subscription text,
                                          p_since timestamptz, at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    q forgeyard.queues%ROWTYPE;
    loaded boolean := false;
    ev record;
    delivered bigint := 0;
    type_of_route text;
    r_found boolean := false;
    r_dead_letter boolean;
    r_filtered boolean;
    r_listed boolean;
    r_min bigint;
    r_max bigint;
    routing integer;
BEGIN
    IF p_retention = 0 THEN
        RETURN 0;
    END IF;
    FOR ev IN
        SELECT e.event_seq, e.event_id, e.event_type, e.version, e.partition_key, e.priority::integer AS priority,
               octet_length(e.payload)::bigint AS bytes
          FROM forgeyard.topic_events e
         WHERE e.tenant_id = p_tenant AND e.topic = p_topic
           AND e.published_at >= p_since AND e.published_at > at_time - p_retention * '1 microsecond'::interval
         ORDER BY e.event_seq
    LOOP
        IF NOT loaded THEN
            q := forgeyard_pl.queue_load(p_tenant, p_subscription, true);
            loaded := true;
        END IF;
        IF type_of_route IS DISTINCT FROM ev.event_type THEN
            SELECT s.on_full = 'dead_letter', s.event_types IS NOT NULL, s.event_types ? ev.event_type,
                   (s.event_types -> ev.event_type ->> 'min')::bigint, (s.event_types -> ev.event_type ->> 'max')::bigint
              INTO r_dead_letter, r_filtered, r_listed, r_min, r_max
              FROM forgeyard.subscriptions s
             WHERE s.tenant_id = p_tenant AND s.topic = p_topic AND s.subscription = p_subscription;
            r_found := FOUND;
            type_of_route := ev.event_type;
        END IF;
        IF NOT r_found THEN
            PERFORM forgeyard_pl.topic_unknown_subscription(p_topic, p_subscription);
        END IF;
        routing := CASE WHEN NOT r_filtered THEN 0
                        WHEN NOT r_listed THEN 1
                        WHEN ev.version BETWEEN coalesce(r_min, 1) AND coalesce(r_max, 1000000) THEN 0
                        ELSE 2 END;
        IF forgeyard_pl.topic_deliver(q, routing, r_dead_letter, ev.event_id, ev.event_type, ev.version,
                                      ev.partition_key, ev.priority, ev.bytes, at_time) = 0 THEN
            delivered := delivered + 1;
        END IF;
    END LOOP;
    IF NOT loaded THEN
        q := forgeyard_pl.queue_load(p_tenant, p_subscription, true);
    END IF;
    RETURN delivered;
END
$$;

-- (extension/topic_publish.sql)
-- start (topic_publish.cpp): the arguments tenant, topic, event_type, version and priority checked
-- in the C++ edition's order, the tenant rule; the topic (kept from being dropped until commit,
-- FOR KEY SHARE) and whether the pair is registered, in one statement (42704, FY050); then the
-- topic's subscriptions in name order, each with its decision for this type and version (0 deliver,
-- 1 skip, 2 quarantine) and its queue loaded as a producer's (parallel arrays).
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_start(p_tenant text, p_topic text, p_event_type text, p_version integer,
                                         p_priority text, OUT o_priority integer, OUT o_queues forgeyard.queues[],
                                         OUT o_routing integer[], OUT o_dead_letter boolean[])
    LANGUAGE plpgsql
    AS $$
DECLARE
    registered boolean;
    r record;
    q forgeyard.queues%ROWTYPE;
BEGIN
    PERFORM forgeyard_pl.name_arg('tenant', p_tenant, 128);
    PERFORM forgeyard_pl.name_arg('topic', p_topic, 128);
    PERFORM forgeyard_pl.name_arg('event_type', p_event_type, 128);
    PERFORM forgeyard_pl.topic_version_arg('version', p_version);
    o_priority := forgeyard_pl.queue_priority('priority', forgeyard_pl.name_arg('priority', p_priority, 64));
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    SELECT EXISTS (SELECT FROM forgeyard.event_types e
                    WHERE e.tenant_id = t.tenant_id AND e.event_type = p_event_type AND e.version = p_version)
      INTO registered
      FROM forgeyard.topics t WHERE t.tenant_id = p_tenant AND t.topic = p_topic
       FOR KEY SHARE OF t;
    IF NOT FOUND THEN
        PERFORM forgeyard_pl.topic_unknown_topic(p_tenant, p_topic);
    END IF;
    IF NOT registered THEN
        RAISE EXCEPTION USING ERRCODE = 'FY050',
            MESSAGE = format('event type "%s" version %s is not registered for tenant "%s"', p_event_type, p_version, p_tenant),
            DETAIL = 'register it with event_type_register first';
    END IF;
    o_queues := '{}';
    o_routing := '{}';
    o_dead_letter := '{}';
    FOR r IN
        SELECT s.subscription, s.on_full = 'dead_letter' AS dead_letter,
               CASE WHEN s.event_types IS NULL THEN 0
                    WHEN NOT (s.event_types ? p_event_type) THEN 1
                    WHEN p_version BETWEEN coalesce((s.event_types -> p_event_type ->> 'min')::bigint, 1)
                                       AND coalesce((s.event_types -> p_event_type ->> 'max')::bigint, 1000000) THEN 0
                    ELSE 2 END AS routing
          FROM forgeyard.subscriptions s
         WHERE s.tenant_id = p_tenant AND s.topic = p_topic
         ORDER BY s.subscription
    LOOP
        q := forgeyard_pl.queue_load(p_tenant, r.subscription, true);
        o_queues := array_append(o_queues, q);
        o_routing := array_append(o_routing, r.routing);
        o_dead_letter := array_append(o_dead_letter, r.dead_letter);
    END LOOP;
END
$$;

-- publish_one (topic_publish.cpp): one event of the publisher (topic_start's result) stored and
-- delivered to each subscription; its event_seq. A repeated event_id returns the first event's
-- event_seq, or FY011 for other contents: a concurrent publisher of the same event_id waits in the
-- INSERT for this one's transaction, then finds the first event.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_publish_one(p_tenant text, p_topic text, p_event_type text, p_version integer,
                                               p_priority integer, p_payload bytea, p_event_id uuid, p_key text,
                                               p_queues forgeyard.queues[], p_routing integer[],
                                               p_dead_letter boolean[], at_time timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    v_id uuid;
    v_digest text;
    v_bytes bigint;
    v_seq bigint;
    v_same boolean;
    i integer;
BEGIN
    IF p_key IS NOT NULL THEN
        PERFORM forgeyard_pl.name_arg('partition_key', p_key, 512);
    END IF;
    v_id := coalesce(p_event_id, gen_random_uuid());
    v_bytes := octet_length(p_payload);
    v_digest := encode(sha256(p_payload), 'hex');
    INSERT INTO forgeyard.topic_events AS e (tenant_id, topic, event_seq, event_id, event_type, version, partition_key,
                                             priority, payload, payload_digest, published_at)
    VALUES (p_tenant, p_topic, nextval('forgeyard.topic_event_seqs'), v_id, p_event_type, p_version, p_key,
            p_priority, p_payload, v_digest, at_time)
    ON CONFLICT (tenant_id, topic, event_id) DO NOTHING
    RETURNING e.event_seq INTO v_seq;
    IF NOT FOUND THEN
        SELECT e.event_seq, e.event_type = p_event_type AND e.version = p_version AND e.payload_digest = v_digest
                            AND e.partition_key IS NOT DISTINCT FROM p_key
          INTO v_seq, v_same
          FROM forgeyard.topic_events e WHERE e.tenant_id = p_tenant AND e.topic = p_topic AND e.event_id = v_id;
        IF v_same IS NOT TRUE THEN
            RAISE EXCEPTION USING ERRCODE = 'FY011',
                MESSAGE = 'event_id was published before with other contents',
                DETAIL = format('event_seq %s carries this event_id', coalesce(v_seq, 0));
        END IF;
        RETURN v_seq;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        PERFORM forgeyard_pl.topic_deliver(p_queues[i], p_routing[i], p_dead_letter[i], v_id, p_event_type, p_version,
                                           p_key, p_priority, v_bytes, at_time);
    END LOOP;
    RETURN v_seq;
END
$$;

-- (extension/topic_subscribe.sql)
-- check_event_types (topic_subscribe.cpp): event_types is ["type", ...] or {"type": {"min": v,
-- "max": v}} (either bound optional). Every entry is checked, the first error is raised (22023 with
-- its message, whatever the check), then an empty list.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_check_event_types(p_options jsonb)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    shape text := jsonb_typeof(p_options -> 'event_types');
    r record;
    n integer := 0;
    err text;
    v_name text;
    w text;
    txt text;
    v bigint;
    v_lo bigint;
    v_hi bigint;
BEGIN
    IF shape IS NULL OR shape NOT IN ('array', 'object') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'subscription option event_types must be an array of type names or an object of version ranges';
    END IF;
    FOR r IN
        WITH f AS (SELECT p_options -> 'event_types' AS f)
        SELECT 'array' AS src, jsonb_typeof(e) AS kind, e #>> '{}' AS name, NULL::text AS lo, NULL::text AS hi,
               0::bigint AS extra
          FROM f, jsonb_array_elements(f.f) e WHERE jsonb_typeof(f.f) = 'array'
        UNION ALL
        SELECT 'object', jsonb_typeof(e.value), e.key,
               CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value -> 'min' #>> '{}' END,
               CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value -> 'max' #>> '{}' END,
               CASE WHEN jsonb_typeof(e.value) = 'object'
                    THEN (SELECT count(*) FROM jsonb_object_keys(e.value) k WHERE k <> ALL ('{min,max}'::text[])) ELSE 0 END
          FROM f, jsonb_each(f.f) e WHERE jsonb_typeof(f.f) = 'object'
    LOOP
        n := n + 1;
        CONTINUE WHEN err IS NOT NULL;
        v_name := coalesce(r.name, '');
        IF r.src = 'array' AND r.kind <> 'string' THEN
            err := 'subscription option event_types must list type names (strings)';
            CONTINUE;
        END IF;
        IF r.src = 'object' AND r.kind <> 'object' THEN
            err := format('subscription option event_types: the value of "%s" must be an object {"min": v, "max": v}', v_name);
            CONTINUE;
        END IF;
        IF v_name = '' THEN
            err := 'event_types entry must not be empty';
            CONTINUE;
        END IF;
        IF octet_length(v_name) > 128 THEN
            err := 'event_types entry is longer than 128 bytes';
            CONTINUE;
        END IF;
        IF r.extra > 0 THEN
            err := 'subscription option event_types: only min and max are allowed';
            CONTINUE;
        END IF;
        v_lo := 1;
        v_hi := 1000000;
        FOREACH w IN ARRAY ARRAY['min', 'max'] LOOP
            txt := CASE w WHEN 'min' THEN r.lo ELSE r.hi END;
            CONTINUE WHEN txt IS NULL;
            IF txt !~ '^[0-9]{1,7}$' THEN
                err := format('event_types %s must be a version between 1 and 1000000', w);
                EXIT;
            END IF;
            v := txt::bigint;
            IF v < 1 OR v > 1000000 THEN
                err := format('event_types %s must be between 1 and 1000000', w);
                EXIT;
            END IF;
            IF w = 'min' THEN
                v_lo := v;
            ELSE
                v_hi := v;
            END IF;
        END LOOP;
        CONTINUE WHEN err IS NOT NULL;
        IF v_lo > v_hi THEN
            err := 'event_types min must not be over max';
        END IF;
    END LOOP;
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = err;
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'subscription option event_types must list at least one type';
    END IF;
END
$$;

-- parse_subscription_options (topic_subscribe.cpp): the subscription's own options (on_full,
-- start, event_types) in jsonb's order; the rest are its queue's. event_types null is no filter.
CREATE OR REPLACE FUNCTION forgeyard_pl.topic_subscription_options(p_options jsonb, OUT o_dead_letter boolean,
                                                        OUT o_oldest boolean, OUT o_filtered boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    e record;
    v text;
BEGIN
    IF jsonb_typeof(p_options) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'options must be a JSON object';
    END IF;
    o_dead_letter := false;
    o_oldest := false;
    o_filtered := false;
    FOR e IN SELECT x.key, jsonb_typeof(x.value) AS kind, x.value #>> '{}' AS value FROM jsonb_each(p_options) x
              WHERE x.key = ANY ('{event_types,on_full,start}'::text[]) LOOP
        v := CASE WHEN e.kind = 'string' THEN coalesce(e.value, '') ELSE '' END;
        IF e.key = 'on_full' THEN
            IF v = 'reject' THEN
                o_dead_letter := false;
            ELSIF v = 'dead_letter' THEN
                o_dead_letter := true;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'subscription option on_full must be reject or dead_letter';
            END IF;
        ELSIF e.key = 'start' THEN
            IF v = 'now' THEN
                o_oldest := false;
            ELSIF v = 'oldest' THEN
                o_oldest := true;
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = 'subscription option start must be now or oldest';
            END IF;
        ELSIF e.kind <> 'null' THEN
            PERFORM forgeyard_pl.topic_check_event_types(p_options);
            o_filtered := true;
        END IF;
    END LOOP;
END
$$;

-- (extension/workflow.sql)
-- wf::throw_unknown_run: 42704 for a run the tenant does not have.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_unknown_run(p_run uuid, p_tenant text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '42704',
        MESSAGE = format('workflow run %s not found for tenant "%s"', p_run, p_tenant);
END
$$;

-- run_args: the tenant and run_id arguments of every function on one run. Returns the tenant.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_run_arg(p_tenant text, p_run uuid)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    IF p_run IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'run_id must not be NULL';
    END IF;
    RETURN p_tenant;
END
$$;

-- position_arg: NULL (the epoch's cursor counts) or wf::check_position (22023 under 1).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_position_arg(p_position integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_position IS NOT NULL AND p_position < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'position must be 1 or more',
            DETAIL = 'got ' || p_position;
    END IF;
    RETURN p_position;
END
$$;

-- wf::throw_cursor_lost: FY001 for an owner whose step cursor is gone or another epoch's.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_cursor_lost(p_epoch bigint, p_run uuid)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FY001',
        MESSAGE = format('workflow run %s: the step cursor of epoch %s is gone (a crash, a failover or a restore emptied it, or the run was taken over)',
                         p_run, p_epoch),
        DETAIL = 'stop working on the run; it is handed out again when the lease of this epoch runs out';
END
$$;

-- wf::check_same_step: FY060 when the journal has another step at the position.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_check_same_step(p_recorded text, p_step text, p_run uuid, p_position integer)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_recorded IS NULL OR p_recorded = p_step THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'FY060',
        MESSAGE = format('workflow run %s called step "%s" at position %s, where its journal has step "%s"',
                         p_run, p_step, p_position, p_recorded),
        DETAIL = 'the workflow''s code no longer replays its journal; park the run (workflow_park), then fix the code or retry the run (workflow_retry)';
END
$$;

-- wf::check_position_follows: 22023 unless the step before `position` is recorded done.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_check_follows(p_position integer, p_previous text, p_run uuid, p_function text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_position = 1 OR p_previous = 'done' THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('%s at position %s of workflow run %s, but the step at position %s is %s', p_function, p_position,
                         p_run, p_position - 1,
                         CASE WHEN p_previous IS NULL THEN 'not recorded' ELSE 'not done (' || p_previous || ')' END),
        DETAIL = 'count positions from 1 for the first step call of an epoch, one more per step; a step''s position follows a step recorded done';
END
$$;

-- wf::check_current_step: 22023 unless `step` is the epoch's current step.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_check_current(p_cursor integer, p_cursor_step text, p_step text, p_function text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_cursor >= 1 AND p_cursor_step = p_step THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('%s for step "%s", but the run''s current step is %s', p_function, p_step,
                         CASE WHEN p_cursor_step IS NULL THEN 'none' ELSE '"' || p_cursor_step || '"' END),
        DETAIL = 'call workflow_step for the step first, under the same epoch';
END
$$;

-- wf::throw_step_recorded: 22023, the step at `position` is recorded done already.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_step_recorded(p_step text, p_run uuid, p_position integer, p_failing boolean)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('step "%s" of workflow run %s at position %s', p_step, p_run, p_position)
                  || CASE WHEN p_failing THEN ' is recorded as done; it cannot fail'
                          ELSE ' is recorded already, with another result' END,
        DETAIL = 'a step''s recorded result never changes: replay returns it';
END
$$;

-- The journal rows at `position` and the one before it (when with_previous and position > 1), in
-- one descent of the journal's key: the status of the step before, and the row at the position.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_read_position(p_tenant text, p_run uuid, p_position integer, p_with_previous boolean,
                                                    OUT j_found boolean, OUT j_previous text, OUT j_step text,
                                                    OUT j_status text, OUT j_result jsonb, OUT j_wake_at timestamptz,
                                                    OUT j_compensation text)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT coalesce(bool_or(x.position = p_position), false),
           min(x.status) FILTER (WHERE x.position < p_position),
           min(x.step) FILTER (WHERE x.position = p_position),
           min(x.status) FILTER (WHERE x.position = p_position),
           (array_agg(x.result) FILTER (WHERE x.position = p_position))[1],
           min(x.wake_at) FILTER (WHERE x.position = p_position),
           min(x.compensation) FILTER (WHERE x.position = p_position)
      INTO j_found, j_previous, j_step, j_status, j_result, j_wake_at, j_compensation
      FROM forgeyard.wf_journal x
     WHERE x.run_id = p_run
       AND x.position >= CASE WHEN p_with_previous AND p_position > 1 THEN p_position - 1 ELSE p_position END
       AND x.position <= p_position AND x.tenant_id = p_tenant;
END
$$;

-- check_named_position on a reading of its own: the step before `position` recorded done and, with
-- p_same_step, a row at the position of the same step (FY060 otherwise).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_check_named(p_tenant text, p_run uuid, p_position integer, p_step text,
                                                  p_function text, p_same_step boolean DEFAULT true)
    RETURNS void LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    jr record;
BEGIN
    SELECT * INTO jr FROM forgeyard_pl.workflow_read_position(p_tenant, p_run, p_position, true);
    IF p_position > 1 THEN
        PERFORM forgeyard_pl.workflow_check_follows(p_position, jr.j_previous, p_run, p_function);
    END IF;
    IF p_same_step AND jr.j_found THEN
        PERFORM forgeyard_pl.workflow_check_same_step(jr.j_step, p_step, p_run, p_position);
    END IF;
END
$$;

-- lock_owned_in (workflow.cpp): the run under its owner's epoch, as the SELECT ... FOR UPDATE it
-- replaces: found and locked (a claim that takes it over waits for this transaction; a newer
-- version followed while waiting is the one read), its message read when it must (under the
-- statement's snapshot, for the version locked), and `epoch` checked to own the run in state p_as
-- (running, compensating, or "owned": either): FY001 otherwise, 42704 for a run the tenant does
-- not have. p_lock false (workflow_step without a timeout): the row is read, not locked, unless it
-- has a step deadline to let go of. Returns the run's row as read: workflow, version, state,
-- msg_id, priority, wait_position, wait_until, compensate_to, error, step_deadline, epoch, live,
-- and with p_cursor_tid the ctid of the run's step cursor as the first reading's snapshot saw it
-- (NULL: none), for workflow_step's lock of the cursor.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_owned(p_tenant text, p_run uuid, p_epoch bigint, p_now timestamptz, p_as text,
                                            p_lock boolean, p_cursor_tid boolean DEFAULT false)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    first_tid tid;
    read_first boolean := false;
BEGIN
    -- (Four statements, one per shape, so that each keeps one generic plan.)
    IF NOT p_lock THEN
        IF p_cursor_tid THEN
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   (SELECT k.ctid FROM forgeyard.wf_cursors k WHERE k.run_id = x.run_id AND k.tenant_id = x.tenant_id) AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant;
        ELSE
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   NULL::tid AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant;
        END IF;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
        END IF;
        IF r.step_deadline IS NOT NULL THEN
            p_lock := true;
            read_first := true;
            first_tid := r.cursor_tid;  -- (the cursor as the first reading found it)
        END IF;
    END IF;
    IF p_lock THEN
        IF p_cursor_tid THEN
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   (SELECT k.ctid FROM forgeyard.wf_cursors k WHERE k.run_id = x.run_id AND k.tenant_id = x.tenant_id) AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant FOR UPDATE;
        ELSE
            SELECT x.workflow, x.version, x.state, x.msg_id, x.priority, x.wait_position, x.wait_until, x.compensate_to,
                   x.error, x.step_deadline, x.epoch,
                   (x.lease_until IS NOT NULL AND x.lease_until > p_now)
                   OR coalesce((SELECT m.state = 'pending' AND m.claim_token IS NOT NULL AND m.claim_token = x.epoch
                                       AND m.visible_at > p_now
                                  FROM forgeyard.messages m WHERE m.msg_id = x.msg_id), false) AS live,
                   NULL::tid AS cursor_tid
              INTO r
              FROM forgeyard.wf_runs x WHERE x.run_id = p_run AND x.tenant_id = p_tenant FOR UPDATE;
        END IF;
        IF NOT FOUND THEN
            PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
        END IF;
        IF read_first THEN
            r.cursor_tid := first_tid;
        END IF;
    END IF;
    -- wf::check_owner. A step with a timeout ends the lease at its deadline, whatever the
    -- delivery says.
    IF r.epoch <> p_epoch THEN
        RAISE EXCEPTION USING ERRCODE = 'FY001',
            MESSAGE = format('workflow run %s: epoch %s is not the run''s current epoch %s', p_run, p_epoch, r.epoch),
            DETAIL = 'another worker took the run over; stop working on it';
    END IF;
    IF (CASE WHEN p_as = 'owned' THEN r.state NOT IN ('running', 'compensating') ELSE r.state <> p_as END) THEN
        RAISE EXCEPTION USING ERRCODE = 'FY001',
            MESSAGE = format('workflow run %s is %s, not %s under epoch %s', p_run, r.state, p_as, p_epoch),
            DETAIL = 'stop working on it';
    END IF;
    IF NOT r.live OR r.step_deadline <= p_now THEN
        RAISE EXCEPTION USING ERRCODE = 'FY001',
            MESSAGE = format('workflow run %s: the lease of epoch %s ran out', p_run, p_epoch),
            DETAIL = 'extend the lease (workflow_extend) before it runs out; the run will be handed out again';
    END IF;
    RETURN r;
END
$$;

-- The step cursor of p_epoch, read (not locked) by a statement of its own after the run's lock, so
-- that what a call that held that lock wrote is seen (lock_owned's WithCursor::yes): FY001 when it
-- is gone or another epoch's. Returns (position, step).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_cursor(p_tenant text, p_run uuid, p_epoch bigint)
    RETURNS record LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
BEGIN
    SELECT k.epoch, k.position, k.step INTO c FROM forgeyard.wf_cursors k WHERE k.run_id = p_run AND k.tenant_id = p_tenant;
    IF NOT FOUND OR c.epoch <> p_epoch THEN
        PERFORM forgeyard_pl.workflow_cursor_lost(p_epoch, p_run);
    END IF;
    RETURN c;
END
$$;

-- The position a step call names (p_named) or, NULL, the epoch's current step (workflow_cursor,
-- and 22023 unless p_step is that step), checked as p_function (workflow_step_fail, workflow_sleep)
-- checks it: a named position by workflow_check_named.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_step_position(p_tenant text, p_run uuid, p_epoch bigint, p_named integer,
                                                    p_step text, p_function text)
    RETURNS integer LANGUAGE plpgsql
    AS $$
DECLARE
    c record;
BEGIN
    IF p_named IS NULL THEN
        c := forgeyard_pl.workflow_cursor(p_tenant, p_run, p_epoch);
        IF NOT (c.position >= 1 AND coalesce(c.step = p_step, false)) THEN
            PERFORM forgeyard_pl.workflow_check_current(c.position, c.step, p_step, p_function);
        END IF;
        RETURN c.position;
    END IF;
    PERFORM forgeyard_pl.workflow_check_named(p_tenant, p_run, p_named, p_step, p_function);
    RETURN p_named;
END
$$;

-- The run's next message (payload: the run id's 16 bytes) on its definition's queue, visible after
-- p_delay microseconds, through forgeyard.enqueue as the C++ edition calls it.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_enqueue(p_tenant text, p_queue text, p_run uuid, p_priority integer,
                                              p_delay bigint DEFAULT 0)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN forgeyard.enqueue(p_tenant, p_queue, uuid_send(p_run), NULL, NULL,
                             (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[p_priority + 1],
                             p_delay * interval '1 microsecond');
END
$$;

-- wf::timer_delay: how long the message of a timer ending at p_until waits (at most 30 days).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_timer_delay(p_until timestamptz, p_now timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN least(greatest(forgeyard_pl.usecs(p_until) - forgeyard_pl.usecs(p_now), 0), 2592000000000);
END
$$;

-- A JSON text's nesting (core::parse_json, at most 64 objects and arrays inside each other):
-- 22023 naming the argument and the byte of the first one too deep. (Called for a value whose
-- nesting jsonb_path_exists found too deep.)
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_json_depth(t text, argument text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b bytea := convert_to(t, 'UTF8');
    size integer := length(b);
    i integer := 0;
    c integer;
    depth integer := 0;
    in_string boolean := false;
BEGIN
    WHILE i < size LOOP
        c := get_byte(b, i);
        IF in_string THEN
            IF c = 92 THEN
                i := i + 2;
                CONTINUE;
            ELSIF c = 34 THEN
                in_string := false;
            END IF;
        ELSIF c = 34 THEN
            in_string := true;
        ELSIF c = 123 OR c = 91 THEN
            depth := depth + 1;
            IF depth > 64 THEN
                RAISE EXCEPTION USING ERRCODE = '22023',
                    MESSAGE = format('%s is not valid JSON: nested deeper than 64 levels at byte %s', argument, i);
            END IF;
        ELSIF c = 125 OR c = 93 THEN
            depth := depth - 1;
        END IF;
        i := i + 1;
    END LOOP;
END
$$;

-- core::canonical_json's text of a jsonb value: keys sorted by their UTF-8 bytes, no whitespace,
-- numbers without trailing zeros (jsonb's numbers have no exponent, leading zero or "-0"),
-- strings escaped as jsonb escapes them.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_canonical_text(v jsonb)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF jsonb_typeof(v) = 'object' THEN
        RETURN '{' || coalesce((SELECT string_agg(to_json(m.key)::text || ':' || forgeyard_pl.workflow_canonical_text(m.value),
                                                  ',' ORDER BY m.key COLLATE "C")
                                  FROM jsonb_each(v) m), '') || '}';
    ELSIF jsonb_typeof(v) = 'array' THEN
        RETURN '[' || coalesce((SELECT string_agg(forgeyard_pl.workflow_canonical_text(a.value), ',' ORDER BY a.n)
                                  FROM jsonb_array_elements(v) WITH ORDINALITY a(value, n)), '') || ']';
    ELSIF jsonb_typeof(v) = 'number' AND strpos(v::text, '.') > 0 THEN
        RETURN rtrim(rtrim(v::text, '0'), '.');
    END IF;
    RETURN v::text;
END
$$;

-- wf::canonical of a jsonb value as the C++ edition reads it (its text): checked (nesting, 22023
-- naming p_argument) and in canonical form, at most p_limit bytes (22023 "... is over N bytes in
-- canonical form"). As jsonb, the canonical form differs only in numbers' trailing zeros.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_canonical(v jsonb, p_argument text, p_limit bigint)
    RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    t text := v::text;
    c text;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_path_exists(v, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
        PERFORM forgeyard_pl.workflow_json_depth(t, p_argument);
    END IF;
    IF octet_length(t) <= p_limit AND t !~ '\.[0-9]*0($|[^0-9])' THEN
        RETURN v;
    END IF;
    c := forgeyard_pl.workflow_canonical_text(v);
    IF octet_length(c) > p_limit THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('%s is over %s bytes in canonical form', p_argument, p_limit);
    END IF;
    RETURN c::jsonb;
END
$$;

-- wf::signal_result: what a wait is journaled with, {"payload": ..., "status": ...}, checked as the
-- C++ edition checks its canonical text (p_payload is canonical already).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_signal_result(p_status text, p_payload jsonb)
    RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    prefix text := '{"status":"' || p_status || '","payload":';
BEGIN
    IF p_payload IS NOT NULL THEN
        IF jsonb_path_exists(p_payload, 'strict $.**{63} ? (@.type() == "object" || @.type() == "array")') THEN
            PERFORM forgeyard_pl.workflow_json_depth(prefix || forgeyard_pl.workflow_canonical_text(p_payload) || '}', 'result');
        END IF;
        IF octet_length(p_payload::text) + octet_length(prefix) + 1 > 1048576
           AND octet_length(forgeyard_pl.workflow_canonical_text(p_payload)) + octet_length(prefix) + 1 > 1048576 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'result is over 1048576 bytes in canonical form';
        END IF;
    END IF;
    RETURN jsonb_build_object('status', p_status, 'payload', p_payload);
END
$$;

-- send_signal: sends a run the signal p_name, in the caller's transaction: false for a repeated
-- signal id or a run that has finished; a run waiting for the signal is handed out at once. 42704
-- for a run the tenant does not have, unless p_missing_ok (a parent removed by its retention).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_send_signal(p_tenant text, p_run uuid, p_name text, p_payload jsonb,
                                                  p_signal_id uuid, p_now timestamptz, p_missing_ok boolean DEFAULT false)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    n integer;
    msg bigint;
BEGIN
    SELECT x.state, x.waiting_signal, x.workflow, x.version, x.priority INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        IF p_missing_ok THEN
            RETURN false;
        END IF;
        PERFORM forgeyard_pl.workflow_unknown_run(p_run, p_tenant);
    END IF;
    IF r.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked') THEN
        RETURN false;
    END IF;
    INSERT INTO forgeyard.wf_signals (tenant_id, run_id, signal_id, name, payload, sent_at)
    VALUES (p_tenant, p_run, p_signal_id, p_name, p_payload, p_now) ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 AND r.state = 'waiting' AND r.waiting_signal = p_name THEN
        msg := forgeyard_pl.workflow_enqueue(p_tenant, '_wf.' || r.workflow || '@' || r.version, p_run, r.priority);
        UPDATE forgeyard.wf_runs x SET state = 'pending', msg_id = msg, lease_until = NULL, updated_at = p_now
         WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
    END IF;
    RETURN n > 0;
END
$$;

-- tell_parent: a run that has a parent tells it, once, how it ended (core/workflow.hpp, children):
-- the signal "child:<run_id>", its id the child's run id, the payload {"error", "result", "state"}.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_tell_parent(p_tenant text, p_run uuid, p_now timestamptz)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    SELECT x.parent_run_id, x.state, x.result, x.error INTO r
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = p_run AND x.parent_run_id IS NOT NULL;
    IF NOT FOUND OR r.state NOT IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed') THEN
        RETURN;
    END IF;
    PERFORM forgeyard_pl.workflow_send_signal(
        p_tenant, r.parent_run_id, 'child:' || p_run,
        jsonb_build_object('error', r.error, 'result', forgeyard_pl.workflow_canonical(r.result, 'result', 1099511627776),
                           'state', r.state),
        p_run, p_now, true);
END
$$;

-- settle: the run ends in p_state (its delivery let go by the caller). One that fails, is
-- cancelled or times out with compensations to run is compensating first: a new message hands it
-- out for them. One that ends compensation_failed keeps its error. Returns the run's state now.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_settle(p_tenant text, p_run uuid, p_state text, p_result jsonb, p_error text,
                                             p_now timestamptz)
    RETURNS text LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
    q text;
    msg bigint;
BEGIN
    IF p_state IN ('failed', 'cancelled', 'timed_out') THEN
        SELECT x.workflow, x.version, x.priority INTO r
          FROM forgeyard.wf_runs x
         WHERE x.tenant_id = p_tenant AND x.run_id = p_run
           AND EXISTS (SELECT 1 FROM forgeyard.wf_journal j WHERE j.tenant_id = p_tenant AND j.run_id = p_run
                          AND j.status = 'done' AND j.compensation IS NOT NULL
                          AND j.compensation_status IS DISTINCT FROM 'done');
        IF FOUND THEN
            q := '_wf.' || r.workflow || '@' || r.version;
            PERFORM forgeyard_pl.queue_ensure(p_tenant, q);
            msg := forgeyard_pl.workflow_enqueue(p_tenant, q, p_run, r.priority);
            UPDATE forgeyard.wf_runs x
               SET state = 'compensating', compensate_to = p_state, error = p_error, msg_id = msg, lease_until = NULL,
                   updated_at = p_now
             WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
            RETURN 'compensating';
        END IF;
    END IF;
    UPDATE forgeyard.wf_runs x
       SET state = p_state, result = p_result,
           error = CASE WHEN p_state = 'compensation_failed' THEN x.error ELSE p_error END,
           lease_until = NULL, updated_at = p_now,
           finished_at = CASE WHEN p_state = 'parked' THEN NULL ELSE p_now END,
           purge_at = CASE WHEN p_state = 'parked' THEN NULL
                           ELSE p_now + (x.retention_usecs * '1 microsecond'::interval) END
     WHERE x.tenant_id = p_tenant AND x.run_id = p_run;
    PERFORM forgeyard_pl.workflow_tell_parent(p_tenant, p_run, p_now);
    RETURN p_state;
END
$$;

-- record_failed_attempt: a failed attempt of the step at p_position, recorded unless the step is
-- done there (false then).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_record_failed(p_tenant text, p_run uuid, p_position integer, p_step text,
                                                    p_error text, p_epoch bigint, p_now timestamptz)
    RETURNS boolean LANGUAGE plpgsql
    AS $$
DECLARE
    n integer;
BEGIN
    INSERT INTO forgeyard.wf_journal AS j (tenant_id, run_id, position, step, status, error, epoch, recorded_at)
    VALUES (p_tenant, p_run, p_position, p_step, 'failed', p_error, p_epoch, p_now)
    ON CONFLICT (tenant_id, run_id, position) DO UPDATE SET error = excluded.error, attempts = j.attempts + 1,
        epoch = excluded.epoch, recorded_at = excluded.recorded_at
     WHERE j.status = 'failed';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n <> 0;
END
$$;

-- next_compensation: the newest step done whose compensation has not run.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_next_compensation(p_tenant text, p_run uuid,
                                                        OUT n_position integer, OUT n_step text, OUT n_compensation text,
                                                        OUT n_result jsonb)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT j.position, j.step, j.compensation, j.result INTO n_position, n_step, n_compensation, n_result
      FROM forgeyard.wf_journal j
     WHERE j.tenant_id = p_tenant AND j.run_id = p_run AND j.status = 'done' AND j.compensation IS NOT NULL
       AND j.compensation_status IS DISTINCT FROM 'done'
     ORDER BY j.position DESC LIMIT 1;
END
$$;

-- wf::check_next_compensation: 22023 unless p_position is the run's next compensation.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_check_next_compensation(p_next integer, p_position integer, p_run uuid)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_next = p_position THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('the next compensation of workflow run %s is %s, not at position %s', p_run,
                         CASE WHEN p_next IS NULL THEN 'none' ELSE 'at position ' || p_next END, p_position),
        DETAIL = 'compensations run newest first: ask workflow_compensation for the next one';
END
$$;

-- (extension/workflow_finish.sql)
-- end_run: the owner ends the run in p_state (completed, failed, parked) and lets its delivery go.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_end_run(p_tenant text, p_run uuid, p_epoch bigint, p_state text, p_result jsonb,
                                              p_error text)
    RETURNS void LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz;
    o record;
BEGIN
    PERFORM forgeyard_pl.not_null('epoch', p_epoch IS NOT NULL);
    IF p_state = 'completed' THEN
        PERFORM forgeyard_pl.not_null('result', p_result IS NOT NULL);
    ELSE
        p_error := coalesce(forgeyard_pl.text_arg(CASE WHEN p_state = 'failed' THEN 'error' ELSE 'reason' END, p_error, 4096, true), '');
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    o := forgeyard_pl.workflow_owned(p_tenant, p_run, p_epoch, now_at, 'running', true);
    PERFORM forgeyard.ack(p_tenant, '_wf.' || o.workflow || '@' || o.version, o.msg_id, p_epoch);
    PERFORM forgeyard_pl.workflow_settle(p_tenant, p_run, p_state, p_result, p_error, now_at);
END
$$;

-- (extension/workflow_read.sql)
-- workflow_list's statement (its argument state shares its name with a result column, which
-- PL/pgSQL refuses in the API function itself).
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_list(p_tenant text, p_state text, p_max_runs integer)
    RETURNS TABLE (r_run_id uuid, r_run_key text, r_workflow text, r_version integer, r_state text, r_owner text,
                   r_epoch bigint, r_error text, r_updated_at timestamptz)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    p_state := forgeyard_pl.text_arg('state', p_state, 4096, true);
    IF p_state IS NOT NULL THEN
        -- wf::check_state
        IF octet_length(p_state) > 64 THEN
            RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'state is longer than 64 bytes';
        END IF;
        IF p_state NOT IN ('pending', 'running', 'sleeping', 'waiting', 'compensating', 'completed', 'failed', 'cancelled',
                           'timed_out', 'compensation_failed', 'parked') THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'state must be one of pending, running, sleeping, waiting, compensating, completed, failed, '
                          'cancelled, timed_out, compensation_failed, parked; not '''
                          || forgeyard_pl.workflow_left_bytes(p_state, 100) || '''';
        END IF;
    END IF;
    p_max_runs := forgeyard_pl.queue_positive_int_arg('max_runs', p_max_runs, 1000);
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    RETURN QUERY
    SELECT w.run_id, w.run_key, w.workflow, w.version, w.state, w.owner, w.epoch, w.error, w.updated_at
      FROM forgeyard.wf_runs w
     WHERE w.tenant_id = p_tenant AND (p_state IS NULL OR w.state = p_state)
     ORDER BY w.updated_at DESC, w.run_id LIMIT p_max_runs;
END
$$;

-- (extension/workflow_start.sql)
-- workflow_claim's rows (its result columns share names with the tables' columns: prefixed here).
-- Claims through forgeyard_pl.queue_claim, the queue's own claim, as queue::claim.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_claim(p_tenant text, p_worker text, p_definitions text[], p_max_runs integer,
                                            p_lease interval)
    RETURNS TABLE (r_run_id uuid, r_workflow text, r_version integer, r_epoch bigint, r_state text, r_input jsonb)
    LANGUAGE plpgsql
    AS $$
DECLARE
    queues text[] := '{}';
    d text;
    at_bytes integer;
    digits text;
    qname text;
    lease_us bigint := 0;
    now_at timestamptz;
    got integer := 0;
    more boolean;
    q forgeyard.queues%ROWTYPE;
    vis bigint;
    l_ids bigint[];
    l_payloads bytea[];
    h_ids bigint[];
    h_tokens bigint[];
    h_payloads bytea[];
    i integer;
    f record;
    takeover boolean;
    timed_out text;
BEGIN
    p_tenant := forgeyard_pl.name_arg('tenant', p_tenant, 128);
    p_worker := forgeyard_pl.name_arg('worker', p_worker, 256);
    IF p_definitions IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'definitions must not be NULL';
    END IF;
    IF cardinality(p_definitions) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'definitions must name at least one ''workflow@version''';
    END IF;
    IF cardinality(p_definitions) > 100 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'at most 100 definitions';
    END IF;
    FOREACH d IN ARRAY p_definitions LOOP
        IF d IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'definitions must not contain NULL';
        END IF;
        -- wf::parse_definition: the last '@' after 1 to 100 bytes, then a version of at least 1.
        at_bytes := octet_length(substring(d FROM '^(.*)@'));
        digits := substring(d FROM '@([^@]*)$');
        IF at_bytes IS NULL OR at_bytes = 0 OR at_bytes > 100 OR digits !~ '^[0-9]+$'
           OR digits::numeric < 1 OR digits::numeric > 2147483647 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = 'definitions must be ''workflow@version'' with a version of at least 1, not '''
                          || forgeyard_pl.workflow_left_bytes(d, 300) || '''';
        END IF;
        qname := '_wf.' || substring(d FROM '^(.*)@') || '@' || digits::integer;
        IF NOT qname = ANY (queues) THEN
            queues := queues || qname;
        END IF;
    END LOOP;
    p_max_runs := forgeyard_pl.queue_positive_int_arg('max_runs', p_max_runs, 100);
    IF p_lease IS NOT NULL THEN
        -- (0: the queue's visibility timeout)
        lease_us := forgeyard_pl.duration_arg('lease', p_lease, 2592000000000);
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    FOREACH qname IN ARRAY queues LOOP
        EXIT WHEN got >= p_max_runs;
        IF NOT EXISTS (SELECT FROM forgeyard.queues x WHERE x.tenant_id = p_tenant AND x.queue = qname) THEN
            CONTINUE;  -- nothing started yet
        END IF;
        -- Until max_runs or an empty claim: a message that is not its run's live one takes a place
        -- in a claim and is let go.
        more := true;
        WHILE more AND got < p_max_runs LOOP
            q := forgeyard_pl.queue_load(p_tenant, qname, false);
            vis := CASE WHEN lease_us > 0 THEN lease_us ELSE q.visibility_usecs END;
            SELECT coalesce(array_agg(x.c_msg_id ORDER BY x.n) FILTER (WHERE x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_payload ORDER BY x.n) FILTER (WHERE x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_msg_id ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_claim_token ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}'),
                   coalesce(array_agg(x.c_payload ORDER BY x.c_priority, x.c_order, x.c_msg_id) FILTER (WHERE NOT x.c_lapsed), '{}')
              INTO l_ids, l_payloads, h_ids, h_tokens, h_payloads
              FROM forgeyard_pl.queue_claim(q, p_worker, p_max_runs - got, vis, now_at)
                   WITH ORDINALITY x(c_msg_id, c_event_id, c_partition_key, c_priority, c_attempt, c_claim_token, c_payload,
                                     c_enqueued_at, c_order, c_lapsed, n);
            more := cardinality(l_ids) > 0 OR cardinality(h_ids) > 0;  -- a lapsed run may be compensating now
            -- A run whose deliveries lapsed on every attempt (dead-lettered by the claim) ends:
            -- running failed, compensating compensation_failed.
            FOR i IN 1 .. cardinality(l_ids) LOOP
                SELECT * INTO f FROM forgeyard_pl.workflow_claim_find(p_tenant, qname, l_ids[i], l_payloads[i], now_at);
                IF f.state IS NULL OR f.msg_id IS DISTINCT FROM l_ids[i] OR f.state NOT IN ('running', 'compensating') THEN
                    CONTINUE;
                END IF;
                timed_out := forgeyard_pl.workflow_claim_timeout(p_tenant, f.run_id, f.state, f.past_step_deadline, f.epoch, now_at);
                PERFORM forgeyard_pl.workflow_settle(
                    p_tenant, f.run_id, CASE WHEN f.state = 'compensating' THEN 'compensation_failed' ELSE 'failed' END, NULL,
                    CASE WHEN timed_out IS NULL THEN 'the owner''s lease ran out'
                         ELSE 'step "' || timed_out || '" ran past its timeout' END
                    || ' on every attempt (the definition queue''s max_attempts)', now_at);
            END LOOP;
            FOR i IN 1 .. cardinality(h_ids) LOOP
                SELECT * INTO f FROM forgeyard_pl.workflow_claim_find(p_tenant, qname, h_ids[i], h_payloads[i], now_at);
                -- A message that is not the run's live one (the run was cancelled, retried or has
                -- finished) is let go.
                IF f.state IS NULL OR f.msg_id IS DISTINCT FROM h_ids[i]
                   OR f.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed', 'parked') THEN
                    PERFORM forgeyard.ack(p_tenant, qname, h_ids[i], h_tokens[i]);
                    CONTINUE;
                END IF;
                -- Past its deadline: timed out, compensating first if it has compensations to run
                -- (their message comes in a later round). A compensating run finishes its
                -- compensations.
                IF f.past_deadline AND f.state <> 'compensating' THEN
                    PERFORM forgeyard.ack(p_tenant, qname, h_ids[i], h_tokens[i]);
                    PERFORM forgeyard_pl.workflow_settle(p_tenant, f.run_id, 'timed_out', NULL, 'the run''s deadline passed', now_at);
                    CONTINUE;
                END IF;
                -- A run still running was claimed again: its owner's lease ran out. One whose step
                -- ran past its timeout records that attempt as failed (the new owner runs it again).
                takeover := f.state = 'running';
                PERFORM forgeyard_pl.workflow_claim_timeout(p_tenant, f.run_id, f.state, f.past_step_deadline, f.epoch, now_at);
                -- The lease ends where the claim made the message visible again.
                UPDATE forgeyard.wf_runs x
                   SET state = CASE WHEN x.state = 'compensating' THEN x.state ELSE 'running' END,
                       epoch = h_tokens[i], owner = p_worker, step_deadline = NULL,
                       lease_until = now_at + vis * interval '1 microsecond',
                       takeovers = x.takeovers + CASE WHEN takeover THEN 1 ELSE 0 END,
                       taken_over_at = CASE WHEN takeover THEN now_at ELSE x.taken_over_at END,
                       previous_owner = CASE WHEN takeover THEN x.owner ELSE x.previous_owner END,
                       updated_at = now_at
                 WHERE x.tenant_id = p_tenant AND x.run_id = f.run_id;
                -- The new epoch's step cursor, at no step yet.
                INSERT INTO forgeyard.wf_cursors AS k (tenant_id, run_id, epoch, position, step)
                VALUES (p_tenant, f.run_id, h_tokens[i], 0, NULL)
                ON CONFLICT (tenant_id, run_id) DO UPDATE SET epoch = excluded.epoch, position = 0, step = NULL;
                got := got + 1;
                r_run_id := f.run_id;
                r_workflow := f.workflow;
                r_version := f.version;
                r_epoch := h_tokens[i];
                r_state := CASE WHEN f.state = 'compensating' THEN 'compensating' ELSE 'running' END;
                r_input := f.input;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;

-- The run a delivery of queue p_queue names, locked (its columns as workflow_claim reads them):
-- XX001 when the message names no run; state NULL when the run is gone.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_claim_find(p_tenant text, p_queue text, p_msg_id bigint, p_payload bytea,
                                                 p_now timestamptz,
                                                 OUT run_id uuid, OUT state text, OUT msg_id bigint, OUT past_deadline boolean,
                                                 OUT workflow text, OUT version integer, OUT input jsonb,
                                                 OUT past_step_deadline boolean, OUT epoch bigint)
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_payload IS NULL OR octet_length(p_payload) <> 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'XX001',
            MESSAGE = format('workflow queue "%s" holds message %s that names no run', p_queue, p_msg_id);
    END IF;
    run_id := encode(p_payload, 'hex')::uuid;
    SELECT x.state, x.msg_id, coalesce(x.deadline <= p_now, false), x.workflow, x.version, x.input,
           coalesce(x.step_deadline <= p_now, false), x.epoch
      INTO state, msg_id, past_deadline, workflow, version, input, past_step_deadline, epoch
      FROM forgeyard.wf_runs x WHERE x.tenant_id = p_tenant AND x.run_id = workflow_claim_find.run_id FOR UPDATE;
END
$$;

-- record_timeout: a running run whose owner ran past a step's timeout has that attempt recorded as
-- failed (not when the step is not known: the last epoch's cursor was lost to a crash). Returns the
-- step, or NULL.
CREATE OR REPLACE FUNCTION forgeyard_pl.workflow_claim_timeout(p_tenant text, p_run uuid, p_state text, p_past boolean,
                                                    p_epoch bigint, p_now timestamptz)
    RETURNS text LANGUAGE plpgsql
    AS $$
DECLARE
    k record;
BEGIN
    IF p_state <> 'running' OR NOT p_past THEN
        RETURN NULL;
    END IF;
    -- The step cursor of the run's last epoch, read after the run's lock.
    SELECT c.position, c.step INTO k FROM forgeyard.wf_cursors c
     WHERE c.tenant_id = p_tenant AND c.run_id = p_run AND c.epoch = p_epoch;
    IF NOT FOUND OR k.step IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM forgeyard_pl.workflow_record_failed(p_tenant, p_run, k.position, k.step,
                                                'step "' || k.step || '" ran past its timeout', p_epoch, p_now);
    RETURN k.step;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard_pl FROM PUBLIC;
RESET check_function_bodies;

INSERT INTO forgeyard_pl.installs (version) VALUES ('0.8.0');
