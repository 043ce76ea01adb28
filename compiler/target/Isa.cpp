//===- Isa.cpp - instruction schema and the machine model's rules --------===//

#include "compiler/target/Isa.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"

#include <cmath>

namespace kiln::isa {

namespace {

constexpr uint8_t bit(Engine e) { return 1u << static_cast<int>(e); }

// One row per instruction of InstructionSet.td, in Opcode order
// (kiln-isa-tblgen --gen-schema-table); the rows spell engines with `bit`.
const OpcodeSchema kSchemas[kOpcodes] = {
#include "compiler/target/IsaSchemas.inc"
};

using L = llvm::StringLiteral;

const L kEngineNames[] = {L("tensor"), L("vector"), L("scalar"), L("gpsimd"),
                          L("dma")};
const L kMemoryNames[] = {L("hbm"), L("sbuf"), L("psum")};
const L kDTypeNames[] = {L("f32"), L("bf16"), L("f16"), L("i32")};
const L kAluNames[] = {L("bypass"), L("add"), L("sub"), L("mul"), L("div"),
                       L("max"),    L("min"), L("eq"),  L("ne"),  L("lt"),
                       L("le"),     L("gt"),  L("ge")};
const L kActNames[] = {L("identity"),   L("exp"),       L("log"),
                       L("tanh"),       L("sigmoid"),   L("relu"),
                       L("gelu"),       L("gelu_tanh"), L("gelu_derivative"),
                       L("rsqrt"),      L("sqrt"),      L("square"),
                       L("reciprocal"), L("abs"),       L("erf"),
                       L("sin"),        L("cos"),       L("sign"),
                       L("log1p"),      L("gelu_tanh_derivative")};
const L kCollectiveNames[] = {
    L("all_reduce_sum"),     L("all_reduce_mean"),     L("all_gather"),
    L("reduce_scatter_sum"), L("reduce_scatter_mean"), L("worker_shard")};

template <size_t N>
std::optional<uint8_t> indexOf(const L (&names)[N], llvm::StringRef name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) {
      return static_cast<uint8_t>(i);
    }
  }
  return std::nullopt;
}

llvm::ArrayRef<L> namesOf(FieldKind kind) {
  switch (kind) {
  case FieldKind::Alu:
    return kAluNames;
  case FieldKind::Act:
    return kActNames;
  case FieldKind::Collective:
    return kCollectiveNames;
  case FieldKind::None:
    return {};
  }
  return {};
}

using Error = std::optional<std::string>;

Error checkAccessPattern(const AccessPattern &ap, llvm::StringRef name,
                         Engine engine, const Limits &limits) {
  const target::TargetDescription &t = *limits.target;
  auto fail = [&](const llvm::Twine &what) -> Error {
    return ("operand '" + name + "': " + what).str();
  };
  if (ap.rank < 1 || ap.rank > kMaxRank) {
    return fail("rank " + llvm::Twine(static_cast<unsigned>(ap.rank)) +
                " is not in [1, 4]");
  }
  for (int d = 0; d < ap.rank; ++d) {
    if (ap.sizes[d] < 1 || ap.strides[d] < 0) {
      return fail("dimension " + llvm::Twine(d) + " has size " +
                  llvm::Twine(ap.sizes[d]) + " and stride " +
                  llvm::Twine(ap.strides[d]) +
                  "; sizes must be >= 1, strides >= 0");
    }
    if (ap.sizes[d] > (int64_t(1) << 32) ||
        ap.strides[d] > (int64_t(1) << 40)) {
      return fail("dimension " + llvm::Twine(d) + " is absurdly large");
    }
  }
  if (ap.partitions < 1 || ap.partitions > t.partitions) {
    return fail(llvm::Twine(ap.partitions) + " partitions is not in [1, " +
                llvm::Twine(t.partitions) + "]");
  }
  if (ap.offset < 0 || ap.offset > (int64_t(1) << 48) ||
      ap.partitionStride < 0 || ap.partitionStride > (int64_t(1) << 40)) {
    return fail("offset or partition stride is out of range");
  }
  int64_t rowBytes = ap.rowSpanElements() * ap.elementBytes();
  if (ap.memory == Memory::Hbm) {
    int64_t end = ap.offset +
                  (ap.partitions - 1) * ap.partitionStride * ap.elementBytes() +
                  rowBytes;
    if (end > limits.hbmBytes) {
      return fail("HBM bytes [" + llvm::Twine(ap.offset) + ", " +
                  llvm::Twine(end) + ") lie outside the program's " +
                  llvm::Twine(limits.hbmBytes) + " bytes of HBM");
    }
    return std::nullopt;
  }
  if (ap.partition + ap.partitions > t.partitions) {
    return fail("partitions [" + llvm::Twine(ap.partition) + ", " +
                llvm::Twine(ap.partition + ap.partitions) + ") exceed " +
                llvm::Twine(t.partitions));
  }
  if (!partitionStartAligned(ap.partition, ap.partitions)) {
    return fail(llvm::Twine(ap.partitions) +
                " partitions cannot start at partition " +
                llvm::Twine(ap.partition) +
                " (more than 64 start at 0; 33-64 at 0 or 64; 32 or fewer at a "
                "multiple of 32)");
  }
  int64_t capacity = ap.memory == Memory::Sbuf ? t.sbufBytesPerPartition
                                               : t.psumBytesPerPartition;
  if (ap.offset + rowBytes > capacity) {
    return fail("bytes [" + llvm::Twine(ap.offset) + ", " +
                llvm::Twine(ap.offset + rowBytes) + ") exceed the " +
                llvm::Twine(capacity) + " bytes of a " + memoryName(ap.memory) +
                " partition");
  }
  if (engine == Engine::Vector || engine == Engine::Scalar ||
      engine == Engine::GpSimd) {
    int64_t maxFree = ap.memory == Memory::Sbuf ? t.maxFreeElementsSbuf
                                                : t.maxFreeElementsPsum;
    if (ap.freeElements() > maxFree) {
      return fail(llvm::Twine(ap.freeElements()) +
                  " free elements exceed the " + llvm::Twine(maxFree) +
                  " an instruction may touch in " + memoryName(ap.memory));
    }
  }
  return std::nullopt;
}

/// Which memories an engine may read and write.
Error checkMemories(const Instruction &inst, const OpcodeSchema &s) {
  auto fail = [&](int slot, const llvm::Twine &what) -> Error {
    return ("operand '" + s.operandNames[slot] + "': " + what).str();
  };
  for (int i = 0; i < inst.numOperands; ++i) {
    Memory m = inst.operands[i].memory;
    bool isDst = writesOperand(inst.opcode, i);
    switch (inst.engine) {
    case Engine::Tensor:
      if (isDst && m != Memory::Psum) {
        return fail(i, "TensorE writes only PSUM");
      }
      if (!isDst && m != Memory::Sbuf) {
        return fail(i, "TensorE reads only SBUF");
      }
      break;
    case Engine::Vector:
    case Engine::Scalar:
      if (m == Memory::Hbm) {
        return fail(i, llvm::Twine(engineName(inst.engine)) +
                           " engine cannot access HBM (use a DMA)");
      }
      break;
    case Engine::GpSimd:
      if (m != Memory::Sbuf) {
        return fail(i, "GpSimd accesses only SBUF");
      }
      break;
    case Engine::Dma:
      if (m == Memory::Psum) {
        return fail(i, "DMA cannot access PSUM");
      }
      if (inst.opcode == Opcode::Collective && m != Memory::Hbm) {
        return fail(i, "collectives work on HBM buffers");
      }
      break;
    }
  }
  if (inst.opcode == Opcode::TensorTensor &&
      inst.operands[1].memory == Memory::Psum &&
      inst.operands[2].memory == Memory::Psum) {
    return std::string("tensor_tensor cannot read both inputs from PSUM");
  }
  if (inst.opcode == Opcode::DmaCopy &&
      inst.operands[0].memory == Memory::Hbm &&
      inst.operands[1].memory == Memory::Hbm) {
    return std::string(
        "dma_copy moves HBM<->SBUF or SBUF<->SBUF, not HBM<->HBM");
  }
  return std::nullopt;
}

/// PSUM destinations of TensorE must sit in one bank, contiguously.
Error checkPsumBank(const AccessPattern &dst,
                    const target::TargetDescription &t) {
  if (dst.rank != 1 || dst.strides[0] != 1) {
    return std::string(
        "operand 'dst': a TensorE result is one contiguous row per partition");
  }
  int64_t first = dst.offset / t.psumBankBytes;
  int64_t last = (dst.offset + dst.freeElements() * dst.elementBytes() - 1) /
                 t.psumBankBytes;
  if (first != last) {
    return ("operand 'dst': bytes [" + llvm::Twine(dst.offset) + ", " +
            llvm::Twine(dst.offset + dst.freeElements() * dst.elementBytes()) +
            ") cross a PSUM bank boundary (banks are " +
            llvm::Twine(t.psumBankBytes) + " bytes)")
        .str();
  }
  return std::nullopt;
}

/// Whether operand `i` covers the same [partitions x free] as 'dst'.
bool sameShapeAsDst(const Instruction &inst, int i) {
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[i];
  return src.partitions == dst.partitions &&
         src.freeElements() == dst.freeElements();
}

Error shapeMismatch(const Instruction &inst, int i) {
  const AccessPattern &dst = inst.operands[0];
  return ("operand '" + schemaOf(inst.opcode).operandNames[i] + "' is [" +
          llvm::Twine(inst.operands[i].partitions) + " x " +
          llvm::Twine(inst.operands[i].freeElements()) + "] but 'dst' is [" +
          llvm::Twine(dst.partitions) + " x " +
          llvm::Twine(dst.freeElements()) + "]")
      .str();
}

/// Operands 1 .. `last` each cover the destination's shape.
Error checkSameShapes(const Instruction &inst, int last) {
  for (int i = 1; i <= last; ++i) {
    if (!sameShapeAsDst(inst, i)) {
      return shapeMismatch(inst, i);
    }
  }
  return std::nullopt;
}

Error checkMatmulShapes(const Instruction &inst,
                        const target::TargetDescription &t) {
  const AccessPattern &dst = inst.operands[0];
  const AccessPattern &stat = inst.operands[1], &mov = inst.operands[2];
  int64_t k = stat.partitions, m = stat.freeElements(), n = mov.freeElements();
  if (mov.partitions != k) {
    return ("stationary and moving contract over their partitions: " +
            llvm::Twine(k) + " vs " + llvm::Twine(mov.partitions))
        .str();
  }
  if (m > t.matmulMaxM || n > t.matmulMaxN) {
    return ("matmul is " + llvm::Twine(m) + " x " + llvm::Twine(n) +
            "; M must be <= " + llvm::Twine(t.matmulMaxM) +
            " and N <= " + llvm::Twine(t.matmulMaxN))
        .str();
  }
  if (dst.partitions != m || dst.freeElements() != n) {
    return ("operand 'dst' must be [M x N] = [" + llvm::Twine(m) + " x " +
            llvm::Twine(n) + "]")
        .str();
  }
  if (dst.dtype != DType::F32) {
    return std::string("operand 'dst': matmul accumulates in f32");
  }
  if (stat.dtype == DType::I32 || mov.dtype == DType::I32) {
    return std::string("matmul inputs are floating point");
  }
  if ((stat.dtype == DType::F32) != (mov.dtype == DType::F32)) {
    return std::string("matmul cannot mix f32 with other input types");
  }
  return checkPsumBank(dst, t);
}

Error checkTransposeShapes(const Instruction &inst,
                           const target::TargetDescription &t) {
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  if (src.partitions > t.transposeMax || src.freeElements() > t.transposeMax) {
    return std::string("transpose is at most 128 x 128");
  }
  if (dst.partitions != src.freeElements() ||
      dst.freeElements() != src.partitions) {
    return ("operand 'dst' must be [" + llvm::Twine(src.freeElements()) +
            " x " + llvm::Twine(src.partitions) + "]")
        .str();
  }
  if (dst.dtype != DType::F32) {
    return std::string("operand 'dst': transpose results are f32");
  }
  return checkPsumBank(dst, t);
}

Error checkActivationShapes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0];
  if (!sameShapeAsDst(inst, 1)) {
    return shapeMismatch(inst, 1);
  }
  if (inst.numOperands == 3 &&
      (inst.operands[2].partitions != dst.partitions ||
       inst.operands[2].freeElements() != 1)) {
    return ("operand 'reduce_dst' must be [" + llvm::Twine(dst.partitions) +
            " x 1]")
        .str();
  }
  if (hasIntegerOperand(inst)) {
    return std::string("activation works on floating point");
  }
  return std::nullopt;
}

Error checkTensorScalarShapes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0];
  if (!sameShapeAsDst(inst, 1)) {
    return shapeMismatch(inst, 1);
  }
  // The public NKI ISA runs tensor_scalar's arithmetic on ScalarE too;
  // integer (bit-vector) work stays on VectorE and GpSimd.
  if (inst.engine == Engine::Scalar && hasIntegerOperand(inst)) {
    return std::string(
        "tensor_scalar on the scalar engine works on floating point");
  }
  // Per-partition scalars: bit 0 of scalar_operands takes scalar0, bit 1
  // scalar1, from the columns of operand 'scalars', in that order.
  int64_t which = inst.int0;
  int64_t count = (which & 1) + ((which >> 1) & 1);
  if (which < 0 || which > 3 || (count > 0) != (inst.numOperands == 3)) {
    return std::string("scalar_operands must be 1, 2 or 3 exactly when "
                       "operand 'scalars' is given");
  }
  if (inst.numOperands != 3) {
    return std::nullopt;
  }
  const AccessPattern &scalars = inst.operands[2];
  if (scalars.memory != Memory::Sbuf || scalars.partitions != dst.partitions ||
      scalars.freeElements() != count) {
    return ("operand 'scalars' must be an SBUF [" +
            llvm::Twine(dst.partitions) + " x " + llvm::Twine(count) + "]")
        .str();
  }
  if (scalars.dtype == DType::I32 || inst.operands[1].dtype == DType::I32) {
    return std::string("per-partition scalars work on floating point");
  }
  return std::nullopt;
}

/// tensor_reduce, partition_reduce and partition_broadcast: each folds or
/// spreads one axis of its source, so the other axis must match.
Error checkReductionShapes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  if (inst.opcode == Opcode::TensorReduce) {
    int64_t inner = src.sizes[src.rank - 1];
    if (src.partitions != dst.partitions ||
        dst.freeElements() * inner != src.freeElements()) {
      return ("tensor_reduce folds the innermost dimension: 'dst' must be [" +
              llvm::Twine(src.partitions) + " x " +
              llvm::Twine(src.freeElements() / inner) + "]")
          .str();
    }
    return std::nullopt;
  }
  if (inst.opcode == Opcode::PartitionReduce) {
    if (dst.partitions != 1 || dst.freeElements() != src.freeElements()) {
      return std::string(
          "partition_reduce writes one partition of the source's free size");
    }
    return std::nullopt;
  }
  if (src.partitions != 1 || dst.freeElements() != src.freeElements()) {
    return std::string("partition_broadcast reads one partition of the "
                       "destination's free size");
  }
  return std::nullopt;
}

/// A dma_copy, and every collective but all_gather, moves as many elements
/// as it writes; their layouts may differ.
Error checkCopyShapes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  if (dst.partitions * dst.freeElements() !=
      src.partitions * src.freeElements()) {
    return ("'dst' has " + llvm::Twine(dst.partitions * dst.freeElements()) +
            " elements but 'src' has " +
            llvm::Twine(src.partitions * src.freeElements()))
        .str();
  }
  return std::nullopt;
}

Error checkCollectiveShapes(const Instruction &inst) {
  if (inst.int0 < 0 || inst.int0 >= kCollectiveGroups) {
    return ("a collective's group is 0 (data-parallel) or 1 "
            "(tensor-parallel), not " +
            llvm::Twine(inst.int0))
        .str();
  }
  auto kind = static_cast<CollectiveKind>(inst.op0);
  if (kind != CollectiveKind::AllGather && !keepsOneBlock(kind)) {
    return checkCopyShapes(inst);
  }
  // An all-gather writes every worker's source, one after another; a
  // reduce-scatter or worker shard one block of its source. The artifact's
  // world size fixes how many.
  const AccessPattern &dst = inst.operands[0], &src = inst.operands[1];
  int64_t in = src.partitions * src.freeElements();
  int64_t out = dst.partitions * dst.freeElements();
  int64_t whole = keepsOneBlock(kind) ? in : out;
  int64_t block = keepsOneBlock(kind) ? out : in;
  if (src.dtype != dst.dtype || block == 0 || whole % block != 0) {
    return ((kind == CollectiveKind::AllGather ? "an " : "a ") +
            fieldValueName(FieldKind::Collective, inst.op0) + "'s " +
            (keepsOneBlock(kind) ? "'src'" : "'dst'") +
            " holds a whole number of its " +
            (keepsOneBlock(kind) ? "'dst'" : "'src'") + " (" +
            llvm::Twine(block) + " elements) of the same type, not " +
            llvm::Twine(whole))
        .str();
  }
  return std::nullopt;
}

Error checkRandomShapes(const Instruction &inst) {
  const AccessPattern &dst = inst.operands[0], &seed = inst.operands[1];
  if (seed.dtype != DType::I32 || seed.memory != Memory::Sbuf ||
      seed.partitions != dst.partitions || seed.freeElements() != 1) {
    return ("operand 'seed' must be an i32 SBUF tile of [" +
            llvm::Twine(dst.partitions) + " x 1]")
        .str();
  }
  if (dst.dtype == DType::I32) {
    return std::string("operand 'dst': random numbers are floating point");
  }
  if (inst.int0 < 0) {
    return std::string("'counter' must be >= 0");
  }
  // A counter step carried in a floating-point field: whole, and small
  // enough that the double holds it exactly.
  if (inst.imm0 != std::trunc(inst.imm0) || std::fabs(inst.imm0) > 0x1p53) {
    return std::string("'group_step' must be a whole number below 2^53");
  }
  return std::nullopt;
}

/// dma_gather and dma_scatter: SBUF rows moved to or from the HBM rows a
/// column of indices picks.
Error checkIndexedShapes(const Instruction &inst) {
  bool gather = inst.opcode == Opcode::DmaGather;
  const AccessPattern &tile = inst.operands[gather ? 0 : 1],
                      &rows = inst.operands[gather ? 1 : 0],
                      &indices = inst.operands[2];
  if (tile.memory != Memory::Sbuf || rows.memory != Memory::Hbm) {
    return std::string(gather ? "dma_gather reads rows of HBM into SBUF"
                              : "dma_scatter writes rows of SBUF into HBM");
  }
  if (!sameShapeAsDst(inst, 1)) {
    return shapeMismatch(inst, 1);
  }
  if (indices.memory != Memory::Sbuf || indices.dtype != DType::I32 ||
      indices.partitions != tile.partitions || indices.freeElements() != 1) {
    return ("operand 'indices' must be an i32 SBUF tile of [" +
            llvm::Twine(tile.partitions) + " x 1]")
        .str();
  }
  if (inst.int0 < 0 || inst.int0 > (int64_t(1) << 32) || inst.int1 < 1 ||
      inst.int1 > (int64_t(1) << 32)) {
    return std::string("'index_stride' must be in [0, 2^32] and "
                       "'index_bound' in [1, 2^32]");
  }
  return std::nullopt;
}

/// The operands' shapes against each other and the engine's limits. The
/// switch names every opcode and has no default, so -Wswitch reports an
/// instruction added to InstructionSet.td without a rule here.
Error checkShapes(const Instruction &inst, const target::TargetDescription &t) {
  switch (inst.opcode) {
  case Opcode::Matmul:
    return checkMatmulShapes(inst, t);
  case Opcode::Transpose:
    return checkTransposeShapes(inst, t);
  case Opcode::Activation:
    return checkActivationShapes(inst);
  case Opcode::TensorTensor:
    return checkSameShapes(inst, 2);
  case Opcode::TensorScalar:
    return checkTensorScalarShapes(inst);
  case Opcode::TensorCopy:
  case Opcode::AffineSelect:
    return checkSameShapes(inst, 1);
  case Opcode::TensorReduce:
  case Opcode::PartitionReduce:
  case Opcode::PartitionBroadcast:
    return checkReductionShapes(inst);
  case Opcode::Collective:
    return checkCollectiveShapes(inst);
  case Opcode::DmaCopy:
    return checkCopyShapes(inst);
  case Opcode::Random:
    return checkRandomShapes(inst);
  case Opcode::DmaGather:
  case Opcode::DmaScatter:
    return checkIndexedShapes(inst);
  case Opcode::Iota:
  case Opcode::Memset:
    return std::nullopt;
  }
  return std::nullopt;
}

} // namespace

bool partitionStartAligned(int64_t start, int64_t count) {
  if (count > 64) {
    return start == 0;
  }
  if (count > 32) {
    return start == 0 || start == 64;
  }
  return start % 32 == 0;
}

int64_t AccessPattern::freeElements() const {
  int64_t n = 1;
  for (int d = 0; d < rank && d < kMaxRank; ++d) {
    n *= sizes[d];
  }
  return n;
}

int64_t AccessPattern::elementBytes() const { return dtypeBytes(dtype); }

int64_t AccessPattern::rowSpanElements() const {
  int64_t span = 1;
  for (int d = 0; d < rank && d < kMaxRank; ++d) {
    span += (sizes[d] - 1) * strides[d];
  }
  return span;
}

bool AccessPattern::operator==(const AccessPattern &o) const {
  if (memory != o.memory || dtype != o.dtype || rank != o.rank ||
      partition != o.partition || partitions != o.partitions ||
      offset != o.offset || partitionStride != o.partitionStride) {
    return false;
  }
  for (int d = 0; d < rank && d < kMaxRank; ++d) {
    if (strides[d] != o.strides[d] || sizes[d] != o.sizes[d]) {
      return false;
    }
  }
  return true;
}

bool Instruction::operator==(const Instruction &o) const {
  if (opcode != o.opcode || engine != o.engine || queue != o.queue ||
      op0 != o.op0 || op1 != o.op1 || flags != o.flags ||
      numOperands != o.numOperands || imm0 != o.imm0 || imm1 != o.imm1 ||
      int0 != o.int0 || int1 != o.int1 || int2 != o.int2 ||
      numWaits != o.numWaits || numSignals != o.numSignals) {
    return false;
  }
  for (int i = 0; i < numOperands; ++i) {
    if (!(operands[i] == o.operands[i])) {
      return false;
    }
  }
  for (int i = 0; i < numWaits; ++i) {
    if (waitSemaphore[i] != o.waitSemaphore[i] ||
        waitValue[i] != o.waitValue[i]) {
      return false;
    }
  }
  for (int i = 0; i < numSignals; ++i) {
    if (signalSemaphore[i] != o.signalSemaphore[i]) {
      return false;
    }
  }
  return true;
}

const OpcodeSchema &schemaOf(Opcode opcode) {
  return kSchemas[static_cast<int>(opcode)];
}

std::optional<Opcode> opcodeNamed(llvm::StringRef mnemonic) {
  for (const OpcodeSchema &s : kSchemas) {
    if (s.mnemonic == mnemonic) {
      return s.opcode;
    }
  }
  return std::nullopt;
}

llvm::StringRef engineName(Engine e) {
  return kEngineNames[static_cast<int>(e)];
}
std::optional<Engine> engineNamed(llvm::StringRef name) {
  auto i = indexOf(kEngineNames, name);
  return i ? std::optional<Engine>(static_cast<Engine>(*i)) : std::nullopt;
}
llvm::StringRef memoryName(Memory m) {
  return kMemoryNames[static_cast<int>(m)];
}
std::optional<Memory> memoryNamed(llvm::StringRef name) {
  auto i = indexOf(kMemoryNames, name);
  return i ? std::optional<Memory>(static_cast<Memory>(*i)) : std::nullopt;
}
llvm::StringRef dtypeName(DType d) { return kDTypeNames[static_cast<int>(d)]; }
std::optional<DType> dtypeNamed(llvm::StringRef name) {
  auto i = indexOf(kDTypeNames, name);
  return i ? std::optional<DType>(static_cast<DType>(*i)) : std::nullopt;
}
int64_t dtypeBytes(DType d) {
  return d == DType::BF16 || d == DType::F16 ? 2 : 4;
}

llvm::StringRef collectiveGroupName(CollectiveGroup group) {
  return group == CollectiveGroup::Tensor ? "tensor" : "data";
}

llvm::StringRef fieldValueName(FieldKind kind, uint8_t value) {
  llvm::ArrayRef<L> names = namesOf(kind);
  return value < names.size() ? llvm::StringRef(names[value])
                              : llvm::StringRef("?");
}

std::optional<uint8_t> fieldValueNamed(FieldKind kind, llvm::StringRef name) {
  llvm::ArrayRef<L> names = namesOf(kind);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      return static_cast<uint8_t>(i);
    }
  }
  return std::nullopt;
}

bool writesOperand(Opcode opcode, int index) {
  return index == 0 || (opcode == Opcode::Activation && index == 2);
}

bool hasIntegerOperand(const Instruction &inst) {
  for (int i = 0; i < inst.numOperands; ++i) {
    if (inst.operands[i].dtype == DType::I32) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> validate(const Instruction &inst,
                                    const Limits &limits) {
  if (static_cast<int>(inst.opcode) >= kOpcodes) {
    return "unknown opcode " + std::to_string(static_cast<int>(inst.opcode));
  }
  const OpcodeSchema &s = schemaOf(inst.opcode);
  const target::TargetDescription &t = *limits.target;
  if (static_cast<int>(inst.engine) >= kEngineKinds ||
      !(s.engines & bit(inst.engine))) {
    return ("'" + s.mnemonic + "' cannot run on engine " +
            (static_cast<int>(inst.engine) < kEngineKinds
                 ? engineName(inst.engine).str()
                 : std::to_string(static_cast<int>(inst.engine))))
        .str();
  }
  if (inst.engine == Engine::Dma && inst.queue >= t.dmaQueues) {
    return "DMA queue " + std::to_string(inst.queue) + " does not exist (" +
           std::to_string(t.dmaQueues) + " queues)";
  }
  int slots = 0;
  for (llvm::StringRef name : s.operandNames) {
    slots += !name.empty();
  }
  if (inst.numOperands < s.requiredOperands || inst.numOperands > slots) {
    return ("'" + s.mnemonic + "' takes " +
            llvm::Twine(static_cast<unsigned>(s.requiredOperands)) +
            (slots > s.requiredOperands ? " or " + llvm::Twine(slots)
                                        : llvm::Twine("")) +
            " operands, not " +
            llvm::Twine(static_cast<unsigned>(inst.numOperands)))
        .str();
  }
  if (s.op0Kind != FieldKind::None && inst.op0 >= namesOf(s.op0Kind).size()) {
    return ("'" + s.op0Name + "' value " +
            llvm::Twine(static_cast<unsigned>(inst.op0)) + " is unknown")
        .str();
  }
  if (s.op1Kind != FieldKind::None && inst.op1 >= namesOf(s.op1Kind).size()) {
    return ("'" + s.op1Name + "' value " +
            llvm::Twine(static_cast<unsigned>(inst.op1)) + " is unknown")
        .str();
  }
  if ((inst.opcode == Opcode::AffineSelect &&
       inst.op0 < static_cast<uint8_t>(AluOp::Eq)) ||
      (inst.opcode == Opcode::TensorReduce &&
       !llvm::is_contained({AluOp::Add, AluOp::Max, AluOp::Min, AluOp::Mul},
                           static_cast<AluOp>(inst.op0)))) {
    return ("'" + s.op0Name + "' must be a " +
            (inst.opcode == Opcode::AffineSelect ? "comparison"
                                                 : "add, max, min or mul"))
        .str();
  }
  if (inst.flags & ~uint8_t(s.flag0Name.empty() ? 0 : 1)) {
    return ("'" + s.mnemonic + "' has unknown flag bits").str();
  }
  if (inst.numWaits > kMaxWaits || inst.numSignals > kMaxSignals) {
    return "an instruction waits on at most 4 semaphores and signals at most 4";
  }
  for (int i = 0; i < inst.numWaits; ++i) {
    if (inst.waitSemaphore[i] >= limits.semaphores) {
      return "waits on semaphore " + std::to_string(inst.waitSemaphore[i]) +
             ", but the program has " + std::to_string(limits.semaphores);
    }
  }
  for (int i = 0; i < inst.numSignals; ++i) {
    if (inst.signalSemaphore[i] >= limits.semaphores) {
      return "signals semaphore " + std::to_string(inst.signalSemaphore[i]) +
             ", but the program has " + std::to_string(limits.semaphores);
    }
  }
  for (int i = 0; i < inst.numOperands; ++i) {
    const AccessPattern &ap = inst.operands[i];
    if (static_cast<int>(ap.memory) > 2 || static_cast<int>(ap.dtype) > 3) {
      return ("operand '" + s.operandNames[i] + "': unknown memory or dtype")
          .str();
    }
    if (auto error =
            checkAccessPattern(ap, s.operandNames[i], inst.engine, limits)) {
      return error;
    }
  }

  if (auto error = checkMemories(inst, s)) {
    return error;
  }
  if (auto error = checkShapes(inst, t)) {
    return error;
  }
  if (int k = indexedOperand(inst.opcode); k >= 0) {
    // The furthest rows the indices may pick must lie in HBM too.
    AccessPattern furthest = inst.operands[k];
    furthest.offset +=
        (inst.int1 - 1) * inst.int0 * furthest.elementBytes();
    if (auto error = checkAccessPattern(furthest, s.operandNames[k],
                                        inst.engine, limits)) {
      return *error + " (at index " + std::to_string(inst.int1 - 1) + ")";
    }
  }
  return std::nullopt;
}

std::string encodingSchemaText() {
  std::string text = "kneff-instruction-encoding v1\n";
  for (const OpcodeSchema &s : kSchemas) {
    text += s.mnemonic.str() + ":" + std::to_string(s.engines);
    for (llvm::StringRef name : s.operandNames) {
      text += "," + name.str();
    }
    text += "|" + s.op0Name.str() + "|" + s.op1Name.str() + "|" +
            s.imm0Name.str() + "|" + s.imm1Name.str() + "|" + s.int0Name.str() +
            "|" + s.int1Name.str() + "|" + s.int2Name.str() + "|" +
            s.flag0Name.str() + "\n";
  }
  for (auto names :
       {llvm::ArrayRef<L>(kEngineNames), llvm::ArrayRef<L>(kMemoryNames),
        llvm::ArrayRef<L>(kDTypeNames), llvm::ArrayRef<L>(kAluNames),
        llvm::ArrayRef<L>(kActNames), llvm::ArrayRef<L>(kCollectiveNames)}) {
    for (llvm::StringRef name : names) {
      text += name.str() + " ";
    }
    text += "\n";
  }
  return text;
}

} // namespace kiln::isa
