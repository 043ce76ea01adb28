//===- RowKernels.cpp - kernels that work in the simulated memories ------===//
//
// Most tiles a training step touches are f32 with each partition's elements
// one contiguous run: an SBUF or PSUM row, or a row of an HBM matrix. The
// kernels here read and write such tiles where they lie, a partition at a
// time, instead of gathering them into scratch and scattering the result
// back: the copies cost as much as the arithmetic for the elementwise
// instructions. Like the scratch kernels (Kernels.cpp) they agree bit for
// bit with the specification, give up before changing anything when an
// operand is not fully written, and leave partly overlapping operands to
// the scratch path.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Arithmetic.h"
#include "runtime/sim/Kernels.h"
#include "runtime/sim/TileWalk.h"

#include "compiler/target/AccessRegion.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

namespace kiln::sim {

using isa::AluOp;
using isa::DType;

namespace {

/// An f32 tile whose every partition is one contiguous run of `width`
/// elements: in SBUF and PSUM, consecutive memory rows from one byte; in
/// HBM, runs `step` bytes apart on its one row.
struct Rows {
  MemoryArray *memory;
  int64_t firstRow, byte, step, partitions, width;
  bool tracked; // MachineState::tracksWritten

  int64_t rowOf(int64_t p) const { return step ? firstRow : firstRow + p; }
  int64_t byteOf(int64_t p) const { return byte + p * step; }
  float *row(int64_t p) const {
    return reinterpret_cast<float *>(memory->data(rowOf(p), byteOf(p)));
  }
  bool written() const {
    if (!tracked) {
      return true;
    }
    for (int64_t p = 0; p < partitions; ++p) {
      if (!memory->isWritten(rowOf(p), byteOf(p), width * 4)) {
        return false;
      }
    }
    return true;
  }
  void markWritten() const {
    if (!tracked) {
      return;
    }
    for (int64_t p = 0; p < partitions; ++p) {
      memory->markWritten(rowOf(p), byteOf(p), width * 4);
    }
  }
  bool sameAs(const Rows &o) const {
    return memory == o.memory && firstRow == o.firstRow && byte == o.byte &&
           step == o.step && partitions == o.partitions && width == o.width;
  }
  /// Whether the two tiles share no byte.
  bool disjointFrom(const Rows &o) const {
    if (memory != o.memory) {
      return true;
    }
    if (!step && !o.step) {
      bool rowsMeet = firstRow < o.firstRow + o.partitions &&
                      o.firstRow < firstRow + partitions;
      bool bytesMeet = byte < o.byte + o.width * 4 && o.byte < byte + width * 4;
      return !rowsMeet || !bytesMeet;
    }
    int64_t end = byteOf(partitions - 1) + width * 4,
            otherEnd = o.byteOf(o.partitions - 1) + o.width * 4;
    return end <= o.byte || otherEnd <= byte;
  }
  /// Whether an elementwise kernel may read `source` while writing this
  /// tile, a partition at a time.
  bool safeToReadWhileWriting(const Rows &source) const {
    return sameAs(source) || disjointFrom(source);
  }
  /// Whether an elementwise kernel can compute this tile from `source`:
  /// the same shape, safe to read while writing, and written.
  bool elementwiseFrom(const Rows &source) const {
    return source.partitions == partitions && source.width == width &&
           safeToReadWhileWriting(source) && source.written();
  }
};

/// `ap` as Rows, when it is an f32 tile whose partitions are contiguous
/// runs (its free dimensions nest densely, innermost stride 1).
std::optional<Rows> rowsOf(MachineState &m, const isa::AccessPattern &ap) {
  if (ap.dtype != DType::F32 || ap.offset % 4 != 0) {
    return std::nullopt;
  }
  int64_t expected = 1;
  for (int d = ap.rank - 1; d >= 0; --d) {
    if (ap.sizes[d] != 1 && ap.strides[d] != expected) {
      return std::nullopt;
    }
    expected *= ap.sizes[d];
  }
  bool hbm = ap.memory == isa::Memory::Hbm;
  if (hbm && ap.partitions > 1 && ap.partitionStride < expected) {
    return std::nullopt; // partitions that overlap each other
  }
  return Rows{&m.memory(ap.memory), hbm ? 0 : ap.partition, ap.offset,
              hbm ? ap.partitionStride * 4 : 0, ap.partitions,
              ap.freeElements(), m.tracksWritten};
}

// Elementwise loops over one partition, one per operation so that each
// vectorises; `(float)alu(op, a, b)` is what every one computes.

template <typename Op>
inline void mapRow(const float *a, const float *b, float *out, int64_t n,
                   Op op) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = op(a[i], b[i]);
  }
}

template <typename Op>
inline void mapRowScalar(const float *a, float s, float *out, int64_t n,
                         Op op) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = op(a[i], s);
  }
}

/// out = a op b, with `b` a row (bStep 1) or one scalar (bStep 0).
KILN_VECTOR_CLONES
void aluRow(AluOp op, const float *a, const float *b, int64_t bStep,
            float *out, int64_t n) {
  auto both = [&](auto f) {
    if (bStep) {
      mapRow(a, b, out, n, f);
    } else {
      mapRowScalar(a, *b, out, n, f);
    }
  };
  switch (op) {
  case AluOp::Bypass:
    if (out != a) {
      std::memmove(out, a, n * 4);
    }
    return;
  case AluOp::Add:
    return both([](float x, float y) { return x + y; });
  case AluOp::Sub:
    return both([](float x, float y) { return x - y; });
  case AluOp::Mul:
    return both([](float x, float y) { return x * y; });
  case AluOp::Div:
    return both([](float x, float y) { return x / y; });
  default:
    return both([op](float x, float y) {
      return static_cast<float>(alu(op, x, y));
    });
  }
}

/// out = func(in * scale + bias) over a row, for the functions the table
/// computes in f32 with correctly rounded operations alone, as loops that
/// vectorise; false for the others.
KILN_VECTOR_CLONES
bool activationRow(isa::ActFunc func, const float *in, float scale,
                   float bias, float *out, int64_t n) {
  auto map = [&](auto f) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = f(in[i] * scale + bias);
    }
    return true;
  };
  switch (func) {
  case isa::ActFunc::Identity:
    return map([](float x) { return x; });
  case isa::ActFunc::Relu:
    return map([](float x) { return std::isnan(x) ? x : std::max(x, 0.0f); });
  case isa::ActFunc::Square:
    return map([](float x) { return x * x; });
  case isa::ActFunc::Sqrt:
    return map([](float x) { return std::sqrt(x); });
  case isa::ActFunc::Rsqrt:
    return map([](float x) { return 1.0f / std::sqrt(x); });
  case isa::ActFunc::Reciprocal:
    return map([](float x) { return 1.0f / x; });
  case isa::ActFunc::Abs:
    return map([](float x) { return std::fabs(x); });
  default:
    return false;
  }
}

/// Whether every element of the f32 pattern `ap` was written (always,
/// where nothing tracks it).
bool written(const MachineState &m, const isa::AccessPattern &ap) {
  if (!m.tracksWritten) {
    return true;
  }
  const MemoryArray &memory = m.memory(ap.memory);
  bool all = true;
  forEachRun(ap, [&](int64_t row, int64_t byte, int64_t count) {
    all = all && memory.isWritten(row, byte, count * 4);
  });
  return all;
}

/// An f32 copy between tiles of any patterns that share no byte: the two
/// patterns' runs walked side by side, each chunk copied once.
bool copyRuns(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &to = inst.operands[0], &from = inst.operands[1];
  if (to.dtype != DType::F32 || from.dtype != DType::F32 ||
      isa::regionOfOperand(inst, 0).overlaps(isa::regionOfOperand(inst, 1))) {
    return false;
  }
  const MemoryArray &source = m.memory(from.memory);
  MemoryArray &destination = m.memory(to.memory);
  if (!written(m, from)) {
    return false;
  }
  RunCursor out(to), in(from);
  while (!out.done() && !in.done()) {
    int64_t n = std::min(out.left(), in.left());
    std::memcpy(destination.data(out.row(), out.byte()),
                source.data(in.row(), in.byte()), n * 4);
    if (m.tracksWritten) {
      destination.markWritten(out.row(), out.byte(), n * 4);
    }
    out.consume(n);
    in.consume(n);
  }
  return true;
}

/// An f32 copy from an on-chip window of short or strided runs into a tile
/// of contiguous partitions (a convolution's band repeated once per tap on
/// the partitions: runs of a window's row, strided by the convolution's
/// stride): the window read by a loop nest, the destination filled a
/// partition row at a time, with no call per run.
bool copyWindowIntoRows(MachineState &m, const isa::Instruction &inst,
                        const Rows &dst) {
  const isa::AccessPattern &from = inst.operands[1];
  if (from.dtype != DType::F32 || from.offset % 4 ||
      from.memory == isa::Memory::Hbm ||
      from.partitions * from.freeElements() != dst.partitions * dst.width ||
      isa::regionOfOperand(inst, 0).overlaps(isa::regionOfOperand(inst, 1))) {
    return false;
  }
  const MemoryArray &source = m.memory(from.memory);
  if (!written(m, from)) {
    return false;
  }
  int64_t p = 0, col = 0;
  float *out = dst.row(0);
  forEachOnChipF32Run(
      source, from,
      [&](int64_t, const float *run, int64_t count, int64_t stride) {
        for (int64_t i = 0; i < count;) {
          int64_t n = std::min(count - i, dst.width - col);
          const float *in = run + i * stride;
          for (int64_t k = 0; k < n; ++k) {
            out[col + k] = in[k * stride];
          }
          i += n;
          col += n;
          if (col == dst.width && ++p < dst.partitions) {
            col = 0;
            out = dst.row(p);
          }
        }
      });
  dst.markWritten();
  return true;
}

} // namespace

namespace in_place {

bool copy(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), src = rowsOf(m, inst.operands[1]);
  if (!dst || !src || dst->partitions != src->partitions ||
      dst->width != src->width || !dst->safeToReadWhileWriting(*src)) {
    return (dst && !src && copyWindowIntoRows(m, inst, *dst)) ||
           copyRuns(m, inst);
  }
  if (!src->written()) {
    return false;
  }
  if (!dst->sameAs(*src)) {
    for (int64_t p = 0; p < dst->partitions; ++p) {
      std::memcpy(dst->row(p), src->row(p), dst->width * 4);
    }
  }
  dst->markWritten();
  return true;
}

bool tensorTensor(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), a = rowsOf(m, inst.operands[1]),
       b = rowsOf(m, inst.operands[2]);
  if (!dst || !a || !b || !dst->elementwiseFrom(*a) ||
      !dst->elementwiseFrom(*b)) {
    return false;
  }
  auto op = static_cast<AluOp>(inst.op0);
  for (int64_t p = 0; p < dst->partitions; ++p) {
    aluRow(op, a->row(p), b->row(p), 1, dst->row(p), dst->width);
  }
  dst->markWritten();
  return true;
}

/// op1(op0(x, scalar0), scalar1), the scalars immediates or, per
/// partition, columns of the third operand (scalar_operands bits 0 and 1).
bool tensorScalar(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), src = rowsOf(m, inst.operands[1]);
  if (!dst || !src || !dst->elementwiseFrom(*src)) {
    return false;
  }
  std::vector<float> scalars;
  int64_t columns = 0;
  if (inst.numOperands == 3) {
    const isa::AccessPattern &ap = inst.operands[2];
    columns = ap.freeElements();
    scalars.resize(ap.partitions * columns);
    if (!gatherFloats(m, ap, scalars.data())) {
      return false;
    }
  }
  auto op0 = static_cast<AluOp>(inst.op0), op1 = static_cast<AluOp>(inst.op1);
  for (int64_t p = 0; p < dst->partitions; ++p) {
    float s0 = static_cast<float>(inst.imm0),
          s1 = static_cast<float>(inst.imm1);
    if (columns) {
      const float *column = scalars.data() + p * columns;
      if (inst.int0 & 1) {
        s0 = *column++;
      }
      if (inst.int0 & 2) {
        s1 = *column;
      }
    }
    float *out = dst->row(p);
    aluRow(op0, src->row(p), &s0, 0, out, dst->width);
    if (op1 != AluOp::Bypass) {
      aluRow(op1, out, &s1, 0, out, dst->width);
    }
  }
  dst->markWritten();
  return true;
}

/// Also sums each partition's results (unrounded, in double, as the
/// specification does) into the third operand, when there is one.
bool activation(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), src = rowsOf(m, inst.operands[1]);
  if (!dst || !src || !dst->elementwiseFrom(*src)) {
    return false;
  }
  auto func = static_cast<isa::ActFunc>(inst.op0);
  float scale = static_cast<float>(inst.imm0),
        bias = static_cast<float>(inst.imm1);
  bool sums = inst.numOperands == 3;
  std::vector<float> rowSums(dst->partitions);
  for (int64_t p = 0; p < dst->partitions; ++p) {
    const float *in = src->row(p);
    float *out = dst->row(p);
    double sum = 0.0;
    if (activationRow(func, in, scale, bias, out, dst->width)) {
      // Computed in f32: the unrounded results are the f32 ones.
      for (int64_t i = 0; sums && i < dst->width; ++i) {
        sum += out[i];
      }
    } else {
      for (int64_t i = 0; i < dst->width; ++i) {
        double r = sim::activation(func, in[i] * scale + bias);
        out[i] = static_cast<float>(r);
        sum += r;
      }
    }
    rowSums[p] = static_cast<float>(sum);
  }
  dst->markWritten();
  if (sums) {
    scatterFloats(m, inst.operands[2], rowSums.data());
  }
  return true;
}

/// Reduces each run of the source's innermost dimension.
bool tensorReduce(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &ap = inst.operands[1];
  auto src = rowsOf(m, ap);
  if (!src || !src->written()) {
    return false;
  }
  int64_t inner = ap.sizes[ap.rank - 1], groups = src->width / inner;
  auto op = static_cast<AluOp>(inst.op0);
  std::vector<float> out(src->partitions * groups);
  for (int64_t p = 0; p < src->partitions; ++p) {
    const float *in = src->row(p);
    for (int64_t g = 0; g < groups; ++g) {
      const float *run = in + g * inner;
      double acc = reduceInit(op);
      if (op == AluOp::Add) {
        // The specification's order: one double sum, element by element.
        for (int64_t i = 0; i < inner; ++i) {
          acc += run[i];
        }
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          acc = reduceStep(op, acc, run[i]);
        }
      }
      out[p * groups + g] = static_cast<float>(acc);
    }
  }
  scatterFloats(m, inst.operands[0], out.data());
  return true;
}

/// TensorE's stationary-transposed product straight from and into the
/// memories: SBUF and PSUM rows are the GEMM's rows, a memory row apart.
bool matmul(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), stat = rowsOf(m, inst.operands[1]),
       mov = rowsOf(m, inst.operands[2]);
  if (!dst || !stat || !mov || dst->step || stat->step || mov->step ||
      stat->partitions != mov->partitions ||
      dst->partitions != stat->width || dst->width != mov->width ||
      !dst->disjointFrom(*stat) || !dst->disjointFrom(*mov) ||
      !stat->written() || !mov->written() ||
      (inst.accumulate() && !dst->written())) {
    return false;
  }
  auto ld = [](const Rows &r) { return r.memory->rowPitch() / 4; };
  matmulF32(stat->row(0), ld(*stat), mov->row(0), ld(*mov), dst->row(0),
            ld(*dst), stat->partitions, stat->width, mov->width,
            inst.accumulate());
  dst->markWritten();
  return true;
}

namespace {

/// A transpose whose source is an on-chip f32 window of up to four free
/// dimensions (a convolution's tap over its input band, which the weight
/// gradient transposes per tap): each partition's elements read in the
/// window's order straight into the destination's column, with no gather
/// into a scratch buffer. Only where the written bits need no tracking.
bool transposeWindow(MachineState &m, const isa::Instruction &inst) {
  const isa::AccessPattern &ap = inst.operands[1];
  auto dst = rowsOf(m, inst.operands[0]);
  if (!dst || m.tracksWritten || ap.dtype != DType::F32 || ap.offset % 4 ||
      ap.memory == isa::Memory::Hbm || dst->memory == &m.memory(ap.memory) ||
      dst->partitions != ap.freeElements() || dst->width != ap.partitions) {
    return false;
  }
  llvm::SmallVector<float *, 128> out(dst->partitions);
  for (int64_t j = 0; j < dst->partitions; ++j) {
    out[j] = dst->row(j);
  }
  // j: the free index, which a partition's last run brings back to 0.
  int64_t j = 0;
  forEachOnChipF32Run(m.memory(ap.memory), ap,
                      [&](int64_t p, const float *run, int64_t count,
                          int64_t stride) {
                        for (int64_t i = 0; i < count; ++i) {
                          out[j++][p] = run[i * stride];
                        }
                        j %= dst->partitions;
                      });
  return true;
}

} // namespace

bool transpose(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]), src = rowsOf(m, inst.operands[1]);
  if (dst && !src) {
    return transposeWindow(m, inst);
  }
  if (!dst || !src || dst->partitions != src->width ||
      dst->width != src->partitions || !dst->disjointFrom(*src) ||
      !src->written()) {
    return false;
  }
  // In blocks, so that the destination rows a block writes stay cached.
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < src->partitions; i0 += kBlock) {
    int64_t i1 = std::min(i0 + kBlock, src->partitions);
    for (int64_t j0 = 0; j0 < src->width; j0 += kBlock) {
      int64_t j1 = std::min(j0 + kBlock, src->width);
      for (int64_t j = j0; j < j1; ++j) {
        float *out = dst->row(j);
        for (int64_t i = i0; i < i1; ++i) {
          out[i] = src->row(i)[j];
        }
      }
    }
  }
  dst->markWritten();
  return true;
}

bool memset(MachineState &m, const isa::Instruction &inst) {
  auto dst = rowsOf(m, inst.operands[0]);
  if (!dst) {
    return false;
  }
  float value = static_cast<float>(inst.imm0);
  for (int64_t p = 0; p < dst->partitions; ++p) {
    std::fill_n(dst->row(p), dst->width, value);
  }
  dst->markWritten();
  return true;
}

} // namespace in_place

} // namespace kiln::sim
