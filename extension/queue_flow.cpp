// Flow control of a queue's producers and retries (docs/flow-control-design.md): admission limits
// (admission_limit, taken by enqueue) and the retry budget (taken by nack). The rules are
// core/flow.cpp's; this file reads and writes their rows. client/src/sqlite/queue_flow.cpp is its
// twin.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "core/flow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

namespace {
std::optional<std::int64_t> usecs_of(const std::optional<TimestampTz>& t) {
  return t ? std::optional<std::int64_t>(*t) : std::nullopt;
}
}  // namespace

// The buckets are tried from a slot that moves with each call (so producers spread over them),
// each locked SKIP LOCKED: a bucket another producer holds is passed over. Only a producer that
// holds no bucket waits, for one: waiting while holding one could deadlock against a producer
// that waits the other way. So near the limit a producer may be refused while another producer
// holds the last tokens; it is never admitted past the limit.
void admit_rate(pg::Spi& spi, const Queue& queue, std::int64_t count, TimestampTz now) {
  static const char* bucket_sql =
      "SELECT tokens, per_usecs, tat FROM forgeyard.queue_admission"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND slot OPERATOR(pg_catalog.=) $3 FOR UPDATE";
  static pg::Statement lock_free(std::string(bucket_sql) + " SKIP LOCKED", {TEXTOID, TEXTOID, INT4OID});
  static pg::Statement lock_wait(bucket_sql, {TEXTOID, TEXTOID, INT4OID});
  static pg::Statement set_tat(
      "UPDATE forgeyard.queue_admission SET tat = $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2"
      "   AND slot OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID});
  const core::QueueOptions& o = queue.options;
  if (o.admission_rate <= 0 || count <= 0) return;
  const core::flow::Rate total{o.admission_rate, o.admission_per_usecs};
  const int buckets = core::flow::admission_slots(total, queue.slots);
  static unsigned rotation = static_cast<unsigned>(MyProcPid);
  const int start = static_cast<int>(rotation++ % static_cast<unsigned>(buckets));
  std::int64_t remaining = count;
  std::int64_t wait = std::numeric_limits<std::int64_t>::max();
  bool held = false, skipped = false;
  auto visit = [&](pg::Statement& lock, int slot) {
    bool found = false;
    core::flow::Rate rate;
    std::optional<std::int64_t> tat;
    spi.run(lock, {queue.t, queue.q, pg::int4_value(slot)}, [&](const pg::Row& r) {
      found = true;
      rate = {*r.int8(1), *r.int8(2)};
      tat = usecs_of(r.timestamptz(3));
    });
    if (!found) return false;
    held = true;
    const std::int64_t taken = core::flow::take(rate, tat, now, remaining);
    if (taken > 0) {
      spi.run(set_tat, {queue.t, queue.q, pg::int4_value(slot), pg::timestamptz_value(*tat)});
      remaining -= taken;
    }
    if (remaining > 0) wait = std::min(wait, core::flow::wait_usecs(rate, tat, now));
    return true;
  };
  for (int i = 0; i < buckets && remaining > 0; ++i)
    if (!visit(lock_free, (start + i) % buckets)) skipped = true;
  if (remaining > 0 && !held && skipped) visit(lock_wait, start);
  // No bucket at all: the limit was removed after this backend cached the queue's options.
  if (remaining > 0 && held) core::flow::throw_admission_refused(queue.name, total, wait);
}

core::flow::RetryDecision admit_retry(pg::Spi& spi, const Queue& queue, TimestampTz now) {
  static const char* window_sql =
      "SELECT window_start, admitted_base, prev_first, retries, delayed FROM forgeyard.queue_retry_windows"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2 FOR UPDATE";
  static pg::Statement lock(window_sql, {TEXTOID, TEXTOID});
  static pg::Statement create(
      "INSERT INTO forgeyard.queue_retry_windows"
      "   (tenant_id, queue, window_start, admitted_base, prev_first, retries, delayed)"
      " VALUES ($1, $2, $3, 0, 0, 0, 0) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  static pg::Statement admitted(
      "SELECT pg_catalog.sum(admitted_messages)::bigint FROM forgeyard.queue_slots"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement save(
      "UPDATE forgeyard.queue_retry_windows SET window_start = $3, admitted_base = $4, prev_first = $5,"
      "   retries = $6, delayed = $7"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID, INT8OID, INT8OID});
  if (!queue.options.retry_budget) return {};
  core::flow::RetryWindow w;
  bool found = false;
  auto read = [&](const pg::Row& r) {
    found = true;
    w.start = *r.timestamptz(1);
    w.admitted_base = *r.int8(2);
    w.prev_first = *r.int8(3);
    w.retries = *r.int8(4);
    w.delayed = *r.int8(5);
  };
  spi.run(lock, {queue.t, queue.q}, read);
  if (!found) {
    spi.run(create, {queue.t, queue.q, pg::timestamptz_value(now)});
    spi.run(lock, {queue.t, queue.q}, read);
  }
  std::int64_t admitted_now = 0;
  spi.run(admitted, {queue.t, queue.q}, [&](const pg::Row& r) { admitted_now = r.int8(1).value_or(0); });
  const core::flow::RetryDecision d = core::flow::admit_retry(queue.options, w, admitted_now, now);
  spi.run(save, {queue.t, queue.q, pg::timestamptz_value(w.start), pg::int8_value(w.admitted_base),
                 pg::int8_value(w.prev_first), pg::int8_value(w.retries), pg::int8_value(w.delayed)});
  return d;
}

}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

// admission_limit(tenant, queue, rate, per): NULL rate removes the limit.
FY_FUNCTION(fy_admission_limit) {
  static pg::Statement set_limit(
      "UPDATE forgeyard.queues SET admission_rate = $3, admission_per_usecs = $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, INT8OID, INT8OID});
  static pg::Statement clear_buckets(
      "DELETE FROM forgeyard.queue_admission"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement add_bucket(
      "INSERT INTO forgeyard.queue_admission (tenant_id, queue, slot, tokens, per_usecs) VALUES ($1, $2, $3, $4, $5)",
      {TEXTOID, TEXTOID, INT4OID, INT8OID, INT8OID});
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  std::optional<core::flow::Rate> rate;
  if (!pg::arg_is_null(fcinfo, 2)) {
    const std::int64_t tokens = pg::int4_arg(fcinfo, 2, "rate");
    const std::optional<core::Duration> per = pg::optional_interval_arg(fcinfo, 3);
    if (!per) throw core::Error(core::sqlstate::null_value, "per must not be NULL");
    rate = core::flow::Rate{tokens, core::flow::check_rate("rate", tokens, "per", *per)};
  }
  spi.run(set_limit, {queue.t, queue.q, rate ? pg::int8_value(rate->tokens) : pg::null_value(),
                      rate ? pg::int8_value(rate->per_usecs) : pg::null_value()});
  spi.run(clear_buckets, {queue.t, queue.q});
  if (rate) {
    const int buckets = core::flow::admission_slots(*rate, queue.slots);
    for (int slot = 0; slot < buckets; ++slot) {
      const core::flow::Rate share = core::flow::slot_rate(*rate, buckets, slot);
      spi.run(add_bucket,
              {queue.t, queue.q, pg::int4_value(slot), pg::int8_value(share.tokens), pg::int8_value(share.per_usecs)});
    }
  }
  spi.finish();
  return (Datum)0;
}
