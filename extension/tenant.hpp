// Tenant scoping: a role bound to tenants (forgeyard.bind_tenant) may act only for them.
// Bindings follow role membership: a member of a bound group role is bound too, and may act
// for the union of the tenants bound to the roles it is a member of (itself included). The login
// (session) role is checked as well as the role in effect, so SET ROLE cannot leave a binding.
#pragma once

#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy {

// FY040 unless the calling role may act for `tenant`. A nullopt tenant means "all tenants",
// which only an unbound role may ask for.
void check_tenant(pg::Spi& spi, const std::optional<std::string>& tenant);

}  // namespace fy
