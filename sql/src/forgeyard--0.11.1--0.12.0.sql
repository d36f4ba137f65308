-- forgeyard 0.11.1 -> 0.12.0: admission generations, a producer that does not walk the versions a
-- held snapshot keeps of its capacity slot's row (F17; docs/architecture.md, "Capacity slots").
-- Every slot starts without a generation row (admit_gen NULL): its first producer after the update
-- makes one. A session that loaded the 0.11.1 library before the update still adds to the slot
-- row, which counts the same, but reads the slot row alone: until it reconnects it can admit past
-- the bound by what the new library's producers added to the slot's generation row
-- (docs/operations.md, "Upgrading": reconnect the producers).
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.12.0'" to load this file. \quit

ALTER TABLE forgeyard.queue_slots ADD COLUMN admit_gen bigint;
COMMENT ON TABLE forgeyard.queue_slots IS
  'Messages and bytes admitted into each capacity slot of a queue (producers'' side of the bound), up to its last fold: with the slot''s queue_admit_deltas row of generation admit_gen.';
COMMENT ON COLUMN forgeyard.queue_slots.admit_gen IS
  'The admission generation (forgeyard.now() in seconds since 1970) whose queue_admit_deltas row takes the slot''s producers now; NULL: none yet. Set, with that row made, by the first producer of a later generation, which folds the older row into this one.';

-- Admission generations (0.12.0, F17): a producer adds what it admits to its slot's row of the
-- current generation (one second), updated in place under the slot's lock, so the slot row keeps
-- one version per generation instead of one per message, and a held snapshot makes a producer
-- walk at most one generation's versions. The first producer of a generation in a slot folds the
-- older row into the slot row, deletes it, and makes the new one: a row is made only with an
-- update of the slot row, so a producer under a transaction snapshot that saw neither change gets
-- 40001 from its lock of one or the other (docs/architecture.md, "Capacity slots").
CREATE TABLE forgeyard.queue_admit_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    gen               bigint  NOT NULL,
    admitted_messages bigint  NOT NULL DEFAULT 0,
    admitted_bytes    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, queue, slot, gen)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_admit_deltas IS
  'Messages and bytes admitted into a capacity slot in its current admission generation (queue_slots.admit_gen): one row per slot, folded into the slot''s queue_slots row by the first producer of the next generation.';
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_admit_deltas', '');
REVOKE ALL ON forgeyard.queue_admit_deltas FROM PUBLIC;

-- The views that sum the slots' usage count the generation rows too.
CREATE OR REPLACE VIEW forgeyard.queue_overview WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
)
SELECT q.tenant_id, q.queue, q.ordering, u.messages AS admitted_messages, q.max_messages, u.bytes AS admitted_bytes,
       q.max_bytes,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure
  FROM forgeyard.queues q JOIN used u USING (tenant_id, queue)
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR q.tenant_id IN (SELECT scope.tenant_id FROM scope);

CREATE OR REPLACE VIEW forgeyard.subscription_lag WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue,
           sum(a.admitted_messages + coalesce(g.admitted_messages, 0) - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes + coalesce(g.admitted_bytes, 0) - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
      LEFT JOIN forgeyard.queue_admit_deltas g
        ON g.tenant_id = a.tenant_id AND g.queue = a.queue AND g.slot = a.slot AND g.gen = a.admit_gen
     GROUP BY a.tenant_id, a.queue
), c AS MATERIALIZED (
    SELECT forgeyard.now() AS now
)
SELECT s.tenant_id, s.topic, s.subscription,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND (m.claim_token IS NULL OR m.visible_at <= c.now)) AS backlog,
       count(m.msg_id) FILTER (WHERE m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > c.now) AS in_flight,
       c.now - min(m.enqueued_at) FILTER (WHERE m.state = 'pending') AS oldest_unacked_age,
       count(m.msg_id) FILTER (WHERE m.state = 'dead') AS dead,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure,
       max(m.finished_at) FILTER (WHERE m.state = 'acked') AS last_ack_at
  FROM forgeyard.subscriptions s
  JOIN forgeyard.queues q ON q.tenant_id = s.tenant_id AND q.queue = s.subscription
  JOIN used u ON u.tenant_id = s.tenant_id AND u.queue = s.subscription
  LEFT JOIN forgeyard.messages m ON m.tenant_id = s.tenant_id AND m.queue = s.subscription
 CROSS JOIN c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR s.tenant_id IN (SELECT scope.tenant_id FROM scope)
 GROUP BY s.tenant_id, s.topic, s.subscription, q.max_messages, q.max_bytes, u.messages, u.bytes, c.now;
