//===- Semantics.h - what each instruction computes -------------*- C++ -*-===//

#ifndef KILN_RUNTIME_SIM_SEMANTICS_H
#define KILN_RUNTIME_SIM_SEMANTICS_H

#include "runtime/comm/Communicator.h"
#include "runtime/sim/Memory.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace kiln::sim {

struct MachineState {
  MemoryArray &hbm, &sbuf, &psum;
  Rounder &rounder;
  /// Whether the fast kernels check that what they read was written and
  /// mark what they write. A replayed instruction whose operands the
  /// recorded run found written needs neither: written bits are only ever
  /// set, so they still are, and its destination was marked then.
  bool tracksWritten = true;

  MemoryArray &memory(isa::Memory which) const {
    switch (which) {
    case isa::Memory::Hbm:
      return hbm;
    case isa::Memory::Sbuf:
      return sbuf;
    case isa::Memory::Psum:
      return psum;
    }
    return sbuf;
  }
};

/// A tile's elements in (partition, free) row-major order; NaN where unwritten.
std::vector<double> gather(const MachineState &m, const isa::AccessPattern &ap);
/// Writes a tile's elements, rounding each to the tile's dtype.
void scatter(MachineState &m, const isa::AccessPattern &ap,
             const std::vector<double> &values);

/// Applies one instruction's effect on the memories: a fast kernel where one
/// applies (Kernels.h), the reference semantics otherwise.
void execute(MachineState &m, const isa::Instruction &inst);
/// The reference semantics alone, element by element: the specification the
/// kernels are tested against.
void executeReference(MachineState &m, const isa::Instruction &inst);
/// A `collective` across the data-parallel group: the source tile is
/// reduced through `communicator` (nullptr: a group of one, where every
/// collective is the copy) and written to the destination. Every worker runs
/// the same artifact with the same modelled schedule, so all reach their
/// collectives in the same order.
/// A dma_gather: partition p of the destination reads the source's row p
/// shifted by indices[p] * index_stride elements. A dma_scatter: the
/// destination's row p so shifted gets the source's partition p. An index
/// outside [0, index_bound) is an error naming the partition and the index,
/// and nothing is written.
llvm::Error executeIndexed(MachineState &m, const isa::Instruction &inst);

llvm::Error executeCollective(MachineState &m, const isa::Instruction &inst,
                              comm::Communicator *communicator);

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_SEMANTICS_H
