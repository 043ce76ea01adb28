//===- RecomputeCheckpoints.cpp - recompute what checkpointed calls computed -===//
//
// A training step keeps every value its backward pass reads from the
// forward pass until the backward pass reads it: for a transformer layer at
// sequence 2048 that is about 1.8 GB (attention scores and probabilities
// among them), so a 22-layer model's saved activations alone exceed a
// NeuronCore's 16 GB. Activation checkpointing trades compute for that
// memory: the user marks functions (torch.utils.checkpoint) whose values
// are recomputed rather than kept, and only each call's inputs and outputs
// live through the forward pass.
//
// The front end marks each call's inputs and outputs with `kgraph.checkpoint`
// (see KGraphOps.td). A call's forward ops are the ops, before its last
// output marker, that its input markers' values reach. The values among
// them that later ops read (the backward pass) are computed again, with as
// much of the call as they need, right before the first of those readers,
// and the readers take the copies. The markers then go: nothing after this
// pass merges the copies with the originals (it runs after the last CSE).

#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SetVector.h"

#include <map>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHRECOMPUTECHECKPOINTS
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;

namespace {

/// The markers of one checkpointed call.
struct CheckpointedCall {
  uint64_t region = 0;
  llvm::SmallVector<CheckpointOp> inputs, outputs;
};

bool isOutputOf(Operation *op, uint64_t region) {
  auto marker = llvm::dyn_cast<CheckpointOp>(op);
  return marker && marker.getRegion() == region &&
         marker.getSide() == "output";
}

/// The call's forward ops: those before `end` that its inputs reach. Other
/// calls' markers inside it (a nested checkpoint) are among them.
llvm::SetVector<Operation *> forwardOps(const CheckpointedCall &call,
                                        Operation *end) {
  llvm::SetVector<Operation *> ops;
  llvm::SmallVector<Value> reached;
  for (CheckpointOp input : call.inputs) {
    reached.push_back(input.getOutput());
  }
  while (!reached.empty()) {
    Value value = reached.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user->getBlock() == end->getBlock() && user->isBeforeInBlock(end) &&
          !isOutputOf(user, call.region) &&
          ops.insert(user)) {
        llvm::append_range(reached, user->getResults());
      }
    }
  }
  return ops;
}

/// A call's forward ops and what the forward pass keeps anyway: its
/// inputs and outputs.
struct ForwardPass {
  llvm::SetVector<Operation *> ops;
  llvm::DenseSet<Value> kept;
  uint64_t region;

  /// Whether `use` is a read after the call (its backward pass).
  bool readsLater(OpOperand &use) const {
    return !ops.contains(use.getOwner()) &&
           !isOutputOf(use.getOwner(), region);
  }
};

ForwardPass forwardPass(const CheckpointedCall &call) {
  Operation *end = call.outputs.front();
  for (Operation *output : call.outputs) {
    if (end->isBeforeInBlock(output)) {
      end = output;
    }
  }
  ForwardPass pass{forwardOps(call, end), {}, call.region};
  for (CheckpointOp input : call.inputs) {
    pass.kept.insert(input.getOutput());
  }
  for (CheckpointOp output : call.outputs) {
    pass.kept.insert(output.getInput());
  }
  return pass;
}

/// The values of the forward pass, other than those it keeps, that later
/// ops read, and the first of those readers; none when a reader lies in
/// another block (a kgraph function has one), where no copy could go.
std::pair<llvm::SmallVector<Value>, Operation *>
savedValues(const ForwardPass &pass, Block *block) {
  llvm::SmallVector<Value> saved;
  Operation *firstReader = nullptr;
  for (Operation *op : pass.ops) {
    for (Value result : op->getResults()) {
      if (pass.kept.contains(result)) {
        continue;
      }
      for (OpOperand &use : result.getUses()) {
        if (!pass.readsLater(use)) {
          continue;
        }
        if (use.getOwner()->getBlock() != block) {
          return {};
        }
        if (saved.empty() || saved.back() != result) {
          saved.push_back(result);
        }
        if (!firstReader || use.getOwner()->isBeforeInBlock(firstReader)) {
          firstReader = use.getOwner();
        }
      }
    }
  }
  return {saved, firstReader};
}

/// The forward ops `saved` need, from the kept values on, in program order.
llvm::SmallVector<Operation *> neededOps(const ForwardPass &pass,
                                         llvm::ArrayRef<Value> saved) {
  llvm::SetVector<Operation *> needed;
  llvm::SmallVector<Value> wanted(saved);
  while (!wanted.empty()) {
    Operation *def = wanted.pop_back_val().getDefiningOp();
    if (!def || !pass.ops.contains(def) || !needed.insert(def)) {
      continue;
    }
    for (Value operand : def->getOperands()) {
      if (!pass.kept.contains(operand)) {
        wanted.push_back(operand);
      }
    }
  }
  llvm::SmallVector<Operation *> inOrder(needed.begin(), needed.end());
  llvm::sort(inOrder, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  return inOrder;
}

/// Recomputes the values of `call` that ops after it read, right before
/// the first of those readers, which all take the copies. Collectives (a
/// tensor-parallel layer's all-reduce) are recomputed too: every worker
/// runs the same program, so the copies pair up across the group.
void recompute(const CheckpointedCall &call) {
  if (call.inputs.empty() || call.outputs.empty()) {
    return;
  }
  ForwardPass pass = forwardPass(call);
  auto [saved, firstReader] = savedValues(pass, call.outputs.front()->getBlock());
  if (saved.empty()) {
    return;
  }
  OpBuilder builder(firstReader);
  IRMapping copies;
  for (Operation *op : neededOps(pass, saved)) {
    if (auto marker = llvm::dyn_cast<CheckpointOp>(op)) {
      // A nested call's marker: the identity.
      copies.map(marker.getOutput(), copies.lookupOrDefault(marker.getInput()));
    } else {
      builder.clone(*op, copies);
    }
  }
  for (Value value : saved) {
    value.replaceUsesWithIf(copies.lookup(value), [&](OpOperand &use) {
      return pass.readsLater(use);
    });
  }
}

struct KGraphRecomputeCheckpoints
    : kiln::graph_passes::impl::KGraphRecomputeCheckpointsBase<
          KGraphRecomputeCheckpoints> {
  void runOnOperation() override {
    std::map<uint64_t, CheckpointedCall> calls;
    llvm::SmallVector<CheckpointOp> markers;
    getOperation().walk([&](CheckpointOp marker) {
      CheckpointedCall &call = calls[marker.getRegion()];
      call.region = marker.getRegion();
      (marker.getSide() == "input" ? call.inputs : call.outputs)
          .push_back(marker);
      markers.push_back(marker);
    });
    for (const auto &[region, call] : calls) {
      recompute(call);
    }
    for (CheckpointOp marker : markers) {
      marker.getOutput().replaceAllUsesWith(marker.getInput());
      marker.erase();
    }
  }
};

} // namespace
