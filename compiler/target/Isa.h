//===- Isa.h - the NeuronCore instruction set as plain data -----*- C++ -*-===//
//
// Instructions as the artifact stores them and the simulator executes them,
// with no MLIR in sight, so the runtime can load and check artifacts on its
// own. The kisa dialect converts its ops to these structs, so one rule set
// (validate) checks both hand-written IR and loaded artifacts.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_ISA_H
#define KILN_COMPILER_TARGET_ISA_H

#include "compiler/target/TargetDescription.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln::isa {

enum class Engine : uint8_t { Tensor, Vector, Scalar, GpSimd, Dma };
inline constexpr int kEngineKinds = 5;
enum class Memory : uint8_t { Hbm, Sbuf, Psum };
enum class DType : uint8_t { F32, BF16, F16, I32 };

// enum class Opcode and kOpcodes, one enumerator per instruction of
// compiler/target/InstructionSet.td in its order (kiln-isa-tblgen
// --gen-opcode-enum).
#include "compiler/target/IsaOpcodes.inc"

/// The HBM operand whose rows an indirect transfer picks by index: a
/// dma_gather's source (1), a dma_scatter's destination (0); -1 otherwise.
inline int indexedOperand(Opcode opcode) {
  return opcode == Opcode::DmaGather    ? 1
         : opcode == Opcode::DmaScatter ? 0
                                        : -1;
}

/// Whether `opcode` is a transfer a DMA queue runs at its bandwidth (every
/// DMA but a collective).
inline bool isTransfer(Opcode opcode) {
  return opcode == Opcode::DmaCopy || opcode == Opcode::DmaGather ||
         opcode == Opcode::DmaScatter;
}

/// Arithmetic of tensor_tensor, tensor_scalar, reductions and affine_select.
/// Comparisons give 1.0 or 0.0; Bypass passes its left operand through.
enum class AluOp : uint8_t {
  Bypass,
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge
};
inline constexpr int kAluOps = 13;

/// ScalarE's function table.
enum class ActFunc : uint8_t {
  Identity,
  Exp,
  Log,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluTanh,
  GeluDerivative,
  Rsqrt,
  Sqrt,
  Square,
  Reciprocal,
  Abs,
  // Appended so that older encodings keep their meaning.
  Erf,
  Sin,
  Cos,
  Sign,
  Log1p,
  GeluTanhDerivative
};
inline constexpr int kActFuncs = 20;

enum class CollectiveKind : uint8_t {
  AllReduceSum,
  AllReduceMean,
  AllGather,
  ReduceScatterSum,
  // Appended so that older encodings keep their meaning.
  ReduceScatterMean,
  /// The worker's own block of its source (no traffic: the rank picks it).
  WorkerShard
};
inline constexpr int kCollectiveKinds = 6;

/// A collective whose destination is one of its source's blocks: the
/// group's size times smaller.
inline bool keepsOneBlock(CollectiveKind kind) {
  return kind == CollectiveKind::ReduceScatterSum ||
         kind == CollectiveKind::ReduceScatterMean ||
         kind == CollectiveKind::WorkerShard;
}

/// Which of a worker's groups a collective runs across (its `group`
/// argument). A job of W workers with tensor-parallel degree T is laid
/// out as W / T tensor-parallel groups of T consecutive ranks; rank r's
/// data-parallel group holds the ranks with its place r mod T in theirs.
enum class CollectiveGroup : int64_t { Data = 0, Tensor = 1 };
inline constexpr int kCollectiveGroups = 2;
llvm::StringRef collectiveGroupName(CollectiveGroup group);

/// The size of each group a program's collectives run across.
struct GroupSizes {
  /// A data-parallel group of `data` (a plain int converts: the
  /// data-parallel size alone).
  constexpr GroupSizes(int data = 1, int tensor = 1)
      : data(data), tensor(tensor) {}
  int data;
  int tensor;
  int of(CollectiveGroup group) const {
    return group == CollectiveGroup::Tensor ? tensor : data;
  }
  bool operator==(const GroupSizes &o) const {
    return data == o.data && tensor == o.tensor;
  }
};

inline constexpr int kMaxRank = 4;
inline constexpr int kMaxOperands = 3;
inline constexpr int kMaxWaits = 4;
inline constexpr int kMaxSignals = 4;

/// A tile: partitions [partition, partition + partitions) and, in each, up to
/// four free dimensions (stride, size) in elements from a byte offset. In HBM,
/// which has no partitions, `partitionStride` (elements) separates the rows
/// that land on consecutive partitions.
struct AccessPattern {
  Memory memory = Memory::Sbuf;
  DType dtype = DType::F32;
  uint8_t rank = 1;
  uint16_t partition = 0;
  uint16_t partitions = 1;
  int64_t offset = 0;
  int64_t partitionStride = 0;
  std::array<int64_t, kMaxRank> strides{};
  std::array<int64_t, kMaxRank> sizes{};

  int64_t freeElements() const;
  int64_t elementBytes() const;
  /// Largest element offset of one partition row, plus one.
  int64_t rowSpanElements() const;
  bool operator==(const AccessPattern &other) const;
};

struct Instruction {
  Opcode opcode = Opcode::TensorCopy;
  Engine engine = Engine::Vector;
  uint8_t queue = 0; // DMA queue, for Engine::Dma
  uint8_t op0 = 0;   // AluOp, ActFunc or CollectiveKind (see the schema)
  uint8_t op1 = 0;
  uint8_t flags = 0; // bit 0: accumulate (matmul)
  uint8_t numOperands = 0;
  std::array<AccessPattern, kMaxOperands> operands{}; // [0] is the destination
  double imm0 = 0, imm1 = 0;
  int64_t int0 = 0, int1 = 0, int2 = 0;
  uint8_t numWaits = 0;
  std::array<uint16_t, kMaxWaits> waitSemaphore{};
  std::array<uint32_t, kMaxWaits> waitValue{};
  uint8_t numSignals = 0;
  std::array<uint16_t, kMaxSignals> signalSemaphore{};

  bool accumulate() const { return flags & 1; }
  bool operator==(const Instruction &other) const;
};

/// The group a collective instruction runs across (its `group` argument,
/// which is int0).
inline CollectiveGroup collectiveGroupOf(const Instruction &inst) {
  return static_cast<CollectiveGroup>(inst.int0);
}

/// How one opcode uses the Instruction fields: the dialects' attribute
/// names, the encoding and the disassembly, generated from
/// compiler/target/InstructionSet.td.
enum class FieldKind : uint8_t { None, Alu, Act, Collective };
struct OpcodeSchema {
  Opcode opcode;
  llvm::StringLiteral mnemonic; // "matmul"
  uint8_t engines;              // bit set of Engine
  std::array<llvm::StringLiteral, kMaxOperands> operandNames; // "" = unused
  uint8_t requiredOperands;
  llvm::StringLiteral op0Name, op1Name; // "" = unused
  FieldKind op0Kind, op1Kind;
  llvm::StringLiteral imm0Name, imm1Name;
  llvm::StringLiteral int0Name, int1Name, int2Name;
  llvm::StringLiteral flag0Name;
};

const OpcodeSchema &schemaOf(Opcode opcode);
std::optional<Opcode> opcodeNamed(llvm::StringRef mnemonic);

llvm::StringRef engineName(Engine engine);
std::optional<Engine> engineNamed(llvm::StringRef name);
llvm::StringRef memoryName(Memory memory);
std::optional<Memory> memoryNamed(llvm::StringRef name);
llvm::StringRef dtypeName(DType dtype);
std::optional<DType> dtypeNamed(llvm::StringRef name);
int64_t dtypeBytes(DType dtype);
llvm::StringRef fieldValueName(FieldKind kind, uint8_t value);
/// Whether `count` partitions may start at `start`: more than 64 start at
/// 0; 33-64 at 0 or 64; 32 or fewer at a multiple of 32.
bool partitionStartAligned(int64_t start, int64_t count);

/// Whether any operand of `inst` holds integers (i32).
bool hasIntegerOperand(const Instruction &inst);

/// Whether an instruction of `opcode` writes its operand `index`: the
/// destination, operand 0, and an activation's row sums (`reduce_dst`).
bool writesOperand(Opcode opcode, int index);
std::optional<uint8_t> fieldValueNamed(FieldKind kind, llvm::StringRef name);

/// What the instructions of one program may use.
struct Limits {
  const target::TargetDescription *target = nullptr;
  int64_t hbmBytes = 0;
  int64_t semaphores = 0;
};

/// The first rule of the machine model that `inst` breaks, or nullopt.
std::optional<std::string> validate(const Instruction &inst,
                                    const Limits &limits);

/// A text of the encoding's layout (opcodes, fields, record size); its
/// SHA-256 is the artifact's schema hash.
std::string encodingSchemaText();

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_ISA_H
