//===- main.cpp - the kiln command-line tool ------------------------------===//
//
// One tool, one subcommand per task. Each subcommand lives in its own file
// and registers itself through a llvm::cl::SubCommand.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/CacheCommand.h"
#include "tools/kiln/Commands.h"
#include "tools/kiln/Precompile.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

static llvm::cl::SubCommand versionCommand("version", "Print Kiln's version");
// Listed in --help; `kiln cache ...` parses its own arguments (see
// CacheCommand.cpp).
static llvm::cl::SubCommand
    cacheCommand("cache", "Inspect and maintain the compile cache (kiln cache "
                          "--help)");

static llvm::cl::SubCommand precompileCommand(
    "precompile", "Collect a training command's graphs and compile them into "
                  "the cache (kiln precompile --help)");

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc >= 2 && llvm::StringRef(argv[1]) == "cache") {
    return kiln::tool::runCacheCommand(
        std::vector<std::string>(argv + 2, argv + argc));
  }
  if (argc >= 2 && llvm::StringRef(argv[1]) == "precompile") {
    return kiln::tool::runPrecompileCommand(
        std::vector<std::string>(argv + 2, argv + argc));
  }
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "kiln " << KILN_VERSION << " (" << KILN_GIT_HASH << ")\n";
  });
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv, "Kiln: ahead-of-time compiler for training graphs\n",
          &errorStream)) {
    llvm::StringRef line = llvm::StringRef(errors).split('\n').first.trim();
    line.consume_front("kiln: ");
    llvm::errs() << "kiln: error: " << line << "\n";
    return kiln::tool::BadInput;
  }
  if (versionCommand) {
    llvm::outs() << "kiln " << KILN_VERSION << " (" << KILN_GIT_HASH << ")\n";
    return kiln::tool::Success;
  }
  for (const kiln::tool::Command &command : kiln::tool::commands()) {
    if (*command.subcommand) {
      return command.run();
    }
  }
  llvm::errs() << "kiln: error: no subcommand given (see kiln --help)\n";
  return kiln::tool::BadInput;
}
