// Finishing a delivery in the SQLite store: ack, ack_and_claim, nack and extend. Whether a claim
// token may still act is the core's decision (core/delivery.hpp), as in extension/queue_finish.cpp.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

namespace sqlite_queue {

namespace {

// The current delivery of a message; nullopt if it is gone. `fence` is what the core decides on.
struct Current {
  fy::core::DeliveryRow fence;
  std::int64_t attempt, bytes;
  std::optional<std::string> partition_key;
  std::optional<std::string> resource;
  std::optional<std::string> fairness_key;
};

std::optional<Current> current(Db& db, const Queue& queue, std::int64_t msg_id) {
  auto q = db.query(
      "SELECT state, claim_token, visible_at, attempt, bytes, partition_key, resource, fairness_key FROM messages"
      " WHERE msg_id = ?1 AND tenant_id = ?2 AND queue = ?3");
  q.bind(1, msg_id).bind(2, queue.tenant).bind(3, queue.name);
  if (!q.step()) return std::nullopt;
  return Current{{q.text(0), q.is_null(1) ? std::nullopt : std::optional<std::int64_t>(q.int64(1)), q.int64(2)},
                 q.int64(3),
                 q.int64(4),
                 q.is_null(5) ? std::nullopt : std::optional<std::string>(q.text(5)),
                 q.is_null(6) ? std::nullopt : std::optional<std::string>(q.text(6)),
                 q.is_null(7) ? std::nullopt : std::optional<std::string>(q.text(7))};
}

const fy::core::DeliveryRow* fence_of(const std::optional<Current>& c) {
  return c ? &c->fence : nullptr;
}

}  // namespace

void ack_all(Db& db, const Queue& queue, const std::vector<Ack>& acks, std::int64_t now) {
  // Messages without a key leave together: one statement for their rows and one for the room they
  // held. A keyed message leaves at once, since the next of its key becomes a head only after it.
  std::vector<std::int64_t> together;
  std::unordered_set<std::int64_t> finished;
  std::int64_t freed_bytes = 0;
  auto finish = [&](const std::vector<std::int64_t>& ids) {
    const bool keep = queue.options.retain_acked_usecs > 0;
    std::string list;
    if (ids.size() > 1) {
      for (std::int64_t id : ids) list += (list.empty() ? "[" : ",") + std::to_string(id);
      list += "]";
    }
    auto q = ids.size() == 1
                 ? db.query(keep ? "UPDATE messages SET state = 'acked', finished_at = ?2, payload = NULL"
                                   " WHERE msg_id = ?1"
                                 : "DELETE FROM messages WHERE msg_id = ?1")
                 : db.query(keep ? "UPDATE messages SET state = 'acked', finished_at = ?2, payload = NULL"
                                   " WHERE msg_id IN (SELECT value FROM json_each(?1))"
                                 : "DELETE FROM messages WHERE msg_id IN (SELECT value FROM json_each(?1))");
    if (ids.size() == 1)
      q.bind(1, ids.front());
    else
      q.bind(1, list);
    if (keep) q.bind(2, now);
    q.run();
  };
  for (const auto& [msg_id, token] : acks) {
    // A message acked twice in one call: the second finds it finished, as it would one by one.
    if (acks.size() > 1 && finished.count(msg_id) != 0) continue;
    std::optional<Current> c = current(db, queue, msg_id);
    if (fy::core::decide_ack(fence_of(c), msg_id, token) == fy::core::AckAction::no_op) continue;
    if (acks.size() > 1) finished.insert(msg_id);
    record_outcome(db, queue, c->resource, fy::core::flow::Outcome::success, now);
    const std::optional<std::string> key = fy::core::group_key(queue.options, c->partition_key, c->fairness_key);
    if (key) {
      finish({msg_id});
      release(db, queue, c->bytes, key);
    } else {
      together.push_back(msg_id);
      freed_bytes += c->bytes;
    }
  }
  if (together.empty()) return;
  finish(together);
  change_usage(db, queue, -static_cast<std::int64_t>(together.size()), -freed_bytes);
}

void ack_in(Db& db, const Queue& queue, std::int64_t msg_id, std::int64_t token, std::int64_t now) {
  ack_all(db, queue, {Ack{msg_id, token}}, now);
}

NackOutcome nack_in(Db& db, const Queue& q, std::int64_t msg_id, std::int64_t claim_token, std::string_view error,
                    bool permanent, std::int64_t now) {
  std::optional<Current> c = current(db, q, msg_id);
  fy::core::check_nack(fence_of(c), msg_id, claim_token);
  // For the resource: a failure, unless the message's own fault.
  record_outcome(db, q, c->resource, permanent ? fy::core::flow::Outcome::neutral : fy::core::flow::Outcome::failure,
                 now);
  if (fy::core::dead_after_failure(q.options, c->attempt, permanent)) {
    db.query(
          "UPDATE messages SET state = 'dead', claim_token = NULL, finished_at = ?2, last_error = ?3,"
          " error_class = ?4, is_head = 0, payload = CASE WHEN ?5 THEN payload END WHERE msg_id = ?1")
        .bind(1, msg_id)
        .bind(2, now)
        .bind(3, error)
        .bind(4, permanent ? "permanent" : "max_attempts")
        .bind(5, static_cast<std::int64_t>(q.options.keep_dead_payload ? 1 : 0))
        .run();
    release(db, q, c->bytes, fy::core::group_key(q.options, c->partition_key, c->fairness_key));
    return NackOutcome::Dead;
  }
  std::int64_t visible = now + fy::core::retry_delay_usecs(q.options, c->attempt, fy::core::unit_random());
  // Over the queue's retry budget the retry waits for the window's end (no attempt charged).
  const fy::core::flow::RetryDecision budget = admit_retry(db, q, now);
  if (!budget.admitted) visible = std::max(visible, budget.not_before);
  db.query(
        "UPDATE messages SET claim_token = NULL, claimed_by = NULL, visible_at = ?2, last_error = ?3"
        " WHERE msg_id = ?1")
      .bind(1, msg_id)
      .bind(2, visible)
      .bind(3, error)
      .run();
  return NackOutcome::Retry;
}

std::int64_t extend_in(Db& db, const Queue& q, std::int64_t msg_id, std::int64_t claim_token, std::int64_t visibility,
                       std::int64_t now) {
  std::optional<Current> c = current(db, q, msg_id);
  fy::core::check_extend(fence_of(c), msg_id, claim_token, now);
  const std::int64_t until = now + visibility;
  db.query("UPDATE messages SET visible_at = ?2 WHERE msg_id = ?1").bind(1, msg_id).bind(2, until).run();
  return until;
}

}  // namespace sqlite_queue

using namespace sqlite_queue;

void SqliteQueues::ack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token) {
  session_.measure("queue.ack", [&] {
    core_guarded([&] {
      session_.write([&](Db& db) { ack_in(db, load(db, tenant, queue), msg_id, claim_token, session_.now_usecs()); });
    });
  });
}

void SqliteQueues::ack_many(std::string_view tenant, std::string_view queue, const std::vector<Ack>& acks) {
  session_.measure("queue.ack_many", [&] {
    core_guarded([&] {
      if (acks.empty()) return;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        const Queue q = load(db, tenant, queue);
        ack_all(db, q, acks, now);
      });
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
        ack_all(db, q, acks, now);
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
        throw Error(sqlstate::string_too_long,
                    "error is longer than " + std::to_string(fy::core::max_error_bytes) + " bytes");
      NackOutcome outcome = NackOutcome::Retry;
      session_.write([&](Db& db) {
        outcome = nack_in(db, load(db, tenant, queue), msg_id, claim_token, error, permanent, session_.now_usecs());
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
        until = extend_in(db, load(db, tenant, queue), msg_id, claim_token, v, session_.now_usecs());
      });
      return from_unix_usecs(until);
    });
  });
}

}  // namespace forgeyard::detail
