#include "backend.hpp"

#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

namespace conformance {

TestClock::TestClock()
    : usecs_(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) {}

namespace {
std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0')
    throw std::runtime_error(std::string(name) + " is not set: run the suite through scripts/test.sh");
  return v;
}
}  // namespace

Backend::Backend() {
  const std::string backend = required_env("FORGEYARD_TEST_BACKEND");
  if (backend == "postgres") {
    postgres = true;
    url = required_env("FORGEYARD_TEST_PG_URL");
  } else if (backend == "plpgsql") {
    // The PL/pgSQL edition, installed by storage install as a role that is not superuser into a
    // database that never loads the forgeyard library (scripts/test.sh); the suite connects as
    // the cluster's superuser, as on the C++ edition.
    postgres = true;
    plpgsql = true;
    url = required_env("FORGEYARD_TEST_PG_PLPGSQL_URL");
  } else if (backend == "pgbouncer") {
    postgres = true;
    unnamed_statements = true;
    url = required_env("FORGEYARD_TEST_PGBOUNCER_URL");
  } else if (backend == "sqlite") {
    std::string pattern = (std::filesystem::temp_directory_path() / "forgeyard-conformance.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    temp_dir = pattern;
    url = "sqlite://" + temp_dir + "/store.db";
  } else {
    throw std::runtime_error("FORGEYARD_TEST_BACKEND must be sqlite, postgres, plpgsql or pgbouncer, not " + backend);
  }
  store = open_another();
  tenant = unique("tenant");
}

Backend::~Backend() {
  store.reset();
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir);
}

std::unique_ptr<forgeyard::Store> Backend::open_another(int max_connections) const {
  forgeyard::StoreOptions options;
  options.pool.max_connections = max_connections;
  options.clock = [this] { return clock.now(); };
  options.prepared_statements = !unnamed_statements;
  return forgeyard::open(url, options);
}

std::unique_ptr<forgeyard::Store> Backend::open_real_clock() const {
  forgeyard::StoreOptions options;
  options.prepared_statements = !unnamed_statements;
  return forgeyard::open(url, options);
}

std::string with_database(const std::string& base, const std::string& database) {
  const auto scheme = base.find("://");
  const auto path = base.find('/', scheme + 3);
  const auto query = base.find('?', path);
  return base.substr(0, path + 1) + database + (query == std::string::npos ? "" : base.substr(query));
}

std::string database_of(const std::string& url) {
  const auto scheme = url.find("://");
  const auto path = url.find('/', scheme + 3);
  const auto query = url.find('?', path);
  return url.substr(path + 1, query == std::string::npos ? std::string::npos : query - path - 1);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

PgSession::PgSession(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
  BOOST_REQUIRE_MESSAGE(PQstatus(conn_) == CONNECTION_OK, PQerrorMessage(conn_));
}

PgSession::~PgSession() {
  PQfinish(conn_);
}

std::string PgSession::value(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  std::string v = ok && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  BOOST_TEST_REQUIRE(ok, sql << ": " << PQerrorMessage(conn_));
  return v;
}

int PgSession::pid() const {
  return PQbackendPID(conn_);
}

namespace {
void run_pg(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  std::string message = ok ? "" : PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  if (!ok) throw std::runtime_error("setup SQL failed: " + message);
}
}  // namespace

std::string Backend::create_own_store(const std::string& name) const {
  if (!postgres) return "sqlite://" + temp_dir + "/" + name + ".db";
  const std::string server = required_env("FORGEYARD_TEST_PG_URL");
  if (plpgsql) {
    // As the suite's own database was made: owned by the installing role, which is not superuser.
    const std::string owner = required_env("FORGEYARD_TEST_PG_PLPGSQL_OWNER");
    run_pg(server, "CREATE DATABASE " + name + " OWNER " + owner);
    const std::string own = with_database(server, name);
    forgeyard::InstallOptions options;
    options.edition = forgeyard::Edition::Plpgsql;
    const auto at = own.find("://") + 3;
    forgeyard::install_store(own.substr(0, at) + owner + own.substr(own.find('@', at)), options);
    return own;
  }
  run_pg(server, "CREATE DATABASE " + name);
  const std::string own = with_database(server, name);
  run_pg(own, "CREATE EXTENSION forgeyard");
  return own;
}

void Backend::drop_own_store(const std::string& name) const {
  if (!postgres) return;  // the temp directory goes with the fixture
  run_pg(required_env("FORGEYARD_TEST_PG_URL"), "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
}

void Backend::exec_sql(const std::string& sql) const {
  if (postgres) {
    PGconn* conn = PQconnectdb(url.c_str());
    PGresult* r = PQexec(conn, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    std::string message = ok ? "" : PQerrorMessage(conn);
    PQclear(r);
    PQfinish(conn);
    if (!ok) throw std::runtime_error("setup SQL failed: " + message);
    return;
  }
  sqlite3* db = nullptr;
  sqlite3_open(url.substr(9).c_str(), &db);
  sqlite3_busy_timeout(db, 10000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("setup SQL failed: " + message);
}

std::string Backend::exec_sql_error(const std::string& sql) const {
  if (postgres) {
    PGconn* conn = PQconnectdb(url.c_str());
    PGresult* r = PQexec(conn, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    std::string error = ok ? "" : (state != nullptr ? state : "?????");
    PQclear(r);
    PQfinish(conn);
    return error;
  }
  sqlite3* db = nullptr;
  sqlite3_open(url.substr(9).c_str(), &db);
  sqlite3_busy_timeout(db, 10000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = rc == SQLITE_OK ? "" : (error != nullptr ? error : "error");
  sqlite3_free(error);
  sqlite3_close(db);
  return message;
}

void Backend::create_versioned_table(const std::string& name) const {
  const std::string version = postgres ? "bigint NOT NULL DEFAULT 1" : "INTEGER NOT NULL DEFAULT 1";
  const std::string integer = postgres ? "bigint" : "INTEGER";
  exec_sql("CREATE TABLE " + name + " (tenant_id text NOT NULL, id " + integer + " NOT NULL, value " + integer +
           " NOT NULL DEFAULT 0, note text, entity_version " + version + ", PRIMARY KEY (tenant_id, id))");
  store->versioned_rows().enable(name);
}

namespace {

// Runs `program` with `args` (args[0] is its name) in a child, its stdout into `stdout_path`
// when given; returns the child's pid.
pid_t spawn(const char* program, std::vector<std::string> args, const std::string& stdout_path) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!stdout_path.empty()) dup2(::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    execv(program, argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

pid_t Backend::spawn_cli(const std::vector<std::string>& args, const std::string& stdout_path) const {
  std::vector<std::string> all{"forgeyard", "--store", url};
  if (unnamed_statements) all.push_back("--unnamed-statements");
  all.insert(all.end(), args.begin(), args.end());
  return spawn(FORGEYARD_CLI, std::move(all), stdout_path);
}

pid_t Backend::spawn_self(const std::vector<std::string>& args) const {
  std::vector<std::string> all{"conformance_tests"};
  all.insert(all.end(), args.begin(), args.end());
  return spawn("/proc/self/exe", std::move(all), "");
}

int Backend::run_cli(const std::vector<std::string>& args, const std::string& stdout_path) const {
  int status = 0;
  waitpid(spawn_cli(args, stdout_path), &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Backend::unique(const std::string& prefix) const {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(rng() % 1000000000);
}

std::string Backend::unique_identifier(const std::string& prefix) const {
  std::string name = unique(prefix);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

}  // namespace conformance
