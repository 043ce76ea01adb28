//===- RandomGraphs.cpp - seeded random kgraph programs -------------------===//

#include "test/compiler/driver/RandomGraphs.h"

#include "compiler/builder/GraphBuilder.h"

#include <optional>
#include <random>

namespace kiln::testing {

llvm::Expected<proto::Graph> randomGraph(mlir::MLIRContext &context,
                                         uint64_t seed, bool gradients) {
  std::mt19937_64 rng(seed * 7919 + 17);
  auto pick = [&](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  static const int64_t sizes[] = {1, 2, 5, 31, 64, 127, 128, 129, 200, 1000};
  auto size = [&]() {
    int64_t s = sizes[pick(10)];
    return s;
  };
  GraphBuilder b(context, "random");
  int inputs = 0;
  auto input = [&](llvm::ArrayRef<int64_t> shape) {
    return b.input("in" + std::to_string(inputs++), proto::F32, shape,
                   proto::BATCH_INPUT);
  };
  int64_t rows = size(), cols = size();
  // Keep the whole graph small enough to simulate quickly.
  while (rows * cols > 40000) {
    cols = std::max<int64_t>(1, cols / 4);
  }
  std::vector<Tensor> pool{input({rows, cols})};
  // The reductions before their broadcast, which `gradients` may mark too:
  // a bias's gradient is a sum over rows, which layout assignment turns
  // into a product with ones.
  std::vector<Tensor> reduced;
  std::optional<Tensor> rngSeed;
  int64_t streams = 0;
  int steps = 4 + pick(9);
  for (int s = 0; s < steps; ++s) {
    Tensor x = pool[pick(static_cast<int>(pool.size()))];
    auto shape = GraphBuilder::shapeOf(x);
    int64_t r = shape[0], c = shape[1];
    Tensor y;
    switch (pick(12)) {
    case 0: { // bounded unary
      switch (pick(8)) {
      case 0: y = b.tanh(x); break;
      case 1: y = b.sigmoid(x); break;
      case 2: y = b.relu(x); break;
      case 3: y = b.gelu(x); break;
      case 4: y = b.sin(x); break;
      // Scaled squares, both orders (one ScalarE square each).
      case 5: y = b.mul(b.mul(x, b.scalar(0.5)), x); break;
      case 6: y = b.mul(b.mul(x, x), b.scalar(0.75)); break;
      default: y = b.abs(x); break;
      }
      break;
    }
    case 1: // same-shape binary
      y = b.add(x, input({r, c}));
      break;
    case 2: // row broadcast
      y = b.mul(x, input({c}));
      break;
    case 3: // column broadcast
      y = b.sub(x, input({r, 1}));
      break;
    case 4: // a safe division
      y = b.div(x, b.add(b.abs(input({r, c})), b.scalar(1.0)));
      break;
    case 5: // reduction over the columns, kept
      y = pick(2) ? b.reduceSum(x, {1}, true) : b.reduceMax(x, {1}, true);
      reduced.push_back(y);
      y = b.broadcast(y, {r, c});
      break;
    case 6: // reduction over the rows
      y = b.reduceMean(x, {0}, true);
      reduced.push_back(y);
      y = b.broadcast(y, {r, c});
      break;
    case 7: { // matmul with a fresh weight; outputs stay at most 1000 wide
      int64_t n = sizes[pick(9)];
      Tensor w = b.mul(input({c, n}), b.scalar(0.1));
      y = b.matmul(x, w);
      break;
    }
    case 8:
      y = b.transpose(x, {1, 0});
      break;
    case 9:
      y = b.softmax(x, 1);
      break;
    case 10: {
      // Rows with spread: a row of equal values (a broadcast reduction)
      // would normalise its rounding noise, which no two orders of
      // summation agree on (seed 23601 did).
      auto ln = b.layerNorm(b.add(x, input({r, c})), input({c}), input({c}), 1);
      y = ln.output;
      break;
    }
    default:
      if (pick(2)) {
        y = b.max(x, b.tanh(input({r, c})));
        break;
      }
      // Dropout, on a stream of its own under the graph's one seed.
      if (!rngSeed) {
        rngSeed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
      }
      y = b.dropout(x, *rngSeed, 0.125 * (1 + pick(6)), streams++).output;
      break;
    }
    // Keep magnitudes near 1 so that long chains stay well conditioned.
    y = b.tanh(y);
    pool.push_back(y);
  }
  b.output("out", pool.back(), proto::METRIC);
  if (pool.size() > 2) {
    b.output("mid", pool[1 + pick(static_cast<int>(pool.size()) - 2)],
             proto::METRIC);
  }
  if (gradients) {
    // One to five parameters, each updated by p - g / 2 with a value of
    // the graph as its gradient g, a reduction half the time there is one;
    // a value may be the gradient of several.
    int parameters = 1 + pick(5);
    for (int k = 0; k < parameters; ++k) {
      Tensor g = !reduced.empty() && pick(2)
                     ? reduced[pick(static_cast<int>(reduced.size()))]
                     : pool[1 + pick(static_cast<int>(pool.size()) - 1)];
      std::string name = "p" + std::to_string(k);
      Tensor p = b.input(name, proto::F32, GraphBuilder::shapeOf(g),
                         proto::PARAMETER);
      Tensor step = b.mul(b.gradient(g, name), b.scalar(0.5));
      b.output(name, b.sub(p, step), proto::UPDATED_PARAMETER, p);
    }
  }
  return b.finishGraph();
}

} // namespace kiln::testing
