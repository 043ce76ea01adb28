//===- SpreadTableUpdates.cpp - a whole-table update in slices ------------===//
//
// kgraph-sparse-table-updates leaves an embedding table's update with zero
// gradient at the start of the step (it needs nothing the step computes).
// Emitted there as one loop nest, its hundreds of tiles take every SBUF
// address in turn, so the forward pass's first tiles, placed after them,
// would wait for its last ones: the update would run first, alone, and
// delay the whole step. Its loop nest is instead cut into slices spread
// over the forward pass (up to the loss), each emitted between the ops
// around it, so the scheduler runs them where the queues have room; and
// their SBUF tiles come from a region of their own while they run.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// The slices a spread update is cut into (at stores, so each slice
/// finishes the tiles it computes).
constexpr int64_t kSlices = 64;

bool storesToHbm(Operation *op) {
  if (!llvm::isa<ktile::DmaCopyOp>(op)) {
    return false;
  }
  auto dst = llvm::dyn_cast<MemRefType>(op->getOperand(0).getType());
  return dst && ktile::memoryOf(dst) == isa::Memory::Hbm;
}

} // namespace

/// The first position that reads a value of `members` when the group's
/// values leave only into row scatters' tables (a whole-table update),
/// or nothing.
std::optional<unsigned>
FunctionLowering::spreadUntil(llvm::ArrayRef<Operation *> members) {
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  std::optional<unsigned> until;
  for (Operation *op : members) {
    for (OpOperand &use : op->getResult(0).getUses()) {
      Operation *user = use.getOwner();
      if (inGroup.contains(user)) {
        continue;
      }
      if (!llvm::isa<ScatterRowsOp>(user) || use.getOperandNumber() != 0) {
        return std::nullopt;
      }
      until = std::min(until.value_or(position[user]), position[user]);
    }
  }
  return until;
}

/// Where the slices of an update lowered at `at`, first read at `until`,
/// go: over the forward pass, whose queues have the most room, up to the op
/// that computes the loss; without a loss in between, over the first half
/// of the way.
unsigned FunctionLowering::spreadEnd(unsigned at, unsigned until) {
  auto ret = llvm::cast<func::ReturnOp>(source.getBody().front().back());
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    auto role = source.getResultAttrOfType<StringAttr>(r, "kgraph.role");
    Operation *def = ret.getOperand(r).getDefiningOp();
    if (role && role.getValue() == "loss" && def && position[def] > at &&
        position[def] < until) {
      return position[def];
    }
  }
  return at + (until - at) / 2;
}

void FunctionLowering::spread(Operation *from, unsigned at, unsigned until) {
  Block *block = builder.getInsertionBlock();
  llvm::SmallVector<Operation *> emitted;
  for (auto it = from ? std::next(from->getIterator()) : block->begin();
       it != builder.getInsertionPoint(); ++it) {
    emitted.push_back(&*it);
  }
  llvm::SmallVector<size_t> cuts;
  for (size_t i = 0; i < emitted.size(); ++i) {
    if (storesToHbm(emitted[i])) {
      cuts.push_back(i + 1);
    }
  }
  until = spreadEnd(at, until);
  int64_t slices = std::min<int64_t>(kSlices, cuts.size());
  if (slices < 2 || until <= at + 1) {
    return;
  }
  // Its tiles come from an SBUF region of their own (OnChipPlan.cpp):
  // placed among the forward pass's tiles, each would order the forward
  // pass's next user of its address behind the update.
  for (Operation *op : emitted) {
    if (auto alloc = llvm::dyn_cast<ktile::AllocOp>(op);
        alloc &&
        ktile::memoryOf(alloc.getBuffer().getType()) == isa::Memory::Sbuf) {
      alloc->setAttr(ktile::kBackgroundAttr, UnitAttr::get(op->getContext()));
    }
  }
  // The first slice stays (it holds what the others read: the loads of
  // the step's scalars); slice j waits for position at + j (until - at) / n.
  size_t begin = cuts[cuts.size() / slices - 1];
  for (int64_t j = 1; j < slices; ++j) {
    size_t end = j + 1 == slices ? emitted.size()
                                 : cuts[(j + 1) * cuts.size() / slices - 1];
    DeferredSlice slice;
    slice.due = at + static_cast<unsigned>(j * (until - at) / slices);
    for (size_t i = begin; i < end; ++i) {
      emitted[i]->remove();
      slice.ops.push_back(emitted[i]);
    }
    deferredSlices.push_back(std::move(slice));
    begin = end;
  }
}

void FunctionLowering::emitDueSlices(unsigned at) {
  while (!deferredSlices.empty() && deferredSlices.front().due <= at) {
    for (Operation *op : deferredSlices.front().ops) {
      builder.insert(op);
    }
    deferredSlices.pop_front();
  }
}

} // namespace kiln::tile_passes
