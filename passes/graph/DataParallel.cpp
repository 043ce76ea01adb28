//===- DataParallel.cpp - gradient, loss and metric averaging -------------===//
//
// Replaces the front end's `kgraph.gradient` markers with bucketed
// all-reduces (see Passes.td). Buckets follow program order, which is the
// order the backward pass produces gradients in, and each bucket is reduced
// right where its last gradient is produced, so the first bucket's
// collective can start while the rest of the backward pass still runs.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/Passes.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHDATAPARALLEL
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

int64_t bytesOf(Value v) {
  RankedTensorType type = GraphEmitter::typeOf(v);
  return type.getNumElements() *
         static_cast<int64_t>(type.getElementTypeBitWidth() / 8);
}

/// Where a bucket whose gradients are all available after `producer` is
/// reduced: right after it (the start of the block for an argument).
void setInsertionAfter(OpBuilder &builder, Value producer) {
  if (Operation *op = producer.getDefiningOp()) {
    builder.setInsertionPointAfter(op);
  } else {
    builder.setInsertionPointToStart(cast<BlockArgument>(producer).getOwner());
  }
}

/// True if some use of `marker`'s result comes before the point right after
/// `producer`: a bucket reduced there would not dominate that use.
bool usedBefore(GradientOp marker, Value producer) {
  Operation *position = producer.getDefiningOp();
  if (!position) {
    return false;
  }
  for (Operation *user : marker.getOutput().getUsers()) {
    if (user == position || user->isBeforeInBlock(position)) {
      return true;
    }
  }
  return false;
}

Value allReduceMean(OpBuilder &builder, Location loc, Value input) {
  return AllReduceOp::create(builder, loc, input.getType(), input,
                             builder.getStringAttr("mean"))
      .getOutput();
}

struct KGraphDataParallel
    : kiln::graph_passes::impl::KGraphDataParallelBase<KGraphDataParallel> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    llvm::SmallVector<GradientOp> markers;
    func.walk([&](GradientOp op) { markers.push_back(op); });
    // Front ends mark gradients where they have them all (after the whole
    // backward pass); what matters is when each one is *produced*.
    llvm::DenseMap<Operation *, unsigned> order;
    func.walk([&](Operation *op) { order[op] = order.size(); });
    auto produced = [&](GradientOp marker) -> unsigned {
      Operation *op = marker.getInput().getDefiningOp();
      return op ? order.lookup(op) + 1 : 0;
    };
    llvm::stable_sort(markers, [&](GradientOp a, GradientOp b) {
      return produced(a) < produced(b);
    });
    if (worldSize <= 1) {
      for (GradientOp marker : markers) {
        marker.getOutput().replaceAllUsesWith(marker.getInput());
        marker.erase();
      }
      return;
    }

    llvm::SmallVector<llvm::SmallVector<GradientOp>> buckets;
    int64_t bucketSize = 0;
    for (GradientOp marker : markers) {
      int64_t size = bytesOf(marker.getInput());
      bool joins = !buckets.empty() && bucketSize + size <= bucketBytes &&
                   GraphEmitter::elementOf(buckets.back().front().getInput()) ==
                       GraphEmitter::elementOf(marker.getInput()) &&
                   llvm::none_of(buckets.back(), [&](GradientOp earlier) {
                     return usedBefore(earlier, marker.getInput());
                   });
      if (!joins) {
        buckets.emplace_back();
        bucketSize = 0;
      }
      buckets.back().push_back(marker);
      bucketSize += size;
    }
    for (llvm::ArrayRef<GradientOp> bucket : buckets) {
      reduceBucket(bucket);
    }
    averageLossAndMetrics(func);
  }

  void reduceBucket(llvm::ArrayRef<GradientOp> bucket) {
    GradientOp last = bucket.back();
    OpBuilder builder(last);
    setInsertionAfter(builder, last.getInput());
    Location loc = last.getLoc();
    if (bucket.size() == 1) {
      Value reduced = allReduceMean(builder, loc, last.getInput());
      last.getOutput().replaceAllUsesWith(reduced);
      last.erase();
      return;
    }
    GraphEmitter e(builder, loc);
    llvm::SmallVector<Value> flat;
    int64_t total = 0;
    for (GradientOp marker : bucket) {
      int64_t n = GraphEmitter::typeOf(marker.getInput()).getNumElements();
      flat.push_back(e.reshape(marker.getInput(), {n}));
      total += n;
    }
    Type element = GraphEmitter::elementOf(last.getInput());
    auto bucketType = RankedTensorType::get({total}, element);
    Value packed = ConcatOp::create(builder, loc, bucketType, flat,
                                    builder.getI64IntegerAttr(0))
                       .getOutput();
    Value reduced = allReduceMean(builder, loc, packed);
    int64_t offset = 0;
    for (GradientOp marker : bucket) {
      RankedTensorType type = GraphEmitter::typeOf(marker.getInput());
      int64_t n = type.getNumElements();
      Value piece =
          SliceOp::create(builder, loc, RankedTensorType::get({n}, element),
                          reduced, builder.getDenseI64ArrayAttr({offset}),
                          builder.getDenseI64ArrayAttr({offset + n}),
                          builder.getDenseI64ArrayAttr({1}))
              .getOutput();
      marker.getOutput().replaceAllUsesWith(e.reshape(piece, type.getShape()));
      offset += n;
    }
    for (GradientOp marker : bucket) {
      marker.erase();
    }
  }

  void averageLossAndMetrics(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    OpBuilder builder(ret);
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto role = func.getResultAttrOfType<StringAttr>(i, kRoleAttr);
      Value value = ret.getOperand(i);
      if (!role || (role.getValue() != "loss" && role.getValue() != "metric") ||
          !isa<FloatType>(GraphEmitter::elementOf(value))) {
        continue;
      }
      ret.setOperand(i, allReduceMean(builder, ret.getLoc(), value));
    }
  }
};

} // namespace
