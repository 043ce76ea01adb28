//===- Sha256.cpp - SHA-256 through OpenSSL -------------------------------===//

#include "compiler/support/Sha256.h"

#include "llvm/ADT/StringExtras.h"

#include <openssl/evp.h>

namespace kiln::support {

Sha256::Sha256() : context(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(context), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(context)); }

void Sha256::update(llvm::StringRef bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(context), bytes.data(),
                   bytes.size());
}

Digest Sha256::final() {
  Digest digest{};
  unsigned int size = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(context), digest.data(), &size);
  return digest;
}

Digest sha256(llvm::StringRef bytes) {
  Digest digest{};
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(),
             nullptr);
  return digest;
}

std::string toHex(const Digest &digest) {
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest), /*LowerCase=*/true);
}

std::string sha256Hex(llvm::StringRef bytes) { return toHex(sha256(bytes)); }

} // namespace kiln::support
