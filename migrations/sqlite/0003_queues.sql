-- Durable queues and the consumer inbox. Times are microseconds since 1970 (UTC).
-- One writer at a time (BEGIN IMMEDIATE), so one usage row per queue bounds it exactly.
CREATE TABLE queues (
    tenant_id              TEXT    NOT NULL,
    queue                  TEXT    NOT NULL,
    max_messages           INTEGER NOT NULL,
    max_bytes              INTEGER NOT NULL,
    max_payload_bytes      INTEGER NOT NULL,
    visibility_usecs       INTEGER NOT NULL,
    max_attempts           INTEGER NOT NULL,
    backoff_base_usecs     INTEGER NOT NULL,
    backoff_max_usecs      INTEGER NOT NULL,
    ordering               TEXT    NOT NULL CHECK (ordering IN ('none', 'partition')),
    dead_letter_payload    TEXT    NOT NULL CHECK (dead_letter_payload IN ('drop', 'keep')),
    retain_acked_usecs     INTEGER NOT NULL,
    max_dead               INTEGER NOT NULL,
    dead_retention_usecs   INTEGER NOT NULL,
    dedup_window_usecs     INTEGER NOT NULL,
    admit_emergency        INTEGER NOT NULL,
    admit_security_control INTEGER NOT NULL,
    admit_realtime         INTEGER NOT NULL,
    admit_interactive      INTEGER NOT NULL,
    admit_background       INTEGER NOT NULL,
    admit_bulk             INTEGER NOT NULL,
    notify                 INTEGER NOT NULL,
    used_messages          INTEGER NOT NULL DEFAULT 0,
    used_bytes             INTEGER NOT NULL DEFAULT 0,
    created_at             INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, queue)
) STRICT, WITHOUT ROWID;

CREATE TABLE messages (
    msg_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id     TEXT    NOT NULL,
    queue         TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('pending', 'acked', 'dead')),
    priority      INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 5),
    partition_key TEXT,
    is_head       INTEGER NOT NULL,
    event_id      TEXT,
    payload       BLOB,
    bytes         INTEGER NOT NULL,
    enqueued_at   INTEGER NOT NULL,
    visible_at    INTEGER NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    claim_token   INTEGER,
    claimed_by    TEXT,
    last_error    TEXT,
    error_class   TEXT,
    finished_at   INTEGER
) STRICT;
CREATE INDEX messages_claim ON messages (tenant_id, queue, priority, visible_at, msg_id) WHERE state = 'pending' AND is_head;
CREATE INDEX messages_partition ON messages (tenant_id, queue, partition_key, msg_id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;
CREATE INDEX messages_finished ON messages (tenant_id, queue, msg_id) WHERE state <> 'pending';

CREATE TABLE queue_events (
    tenant_id      TEXT    NOT NULL,
    queue          TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    msg_id         INTEGER NOT NULL,
    payload_digest TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, queue, event_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE queue_partitions (
    tenant_id     TEXT    NOT NULL,
    queue         TEXT    NOT NULL,
    partition_key TEXT    NOT NULL,
    pending       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, queue, partition_key)
) STRICT, WITHOUT ROWID;

CREATE TABLE inbox (
    tenant_id   TEXT    NOT NULL,
    consumer    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    accepted_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, consumer, event_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE claim_tokens (last INTEGER NOT NULL) STRICT;
INSERT INTO claim_tokens (last) VALUES (0);
