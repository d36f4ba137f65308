-- forgeyard 0.8.0 -> 0.9.0: storage_stats() names the oldest holder of the xmin horizon, of any
-- kind (docs/operations.md, "storage doctor": the xmin_horizon check). The first step of F17's
-- queue storage (docs/queue-storage-design.md). The C++ edition's new statement is in the library;
-- the PL/pgSQL edition's body is redefined with every body at the end of its step.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.9.0'" to load this file. \quit

COMMENT ON FUNCTION forgeyard.storage_stats(text) IS
  'Operations figures as (kind, tenant_id, name, state, value) rows: database and table sizes, row and dead-row estimates, queue depth by state with pressure (0 normal, 1 elevated, 2 saturated), live and expired unreaped leases, idempotency keys by state, audit events per tenant, workflow runs by definition and state, the oldest open transaction, replication slots holding xmin, the oldest holder of the xmin horizon of any kind (a transaction, a prepared transaction, a replication slot or a standby''s feedback: its age in transactions and how long it has held it), and security findings. NULL tenant: every tenant plus the server-wide rows (unbound roles only, FY040 otherwise). docs/sql-api.md, "Operations".';
