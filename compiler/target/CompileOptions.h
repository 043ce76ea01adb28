//===- CompileOptions.h - what a compile is asked to do ---------*- C++ -*-===//
//
// Every option that changes an artifact's bytes lives here, so that the cache
// key can write each one out, defaults included: a key that left out a
// default would silently change meaning when the default does.
//
// Each option is declared once, in the table compileOptionTable() returns:
// its flag, help, how it is keyed, and how its value is read and written.
// Parsing, the flags a collected graph records, the cache key's fields and
// the help of `kiln compile` all come from that table, so a new option is a
// member of CompileOptions and one row of the table.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_COMPILEOPTIONS_H
#define KILN_COMPILER_TARGET_COMPILEOPTIONS_H

#include "llvm/ADT/ArrayRef.h"
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
  /// Workers of the tensor-parallel group (isa::CollectiveGroup): a job of
  /// worldSize * tensorParallel workers, tensor-parallel groups innermost.
  int tensorParallel = 1;
  /// The largest bucket of gradients one all-reduce averages (data-parallel
  /// compiles only). 16 MiB: on trn1 a ring all-reduce of 4 workers pays
  /// 60 us of hop latency, which one of 16 MiB about matches in transfer
  /// time (smaller buckets are mostly latency; PyTorch's DDP takes 25 MB).
  int64_t bucketBytes = 16 << 20;
  /// 1: ZeRO-1, each worker holds and updates 1/world-size of the optimizer
  /// state (data-parallel compiles only); 0: every worker holds all of it.
  int zeroStage = 0;
  /// SBUF bytes per partition the memory plan may use (0: the target's).
  /// Lowering it forces spills: for testing, and for finding how a step
  /// behaves with less on-chip memory.
  int64_t sbufBytes = 0;
  /// HBM bytes the memory plan may use (0: the target's): room kept for
  /// what else shares the device, or a smaller budget for testing.
  int64_t hbmBytes = 0;

  /// `--name=value` for every option, defaults included: what parse() turns
  /// back into these options (a collected graph's sidecar records them).
  std::vector<std::string> toFlags() const;

  /// Parses command-line style flags (`--target trn2`, `--auto-cast=bf16`,
  /// `-O1`, ...: every option of the table, its value inline or next) on
  /// top of `base`.
  static llvm::Expected<CompileOptions> parse(llvm::ArrayRef<std::string> flags,
                                              CompileOptions base);
  static llvm::Expected<CompileOptions>
  parse(llvm::ArrayRef<std::string> flags);
  /// Flags from the KILN_CC_FLAGS environment variable (space separated).
  static llvm::Expected<CompileOptions> fromEnvironment(CompileOptions base);
};

/// How the cache key hashes an option (cache.md, "Key").
enum class KeyUse {
  Always,       // every key, as field option.<name>
  GroupSize,    // where the graph has collectives (the data-parallel size)
  DataParallel, // only for data-parallel compiles (world size above one)
};

/// One compile option, declared once.
struct CompileOptionInfo {
  /// The flag without its dashes: `--auto-cast`.
  llvm::StringLiteral name;
  /// A one-letter prefix spelling (`-O2`), or empty.
  llvm::StringLiteral prefix;
  /// What the value looks like, and what the option does, for help texts.
  llvm::StringLiteral valueName;
  llvm::StringLiteral help;
  KeyUse key;
  /// The value as text, as flags and key fields write it.
  std::string (*get)(const CompileOptions &);
  /// Reads `value` into `options`; the error says what is accepted.
  llvm::Error (*set)(CompileOptions &options, llvm::StringRef value);
};

/// Every compile option, in the order flags and key fields are written.
llvm::ArrayRef<CompileOptionInfo> compileOptionTable();

/// The option spelled `flag` (`--auto-cast`, `-O`), or null.
const CompileOptionInfo *lookupCompileOption(llvm::StringRef flag);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_COMPILEOPTIONS_H
