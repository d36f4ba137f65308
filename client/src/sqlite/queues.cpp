// Queues and the inbox in the SQLite store: the extension's rules and answers, decided by the
// same core code. Writers are serialized by BEGIN IMMEDIATE, so claims never overlap.
#include "sqlite/queues.hpp"

#include <algorithm>
#include <random>
#include <set>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"

namespace forgeyard::detail {

namespace {



struct Queue {
  std::string tenant, name;
  fy::core::QueueOptions options;
  fy::core::Usage used;
};

void check_queue_name(std::string_view tenant, std::string_view queue) {
  fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
  fy::core::check_name("queue", true, queue, fy::core::max_queue_name_bytes);
}

Queue load(Db& db, std::string_view tenant, std::string_view queue) {
  check_queue_name(tenant, queue);
  auto q = db.query(
      "SELECT max_messages, max_bytes, max_payload_bytes, visibility_usecs, max_attempts, backoff_base_usecs,"
      "       backoff_max_usecs, ordering = 'partition', dead_letter_payload = 'keep', retain_acked_usecs, max_dead,"
      "       dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control, admit_realtime,"
      "       admit_interactive, admit_background, admit_bulk, notify, used_messages, used_bytes"
      "  FROM queues WHERE tenant_id = ?1 AND queue = ?2");
  q.bind(1, tenant).bind(2, queue);
  if (!q.step())
    throw Error("42704", "queue \"" + std::string(queue) + "\" does not exist for tenant \"" + std::string(tenant) + "\"");
  Queue out{std::string(tenant), std::string(queue), {}, {}};
  fy::core::QueueOptions& o = out.options;
  o.max_messages = q.int64(0), o.max_bytes = q.int64(1), o.max_payload_bytes = q.int64(2);
  o.visibility_usecs = q.int64(3), o.max_attempts = q.int64(4), o.backoff_base_usecs = q.int64(5);
  o.backoff_max_usecs = q.int64(6), o.partitioned = q.int64(7) != 0, o.keep_dead_payload = q.int64(8) != 0;
  o.retain_acked_usecs = q.int64(9), o.max_dead = q.int64(10), o.dead_retention_usecs = q.int64(11);
  o.dedup_window_usecs = q.int64(12);
  for (int p = 0; p < fy::core::priority_classes; ++p) o.admit_percent[p] = q.int64(13 + p);
  o.notify = q.int64(19) != 0;
  out.used = {q.int64(20), q.int64(21)};
  return out;
}

void change_usage(Db& db, const Queue& queue, std::int64_t messages, std::int64_t bytes) {
  db.query("UPDATE queues SET used_messages = used_messages + ?3, used_bytes = used_bytes + ?4"
           " WHERE tenant_id = ?1 AND queue = ?2")
      .bind(1, queue.tenant).bind(2, queue.name).bind(3, messages).bind(4, bytes).run();
}

// Room for one message of `bytes` in class `priority`, or FY020 (the extension's words).
void admit(Db& db, const Queue& queue, int priority, std::int64_t bytes) {
  const fy::core::Usage budget{queue.options.max_messages, queue.options.max_bytes};
  if (!fy::core::admits(queue.options, priority, queue.used, budget, bytes))
    throw Error("FY020",
                "queue \"" + queue.name + "\" is full for priority class " + fy::core::priority_names[priority],
                "class " + std::string(fy::core::priority_names[priority]) + " is admitted up to " +
                    std::to_string(queue.options.admit_percent[priority]) + "% of max_messages and max_bytes");
  change_usage(db, queue, 1, bytes);
}

// Only partition-ordered queues track keys; elsewhere a partition_key is just carried along.
bool join_partition(Db& db, const Queue& queue, const std::optional<std::string>& key) {
  if (!key || !queue.options.partitioned) return true;
  auto q = db.query(
      "INSERT INTO queue_partitions (tenant_id, queue, partition_key, pending) VALUES (?1, ?2, ?3, 1)"
      " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = pending + 1 RETURNING pending");
  q.bind(1, queue.tenant).bind(2, queue.name).bind(3, *key);
  return q.step() && q.int64(0) == 1;
}

// A message leaves the live queue: room back, and the next of its partition becomes the head.
void release(Db& db, const Queue& queue, std::int64_t bytes, const std::optional<std::string>& key) {
  change_usage(db, queue, -1, -bytes);
  if (!key || !queue.options.partitioned) return;
  db.query("UPDATE queue_partitions SET pending = pending - 1 WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3")
      .bind(1, queue.tenant).bind(2, queue.name).bind(3, *key).run();
  db.query("DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3 AND pending = 0")
      .bind(1, queue.tenant).bind(2, queue.name).bind(3, *key).run();
  db.query("UPDATE messages SET is_head = 1 WHERE msg_id = (SELECT msg_id FROM messages WHERE tenant_id = ?1"
           " AND queue = ?2 AND partition_key = ?3 AND state = 'pending' ORDER BY msg_id LIMIT 1)")
      .bind(1, queue.tenant).bind(2, queue.name).bind(3, *key).run();
}

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// The forms PostgreSQL's uuid input accepts (optional braces, dashes optional), canonicalized.
std::string canonical_uuid(std::string_view s) {
  std::string_view body = s;
  if (body.size() >= 2 && body.front() == '{' && body.back() == '}') body = body.substr(1, body.size() - 2);
  std::string hex;
  for (char c : body)
    if (c != '-') hex.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const std::string canonical = hex.size() == 32 ? hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) +
                                                       "-" + hex.substr(16, 4) + "-" + hex.substr(20)
                                                 : std::string(body);
  if (!is_uuid(canonical)) throw Error("22P02", "invalid input syntax for type uuid: \"" + std::string(s) + "\"");
  return canonical;
}

double unit_random() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

std::int64_t visibility_usecs(const Queue& queue, std::optional<Duration> visibility) {
  return visibility ? fy::core::check_duration("visibility", {0, 0, visibility->count()},
                                               fy::core::max_queue_duration_usecs)
                    : queue.options.visibility_usecs;
}

std::int64_t enqueue_one(Db& db, const Queue& queue, const OutgoingMessage& m, std::int64_t now) {
  const fy::core::QueueOptions& o = queue.options;
  const int priority = priority_index(m.priority);
  const auto bytes = static_cast<std::int64_t>(m.payload.size());
  if (bytes > o.max_payload_bytes)
    throw Error("FY021", "payload of " + std::to_string(bytes) + " bytes is over the limit of queue \"" + queue.name + "\"",
                "max_payload_bytes is " + std::to_string(o.max_payload_bytes) +
                    "; store the bytes elsewhere and send a reference");
  if (o.partitioned && !m.partition_key)
    throw Error("22023", "partition_key is required: queue \"" + queue.name + "\" is partition-ordered");
  if (m.partition_key) fy::core::check_name("partition_key", true, *m.partition_key, fy::core::max_partition_key_bytes);
  if (m.delay.count() != 0) fy::core::check_duration("delay", {0, 0, m.delay.count()}, fy::core::max_queue_duration_usecs);
  const std::string digest = fy::core::sha256_hex(m.payload);
  std::optional<std::string> event_id;
  if (m.event_id) {
    event_id = canonical_uuid(*m.event_id);
    auto q = db.query("SELECT msg_id, payload_digest FROM queue_events"
                      " WHERE tenant_id = ?1 AND queue = ?2 AND event_id = ?3 AND expires_at > ?4");
    q.bind(1, queue.tenant).bind(2, queue.name).bind(3, *event_id).bind(4, now);
    if (q.step()) {
      if (q.text(1) != digest)
        throw Error("FY011", "event_id was enqueued before with a different payload",
                    "message " + std::to_string(q.int64(0)) + " carries this event_id");
      return q.int64(0);
    }
  }
  admit(db, queue, priority, bytes);
  const bool is_head = join_partition(db, queue, m.partition_key);
  auto insert = db.query(
      "INSERT INTO messages (tenant_id, queue, state, priority, partition_key, is_head, event_id, payload, bytes,"
      "   enqueued_at, visible_at) VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING msg_id");
  insert.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(priority));
  if (m.partition_key) insert.bind(4, *m.partition_key); else insert.bind_null(4);
  insert.bind(5, static_cast<std::int64_t>(is_head ? 1 : 0));
  if (event_id) insert.bind(6, *event_id); else insert.bind_null(6);
  insert.bind_blob(7, m.payload).bind(8, bytes).bind(9, now).bind(10, now + m.delay.count());
  insert.step();
  const std::int64_t msg_id = insert.int64(0);
  while (insert.step()) {
  }
  if (event_id)
    db.query("INSERT INTO queue_events (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)"
             " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO UPDATE SET msg_id = excluded.msg_id,"
             " payload_digest = excluded.payload_digest, expires_at = excluded.expires_at")
        .bind(1, queue.tenant).bind(2, queue.name).bind(3, *event_id).bind(4, msg_id).bind(5, digest)
        .bind(6, now + queue.options.dedup_window_usecs).run();
  return msg_id;
}

std::vector<Delivery> claim_in(Db& db, const Queue& queue, std::string_view consumer, int max_messages,
                               std::int64_t visibility, std::int64_t now) {
  if (max_messages < 1 || max_messages > fy::core::max_claim_batch)
    throw Error("22023", "max_messages must be between 1 and " + std::to_string(fy::core::max_claim_batch));
  fy::core::check_name("consumer", true, consumer, fy::core::max_consumer_bytes);
  std::vector<Delivery> out;
  for (int p = 0; p < fy::core::priority_classes && static_cast<int>(out.size()) < max_messages; ++p) {
    std::vector<std::int64_t> ids;
    {
      auto q = db.query("SELECT msg_id FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND priority = ?3"
                        " AND state = 'pending' AND is_head AND visible_at <= ?4 ORDER BY visible_at, msg_id LIMIT ?5");
      q.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(p)).bind(4, now)
          .bind(5, static_cast<std::int64_t>(max_messages - out.size()));
      while (q.step()) ids.push_back(q.int64(0));
    }
    std::sort(ids.begin(), ids.end());
    for (std::int64_t id : ids) {
      auto token = db.query("UPDATE claim_tokens SET last = last + 1 RETURNING last");
      token.step();
      const std::int64_t claim_token = token.int64(0);
      while (token.step()) {
      }
      auto q = db.query(
          "UPDATE messages SET claim_token = ?2, attempt = attempt + 1, visible_at = ?3, claimed_by = ?4"
          " WHERE msg_id = ?1 RETURNING msg_id, event_id, partition_key, priority, attempt, claim_token, payload,"
          " enqueued_at, bytes");
      q.bind(1, id).bind(2, claim_token).bind(3, now + visibility).bind(4, consumer);
      if (!q.step()) continue;
      Delivery d;
      d.msg_id = q.int64(0);
      if (!q.is_null(1)) d.event_id = q.text(1);
      if (!q.is_null(2)) d.partition_key = q.text(2);
      d.priority = priority_at(static_cast<int>(q.int64(3)));
      d.attempt = static_cast<int>(q.int64(4));
      d.claim_token = q.int64(5);
      d.payload = q.is_null(6) ? Bytes{} : q.blob(6);
      d.enqueued_at = from_unix_usecs(q.int64(7));
      const std::int64_t bytes = q.int64(8);
      while (q.step()) {
      }
      if (d.attempt > queue.options.max_attempts) {
        // Its visibility ran out on every attempt (the consumer died or hung): dead-letter it.
        db.query("UPDATE messages SET state = 'dead', claim_token = NULL, finished_at = ?2, is_head = 0,"
                 " last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
                 " payload = CASE WHEN ?3 THEN payload END WHERE msg_id = ?1")
            .bind(1, d.msg_id).bind(2, now).bind(3, static_cast<std::int64_t>(queue.options.keep_dead_payload ? 1 : 0))
            .run();
        release(db, queue, bytes, d.partition_key);
        continue;
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

struct Current {
  std::string state;
  std::optional<std::int64_t> claim_token;
  std::int64_t visible_at, attempt, bytes;
  std::optional<std::string> partition_key;
};

std::optional<Current> current(Db& db, const Queue& queue, std::int64_t msg_id) {
  auto q = db.query("SELECT state, claim_token, visible_at, attempt, bytes, partition_key FROM messages"
                    " WHERE msg_id = ?1 AND tenant_id = ?2 AND queue = ?3");
  q.bind(1, msg_id).bind(2, queue.tenant).bind(3, queue.name);
  if (!q.step()) return std::nullopt;
  return Current{q.text(0), q.is_null(1) ? std::nullopt : std::optional<std::int64_t>(q.int64(1)), q.int64(2),
                 q.int64(3), q.int64(4), q.is_null(5) ? std::nullopt : std::optional<std::string>(q.text(5))};
}

[[noreturn]] void throw_stale_claim(std::int64_t msg_id, std::int64_t token) {
  throw Error("FY001",
              "claim token " + std::to_string(token) + " is not the current delivery of message " + std::to_string(msg_id),
              "the visibility ran out and the message was claimed again, or it was nacked; stop work on it");
}

void ack_in(Db& db, const Queue& queue, std::int64_t msg_id, std::int64_t token, std::int64_t now) {
  std::optional<Current> c = current(db, queue, msg_id);
  if (!c || c->state != "pending") return;  // already acked, dead or gone: a no-op
  if (c->claim_token != token) throw_stale_claim(msg_id, token);
  if (queue.options.retain_acked_usecs > 0)
    db.query("UPDATE messages SET state = 'acked', finished_at = ?2, payload = NULL WHERE msg_id = ?1")
        .bind(1, msg_id).bind(2, now).run();
  else
    db.query("DELETE FROM messages WHERE msg_id = ?1").bind(1, msg_id).run();
  release(db, queue, c->bytes, c->partition_key);
}

}  // namespace

void SqliteQueues::create(std::string_view tenant, std::string_view queue, const QueueOptions& options) {
  session_.measure("queue.create", [&] {
    core_guarded([&] {
      check_queue_name(tenant, queue);
      const fy::core::QueueOptions o = core_options(options);
      fy::core::validate(o);
      session_.write([&](Db& db) {
        auto q = db.query(
            "INSERT INTO queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,"
            "   max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,"
            "   max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,"
            "   admit_realtime, admit_interactive, admit_background, admit_bulk, notify, created_at)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
            "         ?22, ?23) ON CONFLICT DO NOTHING");
        q.bind(1, tenant).bind(2, queue).bind(3, o.max_messages).bind(4, o.max_bytes).bind(5, o.max_payload_bytes)
            .bind(6, o.visibility_usecs).bind(7, o.max_attempts).bind(8, o.backoff_base_usecs)
            .bind(9, o.backoff_max_usecs).bind(10, o.partitioned ? "partition" : "none")
            .bind(11, o.keep_dead_payload ? "keep" : "drop").bind(12, o.retain_acked_usecs).bind(13, o.max_dead)
            .bind(14, o.dead_retention_usecs).bind(15, o.dedup_window_usecs);
        for (int p = 0; p < fy::core::priority_classes; ++p) q.bind(16 + p, o.admit_percent[p]);
        q.bind(22, static_cast<std::int64_t>(o.notify ? 1 : 0)).bind(23, session_.now_usecs());
        if (q.run() == 0)
          throw Error("42710", "queue \"" + std::string(queue) + "\" already exists for tenant \"" +
                                   std::string(tenant) + "\"");
      });
    });
  });
}

bool SqliteQueues::drop(std::string_view tenant, std::string_view queue) {
  return session_.measure("queue.drop", [&] {
    return core_guarded([&] {
      check_queue_name(tenant, queue);
      bool dropped = false;
      session_.write([&](Db& db) {
        for (const char* sql : {"DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_events WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2"})
          db.query(sql).bind(1, tenant).bind(2, queue).run();
        dropped = db.query("DELETE FROM queues WHERE tenant_id = ?1 AND queue = ?2").bind(1, tenant).bind(2, queue).run() > 0;
      });
      return dropped;
    });
  });
}

std::int64_t SqliteQueues::enqueue(std::string_view tenant, std::string_view queue, const OutgoingMessage& message) {
  return session_.measure("queue.enqueue", [&] {
    return core_guarded([&] {
      std::int64_t msg_id = 0;
      session_.write([&](Db& db) { msg_id = enqueue_one(db, load(db, tenant, queue), message, session_.now_usecs()); });
      return msg_id;
    });
  });
}

std::vector<Delivery> SqliteQueues::claim(std::string_view tenant, std::string_view queue, std::string_view consumer,
                                          int max_messages, std::optional<Duration> visibility) {
  return session_.measure("queue.claim", [&] {
    return core_guarded([&] {
      std::vector<Delivery> out;
      session_.write([&](Db& db) {
        const Queue q = load(db, tenant, queue);
        out = claim_in(db, q, consumer, max_messages, visibility_usecs(q, visibility), session_.now_usecs());
      });
      return out;
    });
  });
}

void SqliteQueues::ack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token) {
  session_.measure("queue.ack", [&] {
    core_guarded([&] {
      session_.write([&](Db& db) { ack_in(db, load(db, tenant, queue), msg_id, claim_token, session_.now_usecs()); });
    });
  });
}

std::vector<Delivery> SqliteQueues::ack_and_claim(std::string_view tenant, std::string_view queue,
                                                  std::string_view consumer, const std::vector<Ack>& acks,
                                                  int max_messages, std::optional<Duration> visibility) {
  return session_.measure("queue.ack_and_claim", [&] {
    return core_guarded([&] {
      std::vector<Delivery> out;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const Queue q = load(db, tenant, queue);
        for (const auto& [msg_id, token] : acks) ack_in(db, q, msg_id, token, now);
        out = claim_in(db, q, consumer, max_messages, visibility_usecs(q, visibility), now);
      });
      return out;
    });
  });
}

NackOutcome SqliteQueues::nack(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                               std::int64_t claim_token, std::string_view error, bool permanent) {
  return session_.measure("queue.nack", [&] {
    return core_guarded([&] {
      if (error.size() > fy::core::max_error_bytes)
        throw Error("22001", "error is longer than " + std::to_string(fy::core::max_error_bytes) + " bytes");
      NackOutcome outcome = NackOutcome::Retry;
      session_.write([&](Db& db) {
        const Queue q = load(db, tenant, queue);
        const std::int64_t now = session_.now_usecs();
        std::optional<Current> c = current(db, q, msg_id);
        if (!c || c->state != "pending" || c->claim_token != claim_token) throw_stale_claim(msg_id, claim_token);
        if (fy::core::dead_after_failure(q.options, c->attempt, permanent)) {
          db.query("UPDATE messages SET state = 'dead', claim_token = NULL, finished_at = ?2, last_error = ?3,"
                   " error_class = ?4, is_head = 0, payload = CASE WHEN ?5 THEN payload END WHERE msg_id = ?1")
              .bind(1, msg_id).bind(2, now).bind(3, error).bind(4, permanent ? "permanent" : "max_attempts")
              .bind(5, static_cast<std::int64_t>(q.options.keep_dead_payload ? 1 : 0)).run();
          release(db, q, c->bytes, c->partition_key);
          outcome = NackOutcome::Dead;
          return;
        }
        const std::int64_t delay = fy::core::retry_delay_usecs(q.options, c->attempt, unit_random());
        db.query("UPDATE messages SET claim_token = NULL, claimed_by = NULL, visible_at = ?2, last_error = ?3"
                 " WHERE msg_id = ?1")
            .bind(1, msg_id).bind(2, now + delay).bind(3, error).run();
      });
      return outcome;
    });
  });
}

TimePoint SqliteQueues::extend(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                               std::int64_t claim_token, Duration visibility) {
  return session_.measure("queue.extend", [&] {
    return core_guarded([&] {
      const std::int64_t v =
          fy::core::check_duration("visibility", {0, 0, visibility.count()}, fy::core::max_queue_duration_usecs);
      std::int64_t until = 0;
      session_.write([&](Db& db) {
        const Queue q = load(db, tenant, queue);
        const std::int64_t now = session_.now_usecs();
        std::optional<Current> c = current(db, q, msg_id);
        if (!c || c->state != "pending" || c->claim_token != claim_token || c->visible_at <= now)
          throw_stale_claim(msg_id, claim_token);
        until = now + v;
        db.query("UPDATE messages SET visible_at = ?2 WHERE msg_id = ?1").bind(1, msg_id).bind(2, until).run();
      });
      return from_unix_usecs(until);
    });
  });
}

QueueStats SqliteQueues::stats(std::string_view tenant, std::string_view queue) {
  return session_.measure("queue.stats", [&] {
    return core_guarded([&] {
      QueueStats s;
      session_.write([&](Db& db) {
        const Queue q = load(db, tenant, queue);
        const std::int64_t now = session_.now_usecs();
        auto r = db.query(
            "SELECT count(*) FILTER (WHERE state = 'pending' AND visible_at <= ?3),"
            "       count(*) FILTER (WHERE state = 'pending' AND claim_token IS NOT NULL AND visible_at > ?3),"
            "       count(*) FILTER (WHERE state = 'pending' AND claim_token IS NULL AND visible_at > ?3),"
            "       count(*) FILTER (WHERE state = 'dead'),"
            "       min(enqueued_at) FILTER (WHERE state = 'pending' AND visible_at <= ?3)"
            "  FROM messages WHERE tenant_id = ?1 AND queue = ?2");
        r.bind(1, tenant).bind(2, queue).bind(3, now);
        r.step();
        s = QueueStats{r.int64(0), r.int64(1), r.int64(2), r.int64(3), q.used.bytes,
                       r.is_null(4) ? std::nullopt : std::optional<Duration>(Duration(now - r.int64(4))),
                       fy::core::pressure(q.options, q.used)};
      });
      return s;
    });
  });
}

std::vector<DeadLetter> SqliteQueues::dead_letters(std::string_view tenant, std::string_view queue,
                                                   std::int64_t after_msg_id, int max_rows) {
  return session_.measure("queue.dead_letters", [&] {
    return core_guarded([&] {
      if (max_rows < 1 || max_rows > 10000) throw Error("22023", "max_rows must be between 1 and 10000");
      std::vector<DeadLetter> out;
      session_.write([&](Db& db) {
        load(db, tenant, queue);
        auto q = db.query(
            "SELECT msg_id, event_id, partition_key, priority, attempt, last_error, error_class, finished_at, payload"
            "  FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead' AND msg_id > ?3"
            " ORDER BY msg_id LIMIT ?4");
        q.bind(1, tenant).bind(2, queue).bind(3, after_msg_id).bind(4, static_cast<std::int64_t>(max_rows));
        while (q.step()) {
          DeadLetter d;
          d.msg_id = q.int64(0);
          if (!q.is_null(1)) d.event_id = q.text(1);
          if (!q.is_null(2)) d.partition_key = q.text(2);
          d.priority = priority_at(static_cast<int>(q.int64(3)));
          d.attempt = static_cast<int>(q.int64(4));
          d.error = q.is_null(5) ? "" : q.text(5);
          d.error_class = q.is_null(6) ? "" : q.text(6);
          d.dead_at = from_unix_usecs(q.int64(7));
          if (!q.is_null(8)) d.payload = q.blob(8);
          out.push_back(std::move(d));
        }
      });
      return out;
    });
  });
}

int SqliteQueues::redrive(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids,
                          int max_rows) {
  return session_.measure("queue.redrive", [&] {
    return core_guarded([&] {
      if (max_rows < 1 || max_rows > 10000) throw Error("22023", "max_rows must be between 1 and 10000");
      int redriven = 0;
      session_.write([&](Db& db) {
        redriven = 0;
        struct Dead {
          std::int64_t msg_id, priority, bytes;
          std::optional<std::string> key;
          bool has_payload;
        };
        std::vector<Dead> dead;
        auto pick = [&](std::optional<std::int64_t> id) {
          auto q = db.query(
              "SELECT msg_id, priority, bytes, partition_key, payload IS NOT NULL FROM messages"
              " WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead' AND (?3 IS NULL OR msg_id = ?3)"
              "   AND (?3 IS NOT NULL OR payload IS NOT NULL) ORDER BY msg_id LIMIT ?4");
          q.bind(1, tenant).bind(2, queue);
          if (id) q.bind(3, *id); else q.bind_null(3);
          q.bind(4, static_cast<std::int64_t>(max_rows));
          while (q.step())
            dead.push_back({q.int64(0), q.int64(1), q.int64(2),
                            q.is_null(3) ? std::nullopt : std::optional<std::string>(q.text(3)), q.int64(4) != 0});
        };
        Queue q = load(db, tenant, queue);
        if (msg_ids.empty()) pick(std::nullopt);
        for (std::int64_t id : std::set<std::int64_t>(msg_ids.begin(), msg_ids.end())) pick(id);
        for (const Dead& d : dead) {
          if (!d.has_payload)
            throw Error("22023", "dead letter " + std::to_string(d.msg_id) + " cannot be redriven: its payload was dropped",
                        "the queue has dead_letter_payload = drop");
          admit(db, q, static_cast<int>(d.priority), d.bytes);
          q.used.messages += 1, q.used.bytes += d.bytes;
          const bool is_head = join_partition(db, q, d.key);
          db.query("UPDATE messages SET state = 'pending', attempt = 0, claim_token = NULL, claimed_by = NULL,"
                   " visible_at = ?2, finished_at = NULL, error_class = NULL, is_head = ?3"
                   " WHERE msg_id = ?1 AND state = 'dead'")
              .bind(1, d.msg_id).bind(2, session_.now_usecs()).bind(3, static_cast<std::int64_t>(is_head ? 1 : 0)).run();
          ++redriven;
        }
      });
      return redriven;
    });
  });
}

int SqliteQueues::purge_dead(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids) {
  return session_.measure("queue.purge_dead", [&] {
    return core_guarded([&] {
      int purged = 0;
      session_.write([&](Db& db) {
        purged = 0;
        load(db, tenant, queue);
        if (msg_ids.empty()) {
          purged = db.query("DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead'")
                       .bind(1, tenant).bind(2, queue).run();
          return;
        }
        for (std::int64_t id : msg_ids)
          purged += db.query("DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead' AND msg_id = ?3")
                        .bind(1, tenant).bind(2, queue).bind(3, id).run();
      });
      return purged;
    });
  });
}

bool SqliteQueues::inbox_accept(std::string_view tenant, std::string_view consumer, std::string_view event_id) {
  return session_.measure("inbox.accept", [&] {
    return core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      fy::core::check_name("consumer", true, consumer, fy::core::max_consumer_bytes);
      const std::string id = canonical_uuid(event_id);
      bool first = false;
      session_.write([&](Db& db) {
        first = db.query("INSERT INTO inbox (tenant_id, consumer, event_id, accepted_at) VALUES (?1, ?2, ?3, ?4)"
                         " ON CONFLICT DO NOTHING")
                    .bind(1, tenant).bind(2, consumer).bind(3, id).bind(4, session_.now_usecs()).run() > 0;
      });
      return first;
    });
  });
}

}  // namespace forgeyard::detail
