// Finishing a delivery: ack, nack and extend, one by one and in batches, and ack_and_claim. Whether
// a claim token may still act is the core's decision (core/delivery.hpp); this file does the
// writes (docs/sql-api.md#queues).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

using core::sqlstate::invalid_parameter;
namespace {

// The current delivery of a message, locked; nullopt if the message is gone (acked, purged).
// `fence` is what the core decides on (core/delivery.hpp); the rest is what finishing it writes.
struct Delivery {
  core::DeliveryRow fence;
  std::int64_t attempt = 0;
  int slot = 0;
  std::int64_t bytes = 0;
  std::optional<std::string> partition_key;
  std::optional<std::string> resource;
  std::optional<std::string> fairness_key;
  int resource_part = 0;  // the part of its resource's state it is counted in
  // What the message is counted under in queue_partitions (core::group_key), if anything.
  const std::optional<std::string>& key(const Queue& queue) const {
    return core::group_key(queue.options, partition_key, fairness_key);
  }
};

std::optional<Delivery> lock_delivery(pg::Spi& spi, const Queue& queue, std::int64_t msg_id) {
  // (A catalog before 0.7.0 has no resource or fairness_key column.)
  static const std::string head = "SELECT state, claim_token, visible_at, attempt, slot, bytes, partition_key";
  static const std::string tail =
      " FROM forgeyard.messages WHERE msg_id OPERATOR(pg_catalog.=) $3 AND tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 FOR UPDATE";
  static pg::Statement lock(head + ", resource, fairness_key, coalesce(resource_part, 0)::pg_catalog.int8" + tail,
                            {TEXTOID, TEXTOID, INT8OID});
  static pg::Statement lock_old(head + ", NULL::pg_catalog.text, NULL::pg_catalog.text, 0::pg_catalog.int8" + tail,
                                {TEXTOID, TEXTOID, INT8OID});
  std::optional<Delivery> d;
  spi.run(queue.flow ? lock : lock_old, {queue.t, queue.q, pg::int8_value(msg_id)}, [&](const pg::Row& r) {
    d = Delivery{{*r.text(1), r.int8(2), *r.timestamptz(3)},
                 *r.int8(4),
                 static_cast<int>(*r.int8(5)),
                 *r.int8(6),
                 r.text(7),
                 r.text(8),
                 r.text(9),
                 static_cast<int>(*r.int8(10))};
  });
  return d;
}

const core::DeliveryRow* fence_of(const std::optional<Delivery>& d) {
  return d ? &d->fence : nullptr;
}

enum class Finish { done, already_finished };

// ack: delete (or keep as acked for retain_acked) and give the room back. An ack of a message
// that is already acked, dead or gone is a no-op; a token that is not the current claim is FY001.
// The fast path, below SPI (pg/table_access.hpp), for each (msg_id, token) in one command: the
// row by primary key, if it is the current delivery (pending, this tenant and queue, this token),
// locked FOR UPDATE (waiting, as the DELETE it replaces would; a newer version is re-checked) and
// deleted or kept as acked; its room is added to `releases` (apply() gives it back, after every
// message row, in slot order). done[i] is false for a pair it did not finish: the slow path
// decides (no-op or FY001).
std::vector<bool> ack_current(const Queue& queue, const std::vector<std::pair<std::int64_t, std::int64_t>>& deliveries,
                              TimestampTz now, Releases& releases, bool resources) {
  std::vector<bool> done(deliveries.size(), false);
  pg::Access access;
  pg::Table m(access, pg::OwnTable::messages);
  const int tenant_col = m.column("tenant_id"), queue_col = m.column("queue"), state_col = m.column("state"),
            token_col = m.column("claim_token"), slot_col = m.column("slot"), bytes_col = m.column("bytes"),
            key_col = m.column(queue.options.max_in_flight_per_key > 0 ? "fairness_key" : "partition_key"),
            finished_col = m.column("finished_at"), payload_col = m.column("payload"),
            resource_col = resources ? m.column("resource") : 0, part_col = resources ? m.column("resource_part") : 0,
            ready_col = lanes_schema() ? m.column("ready_pos") : 0;
  const bool keep = queue.options.retain_acked_usecs > 0;
  const pg::Value acked = keep ? pg::text_value("acked") : pg::null_value();
  const pg::Value finished = pg::timestamptz_value(now);
  // In msg_id order, as the statement's index scan of `msg_id = ANY(...)` locked them: two batches
  // naming the same rows in different orders do not deadlock.
  std::vector<std::size_t> order(deliveries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return deliveries[a].first < deliveries[b].first; });
  for (const std::size_t i : order) {
    const auto [msg_id, token] = deliveries[i];
    auto current = [&]() {
      return m.text_equals(state_col, "pending") && !m.is_null(token_col) && m.int8(token_col) == token &&
             m.text_equals(tenant_col, queue.tenant) && m.text_equals(queue_col, queue.name);
    };
    if (!m.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(msg_id)}}) || !current()) continue;
    const pg::Locked locked = m.lock(pg::LockMode::update, pg::Wait::block);
    if (locked == pg::Locked::skipped || (locked == pg::Locked::newer_version && !current())) continue;
    releases.add(queue, m.int2(slot_col), m.int8(bytes_col), m.text(key_col));
    if (resources)
      releases.outcome(m.text(resource_col), m.is_null(part_col) ? 0 : m.int2(part_col), core::flow::Outcome::success);
    if (keep && ready_col != 0)
      m.update({{state_col, acked},
                {finished_col, finished},
                {payload_col, pg::null_value()},
                {ready_col, pg::null_value()}});
    else if (keep)
      m.update({{state_col, acked}, {finished_col, finished}, {payload_col, pg::null_value()}});
    else
      m.remove();
    done[i] = true;
  }
  m.finish();
  access.finish();
  return done;
}

Finish ack_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token, TimestampTz now,
               Releases& releases) {
  static pg::Statement remove("DELETE FROM forgeyard.messages WHERE msg_id OPERATOR(pg_catalog.=) $1", {INT8OID});
#define FY_KEEP(listed)                                                                    \
  "UPDATE forgeyard.messages SET state = 'acked', finished_at = $2, payload = NULL" listed \
  " WHERE msg_id OPERATOR(pg_catalog.=) $1"
  static pg::Statement keep_old(FY_KEEP(""), {INT8OID, TIMESTAMPTZOID});
  static pg::Statement keep_listed(FY_KEEP(", ready_pos = NULL"), {INT8OID, TIMESTAMPTZOID});
#undef FY_KEEP
  pg::Statement& keep = lanes_schema() ? keep_listed : keep_old;
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  if (core::decide_ack(fence_of(d), msg_id, token) == core::AckAction::no_op) return Finish::already_finished;
  if (queue.options.retain_acked_usecs > 0)
    spi.run(keep, {pg::int8_value(msg_id), pg::timestamptz_value(now)});
  else
    spi.run(remove, {pg::int8_value(msg_id)});
  releases.add(queue, d->slot, d->bytes, d->key(queue));
  releases.outcome(d->resource, d->resource_part, core::flow::Outcome::success);
  return Finish::done;
}

// ack for one or many deliveries: the fast path for every pair, then the pairs it did not finish
// one by one (a stale token is FY001, a message already finished or gone a no-op).
void ack_many(pg::Spi& spi, const Queue& queue, const std::vector<std::pair<std::int64_t, std::int64_t>>& deliveries,
              TimestampTz now, Releases& releases) {
  // The tenant's resources first (SQL, before the direct access): none, and the fast path never
  // reads a message's resource.
  const bool resources = !resource_configs(spi, queue).empty();
  const std::vector<bool> done = ack_current(queue, deliveries, now, releases, resources);
  for (std::size_t i = 0; i < deliveries.size(); ++i)
    if (!done[i]) ack_one(spi, queue, deliveries[i].first, deliveries[i].second, now, releases);
}

// nack: retry after backoff with full jitter, or dead-letter (max attempts, or permanent).
std::string nack_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token,
                     const std::string& error, bool permanent, TimestampTz now, Releases& releases) {
  // (From 0.10.0 on, a retry or a dead letter is no longer listed: a retry is found in
  // messages_claim once it is due.)
#define FY_RETRY(listed)                                                                                         \
  "UPDATE forgeyard.messages SET claim_token = NULL, claimed_by = NULL, visible_at = $2, last_error = $3" listed \
  " WHERE msg_id OPERATOR(pg_catalog.=) $1"
#define FY_DEAD(listed)                                                                                  \
  "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, last_error = $3," \
  "   error_class = $4, is_head = false, payload = CASE WHEN $5 THEN payload END" listed                 \
  " WHERE msg_id OPERATOR(pg_catalog.=) $1"
  static pg::Statement retry_old(FY_RETRY(""), {INT8OID, TIMESTAMPTZOID, TEXTOID});
  static pg::Statement retry_listed(FY_RETRY(", ready_pos = NULL"), {INT8OID, TIMESTAMPTZOID, TEXTOID});
  static pg::Statement dead_old(FY_DEAD(""), {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, BOOLOID});
  static pg::Statement dead_listed(FY_DEAD(", ready_pos = NULL"), {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, BOOLOID});
#undef FY_RETRY
#undef FY_DEAD
  pg::Statement& retry = lanes_schema() ? retry_listed : retry_old;
  pg::Statement& dead = lanes_schema() ? dead_listed : dead_old;
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  core::check_nack(fence_of(d), msg_id, token);
  // For the resource: a failure, unless the message's own fault.
  releases.outcome(d->resource, d->resource_part,
                   permanent ? core::flow::Outcome::neutral : core::flow::Outcome::failure);
  if (core::dead_after_failure(queue.options, d->attempt, permanent)) {
    spi.run(dead, {pg::int8_value(msg_id), pg::timestamptz_value(now), pg::text_value(error),
                   pg::text_value(permanent ? "permanent" : "max_attempts"),
                   pg::bool_value(queue.options.keep_dead_payload)});
    releases.add(queue, d->slot, d->bytes, d->key(queue));
    return "dead";
  }
  TimestampTz visible = now + core::retry_delay_usecs(queue.options, d->attempt, core::unit_random());
  // Over the queue's retry budget the retry waits for the window's end (no attempt charged).
  const core::flow::RetryDecision budget = admit_retry(spi, queue, now);
  if (!budget.admitted) visible = std::max(visible, static_cast<TimestampTz>(budget.not_before));
  spi.run(retry, {pg::int8_value(msg_id), pg::timestamptz_value(visible), pg::text_value(error)});
  return "retry";
}

// extend: more visibility for a live claim; a lapsed or taken-over delivery is FY001.
TimestampTz extend_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token,
                       std::int64_t visibility, TimestampTz now) {
  static pg::Statement extend("UPDATE forgeyard.messages SET visible_at = $2 WHERE msg_id OPERATOR(pg_catalog.=) $1",
                              {INT8OID, TIMESTAMPTZOID});
  // From 0.10.0 on, extended for longer than a listing may stay open, it leaves its lane
  // (core::max_listed_claim_usecs).
  static pg::Statement extend_unlisted(
      "UPDATE forgeyard.messages SET visible_at = $2, ready_pos = NULL WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID});
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  core::check_extend(fence_of(d), msg_id, token, now);
  spi.run(visibility > core::max_listed_claim_usecs && lanes_schema() ? extend_unlisted : extend,
          {pg::int8_value(msg_id), pg::timestamptz_value(now + visibility)});
  return now + visibility;
}

// The ids and tokens of a batch, equal in length and without NULLs.
std::vector<std::pair<std::int64_t, std::int64_t>> deliveries_arg(FunctionCallInfo fcinfo, int ids, int tokens) {
  auto msg_ids = pg::int8_array_arg(fcinfo, ids);
  auto claim_tokens = pg::int8_array_arg(fcinfo, tokens);
  if (!msg_ids) throw core::Error(core::sqlstate::null_value, "msg_ids must not be NULL");
  if (!claim_tokens) throw core::Error(core::sqlstate::null_value, "claim_tokens must not be NULL");
  if (msg_ids->size() != claim_tokens->size())
    throw core::Error(invalid_parameter, "msg_ids and claim_tokens must have the same length");
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::size_t i = 0; i < msg_ids->size(); ++i) {
    if (!(*msg_ids)[i] || !(*claim_tokens)[i])
      throw core::Error(core::sqlstate::null_value, "msg_ids and claim_tokens must not contain NULL");
    out.emplace_back(*(*msg_ids)[i], *(*claim_tokens)[i]);
  }
  return out;
}

}  // namespace
}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

// ack_and_claim(tenant, queue, consumer, msg_ids, claim_tokens, max_messages, visibility):
// a worker's steady state in one round trip.
FY_FUNCTION(fy_ack_and_claim) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::string consumer = pg::name_arg(fcinfo, 2, "consumer", core::max_consumer_bytes);
  const auto deliveries = deliveries_arg(fcinfo, 3, 4);
  const int max_messages = max_messages_arg(fcinfo, 5);
  const std::int64_t visibility = visibility_arg(fcinfo, 6, queue);
  const TimestampTz now = pg::now();
  Releases releases;
  // The lanes read (and their cursors moved) before the acks write: the claim after them could
  // not move the cursors, as it would count this transaction's own acks as consumed
  // (queue_lanes.cpp); it takes what this read found as its first candidates.
  const std::optional<FirstCandidates> first = first_candidates(spi, queue, max_messages + claim_extra_candidates, now);
  if (!deliveries.empty()) ack_many(spi, queue, deliveries, now, releases);
  apply(spi, queue, releases);
  const std::vector<Claimed> claimed =
      claim(spi, queue, consumer, max_messages, visibility, now, nullptr, first ? &*first : nullptr);
  spi.finish();
  return_claimed(fcinfo, claimed);
  return (Datum)0;
}

// ack(tenant, queue, msg_id, claim_token)
FY_FUNCTION(fy_ack) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::int64_t msg_id = pg::int8_arg(fcinfo, 2, "msg_id");
  const std::int64_t token = pg::int8_arg(fcinfo, 3, "claim_token");
  Releases releases;
  ack_many(spi, queue, {{msg_id, token}}, pg::now(), releases);
  apply(spi, queue, releases);
  spi.finish();
  return (Datum)0;
}

// ack_batch(tenant, queue, msg_ids, claim_tokens): all or nothing.
FY_FUNCTION(fy_ack_batch) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const auto deliveries = deliveries_arg(fcinfo, 2, 3);
  const TimestampTz now = pg::now();
  Releases releases;
  if (!deliveries.empty()) ack_many(spi, queue, deliveries, now, releases);
  apply(spi, queue, releases);
  spi.finish();
  return (Datum)0;
}

// nack(tenant, queue, msg_id, claim_token, error, permanent) -> 'retry' | 'dead'
FY_FUNCTION(fy_nack) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::int64_t msg_id = pg::int8_arg(fcinfo, 2, "msg_id");
  const std::int64_t token = pg::int8_arg(fcinfo, 3, "claim_token");
  const std::string error = pg::text_arg(fcinfo, 4, "error", core::max_error_bytes, true).value_or("");
  const bool permanent = pg::bool_arg(fcinfo, 5, false);
  Releases releases;
  const std::string outcome = nack_one(spi, queue, msg_id, token, error, permanent, pg::now(), releases);
  apply(spi, queue, releases);
  spi.finish();
  return pg::text_value(outcome).datum;
}

// nack_batch(tenant, queue, msg_ids, claim_tokens, error, permanent) -> (msg_id, outcome)
FY_FUNCTION(fy_nack_batch) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const auto deliveries = deliveries_arg(fcinfo, 2, 3);
  const std::string error = pg::text_arg(fcinfo, 4, "error", core::max_error_bytes, true).value_or("");
  const bool permanent = pg::bool_arg(fcinfo, 5, false);
  const TimestampTz now = pg::now();
  std::vector<std::pair<std::int64_t, std::string>> outcomes;
  Releases releases;
  for (const auto& [msg_id, token] : deliveries)
    outcomes.emplace_back(msg_id, nack_one(spi, queue, msg_id, token, error, permanent, now, releases));
  apply(spi, queue, releases);
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const auto& [msg_id, outcome] : outcomes) out.add_row({pg::int8_value(msg_id), pg::text_value(outcome)});
  return (Datum)0;
}

// extend(tenant, queue, msg_id, claim_token, visibility) -> the new visible_at
FY_FUNCTION(fy_extend) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::int64_t msg_id = pg::int8_arg(fcinfo, 2, "msg_id");
  const std::int64_t token = pg::int8_arg(fcinfo, 3, "claim_token");
  const std::int64_t visibility = pg::duration_arg(fcinfo, 4, "visibility", core::max_queue_duration_usecs);
  const TimestampTz until = extend_one(spi, queue, msg_id, token, visibility, pg::now());
  spi.finish();
  return TimestampTzGetDatum(until);
}

// extend_batch(tenant, queue, msg_ids, claim_tokens, visibility) -> the new visible_at
FY_FUNCTION(fy_extend_batch) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const auto deliveries = deliveries_arg(fcinfo, 2, 3);
  const std::int64_t visibility = pg::duration_arg(fcinfo, 4, "visibility", core::max_queue_duration_usecs);
  const TimestampTz now = pg::now();
  for (const auto& [msg_id, token] : deliveries) extend_one(spi, queue, msg_id, token, visibility, now);
  spi.finish();
  return TimestampTzGetDatum(now + visibility);
}
