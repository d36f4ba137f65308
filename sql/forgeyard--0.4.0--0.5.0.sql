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
        SELECT s.system_identifier, c.timeline_id::pg_catalog.int8, d.oid, d.datname::pg_catalog.text
          FROM pg_catalog.pg_control_system() s, pg_catalog.pg_control_checkpoint() c, pg_catalog.pg_database d
         WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
    END;
COMMENT ON FUNCTION forgeyard.current_store_identity() IS
  'The identity restore_status compares with forgeyard.store_identity: the cluster''s system identifier, the timeline of its last checkpoint, this database''s oid and name.';

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

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: hardening: argument checks and attack surface
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.5.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
