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
      std::optional<size_t> chosen;
      // The most recent group that one of the operands belongs to.
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        auto it = def ? groupOf.find(def) : groupOf.end();
        if (it == groupOf.end() || groups[it->second].shape != shape ||
            static_cast<int64_t>(groups[it->second].members.size()) >=
                maxOps) {
          continue;
        }
        if (!chosen || position[groups[it->second].first] >
                           position[groups[*chosen].first]) {
          if (canJoin(groups[it->second], &op, position)) {
            chosen = it->second;
          }
        }
      }
      if (!chosen) {
        groups.push_back(Group{static_cast<int64_t>(groups.size()), shape, &op,
                               {}});
        chosen = groups.size() - 1;
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

  /// Whether `op` may join `g`: the group is lowered at the position of its
  /// last op, so no outside op before that may use a group value. Operands
  /// of members are all defined before the last member.
  static bool canJoin(const Group &g, Operation *op,
                      llvm::DenseMap<Operation *, unsigned> &position) {
    for (Operation *member : g.members) {
      for (Operation *user : member->getUsers()) {
        if (user != op && !g.members.contains(user) &&
            position[user] < position[op]) {
          return false;
        }
      }
    }
    return true;
  }
};

} // namespace
