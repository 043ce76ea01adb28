//===- Rematerialize.cpp - recompute values made of constants and seeds ---===//
//
// A dropout's keep-mask depends on nothing but its seed, its stream and the
// element's index. A front end computes it once in the forward pass and reads
// it again in the backward pass, so the mask (scaled to f32) is stored in HBM
// and loaded back: for BERT-base, 0.38 GB of the step's traffic. Recomputing
// it in each fusion group that reads it costs GpSimd a `random` per tile and
// moves nothing. Likewise a GELU's f32 input, a bias plus a bf16 product,
// which the backward reads: its group recomputes it from the bf16 product
// (2 bytes an element stored and loaded rather than 4).

#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHREMATERIALIZE
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::fusionId;

namespace {

using Shape = llvm::ArrayRef<int64_t>;

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// A value every loop nest holds without loading a tensor: a splat constant
/// (an immediate) or a scalar (loaded once per partition).
bool isLeaf(Value v) {
  if (tensorType(v).getRank() == 0) {
    return true;
  }
  auto constant = v.getDefiningOp<ConstantOp>();
  auto dense =
      constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return dense && dense.isSplat();
}

/// The values computed from leaves alone by elementwise ops (whose
/// operands are leaves or such values of the op's own shape) and reshapes.
llvm::DenseSet<Value> recomputableValues(Block &block) {
  llvm::DenseSet<Value> recomputable;
  auto known = [&](Value v) { return isLeaf(v) || recomputable.contains(v); };
  for (Operation &op : block) {
    bool ok = false;
    if (llvm::isa<ReshapeOp>(op)) {
      ok = known(op.getOperand(0));
    } else if (kiln::graph_passes::isElementwise(&op)) {
      Shape shape = tensorType(op.getResult(0)).getShape();
      ok = llvm::all_of(op.getOperands(), [&](Value v) {
        return known(v) &&
               (tensorType(v).getRank() == 0 || tensorType(v).getShape() == shape);
      });
    }
    if (ok) {
      recomputable.insert(op.result_begin(), op.result_end());
    }
  }
  return recomputable;
}

/// Builds `v` anew in `shape` (same element count) before the builder's
/// point: reshapes vanish, splat constants are made in the new shape, and
/// elementwise ops compute in it. Dropout's numbers follow the row-major
/// index, which a reshape keeps, so the values are the same.
class Recomputer {
public:
  Recomputer(OpBuilder &builder, int64_t id,
             const llvm::DenseSet<Value> *stored = nullptr)
      : builder(builder), id(id), stored(stored) {}

  Value build(Value v, Shape shape) {
    Type element = tensorType(v).getElementType();
    auto type = RankedTensorType::get(shape, element);
    if (tensorType(v).getRank() == 0) {
      return v;
    }
    if (auto it = built.find({v, type}); it != built.end()) {
      return it->second;
    }
    Operation *def = v.getDefiningOp();
    Value result;
    if (stored && stored->contains(v)) {
      // Read where it is: a row vector broadcasts alike in both shapes, a
      // full-shape value is seen in the new shape (a fresh row-major
      // buffer, so the reshape moves nothing).
      bool asIs = tensorType(v).getShape() == shape ||
                  tensorType(v).getNumElements() != type.getNumElements();
      result =
          asIs ? v
               : ReshapeOp::create(builder, v.getLoc(), type, v).getOutput();
    } else if (auto constant = llvm::dyn_cast<ConstantOp>(def)) {
      auto dense = llvm::cast<DenseElementsAttr>(constant.getValue());
      if (dense.getType() == type) {
        result = v;
      } else {
        // Beside the original, at the top: a constant defined after a
        // matmul would keep the group from being that matmul's epilogue.
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(def);
        result = ConstantOp::create(builder, def->getLoc(), type,
                                    dense.resizeSplat(type))
                     .getOutput();
      }
    } else if (auto reshape = llvm::dyn_cast<ReshapeOp>(def)) {
      result = build(reshape.getInput(), shape);
    } else {
      llvm::SmallVector<Value> operands;
      for (Value operand : def->getOperands()) {
        operands.push_back(build(operand, shape));
      }
      llvm::SmallVector<Type> types;
      for (Type t : def->getResultTypes()) {
        types.push_back(RankedTensorType::get(
            shape, llvm::cast<RankedTensorType>(t).getElementType()));
      }
      OperationState state(def->getLoc(), def->getName(), operands, types,
                           def->getAttrs());
      Operation *copy = builder.create(state);
      copy->setAttr(kiln::kgraph::kFusionAttr, builder.getI64IntegerAttr(id));
      for (auto [old, fresh] : llvm::zip(def->getResults(), copy->getResults())) {
        built[{old, type}] = fresh;
      }
      return built[{v, type}];
    }
    built[{v, type}] = result;
    return result;
  }

private:
  OpBuilder &builder;
  int64_t id;
  /// Values in HBM anyway: read, not recomputed.
  const llvm::DenseSet<Value> *stored;
  llvm::DenseMap<std::pair<Value, Type>, Value> built;
};

/// The uses of `v` and of the reshapes of it, followed through the
/// reshapes.
void readersThroughReshapes(Value v, llvm::SmallVectorImpl<OpOperand *> &out) {
  for (OpOperand &use : v.getUses()) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(use.getOwner())) {
      readersThroughReshapes(reshape.getOutput(), out);
    } else {
      out.push_back(&use);
    }
  }
}

/// Whether `v` is in HBM whatever becomes of its other readers: an argument,
/// or a group's value that an op outside the group reads (the group stores
/// it for that op).
bool inHbmAnyway(Value v) {
  if (llvm::isa<BlockArgument>(v)) {
    return true;
  }
  std::optional<int64_t> group = fusionId(v.getDefiningOp());
  if (!group) {
    return false; // a matmul's product may never leave its epilogue
  }
  llvm::SmallVector<OpOperand *> readers;
  readersThroughReshapes(v, readers);
  return llvm::any_of(readers, [&](OpOperand *use) {
    return fusionId(use->getOwner()) != group;
  });
}

/// Whether `v`'s computation within its group is a short chain of
/// elementwise ops whose other operands are leaves or values in HBM anyway
/// (collected in `stored`): full-shape ones narrower than `v` in all, and
/// argument row vectors along `v`'s last dimension (a bias).
bool cheapToRecompute(Value v, llvm::DenseSet<Value> &stored) {
  constexpr int kMaxOps = 4;
  auto type = tensorType(v);
  std::optional<int64_t> group = fusionId(v.getDefiningOp());
  int64_t bytesRead = 0, width = type.getElementTypeBitWidth();
  llvm::SmallVector<Value> pending{v};
  llvm::DenseSet<Value> chain;
  while (!pending.empty()) {
    Value x = pending.pop_back_val();
    if (isLeaf(x) || chain.contains(x) || stored.contains(x)) {
      continue;
    }
    auto xType = tensorType(x);
    bool fullShape = xType.getShape() == type.getShape();
    // A matmul's product that a narrower type rounds (bf16 under auto-cast)
    // goes to HBM from its epilogue for the copies to read.
    bool narrowProduct = fullShape && x.getDefiningOp<MatmulOp>() &&
                         xType.getElementTypeBitWidth() < width;
    if (fullShape && x != v && (narrowProduct || inHbmAnyway(x))) {
      stored.insert(x);
      bytesRead += xType.getElementTypeBitWidth();
      continue;
    }
    if (!fullShape) {
      bool rowVector = xType.getRank() == 1 &&
                       xType.getShape()[0] == type.getShape().back() &&
                       llvm::isa<BlockArgument>(x);
      if (!rowVector) {
        return false;
      }
      stored.insert(x);
      continue;
    }
    Operation *def = x.getDefiningOp();
    if (!def || def->getNumResults() != 1 ||
        !kiln::graph_passes::isElementwise(def) || fusionId(def) != group ||
        chain.size() == kMaxOps) {
      return false;
    }
    chain.insert(x);
    pending.append(def->operand_begin(), def->operand_end());
  }
  return bytesRead < width;
}

/// A group value that only other groups' elementwise ops read outside its
/// group, when they can compute it from values in HBM anyway for fewer
/// bytes than reading it: each reader's group gets a copy of its
/// computation, and the value never goes to HBM. A value that costs as many
/// bytes to recompute (a layer norm's output from x_hat, which the backward
/// keeps) stays: only its store would go, and the forward pass's
/// latency-bound groups would grow longer.
void recomputeFromStoredValues(Block &block, OpBuilder &builder) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    std::optional<int64_t> group = fusionId(&op);
    if (!group || op.getNumResults() != 1 ||
        !kiln::graph_passes::isElementwise(&op) ||
        tensorType(op.getResult(0)).getRank() == 0) {
      continue;
    }
    Value v = op.getResult(0);
    Shape shape = tensorType(v).getShape();
    llvm::SmallVector<OpOperand *> readers, outside;
    readersThroughReshapes(v, readers);
    bool movable = true;
    for (OpOperand *use : readers) {
      Operation *reader = use->getOwner();
      std::optional<int64_t> id = fusionId(reader);
      if (id == group) {
        continue;
      }
      // The copy must compute in the reader's shape with the row vectors
      // still broadcasting along the last dimension.
      movable = movable && id && kiln::graph_passes::isElementwise(reader) &&
                tensorType(use->get()).getShape().back() == shape.back();
      outside.push_back(use);
    }
    llvm::DenseSet<Value> stored;
    if (outside.empty() || !movable || !cheapToRecompute(v, stored)) {
      continue;
    }
    // A group's first reader gets the copy; later ones, which it
    // dominates, reuse it.
    llvm::sort(outside, [](OpOperand *a, OpOperand *b) {
      return a->getOwner()->isBeforeInBlock(b->getOwner());
    });
    std::map<int64_t, Recomputer> copies;
    for (OpOperand *use : outside) {
      int64_t id = *fusionId(use->getOwner());
      Recomputer &copy =
          copies.try_emplace(id, builder, id, &stored).first->second;
      builder.setInsertionPoint(use->getOwner());
      use->set(copy.build(v, tensorType(use->get()).getShape()));
    }
  }
  // Reshapes nothing reads any more.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
    if (llvm::isa<ReshapeOp>(op) && op.use_empty()) {
      op.erase();
    }
  }
}

struct KGraphRematerialize
    : kiln::graph_passes::impl::KGraphRematerializeBase<KGraphRematerialize> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty()) {
      return;
    }
    Block &block = func.getBody().front();
    llvm::DenseSet<Value> recomputable = recomputableValues(block);
    int64_t nextId = 0;
    for (Operation &op : block) {
      if (auto id = fusionId(&op)) {
        nextId = std::max(nextId, *id + 1);
      }
    }
    // The group's copies, keyed by group id; a reader outside any group
    // starts a group of its own with them.
    std::map<int64_t, Recomputer> copies;
    OpBuilder builder(func.getContext());
    for (Operation &op : block) {
      if (!kiln::graph_passes::isElementwise(&op) ||
          recomputable.contains(op.getResult(0))) {
        continue;
      }
      Shape shape = tensorType(op.getResult(0)).getShape();
      std::optional<int64_t> id = fusionId(&op);
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        if (isLeaf(v) || !recomputable.contains(v) ||
            tensorType(v).getShape() != shape) {
          continue;
        }
        Value source = v;
        while (auto reshape = source.getDefiningOp<ReshapeOp>()) {
          source = reshape.getInput();
        }
        if (id && fusionId(source.getDefiningOp()) == id) {
          continue; // computed in this group already
        }
        if (!id) {
          id = nextId++;
          op.setAttr(kiln::kgraph::kFusionAttr, builder.getI64IntegerAttr(*id));
        }
        Recomputer &copy = copies.try_emplace(*id, builder, *id).first->second;
        // The group's first reader gets the copy; later readers, which it
        // dominates, reuse it.
        builder.setInsertionPoint(&op);
        use.set(copy.build(v, shape));
      }
    }
    // The originals nothing reads any more.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
      if (op.getNumResults() > 0 && op.use_empty() && isPure(&op) &&
          llvm::all_of(op.getResults(),
                       [&](Value r) { return recomputable.contains(r); })) {
        op.erase();
      }
    }
    recomputeFromStoredValues(block, builder);
  }
};

} // namespace
