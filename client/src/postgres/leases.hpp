#pragma once

#include "forgeyard/leases.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

class PgLeases final : public Leases {
 public:
  explicit PgLeases(PgSession& session) : session_(session) {}
  LeaseGrant acquire(std::string_view tenant, std::string_view resource, std::string_view owner, Duration ttl) override;
  TimePoint renew(std::string_view tenant, std::string_view resource, std::int64_t epoch, Duration ttl) override;
  bool release(std::string_view tenant, std::string_view resource, std::int64_t epoch) override;
  void fence(std::string_view tenant, std::string_view resource, std::int64_t epoch) override;
  std::optional<LeaseInfo> get(std::string_view tenant, std::string_view resource, ReadClass read) override;
  std::vector<ReapedLease> reap(int max_leases, std::optional<std::string> tenant) override;

 private:
  PgSession& session_;
};

}  // namespace forgeyard::detail
