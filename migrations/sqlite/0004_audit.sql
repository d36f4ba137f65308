-- The append-only audit chain: per tenant a gap-free seq from 1 and hash = SHA-256(canonical(event)
-- || prev_hash) (docs/architecture.md#the-audit-chain). Times are microseconds since 1970 (UTC);
-- details is stored in canonical form.
CREATE TABLE audit_events (
    tenant_id      TEXT    NOT NULL,
    seq            INTEGER NOT NULL CHECK (seq > 0),
    event_id       BLOB    NOT NULL CHECK (length(event_id) = 16),
    occurred_at    INTEGER NOT NULL,
    recorded_at    INTEGER NOT NULL,
    actor          TEXT    NOT NULL,
    action         TEXT    NOT NULL,
    resource       TEXT    NOT NULL,
    details        TEXT,
    payload_digest BLOB,
    payload_ref    TEXT,
    prev_hash      BLOB    NOT NULL,
    hash           BLOB    NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    UNIQUE (tenant_id, event_id)
) STRICT, WITHOUT ROWID;

-- The last seq and hash of each tenant's chain.
CREATE TABLE audit_heads (
    tenant_id TEXT    NOT NULL PRIMARY KEY,
    seq       INTEGER NOT NULL CHECK (seq >= 0),
    hash      BLOB    NOT NULL
) STRICT, WITHOUT ROWID;

-- Append-only (SQLite has no TRUNCATE: a DELETE without WHERE fires the row trigger too). An
-- INSERT onto an existing event is refused as well: INSERT OR REPLACE deletes the old row
-- without firing the DELETE trigger (recursive_triggers is off).
CREATE TRIGGER audit_events_no_replace BEFORE INSERT ON audit_events
-- (two lookups, one per key index: an OR of both would scan the tenant's events)
WHEN EXISTS (SELECT 1 FROM audit_events e WHERE e.tenant_id = NEW.tenant_id AND e.seq = NEW.seq)
  OR EXISTS (SELECT 1 FROM audit_events e WHERE e.tenant_id = NEW.tenant_id AND e.event_id = NEW.event_id)
BEGIN
    SELECT RAISE(ABORT, 'forgeyard:FY030:forgeyard.audit_events is append-only: an existing event cannot be replaced');
END;
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'forgeyard:FY030:forgeyard.audit_events is append-only: UPDATE is not allowed');
END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'forgeyard:FY030:forgeyard.audit_events is append-only: DELETE is not allowed');
END;
