//===- Commands.h - the registry of kiln subcommands ------------*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_COMMANDS_H
#define KILN_TOOLS_KILN_COMMANDS_H

#include "llvm/Support/CommandLine.h"

#include <functional>
#include <vector>

namespace kiln::tool {

struct Command {
  llvm::cl::SubCommand *subcommand;
  std::function<int()> run;
};

/// Every subcommand, registered by a static CommandRegistration in its file.
std::vector<Command> &commands();

struct CommandRegistration {
  CommandRegistration(llvm::cl::SubCommand &subcommand,
                      std::function<int()> run) {
    commands().push_back({&subcommand, std::move(run)});
  }
};

inline std::vector<Command> &commands() {
  static std::vector<Command> all;
  return all;
}

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_COMMANDS_H
