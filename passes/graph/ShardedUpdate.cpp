//===- ShardedUpdate.cpp - one parameter's update on a block of its rows --===//

#include "passes/graph/ShardedUpdate.h"

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/OpClasses.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::graph_passes {

namespace {

llvm::StringRef roleOf(func::FuncOp func, BlockArgument arg) {
  auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
  return role ? role.getValue() : "";
}

/// `ops` in block order (all in one block).
llvm::SmallVector<Operation *> inBlockOrder(llvm::ArrayRef<Operation *> ops) {
  llvm::SmallVector<Operation *> order(ops.begin(), ops.end());
  llvm::sort(order, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  return order;
}

} // namespace

std::optional<ShardedUpdate> ShardedUpdate::analyze(GradientOp marker,
                                                    int64_t group) {
  RankedTensorType type = GraphEmitter::typeOf(marker.getOutput());
  if (group < 2 || type.getRank() == 0 || type.getDimSize(0) % group != 0) {
    return std::nullopt;
  }
  ShardedUpdate update(marker, group);
  update.func = marker->getParentOfType<func::FuncOp>();
  for (BlockArgument arg : update.func.getArguments()) {
    auto name =
        update.func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (name && name.getValue() == marker.getParameter() &&
        update.isFullShaped(arg)) {
      update.parameter = arg;
    }
  }
  if (!update.parameter) {
    return std::nullopt;
  }
  update.derived.insert(marker.getOutput());
  if (!update.followUses(marker.getOutput()) ||
      update.parameterResults.empty() || !update.allUsesRewritten()) {
    return std::nullopt;
  }
  return update;
}

bool ShardedUpdate::claim(llvm::DenseSet<Operation *> &claimed) const {
  if (llvm::any_of(ops, [&](Operation *op) { return claimed.contains(op); })) {
    return false;
  }
  claimed.insert(ops.begin(), ops.end());
  return true;
}

RankedTensorType ShardedUpdate::blockOf(Type full) const {
  auto type = llvm::cast<RankedTensorType>(full);
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[0] /= group;
  return RankedTensorType::get(shape, type.getElementType());
}

RankedTensorType ShardedUpdate::blockType() const {
  return blockOf(fullType);
}

bool ShardedUpdate::isFullShaped(Value v) const {
  auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
  return type && type.getShape() == fullType.getShape();
}

/// An operand of an op of the parameter's shape that broadcasts along the
/// first dimension (a scalar, a row): every block reads it whole.
bool ShardedUpdate::isAlikeInEveryRow(Value operand) const {
  RankedTensorType type = GraphEmitter::typeOf(operand);
  return type.getRank() < fullType.getRank() || type.getDimSize(0) == 1;
}

/// Walks everything computed from `start`; false at a use the rewrite
/// cannot follow.
bool ShardedUpdate::followUses(Value start) {
  llvm::SmallVector<Value> work{start};
  auto derive = [&](Operation *op) {
    for (Value result : op->getResults()) {
      if (derived.insert(result).second) {
        work.push_back(result);
      }
    }
  };
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(user)) {
        if (!acceptReturn(ret, use.getOperandNumber())) {
          return false;
        }
        continue;
      }
      if (auto sum = llvm::dyn_cast<ReduceSumOp>(user)) {
        // Only a sum of every element adds up from the blocks' sums.
        if (static_cast<int64_t>(sum.getDims().size()) !=
            GraphEmitter::typeOf(value).getRank()) {
          return false;
        }
        sums.insert(user);
        continue;
      }
      if (ops.contains(user)) {
        derive(user); // reached first as an operand of the update
        continue;
      }
      if (!isElementwise(user) ||
          !llvm::all_of(user->getResults(),
                        [&](Value r) { return isFullShaped(r); }) ||
          !readsOnlyBlocks(user)) {
        return false;
      }
      ops.insert(user);
      derive(user);
    }
  }
  return true;
}

bool ShardedUpdate::acceptReturn(func::ReturnOp, unsigned index) {
  auto role = func.getResultAttrOfType<StringAttr>(index, kRoleAttr);
  auto alias = func.getResultAttrOfType<IntegerAttr>(index, kAliasesAttr);
  if (!role || !alias) {
    return false;
  }
  BlockArgument arg = func.getArgument(alias.getInt());
  if (role.getValue() == "updated_parameter" && arg == parameter) {
    parameterResults.push_back(index);
    return true;
  }
  if (role.getValue() == "updated_state" &&
      roleOf(func, arg) == "optimizer_state" && isFullShaped(arg)) {
    stateResults.push_back(index);
    state.insert(arg);
    return true;
  }
  return false;
}

bool ShardedUpdate::readsOnlyBlocks(Operation *op) {
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return isAlikeInEveryRow(operand) ||
           (isFullShaped(operand) && isBlockable(operand));
  });
}

/// A value of the parameter's shape whose block each worker can compute:
/// the gradient's, the parameter's own, its optimizer state's, a splat
/// constant, or elementwise ops of those and scalars.
bool ShardedUpdate::isBlockable(Value v) {
  if (derived.contains(v)) {
    return true;
  }
  if (auto known = blockable.find(v); known != blockable.end()) {
    return known->second;
  }
  bool ok = false;
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    ok = arg == parameter || roleOf(func, arg) == "optimizer_state";
    if (ok && arg != parameter) {
      state.insert(arg);
    }
  } else if (auto constant = v.getDefiningOp<ConstantOp>()) {
    ok = llvm::isa<SplatElementsAttr>(Attribute(constant.getValue()));
  } else if (Operation *op = v.getDefiningOp();
             op && isElementwise(op) &&
             llvm::all_of(op->getResults(),
                          [&](Value r) { return isFullShaped(r); })) {
    ok = readsOnlyBlocks(op);
    if (ok) {
      ops.insert(op);
    }
  }
  blockable[v] = ok;
  return ok;
}

/// Everything that reads the update's values or the state it shards is
/// rewritten too: nothing else would see a block where it expects all rows.
bool ShardedUpdate::allUsesRewritten() const {
  auto rewritten = [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (ops.contains(user) || sums.contains(user)) {
      return true;
    }
    unsigned index = use.getOperandNumber();
    return llvm::isa<func::ReturnOp>(user) &&
           (llvm::is_contained(parameterResults, index) ||
            llvm::is_contained(stateResults, index));
  };
  for (Operation *op : ops) {
    for (Value result : op->getResults()) {
      if (!llvm::all_of(result.getUses(), rewritten)) {
        return false;
      }
    }
  }
  for (BlockArgument arg : state) {
    if (!llvm::all_of(arg.getUses(), rewritten)) {
      return false;
    }
  }
  return true;
}

llvm::SmallVector<ParameterBlock>
ShardedUpdate::rewrite(Value gradientBlock,
                       llvm::SmallVectorImpl<AllReduceOp> &blockSums) {
  IRMapping blocks;
  blocks.map(marker.getOutput(), gradientBlock);
  for (BlockArgument arg : state) {
    arg.setType(blockOf(arg.getType()));
  }
  OpBuilder builder(func.getContext());
  llvm::SmallVector<Operation *> order = inBlockOrder(ops.getArrayRef());
  for (Operation *op : order) {
    builder.setInsertionPoint(op);
    for (Value operand : op->getOperands()) {
      if (blocks.contains(operand) || !isFullShaped(operand) ||
          (llvm::isa<BlockArgument>(operand) && operand != parameter)) {
        continue;
      }
      // Read where the update first needs it, not held all step.
      if (operand == parameter) {
        blocks.map(operand, WorkerShardOp::create(builder, op->getLoc(),
                                                  blockOf(operand.getType()),
                                                  operand)
                                .getOutput());
      } else if (auto constant = operand.getDefiningOp<ConstantOp>()) {
        auto splat =
            llvm::cast<SplatElementsAttr>(Attribute(constant.getValue()));
        blocks.map(operand,
                   ConstantOp::create(builder, op->getLoc(),
                                      splat.resizeSplat(
                                          blockOf(operand.getType()))));
      }
    }
    Operation *clone = builder.clone(*op, blocks);
    for (Value result : clone->getResults()) {
      result.setType(blockOf(result.getType()));
    }
  }
  // A whole sum is each worker's sum of its block, added across the group.
  for (Operation *sum : sums) {
    builder.setInsertionPoint(sum);
    Value partial = builder.clone(*sum, blocks)->getResult(0);
    auto total = AllReduceOp::create(builder, sum->getLoc(), partial.getType(),
                                     partial, builder.getStringAttr("sum"));
    sum->getResult(0).replaceAllUsesWith(total.getOutput());
    blockSums.push_back(total);
  }
  auto ret = llvm::cast<func::ReturnOp>(func.getBody().back().getTerminator());
  llvm::SmallVector<ParameterBlock> updated;
  for (unsigned index : parameterResults) {
    updated.push_back({index, blocks.lookup(ret.getOperand(index))});
    // The parameter as it was until the caller gathers the new blocks.
    ret.setOperand(index, parameter);
  }
  for (unsigned index : stateResults) {
    ret.setOperand(index, blocks.lookup(ret.getOperand(index)));
  }
  llvm::SmallVector<Operation *> dead = inBlockOrder(
      llvm::to_vector(llvm::concat<Operation *const>(ops, sums)));
  for (Operation *op : llvm::reverse(dead)) {
    op->erase();
  }
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().front().getArgumentTypes(),
                                 ret.getOperandTypes()));
  return updated;
}

} // namespace kiln::graph_passes
