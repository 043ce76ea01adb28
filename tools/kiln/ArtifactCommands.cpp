//===- ArtifactCommands.cpp - kiln assemble | dump
//-------------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/emit/ArtifactEmission.h"
#include "runtime/artifact/Disassembler.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand
    assembleCommand("assemble",
                    "Assemble a kisa program (.mlir) into a .kneff artifact");
cl::opt<std::string> assembleInput(cl::Positional, cl::desc("<program.mlir>"),
                                   cl::Required, cl::sub(assembleCommand));
cl::opt<std::string> assembleOutput("o", cl::desc("Output .kneff"),
                                    cl::Required, cl::sub(assembleCommand));
cl::opt<bool> assemblePlain(
    "plain-streams",
    cl::desc("Write the instruction records uncompressed (feature bit 0 "
             "clear), as tools that read them straight from the file need"),
    cl::sub(assembleCommand));

cl::SubCommand dumpCommand("dump", "Print an artifact: header, manifest, "
                                   "disassembly per engine");
cl::opt<std::string> dumpInput(cl::Positional, cl::desc("<artifact.kneff>"),
                               cl::Required, cl::sub(dumpCommand));
cl::opt<bool> dumpMlir("mlir", cl::desc("Print the program as kisa IR instead"),
                       cl::sub(dumpCommand));

int runAssemble() {
  mlir::MLIRContext context;
  auto module = loadGraphModule(assembleInput, context);
  if (!module) {
    return reportError(module.takeError());
  }
  auto program = emit::getProgram(**module);
  if (!program) {
    return reportError(program.takeError());
  }
  auto artifact = emit::assembleProgram(*program);
  if (!artifact) {
    return reportError(artifact.takeError());
  }
  std::string bytes = artifact::writeArtifact(*artifact, !assemblePlain);
  // A temporary file renamed into place: no reader sees a partial artifact.
  if (llvm::Error err =
          llvm::writeToOutput(assembleOutput, [&](llvm::raw_ostream &out) {
            out << bytes;
            return llvm::Error::success();
          })) {
    return reportError(
        llvm::createStringError("cannot write '" + assembleOutput +
                                "': " + llvm::toString(std::move(err))));
  }
  return Success;
}

int runDump() {
  auto artifact = artifact::loadArtifactFile(dumpInput);
  if (!artifact) {
    return reportError(artifact.takeError());
  }
  if (dumpMlir) {
    mlir::MLIRContext context;
    emit::disassembleArtifact(*artifact, context)->print(llvm::outs());
    return Success;
  }
  artifact::dumpArtifact(llvm::outs(), *artifact);
  return Success;
}

CommandRegistration assembleRegistration(assembleCommand, runAssemble);
CommandRegistration dumpRegistration(dumpCommand, runDump);

} // namespace
