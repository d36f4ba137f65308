#include "postgres/connection.hpp"

#include <poll.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/core.hpp"
#include "forgeyard/version.hpp"
#include "instruments.hpp"

namespace forgeyard::detail {

namespace {
[[noreturn]] void corrupt(const char* what) {
  throw Error(ErrorKind::Corruption, "XX000", std::string("invalid value read back from PostgreSQL: ") + what);
}
}  // namespace

const char* PgResult::value(int row, int col) const {
  if (row >= rows() || col >= PQnfields(result_.get()) || PQgetisnull(result_.get(), row, col))
    corrupt("missing column value");
  return PQgetvalue(result_.get(), row, col);
}

std::string PgResult::text(int row, int col) const {
  return value(row, col);
}

std::int64_t PgResult::int8(int row, int col) const {
  const char* s = value(row, col);
  std::int64_t v = 0;
  const char* end = s + std::strlen(s);
  auto [p, ec] = std::from_chars(s, end, v);
  if (ec != std::errc() || p != end) corrupt("not a bigint");
  return v;
}

bool PgResult::boolean(int row, int col) const {
  const char* s = value(row, col);
  if (std::strcmp(s, "t") == 0) return true;
  if (std::strcmp(s, "f") == 0) return false;
  corrupt("not a boolean");
}

std::string PgResult::bytea(int row, int col) const {
  const std::string_view s = value(row, col);
  std::optional<std::string> bytes = s.starts_with("\\x") ? fy::core::from_hex(s.substr(2)) : std::nullopt;
  if (!bytes) corrupt("not a hex bytea");
  return *bytes;
}

std::string array_param(const std::vector<std::optional<std::string>>& elements) {
  std::string out = "{";
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!elements[i]) {
      out += "NULL";
      continue;
    }
    out.push_back('"');
    for (char c : *elements[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string bytea_param(std::string_view bytes) {
  return "\\x" + fy::core::to_hex(bytes);
}

PgConnection::PgConnection(const std::string& url, bool prepared_statements)
    : prepared_statements_(prepared_statements) {
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* values[] = {url.c_str(), "forgeyard", nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (conn_ == nullptr) throw Error(ErrorKind::Unavailable, "08001", "out of memory connecting to PostgreSQL");
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn_);
    PQfinish(conn_);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    throw Error(ErrorKind::Unavailable, "08001", "cannot connect to " + redact(url) + ": " + message);
  }
}

PgConnection::~PgConnection() {
  PQfinish(conn_);
}

void PgConnection::rollback_quietly() noexcept {
  PGresult* r = PQexec(conn_, "ROLLBACK");
  if (r != nullptr) PQclear(r);
}

bool PgConnection::reusable() const {
  return PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

void PgConnection::fail(PGresult* result, bool committing) {
  PgResult owned(result);
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = result != nullptr ? PQresultErrorMessage(result) : "";
  if (const char* primary = result != nullptr ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr)
    message = primary;
  if (message.empty()) message = PQerrorMessage(conn_);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (state == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    // No SQLSTATE from the server: the connection broke under the request.
    if (committing)
      throw Error(ErrorKind::CommitUnknown, "08006", "connection lost during COMMIT; outcome unknown: " + message);
    throw Error(ErrorKind::Unavailable, state != nullptr ? state : "08006", message);
  }
  const char* detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
  // A function or table of forgeyard's that the database lacks: forgeyard there is older than
  // this client (or missing). Say which upgrade to run; the SQLSTATE stays the server's.
  const std::string code = state;
  if ((code == "42883" || code == "42P01") && message.find("forgeyard.") != std::string::npos)
    message += " (this client is forgeyard " + std::string(version()) +
               ": upgrade the database's forgeyard to it, with `forgeyard storage install` or ALTER EXTENSION "
               "forgeyard UPDATE)";
  throw Error(state, message, detail != nullptr ? detail : "");
}

PgResult PgConnection::exec(const PgStatement& statement, const PgParams& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  const int n = static_cast<int>(values.size());
  PGresult* r = nullptr;
  if (prepared_statements_) {
    prepare(statement);
    r = PQexecPrepared(conn_, statement.name, n, values.data(), nullptr, nullptr, 0);
  } else {
    r = PQexecParams(conn_, statement.sql, n, nullptr, values.data(), nullptr, nullptr, 0);
  }
  if (r == nullptr || (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)) fail(r, false);
  return PgResult(r);
}

void PgConnection::prepare(const PgStatement& statement) {
  if (!prepared_statements_ || prepared_.contains(&statement)) return;
  PGresult* prepared = PQprepare(conn_, statement.name, statement.sql, statement.param_count, nullptr);
  if (prepared == nullptr || PQresultStatus(prepared) != PGRES_COMMAND_OK) fail(prepared, false);
  PQclear(prepared);
  prepared_.insert(&statement);
}

void PgConnection::flush(bool committing) {
  for (;;) {
    const int pending = PQflush(conn_);
    if (pending == 0) return;
    if (pending < 0) fail(nullptr, committing);
    pollfd fd{PQsocket(conn_), POLLIN | POLLOUT, 0};
    if (poll(&fd, 1, -1) < 0 && errno != EINTR) fail(nullptr, committing);
    if ((fd.revents & POLLIN) != 0 && PQconsumeInput(conn_) == 0) fail(nullptr, committing);
  }
}

void PgConnection::send(const char* sql, const PgStatement* statement, const PgParams* params, bool committing) {
  std::vector<const char*> values;
  if (params != nullptr)
    for (const auto& p : *params) values.push_back(p ? p->c_str() : nullptr);
  const int n = static_cast<int>(values.size());
  const int sent = statement != nullptr && prepared_statements_
                       ? PQsendQueryPrepared(conn_, statement->name, n, values.data(), nullptr, nullptr, 0)
                       : PQsendQueryParams(conn_, sql, n, nullptr, values.data(), nullptr, nullptr, 0);
  if (sent == 0) fail(nullptr, committing);
  flush(committing);
}

std::vector<PgResult> PgConnection::pipeline(const std::vector<PgCall>& calls, bool transaction) {
  for (const PgCall& c : calls) prepare(*c.statement);
  if (PQenterPipelineMode(conn_) == 0 || PQsetnonblocking(conn_, 1) != 0) fail(nullptr, false);
  // Whatever happens below, the connection leaves pipeline mode, or the pool closes it.
  struct Leave {
    PGconn* conn;
    ~Leave() {
      PQsetnonblocking(conn, 0);
      PQexitPipelineMode(conn);
    }
  } leave{conn_};
  if (transaction) send("BEGIN", nullptr, nullptr);
  for (const PgCall& c : calls) send(c.statement->sql, c.statement, &c.params);
  // From here a broken connection leaves the outcome unknown: the COMMIT may have arrived.
  if (transaction) send("COMMIT", nullptr, nullptr, true);
  if (PQpipelineSync(conn_) == 0) fail(nullptr, transaction);
  flush(transaction);
  PQsetnonblocking(conn_, 0);

  // One result per statement, each followed by a null, then the sync's. After a failed statement,
  // the rest answer PGRES_PIPELINE_ABORTED. Two nulls in a row: nothing more is coming.
  const std::size_t expected = calls.size() + (transaction ? 2 : 0);
  std::vector<PgResult> answered;
  PGresult* error = nullptr;
  for (int nulls = 0; nulls < 2;) {
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) {
      if (PQstatus(conn_) != CONNECTION_OK) break;
      ++nulls;
      continue;
    }
    nulls = 0;
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (error == nullptr && (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK))
      answered.emplace_back(r);
    else if (error == nullptr && status != PGRES_PIPELINE_ABORTED)
      error = r;
    else
      PQclear(r);
  }
  // A server's error has a SQLSTATE and is definite (nothing committed). Without one the
  // connection broke under the pipeline: with the COMMIT sent, its answers (and the COMMIT's) may
  // have been lost after the server carried them out.
  const bool server_error = error != nullptr && PQresultErrorField(error, PG_DIAG_SQLSTATE) != nullptr;
  if (server_error) fail(error, false);
  if (error != nullptr || answered.size() != expected) fail(error, transaction);
  if (transaction) {
    answered.erase(answered.begin());
    answered.pop_back();
  }
  return answered;
}

void PgConnection::command(const char* sql) {
  PGresult* r = PQexec(conn_, sql);
  if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK) fail(r, false);
  PQclear(r);
}

void PgConnection::script(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  const ExecStatusType status = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY) fail(r, false);
  PQclear(r);
}

void PgConnection::commit() {
  PGresult* r = PQexec(conn_, "COMMIT");
  if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK) fail(r, true);
  // COMMIT of a transaction that already failed answers ROLLBACK without an error.
  const bool rolled_back = std::strcmp(PQcmdStatus(r), "ROLLBACK") == 0;
  PQclear(r);
  if (rolled_back)
    throw Error(ErrorKind::Internal, "25P02", "the transaction had failed and was rolled back, not committed");
}

}  // namespace forgeyard::detail
