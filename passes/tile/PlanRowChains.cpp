//===- PlanRowChains.cpp - groups joined across row reductions -----------===//
//
// Fusion groups hold one shape, so a softmax is three of them: the scaled
// scores, whose loop nest folds each row's max; the shifted exponentials,
// folding each row's sum; and the division, dropout and bf16 cast. Between
// them the [rows, keys] values go to HBM and come back (in f32: BERT-base's
// attention moved 25 MB a layer that way). A layer norm is two, with the
// centred input making the round trip. When the rows are short enough that
// each iteration of a loop nest holds whole rows, a row's max or sum is
// complete before the iteration ends, so the next group can run in the same
// iteration. A row chain is that sequence of groups, the reductions between
// them, and the elementwise ops on the reductions (the mean's scale, the
// variance's epsilon and reciprocal square root): LowerElementwise runs it
// as one loop nest, or, when its layout cannot hold whole rows, declines,
// and the parts run one by one as before.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

#include "passes/graph/OpClasses.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

llvm::ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

bool allOfShape(llvm::ArrayRef<Operation *> ops, llvm::ArrayRef<int64_t> shape) {
  return llvm::all_of(ops, [&](Operation *op) {
    return llvm::all_of(op->getResults(),
                        [&](Value r) { return shapeOf(r) == shape; });
  });
}

/// The number of trailing dimensions `op` reduces when it is a reduction
/// over trailing dimensions of a value of `shape` that keeps them (size 1).
std::optional<int64_t> trailingReduction(Operation *op,
                                         llvm::ArrayRef<int64_t> shape) {
  if (!llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op) ||
      shapeOf(op->getOperand(0)) != shape) {
    return std::nullopt;
  }
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  auto rank = static_cast<int64_t>(shape.size());
  auto n = static_cast<int64_t>(dims.size());
  if (n == 0 || n >= rank ||
      !llvm::all_of(dims, [&](int64_t d) { return d >= rank - n; })) {
    return std::nullopt;
  }
  llvm::SmallVector<int64_t> kept(shape.begin(), shape.end());
  std::fill(kept.begin() + (rank - n), kept.end(), 1);
  if (shapeOf(op->getResult(0)) != llvm::ArrayRef<int64_t>(kept)) {
    return std::nullopt;
  }
  return n;
}

int64_t elementsOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getNumElements();
}

class ChainPlanner {
public:
  ChainPlanner(Block &body, const RowChainHooks &hooks) : hooks(hooks) {
    unsigned index = 0;
    for (Operation &op : body) {
      position[&op] = index++;
    }
  }

  /// The chain that starts with `first` (a group's members), if it joins
  /// at least one more group.
  std::optional<PlannedRowChain> from(llvm::ArrayRef<Operation *> first) {
    shape = shapeOf(first.back()->getResult(0));
    if (shape.size() < 2 || !allOfShape(first, shape) || !hooks.mayJoin(first)) {
      return std::nullopt;
    }
    chain.clear();
    chain.insert(first.begin(), first.end());
    reduced.reset();
    llvm::ArrayRef<Operation *> current = first;
    bool grew = false;
    while (std::optional<llvm::ArrayRef<Operation *>> next = extend(current)) {
      current = *next;
      grew = true;
    }
    if (!grew) {
      return std::nullopt;
    }
    PlannedRowChain plan;
    plan.ops.assign(chain.begin(), chain.end());
    llvm::sort(plan.ops, [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
    plan.shape.assign(shape.begin(), shape.end());
    plan.from = static_cast<int64_t>(shape.size()) - *reduced;
    return plan;
  }

private:
  /// Adds the reductions of `current`'s values, the ops on them, and the
  /// one group of the chain's shape they feed; returns that group.
  std::optional<llvm::ArrayRef<Operation *>>
  extend(llvm::ArrayRef<Operation *> current) {
    llvm::SetVector<Operation *> rowOps;
    std::optional<int64_t> n = reduced;
    for (Operation *member : current) {
      for (Value result : member->getResults()) {
        for (Operation *user : result.getUsers()) {
          std::optional<int64_t> k = trailingReduction(user, shape);
          if (!k || chain.contains(user) || (n && *k != *n)) {
            continue;
          }
          n = k;
          rowOps.insert(user);
        }
      }
    }
    // Reductions of what the group reads, folded before anything reads the
    // group's values: a softmax's row max taken on the scores themselves
    // (see kgraph's ReduceBeforePositiveScale), beside the group scaling
    // them. The loop nest holds its inputs' tiles as it holds its values'.
    unsigned firstReader = ~0u;
    for (Operation *member : current) {
      for (Operation *user : member->getUsers()) {
        if (!llvm::is_contained(current, user)) {
          firstReader = std::min(firstReader, position[user]);
        }
      }
    }
    for (Operation *member : current) {
      for (Value input : member->getOperands()) {
        Operation *def = input.getDefiningOp();
        if (shapeOf(input) != shape || (def && chain.contains(def))) {
          continue;
        }
        for (Operation *user : input.getUsers()) {
          std::optional<int64_t> k = trailingReduction(user, shape);
          if (k && !chain.contains(user) && (!n || *k == *n) &&
              position[user] > position[current.front()] &&
              position[user] < firstReader) {
            n = k;
            rowOps.insert(user);
          }
        }
      }
    }
    if (rowOps.empty()) {
      return std::nullopt;
    }
    llvm::SmallVector<int64_t> rowShape(shape.begin(), shape.end());
    std::fill(rowShape.end() - *n, rowShape.end(), 1);
    // The reductions' readers: ops on row values join; the first group of
    // the chain's shape to run is the next one; anything else (a backward
    // pass reading a layer norm's reciprocal deviation) reads after.
    std::optional<llvm::ArrayRef<Operation *>> next;
    for (size_t i = 0; i < rowOps.size(); ++i) {
      for (Operation *user : rowOps[i]->getUsers()) {
        if (rowOps.contains(user) || chain.contains(user) ||
            !graph_passes::isElementwise(user) || llvm::isa<DropoutOp>(user)) {
          continue;
        }
        llvm::ArrayRef<Operation *> group = hooks.membersOf(user);
        if (allOfShape(group, rowShape) && hooks.mayJoin(group)) {
          rowOps.insert(group.begin(), group.end());
        } else if (allOfShape(group, shape) &&
                   (!next || position[group.back()] < position[next->back()])) {
          next = group;
        }
      }
    }
    if (!next || !hooks.mayJoin(*next) ||
        llvm::any_of(*next, [&](Operation *op) { return chain.contains(op); })) {
      return std::nullopt;
    }
    // An op on row values reads row values and scalars only: the loop nest
    // holds nothing else one element per row.
    for (Operation *op : rowOps) {
      if (llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op)) {
        continue;
      }
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && rowOps.contains(def)) && elementsOf(v) != 1) {
          return std::nullopt;
        }
      }
    }
    llvm::SetVector<Operation *> grown = chain;
    grown.insert(rowOps.begin(), rowOps.end());
    grown.insert(next->begin(), next->end());
    unsigned at = 0;
    for (Operation *op : grown) {
      at = std::max(at, position[op]);
    }
    // The chain runs where its last op stands: nothing outside it may read
    // its values before then.
    for (Operation *op : grown) {
      for (Operation *user : op->getUsers()) {
        if (!grown.contains(user) && hooks.readAt(user) <= at) {
          return std::nullopt;
        }
      }
    }
    chain = std::move(grown);
    reduced = n;
    return next;
  }

  const RowChainHooks &hooks;
  llvm::DenseMap<Operation *, unsigned> position;
  llvm::ArrayRef<int64_t> shape;
  llvm::SetVector<Operation *> chain;
  std::optional<int64_t> reduced; // trailing dimensions the chain reduces
};

} // namespace

std::vector<PlannedRowChain> planRowChains(Block &body,
                                           const RowChainHooks &hooks) {
  ChainPlanner planner(body, hooks);
  std::vector<PlannedRowChain> chains;
  llvm::SmallPtrSet<Operation *, 32> taken;
  for (Operation &op : body) {
    if (!graph_passes::isElementwise(&op) || taken.contains(&op)) {
      continue;
    }
    llvm::ArrayRef<Operation *> group = hooks.membersOf(&op);
    if (&op != group.back()) {
      continue; // a group is looked at once, at its last op
    }
    std::optional<PlannedRowChain> chain = planner.from(group);
    if (!chain || llvm::any_of(chain->ops, [&](Operation *member) {
          return taken.contains(member);
        })) {
      continue;
    }
    taken.insert(chain->ops.begin(), chain->ops.end());
    chains.push_back(std::move(*chain));
  }
  return chains;
}

} // namespace kiln::tile_passes
