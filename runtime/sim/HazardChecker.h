//===- HazardChecker.h - accesses no semaphore orders -----------*- C++ -*-===//
//
// The simulator's race detector: every pair of accesses from different
// streams to overlapping bytes, one of them a write, where neither is
// ordered before the other by a chain of semaphores (vector clocks: an
// access is ordered before a later one when the later stream's clock has
// seen its epoch).
//
// A training step has hundreds of thousands of accesses, so each new one
// is compared only with earlier ones in the same granules of its memory, and
// accesses every unfinished stream has seen are dropped: no later access can
// race with them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIM_HAZARDCHECKER_H
#define KILN_RUNTIME_SIM_HAZARDCHECKER_H

#include "compiler/target/AccessRegion.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/FunctionExtras.h"

#include <cstdint>
#include <vector>

namespace kiln::sim {

class HazardChecker {
public:
  struct Access {
    int stream;
    uint32_t epoch; // the stream's clock of its own instruction
    size_t index;   // the instruction's index in its stream
    isa::AccessRegion region;
    bool write;
  };

  explicit HazardChecker(size_t streams) : streams(streams) {}

  /// Calls `race(earlier)` for each earlier access that `access` races
  /// with, in the order the earlier ones were recorded; `clock` is the
  /// accessing stream's clock. Does not record `access`.
  void check(const Access &access, llvm::ArrayRef<uint32_t> clock,
             llvm::function_ref<void(const Access &earlier)> race);
  /// Records an access for later ones to be checked against.
  void record(const Access &access);
  /// Drops the accesses that every stream still running has seen:
  /// `clocks[s]` is stream s's clock, `running[s]` whether it has
  /// instructions left.
  void forgetOrdered(llvm::ArrayRef<std::vector<uint32_t>> clocks,
                     llvm::ArrayRef<bool> running);

private:
  /// The granules of its memory a region spans: (memory, granule) keys.
  llvm::SmallVector<uint64_t, 4> granulesOf(const isa::AccessRegion &r) const;

  size_t streams;
  std::vector<Access> accesses; // in the order recorded
  std::vector<uint64_t> lastChecked; // per access: the check that saw it
  uint64_t checks = 0;
  llvm::DenseMap<uint64_t, std::vector<uint32_t>> byGranule;
};

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_HAZARDCHECKER_H
