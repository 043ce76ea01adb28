//===- kiln-opt.cpp - mlir-opt for Kiln's dialects and passes ------------===//

#include "dialects/KilnDialects.h"
#include "passes/graph/Passes.h"
#include "passes/tile/Passes.h"
#include "passes/engine/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  // Upstream canonicalize, cse, symbol-dce, ... run on our IR as they are.
  mlir::registerTransformsPasses();
  kiln::graph_passes::registerKilnGraphPasses();
  kiln::tile_passes::registerKilnTilePasses();
  kiln::tile_passes::registerTilePlanningPipeline();
  kiln::engine_passes::registerKilnEnginePasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
