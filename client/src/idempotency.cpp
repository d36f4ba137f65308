#include "forgeyard/idempotency.hpp"

#include "core/core.hpp"

namespace forgeyard {

Bytes request_digest(std::string_view request) {
  return fy::core::sha256_hex(request);
}

}  // namespace forgeyard
