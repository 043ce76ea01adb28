//===- CompileOptions.cpp - parsing and keying compile options -----------===//

#include "compiler/driver/CompileOptions.h"

#include "compiler/target/TargetDescription.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

namespace kiln {

std::vector<std::pair<std::string, std::string>>
CompileOptions::keyFields() const {
  return {{"target", target},
          {"opt-level", std::to_string(optLevel)},
          {"auto-cast", autoCast},
          {"world-size", std::to_string(worldSize)},
          {"bucket-bytes", std::to_string(bucketBytes)},
          {"sbuf-bytes", std::to_string(sbufBytes)}};
}

std::vector<std::string> CompileOptions::toFlags() const {
  return {"--target=" + target, "-O" + std::to_string(optLevel),
          "--auto-cast=" + autoCast,
          "--world-size=" + std::to_string(worldSize),
          "--bucket-bytes=" + std::to_string(bucketBytes),
          "--sbuf-bytes=" + std::to_string(sbufBytes)};
}

llvm::Expected<CompileOptions>
CompileOptions::parse(llvm::ArrayRef<std::string> flags, CompileOptions base) {
  CompileOptions o = std::move(base);
  auto fail = [](const llvm::Twine &what) {
    return llvm::createStringError("compile options: " + what);
  };
  for (size_t i = 0; i < flags.size(); ++i) {
    llvm::StringRef flag = flags[i], value;
    auto [name, inlineValue] = flag.split('=');
    bool hasInline = flag.contains('=');
    auto takeValue = [&]() -> bool {
      if (hasInline) {
        value = inlineValue;
        return true;
      }
      if (i + 1 >= flags.size()) {
        return false;
      }
      value = flags[++i];
      return true;
    };
    if (name.size() == 3 && name.starts_with("-O") && name[2] >= '0' &&
        name[2] <= '2' && !hasInline) {
      o.optLevel = name[2] - '0';
    } else if (name == "--target") {
      if (!takeValue()) {
        return fail("--target needs a value");
      }
      if (!target::lookupTarget(value)) {
        return fail("unknown target '" + value + "' (kiln targets lists them)");
      }
      o.target = value.str();
    } else if (name == "--auto-cast") {
      if (!takeValue()) {
        return fail("--auto-cast needs a value");
      }
      if (value != "none" && value != "bf16") {
        return fail("--auto-cast takes none or bf16, not '" + value + "'");
      }
      o.autoCast = value.str();
    } else if (name == "--world-size") {
      int size = 0;
      if (!takeValue() || value.getAsInteger(10, size) || size < 1) {
        return fail("--world-size needs a positive integer");
      }
      o.worldSize = size;
    } else if (name == "--bucket-bytes") {
      int64_t bytes = 0;
      if (!takeValue() || value.getAsInteger(10, bytes) || bytes < 1) {
        return fail("--bucket-bytes needs a positive integer");
      }
      o.bucketBytes = bytes;
    } else if (name == "--sbuf-bytes") {
      int64_t bytes = 0;
      // The engine phase keeps 2 KiB of every partition for itself.
      if (!takeValue() || value.getAsInteger(10, bytes) ||
          (bytes != 0 && bytes < 4096)) {
        return fail("--sbuf-bytes needs 0 (the target's SBUF) or at least "
                    "4096 bytes per partition");
      }
      o.sbufBytes = bytes;
    } else {
      return fail("unknown option '" + flag + "'");
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
