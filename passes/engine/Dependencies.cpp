//===- Dependencies.cpp - byte-overlap dependencies between instructions --===//
//
// Regions (compiler/target/AccessRegion.h) are what the simulator's hazard
// checker compares: ordering every pair the checker could flag is what makes
// a compiled step hazard-free by construction.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include "compiler/target/AccessRegion.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <array>

namespace kiln::engine_passes {

namespace {

using Region = isa::AccessRegion;

struct Access {
  uint32_t node;
  Region region;
  /// The sixteenths of the granule that writes after this access have
  /// overwritten in all of its rows (see Overwrites).
  uint16_t overwritten = 0;
};

/// The accesses of one granule that later ones may conflict with. Reads
/// and writes are kept apart because a read conflicts only with writes:
/// a tensor read by thousands of tiles (a weight, a reused activation)
/// would otherwise make every later read scan all of them.
struct Granule {
  std::vector<Access> reads, writes;
};

/// Granules: HBM in 64 KiB steps, on-chip memories in 1 KiB steps.
int granuleShift(isa::Memory m) { return m == isa::Memory::Hbm ? 16 : 10; }

/// Every memory's granules, by number: a step's millions of accesses each
/// touch a few, and an index is cheaper than a hash lookup. (A 16 GB HBM
/// plan has 262,144 granules.)
class Granules {
public:
  /// Granule `g` of `memory`, if anything touched it.
  const Granule *find(isa::Memory memory, int64_t g) const {
    const std::vector<Granule> &all = of(memory);
    return g < static_cast<int64_t>(all.size()) ? &all[g] : nullptr;
  }
  Granule &get(isa::Memory memory, int64_t g) {
    std::vector<Granule> &all = of(memory);
    if (g >= static_cast<int64_t>(all.size())) {
      all.resize(g + 1);
    }
    return all[g];
  }

private:
  std::vector<Granule> &of(isa::Memory memory) {
    return byMemory[static_cast<size_t>(memory)];
  }
  const std::vector<Granule> &of(isa::Memory memory) const {
    return byMemory[static_cast<size_t>(memory)];
  }

  std::array<std::vector<Granule>, 3> byMemory; // Hbm, Sbuf, Psum
};

/// Calls fn(g, lo, hi) for every granule `region` touches, with the
/// granule's byte range [lo, hi).
template <typename Fn>
void forEachGranule(const Region &region, Fn fn) {
  int shift = granuleShift(region.memory);
  for (int64_t g = region.firstByte() >> shift;
       g <= (region.endByte() - 1) >> shift; ++g) {
    fn(g, g << shift, (g + 1) << shift);
  }
}

/// Sixteenths of a granule: the unit in which a flat access (on-chip, or an
/// HBM interval) remembers what later writes overwrote. A PSUM bank read
/// whole by each evacuation and written a quarter at a time by the next
/// product is never covered by one write, but is by four.
class Overwrites {
public:
  Overwrites(int64_t lo, int64_t hi) : lo(lo), unit((hi - lo) / 16) {}

  /// The sixteenths `r` touches.
  uint16_t touched(const Region &r) const { return span(r, /*whole=*/false); }
  /// The sixteenths `r` writes entirely.
  uint16_t written(const Region &r) const { return span(r, /*whole=*/true); }

private:
  uint16_t span(const Region &r, bool whole) const {
    int64_t s = std::max(r.byteLo, lo) - lo;
    int64_t e = std::min(r.byteHi, lo + 16 * unit) - lo;
    if (s >= e) {
      return 0;
    }
    int64_t first = whole ? (s + unit - 1) / unit : s / unit;
    int64_t last = whole ? e / unit : (e + unit - 1) / unit;
    return static_cast<uint16_t>(((1u << last) - 1) & ~((1u << first) - 1));
  }

  int64_t lo, unit;
};

/// Whether `write` covers every byte `a` touches inside [lo, hi): then
/// anything later that conflicts with `a` there conflicts with `write`,
/// which is ordered after `a`, so the granule need not remember `a`. (Each
/// write prunes the granules it touches, so a long-lived HBM buffer reused
/// by many tensors does not make later accesses scan all of their tiles.)
bool coversWithin(const Region &write, const Region &a, int64_t lo,
                  int64_t hi) {
  if (write.pitch == 0 && a.pitch == 0) {
    return write.rowLo <= a.rowLo && a.rowHi <= write.rowHi &&
           std::max(write.byteLo, lo) <= std::max(a.byteLo, lo) &&
           std::min(a.byteHi, hi) <= std::min(write.byteHi, hi);
  }
  if (write.pitch != 0 && write.pitch == a.pitch) {
    // Same rows of one pitch: a's rows that reach into [lo, hi) must be
    // write's rows, with a's columns inside write's.
    int64_t p = write.pitch;
    int64_t first = std::max(a.rowLo, (lo - a.byteHi) / p);
    int64_t last = std::min(a.rowHi - 1, (hi - 1 - a.byteLo) / p);
    while (first <= last && first * p + a.byteHi <= lo) {
      ++first;
    }
    return first > last ||
           (write.rowLo <= first && last < write.rowHi &&
            write.byteLo <= a.byteLo && a.byteHi <= write.byteHi);
  }
  // Otherwise compare a's span inside the granule, [s, e), with the write:
  // an interval must hold it, a box must hold it within one of its rows.
  int64_t s = std::max(a.firstByte(), lo), e = std::min(a.endByte(), hi);
  if (s >= e) {
    return true;
  }
  if (write.pitch == 0) {
    return write.byteLo <= s && e <= write.byteHi;
  }
  int64_t p = write.pitch, row = s / p;
  return (e - 1) / p == row && write.rowLo <= row && row < write.rowHi &&
         write.byteLo <= s % p && (e - 1) % p < write.byteHi;
}

} // namespace

void computeDependencies(std::vector<Node> &nodes) {
  Granules granules;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const isa::Instruction &inst = nodes[i].inst;
    llvm::SmallVector<std::pair<Region, bool>, 4> accesses;
    for (int k = 0; k < inst.numOperands; ++k) {
      bool write = isa::writesOperand(inst.opcode, k);
      accesses.push_back({isa::regionOfOperand(inst, k), write});
    }
    llvm::SmallDenseSet<uint32_t, 8> preds;
    auto collect = [&](const std::vector<Access> &list, const Region &region) {
      for (const Access &a : list) {
        if (a.node != i && a.region.overlaps(region)) {
          preds.insert(a.node);
        }
      }
    };
    for (auto &[region, write] : accesses) {
      forEachGranule(region, [&](int64_t g, int64_t, int64_t) {
        const Granule *granule = granules.find(region.memory, g);
        if (!granule) {
          return;
        }
        collect(granule->writes, region);
        if (write) {
          collect(granule->reads, region);
        }
      });
    }
    nodes[i].preds.assign(preds.begin(), preds.end());
    // std::sort: llvm::sort of plain integers is qsort, a call a comparison.
    std::sort(nodes[i].preds.begin(), nodes[i].preds.end());
    for (auto &[region, write] : accesses) {
      forEachGranule(region, [&](int64_t g, int64_t lo, int64_t hi) {
        Granule &granule = granules.get(region.memory, g);
        if (write) {
          // What this write covers is ordered before it and before anything
          // that will conflict with it: later accesses need only see it.
          // So is an earlier flat access whose every sixteenth it and the
          // writes before it overwrote, in all of its rows.
          Overwrites sixteenths(lo, hi);
          uint16_t overwrites =
              region.pitch == 0 ? sixteenths.written(region) : 0;
          auto covered = [&](Access &a) {
            if (a.node == i) {
              return false;
            }
            if (coversWithin(region, a.region, lo, hi)) {
              return true;
            }
            if (!overwrites || a.region.pitch != 0 ||
                region.rowLo > a.region.rowLo || a.region.rowHi > region.rowHi) {
              return false;
            }
            a.overwritten |= overwrites;
            uint16_t touched = sixteenths.touched(a.region);
            return (touched & ~a.overwritten) == 0;
          };
          for (std::vector<Access> *list : {&granule.reads, &granule.writes}) {
            size_t kept = 0;
            for (Access &a : *list) {
              if (!covered(a)) {
                (*list)[kept++] = a;
              }
            }
            list->resize(kept);
          }
        }
        (write ? granule.writes : granule.reads).push_back({i, region});
      });
    }
  }
}

} // namespace kiln::engine_passes
