//===- TilePlanning.cpp - the planning pipeline, and the target lookup ---===//

#include "passes/tile/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

void kiln::tile_passes::addTilePlanningPasses(mlir::OpPassManager &pm,
                                              llvm::StringRef target,
                                              bool convInputCopies) {
  mlir::OpPassManager &functions = pm.nest<mlir::func::FuncOp>();
  KGraphPlanMatmulOperandsOptions operands;
  operands.convInputCopies = convInputCopies;
  functions.addPass(createKGraphPlanMatmulOperands(operands));
  functions.addPass(createKGraphPlanRowSums());
  KGraphPlanEpiloguesOptions epilogues;
  epilogues.target = target.str();
  functions.addPass(createKGraphPlanEpilogues(epilogues));
  functions.addPass(createKGraphPlanBuffers());
}

void kiln::tile_passes::registerTilePlanningPipeline() {
  mlir::PassPipelineRegistration<>(
      "kgraph-plan-tiles",
      "The tile phase's planning passes, in order (what "
      "convert-kgraph-to-ktile reads)",
      [](mlir::OpPassManager &pm) { addTilePlanningPasses(pm, "trn1"); });
}

const kiln::target::TargetDescription *
kiln::tile_passes::lookupTargetOrError(mlir::Operation *op,
                                       llvm::StringRef name) {
  const target::TargetDescription *t = target::lookupTarget(name);
  if (!t) {
    op->emitError("unknown target '") << name << "'";
  }
  return t;
}
