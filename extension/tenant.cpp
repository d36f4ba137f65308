#include "tenant.hpp"

#include "pg/args.hpp"

namespace fy {

void check_tenant(pg::Spi& spi, const std::optional<std::string>& tenant) {
  static pg::Statement bindings(
      "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE b.tenant_id OPERATOR(pg_catalog.=) $2)"
      "  FROM forgeyard.tenant_bindings b WHERE b.role_id OPERATOR(pg_catalog.=) $1",
      {OIDOID, TEXTOID});
  std::int64_t bound = 0;
  std::int64_t matching = 0;
  spi.run(bindings, {pg::oid_value(pg::outer_user()), pg::optional_text_value(tenant)},
          [&](const pg::Row& row) {
            bound = row.int8(1).value_or(0);
            matching = row.int8(2).value_or(0);
          });
  if (bound == 0 || matching > 0) return;
  if (!tenant)
    throw core::Error(core::sqlstate::tenant_denied,
                      "a role bound to tenants must name its tenant",
                      "this role is bound with forgeyard.bind_tenant; pass one of its tenants");
  throw core::Error(core::sqlstate::tenant_denied, "tenant \"" + *tenant + "\" is not allowed for this role",
                    "forgeyard.bind_tenant binds this role to other tenants");
}

}  // namespace fy
