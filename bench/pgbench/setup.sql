-- Server-side benchmark schema (bench/pgbench.sh loads it into a throwaway database).
SET client_min_messages = warning;
-- The baseline is the queue a user would write by hand: one indexed table, a SKIP LOCKED claim
-- that moves the visibility, a DELETE for the ack. Fixed here so it cannot be tuned to lose.
-- (a database of the PL/pgSQL edition has it installed already, by bench/pgbench.sh)
SELECT 'CREATE EXTENSION forgeyard' WHERE pg_catalog.to_regnamespace('forgeyard') IS NULL \gexec
DROP TABLE IF EXISTS bench_q;
CREATE TABLE bench_q (
    msg_id      bigserial PRIMARY KEY,
    read_ct     integer     NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    vt          timestamptz NOT NULL DEFAULT now(),
    payload     bytea
);
CREATE INDEX bench_q_vt ON bench_q (vt, msg_id);

-- The other semantics, as the client-side benchmarks' baselines write them (bench/*_bench.cpp).
-- Leases: one row per resource, an epoch bumped on take-over, renew and release by epoch.
DROP TABLE IF EXISTS bench_leases;
CREATE TABLE bench_leases (
    tenant_id  text        NOT NULL,
    resource   text        NOT NULL,
    owner      text        NOT NULL,
    epoch      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    released   boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, resource)
) WITH (fillfactor = 70);
-- Compare-and-set: a row per client, the same table twice (one versioned by forgeyard).
DROP TABLE IF EXISTS bench_cas, bench_cas_plain;
CREATE TABLE bench_cas (
    tenant_id      text,
    id             int,
    value          bigint,
    entity_version bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, id)
);
CREATE TABLE bench_cas_plain (LIKE bench_cas INCLUDING ALL);
INSERT INTO bench_cas (tenant_id, id, value) SELECT 'bench', g, 0 FROM generate_series(0, 63) g;
INSERT INTO bench_cas_plain SELECT * FROM bench_cas;
SELECT forgeyard.enable_versioning('bench_cas');
-- Idempotency keys: insert-if-absent, then store the response.
DROP TABLE IF EXISTS bench_idem;
CREATE TABLE bench_idem (
    tenant_id      text,
    scope          text,
    key            text,
    request_digest bytea,
    status         text,
    response       bytea,
    PRIMARY KEY (tenant_id, scope, key)
);
-- Audit: a plain append-only table (no chain: the baseline does not hash, so the ratio is the
-- chain's whole price).
DROP TABLE IF EXISTS bench_audit;
CREATE TABLE bench_audit (
    tenant_id      text        NOT NULL,
    id             bigserial,
    event_id       uuid        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    actor          text        NOT NULL,
    action         text        NOT NULL,
    resource       text        NOT NULL,
    details        jsonb,
    payload_digest bytea,
    payload_ref    text,
    prev_hash      bytea       NOT NULL,
    hash           bytea       NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, event_id)
);

-- Workflow steps: the baseline is DBOS's mechanism, a step's output checked, then recorded with
-- INSERT ... ON CONFLICT DO NOTHING. Each pgbench client owns one forgeyard run (bench_wf_owner,
-- filled by bench/pgbench.sh before each run) and records its steps one after the other.
DROP TABLE IF EXISTS bench_steps, bench_wf_owner;
CREATE TABLE bench_steps (
    run_id   uuid    NOT NULL,
    position bigint  NOT NULL,
    step     text    NOT NULL,
    output   jsonb,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE bench_wf_owner (client integer PRIMARY KEY, run_id uuid NOT NULL, epoch bigint NOT NULL);

-- What the benchmark's backends wait on (bench/pgbench.sh with FY_PGBENCH_WAITS=1): every 10 ms
-- for `seconds`, the wait event of each active pgbench backend ('CPU' when it waits on nothing).
CREATE OR REPLACE FUNCTION bench_waits(seconds float8) RETURNS TABLE (wait text, samples bigint)
LANGUAGE plpgsql AS $$
DECLARE
    stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS bench_wait_samples (wait text);
    TRUNCATE bench_wait_samples;
    WHILE clock_timestamp() < stop LOOP
        PERFORM pg_stat_clear_snapshot();
        INSERT INTO bench_wait_samples
        SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') FROM pg_stat_activity a
         WHERE a.application_name = 'pgbench' AND a.state = 'active';
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN QUERY SELECT s.wait, count(*) FROM bench_wait_samples s GROUP BY s.wait ORDER BY 2 DESC;
END $$;
