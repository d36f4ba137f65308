#include "core/digest.hpp"

#include <openssl/evp.h>

#include "core/core.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

std::string sha256(std::string_view data) {
  // Fetched once: OpenSSL 3 looks EVP_sha256() up in its provider store on every use, which cost
  // more than hashing a small payload (a fifth of an enqueue with an event_id).
  static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const EVP_MD* algorithm = fetched != nullptr ? fetched : EVP_sha256();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // Fails only when libcrypto cannot allocate its context or finds no SHA-256 provider.
  if (EVP_Digest(data.data(), data.size(), md, &size, algorithm, nullptr) != 1 || size != 32)
    throw Error(sqlstate::internal_error, "SHA-256 failed in libcrypto");
  return std::string(reinterpret_cast<const char*>(md), size);
}

std::string sha256_hex(std::string_view data) {
  return to_hex(sha256(data));
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

std::optional<std::string> from_hex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); i += 2) {
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (context_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
    throw Error(sqlstate::internal_error, "SHA-256 failed in libcrypto");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
}

void Sha256::update(std::string_view data) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data.data(), data.size()) != 1)
    throw Error(sqlstate::internal_error, "SHA-256 failed in libcrypto");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), md, &size) != 1 || size != 32)
    throw Error(sqlstate::internal_error, "SHA-256 failed in libcrypto");
  return to_hex(std::string_view(reinterpret_cast<const char*>(md), size));
}

}  // namespace fy::core
