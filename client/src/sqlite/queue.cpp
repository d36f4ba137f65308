// What the SQLite queue calls share (queues.hpp): loading a queue, its usage counters, giving
// room back, and the event_id form; the extension's extension/queue.cpp is its twin.
#include <string>

#include "core/core.hpp"
#include "core/uuid.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail::sqlite_queue {

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
      "       admit_interactive, admit_background, admit_bulk, notify, used_messages, used_bytes, retry_budget,"
      "       retry_budget_min, retry_budget_window_usecs, admission_rate, admission_per_usecs, max_in_flight_per_key,"
      "       fairness, aging_usecs"
      "  FROM queues WHERE tenant_id = ?1 AND queue = ?2");
  q.bind(1, tenant).bind(2, queue);
  if (!q.step()) fy::core::throw_unknown_queue(tenant, queue);
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
  if (!q.is_null(22)) o.retry_budget = q.real(22);
  o.retry_budget_min = q.int64(23), o.retry_budget_window_usecs = q.int64(24);
  if (!q.is_null(25)) o.admission_rate = q.int64(25), o.admission_per_usecs = q.int64(26);
  if (!q.is_null(27)) o.max_in_flight_per_key = q.int64(27);
  o.fairness = q.int64(28) != 0;
  o.aging_usecs = q.int64(29);
  return out;
}

void change_usage(Db& db, const Queue& queue, std::int64_t messages, std::int64_t bytes) {
  db.query(
        "UPDATE queues SET used_messages = used_messages + ?3, used_bytes = used_bytes + ?4,"
        "   admitted_total = admitted_total + max(?3, 0)"
        " WHERE tenant_id = ?1 AND queue = ?2")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, messages)
      .bind(4, bytes)
      .run();
}

// A message leaves the live queue: room back, and the next of its key (core::group_key) becomes a
// head: the next of its partition, or in a max_in_flight_per_key queue up to the limit of the
// fairness key's waiting messages.
void release(Db& db, const Queue& queue, std::int64_t bytes, const std::optional<std::string>& key) {
  change_usage(db, queue, -1, -bytes);
  if (!key) return;
  if (!queue.options.partitioned) {
    auto left = db.query(
        "UPDATE queue_partitions SET pending = pending - 1, heads = max(heads - 1, 0)"
        " WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3 RETURNING pending, heads");
    left.bind(1, queue.tenant).bind(2, queue.name).bind(3, *key);
    if (!left.step()) return;
    const std::int64_t pending = left.int64(0), heads = left.int64(1);
    while (left.step()) {
    }
    if (pending <= 0) {
      db.query("DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3")
          .bind(1, queue.tenant)
          .bind(2, queue.name)
          .bind(3, *key)
          .run();
      return;
    }
    const std::int64_t n = fy::core::heads_to_promote(queue.options.max_in_flight_per_key, pending, heads);
    if (n <= 0) return;
    const std::int64_t promoted =
        db.query(
              "UPDATE messages SET is_head = 1 WHERE msg_id IN (SELECT msg_id FROM messages WHERE tenant_id = ?1"
              " AND queue = ?2 AND fairness_key = ?3 AND state = 'pending' AND NOT is_head ORDER BY msg_id LIMIT ?4)")
            .bind(1, queue.tenant)
            .bind(2, queue.name)
            .bind(3, *key)
            .bind(4, n)
            .run();
    db.query(
          "UPDATE queue_partitions SET heads = heads + ?4 WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3")
        .bind(1, queue.tenant)
        .bind(2, queue.name)
        .bind(3, *key)
        .bind(4, promoted)
        .run();
    return;
  }
  db.query(
        "UPDATE queue_partitions SET pending = pending - 1 WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, *key)
      .run();
  db.query("DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2 AND partition_key = ?3 AND pending = 0")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, *key)
      .run();
  db.query(
        "UPDATE messages SET is_head = 1 WHERE msg_id = (SELECT msg_id FROM messages WHERE tenant_id = ?1"
        " AND queue = ?2 AND partition_key = ?3 AND state = 'pending' ORDER BY msg_id LIMIT 1)")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, *key)
      .run();
}

// The spellings PostgreSQL's uuid input accepts, through the core's one parser, as PostgreSQL prints them.
std::string canonical_uuid(std::string_view s) {
  const auto bytes = fy::core::parse_uuid(s);
  if (!bytes)
    throw Error(fy::core::sqlstate::invalid_text_representation,
                "invalid input syntax for type uuid: \"" + std::string(s) + "\"");
  return fy::core::format_uuid(*bytes);
}

}  // namespace forgeyard::detail::sqlite_queue
