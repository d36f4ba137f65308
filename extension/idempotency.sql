-- The PL/pgSQL edition's idempotency keys: the twin of extension/idempotency.cpp, with the
-- decisions of core/core.cpp (decide_begin, check_attempt) (docs/sql-api.md#idempotency-keys).
-- One effect per (tenant, scope, key). Attempt numbers come from the one sequence
-- forgeyard.idempotency_attempts. Durations are microseconds (a day is 24 hours).

-- @helper
-- checkpoint / complete / abandon changed no row (their statement matches only an in-progress key
-- with the caller's attempt): say why, from the row locked FOR UPDATE. P0002 for an unknown key;
-- FY001 for another attempt (when one is given) or a completed key.
CREATE FUNCTION forgeyard_pl.lease_idem_unchanged(t_tenant text, t_scope text, t_key text, t_attempt bigint,
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
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.no_data_found@',
            MESSAGE = format('no idempotency key "%s" in scope "%s"', t_key, t_scope);
    END IF;
    IF t_attempt IS NOT NULL AND t_attempt <> stored_attempt THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
            MESSAGE = format('%s by attempt %s refused: attempt %s owns the key now', operation, t_attempt, stored_attempt),
            DETAIL = 'the lock expired and another caller took the work over';
    END IF;
    IF stored_completed THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.stale_fence@',
            MESSAGE = operation || ' refused: the key is already completed',
            DETAIL = 'begin again to get the stored response';
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@', MESSAGE = operation || ' changed no row';
END
$$;

-- maintenance::purge_idempotency_keys (idem_purge, and maintain's task): up to max_rows keys whose
-- retention ended, oldest first, never one an attempt still holds a live lock on; SKIP LOCKED so
-- that purges from several places never wait for each other. Returns how many were deleted.
CREATE FUNCTION forgeyard_pl.lease_idem_purge(now_at timestamptz, max_rows integer, p_tenant text)
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

-- @body fy_idem_begin
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
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'retain must not be shorter than lock_ttl';
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
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_mismatch@',
                MESSAGE = format('idempotency key "%s" was used with a different request', t_key),
                DETAIL = 'the request digest differs from the one stored with the key';
        ELSIF stored.completed THEN
            status := 'replay';
            attempt := stored.attempt;
            recovery_point := stored.recovery_point;
            response := stored.response;
            EXIT;
        ELSIF stored.locked_until > now_at THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.idempotency_in_progress@',
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

-- @body fy_idem_checkpoint
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

-- @body fy_idem_complete
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

-- @body fy_idem_abandon
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

-- @body fy_idem_status
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

-- @body fy_idem_purge
-- Keys deleted whose retention ended. Bounded; safe from several places at once.
DECLARE
    p_tenant text;
    now_at timestamptz;
BEGIN
    IF max_keys IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'max_keys must not be NULL';
    END IF;
    IF max_keys <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'max_keys must be positive';
    END IF;
    p_tenant := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(p_tenant);
    RETURN forgeyard_pl.lease_idem_purge(now_at, max_keys, p_tenant);
END
