-- forgeyard 0.4.0 -> 0.5.0: faster hot paths, application schema migrations and health, restore
-- safety, topics, hardening. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.5.0'" to load this file. \quit

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
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, the oldest open transaction, replication slots holding xmin, and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';

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
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages) AS messages,
           sum(a.admitted_bytes - r.released_bytes) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
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
