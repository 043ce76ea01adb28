//===- ScheduleUpdates.cpp - state updates as soon as they can run -------===//
//
// A front end traces the optimizer after the whole backward pass, so in
// program order every parameter's update waits for the last gradient. The
// tile phase lowers ops in program order and the engine phase's scheduler
// mostly keeps neighbours together, so the updates would run as one long
// tail on the vector engines while TensorE and the DMA queues sit idle.
// This pass moves each update right behind the last op it needs.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/SetVector.h"

#include <functional>
#include <map>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHSCHEDULEUPDATES
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;

namespace {

/// Ops that read their operand's bytes where they lie, as a view or a
/// conversion the tile phase may fold into a later load: a read of their
/// result is a read of their operand.
bool readsThrough(Operation *op) {
  using namespace kiln::kgraph;
  return llvm::isa<ReshapeOp, TransposeOp, CastOp, SliceOp, BroadcastOp>(op);
}

/// A row scatter whose result is only returned: a value it merges is a
/// result's too (the two halves of an embedding table's update).
bool onlyMergesResults(Operation *op) {
  return llvm::isa<kiln::kgraph::ScatterRowsOp>(op) &&
         llvm::all_of(op->getUsers(), [](Operation *u) {
           return llvm::isa<func::ReturnOp>(u);
         });
}

/// A view or join that packs a value into an all-gather's bucket (ZeRO-1's
/// updated parameter blocks, kgraph-data-parallel), or the all-gather: the
/// value is as good as returned.
bool packsGatherBucket(Operation *op) {
  if (llvm::isa<kiln::kgraph::AllGatherOp>(op)) {
    return true;
  }
  return llvm::isa<kiln::kgraph::ReshapeOp, kiln::kgraph::ConcatOp>(op) &&
         !op->use_empty() &&
         llvm::all_of(op->getUsers(),
                      [](Operation *user) { return packsGatherBucket(user); });
}

/// A collective that reduces a bucket of gradients (kgraph-data-parallel):
/// an all-reduce, or a reduce-scatter for ZeRO-1, across the data-parallel
/// group. A tensor-parallel all-reduce is part of a layer's computation.
bool reducesBucket(Operation *op) {
  if (auto sum = llvm::dyn_cast_if_present<kiln::kgraph::AllReduceOp>(op)) {
    return sum.getGroup() == "data";
  }
  return llvm::isa_and_present<kiln::kgraph::ReduceScatterOp>(op);
}

/// The collective whose bucket `op` unpacks a gradient from, when `op` is
/// such a view: a slice of the bucket, or a reshape of one
/// (kgraph-data-parallel).
Operation *reducedBucketOf(Operation *op) {
  while (llvm::isa_and_present<kiln::kgraph::ReshapeOp, kiln::kgraph::SliceOp>(
      op)) {
    op = op->getOperand(0).getDefiningOp();
  }
  return reducesBucket(op) ? op : nullptr;
}

/// The next reduction of gradients after `op` in program order, if any
/// (not a loss's or metric's all-reduce, which the function only returns).
Operation *nextBucketReduce(Operation *op) {
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (reducesBucket(next) &&
        !llvm::all_of(next->getUsers(), [](Operation *user) {
          return llvm::isa<func::ReturnOp>(user);
        })) {
      return next;
    }
  }
  return nullptr;
}

int64_t elements(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getNumElements();
}

class UpdateScheduler {
public:
  explicit UpdateScheduler(func::FuncOp func)
      : func(func), body(func.getBody().front()) {}

  void run() {
    collectUnits();
    llvm::SmallVector<Operation *> order;
    order.reserve(body.getOperations().size());
    llvm::DenseSet<Operation *> emitted;
    // Units waiting for ops, and how many each still waits for.
    llvm::DenseMap<Operation *, llvm::SmallVector<size_t, 2>> waitersOf;
    std::vector<size_t> unmet(units.size(), 0);
    std::vector<bool> done(units.size(), false);

    std::function<void(size_t)> emitUnit = [&](size_t u) {
      if (done[u]) {
        return;
      }
      done[u] = true;
      for (size_t p : pulled[u]) {
        emitUnit(p);
      }
      for (Operation *op : units[u].ops) {
        if (emitted.insert(op).second) {
          order.push_back(op);
          release(op, waitersOf, unmet, emitUnit);
        }
      }
    };

    for (size_t u = 0; u < units.size(); ++u) {
      if (!units[u].update) {
        continue;
      }
      llvm::SetVector<Operation *> blockers;
      llvm::SetVector<size_t> pulls;
      collectBlockers(u, blockers, pulls);
      waitForNextBucket(blockers, pulls);
      pulled[u].assign(pulls.begin(), pulls.end());
      for (Operation *b : blockers) {
        waitersOf[b].push_back(u);
      }
      unmet[u] = blockers.size();
      deferred.insert(u);
    }
    for (size_t u : deferred) {
      if (unmet[u] == 0) {
        emitUnit(u);
      }
    }
    for (Operation &op : body.without_terminator()) {
      if (emitted.contains(&op)) {
        continue;
      }
      auto unit = unitOf.find(&op);
      if (unit != unitOf.end() && deferred.contains(unit->second)) {
        continue; // emitted when what it waits for is
      }
      emitted.insert(&op);
      order.push_back(&op);
      release(&op, waitersOf, unmet, emitUnit);
    }
    // Updates that wait for each other (two that read each other's
    // arguments) leave the order as it was.
    if (llvm::any_of(deferred, [&](size_t u) { return !done[u]; })) {
      return;
    }
    Operation *terminator = body.getTerminator();
    for (Operation *op : order) {
      op->moveBefore(terminator);
    }
  }

private:
  struct Unit {
    llvm::SmallVector<Operation *> ops; // program order
    bool update = false;
    bool small = false;
  };

  /// Fusion groups are units (their members are lowered as one loop nest);
  /// every other op is a unit of its own.
  void collectUnits() {
    std::map<int64_t, size_t> groupUnit;
    for (Operation &op : body.without_terminator()) {
      size_t u;
      auto id = op.getAttrOfType<IntegerAttr>(kiln::kgraph::kFusionAttr);
      if (id && groupUnit.count(id.getInt())) {
        u = groupUnit[id.getInt()];
      } else {
        u = units.size();
        units.emplace_back();
        if (id) {
          groupUnit[id.getInt()] = u;
        }
      }
      units[u].ops.push_back(&op);
      unitOf[&op] = u;
    }
    pulled.resize(units.size());
    Operation *terminator = body.getTerminator();
    for (size_t u = 0; u < units.size(); ++u) {
      Unit &unit = units[u];
      bool returned = false, onlyReturned = true, small = true;
      for (Operation *op : unit.ops) {
        // A constant costs nothing to compute early, whatever its size.
        small = small && (op->getNumOperands() == 0 ||
                          llvm::all_of(op->getResults(), [](Value r) {
                            return elements(r) <= kSmallElements;
                          }));
        for (Value r : op->getResults()) {
          for (Operation *user : r.getUsers()) {
            if (user == terminator || onlyMergesResults(user) ||
                packsGatherBucket(user)) {
              returned = true;
            } else if (unitOf.lookup(user) != u) {
              onlyReturned = false;
            }
          }
        }
      }
      unit.update = returned && onlyReturned;
      // A view unpacking a gradient from its all-reduced bucket moves
      // nothing either: it goes with the update that reads it, instead of
      // holding the update back where the front end traced the optimizer.
      // So does a worker's block of a parameter (ZeRO-1), which reads only
      // the argument.
      bool unpacked = unit.ops.size() == 1 &&
                      (reducedBucketOf(unit.ops.front()) ||
                       llvm::isa<kiln::kgraph::WorkerShardOp>(unit.ops.front()));
      unit.small = (small || unpacked) && !unit.update;
    }
  }

  /// The ops unit `u` must follow, with the small units it brings along
  /// (the optimizer's step scalars, computed from inputs) expanded into
  /// what they need.
  void collectBlockers(size_t u, llvm::SetVector<Operation *> &blockers,
                       llvm::SetVector<size_t> &pulls) {
    llvm::SmallPtrSet<Operation *, 16> members(units[u].ops.begin(),
                                               units[u].ops.end());
    for (Operation *op : units[u].ops) {
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || members.contains(def)) {
          continue;
        }
        size_t d = unitOf.lookup(def);
        if (units[d].small && !pulls.contains(d)) {
          collectBlockers(d, blockers, pulls);
          pulls.insert(d);
        } else if (!units[d].small) {
          blockers.insert(lastOf(def));
        }
      }
    }
    // A result written over its argument's buffer must come after every
    // other read of that argument, direct or through views and casts.
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
      auto alias = func.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
      Operation *producer = ret.getOperand(r).getDefiningOp();
      // The table a row scatter writes into lies in the result's buffer.
      if (auto scatter =
              llvm::dyn_cast_or_null<kiln::kgraph::ScatterRowsOp>(producer)) {
        if (!members.contains(producer)) {
          producer = scatter.getInput().getDefiningOp();
        }
      }
      if (!alias || !producer || !members.contains(producer)) {
        continue;
      }
      llvm::SmallVector<Value> reads{func.getArgument(alias.getInt())};
      llvm::SmallPtrSet<Operation *, 16> seen;
      while (!reads.empty()) {
        Value v = reads.pop_back_val();
        for (Operation *user : v.getUsers()) {
          if (user == ret || members.contains(user) ||
              !seen.insert(user).second) {
            continue;
          }
          blockers.insert(lastOf(user));
          if (readsThrough(user)) {
            reads.append(user->result_begin(), user->result_end());
          }
        }
      }
    }
  }

  /// An update of an all-reduced gradient waits for the next bucket's
  /// all-reduce too. Right behind its own, its first loads would wait for
  /// the collective in flight (~0.1 ms), and the in-order engine streams
  /// with them; a bucket of the backward pass later, the collective is long
  /// done. (Behind its own: BERT-base at 4 workers 17.56 ms; behind the
  /// next: 16.02; at the end of the step: 17.10.)
  void waitForNextBucket(llvm::SetVector<Operation *> &blockers,
                         const llvm::SetVector<size_t> &pulls) {
    llvm::SmallVector<Operation *> reduces;
    for (Operation *b : blockers) {
      if (reducesBucket(b)) {
        reduces.push_back(b); // a bucket of one, reduced in place
      }
    }
    for (size_t p : pulls) {
      if (Operation *reduce = reducedBucketOf(units[p].ops.front())) {
        reduces.push_back(reduce);
      }
    }
    for (Operation *reduce : reduces) {
      if (Operation *next = nextBucketReduce(reduce)) {
        blockers.insert(lastOf(next));
      }
    }
  }

  /// The op after which `op` has run: the tile phase computes a fusion
  /// group where its last op stands, so its values exist only from there.
  Operation *lastOf(Operation *op) {
    auto unit = unitOf.find(op);
    return unit == unitOf.end() ? op : units[unit->second].ops.back();
  }

  template <typename Emit>
  void release(Operation *op,
               llvm::DenseMap<Operation *, llvm::SmallVector<size_t, 2>> &waitersOf,
               std::vector<size_t> &unmet, Emit &emitUnit) {
    auto it = waitersOf.find(op);
    if (it == waitersOf.end()) {
      return;
    }
    llvm::SmallVector<size_t, 2> waiters = std::move(it->second);
    waitersOf.erase(it);
    for (size_t u : waiters) {
      if (--unmet[u] == 0) {
        emitUnit(u);
      }
    }
  }

  /// Units of at most this many elements per result move with an update
  /// that needs them: scalars and per-row statistics cost nothing to hoist.
  static constexpr int64_t kSmallElements = 128;

  func::FuncOp func;
  Block &body;
  std::vector<Unit> units;
  llvm::DenseMap<Operation *, size_t> unitOf;
  std::vector<std::vector<size_t>> pulled;
  llvm::SetVector<size_t> deferred;
};

struct KGraphScheduleUpdates
    : kiln::graph_passes::impl::KGraphScheduleUpdatesBase<
          KGraphScheduleUpdates> {
  void runOnOperation() override { UpdateScheduler(getOperation()).run(); }
};

} // namespace
