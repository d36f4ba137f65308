// Idempotency keys (docs/sql-api.md#idempotency-keys): a retried command has one effect and
// returns the first result.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "forgeyard/types.hpp"

namespace forgeyard {

// Arbitrary bytes (a request digest, a stored response).
using Bytes = std::string;

// The key of a command: `scope` names the operation and resource ("run.create:project/42").
struct IdempotencyKey {
  std::string tenant;
  std::string scope;
  std::string key;
};

struct IdempotencyBegin {
  enum class Status { Started, Replay };
  Status status = Status::Started;
  std::int64_t attempt = 1;                   // pass it back to checkpoint / complete / abandon
  std::optional<std::string> recovery_point;  // where a taken-over attempt resumes
  std::optional<Bytes> response;              // the stored response, on Replay
};

struct IdempotencyStatus {
  std::string status;  // in_progress, completed, expired
  std::int64_t attempt = 0;
  std::optional<std::string> recovery_point;
  TimePoint locked_until;
  TimePoint expires_at;
};

class FORGEYARD_API Idempotency {
 public:
  virtual ~Idempotency() = default;
  // Started: do the work (attempt N). Replay: return `response`. IdempotencyMismatch (FY011):
  // same key, another request. InProgress (FY010): a live attempt holds it; retry later.
  virtual IdempotencyBegin begin(const IdempotencyKey& key, const Bytes& request_digest,
                                 Duration lock_ttl = std::chrono::minutes(5),
                                 Duration retain = std::chrono::hours(24)) = 0;
  // StaleFence (FY001) when another attempt took the work over, or it is already completed.
  virtual void checkpoint(const IdempotencyKey& key, std::string_view recovery_point, std::int64_t attempt) = 0;
  virtual void complete(const IdempotencyKey& key, const std::optional<Bytes>& response, std::int64_t attempt) = 0;
  virtual void abandon(const IdempotencyKey& key, std::int64_t attempt) = 0;
  virtual std::optional<IdempotencyStatus> status(const IdempotencyKey& key, ReadClass read = {}) = 0;
  // Maintenance: deletes up to max_keys keys whose retention ended; returns how many.
  virtual int purge(int max_keys, std::optional<std::string> tenant = std::nullopt) = 0;
};

// A request digest: SHA-256 of the request's canonical bytes, as 64 hex characters.
FORGEYARD_API Bytes request_digest(std::string_view request);

}  // namespace forgeyard
