// Flow control of a queue's producers and retries in the SQLite store: the admission limit (one
// bucket per queue: writers take turns, so no split is needed) and the retry budget; the rules are
// core/flow.cpp's. The twin of extension/queue_flow.cpp.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

#include "core/flow.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
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

void SqliteQueues::fairness_weight(std::string_view tenant, std::string_view queue, std::string_view fairness_key,
                                   std::optional<int> weight) {
  session_.measure("queue.fairness_weight", [&] {
    core_guarded([&] {
      check_queue_name(tenant, queue);
      fy::core::check_name("fairness_key", true, fairness_key, fy::core::max_partition_key_bytes);
      const std::int64_t w = fy::core::fair_weight(weight ? std::optional<std::int64_t>(*weight) : std::nullopt);
      session_.write([&](Db& db) {
        if (!load(db, tenant, queue).options.fairness) fy::core::throw_not_fair(queue);
        db.query(
              "INSERT INTO queue_fair_keys (tenant_id, queue, fairness_key, weight) VALUES (?1, ?2, ?3, ?4)"
              " ON CONFLICT (tenant_id, queue, fairness_key) DO UPDATE SET weight = excluded.weight")
            .bind(1, tenant)
            .bind(2, queue)
            .bind(3, fairness_key)
            .bind(4, w)
            .run();
      });
    });
  });
}

}  // namespace forgeyard::detail

namespace forgeyard::detail {

namespace sqlite_queue {

// After the key's last pass or the class's lowest pending pass, whichever is later (the queue's
// highest last pass when the class has none), one step of the key's weight.
std::int64_t next_pass(Db& db, const Queue& queue, int priority, const std::optional<std::string>& fairness_key) {
  std::int64_t start = 0;
  {
    auto q = db.query(
        "SELECT pass FROM messages WHERE tenant_id = ?1 AND queue = ?2 AND priority = ?3 AND state = 'pending'"
        " AND is_head AND pass IS NOT NULL ORDER BY pass LIMIT 1");
    q.bind(1, queue.tenant).bind(2, queue.name).bind(3, static_cast<std::int64_t>(priority));
    if (q.step()) {
      start = q.int64(0);
    } else {
      auto h = db.query("SELECT coalesce(max(last_pass), 0) FROM queue_fair_keys WHERE tenant_id = ?1 AND queue = ?2");
      h.bind(1, queue.tenant).bind(2, queue.name);
      if (h.step()) start = h.int64(0);
    }
  }
  auto q = db.query(
      "INSERT INTO queue_fair_keys (tenant_id, queue, fairness_key, last_pass) VALUES (?1, ?2, ?3, ?4 + ?5)"
      " ON CONFLICT (tenant_id, queue, fairness_key) DO UPDATE"
      "   SET last_pass = max(coalesce(last_pass, ?4), ?4) + ?5 / weight RETURNING last_pass");
  q.bind(1, queue.tenant)
      .bind(2, queue.name)
      .bind(3, fy::core::fair_key(fairness_key))
      .bind(4, start)
      .bind(5, fy::core::pass_unit);
  std::int64_t pass = 0;
  if (q.step()) pass = q.int64(0);
  while (q.step()) {
  }
  return pass;
}

std::optional<fy::core::flow::ResourceConfig> resource_config(Db& db, std::string_view tenant,
                                                              std::string_view resource) {
  auto q = db.query(
      "SELECT rate, per_usecs, burst, max_in_flight, failure_rate, minimum_calls, window_calls, open_for_usecs,"
      "   half_open_calls FROM flow_resources WHERE tenant_id = ?1 AND resource = ?2");
  q.bind(1, tenant).bind(2, resource);
  if (!q.step()) return std::nullopt;
  fy::core::flow::ResourceConfig c;
  if (!q.is_null(0)) c.rate = fy::core::flow::Rate{q.int64(0), q.int64(1), q.int64(2)};
  if (!q.is_null(3)) c.max_in_flight = q.int64(3);
  if (!q.is_null(4))
    c.breaker = fy::core::flow::BreakerConfig{q.real(4), q.int64(5), q.int64(6), q.int64(7), q.int64(8)};
  return c;
}

fy::core::flow::ResourceState resource_state(Db& db, std::string_view tenant, std::string_view resource) {
  auto q = db.query(
      "SELECT tat, in_flight, breaker, outcomes, changed_at, open_until, half_open_in_flight, half_open_successes,"
      "   transitions FROM flow_resource_state WHERE tenant_id = ?1 AND resource = ?2");
  q.bind(1, tenant).bind(2, resource);
  fy::core::flow::ResourceState s;
  if (!q.step()) return s;
  if (!q.is_null(0)) s.tat = q.int64(0);
  s.in_flight = q.int64(1);
  s.state = fy::core::flow::breaker_state_from(q.text(2));
  s.outcomes = q.text(3);
  s.changed_at = q.int64(4);
  s.open_until = q.is_null(5) ? 0 : q.int64(5);
  s.half_open_in_flight = q.int64(6);
  s.half_open_successes = q.int64(7);
  s.transitions = q.int64(8);
  return s;
}

void save_resource_state(Db& db, std::string_view tenant, std::string_view resource,
                         const fy::core::flow::ResourceState& s, std::int64_t refused) {
  auto q = db.query(
      "UPDATE flow_resource_state SET tat = ?3, in_flight = ?4, breaker = ?5, outcomes = ?6, changed_at = ?7,"
      "   open_until = ?8, half_open_in_flight = ?9, half_open_successes = ?10, transitions = ?11,"
      "   refused = refused + ?12 WHERE tenant_id = ?1 AND resource = ?2");
  q.bind(1, tenant).bind(2, resource);
  if (s.tat)
    q.bind(3, *s.tat);
  else
    q.bind_null(3);
  q.bind(4, s.in_flight).bind(5, fy::core::flow::to_string(s.state)).bind(6, s.outcomes).bind(7, s.changed_at);
  if (s.open_until != 0)
    q.bind(8, s.open_until);
  else
    q.bind_null(8);
  q.bind(9, s.half_open_in_flight).bind(10, s.half_open_successes).bind(11, s.transitions).bind(12, refused).run();
}

bool resource_allows(Db& db, const Queue& queue, const std::optional<std::string>& resource, bool transfer,
                     std::int64_t now) {
  if (!resource) return true;
  const auto config = resource_config(db, queue.tenant, *resource);
  if (!config) return true;
  fy::core::flow::ResourceState s = resource_state(db, queue.tenant, *resource);
  const bool admitted = fy::core::flow::admit_delivery(*config, s, now, transfer) == fy::core::flow::Refusal::none;
  save_resource_state(db, queue.tenant, *resource, s, admitted ? 0 : 1);
  return admitted;
}

void record_outcome(Db& db, const Queue& queue, const std::optional<std::string>& resource,
                    fy::core::flow::Outcome outcome, std::int64_t now) {
  if (!resource) return;
  const auto config = resource_config(db, queue.tenant, *resource);
  if (!config) return;
  fy::core::flow::ResourceState s = resource_state(db, queue.tenant, *resource);
  fy::core::flow::record_outcome(*config, s, outcome, now);
  save_resource_state(db, queue.tenant, *resource, s, 0);
}

}  // namespace sqlite_queue

namespace {

// The config row (made if missing) and its state row; a resource left with neither limits nor a
// breaker is forgotten.
void write_resource(Db& db, std::string_view tenant, std::string_view resource, const fy::core::flow::ResourceConfig& c,
                    bool limits, bool breaker, std::int64_t now) {
  db.query(
        "INSERT INTO flow_resources (tenant_id, resource, updated_at) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (tenant_id, resource) DO UPDATE SET updated_at = excluded.updated_at")
      .bind(1, tenant)
      .bind(2, resource)
      .bind(3, now)
      .run();
  db.query(
        "INSERT INTO flow_resource_state (tenant_id, resource, changed_at) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (tenant_id, resource) DO NOTHING")
      .bind(1, tenant)
      .bind(2, resource)
      .bind(3, now)
      .run();
  if (limits) {
    auto q = db.query(
        "UPDATE flow_resources SET rate = ?3, per_usecs = ?4, burst = ?5, max_in_flight = ?6"
        " WHERE tenant_id = ?1 AND resource = ?2");
    q.bind(1, tenant).bind(2, resource);
    if (c.rate)
      q.bind(3, c.rate->tokens).bind(4, c.rate->per_usecs).bind(5, c.rate->burst > 0 ? c.rate->burst : c.rate->tokens);
    else
      q.bind_null(3).bind_null(4).bind_null(5);
    if (c.max_in_flight)
      q.bind(6, *c.max_in_flight);
    else
      q.bind_null(6);
    q.run();
  }
  if (breaker) {
    auto q = db.query(
        "UPDATE flow_resources SET failure_rate = ?3, minimum_calls = ?4, window_calls = ?5, open_for_usecs = ?6,"
        "   half_open_calls = ?7 WHERE tenant_id = ?1 AND resource = ?2");
    q.bind(1, tenant).bind(2, resource);
    if (c.breaker)
      q.bind_real(3, c.breaker->failure_rate)
          .bind(4, c.breaker->minimum_calls)
          .bind(5, c.breaker->window)
          .bind(6, c.breaker->open_for_usecs)
          .bind(7, c.breaker->half_open_calls);
    else
      q.bind_null(3).bind_null(4).bind_null(5).bind_null(6).bind_null(7);
    q.run();
    db.query(
          "UPDATE flow_resource_state SET breaker = 'closed', outcomes = '', open_until = NULL,"
          "   half_open_in_flight = 0, half_open_successes = 0, changed_at = ?3 WHERE tenant_id = ?1 AND resource = ?2")
        .bind(1, tenant)
        .bind(2, resource)
        .bind(3, now)
        .run();
  }
  const std::int64_t gone = db.query(
                                  "DELETE FROM flow_resources WHERE tenant_id = ?1 AND resource = ?2 AND rate IS NULL"
                                  " AND max_in_flight IS NULL AND failure_rate IS NULL")
                                .bind(1, tenant)
                                .bind(2, resource)
                                .run();
  if (gone > 0)
    db.query("DELETE FROM flow_resource_state WHERE tenant_id = ?1 AND resource = ?2")
        .bind(1, tenant)
        .bind(2, resource)
        .run();
}

void check_resource_name(std::string_view tenant, std::string_view resource) {
  fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
  fy::core::check_name("resource", true, resource, fy::core::max_resource_bytes);
}

}  // namespace

void SqliteQueues::resource_limit(std::string_view tenant, std::string_view resource, const ResourceLimits& limits) {
  session_.measure("queue.resource_limit", [&] {
    core_guarded([&] {
      check_resource_name(tenant, resource);
      const fy::core::flow::ResourceConfig c = core_resource_config(limits, std::nullopt);
      session_.write([&](Db& db) { write_resource(db, tenant, resource, c, true, false, session_.now_usecs()); });
    });
  });
}

void SqliteQueues::breaker_configure(std::string_view tenant, std::string_view resource,
                                     const std::optional<BreakerOptions>& options) {
  session_.measure("queue.breaker_configure", [&] {
    core_guarded([&] {
      check_resource_name(tenant, resource);
      const fy::core::flow::ResourceConfig c = core_resource_config({}, options);
      session_.write([&](Db& db) { write_resource(db, tenant, resource, c, false, true, session_.now_usecs()); });
    });
  });
}

BreakerStatus SqliteQueues::breaker_state(std::string_view tenant, std::string_view resource) {
  return session_.measure("queue.breaker_state", [&] {
    return core_guarded([&] {
      check_resource_name(tenant, resource);
      BreakerStatus out;
      session_.read([&](Db& db) {
        const auto config = resource_config(db, tenant, resource);
        if (!config || !config->breaker)
          throw Error(sqlstate::undefined_object, "resource \"" + std::string(resource) +
                                                      "\" has no breaker for tenant \"" + std::string(tenant) + "\"");
        const fy::core::flow::ResourceState s = resource_state(db, tenant, resource);
        // An open breaker whose time ran out lets the next claim through: it reads half_open.
        const bool lapsed = s.state == fy::core::flow::BreakerState::open && s.open_until <= session_.now_usecs();
        out = {lapsed ? "half_open" : fy::core::flow::to_string(s.state), static_cast<int>(s.failures()),
               static_cast<int>(s.outcomes.size()), from_unix_usecs(s.changed_at)};
      });
      return out;
    });
  });
}

namespace {

// An interval of microseconds as PostgreSQL prints '1 microsecond' times it: hours:minutes:seconds
// and the fraction, if any, without trailing zeros (flow_state's `limit` reads the same on both).
std::string interval_text(std::int64_t usecs) {
  const std::int64_t secs = usecs / 1000000, frac = usecs % 1000000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  std::string out = buf;
  if (frac != 0) {
    std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out;
}

// A float8 as PostgreSQL prints it: the shortest text that reads back as the same number.
std::string number_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

namespace sqlite_queue {

// The twin of the view forgeyard.flow_state, from the same rows and the same rules.
std::vector<FlowLimit> flow_rows(Db& db, std::string_view tenant, std::int64_t now) {
  std::vector<FlowLimit> rows;
  auto q = db.query(
      "SELECT q.queue, q.admission_rate, q.admission_per_usecs, q.admission_tat, q.retry_budget,"
      "   q.retry_budget_min, q.retry_budget_window_usecs, w.window_start, w.retries, w.delayed"
      " FROM queues q LEFT JOIN queue_retry_windows w ON w.tenant_id = q.tenant_id AND w.queue = q.queue"
      " WHERE q.tenant_id = ?1 AND (q.admission_rate IS NOT NULL OR q.retry_budget IS NOT NULL)");
  q.bind(1, tenant);
  while (q.step()) {
    if (!q.is_null(1)) {
      const fy::core::flow::Rate rate{q.int64(1), q.int64(2), 0};
      const std::optional<std::int64_t> tat = q.is_null(3) ? std::nullopt : std::optional(q.int64(3));
      rows.push_back({q.text(0), "admission_limit", std::nullopt,
                      std::to_string(rate.tokens) + " per " + interval_text(rate.per_usecs),
                      fy::core::flow::available(rate, tat, now)});
    }
    if (!q.is_null(4)) {
      FlowLimit r{q.text(0), "retry_budget", std::nullopt,
                  number_text(q.real(4)) + " of admitted, at least " + std::to_string(q.int64(5)) + " per " +
                      interval_text(q.int64(6))};
      r.counted = q.is_null(8) ? 0 : q.int64(8);
      r.delayed = q.is_null(9) ? 0 : q.int64(9);
      if (!q.is_null(7)) r.since = from_unix_usecs(q.int64(7));
      rows.push_back(r);
    }
  }
  auto k = db.query(
      "SELECT p.queue, p.partition_key, q.max_in_flight_per_key, p.heads, p.pending FROM queue_partitions p"
      " JOIN queues q ON q.tenant_id = p.tenant_id AND q.queue = p.queue"
      " WHERE p.tenant_id = ?1 AND q.max_in_flight_per_key IS NOT NULL");
  k.bind(1, tenant);
  while (k.step()) {
    FlowLimit r{k.text(0), "key_limit", k.text(1), "max_in_flight_per_key " + std::to_string(k.int64(2))};
    r.available = std::max<std::int64_t>(0, k.int64(2) - k.int64(3));
    r.in_flight = k.int64(3);
    r.counted = k.int64(4);
    r.delayed = k.int64(4) - k.int64(3);
    rows.push_back(r);
  }
  auto f = db.query("SELECT queue, fairness_key, weight FROM queue_fair_keys WHERE tenant_id = ?1 AND weight <> 1");
  f.bind(1, tenant);
  while (f.step()) rows.push_back({f.text(0), "fairness_weight", f.text(1), "weight " + std::to_string(f.int64(2))});
  auto r = db.query(
      "SELECT c.resource, c.rate, c.per_usecs, c.burst, c.max_in_flight, c.failure_rate, c.minimum_calls,"
      "   c.window_calls, c.open_for_usecs, c.half_open_calls, s.resource IS NOT NULL, s.tat, s.in_flight,"
      "   s.breaker, s.outcomes, s.changed_at, s.open_until, s.refused"
      " FROM flow_resources c LEFT JOIN flow_resource_state s"
      "   ON s.tenant_id = c.tenant_id AND s.resource = c.resource WHERE c.tenant_id = ?1");
  r.bind(1, tenant);
  while (r.step()) {
    const bool state = r.int64(10) != 0;
    const std::int64_t in_flight = state ? r.int64(12) : 0, refused = state ? r.int64(17) : 0;
    if (!r.is_null(1) || !r.is_null(4)) {
      FlowLimit l{std::nullopt, "resource_limit", r.text(0), ""};
      if (!r.is_null(1)) {
        const fy::core::flow::Rate rate{r.int64(1), r.int64(2), r.int64(3)};
        l.limit = std::to_string(rate.tokens) + " per " + interval_text(rate.per_usecs) + " burst " +
                  std::to_string(rate.burst);
        l.available =
            fy::core::flow::available(rate, state && !r.is_null(11) ? std::optional(r.int64(11)) : std::nullopt, now);
      }
      if (!r.is_null(4))
        l.limit += (l.limit.empty() ? "" : ", ") + std::string("max_in_flight ") + std::to_string(r.int64(4));
      l.in_flight = in_flight;
      l.refused = refused;
      rows.push_back(l);
    }
    if (!r.is_null(5)) {
      FlowLimit b{std::nullopt, "breaker", r.text(0),
                  "opens at " + number_text(r.real(5)) + " of the last " + std::to_string(r.int64(7)) + " (at least " +
                      std::to_string(r.int64(6)) + "), open for " + interval_text(r.int64(8)) + ", " +
                      std::to_string(r.int64(9)) + " half-open"};
      const std::string outcomes = state ? r.text(14) : std::string();
      b.in_flight = in_flight;
      b.counted = static_cast<std::int64_t>(std::count(outcomes.begin(), outcomes.end(), '1'));
      b.delayed = static_cast<std::int64_t>(outcomes.size());
      b.refused = refused;
      const std::string s = state ? r.text(13) : std::string("closed");
      b.state = s == "open" && state && !r.is_null(16) && r.int64(16) <= now ? "half_open" : s;
      if (state) b.since = from_unix_usecs(r.int64(15));
      rows.push_back(b);
    }
  }
  sort_flow(rows);
  return rows;
}

}  // namespace sqlite_queue

std::vector<FlowLimit> SqliteQueues::flow_state(std::string_view tenant) {
  return session_.measure("queue.flow_state", [&] {
    return core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      std::vector<FlowLimit> rows;
      session_.read([&](Db& db) { rows = flow_rows(db, tenant, session_.now_usecs()); });
      return rows;
    });
  });
}

}  // namespace forgeyard::detail
