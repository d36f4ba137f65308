// audit append through the client against a plain INSERT of the same row into a similar table
// (no chain: a bigserial/rowid key and constant hashes), in the same run: one tenant from one
// thread, one tenant from 8 threads (appends of a tenant serialize on its head), and 8 tenants
// from 8 threads. Then verify speed in events/s, in the store and offline on an export.
//
// usage: audit_bench [--iterations N] [--pg URL] [--sqlite-dir DIR]
#include <sstream>

#include "forgeyard/forgeyard.hpp"
#include "harness.hpp"

namespace {

using namespace bench;

const std::string details = R"({"order":42,"from":"pending","to":"paid","amount":"12.50"})";
const std::string hash_hex = std::string(64, 'a');

forgeyard::AuditEvent event(int i) {
  forgeyard::AuditEvent e;
  e.actor = "bench";
  e.action = "order.paid";
  e.resource = "order/" + std::to_string(i);
  e.details = details;
  return e;
}

struct Case {
  const char* name;
  int threads;
  int tenants;
};
constexpr Case cases[] = {{"append, 1 tenant", 1, 1}, {"append, 1 tenant", 8, 1}, {"append, 8 tenants", 8, 8}};

std::string tenant_of(const std::string& run, const Case& k, int i) {
  return run + "-" + std::to_string(i % k.tenants);
}

double client_append(const Config& base, const Case& k, forgeyard::Store& store, const std::string& run) {
  Config c = base;
  c.threads = k.threads;
  return measure(c, [&](int, int i) { store.audit().append(tenant_of(run, k, i), event(i)); });
}

// Verifies the longest chain in the store and offline from its export; prints events/s.
void verify_speed(forgeyard::Store& store, const std::string& tenant, const char* backend) {
  const std::int64_t n = store.audit().head(tenant).seq;
  auto start = std::chrono::steady_clock::now();
  const auto v = store.audit().verify(tenant);
  const double in_store = n / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!v.ok || v.checked != n) throw std::runtime_error("the benchmark chain does not verify");
  std::string exported;
  for (std::int64_t from = 1; from <= n; from += 10000)
    for (const auto& r : store.audit().read(tenant, from, 10000)) exported += forgeyard::audit_export_line(r) + "\n";
  start = std::chrono::steady_clock::now();
  std::istringstream in(exported);
  const auto offline = forgeyard::verify_audit_export(in);
  const double off = n / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!offline.ok) throw std::runtime_error("the exported benchmark chain does not verify");
  std::printf("%-28s %-10s events=%lld  in the store %8.0f events/s  offline %8.0f events/s\n", "verify", backend,
              static_cast<long long>(n), in_store, off);
}

void run_postgres(const Config& c) {
  Pg setup(c.pg_url);
  setup.exec(
      "DROP TABLE IF EXISTS bench_audit_plain;"
      "CREATE TABLE bench_audit_plain (tenant_id text NOT NULL, id bigserial, event_id uuid NOT NULL,"
      " occurred_at timestamptz NOT NULL, recorded_at timestamptz NOT NULL, actor text NOT NULL, action text NOT NULL,"
      " resource text NOT NULL, details jsonb, payload_digest bytea, payload_ref text, prev_hash bytea NOT NULL,"
      " hash bytea NOT NULL, PRIMARY KEY (tenant_id, id), UNIQUE (tenant_id, event_id))");
  std::vector<std::unique_ptr<Pg>> raw;
  for (int t = 0; t < 8; ++t) {
    raw.push_back(std::make_unique<Pg>(c.pg_url));
    raw.back()->prepare(
        "insert",
        "INSERT INTO bench_audit_plain (tenant_id, event_id, occurred_at, recorded_at, actor, action,"
        " resource, details, prev_hash, hash) VALUES ($1, gen_random_uuid(), clock_timestamp(),"
        " clock_timestamp(), 'bench', 'order.paid', $2, $3::jsonb, decode($4, 'hex'), decode($4, 'hex'))");
  }
  forgeyard::StoreOptions o;
  o.pool.max_connections = 8;
  auto store = forgeyard::open(c.pg_url, o);
  const std::string run = "bench-" + std::to_string(now_usecs());
  client_append(c, cases[0], *store, run + "-warm");
  int round = 0;
  for (const Case& k : cases) {
    Config ck = c;
    ck.threads = k.threads;
    const std::string r = run + "-" + std::to_string(round++);
    const double plain = measure(ck, [&](int t, int i) {
      raw[t]->run("insert", {tenant_of(r, k, i), "order/" + std::to_string(i), details, hash_hex});
    });
    const double client = client_append(c, k, *store, r);
    std::printf("%-28s %-10s threads=%d tenants=%d n=%d  client %8.0f/s  baseline %8.0f/s  ratio %.2fx\n", k.name,
                "postgresql", k.threads, k.tenants, c.iterations, client, plain, client / plain);
  }
  verify_speed(*store, run + "-0-0", "postgresql");
}

void run_sqlite(const Config& c) {
  const std::string path = c.sqlite_dir + "/store.db";
  forgeyard::StoreOptions o;
  o.pool.max_connections = 8;
  auto store = forgeyard::open("sqlite://" + path, o);
  {
    Lite setup(path);
    setup.exec(
        "CREATE TABLE bench_audit_plain (tenant_id TEXT NOT NULL, id INTEGER PRIMARY KEY, event_id BLOB NOT NULL,"
        " occurred_at INTEGER NOT NULL, recorded_at INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,"
        " resource TEXT NOT NULL, details TEXT, payload_digest BLOB, payload_ref TEXT, prev_hash BLOB NOT NULL,"
        " hash BLOB NOT NULL, UNIQUE (tenant_id, event_id)) STRICT");
  }
  std::vector<std::unique_ptr<Lite>> raw;
  std::vector<sqlite3_stmt*> insert;
  for (int t = 0; t < 8; ++t) {
    raw.push_back(std::make_unique<Lite>(path));
    insert.push_back(raw.back()->prepare(
        "INSERT INTO bench_audit_plain (tenant_id, event_id, occurred_at, recorded_at, actor, action, resource,"
        " details, prev_hash, hash) VALUES (?1, randomblob(16), ?2, ?2, 'bench', 'order.paid', ?3, ?4,"
        " zeroblob(32), zeroblob(32))"));
  }
  const std::string run = "bench";
  client_append(c, cases[0], *store, run + "-warm");
  int round = 0;
  for (const Case& k : cases) {
    Config ck = c;
    ck.threads = k.threads;
    const std::string r = run + "-" + std::to_string(round++);
    // Each baseline INSERT in its own BEGIN IMMEDIATE transaction, as the client's calls are.
    const double plain = measure(ck, [&](int t, int i) {
      const std::string tenant = tenant_of(r, k, i), resource = "order/" + std::to_string(i);
      sqlite3_stmt* s = insert[t];
      sqlite3_bind_text(s, 1, tenant.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(s, 2, now_usecs());
      sqlite3_bind_text(s, 3, resource.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(s, 4, details.c_str(), -1, SQLITE_TRANSIENT);
      raw[t]->exec("BEGIN IMMEDIATE");
      raw[t]->step(s);
      raw[t]->exec("COMMIT");
    });
    const double client = client_append(c, k, *store, r);
    std::printf("%-28s %-10s threads=%d tenants=%d n=%d  client %8.0f/s  baseline %8.0f/s  ratio %.2fx\n", k.name,
                "sqlite", k.threads, k.tenants, c.iterations, client, plain, client / plain);
  }
  verify_speed(*store, run + "-0-0", "sqlite");
  for (auto* s : insert) sqlite3_finalize(s);
}

}  // namespace

int main(int argc, char** argv) {
  Config c = Config::parse(argc, argv, "audit-bench");
  try {
    std::printf("audit: client append vs plain INSERT (higher ratio is better); verify speed\n");
    run_sqlite(c);
    if (!c.pg_url.empty()) run_postgres(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "audit_bench: %s\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(c.sqlite_dir);
  return 0;
}
