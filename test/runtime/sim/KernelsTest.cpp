//===- KernelsTest.cpp - fast kernels agree with the specification -------===//
//
// Each fast kernel runs beside the element-at-a-time reference semantics on
// the same memories; both must leave identical bytes (Matmul: within f32
// re-association), and the kernels must step aside for unwritten memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Kernels.h"
#include "runtime/sim/Semantics.h"
#include "test/support/TestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;
using isa::AluOp;
using isa::DType;
using isa::Memory;
using isa::Opcode;

namespace {

constexpr int64_t kRowBytes = 16384;

/// Two identical machines: one runs the reference, one the fast path.
struct Twin {
  sim::MemoryArray hbm[2] = {{1, 1 << 20}, {1, 1 << 20}};
  sim::MemoryArray sbuf[2] = {{128, kRowBytes}, {128, kRowBytes}};
  sim::MemoryArray psum[2] = {{128, 2048}, {128, 2048}};
  sim::Rounder rounder[2];
  sim::MachineState state(int i) {
    return {hbm[i], sbuf[i], psum[i], rounder[i]};
  }

  /// Fills `ap` on both machines with the same random values.
  void fill(const isa::AccessPattern &ap, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<double> values(ap.partitions * ap.freeElements());
    for (double &v : values) {
      v = dist(gen);
    }
    for (int i = 0; i < 2; ++i) {
      sim::MachineState m = state(i);
      sim::scatter(m, ap, values);
    }
  }

  /// Whether both machines' memories hold the same bytes (and written
  /// bits).
  bool sbufIdentical() const {
    auto same = [](const sim::MemoryArray &a, const sim::MemoryArray &b,
                   int64_t rows) {
      int64_t size = rows * a.rowPitch();
      return std::memcmp(a.data(0, 0), b.data(0, 0), size) == 0 &&
             std::memcmp(a.writtenData(0, 0), b.writtenData(0, 0), size) == 0;
    };
    return same(sbuf[0], sbuf[1], 128) && same(psum[0], psum[1], 128) &&
           same(hbm[0], hbm[1], 1);
  }
};

isa::Instruction make(Opcode opcode,
                      std::initializer_list<isa::AccessPattern> operands,
                      uint8_t op0 = 0, uint8_t op1 = 0, double imm0 = 0,
                      double imm1 = 0) {
  isa::Instruction inst;
  inst.opcode = opcode;
  for (const isa::AccessPattern &ap : operands) {
    inst.operands[inst.numOperands++] = ap;
  }
  inst.op0 = op0;
  inst.op1 = op1;
  inst.imm0 = imm0;
  inst.imm1 = imm1;
  return inst;
}

/// Runs `inst` both ways; expects the fast path taken and identical bytes.
void expectAgreement(Twin &t, const isa::Instruction &inst) {
  sim::MachineState reference = t.state(0), fast = t.state(1);
  sim::executeReference(reference, inst);
  ASSERT_TRUE(sim::executeFast(fast, inst));
  EXPECT_TRUE(t.sbufIdentical());
}

TEST(Kernels, ElementwiseAgreeBitForBit) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    Twin t;
    auto a = test::rowsOf(Memory::Sbuf, 128, 300, 0, dtype),
         b = test::rowsOf(Memory::Sbuf, 128, 300, 2048, dtype),
         out = test::rowsOf(Memory::Sbuf, 128, 300, 4096, dtype),
         sums = test::rowsOf(Memory::Sbuf, 128, 1, 8192);
    t.fill(a, 1);
    t.fill(b, 2);
    for (AluOp op : {AluOp::Add, AluOp::Sub, AluOp::Mul, AluOp::Div, AluOp::Max,
                     AluOp::Lt}) {
      expectAgreement(
          t, make(Opcode::TensorTensor, {out, a, b}, static_cast<uint8_t>(op)));
    }
    expectAgreement(t, make(Opcode::TensorScalar, {out, a},
                            static_cast<uint8_t>(AluOp::Mul),
                            static_cast<uint8_t>(AluOp::Add), 0.37, -1.25));
    expectAgreement(t, make(Opcode::TensorScalar, {out, a},
                            static_cast<uint8_t>(AluOp::Max),
                            static_cast<uint8_t>(AluOp::Bypass), 0.1, 0));
    for (isa::ActFunc f : {isa::ActFunc::Exp, isa::ActFunc::Gelu,
                           isa::ActFunc::Tanh, isa::ActFunc::Relu}) {
      expectAgreement(t, make(Opcode::Activation, {out, a, sums},
                              static_cast<uint8_t>(f), 0, 0.5, 0.25));
    }
    auto rows = test::rowsOf(Memory::Sbuf, 128, 1, 12288);
    for (AluOp op : {AluOp::Add, AluOp::Max}) {
      expectAgreement(
          t, make(Opcode::TensorReduce, {rows, a}, static_cast<uint8_t>(op)));
    }
    expectAgreement(t, make(Opcode::TensorCopy, {out, a}));
    // A causal mask from positions: keys up to the partition's query kept
    // (base 5 + p - i >= 0), and the strict upper triangle (eq and ne
    // too).
    for (AluOp op : {AluOp::Ge, AluOp::Lt, AluOp::Eq, AluOp::Ne}) {
      isa::Instruction select =
          make(Opcode::AffineSelect, {out, a}, static_cast<uint8_t>(op), 0,
               -3.0e38);
      select.int0 = 5;
      select.int1 = 1;
      select.int2 = -1;
      expectAgreement(t, select);
    }
  }
}

TEST(Kernels, InPlaceKernelsAgreeBitForBit) {
  Twin t;
  auto a = test::rowsOf(Memory::Sbuf, 128, 300, 0),
       b = test::rowsOf(Memory::Sbuf, 128, 300, 2048),
       scalars = test::rowsOf(Memory::Sbuf, 128, 2, 8192),
       sums = test::rowsOf(Memory::Sbuf, 128, 1, 8256);
  t.fill(a, 1);
  t.fill(b, 2);
  t.fill(scalars, 3);
  // Every function the in-place kernel computes as a vector loop, and one
  // it leaves to the table (with row sums).
  for (isa::ActFunc f :
       {isa::ActFunc::Identity, isa::ActFunc::Square, isa::ActFunc::Sqrt,
        isa::ActFunc::Rsqrt, isa::ActFunc::Reciprocal, isa::ActFunc::Abs,
        isa::ActFunc::Relu, isa::ActFunc::Sigmoid}) {
    auto out = test::rowsOf(Memory::Sbuf, 128, 300, 4096);
    expectAgreement(t, make(Opcode::Activation, {out, a, sums},
                            static_cast<uint8_t>(f), 0, 0.5, 0.25));
  }
  // Per-partition scalars from both columns, and from the second alone.
  for (int64_t which : {3, 2}) {
    isa::Instruction inst = make(
        Opcode::TensorScalar, {test::rowsOf(Memory::Sbuf, 128, 300, 4096), a,
                               scalars},
        static_cast<uint8_t>(AluOp::Sub), static_cast<uint8_t>(AluOp::Mul),
        0.5, 0);
    inst.int0 = which;
    expectAgreement(t, inst);
  }
  // In place (the destination is the source), and a destination that
  // overlaps its source four bytes on (left to the scratch kernels).
  expectAgreement(t, make(Opcode::TensorTensor, {a, a, b},
                          static_cast<uint8_t>(AluOp::Mul)));
  expectAgreement(t, make(Opcode::TensorScalar, {b, b},
                          static_cast<uint8_t>(AluOp::Add),
                          static_cast<uint8_t>(AluOp::Bypass), 1.5, 0));
  expectAgreement(t, make(Opcode::TensorCopy,
                          {test::rowsOf(Memory::Sbuf, 128, 300, 4), a}));
  expectAgreement(t, make(Opcode::Memset,
                          {test::rowsOf(Memory::Sbuf, 128, 300, 4096)}, 0, 0,
                          -0.75));
  expectAgreement(t, make(Opcode::Transpose,
                          {test::rowsOf(Memory::Psum, 100, 128, 0),
                           test::rowsOf(Memory::Sbuf, 128, 100, 0)}));
}

TEST(Kernels, SmallMatmulsRunInTheSpecificationsOrder) {
  Twin t;
  auto stat = test::rowsOf(Memory::Sbuf, 112, 16, 0),
       mov = test::rowsOf(Memory::Sbuf, 112, 2, 64),
       acc = test::rowsOf(Memory::Psum, 16, 2, 0);
  t.fill(stat, 4);
  t.fill(mov, 5);
  t.fill(acc, 6);
  for (uint8_t accumulate : {0, 1}) {
    isa::Instruction inst = make(Opcode::Matmul, {acc, stat, mov});
    inst.flags = accumulate;
    expectAgreement(t, inst);
  }
}

TEST(Kernels, UntrackedRunsComputeTheSameWithoutTouchingWrittenBits) {
  // A replayed instruction whose operands are known written skips the
  // written bits; its results must not change.
  Twin t;
  auto a = test::rowsOf(Memory::Sbuf, 64, 100, 0),
       b = test::rowsOf(Memory::Sbuf, 64, 100, 512),
       out = test::rowsOf(Memory::Sbuf, 64, 100, 1024);
  t.fill(a, 7);
  t.fill(b, 8);
  isa::Instruction inst =
      make(Opcode::TensorTensor, {out, a, b}, static_cast<uint8_t>(AluOp::Add));
  sim::MachineState tracked = t.state(0), untracked = t.state(1);
  untracked.tracksWritten = false;
  sim::execute(tracked, inst);
  sim::execute(untracked, inst);
  EXPECT_EQ(std::memcmp(t.sbuf[0].data(0, 1024), t.sbuf[1].data(0, 1024),
                        400),
            0);
  EXPECT_FALSE(t.sbuf[1].isWritten(0, 1024, 400));
  EXPECT_TRUE(t.sbuf[0].isWritten(0, 1024, 400));
}

TEST(Kernels, StridedAndHbmPatternsAgree) {
  Twin t;
  // Every other column of a [128 x 8 x 64] box, into a dense tile.
  isa::AccessPattern strided = test::rowsOf(Memory::Sbuf, 128, 0, 0);
  strided.rank = 2;
  strided.sizes = {8, 32};
  strided.strides = {64, 2};
  t.fill(test::rowsOf(Memory::Sbuf, 128, 512, 0), 3);
  auto dense = test::rowsOf(Memory::Sbuf, 128, 256, 4096);
  expectAgreement(t, make(Opcode::TensorCopy, {dense, strided}));

  // Runs of different lengths on the two sides: each partition's 200
  // contiguous HBM elements into four SBUF runs of 50, 64 apart.
  isa::AccessPattern flat = test::rowsOf(Memory::Hbm, 32, 200, 65536);
  t.fill(flat, 5);
  isa::AccessPattern boxed = test::rowsOf(Memory::Sbuf, 32, 0, 8192);
  boxed.rank = 2;
  boxed.sizes = {4, 50};
  boxed.strides = {64, 1};
  expectAgreement(t, make(Opcode::DmaCopy, {boxed, flat}));

  // A DMA from HBM rows 1000 elements apart.
  isa::AccessPattern hbm = test::rowsOf(Memory::Hbm, 64, 200, 4096);
  hbm.partitionStride = 1000;
  t.fill(hbm, 4);
  expectAgreement(
      t, make(Opcode::DmaCopy, {test::rowsOf(Memory::Sbuf, 64, 200, 8192), hbm}));
}

TEST(Kernels, MatmulMatchesReferenceWithinF32Reassociation) {
  // In place into f32 PSUM (the usual case), and through a copy into a bf16
  // SBUF tile.
  for (isa::AccessPattern acc :
       {test::rowsOf(Memory::Psum, 128, 512, 0),
        test::rowsOf(Memory::Sbuf, 128, 512, 4096, DType::BF16)}) {
    for (bool accumulate : {false, true}) {
      Twin t;
      auto stat = test::rowsOf(Memory::Sbuf, 128, 128, 0, DType::BF16),
           mov = test::rowsOf(Memory::Sbuf, 128, 512, 1024, DType::BF16);
      t.fill(stat, 5);
      t.fill(mov, 6);
      t.fill(acc, 7);
      isa::Instruction inst = make(Opcode::Matmul, {acc, stat, mov});
      inst.flags = accumulate ? 1 : 0;
      sim::MachineState reference = t.state(0), fast = t.state(1);
      sim::executeReference(reference, inst);
      ASSERT_TRUE(sim::executeFast(fast, inst));
      std::vector<double> want = sim::gather(reference, acc),
                          got = sim::gather(fast, acc);
      double tolerance = acc.dtype == DType::BF16 ? 1e-2 : 1e-5;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::fabs(want[i]))) << i;
      }
    }
  }
}

TEST(Kernels, MatmulAccumulatingIntoUnwrittenPsumGivesNaN) {
  Twin t;
  sim::MachineState m = t.state(0);
  auto stat = test::rowsOf(Memory::Sbuf, 2, 2, 0), mov = test::rowsOf(Memory::Sbuf, 2, 2, 64),
       acc = test::rowsOf(Memory::Psum, 2, 2, 0);
  sim::scatter(m, stat, {1, 2, 3, 4});
  sim::scatter(m, mov, {1, 0, 0, 1});
  isa::Instruction inst = make(Opcode::Matmul, {acc, stat, mov});
  inst.flags = 1;
  sim::execute(m, inst);
  for (double v : sim::gather(m, acc)) {
    EXPECT_TRUE(std::isnan(v));
  }
  inst.flags = 0; // A fresh product: stat^T mov = [[1, 3], [2, 4]].
  sim::execute(m, inst);
  EXPECT_EQ(sim::gather(m, acc), (std::vector<double>{1, 3, 2, 4}));
}

TEST(Kernels, UnwrittenInputsFallBackToNaN) {
  Twin t;
  sim::MachineState m = t.state(0);
  auto a = test::rowsOf(Memory::Sbuf, 4, 16, 0), out = test::rowsOf(Memory::Sbuf, 4, 16, 256);
  // Only the first of a's four partitions is written.
  sim::scatter(m, test::rowsOf(Memory::Sbuf, 1, 16, 0), std::vector<double>(16, 1.0));
  isa::Instruction inst =
      make(Opcode::TensorScalar, {out, a}, static_cast<uint8_t>(AluOp::Add),
           static_cast<uint8_t>(AluOp::Bypass), 1.0, 0);
  EXPECT_FALSE(sim::executeFast(m, inst));
  sim::execute(m, inst);
  std::vector<double> result = sim::gather(m, out);
  EXPECT_EQ(result[0], 2.0);
  EXPECT_TRUE(std::isnan(result[16]));
}

TEST(Kernels, IntegerTilesUseTheReference) {
  Twin t;
  sim::MachineState m = t.state(0);
  auto src = test::rowsOf(Memory::Sbuf, 1, 4, 0, DType::I32);
  sim::scatter(m, src, {1, 2, 3, 4});
  EXPECT_FALSE(sim::executeFast(
      m, make(Opcode::TensorCopy, {test::rowsOf(Memory::Sbuf, 1, 4, 64), src})));
}

TEST(Semantics, ScatterWritesRowsWhereIndicesPointTheLaterOneWinning) {
  Twin t;
  sim::MachineState m = t.state(0);
  // A 6-row table of 2 columns, rows 0..5 holding 10 r + c.
  auto table = test::rowsOf(Memory::Hbm, 6, 2, 0);
  std::vector<double> before;
  for (int r = 0; r < 6; ++r) {
    before.insert(before.end(), {10.0 * r, 10.0 * r + 1});
  }
  sim::scatter(m, table, before);
  auto src = test::rowsOf(Memory::Sbuf, 3, 2, 0);
  auto ids = test::rowsOf(Memory::Sbuf, 3, 1, 64, DType::I32);
  sim::scatter(m, src, {-1, -2, -3, -4, -5, -6});
  sim::scatter(m, ids, {4, 1, 4});
  auto rows = table;
  rows.partitions = 3;
  rows.partitionStride = 0; // every partition starts at row 0
  isa::Instruction inst = make(Opcode::DmaScatter, {rows, src, ids});
  inst.int0 = 2; // a row's stride in elements
  inst.int1 = 6;
  ASSERT_FALSE(static_cast<bool>(sim::executeIndexed(m, inst)));
  std::vector<double> after = before;
  after[2] = -3, after[3] = -4; // row 1 from partition 1
  after[8] = -5, after[9] = -6; // row 4 from partition 2, the later one
  EXPECT_EQ(sim::gather(m, table), after);

  // An index out of range is an error, and nothing is written.
  sim::scatter(m, ids, {0, 6, 2});
  llvm::Error e = sim::executeIndexed(m, inst);
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "partition 1 writes index 6, outside [0, 6)");
  EXPECT_EQ(sim::gather(m, table), after);
}

} // namespace
