#include "postgres/operations.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "forgeyard/error.hpp"
#include "forgeyard/version.hpp"
#include "queue_options.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement store_stats_sql{"fy_storage_stats",
                                  "SELECT kind, tenant_id, name, state, value FROM forgeyard.storage_stats(NULL)", 0};
const PgStatement ping_sql{"fy_doctor_ping", "SELECT 1", 0};
const PgStatement session_sql{
    "fy_doctor_session",
    "SELECT pg_catalog.current_setting('TimeZone'), " FY_USECS("pg_catalog.clock_timestamp()") ","
    "       coalesce(" FY_INSTALLED_VERSION ", ''),"
    "       coalesce((SELECT a.default_version FROM pg_catalog.pg_available_extensions a"
    "                  WHERE a.name OPERATOR(pg_catalog.=) 'forgeyard'), ''),"
    "       coalesce(" FY_INSTALLED_EDITION ", ''),"
    "       EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'forgeyard')",
    0};
// Schemas on this session's search_path in which PUBLIC may create objects: a function or
// operator planted there can shadow the one a query meant.
const PgStatement search_path_sql{
    "fy_doctor_search_path",
    "SELECT n.nspname::text FROM pg_catalog.pg_namespace n"
    " WHERE n.nspname OPERATOR(pg_catalog.=) ANY (pg_catalog.current_schemas(false))"
    "   AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(n.nspacl) a"
    "                WHERE a.grantee OPERATOR(pg_catalog.=) 0 AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE')"
    " ORDER BY 1",
    0};

std::string optional_text(const PgResult& r, int row, int col) {
  return r.is_null(row, col) ? std::string() : r.text(row, col);
}

std::string pressure_name(std::int64_t level) {
  return level >= 2 ? "saturated" : level == 1 ? "elevated" : "normal";
}

// Turns storage_stats() rows into StoreStats, and its server-wide and security rows into facts.
StoreStats parse(const PgResult& r, DoctorFacts* facts) {
  StoreStats s;
  s.backend = "postgresql";
  std::map<std::string, TableStats> tables;
  std::map<std::pair<std::string, std::string>, QueueBacklog> queues;
  std::map<std::string, TenantStats> tenants;
  bool server_wide = false;
  std::vector<std::string> privileged, unbound, unsafe;
  std::map<std::string, std::pair<std::string, std::int64_t>> horizon_rows;  // state -> (name, value)
  std::map<std::string, LaneSegment> segments, usage_segments;
  for (int i = 0; i < r.rows(); ++i) {
    const std::string kind = r.text(i, 0), tenant = optional_text(r, i, 1), name = optional_text(r, i, 2),
                      state = r.text(i, 3);
    const std::int64_t value = r.int8(i, 4);
    if (kind == "database") {
      s.database_bytes = value;
      server_wide = true;
    } else if (kind == "table") {
      TableStats& t = tables[name];
      t.name = name;
      if (state == "rows") t.rows = value;
      if (state == "dead_rows") t.dead_rows = value;
      if (state == "bytes") t.bytes = value;
      if (state == "autovacuum") t.autovacuum = value != 0;
    } else if (kind == "queue") {
      QueueBacklog& q = queues[{tenant, name}];
      q.tenant = tenant, q.queue = name;
      if (state == "ready") q.depth.ready = value;
      if (state == "in_flight") q.depth.in_flight = value;
      if (state == "delayed") q.depth.delayed = value;
      if (state == "dead") q.depth.dead = value;
      if (state == "bytes") q.depth.bytes = value;
      if (state == "max_messages") q.max_messages = value;
      if (state == "retrying") q.retrying = value;
      if (state == "dead_last_hour") q.dead_last_hour = value;
      if (state == "oldest_ready_age_usecs") q.depth.oldest_ready_age = Duration(value);
      if (state == "pressure") q.depth.pressure = pressure_name(value);
      if (state == "waiting") q.depth.waiting = value;
      if (state == "retries_delayed") q.depth.retries_delayed = value;
    } else if (kind == "horizon") {
      horizon_rows[state] = {name, value};
    } else if (kind == "lane_segment" || kind == "usage_segment") {
      // ("queue_lane_entries_N", open|sealed, has pages), or ("queue_lane_entries_N pid ...",
      // pinned_usecs, how long; -1: not visible to this role). The counts' segments likewise
      // (0.14.0: "queue_release_deltas_N", "queue_admit_deltas_N").
      const std::size_t space = name.find(' ');
      LaneSegment& seg = (kind == "lane_segment" ? segments : usage_segments)[name.substr(0, space)];
      seg.name = name.substr(0, space);
      if (state == "open" || state == "sealed") {
        seg.open = state == "open";
        seg.has_rows = value != 0;
      } else if (state == "pinned_usecs" && space != std::string::npos) {
        seg.pinned_by = name.substr(space + 1);
        if (value >= 0) seg.pinned_for = std::chrono::microseconds(value);
      }
    } else if (kind == "workflow") {
      s.workflows.push_back({tenant, name, state, value});
    } else if (kind == "leases" || kind == "idempotency" || kind == "audit") {
      TenantStats& t = tenants[tenant];
      t.tenant = tenant;
      if (kind == "leases" && state == "live") t.leases_live = value;
      if (kind == "leases" && state == "expired") t.leases_expired = value;
      if (kind == "idempotency" && state == "in_progress") t.idempotency_in_progress = value;
      if (kind == "idempotency" && state == "completed") t.idempotency_completed = value;
      if (kind == "idempotency" && state == "past_retention") t.idempotency_past_retention = value;
      if (kind == "audit") t.audit_events = value;
    } else if (facts != nullptr && kind == "server") {
      if (state == "autovacuum") facts->autovacuum_on = value != 0;
      if (state == "oldest_transaction_usecs") {
        facts->oldest_transaction = name;
        facts->oldest_transaction_age = std::chrono::microseconds(value);
      }
      if (state == "slot_xmin_age" && (!facts->slot_xmin_age || value > *facts->slot_xmin_age)) {
        facts->slot_holding_xmin = name;
        facts->slot_xmin_age = value;
      }
    } else if (kind == "security") {
      if (state == "table_privilege") privileged.push_back(name);
      if (state == "unbound_usage") unbound.push_back(name);
      if (state == "definer_without_search_path") unsafe.push_back("SECURITY DEFINER " + name + " without search_path");
      if (state == "schema_create") unsafe.push_back("CREATE on schema forgeyard for " + name);
    }
  }
  // The horizon: one holder's kind row (its age in transactions) and maybe "<kind>_usecs"; "none"
  // when nothing holds it. A catalog before 0.9.0 sends no such row: not known.
  for (const auto& [state, row] : horizon_rows) {
    if (state == "none" || state.ends_with("_usecs")) continue;
    s.horizon = XminHorizon{state, row.first, row.second, std::nullopt};
    if (auto held = horizon_rows.find(state + "_usecs"); held != horizon_rows.end())
      s.horizon->held = std::chrono::microseconds(held->second.second);
    break;
  }
  if (facts != nullptr && !horizon_rows.empty()) facts->horizon_known = true;
  for (auto& [_, seg] : segments) s.lane_segments.push_back(std::move(seg));
  for (auto& [_, seg] : usage_segments) s.usage_segments.push_back(std::move(seg));
  for (auto& [_, t] : tables) s.tables.push_back(std::move(t));
  for (auto& [_, q] : queues) s.queues.push_back(std::move(q));
  for (auto& [_, t] : tenants) s.tenants.push_back(std::move(t));
  std::sort(s.workflows.begin(), s.workflows.end(), [](const WorkflowRunCount& a, const WorkflowRunCount& b) {
    return std::tie(a.tenant, a.definition, a.state) < std::tie(b.tenant, b.definition, b.state);
  });
  // A role bound to tenants sees no server-wide rows: then these facts are unknown, not fine.
  if (facts != nullptr && server_wide) {
    facts->roles_with_table_privileges = std::move(privileged);
    facts->unbound_usage_roles = std::move(unbound);
    facts->unsafe_search_path = std::move(unsafe);
  }
  return s;
}

bool is_local_host(const std::string& host) {
  return host.empty() || host.front() == '/' || host.front() == '@' || host == "localhost" ||
         host.rfind("127.", 0) == 0 || host == "::1";
}

// From the URL (or key=value conninfo): whether it carries a password, and whether every host
// it names is local (a Unix socket or loopback).
struct UrlFacts {
  bool password = false;
  bool local = true;
};

UrlFacts url_facts(const std::string& url) {
  UrlFacts f;
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(url.c_str(), &error),
                                                                       &PQconninfoFree);
  if (error != nullptr) PQfreemem(error);
  if (!options) return f;
  std::string hosts, hostaddrs;
  for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string keyword = o->keyword;
    if (keyword == "password" && o->val[0] != '\0') f.password = true;
    if (keyword == "host") hosts = o->val;
    if (keyword == "hostaddr") hostaddrs = o->val;
  }
  for (const std::string& list : {hosts, hostaddrs}) {
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t end = std::min(list.find(',', start), list.size());
      if (!is_local_host(list.substr(start, end - start))) f.local = false;
      start = end + 1;
    }
  }
  return f;
}

}  // namespace

// Flow control's limits of every tenant (a catalog before 0.7.0 has no flow_state: none).
const PgStatement has_flow_sql{"fy_stats_has_flow", "SELECT pg_catalog.to_regclass('forgeyard.flow_state') IS NOT NULL",
                               0};
const PgStatement flow_sql{
    "fy_stats_flow",
    "SELECT tenant_id, queue, kind, subject, \"limit\", available, in_flight, counted, delayed, refused, state, " FY_USECS(
        "since") " FROM forgeyard.flow_state",
    0};

StoreStats pg_stats(PgSession& session) {
  return session.measure("store.stats", [&] {
    StoreStats s = parse(session.run(store_stats_sql, {}), nullptr);
    if (!session.run(has_flow_sql, {}).boolean(0, 0)) return s;
    const PgResult r = session.run(flow_sql, {});
    auto text = [&](int i, int j) { return r.is_null(i, j) ? std::nullopt : std::optional<std::string>(r.text(i, j)); };
    auto number = [&](int i, int j) {
      return r.is_null(i, j) ? std::nullopt : std::optional<std::int64_t>(r.int8(i, j));
    };
    std::map<std::string, std::vector<FlowLimit>> by_tenant;
    for (int i = 0; i < r.rows(); ++i)
      by_tenant[r.text(i, 0)].push_back(
          {text(i, 1), r.text(i, 2), text(i, 3), r.is_null(i, 4) ? std::string() : r.text(i, 4), number(i, 5),
           number(i, 6), number(i, 7), number(i, 8), number(i, 9), text(i, 10),
           r.is_null(i, 11) ? std::nullopt : std::optional<TimePoint>(from_unix_usecs(r.int8(i, 11)))});
    for (auto& [tenant, rows] : by_tenant) {
      sort_flow(rows);
      for (FlowLimit& l : rows) s.flow.push_back({tenant, std::move(l)});
    }
    return s;
  });
}

DoctorFacts pg_doctor_facts(PgConnection& conn, PgSession& session, const std::string& url) {
  using Clock = std::chrono::system_clock;
  DoctorFacts f;
  f.backend = "postgresql";
  f.expected_schema = std::string(version());
  const UrlFacts u = url_facts(url);
  f.password_in_url = u.password;
  f.remote_without_tls = !u.local && !conn.ssl_in_use();

  // Latency: the best of three round trips (the first may include preparing the statement).
  std::chrono::microseconds best = std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    conn.exec(ping_sql, {});
    best =
        std::min(best, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
  }
  f.latency = best;

  const auto before = Clock::now();
  const PgResult s = conn.exec(session_sql, {});
  const auto after = Clock::now();
  f.timezone = s.text(0, 0);
  const auto middle =
      std::chrono::duration_cast<std::chrono::microseconds>((before + (after - before) / 2).time_since_epoch());
  f.clock_skew = std::chrono::microseconds(s.int8(0, 1)) - middle;
  f.installed_schema = s.text(0, 2);
  f.installed_edition = s.text(0, 4);
  // An extension upgrades to what the server offers (ALTER EXTENSION); a plain install of the
  // PL/pgSQL edition to what this client carries (storage install).
  const bool plain = !s.boolean(0, 5);
  const std::string available = plain ? f.expected_schema : s.text(0, 3);
  if (!f.installed_schema->empty()) f.pending_schema_migrations = *f.installed_schema == available ? 0 : 1;

  const PgResult path = conn.exec(search_path_sql, {});
  std::vector<std::string> writable;
  for (int i = 0; i < path.rows(); ++i)
    writable.push_back("schema " + path.text(i, 0) + " on search_path, PUBLIC may CREATE");

  if (!f.installed_schema->empty()) {
    try {
      f.stats = session.measure("store.stats", [&] { return parse(session.run(store_stats_sql, {}), &f); });
    } catch (const Error& e) {
      f.stats_error = std::string(e.what()) + " (SQLSTATE " + e.sqlstate() + ")";
    }
  }
  if (f.unsafe_search_path)
    f.unsafe_search_path->insert(f.unsafe_search_path->begin(), writable.begin(), writable.end());
  else
    f.unsafe_search_path = std::move(writable);
  return f;
}

}  // namespace forgeyard::detail
