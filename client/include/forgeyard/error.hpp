// The one exception type of the client: an error kind callers can act on, plus the SQLSTATE,
// message and detail it came from. docs/errors.md is the table; error.cpp is its only mapping.
#pragma once

#include "forgeyard/export.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace forgeyard {

enum class ErrorKind {
  StaleFence,            // FY001: lease or claim token is not the live grant: stop work
  Conflict,              // FY002: version conflict: re-read, then decide
  InProgress,            // FY010: idempotency key in progress elsewhere: later
  IdempotencyMismatch,   // FY011: same key, different request: never
  QueueFull,             // FY020: backpressure: later, with backoff
  PayloadTooLarge,       // FY021: store bytes elsewhere, send a reference
  AppendOnly,            // FY030
  TenantDenied,          // FY040
  SchemaUnsupported,     // FY050: event type or version not registered: never
  Nondeterminism,        // FY060: a workflow no longer replays its journal: park the run, never retry
  InvalidArgument,       // 22004, 22001, 22023, other class 22 and bad client input
  NotFound,              // 42704, P0002
  PermissionDenied,      // 42501
  SerializationFailure,  // 40001, 40P01: retry, bounded
  Unavailable,           // 08xxx, 57P0x, SQLite cannot open / I/O error: retry if idempotent
  Timeout,               // 57014, pool acquire timeout
  CommitUnknown,         // connection lost while a commit was in flight: reconcile, never retry blindly
  Corruption,            // XX001, XX002, SQLite corrupt, an invalid value read back
  Internal,              // anything else (XX000, unexpected states)
};

FORGEYARD_API std::string_view to_string(ErrorKind kind) noexcept;

// Whether the kind may be retried automatically (bounded, with jitter). Unavailable is retried
// only for idempotent operations, a decision the retry helper leaves to its caller.
FORGEYARD_API bool is_retryable(ErrorKind kind) noexcept;

// The kind for a SQLSTATE (five characters).
FORGEYARD_API ErrorKind kind_for_sqlstate(std::string_view sqlstate) noexcept;

class FORGEYARD_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string sqlstate, const std::string& message, std::string detail = {});
  // The kind follows from the SQLSTATE.
  Error(const std::string& sqlstate, const std::string& message, std::string detail = {});

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  const std::string& detail() const noexcept { return detail_; }
  bool retryable() const noexcept { return is_retryable(kind_); }
  // QueueFull from an admission limit: how long until the queue admits again (its DETAIL ends in
  // "retry after <n> ms"); nullopt for every other error.
  std::optional<std::chrono::milliseconds> retry_after() const noexcept { return retry_after_; }

 private:
  ErrorKind kind_;
  std::string sqlstate_;
  std::string detail_;
  std::optional<std::chrono::milliseconds> retry_after_;
};

}  // namespace forgeyard
