-- The application's own schema migrations, its daemons and its backfills (docs/operations.md,
-- "Migrating your application's schema"). Times are microseconds since 1970 (UTC).
CREATE TABLE app_migrations (
    application   TEXT    NOT NULL,
    migration_id  INTEGER NOT NULL CHECK (migration_id > 0),
    name          TEXT    NOT NULL,
    sha256        TEXT    NOT NULL CHECK (length(sha256) = 64),
    phase         TEXT    NOT NULL CHECK (phase IN ('expand', 'contract')),
    transactional INTEGER NOT NULL CHECK (transactional IN (0, 1)),
    applied_at    INTEGER NOT NULL,
    applied_by    TEXT    NOT NULL,
    app_version   TEXT    NOT NULL,
    duration_ms   INTEGER NOT NULL CHECK (duration_ms >= 0),
    PRIMARY KEY (application, migration_id)
) WITHOUT ROWID;
-- A record is never rewritten.
CREATE TRIGGER app_migrations_no_update BEFORE UPDATE ON app_migrations
BEGIN
    SELECT RAISE(ABORT, 'forgeyard:FY030:forgeyard.app_migrations is append-only: UPDATE is not allowed');
END;
CREATE TRIGGER app_migrations_no_delete BEFORE DELETE ON app_migrations
BEGIN
    SELECT RAISE(ABORT, 'forgeyard:FY030:forgeyard.app_migrations is append-only: DELETE is not allowed');
END;

-- A daemon is live while expires_at > now; each health check renews it.
CREATE TABLE app_daemons (
    application   TEXT    NOT NULL,
    instance      TEXT    NOT NULL,
    min_schema    INTEGER NOT NULL CHECK (min_schema >= 0),
    max_schema    INTEGER NOT NULL CHECK (max_schema >= 0),
    registered_at INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (application, instance)
) WITHOUT ROWID;

CREATE TABLE app_backfills (
    application  TEXT    NOT NULL,
    migration_id INTEGER NOT NULL CHECK (migration_id > 0),
    name         TEXT    NOT NULL,
    cursor       TEXT,
    rows_done    INTEGER NOT NULL CHECK (rows_done >= 0),
    errors       INTEGER NOT NULL CHECK (errors >= 0),
    done         INTEGER NOT NULL CHECK (done IN (0, 1)),
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (application, migration_id, name)
) WITHOUT ROWID;
