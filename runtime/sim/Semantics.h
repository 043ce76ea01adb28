//===- Semantics.h - what each instruction computes -------------*- C++ -*-===//

#ifndef KILN_RUNTIME_SIM_SEMANTICS_H
#define KILN_RUNTIME_SIM_SEMANTICS_H

#include "runtime/sim/Memory.h"

#include <vector>

namespace kiln::sim {

struct MachineState {
  MemoryArray &hbm, &sbuf, &psum;
  Rounder &rounder;
  int worldSize;
};

/// A tile's elements in (partition, free) row-major order; NaN where unwritten.
std::vector<double> gather(const MachineState &m, const isa::AccessPattern &ap);
/// Writes a tile's elements, rounding each to the tile's dtype.
void scatter(MachineState &m, const isa::AccessPattern &ap,
             const std::vector<double> &values);

/// Applies one instruction's effect on the memories.
void execute(MachineState &m, const isa::Instruction &inst);

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_SEMANTICS_H
