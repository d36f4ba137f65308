-- Leases with fencing epochs. Times are microseconds since 1970 (UTC).
-- Release keeps the row so that an epoch is never handed out twice.
CREATE TABLE leases (
    tenant_id   TEXT    NOT NULL,
    resource    TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    epoch       INTEGER NOT NULL CHECK (epoch > 0),
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    released_at INTEGER,
    reaped_at   INTEGER,
    PRIMARY KEY (tenant_id, resource)
) STRICT, WITHOUT ROWID;

CREATE INDEX leases_unreaped ON leases (expires_at) WHERE released_at IS NULL AND reaped_at IS NULL;
