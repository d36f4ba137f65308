-- Workflow schedules (docs/workflows.md#schedules), the twin of the extension's wf_schedules: a
-- cron spec in a time zone, or '@every <interval>', that starts a run of its definition at each
-- fire. Times are microseconds since 1970 (UTC); JSON is canonical text.
CREATE TABLE wf_schedules (
    tenant_id  TEXT    NOT NULL,
    schedule   TEXT    NOT NULL,
    workflow   TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    spec       TEXT    NOT NULL,
    timezone   TEXT    NOT NULL,
    catch_up   INTEGER NOT NULL CHECK (catch_up BETWEEN 0 AND 1000),
    input      TEXT    NOT NULL,
    next_fire  INTEGER NOT NULL,
    last_fire  INTEGER,
    fires      INTEGER NOT NULL DEFAULT 0,
    skipped    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, schedule)
) STRICT, WITHOUT ROWID;
CREATE INDEX wf_schedules_due ON wf_schedules (next_fire);
