// Names of the doctor's groups and statuses, and the Prometheus text of a store's figures
// (docs/operations.md, "forgeyard metrics").
#include <array>
#include <charconv>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "forgeyard/operations.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard {

std::string_view to_string(CheckGroup group) noexcept {
  switch (group) {
    case CheckGroup::Required:
      return "required";
    case CheckGroup::Optional:
      return "optional";
    case CheckGroup::Performance:
      return "performance";
    case CheckGroup::Security:
      return "security";
  }
  return "required";
}

std::string_view to_string(CheckStatus status) noexcept {
  switch (status) {
    case CheckStatus::Ok:
      return "ok";
    case CheckStatus::Warn:
      return "warn";
    case CheckStatus::Fail:
      return "fail";
  }
  return "fail";
}

namespace {

using Labels = std::vector<std::pair<const char*, std::string>>;

// A label value with \, " and newline escaped, as the exposition format requires.
std::string escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// The shortest text that reads back as the same double ("2", "0.25", "1e+20").
std::string number(double v) {
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// One metric family: its HELP and TYPE lines, then its samples.
class Family {
 public:
  Family(std::string& out, const char* name, const char* type, const char* help) : out_(out), name_(name) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const Labels& labels, double value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (std::size_t i = 0; i < labels.size(); ++i)
        out_ += (i ? "," : "") + std::string(labels[i].first) + "=\"" + escape(labels[i].second) + "\"";
      out_ += '}';
    }
    out_ += " " + number(value) + "\n";
  }

 private:
  std::string& out_;
  const char* name_;
};

double pressure_level(const std::string& pressure) {
  return pressure == "saturated" ? 2 : pressure == "elevated" ? 1 : 0;
}

}  // namespace

std::string prometheus_text(const StoreStats& stats, const Metrics& client) {
  std::string out;
  if (stats.database_bytes) {
    Family f(out, "forgeyard_database_bytes", "gauge", "Size of the database or store file in bytes.");
    f.sample({}, static_cast<double>(*stats.database_bytes));
  }
  if (stats.horizon) {
    const Labels kind{{"kind", stats.horizon->kind}};
    Family xids(out, "forgeyard_xmin_horizon_age_transactions", "gauge",
                "Transactions begun since the oldest holder of the xmin horizon took it (PostgreSQL).");
    xids.sample(kind, static_cast<double>(stats.horizon->xid_age));
    if (stats.horizon->held) {
      Family held(out, "forgeyard_xmin_horizon_held_seconds", "gauge",
                  "How long the oldest holder of the xmin horizon has held it (a transaction or a prepared one).");
      held.sample(kind, static_cast<double>(stats.horizon->held->count()) / 1e6);
    }
  }
  if (!stats.lane_segments.empty()) {
    Family has(out, "forgeyard_lane_segment_has_rows", "gauge",
               "Whether each segment of the ready lanes holds entries (1) or was truncated (0), and which is open "
               "(PostgreSQL, 0.13.0 on).");
    for (const LaneSegment& seg : stats.lane_segments)
      has.sample({{"table", seg.name}, {"state", seg.open ? "open" : "sealed"}}, seg.has_rows ? 1.0 : 0.0);
    Family pinned(out, "forgeyard_lane_segment_pinned_seconds", "gauge",
                  "How long the oldest transaction holding a lock on a sealed segment of the ready lanes has been "
                  "open: maintain() cannot truncate the segment before it ends.");
    for (const LaneSegment& seg : stats.lane_segments)
      if (seg.pinned_for) pinned.sample({{"table", seg.name}}, static_cast<double>(seg.pinned_for->count()) / 1e6);
  }
  if (!stats.usage_segments.empty()) {
    Family has(out, "forgeyard_usage_segment_has_rows", "gauge",
               "Whether each segment of the capacity counts' delta rows holds rows or their dead versions (1) or "
               "was truncated (0), and which is the current period's (PostgreSQL, 0.14.0 on).");
    for (const LaneSegment& seg : stats.usage_segments)
      has.sample({{"table", seg.name}, {"state", seg.open ? "open" : "sealed"}}, seg.has_rows ? 1.0 : 0.0);
    Family pinned(out, "forgeyard_usage_segment_pinned_seconds", "gauge",
                  "How long the oldest transaction holding a lock on a sealed segment of the capacity counts has "
                  "been open: maintain() cannot truncate the segment before it ends.");
    for (const LaneSegment& seg : stats.usage_segments)
      if (seg.pinned_for) pinned.sample({{"table", seg.name}}, static_cast<double>(seg.pinned_for->count()) / 1e6);
  }
  {
    Family rows(out, "forgeyard_table_rows", "gauge", "Rows in each forgeyard table (PostgreSQL: estimate).");
    for (const TableStats& t : stats.tables) rows.sample({{"table", t.name}}, static_cast<double>(t.rows));
    Family dead(out, "forgeyard_table_dead_rows", "gauge", "Dead tuples not yet vacuumed in each forgeyard table.");
    for (const TableStats& t : stats.tables) dead.sample({{"table", t.name}}, static_cast<double>(t.dead_rows));
    Family bytes(out, "forgeyard_table_bytes", "gauge", "Size of each forgeyard table with its indexes in bytes.");
    for (const TableStats& t : stats.tables)
      if (t.bytes) bytes.sample({{"table", t.name}}, static_cast<double>(*t.bytes));
  }
  {
    Family depth(out, "forgeyard_queue_messages", "gauge", "Messages in a queue by state.");
    for (const QueueBacklog& q : stats.queues) {
      const std::pair<const char*, std::int64_t> states[] = {{"ready", q.depth.ready},
                                                             {"in_flight", q.depth.in_flight},
                                                             {"delayed", q.depth.delayed},
                                                             {"dead", q.depth.dead}};
      for (const auto& [state, n] : states)
        depth.sample({{"tenant", q.tenant}, {"queue", q.queue}, {"state", state}}, static_cast<double>(n));
    }
    Family bytes(out, "forgeyard_queue_bytes", "gauge", "Payload bytes admitted into a queue.");
    Family capacity(out, "forgeyard_queue_capacity_messages", "gauge", "A queue's limit in messages.");
    Family lag(out, "forgeyard_queue_oldest_ready_age_seconds", "gauge",
               "Age of the oldest ready message (consumer lag); 0 when none is ready.");
    Family pressure(out, "forgeyard_queue_pressure", "gauge", "Queue pressure: 0 normal, 1 elevated, 2 saturated.");
    Family retrying(out, "forgeyard_queue_retrying_messages", "gauge",
                    "Pending messages that were delivered before (retries waiting or in flight).");
    Family dead_recent(out, "forgeyard_queue_dead_letters_last_hour", "gauge",
                       "Messages dead-lettered within the last hour.");
    Family waiting(out, "forgeyard_queue_waiting_messages", "gauge",
                   "Ready messages held behind their key (ordered partition or per-key limit); part of ready.");
    Family budget(out, "forgeyard_queue_retries_delayed", "gauge",
                  "Retries the queue's retry budget delayed in its current window.");
    for (const QueueBacklog& q : stats.queues) {
      const Labels l{{"tenant", q.tenant}, {"queue", q.queue}};
      bytes.sample(l, static_cast<double>(q.depth.bytes));
      capacity.sample(l, static_cast<double>(q.max_messages));
      lag.sample(l, q.depth.oldest_ready_age ? static_cast<double>(q.depth.oldest_ready_age->count()) / 1e6 : 0.0);
      pressure.sample(l, pressure_level(q.depth.pressure));
      retrying.sample(l, static_cast<double>(q.retrying));
      dead_recent.sample(l, static_cast<double>(q.dead_last_hour));
      waiting.sample(l, static_cast<double>(q.depth.waiting));
      budget.sample(l, static_cast<double>(q.depth.retries_delayed));
    }
  }
  {
    Family leases(out, "forgeyard_leases", "gauge", "Leases held (live) and expired but not yet reaped (expired).");
    Family keys(out, "forgeyard_idempotency_keys", "gauge",
                "Idempotency keys by state (in_progress, completed) and past retention.");
    Family audit(out, "forgeyard_audit_events_total", "counter", "Audit events appended per tenant.");
    for (const TenantStats& t : stats.tenants) {
      leases.sample({{"tenant", t.tenant}, {"state", "live"}}, static_cast<double>(t.leases_live));
      leases.sample({{"tenant", t.tenant}, {"state", "expired"}}, static_cast<double>(t.leases_expired));
      keys.sample({{"tenant", t.tenant}, {"state", "in_progress"}}, static_cast<double>(t.idempotency_in_progress));
      keys.sample({{"tenant", t.tenant}, {"state", "completed"}}, static_cast<double>(t.idempotency_completed));
      keys.sample({{"tenant", t.tenant}, {"state", "past_retention"}},
                  static_cast<double>(t.idempotency_past_retention));
      audit.sample({{"tenant", t.tenant}}, static_cast<double>(t.audit_events));
    }
  }
  {
    Family runs(out, "forgeyard_workflow_runs", "gauge", "Workflow runs by definition (workflow@version) and state.");
    for (const WorkflowRunCount& w : stats.workflows)
      runs.sample({{"tenant", w.tenant}, {"workflow", w.definition}, {"state", w.state}}, static_cast<double>(w.runs));
  }
  {
    // Flow control (Queues::flow_state): a queue's limits per queue; its limited keys, and a
    // tenant's resources, summed (no key or resource name appears in a label, and a series per key
    // would be unbounded); breakers counted by state.
    Family available(out, "forgeyard_flow_available", "gauge", "Tokens a queue's admission limit holds now.");
    Family in_flight(out, "forgeyard_flow_in_flight", "gauge",
                     "Claimable messages of a queue's limited keys; deliveries out under a tenant's resources.");
    Family counted(out, "forgeyard_flow_counted", "gauge",
                   "Retries admitted in a queue's retry window; pending messages of its limited keys.");
    Family delayed(out, "forgeyard_flow_delayed", "gauge",
                   "Retries held back in a queue's retry window; messages waiting behind its key limits.");
    Family refused(out, "forgeyard_flow_refused_total", "counter", "Claims a tenant's resources turned away.");
    Family breakers(out, "forgeyard_flow_breakers", "gauge", "A tenant's circuit breakers by state.");
    using Sums = std::array<std::int64_t, 4>;                                  // available, in_flight, counted, delayed
    std::map<std::tuple<std::string, std::string, std::string>, Sums> queues;  // tenant, queue, kind
    std::map<std::string, std::array<std::int64_t, 2>> resources;              // in flight, refused
    std::map<std::pair<std::string, std::string>, std::int64_t> states;        // tenant, breaker state
    for (const TenantFlowLimit& f : stats.flow) {
      const FlowLimit& l = f.limit;
      if (l.kind == "fairness_weight") continue;  // a setting, no figure
      if (l.queue) {
        Sums& q = queues[{f.tenant, *l.queue, l.kind}];
        q[0] += l.available.value_or(0), q[1] += l.in_flight.value_or(0);
        q[2] += l.counted.value_or(0), q[3] += l.delayed.value_or(0);
        continue;
      }
      if (l.kind == "resource_limit")
        resources[f.tenant][0] += l.in_flight.value_or(0), resources[f.tenant][1] += l.refused.value_or(0);
      if (l.state) ++states[{f.tenant, *l.state}];
    }
    for (const auto& [key, q] : queues) {
      const auto& [tenant, queue, kind] = key;
      const Labels l{{"tenant", tenant}, {"queue", queue}, {"kind", kind}};
      if (kind == "admission_limit") {
        available.sample(l, static_cast<double>(q[0]));
        continue;
      }
      if (kind == "key_limit") in_flight.sample(l, static_cast<double>(q[1]));
      counted.sample(l, static_cast<double>(q[2]));
      delayed.sample(l, static_cast<double>(q[3]));
    }
    for (const auto& [tenant, r] : resources) {
      const Labels l{{"tenant", tenant}, {"kind", "resource_limit"}};
      in_flight.sample(l, static_cast<double>(r[0]));
      refused.sample(l, static_cast<double>(r[1]));
    }
    for (const auto& [key, n] : states) breakers.sample({{"tenant", key.first}, {"state", key.second}}, n);
  }
  {
    Family calls(out, "forgeyard_client_operations_total", "counter", "Calls of each client operation.");
    Family errors(out, "forgeyard_client_operation_errors_total", "counter", "Failed calls of each client operation.");
    Family seconds(out, "forgeyard_client_operation_seconds_total", "counter",
                   "Time spent in each client operation in seconds.");
    Family slowest(out, "forgeyard_client_operation_max_seconds", "gauge", "The slowest call of each operation.");
    for (const auto& [name, s] : client.operations) {
      const Labels l{{"operation", name}};
      calls.sample(l, static_cast<double>(s.calls));
      errors.sample(l, static_cast<double>(s.errors));
      seconds.sample(l, static_cast<double>(s.total_usecs) / 1e6);
      slowest.sample(l, static_cast<double>(s.max_usecs) / 1e6);
    }
  }
  {
    const PoolStats& p = client.pool;
    Family conns(out, "forgeyard_client_pool_connections", "gauge", "Pooled connections in use and idle.");
    conns.sample({{"state", "in_use"}}, p.in_use);
    conns.sample({{"state", "idle"}}, p.idle);
    const std::pair<const char*, std::uint64_t> counters[] = {{"forgeyard_client_pool_created_total", p.created},
                                                              {"forgeyard_client_pool_closed_total", p.closed},
                                                              {"forgeyard_client_pool_acquired_total", p.acquired},
                                                              {"forgeyard_client_pool_waited_total", p.waited},
                                                              {"forgeyard_client_pool_timed_out_total", p.timed_out}};
    for (const auto& [name, value] : counters) {
      Family f(out, name, "counter", "Connection pool counter.");
      f.sample({}, static_cast<double>(value));
    }
  }
  if (!client.replicas.empty()) {
    Family up(out, "forgeyard_replica_up", "gauge", "1 when the replica answered its last lag probe.");
    Family lag(out, "forgeyard_replica_lag_seconds", "gauge",
               "Replay lag of a replica at its last probe (absent when unknown).");
    Family reads(out, "forgeyard_replica_reads_total", "counter", "Eventual reads a replica served.");
    Family fallbacks(out, "forgeyard_replica_fallbacks_total", "counter",
                     "Eventual reads a replica failed that the primary then served.");
    for (const ReplicaStatus& r : client.replicas) {
      const Labels l{{"replica", r.location}};
      up.sample(l, r.reachable ? 1 : 0);
      if (r.lag) lag.sample(l, static_cast<double>(r.lag->count()) / 1e6);
      reads.sample(l, static_cast<double>(r.reads));
      fallbacks.sample(l, static_cast<double>(r.fallbacks));
    }
  }
  return out;
}

}  // namespace forgeyard
