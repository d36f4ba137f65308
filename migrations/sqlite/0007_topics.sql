-- Topics: durable pub/sub and the event type registry (docs/sql-api.md#topics), the twin of the
-- extension's "topics" section. Times are microseconds since 1970 (UTC).
CREATE TABLE event_types (
    tenant_id       TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    version         INTEGER NOT NULL CHECK (version > 0),
    retention_class TEXT    NOT NULL CHECK (retention_class IN ('ephemeral', 'short', 'operational', 'audit')),
    registered_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, event_type, version)
) STRICT, WITHOUT ROWID;

CREATE TABLE topics (
    tenant_id          TEXT    NOT NULL,
    topic              TEXT    NOT NULL,
    max_subscriptions  INTEGER NOT NULL CHECK (max_subscriptions BETWEEN 1 AND 256),
    retention_usecs    INTEGER NOT NULL CHECK (retention_usecs >= 0),
    dedup_window_usecs INTEGER NOT NULL CHECK (dedup_window_usecs > 0),
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, topic)
) STRICT, WITHOUT ROWID;

-- A subscription is the queue of the same name; filtered = 1 keeps only the listed types.
CREATE TABLE subscriptions (
    tenant_id    TEXT    NOT NULL,
    subscription TEXT    NOT NULL,
    topic        TEXT    NOT NULL,
    on_full      TEXT    NOT NULL CHECK (on_full IN ('reject', 'dead_letter')),
    filtered     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, subscription)
) STRICT, WITHOUT ROWID;
CREATE INDEX subscriptions_topic ON subscriptions (tenant_id, topic, subscription);

CREATE TABLE subscription_event_types (
    tenant_id    TEXT    NOT NULL,
    subscription TEXT    NOT NULL,
    event_type   TEXT    NOT NULL,
    min_version  INTEGER NOT NULL,
    max_version  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, subscription, event_type)
) STRICT, WITHOUT ROWID;

-- Each published event once with its payload; a subscription's message refers to it by event_id.
CREATE TABLE topic_events (
    event_seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id      TEXT    NOT NULL,
    topic          TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    event_type     TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    partition_key  TEXT,
    priority       INTEGER NOT NULL,
    payload        BLOB    NOT NULL,
    payload_digest TEXT    NOT NULL,
    published_at   INTEGER NOT NULL,
    UNIQUE (tenant_id, topic, event_id)
) STRICT;
CREATE INDEX topic_events_published ON topic_events (tenant_id, topic, published_at);
