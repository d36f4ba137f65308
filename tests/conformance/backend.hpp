// The backend a conformance run talks to, chosen by FORGEYARD_TEST_BACKEND
// (sqlite | postgres | plpgsql: PostgreSQL with forgeyard's PL/pgSQL edition | pgbouncer:
// PostgreSQL through PgBouncer in transaction mode).
// Only the public client API is used here, so the same tests hold both backends to one contract.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "forgeyard/forgeyard.hpp"

struct pg_conn;  // libpq's PGconn

namespace conformance {

// A frozen clock that tests move by hand (both backends take it through StoreOptions::clock).
class TestClock {
 public:
  TestClock();
  forgeyard::TimePoint now() const { return forgeyard::from_unix_usecs(usecs_.load()); }
  void advance(forgeyard::Duration d) { usecs_ += d.count(); }
  void set(forgeyard::TimePoint t) { usecs_ = forgeyard::unix_usecs(t); }

 private:
  std::atomic<std::int64_t> usecs_;
};

struct Backend {
  Backend();
  ~Backend();

  bool is_postgres() const { return postgres; }
  // Another store on the same data, with its own connections (and the same test clock).
  std::unique_ptr<forgeyard::Store> open_another(int max_connections = 8) const;
  // A store on the same data that uses the real clock.
  std::unique_ptr<forgeyard::Store> open_real_clock() const;
  // Test setup outside the API under test: runs SQL on the backend's own database (libpq or
  // sqlite3), e.g. to create the application's tables.
  void exec_sql(const std::string& sql) const;
  // The same, for SQL that should fail: "" when it succeeds, else PostgreSQL's SQLSTATE or
  // SQLite's error message.
  std::string exec_sql_error(const std::string& sql) const;
  // Creates a table `name` (tenant_id, id, value, note, entity_version) and versions it through
  // the API. The DDL is the backend's; everything after it is the public API.
  void create_versioned_table(const std::string& name) const;
  // Starts the forgeyard CLI on this backend's store with `args`, its stdout into
  // `stdout_path`; returns its pid. run_cli waits for it and returns its exit code (-1 when it
  // did not exit normally).
  pid_t spawn_cli(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null") const;
  // Starts this test executable again with `args` (a child mode of main.cpp); returns its pid.
  pid_t spawn_self(const std::vector<std::string>& args) const;
  int run_cli(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null") const;
  // A store of its own, for tests of whole-store operations (restore_reconcile) that must not
  // touch other tests' state: a new database with the extension (PostgreSQL, directly, also
  // under PgBouncer) or a new file (SQLite). Returns its URL; drop_own_store removes it.
  std::string create_own_store(const std::string& name) const;
  void drop_own_store(const std::string& name) const;
  // A name unique to this test run, so runs against one database never meet.
  std::string unique(const std::string& prefix) const;
  // The same, usable as an SQL identifier without quoting.
  std::string unique_identifier(const std::string& prefix) const;

  bool postgres = false;
  bool plpgsql = false;             // PostgreSQL, the PL/pgSQL edition
  bool unnamed_statements = false;  // PgBouncer in transaction mode
  std::string url;
  std::string temp_dir;  // SQLite only
  TestClock clock;
  std::unique_ptr<forgeyard::Store> store;
  std::string tenant;
};

// The URL of another database on the same server: the path of the URL replaced.
std::string with_database(const std::string& base, const std::string& database);
// The database a postgresql:// URL names (its path).
std::string database_of(const std::string& url);
// A whole file's bytes ("" when it cannot be read).
std::string slurp(const std::string& path);

// A libpq connection of a test's own, beside the store's (a second session holding a transaction
// open, a standby's replay): closed when it goes out of scope, also when a REQUIRE fails.
class PgSession {
 public:
  explicit PgSession(const std::string& url);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  // Runs `sql` (a REQUIRE fails the test when it fails); the first row's first value, "" for none
  // or NULL.
  std::string value(const std::string& sql);
  int pid() const;

 private:
  ::pg_conn* conn_;
};

}  // namespace conformance
