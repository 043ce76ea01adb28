//===- PlanLowering.cpp - where results go, and when ops read ------------===//
//
// The planning of kgraph-plan-buffers (see BufferPlan.cpp): which results
// are computed straight into an argument's buffer and which concat inputs
// into their part of the concat's buffer. And what the planners ask of
// positions: where an op's lowering reads its operands once the epilogue
// plan has moved it (a group with its last op or its matmul), and whether
// a value exists by a given position.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/TilePlanner.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

namespace kiln::tile_passes {

/// Which aliasing results (updated parameters and state) their producer
/// can write straight into the argument's buffer.
void TilePlanner::planInPlace() {
  auto ret = llvm::cast<func::ReturnOp>(source.getBody().front().back());
  llvm::SmallPtrSet<Value, 8> taken;
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    auto alias = source.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
    if (!alias) {
      continue;
    }
    Value result = ret.getOperand(r);
    Value arg = source.getArgument(alias.getInt());
    Operation *producer = result.getDefiningOp();
    if (auto scatter = llvm::dyn_cast_or_null<ScatterRowsOp>(producer)) {
      planScatterInPlace(scatter, alias.getInt(), taken);
      continue;
    }
    // ZeRO-1's all-gather of one updated parameter's blocks writes the
    // parameter, whose reads (the forward pass, the worker's block) are
    // done by then; a parameter viewed out of a bucket's all-gather is
    // copied there as soon as the gather is done, which frees the bucket.
    if (llvm::isa_and_present<AllGatherOp, ReshapeOp>(producer) &&
        tensorType(result) == tensorType(arg) && taken.insert(result).second) {
      llvm::SmallPtrSet<Operation *, 1> self{producer};
      if (readsEndBefore(arg, position[producer], self, /*throughView=*/false)) {
        (llvm::isa<AllGatherOp>(producer) ? inPlace
                                          : copiedEarly)[result] = alias.getInt();
      }
      continue;
    }
    if (!producer || !graph_passes::isElementwise(producer) ||
        absorbed.contains(producer) || !taken.insert(result).second ||
        tensorType(result) != tensorType(arg)) {
      continue;
    }
    llvm::SmallVector<Operation *> members{producer};
    if (auto id = fusionId(producer)) {
      members = groups[*id];
    }
    unsigned at = loweredAt(producer);
    llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
    if (readsEndBefore(arg, at, inGroup, /*throughView=*/false)) {
      inPlace[result] = alias.getInt();
    }
  }
}

/// A returned row scatter over argument `arg`: the scatter writes the
/// argument's buffer when every other read of the argument comes before it,
/// and the value it updates goes there too when its elementwise producer can
/// write it there (an embedding table's update with zero gradient, which
/// kgraph-sparse-table-updates splits from the rows the batch picks): the
/// rows then land in place, with no copy of the table.
void TilePlanner::planScatterInPlace(ScatterRowsOp scatter, unsigned arg,
                                          llvm::SmallPtrSetImpl<Value> &taken) {
  Value argument = source.getArgument(arg);
  Value input = scatter.getInput();
  if (!taken.insert(scatter.getOutput()).second ||
      tensorType(scatter.getOutput()) != tensorType(argument)) {
    return;
  }
  llvm::SmallPtrSet<Operation *, 1> self{scatter};
  if (!readsEndBefore(argument, position[scatter], self,
                      /*throughView=*/false)) {
    return;
  }
  inPlace[scatter.getOutput()] = arg;
  Operation *producer = input.getDefiningOp();
  if (!producer || !graph_passes::isElementwise(producer) ||
      absorbed.contains(producer) || !taken.insert(input).second) {
    return;
  }
  llvm::SmallVector<Operation *> members{producer};
  if (auto id = fusionId(producer)) {
    members = groups[*id];
  }
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  // The group's own reads of the input are of its tiles in SBUF.
  bool onlyScattered = llvm::all_of(input.getUsers(), [&](Operation *user) {
    return user == scatter || inGroup.contains(user);
  });
  if (onlyScattered && readsEndBefore(argument, loweredAt(producer), inGroup,
                                      /*throughView=*/false)) {
    inPlace[input] = arg;
  }
}

/// Where `op`'s reads happen: a fused op runs with its group's last member,
/// or with the matmul whose epilogue the group is.
unsigned TilePlanner::loweredAt(Operation *op) {
  auto chain = chainOf.find(op);
  if (chain != chainOf.end()) {
    auto epilogue = chainEpilogueAt.find(chain->second);
    return epilogue != chainEpilogueAt.end()
               ? epilogue->second
               : position[chains[chain->second].ops.back()];
  }
  auto id = fusionId(op);
  if (!id) {
    return position[op];
  }
  auto epilogue = epilogueAt.find(*id);
  return epilogue != epilogueAt.end() ? epilogue->second
                                      : position[groups[*id].back()];
}

/// Where `op`'s lowering reads its operands: an absorbed cast's are read by
/// the matmuls it feeds; a view early for an epilogue reads at its matmul.
unsigned TilePlanner::readAt(Operation *op) {
  if (absorbed.contains(op)) {
    unsigned at = std::numeric_limits<unsigned>::max();
    for (Operation *user : op->getUsers()) {
      at = std::min(at, readAt(user));
    }
    return at;
  }
  unsigned at = loweredAt(op);
  for (auto &[matmul, views] : earlyViews) {
    if (llvm::is_contained(views, op)) {
      at = std::min(at, position[matmul]);
    }
  }
  return at;
}

/// Whether `def`'s result exists at position `at`: lowered before it, or a
/// view (reshape, transpose, broadcast, slice: they compute nothing) of
/// values that are, which then joins `views` to be lowered early.
bool TilePlanner::availableBy(Operation *def, unsigned at,
                                   llvm::SetVector<Operation *> &views) {
  if (absorbed.contains(def)) {
    return false;
  }
  if (loweredAt(def) < at || views.contains(def)) {
    return true;
  }
  if (!isViewOp(def)) {
    return false;
  }
  for (Value v : def->getOperands()) {
    Operation *inner = v.getDefiningOp();
    if (inner && !availableBy(inner, at, views)) {
      return false;
    }
  }
  views.insert(def);
  return true;
}

/// A 2-D product with neither operand transposed.
bool isPlain2d(MatmulOp m) {
  return !m.getTransposeLhs() && !m.getTransposeRhs() &&
         tensorType(m.getOutput()).getRank() == 2;
}

/// A sum over rows as layout assignment writes it: `ones[1, R] . V`, the
/// ones a floating-point splat constant.
bool isRowSum(MatmulOp m) {
  auto constant = m.getLhs().getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                        : nullptr;
  return isPlain2d(m) && tensorType(m.getLhs()).getShape()[0] == 1 && dense &&
         dense.isSplat() && llvm::isa<FloatType>(dense.getElementType()) &&
         dense.getSplatValue<APFloat>().convertToDouble() == 1.0;
}

/// Whether everything that reads `value`, through views, is a bf16 cast
/// that the loads of the matmuls it feeds perform.
/// Which concat inputs their producers can write straight into the concat's
/// buffer. Attention's backward concatenates the Q, K and V gradients, each
/// a matmul result seen through a head-merging transpose and reshape: the
/// matmul can store into the slice seen through the inverse views, the
/// transpose and reshape then become views of the slice, and the concat
/// copies nothing. A chain qualifies when each value in it has one use
/// and the producer writes a fresh buffer of the concat's element type.
void TilePlanner::planConcats() {
  for (Operation &op : source.getBody().front()) {
    auto concat = llvm::dyn_cast<ConcatOp>(&op);
    if (!concat || inPlace.count(concat.getOutput())) {
      continue;
    }
    // The concat's buffer as the views see it; none is made to plan.
    auto type = tensorType(concat.getOutput());
    HbmView whole;
    whole.dtype = deviceType(type.getElementType());
    whole.shape.assign(type.getShape().begin(), type.getShape().end());
    whole.strides = rowMajorStrides(whole.shape);
    llvm::SmallVector<int64_t> inputs;
    for (unsigned i = 0; i < concat.getInputs().size(); ++i) {
      if (concatSlice(concat, i, whole)) {
        inputs.push_back(i);
      }
    }
    if (!inputs.empty()) {
      concatsIntoSlices[concat] = std::move(inputs);
    }
  }
}

/// Where input `index` of `concat` can be computed straight into its part
/// of `whole`, the concat's buffer: the value its producer writes (reached
/// through one-use reshapes and transposes) and the part as that value
/// sees it; none when the producer cannot.
std::optional<std::pair<Value, HbmView>>
TilePlan::concatSlice(ConcatOp concat, unsigned index,
                              const HbmView &whole) {
  int64_t dim = concat.getDim(), at = 0;
  for (unsigned i = 0; i < index; ++i) {
    at += tensorType(concat.getInputs()[i]).getShape()[dim];
  }
  Value v = concat.getInputs()[index];
  HbmView want = concatPart(whole, dim, at, tensorType(v).getShape()[dim]);
  while (v.hasOneUse() && !inPlace.count(v)) {
    Operation *def = v.getDefiningOp();
    if (auto reshape = llvm::dyn_cast_if_present<ReshapeOp>(def)) {
      auto split = want.reshaped(tensorType(reshape.getInput()).getShape());
      if (!split) {
        return std::nullopt;
      }
      want = *split;
      v = reshape.getInput();
      continue;
    }
    if (auto transpose = llvm::dyn_cast_if_present<TransposeOp>(def)) {
      llvm::ArrayRef<int64_t> perm = transpose.getPermutation();
      llvm::SmallVector<int64_t> inverse(perm.size());
      for (auto [i, p] : llvm::enumerate(perm)) {
        inverse[p] = static_cast<int64_t>(i);
      }
      want = want.transposed(inverse);
      v = transpose.getInput();
      continue;
    }
    // Matmuls (into their folded result cast's value, when they have
    // one) and elementwise groups ask freshBuffer for their results.
    auto *producer = def && def->getNumOperands() > 0
                         ? def->getOperand(0).getDefiningOp()
                         : nullptr;
    bool resultCast = llvm::isa_and_present<MatmulOp>(producer) &&
                      matmulResultCast.lookup(producer) == def;
    bool writesFresh =
        def && (llvm::isa<MatmulOp>(def) || resultCast ||
                (graph_passes::isElementwise(def) && !absorbed.contains(def)));
    if (writesFresh &&
        deviceType(tensorType(v).getElementType()) == want.dtype) {
      return std::make_pair(v, want);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

} // namespace kiln::tile_passes
