#include "sqlite/db.hpp"

#include <fcntl.h>

#include <algorithm>
#include <random>
#include <unistd.h>

#include "error_map.hpp"

namespace forgeyard::detail {

Query::~Query() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Query& Query::bind(int index, std::string_view value) {
  int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc);
  return *this;
}

Query& Query::bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc);
  return *this;
}

Query& Query::bind_null(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_.fail(rc);
  return *this;
}

Query& Query::bind_blob(int index, std::string_view bytes) {
  int rc = sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc);
  return *this;
}

Query& Query::bind_real(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc);
  return *this;
}

bool Query::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(rc);
}

int Query::run() {
  while (step()) {
  }
  return db_.changes();
}

std::int64_t Query::int64(int column) const {
  if (sqlite3_column_type(stmt_, column) != SQLITE_INTEGER)
    throw Error(ErrorKind::Corruption, sqlstate::internal_error, "invalid value read back from SQLite: not an integer");
  return sqlite3_column_int64(stmt_, column);
}

std::string Query::text(int column) const {
  if (sqlite3_column_type(stmt_, column) != SQLITE_TEXT)
    throw Error(ErrorKind::Corruption, sqlstate::internal_error, "invalid value read back from SQLite: not text");
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Query::blob(int column) const {
  if (sqlite3_column_type(stmt_, column) != SQLITE_BLOB)
    throw Error(ErrorKind::Corruption, sqlstate::internal_error, "invalid value read back from SQLite: not a blob");
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

double Query::real(int column) const {
  if (sqlite3_column_type(stmt_, column) != SQLITE_FLOAT)
    throw Error(ErrorKind::Corruption, sqlstate::internal_error, "invalid value read back from SQLite: not a real");
  return sqlite3_column_double(stmt_, column);
}

Db::Db(const std::string& path, const StoreOptions& options) : path_(path) {
  // A new store file is created owner-only: it holds every tenant's data. SQLite would create it
  // 0644 (less the umask); its -wal and -shm files take the database file's mode.
  if (path != ":memory:" && path.rfind("file:", 0) != 0) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);  // EEXIST: an existing store keeps its mode; other errors: SQLite reports them
  }
  int rc =
      sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw sqlite_error(rc, "cannot open SQLite store " + path + ": " + message);
  }
  // A constructor that throws runs no destructor: close the handle here (ASan found it leaking).
  try {
    sqlite3_extended_result_codes(db_, 1);
    busy_timeout_ms_ = static_cast<int>(options.sqlite_busy_timeout.count() / 1000);
    sqlite3_busy_timeout(db_, busy_timeout_ms_);
    const std::string& sync = options.sqlite_synchronous;
    if (sync != "FULL" && sync != "NORMAL" && sync != "EXTRA" && sync != "OFF")
      throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                  "sqlite_synchronous must be FULL, NORMAL, EXTRA or OFF");
    exec("PRAGMA journal_mode = WAL");
    exec(("PRAGMA synchronous = " + sync).c_str());
    exec("PRAGMA foreign_keys = ON");
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

Db::~Db() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  for (auto& [sql, stmt] : built_statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

void Db::exec(const char* sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string text = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    throw sqlite_error(rc, text);
  }
}

void Db::begin_immediate(std::chrono::milliseconds wait) {
  sqlite3_busy_timeout(db_, static_cast<int>(std::min<std::int64_t>(wait.count(), busy_timeout_ms_)));
  try {
    exec("BEGIN IMMEDIATE");
  } catch (...) {
    sqlite3_busy_timeout(db_, busy_timeout_ms_);
    throw;
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms_);
}

sqlite3_stmt* Db::prepare(const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) fail(rc);
  return stmt;
}

Query Db::query(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) it = statements_.emplace(sql, prepare(sql)).first;
  return Query(*this, it->second);
}

Query Db::query_text(const std::string& sql) {
  auto it = built_statements_.find(sql);
  if (it == built_statements_.end()) it = built_statements_.emplace(sql, prepare(sql.c_str())).first;
  return Query(*this, it->second);
}

void Db::fail(int rc) const {
  throw sqlite_error(rc, sqlite3_errmsg(db_));
}

std::string random_uuid() {
  std::random_device random;
  std::string b(16, '\0');
  for (int i = 0; i < 16; i += 4) {
    const std::uint32_t v = random();
    for (int k = 0; k < 4; ++k) b[i + k] = static_cast<char>((v >> (8 * k)) & 0xff);
  }
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);
  return b;
}

}  // namespace forgeyard::detail
