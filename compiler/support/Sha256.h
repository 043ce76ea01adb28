//===- Sha256.h - SHA-256 for graph hashes, checksums and keys --*- C++ -*-===//
//
// OpenSSL's SHA-256, which uses the SHA extensions where the host has them:
// the cache verifies every artifact it serves, and at several GB/s that costs
// well under a millisecond per megabyte (LLVM's portable SHA256 runs at a
// tenth of that).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_SUPPORT_SHA256_H
#define KILN_COMPILER_SUPPORT_SHA256_H

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <string>

namespace kiln::support {

using Digest = std::array<uint8_t, 32>;

Digest sha256(llvm::StringRef bytes);
/// Lower-case hex of sha256(bytes).
std::string sha256Hex(llvm::StringRef bytes);
std::string toHex(const Digest &digest);

/// Incremental hashing, for inputs that come in pieces.
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(llvm::StringRef bytes);
  Digest final();

private:
  void *context;
};

} // namespace kiln::support

#endif // KILN_COMPILER_SUPPORT_SHA256_H
