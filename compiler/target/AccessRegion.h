//===- AccessRegion.h - the bytes an access pattern touches -----*- C++ -*-===//
//
// One definition for the two places that must agree on it: the compiler's
// dependency analysis orders every pair of instructions whose regions
// overlap, and the simulator's hazard checker reports every such pair that
// semaphores leave unordered. On-chip, a region is a partition range times a
// byte range; in HBM (no partitions) the interval from the first to the last
// byte a pattern touches.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_ACCESSREGION_H
#define KILN_COMPILER_TARGET_ACCESSREGION_H

#include "compiler/target/Isa.h"

namespace kiln::isa {

struct AccessRegion {
  Memory memory;
  int64_t rowLo, rowHi, byteLo, byteHi;

  bool overlaps(const AccessRegion &o) const {
    return memory == o.memory && rowLo < o.rowHi && o.rowLo < rowHi &&
           byteLo < o.byteHi && o.byteLo < byteHi;
  }
  bool contains(const AccessRegion &o) const {
    return memory == o.memory && rowLo <= o.rowLo && o.rowHi <= rowHi &&
           byteLo <= o.byteLo && o.byteHi <= byteHi;
  }
};

inline AccessRegion regionOf(const AccessPattern &ap) {
  int64_t row = ap.rowSpanElements() * ap.elementBytes();
  if (ap.memory == Memory::Hbm) {
    return {ap.memory, 0, 1, ap.offset,
            ap.offset +
                (ap.partitions - 1) * ap.partitionStride * ap.elementBytes() +
                row};
  }
  return {ap.memory, ap.partition, ap.partition + ap.partitions, ap.offset,
          ap.offset + row};
}

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_ACCESSREGION_H
