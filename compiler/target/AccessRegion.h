//===- AccessRegion.h - the bytes an access pattern touches -----*- C++ -*-===//
//
// One definition for the two places that must agree on it: the compiler's
// dependency analysis orders every pair of instructions whose regions
// overlap, and the simulator's hazard checker reports every such pair that
// semaphores leave unordered. On-chip, a region is a partition range times a
// byte range; in HBM (no partitions) a box of rows of one pitch when the
// pattern's rows fit in it, else the interval from the first to the last
// byte a pattern touches. Regions of different pitches overlap when their
// bytes do, row by row: their spans may interleave while their bytes do not
// (a tile of a buffer reused at another width), and the hazard checker must
// not call a race what the compiler rightly left unordered.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_ACCESSREGION_H
#define KILN_COMPILER_TARGET_ACCESSREGION_H

#include "compiler/target/Isa.h"

#include <algorithm>

namespace kiln::isa {

struct AccessRegion {
  Memory memory;
  int64_t rowLo, rowHi, byteLo, byteHi;
  /// In HBM, nonzero when the region is a box: bytes [byteLo, byteHi) of
  /// each of the rows [rowLo, rowHi), rows `pitch` bytes long — a tile of a
  /// row-major tensor, so that the tiles beside it in the same rows do not
  /// count as overlapping. Zero: the byte interval [byteLo, byteHi), rows
  /// [0, 1).
  int64_t pitch = 0;

  /// The interval from the first to the last byte touched, plus one.
  int64_t firstByte() const { return pitch ? rowLo * pitch + byteLo : byteLo; }
  int64_t endByte() const {
    return pitch ? (rowHi - 1) * pitch + byteHi : byteHi;
  }
  bool overlaps(const AccessRegion &o) const {
    if (memory != o.memory) {
      return false;
    }
    if (pitch == o.pitch) {
      return rowLo < o.rowHi && o.rowLo < rowHi && byteLo < o.byteHi &&
             o.byteLo < byteHi;
    }
    // Different pitches (a tile of one tensor against a flat run, or a tile
    // of a buffer reused at another width): the bytes themselves, row by
    // row, not only the spans, which interleave where the bytes need not.
    if (firstByte() >= o.endByte() || o.firstByte() >= endByte()) {
      return false;
    }
    if (pitch == 0) {
      return o.rowMeets(byteLo, byteHi);
    }
    if (o.pitch == 0) {
      return rowMeets(o.byteLo, o.byteHi);
    }
    const AccessRegion &fewer = rowHi - rowLo <= o.rowHi - o.rowLo ? *this : o;
    const AccessRegion &more = &fewer == this ? o : *this;
    for (int64_t r = fewer.rowLo; r < fewer.rowHi; ++r) {
      if (more.rowMeets(r * fewer.pitch + fewer.byteLo,
                        r * fewer.pitch + fewer.byteHi)) {
        return true;
      }
    }
    return false;
  }
  /// Whether a row of this box (pitch > 0) meets bytes [s, e): the first
  /// row that ends after s must start before e.
  bool rowMeets(int64_t s, int64_t e) const {
    int64_t r = s >= byteHi ? std::max(rowLo, (s - byteHi) / pitch + 1) : rowLo;
    return r < rowHi && r * pitch + byteLo < e;
  }
  bool contains(const AccessRegion &o) const {
    if (memory != o.memory) {
      return false;
    }
    if (pitch != o.pitch) {
      return pitch == 0 && byteLo <= o.firstByte() && o.endByte() <= byteHi;
    }
    return rowLo <= o.rowLo && o.rowHi <= rowHi && byteLo <= o.byteLo &&
           o.byteHi <= byteHi;
  }
};

/// A key for granule `granule` of `memory`, for the maps that index
/// accesses by the granules they touch (the compiler's dependency analysis,
/// the simulator's hazard checker).
inline uint64_t granuleKey(Memory memory, uint64_t granule) {
  return (static_cast<uint64_t>(memory) << 56) | granule;
}

inline AccessRegion regionOf(const AccessPattern &ap) {
  int64_t row = ap.rowSpanElements() * ap.elementBytes();
  if (ap.memory == Memory::Hbm) {
    // Rows that each stay within one pitch make a box (a superset of the
    // bytes when a row is strided); anything else, the whole interval.
    int64_t pitch = ap.partitionStride * ap.elementBytes();
    if (ap.partitions > 1 && pitch > 0 && row <= pitch &&
        ap.offset % pitch + row <= pitch) {
      int64_t first = ap.offset / pitch, col = ap.offset % pitch;
      return {ap.memory, first, first + ap.partitions, col, col + row, pitch};
    }
    return {ap.memory, 0, 1, ap.offset,
            ap.offset +
                (ap.partitions - 1) * ap.partitionStride * ap.elementBytes() +
                row};
  }
  return {ap.memory, ap.partition, ap.partition + ap.partitions, ap.offset,
          ap.offset + row};
}

/// The bytes operand `k` of `inst` may touch: a gather's source or a
/// scatter's destination, the rows any index in [0, index_bound) can pick,
/// as one interval.
inline AccessRegion regionOfOperand(const Instruction &inst, int k) {
  AccessRegion region = regionOf(inst.operands[k]);
  if (k == indexedOperand(inst.opcode)) {
    int64_t reach =
        (inst.int1 - 1) * inst.int0 * inst.operands[k].elementBytes();
    region = {region.memory, 0, 1, region.firstByte(), region.endByte() + reach};
  }
  return region;
}

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_ACCESSREGION_H
