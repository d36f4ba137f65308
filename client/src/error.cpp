// The one mapping from SQLSTATE to error kind (docs/errors.md is the same table).
#include "forgeyard/error.hpp"

#include <sqlite3.h>

#include "core/flow.hpp"
#include "error_map.hpp"

namespace forgeyard {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::StaleFence:
      return "StaleFence";
    case ErrorKind::Conflict:
      return "Conflict";
    case ErrorKind::InProgress:
      return "InProgress";
    case ErrorKind::IdempotencyMismatch:
      return "IdempotencyMismatch";
    case ErrorKind::QueueFull:
      return "QueueFull";
    case ErrorKind::PayloadTooLarge:
      return "PayloadTooLarge";
    case ErrorKind::AppendOnly:
      return "AppendOnly";
    case ErrorKind::TenantDenied:
      return "TenantDenied";
    case ErrorKind::SchemaUnsupported:
      return "SchemaUnsupported";
    case ErrorKind::Nondeterminism:
      return "Nondeterminism";
    case ErrorKind::InvalidArgument:
      return "InvalidArgument";
    case ErrorKind::NotFound:
      return "NotFound";
    case ErrorKind::PermissionDenied:
      return "PermissionDenied";
    case ErrorKind::SerializationFailure:
      return "SerializationFailure";
    case ErrorKind::Unavailable:
      return "Unavailable";
    case ErrorKind::Timeout:
      return "Timeout";
    case ErrorKind::CommitUnknown:
      return "CommitUnknown";
    case ErrorKind::Corruption:
      return "Corruption";
    case ErrorKind::Internal:
      return "Internal";
  }
  return "Internal";
}

bool is_retryable(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::SerializationFailure:
    case ErrorKind::Unavailable:
    case ErrorKind::InProgress:
    case ErrorKind::QueueFull:
      return true;
    default:
      return false;
  }
}

ErrorKind kind_for_sqlstate(std::string_view s) noexcept {
  struct Exact {
    std::string_view code;
    ErrorKind kind;
  };
  static constexpr Exact exact[] = {
      {"FY001", ErrorKind::StaleFence},
      {"FY002", ErrorKind::Conflict},
      {"FY010", ErrorKind::InProgress},
      {"FY011", ErrorKind::IdempotencyMismatch},
      {"FY020", ErrorKind::QueueFull},
      {"FY021", ErrorKind::PayloadTooLarge},
      {"FY030", ErrorKind::AppendOnly},
      {"FY040", ErrorKind::TenantDenied},
      {"FY050", ErrorKind::SchemaUnsupported},
      {"FY060", ErrorKind::Nondeterminism},
      {"42704", ErrorKind::NotFound},
      {"42P01", ErrorKind::NotFound},
      {"42703", ErrorKind::InvalidArgument},
      {"42710", ErrorKind::InvalidArgument},
      {"P0002", ErrorKind::NotFound},
      {"42501", ErrorKind::PermissionDenied},
      {"40001", ErrorKind::SerializationFailure},
      {"40P01", ErrorKind::SerializationFailure},
      {"57014", ErrorKind::Timeout},
      {"XX001", ErrorKind::Corruption},
      {"XX002", ErrorKind::Corruption},
  };
  for (const Exact& e : exact)
    if (e.code == s) return e.kind;
  if (s.size() == 5 && s.substr(0, 2) == "22") return ErrorKind::InvalidArgument;
  if (s.size() == 5 && s.substr(0, 2) == "08") return ErrorKind::Unavailable;
  if (s.size() == 5 && s.substr(0, 4) == "57P0") return ErrorKind::Unavailable;
  return ErrorKind::Internal;
}

Error::Error(ErrorKind kind, std::string sqlstate, const std::string& message, std::string detail)
    : std::runtime_error(message), kind_(kind), sqlstate_(std::move(sqlstate)), detail_(std::move(detail)) {
  if (kind_ == ErrorKind::QueueFull)
    if (const auto ms = fy::core::flow::retry_after_ms(detail_)) retry_after_ = std::chrono::milliseconds(*ms);
}

Error::Error(const std::string& sqlstate, const std::string& message, std::string detail)
    : Error(kind_for_sqlstate(sqlstate), sqlstate, message, std::move(detail)) {}

namespace detail {

Error sqlite_error(int code, const std::string& message) {
  // The shim's triggers raise "forgeyard:SQLSTATE:message" (SQLite's RAISE takes a literal only).
  if ((code & 0xff) == SQLITE_CONSTRAINT && message.rfind("forgeyard:", 0) == 0 && message.size() > 16 &&
      message[15] == ':')
    return Error(message.substr(10, 5), message.substr(16));
  // SQLite has no SQLSTATEs; each result code gets the PostgreSQL code of the same meaning.
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:  // another writer held the lock past the busy timeout; nothing was done
      return Error(ErrorKind::SerializationFailure, "40001", message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Error(ErrorKind::Corruption, "XX001", message);
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOLFS:
    case SQLITE_PROTOCOL:
      return Error(ErrorKind::Unavailable, "58030", message);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Error(ErrorKind::PermissionDenied, "42501", message);
    case SQLITE_INTERRUPT:
      return Error(ErrorKind::Timeout, "57014", message);
    default:
      return Error(ErrorKind::Internal, "XX000", message);
  }
}

}  // namespace detail
}  // namespace forgeyard
