// Lease acquire + renew + release through the client, against a hand-written baseline of the
// same work: INSERT ... ON CONFLICT DO UPDATE ... WHERE expired, then two UPDATEs, on a plain
// table with the same key, over raw libpq / raw sqlite3. Same run, same machine; prints ratios.
//
// usage: lease_bench [--iterations N] [--threads T] [--pg URL] [--sqlite-dir DIR]
#include "forgeyard/forgeyard.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using bench::Config;
using bench::measure;

void report(const char* backend, const Config& c, double client, double baseline) {
  bench::report("lease acquire+renew+release", backend, c, client, baseline);
}

// ---- the client ----------------------------------------------------------------------------

double run_client(const Config& c, forgeyard::Store& store) {
  return measure(c, [&](int t, int i) {
    const std::string resource = "bench/" + std::to_string(i % 512);
    auto& leases = store.leases();
    auto g = leases.acquire("bench", resource, "worker-" + std::to_string(t), 30s);
    if (!g.acquired) throw std::runtime_error("client: not acquired (resource reused concurrently?)");
    leases.renew("bench", resource, g.epoch, 30s);
    if (!leases.release("bench", resource, g.epoch)) throw std::runtime_error("client: release failed");
  });
}

// ---- PostgreSQL baseline ---------------------------------------------------------------------

const char* pg_schema =
    "DROP TABLE IF EXISTS bench_baseline_leases;"
    "CREATE TABLE bench_baseline_leases (tenant_id text NOT NULL, resource text NOT NULL, owner text NOT NULL,"
    " epoch bigint NOT NULL, expires_at timestamptz NOT NULL, released boolean NOT NULL DEFAULT false,"
    " PRIMARY KEY (tenant_id, resource)) WITH (fillfactor = 70)";
const char* pg_acquire =
    "INSERT INTO bench_baseline_leases AS l (tenant_id, resource, owner, epoch, expires_at)"
    " VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval)"
    " ON CONFLICT (tenant_id, resource) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,"
    "   expires_at = excluded.expires_at, released = false"
    " WHERE l.released OR l.expires_at <= clock_timestamp() RETURNING epoch";
const char* pg_renew =
    "UPDATE bench_baseline_leases SET expires_at = clock_timestamp() + $4::interval"
    " WHERE tenant_id = $1 AND resource = $2 AND epoch = $3 AND NOT released AND expires_at > clock_timestamp()";
const char* pg_release =
    "UPDATE bench_baseline_leases SET released = true"
    " WHERE tenant_id = $1 AND resource = $2 AND epoch = $3 AND NOT released AND expires_at > clock_timestamp()";

struct PgConn {
  PGconn* conn;
  explicit PgConn(const std::string& url) : conn(PQconnectdb(url.c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn));
    prepare("acquire", pg_acquire, 4);
    prepare("renew", pg_renew, 4);
    prepare("release", pg_release, 3);
  }
  ~PgConn() { PQfinish(conn); }
  void prepare(const char* name, const char* sql, int n) {
    PGresult* r = PQprepare(conn, name, sql, n, nullptr);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) throw std::runtime_error(PQerrorMessage(conn));
    PQclear(r);
  }
  std::string exec(const char* name, std::vector<const char*> params, bool want_row) {
    PGresult* r = PQexecPrepared(conn, name, static_cast<int>(params.size()), params.data(), nullptr, nullptr, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      std::string m = PQerrorMessage(conn);
      PQclear(r);
      throw std::runtime_error(m);
    }
    std::string out = want_row && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : std::string(PQcmdTuples(r));
    PQclear(r);
    return out;
  }
};

double run_pg_baseline(const Config& c) {
  {
    PGconn* setup = PQconnectdb(c.pg_url.c_str());
    PGresult* r = PQexec(setup, pg_schema);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) throw std::runtime_error(PQerrorMessage(setup));
    PQclear(r);
    PQfinish(setup);
  }
  std::vector<std::unique_ptr<PgConn>> conns;
  for (int t = 0; t < c.threads; ++t) conns.push_back(std::make_unique<PgConn>(c.pg_url));
  return measure(c, [&](int t, int i) {
    const std::string resource = "bench/" + std::to_string(i % 512), owner = "worker-" + std::to_string(t);
    PgConn& pc = *conns[t];
    std::string epoch = pc.exec("acquire", {"bench", resource.c_str(), owner.c_str(), "30 seconds"}, true);
    if (epoch.empty()) throw std::runtime_error("baseline: not acquired");
    pc.exec("renew", {"bench", resource.c_str(), epoch.c_str(), "30 seconds"}, false);
    if (pc.exec("release", {"bench", resource.c_str(), epoch.c_str()}, false) != "1")
      throw std::runtime_error("baseline: release failed");
  });
}

// ---- SQLite baseline -------------------------------------------------------------------------

struct Lite {
  sqlite3* db = nullptr;
  sqlite3_stmt *acquire = nullptr, *renew = nullptr, *release = nullptr;
  explicit Lite(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("sqlite open");
    sqlite3_busy_timeout(db, 10000);
    exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;");
    exec(
        "CREATE TABLE IF NOT EXISTS baseline_leases (tenant_id TEXT NOT NULL, resource TEXT NOT NULL,"
        " owner TEXT NOT NULL, epoch INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
        " released INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tenant_id, resource)) STRICT, WITHOUT ROWID");
    prepare(
        &acquire,
        "INSERT INTO baseline_leases AS l (tenant_id, resource, owner, epoch, expires_at) VALUES (?1, ?2, ?3, 1, ?4 + ?5)"
        " ON CONFLICT (tenant_id, resource) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,"
        " expires_at = excluded.expires_at, released = 0 WHERE l.released OR l.expires_at <= ?4 RETURNING epoch");
    prepare(&renew,
            "UPDATE baseline_leases SET expires_at = ?4 + ?5 WHERE tenant_id = ?1 AND resource = ?2 AND epoch = ?3"
            " AND NOT released AND expires_at > ?4");
    prepare(&release,
            "UPDATE baseline_leases SET released = 1 WHERE tenant_id = ?1 AND resource = ?2 AND epoch = ?3"
            " AND NOT released AND expires_at > ?4");
  }
  ~Lite() {
    sqlite3_finalize(acquire);
    sqlite3_finalize(renew);
    sqlite3_finalize(release);
    sqlite3_close(db);
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
  }
  void prepare(sqlite3_stmt** s, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, s, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
  }
  // Each statement in its own BEGIN IMMEDIATE transaction, as the client does.
  std::int64_t step(sqlite3_stmt* s, const std::string& resource, const std::string& owner, std::int64_t epoch) {
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    exec("BEGIN IMMEDIATE");
    sqlite3_bind_text(s, 1, "bench", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, resource.c_str(), -1, SQLITE_TRANSIENT);
    if (s == acquire)
      sqlite3_bind_text(s, 3, owner.c_str(), -1, SQLITE_TRANSIENT);
    else
      sqlite3_bind_int64(s, 3, epoch);
    sqlite3_bind_int64(s, 4, now);
    sqlite3_bind_int64(s, 5, 30'000'000);
    int rc = sqlite3_step(s);
    std::int64_t out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : sqlite3_changes(db);
    while (rc == SQLITE_ROW) rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
    exec("COMMIT");
    return out;
  }
};

double run_sqlite_baseline(const Config& c, const std::string& path) {
  std::vector<std::unique_ptr<Lite>> conns;
  for (int t = 0; t < c.threads; ++t) conns.push_back(std::make_unique<Lite>(path));
  return measure(c, [&](int t, int i) {
    const std::string resource = "bench/" + std::to_string(i % 512), owner = "worker-" + std::to_string(t);
    Lite& l = *conns[t];
    std::int64_t epoch = l.step(l.acquire, resource, owner, 0);
    l.step(l.renew, resource, owner, epoch);
    if (l.step(l.release, resource, owner, epoch) != 1) throw std::runtime_error("baseline: release failed");
  });
}

}  // namespace

int main(int argc, char** argv) {
  Config c = Config::parse(argc, argv, "lease-bench");
  try {
    std::printf("lease acquire+renew+release: client vs hand-written SQL baseline (higher ratio is better)\n");
    {
      forgeyard::StoreOptions o;
      o.pool.max_connections = c.threads;
      auto store = forgeyard::open("sqlite://" + c.sqlite_dir + "/client.db", o);
      run_client(c, *store);  // warm-up
      double baseline = run_sqlite_baseline(c, c.sqlite_dir + "/baseline.db");
      double client = run_client(c, *store);
      report("sqlite", c, client, baseline);
    }
    if (!c.pg_url.empty()) {
      forgeyard::StoreOptions o;
      o.pool.max_connections = c.threads;
      auto store = forgeyard::open(c.pg_url, o);
      run_client(c, *store);  // warm-up
      run_pg_baseline(c);
      double baseline = run_pg_baseline(c);
      double client = run_client(c, *store);
      report("postgresql", c, client, baseline);
      const auto m = store->metrics();
      std::printf("           pool: created %llu, acquired %llu, waited %llu\n",
                  static_cast<unsigned long long>(m.pool.created), static_cast<unsigned long long>(m.pool.acquired),
                  static_cast<unsigned long long>(m.pool.waited));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lease_bench: %s\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(c.sqlite_dir);
  return 0;
}
