#pragma once

#include "forgeyard/idempotency.hpp"
#include "forgeyard/versioned_rows.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

class PgVersionedRows final : public VersionedRows {
 public:
  explicit PgVersionedRows(PgSession& session) : session_(session) {}
  void enable(std::string_view table) override;
  std::int64_t update(std::string_view table, const Fields& key, std::int64_t expected, const Fields& changes) override;
  std::optional<VersionedRow> get(std::string_view table, const Fields& key, ReadClass read) override;

 private:
  PgSession& session_;
};

class PgIdempotency final : public Idempotency {
 public:
  explicit PgIdempotency(PgSession& session) : session_(session) {}
  IdempotencyBegin begin(const IdempotencyKey& key, const Bytes& request_digest, Duration lock_ttl,
                         Duration retain) override;
  void checkpoint(const IdempotencyKey& key, std::string_view recovery_point, std::int64_t attempt) override;
  void complete(const IdempotencyKey& key, const std::optional<Bytes>& response, std::int64_t attempt) override;
  void abandon(const IdempotencyKey& key, std::int64_t attempt) override;
  std::optional<IdempotencyStatus> status(const IdempotencyKey& key, ReadClass read) override;
  int purge(int max_keys, std::optional<std::string> tenant) override;

 private:
  PgSession& session_;
};

}  // namespace forgeyard::detail
