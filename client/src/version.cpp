// FORGEYARD_VERSION is defined for this file only, by CMakeLists.txt from the VERSION file.
#include "forgeyard/version.hpp"

namespace forgeyard {

std::string_view version() noexcept {
  return FORGEYARD_VERSION;
}

}  // namespace forgeyard
