-- Server-side benchmark schema (bench/pgbench.sh loads it into a throwaway database).
-- The baseline is the queue a user would write by hand: one indexed table, a SKIP LOCKED claim
-- that moves the visibility, a DELETE for the ack. Fixed here so it cannot be tuned to lose.
CREATE EXTENSION IF NOT EXISTS forgeyard;
DROP TABLE IF EXISTS bench_q;
CREATE TABLE bench_q (
    msg_id      bigserial PRIMARY KEY,
    read_ct     integer     NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    vt          timestamptz NOT NULL DEFAULT now(),
    payload     bytea
);
CREATE INDEX bench_q_vt ON bench_q (vt, msg_id);
