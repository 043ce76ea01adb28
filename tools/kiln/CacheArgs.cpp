//===- CacheArgs.cpp - arguments of kiln cache's commands -----------------===//

#include "tools/kiln/CacheArgs.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/target/CompileOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <ctime>

namespace kiln::tool {

namespace {

/// Whether `text` is a plain decimal number: digits with at most one point,
/// no sign, exponent, "inf" or "nan".
bool isPlainNumber(llvm::StringRef text) {
  return !text.empty() && text != "." && text.count('.') <= 1 &&
         llvm::all_of(text, [](char c) { return llvm::isDigit(c) || c == '.'; });
}

} // namespace

/// Parses a duration: a plain number with an optional s, m, h or d suffix
/// (seconds by default). Anything else is refused.
std::optional<double> parseDuration(llvm::StringRef text) {
  double scale = 1;
  if (text.consume_back("d")) {
    scale = 86400;
  } else if (text.consume_back("h")) {
    scale = 3600;
  } else if (text.consume_back("m")) {
    scale = 60;
  } else {
    text.consume_back("s");
  }
  double value = 0;
  if (!isPlainNumber(text) || text.getAsDouble(value)) {
    return std::nullopt;
  }
  return value * scale;
}

/// Parses a size: a plain number of bytes with an optional K, M, G or T
/// suffix in either case (powers of 1024). Anything else is refused, and so is a size of
/// 2^63 bytes or more, which would not fit the byte counts it is compared
/// with.
std::optional<int64_t> parseSize(llvm::StringRef text) {
  uint64_t scale = 1;
  static constexpr llvm::StringLiteral kSuffixes = "KMGT";
  size_t power = text.empty() ? llvm::StringRef::npos
                              : kSuffixes.find(llvm::toUpper(text.back()));
  if (power != llvm::StringRef::npos) {
    scale = uint64_t(1) << (10 * (power + 1));
    text = text.drop_back();
  }
  if (!isPlainNumber(text)) {
    return std::nullopt;
  }
  constexpr uint64_t kLimit = uint64_t(INT64_MAX);
  uint64_t whole = 0;
  if (!text.contains('.')) {
    if (text.getAsInteger(10, whole) || whole > kLimit / scale) {
      return std::nullopt;
    }
    return static_cast<int64_t>(whole * scale);
  }
  double value = 0;
  if (text.getAsDouble(value) || !(value * scale < 0x1p63)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(value * scale);
}

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? llvm::formatv("{0} B", static_cast<int64_t>(bytes)).str()
                : llvm::formatv("{0:f1} {1}", bytes, units[u]).str();
}

std::string humanTime(double epoch) {
  if (epoch <= 0) {
    return "-";
  }
  std::time_t t = static_cast<std::time_t>(epoch);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", std::gmtime(&t));
  return text;
}

llvm::Expected<Args> parseArgs(llvm::ArrayRef<std::string> raw,
                               const std::set<std::string> &valued,
                               const std::set<std::string> &boolean,
                               bool compileOptions) {
  Args args;
  for (size_t i = 0; i < raw.size(); ++i) {
    llvm::StringRef arg = raw[i];
    if (!arg.starts_with("-")) {
      args.positional.push_back(arg.str());
      continue;
    }
    auto [name, inlineValue] = arg.split('=');
    if (valued.count(name.str())) {
      if (arg.contains('=')) {
        args.values[name.str()] = inlineValue.str();
      } else if (i + 1 < raw.size()) {
        args.values[name.str()] = raw[++i];
      } else {
        return llvm::createStringError(name + " needs a value");
      }
    } else if (boolean.count(arg.str())) {
      args.flags.insert(arg.str());
    } else if (compileOptions) {
      args.passThrough.push_back(arg.str());
      // Every compile option takes a value; a prefix spelling (-O2)
      // carries its own.
      bool takesValue = !arg.contains('=') && arg.starts_with("--") &&
                        lookupCompileOption(arg);
      if (takesValue && i + 1 < raw.size()) {
        args.passThrough.push_back(raw[++i]);
      }
    } else {
      return llvm::createStringError("unknown option '" + arg + "'");
    }
  }
  return args;
}

int fail(const llvm::Twine &message) {
  return reportError(llvm::createStringError(message));
}

void printJson(llvm::json::Value value) {
  llvm::outs() << llvm::formatv("{0:2}", value) << "\n";
}

llvm::Expected<cache::GcPolicy> parseGcPolicy(const Args &args, bool prune) {
  cache::GcPolicy policy;
  if (auto v = args.value("--grace")) {
    auto d = parseDuration(*v);
    if (!d) {
      return llvm::createStringError("--grace takes a duration like 1h, not '" + *v + "'");
    }
    policy.graceSeconds = *d;
  }
  auto duration = [&](const char *flag, std::optional<double> &into) -> bool {
    if (auto v = args.value(flag)) {
      into = parseDuration(*v);
      return into.has_value();
    }
    return true;
  };
  if (!duration("--max-age", policy.maxAgeSeconds) ||
      !duration("--older-than", policy.olderThanSeconds)) {
    return llvm::createStringError("durations are a number with an optional s, m, h or d "
                "suffix, like 90s, 15m, 12h or 30d");
  }
  if (auto v = args.value("--max-size")) {
    policy.maxBytes = parseSize(*v);
    if (!policy.maxBytes) {
      return llvm::createStringError("--max-size takes a number of bytes with an optional K, M, "
                  "G or T suffix (powers of 1024), below 8 EiB; not '" +
                  *v + "'");
    }
  }
  if (auto v = args.value("--keep-versions")) {
    int n = 0;
    if (llvm::StringRef(*v).getAsInteger(10, n) || n < 1) {
      return llvm::createStringError("--keep-versions takes a positive count");
    }
    policy.keepVersions = n;
  }
  policy.otherCompilers = args.has("--version");
  policy.dryRun = args.has("--dry-run");
  if (prune && !policy.olderThanSeconds && !policy.otherCompilers) {
    return llvm::createStringError("cache prune needs --older-than DUR or --version");
  }
  return policy;
}

int printDoctorChecks(llvm::StringRef title,
                      const std::vector<cache::DoctorCheck> &checks) {
  bool allOk = true;
  llvm::outs() << title << "\n";
  for (const cache::DoctorCheck &c : checks) {
    llvm::outs() << llvm::formatv("  {0,-4} {1,-17} {2}\n",
                                  c.ok ? "ok" : "FAIL", c.name, c.detail);
    allOk = allOk && c.ok;
  }
  return allOk ? Success : InternalFailure;
}

} // namespace kiln::tool
