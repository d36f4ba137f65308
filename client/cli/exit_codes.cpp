// The CLI's exit codes (docs/errors.md, "CLI exit codes").
#include "exit_codes.hpp"

namespace forgeyard::cli {

namespace {
constexpr ExitCode table[] = {
    {exit_done, "done"},
    {exit_no, "answered no (also: a chain that does not verify)"},
    {exit_usage, "usage error"},
    {exit_stale, "stale fence or version conflict"},
    {exit_refused, "refused (invalid input, not found, denied, ...)"},
    {exit_later, "unavailable, timed out, in progress elsewhere or full: retry later"},
};
}  // namespace

std::span<const ExitCode> exit_codes() noexcept {
  return table;
}

int exit_code_for(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::StaleFence:
    case ErrorKind::Conflict:
      return exit_stale;
    // Worth the same command again later: a full queue (FY020) and a key in progress elsewhere
    // (FY010) are backpressure, the rest are the store's state (docs/errors.md, retry rules).
    case ErrorKind::QueueFull:
    case ErrorKind::InProgress:
    case ErrorKind::Unavailable:
    case ErrorKind::Timeout:
    case ErrorKind::SerializationFailure:
    case ErrorKind::CommitUnknown:
      return exit_later;
    case ErrorKind::IdempotencyMismatch:
    case ErrorKind::PayloadTooLarge:
    case ErrorKind::AppendOnly:
    case ErrorKind::TenantDenied:
    case ErrorKind::SchemaUnsupported:
    case ErrorKind::Nondeterminism:
    case ErrorKind::InvalidArgument:
    case ErrorKind::NotFound:
    case ErrorKind::PermissionDenied:
    case ErrorKind::Corruption:
    case ErrorKind::Internal:
      return exit_refused;
  }
  return exit_refused;
}

}  // namespace forgeyard::cli
