-- Durable workflows (docs/workflows.md), the twin of the extension's "workflows" section: runs and
-- their journal. A run's messages live in the queue "_wf.<workflow>@<version>" with the run id's
-- 16 bytes as payload. Times are microseconds since 1970 (UTC); JSON is canonical text.
CREATE TABLE wf_runs (
    tenant_id      TEXT    NOT NULL,
    run_id         TEXT    NOT NULL,
    run_key        TEXT    NOT NULL,
    workflow       TEXT    NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    input          TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'sleeping', 'waiting', 'compensating',
                                                     'completed', 'failed', 'cancelled', 'timed_out',
                                                     'compensation_failed', 'parked')),
    priority       INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 5),
    msg_id         INTEGER,
    epoch          INTEGER NOT NULL DEFAULT 0,
    owner          TEXT,
    step_cursor    INTEGER NOT NULL DEFAULT 0,
    cursor_step    TEXT,
    step_deadline  INTEGER,
    result         TEXT,
    error          TEXT,
    deadline       INTEGER,
    parent_run_id  TEXT,
    waiting_signal TEXT,
    wait_until     INTEGER,
    wait_position  INTEGER,
    compensate_to  TEXT    CHECK (compensate_to IN ('failed', 'cancelled', 'timed_out')),
    retention_usecs INTEGER NOT NULL CHECK (retention_usecs > 0),
    purge_at       INTEGER,
    takeovers      INTEGER NOT NULL DEFAULT 0,
    taken_over_at  INTEGER,
    previous_owner TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    finished_at    INTEGER,
    PRIMARY KEY (tenant_id, run_id),
    UNIQUE (tenant_id, run_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX wf_runs_state ON wf_runs (tenant_id, state, updated_at);
CREATE INDEX wf_runs_purge ON wf_runs (purge_at) WHERE purge_at IS NOT NULL;

CREATE TABLE wf_journal (
    tenant_id    TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    position     INTEGER NOT NULL CHECK (position >= 1),
    step         TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('done', 'failed')),
    result       TEXT,
    error        TEXT,
    compensation TEXT,
    compensation_status   TEXT CHECK (compensation_status IN ('done', 'failed')),
    compensation_error    TEXT,
    compensation_attempts INTEGER NOT NULL DEFAULT 0,
    compensated_at        INTEGER,
    wake_at      INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 1,
    epoch        INTEGER NOT NULL,
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id, position)
) STRICT, WITHOUT ROWID;

-- Signals sent to a run, delivered once (idempotent by signal_id), consumed by the wait at a
-- journal position; one sent before the wait waits here for it.
CREATE TABLE wf_signals (
    tenant_id         TEXT    NOT NULL,
    run_id            TEXT    NOT NULL,
    signal_id         TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    payload           TEXT    NOT NULL,
    sent_at           INTEGER NOT NULL,
    consumed_at       INTEGER,
    consumed_position INTEGER,
    PRIMARY KEY (tenant_id, run_id, signal_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX wf_signals_unconsumed ON wf_signals (tenant_id, run_id, name, sent_at) WHERE consumed_at IS NULL;
