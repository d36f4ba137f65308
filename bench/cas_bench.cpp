// cas_update through the client against a plain "UPDATE ... WHERE entity_version = $n" on an
// unversioned copy of the table, in the same run; and idempotency begin+complete against
// "INSERT ... ON CONFLICT DO NOTHING" + "UPDATE". Prints the ratios.
//
// usage: cas_bench [--iterations N] [--threads T] [--pg URL] [--sqlite-dir DIR]
#include <map>
#include <mutex>

#include "forgeyard/forgeyard.hpp"
#include "harness.hpp"

namespace {

using namespace bench;
constexpr int rows = 512;

// Each thread owns rows t, t + threads, ...: it knows their versions without reading.
struct Versions {
  std::vector<std::int64_t> of = std::vector<std::int64_t>(rows, 1);
};

double client_cas(const Config& c, forgeyard::Store& store, const std::string& table, Versions& v) {
  return measure(c, [&](int, int i) {
    const int id = i % rows;
    forgeyard::Fields key{{"tenant_id", std::string("bench")}, {"id", std::int64_t{id}}};
    v.of[id] = store.versioned_rows().update(table, key, v.of[id], {{"value", std::int64_t{i}}});
  });
}

double client_idempotency(const Config& c, forgeyard::Store& store, int round) {
  const forgeyard::Bytes digest = forgeyard::request_digest("bench request");
  return measure(c, [&](int, int i) {
    forgeyard::IdempotencyKey key{"bench", "bench.op", std::to_string(round) + "/" + std::to_string(i)};
    auto b = store.idempotency().begin(key, digest);
    store.idempotency().complete(key, std::string("response"), b.attempt);
  });
}

void run_postgres(const Config& c) {
  Pg setup(c.pg_url);
  setup.exec(
      "DROP TABLE IF EXISTS bench_cas, bench_cas_plain, bench_idem_plain;"
      "CREATE TABLE bench_cas (tenant_id text, id int, value bigint, entity_version bigint NOT NULL DEFAULT 1,"
      " PRIMARY KEY (tenant_id, id));"
      "CREATE TABLE bench_cas_plain (LIKE bench_cas INCLUDING ALL);"
      "INSERT INTO bench_cas (tenant_id, id, value) SELECT 'bench', g, 0 FROM generate_series(0, 511) g;"
      "INSERT INTO bench_cas_plain SELECT * FROM bench_cas;"
      "SELECT forgeyard.enable_versioning('bench_cas');"
      "CREATE TABLE bench_idem_plain (tenant_id text, scope text, key text, request_digest bytea, status text,"
      " response bytea, PRIMARY KEY (tenant_id, scope, key));"
      "DELETE FROM forgeyard.idempotency_keys WHERE tenant_id = 'bench'");
  std::vector<std::unique_ptr<Pg>> raw;
  for (int t = 0; t < c.threads; ++t) {
    raw.push_back(std::make_unique<Pg>(c.pg_url));
    raw.back()->prepare("cas",
                        "UPDATE bench_cas_plain SET value = $1, entity_version = $2::bigint + 1"
                        " WHERE tenant_id = 'bench' AND id = $3 AND entity_version = $2");
    raw.back()->prepare("begin",
                        "INSERT INTO bench_idem_plain (tenant_id, scope, key, request_digest, status)"
                        " VALUES ('bench', 'bench.op', $1, '\\x01', 'in_progress') ON CONFLICT DO NOTHING");
    raw.back()->prepare("complete",
                        "UPDATE bench_idem_plain SET status = 'completed', response = 'response'"
                        " WHERE tenant_id = 'bench' AND scope = 'bench.op' AND key = $1");
  }
  forgeyard::StoreOptions o;
  o.pool.max_connections = c.threads;
  auto store = forgeyard::open(c.pg_url, o);

  Versions client_versions, plain_versions;
  client_cas(c, *store, "bench_cas", client_versions);  // warm-up
  const double plain = measure(c, [&](int t, int i) {
    const int id = i % rows;
    if (raw[t]->run("cas", {std::to_string(i), std::to_string(plain_versions.of[id]), std::to_string(id)}) != "1")
      throw std::runtime_error("baseline cas missed");
    ++plain_versions.of[id];
  });
  report("cas_update", "postgresql", c, client_cas(c, *store, "bench_cas", client_versions), plain);

  client_idempotency(c, *store, 0);  // warm-up
  const double plain_idem = measure(c, [&](int t, int i) {
    const std::string key = std::to_string(i);
    raw[t]->run("begin", {key});
    raw[t]->run("complete", {key});
  });
  report("idempotency begin+complete", "postgresql", c, client_idempotency(c, *store, 1), plain_idem);
}

void run_sqlite(const Config& c) {
  const std::string path = c.sqlite_dir + "/store.db";
  forgeyard::StoreOptions o;
  o.pool.max_connections = c.threads;
  auto store = forgeyard::open("sqlite://" + path, o);
  {
    Lite setup(path);
    setup.exec(
        "CREATE TABLE bench_cas (tenant_id TEXT NOT NULL, id INTEGER NOT NULL, value INTEGER,"
        " entity_version INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, id));"
        "CREATE TABLE bench_cas_plain (tenant_id TEXT NOT NULL, id INTEGER NOT NULL, value INTEGER,"
        " entity_version INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, id));"
        "WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 511)"
        " INSERT INTO bench_cas (tenant_id, id, value) SELECT 'bench', n, 0 FROM g;"
        "INSERT INTO bench_cas_plain SELECT * FROM bench_cas;"
        "CREATE TABLE bench_idem_plain (tenant_id TEXT, scope TEXT, key TEXT, request_digest BLOB, status TEXT,"
        " response BLOB, PRIMARY KEY (tenant_id, scope, key)) WITHOUT ROWID;");
  }
  store->versioned_rows().enable("bench_cas");
  std::vector<std::unique_ptr<Lite>> raw;
  for (int t = 0; t < c.threads; ++t) raw.push_back(std::make_unique<Lite>(path));
  std::map<int, std::vector<sqlite3_stmt*>> stmts;
  for (int t = 0; t < c.threads; ++t)
    stmts[t] = {raw[t]->prepare("UPDATE bench_cas_plain SET value = ?1, entity_version = ?2 + 1"
                                " WHERE tenant_id = 'bench' AND id = ?3 AND entity_version = ?2"),
                raw[t]->prepare("INSERT INTO bench_idem_plain (tenant_id, scope, key, request_digest, status)"
                                " VALUES ('bench', 'bench.op', ?1, x'01', 'in_progress') ON CONFLICT DO NOTHING"),
                raw[t]->prepare("UPDATE bench_idem_plain SET status = 'completed', response = 'response'"
                                " WHERE tenant_id = 'bench' AND scope = 'bench.op' AND key = ?1")};
  // Each baseline statement in its own BEGIN IMMEDIATE transaction, as the client's calls are.
  auto in_txn = [&](int t, sqlite3_stmt* s) {
    raw[t]->exec("BEGIN IMMEDIATE");
    const std::int64_t n = raw[t]->step(s);
    raw[t]->exec("COMMIT");
    return n;
  };
  Versions client_versions, plain_versions;
  client_cas(c, *store, "bench_cas", client_versions);  // warm-up
  const double plain = measure(c, [&](int t, int i) {
    const int id = i % rows;
    sqlite3_stmt* s = stmts[t][0];
    sqlite3_bind_int64(s, 1, i);
    sqlite3_bind_int64(s, 2, plain_versions.of[id]);
    sqlite3_bind_int64(s, 3, id);
    if (in_txn(t, s) != 1) throw std::runtime_error("baseline cas missed");
    ++plain_versions.of[id];
  });
  report("cas_update", "sqlite", c, client_cas(c, *store, "bench_cas", client_versions), plain);

  client_idempotency(c, *store, 0);  // warm-up
  const double plain_idem = measure(c, [&](int t, int i) {
    const std::string key = std::to_string(i);
    for (int k : {1, 2}) {
      sqlite3_bind_text(stmts[t][k], 1, key.c_str(), -1, SQLITE_TRANSIENT);
      in_txn(t, stmts[t][k]);
    }
  });
  report("idempotency begin+complete", "sqlite", c, client_idempotency(c, *store, 1), plain_idem);
  for (auto& [t, v] : stmts)
    for (auto* s : v) sqlite3_finalize(s);
}

}  // namespace

int main(int argc, char** argv) {
  Config c = Config::parse(argc, argv, "cas-bench");
  try {
    std::printf("compare-and-set and idempotency: client vs hand-written SQL baseline (higher ratio is better)\n");
    run_sqlite(c);
    if (!c.pg_url.empty()) run_postgres(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cas_bench: %s\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(c.sqlite_dir);
  return 0;
}
