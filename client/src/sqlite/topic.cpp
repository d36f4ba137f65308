// Topics in the SQLite store, the twin of extension/topic*.cpp: the event type registry, topics,
// subscriptions (queues fed by a topic), publish with the payload stored once, replay and lag.
// One writer at a time (BEGIN IMMEDIATE), so a publish sees every subscription's usage exactly.
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/core.hpp"
#include "core/topic.hpp"
#include "core/uuid.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"
#include "sqlite/topics.hpp"

namespace forgeyard::detail {

using namespace sqlite_queue;

namespace {

struct TopicRow {
  std::string tenant, name;
  fy::core::TopicOptions options;
};

void check_names(std::string_view tenant, std::string_view topic) {
  fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
  fy::core::check_name("topic", true, topic, fy::core::max_topic_name_bytes);
}

TopicRow load_topic(Db& db, std::string_view tenant, std::string_view topic) {
  auto q = db.query(
      "SELECT max_subscriptions, retention_usecs, dedup_window_usecs FROM topics WHERE tenant_id = ?1 AND topic = ?2");
  q.bind(1, tenant).bind(2, topic);
  if (!q.step()) fy::core::throw_unknown_topic(tenant, topic);
  TopicRow t{std::string(tenant), std::string(topic), {}};
  t.options.max_subscriptions = static_cast<int>(q.int64(0));
  t.options.retention_usecs = q.int64(1);
  t.options.dedup_window_usecs = q.int64(2);
  while (q.step()) {
  }
  return t;
}

struct StoredEvent {
  std::int64_t seq = 0;
  std::string event_id, event_type;
  std::int64_t version = 0;
  std::optional<std::string> partition_key;
  int priority = 0;
  std::int64_t bytes = 0;
};

struct Route {
  std::string subscription;
  bool dead_letter_when_full = false;
  bool filtered = false;
  std::optional<fy::core::VersionRange> accepted;
};

std::vector<Route> routes(Db& db, const TopicRow& t, const std::string& event_type,
                          const std::optional<std::string>& only = std::nullopt) {
  auto q = db.query(
      "SELECT s.subscription, s.on_full = 'dead_letter', s.filtered, f.min_version, f.max_version"
      "  FROM subscriptions s LEFT JOIN subscription_event_types f ON f.tenant_id = s.tenant_id"
      "   AND f.subscription = s.subscription AND f.event_type = ?3"
      " WHERE s.tenant_id = ?1 AND s.topic = ?2 AND (?4 IS NULL OR s.subscription = ?4) ORDER BY s.subscription");
  q.bind(1, t.tenant).bind(2, t.name).bind(3, event_type);
  if (only)
    q.bind(4, *only);
  else
    q.bind_null(4);
  std::vector<Route> out;
  while (q.step()) {
    Route r{q.text(0), q.int64(1) != 0, q.int64(2) != 0, std::nullopt};
    if (r.filtered && !q.is_null(3)) r.accepted = fy::core::VersionRange{q.int64(3), q.int64(4)};
    out.push_back(std::move(r));
  }
  return out;
}

enum class Delivered { message, quarantined, backlog_full, skipped };

void insert_dead(Db& db, const Queue& queue, const StoredEvent& e, std::int64_t now, const std::string& error,
                 const char* error_class) {
  auto q = db.query(
      "INSERT INTO messages (tenant_id, queue, state, priority, partition_key, is_head, event_id, payload, bytes,"
      "   enqueued_at, visible_at, last_error, error_class, finished_at)"
      " VALUES (?1, ?2, 'dead', ?3, ?4, 0, ?5, NULL, ?6, ?7, ?7, ?8, ?9, ?7)");
  q.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(e.priority));
  if (e.partition_key)
    q.bind(4, *e.partition_key);
  else
    q.bind_null(4);
  q.bind(5, e.event_id).bind(6, e.bytes).bind(7, now).bind(8, error).bind(9, error_class).run();
}

// One event into one subscription queue: the extension's deliver() (extension/topic.cpp).
Delivered deliver(Db& db, Queue& queue, const Route& route, const StoredEvent& e, std::int64_t now) {
  switch (fy::core::route(route.filtered, route.accepted, e.version)) {
    case fy::core::Routing::skip:
      return Delivered::skipped;
    case fy::core::Routing::quarantine:
      insert_dead(db, queue, e, now, fy::core::quarantine_message(e.event_type, e.version),
                  fy::core::schema_unsupported_class);
      return Delivered::quarantined;
    case fy::core::Routing::deliver:
      break;
  }
  const fy::core::QueueOptions& o = queue.options;
  if (e.bytes > o.max_payload_bytes) fy::core::throw_payload_too_large(queue.name, o, e.bytes);
  if (o.partitioned && !e.partition_key) fy::core::throw_partition_key_required(queue.name);
  try {
    admit(db, queue, e.priority, e.bytes);
  } catch (const fy::core::Error& err) {
    if (err.sqlstate() != fy::core::sqlstate::queue_full || !route.dead_letter_when_full) throw;
    insert_dead(db, queue, e, now, fy::core::backlog_full_message(queue.name), fy::core::backlog_full_class);
    return Delivered::backlog_full;
  }
  const bool is_head = join_key(db, queue, fy::core::group_key(o, e.partition_key, std::nullopt));
  // (A fair subscription queue's message gets its pass, as enqueue gives one.)
  const std::optional<std::int64_t> pass =
      o.fairness ? std::optional(next_pass(db, queue, e.priority, std::nullopt)) : std::nullopt;
  auto q = db.query(
      "INSERT INTO messages (tenant_id, queue, state, priority, partition_key, is_head, event_id, payload, bytes,"
      "   enqueued_at, visible_at, pass) VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?8, ?9)");
  if (pass)
    q.bind(9, *pass);
  else
    q.bind_null(9);
  q.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(e.priority));
  if (e.partition_key)
    q.bind(4, *e.partition_key);
  else
    q.bind_null(4);
  q.bind(5, static_cast<std::int64_t>(is_head ? 1 : 0)).bind(6, e.event_id).bind(7, e.bytes).bind(8, now).run();
  return Delivered::message;
}

std::int64_t replay(Db& db, const TopicRow& t, const std::string& subscription, std::int64_t since, std::int64_t now) {
  if (t.options.retention_usecs == 0) return 0;
  std::vector<StoredEvent> events;
  {
    auto q = db.query(
        "SELECT event_seq, event_id, event_type, version, partition_key, priority, length(payload) FROM topic_events"
        " WHERE tenant_id = ?1 AND topic = ?2 AND published_at >= ?3 AND published_at > ?4 ORDER BY event_seq");
    q.bind(1, t.tenant).bind(2, t.name).bind(3, since).bind(4, now - t.options.retention_usecs);
    while (q.step())
      events.push_back({q.int64(0), q.text(1), q.text(2), q.int64(3),
                        q.is_null(4) ? std::nullopt : std::optional<std::string>(q.text(4)),
                        static_cast<int>(q.int64(5)), q.int64(6)});
  }
  Queue queue = load(db, t.tenant, subscription);
  std::int64_t delivered = 0;
  for (const StoredEvent& e : events) {
    const std::vector<Route> r = routes(db, t, e.event_type, subscription);
    if (r.empty()) fy::core::throw_unknown_subscription(t.name, subscription);
    if (deliver(db, queue, r.front(), e, now) == Delivered::message) ++delivered;
  }
  return delivered;
}

// A new version 4 UUID for an event published without an event_id.
std::string new_event_id() {
  return fy::core::format_uuid(random_uuid());
}

std::string event_id_of(const Event& e) {
  return e.event_id ? canonical_uuid(*e.event_id) : new_event_id();
}

std::int64_t publish_in(Db& db, const TopicRow& t, std::vector<Queue>& queues, const std::vector<Route>& rs,
                        const Event& e, std::int64_t now) {
  if (e.partition_key) fy::core::check_name("partition_key", true, *e.partition_key, fy::core::max_partition_key_bytes);
  StoredEvent s;
  s.event_id = event_id_of(e);
  s.event_type = e.event_type;
  s.version = e.version;
  s.partition_key = e.partition_key;
  s.priority = priority_index(e.priority);
  s.bytes = static_cast<std::int64_t>(e.payload.size());
  const std::string digest = fy::core::sha256_hex(e.payload);
  {
    auto q = db.query(
        "SELECT event_seq, event_type = ?4 AND version = ?5 AND payload_digest = ?6 AND partition_key IS ?7"
        "  FROM topic_events WHERE tenant_id = ?1 AND topic = ?2 AND event_id = ?3");
    q.bind(1, t.tenant).bind(2, t.name).bind(3, s.event_id).bind(4, s.event_type).bind(5, s.version).bind(6, digest);
    if (s.partition_key)
      q.bind(7, *s.partition_key);
    else
      q.bind_null(7);
    if (q.step()) {
      const std::int64_t first = q.int64(0);
      if (q.int64(1) == 0) fy::core::throw_published_event_mismatch(first);
      while (q.step()) {
      }
      return first;
    }
  }
  auto insert = db.query(
      "INSERT INTO topic_events (tenant_id, topic, event_id, event_type, version, partition_key, priority, payload,"
      "   payload_digest, published_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  insert.bind(1, t.tenant).bind(2, t.name).bind(3, s.event_id).bind(4, s.event_type).bind(5, s.version);
  if (s.partition_key)
    insert.bind(6, *s.partition_key);
  else
    insert.bind_null(6);
  insert.bind(7, static_cast<std::int64_t>(s.priority)).bind_blob(8, e.payload).bind(9, digest).bind(10, now);
  insert.run();
  s.seq = db.last_insert_rowid();  // event_seq is the rowid
  for (std::size_t i = 0; i < rs.size(); ++i) deliver(db, queues[i], rs[i], s, now);
  return s.seq;
}

void check_event(std::string_view tenant, std::string_view topic, const Event& e) {
  check_names(tenant, topic);
  fy::core::check_name("event_type", true, e.event_type, fy::core::max_event_type_bytes);
  fy::core::check_event_version("version", e.version);
}

void check_registered(Db& db, std::string_view tenant, const Event& e) {
  auto q = db.query("SELECT 1 FROM event_types WHERE tenant_id = ?1 AND event_type = ?2 AND version = ?3");
  q.bind(1, tenant).bind(2, e.event_type).bind(3, static_cast<std::int64_t>(e.version));
  if (!q.step()) fy::core::throw_unregistered_event_type(tenant, e.event_type, e.version);
  while (q.step()) {
  }
}

std::vector<std::int64_t> publish_all(Db& db, std::string_view tenant, std::string_view topic,
                                      const std::vector<Event>& events, std::int64_t now) {
  const TopicRow t = load_topic(db, tenant, topic);
  check_registered(db, tenant, events.front());
  const std::vector<Route> rs = routes(db, t, events.front().event_type);
  std::vector<Queue> queues;
  for (const Route& r : rs) queues.push_back(load(db, tenant, r.subscription));
  std::vector<std::int64_t> seqs;
  for (const Event& e : events) seqs.push_back(publish_in(db, t, queues, rs, e, now));
  return seqs;
}

}  // namespace

void SqliteTopics::register_event_type(std::string_view tenant, std::string_view event_type, int version,
                                       RetentionClass retention_class) {
  session_.measure("topic.register_event_type", [&] {
    core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      fy::core::check_name("event_type", true, event_type, fy::core::max_event_type_bytes);
      fy::core::check_event_version("version", version);
      const std::string rc(to_string(retention_class));
      session_.write([&](Db& db) {
        if (db.query("INSERT INTO event_types (tenant_id, event_type, version, retention_class, registered_at)"
                     " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING")
                .bind(1, tenant)
                .bind(2, event_type)
                .bind(3, static_cast<std::int64_t>(version))
                .bind(4, rc)
                .bind(5, session_.now_usecs())
                .run() > 0)
          return;
        auto q = db.query(
            "SELECT retention_class FROM event_types WHERE tenant_id = ?1 AND event_type = ?2 AND version = ?3");
        q.bind(1, tenant).bind(2, event_type).bind(3, static_cast<std::int64_t>(version));
        q.step();
        const std::string current = q.text(0);
        while (q.step()) {
        }
        if (current != rc) fy::core::throw_event_type_conflict(event_type, version, current);
      });
    });
  });
}

void SqliteTopics::create(std::string_view tenant, std::string_view topic, const TopicOptions& options) {
  session_.measure("topic.create", [&] {
    core_guarded([&] {
      check_names(tenant, topic);
      fy::core::TopicOptions o;
      fy::core::set_topic_option(o, "max_subscriptions", std::to_string(options.max_subscriptions));
      fy::core::set_topic_duration(o, "retention", {0, 0, options.retention.count()});
      fy::core::set_topic_duration(o, "dedup_window", {0, 0, options.dedup_window.count()});
      session_.write([&](Db& db) {
        if (db.query("INSERT INTO topics (tenant_id, topic, max_subscriptions, retention_usecs, dedup_window_usecs,"
                     "   created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING")
                .bind(1, tenant)
                .bind(2, topic)
                .bind(3, static_cast<std::int64_t>(o.max_subscriptions))
                .bind(4, o.retention_usecs)
                .bind(5, o.dedup_window_usecs)
                .bind(6, session_.now_usecs())
                .run() == 0)
          fy::core::throw_topic_exists(tenant, topic);
      });
    });
  });
}

namespace {
std::int64_t count_subscriptions(Db& db, std::string_view tenant, std::string_view topic) {
  auto q = db.query("SELECT count(*) FROM subscriptions WHERE tenant_id = ?1 AND topic = ?2");
  q.bind(1, tenant).bind(2, topic);
  q.step();
  const std::int64_t n = q.int64(0);
  while (q.step()) {
  }
  return n;
}

void drop_subscription_queue(Db& db, std::string_view tenant, std::string_view queue) {
  for (const char* sql : {"DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM queue_events WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM queue_retry_windows WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM queue_fair_keys WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM queues WHERE tenant_id = ?1 AND queue = ?2",
                          "DELETE FROM subscription_event_types WHERE tenant_id = ?1 AND subscription = ?2",
                          "DELETE FROM subscriptions WHERE tenant_id = ?1 AND subscription = ?2"})
    db.query(sql).bind(1, tenant).bind(2, queue).run();
}
}  // namespace

bool SqliteTopics::drop(std::string_view tenant, std::string_view topic) {
  return session_.measure("topic.drop", [&] {
    return core_guarded([&] {
      check_names(tenant, topic);
      bool dropped = false;
      session_.write([&](Db& db) {
        std::vector<std::string> subs;
        auto q = db.query("SELECT subscription FROM subscriptions WHERE tenant_id = ?1 AND topic = ?2");
        q.bind(1, tenant).bind(2, topic);
        while (q.step()) subs.push_back(q.text(0));
        for (const std::string& s : subs) drop_subscription_queue(db, tenant, s);
        db.query("DELETE FROM topic_events WHERE tenant_id = ?1 AND topic = ?2").bind(1, tenant).bind(2, topic).run();
        dropped =
            db.query("DELETE FROM topics WHERE tenant_id = ?1 AND topic = ?2").bind(1, tenant).bind(2, topic).run() > 0;
      });
      return dropped;
    });
  });
}

std::vector<TopicInfo> SqliteTopics::list(std::string_view tenant) {
  return session_.measure("topic.list", [&] {
    return core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      std::vector<TopicInfo> out;
      session_.read([&](Db& db) {
        auto q = db.query(
            "SELECT t.topic, t.max_subscriptions, t.retention_usecs, t.dedup_window_usecs, s.subscription"
            "  FROM topics t LEFT JOIN subscriptions s ON s.tenant_id = t.tenant_id AND s.topic = t.topic"
            " WHERE t.tenant_id = ?1 ORDER BY t.topic, s.subscription");
        q.bind(1, tenant);
        while (q.step()) {
          if (out.empty() || out.back().topic != q.text(0)) {
            TopicInfo t;
            t.topic = q.text(0);
            t.options.max_subscriptions = static_cast<int>(q.int64(1));
            t.options.retention = Duration(q.int64(2));
            t.options.dedup_window = Duration(q.int64(3));
            out.push_back(std::move(t));
          }
          if (!q.is_null(4)) out.back().subscriptions.push_back(q.text(4));
        }
      });
      return out;
    });
  });
}

void SqliteTopics::subscribe(std::string_view tenant, std::string_view topic, std::string_view subscription,
                             const SubscriptionOptions& options) {
  session_.measure("topic.subscribe", [&] {
    core_guarded([&] {
      check_names(tenant, topic);
      fy::core::check_name("subscription", true, subscription, fy::core::max_queue_name_bytes);
      if (options.event_types) {
        if (options.event_types->empty())
          throw Error(sqlstate::invalid_parameter, "subscription option event_types must list at least one type");
        for (const auto& [type, range] : *options.event_types) {
          fy::core::check_name("event_types entry", true, type, fy::core::max_event_type_bytes);
          fy::core::check_event_version("event_types min", range.min);
          fy::core::check_event_version("event_types max", range.max);
          if (range.min > range.max) throw Error(sqlstate::invalid_parameter, "event_types min must not be over max");
        }
      }
      const fy::core::QueueOptions o = core_options(options.queue);
      fy::core::validate(o);
      session_.write([&](Db& db) {
        const TopicRow t = load_topic(db, tenant, topic);
        if (count_subscriptions(db, tenant, topic) >= t.options.max_subscriptions)
          fy::core::throw_too_many_subscriptions(topic, t.options.max_subscriptions);
        auto exists = db.query("SELECT 1 FROM queues WHERE tenant_id = ?1 AND queue = ?2");
        exists.bind(1, tenant).bind(2, subscription);
        if (exists.step())
          throw Error(sqlstate::duplicate_object, "queue \"" + std::string(subscription) +
                                                      "\" already exists for tenant \"" + std::string(tenant) + "\"");
        while (exists.step()) {
        }
      });
      // The queue through the queue creation path, then the subscription: one transaction in a
      // Transaction; on its own, a failure after the queue exists removes it again.
      SqliteQueues(session_).create(tenant, subscription, options.queue);
      try {
        session_.write([&](Db& db) {
          const TopicRow t = load_topic(db, tenant, topic);
          // Counted again in the transaction that inserts: concurrent subscribes take turns here.
          if (count_subscriptions(db, tenant, topic) >= t.options.max_subscriptions)
            fy::core::throw_too_many_subscriptions(topic, t.options.max_subscriptions);
          db.query(
                "INSERT INTO subscriptions (tenant_id, subscription, topic, on_full, filtered, created_at)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
              .bind(1, tenant)
              .bind(2, subscription)
              .bind(3, topic)
              .bind(4, options.on_full == OnFull::DeadLetter ? "dead_letter" : "reject")
              .bind(5, static_cast<std::int64_t>(options.event_types ? 1 : 0))
              .bind(6, session_.now_usecs())
              .run();
          if (options.event_types)
            for (const auto& [type, range] : *options.event_types)
              db.query(
                    "INSERT INTO subscription_event_types (tenant_id, subscription, event_type, min_version,"
                    "   max_version) VALUES (?1, ?2, ?3, ?4, ?5)")
                  .bind(1, tenant)
                  .bind(2, subscription)
                  .bind(3, type)
                  .bind(4, static_cast<std::int64_t>(range.min))
                  .bind(5, static_cast<std::int64_t>(range.max))
                  .run();
          if (options.start == StartAt::Oldest)
            replay(db, t, std::string(subscription), std::numeric_limits<std::int64_t>::min(), session_.now_usecs());
        });
      } catch (...) {
        try {
          session_.write([&](Db& db) { drop_subscription_queue(db, tenant, subscription); });
        } catch (...) {  // in a failed Transaction nothing more runs; its rollback removes the queue
        }
        throw;
      }
    });
  });
}

bool SqliteTopics::unsubscribe(std::string_view tenant, std::string_view topic, std::string_view subscription) {
  return session_.measure("topic.unsubscribe", [&] {
    return core_guarded([&] {
      check_names(tenant, topic);
      fy::core::check_name("subscription", true, subscription, fy::core::max_queue_name_bytes);
      bool removed = false;
      session_.write([&](Db& db) {
        load_topic(db, tenant, topic);
        auto q = db.query("SELECT 1 FROM subscriptions WHERE tenant_id = ?1 AND subscription = ?2 AND topic = ?3");
        q.bind(1, tenant).bind(2, subscription).bind(3, topic);
        removed = q.step();
        while (q.step()) {
        }
        if (removed) drop_subscription_queue(db, tenant, subscription);
      });
      return removed;
    });
  });
}

std::int64_t SqliteTopics::publish(std::string_view tenant, std::string_view topic, const Event& event) {
  return session_.measure("topic.publish", [&] {
    return core_guarded([&] {
      check_event(tenant, topic, event);
      std::int64_t seq = 0;
      session_.write([&](Db& db) { seq = publish_all(db, tenant, topic, {event}, session_.now_usecs()).front(); });
      return seq;
    });
  });
}

std::vector<std::int64_t> SqliteTopics::publish_batch(std::string_view tenant, std::string_view topic,
                                                      const std::vector<Event>& events) {
  return session_.measure("topic.publish_batch", [&] {
    return core_guarded([&] {
      if (events.empty()) return std::vector<std::int64_t>{};
      for (const Event& e : events) {
        check_event(tenant, topic, e);
        if (e.event_type != events.front().event_type || e.version != events.front().version ||
            e.priority != events.front().priority)
          throw Error(ErrorKind::InvalidArgument, "22023",
                      "a batch's events must share event_type, version and priority");
      }
      std::vector<std::int64_t> seqs;
      session_.write([&](Db& db) { seqs = publish_all(db, tenant, topic, events, session_.now_usecs()); });
      return seqs;
    });
  });
}

std::int64_t SqliteTopics::rewind(std::string_view tenant, std::string_view topic, std::string_view subscription,
                                  TimePoint since) {
  return session_.measure("topic.rewind", [&] {
    return core_guarded([&] {
      check_names(tenant, topic);
      fy::core::check_name("subscription", true, subscription, fy::core::max_queue_name_bytes);
      std::int64_t n = 0;
      session_.write([&](Db& db) {
        const TopicRow t = load_topic(db, tenant, topic);
        if (routes(db, t, "", std::string(subscription)).empty())
          fy::core::throw_unknown_subscription(topic, subscription);
        n = replay(db, t, std::string(subscription), unix_usecs(since), session_.now_usecs());
      });
      return n;
    });
  });
}

std::vector<EventDelivery> SqliteTopics::claim(std::string_view tenant, std::string_view subscription,
                                               std::string_view consumer, int max_messages,
                                               std::optional<Duration> visibility) {
  return session_.measure("topic.claim", [&] {
    return core_guarded([&] {
      std::vector<EventDelivery> out;
      session_.write([&](Db& db) {
        const Queue queue = load(db, tenant, subscription);
        auto s = db.query("SELECT topic FROM subscriptions WHERE tenant_id = ?1 AND subscription = ?2");
        s.bind(1, tenant).bind(2, subscription);
        if (!s.step()) fy::core::throw_unknown_subscription("(any)", subscription);
        const std::string topic = s.text(0);
        while (s.step()) {
        }
        for (Delivery& d :
             claim_in(db, queue, consumer, max_messages, visibility_usecs(queue, visibility), session_.now_usecs())) {
          EventDelivery e;
          e.topic = topic;
          if (d.event_id) {
            auto q = db.query(
                "SELECT event_type, version, event_seq FROM topic_events WHERE tenant_id = ?1 AND topic = ?2"
                " AND event_id = ?3");
            q.bind(1, tenant).bind(2, topic).bind(3, *d.event_id);
            if (q.step()) {
              e.event_type = q.text(0);
              e.version = static_cast<int>(q.int64(1));
              e.event_seq = q.int64(2);
            }
            while (q.step()) {
            }
          }
          if (e.event_seq == 0)
            throw Error(ErrorKind::Corruption, "XX000",
                        "a delivery of subscription " + std::string(subscription) + " refers to no stored event");
          e.delivery = std::move(d);
          out.push_back(std::move(e));
        }
      });
      return out;
    });
  });
}

std::vector<SubscriptionLag> SqliteTopics::lag(std::string_view tenant, std::string_view topic,
                                               ReadClass /*read: one file*/) {
  return session_.measure("topic.lag", [&] {
    return core_guarded([&] {
      check_names(tenant, topic);
      std::vector<SubscriptionLag> out;
      session_.read([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        auto q = db.query(
            "SELECT s.subscription,"
            "  (SELECT count(*) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.queue = s.subscription"
            "     AND m.state = 'pending' AND (m.claim_token IS NULL OR m.visible_at <= ?3)),"
            "  (SELECT count(*) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.queue = s.subscription"
            "     AND m.state = 'pending' AND m.claim_token IS NOT NULL AND m.visible_at > ?3),"
            "  (SELECT count(*) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.queue = s.subscription"
            "     AND m.state = 'dead'),"
            "  (SELECT min(enqueued_at) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.queue = s.subscription"
            "     AND m.state = 'pending'),"
            "  (SELECT max(finished_at) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.queue = s.subscription"
            "     AND m.state = 'acked')"
            "  FROM subscriptions s WHERE s.tenant_id = ?1 AND s.topic = ?2 ORDER BY s.subscription");
        q.bind(1, tenant).bind(2, topic).bind(3, now);
        while (q.step()) {
          SubscriptionLag l;
          l.topic = std::string(topic);
          l.subscription = q.text(0);
          l.backlog = q.int64(1);
          l.in_flight = q.int64(2);
          l.dead = q.int64(3);
          if (!q.is_null(4)) l.oldest_unacked_age = Duration(now - q.int64(4));
          if (!q.is_null(5)) l.last_ack_at = from_unix_usecs(q.int64(5));
          out.push_back(std::move(l));
        }
        for (SubscriptionLag& l : out) {
          const Queue queue = load(db, tenant, l.subscription);
          l.pressure = fy::core::pressure(queue.options, queue.used);
        }
      });
      return out;
    });
  });
}

}  // namespace forgeyard::detail
