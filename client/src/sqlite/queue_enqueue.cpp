// Producing in the SQLite store: enqueue, with admission by priority class, event_id
// deduplication and partition heads; the twin of extension/queue_enqueue.cpp.
#include <optional>
#include <string>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

namespace sqlite_queue {

// Room for one message of `bytes` in class `priority`, or FY020 (the extension's words).
void admit(Db& db, Queue& queue, int priority, std::int64_t bytes, bool write_usage) {
  const fy::core::Usage budget{queue.options.max_messages, queue.options.max_bytes};
  if (!fy::core::admits(queue.options, priority, queue.used, budget, bytes))
    fy::core::throw_queue_full(queue.name, queue.options, priority);
  queue.used.messages += 1;
  queue.used.bytes += bytes;
  if (write_usage) change_usage(db, queue, 1, bytes);
}

// Partition-ordered queues count partition keys (the head: a key's only pending message), queues
// with max_in_flight_per_key fairness keys (a head while fewer than the limit are and none waits).
bool join_key(Db& db, const Queue& queue, const std::optional<std::string>& key) {
  if (!key) return true;
  if (queue.options.partitioned) {
    auto q = db.query(
        "INSERT INTO queue_partitions (tenant_id, queue, partition_key, pending) VALUES (?1, ?2, ?3, 1)"
        " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = pending + 1 RETURNING pending");
    q.bind(1, queue.tenant).bind(2, queue.name).bind(3, *key);
    return q.step() && q.int64(0) == 1;
  }
  auto q = db.query(
      "INSERT INTO queue_partitions (tenant_id, queue, partition_key, pending, heads) VALUES (?1, ?2, ?3, 1, 1)"
      " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = pending + 1,"
      "   heads = heads + (pending = heads AND heads < ?4) RETURNING pending = heads");
  q.bind(1, queue.tenant).bind(2, queue.name).bind(3, *key).bind(4, queue.options.max_in_flight_per_key);
  return q.step() && q.int64(0) != 0;
}

// One message; with `batch`, its admission is counted there and written by the caller.
std::int64_t enqueue_one(Db& db, Queue& queue, const OutgoingMessage& m, std::int64_t now, fy::core::Usage* batch) {
  const fy::core::QueueOptions& o = queue.options;
  const int priority = priority_index(m.priority);
  const auto bytes = static_cast<std::int64_t>(m.payload.size());
  if (bytes > o.max_payload_bytes) fy::core::throw_payload_too_large(queue.name, o, bytes);
  if (o.partitioned && !m.partition_key) fy::core::throw_partition_key_required(queue.name);
  if (m.partition_key) fy::core::check_name("partition_key", true, *m.partition_key, fy::core::max_partition_key_bytes);
  if (m.fairness_key) fy::core::check_name("fairness_key", true, *m.fairness_key, fy::core::max_partition_key_bytes);
  if (m.resource) fy::core::check_name("resource", true, *m.resource, fy::core::max_resource_bytes);
  if (m.delay.count() != 0)
    fy::core::check_duration("delay", {0, 0, m.delay.count()}, fy::core::max_queue_duration_usecs);
  // Only an event_id needs the payload's digest (a repeat with another payload is FY011).
  const std::string digest = m.event_id ? fy::core::sha256_hex(m.payload) : std::string();
  std::optional<std::string> event_id;
  if (m.event_id) {
    event_id = canonical_uuid(*m.event_id);
    auto q = db.query(
        "SELECT msg_id, payload_digest FROM queue_events"
        " WHERE tenant_id = ?1 AND queue = ?2 AND event_id = ?3 AND expires_at > ?4");
    q.bind(1, queue.tenant).bind(2, queue.name).bind(3, *event_id).bind(4, now);
    if (q.step()) {
      if (q.text(1) != digest) fy::core::throw_event_id_mismatch(q.int64(0));
      return q.int64(0);
    }
  }
  admit(db, queue, priority, bytes, batch == nullptr);
  if (batch != nullptr)
    batch->messages += 1, batch->bytes += bytes;
  else
    admit_rate(db, queue, 1, now);
  const bool is_head = join_key(db, queue, fy::core::group_key(o, m.partition_key, m.fairness_key));
  auto insert = db.query(
      "INSERT INTO messages (tenant_id, queue, state, priority, partition_key, is_head, event_id, payload, bytes,"
      "   enqueued_at, visible_at, fairness_key, resource, pass)"
      " VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (o.fairness)
    insert.bind(13, next_pass(db, queue, priority, m.fairness_key));
  else
    insert.bind_null(13);
  insert.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(priority));
  if (m.partition_key)
    insert.bind(4, *m.partition_key);
  else
    insert.bind_null(4);
  insert.bind(5, static_cast<std::int64_t>(is_head ? 1 : 0));
  if (event_id)
    insert.bind(6, *event_id);
  else
    insert.bind_null(6);
  insert.bind_blob(7, m.payload).bind(8, bytes).bind(9, now).bind(10, now + m.delay.count());
  for (const auto& [index, value] : {std::pair{11, &m.fairness_key}, std::pair{12, &m.resource}})
    if (*value)
      insert.bind(index, **value);
    else
      insert.bind_null(index);
  insert.run();
  const std::int64_t msg_id = db.last_insert_rowid();
  if (event_id)
    db.query(
          "INSERT INTO queue_events (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO UPDATE SET msg_id = excluded.msg_id,"
          " payload_digest = excluded.payload_digest, expires_at = excluded.expires_at")
        .bind(1, queue.tenant)
        .bind(2, queue.name)
        .bind(3, *event_id)
        .bind(4, msg_id)
        .bind(5, digest)
        .bind(6, now + queue.options.dedup_window_usecs)
        .run();
  return msg_id;
}

}  // namespace sqlite_queue

using namespace sqlite_queue;

std::int64_t SqliteQueues::enqueue(std::string_view tenant, std::string_view queue, const OutgoingMessage& message) {
  return session_.measure("queue.enqueue", [&] {
    return core_guarded([&] {
      std::int64_t msg_id = 0;
      session_.write([&](Db& db) {
        Queue q = load(db, tenant, queue);
        msg_id = enqueue_one(db, q, message, session_.now_usecs());
      });
      return msg_id;
    });
  });
}

std::vector<std::int64_t> SqliteQueues::enqueue_many(std::string_view tenant, std::string_view queue,
                                                     const std::vector<OutgoingMessage>& messages) {
  return session_.measure("queue.enqueue_many", [&] {
    return core_guarded([&] {
      std::vector<std::int64_t> ids;
      if (messages.empty()) return ids;
      session_.write([&](Db& db) {
        ids.clear();
        const std::int64_t now = session_.now_usecs();
        // Admitted against the counters as the messages before left them; written once.
        Queue q = load(db, tenant, queue);
        fy::core::Usage admitted;
        for (const OutgoingMessage& m : messages) ids.push_back(enqueue_one(db, q, m, now, &admitted));
        admit_rate(db, q, admitted.messages, now);
        if (admitted.messages > 0) change_usage(db, q, admitted.messages, admitted.bytes);
      });
      return ids;
    });
  });
}

}  // namespace forgeyard::detail
