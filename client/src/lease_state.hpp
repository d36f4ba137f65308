#pragma once

#include <string>

#include "forgeyard/leases.hpp"

namespace forgeyard::detail {

// The state names both backends store or compute; an unknown one is Corruption.
LeaseState parse_lease_state(const std::string& s);

}  // namespace forgeyard::detail
