// A SQLite connection of the shim: WAL, busy timeout, synchronous as configured, statements
// prepared once per connection and reset after every use.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "core/errors.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {

// The shim raises the SQLSTATEs of docs/errors.md by the core's names, never as literals.
namespace sqlstate = fy::core::sqlstate;

class Db;

// One use of a cached statement; resets it when it goes out of scope.
class Query {
 public:
  Query(Db& db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Query();
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  Query& bind(int index, std::string_view value);
  Query& bind(int index, std::int64_t value);
  Query& bind_null(int index);
  Query& bind_blob(int index, std::string_view bytes);
  Query& bind_real(int index, double value);
  // Advances; true while there is a row.
  bool step();
  // Runs a statement that returns no rows; returns the rows it changed.
  int run();

  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  // Values read back are checked: a wrong type is Corruption, never a default.
  std::int64_t int64(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;
  double real(int column) const;
  int column_count() const { return sqlite3_column_count(stmt_); }
  std::string column_name(int column) const { return sqlite3_column_name(stmt_, column); }
  int column_type(int column) const { return sqlite3_column_type(stmt_, column); }

 private:
  Db& db_;
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  Db(const std::string& path, const StoreOptions& options);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const char* sql);
  // BEGIN IMMEDIATE, waiting for SQLite's write lock at most `wait` (what the caller's write turn
  // left of its busy timeout: a writer outside the turns, such as the sqlite3 shell, cannot make
  // a call wait past the timeout); the busy timeout is the store's again afterwards.
  void begin_immediate(std::chrono::milliseconds wait);
  // `sql` must be a string literal: statements are cached by its address.
  Query query(const char* sql);
  // A statement built at run time (from names checked against the schema), cached by its text.
  Query query_text(const std::string& sql);
  // No open transaction: safe to hand to the next caller.
  bool reusable() const { return sqlite3_get_autocommit(db_) != 0; }
  int changes() const { return sqlite3_changes(db_); }
  // The rowid of the last INSERT on this connection (cheaper than RETURNING, which buffers its rows).
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(int rc) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  int busy_timeout_ms_ = 0;
  std::map<const char*, sqlite3_stmt*> statements_;
  std::map<std::string, sqlite3_stmt*> built_statements_;
  sqlite3_stmt* prepare(const char* sql);
};

// The 16 bytes of a new random (version 4) UUID.
std::string random_uuid();

}  // namespace forgeyard::detail
