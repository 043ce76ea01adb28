//===- Dependencies.cpp - byte-overlap dependencies between instructions --===//
//
// Regions (compiler/target/AccessRegion.h) are what the simulator's hazard
// checker compares: ordering every pair the checker could flag is what makes
// a compiled step hazard-free by construction.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include "compiler/target/AccessRegion.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln::engine_passes {

namespace {

using Region = isa::AccessRegion;
using isa::regionOf;

struct Access {
  uint32_t node;
  bool write;
  Region region;
};

/// Granule keys: HBM in 64 KiB steps, on-chip memories in 1 KiB steps.
int granuleShift(isa::Memory m) { return m == isa::Memory::Hbm ? 16 : 10; }
uint64_t granuleKey(isa::Memory m, int64_t granule) {
  return (static_cast<uint64_t>(m) << 56) | static_cast<uint64_t>(granule);
}

} // namespace

void computeDependencies(std::vector<Node> &nodes) {
  llvm::DenseMap<uint64_t, std::vector<Access>> granules;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const isa::Instruction &inst = nodes[i].inst;
    llvm::SmallVector<std::pair<Region, bool>, 4> accesses;
    for (int k = 0; k < inst.numOperands; ++k) {
      bool write = k == 0 || (inst.opcode == isa::Opcode::Activation && k == 2);
      accesses.push_back({regionOf(inst.operands[k]), write});
    }
    llvm::SmallDenseSet<uint32_t, 8> preds;
    for (auto &[region, write] : accesses) {
      int shift = granuleShift(region.memory);
      for (int64_t g = region.byteLo >> shift; g <= (region.byteHi - 1) >> shift;
           ++g) {
        auto it = granules.find(granuleKey(region.memory, g));
        if (it == granules.end()) {
          continue;
        }
        for (const Access &a : it->second) {
          if ((write || a.write) && a.node != i && a.region.overlaps(region)) {
            preds.insert(a.node);
          }
        }
      }
    }
    nodes[i].preds.assign(preds.begin(), preds.end());
    llvm::sort(nodes[i].preds);
    for (auto &[region, write] : accesses) {
      int shift = granuleShift(region.memory);
      for (int64_t g = region.byteLo >> shift; g <= (region.byteHi - 1) >> shift;
           ++g) {
        std::vector<Access> &list = granules[granuleKey(region.memory, g)];
        if (write) {
          // What this write covers is ordered before it and before anything
          // that will conflict with it: later accesses need only see it.
          llvm::erase_if(list, [&](const Access &a) {
            return a.node != i && region.contains(a.region);
          });
        }
        list.push_back({i, write, region});
      }
    }
  }
}

} // namespace kiln::engine_passes
