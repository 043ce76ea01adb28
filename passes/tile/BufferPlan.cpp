//===- BufferPlan.cpp - kgraph-plan-buffers, and reading its plan ---------===//
//
// The pass decides, with the planning of PlanLowering.cpp, which results
// are computed straight into an argument's buffer (an updated parameter
// over the parameter, a table's row scatter over the table) and which
// concat inputs straight into their part of the concat's buffer, and
// records it on the kgraph ops; convert-kgraph-to-ktile reads it back:
//   kgraph.in_place = [A...]: result r is computed into argument A[r]'s
//     buffer (-1: not);
//   kgraph.into_slices = [I...] on a concat: inputs I are computed into
//     their part of its buffer, through the views between;
//   kgraph.copied_into = [A...]: result r is copied into argument A[r]'s
//     buffer right after it is computed (-1: not), so its own dies there.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"
#include "passes/tile/TilePlanner.h"
#include "passes/tile/Passes.h"

namespace kiln::tile_passes {
#define GEN_PASS_DEF_KGRAPHPLANBUFFERS
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;

void TilePlanner::recordBufferPlan() {
  readMatmulOperandPlan();
  readRowSumPlan();
  readEpiloguePlan();
  planInPlace();
  planConcats();
  Builder builder(source.getContext());
  for (Operation &op : source.getBody().front()) {
    for (auto [name, plan] : {std::pair{kInPlaceAttr, &inPlace},
                              std::pair{kCopiedIntoAttr, &copiedEarly}}) {
      llvm::SmallVector<int64_t, 1> args;
      for (Value result : op.getResults()) {
        auto it = plan->find(result);
        args.push_back(it == plan->end() ? -1 : int64_t(it->second));
      }
      if (llvm::any_of(args, [](int64_t a) { return a >= 0; })) {
        op.setAttr(name, builder.getDenseI64ArrayAttr(args));
      }
    }
  }
  for (auto &[concat, inputs] : concatsIntoSlices) {
    concat->setAttr(kIntoSlicesAttr, builder.getDenseI64ArrayAttr(inputs));
  }
}

/// The reading of recordBufferPlan: the results computed in place, and the
/// concat inputs computed into their parts of the concat's buffer.
void TilePlan::readBufferPlan() {
  for (Operation &op : source.getBody().front()) {
    for (auto [name, plan] : {std::pair{kInPlaceAttr, &inPlace},
                              std::pair{kCopiedIntoAttr, &copiedEarly}}) {
      if (auto args = op.getAttrOfType<DenseI64ArrayAttr>(name)) {
        for (auto [result, arg] :
             llvm::zip(op.getResults(), args.asArrayRef())) {
          if (arg >= 0) {
            (*plan)[result] = static_cast<unsigned>(arg);
          }
        }
      }
    }
    if (auto inputs = op.getAttrOfType<DenseI64ArrayAttr>(kIntoSlicesAttr)) {
      llvm::append_range(concatsIntoSlices[&op], inputs.asArrayRef());
    }
  }
}

void FunctionLowering::placeConcats() {
  for (auto &[op, inputs] : concatsIntoSlices) {
    auto concat = llvm::cast<ConcatOp>(op);
    auto type = tensorType(concat.getOutput());
    HbmView whole = viewOfBuffer(
        tb.hbm(type.getShape(), deviceType(type.getElementType())), type);
    for (int64_t i : inputs) {
      if (auto slice = concatSlice(concat, i, whole)) {
        destinations[slice->first] = slice->second;
      }
    }
    destinations[concat.getOutput()] = whole;
    unplacedBuffers.insert(whole.buffer.getDefiningOp());
  }
}

namespace {

struct KGraphPlanBuffers
    : kiln::tile_passes::impl::KGraphPlanBuffersBase<KGraphPlanBuffers> {
  void runOnOperation() override {
    // The buffer plan reads no target figure; trn1 stands in for any.
    TilePlanner(getOperation(), *target::lookupTarget("trn1"))
        .recordBufferPlan();
  }
};

} // namespace
