//===- Kernels.cpp - fast paths for the common instructions --------------===//
//
// Each kernel must agree bit for bit with the specification in Semantics.cpp
// on fully written tiles; SimulatorTest's kernel-agreement tests check that.
// The one exception is Matmul, whose f32 sums oneDNN may associate in another
// order: both are f32 accumulations, as PSUM's are.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Kernels.h"

#include "compiler/target/FloatFormats.h"
#include "runtime/sim/Arithmetic.h"
#include "runtime/sim/TileWalk.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::sim {

using isa::AluOp;
using isa::DType;

namespace {

/// Widens `count` bf16 values to f32, and says whether all their bytes were
/// written: one pass over both, since the pass is bound by memory.
KILN_VECTOR_CLONES
bool widenWrittenBF16(const uint8_t *src, const uint8_t *written, float *out,
                      int64_t count) {
  uint8_t all = 1;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    uint32_t wide = static_cast<uint32_t>(bits) << 16;
    std::memcpy(out + i, &wide, 4);
    all &= written[2 * i] & written[2 * i + 1];
  }
  return all != 0;
}

KILN_VECTOR_CLONES
void widenBF16(const uint8_t *src, float *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    uint32_t wide = static_cast<uint32_t>(bits) << 16;
    std::memcpy(out + i, &wide, 4);
  }
}

} // namespace

bool gatherFloats(const MachineState &m, const isa::AccessPattern &ap,
                  float *out) {
  if (ap.dtype == DType::I32) {
    return false;
  }
  if (ap.dtype == DType::F32 && ap.memory != isa::Memory::Hbm &&
      !m.tracksWritten && ap.offset % 4 == 0) {
    // No written bits to check (a replayed run): a plain loop per run.
    forEachOnChipF32Run(m.memory(ap.memory), ap,
                        [&](int64_t, const float *run, int64_t count,
                            int64_t stride) {
                          if (stride == 1) {
                            for (int64_t i = 0; i < count; ++i) {
                              out[i] = run[i];
                            }
                          } else {
                            for (int64_t i = 0; i < count; ++i) {
                              out[i] = run[i * stride];
                            }
                          }
                          out += count;
                        });
    return true;
  }
  const MemoryArray &memory = m.memory(ap.memory);
  int64_t elem = ap.elementBytes();
  bool complete = true;
  forEachRun(ap, [&](int64_t row, int64_t byte, int64_t count) {
    if (!complete) {
      return;
    }
    const uint8_t *src = memory.data(row, byte);
    if (ap.dtype == DType::BF16) {
      complete = m.tracksWritten ? widenWrittenBF16(
                                       src, memory.writtenData(row, byte),
                                       out, count)
                                 : (widenBF16(src, out, count), true);
      out += count;
      return;
    }
    if (m.tracksWritten && !memory.isWritten(row, byte, count * elem)) {
      complete = false;
      return;
    }
    switch (ap.dtype) {
    case DType::F32:
      std::memcpy(out, src, count * 4);
      break;
    case DType::BF16:
      break;
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = numerics::halfBitsToFloat(bits);
      }
      break;
    case DType::I32:
      break;
    }
    out += count;
  });
  return complete;
}

void scatterFloats(MachineState &m, const isa::AccessPattern &ap,
                   const float *values) {
  MemoryArray &memory = m.memory(ap.memory);
  int64_t elem = ap.elementBytes();
  bool stochastic = m.rounder.isStochastic();
  forEachRun(ap, [&](int64_t row, int64_t byte, int64_t count) {
    uint8_t *dst = memory.data(row, byte);
    switch (ap.dtype) {
    case DType::F32:
      std::memcpy(dst, values, count * 4);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < count; ++i) {
        // Stochastic rounding draws one number per element, in this order,
        // exactly as scatter() does.
        float v =
            stochastic
                ? static_cast<float>(m.rounder.round(DType::BF16, values[i]))
                : values[i];
        uint16_t bits = numerics::floatToBF16Bits(v);
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      break;
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits = numerics::floatToHalfBits(values[i]);
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      break;
    case DType::I32:
      for (int64_t i = 0; i < count; ++i) {
        int32_t v =
            static_cast<int32_t>(m.rounder.round(DType::I32, values[i]));
        std::memcpy(dst + 4 * i, &v, 4);
      }
      break;
    }
    if (m.tracksWritten) {
      memory.markWritten(row, byte, count * elem);
    }
    values += count;
  });
}

namespace {

/// The specification's order: each element of C accumulates its k products
/// in f32, p ascending; p outermost, so that every operand row is read
/// once, in order, into `acc`, m x n floats held contiguously.
KILN_VECTOR_CLONES
void matmulInOrder(const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, int64_t k, int64_t m, int64_t n,
                   bool accumulate, float *acc) {
  for (int64_t i = 0; i < m; ++i) {
    if (accumulate) {
      std::copy_n(c + i * ldc, n, acc + i * n);
    } else {
      std::fill_n(acc + i * n, n, 0.0f);
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    const float *ap = a + p * lda, *bp = b + p * ldb;
    if (n == 1) {
      float bv = bp[0];
      for (int64_t i = 0; i < m; ++i) {
        acc[i] += ap[i] * bv;
      }
      continue;
    }
    for (int64_t i = 0; i < m; ++i) {
      float av = ap[i];
      float *row = acc + i * n;
      for (int64_t j = 0; j < n; ++j) {
        row[j] += av * bp[j];
      }
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    std::copy_n(acc + i * n, n, c + i * ldc);
  }
}

/// Below this many multiply-adds a GEMM call costs more than the loop.
constexpr int64_t kSmallMatmul = 1 << 12;

} // namespace

void matmulF32(const float *a, int64_t lda, const float *b, int64_t ldb,
               float *c, int64_t ldc, int64_t k, int64_t m, int64_t n,
               bool accumulate) {
  if (k * m * n > kSmallMatmul &&
      dnnl_sgemm('T', 'N', m, n, k, 1.0f, a, lda, b, ldb,
                 accumulate ? 1.0f : 0.0f, c, ldc) == dnnl_success) {
    return;
  }
  // The accumulator lives out here: clang does not give the function
  // clones above thread-local objects of their own.
  thread_local std::vector<float> acc;
  acc.resize(m * n);
  matmulInOrder(a, lda, b, ldb, c, ldc, k, m, n, accumulate, acc.data());
}

namespace {

/// A tile's worth of f32 scratch, reused across instructions: the simulator
/// runs one instruction at a time per thread.
std::vector<float> &scratch(int which, size_t size) {
  thread_local std::vector<float> buffers[4];
  buffers[which].resize(size);
  return buffers[which];
}

int64_t elementsOf(const isa::AccessPattern &ap) {
  return ap.partitions * ap.freeElements();
}

/// Elementwise a op b over f32, with the common operations as plain loops the
/// compiler vectorises.
KILN_VECTOR_CLONES
void tensorTensor(AluOp op, const float *a, const float *b, float *out,
                  int64_t n) {
  switch (op) {
  case AluOp::Add:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] + b[i];
    }
    return;
  case AluOp::Sub:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] - b[i];
    }
    return;
  case AluOp::Mul:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] * b[i];
    }
    return;
  case AluOp::Div:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] / b[i];
    }
    return;
  default:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(alu(op, a[i], b[i]));
    }
    return;
  }
}

bool matmul(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0], &stat = inst.operands[1],
                           &mov = inst.operands[2];
  int64_t k = stat.partitions, rows = stat.freeElements(),
          cols = mov.freeElements();
  std::vector<float> &a = scratch(0, k * rows), &b = scratch(1, k * cols);
  if (!gatherFloats(m, stat, a.data()) || !gatherFloats(m, mov, b.data())) {
    return false;
  }
  MemoryArray &memory = m.memory(dst.memory);
  bool inPlace = dst.dtype == DType::F32 && dst.memory != isa::Memory::Hbm &&
                 dst.rank == 1 && dst.strides[0] == 1 && dst.offset % 4 == 0;
  if (inPlace) {
    // The usual case, an f32 PSUM tile: PSUM rows are the GEMM's rows, so
    // oneDNN accumulates straight into the simulated memory.
    int64_t rowBytes = cols * 4;
    if (inst.accumulate() && m.tracksWritten) {
      for (int64_t p = 0; p < rows; ++p) {
        if (!memory.isWritten(dst.partition + p, dst.offset, rowBytes)) {
          return false;
        }
      }
    }
    auto *c = reinterpret_cast<float *>(memory.data(dst.partition, dst.offset));
    matmulF32(a.data(), rows, b.data(), cols, c, memory.rowPitch() / 4, k,
              rows, cols, inst.accumulate());
    if (!inst.accumulate() && m.tracksWritten) {
      for (int64_t p = 0; p < rows; ++p) {
        memory.markWritten(dst.partition + p, dst.offset, rowBytes);
      }
    }
    return true;
  }
  std::vector<float> &c = scratch(2, rows * cols);
  if (inst.accumulate() && !gatherFloats(m, dst, c.data())) {
    return false;
  }
  matmulF32(a.data(), rows, b.data(), cols, c.data(), cols, k, rows, cols,
            inst.accumulate());
  scatterFloats(m, dst, c.data());
  return true;
}

bool transpose(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &src = inst.operands[1];
  int64_t p = src.partitions, f = src.freeElements();
  std::vector<float> &in = scratch(0, p * f), &out = scratch(1, p * f);
  if (!gatherFloats(m, src, in.data())) {
    return false;
  }
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      out[j * p + i] = in[i * f + j];
    }
  }
  scatterFloats(m, inst.operands[0], out.data());
  return true;
}

bool activation(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t n = elementsOf(dst), free = dst.freeElements();
  std::vector<float> &in = scratch(0, n), &out = scratch(1, n);
  if (!gatherFloats(m, inst.operands[1], in.data())) {
    return false;
  }
  auto func = static_cast<isa::ActFunc>(inst.op0);
  float scale = static_cast<float>(inst.imm0),
        bias = static_cast<float>(inst.imm1);
  std::vector<float> sums(dst.partitions);
  for (int64_t p = 0; p < dst.partitions; ++p) {
    // The specification sums the unrounded results in double.
    double sum = 0.0;
    for (int64_t i = p * free; i < (p + 1) * free; ++i) {
      double r = sim::activation(func, in[i] * scale + bias);
      out[i] = static_cast<float>(r);
      sum += r;
    }
    sums[p] = static_cast<float>(sum);
  }
  scatterFloats(m, dst, out.data());
  if (inst.numOperands == 3) {
    scatterFloats(m, inst.operands[2], sums.data());
  }
  return true;
}

bool tensorTensor(MachineState &m, const isa::Instruction &inst) {
  int64_t n = elementsOf(inst.operands[0]);
  std::vector<float> &a = scratch(0, n), &b = scratch(1, n),
                     &out = scratch(2, n);
  if (!gatherFloats(m, inst.operands[1], a.data()) ||
      !gatherFloats(m, inst.operands[2], b.data())) {
    return false;
  }
  tensorTensor(static_cast<AluOp>(inst.op0), a.data(), b.data(), out.data(), n);
  scatterFloats(m, inst.operands[0], out.data());
  return true;
}

bool tensorScalar(MachineState &m, const isa::Instruction &inst) {
  if (inst.numOperands == 3) {
    return false; // per-partition scalars: the reference semantics
  }
  int64_t n = elementsOf(inst.operands[0]);
  std::vector<float> &v = scratch(0, n);
  if (!gatherFloats(m, inst.operands[1], v.data())) {
    return false;
  }
  auto op0 = static_cast<AluOp>(inst.op0), op1 = static_cast<AluOp>(inst.op1);
  if (op0 == AluOp::Mul && op1 == AluOp::Add) {
    // The affine case (scale and shift) as a vectorisable loop.
    float scale = static_cast<float>(inst.imm0),
          shift = static_cast<float>(inst.imm1);
    for (int64_t i = 0; i < n; ++i) {
      float product = v[i] * scale;
      v[i] = product + shift;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<float>(alu(op1, alu(op0, v[i], inst.imm0), inst.imm1));
    }
  }
  scatterFloats(m, inst.operands[0], v.data());
  return true;
}

bool tensorReduce(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &src = inst.operands[1];
  int64_t n = elementsOf(src), inner = src.sizes[src.rank - 1];
  std::vector<float> &in = scratch(0, n), &out = scratch(1, n / inner);
  if (!gatherFloats(m, src, in.data())) {
    return false;
  }
  auto op = static_cast<AluOp>(inst.op0);
  for (int64_t g = 0; g < n / inner; ++g) {
    double acc = reduceInit(op);
    const float *row = in.data() + g * inner;
    for (int64_t i = 0; i < inner; ++i) {
      acc = reduceStep(op, acc, row[i]);
    }
    out[g] = static_cast<float>(acc);
  }
  scatterFloats(m, inst.operands[0], out.data());
  return true;
}

bool copy(MachineState &m, const isa::Instruction &inst) {
  std::vector<float> &v = scratch(0, elementsOf(inst.operands[0]));
  if (!gatherFloats(m, inst.operands[1], v.data())) {
    return false;
  }
  scatterFloats(m, inst.operands[0], v.data());
  return true;
}

bool memset(MachineState &m, const isa::Instruction &inst) {
  std::vector<float> &v = scratch(0, elementsOf(inst.operands[0]));
  std::fill(v.begin(), v.end(), static_cast<float>(inst.imm0));
  scatterFloats(m, inst.operands[0], v.data());
  return true;
}

/// affine_select: the source where `int0 + int1 * p + int2 * i` (p the
/// partition, i the free index) compares true with 0 under op0, imm0
/// elsewhere (a causal mask computed from positions).
bool affineSelect(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &dst = inst.operands[0];
  int64_t parts = dst.partitions, free = dst.freeElements();
  std::vector<float> &v = scratch(0, elementsOf(dst));
  if (!gatherFloats(m, inst.operands[1], v.data())) {
    return false;
  }
  auto op = static_cast<isa::AluOp>(inst.op0);
  auto fill = static_cast<float>(inst.imm0);
  for (int64_t p = 0; p < parts; ++p) {
    int64_t at = inst.int0 + inst.int1 * p;
    float *row = v.data() + p * free;
    for (int64_t i = 0; i < free; ++i, at += inst.int2) {
      if (alu(op, static_cast<double>(at), 0.0) == 0.0) {
        row[i] = fill;
      }
    }
  }
  scatterFloats(m, dst, v.data());
  return true;
}

} // namespace

bool executeFast(MachineState &m, const isa::Instruction &inst) {
  if (isa::hasIntegerOperand(inst)) {
    return false;
  }
  switch (inst.opcode) {
  case isa::Opcode::Matmul:
    return in_place::matmul(m, inst) || matmul(m, inst);
  case isa::Opcode::Transpose:
    return in_place::transpose(m, inst) || transpose(m, inst);
  case isa::Opcode::Activation:
    return in_place::activation(m, inst) || activation(m, inst);
  case isa::Opcode::TensorTensor:
    return in_place::tensorTensor(m, inst) || tensorTensor(m, inst);
  case isa::Opcode::TensorScalar:
    return in_place::tensorScalar(m, inst) || tensorScalar(m, inst);
  case isa::Opcode::TensorReduce:
    return in_place::tensorReduce(m, inst) || tensorReduce(m, inst);
  case isa::Opcode::TensorCopy:
  case isa::Opcode::DmaCopy:
    return in_place::copy(m, inst) || copy(m, inst);
  case isa::Opcode::Memset:
    return in_place::memset(m, inst) || memset(m, inst);
  case isa::Opcode::AffineSelect:
    return affineSelect(m, inst);
  default:
    return false;
  }
}

} // namespace kiln::sim
