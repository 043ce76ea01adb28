//===- FuseElementwise.cpp - group elementwise chains ---------------------===//

#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHFUSEELEMENTWISE
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;

namespace {

struct Group {
  int64_t id;
  llvm::ArrayRef<int64_t> shape;
  Operation *first = nullptr;
  llvm::SmallPtrSet<Operation *, 16> members;
};

struct KGraphFuseElementwise
    : kiln::graph_passes::impl::KGraphFuseElementwiseBase<
          KGraphFuseElementwise> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty()) {
      return;
    }
    Block &block = func.getBody().front();
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned index = 0;
    for (Operation &op : block) {
      position[&op] = index++;
    }
    std::vector<Group> groups;
    llvm::DenseMap<Operation *, size_t> groupOf;
    for (Operation &op : block) {
      if (!kiln::graph_passes::isElementwise(&op)) {
        continue;
      }
      auto shape =
          llvm::cast<RankedTensorType>(op.getResult(0).getType()).getShape();
      // The operand groups of this shape, most recent first. The op joins
      // them all — merging them into one group — as far as they can all run
      // at its position and stay within maxOps: a chain that meets another
      // (AdamW's moment updates meeting the parameter update) is one loop
      // nest, and values passed between them never go through HBM.
      llvm::SmallVector<size_t, 4> candidates;
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        auto it = def ? groupOf.find(def) : groupOf.end();
        if (it != groupOf.end() && groups[it->second].shape == shape &&
            !llvm::is_contained(candidates, it->second)) {
          candidates.push_back(it->second);
        }
      }
      llvm::sort(candidates, [&](size_t a, size_t b) {
        return position[groups[a].first] > position[groups[b].first];
      });
      llvm::SmallVector<size_t, 4> joined;
      int64_t size = 1;
      for (size_t g : candidates) {
        int64_t grown = size + static_cast<int64_t>(groups[g].members.size());
        if (grown > maxOps) {
          continue;
        }
        joined.push_back(g);
        if (canRunAt(groups, joined, &op, position)) {
          size = grown;
        } else {
          joined.pop_back();
        }
      }
      std::optional<size_t> chosen;
      if (joined.empty()) {
        groups.push_back(Group{static_cast<int64_t>(groups.size()), shape, &op,
                               {}});
        chosen = groups.size() - 1;
      } else {
        chosen = joined.front();
        for (size_t g : llvm::drop_begin(joined)) {
          Group &from = groups[g];
          for (Operation *member : from.members) {
            groups[*chosen].members.insert(member);
            groupOf[member] = *chosen;
          }
          if (position[from.first] < position[groups[*chosen].first]) {
            groups[*chosen].first = from.first;
          }
          from.members.clear();
        }
      }
      groups[*chosen].members.insert(&op);
      groupOf[&op] = *chosen;
    }
    // Number the groups with more than one op; singletons need no mark.
    int64_t next = 0;
    OpBuilder builder(func.getContext());
    for (Group &g : groups) {
      if (g.members.size() < 2) {
        continue;
      }
      for (Operation *op : g.members) {
        op->setAttr("kgraph.fusion", builder.getI64IntegerAttr(next));
      }
      ++next;
    }
  }

  /// Whether the groups `joined`, with `op`, can run as one at the position
  /// of `op` (the group is lowered where its last op stands): no op outside
  /// them that comes before `op` uses one of their values. Operands of
  /// members are all defined before `op`.
  static bool canRunAt(llvm::ArrayRef<Group> groups,
                       llvm::ArrayRef<size_t> joined, Operation *op,
                       llvm::DenseMap<Operation *, unsigned> &position) {
    auto inside = [&](Operation *user) {
      return llvm::any_of(joined, [&](size_t g) {
        return groups[g].members.contains(user);
      });
    };
    for (size_t g : joined) {
      for (Operation *member : groups[g].members) {
        for (Operation *user : member->getUsers()) {
          if (user != op && position[user] < position[op] && !inside(user)) {
            return false;
          }
        }
      }
    }
    return true;
  }
};

} // namespace
