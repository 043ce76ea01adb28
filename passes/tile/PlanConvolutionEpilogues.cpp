//===- PlanConvolutionEpilogues.cpp - work a convolution does on its tiles ===//
//
// Part of kgraph-plan-epilogues (see EpiloguePlan.cpp): the elementwise
// group a convolution computes on each block of its output as the block
// leaves PSUM, so that the output is neither stored for it nor read back:
// a bias and an activation (`relu(conv(x, w) + b)`), eval-mode batch norm
// after a convolution, a residual addition. The group's other inputs are
// read per block in the output's layout (a per-channel value is one
// column, loaded once per channel tile).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/TilePlanner.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

namespace {

/// Whether a convolution's epilogue computes `op` (no ops that number
/// their elements, as dropout's random draws do).
bool computableOnBlocks(Operation *op) {
  return graph_passes::isElementwise(op) && !llvm::isa<DropoutOp>(op);
}

} // namespace

namespace kiln::tile_passes {

/// The group of the readers of each convolution's (or input gradient's)
/// output, when they are all in that one group, it computes on the output
/// only, and it fits (groupFitsEpilogue). A convolution whose output is
/// summed per channel (kgraph.sum_beside) has a reader outside any group
/// and keeps its plain evacuation.
void TilePlanner::planConvolutionEpilogues() {
  for (Operation &op : source.getBody().front()) {
    if (!llvm::isa<ConvOp, ConvInputGradOp>(&op) || op.use_empty()) {
      continue;
    }
    Operation *cast = matmulResultCast.lookup(&op);
    Value value = cast ? cast->getResult(0) : op.getResult(0);
    if (value.use_empty()) {
      continue;
    }
    std::optional<int64_t> id = fusionId(*value.getUsers().begin());
    bool oneGroup = id && llvm::all_of(value.getUsers(), [&](Operation *u) {
                      return fusionId(u) == id;
                    });
    if (!oneGroup || epilogueAt.count(*id)) {
      continue;
    }
    auto &members = groups[*id];
    int64_t rank = tensorType(value).getRank();
    bool onBlocks = llvm::all_of(members, [&](Operation *member) {
      return computableOnBlocks(member) && !chainOf.count(member) &&
             llvm::all_of(member->getOperands(), [&](Value v) {
               int64_t r = tensorType(v).getRank();
               return r == 0 || r == rank;
             });
    });
    llvm::SetVector<Operation *> views;
    if (onBlocks && groupFitsEpilogue(&op, value, members, views)) {
      recordEpilogue(&op, *id, views);
    }
  }
}

} // namespace kiln::tile_passes
