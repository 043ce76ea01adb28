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

/// The first line of `text` that is not blank, trimmed.
static llvm::StringRef firstLine(llvm::StringRef text) {
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    if (!line.trim().empty()) {
      return line.trim();
    }
    text = rest;
  }
  return "";
}

/// Kiln's own options all belong to its subcommands. The top level's are the
/// LLVM and MLIR libraries' (backend flags by the hundred), which mean
/// nothing to a Kiln user: --help leaves them out, --help-hidden lists them.
static void hideLibraryOptions() {
  for (auto &entry :
       llvm::cl::getRegisteredOptions(llvm::cl::SubCommand::getTopLevel())) {
    llvm::cl::Option *option = entry.second;
    bool generic = llvm::any_of(option->Categories, [](auto *category) {
      return category->getName() == "Generic Options"; // --help, --version
    });
    if (!generic && option->getOptionHiddenFlag() == llvm::cl::NotHidden) {
      option->setHiddenFlag(llvm::cl::Hidden);
    }
  }
}

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
  hideLibraryOptions();
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  bool parsed = false;
  // llvm::cl writes some errors (a value an option's parser rejects) straight
  // to stderr rather than to the stream it is given: both are collected, and
  // the first message among them is the one line printed.
  std::string printed = kiln::tool::captureStderr([&] {
    parsed = llvm::cl::ParseCommandLineOptions(
        argc, argv, "Kiln: ahead-of-time compiler for training graphs\n",
        &errorStream);
  });
  if (!parsed) {
    std::string messages = printed + errors;
    llvm::StringRef line = firstLine(messages);
    line.consume_front("kiln: ");
    llvm::errs() << "kiln: error: "
                 << (line.empty() ? "invalid command line (see kiln --help)"
                                  : line)
                 << "\n";
    return kiln::tool::BadInput;
  }
  llvm::errs() << printed;
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
