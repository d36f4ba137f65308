-- Restore safety (docs/architecture.md#fencing-across-a-restore): where the store file was when it
-- was last recorded. store_id is random per store and travels with every copy; dev and ino name
-- the file (filled in when the store is first opened, and at each reconcile). A copy or a restored
-- file has another inode: the store is then reported as restored until it is reconciled.
CREATE TABLE store_identity (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    store_id    TEXT    NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('install', 'reconcile')),
    path        TEXT,
    dev         INTEGER,
    ino         INTEGER,
    observed_at INTEGER NOT NULL
) STRICT;
INSERT INTO store_identity (store_id, reason, observed_at)
    VALUES (lower(hex(randomblob(16))), 'install', CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
