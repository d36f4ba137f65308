// Backup, restore and verify of a PostgreSQL store. The backup is `pg_dump -Fc` of the one
// snapshot the manifest's audit heads were read in (pg_export_snapshot), so the two agree. A
// restore goes into a new database first and replaces the target only once it has worked.
#include <libpq-fe.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/core.hpp"
#include "forgeyard/version.hpp"
#include "instruments.hpp"
#include "ops/ops.hpp"
#include "postgres/connection.hpp"

namespace forgeyard::detail::ops {

namespace fs = std::filesystem;
namespace sqlstate = fy::core::sqlstate;

namespace {

constexpr char dump_file_name[] = "database.dump";

// The URL's parameters: as libpq's environment variables for a child, and as a conninfo
// string for another database of the same server.
class ConnParams {
 public:
  explicit ConnParams(const std::string& url) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (options == nullptr) {
      std::string message = error != nullptr ? error : "out of memory";
      PQfreemem(error);
      throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                  "cannot parse the store URL " + redact(url) + ": " + message);
    }
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val == nullptr || o->val[0] == '\0') continue;
      values_.emplace_back(o->keyword, o->val);
      if (o->envvar != nullptr) env_[o->envvar] = o->val;
    }
    PQconninfoFree(options);
  }
  const std::map<std::string, std::string>& env() const { return env_; }
  std::string get(const std::string& keyword) const {
    for (const auto& [k, v] : values_)
      if (k == keyword) return v;
    return {};
  }
  // The same server and credentials, another database.
  std::string conninfo_for(const std::string& dbname) const {
    std::string out;
    auto quote = [](const std::string& v) {
      std::string q = "'";
      for (char c : v) {
        if (c == '\'' || c == '\\') q += '\\';
        q += c;
      }
      return q + "'";
    };
    for (const auto& [k, v] : values_)
      if (k != "dbname") out += k + "=" + quote(v) + " ";
    return out + "dbname=" + quote(dbname);
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  std::map<std::string, std::string> env_;
};

// A query built at run time, run unnamed (the connection is opened without prepared statements).
PgResult query(PgConnection& conn, const std::string& sql, const PgParams& params = {}) {
  const PgStatement statement{"", sql.c_str(), static_cast<int>(params.size())};
  return conn.exec(statement, params);
}

std::string extension_version(PgConnection& conn) {
  PgResult r = query(conn, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'forgeyard'");
  return r.rows() == 0 ? std::string() : r.text(0, 0);
}

// What a database holds that a restore would overwrite: relations outside the system and
// forgeyard schemas, and forgeyard tables with rows.
std::vector<std::string> database_contents(PgConnection& conn) {
  std::vector<std::string> found;
  PgResult apps =
      query(conn,
            "SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
            " WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')"
            " AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'forgeyard')"
            " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%' ORDER BY 1 LIMIT 20");
  for (int i = 0; i < apps.rows(); ++i) found.push_back(apps.text(i, 0));
  PgResult ours = query(conn,
                        "SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_class c"
                        " WHERE c.relkind = 'r' AND c.relnamespace OPERATOR(pg_catalog.=)"
                        " (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'forgeyard') ORDER BY 1");
  for (int i = 0; i < ours.rows(); ++i) {
    const std::string table = ours.text(i, 0);
    // Only the tables of a store's data: bookkeeping (the access catalog, identity) does not count.
    if (std::find(data_tables().begin(), data_tables().end(), table.substr(table.find('.') + 1)) == data_tables().end())
      continue;
    if (query(conn, "SELECT 1 FROM " + table + " LIMIT 1").rows() > 0) found.push_back(table);
  }
  return found;
}

bool database_exists(PgConnection& maintenance, const std::string& name) {
  return query(maintenance, "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1", {name}).rows() > 0;
}

}  // namespace

std::string pg_installed_version(PgConnection& conn) {
  const PgStatement s{"", "SELECT " FY_INSTALLED_VERSION, 0};
  PgResult r = conn.exec(s, {});
  return r.is_null(0, 0) ? std::string() : r.text(0, 0);
}

BackupResult postgres_backup(const std::string& url, const std::string& directory, const ProgressFn& progress) {
  const ConnParams params(url);
  PgConnection conn(url, false);
  const std::string extension = extension_version(conn);
  if (extension.empty())
    throw Error(ErrorKind::NotFound, sqlstate::undefined_object,
                pg_installed_version(conn).empty()
                    ? "forgeyard is not installed in the database of " + redact(url)
                    : "storage backup takes a forgeyard extension, and " + redact(url) +
                          " holds a plain install of the PL/pgSQL edition: pg_dump and pg_restore its database as "
                          "its owner (docs/operations.md, \"Installing forgeyard\")");
  prepare_backup_directory(directory);
  const std::string dump = (fs::path(directory) / dump_file_name).string();

  fy::core::BackupManifest m;
  m.forgeyard_version = std::string(version());
  m.backend = "postgresql";
  m.schema_version = extension;
  m.migrations.push_back({"forgeyard", extension, ""});
  // The capacity counts' segments (0.14.0) locked before the snapshot is taken (LOCK TABLE takes
  // none), and to the end of pg_dump: maintain() cannot truncate one between the snapshot and
  // pg_dump's own locks (TRUNCATE is not MVCC safe: the dump would hold a slot row older than a
  // fold without the folded admission row).
  const bool segmented =
      query(conn, "SELECT pg_catalog.to_regclass('forgeyard.queue_admit_deltas_0') IS NOT NULL").text(0, 0) == "t";
  conn.command("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
  if (segmented)
    conn.command("LOCK TABLE forgeyard.queue_release_deltas, forgeyard.queue_admit_deltas IN ACCESS SHARE MODE");
  const std::string snapshot = query(conn, "SELECT pg_catalog.pg_export_snapshot()").text(0, 0);
  m.server_version = query(conn, "SELECT pg_catalog.current_setting('server_version')").text(0, 0);
  m.created_at = utc_now_iso();
  PgResult heads = query(conn,
                         "SELECT tenant_id, seq, pg_catalog.encode(hash, 'hex') FROM forgeyard.audit_heads"
                         " ORDER BY tenant_id");
  for (int i = 0; i < heads.rows(); ++i)
    m.audit_heads.push_back({heads.text(i, 0), heads.int8(i, 1), heads.text(i, 2)});
  if (progress) progress("pg_dump of " + redact(url) + " (server " + m.server_version + ") into " + dump);
  run_child({{"pg_dump", "--format=custom", "--snapshot=" + snapshot, "--file=" + dump}, params.env(), "pg_dump", dump},
            progress);
  conn.command("COMMIT");
  fsync_path(dump);

  const FileDigest d = digest_file(dump);
  m.files.push_back({dump_file_name, d.size, d.sha256});
  write_durably((fs::path(directory) / fy::core::backup_manifest_name).string(), fy::core::to_json(m));
  return {directory,
          m.backend,
          m.schema_version,
          m.server_version,
          m.created_at,
          d.size,
          1,
          static_cast<int>(m.audit_heads.size())};
}

RestoreResult postgres_restore(const std::string& url, const std::string& directory,
                               const fy::core::BackupManifest& manifest, const RestoreOptions& options) {
  if (manifest.backend != "postgresql")
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "this is a " + manifest.backend + " backup: restore it into a " + manifest.backend +
                    " store, or move data between backends with `storage copy`");
  try {
    fy::core::check_backup_not_newer(manifest, version());
  } catch (const fy::core::Error& e) {
    throw Error(e.sqlstate(), e.what());
  }
  if (manifest.files.size() != 1 || manifest.files[0].name != dump_file_name)
    throw Error(ErrorKind::Corruption, sqlstate::data_corrupted,
                "the backup is incomplete or corrupted: a PostgreSQL backup holds exactly database.dump");
  const std::string dump = (fs::path(directory) / dump_file_name).string();
  const ConnParams params(url);
  std::string target = params.get("dbname");
  if (target.empty()) target = params.get("user");
  if (target.empty())
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter, "the store URL names no database");

  RestoreResult result;
  result.backend = "postgresql";
  result.backup_schema_version = manifest.schema_version;
  result.backup_created_at = manifest.created_at;

  // Everything that can refuse runs before anything changes: the archive is readable, the
  // server has the backup's extension version, the target is empty or --replace was given.
  // The archive's table of contents, without the extension and its schema: the staging
  // database gets those from CREATE EXTENSION at the backup's version.
  const std::string list =
      (fs::temp_directory_path() / ("forgeyard-restore-" + std::to_string(getpid()) + ".list")).string();
  run_child({{"pg_restore", "--list", dump}, params.env(), "pg_restore --list", "", list}, {});
  {
    std::ifstream in(list);
    std::string contents, line;
    while (std::getline(in, line)) {
      const bool ours = line.find(" SCHEMA - forgeyard ") != std::string::npos ||
                        line.find(" EXTENSION - forgeyard ") != std::string::npos ||
                        line.find(" COMMENT - EXTENSION forgeyard ") != std::string::npos;
      contents += (ours ? ";" : "") + line + "\n";
    }
    in.close();
    std::ofstream(list, std::ios::trunc) << contents;
  }
  struct RemoveList {
    std::string path;
    ~RemoveList() { std::filesystem::remove(path); }
  } remove_list{list};
  PgConnection maintenance(params.conninfo_for("postgres"), false);
  if (query(maintenance,
            "SELECT 1 FROM pg_catalog.pg_available_extension_versions WHERE name = 'forgeyard' AND version = $1",
            {manifest.schema_version})
          .rows() == 0)
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "this server has no forgeyard extension version " + manifest.schema_version +
                    " to restore into (install the extension's files first)");
  const bool existed = database_exists(maintenance, target);
  if (existed) {
    PgConnection existing(params.conninfo_for(target), false);
    const auto contents = database_contents(existing);
    if (!contents.empty()) {
      if (!options.replace) {
        std::string names;
        for (const auto& n : contents) names += (names.empty() ? "" : ", ") + n;
        throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                    "the target database " + target + " is not empty (" + names + "): pass --replace to overwrite it");
      }
      result.replaced = true;
    }
  }

  const std::string staging = target.substr(0, 50) + "_fy_restore";
  maintenance.command(("DROP DATABASE IF EXISTS " + quote_ident(staging)).c_str());
  maintenance.command(("CREATE DATABASE " + quote_ident(staging) + " TEMPLATE template0").c_str());
  try {
    {
      // The backup's own extension version first: pg_dump's CREATE EXTENSION IF NOT EXISTS would
      // otherwise install the newest one under the older tables' data.
      PgConnection staged(params.conninfo_for(staging), false);
      staged.command(("CREATE EXTENSION forgeyard VERSION " + quote_ident(manifest.schema_version)).c_str());
    }
    if (options.progress) options.progress("pg_restore of " + dump + " into " + staging);
    run_child(
        {{"pg_restore", "--exit-on-error", "--single-transaction", "--use-list=" + list, "--dbname=" + staging, dump},
         params.env(),
         "pg_restore",
         ""},
        options.progress);
    PgConnection staged(params.conninfo_for(staging), false);
    if (extension_version(staged) != std::string(version())) {
      staged.command("ALTER EXTENSION forgeyard UPDATE");
      result.migrated = true;
    }
    result.schema_version = extension_version(staged);
  } catch (...) {
    maintenance.command(("DROP DATABASE IF EXISTS " + quote_ident(staging) + " WITH (FORCE)").c_str());
    throw;
  }
  if (existed) maintenance.command(("DROP DATABASE " + quote_ident(target) + " WITH (FORCE)").c_str());
  maintenance.command(("ALTER DATABASE " + quote_ident(staging) + " RENAME TO " + quote_ident(target)).c_str());

  auto store = forgeyard::open(url);
  result.reconciled = reconcile_restored(*store);
  store.reset();
  result.verify = postgres_verify(url, true);
  return result;
}

VerifyReport postgres_verify(const std::string& url, bool full) {
  VerifyReport report;
  report.full = full;
  auto finding = [&](const std::string& check, const std::string& detail) {
    report.findings.push_back({check, detail});
  };
  PgConnection conn(url, false);

  report.checks.push_back("schema");
  const std::string extension = pg_installed_version(conn);
  if (extension.empty()) {
    finding("schema", "forgeyard is not installed");
    return report;
  }
  const bool schema_current = extension == std::string(version());
  if (!schema_current)
    finding("schema", "forgeyard " + extension + ", this forgeyard is " + std::string(version()) +
                          ": forgeyard storage install, or ALTER EXTENSION forgeyard UPDATE");

  report.checks.push_back("constraints");
  {
    PgResult r =
        query(conn,
              "SELECT c.conrelid::pg_catalog.regclass::pg_catalog.text, c.conname FROM pg_catalog.pg_constraint c"
              " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.connamespace"
              " WHERE NOT c.convalidated AND n.nspname NOT IN ('pg_catalog', 'information_schema')");
    for (int i = 0; i < r.rows(); ++i)
      finding("constraints", "constraint " + r.text(i, 1) + " of " + r.text(i, 0) + " is not validated");
    PgResult t = query(
        conn,
        "SELECT g.tgname, g.tgrelid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_trigger g"
        " WHERE (g.tgrelid OPERATOR(pg_catalog.=) 'forgeyard.audit_events'::pg_catalog.regclass"
        "        AND g.tgenabled OPERATOR(pg_catalog.<>) 'A')"
        " OR (g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning' AND g.tgenabled OPERATOR(pg_catalog.=) 'D')");
    for (int i = 0; i < t.rows(); ++i)
      finding("constraints", "trigger " + t.text(i, 0) + " on " + t.text(i, 1) + " is not enabled as it must be");
  }

  report.checks.push_back("counts");
  {
    PgResult tables = query(conn,
                            "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind = 'r' AND c.relnamespace"
                            " OPERATOR(pg_catalog.=) 'forgeyard'::pg_catalog.regnamespace ORDER BY 1");
    for (int i = 0; i < tables.rows(); ++i) {
      const std::string t = tables.text(i, 0);
      report.counts[t] = query(conn, "SELECT pg_catalog.count(*) FROM forgeyard." + quote_ident(t)).int8(0, 0);
    }
  }
  if (!full || !schema_current) return report;

  report.checks.push_back("versioned_tables");
  {
    PgResult tables = query(conn,
                            "SELECT g.tgrelid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_trigger g"
                            " WHERE g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning' ORDER BY 1");
    for (int i = 0; i < tables.rows(); ++i) {
      const std::string t = tables.text(i, 0);
      const auto bad =
          query(conn, "SELECT pg_catalog.count(*) FROM " + t + " WHERE entity_version IS NULL OR entity_version < 1")
              .int8(0, 0);
      if (bad > 0) finding("versioned_tables", t + ": " + std::to_string(bad) + " row(s) with entity_version < 1");
    }
  }

  report.checks.push_back("queue_counters");
  {
    // (the slots' admission generation rows from 0.12.0 on: a database not updated yet has none)
    const bool generations =
        query(conn, "SELECT pg_catalog.to_regclass('forgeyard.queue_admit_deltas') IS NOT NULL").text(0, 0) == "t";
    PgResult r = query(
        conn,
        std::string("WITH a AS (SELECT tenant_id, queue, sum(admitted_messages) AS m, sum(admitted_bytes) AS b"
                    "             FROM (SELECT tenant_id, queue, admitted_messages, admitted_bytes"
                    "                     FROM forgeyard.queue_slots") +
            (generations ? " UNION ALL SELECT g.tenant_id, g.queue, g.admitted_messages, g.admitted_bytes"
                           " FROM forgeyard.queue_admit_deltas g JOIN forgeyard.queue_slots s"
                           " ON s.tenant_id = g.tenant_id AND s.queue = g.queue AND s.slot = g.slot"
                           " AND s.admit_gen = g.gen"
                         : "") +
            ") x GROUP BY 1, 2),"
            " r AS (SELECT tenant_id, queue, sum(released_messages) AS m, sum(released_bytes) AS b"
            "         FROM (SELECT tenant_id, queue, released_messages, released_bytes FROM forgeyard.queue_releases"
            "               UNION ALL SELECT tenant_id, queue, released_messages, released_bytes"
            "                 FROM forgeyard.queue_release_deltas) x GROUP BY 1, 2),"
            " p AS (SELECT tenant_id, queue, count(*) AS m, sum(bytes) AS b FROM forgeyard.messages"
            "         WHERE state = 'pending' GROUP BY 1, 2)"
            " SELECT q.tenant_id, q.queue,"
            "  (coalesce(a.m, 0) - coalesce(r.m, 0))::int8, (coalesce(a.b, 0) - coalesce(r.b, 0))::int8,"
            "  coalesce(p.m, 0)::int8, coalesce(p.b, 0)::int8"
            " FROM forgeyard.queues q LEFT JOIN a USING (tenant_id, queue) LEFT JOIN r USING (tenant_id, queue)"
            " LEFT JOIN p USING (tenant_id, queue)"
            " WHERE coalesce(a.m, 0) - coalesce(r.m, 0) <> coalesce(p.m, 0)"
            "    OR coalesce(a.b, 0) - coalesce(r.b, 0) <> coalesce(p.b, 0)");
    for (int i = 0; i < r.rows(); ++i)
      finding("queue_counters", "queue " + r.text(i, 1) + " of tenant " + r.text(i, 0) + " counts " + r.text(i, 2) +
                                    " messages / " + r.text(i, 3) + " bytes, its pending rows are " + r.text(i, 4) +
                                    " / " + r.text(i, 5));
    // A key's row counts the pending messages of its partition_key (partition-ordered queues) or
    // of its fairness_key (max_in_flight_per_key), and of a limited key its heads.
    PgResult parts =
        query(conn,
              "SELECT p.tenant_id, p.queue, p.partition_key, p.pending, coalesce(n.n, 0)::int8, p.heads,"
              "   coalesce(n.h, 0)::int8"
              " FROM forgeyard.queue_partitions p JOIN forgeyard.queues q USING (tenant_id, queue)"
              " LEFT JOIN (SELECT m.tenant_id, m.queue,"
              "     CASE WHEN q.ordering = 'partition' THEN m.partition_key ELSE m.fairness_key END AS partition_key,"
              "     count(*) AS n, count(*) FILTER (WHERE m.is_head) AS h"
              "   FROM forgeyard.messages m JOIN forgeyard.queues q USING (tenant_id, queue)"
              "   WHERE m.state = 'pending' GROUP BY 1, 2, 3) n USING (tenant_id, queue, partition_key)"
              " WHERE p.pending <> coalesce(n.n, 0)"
              "    OR (q.ordering <> 'partition' AND p.heads <> coalesce(n.h, 0))");
    for (int i = 0; i < parts.rows(); ++i)
      finding("queue_counters", "key " + parts.text(i, 2) + " of queue " + parts.text(i, 1) + " (tenant " +
                                    parts.text(i, 0) + ") counts " + parts.text(i, 3) + " pending and " +
                                    parts.text(i, 5) + " heads, its rows are " + parts.text(i, 4) + " and " +
                                    parts.text(i, 6));
  }

  report.checks.push_back("message_states");
  {
    PgResult r = query(conn,
                       "SELECT m.msg_id, m.state FROM forgeyard.messages m"
                       " WHERE (m.state = 'pending') = (m.finished_at IS NOT NULL)"
                       " OR (m.state = 'dead' AND m.is_head)"
                       " ORDER BY m.msg_id LIMIT 100");
    for (int i = 0; i < r.rows(); ++i)
      finding("message_states",
              "message " + r.text(i, 0) + " is " + r.text(i, 1) + " but its finish time says otherwise");
  }

  report.checks.push_back("idempotency_attempts");
  {
    PgResult r = query(conn,
                       "SELECT k.tenant_id, k.scope, k.key, k.attempt, k.status FROM forgeyard.idempotency_keys k"
                       " WHERE k.attempt > (SELECT last_value FROM forgeyard.idempotency_attempts)"
                       " OR (k.status = 'completed') <> (k.completed_at IS NOT NULL) LIMIT 100");
    for (int i = 0; i < r.rows(); ++i)
      finding("idempotency_attempts", "key " + r.text(i, 2) + " in " + r.text(i, 1) + " (tenant " + r.text(i, 0) +
                                          ", attempt " + r.text(i, 3) + ", " + r.text(i, 4) +
                                          ") has no matching attempt or completion");
  }

  report.checks.push_back("workflow_journals");
  {
    PgResult gaps = query(conn,
                          "SELECT tenant_id, run_id::pg_catalog.text, count(*)::int8, max(position)::int8"
                          " FROM forgeyard.wf_journal GROUP BY 1, 2"
                          " HAVING count(*) <> max(position) OR min(position) <> 1 ORDER BY 1, 2 LIMIT 100");
    for (int i = 0; i < gaps.rows(); ++i)
      finding("workflow_journals", workflow_gap(gaps.text(i, 0), gaps.text(i, 1), gaps.int8(i, 2), gaps.int8(i, 3)));
    PgResult orphans = query(conn,
                             "SELECT DISTINCT j.tenant_id, j.run_id::pg_catalog.text FROM forgeyard.wf_journal j"
                             " WHERE NOT EXISTS (SELECT 1 FROM forgeyard.wf_runs r WHERE r.tenant_id = j.tenant_id"
                             "                     AND r.run_id = j.run_id) ORDER BY 1, 2 LIMIT 100");
    for (int i = 0; i < orphans.rows(); ++i)
      finding("workflow_journals", workflow_orphan(orphans.text(i, 0), orphans.text(i, 1)));
    PgResult runs = query(conn,
                          "SELECT r.tenant_id, r.run_id::pg_catalog.text, r.state, r.epoch FROM forgeyard.wf_runs r"
                          " WHERE r.epoch > (SELECT last_value FROM forgeyard.claim_tokens)"
                          "    OR (r.state IN ('completed', 'failed', 'cancelled', 'timed_out', 'compensation_failed'))"
                          "       <> (r.finished_at IS NOT NULL)"
                          " ORDER BY 1, 2 LIMIT 100");
    for (int i = 0; i < runs.rows(); ++i)
      finding("workflow_journals",
              workflow_inconsistent(runs.text(i, 0), runs.text(i, 1), runs.text(i, 2), runs.int8(i, 3)));
  }

  report.checks.push_back("audit_chains");
  std::vector<std::string> tenants;
  {
    PgResult r = query(conn, "SELECT tenant_id FROM forgeyard.audit_heads ORDER BY tenant_id");
    for (int i = 0; i < r.rows(); ++i) tenants.push_back(r.text(i, 0));
  }
  StoreOptions options;
  options.prepared_statements = false;
  auto store = forgeyard::open(url, options);
  verify_audit_chains(store->audit(), tenants, report);
  return report;
}

}  // namespace forgeyard::detail::ops
