//===- Timing.h - the timing model of machine-model.md ----------*- C++ -*-===//

#ifndef KILN_COMPILER_TARGET_TIMING_H
#define KILN_COMPILER_TARGET_TIMING_H

#include "compiler/target/Isa.h"

namespace kiln::isa {

/// Modelled seconds from `inst`'s start to its completion (when it
/// signals), waits aside.
double instructionSeconds(const Instruction &inst,
                          const target::TargetDescription &target,
                          const GroupSizes &groups);

/// Modelled seconds of a collective instruction, by where its group lies
/// in the job's layout (machine-model.md, "Collectives across a cluster").
double collectiveSeconds(const Instruction &inst,
                         const target::TargetDescription &target,
                         const GroupSizes &groups);

/// Modelled seconds `inst` keeps its engine or DMA queue from starting the
/// next instruction: all of instructionSeconds, less a transfer's fixed
/// latency where the target lets a queue overlap it
/// (TargetDescription::dmaLatencyHoldsQueue).
double streamSeconds(const Instruction &inst,
                     const target::TargetDescription &target,
                     const GroupSizes &groups);

/// The bytes a dma_copy or dma_gather moves: a converting transfer moves
/// its wider side's (a load that narrows f32 to bf16 reads four bytes an
/// element from HBM).
double dmaBytes(const Instruction &inst);

/// The access ports engines share (machine-model.md), which an instruction
/// holds for its whole duration: on trn1, Vector and GpSimd reach SBUF
/// through one port, and Vector and Scalar reach PSUM through another.
enum SharedPort : unsigned { kSbufPort = 1, kPsumPort = 2 };

/// The SharedPort bits `inst` holds on `engine` (its own by default).
unsigned sharedPorts(const Instruction &inst,
                     const target::TargetDescription &target);
unsigned sharedPorts(const Instruction &inst, Engine engine,
                     const target::TargetDescription &target);

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_TIMING_H
