// What the PostgreSQL fault suites share: their environment, a libpq connection of the test's
// own (never a target of the faults), a run id and database names.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace faults {

inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0')
    throw std::runtime_error(std::string(name) + " is not set: run the suite through scripts/test.sh");
  return v;
}

// A libpq connection of the test itself (not through the proxy, not a target of the faults).
class Admin {
 public:
  // `patience`: how long exec() keeps reconnecting to a server that is away (a failover).
  explicit Admin(std::string url, std::chrono::seconds patience = std::chrono::seconds(0))
      : url_(std::move(url)), patience_(patience) {}
  ~Admin() { PQfinish(conn_); }
  // Runs `sql`; on a broken connection reconnects (once, or until `patience` ran out). Returns the
  // first value or "".
  std::string exec(const std::string& sql) {
    const auto deadline = std::chrono::steady_clock::now() + patience_;
    for (int attempt = 0; attempt < 2 || std::chrono::steady_clock::now() < deadline; ++attempt) {
      if (attempt >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
        PQfinish(conn_);
        conn_ = PQconnectdb(url_.c_str());
      }
      PGresult* r = PQexec(conn_, sql.c_str());
      const auto st = PQresultStatus(r);
      if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        std::string v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        return v;
      }
      std::string message = PQerrorMessage(conn_);
      PQclear(r);
      if (PQstatus(conn_) == CONNECTION_OK) throw std::runtime_error("admin SQL failed: " + message);
    }
    throw std::runtime_error("admin connection lost");
  }
  std::string user() { return exec("SELECT current_user"); }
  std::string db() { return exec("SELECT current_database()"); }

 private:
  std::string url_;
  std::chrono::seconds patience_;
  PGconn* conn_ = nullptr;
};

inline std::string pg_run_id() {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(rng() % 1000000000);
}

// `url` with its database replaced: postgresql://user@host/DB?params.
inline std::string with_database(const std::string& url, const std::string& db) {
  const auto slash = url.find('/', url.find("://") + 3);
  const auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + db + (query == std::string::npos ? "" : url.substr(query));
}

}  // namespace faults
