// Flow control (docs/flow-control-design.md): admission limits of producers (admission_limit,
// taken by enqueue), the retry budget (taken by nack), and resources with rate limits,
// concurrency limits and circuit breakers (resource_limit, breaker_configure, breaker_state;
// charged by the claim, given back by ack and nack). The rules are core/flow.cpp's; this file reads
// and writes their rows. client/src/sqlite/queue_flow.cpp is its twin.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/flow.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "pg/trigger.hpp"
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
// holds no bucket from this call waits, for one its transaction may wait for (held_rows():
// waiting while holding one could deadlock against a producer that waits the other way), and is
// refused if there is none. So near the limit a producer may be refused while another producer
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
    held_rows().took(held_key(queue, HeldRow::admission_bucket, slot));
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
  if (remaining > 0 && !held && skipped) {
    // Every bucket is held by others (or gone): the first from `start` that this transaction may
    // wait for is waited for; with none, the producer is refused (one emission interval as its
    // retry-after).
    bool waited = false;
    for (int i = 0; i < buckets && !waited; ++i) {
      const int slot = (start + i) % buckets;
      if (!held_rows().may_wait(held_key(queue, HeldRow::admission_bucket, slot))) continue;
      waited = true;
      visit(lock_wait, slot);
    }
    if (!waited)
      core::flow::throw_admission_refused(queue.name, total, (total.per_usecs + total.tokens - 1) / total.tokens);
  }
  // No bucket at all: the limit was removed after this backend cached the queue's options.
  if (remaining > 0 && held) core::flow::throw_admission_refused(queue.name, total, wait);
}

core::flow::RetryDecision admit_retry(pg::Spi& spi, const Queue& queue, TimestampTz now) {
  static const char* window_sql =
      "SELECT window_start, admitted_base, prev_first, retries, delayed FROM forgeyard.queue_retry_windows"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2 FOR UPDATE";
  static pg::Statement lock(window_sql, {TEXTOID, TEXTOID});
  static pg::Statement lock_free(std::string(window_sql) + " SKIP LOCKED", {TEXTOID, TEXTOID});
  static pg::Statement peek(
      "SELECT window_start FROM forgeyard.queue_retry_windows"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement create(
      "INSERT INTO forgeyard.queue_retry_windows"
      "   (tenant_id, queue, window_start, admitted_base, prev_first, retries, delayed)"
      " VALUES ($1, $2, $3, 0, 0, 0, 0) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  static pg::Statement admitted_rows(
      "SELECT pg_catalog.sum(admitted_messages)::bigint FROM forgeyard.queue_slots"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  // (0.12.0 on: with each slot's row of its admission generation)
  static pg::Statement admitted_generations(
      "SELECT pg_catalog.sum(a.admitted_messages OPERATOR(pg_catalog.+) COALESCE(g.admitted_messages, 0))::bigint"
      "  FROM forgeyard.queue_slots a LEFT JOIN forgeyard.queue_admit_deltas g"
      "    ON g.tenant_id OPERATOR(pg_catalog.=) a.tenant_id AND g.queue OPERATOR(pg_catalog.=) a.queue"
      "   AND g.slot OPERATOR(pg_catalog.=) a.slot AND g.gen OPERATOR(pg_catalog.=) a.admit_gen"
      " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.queue OPERATOR(pg_catalog.=) $2",
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
  // The window row is waited for only where this transaction may wait for it (held_rows()).
  // Otherwise a window another transaction holds (or one not yet visible) is not waited for: the
  // retry waits for that window's end instead (as one over the budget does), never admitted past it.
  const std::string key = held_key(queue, HeldRow::retry_window, 0);
  if (!held_rows().may_wait(key)) {
    spi.run(lock_free, {queue.t, queue.q}, read);
    if (!found) {
      bool exists = false;
      std::optional<TimestampTz> start;
      spi.run(peek, {queue.t, queue.q}, [&](const pg::Row& r) {
        exists = true;
        start = r.timestamptz(1);
      });
      // No window yet: nothing has been retried, well within any budget (admitted uncounted).
      // A window held by another nack: the retry waits for that window's end, or one window
      // from now if the window it saw is over.
      if (!exists) return {};
      const TimestampTz end = *start + queue.options.retry_budget_window_usecs;
      return {false, end > now ? end : now + queue.options.retry_budget_window_usecs};
    }
  } else {
    spi.run(lock, {queue.t, queue.q}, read);
    if (!found) {
      spi.run(create, {queue.t, queue.q, pg::timestamptz_value(now)});
      spi.run(lock, {queue.t, queue.q}, read);
    }
  }
  held_rows().took(key);
  std::int64_t admitted_now = 0;
  spi.run(pg::has_table(pg::CachedTable::queue_admit_deltas) ? admitted_generations : admitted_rows, {queue.t, queue.q},
          [&](const pg::Row& r) { admitted_now = r.int8(1).value_or(0); });
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

// fairness_weight(tenant, queue, fairness_key, weight): NULL weight resets it to 1.
FY_FUNCTION(fy_fairness_weight) {
  static pg::Statement set_weight(
      "INSERT INTO forgeyard.queue_fair_keys AS k (tenant_id, queue, fairness_key, weight) VALUES ($1, $2, $3, $4)"
      " ON CONFLICT (tenant_id, queue, fairness_key) DO UPDATE SET weight = excluded.weight",
      {TEXTOID, TEXTOID, TEXTOID, INT4OID});
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::string key = pg::name_arg(fcinfo, 2, "fairness_key", core::max_partition_key_bytes);
  const std::int64_t weight = core::fair_weight(
      pg::arg_is_null(fcinfo, 3) ? std::nullopt : std::optional<std::int64_t>(pg::int4_arg(fcinfo, 3, "weight")));
  if (!queue.options.fairness) core::throw_not_fair(queue.name);
  spi.run(set_weight, {queue.t, queue.q, pg::text_value(key), pg::int4_value(static_cast<std::int32_t>(weight))});
  spi.finish();
  return (Datum)0;
}

namespace fy::queue {

const ResourceConfigs& resource_configs(pg::Spi& spi, const Queue& queue) {
  static pg::Statement read(
      "SELECT resource, rate, per_usecs, burst, max_in_flight, failure_rate, minimum_calls, window_calls,"
      "   open_for_usecs, half_open_calls, parts::pg_catalog.int8 FROM forgeyard.flow_resources"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1",
      {TEXTOID});
  static const ResourceConfigs none;
  static std::map<std::string, ResourceConfigs, std::less<>> cache;
  static std::uint64_t cache_generation = 0;
  if (!queue.flow) return none;
  const std::uint64_t generation = pg::cache_generation(pg::CachedTable::flow_resources);
  if (generation != cache_generation) {
    cache.clear();
    cache_generation = generation;
  }
  if (auto it = cache.find(queue.tenant); it != cache.end()) return it->second;
  ResourceConfigs configs;
  spi.run(read, {queue.t}, [&](const pg::Row& r) {
    core::flow::ResourceConfig c;
    if (r.int8(2)) c.rate = core::flow::Rate{*r.int8(2), *r.int8(3), *r.int8(4)};
    c.max_in_flight = r.int8(5);
    if (r.float8(6))
      c.breaker = core::flow::BreakerConfig{*r.float8(6), *r.int8(7), *r.int8(8), *r.int8(9), *r.int8(10)};
    c.parts = static_cast<int>(*r.int8(11));
    configs.emplace(*r.text(1), c);
  });
  // Kept only if no invalidation came in while the rows were read (nor under a transaction
  // snapshot, which may be older than the cache).
  if (pg::uses_transaction_snapshot() || pg::cache_generation(pg::CachedTable::flow_resources) != cache_generation) {
    static ResourceConfigs uncached;
    uncached = std::move(configs);
    return uncached;
  }
  if (cache.size() >= 4096) cache.clear();
  return cache[queue.tenant] = std::move(configs);
}

core::flow::ResourceState resource_state_of(const pg::Table& t) {
  core::flow::ResourceState s;
  const int tat = t.column("tat"), open_until = t.column("open_until");
  if (!t.is_null(tat)) s.tat = t.timestamptz(tat);
  s.in_flight = t.int8(t.column("in_flight"));
  s.state = core::flow::breaker_state_from(t.text(t.column("breaker")).value_or("closed"));
  s.outcomes = t.text(t.column("outcomes")).value_or("");
  s.changed_at = t.timestamptz(t.column("changed_at"));
  s.open_until = t.is_null(open_until) ? 0 : t.timestamptz(open_until);
  s.half_open_in_flight = t.int8(t.column("half_open_in_flight"));
  s.half_open_successes = t.int8(t.column("half_open_successes"));
  s.transitions = t.int8(t.column("transitions"));
  return s;
}

void write_resource_state(pg::Table& t, const core::flow::ResourceState& s, std::int64_t refused) {
  const int refused_col = t.column("refused");
  t.update({{t.column("tat"), s.tat ? pg::timestamptz_value(*s.tat) : pg::null_value()},
            {t.column("in_flight"), pg::int8_value(s.in_flight)},
            {t.column("breaker"), pg::text_value(core::flow::to_string(s.state))},
            {t.column("outcomes"), pg::text_value(s.outcomes)},
            {t.column("changed_at"), pg::timestamptz_value(s.changed_at)},
            {t.column("open_until"), s.open_until ? pg::timestamptz_value(s.open_until) : pg::null_value()},
            {t.column("half_open_in_flight"), pg::int8_value(s.half_open_in_flight)},
            {t.column("half_open_successes"), pg::int8_value(s.half_open_successes)},
            {t.column("transitions"), pg::int8_value(s.transitions)},
            {refused_col, pg::int8_value(t.int8(refused_col) + refused)}});
}

bool find_resource_part(pg::Table& t, const pg::Value& tenant, const std::string& resource, int part) {
  return t.find(pg::OwnIndex::flow_resource_state_pkey,
                {{1, pg::Compare::eq, tenant},
                 {2, pg::Compare::eq, pg::text_value(resource)},
                 {3, pg::Compare::eq, pg::int2_value(static_cast<std::int16_t>(part))}});
}

bool fold_outcomes(pg::Table& deltas, const pg::Value& tenant, const std::string& resource, int part, int parts,
                   const core::flow::ResourceConfig& config, core::flow::ResourceState& state, TimestampTz now) {
  const int successes = deltas.column("successes"), failures = deltas.column("failures"),
            neutrals = deltas.column("neutrals"), recorded_at = deltas.column("recorded_at");
  const pg::Value r = pg::text_value(resource);
  bool any = false;
  auto fold = [&](pg::Compare compare, int from) {
    pg::Table::Scan scan(deltas, pg::OwnIndex::flow_outcome_deltas_part,
                         {{1, pg::Compare::eq, tenant},
                          {2, pg::Compare::eq, r},
                          {3, compare, pg::int2_value(static_cast<std::int16_t>(from))}});
    while (scan.next()) {
      if (deltas.lock(pg::LockMode::update, pg::Wait::skip) == pg::Locked::skipped) continue;
      // A state change (the breaker opening) counts from now, not from when the outcome was
      // recorded and waited to be folded.
      const TimestampTz at = std::max(deltas.timestamptz(recorded_at), now);
      const std::pair<int, core::flow::Outcome> counts[] = {{successes, core::flow::Outcome::success},
                                                            {failures, core::flow::Outcome::failure},
                                                            {neutrals, core::flow::Outcome::neutral}};
      for (const auto& [column, outcome] : counts)
        for (std::int64_t i = deltas.int8(column); i > 0; --i) core::flow::record_outcome(config, state, outcome, at);
      deltas.remove();
      any = true;
    }
    scan.end();
  };
  fold(pg::Compare::eq, part);
  // Part 0 also takes the deltas of parts the resource no longer has (recorded for a part that
  // settle_parts merged into part 0 meanwhile), as it took their deliveries in flight.
  if (part == 0) fold(pg::Compare::ge, std::max(parts, 1));
  return any;
}

// Per resource in name order and per part in order, all by direct table access: the part the
// delivery was counted in (a part the resource no longer has, its limits changed since the claim,
// was merged into part 0) locked SKIP LOCKED, the outcomes recorded there and earlier deltas
// folded in, the row written once. A part another transaction holds, or any under a transaction
// snapshot, gets the outcomes as a row of flow_outcome_deltas instead, an INSERT that waits for
// nobody: no ack or nack waits for another consumer's part (docs/architecture.md, "Locks held to
// commit"). A database still at 0.7.0 has no deltas: there the part is waited for.
void record_outcomes(pg::Spi& spi, const Queue& queue, const Releases& releases, TimestampTz now) {
  const ResourceConfigs& configs = resource_configs(spi, queue);
  std::map<std::pair<std::string, int>, std::array<std::int64_t, 3>> by_part;
  for (const auto& [at, counts] : releases.outcomes) {
    const auto config = configs.find(at.first);
    if (config == configs.end()) continue;  // not a configured resource: nothing is counted for it
    auto& sum = by_part[{at.first, at.second < config->second.parts ? at.second : 0}];
    for (int o = 0; o < 3; ++o) sum[o] += counts[o];
  }
  if (by_part.empty()) return;
  const bool deltas_schema = pg::has_table(pg::CachedTable::flow_outcome_deltas);
  const bool own_snapshot = pg::uses_transaction_snapshot();
  pg::Access access;
  pg::Table rows(access, pg::OwnTable::flow_resource_state);
  std::optional<pg::Table> deltas;
  if (deltas_schema) deltas.emplace(access, pg::OwnTable::flow_outcome_deltas);
  for (const auto& [at, counts] : by_part) {
    const auto& [resource, part] = at;
    if (!find_resource_part(rows, queue.t, resource, part)) continue;
    const core::flow::ResourceConfig& config = configs.find(resource)->second;
    if (deltas && (own_snapshot || rows.lock(pg::LockMode::no_key_update, pg::Wait::skip) == pg::Locked::skipped)) {
      deltas->insert({{1, queue.t},
                      {2, pg::text_value(resource)},
                      {3, pg::int2_value(static_cast<std::int16_t>(part))},
                      {deltas->column("successes"), pg::int8_value(counts[0])},
                      {deltas->column("failures"), pg::int8_value(counts[1])},
                      {deltas->column("neutrals"), pg::int8_value(counts[2])},
                      {deltas->column("recorded_at"), pg::timestamptz_value(now)}});
      continue;
    }
    if (!deltas && rows.lock(pg::LockMode::no_key_update, pg::Wait::block) == pg::Locked::skipped) continue;
    // Held to commit: a claim of this transaction may wait only for parts after it (held_rows()).
    held_rows().took(held_key(queue.tenant, resource, HeldRow::resource_part, part));
    core::flow::ResourceState state = resource_state_of(rows);
    if (deltas) fold_outcomes(*deltas, queue.t, resource, part, config.parts, config, state, now);
    for (int o = 0; o < 3; ++o)
      for (std::int64_t i = 0; i < counts[o]; ++i)
        core::flow::record_outcome(config, state, static_cast<core::flow::Outcome>(o), now);
    write_resource_state(rows, state, 0);
  }
  if (deltas) deltas->finish();
  rows.finish();
  access.finish();
}

}  // namespace fy::queue

namespace {

std::string resource_arg(FunctionCallInfo fcinfo) {
  return pg::name_arg(fcinfo, 1, "resource", core::max_resource_bytes);
}

// The config row (made if missing).
void ensure_resource(pg::Spi& spi, const pg::Value& t, const pg::Value& r, TimestampTz now) {
  static pg::Statement config(
      "INSERT INTO forgeyard.flow_resources (tenant_id, resource, updated_at) VALUES ($1, $2, $3)"
      " ON CONFLICT (tenant_id, resource) DO UPDATE SET updated_at = excluded.updated_at",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  spi.run(config, {t, r, pg::timestamptz_value(now)});
}

// After the limits or the breaker changed: the parts the state is split into
// (core::flow::resource_parts), each made if missing (a full bucket, nothing in flight, a closed
// breaker); the parts no longer kept are merged into part 0 (what they count in flight and
// refused), where their deliveries' acks will find it.
void settle_parts(pg::Spi& spi, const pg::Value& t, const pg::Value& r, TimestampTz now) {
  static pg::Statement read(
      "SELECT rate, per_usecs, burst, max_in_flight, failure_rate IS NOT NULL FROM forgeyard.flow_resources"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement set_parts(
      "UPDATE forgeyard.flow_resources SET parts = $3"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2"
      "   AND parts OPERATOR(pg_catalog.<>) $3",
      {TEXTOID, TEXTOID, INT2OID});
  static pg::Statement add(
      "INSERT INTO forgeyard.flow_resource_state (tenant_id, resource, part, changed_at)"
      " SELECT $1, $2, p::pg_catalog.int2, $4 FROM pg_catalog.generate_series(0, $3 - 1) p"
      " ON CONFLICT (tenant_id, resource, part) DO NOTHING",
      {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID});
  static pg::Statement merge(
      "WITH d AS (DELETE FROM forgeyard.flow_resource_state WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND resource OPERATOR(pg_catalog.=) $2 AND part OPERATOR(pg_catalog.>=) $3 RETURNING in_flight, refused)"
      " UPDATE forgeyard.flow_resource_state"
      "    SET in_flight = in_flight OPERATOR(pg_catalog.+) (SELECT pg_catalog.sum(in_flight) FROM d)::pg_catalog.int8,"
      "        refused = refused OPERATOR(pg_catalog.+) (SELECT pg_catalog.sum(refused) FROM d)::pg_catalog.int8"
      "  WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2"
      "    AND part OPERATOR(pg_catalog.=) 0 AND EXISTS (SELECT 1 FROM d)",
      {TEXTOID, TEXTOID, INT4OID});
  std::optional<core::flow::ResourceConfig> c;
  spi.run(read, {t, r}, [&](const pg::Row& row) {
    c.emplace();
    if (row.int8(1)) c->rate = core::flow::Rate{*row.int8(1), *row.int8(2), *row.int8(3)};
    c->max_in_flight = row.int8(4);
    if (row.boolean(5).value_or(false)) c->breaker.emplace();
  });
  if (!c) return;  // dropped: drop_if_empty removed its state too
  const int parts = core::flow::resource_parts(*c);
  spi.run(set_parts, {t, r, pg::int2_value(static_cast<std::int16_t>(parts))});
  spi.run(add, {t, r, pg::int4_value(parts), pg::timestamptz_value(now)});
  spi.run(merge, {t, r, pg::int4_value(parts)});
  static pg::Statement merge_deltas(
      "UPDATE forgeyard.flow_outcome_deltas SET part = 0 WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND resource OPERATOR(pg_catalog.=) $2 AND part OPERATOR(pg_catalog.>=) $3",
      {TEXTOID, TEXTOID, INT2OID});
  if (pg::has_table(pg::CachedTable::flow_outcome_deltas))
    spi.run(merge_deltas, {t, r, pg::int2_value(static_cast<std::int16_t>(parts))});
}

// A resource with neither limits nor a breaker is forgotten, its state too.
void drop_if_empty(pg::Spi& spi, const pg::Value& t, const pg::Value& r) {
  static pg::Statement drop(
      "WITH d AS (DELETE FROM forgeyard.flow_resources WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND resource OPERATOR(pg_catalog.=) $2 AND rate IS NULL AND max_in_flight IS NULL"
      "   AND failure_rate IS NULL RETURNING 1)"
      " DELETE FROM forgeyard.flow_resource_state WHERE tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND resource OPERATOR(pg_catalog.=) $2 AND EXISTS (SELECT 1 FROM d)",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_deltas(
      "DELETE FROM forgeyard.flow_outcome_deltas d WHERE d.tenant_id OPERATOR(pg_catalog.=) $1"
      "   AND d.resource OPERATOR(pg_catalog.=) $2 AND NOT EXISTS (SELECT 1 FROM forgeyard.flow_resources r"
      "     WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 AND r.resource OPERATOR(pg_catalog.=) $2)",
      {TEXTOID, TEXTOID});
  spi.run(drop, {t, r});
  if (pg::has_table(pg::CachedTable::flow_outcome_deltas)) spi.run(drop_deltas, {t, r});
}

}  // namespace

// resource_limit(tenant, resource, options): rate, per, burst, max_in_flight; {} removes them.
FY_FUNCTION(fy_resource_limit) {
  static pg::Statement set_limits(
      "UPDATE forgeyard.flow_resources SET rate = $3, per_usecs = $4, burst = $5, max_in_flight = $6"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::string resource = resource_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  core::flow::ResourceConfig c;
  for (const auto& [key, value] : pg::jsonb_option_pairs(spi, pg::jsonb_arg(fcinfo, 2, "options"))) {
    if (core::flow::is_limit_duration(key))
      core::flow::set_limit_duration(c, key, pg::parse_interval(value, "resource option " + key));
    else
      core::flow::set_limit_option(c, key, value);
  }
  core::flow::validate(c);
  const pg::Value t = pg::text_value(tenant), r = pg::text_value(resource);
  ensure_resource(spi, t, r, pg::now());
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? pg::int8_value(*v) : pg::null_value(); };
  spi.run(set_limits, {t, r, opt(c.rate ? std::optional(c.rate->tokens) : std::nullopt),
                       opt(c.rate ? std::optional(c.rate->per_usecs) : std::nullopt),
                       opt(c.rate ? std::optional(c.rate->burst > 0 ? c.rate->burst : c.rate->tokens) : std::nullopt),
                       opt(c.max_in_flight)});
  drop_if_empty(spi, t, r);
  settle_parts(spi, t, r, pg::now());
  spi.finish();
  return (Datum)0;
}

// breaker_configure(tenant, resource, options): NULL removes the breaker.
FY_FUNCTION(fy_breaker_configure) {
  static pg::Statement set_breaker(
      "UPDATE forgeyard.flow_resources SET failure_rate = $3, minimum_calls = $4, window_calls = $5,"
      "   open_for_usecs = $6, half_open_calls = $7"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, FLOAT8OID, INT8OID, INT8OID, INT8OID, INT8OID});
  static pg::Statement reset_state(
      "UPDATE forgeyard.flow_resource_state SET breaker = 'closed', outcomes = '', open_until = NULL,"
      "   half_open_in_flight = 0, half_open_successes = 0, changed_at = $3"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::string resource = resource_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  std::optional<core::flow::BreakerConfig> b;
  if (!pg::arg_is_null(fcinfo, 2)) {
    b.emplace();
    for (const auto& [key, value] : pg::jsonb_option_pairs(spi, pg::jsonb_arg(fcinfo, 2, "options"))) {
      if (core::flow::is_breaker_duration(key))
        core::flow::set_breaker_duration(*b, key, pg::parse_interval(value, "breaker option " + key));
      else
        core::flow::set_breaker_option(*b, key, value);
    }
    core::flow::ResourceConfig c;
    c.breaker = b;
    core::flow::validate(c);
  }
  const pg::Value t = pg::text_value(tenant), r = pg::text_value(resource);
  const TimestampTz now = pg::now();
  ensure_resource(spi, t, r, now);
  spi.run(set_breaker,
          {t, r, b ? pg::float8_value(b->failure_rate) : pg::null_value(),
           b ? pg::int8_value(b->minimum_calls) : pg::null_value(), b ? pg::int8_value(b->window) : pg::null_value(),
           b ? pg::int8_value(b->open_for_usecs) : pg::null_value(),
           b ? pg::int8_value(b->half_open_calls) : pg::null_value()});
  spi.run(reset_state, {t, r, pg::timestamptz_value(now)});
  drop_if_empty(spi, t, r);
  settle_parts(spi, t, r, now);
  spi.finish();
  return (Datum)0;
}

// breaker_state(tenant, resource) -> (state, failures, calls, changed_at)
FY_FUNCTION(fy_breaker_state) {
  static pg::Statement read(
      "SELECT s.breaker, s.outcomes, s.changed_at, s.open_until OPERATOR(pg_catalog.<=) $3"
      "  FROM forgeyard.flow_resources c JOIN forgeyard.flow_resource_state s USING (tenant_id, resource)"
      " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.resource OPERATOR(pg_catalog.=) $2"
      "   AND c.failure_rate IS NOT NULL AND s.part OPERATOR(pg_catalog.=) 0",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::string resource = resource_arg(fcinfo);
  pg::Spi spi;
  check_tenant(spi, tenant);
  bool found = false;
  core::flow::ResourceState s;
  TimestampTz changed = 0;
  bool lapsed_open = false;
  spi.run(read, {pg::text_value(tenant), pg::text_value(resource), pg::timestamptz_value(pg::now())},
          [&](const pg::Row& r) {
            found = true;
            s.state = core::flow::breaker_state_from(*r.text(1));
            s.outcomes = *r.text(2);
            changed = *r.timestamptz(3);
            lapsed_open = r.boolean(4).value_or(false);
          });
  if (!found)
    throw core::Error(core::sqlstate::undefined_object,
                      "resource \"" + resource + "\" has no breaker for tenant \"" + tenant + "\"");
  spi.finish();
  // An open breaker whose time ran out lets the next claim through: it reads half_open.
  const char* state = s.state == core::flow::BreakerState::open && lapsed_open ? "half_open" : to_string(s.state);
  pg::TableResult out(fcinfo);
  out.add_row({pg::text_value(state), pg::int4_value(static_cast<std::int32_t>(s.failures())),
               pg::int4_value(static_cast<std::int32_t>(s.outcomes.size())), pg::timestamptz_value(changed)});
  return (Datum)0;
}
