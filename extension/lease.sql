-- The PL/pgSQL edition's leases: the twin of extension/lease.cpp, with the decisions of
-- core/lease.cpp (docs/sql-api.md#leases). Epochs are max(previous + 1, clock in microseconds);
-- "live" is not released, not reaped and expires_at > now; "expired" is expires_at <= now.
-- Durations count a day as 24 hours: now + ttl adds microseconds, never a calendar day.
-- The C++ edition reads and locks the lease row below SPI; here the same locks come from the
-- statements it replaces: FOR UPDATE in acquire (it blocks lease_fence's KEY SHARE and waits for
-- it), a no-key UPDATE that locks only a qualifying row in renew and release, FOR KEY SHARE in
-- fence, and FOR UPDATE SKIP LOCKED in reap.

-- @helper
-- lease_reap's statement (its result columns share the name tenant with an argument, which
-- PL/pgSQL refuses in the API function itself): grants that expired without release, each
-- reported once, SKIP LOCKED so that reapers never wait for each other.
CREATE FUNCTION forgeyard_pl.lease_reap(p_max integer, p_tenant text)
    RETURNS TABLE (r_tenant text, r_resource text, r_epoch bigint, r_holder text, r_expired_at timestamptz)
    LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz;
BEGIN
    IF p_max IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'max_leases must not be NULL';
    END IF;
    IF p_max <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'max_leases must be positive';
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
CREATE FUNCTION forgeyard_pl.lease_stale(p_epoch bigint, p_resource text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
        MESSAGE = pg_catalog.format('lease epoch %s is not the live grant of "%s"', p_epoch, p_resource),
        DETAIL = 'the lease expired, was released, or was taken over; stop work';
END
$$;

-- @body fy_lease_acquire
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
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@', MESSAGE = 'lease epoch space exhausted';
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

-- @body fy_lease_renew
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
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'epoch must not be NULL';
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

-- @body fy_lease_release
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
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'epoch must not be NULL';
    END IF;
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    UPDATE forgeyard.leases l SET released_at = now_at
     WHERE l.tenant_id OPERATOR(pg_catalog.=) t_tenant AND l.resource OPERATOR(pg_catalog.=) t_resource
       AND l.epoch OPERATOR(pg_catalog.=) t_epoch
       AND l.released_at IS NULL AND l.reaped_at IS NULL AND l.expires_at OPERATOR(pg_catalog.>) now_at;
    RETURN FOUND;
END

-- @body fy_lease_fence
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
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'epoch must not be NULL';
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

-- @body fy_lease_get
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

-- @body fy_lease_reap sql
SELECT * FROM forgeyard_pl.lease_reap($1, $2);
