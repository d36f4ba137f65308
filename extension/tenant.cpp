#include "tenant.hpp"

#include <map>
#include <utility>
#include <vector>

#include "pg/args.hpp"
#include "pg/table_cache.hpp"

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
  // The bindings per tenant argument are cached in this backend (pg/table_cache.hpp: dropped
  // when forgeyard.tenant_bindings changes); membership is decided at each call.
  static std::map<std::optional<std::string>, std::vector<std::pair<Oid, bool>>> cache;
  static std::uint64_t cache_generation = 0;
  constexpr std::size_t max_cached = 4096;
  pg::accept_invalidations();
  const std::uint64_t generation = pg::cache_generation(pg::CachedTable::tenant_bindings);
  if (generation != cache_generation) {
    cache.clear();
    cache_generation = generation;
  }
  std::vector<std::pair<Oid, bool>> read;
  const std::vector<std::pair<Oid, bool>>* rows = nullptr;
  if (auto it = cache.find(tenant); it != cache.end()) {
    rows = &it->second;
  } else {
    spi.run(bindings, {pg::optional_text_value(tenant)},
            [&](const pg::Row& row) { read.emplace_back(*row.oid(1), row.boolean(2).value_or(false)); });
    rows = &read;
    // Kept only if no invalidation came in while the rows were read.
    if (pg::cache_generation(pg::CachedTable::tenant_bindings) == cache_generation) {
      if (cache.size() >= max_cached) cache.clear();
      rows = &cache.emplace(tenant, read).first->second;
    }
  }
  for (const auto& [role, matches] : *rows) {
    for (int i = 0; i < 2; ++i) {
      if (!pg::is_member_of(callers[i], role)) continue;
      bound[i] = true;
      matching[i] = matching[i] || matches;
    }
  }
  if ((!bound[0] || matching[0]) && (!bound[1] || matching[1])) return;
  if (!tenant)
    throw core::Error(core::sqlstate::tenant_denied, "a role bound to tenants must name its tenant",
                      "this role is bound with forgeyard.bind_tenant; pass one of its tenants");
  throw core::Error(core::sqlstate::tenant_denied, "tenant \"" + *tenant + "\" is not allowed for this role",
                    "forgeyard.bind_tenant binds this role to other tenants");
}

}  // namespace fy
