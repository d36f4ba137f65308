#include "forgeyard/leases.hpp"

#include "forgeyard/error.hpp"
#include "lease_state.hpp"

namespace forgeyard {

std::string_view to_string(LeaseState state) noexcept {
  switch (state) {
    case LeaseState::Live:
      return "live";
    case LeaseState::Expired:
      return "expired";
    case LeaseState::Reaped:
      return "reaped";
    case LeaseState::Released:
      return "released";
  }
  return "live";
}

namespace detail {

LeaseState parse_lease_state(const std::string& s) {
  if (s == "live") return LeaseState::Live;
  if (s == "expired") return LeaseState::Expired;
  if (s == "reaped") return LeaseState::Reaped;
  if (s == "released") return LeaseState::Released;
  throw Error(ErrorKind::Corruption, "XX000", "invalid lease state read back: " + s);
}

}  // namespace detail
}  // namespace forgeyard
