-- forgeyard 0.2.0 -> 0.3.0: durable queues (transactional outbox, fenced claim / ack / nack,
-- bounds with reserved capacity per priority class, retries, dead letters, partition order),
-- the consumer inbox, and forgeyard.maintain().
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.3.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------------------------

CREATE TABLE forgeyard.queues (
    tenant_id              text        NOT NULL,
    queue                  text        NOT NULL,
    max_messages           bigint      NOT NULL CHECK (max_messages > 0),
    max_bytes              bigint      NOT NULL CHECK (max_bytes > 0),
    max_payload_bytes      bigint      NOT NULL CHECK (max_payload_bytes > 0),
    visibility_usecs       bigint      NOT NULL CHECK (visibility_usecs > 0),
    max_attempts           bigint      NOT NULL CHECK (max_attempts > 0),
    backoff_base_usecs     bigint      NOT NULL CHECK (backoff_base_usecs > 0),
    backoff_max_usecs      bigint      NOT NULL CHECK (backoff_max_usecs >= backoff_base_usecs),
    ordering               text        NOT NULL CHECK (ordering IN ('none', 'partition')),
    dead_letter_payload    text        NOT NULL CHECK (dead_letter_payload IN ('drop', 'keep')),
    retain_acked_usecs     bigint      NOT NULL CHECK (retain_acked_usecs >= 0),
    max_dead               bigint      NOT NULL CHECK (max_dead > 0),
    dead_retention_usecs   bigint      NOT NULL CHECK (dead_retention_usecs > 0),
    dedup_window_usecs     bigint      NOT NULL CHECK (dedup_window_usecs > 0),
    admit_emergency        bigint      NOT NULL CHECK (admit_emergency BETWEEN 1 AND 100),
    admit_security_control bigint      NOT NULL CHECK (admit_security_control BETWEEN 1 AND 100),
    admit_realtime         bigint      NOT NULL CHECK (admit_realtime BETWEEN 1 AND 100),
    admit_interactive      bigint      NOT NULL CHECK (admit_interactive BETWEEN 1 AND 100),
    admit_background       bigint      NOT NULL CHECK (admit_background BETWEEN 1 AND 100),
    admit_bulk             bigint      NOT NULL CHECK (admit_bulk BETWEEN 1 AND 100),
    notify                 boolean     NOT NULL,
    slots                  integer     NOT NULL CHECK (slots BETWEEN 1 AND 8),
    created_at             timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, queue)
);
COMMENT ON TABLE forgeyard.queues IS
  'One row per queue: its limits and policy (queue_create / queue_alter). Durations are microseconds; admit_<class> is the percentage of the limits up to which the class is admitted.';

-- Capacity is counted in `slots` rows per queue so producers do not serialize on one row: the
-- admitted side is updated by producers, the released side by consumers (ack, dead-letter), so
-- an ack never waits for a producer's open transaction.
CREATE TABLE forgeyard.queue_slots (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    admitted_messages bigint  NOT NULL DEFAULT 0,
    admitted_bytes    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_slots IS
  'Messages and bytes admitted into each capacity slot of a queue (producers'' side of the bound).';

CREATE TABLE forgeyard.queue_releases (
    tenant_id         text    NOT NULL,
    queue             text    NOT NULL,
    slot              integer NOT NULL,
    released_messages bigint  NOT NULL DEFAULT 0,
    released_bytes    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, queue, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
COMMENT ON TABLE forgeyard.queue_releases IS
  'Messages and bytes that left each capacity slot (acked or dead-lettered): the consumers'' side of the bound.';

CREATE SEQUENCE forgeyard.message_ids;
CREATE SEQUENCE forgeyard.claim_tokens;
COMMENT ON SEQUENCE forgeyard.message_ids IS 'Message ids: enqueue order.';
COMMENT ON SEQUENCE forgeyard.claim_tokens IS 'Claim tokens: one per delivery, the fencing token of ack / nack / extend.';

CREATE TABLE forgeyard.messages (
    msg_id        bigint      PRIMARY KEY,
    tenant_id     text        NOT NULL,
    queue         text        NOT NULL,
    state         text        NOT NULL CHECK (state IN ('pending', 'acked', 'dead')),
    priority      smallint    NOT NULL CHECK (priority BETWEEN 0 AND 5),
    partition_key text,
    is_head       boolean     NOT NULL,
    event_id      uuid,
    payload       bytea,
    bytes         bigint      NOT NULL,
    slot          smallint    NOT NULL,
    enqueued_at   timestamptz NOT NULL,
    visible_at    timestamptz NOT NULL,
    attempt       integer     NOT NULL DEFAULT 0,
    claim_token   bigint,
    claimed_by    text,
    last_error    text,
    error_class   text,
    finished_at   timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0);
-- The claim path: per class, the visible heads in visibility order. Only pending heads are in it.
CREATE INDEX messages_claim ON forgeyard.messages (tenant_id, queue, priority, visible_at, msg_id)
    WHERE state = 'pending' AND is_head;
CREATE INDEX messages_partition ON forgeyard.messages (tenant_id, queue, partition_key, msg_id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;
CREATE INDEX messages_finished ON forgeyard.messages (tenant_id, queue, msg_id) WHERE state <> 'pending';
COMMENT ON TABLE forgeyard.messages IS
  'Queued messages: pending (ready, delayed or in flight by visible_at and claim_token), acked (kept for retain_acked) or dead (dead letters). Use the API, not DML.';

CREATE TABLE forgeyard.queue_events (
    tenant_id      text        NOT NULL,
    queue          text        NOT NULL,
    event_id       uuid        NOT NULL,
    msg_id         bigint      NOT NULL,
    payload_digest text        NOT NULL,
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, queue, event_id)
);
CREATE INDEX queue_events_expiry ON forgeyard.queue_events (expires_at);
COMMENT ON TABLE forgeyard.queue_events IS
  'Producer dedup: the first message of each event_id within the queue''s dedup window (also after it was acked).';

CREATE TABLE forgeyard.queue_partitions (
    tenant_id     text   NOT NULL,
    queue         text   NOT NULL,
    partition_key text   NOT NULL,
    pending       bigint NOT NULL CHECK (pending >= 0),
    PRIMARY KEY (tenant_id, queue, partition_key)
) WITH (fillfactor = 70);
COMMENT ON TABLE forgeyard.queue_partitions IS
  'Pending messages per partition key of partition-ordered queues; only the oldest of a key (its head) is claimable.';

CREATE TABLE forgeyard.inbox (
    tenant_id   text        NOT NULL,
    consumer    text        NOT NULL,
    event_id    uuid        NOT NULL,
    accepted_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, consumer, event_id)
);
CREATE INDEX inbox_accepted ON forgeyard.inbox (accepted_at);
COMMENT ON TABLE forgeyard.inbox IS
  'Consumer dedup: events a consumer accepted (inbox_accept), for an exactly-once effect over at-least-once delivery.';

-------------------------------------------------------------------------------------------------
-- Queue API
-------------------------------------------------------------------------------------------------

CREATE FUNCTION forgeyard.queue_create(tenant text, queue text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_create';
COMMENT ON FUNCTION forgeyard.queue_create(text, text, jsonb) IS
  'Create a queue of the tenant. Options (each validated, 22023 naming it): max_messages, max_bytes, max_payload_bytes (64 KiB), visibility_timeout, max_attempts, backoff_base, backoff_max, ordering (none|partition), dead_letter_payload (drop|keep), retain_acked, max_dead, dead_letter_retention, dedup_window (24 h), admit_<class> percentages (bulk 70, background 80, interactive 90, realtime 95, security_control and emergency 100), notify. 42710 if it exists.';

CREATE FUNCTION forgeyard.queue_alter(tenant text, queue text, options jsonb)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_alter';
COMMENT ON FUNCTION forgeyard.queue_alter(text, text, jsonb) IS
  'Change the given options of a queue (ordering cannot change). 42704 for an unknown queue.';

CREATE FUNCTION forgeyard.queue_drop(tenant text, queue text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_drop';
COMMENT ON FUNCTION forgeyard.queue_drop(text, text) IS
  'Drop a queue with its messages, dead letters and dedup events. Returns whether it existed.';

CREATE FUNCTION forgeyard.queue_list(tenant text)
    RETURNS TABLE (queue text, options jsonb) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_list';
COMMENT ON FUNCTION forgeyard.queue_list(text) IS 'The queues of a tenant with all their options.';

CREATE FUNCTION forgeyard.enqueue(tenant text, queue text, payload bytea, event_id uuid DEFAULT NULL,
                                  partition_key text DEFAULT NULL, priority text DEFAULT 'interactive',
                                  delay interval DEFAULT '0')
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue';
COMMENT ON FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval) IS
  'Enqueue inside the caller''s transaction (visible to consumers after commit, gone on rollback); returns msg_id. A repeated event_id within the dedup window returns the first msg_id (even when full); with another payload FY011. FY020 when full for the class, FY021 over max_payload_bytes, 42704 unknown queue, 22023 bad class or missing partition_key.';

CREATE FUNCTION forgeyard.enqueue_batch(tenant text, queue text, payloads bytea[], event_ids uuid[] DEFAULT NULL,
                                        partition_keys text[] DEFAULT NULL, priority text DEFAULT 'interactive',
                                        delay interval DEFAULT '0')
    RETURNS TABLE (msg_id bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_enqueue_batch';
COMMENT ON FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval) IS
  'Enqueue several messages (event_ids and partition_keys, when given, parallel to payloads); msg_ids in order. All or nothing.';

CREATE FUNCTION forgeyard.claim(tenant text, queue text, consumer text, max_messages integer DEFAULT 1,
                                visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_claim';
COMMENT ON FUNCTION forgeyard.claim(text, text, text, integer, interval) IS
  'Claim up to max_messages visible messages, highest class first, then oldest, each with a new claim_token, invisible to others for visibility (default: the queue''s). Never hands one message to two claimers at once and never waits on producers (SKIP LOCKED). In partition queues only the oldest pending message of each key is claimable.';

CREATE FUNCTION forgeyard.ack_and_claim(tenant text, queue text, consumer text, msg_ids bigint[], claim_tokens bigint[],
                                        max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack_and_claim';
COMMENT ON FUNCTION forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval) IS
  'A worker''s steady state in one round trip: ack the last batch (as ack_batch), then claim the next (as claim).';

CREATE FUNCTION forgeyard.ack(tenant text, queue text, msg_id bigint, claim_token bigint)
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack';
COMMENT ON FUNCTION forgeyard.ack(text, text, bigint, bigint) IS
  'Finish a delivery. FY001 if claim_token is not the current delivery (it was claimed again, or nacked). Accepted after the visibility ran out if nobody claimed it since. A no-op for a message already acked, dead or gone (safe to retry).';

CREATE FUNCTION forgeyard.ack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[])
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_ack_batch';
COMMENT ON FUNCTION forgeyard.ack_batch(text, text, bigint[], bigint[]) IS
  'ack for each (msg_id, claim_token) pair; all or nothing (FY001 for any stale token).';

CREATE FUNCTION forgeyard.nack(tenant text, queue text, msg_id bigint, claim_token bigint, error text,
                               permanent boolean DEFAULT false)
    RETURNS text LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_nack';
COMMENT ON FUNCTION forgeyard.nack(text, text, bigint, bigint, text, boolean) IS
  'Fail a delivery: retry after exponential backoff with full jitter capped at backoff_max (returns retry), or dead-letter after max_attempts or when permanent (returns dead). FY001 for a stale claim_token.';

CREATE FUNCTION forgeyard.nack_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[], error text,
                                     permanent boolean DEFAULT false)
    RETURNS TABLE (msg_id bigint, outcome text) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_nack_batch';
COMMENT ON FUNCTION forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean) IS
  'nack for each (msg_id, claim_token) pair, with each outcome; all or nothing.';

CREATE FUNCTION forgeyard.extend(tenant text, queue text, msg_id bigint, claim_token bigint, visibility interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_extend';
COMMENT ON FUNCTION forgeyard.extend(text, text, bigint, bigint, interval) IS
  'Keep a live delivery invisible for visibility from now; returns the new visible_at. FY001 if the token is stale or the visibility already ran out (the delivery lapsed).';

CREATE FUNCTION forgeyard.extend_batch(tenant text, queue text, msg_ids bigint[], claim_tokens bigint[],
                                       visibility interval)
    RETURNS timestamptz LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_extend_batch';
COMMENT ON FUNCTION forgeyard.extend_batch(text, text, bigint[], bigint[], interval) IS
  'extend for each (msg_id, claim_token) pair; all or nothing.';

CREATE FUNCTION forgeyard.queue_stats(tenant text, queue text)
    RETURNS TABLE (ready bigint, in_flight bigint, delayed bigint, dead bigint, bytes bigint,
                   oldest_ready_age interval, pressure text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_queue_stats';
COMMENT ON FUNCTION forgeyard.queue_stats(text, text) IS
  'Depth of a queue: ready (visible), in flight, delayed, dead; bytes admitted; age of the oldest ready message; pressure (normal below 70% of a limit, elevated to 90%, saturated above).';

CREATE FUNCTION forgeyard.dead_list(tenant text, queue text, after_msg_id bigint DEFAULT 0, max_rows integer DEFAULT 100)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer, error text,
                   error_class text, dead_at timestamptz, payload bytea)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_list';
COMMENT ON FUNCTION forgeyard.dead_list(text, text, bigint, integer) IS
  'Dead letters in msg_id order after after_msg_id (keyset pagination). payload is NULL unless the queue keeps it.';

CREATE FUNCTION forgeyard.dead_redrive(tenant text, queue text, msg_ids bigint[] DEFAULT NULL, max_rows integer DEFAULT 100)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_redrive';
COMMENT ON FUNCTION forgeyard.dead_redrive(text, text, bigint[], integer) IS
  'Put dead letters back in the queue (attempt 0, visible now, admitted like new messages: FY020 when full). Without msg_ids: the oldest max_rows that kept their payload. 22023 for a listed one whose payload was dropped.';

CREATE FUNCTION forgeyard.dead_purge(tenant text, queue text, msg_ids bigint[] DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_dead_purge';
COMMENT ON FUNCTION forgeyard.dead_purge(text, text, bigint[]) IS
  'Delete the listed dead letters of a queue (all of them without msg_ids); returns how many.';

CREATE FUNCTION forgeyard.claim_plan(tenant text, queue text)
    RETURNS TABLE (plan text) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_claim_plan';
COMMENT ON FUNCTION forgeyard.claim_plan(text, text) IS
  'Maintenance: EXPLAIN of the claim statement as claim runs it (an index range scan on messages_claim; never a Seq Scan or a Sort of the queue).';

CREATE FUNCTION forgeyard.inbox_accept(tenant text, consumer text, event_id uuid)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_inbox_accept';
COMMENT ON FUNCTION forgeyard.inbox_accept(text, text, uuid) IS
  'Inside the consumer''s transaction: true the first time (do the effect), false for every duplicate (skip it).';

CREATE FUNCTION forgeyard.inbox_purge(older_than interval DEFAULT '7 days', max_rows integer DEFAULT 10000,
                                      tenant text DEFAULT NULL)
    RETURNS integer LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_inbox_purge';
COMMENT ON FUNCTION forgeyard.inbox_purge(interval, integer, text) IS
  'Maintenance: delete up to max_rows inbox entries accepted more than older_than ago; tenant NULL = all tenants.';

CREATE FUNCTION forgeyard.maintain(max_rows integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS TABLE (task text, "rows" bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_maintain';
COMMENT ON FUNCTION forgeyard.maintain(integer, text) IS
  'Maintenance, one bounded pass (schedule it, e.g. with pg_cron; safe from several places at once): expired idempotency keys, queue dedup events past their window, acked messages past retain_acked, dead letters past retention or over max_dead, inbox entries older than 7 days. Leases are not reaped here (lease_reap hands each to a reconciler).';

-------------------------------------------------------------------------------------------------
-- Views for psql
-------------------------------------------------------------------------------------------------

CREATE VIEW forgeyard.queue_depth WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
)
SELECT m.tenant_id, m.queue,
       (ARRAY['emergency', 'security_control', 'realtime', 'interactive', 'background', 'bulk'])[m.priority + 1] AS class,
       CASE WHEN m.state <> 'pending' THEN m.state
            WHEN m.visible_at <= c.now THEN 'ready'
            WHEN m.claim_token IS NOT NULL THEN 'in_flight'
            ELSE 'delayed' END AS state,
       count(*) AS messages, sum(m.bytes) AS bytes, c.now - min(m.enqueued_at) AS oldest_age
  FROM forgeyard.messages m CROSS JOIN (SELECT forgeyard.now() AS now) c
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR m.tenant_id IN (SELECT scope.tenant_id FROM scope)
 GROUP BY 1, 2, 3, 4, c.now;
COMMENT ON VIEW forgeyard.queue_depth IS
  'Depth of every queue by class and state (ready, in_flight, delayed, acked, dead) with bytes and the oldest message''s age. A role bound to tenants sees only those.';

CREATE VIEW forgeyard.queue_overview WITH (security_barrier) AS
WITH RECURSIVE member_of(oid) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN (current_user, session_user)
    UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN member_of ON m.member = member_of.oid
), scope AS (
    SELECT b.tenant_id FROM forgeyard.tenant_bindings b WHERE b.role_id::oid IN (SELECT oid FROM member_of)
), used AS (
    SELECT a.tenant_id, a.queue, sum(a.admitted_messages - r.released_messages) AS messages,
           sum(a.admitted_bytes - r.released_bytes) AS bytes
      FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r USING (tenant_id, queue, slot)
     GROUP BY a.tenant_id, a.queue
)
SELECT q.tenant_id, q.queue, q.ordering, u.messages AS admitted_messages, q.max_messages, u.bytes AS admitted_bytes,
       q.max_bytes,
       CASE WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) < 0.70 THEN 'normal'
            WHEN greatest(u.messages::float8 / q.max_messages, u.bytes::float8 / q.max_bytes) <= 0.90 THEN 'elevated'
            ELSE 'saturated' END AS pressure
  FROM forgeyard.queues q JOIN used u USING (tenant_id, queue)
 WHERE NOT EXISTS (SELECT 1 FROM scope) OR q.tenant_id IN (SELECT scope.tenant_id FROM scope);
COMMENT ON VIEW forgeyard.queue_overview IS
  'Every queue with the messages and bytes it holds against its limits and its pressure (normal / elevated / saturated). A role bound to tenants sees only those.';

-------------------------------------------------------------------------------------------------
-- Access kinds now include the queue API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.queue_create(text, text, jsonb)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.queue_alter(text, text, jsonb)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.queue_drop(text, text)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.queue_list(text)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.enqueue(text, text, bytea, uuid, text, text, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.enqueue_batch(text, text, bytea[], uuid[], text[], text, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.claim(text, text, text, integer, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.ack_and_claim(text, text, text, bigint[], bigint[], integer, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.ack(text, text, bigint, bigint)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.ack_batch(text, text, bigint[], bigint[])'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.nack(text, text, bigint, bigint, text, boolean)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.nack_batch(text, text, bigint[], bigint[], text, boolean)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.extend(text, text, bigint, bigint, interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.extend_batch(text, text, bigint[], bigint[], interval)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.queue_stats(text, text)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.dead_list(text, text, bigint, integer)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.dead_redrive(text, text, bigint[], integer)'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.dead_purge(text, text, bigint[])'),
    ('usage', 'EXECUTE', 'FUNCTION forgeyard.inbox_accept(text, text, uuid)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.inbox_purge(interval, integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.maintain(integer, text)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.claim_plan(text, text)'),
    ('inspect', 'SELECT', 'TABLE forgeyard.queue_depth'),
    ('inspect', 'SELECT', 'TABLE forgeyard.queue_overview');

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queues', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_slots', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_releases', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.messages', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.queue_partitions', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.message_ids', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.claim_tokens', '');
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
