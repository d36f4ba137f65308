#pragma once

#include "forgeyard/idempotency.hpp"
#include "forgeyard/versioned_rows.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

// Versioned tables inside the SQLite store: the same rules as the extension, with SQLite triggers.
class SqliteVersionedRows final : public VersionedRows {
 public:
  explicit SqliteVersionedRows(SqliteSession& session) : session_(session) {}
  void enable(std::string_view table) override;
  std::int64_t update(std::string_view table, const Fields& key, std::int64_t expected, const Fields& changes) override;
  std::optional<VersionedRow> get(std::string_view table, const Fields& key, ReadClass read) override;

 private:
  SqliteSession& session_;
};

class SqliteIdempotency final : public Idempotency {
 public:
  explicit SqliteIdempotency(SqliteSession& session) : session_(session) {}
  IdempotencyBegin begin(const IdempotencyKey& key, const Bytes& request_digest, Duration lock_ttl,
                         Duration retain) override;
  void checkpoint(const IdempotencyKey& key, std::string_view recovery_point, std::int64_t attempt) override;
  void complete(const IdempotencyKey& key, const std::optional<Bytes>& response, std::int64_t attempt) override;
  void abandon(const IdempotencyKey& key, std::int64_t attempt) override;
  std::optional<IdempotencyStatus> status(const IdempotencyKey& key, ReadClass read) override;
  int purge(int max_keys, std::optional<std::string> tenant) override;

 private:
  SqliteSession& session_;
};

}  // namespace forgeyard::detail
