//===- EngineAssignmentTest.cpp - ScalarE runs tensor_scalar's affine forms ===//
//
// The scheduler may run a tensor_scalar on ScalarE as an identity
// activation. That is only sound where both compute the same bits, signed
// zeros, infinities, NaNs and subnormals included: this runs both forms on
// the simulator's reference semantics and compares the bytes.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"
#include "runtime/sim/Semantics.h"
#include "test/support/TestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln;
using isa::AluOp;
using isa::DType;

namespace {

constexpr int64_t kFree = 64;

isa::Instruction tensorScalar(AluOp op0, double s0, AluOp op1, double s1,
                              DType dtype = DType::F32) {
  isa::Instruction inst;
  inst.opcode = isa::Opcode::TensorScalar;
  inst.engine = isa::Engine::Vector;
  inst.operands[0] = test::rowsOf(isa::Memory::Sbuf, 1, kFree, 1024, dtype);
  inst.operands[1] = test::rowsOf(isa::Memory::Sbuf, 1, kFree, 0, dtype);
  inst.numOperands = 2;
  inst.op0 = static_cast<uint8_t>(op0);
  inst.op1 = static_cast<uint8_t>(op1);
  inst.imm0 = s0;
  inst.imm1 = s1;
  return inst;
}

/// The destination's bytes after running `inst` on the special values, by
/// the reference semantics or by the simulator's fast kernels.
std::string run(const isa::Instruction &inst, bool fast = false) {
  sim::MemoryArray hbm(1, 64), sbuf(1, 4096), psum(1, 2048);
  sim::Rounder rounder;
  sim::MachineState m{hbm, sbuf, psum, rounder};
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values{0.0,     -0.0,   1.0,   -1.0,   inf,   -inf,
                             NAN,     1e-40,  -1e-40, 3.4e38, -3.4e38,
                             0.1,     -2.5,   1e-7,  65504,  1.5};
  values.resize(kFree);
  for (int64_t i = 16; i < kFree; ++i) {
    values[i] = std::ldexp(static_cast<double>(i * 37 % 101) - 50, -(i % 9));
  }
  sim::scatter(m, inst.operands[1], values);
  if (fast) {
    sim::execute(m, inst);
  } else {
    sim::executeReference(m, inst);
  }
  int64_t bytes = kFree * isa::dtypeBytes(inst.operands[0].dtype);
  return std::string(reinterpret_cast<const char *>(
                         sbuf.data(0, inst.operands[0].offset)),
                     bytes);
}

TEST(EngineAssignment, AffineTensorScalarsRunOnScalarEBitForBit) {
  struct Form {
    AluOp op0;
    double s0;
    AluOp op1;
    double s1;
  };
  const Form forms[] = {
      {AluOp::Mul, 0.9, AluOp::Bypass, 0},   {AluOp::Mul, -3.0, AluOp::Bypass, 0},
      {AluOp::Mul, 0.0, AluOp::Bypass, 0},   {AluOp::Mul, 0.999, AluOp::Add, 1e-8},
      {AluOp::Mul, -1.0, AluOp::Add, 1.0},   {AluOp::Mul, 2.0, AluOp::Sub, 0.5},
      {AluOp::Add, 1e-8, AluOp::Bypass, 0},  {AluOp::Add, -0.0, AluOp::Bypass, 0},
      {AluOp::Sub, 0.25, AluOp::Bypass, 0},  {AluOp::Sub, 0.0, AluOp::Bypass, 0},
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Form &f : forms) {
      isa::Instruction ts = tensorScalar(f.op0, f.s0, f.op1, f.s1, dtype);
      std::optional<isa::Instruction> act = engine_passes::asActivation(ts);
      ASSERT_TRUE(act) << "op0 " << int(f.op0) << " op1 " << int(f.op1);
      EXPECT_EQ(act->opcode, isa::Opcode::Activation);
      EXPECT_EQ(act->engine, isa::Engine::Scalar);
      EXPECT_EQ(run(*act), run(ts));
      EXPECT_EQ(run(*act, /*fast=*/true), run(ts))
          << "op0 " << int(f.op0) << " " << f.s0 << ", op1 " << int(f.op1)
          << " " << f.s1 << ", dtype " << int(dtype);
    }
  }
}

TEST(EngineAssignment, OtherTensorScalarsStayOnTheVectorEngines) {
  // Division by a constant is not a product by its reciprocal; two sums
  // round twice; comparisons and integers have no activation form.
  EXPECT_FALSE(engine_passes::asActivation(
      tensorScalar(AluOp::Div, 3.0, AluOp::Bypass, 0)));
  EXPECT_FALSE(engine_passes::asActivation(
      tensorScalar(AluOp::Add, 1.0, AluOp::Add, 2.0)));
  EXPECT_FALSE(engine_passes::asActivation(
      tensorScalar(AluOp::Mul, 2.0, AluOp::Mul, 2.0)));
  EXPECT_FALSE(engine_passes::asActivation(
      tensorScalar(AluOp::Ge, 0.5, AluOp::Bypass, 0)));
  EXPECT_FALSE(engine_passes::asActivation(
      tensorScalar(AluOp::Mul, 2.0, AluOp::Bypass, 0, DType::I32)));
}

} // namespace
