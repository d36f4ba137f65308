// Queue inspection and dead letters in the SQLite store: stats, dead_letters, redrive, purge_dead;
// the twin of extension/queue_admin.cpp.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

using namespace sqlite_queue;

QueueStats SqliteQueues::stats(std::string_view tenant, std::string_view queue, ReadClass /*read: one file*/) {
  return session_.measure("queue.stats", [&] {
    return core_guarded([&] {
      QueueStats s;
      session_.read([&](Db& db) {
        const Queue q = load(db, tenant, queue);
        const std::int64_t now = session_.now_usecs();
        auto r = db.query(
            "SELECT count(*) FILTER (WHERE state = 'pending' AND visible_at <= ?3),"
            "       count(*) FILTER (WHERE state = 'pending' AND claim_token IS NOT NULL AND visible_at > ?3),"
            "       count(*) FILTER (WHERE state = 'pending' AND claim_token IS NULL AND visible_at > ?3),"
            "       count(*) FILTER (WHERE state = 'dead'),"
            "       min(enqueued_at) FILTER (WHERE state = 'pending' AND visible_at <= ?3),"
            "       count(*) FILTER (WHERE state = 'pending' AND NOT is_head AND visible_at <= ?3)"
            "  FROM messages WHERE tenant_id = ?1 AND queue = ?2");
        r.bind(1, tenant).bind(2, queue).bind(3, now);
        r.step();
        s = QueueStats{r.int64(0),
                       r.int64(1),
                       r.int64(2),
                       r.int64(3),
                       q.used.bytes,
                       r.is_null(4) ? std::nullopt : std::optional<Duration>(Duration(now - r.int64(4))),
                       fy::core::pressure(q.options, q.used),
                       r.int64(5)};
        if (q.options.retry_budget) {
          auto w =
              db.query("SELECT window_start, delayed FROM queue_retry_windows WHERE tenant_id = ?1 AND queue = ?2");
          w.bind(1, tenant).bind(2, queue);
          if (w.step()) {
            fy::core::flow::RetryWindow window;
            window.start = w.int64(0);
            window.delayed = w.int64(1);
            s.retries_delayed = fy::core::flow::retries_delayed(q.options, window, now);
          }
        }
      });
      return s;
    });
  });
}

std::vector<DeadLetter> SqliteQueues::dead_letters(std::string_view tenant, std::string_view queue,
                                                   std::int64_t after_msg_id, int max_rows) {
  return session_.measure("queue.dead_letters", [&] {
    return core_guarded([&] {
      if (max_rows < 1 || max_rows > 10000)
        throw Error(sqlstate::invalid_parameter, "max_rows must be between 1 and 10000");
      std::vector<DeadLetter> out;
      session_.read([&](Db& db) {
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
      if (max_rows < 1 || max_rows > 10000)
        throw Error(sqlstate::invalid_parameter, "max_rows must be between 1 and 10000");
      int redriven = 0;
      session_.write([&](Db& db) {
        redriven = 0;
        struct Dead {
          std::int64_t msg_id, priority, bytes;
          std::optional<std::string> key;
          bool has_payload;
          std::optional<std::string> fairness_key;
        };
        std::vector<Dead> dead;
        auto pick = [&](std::optional<std::int64_t> id) {
          auto q = db.query(
              "SELECT msg_id, priority, bytes, partition_key, payload IS NOT NULL, fairness_key FROM messages"
              " WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead' AND (?3 IS NULL OR msg_id = ?3)"
              "   AND (?3 IS NOT NULL OR payload IS NOT NULL) ORDER BY msg_id LIMIT ?4");
          q.bind(1, tenant).bind(2, queue);
          if (id)
            q.bind(3, *id);
          else
            q.bind_null(3);
          q.bind(4, static_cast<std::int64_t>(max_rows));
          while (q.step())
            dead.push_back({q.int64(0), q.int64(1), q.int64(2),
                            q.is_null(3) ? std::nullopt : std::optional<std::string>(q.text(3)), q.int64(4) != 0,
                            q.is_null(5) ? std::nullopt : std::optional<std::string>(q.text(5))});
        };
        Queue q = load(db, tenant, queue);
        if (msg_ids.empty()) pick(std::nullopt);
        for (std::int64_t id : std::set<std::int64_t>(msg_ids.begin(), msg_ids.end())) pick(id);
        for (const Dead& d : dead) {
          if (!d.has_payload) fy::core::throw_not_redrivable(d.msg_id);
          admit(db, q, static_cast<int>(d.priority), d.bytes);
          const bool is_head = join_key(db, q, fy::core::group_key(q.options, d.key, d.fairness_key));
          // In a fair queue a redriven message takes a new pass, as a new message would.
          auto revive = db.query(
              "UPDATE messages SET state = 'pending', attempt = 0, claim_token = NULL, claimed_by = NULL,"
              " visible_at = ?2, finished_at = NULL, error_class = NULL, is_head = ?3, pass = ?4"
              " WHERE msg_id = ?1 AND state = 'dead'");
          revive.bind(1, d.msg_id).bind(2, session_.now_usecs()).bind(3, static_cast<std::int64_t>(is_head ? 1 : 0));
          if (q.options.fairness)
            revive.bind(4, next_pass(db, q, static_cast<int>(d.priority), d.fairness_key));
          else
            revive.bind_null(4);
          revive.run();
          ++redriven;
        }
      });
      return redriven;
    });
  });
}

int SqliteQueues::purge_dead(std::string_view tenant, std::string_view queue,
                             const std::vector<std::int64_t>& msg_ids) {
  return session_.measure("queue.purge_dead", [&] {
    return core_guarded([&] {
      int purged = 0;
      session_.write([&](Db& db) {
        purged = 0;
        load(db, tenant, queue);
        if (msg_ids.empty()) {
          purged = db.query("DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead'")
                       .bind(1, tenant)
                       .bind(2, queue)
                       .run();
          return;
        }
        for (std::int64_t id : msg_ids)
          purged +=
              db.query("DELETE FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND state = 'dead' AND msg_id = ?3")
                  .bind(1, tenant)
                  .bind(2, queue)
                  .bind(3, id)
                  .run();
      });
      return purged;
    });
  });
}

}  // namespace forgeyard::detail
