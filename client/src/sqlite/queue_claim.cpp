// Consuming in the SQLite store: claim, highest class first, then oldest, and the dead-lettering
// of deliveries that lapsed on every attempt; the twin of extension/queue_claim.cpp. Writers are
// serialized by BEGIN IMMEDIATE, so claims never overlap.
#include <algorithm>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

namespace sqlite_queue {

std::int64_t visibility_usecs(const Queue& queue, std::optional<Duration> visibility) {
  return visibility
             ? fy::core::check_duration("visibility", {0, 0, visibility->count()}, fy::core::max_queue_duration_usecs)
             : queue.options.visibility_usecs;
}

std::vector<Delivery> claim_in(Db& db, const Queue& queue, std::string_view consumer, int max_messages,
                               std::int64_t visibility, std::int64_t now, std::vector<Delivery>* lapsed) {
  if (max_messages < 1 || max_messages > fy::core::max_claim_batch)
    throw Error(sqlstate::invalid_parameter,
                "max_messages must be between 1 and " + std::to_string(fy::core::max_claim_batch));
  fy::core::check_name("consumer", true, consumer, fy::core::max_consumer_bytes);
  std::vector<Delivery> out;
  // Hands out the messages `ids` (each locked by the write transaction): a claim token each, or
  // the dead letter of a delivery that lapsed on every attempt.
  auto claim_ids = [&](const std::vector<std::int64_t>& ids) {
    if (ids.empty()) return;
    // The page in two statements, whatever its size: its claim tokens taken at once (the k-th id
    // gets first + k), then the rows updated together and read back in the order of `ids`.
    // (Counters and rows are read by a SELECT: RETURNING buffers its rows in a temporary table
    // and costs about twice as much.)
    db.query("UPDATE claim_tokens SET last = last + ?1").bind(1, static_cast<std::int64_t>(ids.size())).run();
    std::int64_t first_token = 0;
    {
      auto token = db.query("SELECT last FROM claim_tokens");
      token.step();
      first_token = token.int64(0) - static_cast<std::int64_t>(ids.size()) + 1;
    }
    std::string id_list = "[";
    for (std::int64_t id : ids) id_list += (id_list.size() > 1 ? "," : "") + std::to_string(id);
    id_list += "]";
    db.query(
          "UPDATE messages SET claim_token = ?2 + j.key, attempt = attempt + 1, visible_at = ?3, claimed_by = ?4"
          " FROM json_each(?1) AS j WHERE messages.msg_id = j.value")
        .bind(1, id_list)
        .bind(2, first_token)
        .bind(3, now + visibility)
        .bind(4, consumer)
        .run();
    struct Claimed {
      Delivery d;
      std::int64_t bytes;
      std::optional<std::string> resource, fairness_key;
    };
    std::vector<Claimed> rows;
    {
      auto q = db.query(
          "SELECT msg_id, event_id, partition_key, priority, attempt, claim_token,"
          // A subscription's message has no payload of its own: it is its topic event's (topic.cpp).
          " COALESCE(payload, (SELECT e.payload FROM subscriptions s JOIN topic_events e"
          "   ON e.tenant_id = s.tenant_id AND e.topic = s.topic WHERE s.tenant_id = m.tenant_id"
          "   AND s.subscription = m.queue AND e.event_id = m.event_id)),"
          " enqueued_at, bytes, resource, fairness_key"
          " FROM json_each(?1) AS j JOIN messages m ON m.msg_id = j.value ORDER BY j.key");
      q.bind(1, id_list);
      while (q.step()) {
        Claimed c;
        Delivery& d = c.d;
        d.msg_id = q.int64(0);
        if (!q.is_null(1)) d.event_id = q.text(1);
        if (!q.is_null(2)) d.partition_key = q.text(2);
        d.priority = priority_at(static_cast<int>(q.int64(3)));
        d.attempt = static_cast<int>(q.int64(4));
        d.claim_token = q.int64(5);
        d.payload = q.is_null(6) ? Bytes{} : q.blob(6);
        d.enqueued_at = from_unix_usecs(q.int64(7));
        c.bytes = q.int64(8);
        if (!q.is_null(9)) c.resource = q.text(9);
        if (!q.is_null(10)) c.fairness_key = q.text(10);
        rows.push_back(std::move(c));
      }
    }
    for (Claimed& c : rows) {
      Delivery& d = c.d;
      if (d.attempt > queue.options.max_attempts) {
        // Its visibility ran out on every attempt (the consumer died or hung): dead-letter it.
        db.query(
              "UPDATE messages SET state = 'dead', claim_token = NULL, finished_at = ?2, is_head = 0,"
              " last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
              " payload = CASE WHEN ?3 THEN payload END WHERE msg_id = ?1")
            .bind(1, d.msg_id)
            .bind(2, now)
            .bind(3, static_cast<std::int64_t>(queue.options.keep_dead_payload ? 1 : 0))
            .run();
        release(db, queue, c.bytes, fy::core::group_key(queue.options, d.partition_key, c.fairness_key));
        record_outcome(db, queue, c.resource, fy::core::flow::Outcome::neutral, now);
        if (lapsed != nullptr) lapsed->push_back(std::move(d));
        continue;
      }
      out.push_back(std::move(d));
    }
  };
  if (queue.options.aging_usecs > 0) {
    // Aging: the oldest ready messages of each class, up to max_messages each, in the order of
    // the class each has aged into, then by age (the first max_messages of that order are among
    // them: within a class the older message never competes in a lower class).
    struct Aged {
      std::int64_t id;
      int aged;
      std::int64_t visible_at;
      std::optional<std::string> resource;
      bool lapsed;
      std::int64_t attempt;
    };
    std::vector<Aged> aged;
    for (int p = 0; p < fy::core::priority_classes; ++p) {
      auto q = db.query(
          "SELECT msg_id, visible_at, attempt, resource, claim_token IS NOT NULL FROM messages"
          " WHERE tenant_id = ?1 AND queue = ?2 AND priority = ?3 AND state = 'pending' AND is_head"
          " AND visible_at <= ?4 ORDER BY visible_at, msg_id LIMIT ?5");
      q.bind(1, queue.tenant)
          .bind(2, queue.name)
          .bind(3, static_cast<std::int64_t>(p))
          .bind(4, now)
          .bind(5, static_cast<std::int64_t>(max_messages));
      while (q.step())
        aged.push_back({q.int64(0), fy::core::aged_class(p, now - q.int64(1), queue.options.aging_usecs), q.int64(1),
                        q.is_null(3) ? std::nullopt : std::optional<std::string>(q.text(3)), q.int64(4) != 0,
                        q.int64(2)});
    }
    std::sort(aged.begin(), aged.end(), [](const Aged& a, const Aged& b) {
      if (a.aged != b.aged) return a.aged < b.aged;
      return a.visible_at != b.visible_at ? a.visible_at < b.visible_at : a.id < b.id;
    });
    // (A delivery that lapsed on every attempt is dead-lettered and does not count, as on PostgreSQL.)
    std::vector<std::int64_t> ids;
    int handed = 0;
    for (const Aged& a : aged) {
      if (handed >= max_messages) break;
      const bool doomed = a.attempt + 1 > queue.options.max_attempts;
      if (doomed || resource_allows(db, queue, a.resource, a.lapsed, now)) {
        ids.push_back(a.id);
        if (!doomed) ++handed;
      }
    }
    claim_ids(ids);
    return out;
  }
  for (int p = 0; p < fy::core::priority_classes && static_cast<int>(out.size()) < max_messages; ++p) {
    const std::size_t class_start = out.size();
    // Pages of candidates in (visible_at, msg_id) order, or a fair queue's (pass, msg_id): a
    // message its resource refuses is skipped (it stays ready), so a page may fill less than it
    // held and the next page is read.
    std::optional<std::pair<std::int64_t, std::int64_t>> after;
    for (bool more = true; more && static_cast<int>(out.size()) < max_messages;) {
      struct Candidate {
        std::int64_t id, order, attempt;
        std::optional<std::string> resource;
        bool lapsed;
      };
      std::vector<Candidate> page;
      {
        auto q =
            db.query(queue.options.fairness
                         ? "SELECT msg_id, pass, attempt, resource, claim_token IS NOT NULL FROM messages"
                           " WHERE tenant_id = ?1 AND queue = ?2 AND priority = ?3 AND state = 'pending' AND is_head"
                           " AND pass IS NOT NULL AND visible_at <= ?4 AND (?6 IS NULL OR (pass, msg_id) > (?6, ?7))"
                           " ORDER BY pass, msg_id LIMIT ?5"
                         : "SELECT msg_id, visible_at, attempt, resource, claim_token IS NOT NULL FROM messages"
                           " WHERE tenant_id = ?1 AND queue = ?2 AND priority = ?3 AND state = 'pending' AND is_head"
                           " AND visible_at <= ?4 AND (?6 IS NULL OR (visible_at, msg_id) > (?6, ?7))"
                           " ORDER BY visible_at, msg_id LIMIT ?5");
        q.bind(1, queue.tenant)
            .bind(2, queue.name)
            .bind(3, static_cast<std::int64_t>(p))
            .bind(4, now)
            .bind(5, static_cast<std::int64_t>(max_messages - out.size()));
        if (after)
          q.bind(6, after->first).bind(7, after->second);
        else
          q.bind_null(6).bind_null(7);
        while (q.step())
          page.push_back({q.int64(0), q.int64(1), q.int64(2),
                          q.is_null(3) ? std::nullopt : std::optional<std::string>(q.text(3)), q.int64(4) != 0});
      }
      more = static_cast<int>(page.size()) == max_messages - static_cast<int>(out.size());
      if (!page.empty()) after = std::make_pair(page.back().order, page.back().id);
      std::vector<std::int64_t> ids;
      for (const Candidate& c : page)
        // A resource that refuses leaves the message ready, no attempt charged. (A delivery that
        // lapsed on every attempt is dead-lettered whatever its resource says.)
        if (c.attempt + 1 > queue.options.max_attempts || resource_allows(db, queue, c.resource, c.lapsed, now))
          ids.push_back(c.id);
      claim_ids(ids);
    }
    // Delivery order within a class: oldest message first; a fair queue's in pass order.
    if (!queue.options.fairness)
      std::sort(out.begin() + static_cast<std::ptrdiff_t>(class_start), out.end(),
                [](const Delivery& a, const Delivery& b) { return a.msg_id < b.msg_id; });
  }
  return out;
}

}  // namespace sqlite_queue

using namespace sqlite_queue;

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

}  // namespace forgeyard::detail
