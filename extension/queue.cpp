// Durable queues: transactional outbox, fenced claim / ack / nack / extend, bounds with
// reserved capacity per priority class, retries with backoff and jitter, dead letters,
// partition order, and the consumer inbox (docs/sql-api.md#queues).
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {
namespace {

using core::sqlstate::invalid_parameter;

std::string tenant_arg(FunctionCallInfo fcinfo) { return pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes); }
std::string queue_arg(FunctionCallInfo fcinfo) { return pg::name_arg(fcinfo, 1, "queue", core::max_queue_name_bytes); }

// The columns of forgeyard.queues, in the order load_queue reads them.
#define FY_QUEUE_COLUMNS                                                                                    \
  "max_messages, max_bytes, max_payload_bytes, visibility_usecs, max_attempts, backoff_base_usecs,"        \
  " backoff_max_usecs, ordering OPERATOR(pg_catalog.=) 'partition', dead_letter_payload OPERATOR(pg_catalog.=) 'keep'," \
  " retain_acked_usecs, max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency,"              \
  " admit_security_control, admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots"

core::QueueOptions options_from(const pg::Row& r, int* slots) {
  core::QueueOptions o;
  o.max_messages = *r.int8(1);
  o.max_bytes = *r.int8(2);
  o.max_payload_bytes = *r.int8(3);
  o.visibility_usecs = *r.int8(4);
  o.max_attempts = *r.int8(5);
  o.backoff_base_usecs = *r.int8(6);
  o.backoff_max_usecs = *r.int8(7);
  o.partitioned = *r.boolean(8);
  o.keep_dead_payload = *r.boolean(9);
  o.retain_acked_usecs = *r.int8(10);
  o.max_dead = *r.int8(11);
  o.dead_retention_usecs = *r.int8(12);
  o.dedup_window_usecs = *r.int8(13);
  for (int p = 0; p < core::priority_classes; ++p) o.admit_percent[p] = *r.int8(14 + p);
  o.notify = *r.boolean(20);
  if (slots != nullptr) *slots = static_cast<int>(*r.int8(21));
  return o;
}

}  // namespace

Queue load(pg::Spi& spi, FunctionCallInfo fcinfo, bool producing) {
  static pg::Statement read("SELECT " FY_QUEUE_COLUMNS " FROM forgeyard.queues"
                            " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
                            {TEXTOID, TEXTOID});
  // Producers keep the queue from being dropped under them until they commit (queue_drop
  // deletes the queue row first, and waits for this lock).
  static pg::Statement read_for_producer("SELECT " FY_QUEUE_COLUMNS " FROM forgeyard.queues"
                                         " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
                                         " FOR KEY SHARE",
                                         {TEXTOID, TEXTOID});
  Queue queue;
  queue.tenant = tenant_arg(fcinfo);
  queue.name = queue_arg(fcinfo);
  check_tenant(spi, queue.tenant);
  queue.t = pg::text_value(queue.tenant);
  queue.q = pg::text_value(queue.name);
  bool found = false;
  spi.run(producing ? read_for_producer : read, {queue.t, queue.q}, [&](const pg::Row& r) {
    queue.options = options_from(r, &queue.slots);
    found = true;
  });
  if (!found)
    throw core::Error(core::sqlstate::undefined_object,
                      "queue \"" + queue.name + "\" does not exist for tenant \"" + queue.tenant + "\"");
  return queue;
}

namespace {

// Options from jsonb over `base`: numbers and names as text, durations as interval text.
core::QueueOptions parse_options(pg::Spi& spi, const pg::Value& json, core::QueueOptions base) {
  static pg::Statement entries("SELECT e.key, e.value OPERATOR(pg_catalog.#>>) '{}' FROM pg_catalog.jsonb_each($1) e",
                               {JSONBOID});
  if (!pg::jsonb_object_keys(json)) throw core::Error(invalid_parameter, "options must be a JSON object");
  std::vector<std::pair<std::string, std::string>> pairs;
  spi.run(entries, {json}, [&](const pg::Row& r) { pairs.emplace_back(*r.text(1), r.text(2).value_or("null")); });
  for (const auto& [key, value] : pairs) {
    if (core::is_duration_option(key))
      core::set_queue_duration(base, key, pg::parse_interval(value, "queue option " + key));
    else
      core::set_queue_option(base, key, value);
  }
  core::validate(base);
  return base;
}

std::vector<pg::Value> option_values(const core::QueueOptions& o) {
  std::vector<pg::Value> v = {pg::int8_value(o.max_messages),
                              pg::int8_value(o.max_bytes),
                              pg::int8_value(o.max_payload_bytes),
                              pg::int8_value(o.visibility_usecs),
                              pg::int8_value(o.max_attempts),
                              pg::int8_value(o.backoff_base_usecs),
                              pg::int8_value(o.backoff_max_usecs),
                              pg::text_value(o.partitioned ? "partition" : "none"),
                              pg::text_value(o.keep_dead_payload ? "keep" : "drop"),
                              pg::int8_value(o.retain_acked_usecs),
                              pg::int8_value(o.max_dead),
                              pg::int8_value(o.dead_retention_usecs),
                              pg::int8_value(o.dedup_window_usecs)};
  for (int p = 0; p < core::priority_classes; ++p) v.push_back(pg::int8_value(o.admit_percent[p]));
  v.push_back(pg::bool_value(o.notify));
  return v;
}

double unit_random() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

// ---- enqueue -----------------------------------------------------------------------------

struct Message {
  std::string payload;
  std::optional<std::string> event_id;  // 16 bytes
  std::optional<std::string> partition_key;
};

}  // namespace

// Unlocked slots are tried first, so that concurrent producers spread over the slots; only when
// none of them admits does admit wait for the locked ones.
int admit(pg::Spi& spi, const Queue& queue, int priority, std::int64_t bytes) {
  static const char* usage_sql =
      "SELECT a.slot, a.admitted_messages OPERATOR(pg_catalog.-) r.released_messages,"
      "       a.admitted_bytes OPERATOR(pg_catalog.-) r.released_bytes"
      "  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r"
      "    ON r.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND r.queue OPERATOR(pg_catalog.=) a.queue"
      "   AND r.slot OPERATOR(pg_catalog.=) a.slot"
      " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.queue OPERATOR(pg_catalog.=) $2";
  // All slots, unlocked, starting at this backend's own slot; then one slot locked at a time.
  static pg::Statement read(std::string(usage_sql) +
                                " ORDER BY (a.slot OPERATOR(pg_catalog.+) $3) OPERATOR(pg_catalog.%) $4",
                            {TEXTOID, TEXTOID, INT4OID, INT4OID});
  static pg::Statement lock_free(std::string(usage_sql) + " AND a.slot OPERATOR(pg_catalog.=) $3 FOR UPDATE OF a SKIP LOCKED",
                                 {TEXTOID, TEXTOID, INT4OID});
  static pg::Statement lock_wait(std::string(usage_sql) + " AND a.slot OPERATOR(pg_catalog.=) $3 FOR UPDATE OF a",
                                 {TEXTOID, TEXTOID, INT4OID});
  static pg::Statement take(
      "UPDATE forgeyard.queue_slots SET admitted_messages = admitted_messages OPERATOR(pg_catalog.+) 1,"
      "   admitted_bytes = admitted_bytes OPERATOR(pg_catalog.+) $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2 AND slot OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, INT4OID, INT8OID});
  static const int start = static_cast<int>(MyProcPid);
  auto fits = [&](int slot, const core::Usage& used) {
    return core::admits(queue.options, priority, used, core::slot_budget(queue.options, queue.slots, slot), bytes);
  };
  // The common case first: this backend's own slot, free of other producers' locks and with room.
  const int home = start % queue.slots;
  bool home_fits = false;
  spi.run(lock_free, {queue.t, queue.q, pg::int4_value(home)},
          [&](const pg::Row& r) { home_fits = fits(home, {*r.int8(2), *r.int8(3)}); });
  if (home_fits) {
    spi.run(take, {queue.t, queue.q, pg::int4_value(home), pg::int8_value(bytes)});
    return home;
  }
  // Candidates by the current counts (an undercount of releases only refuses early).
  std::vector<int> candidates;
  spi.run(read, {queue.t, queue.q, pg::int4_value(start % queue.slots), pg::int4_value(queue.slots)},
          [&](const pg::Row& r) {
            const int slot = static_cast<int>(*r.int8(1));
            if (fits(slot, {*r.int8(2), *r.int8(3)})) candidates.push_back(slot);
          });
  // Lock one candidate, first one no other producer holds, then waiting; re-check under the lock.
  int chosen = -1;
  for (pg::Statement* lock : {&lock_free, &lock_wait}) {
    for (int slot : candidates) {
      spi.run(*lock, {queue.t, queue.q, pg::int4_value(slot)}, [&](const pg::Row& r) {
        if (chosen < 0 && fits(slot, {*r.int8(2), *r.int8(3)})) chosen = slot;
      });
      if (chosen >= 0) break;
    }
    if (chosen >= 0) break;
  }
  if (chosen < 0)
    throw core::Error(core::sqlstate::queue_full,
                      "queue \"" + queue.name + "\" is full for priority class " +
                          core::priority_names[priority],
                      "class " + std::string(core::priority_names[priority]) + " is admitted up to " +
                          std::to_string(queue.options.admit_percent[priority]) + "% of max_messages and max_bytes");
  spi.run(take, {queue.t, queue.q, pg::int4_value(chosen), pg::int8_value(bytes)});
  return chosen;
}

bool join_partition(pg::Spi& spi, const Queue& queue, const std::optional<std::string>& key) {
  static pg::Statement partition(
      "INSERT INTO forgeyard.queue_partitions AS p (tenant_id, queue, partition_key, pending) VALUES ($1, $2, $3, 1)"
      " ON CONFLICT (tenant_id, queue, partition_key) DO UPDATE SET pending = p.pending OPERATOR(pg_catalog.+) 1"
      " RETURNING pending",
      {TEXTOID, TEXTOID, TEXTOID});
  // Only partition-ordered queues order by key; elsewhere a partition_key is carried, not enforced.
  if (!key || !queue.options.partitioned) return true;
  bool is_head = true;
  spi.run(partition, {queue.t, queue.q, pg::text_value(*key)}, [&](const pg::Row& r) { is_head = *r.int8(1) == 1; });
  return is_head;
}

core::Usage usage(pg::Spi& spi, const Queue& queue) {
  static pg::Statement sum(
      "SELECT pg_catalog.sum(a.admitted_messages OPERATOR(pg_catalog.-) r.released_messages)::pg_catalog.int8,"
      "       pg_catalog.sum(a.admitted_bytes OPERATOR(pg_catalog.-) r.released_bytes)::pg_catalog.int8"
      "  FROM forgeyard.queue_slots a JOIN forgeyard.queue_releases r"
      "    ON r.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND r.queue OPERATOR(pg_catalog.=) a.queue"
      "   AND r.slot OPERATOR(pg_catalog.=) a.slot"
      " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  core::Usage used;
  spi.run(sum, {queue.t, queue.q}, [&](const pg::Row& r) {
    used.messages = r.int8(1).value_or(0);
    used.bytes = r.int8(2).value_or(0);
  });
  return used;
}

std::int32_t positive_int_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int32_t max) {
  const std::int32_t v = pg::int4_arg(fcinfo, n, argument);
  if (v < 1 || v > max)
    throw core::Error(core::sqlstate::invalid_parameter,
                      std::string(argument) + " must be between 1 and " + std::to_string(max));
  return v;
}

namespace {

std::int64_t enqueue_one(pg::Spi& spi, const Queue& queue, const Message& m, int priority, std::int64_t delay,
                         TimestampTz now) {
  static pg::Statement next_id("SELECT pg_catalog.nextval('forgeyard.message_ids')", {});
  static pg::Statement claim_event(
      "INSERT INTO forgeyard.queue_events (tenant_id, queue, event_id, msg_id, payload_digest, expires_at)"
      " VALUES ($1, $2, $3, $4, $5, $6)"
      " ON CONFLICT (tenant_id, queue, event_id) DO UPDATE SET msg_id = excluded.msg_id,"
      "   payload_digest = excluded.payload_digest, expires_at = excluded.expires_at"
      " WHERE forgeyard.queue_events.expires_at OPERATOR(pg_catalog.<=) $7"
      " RETURNING msg_id",
      {TEXTOID, TEXTOID, UUIDOID, INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement first_event(
      "SELECT msg_id, payload_digest FROM forgeyard.queue_events WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND event_id OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, UUIDOID});
  static pg::Statement insert(
      "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id,"
      "   payload, bytes, slot, enqueued_at, visible_at)"
      " VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, $8, $9, $10, $11, $12)",
      {INT8OID, TEXTOID, TEXTOID, INT2OID, TEXTOID, BOOLOID, UUIDOID, BYTEAOID, INT8OID, INT2OID, TIMESTAMPTZOID,
       TIMESTAMPTZOID});
  static pg::Statement notify("SELECT pg_catalog.pg_notify('forgeyard_queue', $1)", {TEXTOID});

  const core::QueueOptions& o = queue.options;
  const std::int64_t bytes = static_cast<std::int64_t>(m.payload.size());
  if (bytes > o.max_payload_bytes)
    throw core::Error(core::sqlstate::payload_too_large,
                      "payload of " + std::to_string(bytes) + " bytes is over the limit of queue \"" + queue.name + "\"",
                      "max_payload_bytes is " + std::to_string(o.max_payload_bytes) +
                          "; store the bytes elsewhere and send a reference");
  if (o.partitioned && !m.partition_key)
    throw core::Error(invalid_parameter, "partition_key is required: queue \"" + queue.name + "\" is partition-ordered");
  if (m.partition_key) core::check_name("partition_key", true, *m.partition_key, core::max_partition_key_bytes);

  std::int64_t msg_id = 0;
  spi.run(next_id, {}, [&](const pg::Row& r) { msg_id = *r.int8(1); });
  const std::string digest = core::sha256_hex(m.payload);
  if (m.event_id) {
    // The event row is taken first: a concurrent producer of the same event_id waits for this
    // transaction here and then finds the first message (before any capacity is spent).
    const bool first = spi.run(claim_event, {queue.t, queue.q, pg::uuid_value(*m.event_id), pg::int8_value(msg_id),
                                             pg::text_value(digest), pg::timestamptz_value(now + o.dedup_window_usecs),
                                             pg::timestamptz_value(now)}) > 0;
    if (!first) {
      std::int64_t existing = 0;
      std::string existing_digest;
      spi.run(first_event, {queue.t, queue.q, pg::uuid_value(*m.event_id)}, [&](const pg::Row& r) {
        existing = *r.int8(1);
        existing_digest = *r.text(2);
      });
      if (existing_digest != digest)
        throw core::Error(core::sqlstate::idempotency_mismatch,
                          "event_id was enqueued before with a different payload",
                          "message " + std::to_string(existing) + " carries this event_id");
      return existing;
    }
  }
  const int slot = admit(spi, queue, priority, bytes);
  const bool is_head = join_partition(spi, queue, m.partition_key);
  spi.run(insert, {pg::int8_value(msg_id), queue.t, queue.q, {Int16GetDatum(priority), false},
                   pg::optional_text_value(m.partition_key), pg::bool_value(is_head),
                   pg::optional_uuid_value(m.event_id), pg::bytea_value(m.payload), pg::int8_value(bytes),
                   {Int16GetDatum(slot), false}, pg::timestamptz_value(now), pg::timestamptz_value(now + delay)});
  // Any role may LISTEN, so the payload names the queue without showing tenant or queue names:
  // the first 32 hex digits of SHA-256 of "<tenant>/<queue>" (listeners compute the same).
  if (o.notify) spi.run(notify, {pg::text_value(core::sha256_hex(queue.tenant + "/" + queue.name).substr(0, 32))});
  return msg_id;
}

// A delay may be zero (the default); NULL is 22004 like every other required argument.
std::int64_t delay_arg(FunctionCallInfo fcinfo, int n) {
  const std::optional<core::Duration> d = pg::optional_interval_arg(fcinfo, n);
  if (!d) throw core::Error(core::sqlstate::null_value, "delay must not be NULL");
  if (d->months == 0 && d->days == 0 && d->usecs == 0) return 0;
  return core::check_duration("delay", *d, core::max_queue_duration_usecs);
}

// ---- finishing a delivery ----------------------------------------------------------------

// Messages that left the live queue (acked or dead) in one call: their capacity goes back to
// their slots, and in a partition queue the next message of each key becomes its head. Applied
// once per slot and per key, in ascending order, so that concurrent batch acks lock the shared
// counter rows in one order and cannot deadlock.
struct Releases {
  std::map<int, core::Usage> slots;
  std::map<std::string, std::int64_t> keys;
  void add(const Queue& queue, int slot, std::int64_t bytes, const std::optional<std::string>& key) {
    core::Usage& u = slots[slot];
    u.messages += 1;
    u.bytes += bytes;
    if (key && queue.options.partitioned) keys[*key] += 1;
  }
};

void apply(pg::Spi& spi, const Queue& queue, const Releases& releases) {
  static pg::Statement give_back(
      "UPDATE forgeyard.queue_releases SET released_messages = released_messages OPERATOR(pg_catalog.+) $4,"
      "   released_bytes = released_bytes OPERATOR(pg_catalog.+) $5"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2 AND slot OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, INT4OID, INT8OID, INT8OID});
  static pg::Statement leave_partition(
      "UPDATE forgeyard.queue_partitions SET pending = pending OPERATOR(pg_catalog.-) $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND partition_key OPERATOR(pg_catalog.=) $3 RETURNING pending",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID});
  static pg::Statement drop_partition(
      "DELETE FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 AND partition_key OPERATOR(pg_catalog.=) $3"
      "   AND pending OPERATOR(pg_catalog.=) 0",
      {TEXTOID, TEXTOID, TEXTOID});
  static pg::Statement next_head(
      "UPDATE forgeyard.messages SET is_head = true WHERE msg_id OPERATOR(pg_catalog.=) ("
      "  SELECT n.msg_id FROM forgeyard.messages n WHERE n.tenant_id OPERATOR(pg_catalog.=) $1"
      "     AND n.queue OPERATOR(pg_catalog.=) $2 AND n.partition_key OPERATOR(pg_catalog.=) $3"
      "     AND n.state OPERATOR(pg_catalog.=) 'pending' ORDER BY n.msg_id LIMIT 1)",
      {TEXTOID, TEXTOID, TEXTOID});
  for (const auto& [slot, used] : releases.slots)
    spi.run(give_back, {queue.t, queue.q, pg::int4_value(slot), pg::int8_value(used.messages),
                        pg::int8_value(used.bytes)});
  for (const auto& [key, count] : releases.keys) {
    const pg::Value k = pg::text_value(key);
    std::int64_t pending = 0;
    spi.run(leave_partition, {queue.t, queue.q, k, pg::int8_value(count)},
            [&](const pg::Row& r) { pending = *r.int8(1); });
    if (pending > 0)
      spi.run(next_head, {queue.t, queue.q, k});
    else
      spi.run(drop_partition, {queue.t, queue.q, k});
  }
}

// The current delivery of a message, locked; nullopt if the message is gone (acked, purged).
struct Delivery {
  std::string state;
  std::optional<std::int64_t> claim_token;
  TimestampTz visible_at = 0;
  std::int64_t attempt = 0;
  int slot = 0;
  std::int64_t bytes = 0;
  std::optional<std::string> partition_key;
};

std::optional<Delivery> lock_delivery(pg::Spi& spi, const Queue& queue, std::int64_t msg_id) {
  static pg::Statement lock(
      "SELECT state, claim_token, visible_at, attempt, slot, bytes, partition_key FROM forgeyard.messages"
      " WHERE msg_id OPERATOR(pg_catalog.=) $3 AND tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND queue OPERATOR(pg_catalog.=) $2 FOR UPDATE",
      {TEXTOID, TEXTOID, INT8OID});
  std::optional<Delivery> d;
  spi.run(lock, {queue.t, queue.q, pg::int8_value(msg_id)}, [&](const pg::Row& r) {
    d = Delivery{*r.text(1), r.int8(2), *r.timestamptz(3), *r.int8(4), static_cast<int>(*r.int8(5)), *r.int8(6),
                 r.text(7)};
  });
  return d;
}

[[noreturn]] void throw_stale_claim(std::int64_t msg_id, std::int64_t token) {
  throw core::Error(core::sqlstate::stale_fence,
                    "claim token " + std::to_string(token) + " is not the current delivery of message " +
                        std::to_string(msg_id),
                    "the visibility ran out and the message was claimed again, or it was nacked; stop work on it");
}

enum class Finish { done, already_finished };

// ack: delete (or keep as acked for retain_acked) and give the room back. An ack of a message
// that is already acked, dead or gone is a no-op; a token that is not the current claim is FY001.
Finish ack_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token, TimestampTz now,
               Releases& releases) {
  static pg::Statement remove("DELETE FROM forgeyard.messages WHERE msg_id OPERATOR(pg_catalog.=) $1", {INT8OID});
  static pg::Statement keep(
      "UPDATE forgeyard.messages SET state = 'acked', finished_at = $2, payload = NULL"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID});
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  if (!d || d->state != "pending") return Finish::already_finished;
  if (d->claim_token != token) throw_stale_claim(msg_id, token);
  if (queue.options.retain_acked_usecs > 0)
    spi.run(keep, {pg::int8_value(msg_id), pg::timestamptz_value(now)});
  else
    spi.run(remove, {pg::int8_value(msg_id)});
  releases.add(queue, d->slot, d->bytes, d->partition_key);
  return Finish::done;
}

// ack for many deliveries at once: one set-based statement finishes every (msg_id, token) pair
// that is the current delivery; only the pairs it did not finish are looked at one by one (a
// stale token is FY001, a message already finished or gone a no-op).
void ack_many(pg::Spi& spi, const Queue& queue, const pg::Value& msg_ids, const pg::Value& tokens,
              const std::vector<std::pair<std::int64_t, std::int64_t>>& deliveries, TimestampTz now,
              Releases& releases) {
  // msg_id = ANY(...) keeps it a primary-key lookup per pair; the token is the one at the same
  // position in the other array.
  static const char* match =
      " WHERE m.msg_id OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.int8[])"
      "   AND m.claim_token OPERATOR(pg_catalog.=)"
      "       ($4::pg_catalog.int8[])[pg_catalog.array_position($3::pg_catalog.int8[], m.msg_id)]"
      "   AND m.tenant_id OPERATOR(pg_catalog.=) $1 AND m.queue OPERATOR(pg_catalog.=) $2"
      "   AND m.state OPERATOR(pg_catalog.=) 'pending'"
      " RETURNING m.msg_id, m.slot, m.bytes, m.partition_key";
  static pg::Statement remove(std::string("DELETE FROM forgeyard.messages m") + match,
                              {TEXTOID, TEXTOID, INT8ARRAYOID, INT8ARRAYOID});
  static pg::Statement keep(std::string("UPDATE forgeyard.messages m SET state = 'acked', finished_at = $5,"
                                        " payload = NULL") + match,
                            {TEXTOID, TEXTOID, INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID});
  std::set<std::int64_t> done;
  auto collect = [&](const pg::Row& r) {
    done.insert(*r.int8(1));
    releases.add(queue, static_cast<int>(*r.int8(2)), *r.int8(3), r.text(4));
  };
  if (queue.options.retain_acked_usecs > 0)
    spi.run(keep, {queue.t, queue.q, msg_ids, tokens, pg::timestamptz_value(now)}, collect);
  else
    spi.run(remove, {queue.t, queue.q, msg_ids, tokens}, collect);
  for (const auto& [msg_id, token] : deliveries)
    if (!done.contains(msg_id)) ack_one(spi, queue, msg_id, token, now, releases);
}

// nack: retry after backoff with full jitter, or dead-letter (max attempts, or permanent).
std::string nack_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token,
                     const std::string& error, bool permanent, TimestampTz now, Releases& releases) {
  static pg::Statement retry(
      "UPDATE forgeyard.messages SET claim_token = NULL, claimed_by = NULL, visible_at = $2, last_error = $3"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, TEXTOID});
  static pg::Statement dead(
      "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, last_error = $3,"
      "   error_class = $4, is_head = false, payload = CASE WHEN $5 THEN payload END"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, BOOLOID});
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  if (!d || d->state != "pending" || d->claim_token != token) throw_stale_claim(msg_id, token);
  if (core::dead_after_failure(queue.options, d->attempt, permanent)) {
    spi.run(dead, {pg::int8_value(msg_id), pg::timestamptz_value(now), pg::text_value(error),
                   pg::text_value(permanent ? "permanent" : "max_attempts"),
                   pg::bool_value(queue.options.keep_dead_payload)});
    releases.add(queue, d->slot, d->bytes, d->partition_key);
    return "dead";
  }
  const std::int64_t delay = core::retry_delay_usecs(queue.options, d->attempt, unit_random());
  spi.run(retry, {pg::int8_value(msg_id), pg::timestamptz_value(now + delay), pg::text_value(error)});
  return "retry";
}

// extend: more visibility for a live claim; a lapsed or taken-over delivery is FY001.
TimestampTz extend_one(pg::Spi& spi, const Queue& queue, std::int64_t msg_id, std::int64_t token,
                       std::int64_t visibility, TimestampTz now) {
  static pg::Statement extend("UPDATE forgeyard.messages SET visible_at = $2 WHERE msg_id OPERATOR(pg_catalog.=) $1",
                              {INT8OID, TIMESTAMPTZOID});
  std::optional<Delivery> d = lock_delivery(spi, queue, msg_id);
  if (!d || d->state != "pending" || d->claim_token != token || d->visible_at <= now) throw_stale_claim(msg_id, token);
  spi.run(extend, {pg::int8_value(msg_id), pg::timestamptz_value(now + visibility)});
  return now + visibility;
}

// ---- claim -------------------------------------------------------------------------------

struct Claimed {
  std::int64_t msg_id;
  std::optional<std::string> event_id, partition_key;
  int priority;
  std::int64_t attempt, claim_token;
  std::optional<std::string> payload;
  TimestampTz enqueued_at;
};

}  // namespace

// The claim of one class: an index range scan (messages_claim) that stops at the first message
// not yet visible, skipping rows other claimers hold. Never a scan or sort of the queue.
const char claim_class_sql[] =
    "UPDATE forgeyard.messages m SET claim_token = pg_catalog.nextval('forgeyard.claim_tokens'),"
    "   attempt = m.attempt OPERATOR(pg_catalog.+) 1, visible_at = $5, claimed_by = $6"
    "  FROM (SELECT c.msg_id FROM forgeyard.messages c"
    "         WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2"
    "           AND c.priority OPERATOR(pg_catalog.=) $3 AND c.state OPERATOR(pg_catalog.=) 'pending' AND c.is_head"
    "           AND c.visible_at OPERATOR(pg_catalog.<=) $7"
    "         ORDER BY c.visible_at, c.msg_id LIMIT $4 FOR UPDATE SKIP LOCKED) picked"
    " WHERE m.msg_id OPERATOR(pg_catalog.=) picked.msg_id"
    " RETURNING m.msg_id, m.event_id, m.partition_key, m.priority, m.attempt, m.claim_token, m.payload, m.enqueued_at,"
    "   m.slot, m.bytes";

namespace {

std::vector<Claimed> claim(pg::Spi& spi, const Queue& queue, const std::string& consumer, int max_messages,
                           std::int64_t visibility, TimestampTz now) {
  static pg::Statement claim_class(claim_class_sql, {TEXTOID, TEXTOID, INT2OID, INT4OID, TIMESTAMPTZOID, TEXTOID,
                                                     TIMESTAMPTZOID});
  // A delivery that lapsed once too often (its consumer died or hung every time) is not handed
  // out again: it is dead-lettered like a nack after max_attempts.
  static pg::Statement dead(
      "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, is_head = false,"
      "   last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
      "   payload = CASE WHEN $3 THEN payload END"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, BOOLOID});
  std::vector<Claimed> out;
  std::vector<std::int64_t> doomed;
  Releases lapsed;
  const pg::Value c = pg::text_value(consumer);
  for (int p = 0; p < core::priority_classes && static_cast<int>(out.size()) < max_messages; ++p) {
    const std::size_t before = out.size();
    spi.run(claim_class,
            {queue.t, queue.q, {Int16GetDatum(p), false}, pg::int4_value(max_messages - static_cast<int>(out.size())),
             pg::timestamptz_value(now + visibility), c, pg::timestamptz_value(now)},
            [&](const pg::Row& r) {
              if (*r.int8(5) > queue.options.max_attempts) {  // (no SPI call while these rows are read)
                lapsed.add(queue, static_cast<int>(*r.int8(9)), *r.int8(10), r.text(3));
                doomed.push_back(*r.int8(1));
                return;
              }
              out.push_back({*r.int8(1), r.uuid(2), r.text(3), static_cast<int>(*r.int8(4)), *r.int8(5), *r.int8(6),
                             r.bytea(7), *r.timestamptz(8)});
            });
    // Delivery order within the class: oldest first (RETURNING does not keep the scan order).
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(),
              [](const Claimed& a, const Claimed& b) { return a.msg_id < b.msg_id; });
  }
  for (std::int64_t msg_id : doomed)
    spi.run(dead, {pg::int8_value(msg_id), pg::timestamptz_value(now), pg::bool_value(queue.options.keep_dead_payload)});
  apply(spi, queue, lapsed);
  return out;
}

void return_claimed(FunctionCallInfo fcinfo, const std::vector<Claimed>& claimed) {
  pg::TableResult out(fcinfo);
  for (const Claimed& m : claimed)
    out.add_row({pg::int8_value(m.msg_id), pg::optional_uuid_value(m.event_id), pg::optional_text_value(m.partition_key),
                 pg::text_value(core::priority_names[m.priority]), pg::int4_value(static_cast<int>(m.attempt)),
                 pg::int8_value(m.claim_token), pg::optional_bytea_value(m.payload),
                 pg::timestamptz_value(m.enqueued_at)});
}

int max_messages_arg(FunctionCallInfo fcinfo, int n) {
  return positive_int_arg(fcinfo, n, "max_messages", core::max_claim_batch);
}

std::int64_t visibility_arg(FunctionCallInfo fcinfo, int n, const Queue& queue) {
  const std::optional<core::Duration> d = pg::optional_interval_arg(fcinfo, n);
  return d ? core::check_duration("visibility", *d, core::max_queue_duration_usecs) : queue.options.visibility_usecs;
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

// queue_create(tenant, queue, options)
FY_FUNCTION(fy_queue_create) {
  static pg::Statement create(
      "INSERT INTO forgeyard.queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,"
      "   max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,"
      "   max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,"
      "   admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots, created_at)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,"
      "         $23, $24) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID, TEXTOID, INT8OID,
       INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID, INT4OID,
       TIMESTAMPTZOID});
  static pg::Statement counters(
      "INSERT INTO forgeyard.queue_slots (tenant_id, queue, slot) SELECT $1, $2, s FROM pg_catalog.generate_series(0, $3 OPERATOR(pg_catalog.-) 1) s;"
      "INSERT INTO forgeyard.queue_releases (tenant_id, queue, slot) SELECT $1, $2, s FROM pg_catalog.generate_series(0, $3 OPERATOR(pg_catalog.-) 1) s",
      {TEXTOID, TEXTOID, INT4OID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string name = queue_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const core::QueueOptions o =
      pg::arg_is_null(fcinfo, 2) ? core::QueueOptions{} : parse_options(spi, pg::jsonb_arg(fcinfo, 2, "options"), {});
  const int slots = core::capacity_slots(o);
  const std::vector<pg::Value> values = option_values(o);
  const pg::Value t = pg::text_value(tenant), q = pg::text_value(name);
  const std::uint64_t created = spi.run(
      create, {t, q, values[0], values[1], values[2], values[3], values[4], values[5], values[6], values[7], values[8],
               values[9], values[10], values[11], values[12], values[13], values[14], values[15], values[16],
               values[17], values[18], values[19], pg::int4_value(slots), pg::timestamptz_value(pg::now())});
  if (created == 0)
    throw core::Error("42710", "queue \"" + name + "\" already exists for tenant \"" + tenant + "\"",
                      "use forgeyard.queue_alter to change its options");
  spi.run(counters, {t, q, pg::int4_value(slots)});
  spi.finish();
  return (Datum)0;
}

// queue_alter(tenant, queue, options): changes the given options, keeps the others.
FY_FUNCTION(fy_queue_alter) {
  static pg::Statement alter(
      "UPDATE forgeyard.queues SET max_messages = $3, max_bytes = $4, max_payload_bytes = $5, visibility_usecs = $6,"
      "   max_attempts = $7, backoff_base_usecs = $8, backoff_max_usecs = $9, ordering = $10,"
      "   dead_letter_payload = $11, retain_acked_usecs = $12, max_dead = $13, dead_retention_usecs = $14,"
      "   dedup_window_usecs = $15, admit_emergency = $16, admit_security_control = $17, admit_realtime = $18,"
      "   admit_interactive = $19, admit_background = $20, admit_bulk = $21, notify = $22"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID, TEXTOID, INT8OID,
       INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID});
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const core::QueueOptions o = parse_options(spi, pg::jsonb_arg(fcinfo, 2, "options"), queue.options);
  if (o.partitioned != queue.options.partitioned)
    throw core::Error(invalid_parameter, "queue option ordering cannot change after the queue is created");
  const std::vector<pg::Value> v = option_values(o);
  spi.run(alter, {queue.t, queue.q, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12],
                  v[13], v[14], v[15], v[16], v[17], v[18], v[19]});
  spi.finish();
  return (Datum)0;
}

// queue_drop(tenant, queue) -> whether it existed; its messages, events and counters go too.
FY_FUNCTION(fy_queue_drop) {
  // The queue row goes first: that waits for producers that loaded the queue (FOR KEY SHARE) to
  // commit, and the deletes after it then see their messages.
  static pg::Statement drop_queue(
      "DELETE FROM forgeyard.queues WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_rest(
      "WITH m AS (DELETE FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " e AS (DELETE FROM forgeyard.queue_events WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " p AS (DELETE FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " s AS (DELETE FROM forgeyard.queue_slots WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2)"
      " DELETE FROM forgeyard.queue_releases WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string name = queue_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value t = pg::text_value(tenant), q = pg::text_value(name);
  const bool dropped = spi.run(drop_queue, {t, q}) > 0;
  spi.run(drop_rest, {t, q});
  spi.finish();
  return BoolGetDatum(dropped);
}

// enqueue(tenant, queue, payload, event_id, partition_key, priority, delay) -> msg_id
FY_FUNCTION(fy_enqueue) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo, true);
  Message m;
  m.payload = *pg::bytea_arg(fcinfo, 2, "payload", std::size_t{1} << 30);
  m.event_id = pg::optional_uuid_arg(fcinfo, 3);
  m.partition_key = pg::arg_is_null(fcinfo, 4) ? std::nullopt
                                               : std::optional<std::string>(*pg::text_arg(fcinfo, 4, "partition_key",
                                                                                          core::max_partition_key_bytes, false));
  const int priority = core::priority_from_name("priority", pg::name_arg(fcinfo, 5, "priority", 64));
  const std::int64_t delay = delay_arg(fcinfo, 6);
  const std::int64_t msg_id = enqueue_one(spi, queue, m, priority, delay, pg::now());
  spi.finish();
  return Int64GetDatum(msg_id);
}

// enqueue_batch(tenant, queue, payloads, event_ids, partition_keys, priority, delay) -> msg_ids, in order
FY_FUNCTION(fy_enqueue_batch) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo, true);
  const auto payloads = pg::bytea_array_arg(fcinfo, 2);
  const auto event_ids = pg::uuid_array_arg(fcinfo, 3);
  const auto keys = pg::text_array_arg(fcinfo, 4);
  if (!payloads) throw core::Error(core::sqlstate::null_value, "payloads must not be NULL");
  if ((event_ids && event_ids->size() != payloads->size()) || (keys && keys->size() != payloads->size()))
    throw core::Error(core::sqlstate::invalid_parameter, "event_ids and partition_keys must match payloads in length");
  const int priority = core::priority_from_name("priority", pg::name_arg(fcinfo, 5, "priority", 64));
  const std::int64_t delay = delay_arg(fcinfo, 6);
  const TimestampTz now = pg::now();
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < payloads->size(); ++i) {
    if (!(*payloads)[i]) throw core::Error(core::sqlstate::null_value, "payloads must not contain NULL");
    Message m{*(*payloads)[i], event_ids ? (*event_ids)[i] : std::nullopt, keys ? (*keys)[i] : std::nullopt};
    ids.push_back(enqueue_one(spi, queue, m, priority, delay, now));
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  for (std::int64_t id : ids) out.add_row({pg::int8_value(id)});
  return (Datum)0;
}

// claim(tenant, queue, consumer, max_messages, visibility) -> up to max_messages deliveries
FY_FUNCTION(fy_claim) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::string consumer = pg::name_arg(fcinfo, 2, "consumer", core::max_consumer_bytes);
  const int max_messages = max_messages_arg(fcinfo, 3);
  const std::int64_t visibility = visibility_arg(fcinfo, 4, queue);
  const std::vector<Claimed> claimed = claim(spi, queue, consumer, max_messages, visibility, pg::now());
  spi.finish();
  return_claimed(fcinfo, claimed);
  return (Datum)0;
}

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
  if (!deliveries.empty())
    ack_many(spi, queue, pg::raw_arg(fcinfo, 3), pg::raw_arg(fcinfo, 4), deliveries, now, releases);
  apply(spi, queue, releases);
  const std::vector<Claimed> claimed = claim(spi, queue, consumer, max_messages, visibility, now);
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
  ack_one(spi, queue, msg_id, token, pg::now(), releases);
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
  if (!deliveries.empty())
    ack_many(spi, queue, pg::raw_arg(fcinfo, 2), pg::raw_arg(fcinfo, 3), deliveries, now, releases);
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
