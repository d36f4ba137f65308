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

// SHA-256 of data that arrives in parts (a backup file read in blocks).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  std::string hex();  // ends the digest

 private:
  void* context_;  // EVP_MD_CTX
};

}  // namespace fy::core
