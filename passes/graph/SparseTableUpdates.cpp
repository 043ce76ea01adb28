//===- SparseTableUpdates.cpp - embedding updates split by row -----------===//
//
// An embedding table's gradient is zero but in the rows the batch's tokens
// pick, yet the optimizer's update (AdamW: weight decay, moments) changes
// every row, so it reads and writes the whole table and its state (BERT's
// 30522-row table: 0.56 GB) after the last gradient, as the step's tail.
// Elementwise, the update of a row the batch does not pick is the update
// with a zero gradient, which needs nothing from the backward pass. So the
// update runs twice: over the whole table with a zero gradient, which
// kgraph-schedule-updates moves to the start of the step where the forward
// pass leaves the DMA queues room; and over the picked rows alone, gathered
// before the first one writes, with their gradient rows. The picked rows'
// results then overwrite the first update's (scatter_rows). In a
// data-parallel group the picked rows are every worker's (an all_gather
// of the indices), and each worker's gradient in them, not the dense one,
// is what the group averages.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SetVector.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHSPARSETABLEUPDATES
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;
using kiln::graph_passes::isElementwise;

namespace {

/// A table with fewer than this many rows per token the update covers (a
/// group's, when its gradient is averaged) keeps its dense update: the
/// split one's whole-table half slows the forward pass it is spread over,
/// and its picked half (row scatters of 128 rows, one after another) ends
/// the step, so the split pays for a table well beyond its tokens. On
/// BERT-base (30522 rows, 1024 tokens a worker) it gains at 30 rows a token
/// (one worker) and 15 (two), and loses at 7.5 (four workers).
constexpr int64_t kRowsPerToken = 8;

/// Whether `v` broadcasts alike to every row of a [V, D] result: a scalar,
/// a [D] vector or a [1, D] row.
bool sameForEveryRow(Value v) {
  auto shape = GraphEmitter::shapeOf(v);
  return shape.size() < 2 || (shape.size() == 2 && shape[0] == 1);
}

/// The elementwise ops that compute a table's update from its gradient,
/// with what they read and which of their values leave.
struct TableUpdate {
  llvm::SmallVector<Operation *> ops;         // program order
  llvm::SetVector<BlockArgument> tableLeaves; // [V, D] arguments read
  llvm::SmallVector<Value> outputs;           // values only returned
};

/// The update of `gradient` ([V, D]), or nothing when its ops read other
/// [V, D] values than arguments, or their values leave other than to the
/// function's results.
std::optional<TableUpdate> findUpdate(Value gradient) {
  auto shape = GraphEmitter::shapeOf(gradient);
  auto isTableOp = [&](Operation *op) {
    return isElementwise(op) && !llvm::isa<DropoutOp>(op) &&
           op->getNumResults() == 1 &&
           GraphEmitter::shapeOf(op->getResult(0)) == shape;
  };
  llvm::SmallPtrSet<Operation *, 32> members;
  llvm::SmallVector<Operation *> work;
  auto join = [&](Operation *op) {
    if (members.insert(op).second) {
      work.push_back(op);
    }
  };
  for (Operation *user : gradient.getUsers()) {
    if (!isTableOp(user)) {
      return std::nullopt;
    }
    join(user);
  }
  // Forward through the users, back through the table-shaped operands
  // (the decayed weight, the decayed moments).
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Operation *user : op->getResult(0).getUsers()) {
      if (isTableOp(user)) {
        join(user);
      }
    }
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (operand == gradient || sameForEveryRow(operand)) {
        continue;
      }
      if (def && isTableOp(def)) {
        join(def);
      } else if (!llvm::isa<BlockArgument>(operand) ||
                 GraphEmitter::shapeOf(operand) != shape) {
        return std::nullopt;
      }
    }
  }
  TableUpdate update;
  Block *block = gradient.getParentBlock();
  for (Operation &op : *block) {
    if (!members.contains(&op)) {
      continue;
    }
    update.ops.push_back(&op);
    for (Value operand : op.getOperands()) {
      if (auto arg = llvm::dyn_cast<BlockArgument>(operand)) {
        if (!sameForEveryRow(arg)) {
          update.tableLeaves.insert(arg);
        }
      }
    }
    Value result = op.getResult(0);
    bool leaves = false, onlyReturned = true;
    for (Operation *user : result.getUsers()) {
      if (!members.contains(user)) {
        leaves = true;
        onlyReturned = onlyReturned && llvm::isa<func::ReturnOp>(user);
      }
    }
    if (leaves && !onlyReturned) {
      return std::nullopt;
    }
    if (leaves) {
      update.outputs.push_back(result);
    }
  }
  if (update.outputs.empty()) {
    return std::nullopt;
  }
  return update;
}

/// Copies of `ops` reading `mapping`'s values instead, their results
/// `rows` rows long (the ops are elementwise: the copies' operands decide).
void cloneOver(OpBuilder &b, llvm::ArrayRef<Operation *> ops,
               IRMapping &mapping, int64_t rows) {
  for (Operation *op : ops) {
    Operation *copy = b.clone(*op, mapping);
    auto type = llvm::cast<RankedTensorType>(copy->getResult(0).getType());
    llvm::SmallVector<int64_t> shape(type.getShape());
    shape[0] = rows;
    copy->getResult(0).setType(type.clone(shape));
  }
}

/// Copies of `ops` over the whole table with `zero` for the gradient, the
/// arithmetic the zero makes trivial left out: a product with it is zero,
/// a sum with it or a difference less it is the other operand. Only the
/// sign of a zero result can differ from computing it (AdamW's moments
/// decay, the weight decays, and the squares and products of the gradient
/// go): for BERT's table that halves GpSimd's `tensor_tensor`s.
void cloneWithZeroGradient(OpBuilder &b, llvm::ArrayRef<Operation *> ops,
                           IRMapping &mapping, Value zero) {
  auto type = llvm::cast<RankedTensorType>(zero.getType());
  auto isZero = [&](Value v) { return mapping.lookupOrDefault(v) == zero; };
  for (Operation *op : ops) {
    Value result = op->getResult(0);
    auto sameType = [&](Value v) {
      return mapping.lookupOrDefault(v).getType() == result.getType();
    };
    if (result.getType() == type && llvm::isa<MulOp>(op) &&
        llvm::any_of(op->getOperands(), isZero)) {
      mapping.map(result, zero);
      continue;
    }
    if (llvm::isa<AddOp, SubOp>(op)) {
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      if (isZero(rhs) && sameType(lhs)) {
        mapping.map(result, mapping.lookupOrDefault(lhs));
        continue;
      }
      if (llvm::isa<AddOp>(op) && isZero(lhs) && sameType(rhs)) {
        mapping.map(result, mapping.lookupOrDefault(rhs));
        continue;
      }
    }
    b.clone(*op, mapping);
  }
}

/// The gradient rows at the rows `picked` names ([R] indices) of the
/// tokens whose indices are `tokens` ([T]) and whose output gradient rows
/// are `dy` ([T, D]): row i is the sum of the rows of every token that
/// picks i's row, E . dY with E[i, j] = (picked[i] == tokens[j]); padding
/// tokens add nothing.
Value pickedGradient(GraphEmitter &e, EmbeddingBackwardOp op, Value picked,
                     Value tokens, Value dy) {
  int64_t rows = GraphEmitter::typeOf(picked).getNumElements();
  int64_t count = GraphEmitter::typeOf(tokens).getNumElements();
  Type t = GraphEmitter::elementOf(op.getOutput());
  dy = e.zeroPaddingRows(dy, tokens, op.getPaddingIdxAttr().getInt());
  Value same = e.cast(e.compare("eq", e.reshape(picked, {rows, 1}),
                                e.reshape(tokens, {1, count})),
                      t);
  return e.matmul(same, dy);
}

/// Splits the update of embedding_backward `op`'s table; false when `op`
/// has none this pass can split. A gradient marked for averaging across a
/// group of `worldSize` above 1 changes the rows any worker picks: each
/// worker computes its own gradient at all of them and marks that for
/// averaging instead (kgraph-data-parallel then buckets it).
bool split(EmbeddingBackwardOp op, int64_t worldSize) {
  Value indices = op.getIndices();
  Value gradient = op.getOutput();
  GradientOp marker;
  if (gradient.hasOneUse()) {
    marker = llvm::dyn_cast<GradientOp>(*gradient.getUsers().begin());
  }
  if (marker) {
    gradient = marker.getOutput();
  }
  int64_t group = marker ? worldSize : 1;
  int64_t tokens = GraphEmitter::typeOf(indices).getNumElements();
  auto tableShape = GraphEmitter::shapeOf(op.getOutput());
  int64_t width = tableShape[1];
  if (tableShape[0] < kRowsPerToken * group * tokens) {
    return false;
  }
  std::optional<TableUpdate> update = findUpdate(gradient);
  if (!update) {
    return false;
  }
  OpBuilder b(op);
  GraphEmitter e(b, op.getLoc());

  // The picked rows of the table and its state, gathered as soon as the
  // indices exist: before the whole-table update writes over them. In a
  // group, the rows any worker picks: every worker's indices, in rank
  // order (a row several workers pick comes several times).
  if (Operation *def = indices.getDefiningOp()) {
    b.setInsertionPointAfter(def);
  } else {
    b.setInsertionPointToStart(indices.getParentBlock());
  }
  Value flat = e.reshape(indices, {tokens});
  Value rows = flat;
  if (group > 1) {
    auto type = GraphEmitter::typeOf(flat);
    rows =
        AllGatherOp::create(b, op.getLoc(), type.clone({group * tokens}), flat)
            .getOutput();
  }
  IRMapping picked;
  for (BlockArgument leaf : update->tableLeaves) {
    picked.map(leaf, EmbeddingOp::create(b, op.getLoc(), leaf, rows));
  }

  // Both updates where the last op of the original stands: whatever it
  // reads exists there.
  b.setInsertionPoint(update->ops.back());
  Value dy = e.reshape(op.getGradOutput(), {tokens, width});
  Value rowGradient = pickedGradient(e, op, rows, flat, dy);
  if (marker) {
    // This worker's gradient in the group's rows, averaged like the dense
    // one was: the group's mean there.
    rowGradient = GradientOp::create(b, marker.getLoc(), rowGradient.getType(),
                                     rowGradient, marker.getParameterAttr())
                      .getOutput();
  }
  picked.map(gradient, rowGradient);
  cloneOver(b, update->ops, picked, group * tokens);

  IRMapping whole;
  Value zero = e.splat(0.0, tableShape, GraphEmitter::elementOf(gradient));
  whole.map(gradient, zero);
  cloneWithZeroGradient(b, update->ops, whole, zero);

  b.setInsertionPoint(update->ops.back()->getBlock()->getTerminator());
  for (Value output : update->outputs) {
    Value merged = ScatterRowsOp::create(b, op.getLoc(), whole.lookup(output),
                                         rows, picked.lookup(output));
    output.replaceAllUsesWith(merged);
  }
  for (Operation *dead : llvm::reverse(update->ops)) {
    dead->erase();
  }
  if (zero.use_empty()) {
    zero.getDefiningOp()->erase();
  }
  if (marker) {
    marker->erase();
  }
  op->erase();
  return true;
}

struct KGraphSparseTableUpdates
    : kiln::graph_passes::impl::KGraphSparseTableUpdatesBase<
          KGraphSparseTableUpdates> {
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<EmbeddingBackwardOp> candidates;
    getOperation().walk(
        [&](EmbeddingBackwardOp op) { candidates.push_back(op); });
    for (EmbeddingBackwardOp op : candidates) {
      split(op, worldSize);
    }
  }
};

} // namespace
