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
    IF value IS NULL THEN
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

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.5.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
