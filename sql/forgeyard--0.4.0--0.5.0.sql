-- forgeyard 0.4.0 -> 0.5.0: faster hot paths, application schema migrations and health, restore
-- safety, topics, hardening. Each section is self-contained: its objects, their COMMENTs, the
-- REVOKE from PUBLIC, pg_dump registrations and access_catalog rows. The re-grant runs last.
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.5.0'" to load this file. \quit

-------------------------------------------------------------------------------------------------
-- 0.5.0: hot paths (queue claim, ack and enqueue)
-------------------------------------------------------------------------------------------------

-- Per-backend caches of queue options and tenant bindings: a statement trigger on each cached
-- table queues a relcache invalidation of it, which every backend applies before its next use.
CREATE FUNCTION forgeyard.invalidate_caches() RETURNS trigger LANGUAGE c
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_invalidate_caches';
COMMENT ON FUNCTION forgeyard.invalidate_caches() IS
  'Internal statement trigger: makes every backend drop its cached rows of the table (queue options, tenant bindings) when they change.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.queues
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.queues IS
  'Backends cache queue options; any change to this table makes them read the options again.';
CREATE TRIGGER invalidate_caches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON forgeyard.tenant_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION forgeyard.invalidate_caches();
COMMENT ON TRIGGER invalidate_caches ON forgeyard.tenant_bindings IS
  'Backends cache tenant bindings; any change to this table makes them read the bindings again.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: application schema migrations, daemon registry, health
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: restore safety: fencing values that never rewind, restore_reconcile
-------------------------------------------------------------------------------------------------

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: topics: durable pub/sub and the event type registry
-------------------------------------------------------------------------------------------------

-- Event types registered per tenant: publishing an unregistered (event_type, version) is FY050.
CREATE TABLE forgeyard.event_types (
    tenant_id       text        NOT NULL,
    event_type      text        NOT NULL,
    version         integer     NOT NULL CHECK (version > 0),
    retention_class text        NOT NULL CHECK (retention_class IN ('ephemeral', 'short', 'operational', 'audit')),
    registered_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_type, version)
);
COMMENT ON TABLE forgeyard.event_types IS
  'The registry of event types: each (event_type, version) a tenant may publish, with its retention class (event_type_register).';

CREATE TABLE forgeyard.topics (
    tenant_id          text        NOT NULL,
    topic              text        NOT NULL,
    max_subscriptions  integer     NOT NULL CHECK (max_subscriptions BETWEEN 1 AND 256),
    retention_usecs    bigint      NOT NULL CHECK (retention_usecs >= 0),
    dedup_window_usecs bigint      NOT NULL CHECK (dedup_window_usecs > 0),
    created_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, topic)
);
COMMENT ON TABLE forgeyard.topics IS
  'One row per topic (topic_create): its fan-out bound, how long published events stay replayable, and its event_id dedup window. Durations are microseconds.';

-- A subscription is a queue of the tenant (same name) fed by one topic.
CREATE TABLE forgeyard.subscriptions (
    tenant_id    text        NOT NULL,
    subscription text        NOT NULL,
    topic        text        NOT NULL,
    on_full      text        NOT NULL CHECK (on_full IN ('reject', 'dead_letter')),
    event_types  jsonb,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, subscription)
);
CREATE INDEX subscriptions_topic ON forgeyard.subscriptions (tenant_id, topic, subscription);
COMMENT ON TABLE forgeyard.subscriptions IS
  'Subscriptions: the queue of the same name receives the topic''s events. event_types: NULL for every type, else {"<type>": {"min": v, "max": v}} (versions outside the range are quarantined).';

CREATE SEQUENCE forgeyard.topic_event_seqs;
COMMENT ON SEQUENCE forgeyard.topic_event_seqs IS 'Event sequence numbers: publish order, monotonic per topic.';

-- Each published event once, with its payload; a subscription's message carries the event's
-- event_id and no payload, and claim reads the payload from here.
CREATE TABLE forgeyard.topic_events (
    tenant_id      text        NOT NULL,
    topic          text        NOT NULL,
    event_seq      bigint      NOT NULL,
    event_id       uuid        NOT NULL,
    event_type     text        NOT NULL,
    version        integer     NOT NULL,
    partition_key  text,
    priority       smallint    NOT NULL,
    payload        bytea       NOT NULL,
    payload_digest text        NOT NULL,
    published_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, topic, event_seq),
    UNIQUE (tenant_id, topic, event_id)
);
CREATE INDEX topic_events_published ON forgeyard.topic_events (tenant_id, topic, published_at);
COMMENT ON TABLE forgeyard.topic_events IS
  'Published events, each stored once with its payload, kept while a subscription message needs it and for the topic''s retention (replay) and dedup window.';

CREATE FUNCTION forgeyard.event_type_register(tenant text, event_type text, version integer, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_event_type_register';
COMMENT ON FUNCTION forgeyard.event_type_register(text, text, integer, jsonb) IS
  'Register (event_type, version) for the tenant so it can be published. Options: retention_class (ephemeral | short | operational (default) | audit). Registering it again with the same class is a no-op; with another class 42710.';

CREATE FUNCTION forgeyard.event_type_list(tenant text)
    RETURNS TABLE (event_type text, version integer, retention_class text, registered_at timestamptz)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_event_type_list';
COMMENT ON FUNCTION forgeyard.event_type_list(text) IS 'The registered event types of a tenant, by type and version.';

CREATE FUNCTION forgeyard.topic_create(tenant text, topic text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_create';
COMMENT ON FUNCTION forgeyard.topic_create(text, text, jsonb) IS
  'Create a topic of the tenant. Options: max_subscriptions (1..256, default 16), retention (interval, default 0: no replay), dedup_window (interval, default 24 hours). 42710 if it exists.';

CREATE FUNCTION forgeyard.topic_drop(tenant text, topic text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_drop';
COMMENT ON FUNCTION forgeyard.topic_drop(text, text) IS
  'Drop a topic with its events and its subscriptions (their queues, messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.topic_list(tenant text)
    RETURNS TABLE (topic text, options jsonb, subscriptions jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_list';
COMMENT ON FUNCTION forgeyard.topic_list(text) IS 'The topics of a tenant with their options and subscriptions.';

CREATE FUNCTION forgeyard.subscribe(tenant text, topic text, subscription text, options jsonb DEFAULT '{}')
    RETURNS void LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscribe';
COMMENT ON FUNCTION forgeyard.subscribe(text, text, text, jsonb) IS
  'Create a subscription: a queue of the tenant named subscription (every queue_create option applies) fed by the topic. Also: event_types (["t", ...] or {"t": {"min": 1, "max": 2}}; default every type), on_full (reject: the publish fails with FY020; dead_letter: this subscription dead-letters the event as backlog_full), start (now, or oldest: the retained events are delivered first). 22023 over max_subscriptions, 42710 if the queue exists.';

CREATE FUNCTION forgeyard.unsubscribe(tenant text, topic text, subscription text)
    RETURNS boolean LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_unsubscribe';
COMMENT ON FUNCTION forgeyard.unsubscribe(text, text, text) IS
  'Drop a subscription and its queue (messages and dead letters). Returns whether it existed.';

CREATE FUNCTION forgeyard.publish(tenant text, topic text, event_type text, version integer, payload bytea,
                                  event_id uuid DEFAULT NULL, partition_key text DEFAULT NULL,
                                  priority text DEFAULT 'interactive')
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_publish';
COMMENT ON FUNCTION forgeyard.publish(text, text, text, integer, bytea, uuid, text, text) IS
  'Publish inside the caller''s transaction: each subscription whose event_types match gets one message (payload stored once); a version outside a subscription''s range is dead-lettered there as schema_unsupported. Returns the event_seq (monotonic per topic). A repeated event_id within the dedup window returns the first event_seq (FY011 for other contents). FY050 unregistered type or version, FY020 a reject subscription is full (named), FY021 payload over a subscription''s max_payload_bytes, 42704 unknown topic.';

CREATE FUNCTION forgeyard.publish_batch(tenant text, topic text, event_type text, version integer, payloads bytea[],
                                        event_ids uuid[] DEFAULT NULL, partition_keys text[] DEFAULT NULL,
                                        priority text DEFAULT 'interactive')
    RETURNS TABLE (event_seq bigint) LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_publish_batch';
COMMENT ON FUNCTION forgeyard.publish_batch(text, text, text, integer, bytea[], uuid[], text[], text) IS
  'Publish several events of one type and version (event_ids and partition_keys, when given, parallel to payloads); event_seqs in order. All or nothing.';

CREATE FUNCTION forgeyard.subscription_rewind(tenant text, topic text, subscription text, since timestamptz)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscription_rewind';
COMMENT ON FUNCTION forgeyard.subscription_rewind(text, text, text, timestamptz) IS
  'Deliver again to the subscription every retained event published at or after since (and within the topic''s retention), in event_seq order, admitted like new messages. Returns how many reached the consumer queue. Consumers must be idempotent (inbox_accept on event_id).';

CREATE FUNCTION forgeyard.subscription_claim(tenant text, subscription text, consumer text,
                                             max_messages integer DEFAULT 1, visibility interval DEFAULT NULL)
    RETURNS TABLE (msg_id bigint, event_id uuid, partition_key text, priority text, attempt integer,
                   claim_token bigint, payload bytea, enqueued_at timestamptz,
                   topic text, event_type text, version integer, event_seq bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_subscription_claim';
COMMENT ON FUNCTION forgeyard.subscription_claim(text, text, text, integer, interval) IS
  'claim on a subscription, each delivery with its topic, event_type, version and event_seq. ack / nack / extend as for any queue.';

CREATE FUNCTION forgeyard.topic_purge(max_events integer DEFAULT 1000, tenant text DEFAULT NULL)
    RETURNS bigint LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'fy_topic_purge';
COMMENT ON FUNCTION forgeyard.topic_purge(integer, text) IS
  'Maintenance: delete up to max_events events past their topic''s retention and dedup window that no pending message of a subscription still needs, oldest first; tenant NULL = all tenants. Returns how many.';

CREATE VIEW forgeyard.subscription_lag WITH (security_barrier) AS
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
COMMENT ON VIEW forgeyard.subscription_lag IS
  'Lag of every subscription, no payloads: backlog (pending, not in flight), in flight, oldest unacked age, dead letters, pressure, last ack (among acked messages still retained). A role bound to tenants sees only those.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.event_type_register(text, text, integer, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.event_type_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_create(text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_drop(text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.topic_list(text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscribe(text, text, text, jsonb)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.unsubscribe(text, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.publish(text, text, text, integer, bytea, uuid, text, text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.publish_batch(text, text, text, integer, bytea[], uuid[], text[], text)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscription_rewind(text, text, text, timestamptz)'),
    ('usage',       'EXECUTE', 'FUNCTION forgeyard.subscription_claim(text, text, text, integer, interval)'),
    ('maintenance', 'EXECUTE', 'FUNCTION forgeyard.topic_purge(integer, text)'),
    ('inspect',     'SELECT',  'TABLE forgeyard.subscription_lag');

SELECT pg_catalog.pg_extension_config_dump('forgeyard.event_types', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topics', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.subscriptions', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topic_events', '');
SELECT pg_catalog.pg_extension_config_dump('forgeyard.topic_event_seqs', '');

-- (end of section)

-------------------------------------------------------------------------------------------------
-- 0.5.0: hardening: argument checks and attack surface
-------------------------------------------------------------------------------------------------

-- The argument checks of the access-management functions (grant_*, revoke_access, apply_access,
-- bind_tenant, unbind_tenant): the SQLSTATEs every other function answers (docs/errors.md).
CREATE FUNCTION forgeyard.check_role(role regrole)
    RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role::oid) THEN
        RAISE EXCEPTION 'role with OID % does not exist', role::oid USING ERRCODE = '42704';
    END IF;
END
$$;
COMMENT ON FUNCTION forgeyard.check_role(regrole) IS
  'Internal: 22004 for a NULL role, 42704 for an OID naming no role (the access-management functions call it first).';

CREATE FUNCTION forgeyard.check_tenant(tenant text)
    RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF tenant OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'tenant must not be empty' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.octet_length(tenant) OPERATOR(pg_catalog.>) 128 THEN
        RAISE EXCEPTION 'tenant is longer than 128 bytes' USING ERRCODE = '22001',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length(tenant));
    END IF;
END
$$;
COMMENT ON FUNCTION forgeyard.check_tenant(text) IS
  'Internal: the tenant rules of every API function (22004 NULL, 22023 empty, 22001 over 128 bytes) for bind_tenant and unbind_tenant.';

-- The access-management functions answer 22004 for a NULL role, tenant or access kind and 42704 for an OID
-- naming no role, like every other function (they answered 23502 or 42601 before).
CREATE OR REPLACE FUNCTION forgeyard.access_objects(access text)
    RETURNS TABLE (privilege text, object text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF access IS NULL THEN
        RAISE EXCEPTION 'access must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY SELECT c.privilege, c.object FROM forgeyard.access_catalog c
                  WHERE c.access OPERATOR(pg_catalog.=) $1 ORDER BY c.object;
END
$$;
COMMENT ON FUNCTION forgeyard.access_objects(text) IS
  'The privileges each access kind (usage, maintenance, inspect) grants, from forgeyard.access_catalog.';

CREATE OR REPLACE FUNCTION forgeyard.apply_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    PERFORM forgeyard.check_role(role);
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA forgeyard TO %s', role);
    FOR g IN SELECT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege, g.object, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION forgeyard.apply_access(regrole) IS
  'Grant a role everything its recorded access kinds include. Upgrade scripts call it for every recorded role.';

CREATE OR REPLACE FUNCTION forgeyard.grant_usage(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_usage(regrole) IS
  'Application role: EXECUTE on the tenant-scoped API, no table privileges, so the semantics cannot be bypassed with DML.';

CREATE OR REPLACE FUNCTION forgeyard.grant_maintenance(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'usage'), (role, 'maintenance')
        ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_maintenance(regrole) IS
  'Maintenance role: the application API plus the cross-tenant maintenance calls (lease_reap, purges, maintain).';

CREATE OR REPLACE FUNCTION forgeyard.grant_inspect(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    INSERT INTO forgeyard.role_access (role_id, access) VALUES (role, 'inspect') ON CONFLICT DO NOTHING;
    PERFORM forgeyard.apply_access(role);
END
$$;
COMMENT ON FUNCTION forgeyard.grant_inspect(regrole) IS
  'Inspection role: SELECT on the forgeyard views (for psql), nothing else.';

CREATE OR REPLACE FUNCTION forgeyard.revoke_access(role regrole)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    g record;
BEGIN
    PERFORM forgeyard.check_role(role);
    FOR g IN SELECT DISTINCT o.privilege, o.object
               FROM forgeyard.role_access a, forgeyard.access_objects(a.access) o
              WHERE a.role_id OPERATOR(pg_catalog.=) role
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s FROM %s', g.privilege, g.object, role);
    END LOOP;
    EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA forgeyard FROM %s', role);
    DELETE FROM forgeyard.role_access a WHERE a.role_id OPERATOR(pg_catalog.=) role;
END
$$;
COMMENT ON FUNCTION forgeyard.revoke_access(regrole) IS
  'Take back every access kind granted to a role (its tenant bindings stay).';

CREATE OR REPLACE FUNCTION forgeyard.bind_tenant(role regrole, tenant text)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    PERFORM forgeyard.check_tenant(tenant);
    INSERT INTO forgeyard.tenant_bindings (role_id, tenant_id) VALUES (role, tenant) ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION forgeyard.bind_tenant(regrole, text) IS
  'Restrict a role to its bound tenants: once bound, a call for any other tenant (or for all tenants) fails with FY040.';

CREATE OR REPLACE FUNCTION forgeyard.unbind_tenant(role regrole, tenant text)
    RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM forgeyard.check_role(role);
    PERFORM forgeyard.check_tenant(tenant);
    DELETE FROM forgeyard.tenant_bindings b
     WHERE b.role_id OPERATOR(pg_catalog.=) role AND b.tenant_id OPERATOR(pg_catalog.=) tenant;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION forgeyard.unbind_tenant(regrole, text) IS
  'Remove one tenant binding of a role; returns whether it existed. A role with no bindings left is unrestricted.';

-- (end of section)

-------------------------------------------------------------------------------------------------
-- Access kinds now include 0.5.0's API; re-grant to every recorded role
-------------------------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA forgeyard FROM PUBLIC;
SELECT forgeyard.apply_access(r.role_id) FROM (SELECT DISTINCT a.role_id FROM forgeyard.role_access a) r;
