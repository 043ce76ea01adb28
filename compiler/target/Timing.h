//===- Timing.h - the timing model of machine-model.md ----------*- C++ -*-===//

#ifndef KILN_COMPILER_TARGET_TIMING_H
#define KILN_COMPILER_TARGET_TIMING_H

#include "compiler/target/Isa.h"

namespace kiln::isa {

/// Modelled seconds `inst` keeps its engine or DMA queue busy, waits aside.
double instructionSeconds(const Instruction &inst,
                          const target::TargetDescription &target,
                          int worldSize);

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_TIMING_H
