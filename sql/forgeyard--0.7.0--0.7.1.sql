-- forgeyard 0.7.0 -> 0.7.1: acks never wait for another consumer's release row (F19). Room given
-- back while a slot's release row is held by another open transaction goes to a row of its own in
-- queue_release_deltas; the views that count a queue's usage add those rows.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.7.1'" to load this file. \quit

-- Room given back while the slot's release row is held by another open transaction (or read
-- under a transaction snapshot): one row per slot and call, appended without a row lock, so an
-- ack never waits for another consumer (0.7.1). The slot's usage is its admitted count less its
-- release row and its deltas; whoever next locks the release row folds the deltas into it.
CREATE TABLE forgeyard.queue_release_deltas (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL,
    released_bytes    bigint  NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_release_deltas_slot ON forgeyard.queue_release_deltas (tenant_id, queue, slot);
COMMENT ON TABLE forgeyard.queue_release_deltas IS
  'Messages and bytes that left a capacity slot while its queue_releases row was held by another transaction: added to that row''s counts, and folded into it by the next ack that locks it.';
REVOKE ALL ON forgeyard.queue_release_deltas FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_release_deltas', '');

CREATE OR REPLACE VIEW forgeyard.queue_overview WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
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
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages - coalesce(d.messages, 0)) AS messages,
           sum(a.admitted_bytes - r.released_bytes - coalesce(d.bytes, 0)) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
      LEFT JOIN (SELECT tenant_id, queue, slot, sum(released_messages) AS messages, sum(released_bytes) AS bytes
                   FROM forgeyard.queue_release_deltas GROUP BY tenant_id, queue, slot) d USING (tenant_id, queue, slot)
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
