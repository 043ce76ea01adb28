//===- Rematerialize.cpp - recompute values made of constants and seeds ---===//
//
// A dropout's keep-mask depends on nothing but its seed, its stream and the
// element's index. A front end computes it once in the forward pass and reads
// it again in the backward pass, so the mask (scaled to f32) is stored in HBM
// and loaded back: for BERT-base, 0.38 GB of the step's traffic. Recomputing
// it in each fusion group that reads it costs GpSimd a `random` per tile and
// moves nothing.

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
  Recomputer(OpBuilder &builder, int64_t id) : builder(builder), id(id) {}

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
    if (auto constant = llvm::dyn_cast<ConstantOp>(def)) {
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
      copy->setAttr("kgraph.fusion", builder.getI64IntegerAttr(id));
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
  llvm::DenseMap<std::pair<Value, Type>, Value> built;
};

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
          op.setAttr("kgraph.fusion", builder.getI64IntegerAttr(*id));
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
  }
};

} // namespace
