//===- OnChipPlan.cpp - SBUF and PSUM placement, with spilling -----------===//
//
// Buffers are placed in program order when they are allocated and released
// after their last use. When SBUF is full, Belady's rule picks a victim: the
// live buffer whose next use is furthest away. It is stored to an HBM
// scratch buffer in front of the allocation that needs its space, and
// reloaded into a fresh buffer just before its next use; the users from
// there on read the reloaded copy, which the walk places like any other
// buffer when it reaches it. The engine phase orders the store before
// whatever reuses the space, since both touch the same bytes.
//
// SBUF has two regions besides the shared one. Background buffers (a
// whole-table update spread over the forward pass) get one at the top while
// they run. Buffers only engines touch (copies out of PSUM, temporaries),
// used over a short stretch, get one at the bottom: the shared region then
// rotates through loads and results alone, and a load's tile does not wait
// for an engine that reads a temporary there, as it did when they took
// turns at every address (on the BERT-base step with bf16 matmuls, loads
// idled 8.3 ms over the queues waiting for the last reader of their tile).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/MemoryPlan.h"
#include "passes/tile/TileBuilder.h"

#include "dialects/ktile/KTileDialect.h"

#include <limits>

using namespace mlir;

namespace kiln::tile_passes {

namespace {

/// Ops of the input sit kGap positions apart, so that the spill and reload
/// ops put in front of one get positions between it and its predecessor.
constexpr int64_t kGap = 8;
/// A buffer only engines touch goes to the local region when its uses span
/// at most this many ops: a longer-lived one (a stationary operand kept
/// for a whole product) would hold the small region.
constexpr int64_t kLocalSpanOps = 500;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

class OnChipPlanner {
public:
  OnChipPlanner(func::FuncOp func, const target::TargetDescription &t,
                int64_t sbufCapacity)
      : func(func), t(t), sbufCapacity(sbufCapacity),
        sbuf(sbufCapacity, kPlanAlignment),
        psum(t.psumBytesPerPartition / t.psumBankBytes - 1, 1),
        background(sbufCapacity, kPlanAlignment) {}

  FailureOr<int64_t> run() {
    Block &body = func.getBody().front();
    for (Operation &op : body) {
      position[&op] = static_cast<int64_t>(original.size()) * kGap;
      original.push_back(&op);
    }
    for (auto alloc : body.getOps<ktile::AllocOp>()) {
      if (ktile::memoryOf(alloc.getBuffer().getType()) == isa::Memory::Hbm) {
        continue;
      }
      auto &list = uses[alloc.getBuffer()];
      for (Operation *user : alloc.getBuffer().getUsers()) {
        list.push_back(position[user]);
        if (llvm::isa<ktile::DmaCopyOp, ktile::DmaGatherOp,
                      ktile::DmaScatterOp>(user)) {
          transferred.insert(alloc.getBuffer());
        }
      }
      llvm::sort(list);
    }
    int64_t backgroundUntil = reserveBackground(body);
    reserveLocal(body);
    for (Operation *op = &body.front(); op; op = op->getNextNode()) {
      int64_t at = position.lookup(op);
      if (backgroundBytes > 0 && at > backgroundUntil) {
        // The background work is over: its region is everyone's again.
        sbuf.grow(backgroundBytes);
        backgroundBytes = 0;
      }
      for (auto it = frees.begin(); it != frees.end() && it->first < at;) {
        Live &l = live[it->second];
        l.pool->release(l.address);
        live.erase(it->second);
        it = frees.erase(it);
      }
      auto alloc = llvm::dyn_cast<ktile::AllocOp>(op);
      if (alloc && ktile::memoryOf(alloc.getBuffer().getType()) !=
                       isa::Memory::Hbm) {
        if (failed(place(alloc, at))) {
          return failure();
        }
      }
    }
    return spills;
  }

private:
  struct Live {
    RotatingAllocator *pool;
    int64_t address;
  };

  int64_t lastUse(Value v, int64_t at) {
    const auto &list = uses[v];
    return list.empty() ? at : list.back();
  }
  /// The first use after position `after`.
  int64_t nextUse(Value v, int64_t after) {
    const auto &list = uses[v];
    auto it = llvm::upper_bound(list, after);
    return it == list.end() ? kNever : *it;
  }

  bool isBackground(ktile::AllocOp alloc) {
    return alloc->hasAttr(ktile::kBackgroundAttr);
  }

  /// An SBUF buffer only engines touch, used over a short stretch.
  bool isLocal(ktile::AllocOp alloc) {
    Value v = alloc.getBuffer();
    const auto &list = uses[v];
    return ktile::memoryOf(alloc.getBuffer().getType()) == isa::Memory::Sbuf &&
           !isBackground(alloc) && !transferred.contains(v) && !list.empty() &&
           list.back() - position[alloc] <= kLocalSpanOps * kGap;
  }

  /// A buffer a region would hold: where it is made, its bytes, and its
  /// last use.
  struct Candidate {
    int64_t at, bytes, lastUse;
  };

  /// The buffers `in` picks that something uses, in program order.
  llvm::SmallVector<Candidate>
  candidates(Block &body, llvm::function_ref<bool(ktile::AllocOp)> in) {
    llvm::SmallVector<Candidate> picked;
    for (auto alloc : body.getOps<ktile::AllocOp>()) {
      const auto &list = uses[alloc.getBuffer()];
      if (in(alloc) && !list.empty()) {
        picked.push_back(
            {position[alloc],
             alignUp(ktile::bufferBytes(alloc.getBuffer().getType())),
             list.back()});
      }
    }
    return picked;
  }

  /// Whether `picked`, placed alone in program order as they will be, fit
  /// a region of `bytes`; `until` gets the last position one is used at.
  static bool fitsAlone(llvm::ArrayRef<Candidate> picked, int64_t bytes,
                        int64_t &until) {
    RotatingAllocator region(bytes, kPlanAlignment);
    std::multimap<int64_t, int64_t> ends; // last use -> address
    until = -1;
    for (const Candidate &c : picked) {
      for (auto it = ends.begin(); it != ends.end() && it->first < c.at;) {
        region.release(it->second);
        it = ends.erase(it);
      }
      std::optional<int64_t> address = region.allocate(c.bytes);
      if (!address) {
        return false;
      }
      ends.emplace(c.lastUse, *address);
      until = std::max(until, c.lastUse);
    }
    return true;
  }

  /// Sets the background region aside at the top of SBUF: a quarter more
  /// than the least its buffers fit (room to overlap one tile's loads with
  /// the last one's stores), at most a quarter of SBUF; background work that
  /// needs more shares SBUF with the rest. Returns the last position a
  /// background buffer is used at (-1 with none or no region).
  int64_t reserveBackground(Block &body) {
    int64_t until = -1;
    int64_t least = leastRegion(
        body, [&](ktile::AllocOp a) { return isBackground(a); }, until);
    if (least == 0 || until < 0) {
      return -1;
    }
    int64_t units = least / kPlanAlignment;
    backgroundBytes =
        std::min(sbufCapacity / 4 / kPlanAlignment, units + units / 4) *
        kPlanAlignment;
    backgroundBase = sbufCapacity - backgroundBytes;
    sbuf = RotatingAllocator(backgroundBase, kPlanAlignment);
    background = RotatingAllocator(backgroundBytes, kPlanAlignment);
    return until;
  }

  /// The least region, up to a quarter of SBUF, that the buffers `in` picks
  /// fit placed alone; 0 if they fit none.
  int64_t leastRegion(Block &body, llvm::function_ref<bool(ktile::AllocOp)> in,
                      int64_t &until) {
    int64_t limit = sbufCapacity / 4 / kPlanAlignment; // in alignment units
    llvm::SmallVector<Candidate> picked = candidates(body, in);
    if (!fitsAlone(picked, limit * kPlanAlignment, until)) {
      return 0;
    }
    int64_t lo = 1, hi = limit, ignored; // the least that fits is in [lo, hi]
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (fitsAlone(picked, mid * kPlanAlignment, ignored)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return hi * kPlanAlignment;
  }

  /// Sets the local region aside at the bottom of SBUF: twice the least
  /// its buffers fit (one tile's buffers filled while the last one's are
  /// read), at most a quarter of SBUF. Local buffers it cannot take join
  /// the rest.
  void reserveLocal(Block &body) {
    int64_t until = -1;
    int64_t least =
        leastRegion(body, [&](ktile::AllocOp a) { return isLocal(a); }, until);
    if (least == 0 || until < 0) {
      return;
    }
    localBytes = std::min(sbufCapacity / 4, 2 * least);
    sbuf = RotatingAllocator(sbuf.size() - localBytes, kPlanAlignment);
    local = RotatingAllocator(localBytes, kPlanAlignment);
  }

  LogicalResult place(ktile::AllocOp alloc, int64_t at) {
    Value v = alloc.getBuffer();
    MemRefType type = alloc.getBuffer().getType();
    bool isPsum = ktile::memoryOf(type) == isa::Memory::Psum;
    int64_t bytes = ktile::bufferBytes(type);
    bool apart = !isPsum && backgroundBytes > 0 &&
                 alloc->hasAttr(ktile::kBackgroundAttr);
    int64_t units =
        isPsum ? static_cast<int64_t>(llvm::divideCeil(bytes, t.psumBankBytes))
               : alignUp(bytes);
    std::optional<int64_t> address;
    if (apart) {
      // A background buffer the region cannot take (one spilled and
      // reloaded) joins the rest.
      address = background.allocate(units);
      apart = address.has_value();
    }
    bool inLocal = false;
    if (!isPsum && !apart && localBytes > 0 && isLocal(alloc)) {
      address = local.allocate(units);
      inLocal = address.has_value();
    }
    RotatingAllocator &pool = isPsum    ? psum
                              : apart   ? background
                              : inLocal ? local
                                        : sbuf;
    if (!apart && !inLocal) {
      address = pool.allocate(units);
    }
    // A reload is needed by the instruction after it, not by its own DMA.
    int64_t needed = neededAt.count(v) ? neededAt[v] : nextUse(v, at);
    while (!address && !isPsum && units <= sbuf.size()) {
      std::optional<Value> victim = pickVictim(needed, at);
      if (!victim) {
        break;
      }
      spill(*victim, alloc, at);
      address = pool.allocate(units);
    }
    if (!address) {
      auto diag = alloc.emitOpError("needs ")
                  << bytes << " bytes per partition of "
                  << (isPsum ? "psum" : "sbuf") << " but "
                  << (isPsum ? pool.inUse() * t.psumBankBytes : pool.inUse())
                  << " of "
                  << (isPsum ? pool.size() * t.psumBankBytes : pool.size())
                  << " are live here";
      if (isPsum) {
        diag << " (PSUM is not spilled: accumulators live in their banks)";
      } else {
        diag << " and the same instruction needs them";
      }
      return diag;
    }
    live[v] = Live{&pool, *address};
    frees.emplace(lastUse(v, at), v);
    alloc.setAddressAttr(Builder(alloc).getI64IntegerAttr(
                                  isPsum    ? *address * t.psumBankBytes
                                  : apart   ? *address + backgroundBase
                                  : inLocal ? *address
                                            : *address + localBytes));
    return success();
  }

  /// The live SBUF buffer used again furthest in the future, after
  /// `needed`; ties go to the lowest address, so plans are deterministic.
  std::optional<Value> pickVictim(int64_t needed, int64_t at) {
    std::optional<Value> best;
    int64_t bestNext = needed, bestAddress = 0;
    for (auto &[v, l] : live) {
      if (l.pool != &sbuf) {
        continue;
      }
      int64_t next = nextUse(v, at);
      // Dead buffers are released before the next op; one whose next use
      // is a reload's DMA is about to be filled for the op after it.
      if (next == kNever || next % kGap != 0) {
        continue;
      }
      if (next > bestNext || (best && next == bestNext &&
                              l.address < bestAddress)) {
        best = v;
        bestNext = next;
        bestAddress = l.address;
      }
    }
    return best;
  }

  void spill(Value victim, Operation *before, int64_t at) {
    int64_t next = nextUse(victim, at); // an input op's: pickVictim checks
    Operation *consumer = original[next / kGap];
    auto type = llvm::cast<MemRefType>(victim.getType());
    Tile tile;
    tile.dtype = *kisa::toIsaType(type.getElementType());
    tile.rows = type.getShape()[0];
    tile.cols = type.getNumElements() / tile.rows;

    // Store in front of the allocation that needs the space.
    OpBuilder b(before);
    TileBuilder tb(b, before->getLoc(), t);
    Value scratch = tb.hbm({tile.rows, tile.cols}, tile.dtype, "spill");
    tile.buffer = victim;
    tb.store(HbmView::whole(scratch), 0, tile.cols, 1, tile);
    position[scratch.getDefiningOp()] = at - 2;
    position[before->getPrevNode()] = at - 1;

    // Reload in front of the next user; it and later users read the copy.
    b.setInsertionPoint(consumer);
    TileBuilder reloadBuilder(b, consumer->getLoc(), t);
    auto copy = ktile::AllocOp::create(b, consumer->getLoc(), type,
                                       StringAttr(), nullptr, IntegerAttr());
    tile.buffer = copy.getBuffer();
    reloadBuilder.load(tile, HbmView::whole(scratch), 0, tile.cols, 1);
    position[copy] = next - 4;
    position[consumer->getPrevNode()] = next - 3;
    for (OpOperand &use : llvm::make_early_inc_range(victim.getUses())) {
      if (position.lookup(use.getOwner()) >= next) {
        use.set(copy.getBuffer());
      }
    }
    // (Moved into the map after the victim's list is done with: inserting
    // into a DenseMap may move its entries.)
    llvm::SmallVector<int64_t> copyUses{next - 3};
    auto &victimUses = uses[victim];
    auto split = llvm::lower_bound(victimUses, next);
    copyUses.append(split, victimUses.end());
    int64_t oldLast = victimUses.back();
    victimUses.erase(split, victimUses.end());
    victimUses.push_back(at - 1);
    uses[copy.getBuffer()] = std::move(copyUses);
    neededAt[copy.getBuffer()] = next;

    // The victim is dead once stored: its space is free now.
    for (auto [it, end] = frees.equal_range(oldLast); it != end; ++it) {
      if (it->second == victim) {
        frees.erase(it);
        break;
      }
    }
    Live l = live[victim];
    l.pool->release(l.address);
    live.erase(victim);
    ++spills;
  }

  func::FuncOp func;
  const target::TargetDescription &t;
  int64_t sbufCapacity;
  /// The shared region sits above the local one, `localBytes` up.
  RotatingAllocator sbuf, psum, background;
  RotatingAllocator local{0, kPlanAlignment};
  int64_t localBytes = 0;
  /// SBUF buffers a DMA reads or writes.
  llvm::DenseSet<Value> transferred;
  /// The region background buffers take, at the top of SBUF, while any of
  /// them is live (0 once it is over, or when there are none).
  int64_t backgroundBase = 0, backgroundBytes = 0;
  llvm::DenseMap<Operation *, int64_t> position;
  std::vector<Operation *> original;
  /// Sorted use positions of every on-chip buffer.
  llvm::DenseMap<Value, llvm::SmallVector<int64_t>> uses;
  llvm::DenseMap<Value, Live> live;
  std::multimap<int64_t, Value> frees; // last use -> buffer
  llvm::DenseMap<Value, int64_t> neededAt;
  int64_t spills = 0;
};

} // namespace

FailureOr<int64_t> planOnChip(func::FuncOp func,
                              const target::TargetDescription &t,
                              int64_t sbufBytes) {
  // The engine phase's scratch slots sit past what the plan hands out.
  int64_t capacity =
      (sbufBytes > 0 ? std::min<int64_t>(sbufBytes, t.sbufBytesPerPartition)
                     : t.sbufBytesPerPartition) -
      ktile::kScratchSbufBytes;
  return OnChipPlanner(func, t, capacity).run();
}

} // namespace kiln::tile_passes
