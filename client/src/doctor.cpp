// The rules of `storage doctor`: one table, in report order (REQUIRED, SECURITY, PERFORMANCE,
// OPTIONAL). docs/operations.md, "storage doctor", lists every check with its fix.
#include "doctor.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "forgeyard/error.hpp"

namespace forgeyard::detail {

namespace {

namespace limits = doctor_limits;
using std::chrono::microseconds;

struct Verdict {
  CheckStatus status;
  std::string detail;
  std::string fix;
};
using Outcome = std::optional<Verdict>;  // nullopt: the fact was not observed, no check

struct Rule {
  CheckGroup group;
  const char* name;
  std::function<Outcome(const DoctorFacts&)> decide;
};

Verdict ok(std::string detail) {
  return {CheckStatus::Ok, std::move(detail), ""};
}

std::string join(const std::vector<std::string>& items, std::size_t at_most = 5) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < at_most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > at_most) out += " and " + std::to_string(items.size() - at_most) + " more";
  return out;
}

std::string millis(microseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

std::string seconds(microseconds d) {
  return std::to_string(d.count() / 1'000'000) + " s";
}

// A family of segments that maintain() truncates (the ready lanes', 0.13.0; the capacity counts',
// 0.14.0): how many hold rows, and the oldest transaction that pins a sealed one, named; warn from
// doctor_limits::segment_pin_warn, fail from segment_pin_fail (named, not judged, where the role
// cannot see its start). No check on a catalog without them.
Outcome segments_verdict(const std::vector<LaneSegment>& segments, const std::string& holding_what,
                         const std::string& meanwhile) {
  if (segments.empty()) return std::nullopt;
  int holding = 0;
  const LaneSegment* pinned = nullptr;
  for (const LaneSegment& seg : segments) {
    if (seg.has_rows) ++holding;
    if (seg.open || seg.pinned_by.empty()) continue;
    const auto age = seg.pinned_for.value_or(microseconds(-1));
    if (pinned == nullptr || age > pinned->pinned_for.value_or(microseconds(-1))) pinned = &seg;
  }
  std::string detail = std::to_string(holding) + " of " + std::to_string(segments.size()) + " " + holding_what;
  if (pinned == nullptr) return ok(detail + "; no sealed one is pinned by an open transaction");
  detail += "; " + pinned->pinned_by + " holds a lock on sealed segment forgeyard." + pinned->name;
  if (pinned->pinned_for) detail += ", open for " + seconds(*pinned->pinned_for);
  detail += ": maintain() skips the segment until it ends";
  const std::string fix =
      "end that transaction (COMMIT or ROLLBACK; pg_terminate_backend(pid) if abandoned): while it is open " +
      meanwhile;
  if (pinned->pinned_for && *pinned->pinned_for >= limits::segment_pin_fail)
    return Verdict{CheckStatus::Fail, detail, fix};
  if (pinned->pinned_for && *pinned->pinned_for >= limits::segment_pin_warn)
    return Verdict{CheckStatus::Warn, detail, fix};
  return ok(detail);
}

// How a PostgreSQL store reaches this client's version: the extension by ALTER EXTENSION, a plain
// install of the PL/pgSQL edition by storage install.
std::string upgrade_hint(const DoctorFacts& f) {
  if (f.installed_edition == "plpgsql")
    return "forgeyard storage install --edition plpgsql, with the forgeyard of version " + f.expected_schema +
           " (where pg_tle installed it: forgeyard storage install --print pg_tle, then ALTER EXTENSION forgeyard "
           "UPDATE)";
  return "ALTER EXTENSION forgeyard UPDATE TO '" + f.expected_schema + "'";
}

bool is_hot(const std::string& table) {
  for (const char* t : hot_tables)
    if (table == t) return true;
  return false;
}

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      // REQUIRED: the store cannot be used safely until these pass.
      {CheckGroup::Required, "connectivity",
       [](const DoctorFacts& f) -> Outcome {
         if (f.connect_error)
           return Verdict{CheckStatus::Fail, "cannot reach the store: " + *f.connect_error,
                          "check the URL (--store / $FORGEYARD_STORE), that the server runs and accepts this role"};
         if (!f.latency) return std::nullopt;
         const std::string detail = "round trip " + millis(*f.latency);
         if (*f.latency >= limits::latency_fail)
           return Verdict{CheckStatus::Fail, detail,
                          "the store answers too slowly: check the network and the server's load"};
         if (*f.latency >= limits::latency_warn)
           return Verdict{CheckStatus::Warn, detail, "check the network path and the server's load"};
         return ok(detail);
       }},
      {CheckGroup::Required, "schema_version",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.installed_schema) return std::nullopt;
         const bool pg = f.backend == "postgresql";
         if (f.installed_schema->empty())
           return Verdict{CheckStatus::Fail, pg ? "forgeyard is not installed in this database" : "no schema applied",
                          pg ? "forgeyard storage install (docs/operations.md, \"Installing forgeyard\")"
                             : "open the store once with this client"};
         const std::string installed =
             pg ? "forgeyard " + *f.installed_schema + " (" + f.installed_edition + " edition)" : "";
         if (pg && *f.installed_schema != f.expected_schema)
           return Verdict{CheckStatus::Fail, installed + " installed, this client expects " + f.expected_schema,
                          upgrade_hint(f) + " (or use a client of the installed version)"};
         return ok(pg ? installed : "schema " + *f.installed_schema);
       }},
      {CheckGroup::Required, "migrations",
       [](const DoctorFacts& f) -> Outcome {
         if (f.schema_error)
           return Verdict{CheckStatus::Fail, *f.schema_error,
                          "restore the applied migration files exactly as they were applied; never edit one"};
         if (!f.pending_schema_migrations) return std::nullopt;
         const int n = *f.pending_schema_migrations;
         if (n > 0)
           return Verdict{
               CheckStatus::Fail, std::to_string(n) + " forgeyard schema migration(s) pending",
               f.backend == "postgresql" ? upgrade_hint(f) : "open the store with this client once (it applies them)"};
         return ok("no forgeyard schema migration pending");
       }},
      {CheckGroup::Required, "migration_lock",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.lock_holder) return std::nullopt;
         if (!f.lock_holder->empty())
           return Verdict{CheckStatus::Warn, "the exclusive store lock is held: " + *f.lock_holder,
                          "wait for that migration, backup or restore to finish (a dead holder's lock is released)"};
         return ok("the exclusive store lock is free");
       }},
      {CheckGroup::Required, "app_migrations",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.app_migrations) return std::nullopt;
         const AppMigrationFacts& a = *f.app_migrations;
         if (a.changed > 0)
           return Verdict{CheckStatus::Fail,
                          "application " + a.app + ": " + std::to_string(a.changed) +
                              " applied migration(s) changed or missing: " + a.changed_detail,
                          "restore the applied files exactly as they were applied; never edit or renumber one"};
         if (a.pending > 0)
           return Verdict{CheckStatus::Fail,
                          "application " + a.app + ": " + std::to_string(a.pending) + " migration(s) pending",
                          "forgeyard storage migrate apply --dir <dir> --app " + a.app};
         return ok("application " + a.app + ": every migration applied");
       }},
      {CheckGroup::Required, "app_migration_lock",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.app_migrations) return std::nullopt;
         if (!f.app_migrations->lock_holder.empty())
           return Verdict{CheckStatus::Warn, "a migration runner holds the lock: " + f.app_migrations->lock_holder,
                          "wait for it; a second runner waits and then finds nothing left to do"};
         return ok("no migration runner holds the lock");
       }},
      {CheckGroup::Required, "restore_reconciled",
       [](const DoctorFacts& f) -> Outcome {
         if (f.restore_error)
           return Verdict{CheckStatus::Fail, "cannot tell whether the store was restored: " + *f.restore_error,
                          "run doctor as the extension's owner or a role with grant_maintenance"};
         if (!f.restore) return std::nullopt;
         const RestoreStatus& r = *f.restore;
         if (r.needs_reconcile())
           return Verdict{CheckStatus::Fail, "a restore or copy was detected and not reconciled: " + r.detail,
                          "run forgeyard storage reconcile"};
         if (r.state == RestoreState::Suspected)
           return Verdict{CheckStatus::Warn,
                          "the timeline changed (a point-in-time recovery, or a failover): " + r.detail,
                          "after a restore run forgeyard storage reconcile; after a failover to a synchronous replica "
                          "nothing is needed (docs/operations.md, after a failover)"};
         return ok(r.last_reconciled_at ? "the store is where it was recorded; reconciled since its last restore"
                                        : "no restore detected");
       }},
      {CheckGroup::Required, "integrity",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.integrity) return std::nullopt;
         if (*f.integrity != "ok")
           return Verdict{CheckStatus::Fail, "quick_check: " + *f.integrity,
                          "stop writers and restore the store from a backup (storage restore)"};
         return ok("quick_check ok");
       }},
      {CheckGroup::Required, "local_filesystem",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.network_filesystem) return std::nullopt;
         if (*f.network_filesystem)
           return Verdict{CheckStatus::Fail, "the store is on a network filesystem",
                          "move the store to a local disk (SQLite's locking is unsafe over the network)"};
         return ok("the store is on a local filesystem");
       }},
      {CheckGroup::Required, "inspection",
       [](const DoctorFacts& f) -> Outcome {
         if (f.stats_error)
           return Verdict{CheckStatus::Warn, "cannot read the store's figures: " + *f.stats_error,
                          "run doctor as a role with SELECT forgeyard.grant_inspect('<role>') or grant_maintenance"};
         if (!f.stats) return std::nullopt;
         return ok("store figures readable");
       }},

      // SECURITY
      {CheckGroup::Security, "table_privileges",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.roles_with_table_privileges) return std::nullopt;
         if (!f.roles_with_table_privileges->empty())
           return Verdict{CheckStatus::Fail,
                          "roles with direct privileges on forgeyard tables (can bypass the API): " +
                              join(*f.roles_with_table_privileges),
                          "REVOKE ALL ON ALL TABLES IN SCHEMA forgeyard FROM <role>; grant the API with "
                          "forgeyard.grant_usage('<role>')"};
         return ok("no role other than the owner has privileges on forgeyard tables");
       }},
      {CheckGroup::Security, "tenant_bindings",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.unbound_usage_roles) return std::nullopt;
         if (!f.unbound_usage_roles->empty())
           return Verdict{CheckStatus::Fail,
                          "tenant bindings are in use, but these application roles are bound to no tenant (they "
                          "may act for every tenant): " +
                              join(*f.unbound_usage_roles),
                          "SELECT forgeyard.bind_tenant('<role>', '<tenant>') for each"};
         return ok("every application role is bound, or bindings are not in use");
       }},
      {CheckGroup::Security, "search_path",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.unsafe_search_path) return std::nullopt;
         if (!f.unsafe_search_path->empty())
           return Verdict{CheckStatus::Fail, "name resolution can be hijacked: " + join(*f.unsafe_search_path),
                          "REVOKE CREATE ON SCHEMA <schema> FROM PUBLIC, or drop that schema from search_path"};
         return ok("no schema on the search path is writable by PUBLIC; definer functions pin search_path");
       }},
      {CheckGroup::Security, "tls",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.remote_without_tls) return std::nullopt;
         if (*f.remote_without_tls)
           return Verdict{CheckStatus::Fail, "a non-local connection without TLS",
                          "sslmode=verify-full in the URL and ssl = on on the server"};
         return ok("local connection, or TLS in use");
       }},
      {CheckGroup::Security, "password_in_url",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.password_in_url) return std::nullopt;
         if (*f.password_in_url)
           return Verdict{CheckStatus::Fail, "the store URL carries a password (it ends up in shell history and ps)",
                          "move it to ~/.pgpass (or PGPASSFILE) and drop it from the URL"};
         return ok("no password in the URL");
       }},
      {CheckGroup::Security, "file_permissions",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.world_readable_file) return std::nullopt;
         if (!f.world_readable_file->empty())
           return Verdict{CheckStatus::Warn, *f.world_readable_file + " is readable by other users",
                          "chmod 600 the store file and its -wal and -shm files"};
         return ok("the store file is private to its owner");
       }},

      // PERFORMANCE
      {CheckGroup::Performance, "autovacuum",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.autovacuum_on) return std::nullopt;
         if (!*f.autovacuum_on)
           return Verdict{CheckStatus::Fail, "autovacuum is off on the server",
                          "ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf()"};
         std::vector<std::string> off;
         if (f.stats)
           for (const TableStats& t : f.stats->tables)
             if (!t.autovacuum && is_hot(t.name)) off.push_back("forgeyard." + t.name);
         if (!off.empty())
           return Verdict{CheckStatus::Fail, "autovacuum is disabled on hot tables: " + join(off),
                          "ALTER TABLE <table> RESET (autovacuum_enabled)"};
         return ok("autovacuum on for the server and the hot tables");
       }},
      {CheckGroup::Performance, "dead_tuples",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.stats || f.backend != "postgresql") return std::nullopt;
         std::vector<std::string> bloated;
         for (const TableStats& t : f.stats->tables)
           if (is_hot(t.name) && t.dead_rows > limits::dead_rows_warn &&
               static_cast<double>(t.dead_rows) > limits::dead_ratio_warn * static_cast<double>(t.rows))
             bloated.push_back("forgeyard." + t.name + " (" + std::to_string(t.dead_rows) + " dead, " +
                               std::to_string(t.rows) + " live)");
         if (!bloated.empty())
           return Verdict{CheckStatus::Warn, "autovacuum is far behind: " + join(bloated),
                          "VACUUM (ANALYZE) the table; look for a long transaction or slot holding xmin"};
         return ok("dead tuples on the hot tables within bounds");
       }},
      {CheckGroup::Performance, "long_transaction",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.oldest_transaction_age) {
           if (f.backend == "postgresql" && f.stats) return ok("no other open transaction holds back xmin");
           return std::nullopt;
         }
         const std::string detail =
             "oldest open transaction " + seconds(*f.oldest_transaction_age) + ": " + f.oldest_transaction.value_or("");
         const std::string fix =
             "end it (commit, or pg_terminate_backend(pid) if abandoned): it keeps vacuum from "
             "cleaning the hot tables";
         if (*f.oldest_transaction_age >= limits::transaction_fail) return Verdict{CheckStatus::Fail, detail, fix};
         if (*f.oldest_transaction_age >= limits::transaction_warn) return Verdict{CheckStatus::Warn, detail, fix};
         return ok(detail);
       }},
      {CheckGroup::Performance, "xmin_horizon",
       [](const DoctorFacts& f) -> Outcome {
         // Server-wide rows of a catalog that reports it (0.9.0 on), read by an unbound role:
         // otherwise nothing is known of it.
         if (f.backend != "postgresql" || !f.stats || !f.horizon_known) return std::nullopt;
         const std::optional<XminHorizon>& h = f.stats->horizon;
         if (!h) return ok("nothing holds back the xmin horizon");
         std::string detail =
             h->kind + " " + h->holder + " holds the xmin horizon " + std::to_string(h->xid_age) + " transactions back";
         if (h->held) detail += ", for " + seconds(*h->held);
         // What it holds back: the dead row versions VACUUM may not remove, in the hot tables.
         std::vector<const TableStats*> hot;
         std::int64_t dead = 0;
         for (const TableStats& t : f.stats->tables)
           if (is_hot(t.name) && t.dead_rows > 0) hot.push_back(&t), dead += t.dead_rows;
         std::sort(hot.begin(), hot.end(),
                   [](const TableStats* a, const TableStats* b) { return a->dead_rows > b->dead_rows; });
         std::vector<std::string> named;
         for (const TableStats* t : hot) named.push_back("forgeyard." + t->name + " " + std::to_string(t->dead_rows));
         detail += "; dead rows in the hot tables: " + std::to_string(dead);
         if (!named.empty()) detail += " (" + join(named, 3) + ")";
         const std::string fix =
             "end it: COMMIT or ROLLBACK (pg_terminate_backend(pid) if abandoned), COMMIT PREPARED or ROLLBACK "
             "PREPARED 'gid', drop or advance the slot, or end the standby's long query; until then VACUUM removes "
             "nothing that died after it and queue claims step over every row version it keeps";
         const bool timed = h->held.has_value();
         if ((timed && *h->held >= limits::horizon_fail) || h->xid_age >= limits::horizon_xids_fail)
           return Verdict{CheckStatus::Fail, detail, fix};
         if ((timed && *h->held >= limits::horizon_warn) || h->xid_age >= limits::horizon_xids_warn)
           return Verdict{CheckStatus::Warn, detail, fix};
         return ok(detail);
       }},
      {CheckGroup::Performance, "lane_segments",
       [](const DoctorFacts& f) -> Outcome {
         // The ready lanes' segments (0.13.0 on; server-wide rows, read by an unbound role).
         if (f.backend != "postgresql" || !f.stats) return std::nullopt;
         return segments_verdict(f.stats->lane_segments, "segments of the ready lanes hold entries",
                                 "the segments cannot turn, and producers append to the open one, which grows");
       }},
      {CheckGroup::Performance, "usage_segments",
       [](const DoctorFacts& f) -> Outcome {
         // The capacity counts' segments (0.14.0 on; server-wide rows, read by an unbound role).
         if (f.backend != "postgresql" || !f.stats) return std::nullopt;
         return segments_verdict(f.stats->usage_segments, "segments of the capacity counts hold rows",
                                 "the dead versions that acks and enqueues left in that segment stay");
       }},
      {CheckGroup::Performance, "replication_slots",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.slot_xmin_age) {
           if (f.backend == "postgresql" && f.stats) return ok("no replication slot holds back xmin");
           return std::nullopt;
         }
         const std::string detail = "slot " + f.slot_holding_xmin.value_or("") + " holds xmin " +
                                    std::to_string(*f.slot_xmin_age) + " transactions back";
         const std::string fix = "drop an unused slot (SELECT pg_drop_replication_slot('<slot>')) or fix its consumer";
         if (*f.slot_xmin_age >= limits::slot_xmin_age_fail) return Verdict{CheckStatus::Fail, detail, fix};
         if (*f.slot_xmin_age >= limits::slot_xmin_age_warn) return Verdict{CheckStatus::Warn, detail, fix};
         return ok(detail);
       }},
      {CheckGroup::Performance, "wal_size",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.wal_bytes) return std::nullopt;
         const std::string detail = "WAL file " + std::to_string(*f.wal_bytes) + " bytes";
         if (*f.wal_bytes >= limits::wal_bytes_warn)
           return Verdict{CheckStatus::Warn, detail,
                          "a long-lived reader keeps the WAL from being checkpointed: end it (then it shrinks)"};
         return ok(detail);
       }},

      // OPTIONAL: the store works, but something needs attention.
      {CheckGroup::Optional, "queue_pressure",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.stats) return std::nullopt;
         std::vector<std::string> elevated, saturated;
         for (const QueueBacklog& q : f.stats->queues) {
           const std::string item = q.tenant + "/" + q.queue;
           if (q.depth.pressure == "saturated") saturated.push_back(item);
           if (q.depth.pressure == "elevated") elevated.push_back(item);
         }
         const std::string fix = "add consumers, or raise the queue's limits (queue_alter)";
         if (!saturated.empty()) return Verdict{CheckStatus::Fail, "saturated queues: " + join(saturated), fix};
         if (!elevated.empty()) return Verdict{CheckStatus::Warn, "elevated queues: " + join(elevated), fix};
         return ok(std::to_string(f.stats->queues.size()) + " queue(s), all at normal pressure");
       }},
      {CheckGroup::Optional, "dead_letters",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.stats) return std::nullopt;
         std::int64_t total = 0, recent = 0;
         std::vector<std::string> growing;
         for (const QueueBacklog& q : f.stats->queues) {
           total += q.depth.dead;
           recent += q.dead_last_hour;
           if (q.dead_last_hour > 0) growing.push_back(q.tenant + "/" + q.queue);
         }
         if (recent > 0)
           return Verdict{CheckStatus::Warn,
                          std::to_string(recent) + " dead-lettered in the last hour (" + join(growing) + "), " +
                              std::to_string(total) + " dead letters in all",
                          "look at them (queue dead), fix the cause, then redrive or purge"};
         return ok(std::to_string(total) + " dead letter(s), none in the last hour");
       }},
      {CheckGroup::Optional, "expired_leases",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.stats) return std::nullopt;
         std::int64_t expired = 0;
         for (const TenantStats& t : f.stats->tenants) expired += t.leases_expired;
         if (expired > 0)
           return Verdict{CheckStatus::Warn, std::to_string(expired) + " lease(s) expired but never reaped",
                          "run a reconciler that calls lease reap (Leases::reap) and cleans up after dead holders"};
         return ok("no expired lease waiting to be reaped");
       }},
      {CheckGroup::Optional, "idempotency_retention",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.stats) return std::nullopt;
         std::int64_t past = 0;
         for (const TenantStats& t : f.stats->tenants) past += t.idempotency_past_retention;
         if (past > 0)
           return Verdict{CheckStatus::Warn, std::to_string(past) + " idempotency key(s) past retention",
                          "schedule forgeyard maintain (or SELECT forgeyard.maintain() from pg_cron)"};
         return ok("no idempotency key past retention");
       }},
      {CheckGroup::Optional, "timezone",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.timezone) return std::nullopt;
         if (*f.timezone != "UTC" && *f.timezone != "Etc/UTC")
           return Verdict{CheckStatus::Warn,
                          "server TimeZone is " + *f.timezone + " (results are right, psql output and logs mix zones)",
                          "ALTER DATABASE <db> SET timezone = 'UTC'"};
         return ok("server TimeZone " + *f.timezone);
       }},
      {CheckGroup::Optional, "clock_skew",
       [](const DoctorFacts& f) -> Outcome {
         if (!f.clock_skew) return std::nullopt;
         const auto skew = f.clock_skew->count() < 0 ? -*f.clock_skew : *f.clock_skew;
         const std::string detail = "the store's clock is " + millis(*f.clock_skew) + " from this host's";
         if (skew >= limits::clock_skew_warn)
           return Verdict{CheckStatus::Warn, detail,
                          "run NTP on both hosts (expiry uses the store's clock; timestamps you compare would not)"};
         return ok(detail);
       }},
  };
  return table;
}

}  // namespace

std::vector<DoctorCheck> evaluate_doctor(const DoctorFacts& facts) {
  std::vector<DoctorCheck> checks;
  const bool reachable = !facts.connect_error;
  for (const Rule& rule : rules()) {
    if (!reachable && std::string_view(rule.name) != "connectivity") continue;
    if (Outcome v = rule.decide(facts))
      checks.push_back(DoctorCheck{rule.group, rule.name, v->status, std::move(v->detail), std::move(v->fix)});
  }
  return checks;
}

void add_store_facts(DoctorFacts& facts, Store& store, const DoctorOptions& options,
                     const StoreOptions& store_options) {
  if (facts.connect_error) return;
  const std::string dir =
      options.app_migrations_dir.empty() ? store_options.app_migrations_dir : options.app_migrations_dir;
  if (!dir.empty()) {
    AppMigrationFacts a;
    a.app = !options.app.empty()              ? options.app
            : !store_options.app_name.empty() ? store_options.app_name
                                              : default_app_name;
    try {
      const MigrationStatus s = store.migrations().status(dir, a.app);
      a.pending = s.pending;
      a.changed = s.changed;
      a.lock_holder = s.lock_holder;
      for (const MigrationEntry& m : s.migrations)
        if (m.state == MigrationState::Changed || m.state == MigrationState::Missing) {
          a.changed_detail = m.name + ": " + m.detail;
          break;
        }
    } catch (const Error& e) {
      a.changed = 1;  // unreadable directory or history: the check fails naming why
      a.changed_detail = std::string("cannot read the migrations: ") + e.what();
    }
    facts.app_migrations = std::move(a);
  }
  try {
    facts.restore = store.restore_status();
  } catch (const Error& e) {
    facts.restore_error = e.what();
  }
}

}  // namespace forgeyard::detail
