//===- TargetsCommand.cpp - kiln targets ----------------------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/target/TargetDescription.h"

#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand
    targetsCommand("targets",
                   "Print the targets and their machine-model figures");
cl::opt<std::string> targetName("target", cl::desc("Print only this target"),
                                cl::sub(targetsCommand));

int runTargets() {
  if (!targetName.empty()) {
    const target::TargetDescription *t = target::lookupTarget(targetName);
    if (!t) {
      return reportError(llvm::createStringError(
          "unknown target '" + targetName + "' (kiln targets lists them)"));
    }
    target::printTarget(llvm::outs(), *t);
    return Success;
  }
  for (const target::TargetDescription &t : target::allTargets()) {
    target::printTarget(llvm::outs(), t);
    llvm::outs() << "\n";
  }
  llvm::outs() << "default target: " << target::defaultTarget().name
               << "; 'assumed' figures are Kiln's own choices, 'published' "
                  "ones come from AWS's Neuron documentation\n";
  return Success;
}

CommandRegistration registration(targetsCommand, runTargets);

} // namespace
