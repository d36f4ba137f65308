-- Idempotency keys: one row per (tenant, scope, key). Times are microseconds since 1970 (UTC).
CREATE TABLE idempotency_keys (
    tenant_id      TEXT    NOT NULL,
    scope          TEXT    NOT NULL,
    key            TEXT    NOT NULL,
    request_digest BLOB    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('in_progress', 'completed')),
    attempt        INTEGER NOT NULL CHECK (attempt > 0),
    recovery_point TEXT,
    response       BLOB,
    lock_usecs     INTEGER NOT NULL CHECK (lock_usecs > 0),
    retain_usecs   INTEGER NOT NULL CHECK (retain_usecs > 0),
    locked_until   INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    completed_at   INTEGER,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Attempt numbers: one counter for all keys, so an attempt number is never handed out twice.
CREATE TABLE idempotency_attempts (last INTEGER NOT NULL) STRICT;
INSERT INTO idempotency_attempts (last) VALUES (0);
