//===- Compiler.cpp - the compile pipeline --------------------------------===//

#include "compiler/driver/Compiler.h"

#include "compiler/emit/ArtifactEmission.h"
#include "compiler/graph/GraphConversion.h"
#include "dialects/KilnDialects.h"
#include "passes/engine/Passes.h"
#include "passes/graph/Passes.h"
#include "passes/tile/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace kiln {

std::optional<Phase> phaseNamed(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("import", Phase::Import)
      .Case("graph", Phase::Graph)
      .Case("tile", Phase::Tile)
      .Case("engine", Phase::Engine)
      .Case("emit", Phase::Emit)
      .Default(std::nullopt);
}

llvm::StringRef phaseName(Phase phase) {
  switch (phase) {
  case Phase::Import:
    return "import";
  case Phase::Graph:
    return "graph";
  case Phase::Tile:
    return "tile";
  case Phase::Engine:
    return "engine";
  case Phase::Emit:
    return "emit";
  }
  return "";
}

void prepareContext(MLIRContext &context) {
  DialectRegistry registry;
  registerKilnDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
}

llvm::Error buildPipeline(PassManager &pm, const CompileOptions &options,
                          Phase last, bool hbmTrades) {
  if (!target::lookupTarget(options.target)) {
    return llvm::createStringError("unknown target '" + options.target +
                                   "' (trn1 or trn2)");
  }
  if (last == Phase::Import) {
    return llvm::Error::success();
  }
  OpPassManager &func = pm.nest<func::FuncOp>();
  // An embedding table's gradient is averaged over the rows the group's
  // batches pick before data parallelism buckets the rest.
  if (options.optLevel >= 1) {
    graph_passes::KGraphSparseTableUpdatesOptions tables;
    tables.worldSize = options.worldSize;
    func.addPass(graph_passes::createKGraphSparseTableUpdates(tables));
  }
  graph_passes::KGraphDataParallelOptions dataParallel;
  dataParallel.worldSize = options.worldSize;
  dataParallel.bucketBytes = options.bucketBytes;
  dataParallel.shardOptimizerState = options.zeroStage >= 1;
  func.addPass(graph_passes::createKGraphDataParallel(dataParallel));
  func.addPass(graph_passes::createKGraphDecompose());
  func.addPass(graph_passes::createKGraphAssignLayout());
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
  if (options.autoCast == "bf16") {
    func.addPass(graph_passes::createKGraphMixedPrecision());
    // One bf16 cast per value: the embedding's forward and backward
    // products then share one bf16 one-hot matrix, not an f32 one each.
    func.addPass(createCSEPass());
  }
  // After the last CSE, which would merge the recomputed values with the
  // forward pass's again.
  func.addPass(graph_passes::createKGraphRecomputeCheckpoints());
  if (options.optLevel >= 1) {
    graph_passes::KGraphFuseElementwiseOptions fuse;
    fuse.maxOps = options.optLevel >= 2 ? 64 : 16;
    func.addPass(graph_passes::createKGraphFuseElementwise(fuse));
    func.addPass(graph_passes::createKGraphRematerialize());
    func.addPass(graph_passes::createKGraphScheduleUpdates());
  }
  if (last == Phase::Graph) {
    return llvm::Error::success();
  }
  // The tile phase: its planning passes record the plan on the kgraph ops,
  // then the conversion follows it.
  tile_passes::addTilePlanningPasses(pm, options.target, hbmTrades);
  tile_passes::ConvertKGraphToKTileOptions tiling;
  tiling.target = options.target;
  tiling.hbmTrades = hbmTrades;
  pm.addPass(tile_passes::createConvertKGraphToKTile(tiling));
  OpPassManager &tiles = pm.nest<func::FuncOp>();
  tiles.addPass(tile_passes::createKTileFuseTensorScalars());
  tiles.addPass(tile_passes::createKTileReuseDeadTiles());
  tile_passes::KTilePlanMemoryOptions plan;
  plan.target = options.target;
  plan.sbufBytes = options.sbufBytes;
  plan.hbmBytes = options.hbmBytes;
  pm.addPass(tile_passes::createKTilePlanMemory(plan));
  if (last == Phase::Tile) {
    return llvm::Error::success();
  }
  engine_passes::ConvertKTileToKisaOptions engine;
  engine.worldSize = options.worldSize;
  engine.tensorParallel = options.tensorParallel;
  engine.schedule = options.optLevel >= 1;
  pm.addPass(engine_passes::createConvertKTileToKisa(engine));
  return llvm::Error::success();
}

/// Multiply-adds per element of a convolution's output (or output
/// gradient): one per input channel of its group and kernel tap, the
/// forward, input gradient and weight gradient alike.
double convolutionMacsPerOutput(RankedTensorType weight) {
  double macs = 1;
  for (int64_t d : weight.getShape().drop_front()) {
    macs *= static_cast<double>(d);
  }
  return macs;
}

/// 2 x multiply-adds of the graph's matmuls, linear layers and
/// convolutions, as the front end wrote them (see emit::kModelFlopsAttr).
double modelFlops(ModuleOp module) {
  double flops = 0;
  auto elements = [](Value v) {
    return static_cast<double>(
        llvm::cast<RankedTensorType>(v.getType()).getNumElements());
  };
  module.walk([&](Operation *op) {
    if (auto matmul = llvm::dyn_cast<kgraph::MatmulOp>(op)) {
      auto lhs = llvm::cast<RankedTensorType>(matmul.getLhs().getType());
      int64_t k = lhs.getShape()[lhs.getRank() - (matmul.getTransposeLhs() ? 2 : 1)];
      flops += 2 * elements(matmul.getOutput()) * static_cast<double>(k);
    } else if (auto linear = llvm::dyn_cast<kgraph::LinearOp>(op)) {
      auto input = llvm::cast<RankedTensorType>(linear.getInput().getType());
      flops += 2 * elements(linear.getOutput()) *
               static_cast<double>(input.getShape().back());
    } else if (auto conv = llvm::dyn_cast<kgraph::ConvOp>(op)) {
      flops += 2 * elements(conv.getOutput()) *
               convolutionMacsPerOutput(conv.getWeight().getType());
    } else if (auto grad = llvm::dyn_cast<kgraph::ConvInputGradOp>(op)) {
      flops += 2 * elements(grad.getGradOutput()) *
               convolutionMacsPerOutput(grad.getWeight().getType());
    } else if (auto grad = llvm::dyn_cast<kgraph::ConvWeightGradOp>(op)) {
      flops += 2 * elements(grad.getGradOutput()) *
               convolutionMacsPerOutput(grad.getGradWeight().getType());
    }
  });
  return flops;
}

/// One run of the pipeline up to `last` on `module`; `hbmTrades` as in
/// lowerModule. Diagnostics become the error's one line, naming the op and
/// its place.
llvm::Error runPipeline(ModuleOp module, const CompileOptions &options,
                        Phase last, const CompileHooks &hooks,
                        bool hbmTrades) {
  MLIRContext *context = module.getContext();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << d.getLocation() << ": " << d;
      if (diagnostics.empty()) {
        diagnostics = text;
      }
    }
    return success();
  });
  PassManager pm(context);
  if (auto error = buildPipeline(pm, options, last, hbmTrades)) {
    return error;
  }
  if (hooks.timing) {
    pm.enableTiming();
  }
  pm.enableVerifier(hooks.verifyEachPass);
  if (failed(pm.run(module)) ||
      (!hooks.verifyEachPass && failed(mlir::verify(module)))) {
    return llvm::createStringError(
        diagnostics.empty() ? std::string("the compile pipeline failed")
                            : diagnostics);
  }
  return llvm::Error::success();
}

llvm::Error lowerModule(ModuleOp module, const CompileOptions &options,
                        Phase last, const CompileHooks &hooks) {
  MLIRContext *context = module.getContext();
  // Counted once, on the graph as imported: IR already lowered (a kisa
  // program being assembled again) keeps what it carries.
  if (!module->hasAttr(emit::kModelFlopsAttr)) {
    if (double flops = modelFlops(module); flops > 0) {
      module->setAttr(emit::kModelFlopsAttr,
                      FloatAttr::get(Float64Type::get(context), flops));
    }
  }
  // The plan trades HBM for speed where it pays (bf16 copies of
  // convolutions' inputs, K-major copies of weights read transposed); where
  // the HBM plan then overflows, the pipeline runs again on the graph as
  // imported without those trades.
  OwningOpRef<ModuleOp> imported;
  if (last >= Phase::Tile) {
    imported = module.clone();
  }
  llvm::Error error = runPipeline(module, options, last, hooks, true);
  if (!error || !module->hasAttr(tile_passes::kHbmOverflowAttr)) {
    return error;
  }
  llvm::consumeError(std::move(error));
  if (auto again = runPipeline(*imported, options, last, hooks, false)) {
    return again;
  }
  module.getBodyRegion().takeBody(imported->getBodyRegion());
  module->setAttrs((*imported)->getAttrDictionary());
  return llvm::Error::success();
}

llvm::Expected<artifact::Artifact> compile(const proto::Graph &graph,
                                           const CompileOptions &options,
                                           const CompileHooks &hooks) {
  MLIRContext context(MLIRContext::Threading::DISABLED);
  prepareContext(context);
  auto module = graph::importGraph(graph, context);
  if (!module) {
    return module.takeError();
  }
  if (auto error = lowerModule(**module, options, Phase::Emit, hooks)) {
    return std::move(error);
  }
  auto program = emit::getProgram(**module);
  if (!program) {
    return program.takeError();
  }
  return emit::assembleProgram(*program);
}

llvm::Expected<std::string> compileToBytes(const proto::Graph &graph,
                                           const CompileOptions &options) {
  auto artifact = compile(graph, options);
  if (!artifact) {
    return artifact.takeError();
  }
  return artifact::writeArtifact(*artifact);
}

} // namespace kiln
