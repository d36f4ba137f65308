-- forgeyard 0.7.0 -> 0.7.1: acks never wait for another consumer's release row (F19). Room given
-- back while a slot's release row is held by another open transaction goes to a row of its own in
-- queue_release_deltas, and the outcomes for a resource part held by another open transaction to
-- flow_outcome_deltas; the views that count a queue's usage and a resource's deliveries in flight
-- add those rows.
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

-- The outcomes of deliveries that finished while their part of the resource's state was held by
-- another open transaction (or read under a transaction snapshot): one row per part and call,
-- appended without a row lock, so an ack or nack never waits for another consumer (0.7.1). The
-- next claim, ack or nack that locks the part applies them (in_flight, the breaker) and deletes them.
CREATE TABLE forgeyard.flow_outcome_deltas (
    tenant_id   text        NOT NULL,
    resource    text        NOT NULL,
    part        smallint    NOT NULL,
    successes   bigint      NOT NULL,
    failures    bigint      NOT NULL,
    neutrals    bigint      NOT NULL,
    recorded_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX flow_outcome_deltas_part ON forgeyard.flow_outcome_deltas (tenant_id, resource, part);
COMMENT ON TABLE forgeyard.flow_outcome_deltas IS
  'Outcomes (successes, failures, neutrals) of deliveries that finished while their flow_resource_state part was held by another transaction: each ended one delivery in flight; applied to the part by the next claim, ack or nack that locks it.';
REVOKE ALL ON forgeyard.flow_outcome_deltas FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('forgeyard.flow_outcome_deltas', '');

CREATE OR REPLACE VIEW forgeyard.flow_state WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), clock AS (
    SELECT (extract(epoch FROM forgeyard.now()) * 1000000)::bigint AS now_us
), buckets AS (
    -- GCRA: a bucket of `burst` whose arrival time is `tat` holds
    -- floor((now + tolerance - max(tat, now)) / emission) + 1 tokens, at most `burst`.
    SELECT a.tenant_id, a.queue, NULL::text AS resource, a.tokens AS burst, a.per_usecs, a.tokens, a.tat
      FROM forgeyard.queue_admission a
    UNION ALL
    -- a resource's part i keeps rate / parts and burst / parts, the remainders to the first parts
    SELECT r.tenant_id, NULL, r.resource,
           r.burst / r.parts + CASE WHEN coalesce(s.part, 0) < r.burst % r.parts THEN 1 ELSE 0 END,
           r.per_usecs,
           r.rate / r.parts + CASE WHEN coalesce(s.part, 0) < r.rate % r.parts THEN 1 ELSE 0 END, s.tat
      FROM forgeyard.flow_resources r LEFT JOIN forgeyard.flow_resource_state s USING (tenant_id, resource)
     WHERE r.rate IS NOT NULL
), available AS (
    SELECT b.tenant_id, b.queue, b.resource,
           sum(CASE WHEN b.tat IS NULL THEN b.burst
                    ELSE greatest(0, least(b.burst,
                         (c.now_us + e.emission * (b.burst - 1)
                          - greatest((extract(epoch FROM b.tat) * 1000000)::bigint, c.now_us)) / e.emission + 1))
               END)::bigint AS tokens
      FROM buckets b CROSS JOIN clock c
     CROSS JOIN LATERAL (SELECT (b.per_usecs + b.tokens - 1) / b.tokens AS emission) e
     GROUP BY b.tenant_id, b.queue, b.resource
), rows AS (
    SELECT q.tenant_id, q.queue, 'admission_limit'::text AS kind, NULL::text AS subject,
           q.admission_rate || ' per ' || (q.admission_per_usecs * '1 microsecond'::interval)::text AS "limit",
           a.tokens AS available, NULL::bigint AS in_flight, NULL::bigint AS counted, NULL::bigint AS delayed,
           NULL::bigint AS refused, NULL::text AS state, NULL::timestamptz AS since
      FROM forgeyard.queues q
      LEFT JOIN available a ON a.tenant_id = q.tenant_id AND a.queue = q.queue
     WHERE q.admission_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'retry_budget', NULL,
           q.retry_budget || ' of admitted, at least ' || q.retry_budget_min || ' per '
               || (q.retry_budget_window_usecs * '1 microsecond'::interval)::text,
           NULL, NULL, coalesce(w.retries, 0), coalesce(w.delayed, 0), NULL, NULL, w.window_start
      FROM forgeyard.queues q LEFT JOIN forgeyard.queue_retry_windows w USING (tenant_id, queue)
     WHERE q.retry_budget IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'resource_limit', r.resource,
           concat_ws(', ', r.rate || ' per ' || (r.per_usecs * '1 microsecond'::interval)::text || ' burst ' || r.burst,
                     'max_in_flight ' || r.max_in_flight),
           a.tokens, greatest(0, coalesce(s.in_flight, 0) - coalesce(d.finished, 0)), NULL, NULL, coalesce(s.refused, 0),
           NULL, NULL
      FROM forgeyard.flow_resources r
      LEFT JOIN (SELECT tenant_id, resource, sum(in_flight)::bigint AS in_flight, sum(refused)::bigint AS refused
                   FROM forgeyard.flow_resource_state GROUP BY tenant_id, resource) s USING (tenant_id, resource)
      LEFT JOIN (SELECT tenant_id, resource, sum(successes + failures + neutrals)::bigint AS finished
                   FROM forgeyard.flow_outcome_deltas GROUP BY tenant_id, resource) d USING (tenant_id, resource)
      LEFT JOIN available a ON a.tenant_id = r.tenant_id AND a.resource = r.resource
     WHERE r.rate IS NOT NULL OR r.max_in_flight IS NOT NULL
    UNION ALL
    SELECT r.tenant_id, NULL, 'breaker', r.resource,
           'opens at ' || r.failure_rate || ' of the last ' || r.window_calls || ' (at least ' || r.minimum_calls
               || '), open for ' || (r.open_for_usecs * '1 microsecond'::interval)::text || ', '
               || r.half_open_calls || ' half-open',
           NULL, greatest(0, coalesce(s.in_flight, 0) - coalesce(d.finished, 0)),
           length(replace(coalesce(s.outcomes, ''), '0', '')),
           length(coalesce(s.outcomes, '')), coalesce(s.refused, 0),
           CASE WHEN s.breaker = 'open' AND s.open_until <= forgeyard.now() THEN 'half_open'
                ELSE coalesce(s.breaker, 'closed') END,
           s.changed_at
      FROM forgeyard.flow_resources r
      LEFT JOIN forgeyard.flow_resource_state s
        ON s.tenant_id = r.tenant_id AND s.resource = r.resource AND s.part = 0  -- a breaker's resource has one part
      LEFT JOIN (SELECT tenant_id, resource, sum(successes + failures + neutrals)::bigint AS finished
                   FROM forgeyard.flow_outcome_deltas GROUP BY tenant_id, resource) d
        ON d.tenant_id = r.tenant_id AND d.resource = r.resource
     WHERE r.failure_rate IS NOT NULL
    UNION ALL
    SELECT q.tenant_id, q.queue, 'key_limit', p.partition_key, 'max_in_flight_per_key ' || q.max_in_flight_per_key,
           greatest(0, q.max_in_flight_per_key - p.heads), p.heads, p.pending, p.pending - p.heads, NULL, NULL, NULL
      FROM forgeyard.queues q JOIN forgeyard.queue_partitions p USING (tenant_id, queue)
     WHERE q.max_in_flight_per_key IS NOT NULL
    UNION ALL
    SELECT k.tenant_id, k.queue, 'fairness_weight', k.fairness_key, 'weight ' || k.weight, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL
      FROM forgeyard.queue_fair_keys k
     WHERE k.weight <> 1
)
SELECT * FROM rows
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR rows.tenant_id IN (SELECT scope.tenant_id FROM scope);
