//===- Disassembler.cpp - readable text of artifacts ---------------------===//

#include "runtime/artifact/Disassembler.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln::artifact {

std::string formatAccessPattern(const isa::AccessPattern &ap) {
  std::string s =
      isa::memoryName(ap.memory).str() + "[" + std::to_string(ap.partition) +
      ":" + std::to_string(ap.partition + ap.partitions) + "] " +
      isa::dtypeName(ap.dtype).str() + " +" + std::to_string(ap.offset) + " [";
  for (int d = 0; d < ap.rank && d < isa::kMaxRank; ++d) {
    s += (d ? ", " : "") + std::to_string(ap.strides[d]) + "x" +
         std::to_string(ap.sizes[d]);
  }
  s += "]";
  if (ap.partitionStride) {
    s += " pstride " + std::to_string(ap.partitionStride);
  }
  return s;
}

std::string formatInstruction(const isa::Instruction &inst) {
  const isa::OpcodeSchema &s = isa::schemaOf(inst.opcode);
  std::string text = s.mnemonic.str();
  for (int i = 0; i < inst.numOperands; ++i) {
    text += " " + s.operandNames[i].str() + "=" +
            formatAccessPattern(inst.operands[i]);
  }
  if (s.op0Kind != isa::FieldKind::None) {
    text += " " + s.op0Name.str() + "=" +
            isa::fieldValueName(s.op0Kind, inst.op0).str();
  }
  if (s.op1Kind != isa::FieldKind::None) {
    text += " " + s.op1Name.str() + "=" +
            isa::fieldValueName(s.op1Kind, inst.op1).str();
  }
  for (auto [name, value] :
       {std::pair(s.imm0Name, inst.imm0), std::pair(s.imm1Name, inst.imm1)}) {
    if (!name.empty()) {
      text += " " + name.str() + "=" + llvm::formatv("{0}", value).str();
    }
  }
  for (auto [name, value] :
       {std::pair(s.int0Name, inst.int0), std::pair(s.int1Name, inst.int1),
        std::pair(s.int2Name, inst.int2)}) {
    if (!name.empty()) {
      text += " " + name.str() + "=" + std::to_string(value);
    }
  }
  if (inst.accumulate()) {
    text += " accumulate";
  }
  if (inst.numWaits) {
    text += "  wait";
    for (int i = 0; i < inst.numWaits; ++i) {
      text += " s" + std::to_string(inst.waitSemaphore[i]) +
              ">=" + std::to_string(inst.waitValue[i]);
    }
  }
  if (inst.numSignals) {
    text += "  signal";
    for (int i = 0; i < inst.numSignals; ++i) {
      text += " s" + std::to_string(inst.signalSemaphore[i]);
    }
  }
  return text;
}

void dumpArtifact(llvm::raw_ostream &os, const Artifact &a) {
  const kneff::Manifest &m = a.manifest;
  os << "kneff " << kFormatMajor << "." << a.formatMinor
     << (a.features & kFeatureCompressedStreams ? " (zstd streams)" : "")
     << "  target "
     << m.target() << "  compiler " << a.compilerVersion << " (" << a.gitHash
     << ")  schema "
     << llvm::toHex(schemaHash(), /*LowerCase=*/true).substr(0, 16) << "\n";
  size_t instructions = 0;
  for (const Stream &s : a.streams) {
    instructions += s.instructions.size();
  }
  os << "program " << m.name() << ": " << m.hbm_bytes() << " bytes of HBM, "
     << m.semaphores() << " semaphores, " << instructions << " instructions in "
     << a.streams.size() << " streams, " << a.constantBytes().size()
     << " bytes of constants";
  if (m.world_size() > 1) {
    os << ", collectives across " << m.world_size() << " workers";
  }
  if (m.tensor_parallel() > 1) {
    os << ", tensor-parallel groups of " << m.tensor_parallel();
  }
  os << "\n";
  os << "buffers:\n";
  for (const kneff::Buffer &b : m.buffers()) {
    std::string shape;
    for (int64_t d : b.shape()) {
      shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    }
    os << llvm::format(
        "  %-16s %-9s hbm +%-10llu %s[%s]\n", b.name().c_str(),
        kneff::BufferRole_Name(b.role()).c_str(),
        static_cast<unsigned long long>(b.offset()),
        isa::dtypeName(static_cast<isa::DType>(b.dtype())).str().c_str(),
        shape.c_str());
  }
  for (const Stream &s : a.streams) {
    os << streamName(s.engine, s.queue) << " (" << s.instructions.size()
       << " instructions):\n";
    for (size_t i = 0; i < s.instructions.size(); ++i) {
      os << llvm::format("  %4zu  ", i) << formatInstruction(s.instructions[i])
         << "\n";
    }
  }
}

} // namespace kiln::artifact
