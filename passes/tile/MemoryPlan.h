//===- MemoryPlan.h - placing buffers by liveness ---------------*- C++ -*-===//

#ifndef KILN_PASSES_TILE_MEMORYPLAN_H
#define KILN_PASSES_TILE_MEMORYPLAN_H

#include "compiler/target/TargetDescription.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/MathExtras.h"

#include <map>
#include <optional>

namespace kiln::tile_passes {

/// Where buffers of every memory start: a multiple of this many bytes.
inline constexpr int64_t kPlanAlignment = 64;
inline int64_t alignUp(int64_t bytes) {
  return static_cast<int64_t>(llvm::alignTo(bytes, kPlanAlignment));
}

/// First-fit placement in [0, capacity) of intervals that come and go,
/// searching from where the last placement ended so that a just-freed
/// block is the last one reused.
class RotatingAllocator {
public:
  RotatingAllocator(int64_t capacity, int64_t alignment)
      : capacity(capacity), alignment(alignment) {}

  std::optional<int64_t> allocate(int64_t bytes);
  void release(int64_t at) { used.erase(at); }
  int64_t inUse() const;
  int64_t size() const { return capacity; }
  /// Extends [0, capacity) by `bytes` (a region set aside, given back).
  void grow(int64_t bytes) { capacity += bytes; }

private:
  int64_t align(int64_t x) const {
    return (x + alignment - 1) / alignment * alignment;
  }
  int64_t capacity, alignment, cursor = 0;
  std::map<int64_t, int64_t> used;
};

/// Places the function's SBUF and PSUM buffers in program order, spilling
/// SBUF buffers to HBM scratch when they do not fit. `sbufBytes` (0: the
/// target's) is the capacity per partition before the engine phase's
/// scratch is taken off. Returns how many buffers were spilled.
mlir::FailureOr<int64_t> planOnChip(mlir::func::FuncOp func,
                                    const target::TargetDescription &target,
                                    int64_t sbufBytes);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_MEMORYPLAN_H
