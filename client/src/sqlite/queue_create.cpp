// A queue's life in the SQLite store: create (options checked by the core) and drop; the twin of
// extension/queue_create.cpp.
#include <string>

#include "core/core.hpp"
#include "core/workflow.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

using namespace sqlite_queue;

namespace sqlite_queue {

bool create_in(Db& db, std::string_view tenant, std::string_view queue, const fy::core::QueueOptions& o,
               std::int64_t now) {
  auto q = db.query(
      "INSERT INTO queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,"
      "   max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,"
      "   max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,"
      "   admit_realtime, admit_interactive, admit_background, admit_bulk, notify, created_at, retry_budget,"
      "   retry_budget_min, retry_budget_window_usecs, max_in_flight_per_key, fairness, aging_usecs)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
      "         ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29) ON CONFLICT DO NOTHING");
  q.bind(1, tenant)
      .bind(2, queue)
      .bind(3, o.max_messages)
      .bind(4, o.max_bytes)
      .bind(5, o.max_payload_bytes)
      .bind(6, o.visibility_usecs)
      .bind(7, o.max_attempts)
      .bind(8, o.backoff_base_usecs)
      .bind(9, o.backoff_max_usecs)
      .bind(10, o.partitioned ? "partition" : "none")
      .bind(11, o.keep_dead_payload ? "keep" : "drop")
      .bind(12, o.retain_acked_usecs)
      .bind(13, o.max_dead)
      .bind(14, o.dead_retention_usecs)
      .bind(15, o.dedup_window_usecs);
  for (int p = 0; p < fy::core::priority_classes; ++p) q.bind(16 + p, o.admit_percent[p]);
  q.bind(22, static_cast<std::int64_t>(o.notify ? 1 : 0)).bind(23, now);
  if (o.retry_budget)
    q.bind_real(24, *o.retry_budget);
  else
    q.bind_null(24);
  q.bind(25, o.retry_budget_min).bind(26, o.retry_budget_window_usecs);
  if (o.max_in_flight_per_key > 0)
    q.bind(27, o.max_in_flight_per_key);
  else
    q.bind_null(27);
  q.bind(28, static_cast<std::int64_t>(o.fairness ? 1 : 0)).bind(29, o.aging_usecs);
  return q.run() > 0;
}

}  // namespace sqlite_queue

void SqliteQueues::create(std::string_view tenant, std::string_view queue, const QueueOptions& options) {
  session_.measure("queue.create", [&] {
    core_guarded([&] {
      check_queue_name(tenant, queue);
      fy::core::workflow::refuse_reserved_queue(queue);
      const fy::core::QueueOptions o = core_options(options);
      fy::core::validate(o);
      session_.write([&](Db& db) {
        if (!create_in(db, tenant, queue, o, session_.now_usecs()))
          throw Error(sqlstate::duplicate_object,
                      "queue \"" + std::string(queue) + "\" already exists for tenant \"" + std::string(tenant) + "\"");
      });
    });
  });
}

bool SqliteQueues::drop(std::string_view tenant, std::string_view queue) {
  return session_.measure("queue.drop", [&] {
    return core_guarded([&] {
      check_queue_name(tenant, queue);
      fy::core::workflow::refuse_reserved_queue(queue);
      bool dropped = false;
      session_.write([&](Db& db) {
        for (const char* sql : {"DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_events WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_partitions WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_retry_windows WHERE tenant_id = ?1 AND queue = ?2",
                                "DELETE FROM queue_fair_keys WHERE tenant_id = ?1 AND queue = ?2"})
          db.query(sql).bind(1, tenant).bind(2, queue).run();
        dropped =
            db.query("DELETE FROM queues WHERE tenant_id = ?1 AND queue = ?2").bind(1, tenant).bind(2, queue).run() > 0;
      });
      return dropped;
    });
  });
}

}  // namespace forgeyard::detail
