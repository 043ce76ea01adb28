//===- GraphImportFuzzer.cpp - libFuzzer target for the graph importer ---===//
//
// Feeds arbitrary bytes through parse -> import -> export -> hash. Any crash,
// sanitizer report or hang is a bug: malformed graphs must end in an error.
//
//===----------------------------------------------------------------------===//

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "dialects/KilnDialects.h"

#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    mlir::DialectRegistry registry;
    kiln::registerKilnDialects(registry);
    auto *ctx = new mlir::MLIRContext(registry);
    ctx->loadAllAvailableDialects();
    // Verifier diagnostics are expected here; keep the fuzzer's output quiet.
    ctx->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
    return ctx;
  }();
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto graph = kiln::graph::parseGraph(bytes, "fuzz input");
  if (!graph) {
    llvm::consumeError(graph.takeError());
    return 0;
  }
  if (auto hash = kiln::graph::graphHash(*graph); !hash) {
    llvm::consumeError(hash.takeError());
  }
  auto module = kiln::graph::importGraph(*graph, *context);
  if (!module) {
    llvm::consumeError(module.takeError());
    return 0;
  }
  auto function = kiln::graph::getStepFunction(**module);
  if (!function) {
    llvm::consumeError(function.takeError());
    return 0;
  }
  auto exported = kiln::graph::exportGraph(*function);
  if (!exported) {
    llvm::consumeError(exported.takeError());
  }
  return 0;
}
