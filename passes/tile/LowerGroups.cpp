//===- LowerGroups.cpp - elementwise groups and row chains ----------------===//
//
// An elementwise fusion group is one loop nest (Lowering::lowerElementwise)
// that stores the group's values read outside it and folds the reductions
// and row sums of its values planned into it; a row chain is one loop nest
// over whole rows, or, where that declines, its parts one by one.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

/// An elementwise op lowers with its group, where the group's last member
/// stands, unless a matmul computes the group as its epilogue.
LogicalResult FunctionLowering::lowerElementwiseOp(Operation *op) {
  auto id = fusionId(op);
  if (!id) {
    return lowerGroup({op});
  }
  if (epilogueAt.count(*id)) {
    return success(); // computed by its matmul
  }
  auto &members = groups[*id];
  return op == members.back() ? lowerGroup(members) : success();
}

/// A reduction that no loop nest folded, on its own.
LogicalResult FunctionLowering::lowerReduction(Operation *r) {
  HbmView dst = freshBuffer(r->getResult(0));
  if (failed(lowering.lowerReduce(r, dst))) {
    return failure();
  }
  bindView(r->getResult(0), dst);
  return success();
}

/// The group's values used outside it, each with the view it is stored to.
llvm::SmallVector<LoopOutput>
FunctionLowering::groupOutputs(llvm::ArrayRef<Operation *> members) {
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  llvm::SmallVector<LoopOutput> outputs;
  for (Operation *op : members) {
    for (Value result : op->getResults()) {
      bool usedOutside = llvm::any_of(result.getUsers(), [&](Operation *u) {
        return !inGroup.contains(u);
      });
      if (usedOutside) {
        outputs.push_back(LoopOutput{result, freshBuffer(result)});
      }
    }
  }
  return outputs;
}

/// Reductions over the trailing dimensions of a group value of the group's
/// shape whose results nothing reads before the group runs (at position
/// `at`), each with a fresh buffer for the loop nest to fill; with
/// `keptDims`, sums over all dimensions but one too (see
/// LoopReduction::keptDim).
llvm::SmallVector<LoopReduction> FunctionLowering::groupReductions(
    llvm::ArrayRef<Operation *> members, llvm::ArrayRef<int64_t> shape,
    unsigned at, const llvm::SmallPtrSetImpl<Operation *> *computed,
    bool keptDims) {
  llvm::SmallVector<LoopReduction> reductions;
  // A reduction the loop nest may compute: not computed already, its
  // result planned into no other buffer and read only after the group.
  auto available = [&](Operation *reduction) {
    Value result = reduction->getResult(0);
    return !(computed && computed->contains(reduction)) &&
           !inPlace.count(result) && !destinations.count(result) &&
           llvm::all_of(result.getUsers(), [&](Operation *u) {
             return position.lookup(u) > at;
           });
  };
  auto consider = [&](Operation *user, Operation *via) {
    if (!llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(user) ||
        !available(user)) {
      return;
    }
    // The reduced dimensions must be trailing ones, and their elements
    // those of the group's dimensions [from, rank) for some `from`.
    auto dims = user->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    auto in = tensorType(user->getOperand(0)).getShape();
    auto rank = static_cast<int64_t>(in.size());
    auto n = static_cast<int64_t>(dims.size());
    if (n == 0 ||
        !llvm::all_of(dims, [&](int64_t d) { return d >= rank - n; })) {
      return;
    }
    int64_t reduced = 1, tail = 1;
    for (int64_t d : in.take_back(n)) {
      reduced *= d;
    }
    int64_t from = static_cast<int64_t>(shape.size());
    while (from > 0 && tail < reduced) {
      tail *= shape[--from];
    }
    if (tail == reduced) {
      reductions.push_back(
          LoopReduction{user, via, from, freshBuffer(user->getResult(0))});
    }
  };
  // A sum over every dim but `kept`, through a transpose that puts `kept`
  // first and keeps the others in order.
  auto considerKept = [&](TransposeOp transpose) {
    llvm::ArrayRef<int64_t> perm = transpose.getPermutation();
    int64_t kept = perm.empty() ? 0 : perm[0];
    auto rank = static_cast<int64_t>(perm.size());
    for (int64_t i = 1; i < rank; ++i) {
      if (perm[i] != (i <= kept ? i - 1 : i)) {
        return;
      }
    }
    for (Operation *reader : transpose->getUsers()) {
      auto sum = llvm::dyn_cast<ReduceSumOp>(reader);
      if (!sum || sum.getDims().size() != static_cast<size_t>(rank - 1) ||
          llvm::is_contained(sum.getDims(), 0) || !available(sum)) {
        continue;
      }
      LoopReduction r{reader, transpose, 0, freshBuffer(sum.getResult())};
      r.keptDim = kept;
      reductions.push_back(r);
    }
  };
  for (Operation *op : members) {
    for (Value result : op->getResults()) {
      if (tensorType(result).getShape() != shape) {
        continue;
      }
      for (Operation *user : result.getUsers()) {
        if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
          for (Operation *reader : reshape->getUsers()) {
            consider(reader, reshape);
          }
        } else if (auto transpose = llvm::dyn_cast<TransposeOp>(user)) {
          if (keptDims) {
            considerKept(transpose);
          }
        } else {
          consider(user, nullptr);
        }
      }
    }
  }
  return reductions;
}

LogicalResult
FunctionLowering::lowerGroup(llvm::ArrayRef<Operation *> members) {
  llvm::SmallVector<LoopOutput> outputs = groupOutputs(members);
  auto shape = tensorType(members.back()->getResult(0)).getShape();
  llvm::SmallVector<LoopReduction> reductions =
      groupReductions(members, shape, position.lookup(members.back()),
                      /*computed=*/nullptr, /*keptDims=*/true);
  llvm::SmallVector<LoopColumnSum> columnSums;
  for (auto [sum, value] : rowSumsOf.lookup(members.back())) {
    columnSums.push_back(LoopColumnSum{sum, value, freshBuffer(sumResult(sum))});
  }
  if (failed(lowering.lowerElementwise(members, shape, outputs, reductions,
                                       columnSums))) {
    return failure();
  }
  bindLoopResults(outputs, reductions);
  for (const LoopColumnSum &c : columnSums) {
    if (c.fused) {
      bindView(sumResult(c.op), c.dst);
      fusedReductions.insert(c.op);
      // A reshape only fused sums read is done with them.
      Operation *via = c.op->getOperand(1).getDefiningOp();
      if (llvm::isa_and_present<ReshapeOp>(via) &&
          llvm::all_of(via->getUsers(), [&](Operation *u) {
            return fusedReductions.contains(u);
          })) {
        fusedReductions.insert(via);
      }
    } else {
      dropUnwritten(sumResult(c.op), c.dst);
    }
  }
  return success();
}

/// A row chain in one loop nest: its values of the groups' shape read
/// after it are stored, and so are its row values read after it; the rest
/// stays in SBUF. If the loop nest declines, the parts run one by one.
LogicalResult FunctionLowering::lowerChain(size_t k) {
  const PlannedRowChain &plan = chains[k];
  llvm::ArrayRef<int64_t> shape = plan.shape;
  llvm::SmallPtrSet<Operation *, 32> inChain(plan.ops.begin(), plan.ops.end());
  llvm::SmallVector<LoopOutput> outputs;
  llvm::SmallVector<LoopReduction> reductions =
      groupReductions(plan.ops, shape, position[plan.ops.back()], &inChain);
  for (const LoopOutput &out : groupOutputs(plan.ops)) {
    if (tensorType(out.value).getShape() == shape) {
      outputs.push_back(out);
    } else {
      reductions.push_back(LoopReduction{out.value.getDefiningOp(), nullptr,
                                         plan.from, out.dst, false,
                                         /*rowValue=*/true});
    }
  }
  RowChain chain{plan.from};
  if (failed(lowering.lowerElementwise(plan.ops, shape, outputs, reductions, {},
                                       &chain))) {
    return failure();
  }
  if (!chain.declined) {
    bindLoopResults(outputs, reductions);
    return success();
  }
  // The buffers made for the loop nest; the parts make their own.
  for (const LoopOutput &out : outputs) {
    dropUnwritten(out.value, out.dst);
  }
  for (const LoopReduction &r : reductions) {
    dropUnwritten(r.op->getResult(0), r.dst);
  }
  declinedChains.insert(k);
  for (Operation *op : plan.ops) {
    if (failed(lowerOp(op))) {
      return failure();
    }
  }
  return success();
}

/// Binds what a group's loop nest (or epilogue) stored and the reductions
/// it computed; drops the buffers nothing wrote.
void FunctionLowering::bindLoopResults(
    llvm::ArrayRef<LoopOutput> outputs,
    llvm::ArrayRef<LoopReduction> reductions) {
  // Buffers nothing wrote: an output only fused reductions read, a
  // reduction the loop nest could not fuse (it runs where it stands).
  for (const LoopOutput &out : outputs) {
    if (out.stored) {
      bindView(out.value, out.dst);
    } else {
      dropUnwritten(out.value, out.dst);
    }
  }
  for (const LoopReduction &r : reductions) {
    if (r.fused) {
      bindView(r.op->getResult(0), r.dst);
      fusedReductions.insert(r.op);
    } else {
      dropUnwritten(r.op->getResult(0), r.dst);
    }
  }
  // A reshape only fused reductions read is done with them.
  for (const LoopReduction &r : reductions) {
    if (r.via && llvm::all_of(r.via->getUsers(), [&](Operation *u) {
          return fusedReductions.contains(u);
        })) {
      fusedReductions.insert(r.via);
    }
  }
}

