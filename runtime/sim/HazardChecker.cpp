//===- HazardChecker.cpp - accesses no semaphore orders -------------------===//

#include "runtime/sim/HazardChecker.h"

#include <algorithm>
#include <limits>

namespace kiln::sim {

namespace {

/// Granule bytes per memory: small enough that unrelated tiles seldom share
/// one, large enough that a tile spans few.
int64_t granuleBytes(isa::Memory memory) {
  switch (memory) {
  case isa::Memory::Hbm:
    return 256 * 1024;
  case isa::Memory::Psum:
    return 2 * 1024; // a bank
  case isa::Memory::Sbuf:
    return 4 * 1024;
  }
  return 4 * 1024;
}

/// A region spanning more granules than this goes into its memory's one
/// wide bucket, which every check of that memory reads.
constexpr int64_t kMaxGranules = 64;
constexpr uint64_t kWide = uint64_t{1} << 55;

} // namespace

llvm::SmallVector<uint64_t, 4>
HazardChecker::granulesOf(const isa::AccessRegion &r) const {
  int64_t size = granuleBytes(r.memory);
  int64_t first = r.firstByte() / size;
  int64_t last = (std::max(r.endByte(), r.firstByte() + 1) - 1) / size;
  if (last - first >= kMaxGranules) {
    return {isa::granuleKey(r.memory, kWide)};
  }
  llvm::SmallVector<uint64_t, 4> keys;
  for (int64_t g = first; g <= last; ++g) {
    keys.push_back(isa::granuleKey(r.memory, static_cast<uint64_t>(g)));
  }
  return keys;
}

void HazardChecker::check(
    const Access &access, llvm::ArrayRef<uint32_t> clock,
    llvm::function_ref<void(const Access &earlier)> race) {
  ++checks;
  llvm::SmallVector<uint32_t, 32> candidates;
  auto gather = [&](uint64_t k) {
    auto it = byGranule.find(k);
    if (it == byGranule.end()) {
      return;
    }
    for (uint32_t i : it->second) {
      if (lastChecked[i] != checks) {
        lastChecked[i] = checks;
        candidates.push_back(i);
      }
    }
  };
  llvm::SmallVector<uint64_t, 4> granules = granulesOf(access.region);
  uint64_t wide = isa::granuleKey(access.region.memory, kWide);
  if (granules.front() == wide) {
    // Anything in its memory may overlap it.
    for (auto &[k, list] : byGranule) {
      if (k >> 56 == wide >> 56) {
        gather(k);
      }
    }
  } else {
    for (uint64_t k : granules) {
      gather(k);
    }
    gather(wide);
  }
  // In the order recorded, as a scan of every access would report them.
  llvm::sort(candidates);
  for (uint32_t i : candidates) {
    const Access &prev = accesses[i];
    if (prev.stream == access.stream || !(prev.write || access.write) ||
        prev.epoch <= clock[prev.stream] ||
        !prev.region.overlaps(access.region)) {
      continue;
    }
    race(prev);
  }
}

void HazardChecker::record(const Access &access) {
  auto i = static_cast<uint32_t>(accesses.size());
  accesses.push_back(access);
  lastChecked.push_back(0);
  for (uint64_t k : granulesOf(access.region)) {
    byGranule[k].push_back(i);
  }
}

void HazardChecker::forgetOrdered(llvm::ArrayRef<std::vector<uint32_t>> clocks,
                                  llvm::ArrayRef<bool> running) {
  // What every other running stream has seen of stream e.
  std::vector<uint32_t> seen(streams, std::numeric_limits<uint32_t>::max());
  for (size_t s = 0; s < streams; ++s) {
    if (!running[s]) {
      continue;
    }
    for (size_t e = 0; e < streams; ++e) {
      if (e != s) {
        seen[e] = std::min(seen[e], clocks[s][e]);
      }
    }
  }
  for (auto &[k, list] : byGranule) {
    llvm::erase_if(list, [&](uint32_t i) {
      return accesses[i].epoch <= seen[accesses[i].stream];
    });
  }
}

} // namespace kiln::sim
