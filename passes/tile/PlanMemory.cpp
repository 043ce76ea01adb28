//===- PlanMemory.cpp - SBUF, PSUM and HBM placement by liveness ----------===//

#include "passes/tile/Passes.h"

#include "passes/tile/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln::tile_passes {
#define GEN_PASS_DEF_KTILEPLANMEMORY
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using kiln::tile_passes::alignUp;
using kiln::tile_passes::kPlanAlignment;
using kiln::tile_passes::RotatingAllocator;

std::optional<int64_t> RotatingAllocator::allocate(int64_t bytes) {
  for (int pass = 0; pass < 2; ++pass) {
    // From the cursor to the end, then from the start: a block that
    // straddles the cursor is found by the second pass.
    int64_t start = pass == 0 ? cursor : 0;
    int64_t limit = capacity;
    int64_t at = start;
    for (auto it = used.lower_bound(start); at + bytes <= limit;) {
      // Skip a block that started before `at` and covers it.
      auto prev = used.upper_bound(at);
      if (prev != used.begin()) {
        --prev;
        if (prev->first + prev->second > at) {
          at = align(prev->first + prev->second);
          it = used.lower_bound(at);
          continue;
        }
      }
      if (it == used.end() || it->first >= at + bytes) {
        used[at] = bytes;
        cursor = at + bytes;
        return at;
      }
      at = align(it->first + it->second);
      it = used.lower_bound(at);
    }
  }
  return std::nullopt;
}

int64_t RotatingAllocator::inUse() const {
  int64_t total = 0;
  for (auto &[at, bytes] : used) {
    total += bytes;
  }
  return total;
}

namespace {

constexpr int64_t kHbmRotation = 4;

/// Whether a collective of the data-parallel group reads or writes
/// `buffer`, directly or through views. Such a collective (a gradient
/// bucket's) runs long beside the backward pass; a tensor-parallel one's
/// result is read at once, so its operands are intermediates like any.
bool touchesDataParallelCollective(Value buffer) {
  for (Operation *user : buffer.getUsers()) {
    if (auto collective = llvm::dyn_cast<ktile::CollectiveOp>(user);
        collective &&
        collective.getGroup().value_or(0) ==
            static_cast<uint64_t>(isa::CollectiveGroup::Data)) {
      return true;
    }
    if (auto view = llvm::dyn_cast<ktile::ViewOp>(user);
        view && touchesDataParallelCollective(view.getResult())) {
      return true;
    }
  }
  return false;
}

/// The most bytes of `allocs` live at once, each from its position to its
/// last use, in program order.
int64_t livePeak(llvm::ArrayRef<ktile::AllocOp> allocs,
                 llvm::DenseMap<Operation *, int64_t> &position,
                 const std::function<int64_t(Value)> &lastUseOf) {
  std::multimap<int64_t, int64_t> frees; // last use -> bytes
  int64_t live = 0, peak = 0;
  for (ktile::AllocOp alloc : allocs) {
    int64_t at = position[alloc];
    for (auto it = frees.begin(); it != frees.end() && it->first < at;) {
      live -= it->second;
      it = frees.erase(it);
    }
    int64_t bytes = alignUp(ktile::bufferBytes(alloc.getBuffer().getType()));
    live += bytes;
    peak = std::max(peak, live);
    frees.emplace(lastUseOf(alloc.getBuffer()), bytes);
  }
  return peak;
}

/// `bytes` for an error message: GB, or MB below a GB.
std::string bytesText(int64_t bytes) {
  return bytes >= 1e9 ? llvm::formatv("{0:F1} GB", bytes / 1e9).str()
                      : llvm::formatv("{0:F1} MB", bytes / 1e6).str();
}

struct KTilePlanMemory
    : kiln::tile_passes::impl::KTilePlanMemoryBase<KTilePlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    const target::TargetDescription *t =
        kiln::tile_passes::lookupTargetOrError(getOperation(), target);
    if (!t) {
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.isExternal() && failed(plan(func, *t))) {
        return signalPassFailure();
      }
    }
  }

  LogicalResult plan(func::FuncOp func, const target::TargetDescription &t) {
    // On-chip first: spilling adds HBM scratch buffers for the HBM plan.
    FailureOr<int64_t> spilled =
        kiln::tile_passes::planOnChip(func, t, sbufBytes);
    if (failed(spilled)) {
      return failure();
    }
    Block &body = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    for (Operation &op : body) {
      position[&op] = index++;
    }
    // The last op that touches each buffer, through views; results and
    // arguments live throughout.
    llvm::DenseMap<Value, int64_t> lastUse;
    std::function<int64_t(Value)> lastUseOf = [&](Value v) -> int64_t {
      int64_t last = -1;
      for (Operation *user : v.getUsers()) {
        if (llvm::isa<func::ReturnOp>(user)) {
          return index;
        }
        last = std::max(last, position[user]);
        if (auto view = llvm::dyn_cast<ktile::ViewOp>(user)) {
          last = std::max(last, lastUseOf(view.getResult()));
        }
      }
      return last;
    };

    // HBM: arguments, then constants and results, then intermediates
    // reusing the space of dead ones.
    int64_t hbmEnd = 0;
    Builder b(func.getContext());
    if (*spilled > 0) {
      func->setAttr(ktile::kSpillsAttr, b.getI64IntegerAttr(*spilled));
    }
    llvm::SmallVector<int64_t> argAddresses;
    for (BlockArgument arg : body.getArguments()) {
      argAddresses.push_back(hbmEnd);
      hbmEnd = alignUp(hbmEnd +
                       ktile::bufferBytes(llvm::cast<MemRefType>(arg.getType())));
    }
    func->setAttr(ktile::kArgumentAddressesAttr,
                  b.getDenseI64ArrayAttr(argAddresses));
    llvm::SmallVector<ktile::AllocOp> intermediates;
    for (auto alloc : body.getOps<ktile::AllocOp>()) {
      MemRefType type = alloc.getBuffer().getType();
      if (ktile::memoryOf(type) != isa::Memory::Hbm) {
        continue;
      }
      // A data-parallel collective's operands keep space of their own, like
      // results: it runs long beside other work, and a buffer placed where
      // one of its operands was would wait for it.
      if (alloc.getValueAttr() || lastUseOf(alloc.getBuffer()) == index ||
          touchesDataParallelCollective(alloc.getBuffer())) {
        alloc.setAddressAttr(b.getI64IntegerAttr(hbmEnd));
        hbmEnd = alignUp(hbmEnd + ktile::bufferBytes(type));
      } else {
        intermediates.push_back(alloc);
      }
    }
    // Intermediates rotate through kHbmRotation times the most that is
    // ever live at once: a freed block is reused only after several times
    // the live bytes have been placed since, so reuse does not order
    // transfers that could overlap (at 2x, 4 of kiln-bench-compile's 606
    // steps got slower, by up to 12 %; at 4x none), and the plan stays
    // within a few times the live peak instead of the sum of every
    // intermediate (the arena grows where fragmentation leaves no room).
    RotatingAllocator hbm(std::max<int64_t>(kHbmRotation * livePeak(intermediates,
                                                         position, lastUseOf),
                                            kPlanAlignment),
                          kPlanAlignment);
    std::multimap<int64_t, int64_t> hbmFrees; // last use -> address
    int64_t hbmPeak = 0;
    for (ktile::AllocOp alloc : intermediates) {
      int64_t at = position[alloc];
      for (auto it = hbmFrees.begin();
           it != hbmFrees.end() && it->first < at;) {
        hbm.release(it->second);
        it = hbmFrees.erase(it);
      }
      int64_t bytes = ktile::bufferBytes(alloc.getBuffer().getType());
      std::optional<int64_t> placed;
      while (!(placed = hbm.allocate(bytes))) {
        hbm.grow(alignUp(bytes));
      }
      int64_t address = *placed;
      hbmPeak = std::max(hbmPeak, address + bytes);
      hbmFrees.emplace(lastUseOf(alloc.getBuffer()), address);
      alloc.setAddressAttr(b.getI64IntegerAttr(hbmEnd + address));
    }
    int64_t needed = std::max<int64_t>(alignUp(hbmEnd + hbmPeak), 64);
    int64_t capacity = t.hbmBytesPerCore();
    std::string limit = "a " + t.name.str() + " NeuronCore's " + bytesText(capacity);
    if (hbmBytes > 0 && hbmBytes < capacity) {
      capacity = hbmBytes;
      limit = "the " + bytesText(capacity) + " --hbm-bytes allows";
    }
    if (needed > capacity) {
      if (auto module = func->getParentOfType<ModuleOp>()) {
        module->setAttr(kiln::tile_passes::kHbmOverflowAttr, b.getUnitAttr());
      }
      return func.emitError(llvm::formatv(
          "'{0}' needs {1} of HBM ({2} of arguments), more than {3}: shard "
          "its optimizer state (--zero-stage=1) or its layers "
          "(kiln.parallel), checkpoint its layers' activations "
          "(torch.utils.checkpoint), or train on a smaller batch or "
          "sequence",
          func.getSymName(), bytesText(needed), bytesText(hbmEnd), limit));
    }
    func->setAttr(ktile::kHbmBytesAttr, b.getI64IntegerAttr(needed));
    return success();
  }
};

} // namespace
