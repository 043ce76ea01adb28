//===- CompileOptions.h - what a compile is asked to do ---------*- C++ -*-===//
//
// Every option that changes an artifact's bytes lives here, so that the cache
// key can write each one out, defaults included: a key that left out a
// default would silently change meaning when the default does.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DRIVER_COMPILEOPTIONS_H
#define KILN_COMPILER_DRIVER_COMPILEOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct CompileOptions {
  std::string target = "trn1";
  int optLevel = 2;
  /// "none", or "bf16": matmul inputs cast to bf16 with f32 accumulation.
  std::string autoCast = "none";
  /// Workers of the data-parallel group; only graphs with collectives are
  /// compiled differently for different sizes.
  int worldSize = 1;
  /// The largest bucket of gradients one all-reduce averages (data-parallel
  /// compiles only). 16 MiB: on trn1 a ring all-reduce of 4 workers pays
  /// 60 us of hop latency, which one of 16 MiB about matches in transfer
  /// time (smaller buckets are mostly latency; PyTorch's DDP takes 25 MB).
  int64_t bucketBytes = 16 << 20;
  /// SBUF bytes per partition the memory plan may use (0: the target's).
  /// Lowering it forces spills: for testing, and for finding how a step
  /// behaves with less on-chip memory.
  int64_t sbufBytes = 0;

  /// name=value for every option, in a fixed order, defaults written out.
  std::vector<std::pair<std::string, std::string>> keyFields() const;
  /// The flags that parse() turns back into these options, defaults
  /// included (what a collected graph's sidecar records).
  std::vector<std::string> toFlags() const;

  /// Parses command-line style flags (`--target trn2`, `-O1`,
  /// `--auto-cast=bf16`, `--world-size 4`,
  /// `--bucket-bytes 1048576`, `--sbuf-bytes 65536`) on top of `base`.
  static llvm::Expected<CompileOptions> parse(llvm::ArrayRef<std::string> flags,
                                              CompileOptions base);
  static llvm::Expected<CompileOptions>
  parse(llvm::ArrayRef<std::string> flags);
  /// Flags from the KILN_CC_FLAGS environment variable (space separated).
  static llvm::Expected<CompileOptions> fromEnvironment(CompileOptions base);
};

} // namespace kiln

#endif // KILN_COMPILER_DRIVER_COMPILEOPTIONS_H
