//===- Semantics.cpp - what each instruction computes --------------------===//
//
// Arithmetic is carried out in f32 or better and rounded on write, as
// machine-model.md specifies. Matmul accumulates in f32 like PSUM.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Semantics.h"

#include "runtime/sim/Arithmetic.h"
#include "runtime/sim/Kernels.h"
#include "runtime/sim/TileWalk.h"

#include "compiler/target/Random.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

namespace kiln::sim {

std::vector<double> gather(const MachineState &m,
                           const isa::AccessPattern &ap) {
  std::vector<double> values;
  values.reserve(ap.partitions * ap.freeElements());
  const MemoryArray &memory = m.memory(ap.memory);
  forEachElement(ap, [&](int64_t row, int64_t byte) {
    values.push_back(memory.read(row, byte, ap.dtype));
  });
  return values;
}

void scatter(MachineState &m, const isa::AccessPattern &ap,
             const std::vector<double> &values) {
  MemoryArray &memory = m.memory(ap.memory);
  size_t i = 0;
  forEachElement(ap, [&](int64_t row, int64_t byte) {
    memory.write(row, byte, ap.dtype, m.rounder.round(ap.dtype, values[i++]));
  });
}

namespace {

// Each function below computes one opcode's destination elements, in the
// destination's (partition, free) order; executeReference writes them.

// Matrix unit and layout.

std::vector<double> computeMatmul(const MachineState &m,
                                  const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  const isa::AccessPattern &stat = inst.operands[1], &mov = inst.operands[2];
  std::vector<double> a = gather(m, stat), b = gather(m, mov);
  int64_t k = stat.partitions, mm = stat.freeElements(), n = mov.freeElements();
  std::vector<double> out =
      inst.accumulate() ? gather(m, dst) : std::vector<double>(mm * n, 0.0);
  // Accumulated in f32 row by row, like PSUM.
  std::vector<float> acc(n);
  for (int64_t i = 0; i < mm; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      acc[j] = static_cast<float>(out[i * n + j]);
    }
    for (int64_t p = 0; p < k; ++p) {
      float av = static_cast<float>(a[p * mm + i]);
      const double *row = b.data() + p * n;
      for (int64_t j = 0; j < n; ++j) {
        acc[j] += av * static_cast<float>(row[j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      out[i * n + j] = acc[j];
    }
  }
  return out;
}

std::vector<double> computeTranspose(const MachineState &m,
                                     const isa::Instruction &inst) {
  const isa::AccessPattern &src = inst.operands[1];
  std::vector<double> in = gather(m, src);
  int64_t p = src.partitions, f = src.freeElements();
  std::vector<double> out(p * f, 0.0);
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      out[j * p + i] = in[i * f + j];
    }
  }
  return out;
}

// Elementwise arithmetic.

/// Also writes each partition's sum of the results to the third operand,
/// when there is one.
std::vector<double> computeActivation(MachineState &m,
                                      const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t free = dst.freeElements();
  std::vector<double> in = gather(m, inst.operands[1]);
  std::vector<double> out(in.size());
  auto func = static_cast<isa::ActFunc>(inst.op0);
  std::vector<double> sums(dst.partitions, 0.0);
  for (size_t i = 0; i < in.size(); ++i) {
    double x = static_cast<float>(static_cast<float>(in[i]) *
                                      static_cast<float>(inst.imm0) +
                                  static_cast<float>(inst.imm1));
    out[i] = activation(func, x);
    sums[i / free] += out[i];
  }
  if (inst.numOperands == 3) {
    scatter(m, inst.operands[2], sums);
  }
  return out;
}

std::vector<double> computeTensorTensor(const MachineState &m,
                                        const isa::Instruction &inst) {
  auto op0 = static_cast<isa::AluOp>(inst.op0);
  std::vector<double> a = gather(m, inst.operands[1]),
                      b = gather(m, inst.operands[2]);
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    out[i] = alu(op0, a[i], b[i]);
  }
  return out;
}

std::vector<double> computeTensorScalar(const MachineState &m,
                                        const isa::Instruction &inst) {
  int64_t free = inst.operands[0].freeElements();
  auto op0 = static_cast<isa::AluOp>(inst.op0);
  std::vector<double> out = gather(m, inst.operands[1]);
  // Per-partition scalars: row p's from column(s) of 'scalars' row p.
  std::vector<double> perRow;
  if (inst.numOperands == 3) {
    perRow = gather(m, inst.operands[2]);
  }
  int64_t width = inst.numOperands == 3 ? inst.operands[2].freeElements() : 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double s0 = inst.imm0, s1 = inst.imm1;
    if (width > 0) {
      const double *row = perRow.data() + (i / free) * width;
      if (inst.int0 & 1) {
        s0 = *row++;
      }
      if (inst.int0 & 2) {
        s1 = *row;
      }
    }
    out[i] = alu(static_cast<isa::AluOp>(inst.op1), alu(op0, out[i], s0), s1);
  }
  return out;
}

// Reductions.

std::vector<double> computeTensorReduce(const MachineState &m,
                                        const isa::Instruction &inst) {
  auto op0 = static_cast<isa::AluOp>(inst.op0);
  const isa::AccessPattern &src = inst.operands[1];
  std::vector<double> in = gather(m, src);
  int64_t inner = src.sizes[src.rank - 1];
  std::vector<double> out(in.size() / inner, reduceInit(op0));
  for (size_t i = 0; i < in.size(); ++i) {
    out[i / inner] = reduceStep(op0, out[i / inner], in[i]);
  }
  return out;
}

std::vector<double> computePartitionReduce(const MachineState &m,
                                           const isa::Instruction &inst) {
  int64_t free = inst.operands[0].freeElements();
  auto op0 = static_cast<isa::AluOp>(inst.op0);
  const isa::AccessPattern &src = inst.operands[1];
  std::vector<double> in = gather(m, src);
  std::vector<double> out(free, reduceInit(op0));
  for (int64_t p = 0; p < src.partitions; ++p) {
    for (int64_t i = 0; i < free; ++i) {
      out[i] = reduceStep(op0, out[i], in[p * free + i]);
    }
  }
  return out;
}

// Generated values.

/// iota writes int0 + int1 * partition + int2 * element; affine_select keeps
/// the source where op0 of that value and 0 holds and writes imm0 elsewhere.
std::vector<double> computeIotaOrAffineSelect(const MachineState &m,
                                              const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t parts = dst.partitions, free = dst.freeElements();
  auto op0 = static_cast<isa::AluOp>(inst.op0);
  std::vector<double> src;
  if (inst.opcode == isa::Opcode::AffineSelect) {
    src = gather(m, inst.operands[1]);
  }
  std::vector<double> out(parts * free);
  for (int64_t p = 0; p < parts; ++p) {
    for (int64_t i = 0; i < free; ++i) {
      double v = static_cast<double>(inst.int0 + inst.int1 * p + inst.int2 * i);
      out[p * free + i] =
          inst.opcode == isa::Opcode::Iota
              ? v
              : (alu(op0, v, 0.0) != 0.0 ? src[p * free + i] : inst.imm0);
    }
  }
  return out;
}

std::vector<double> computeRandom(const MachineState &m,
                                  const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t parts = dst.partitions, free = dst.freeElements();
  std::vector<double> seeds = gather(m, inst.operands[1]);
  std::vector<double> out(parts * free);
  // Each run of the destination's innermost dimension is a group; the
  // counter steps by group_step from one group to the next.
  int64_t group = dst.sizes[dst.rank - 1];
  auto groupStep = static_cast<int64_t>(inst.imm0);
  for (int64_t p = 0; p < parts; ++p) {
    // An unwritten seed reads as NaN; keep it visible in the results.
    bool missing = std::isnan(seeds[p]);
    auto seed =
        static_cast<uint64_t>(missing ? 0 : static_cast<int64_t>(seeds[p]));
    for (int64_t i = 0; i < free; ++i) {
      auto counter = static_cast<uint64_t>(
          inst.int0 + inst.int1 * p + inst.int2 * i + groupStep * (i / group));
      out[p * free + i] = missing ? std::numeric_limits<double>::quiet_NaN()
                                  : reference::uniformAt(seed, counter);
    }
  }
  return out;
}

// Data movement.

std::vector<double> computePartitionBroadcast(const MachineState &m,
                                              const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t free = dst.freeElements();
  std::vector<double> in = gather(m, inst.operands[1]);
  std::vector<double> out(dst.partitions * free);
  for (int64_t p = 0; p < dst.partitions; ++p) {
    std::copy(in.begin(), in.end(), out.begin() + p * free);
  }
  return out;
}

/// A worker alone: sums, means and scatters are the copy, and a gather for a
/// larger group has the worker's own source in every slot. Groups go through
/// executeCollective.
std::vector<double> computeCollectiveAlone(const MachineState &m,
                                           const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  std::vector<double> own = gather(m, inst.operands[1]);
  if (isa::keepsOneBlock(static_cast<isa::CollectiveKind>(inst.op0))) {
    // Rank 0's block; reduced over itself alone, its own.
    own.resize(static_cast<size_t>(dst.partitions * dst.freeElements()));
    return own;
  }
  size_t slots = std::max<size_t>(
      1, static_cast<size_t>(dst.partitions * dst.freeElements()) /
             std::max<size_t>(1, own.size()));
  std::vector<double> out;
  out.reserve(slots * own.size());
  for (size_t s = 0; s < slots; ++s) {
    out.insert(out.end(), own.begin(), own.end());
  }
  return out;
}

} // namespace

void executeReference(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  std::vector<double> out;
  switch (inst.opcode) {
  case isa::Opcode::Matmul:
    out = computeMatmul(m, inst);
    break;
  case isa::Opcode::Transpose:
    out = computeTranspose(m, inst);
    break;
  case isa::Opcode::Activation:
    out = computeActivation(m, inst);
    break;
  case isa::Opcode::TensorTensor:
    out = computeTensorTensor(m, inst);
    break;
  case isa::Opcode::TensorScalar:
    out = computeTensorScalar(m, inst);
    break;
  case isa::Opcode::TensorReduce:
    out = computeTensorReduce(m, inst);
    break;
  case isa::Opcode::PartitionReduce:
    out = computePartitionReduce(m, inst);
    break;
  case isa::Opcode::Iota:
  case isa::Opcode::AffineSelect:
    out = computeIotaOrAffineSelect(m, inst);
    break;
  case isa::Opcode::Memset:
    out.assign(dst.partitions * dst.freeElements(), inst.imm0);
    break;
  case isa::Opcode::Random:
    out = computeRandom(m, inst);
    break;
  case isa::Opcode::TensorCopy:
  case isa::Opcode::DmaCopy:
    out = gather(m, inst.operands[1]);
    break;
  case isa::Opcode::PartitionBroadcast:
    out = computePartitionBroadcast(m, inst);
    break;
  case isa::Opcode::DmaGather:
  case isa::Opcode::DmaScatter:
    // Indices are data, which can be wrong: executeIndexed checks them.
    llvm::report_fatal_error("indirect DMAs run through executeIndexed");
  case isa::Opcode::Collective:
    out = computeCollectiveAlone(m, inst);
    break;
  }
  scatter(m, dst, out);
}

namespace {

/// A reduce-scatter or worker shard across the group: this rank's block of
/// `values` (the source), reduced across the group or as it is.
llvm::Error executeBlockCollective(MachineState &m,
                                   const isa::Instruction &inst,
                                   comm::Communicator &communicator,
                                   std::vector<double> values) {
  const isa::AccessPattern &dst = inst.operands[0];
  size_t block = static_cast<size_t>(dst.partitions * dst.freeElements());
  size_t group = static_cast<size_t>(communicator.size());
  if (values.size() != block * group) {
    return llvm::createStringError(
        "a " +
        isa::fieldValueName(isa::FieldKind::Collective, inst.op0).str() +
        " of " + std::to_string(values.size()) + " elements into " +
        std::to_string(block) + " does not match the group of " +
        std::to_string(group));
  }
  auto kind = static_cast<isa::CollectiveKind>(inst.op0);
  if (kind == isa::CollectiveKind::WorkerShard) {
    auto first = values.begin() + communicator.rank() * block;
    scatter(m, dst, std::vector<double>(first, first + block));
    return llvm::Error::success();
  }
  std::vector<float> wire(values.begin(), values.end());
  std::vector<float> mine(block);
  if (auto e = communicator.reduceScatter(
          wire.data(), mine.data(), block,
          kind == isa::CollectiveKind::ReduceScatterSum
              ? comm::Reduction::Sum
              : comm::Reduction::Mean)) {
    return e;
  }
  scatter(m, dst, std::vector<double>(mine.begin(), mine.end()));
  return llvm::Error::success();
}

} // namespace

llvm::Error executeCollective(MachineState &m, const isa::Instruction &inst,
                              comm::Communicator *communicator) {
  if (!communicator || communicator->size() == 1) {
    executeReference(m, inst);
    return llvm::Error::success();
  }
  auto kind = static_cast<isa::CollectiveKind>(inst.op0);
  std::vector<double> values = gather(m, inst.operands[1]);
  if (kind == isa::CollectiveKind::AllGather) {
    const isa::AccessPattern &dst = inst.operands[0];
    size_t total = static_cast<size_t>(dst.partitions * dst.freeElements());
    if (total != values.size() * static_cast<size_t>(communicator->size())) {
      return llvm::createStringError("an all_gather of " +
                                     std::to_string(values.size()) +
                                     " elements into " + std::to_string(total) +
                                     " does not match the group of " +
                                     std::to_string(communicator->size()));
    }
    // Doubles carry every element type exactly (indices included).
    std::vector<double> all(total);
    if (auto e = communicator->allGather(values.data(), all.data(),
                                         values.size() * sizeof(double))) {
      return e;
    }
    scatter(m, dst, all);
    return llvm::Error::success();
  }
  if (isa::keepsOneBlock(kind)) {
    return executeBlockCollective(m, inst, *communicator, std::move(values));
  }
  std::vector<float> wire(values.begin(), values.end());
  if (auto e = communicator->allReduce(wire.data(), wire.size(),
                                       kind == isa::CollectiveKind::AllReduceSum
                                           ? comm::Reduction::Sum
                                           : comm::Reduction::Mean)) {
    return e;
  }
  values.assign(wire.begin(), wire.end());
  scatter(m, inst.operands[0], values);
  return llvm::Error::success();
}

llvm::Error executeIndexed(MachineState &m, const isa::Instruction &inst) {
  bool gathers = inst.opcode == isa::Opcode::DmaGather;
  const isa::AccessPattern &rows = inst.operands[gathers ? 1 : 0];
  std::vector<double> indices = gather(m, inst.operands[2]);
  std::vector<double> values;
  if (!gathers) {
    values = gather(m, inst.operands[1]);
  }
  std::vector<double> out;
  out.reserve(rows.partitions * rows.freeElements());
  int64_t width = rows.freeElements();
  // Every index is checked before anything is written: a scatter that
  // stops leaves its destination as it was.
  for (int64_t p = 0; p < rows.partitions; ++p) {
    double index = indices[p];
    if (!(index >= 0 && index < static_cast<double>(inst.int1))) {
      // An i32 index is exact in a double; NaN is an index never written.
      std::string shown = std::isnan(index)
                              ? std::string("NaN (never written)")
                              : std::to_string(static_cast<int64_t>(index));
      return llvm::createStringError(
          llvm::formatv("partition {0} {1} index {2}, outside [0, {3})", p,
                        gathers ? "reads" : "writes", shown, inst.int1)
              .str());
    }
  }
  for (int64_t p = 0; p < rows.partitions; ++p) {
    isa::AccessPattern row = rows;
    row.partitions = 1;
    row.offset += (p * rows.partitionStride +
                   static_cast<int64_t>(indices[p]) * inst.int0) *
                  rows.elementBytes();
    if (gathers) {
      std::vector<double> picked = gather(m, row);
      out.insert(out.end(), picked.begin(), picked.end());
    } else {
      // In partition order: of two partitions with one index, the later
      // one's row stays.
      scatter(m, row,
              std::vector<double>(values.begin() + p * width,
                                  values.begin() + (p + 1) * width));
    }
  }
  if (gathers) {
    scatter(m, inst.operands[0], out);
  }
  return llvm::Error::success();
}

void execute(MachineState &m, const isa::Instruction &inst) {
  if (!executeFast(m, inst)) {
    executeReference(m, inst);
  }
}

} // namespace kiln::sim
