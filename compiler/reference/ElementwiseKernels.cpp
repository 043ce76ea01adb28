//===- ElementwiseKernels.cpp - elementwise kgraph ops on the host -------===//
//
// Float ops compute in f32, as PyTorch's CPU kernels do, then round to the
// result dtype; integer ops compute exactly and wrap.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "compiler/target/Random.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::reference {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <typename Fn>
Results unary(Operation *op, const HostTensor &x, Fn fn) {
  HostTensor out = emptyLike(op->getResult(0));
  for (int64_t i = 0; i < x.numElements(); ++i) {
    out.data[i] = roundTo(out.dtype, fn(x.data[i]));
  }
  return {std::move(out)};
}

/// f(float) for float dtypes: the value is computed in f32 before rounding.
template <typename Fn>
Results unaryF32(Operation *op, const HostTensor &x, Fn fn) {
  return unary(op, x, [&](double v) {
    return static_cast<double>(fn(static_cast<float>(v)));
  });
}

template <typename Fn> Results broadcastN(Operation *op, Operands in, Fn fn) {
  HostTensor out = emptyLike(op->getResult(0));
  std::array<Shape, 3> strides;
  for (size_t n = 0; n < in.size(); ++n) {
    strides[n] = broadcastStrides(in[n]->shape, out.shape);
  }
  for (size_t n = in.size(); n < 3; ++n) {
    strides[n] = Shape(out.shape.size(), 0);
  }
  auto value = [&](size_t n, int64_t offset) {
    return n < in.size() ? in[n]->data[offset] : 0.0;
  };
  forEachStrided<3>(out.shape, strides, [&](int64_t i, const auto &off) {
    out.data[i] = roundTo(
        out.dtype, fn(value(0, off[0]), value(1, off[1]), value(2, off[2])));
  });
  return {std::move(out)};
}

/// A binary op computed in f32 for floats and exactly for integers.
template <typename Fn> Results binary(Operation *op, Operands in, Fn fn) {
  bool floating = isFloat(in[0]->dtype);
  return broadcastN(op, in, [&](double a, double b, double) {
    if (floating) {
      return static_cast<double>(
          static_cast<float>(fn(static_cast<float>(a), static_cast<float>(b))));
    }
    return static_cast<double>(fn(a, b));
  });
}

double geluForward(double x, bool tanhForm) {
  if (tanhForm) {
    double inner = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(inner));
  }
  return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
}

double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    double inner = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    double t = std::tanh(inner);
    double dInner = kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dInner;
  }
  double cdf = 0.5 * (1.0 + std::erf(x * kInvSqrt2));
  double pdf = std::exp(-0.5 * x * x) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

double compare(llvm::StringRef direction, double a, double b) {
  if (direction == "eq") {
    return a == b;
  }
  if (direction == "ne") {
    return a != b;
  }
  if (direction == "lt") {
    return a < b;
  }
  if (direction == "le") {
    return a <= b;
  }
  if (direction == "gt") {
    return a > b;
  }
  return a >= b;
}

template <typename T> T nanMax(T a, T b) {
  return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b);
}
template <typename T> T nanMin(T a, T b) {
  return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b);
}

llvm::Expected<Results> dropout(DropoutOp op, Operands in) {
  HostTensor out = emptyLike(op.getOutput());
  HostTensor mask = emptyLike(op.getMask());
  auto seed = static_cast<uint64_t>(static_cast<int64_t>(in[1]->data[0]));
  double p = op.getP().convertToDouble();
  float scale = 1.0f / (1.0f - static_cast<float>(p));
  DropoutStream stream(seed, static_cast<uint64_t>(op.getStream()));
  for (int64_t i = 0; i < out.numElements(); ++i) {
    bool keep = stream.uniform(static_cast<uint64_t>(i)) >= p;
    mask.data[i] = keep;
    out.data[i] =
        keep ? roundTo(out.dtype, static_cast<float>(in[0]->data[i]) * scale)
             : 0.0;
  }
  Results results;
  results.push_back(std::move(out));
  results.push_back(std::move(mask));
  return results;
}

Results iota(IotaOp op) {
  HostTensor out = emptyLike(op.getOutput());
  Lines lines = linesAlong(out.shape, op.getDim());
  for (int64_t o = 0; o < lines.outer; ++o) {
    for (int64_t k = 0; k < lines.size; ++k) {
      for (int64_t i = 0; i < lines.inner; ++i) {
        out.data[lines.at(o, k, i)] =
            roundTo(out.dtype, static_cast<double>(k));
      }
    }
  }
  return Results{std::move(out)};
}

// Each family below answers std::nullopt for an op outside it, so that
// evaluateElementwise can ask them in turn.

/// Ops of one operand, value by value.
KernelResult evaluateUnary(Operation *op, Operands in) {
  using R = KernelResult;
  const HostTensor &x = *in[0];
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](NegOp) { return unary(op, x, [](double v) { return -v; }); })
      .Case([&](AbsOp) {
        return unary(op, x, [](double v) { return std::fabs(v); });
      })
      .Case([&](SignOp) {
        return unary(op, x, [](double v) {
          return std::isnan(v) ? v : static_cast<double>((v > 0) - (v < 0));
        });
      })
      .Case([&](ExpOp) {
        return unaryF32(op, x, [](float v) { return std::exp(v); });
      })
      .Case([&](LogOp) {
        return unaryF32(op, x, [](float v) { return std::log(v); });
      })
      .Case([&](Log1pOp) {
        return unaryF32(op, x, [](float v) { return std::log1p(v); });
      })
      .Case([&](SqrtOp) {
        return unaryF32(op, x, [](float v) { return std::sqrt(v); });
      })
      .Case([&](RsqrtOp) {
        return unaryF32(op, x, [](float v) { return 1.0f / std::sqrt(v); });
      })
      .Case([&](ReciprocalOp) {
        return unaryF32(op, x, [](float v) { return 1.0f / v; });
      })
      .Case([&](TanhOp) {
        return unaryF32(op, x, [](float v) { return std::tanh(v); });
      })
      .Case([&](SigmoidOp) {
        return unaryF32(op, x,
                        [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
      })
      .Case([&](ReluOp) {
        return unary(op, x, [](double v) {
          return std::isnan(v) ? v : std::max(v, 0.0);
        });
      })
      .Case([&](ErfOp) {
        return unaryF32(op, x, [](float v) { return std::erf(v); });
      })
      .Case([&](SinOp) {
        return unaryF32(op, x, [](float v) { return std::sin(v); });
      })
      .Case([&](CosOp) {
        return unaryF32(op, x, [](float v) { return std::cos(v); });
      })
      .Case([&](NotOp) {
        return unary(op, x, [](double v) { return v == 0.0 ? 1.0 : 0.0; });
      })
      .Case([&](GeluOp gelu) {
        bool tanhForm = gelu.getApproximate() == "tanh";
        return unary(op, x, [&](double v) {
          return static_cast<double>(
              static_cast<float>(geluForward(v, tanhForm)));
        });
      })
      .Case([&](CastOp) { return unary(op, x, [](double v) { return v; }); })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ops of two or three operands broadcast against each other.
KernelResult evaluateBinary(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](AddOp) {
        return binary(op, in, [](auto a, auto b) { return a + b; });
      })
      .Case([&](SubOp) {
        return binary(op, in, [](auto a, auto b) { return a - b; });
      })
      .Case([&](MulOp) {
        return binary(op, in, [](auto a, auto b) { return a * b; });
      })
      .Case([&](DivOp) -> R {
        if (!isFloat(in[0]->dtype)) {
          for (double d : in[1]->data) {
            if (d == 0.0) {
              return R(kernelError(op, "integer division by zero"));
            }
          }
          return binary(op, in,
                        [](auto a, auto b) { return std::trunc(a / b); });
        }
        return binary(op, in, [](auto a, auto b) { return a / b; });
      })
      .Case([&](PowOp) {
        return binary(op, in, [](auto a, auto b) { return std::pow(a, b); });
      })
      .Case([&](MaxOp) {
        return binary(op, in, [](auto a, auto b) { return nanMax(a, b); });
      })
      .Case([&](MinOp) {
        return binary(op, in, [](auto a, auto b) { return nanMin(a, b); });
      })
      .Case([&](AndOp) {
        return binary(op, in,
                      [](auto a, auto b) { return double(a != 0 && b != 0); });
      })
      .Case([&](OrOp) {
        return binary(op, in,
                      [](auto a, auto b) { return double(a != 0 || b != 0); });
      })
      .Case([&](CompareOp cmp) {
        llvm::StringRef direction = cmp.getDirection();
        return broadcastN(op, in, [&](double a, double b, double) {
          return compare(direction, a, b);
        });
      })
      .Case([&](SelectOp) {
        return broadcastN(op, in, [](double c, double t, double f) {
          return c != 0.0 ? t : f;
        });
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The gradients of activations: the incoming gradient times the derivative
/// at the forward input or output.
KernelResult evaluateBackward(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](GeluBackwardOp gelu) {
        bool tanhForm = gelu.getApproximate() == "tanh";
        return broadcastN(op, in, [&](double g, double x, double) {
          return static_cast<double>(
              static_cast<float>(g * geluDerivative(x, tanhForm)));
        });
      })
      .Case([&](TanhBackwardOp) {
        return binary(op, in, [](auto g, auto y) { return g * (1 - y * y); });
      })
      .Case([&](SigmoidBackwardOp) {
        return binary(op, in, [](auto g, auto y) { return g * y * (1 - y); });
      })
      .Case([&](ReluBackwardOp relu) {
        double threshold = relu.getThreshold().convertToDouble();
        return broadcastN(op, in, [&](double g, double x, double) {
          return x > threshold ? g : 0.0;
        });
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ops whose values come from their position or a random stream rather than
/// from an operand's values alone.
KernelResult evaluateGenerated(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](DropoutOp dropOp) { return R(dropout(dropOp, in)); })
      .Case([&](IotaOp iotaOp) { return R(iota(iotaOp)); })
      .Default([](Operation *) { return std::nullopt; });
}

/// Data-parallel ops and markers. A single-process reference run is a
/// group of one; where a step recomputes values is no part of what it
/// computes.
KernelResult evaluateGroupOp(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](CheckpointOp) { return R(Results{*in[0]}); })
      .Case([&](GradientOp) {
        // Averaging a gradient over a group of one is the identity.
        return R(Results{*in[0]});
      })
      .Case([&](AllReduceOp) {
        // Sum and mean over one worker are the identity.
        return R(Results{*in[0]});
      })
      .Case([&](AllGatherOp gather) {
        // A worker alone finds its own operand in every slot.
        HostTensor out = emptyLike(gather.getOutput());
        const std::vector<double> &mine = in[0]->data;
        for (size_t i = 0; i < out.data.size(); ++i) {
          out.data[i] = mine[i % mine.size()];
        }
        return R(Results{std::move(out)});
      })
      .Case<ReduceScatterOp, WorkerShardOp>([&](Operation *shard) {
        // Alone, a worker is rank 0 and its reduction is its own operand.
        HostTensor out = emptyLike(shard->getResult(0));
        const std::vector<double> &mine = in[0]->data;
        std::copy(mine.begin(), mine.begin() + out.data.size(),
                  out.data.begin());
        return R(Results{std::move(out)});
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace

KernelResult evaluateElementwise(Operation *op, Operands in) {
  for (auto family : {evaluateUnary, evaluateBinary, evaluateBackward,
                      evaluateGenerated, evaluateGroupOp}) {
    if (KernelResult result = family(op, in)) {
      return result;
    }
  }
  return std::nullopt;
}

} // namespace kiln::reference
