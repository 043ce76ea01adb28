//===- WindowKernels.cpp - convolution, batch norm and pooling on the host ===//
//
// Direct loops over every output position and tap, in double, rounded once
// to the result dtype. A 1-d op runs as a 2-d one of height 1. Max pooling
// picks the first maximum of a window in row-major tap order, as PyTorch's
// indices do; padding never wins and never counts for max pooling.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"

#include "dialects/kgraph/KGraphWindow.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::reference {

namespace {

/// A channels-first shape as [N, C, H, W] (a 1-d one with H = 1).
struct Planes {
  int64_t n, c, h, w;
  explicit Planes(llvm::ArrayRef<int64_t> shape)
      : n(shape[0]), c(shape[1]), h(shape.size() == 4 ? shape[2] : 1),
        w(shape.back()) {}
  int64_t at(int64_t b, int64_t ch, int64_t y, int64_t x) const {
    return ((b * c + ch) * h + y) * w + x;
  }
};

/// Visits every (output row, output column, tap row, tap column, input
/// row, input column) whose input position lies inside the input.
template <typename Fn>
void forEachTap(const Planes &in, const Planes &out, const Window &win,
                Fn &&fn) {
  for (int64_t oy = 0; oy < out.h; ++oy) {
    for (int64_t ox = 0; ox < out.w; ++ox) {
      for (int64_t ry = 0; ry < win.kernel[0]; ++ry) {
        int64_t iy = win.inputIndex(0, oy, ry);
        if (iy < 0 || iy >= in.h) {
          continue;
        }
        for (int64_t rx = 0; rx < win.kernel[1]; ++rx) {
          int64_t ix = win.inputIndex(1, ox, rx);
          if (ix >= 0 && ix < in.w) {
            fn(oy, ox, ry, rx, iy, ix);
          }
        }
      }
    }
  }
}

void roundAll(HostTensor &t, const std::vector<double> &acc) {
  for (size_t i = 0; i < acc.size(); ++i) {
    t.data[i] = roundTo(t.dtype, acc[i]);
  }
}

/// The convolution family: output `y` [N, K, O...] against input `x`
/// [N, C, S...] and weight `w` [K, C / groups, R...]. `visit` gets the
/// linear indices of one (output, input, weight) triple that the forward
/// multiplies together.
template <typename Fn>
void forEachProduct(const Planes &x, const Planes &y, const Planes &w,
                    const Window &win, int64_t groups, Fn &&visit) {
  int64_t perGroupIn = x.c / groups, perGroupOut = y.c / groups;
  for (int64_t b = 0; b < x.n; ++b) {
    for (int64_t k = 0; k < y.c; ++k) {
      int64_t firstChannel = (k / perGroupOut) * perGroupIn;
      for (int64_t cg = 0; cg < perGroupIn; ++cg) {
        forEachTap(x, y, win,
                   [&](int64_t oy, int64_t ox, int64_t ry, int64_t rx,
                       int64_t iy, int64_t ix) {
                     visit(y.at(b, k, oy, ox),
                           x.at(b, firstChannel + cg, iy, ix),
                           w.at(k, cg, ry, rx));
                   });
      }
    }
  }
}

Results conv(ConvOp op, Operands in) {
  const HostTensor &x = *in[0], &w = *in[1];
  HostTensor y = emptyLike(op.getOutput());
  Planes yp(y.shape);
  std::vector<double> acc(y.data.size(), 0.0);
  if (in.size() > 2) {
    for (size_t i = 0; i < acc.size(); ++i) {
      acc[i] = in[2]->data[(i / (yp.h * yp.w)) % yp.c];
    }
  }
  forEachProduct(Planes(x.shape), yp, Planes(w.shape),
                 windowOf(op).twoDimensional(), op.getGroups(),
                 [&](int64_t yi, int64_t xi, int64_t wi) {
                   acc[yi] += x.data[xi] * w.data[wi];
                 });
  roundAll(y, acc);
  return {std::move(y)};
}

Results convInputGrad(ConvInputGradOp op, Operands in) {
  const HostTensor &g = *in[0], &w = *in[1];
  HostTensor gx = emptyLike(op.getGradInput());
  std::vector<double> acc(gx.data.size(), 0.0);
  forEachProduct(Planes(gx.shape), Planes(g.shape), Planes(w.shape),
                 windowOf(op).twoDimensional(), op.getGroups(),
                 [&](int64_t yi, int64_t xi, int64_t wi) {
                   acc[xi] += g.data[yi] * w.data[wi];
                 });
  roundAll(gx, acc);
  return {std::move(gx)};
}

Results convWeightGrad(ConvWeightGradOp op, Operands in) {
  const HostTensor &g = *in[0], &x = *in[1];
  HostTensor gw = emptyLike(op.getGradWeight());
  std::vector<double> acc(gw.data.size(), 0.0);
  forEachProduct(Planes(x.shape), Planes(g.shape), Planes(gw.shape),
                 windowOf(op).twoDimensional(), op.getGroups(),
                 [&](int64_t yi, int64_t xi, int64_t wi) {
                   acc[wi] += g.data[yi] * x.data[xi];
                 });
  roundAll(gw, acc);
  return {std::move(gw)};
}

/// Per channel, the sum of `f(i)` over the linear indices i of the
/// channel's elements of a tensor shaped `p`.
template <typename Fn>
std::vector<double> perChannelSums(const Planes &p, Fn &&f) {
  std::vector<double> sums(p.c, 0.0);
  int64_t plane = p.h * p.w;
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t ch = 0; ch < p.c; ++ch) {
      for (int64_t i = 0; i < plane; ++i) {
        sums[ch] += f((b * p.c + ch) * plane + i);
      }
    }
  }
  return sums;
}

int64_t channelOf(const Planes &p, int64_t i) {
  return (i / (p.h * p.w)) % p.c;
}

Results batchNorm(BatchNormOp op, Operands in) {
  const HostTensor &x = *in[0], &weight = *in[1], &bias = *in[2],
                   &runMean = *in[3], &runVar = *in[4];
  Planes p(x.shape);
  double count = static_cast<double>(p.n * p.h * p.w);
  double eps = op.getEpsilon().convertToDouble();
  double momentum = op.getMomentum().convertToDouble();
  std::vector<double> mean(runMean.data), var(runVar.data);
  if (op.getTraining()) {
    mean = perChannelSums(p, [&](int64_t i) { return x.data[i]; });
    for (double &m : mean) {
      m /= count;
    }
    var = perChannelSums(p, [&](int64_t i) {
      double d = x.data[i] - mean[channelOf(p, i)];
      return d * d;
    });
    for (double &v : var) {
      v /= count;
    }
  }
  Results r;
  for (Value result : op->getResults()) {
    r.push_back(emptyLike(result));
  }
  for (size_t i = 0; i < x.data.size(); ++i) {
    int64_t ch = channelOf(p, static_cast<int64_t>(i));
    double rs = 1.0 / std::sqrt(var[ch] + eps);
    r[0].data[i] = roundTo(r[0].dtype, (x.data[i] - mean[ch]) * rs *
                                           weight.data[ch] +
                                       bias.data[ch]);
  }
  for (int64_t ch = 0; ch < p.c; ++ch) {
    r[1].data[ch] = roundTo(r[1].dtype, mean[ch]);
    r[2].data[ch] = roundTo(r[2].dtype, 1.0 / std::sqrt(var[ch] + eps));
    double nextMean = runMean.data[ch], nextVar = runVar.data[ch];
    if (op.getTraining()) {
      double unbiased = var[ch] * count / (count - 1.0);
      nextMean = (1.0 - momentum) * nextMean + momentum * mean[ch];
      nextVar = (1.0 - momentum) * nextVar + momentum * unbiased;
    }
    r[3].data[ch] = roundTo(r[3].dtype, nextMean);
    r[4].data[ch] = roundTo(r[4].dtype, nextVar);
  }
  return r;
}

Results batchNormBackward(BatchNormBackwardOp op, Operands in) {
  const HostTensor &g = *in[0], &x = *in[1], &mean = *in[2], &rstd = *in[3],
                   &weight = *in[4];
  Planes p(x.shape);
  double count = static_cast<double>(p.n * p.h * p.w);
  auto xhat = [&](int64_t i) {
    int64_t ch = channelOf(p, i);
    return (x.data[i] - mean.data[ch]) * rstd.data[ch];
  };
  std::vector<double> sumG =
      perChannelSums(p, [&](int64_t i) { return g.data[i]; });
  std::vector<double> sumGX =
      perChannelSums(p, [&](int64_t i) { return g.data[i] * xhat(i); });
  Results r;
  for (Value result : op->getResults()) {
    r.push_back(emptyLike(result));
  }
  for (size_t i = 0; i < x.data.size(); ++i) {
    int64_t ch = channelOf(p, static_cast<int64_t>(i));
    double scale = weight.data[ch] * rstd.data[ch];
    double gi = g.data[i];
    if (op.getTraining()) {
      gi -= (sumG[ch] + xhat(static_cast<int64_t>(i)) * sumGX[ch]) / count;
    }
    r[0].data[i] = roundTo(r[0].dtype, gi * scale);
  }
  for (int64_t ch = 0; ch < p.c; ++ch) {
    r[1].data[ch] = roundTo(r[1].dtype, sumGX[ch]);
    r[2].data[ch] = roundTo(r[2].dtype, sumG[ch]);
  }
  return r;
}

/// Per output element of max pooling, the linear input index it takes.
std::vector<int64_t> maxPoolChoices(const HostTensor &x, const Planes &out,
                                    const Window &window) {
  Planes xp(x.shape);
  Window win = window.twoDimensional();
  std::vector<int64_t> choice(out.n * out.c * out.h * out.w, -1);
  for (int64_t b = 0; b < out.n; ++b) {
    for (int64_t ch = 0; ch < out.c; ++ch) {
      forEachTap(xp, out, win,
                 [&](int64_t oy, int64_t ox, int64_t, int64_t, int64_t iy,
                     int64_t ix) {
                   int64_t &best = choice[out.at(b, ch, oy, ox)];
                   int64_t candidate = xp.at(b, ch, iy, ix);
                   double v = x.data[candidate];
                   if (best < 0 || v > x.data[best] ||
                       (std::isnan(v) && !std::isnan(x.data[best]))) {
                     best = candidate;
                   }
                 });
    }
  }
  return choice;
}

Results maxPool(MaxPoolOp op, Operands in) {
  HostTensor y = emptyLike(op.getOutput());
  std::vector<int64_t> choice =
      maxPoolChoices(*in[0], Planes(y.shape), windowOf(op));
  for (size_t i = 0; i < choice.size(); ++i) {
    y.data[i] = in[0]->data[choice[i]];
  }
  return {std::move(y)};
}

Results maxPoolBackward(MaxPoolBackwardOp op, Operands in) {
  const HostTensor &g = *in[0];
  HostTensor gx = emptyLike(op.getGradInput());
  std::vector<int64_t> choice =
      maxPoolChoices(*in[1], Planes(g.shape), windowOf(op));
  std::vector<double> acc(gx.data.size(), 0.0);
  for (size_t i = 0; i < choice.size(); ++i) {
    acc[choice[i]] += g.data[i];
  }
  roundAll(gx, acc);
  return {std::move(gx)};
}

/// Average pooling's forward (`backward` false: sums input into output)
/// or backward (spreads output gradient over input), one loop for both so
/// that the two divide alike.
template <typename PoolOp>
std::vector<double> avgPool(PoolOp op, const HostTensor &from,
                            const Planes &x, const Planes &y, bool backward) {
  Window window = windowOf(op);
  Window win = window.twoDimensional();
  llvm::SmallVector<int64_t, 2> spatial(
      llvm::cast<RankedTensorType>(backward ? op->getResult(0).getType()
                                            : op->getOperand(0).getType())
          .getShape()
          .drop_front(2));
  std::vector<double> acc(backward ? x.n * x.c * x.h * x.w
                                   : y.n * y.c * y.h * y.w,
                          0.0);
  for (int64_t b = 0; b < y.n; ++b) {
    for (int64_t ch = 0; ch < y.c; ++ch) {
      forEachTap(x, y, win,
                 [&](int64_t oy, int64_t ox, int64_t, int64_t, int64_t iy,
                     int64_t ix) {
                   llvm::SmallVector<int64_t, 2> at = {oy, ox};
                   double divisor = static_cast<double>(avgPoolDivisor(
                       window, spatial,
                       llvm::ArrayRef(at).take_back(window.spatialRank()),
                       op.getCountIncludePad(), op.getDivisor()));
                   int64_t yi = y.at(b, ch, oy, ox), xi = x.at(b, ch, iy, ix);
                   if (backward) {
                     acc[xi] += from.data[yi] / divisor;
                   } else {
                     acc[yi] += from.data[xi] / divisor;
                   }
                 });
    }
  }
  return acc;
}

} // namespace

KernelResult evaluateWindowOp(Operation *op, Operands in) {
  auto R = [](Results r) -> KernelResult { return std::move(r); };
  return llvm::TypeSwitch<Operation *, KernelResult>(op)
      .Case([&](ConvOp c) { return R(conv(c, in)); })
      .Case([&](ConvInputGradOp c) { return R(convInputGrad(c, in)); })
      .Case([&](ConvWeightGradOp c) { return R(convWeightGrad(c, in)); })
      .Case([&](BatchNormOp b) { return R(batchNorm(b, in)); })
      .Case([&](BatchNormBackwardOp b) { return R(batchNormBackward(b, in)); })
      .Case([&](MaxPoolOp m) { return R(maxPool(m, in)); })
      .Case([&](MaxPoolBackwardOp m) { return R(maxPoolBackward(m, in)); })
      .Case([&](AvgPoolOp a) {
        HostTensor y = emptyLike(a.getOutput());
        roundAll(y, avgPool(a, *in[0], Planes(in[0]->shape), Planes(y.shape),
                            /*backward=*/false));
        return R({std::move(y)});
      })
      .Case([&](AvgPoolBackwardOp a) {
        HostTensor gx = emptyLike(a.getGradInput());
        roundAll(gx, avgPool(a, *in[0], Planes(gx.shape),
                             Planes(in[0]->shape), /*backward=*/true));
        return R({std::move(gx)});
      })
      .Default([](Operation *) -> KernelResult { return std::nullopt; });
}

} // namespace kiln::reference
