// One libpq connection: parameterized statements only, named (prepared once per connection)
// or unnamed (PgBouncer transaction mode), results owned by RAII handles.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <libpq-fe.h>

#include "forgeyard/error.hpp"

namespace forgeyard::detail {

// A statement of the PostgreSQL backend. `name` is unique per statement and stable.
struct PgStatement {
  const char* name;
  const char* sql;
  int param_count;
};

using PgParams = std::vector<std::optional<std::string>>;

// One statement of a pipeline (PgConnection::pipeline).
struct PgCall {
  const PgStatement* statement;
  PgParams params;
};

// A timestamptz column read back as microseconds since 1970 (an int8), so that nothing depends
// on DateStyle or TimeZone: "SELECT " FY_USECS("expires_at") " FROM ...".
#define FY_USECS(expr) "(EXTRACT(epoch FROM " expr ") * 1000000)::pg_catalog.int8"

// The version and the edition of forgeyard in the database, as SQL expressions every released
// catalog answers (NULL: not installed). The extension's version is pg_extension's (the C++
// edition, or the PL/pgSQL edition through pg_tle); a plain install of the PL/pgSQL edition is no
// extension and answers forgeyard.version(). forgeyard.edition() exists since 0.8.0 (before it,
// only the C++ edition did). A function that may be missing, or that the caller may not run, is
// called through query_to_xml, which plans its query only when the CASE reaches it.
#define FY_CALL_IF_ALLOWED(fn)                            \
  "CASE WHEN pg_catalog.to_regprocedure('forgeyard." fn   \
  "()') IS NOT NULL"                                      \
  " AND pg_catalog.has_function_privilege('forgeyard." fn \
  "()', 'EXECUTE') THEN (pg_catalog.xpath("               \
  "'/row/v/text()', pg_catalog.query_to_xml('SELECT forgeyard." fn "() AS v', false, true, '')))[1]::text END"
#define FY_INSTALLED_VERSION                                                                             \
  "coalesce((SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) " \
  "'forgeyard'), " FY_CALL_IF_ALLOWED("version") ")"
#define FY_INSTALLED_EDITION                                                                                           \
  "CASE WHEN pg_catalog.to_regprocedure('forgeyard.edition()') IS NULL AND EXISTS (SELECT FROM "                       \
  "pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'forgeyard') THEN 'cpp' ELSE " FY_CALL_IF_ALLOWED( \
      "edition") " END"

// A bytea parameter in text format: "\x" and two hex digits per byte.
std::string bytea_param(std::string_view bytes);
// A PostgreSQL array literal of text elements (NULL for nullopt), every element quoted.
std::string array_param(const std::vector<std::optional<std::string>>& elements);

class PgResult {
 public:
  explicit PgResult(PGresult* r) : result_(r, &PQclear) {}
  int rows() const { return PQntuples(result_.get()); }
  bool is_null(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  // Values read back are checked: a missing or malformed one is Corruption, never a default.
  std::string text(int row, int col) const;
  std::int64_t int8(int row, int col) const;
  bool boolean(int row, int col) const;
  // bytea in text format ("\x0a1b...") decoded to its bytes.
  std::string bytea(int row, int col) const;

 private:
  const char* value(int row, int col) const;
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

class PgConnection {
 public:
  PgConnection(const std::string& url, bool prepared_statements);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  PgResult exec(const PgStatement& statement, const PgParams& params);
  // Several statements in one round trip (libpq pipeline mode), their results in order. With
  // `transaction`, wrapped in BEGIN ... COMMIT on the wire, so all or nothing (a connection lost
  // once the COMMIT was sent is CommitUnknown); without it, inside the caller's open transaction.
  // The first statement that fails throws its error, and those after it are not run.
  std::vector<PgResult> pipeline(const std::vector<PgCall>& calls, bool transaction);
  // A command without parameters (BEGIN, ROLLBACK).
  void command(const char* sql);
  // A script of one or more statements without parameters (an application's migration file):
  // the simple query protocol, inside the caller's transaction if one is open.
  void script(const std::string& sql);
  // COMMIT; a connection lost while it was in flight is CommitUnknown.
  void commit();
  // Healthy and outside any transaction: safe to hand to the next caller.
  bool reusable() const;
  PGTransactionStatusType transaction_status() const { return PQtransactionStatus(conn_); }
  // ROLLBACK whose failure is left to reusable() (the pool then closes the connection); never throws.
  void rollback_quietly() noexcept;
  // Whether this connection is encrypted (storage doctor).
  bool ssl_in_use() const { return PQsslInUse(conn_) != 0; }

 private:
  [[noreturn]] void fail(PGresult* result, bool committing);
  // Prepares a named statement once per connection (with prepared statements on).
  void prepare(const PgStatement& statement);
  // Queues one statement on the pipeline (PQsendQuery*), and pushes what libpq buffered. With
  // `committing`, a connection lost meanwhile is CommitUnknown.
  void send(const char* sql, const PgStatement* statement, const PgParams* params, bool committing = false);
  // Writes what libpq buffered, reading whatever the server sends meanwhile (no deadlock when
  // both sides' buffers fill: the pattern libpq's documentation asks of pipeline mode).
  void flush(bool committing = false);
  PGconn* conn_;
  bool prepared_statements_;
  std::unordered_set<const PgStatement*> prepared_;
};

}  // namespace forgeyard::detail
