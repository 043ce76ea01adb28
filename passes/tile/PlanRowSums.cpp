//===- PlanRowSums.cpp - where each row sum is computed -------------------===//
//
// kgraph-plan-row-sums: layout assignment writes a sum over rows as
// `ones[1, R] . V`. Rather than run alone and read V back from HBM, such a
// sum is computed where V's tiles already are: beside the weight gradient
// whose stationary operand V is (kgraph.sum_beside), or in the loop nest
// of the group that computes V (kgraph.sum_in_loop_nest). Batch norm's
// per-channel sum of a convolution's output is computed by the
// convolution as its tiles leave PSUM (kgraph.sum_beside on the sum).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/TilePlan.h"
#include "passes/tile/Passes.h"

namespace kiln::tile_passes {
#define GEN_PASS_DEF_KGRAPHPLANROWSUMS
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

namespace {

/// The earlier plain 2-D product `transpose(G) . X` whose stationary tiles
/// are those of G, the operand of the row sum `sum` = `ones[1, K] . G`.
MatmulOp productBeside(MatmulOp sum,
                       llvm::DenseMap<Operation *, unsigned> &position) {
  for (Operation *user : sum.getRhs().getUsers()) {
    auto transpose = llvm::dyn_cast<TransposeOp>(user);
    if (!transpose ||
        transpose.getPermutation() != llvm::ArrayRef<int64_t>{1, 0}) {
      continue;
    }
    auto product = llvm::find_if(transpose->getUsers(), [&](Operation *u) {
      auto m = llvm::dyn_cast<MatmulOp>(u);
      return m && isPlain2d(m) && m.getLhs() == transpose.getOutput() &&
             position[m] < position[sum];
    });
    if (product != transpose->getUsers().end()) {
      return llvm::cast<MatmulOp>(*product);
    }
  }
  return {};
}

/// Whether V, seen as [R, C] by `sum`, is a value of a group of V's shape
/// computed before the sum: a candidate for the group's loop nest (which
/// may not take it; it then runs where it stands).
bool summedInLoopNest(MatmulOp sum,
                      llvm::DenseMap<Operation *, unsigned> &position,
                      llvm::DenseMap<int64_t, Operation *> &lastOfGroup) {
  Value v = sum.getRhs();
  if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    v = reshape.getInput();
  }
  Operation *def = v.getDefiningOp();
  if (!def || !graph_passes::isElementwise(def)) {
    return false;
  }
  // A group runs where its last op stands; a lone op is a group of one.
  auto id = fusionId(def);
  Operation *last = id ? lastOfGroup[*id] : def;
  auto shape = tensorType(v).getShape();
  return shape.size() >= 2 &&
         tensorType(last->getResult(0)).getShape() == shape &&
         shape.back() == tensorType(sum.getRhs()).getShape().back() &&
         position[last] <= position[sum];
}

struct KGraphPlanRowSums
    : kiln::tile_passes::impl::KGraphPlanRowSumsBase<KGraphPlanRowSums> {
  void runOnOperation() override {
    Block &body = getOperation().getBody().front();
    llvm::DenseMap<Operation *, unsigned> position;
    llvm::DenseMap<int64_t, Operation *> lastOfGroup;
    unsigned index = 0;
    for (Operation &op : body) {
      position[&op] = index++;
      if (auto id = fusionId(&op)) {
        lastOfGroup[*id] = &op;
      }
    }
    Builder builder(&getContext());
    int64_t products = 0;
    auto sumBeside = [&](Operation *sum, Operation *product) {
      auto label = product->getAttrOfType<IntegerAttr>(kProductAttr);
      if (!label) {
        label = builder.getI64IntegerAttr(products++);
        product->setAttr(kProductAttr, label);
      }
      sum->setAttr(kSumBesideAttr, label);
    };
    for (Operation &op : body) {
      if (auto channelSum = llvm::dyn_cast<ReduceSumOp>(&op)) {
        if (Operation *conv = channelSummedConvolution(channelSum)) {
          sumBeside(channelSum, conv);
        }
        continue;
      }
      auto sum = llvm::dyn_cast<MatmulOp>(&op);
      if (!sum || !isRowSum(sum)) {
        continue;
      }
      if (MatmulOp product = productBeside(sum, position)) {
        sumBeside(sum, product);
      } else if (summedInLoopNest(sum, position, lastOfGroup)) {
        sum->setAttr(kSumInLoopNestAttr, builder.getUnitAttr());
      }
    }
  }
};

} // namespace

/// Reads what kgraph-plan-row-sums planned: the row sums a weight
/// gradient computes beside itself and the per-channel sums a convolution
/// computes (kgraph.sum_beside), and the row sums a group's loop nest may
/// fold (kgraph.sum_in_loop_nest), keyed by the group's last op (a lone
/// op's own).
void TilePlan::readRowSumPlan() {
  llvm::DenseMap<int64_t, Operation *> products;
  for (Operation &op : source.getBody().front()) {
    if (auto label = op.getAttrOfType<IntegerAttr>(kProductAttr)) {
      products[label.getInt()] = &op;
    }
    auto sum = llvm::dyn_cast<MatmulOp>(&op);
    auto label = op.getAttrOfType<IntegerAttr>(kSumBesideAttr);
    if (label && !sum) {
      channelSumsOf[products.lookup(label.getInt())].push_back(&op);
    } else if (label) {
      columnSumsOf[products.lookup(label.getInt())].push_back(sum);
      summedBySibling.insert(sum);
    } else if (sum && op.hasAttr(kSumInLoopNestAttr)) {
      Value v = sum.getRhs();
      if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
        v = reshape.getInput();
      }
      Operation *def = v.getDefiningOp();
      auto id = fusionId(def);
      rowSumsOf[id ? groups[*id].back() : def].push_back({sum, v});
      rowSumCandidates.insert(sum);
    }
  }
}
