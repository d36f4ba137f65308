// Tenant scoping: a role bound to tenants (forgeyard.bind_tenant) may act only for them.
#pragma once

#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy {

// FY040 unless the calling role may act for `tenant`. A nullopt tenant means "all tenants",
// which only an unbound role may ask for.
void check_tenant(pg::Spi& spi, const std::optional<std::string>& tenant);

}  // namespace fy
