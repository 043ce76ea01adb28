//===- FuseElementwise.cpp - group elementwise chains ---------------------===//

#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHFUSEELEMENTWISE
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;

namespace {

using kiln::kgraph::ReshapeOp;

/// op(reshape(x), ...) -> reshape(op(x, ...)) for an elementwise op whose
/// full-shape operands are all reshapes from one shape S. A front end
/// reshapes between a linear layer's 2-D product and the 3-D activations
/// around it ([1024, 3072] <-> [8, 128, 3072]); groups hold one shape, so
/// a reshape between a bias add and its GELU would cut the chain into two
/// loop nests and a round trip through HBM. A reshape of a contiguous
/// value moves nothing, so computing in S changes nothing but the grouping.
/// Lower-rank operands (a bias, a scalar) stay when they broadcast alike in
/// both shapes: their dimensions are trailing dimensions of both. A cast
/// stays below a reshape of a value no elementwise op computes: mixed
/// precision's casts of weights are done by the matmul's loads, which a
/// reshape between them would prevent. A cast of an elementwise op's value
/// sinks the reshape and joins the op's group, which then stores the value
/// narrowed. Dropout moves too, mask and all: its random numbers follow the
/// row-major index, which a reshape keeps, so a linear layer's bias,
/// dropout and residual add become one group. A reshape of a slice stays:
/// kgraph-data-parallel unpacks a bucket of all-reduced gradients into
/// flat slices seen in each parameter's shape, and the optimizer reads
/// them beside the parameter and its state, arguments in that shape. Sunk,
/// the reshape would carry the update's gradient ops into the bucket's flat
/// shape and cut the update into groups of two shapes, with HBM round trips
/// between them and ops left out of any group.
struct SinkReshape : RewritePattern {
  /// A cast of a reshaped value no elementwise op computes (an argument, a
  /// concat): the matmul's loads narrow it.
  static bool castLeftToLoads(Operation *op) {
    if (!llvm::isa<kiln::kgraph::CastOp>(op)) {
      return false;
    }
    auto reshape = op->getOperand(0).getDefiningOp<ReshapeOp>();
    Operation *def = reshape ? reshape.getInput().getDefiningOp() : nullptr;
    return !def || !kiln::graph_passes::isElementwise(def);
  }

  SinkReshape(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  static llvm::ArrayRef<int64_t> shapeOf(Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getShape();
  }

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!kiln::graph_passes::isElementwise(op) || castLeftToLoads(op)) {
      return failure();
    }
    auto resultType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    llvm::ArrayRef<int64_t> shape = resultType.getShape();
    std::optional<llvm::ArrayRef<int64_t>> source;
    for (Value v : op->getOperands()) {
      if (auto reshape = v.getDefiningOp<ReshapeOp>();
          reshape && shapeOf(v) == shape &&
          !reshape.getInput().getDefiningOp<kiln::kgraph::SliceOp>()) {
        source = shapeOf(reshape.getInput());
        break;
      }
    }
    if (!source) {
      return failure();
    }
    llvm::SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      llvm::ArrayRef<int64_t> operandShape = shapeOf(v);
      auto reshape = v.getDefiningOp<ReshapeOp>();
      if (reshape && operandShape == shape &&
          shapeOf(reshape.getInput()) == *source) {
        operands.push_back(reshape.getInput());
        continue;
      }
      size_t rank = operandShape.size();
      if (rank < shape.size() && rank <= source->size() &&
          shape.take_back(rank) == source->take_back(rank)) {
        operands.push_back(v);
        continue;
      }
      // Where the reshape adds dimensions (a linear layer's [1024, 768]
      // product seen as [8, 128, 768]), another full-shape operand computed
      // by an elementwise op or a constant (a fresh row-major buffer, so its
      // reshape moves nothing) is seen in S instead: the residual add and
      // the dropout after a linear layer then join its bias add. Reshapes
      // that remove dimensions never sink, so the two cannot undo each
      // other.
      Operation *def = v.getDefiningOp();
      if (operandShape == shape && source->size() < shape.size() && def &&
          (kiln::graph_passes::isElementwise(def) ||
           llvm::isa<kiln::kgraph::ConstantOp>(def))) {
        operands.push_back(ReshapeOp::create(
            rewriter, op->getLoc(),
            RankedTensorType::get(
                *source, llvm::cast<RankedTensorType>(v.getType())
                             .getElementType()),
            v));
        continue;
      }
      return failure();
    }
    llvm::SmallVector<Type, 2> movedTypes;
    for (Type t : op->getResultTypes()) {
      movedTypes.push_back(RankedTensorType::get(
          *source, llvm::cast<RankedTensorType>(t).getElementType()));
    }
    OperationState state(op->getLoc(), op->getName(), operands, movedTypes,
                         op->getAttrs());
    Operation *moved = rewriter.create(state);
    llvm::SmallVector<Value, 2> back;
    for (auto [r, t] : llvm::zip(moved->getResults(), op->getResultTypes())) {
      back.push_back(ReshapeOp::create(rewriter, op->getLoc(), t, r));
    }
    rewriter.replaceOp(op, back);
    return success();
  }
};

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
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkReshape>(&getContext());
    ReshapeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns)))) {
      func.emitError("sinking reshapes below elementwise ops did not settle");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    // Reshapes move down to their first user: a group runs where its last
    // op stands, so a view of a group value standing between its ops (the
    // mask of a dropout whose reshape sank) would stop the group there.
    llvm::SmallVector<ReshapeOp> reshapes(block.getOps<ReshapeOp>());
    for (ReshapeOp reshape : reshapes) {
      Operation *first = nullptr;
      for (Operation *user : reshape->getUsers()) {
        if (!first || user->isBeforeInBlock(first)) {
          first = user;
        }
      }
      if (first && first->getBlock() == &block) {
        reshape->moveBefore(first);
      }
    }
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned index = 0;
    for (Operation &op : block) {
      position[&op] = index++;
    }
    std::vector<Group> groups;
    llvm::DenseMap<Operation *, size_t> groupOf;
    // Ops moved below `op` to make room for a group were visited already:
    // the walk goes on from op's old successor.
    for (Operation &op : llvm::make_early_inc_range(block)) {
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
        if (canRunAt(groups, joined, &op, position) ||
            makeRoom(groups, joined, groupOf, &op, position)) {
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
    // Number the groups with more than one op, and lone ops that read a
    // product (see readsProduct); other lone ops need no mark.
    int64_t next = 0;
    OpBuilder builder(func.getContext());
    for (Group &g : groups) {
      if (g.members.empty() ||
          (g.members.size() < 2 && !readsProduct(*g.members.begin()))) {
        continue;
      }
      for (Operation *op : g.members) {
        op->setAttr(kiln::kgraph::kFusionAttr, builder.getI64IntegerAttr(next));
      }
      ++next;
    }
  }

  /// Whether a lone op is worth a mark: it reads a product, whose epilogue
  /// then computes it instead of the product going to HBM and back. A cast
  /// is not: the product's stores and its readers' loads narrow or widen.
  static bool readsProduct(Operation *op) {
    return !llvm::isa<kiln::kgraph::CastOp>(op) &&
           llvm::any_of(op->getOperands(), [](Value v) {
             return v.getDefiningOp<kiln::kgraph::MatmulOp>();
           });
  }

  /// Moves the ops that stop the groups `joined` from running at `op` —
  /// those before it reading their values from outside (a layer norm's
  /// row sum of one group value, standing before the op that multiplies
  /// it by another) — right below `op`, with everything before `op` that
  /// reads theirs, when nothing the groups or `op` compute needs them and
  /// none belongs to a group of several ops (whose other members stay).
  /// Their order among themselves is kept, and every value they read is
  /// still defined before them.
  static bool makeRoom(llvm::ArrayRef<Group> groups,
                       llvm::ArrayRef<size_t> joined,
                       const llvm::DenseMap<Operation *, size_t> &groupOf,
                       Operation *op,
                       llvm::DenseMap<Operation *, unsigned> &position) {
    auto inside = [&](Operation *o) {
      return llvm::any_of(
          joined, [&](size_t g) { return groups[g].members.contains(o); });
    };
    llvm::SetVector<Operation *> moved;
    for (size_t g : joined) {
      for (Operation *member : groups[g].members) {
        for (Operation *user : member->getUsers()) {
          if (user != op && position[user] < position[op] && !inside(user)) {
            moved.insert(user);
          }
        }
      }
    }
    for (size_t i = 0; i < moved.size(); ++i) {
      Operation *blocker = moved[i];
      auto group = groupOf.find(blocker);
      if (blocker->getBlock() != op->getBlock() ||
          (group != groupOf.end() &&
           groups[group->second].members.size() > 1)) {
        return false;
      }
      for (Operation *user : blocker->getUsers()) {
        if (user == op || inside(user)) {
          return false;
        }
        if (position[user] < position[op]) {
          moved.insert(user);
        }
      }
    }
    llvm::SmallVector<Operation *> order(moved.begin(), moved.end());
    llvm::sort(order, [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
    Operation *after = op;
    for (Operation *blocker : order) {
      blocker->moveAfter(after);
      after = blocker;
    }
    unsigned index = 0;
    for (Operation &o : *op->getBlock()) {
      position[&o] = index++;
    }
    return true;
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
