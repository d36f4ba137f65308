#pragma once

#include "forgeyard/leases.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

// The same rules as the extension's lease functions, decided by the same core code.
class SqliteLeases final : public Leases {
 public:
  explicit SqliteLeases(SqliteSession& session) : session_(session) {}
  LeaseGrant acquire(std::string_view tenant, std::string_view resource, std::string_view owner, Duration ttl) override;
  TimePoint renew(std::string_view tenant, std::string_view resource, std::int64_t epoch, Duration ttl) override;
  bool release(std::string_view tenant, std::string_view resource, std::int64_t epoch) override;
  void fence(std::string_view tenant, std::string_view resource, std::int64_t epoch) override;
  std::optional<LeaseInfo> get(std::string_view tenant, std::string_view resource, ReadClass read) override;
  std::vector<ReapedLease> reap(int max_leases, std::optional<std::string> tenant) override;

 private:
  SqliteSession& session_;
};

}  // namespace forgeyard::detail
