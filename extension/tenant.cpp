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
  const Oid caller = pg::outer_user();
  bool bound = false;
  bool matching = false;
  spi.run(bindings, {pg::optional_text_value(tenant)}, [&](const pg::Row& row) {
    if (!pg::is_member_of(caller, *row.oid(1))) return;
    bound = true;
    matching = matching || row.boolean(2).value_or(false);
  });
  if (!bound || matching) return;
  if (!tenant)
    throw core::Error(core::sqlstate::tenant_denied,
                      "a role bound to tenants must name its tenant",
                      "this role is bound with forgeyard.bind_tenant; pass one of its tenants");
  throw core::Error(core::sqlstate::tenant_denied, "tenant \"" + *tenant + "\" is not allowed for this role",
                    "forgeyard.bind_tenant binds this role to other tenants");
}

}  // namespace fy
