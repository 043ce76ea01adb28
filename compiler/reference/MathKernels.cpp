//===- MathKernels.cpp - contractions, reductions and NN ops on the host -===//
//
// Sums accumulate in double and round once to the result dtype, so the
// reference is at least as accurate as any f32 evaluation it checks.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::reference {

namespace {

/// out[..., M, N] = lhs[..., M, K] · rhs[..., K, N] with optional transposes
/// of each operand's last two dims and NumPy broadcasting of batch dims.
HostTensor matmul(Operation *op, const HostTensor &lhs, const HostTensor &rhs,
                  bool transLhs, bool transRhs) {
  HostTensor out = emptyLike(op->getResult(0));
  size_t lr = lhs.shape.size(), orank = out.shape.size();
  int64_t m = out.shape[orank - 2], n = out.shape[orank - 1];
  int64_t k = transLhs ? lhs.shape[lr - 2] : lhs.shape[lr - 1];
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  Shape lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2);
  Shape rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  // Batch strides counted in whole matrices.
  std::array<Shape, 2> strides = {broadcastStrides(lhsBatch, batch),
                                  broadcastStrides(rhsBatch, batch)};
  std::vector<double> row(n);
  forEachStrided<2>(batch, strides, [&](int64_t b, const auto &off) {
    const double *a = lhs.data.data() + off[0] * m * k;
    const double *w = rhs.data.data() + off[1] * k * n;
    double *c = out.data.data() + b * m * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t p = 0; p < k; ++p) {
        double av = transLhs ? a[p * m + i] : a[i * k + p];
        if (transRhs) {
          for (int64_t j = 0; j < n; ++j) {
            row[j] += av * w[j * k + p];
          }
        } else {
          const double *wr = w + p * n;
          for (int64_t j = 0; j < n; ++j) {
            row[j] += av * wr[j];
          }
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        c[i * n + j] = roundTo(out.dtype, row[j]);
      }
    }
  });
  return out;
}

HostTensor linear(LinearOp op, Operands in) {
  const HostTensor &x = *in[0], &w = *in[1];
  HostTensor out = emptyLike(op.getOutput());
  int64_t features = w.shape[1], outs = w.shape[0];
  int64_t rows = x.numElements() / std::max<int64_t>(features, 1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < outs; ++o) {
      double acc = in.size() > 2 ? in[2]->data[o] : 0.0;
      for (int64_t f = 0; f < features; ++f) {
        acc += x.data[r * features + f] * w.data[o * features + f];
      }
      out.data[r * outs + o] = roundTo(out.dtype, acc);
    }
  }
  return out;
}

enum class Reduction { Sum, Mean, Max, Min };

HostTensor reduce(Operation *op, const HostTensor &in,
                  llvm::ArrayRef<int64_t> dims, Reduction kind) {
  HostTensor out = emptyLike(op->getResult(0));
  // Walk the input; each element lands in the output element whose index is
  // its own with the reduced dims zeroed (stride 0).
  Shape keptShape = kgraph::reducedShape(in.shape, dims, /*keepDim=*/true);
  Shape strides = broadcastStrides(keptShape, in.shape);
  double init =
      kind == Reduction::Max   ? -std::numeric_limits<double>::infinity()
      : kind == Reduction::Min ? std::numeric_limits<double>::infinity()
                               : 0.0;
  std::vector<double> acc(out.data.size(), init);
  forEachStrided<1>(in.shape, {strides}, [&](int64_t i, const auto &off) {
    double v = in.data[i];
    double &a = acc[off[0]];
    switch (kind) {
    case Reduction::Sum:
    case Reduction::Mean:
      a += v;
      break;
    case Reduction::Max:
      a = (std::isnan(v) || std::isnan(a)) ? NAN : std::max(a, v);
      break;
    case Reduction::Min:
      a = (std::isnan(v) || std::isnan(a)) ? NAN : std::min(a, v);
      break;
    }
  });
  double count = static_cast<double>(in.numElements()) /
                 static_cast<double>(std::max<int64_t>(out.numElements(), 1));
  for (size_t i = 0; i < acc.size(); ++i) {
    out.data[i] =
        roundTo(out.dtype, kind == Reduction::Mean ? acc[i] / count : acc[i]);
  }
  return out;
}

HostTensor argmax(ArgmaxOp op, const HostTensor &in) {
  HostTensor out = emptyLike(op.getOutput());
  Lines lines = linesAlong(in.shape, op.getDim());
  for (int64_t o = 0; o < lines.outer; ++o) {
    for (int64_t i = 0; i < lines.inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < lines.size; ++k) {
        double v = in.data[lines.at(o, k, i)];
        double b = in.data[lines.at(o, best, i)];
        // Like PyTorch: NaN counts as the maximum; ties keep the first.
        if (!std::isnan(b) && (std::isnan(v) || v > b)) {
          best = k;
        }
      }
      out.data[o * lines.inner + i] = static_cast<double>(best);
    }
  }
  return out;
}

/// Applies fn(line values read/written through `get`/`set`) to every line
/// along `dim` of the inputs, producing the op's single result.
enum class SoftmaxKind {
  Softmax,
  LogSoftmax,
  SoftmaxBackward,
  LogSoftmaxBackward
};

HostTensor softmaxFamily(Operation *op, Operands in, int64_t dim,
                         SoftmaxKind kind) {
  HostTensor out = emptyLike(op->getResult(0));
  Lines lines = linesAlong(out.shape, out.shape.empty() ? 0 : dim);
  if (out.shape.empty()) {
    lines = Lines{};
  }
  std::vector<double> tmp(lines.size);
  for (int64_t o = 0; o < lines.outer; ++o) {
    for (int64_t i = 0; i < lines.inner; ++i) {
      auto at = [&](int64_t k) { return lines.at(o, k, i); };
      if (kind == SoftmaxKind::Softmax || kind == SoftmaxKind::LogSoftmax) {
        const HostTensor &x = *in[0];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < lines.size; ++k) {
          mx = std::max(mx, x.data[at(k)]);
        }
        double sum = 0.0;
        for (int64_t k = 0; k < lines.size; ++k) {
          tmp[k] = x.data[at(k)] - mx;
          sum += std::exp(tmp[k]);
        }
        for (int64_t k = 0; k < lines.size; ++k) {
          double v = kind == SoftmaxKind::Softmax ? std::exp(tmp[k]) / sum
                                                  : tmp[k] - std::log(sum);
          out.data[at(k)] = roundTo(out.dtype, v);
        }
        continue;
      }
      const HostTensor &g = *in[0], &y = *in[1];
      double sum = 0.0;
      for (int64_t k = 0; k < lines.size; ++k) {
        sum += kind == SoftmaxKind::SoftmaxBackward
                   ? g.data[at(k)] * y.data[at(k)]
                   : g.data[at(k)];
      }
      for (int64_t k = 0; k < lines.size; ++k) {
        double gk = g.data[at(k)], yk = y.data[at(k)];
        double v = kind == SoftmaxKind::SoftmaxBackward
                       ? yk * (gk - sum)
                       : gk - std::exp(yk) * sum;
        out.data[at(k)] = roundTo(out.dtype, v);
      }
    }
  }
  return out;
}

/// Rows and row length of a layer norm over the trailing `rank` dims.
std::pair<int64_t, int64_t> normRows(const HostTensor &x, int64_t rank) {
  int64_t width = 1;
  for (size_t d = x.shape.size() - rank; d < x.shape.size(); ++d) {
    width *= x.shape[d];
  }
  return {width == 0 ? 0 : x.numElements() / width, width};
}

Results layerNorm(LayerNormOp op, Operands in) {
  const HostTensor &x = *in[0], &w = *in[1], &b = *in[2];
  HostTensor out = emptyLike(op.getOutput());
  HostTensor mean = emptyLike(op.getMean());
  HostTensor rstd = emptyLike(op.getRstd());
  auto [rows, width] = normRows(x, op.getNormalizedRank());
  double eps = op.getEpsilon().convertToDouble();
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * width;
    double mu = 0.0;
    for (int64_t j = 0; j < width; ++j) {
      mu += row[j];
    }
    mu /= static_cast<double>(width);
    double var = 0.0;
    for (int64_t j = 0; j < width; ++j) {
      var += (row[j] - mu) * (row[j] - mu);
    }
    var /= static_cast<double>(width);
    double rs = 1.0 / std::sqrt(var + eps);
    mean.data[r] = roundTo(mean.dtype, mu);
    rstd.data[r] = roundTo(rstd.dtype, rs);
    for (int64_t j = 0; j < width; ++j) {
      out.data[r * width + j] =
          roundTo(out.dtype, (row[j] - mu) * rs * w.data[j] + b.data[j]);
    }
  }
  Results results;
  results.push_back(std::move(out));
  results.push_back(std::move(mean));
  results.push_back(std::move(rstd));
  return results;
}

Results layerNormBackward(LayerNormBackwardOp op, Operands in) {
  const HostTensor &g = *in[0], &x = *in[1], &mean = *in[2], &rstd = *in[3],
                   &w = *in[4];
  HostTensor gx = emptyLike(op.getGradInput());
  HostTensor gw = emptyLike(op.getGradWeight());
  HostTensor gb = emptyLike(op.getGradBias());
  auto [rows, width] = normRows(x, op.getNormalizedRank());
  std::vector<double> accW(width, 0.0), accB(width, 0.0), xhat(width),
      dxhat(width);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = mean.data[r], rs = rstd.data[r];
    double sumD = 0.0, sumDX = 0.0;
    for (int64_t j = 0; j < width; ++j) {
      double gj = g.data[r * width + j];
      xhat[j] = (x.data[r * width + j] - mu) * rs;
      dxhat[j] = gj * w.data[j];
      sumD += dxhat[j];
      sumDX += dxhat[j] * xhat[j];
      accW[j] += gj * xhat[j];
      accB[j] += gj;
    }
    double n = static_cast<double>(width);
    for (int64_t j = 0; j < width; ++j) {
      gx.data[r * width + j] =
          roundTo(gx.dtype, rs / n * (n * dxhat[j] - sumD - xhat[j] * sumDX));
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    gw.data[j] = roundTo(gw.dtype, accW[j]);
    gb.data[j] = roundTo(gb.dtype, accB[j]);
  }
  Results results;
  results.push_back(std::move(gx));
  results.push_back(std::move(gw));
  results.push_back(std::move(gb));
  return results;
}

/// Rows, classes and the class of each row, with targets checked.
struct NllRows {
  int64_t rows = 1, classes = 0;
  std::vector<int64_t> target; // -1 where ignored
  double count = 0;
};

llvm::Expected<NllRows> nllRows(Operation *op, const HostTensor &input,
                                const HostTensor &target, int64_t ignoreIndex) {
  NllRows nll;
  nll.classes = input.shape.back();
  nll.rows = input.shape.size() == 2 ? input.shape[0] : 1;
  for (int64_t r = 0; r < nll.rows; ++r) {
    auto t = static_cast<int64_t>(target.data[r]);
    if (t == ignoreIndex) {
      nll.target.push_back(-1);
      continue;
    }
    if (t < 0 || t >= nll.classes) {
      return kernelError(op, "target " + llvm::Twine(t) + " of row " +
                                 llvm::Twine(r) + " is out of range [0, " +
                                 llvm::Twine(nll.classes) + ")");
    }
    nll.target.push_back(t);
    nll.count += 1;
  }
  return nll;
}

llvm::Expected<Results> nllLoss(NllLossOp op, Operands in) {
  auto nll = nllRows(op, *in[0], *in[1], op.getIgnoreIndex());
  if (!nll) {
    return nll.takeError();
  }
  HostTensor loss = emptyLike(op.getLoss());
  HostTensor total = emptyLike(op.getTotalWeight());
  double sum = 0.0;
  for (int64_t r = 0; r < nll->rows; ++r) {
    int64_t t = nll->target[r];
    double l = t < 0 ? 0.0 : -in[0]->data[r * nll->classes + t];
    if (op.getReduction() == "none") {
      loss.data[r] = roundTo(loss.dtype, l);
    }
    sum += l;
  }
  if (op.getReduction() == "sum") {
    loss.data[0] = roundTo(loss.dtype, sum);
  } else if (op.getReduction() == "mean") {
    // 0/0 is NaN when every target is ignored, as in PyTorch.
    loss.data[0] = roundTo(loss.dtype, sum / nll->count);
  }
  total.data[0] = roundTo(total.dtype, nll->count);
  Results results;
  results.push_back(std::move(loss));
  results.push_back(std::move(total));
  return results;
}

llvm::Expected<Results> nllLossBackward(NllLossBackwardOp op, Operands in) {
  const HostTensor &g = *in[0];
  auto nll = nllRows(op, *in[1], *in[2], op.getIgnoreIndex());
  if (!nll) {
    return nll.takeError();
  }
  HostTensor grad = emptyLike(op.getGradInput());
  double totalWeight = in[3]->data[0];
  for (int64_t r = 0; r < nll->rows; ++r) {
    int64_t t = nll->target[r];
    if (t < 0) {
      continue;
    }
    double v = op.getReduction() == "none"  ? -g.data[r]
               : op.getReduction() == "sum" ? -g.data[0]
                                            : -g.data[0] / totalWeight;
    grad.data[r * nll->classes + t] = roundTo(grad.dtype, v);
  }
  return Results{std::move(grad)};
}

} // namespace

KernelResult evaluateMathOp(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](MatmulOp mm) {
        return R(Results{matmul(op, *in[0], *in[1], mm.getTransposeLhs(),
                                mm.getTransposeRhs())});
      })
      .Case([&](LinearOp l) { return R(Results{linear(l, in)}); })
      .Case([&](ReduceSumOp r) {
        return R(Results{reduce(op, *in[0], r.getDims(), Reduction::Sum)});
      })
      .Case([&](ReduceMeanOp r) {
        return R(Results{reduce(op, *in[0], r.getDims(), Reduction::Mean)});
      })
      .Case([&](ReduceMaxOp r) {
        return R(Results{reduce(op, *in[0], r.getDims(), Reduction::Max)});
      })
      .Case([&](ReduceMinOp r) {
        return R(Results{reduce(op, *in[0], r.getDims(), Reduction::Min)});
      })
      .Case([&](ArgmaxOp a) { return R(Results{argmax(a, *in[0])}); })
      .Case([&](SoftmaxOp s) {
        return R(
            Results{softmaxFamily(op, in, s.getDim(), SoftmaxKind::Softmax)});
      })
      .Case([&](LogSoftmaxOp s) {
        return R(Results{
            softmaxFamily(op, in, s.getDim(), SoftmaxKind::LogSoftmax)});
      })
      .Case([&](SoftmaxBackwardOp s) {
        return R(Results{
            softmaxFamily(op, in, s.getDim(), SoftmaxKind::SoftmaxBackward)});
      })
      .Case([&](LogSoftmaxBackwardOp s) {
        return R(Results{softmaxFamily(op, in, s.getDim(),
                                       SoftmaxKind::LogSoftmaxBackward)});
      })
      .Case([&](LayerNormOp l) { return R(layerNorm(l, in)); })
      .Case([&](LayerNormBackwardOp l) { return R(layerNormBackward(l, in)); })
      .Case([&](NllLossOp l) { return R(nllLoss(l, in)); })
      .Case([&](NllLossBackwardOp l) { return R(nllLossBackward(l, in)); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace kiln::reference
