-- Flow control, per-key concurrency limits (docs/operations.md, "Flow control"), the twin of the
-- extension's max_in_flight_per_key: a queue's limit, and per key of such a queue its heads (the
-- claimable messages, ready or in flight) beside its pending count; the waiting messages of a key
-- in the order they are promoted. (A partition-ordered queue's keys keep heads at 1.)
ALTER TABLE queues ADD COLUMN max_in_flight_per_key INTEGER CHECK (max_in_flight_per_key BETWEEN 1 AND 1000000);
ALTER TABLE queue_partitions ADD COLUMN heads INTEGER NOT NULL DEFAULT 1 CHECK (heads >= 0);
CREATE INDEX messages_key_waiting ON messages (tenant_id, queue, fairness_key, msg_id)
    WHERE state = 'pending' AND NOT is_head AND fairness_key IS NOT NULL;
