// Flow control of a queue's producers and retries in the SQLite store: the admission limit (one
// bucket per queue: writers take turns, so no split is needed) and the retry budget; the rules are
// core/flow.cpp's. The twin of extension/queue_flow.cpp.
#include <optional>
#include <string>

#include "core/flow.hpp"
#include "error_map.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

namespace sqlite_queue {

void admit_rate(Db& db, const Queue& queue, std::int64_t count, std::int64_t now) {
  const fy::core::QueueOptions& o = queue.options;
  if (o.admission_rate <= 0 || count <= 0) return;
  const fy::core::flow::Rate rate{o.admission_rate, o.admission_per_usecs};
  auto q = db.query("SELECT admission_tat FROM queues WHERE tenant_id = ?1 AND queue = ?2");
  q.bind(1, queue.tenant).bind(2, queue.name);
  std::optional<std::int64_t> tat;
  if (q.step() && !q.is_null(0)) tat = q.int64(0);
  if (fy::core::flow::take(rate, tat, now, count) < count)
    fy::core::flow::throw_admission_refused(queue.name, rate, fy::core::flow::wait_usecs(rate, tat, now));
  db.query("UPDATE queues SET admission_tat = ?3 WHERE tenant_id = ?1 AND queue = ?2")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, *tat)
      .run();
}

fy::core::flow::RetryDecision admit_retry(Db& db, const Queue& queue, std::int64_t now) {
  if (!queue.options.retry_budget) return {};
  fy::core::flow::RetryWindow w{now, 0, 0, 0, 0};
  auto q = db.query(
      "SELECT window_start, admitted_base, prev_first, retries, delayed FROM queue_retry_windows"
      " WHERE tenant_id = ?1 AND queue = ?2");
  q.bind(1, queue.tenant).bind(2, queue.name);
  if (q.step()) w = {q.int64(0), q.int64(1), q.int64(2), q.int64(3), q.int64(4)};
  auto total = db.query("SELECT admitted_total FROM queues WHERE tenant_id = ?1 AND queue = ?2");
  total.bind(1, queue.tenant).bind(2, queue.name);
  const std::int64_t admitted_now = total.step() ? total.int64(0) : 0;
  const fy::core::flow::RetryDecision d = fy::core::flow::admit_retry(queue.options, w, admitted_now, now);
  db.query(
        "INSERT INTO queue_retry_windows (tenant_id, queue, window_start, admitted_base, prev_first, retries,"
        "   delayed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (tenant_id, queue) DO UPDATE SET"
        "   window_start = excluded.window_start, admitted_base = excluded.admitted_base,"
        "   prev_first = excluded.prev_first, retries = excluded.retries, delayed = excluded.delayed")
      .bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, w.start)
      .bind(4, w.admitted_base)
      .bind(5, w.prev_first)
      .bind(6, w.retries)
      .bind(7, w.delayed)
      .run();
  return d;
}

}  // namespace sqlite_queue

using namespace sqlite_queue;

void SqliteQueues::admission_limit(std::string_view tenant, std::string_view queue, std::optional<RateLimit> limit) {
  session_.measure("queue.admission_limit", [&] {
    core_guarded([&] {
      check_queue_name(tenant, queue);
      std::optional<fy::core::flow::Rate> rate;
      if (limit)
        rate = fy::core::flow::Rate{limit->rate,
                                    fy::core::flow::check_rate("rate", limit->rate, "per", {0, 0, limit->per.count()})};
      session_.write([&](Db& db) {
        load(db, tenant, queue);  // 42704 for an unknown queue
        auto q = db.query(
            "UPDATE queues SET admission_rate = ?3, admission_per_usecs = ?4, admission_tat = NULL"
            " WHERE tenant_id = ?1 AND queue = ?2");
        q.bind(1, tenant).bind(2, queue);
        if (rate)
          q.bind(3, rate->tokens).bind(4, rate->per_usecs);
        else
          q.bind_null(3).bind_null(4);
        q.run();
      });
    });
  });
}

}  // namespace forgeyard::detail
