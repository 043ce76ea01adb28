//===- CompileOptions.cpp - the table of compile options ------------------===//

#include "compiler/target/CompileOptions.h"

#include "compiler/target/TargetDescription.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

namespace kiln {

namespace {

/// Reads a whole number of at least `min` (or 0, where `zeroToo`); the
/// error names the flag and says what it accepts.
template <typename T>
llvm::Error setNumber(T &into, llvm::StringRef value, llvm::StringRef flag,
                      int64_t min, bool zeroToo, llvm::StringRef accepted) {
  T number = 0;
  if (value.getAsInteger(10, number) ||
      (number < min && !(zeroToo && number == 0))) {
    return llvm::createStringError("--" + flag + " needs " + accepted +
                                   ", not '" + value + "'");
  }
  into = number;
  return llvm::Error::success();
}

const CompileOptionInfo kOptions[] = {
    {"target", "", "trn1|trn2", "the chip to compile for (kiln targets)",
     KeyUse::Always, [](const CompileOptions &o) { return o.target; },
     [](CompileOptions &o, llvm::StringRef value) -> llvm::Error {
       if (!target::lookupTarget(value)) {
         return llvm::createStringError("unknown target '" + value +
                                        "' (kiln targets lists them)");
       }
       o.target = value.str();
       return llvm::Error::success();
     }},
    {"opt-level", "O", "0|1|2", "optimisation level (also -O0, -O1, -O2)",
     KeyUse::Always,
     [](const CompileOptions &o) { return std::to_string(o.optLevel); },
     [](CompileOptions &o, llvm::StringRef value) -> llvm::Error {
       if (value.size() != 1 || value[0] < '0' || value[0] > '2') {
         return llvm::createStringError(
             "--opt-level takes 0, 1 or 2, not '" + value + "'");
       }
       o.optLevel = value[0] - '0';
       return llvm::Error::success();
     }},
    {"auto-cast", "", "none|bf16",
     "bf16: matmul inputs in bf16 with f32 accumulation", KeyUse::Always,
     [](const CompileOptions &o) { return o.autoCast; },
     [](CompileOptions &o, llvm::StringRef value) -> llvm::Error {
       if (value != "none" && value != "bf16") {
         return llvm::createStringError("--auto-cast takes none or bf16, not '" +
                                        value + "'");
       }
       o.autoCast = value.str();
       return llvm::Error::success();
     }},
    {"world-size", "", "N", "workers of the data-parallel group",
     KeyUse::GroupSize,
     [](const CompileOptions &o) { return std::to_string(o.worldSize); },
     [](CompileOptions &o, llvm::StringRef value) {
       return setNumber(o.worldSize, value, "world-size", 1, false,
                        "a positive integer");
     }},
    {"tensor-parallel", "", "N",
     "workers of the tensor-parallel group (the job has world-size times "
     "as many)",
     KeyUse::GroupSize,
     [](const CompileOptions &o) { return std::to_string(o.tensorParallel); },
     [](CompileOptions &o, llvm::StringRef value) {
       return setNumber(o.tensorParallel, value, "tensor-parallel", 1, false,
                        "a positive integer");
     }},
    {"bucket-bytes", "", "BYTES",
     "largest gradient bucket one all-reduce averages (data-parallel "
     "compiles)",
     KeyUse::DataParallel,
     [](const CompileOptions &o) { return std::to_string(o.bucketBytes); },
     [](CompileOptions &o, llvm::StringRef value) {
       return setNumber(o.bucketBytes, value, "bucket-bytes", 1, false,
                        "a positive integer");
     }},
    {"zero-stage", "", "0|1",
     "1: shard the optimizer state over the data-parallel group (ZeRO-1)",
     KeyUse::DataParallel,
     [](const CompileOptions &o) { return std::to_string(o.zeroStage); },
     [](CompileOptions &o, llvm::StringRef value) -> llvm::Error {
       if (value != "0" && value != "1") {
         return llvm::createStringError("--zero-stage takes 0 or 1, not '" +
                                        value + "'");
       }
       o.zeroStage = value[0] - '0';
       return llvm::Error::success();
     }},
    // The engine phase keeps 2 KiB of every partition for itself.
    {"sbuf-bytes", "", "BYTES",
     "SBUF bytes per partition the memory plan may use (0: the target's); "
     "lower it to see or test spilling",
     KeyUse::Always,
     [](const CompileOptions &o) { return std::to_string(o.sbufBytes); },
     [](CompileOptions &o, llvm::StringRef value) {
       return setNumber(o.sbufBytes, value, "sbuf-bytes", 4096, true,
                        "0 (the target's SBUF) or at least 4096 bytes per "
                        "partition");
     }},
    {"hbm-bytes", "", "BYTES",
     "HBM bytes the memory plan may use (0: the target's); lower it to keep "
     "room on the device",
     KeyUse::Always,
     [](const CompileOptions &o) { return std::to_string(o.hbmBytes); },
     [](CompileOptions &o, llvm::StringRef value) {
       return setNumber(o.hbmBytes, value, "hbm-bytes", 1 << 20, true,
                        "0 (the target's HBM) or at least 1 MiB");
     }},
};

} // namespace

llvm::ArrayRef<CompileOptionInfo> compileOptionTable() { return kOptions; }

const CompileOptionInfo *lookupCompileOption(llvm::StringRef flag) {
  for (const CompileOptionInfo &option : kOptions) {
    if ((flag.starts_with("--") && flag.drop_front(2) == option.name) ||
        (!option.prefix.empty() && flag.starts_with("-") &&
         !flag.starts_with("--") && flag.drop_front(1) == option.prefix)) {
      return &option;
    }
  }
  return nullptr;
}

std::vector<std::string> CompileOptions::toFlags() const {
  std::vector<std::string> flags;
  for (const CompileOptionInfo &option : kOptions) {
    flags.push_back("--" + option.name.str() + "=" + option.get(*this));
  }
  return flags;
}

llvm::Expected<CompileOptions>
CompileOptions::parse(llvm::ArrayRef<std::string> flags, CompileOptions base) {
  CompileOptions o = std::move(base);
  auto fail = [](const llvm::Twine &what) {
    return llvm::createStringError("compile options: " + what);
  };
  for (size_t i = 0; i < flags.size(); ++i) {
    llvm::StringRef flag = flags[i];
    auto [name, value] = flag.split('=');
    bool hasValue = flag.contains('=');
    const CompileOptionInfo *option = lookupCompileOption(name);
    // A prefix spelling carries its value: -O2.
    if (!option && !hasValue && !flag.starts_with("--") && flag.size() > 2) {
      option = lookupCompileOption(flag.take_front(2));
      if (option) {
        value = flag.drop_front(2);
        hasValue = true;
      }
    }
    if (!option) {
      return fail("unknown option '" + flag + "'");
    }
    if (!hasValue) {
      if (i + 1 >= flags.size()) {
        return fail("--" + option->name + " needs a value");
      }
      value = flags[++i];
    }
    if (llvm::Error error = option->set(o, value)) {
      return fail(llvm::toString(std::move(error)));
    }
  }
  return o;
}

llvm::Expected<CompileOptions>
CompileOptions::parse(llvm::ArrayRef<std::string> flags) {
  return parse(flags, CompileOptions());
}

llvm::Expected<CompileOptions>
CompileOptions::fromEnvironment(CompileOptions base) {
  const char *env = std::getenv("KILN_CC_FLAGS");
  if (!env) {
    return base;
  }
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::SplitString(env, parts);
  std::vector<std::string> flags(parts.begin(), parts.end());
  auto parsed = parse(flags, std::move(base));
  if (!parsed) {
    return llvm::createStringError("KILN_CC_FLAGS: " +
                                   llvm::toString(parsed.takeError()));
  }
  return parsed;
}

} // namespace kiln
