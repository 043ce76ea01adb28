//===- Disassembler.h - readable text of artifacts --------------*- C++ -*-===//

#ifndef KILN_RUNTIME_ARTIFACT_DISASSEMBLER_H
#define KILN_RUNTIME_ARTIFACT_DISASSEMBLER_H

#include "runtime/artifact/Artifact.h"

#include "llvm/Support/raw_ostream.h"

namespace kiln::artifact {

/// "sbuf[0:128] f32 +1024 [1x256]"
std::string formatAccessPattern(const isa::AccessPattern &ap);
/// "matmul dst=... stationary=... moving=... accumulate  wait s0>=1  signal s4"
std::string formatInstruction(const isa::Instruction &inst);
/// Header, manifest and one disassembly per engine stream.
void dumpArtifact(llvm::raw_ostream &os, const Artifact &artifact);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_DISASSEMBLER_H
