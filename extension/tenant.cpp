#include "tenant.hpp"

#include "pg/args.hpp"

namespace fy {

void check_tenant(pg::Spi& spi, const std::optional<std::string>& tenant) {
  // Usually no role is bound and this reads nothing. Membership is decided by PostgreSQL's
  // cached role graph (no superuser shortcut); the forgeyard.lease_status view applies the
  // same rule in SQL.
  static pg::Statement bindings(
      "SELECT b.role_id::pg_catalog.oid, pg_catalog.bool_or(b.tenant_id OPERATOR(pg_catalog.=) $1)"
      "  FROM forgeyard.tenant_bindings b GROUP BY b.role_id",
      {TEXTOID});
  // Both the role in effect (after SET ROLE) and the login role must be allowed: a login bound
  // to a tenant cannot step out of its binding by SET ROLE to an unbound group.
  const Oid callers[] = {pg::outer_user(), pg::session_user()};
  bool bound[2] = {false, false};
  bool matching[2] = {false, false};
  spi.run(bindings, {pg::optional_text_value(tenant)}, [&](const pg::Row& row) {
    for (int i = 0; i < 2; ++i) {
      if (!pg::is_member_of(callers[i], *row.oid(1))) continue;
      bound[i] = true;
      matching[i] = matching[i] || row.boolean(2).value_or(false);
    }
  });
  if ((!bound[0] || matching[0]) && (!bound[1] || matching[1])) return;
  if (!tenant)
    throw core::Error(core::sqlstate::tenant_denied, "a role bound to tenants must name its tenant",
                      "this role is bound with forgeyard.bind_tenant; pass one of its tenants");
  throw core::Error(core::sqlstate::tenant_denied, "tenant \"" + *tenant + "\" is not allowed for this role",
                    "forgeyard.bind_tenant binds this role to other tenants");
}

}  // namespace fy
