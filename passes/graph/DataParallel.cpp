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
#include "passes/graph/ShardedUpdate.h"

#include "mlir/Analysis/SliceAnalysis.h"

#include <map>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHDATAPARALLEL
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;
using kiln::graph_passes::ParameterBlock;
using kiln::graph_passes::ShardedUpdate;

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

    // ZeRO-1: the updates that run on a block of rows per worker.
    llvm::DenseMap<Operation *, ShardedUpdate> sharded;
    if (shardOptimizerState) {
      llvm::DenseSet<Operation *> claimed;
      for (GradientOp marker : markers) {
        std::optional<ShardedUpdate> update =
            ShardedUpdate::analyze(marker, worldSize);
        if (update && update->claim(claimed)) {
          sharded.try_emplace(marker, std::move(*update));
        }
      }
    }
    llvm::SmallVector<ParameterBlock> updatedBlocks;
    for (llvm::ArrayRef<GradientOp> bucket : formBuckets(markers, sharded)) {
      if (sharded.count(bucket.front())) {
        scatterBucket(bucket, sharded, updatedBlocks);
      } else {
        reduceBucket(bucket);
      }
    }
    gatherParameters(func, updatedBlocks);
    batchBlockSums(func);
    averageLossAndMetrics(func);
  }

  /// Program order, at most bucketBytes each (a larger gradient alone),
  /// one element type and one kind (reduced or scattered) per bucket.
  llvm::SmallVector<llvm::SmallVector<GradientOp>>
  formBuckets(llvm::ArrayRef<GradientOp> markers,
              const llvm::DenseMap<Operation *, ShardedUpdate> &sharded) {
    llvm::SmallVector<llvm::SmallVector<GradientOp>> buckets;
    int64_t bucketSize = 0;
    // A reduce-scatter bucket's parts are strided, so its gradients are
    // copied in: one of half a bucket or more goes alone, uncopied.
    auto alone = [&](GradientOp marker) {
      return sharded.count(marker) && 2 * bytesOf(marker.getInput()) >= bucketBytes;
    };
    for (GradientOp marker : markers) {
      int64_t size = bytesOf(marker.getInput());
      bool joins =
          !buckets.empty() && bucketSize + size <= bucketBytes &&
          !alone(marker) && !alone(buckets.back().front()) &&
          GraphEmitter::elementOf(buckets.back().front().getInput()) ==
              GraphEmitter::elementOf(marker.getInput()) &&
          sharded.count(buckets.back().front()) == sharded.count(marker) &&
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
    return buckets;
  }

  /// ZeRO-1: one reduce-scatter (mean) gives this worker its block of
  /// every gradient of the bucket: each gradient is viewed as [W, n/W]
  /// (row r: worker r's block) and the views are joined along their
  /// second dimension, so block r of the join is worker r's block of each.
  void scatterBucket(llvm::ArrayRef<GradientOp> bucket,
                     llvm::DenseMap<Operation *, ShardedUpdate> &sharded,
                     llvm::SmallVector<ParameterBlock> &updatedBlocks) {
    GradientOp last = bucket.back();
    OpBuilder builder(last);
    setInsertionAfter(builder, last.getInput());
    Location loc = last.getLoc();
    GraphEmitter e(builder, loc);
    auto scatter = [&](Value input, RankedTensorType type) {
      return ReduceScatterOp::create(builder, loc, type, input,
                                     builder.getStringAttr("mean"))
          .getOutput();
    };
    llvm::SmallVector<Value> blocks;
    if (bucket.size() == 1) {
      blocks.push_back(scatter(
          last.getInput(), sharded.find(last)->second.blockType()));
    } else {
      llvm::SmallVector<Value> rows;
      int64_t total = 0;
      for (GradientOp marker : bucket) {
        int64_t n = GraphEmitter::typeOf(marker.getInput()).getNumElements() /
                    worldSize;
        rows.push_back(e.reshape(marker.getInput(), {worldSize, n}));
        total += n;
      }
      Type element = GraphEmitter::elementOf(last.getInput());
      Value mine = scatter(e.concat(rows, 1),
                           RankedTensorType::get({1, total}, element));
      int64_t offset = 0;
      for (GradientOp marker : bucket) {
        RankedTensorType type = sharded.find(marker)->second.blockType();
        int64_t n = type.getNumElements();
        blocks.push_back(e.reshape(
            e.slice(mine, {0, offset}, {1, offset + n}, {1, 1}),
            type.getShape()));
        offset += n;
      }
    }
    for (auto [marker, block] : llvm::zip(bucket, blocks)) {
      updatedBlocks.append(
          sharded.find(marker)->second.rewrite(block, blockSums));
      marker->erase();
    }
  }

  /// ZeRO-1: every worker's block of each updated parameter, gathered into
  /// the whole in buckets as the gradients were scattered: the blocks of a
  /// bucket are joined, gathered as [W, joined] (row r: worker r's), and
  /// each parameter is its columns of that.
  void gatherParameters(func::FuncOp func,
                        llvm::SmallVector<ParameterBlock> blocks) {
    if (blocks.empty()) {
      return;
    }
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    llvm::stable_sort(blocks, [](const ParameterBlock &a,
                                 const ParameterBlock &b) {
      return a.block.getDefiningOp()->isBeforeInBlock(b.block.getDefiningOp());
    });
    llvm::SmallVector<llvm::SmallVector<ParameterBlock>> buckets;
    int64_t bucketSize = 0;
    for (const ParameterBlock &block : blocks) {
      int64_t size = bytesOf(block.block) * worldSize;
      if (buckets.empty() || bucketSize + size > bucketBytes ||
          GraphEmitter::elementOf(buckets.back().front().block) !=
              GraphEmitter::elementOf(block.block)) {
        buckets.emplace_back();
        bucketSize = 0;
      }
      buckets.back().push_back(block);
      bucketSize += size;
    }
    for (llvm::ArrayRef<ParameterBlock> bucket : buckets) {
      OpBuilder builder(ret);
      setInsertionAfter(builder, bucket.back().block);
      GraphEmitter e(builder, ret.getLoc());
      auto gather = [&](Value block, llvm::ArrayRef<int64_t> shape) {
        auto type = RankedTensorType::get(shape, GraphEmitter::elementOf(block));
        return AllGatherOp::create(builder, ret.getLoc(), type, block)
            .getOutput();
      };
      auto wholeShape = [&](const ParameterBlock &b) {
        return GraphEmitter::shapeOf(ret.getOperand(b.result));
      };
      if (bucket.size() == 1) {
        ret.setOperand(bucket.front().result,
                       gather(bucket.front().block, wholeShape(bucket.front())));
        continue;
      }
      llvm::SmallVector<Value> flat;
      int64_t total = 0;
      for (const ParameterBlock &b : bucket) {
        int64_t n = GraphEmitter::typeOf(b.block).getNumElements();
        flat.push_back(e.reshape(b.block, {n}));
        total += n;
      }
      Value all = e.reshape(gather(e.concat(flat, 0), {worldSize * total}),
                            {worldSize, total});
      int64_t offset = 0;
      for (const ParameterBlock &b : bucket) {
        int64_t n = GraphEmitter::typeOf(b.block).getNumElements();
        Value columns =
            e.slice(all, {0, offset}, {worldSize, offset + n}, {1, 1});
        ret.setOperand(b.result, e.reshape(columns, wholeShape(b)));
        offset += n;
      }
    }
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

  /// ZeRO-1's whole sums (a clipping norm's per parameter, LAMB's trust
  /// ratios) are each one element all-reduced: hop latency each. Those
  /// that do not depend on one another (as many all-reduces of them up
  /// the chain) are added by one all-reduce of their joined elements, right
  /// after the last of them; what read them before that point moves after
  /// it, in order.
  void batchBlockSums(func::FuncOp func) {
    llvm::DenseSet<Operation *> members;
    for (AllReduceOp sum : blockSums) {
      members.insert(sum);
    }
    llvm::DenseMap<Operation *, unsigned> depth;
    std::map<unsigned, llvm::SmallVector<AllReduceOp>> independent;
    for (Operation &op : func.getBody().front()) {
      unsigned d = 0;
      for (Value operand : op.getOperands()) {
        if (Operation *def = operand.getDefiningOp()) {
          d = std::max(d, depth.lookup(def) + (members.contains(def) ? 1 : 0));
        }
      }
      depth[&op] = d;
      if (members.contains(&op)) {
        independent[d].push_back(cast<AllReduceOp>(op));
      }
    }
    for (auto &[d, sums] : independent) {
      if (sums.size() > 1) {
        addTogether(sums);
      }
    }
    blockSums.clear();
  }

  /// ZeRO-1's all-reduces of whole sums' blocks (ShardedUpdate::rewrite).
  llvm::SmallVector<AllReduceOp> blockSums;

  void addTogether(llvm::SmallVector<AllReduceOp> sums) {
    // Earlier groups' moves may have reordered this one's.
    AllReduceOp last = *llvm::max_element(sums, [](AllReduceOp a, AllReduceOp b) {
      return a->isBeforeInBlock(b);
    });
    OpBuilder builder(last);
    builder.setInsertionPointAfter(last);
    GraphEmitter e(builder, last.getLoc());
    llvm::SmallVector<Value> parts;
    for (AllReduceOp sum : sums) {
      parts.push_back(e.reshape(sum.getInput(), {1}));
    }
    Value joined = e.concat(parts, 0);
    Value total = AllReduceOp::create(builder, last.getLoc(), joined.getType(),
                                      joined, builder.getStringAttr("sum"))
                      .getOutput();
    llvm::SmallVector<Value> totals;
    for (auto [i, sum] : llvm::enumerate(sums)) {
      int64_t at = static_cast<int64_t>(i);
      totals.push_back(e.reshape(e.slice(total, {at}, {at + 1}, {1}),
                                 GraphEmitter::shapeOf(sum->getResult(0))));
    }
    // Readers of the sums that stand before the new all-reduce follow it.
    Operation *anchor = totals.back().getDefiningOp();
    llvm::SetVector<Operation *> readers;
    for (AllReduceOp sum : sums) {
      getForwardSlice(sum.getOutput(), &readers);
    }
    llvm::SmallVector<Operation *> early;
    for (Operation *op : readers) {
      if (op->isBeforeInBlock(anchor)) {
        early.push_back(op);
      }
    }
    llvm::sort(early, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : early) {
      op->moveAfter(anchor);
      anchor = op;
    }
    for (auto [sum, whole] : llvm::zip(sums, totals)) {
      sum->getResult(0).replaceAllUsesWith(whole);
      sum->erase();
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
