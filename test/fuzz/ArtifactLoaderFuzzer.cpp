//===- ArtifactLoaderFuzzer.cpp - libFuzzer target for the .kneff loader --===//
//
// Arbitrary bytes through the validating reader, and when they pass, through
// the simulator: a corrupt or hostile artifact must end in an error, never a
// crash or an out-of-bounds access (the target runs under ASan). The checksum
// would stop nearly every mutation at the door, so the fuzzer re-signs its
// input first: what is exercised is the validation behind the checksum.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/Artifact.h"
#include "runtime/sim/Simulator.h"

#include "llvm/Support/SHA256.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.size() >= kiln::artifact::kHeaderBytes) {
    llvm::SHA256 sha;
    sha.update(llvm::StringRef(bytes).drop_front(kiln::artifact::kHeaderBytes));
    auto hash = sha.final();
    std::memcpy(bytes.data() + 72, hash.data(), 32);
  }
  auto artifact = kiln::artifact::readArtifact(bytes, "fuzz");
  if (!artifact) {
    llvm::consumeError(artifact.takeError());
    return 0;
  }
  // Programs that load also run; inputs are left unset or zeroed.
  kiln::sim::SimOptions options;
  kiln::sim::Simulator simulator(*artifact, options);
  for (const kiln::kneff::Buffer &b : artifact->manifest.buffers()) {
    if (b.role() == kiln::kneff::INPUT || b.role() == kiln::kneff::INOUT) {
      int64_t n =
          kiln::isa::dtypeBytes(static_cast<kiln::isa::DType>(b.dtype()));
      for (int64_t d : b.shape()) {
        n *= d;
      }
      if (n > (int64_t(1) << 24)) {
        return 0;
      }
      llvm::consumeError(simulator.setBuffer(b.name(), std::string(n, '\0')));
    }
  }
  auto result = simulator.run();
  if (!result) {
    llvm::consumeError(result.takeError());
  }
  return 0;
}
