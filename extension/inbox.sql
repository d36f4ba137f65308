-- The PL/pgSQL edition of extension/inbox.cpp: the consumer inbox, an exactly-once effect on top of
-- at-least-once delivery (inbox_accept), and its bounded purge (inbox_purge; maintain() runs it too).

-- @helper
-- maintenance::purge_inbox: up to max_rows entries accepted before `before` (tenant NULL: all
-- tenants), oldest first, each locked SKIP LOCKED (another purger takes the others). How many.
CREATE FUNCTION forgeyard_pl.queue_purge_inbox(before timestamptz, max_rows integer, tenant text)
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

-- @body fy_inbox_accept
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

-- @body fy_inbox_purge
DECLARE
    older bigint;
    v_now timestamptz;
BEGIN
    older := forgeyard_pl.duration_arg('older_than', older_than, 31536000000000);
    PERFORM forgeyard_pl.not_null('max_rows', max_rows IS NOT NULL);
    IF max_rows <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'max_rows must be positive';
    END IF;
    PERFORM forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    v_now := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(tenant);
    RETURN forgeyard_pl.queue_purge_inbox(v_now - forgeyard_pl.queue_usecs_interval(older), max_rows, tenant);
END
