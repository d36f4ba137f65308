#pragma once

#include "forgeyard/audit.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

class SqliteAudit final : public Audit {
 public:
  explicit SqliteAudit(SqliteSession& session) : session_(session) {}
  AuditHead append(std::string_view tenant, const AuditEvent& event) override;
  std::vector<AuditHead> append_batch(std::string_view tenant, const std::vector<AuditEvent>& events) override;
  AuditHead head(std::string_view tenant, ReadClass read) override;
  AuditVerification verify(std::string_view tenant, std::int64_t from_seq, std::optional<std::int64_t> to_seq,
                           std::optional<AuditHead> anchor, ReadClass read) override;
  std::vector<AuditRecord> read(std::string_view tenant, std::int64_t from_seq, int max_events,
                                ReadClass read_class) override;

 private:
  SqliteSession& session_;
};

}  // namespace forgeyard::detail
