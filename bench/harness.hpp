// Shared by the benchmarks: options, timing, reporting, and thin raw libpq / sqlite3 handles
// for the hand-written baselines (fixed here so that they cannot be tuned to lose).
#pragma once

#include <libpq-fe.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bench {

struct Config {
  int iterations = 2000;
  int threads = 1;
  std::string pg_url;
  std::string sqlite_dir;

  static Config parse(int argc, char** argv, const char* name) {
    Config c;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string a = argv[i];
      if (a == "--iterations")
        c.iterations = std::atoi(argv[i + 1]);
      else if (a == "--threads")
        c.threads = std::atoi(argv[i + 1]);
      else if (a == "--pg")
        c.pg_url = argv[i + 1];
      else if (a == "--sqlite-dir")
        c.sqlite_dir = argv[i + 1];
    }
    if (c.sqlite_dir.empty())
      c.sqlite_dir = std::filesystem::temp_directory_path() / (std::string("forgeyard-") + name);
    std::filesystem::remove_all(c.sqlite_dir);
    std::filesystem::create_directories(c.sqlite_dir);
    return c;
  }
};

// Runs work(thread, i) for `iterations` split over the threads; returns operations per second.
inline double measure(const Config& c, const std::function<void(int, int)>& work) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < c.threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = t; i < c.iterations; i += c.threads) work(t, i);
    });
  for (auto& th : pool) th.join();
  return c.iterations / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void report(const char* what, const char* backend, const Config& c, double client, double baseline) {
  std::printf("%-28s %-10s threads=%d n=%d  client %8.0f/s  baseline %8.0f/s  ratio %.2fx\n", what, backend, c.threads,
              c.iterations, client, baseline, client / baseline);
}

// A libpq connection with named prepared statements.
struct Pg {
  PGconn* conn;
  explicit Pg(const std::string& url) : conn(PQconnectdb(url.c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn));
  }
  ~Pg() { PQfinish(conn); }
  void exec(const char* sql) {
    PGresult* r = PQexec(conn, sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error(PQerrorMessage(conn));
  }
  void prepare(const char* name, const char* sql) {
    PGresult* r = PQprepare(conn, name, sql, 0, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error(PQerrorMessage(conn));
  }
  // Runs a prepared statement; returns the first value of the first row, or the row count.
  std::string run(const char* name, const std::vector<std::string>& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* r = PQexecPrepared(conn, name, static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0);
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      std::string m = PQerrorMessage(conn);
      PQclear(r);
      throw std::runtime_error(m);
    }
    std::string out = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : std::string(PQcmdTuples(r));
    PQclear(r);
    return out;
  }
};

// A sqlite3 connection in WAL with synchronous=FULL, as the shim opens them.
struct Lite {
  sqlite3* db = nullptr;
  explicit Lite(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("sqlite open " + path);
    sqlite3_busy_timeout(db, 10000);
    exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;");
  }
  ~Lite() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      std::string m = error != nullptr ? error : "sqlite error";
      sqlite3_free(error);
      throw std::runtime_error(m);
    }
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    return s;
  }
  // Steps a bound statement to the end; returns the first column of the first row, or changes().
  std::int64_t step(sqlite3_stmt* s) {
    int rc = sqlite3_step(s);
    std::int64_t out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : sqlite3_changes(db);
    while (rc == SQLITE_ROW) rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
    return out;
  }
};

inline std::int64_t now_usecs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace bench
