//===- Arithmetic.h - the engines' scalar arithmetic ------------*- C++ -*-===//
//
// One definition of what each ALU operation and activation function computes,
// shared by the element-at-a-time semantics and the fast kernels so that both
// give bit-identical results. Operations are carried out in f32 (or better,
// for GELU) as machine-model.md specifies; results are rounded on write.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIM_ARITHMETIC_H
#define KILN_RUNTIME_SIM_ARITHMETIC_H

#include "compiler/target/Isa.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::sim {

inline double alu(isa::AluOp op, double a, double b) {
  switch (op) {
  case isa::AluOp::Bypass:
    return a;
  case isa::AluOp::Add:
    return static_cast<float>(a) + static_cast<float>(b);
  case isa::AluOp::Sub:
    return static_cast<float>(a) - static_cast<float>(b);
  case isa::AluOp::Mul:
    return static_cast<float>(a) * static_cast<float>(b);
  case isa::AluOp::Div:
    return static_cast<float>(a) / static_cast<float>(b);
  case isa::AluOp::Max:
    return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b);
  case isa::AluOp::Min:
    return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b);
  case isa::AluOp::Eq:
    return a == b;
  case isa::AluOp::Ne:
    return a != b;
  case isa::AluOp::Lt:
    return a < b;
  case isa::AluOp::Le:
    return a <= b;
  case isa::AluOp::Gt:
    return a > b;
  case isa::AluOp::Ge:
    return a >= b;
  }
  return NAN;
}

inline double activation(isa::ActFunc f, double x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654,
                   kInvSqrt2 = 0.7071067811865476;
  float v = static_cast<float>(x);
  switch (f) {
  case isa::ActFunc::Identity:
    return v;
  case isa::ActFunc::Exp:
    return std::exp(v);
  case isa::ActFunc::Log:
    return std::log(v);
  case isa::ActFunc::Tanh:
    return std::tanh(v);
  case isa::ActFunc::Sigmoid:
    return 1.0f / (1.0f + std::exp(-v));
  case isa::ActFunc::Relu:
    return std::isnan(v) ? v : std::max(v, 0.0f);
  case isa::ActFunc::Gelu:
    return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
  case isa::ActFunc::GeluTanh:
    return 0.5 * x *
           (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  case isa::ActFunc::GeluDerivative:
    return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) +
           x * std::exp(-0.5 * x * x) * 0.3989422804014327;
  case isa::ActFunc::Rsqrt:
    return 1.0f / std::sqrt(v);
  case isa::ActFunc::Sqrt:
    return std::sqrt(v);
  case isa::ActFunc::Square:
    return v * v;
  case isa::ActFunc::Reciprocal:
    return 1.0f / v;
  case isa::ActFunc::Abs:
    return std::fabs(v);
  case isa::ActFunc::Erf:
    return std::erf(v);
  case isa::ActFunc::Sin:
    return std::sin(v);
  case isa::ActFunc::Cos:
    return std::cos(v);
  case isa::ActFunc::Sign:
    return std::isnan(v) ? v : static_cast<float>((v > 0) - (v < 0));
  case isa::ActFunc::Log1p:
    return std::log1p(v);
  case isa::ActFunc::GeluTanhDerivative: {
    double inner = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    double t = std::tanh(inner);
    double dInner = kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dInner;
  }
  }
  return NAN;
}

inline double reduceInit(isa::AluOp op) {
  switch (op) {
  case isa::AluOp::Max:
    return -std::numeric_limits<double>::infinity();
  case isa::AluOp::Min:
    return std::numeric_limits<double>::infinity();
  case isa::AluOp::Mul:
    return 1.0;
  default:
    return 0.0;
  }
}

inline double reduceStep(isa::AluOp op, double acc, double v) {
  return op == isa::AluOp::Add ? acc + v : alu(op, acc, v);
}

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_ARITHMETIC_H
