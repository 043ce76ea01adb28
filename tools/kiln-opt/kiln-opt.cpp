//===- kiln-opt.cpp - mlir-opt for Kiln's dialects and passes ------------===//

#include "dialects/KilnDialects.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  // Upstream canonicalize, cse, symbol-dce, ... run on our IR as they are.
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
