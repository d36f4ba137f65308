-- Flow control, first part (docs/operations.md, "Flow control"), the twin of the extension's
-- 0.7.0 section: the retry budget's options, the admission limit as one GCRA bucket per queue
-- (admission_tat, microseconds since 1970; NULL while full), every message a queue ever admitted
-- (the retry budget's first deliveries), and each queue's retry window.
ALTER TABLE queues ADD COLUMN retry_budget REAL CHECK (retry_budget BETWEEN 0 AND 1);
ALTER TABLE queues ADD COLUMN retry_budget_min INTEGER NOT NULL DEFAULT 10 CHECK (retry_budget_min >= 0);
ALTER TABLE queues ADD COLUMN retry_budget_window_usecs INTEGER NOT NULL DEFAULT 60000000
    CHECK (retry_budget_window_usecs BETWEEN 1 AND 2592000000000);
ALTER TABLE queues ADD COLUMN admission_rate INTEGER CHECK (admission_rate BETWEEN 1 AND 1000000000);
ALTER TABLE queues ADD COLUMN admission_per_usecs INTEGER CHECK (admission_per_usecs BETWEEN 1 AND 2592000000000);
ALTER TABLE queues ADD COLUMN admission_tat INTEGER;
ALTER TABLE queues ADD COLUMN admitted_total INTEGER NOT NULL DEFAULT 0;
UPDATE queues SET admitted_total = used_messages;

CREATE TABLE queue_retry_windows (
    tenant_id     TEXT    NOT NULL,
    queue         TEXT    NOT NULL,
    window_start  INTEGER NOT NULL,
    admitted_base INTEGER NOT NULL,
    prev_first    INTEGER NOT NULL CHECK (prev_first >= 0),
    retries       INTEGER NOT NULL CHECK (retries >= 0),
    delayed       INTEGER NOT NULL CHECK (delayed >= 0),
    PRIMARY KEY (tenant_id, queue)
) STRICT, WITHOUT ROWID;

-- Resources (the downstreams messages hit): messages carry a fairness key and a resource; what
-- each resource allows, and its shared state (the rate limit's bucket, deliveries in flight, the
-- circuit breaker), the twins of the extension's flow_resources and flow_resource_state.
ALTER TABLE messages ADD COLUMN fairness_key TEXT;
ALTER TABLE messages ADD COLUMN resource TEXT;

CREATE TABLE flow_resources (
    tenant_id       TEXT    NOT NULL,
    resource        TEXT    NOT NULL,
    rate            INTEGER,
    per_usecs       INTEGER,
    burst           INTEGER,
    max_in_flight   INTEGER,
    failure_rate    REAL,
    minimum_calls   INTEGER,
    window_calls    INTEGER,
    open_for_usecs  INTEGER,
    half_open_calls INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, resource)
) STRICT, WITHOUT ROWID;

CREATE TABLE flow_resource_state (
    tenant_id           TEXT    NOT NULL,
    resource            TEXT    NOT NULL,
    tat                 INTEGER,
    in_flight           INTEGER NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    breaker             TEXT    NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half_open')),
    outcomes            TEXT    NOT NULL DEFAULT '',
    changed_at          INTEGER NOT NULL,
    open_until          INTEGER,
    half_open_in_flight INTEGER NOT NULL DEFAULT 0,
    half_open_successes INTEGER NOT NULL DEFAULT 0,
    transitions         INTEGER NOT NULL DEFAULT 0,
    refused             INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, resource)
) STRICT, WITHOUT ROWID;
