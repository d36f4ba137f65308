// SHA-256 (migration checksums, queue dedup digests, the audit chain) and hex. SHA-256 comes
// from OpenSSL's libcrypto (docs/architecture.md#the-shared-core).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fy::core {

std::string sha256(std::string_view data);  // 32 bytes
std::string sha256_hex(std::string_view data);
std::string to_hex(std::string_view bytes);                  // lower case
std::optional<std::string> from_hex(std::string_view text);  // nullopt unless pairs of hex digits

}  // namespace fy::core
