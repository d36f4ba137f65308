-- Flow control (docs/operations.md, "Flow control"), per-key concurrency limits: the twin of the
-- extension's max_in_flight_per_key: a queue's limit, and per key of such a queue its heads (the
-- claimable messages, ready or in flight) beside its pending count; the waiting messages of a key
-- in the order they are promoted. (A partition-ordered queue's keys keep heads at 1.)
ALTER TABLE queues ADD COLUMN max_in_flight_per_key INTEGER CHECK (max_in_flight_per_key BETWEEN 1 AND 1000000);
ALTER TABLE queue_partitions ADD COLUMN heads INTEGER NOT NULL DEFAULT 1 CHECK (heads >= 0);
CREATE INDEX messages_key_waiting ON messages (tenant_id, queue, fairness_key, msg_id)
    WHERE state = 'pending' AND NOT is_head AND fairness_key IS NOT NULL;

-- Fair queues (the twin of the extension's fairness): a message's virtual pass, the claim's order
-- within a class of a fair queue, and per key of such a queue its weight and last pass.
ALTER TABLE queues ADD COLUMN fairness INTEGER NOT NULL DEFAULT 0 CHECK (fairness IN (0, 1));
ALTER TABLE messages ADD COLUMN pass INTEGER;
CREATE INDEX messages_fair ON messages (tenant_id, queue, priority, pass, msg_id)
    WHERE state = 'pending' AND is_head AND pass IS NOT NULL;
CREATE TABLE queue_fair_keys (
    tenant_id    TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    fairness_key TEXT    NOT NULL,
    weight       INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    last_pass    INTEGER,
    PRIMARY KEY (tenant_id, queue, fairness_key)
) STRICT, WITHOUT ROWID;

-- Priority aging (the twin of the extension's aging_usecs): 0 is none.
ALTER TABLE queues ADD COLUMN aging_usecs INTEGER NOT NULL DEFAULT 0 CHECK (aging_usecs BETWEEN 0 AND 2592000000000);
