#include "tenant.hpp"

#include "pg/args.hpp"

namespace fy {

void check_tenant(pg::Spi& spi, const std::optional<std::string>& tenant) {
  static pg::Statement bindings(
      // The roles the caller is a member of, directly or not, itself included (no superuser
      // shortcut); the forgeyard.lease_status view applies the same rule.
      "WITH RECURSIVE member_of(oid) AS ("
      "  SELECT $1::pg_catalog.oid"
      "  UNION SELECT m.roleid FROM pg_catalog.pg_auth_members m"
      "        JOIN member_of ON m.member OPERATOR(pg_catalog.=) member_of.oid)"
      "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE b.tenant_id OPERATOR(pg_catalog.=) $2)"
      "  FROM forgeyard.tenant_bindings b"
      " WHERE b.role_id::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (SELECT oid FROM member_of)",
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
