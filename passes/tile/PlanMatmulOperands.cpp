//===- PlanMatmulOperands.cpp - what a matmul's loads compute -------------===//
//
// kgraph-plan-matmul-operands: marks the ops whose work a matmul's own
// instructions do (kgraph.fold), so that the tile phase emits nothing for
// them: bf16 casts of operands (the loads round), the f32 cast of a
// product (the PSUM evacuation converts), and one-hot operands (computed
// on chip from their indices). A folded op leaves its fusion group. Values
// only bf16 operands read are stored in bf16 (kgraph.narrowed).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/TilePlan.h"
#include "passes/tile/Passes.h"

namespace kiln::tile_passes {
#define GEN_PASS_DEF_KGRAPHPLANMATMULOPERANDS
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

namespace {

/// The integer column [n, 1] broadcast to [n, C] that `value` is, or null.
Value broadcastColumn(Value value) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  if (!broadcast) {
    return {};
  }
  auto shape = tensorType(broadcast.getInput()).getShape();
  return shape.size() == 2 && shape[1] == 1 ? broadcast.getInput() : Value();
}

/// The ops of `broadcast(reshape(iota [C]) : [1, C])`, outermost first,
/// when `value` is that, or none.
llvm::SmallVector<Operation *, 3> broadcastIotaRow(Value value) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  auto reshape =
      broadcast ? broadcast.getInput().getDefiningOp<ReshapeOp>() : nullptr;
  auto iota = reshape ? reshape.getInput().getDefiningOp<IotaOp>() : nullptr;
  if (!iota || iota.getType().getRank() != 1 ||
      tensorType(reshape.getOutput()).getShape() !=
          llvm::ArrayRef<int64_t>{1, iota.getType().getShape()[0]}) {
    return {};
  }
  return {broadcast, reshape, iota};
}

/// The indices column and the iota row ops of `compare(eq, ...)` when it
/// compares a broadcast column of indices with a broadcast iota row, in
/// either order; null and empty otherwise.
std::pair<Value, llvm::SmallVector<Operation *, 3>>
oneHotParts(CompareOp compare) {
  Value indices = broadcastColumn(compare.getLhs());
  auto iotaRow = broadcastIotaRow(compare.getRhs());
  if (!indices || iotaRow.empty()) {
    indices = broadcastColumn(compare.getRhs());
    iotaRow = broadcastIotaRow(compare.getLhs());
  }
  if (!indices || iotaRow.empty()) {
    return {};
  }
  return {indices, iotaRow};
}

/// Whether `use` reads the one-hot matrix along a 2-D product's K.
bool readAlongK(OpOperand &use) {
  auto m = llvm::dyn_cast<MatmulOp>(use.getOwner());
  if (!m || tensorType(m.getOutput()).getRank() != 2 ||
      m.getLhs() == m.getRhs()) {
    return false;
  }
  return use.getOperandNumber() == 0 ? m.getTransposeLhs()
                                     : !m.getTransposeRhs();
}

/// The one-hot group starting at `compare`, the comparison then casts each
/// reading the one before, when it is the whole of its fusion group and
/// only 2-D products read its matrix along K: the ops to fold, or none.
llvm::SmallVector<Operation *>
oneHotGroup(CompareOp compare,
            const llvm::DenseMap<int64_t, unsigned> &groupSizes) {
  auto id = fusionId(compare);
  if (compare.getDirection() != "eq" || !id ||
      !llvm::isa<IntegerType>(tensorType(compare.getLhs()).getElementType())) {
    return {};
  }
  llvm::SmallVector<Operation *> chain{compare};
  Value matrix = compare.getOutput();
  while (matrix.hasOneUse()) {
    auto cast = llvm::dyn_cast<CastOp>(*matrix.getUsers().begin());
    if (!cast || fusionId(cast) != id) {
      break;
    }
    chain.push_back(cast);
    matrix = cast.getOutput();
  }
  // Iota values must be exact in the f32 compare that computes the tiles.
  int64_t classes = tensorType(matrix).getShape()[1];
  if (chain.size() != groupSizes.lookup(*id) ||
      !llvm::isa<FloatType>(tensorType(matrix).getElementType()) ||
      matrix.use_empty() || !llvm::all_of(matrix.getUses(), readAlongK) ||
      classes > (int64_t(1) << 24)) {
    return {};
  }
  return chain;
}

/// One-hot matrices as GraphEmitter::oneHot builds them, a group casting
/// `compare("eq", broadcast(indices [n, 1]), broadcast(iota [1, C]))`,
/// that only 2-D matmuls read with the n rows along K (an embedding's or a
/// gather's gradient): those matmuls compute the tiles on chip from the
/// indices, and the group, and the iota if nothing else reads it, emit
/// nothing. BERT's [1024 x 30522] one was 61 MB stored and loaded again on
/// the step's last stretch.
void planOneHotOperands(Block &body) {
  llvm::DenseMap<int64_t, unsigned> groupSizes;
  for (Operation &op : body) {
    if (auto id = fusionId(&op)) {
      ++groupSizes[*id];
    }
  }
  for (Operation &op : body) {
    auto compare = llvm::dyn_cast<CompareOp>(&op);
    llvm::SmallVector<Operation *> chain =
        compare ? oneHotGroup(compare, groupSizes)
                : llvm::SmallVector<Operation *>{};
    auto [indices, iotaRow] =
        chain.empty() ? std::pair<Value, llvm::SmallVector<Operation *, 3>>{}
                      : oneHotParts(compare);
    if (!indices) {
      continue;
    }
    for (Operation *folded : chain) {
      setFold(folded, Fold::OnChip);
    }
    if (llvm::all_of(iotaRow, [](Operation *o) { return o->hasOneUse(); })) {
      for (Operation *folded : iotaRow) {
        setFold(folded, Fold::OnChip);
      }
    }
  }
}

/// The fusion group `cast` shares with the op computing its input, if any.
std::optional<int64_t> groupWithProducer(CastOp cast) {
  std::optional<int64_t> group = fusionId(cast);
  Operation *producer = cast.getInput().getDefiningOp();
  if (!group || !producer || fusionId(producer) != group) {
    return std::nullopt;
  }
  return group;
}

/// A bf16 cast that ends a fusion group whose f32 input nothing outside the
/// group reads: the group stores the bf16 value (half the bytes out, and
/// half in for every matmul that reads it) instead of the f32 one for the
/// matmuls to narrow as they load it. Either way the bits are the same.
bool narrowsGroupOutput(CastOp cast) {
  std::optional<int64_t> group = groupWithProducer(cast);
  return group && llvm::all_of(cast.getInput().getUsers(), [&](Operation *user) {
           return fusionId(user) == group;
         });
}

/// A bf16 cast in its producer's fusion group that only convolutions (or
/// their gradients) read, of an f32 value other ops read too: batch norm's
/// normalised, ReLU'd activation, which the next convolution and its weight
/// gradient read as bf16, ReLU's backward and the residual adds as f32. The
/// group stores the bf16 copy beside the f32 value: the convolutions load
/// their bands (several times over, in wide layers) at half the bytes, for
/// one more half-size store and buffer. Matmul operands are left to their
/// loads: the large-model steps' HBM plans have no room for second copies.
bool storesBf16Copy(CastOp cast) {
  return groupWithProducer(cast) && !cast->use_empty() &&
         llvm::all_of(cast->getUsers(), [](Operation *user) {
           return llvm::isa<ConvOp, ConvInputGradOp, ConvWeightGradOp>(user);
         });
}

/// Casts that a matmul's or convolution's loads (bf16 operands) or its
/// PSUM evacuation (an f32 result) perform.
void planFoldedCasts(Block &body, bool convInputCopies) {
  for (Operation &op : body) {
    if (auto cast = llvm::dyn_cast<CastOp>(&op)) {
      bool feedsMatmuls = !cast->use_empty() &&
                          llvm::all_of(cast->getUsers(), isTensorEngineProduct);
      if (feedsMatmuls &&
          cast.getOutput().getType().getElementType().isBF16() &&
          cast.getInput().getType().getElementType().isF32() &&
          !narrowsGroupOutput(cast) &&
          !(convInputCopies && storesBf16Copy(cast))) {
        setFold(cast, Fold::IntoLoads);
      }
    }
    if (isTensorEngineProduct(&op)) {
      if (op.hasOneUse()) {
        auto cast = llvm::dyn_cast<CastOp>(*op.getUsers().begin());
        if (cast && cast.getOutput().getType().getElementType().isF32() &&
            !fusionId(cast)) {
          setFold(cast, Fold::IntoEvacuation);
        }
      }
    }
  }
}

/// Whether only bf16 casts folded into matmul loads read `value`, directly
/// or through views.
bool readOnlyNarrowed(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUsers(), [&](Operation *user) {
           if (auto cast = llvm::dyn_cast<CastOp>(user)) {
             return foldOf(cast) != Fold::None &&
                    cast.getOutput().getType().getElementType().isBF16();
           }
           return isViewOp(user) && readOnlyNarrowed(user->getResult(0));
         });
}

/// f32 values computed by elementwise ops that only bf16 matmul operands
/// read (through slices, reshapes and transposes): attention's fused QKV
/// projection, which the forward and the backward pass both read as bf16
/// Q, K and V. The producer rounds its tiles to bf16 on an engine and
/// stores those, half the bytes out and in, instead of storing f32 for
/// every load to narrow. The matmuls see the same bits either way.
void planNarrowedOutputs(Block &body) {
  for (Operation &op : body) {
    if (!graph_passes::isElementwise(&op) || foldOf(&op) != Fold::None) {
      continue;
    }
    llvm::SmallVector<int64_t, 1> results;
    for (OpResult result : op.getResults()) {
      if (tensorType(result).getElementType().isF32() &&
          readOnlyNarrowed(result)) {
        results.push_back(result.getResultNumber());
      }
    }
    if (!results.empty()) {
      op.setAttr(kNarrowedAttr,
                 DenseI64ArrayAttr::get(op.getContext(), results));
    }
  }
}

struct KGraphPlanMatmulOperands
    : kiln::tile_passes::impl::KGraphPlanMatmulOperandsBase<
          KGraphPlanMatmulOperands> {
  using Base::Base;

  void runOnOperation() override {
    Block &body = getOperation().getBody().front();
    planFoldedCasts(body, convInputCopies);
    planOneHotOperands(body);
    for (Operation &op : body) {
      if (foldOf(&op) != Fold::None) {
        op.removeAttr(kFusionAttr);
      }
    }
    planNarrowedOutputs(body);
  }
};

} // namespace

/// The indices [n, 1] from which the matmuls reading `matrix`, a one-hot
/// operand kgraph-plan-matmul-operands folded, compute its tiles: element
/// (i, j) is 1 where indices[i] == j, else 0.
Value kiln::tile_passes::oneHotIndicesOf(Value matrix) {
  Operation *def = matrix.getDefiningOp();
  while (auto cast = llvm::dyn_cast_or_null<CastOp>(def)) {
    def = cast.getInput().getDefiningOp();
  }
  auto compare = llvm::dyn_cast_or_null<CompareOp>(def);
  return compare ? oneHotParts(compare).first : Value();
}

/// Reads what kgraph-plan-matmul-operands planned: the ops other ops'
/// instructions compute (kgraph.fold: the casts of products and their
/// operands, the one-hot operands computed on chip), the values stored in
/// bf16 (kgraph.narrowed); and the fusion groups of the rest.
void TilePlan::readMatmulOperandPlan() {
  unsigned index = 0;
  for (Operation &op : source.getBody().front()) {
    position[&op] = index++;
    if (auto results = op.getAttrOfType<DenseI64ArrayAttr>(kNarrowedAttr)) {
      for (int64_t r : results.asArrayRef()) {
        narrowed.insert(op.getResult(r));
      }
    }
    Fold fold = foldOf(&op);
    if (fold == Fold::None) {
      if (auto id = fusionId(&op)) {
        groups[*id].push_back(&op);
      }
      continue;
    }
    absorbed.insert(&op);
    Value result = op.getResult(0);
    if (fold == Fold::IntoEvacuation) {
      matmulResultCast[op.getOperand(0).getDefiningOp()] = &op;
    }
    bool readByMatmuls = llvm::all_of(result.getUsers(), [](Operation *u) {
      return llvm::isa<MatmulOp>(u);
    });
    if (fold == Fold::OnChip && !result.use_empty() && readByMatmuls) {
      oneHotIndices[result] = oneHotIndicesOf(result);
    }
  }
}
