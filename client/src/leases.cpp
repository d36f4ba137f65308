#include "forgeyard/leases.hpp"

namespace forgeyard {

std::string_view to_string(LeaseState state) noexcept {
  switch (state) {
    case LeaseState::Live: return "live";
    case LeaseState::Expired: return "expired";
    case LeaseState::Reaped: return "reaped";
    case LeaseState::Released: return "released";
  }
  return "live";
}

}  // namespace forgeyard
