//===- GraphCommands.cpp - kiln import | export | hash --------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand importCommand("import",
                             "Print a .kgraph.pb graph as kgraph MLIR");
cl::opt<std::string> importInput(cl::Positional, cl::desc("<graph.kgraph.pb>"),
                                 cl::Required, cl::sub(importCommand));
cl::opt<std::string> importOutput("o",
                                  cl::desc("Output file (default: stdout)"),
                                  cl::init("-"), cl::sub(importCommand));

cl::SubCommand exportCommand("export",
                             "Write kgraph MLIR (.mlir) as a .kgraph.pb graph");
cl::opt<std::string> exportInput(cl::Positional, cl::desc("<graph.mlir>"),
                                 cl::Required, cl::sub(exportCommand));
cl::opt<std::string> exportOutput("o", cl::desc("Output .kgraph.pb file"),
                                  cl::Required, cl::sub(exportCommand));

cl::SubCommand hashCommand(
    "hash", "Print the SHA-256 of a graph's canonical form (the cache key's "
            "graph field)");
cl::opt<std::string> hashInput(cl::Positional,
                               cl::desc("<graph.kgraph.pb | graph.mlir>"),
                               cl::Required, cl::sub(hashCommand));

int runImport() {
  mlir::MLIRContext context;
  auto module = loadGraphModule(importInput, context);
  if (!module) {
    return reportError(module.takeError());
  }
  std::error_code ec;
  llvm::raw_fd_ostream out(importOutput, ec);
  if (ec) {
    return reportError(llvm::createStringError(
        ec, "cannot write '" + importOutput + "': " + ec.message()));
  }
  (*module)->print(out);
  return Success;
}

llvm::Expected<proto::Graph> loadGraph(llvm::StringRef path,
                                       mlir::MLIRContext &context) {
  if (!path.ends_with(".mlir")) {
    return graph::readGraphFile(path);
  }
  auto module = loadGraphModule(path, context);
  if (!module) {
    return module.takeError();
  }
  auto function = graph::getStepFunction(**module);
  if (!function) {
    return function.takeError();
  }
  return graph::exportGraph(*function);
}

int runExport() {
  mlir::MLIRContext context;
  auto graph = loadGraph(exportInput, context);
  if (!graph) {
    return reportError(graph.takeError());
  }
  if (llvm::Error err = graph::writeGraphFile(*graph, exportOutput)) {
    return reportError(std::move(err));
  }
  return Success;
}

int runHash() {
  mlir::MLIRContext context;
  auto graph = loadGraph(hashInput, context);
  if (!graph) {
    return reportError(graph.takeError());
  }
  auto hash = graph::graphHash(*graph);
  if (!hash) {
    return reportError(hash.takeError());
  }
  llvm::outs() << *hash << "\n";
  return Success;
}

CommandRegistration importRegistration(importCommand, runImport);
CommandRegistration exportRegistration(exportCommand, runExport);
CommandRegistration hashRegistration(hashCommand, runHash);

} // namespace
