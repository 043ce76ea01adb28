//===- WindowOpsTest.cpp - convolutions, batch norm and pooling compiled --===//
//
// Each op compiled, run on the simulator with the hazard checker on, and
// compared with the reference interpreter, over the window shapes CNNs use
// and the edges (padding, ceil mode, dilation, groups, odd sizes).
//
//===----------------------------------------------------------------------===//

#include "test/compiler/driver/Differential.h"

#include "compiler/builder/GraphBuilder.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>

using namespace kiln;
using namespace kiln::testing;

namespace {

using Build = std::function<void(GraphBuilder &)>;

void expectMatches(const Build &build, DiffOptions options = {}) {
  mlir::MLIRContext context;
  GraphBuilder b(context, "step");
  build(b);
  auto graph = b.finishGraph();
  ASSERT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  auto report = compileAndCompare(*graph, options);
  ASSERT_TRUE(static_cast<bool>(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->hazards, 0u) << report->worst;
  EXPECT_LE(report->worstExcess, 1.0) << report->worst;
}

Tensor in(GraphBuilder &b, const char *name, llvm::ArrayRef<int64_t> shape) {
  return b.input(name, proto::F32, shape, proto::BATCH_INPUT);
}

void out(GraphBuilder &b, Tensor t, const char *name) {
  b.output(name, t, proto::METRIC);
}

TEST(WindowOpsTest, BatchNormTrainingAndEvalWithBackward) {
  for (bool training : {true, false}) {
    for (llvm::SmallVector<int64_t, 4> shape :
         {llvm::SmallVector<int64_t, 4>{4, 3, 5, 5}, {2, 130, 3, 3}, {8, 7, 13},
          // Channels on the partitions an image at a time, the statistics
          // folded by the loop nests across images and column chunks.
          {6, 16, 20, 20}, {2, 4, 70, 70}}) {
      SCOPED_TRACE(training ? "training" : "eval");
      expectMatches([&](GraphBuilder &b) {
        int64_t c = shape[1];
        Tensor x = in(b, "x", shape), g = in(b, "g", shape);
        Tensor w = in(b, "w", {c}), bias = in(b, "b", {c});
        Tensor rm = in(b, "rm", {c}), rv = b.add(in(b, "rv", {c}), b.scalar(2));
        auto bn = b.batchNorm(x, w, bias, rm, rv, training, 0.1, 1e-5);
        out(b, bn.output, "y");
        out(b, bn.runningMean, "rm2");
        out(b, bn.runningVar, "rv2");
        auto grads = b.batchNormBackward(g, x, bn.mean, bn.rstd, w, training);
        out(b, grads.input, "gx");
        out(b, grads.weight, "gw");
        out(b, grads.bias, "gb");
      });
    }
  }
}

struct PoolCase {
  llvm::SmallVector<int64_t, 4> shape;
  GraphBuilder::PoolWindow window;
};

TEST(WindowOpsTest, PoolingAndBackwardsMatchReference) {
  std::vector<PoolCase> cases = {
      {{2, 3, 8, 8}, {{2, 2}, {2, 2}, {0, 0}}},
      {{2, 4, 9, 9}, {{3, 3}, {2, 2}, {1, 1}}},           // ResNet's stem
      {{1, 2, 7, 7}, {{2, 2}, {2, 2}, {0, 0}, {}, true}}, // ceil mode
      {{1, 2, 7, 6}, {{3, 2}, {1, 2}, {1, 0}, {2, 1}}},   // dilated rows
      {{3, 5, 13}, {{3}, {2}, {1}}},                      // 1-d
  };
  for (const PoolCase &c : cases) {
    for (bool countIncludePad : {true, false}) {
      GraphBuilder::PoolWindow w = c.window;
      w.countIncludePad = countIncludePad;
      bool dilated = !w.dilation.empty() &&
                     llvm::any_of(w.dilation, [](int64_t d) { return d > 1; });
      expectMatches([&](GraphBuilder &b) {
        Tensor x = in(b, "x", c.shape);
        Tensor y = b.maxPool(x, w);
        out(b, y, "max");
        out(b, b.maxPoolBackward(b.mul(y, y), x, w), "max_grad");
        if (!dilated) {
          GraphBuilder::PoolWindow a = w;
          a.dilation.clear();
          Tensor avg = b.avgPool(x, a);
          out(b, avg, "avg");
          out(b, b.avgPoolBackward(b.mul(avg, avg), c.shape, a), "avg_grad");
        }
      });
    }
  }
}

TEST(WindowOpsTest, RandomPoolingMatchesReference) {
  // Seeded random windows: kernels 1, 2, 3, 5; strides 1, 2, 3; padding up to
  // half the kernel; dilation 1, 2 (max pooling); ceil mode; odd sizes.
  std::mt19937_64 rng(38);
  auto pick = [&](std::initializer_list<int64_t> values) {
    return *(values.begin() + rng() % values.size());
  };
  for (int i = 0; i < 40; ++i) {
    bool twoD = rng() % 3 != 0;
    int64_t kernel = pick({1, 2, 3, 5}), stride = pick({1, 2, 3});
    int64_t padding = rng() % (kernel / 2 + 1), dilation = pick({1, 2});
    llvm::SmallVector<int64_t, 4> shape = {1 + int64_t(rng() % 2),
                                           pick({1, 3, 130})};
    for (int d = 0; d < (twoD ? 2 : 1); ++d) {
      shape.push_back(pick({7, 13, 28}));
    }
    size_t spatial = shape.size() - 2;
    GraphBuilder::PoolWindow w{
        llvm::SmallVector<int64_t, 2>(spatial, kernel),
        llvm::SmallVector<int64_t, 2>(spatial, stride),
        llvm::SmallVector<int64_t, 2>(spatial, padding),
        llvm::SmallVector<int64_t, 2>(spatial, dilation), rng() % 2 == 0,
        rng() % 2 == 0};
    std::string shapeText;
    for (int64_t d : shape) {
      shapeText += std::to_string(d) + " ";
    }
    SCOPED_TRACE("pooling case " + std::to_string(i) + ": input [" +
                 shapeText + "] kernel " + std::to_string(kernel) +
                 " stride " + std::to_string(stride) + " padding " +
                 std::to_string(padding) + " dilation " +
                 std::to_string(dilation) + " ceil " +
                 std::to_string(w.ceilMode) + " count_include_pad " +
                 std::to_string(w.countIncludePad));
    expectMatches([&](GraphBuilder &b) {
      Tensor x = in(b, "x", shape);
      Tensor y = b.maxPool(x, w);
      out(b, y, "max");
      out(b, b.maxPoolBackward(b.mul(y, y), x, w), "max_grad");
      GraphBuilder::PoolWindow a = w;
      a.dilation.clear();
      Tensor avg = b.avgPool(x, a);
      out(b, avg, "avg");
      out(b, b.avgPoolBackward(b.mul(avg, avg), shape, a), "avg_grad");
    });
  }
}

TEST(WindowOpsTest, MaxPoolBackwardGivesTiesToTheFirstMaximum) {
  // ReLU before max pooling makes ties common: every tie's gradient goes
  // to its window's first maximum, as PyTorch's indices say.
  DiffOptions options;
  options.floats = Range{-1.0, 0.5};
  expectMatches(
      [&](GraphBuilder &b) {
        Tensor x = b.relu(in(b, "x", {2, 3, 9, 9}));
        GraphBuilder::PoolWindow w{{3, 3}, {2, 2}, {1, 1}};
        out(b, b.maxPoolBackward(in(b, "g", {2, 3, 5, 5}), x, w), "gx");
      },
      options);
}

struct ConvCase {
  llvm::SmallVector<int64_t, 4> input; // [N, C, S...]
  int64_t outChannels, kernel, stride, padding, dilation, groups;
};

std::string describe(const ConvCase &c) {
  std::string s = "input [";
  for (int64_t d : c.input) {
    s += std::to_string(d) + " ";
  }
  return s + "] K " + std::to_string(c.outChannels) + " kernel " +
         std::to_string(c.kernel) + " stride " + std::to_string(c.stride) +
         " padding " + std::to_string(c.padding) + " dilation " +
         std::to_string(c.dilation) + " groups " + std::to_string(c.groups);
}

/// The window, weight shape and output shape of `c`, and the products
/// each output element sums (C/groups * R * S).
struct ConvShapes {
  GraphBuilder::ConvWindow window;
  llvm::SmallVector<int64_t, 4> weight, output;
  size_t spatial;
  double terms;

  explicit ConvShapes(const ConvCase &c) : spatial(c.input.size() - 2) {
    window = GraphBuilder::ConvWindow{
        llvm::SmallVector<int64_t, 2>(spatial, c.stride),
        llvm::SmallVector<int64_t, 2>(spatial, c.padding),
        llvm::SmallVector<int64_t, 2>(spatial, c.dilation), c.groups};
    weight = {c.outChannels, c.input[1] / c.groups};
    output = {c.input[0], c.outChannels};
    for (size_t d = 0; d < spatial; ++d) {
      weight.push_back(c.kernel);
      output.push_back((c.input[2 + d] + 2 * c.padding -
                        c.dilation * (c.kernel - 1) - 1) /
                           c.stride +
                       1);
    }
    terms = static_cast<double>(weight[1]) *
            std::pow(static_cast<double>(c.kernel), spatial);
  }
};

/// The convolution, its input gradient and its weight gradient of `c`,
/// compiled against the reference interpreter.
void expectConvMatches(const ConvCase &c, DiffOptions options = {}) {
  SCOPED_TRACE(describe(c));
  const ConvShapes s(c);
  // Sums of up to C/groups * R * S products (the weight gradient's, of
  // N * O... products): scale the tolerance with them.
  double terms = s.terms;
  double pixels = static_cast<double>(c.input[0]);
  for (size_t d = 0; d < s.spatial; ++d) {
    pixels *= static_cast<double>(s.output[2 + d]);
  }
  if (options.compile.autoCast == "bf16") {
    // Each product's operands rounded to bf16 (2^-8 relative at worst).
    options.atol = 4e-3 * std::max(terms, pixels);
  } else {
    options.atol = 1e-6 * std::max(terms, pixels);
  }
  // Batch norm's per-channel sums of the convolution's output and of the
  // input gradient, which the convolutions compute as their tiles leave
  // PSUM.
  llvm::SmallVector<int64_t, 3> allButChannels = {0};
  for (size_t d = 0; d < s.spatial; ++d) {
    allButChannels.push_back(2 + static_cast<int64_t>(d));
  }
  expectMatches(
      [&](GraphBuilder &b) {
        Tensor x = in(b, "x", c.input), k = in(b, "w", s.weight);
        Tensor g = in(b, "g", s.output);
        Tensor y = b.conv(x, k, {}, s.window);
        Tensor gx = b.convInputGrad(g, k, c.input, s.window);
        out(b, y, "y");
        out(b, b.reduceSum(y, allButChannels), "y_sums");
        out(b, gx, "gx");
        out(b, b.reduceSum(gx, allButChannels, /*keepDim=*/true), "gx_sums");
        out(b, b.convWeightGrad(g, x, s.weight, s.window), "gw");
      },
      options);
}

const std::vector<ConvCase> &convCases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 8, 8}, 4, 3, 1, 1, 1, 1},
      {{1, 4, 9, 7}, 6, 3, 2, 1, 1, 2},
      {{2, 8, 7, 7}, 8, 5, 1, 2, 1, 8},   // depthwise
      {{1, 3, 13, 13}, 5, 3, 2, 0, 2, 1}, // dilated
      {{2, 6, 13}, 4, 5, 2, 3, 1, 1},     // 1-d
      {{1, 130, 5, 5}, 129, 1, 1, 0, 1, 1},
      {{1, 2, 33, 33}, 3, 7, 2, 3, 1, 1}, // a ResNet stem
      // Small feature maps: blocks of several images, the last one short.
      {{5, 3, 7, 7}, 4, 3, 1, 1, 1, 1},
      {{11, 6, 5, 5}, 6, 3, 2, 1, 1, 3},
      {{3, 2, 13, 13}, 2, 3, 2, 1, 1, 2},
      {{4, 5, 13}, 3, 3, 1, 1, 1, 1},
      // More than 512 blocks: their per-channel sums fold in two stages.
      {{2, 1, 140000}, 2, 3, 1, 1, 1, 1},
  };
  return cases;
}

TEST(WindowOpsTest, ConvolutionsAndGradientsMatchReference) {
  for (const ConvCase &c : convCases()) {
    expectConvMatches(c);
  }
}

/// Seeded random convolutions over the sizes CNNs use: kernels 1, 3, 5, 7;
/// strides 1, 2; padding 0 to 3; dilation 1, 2; groups 1, 2 and depthwise;
/// 1, 3, 64, 127, 129 or 256 channels; odd spatial sizes; 1-d and 2-d.
/// Cases whose window does not fit, or that would take more than a
/// million multiply-adds or 1500 matmuls a block, are drawn again.
std::vector<ConvCase> randomConvCases(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::initializer_list<int64_t> values) {
    return *(values.begin() + rng() % values.size());
  };
  std::vector<ConvCase> cases;
  while (cases.size() < count) {
    bool twoD = rng() % 4 != 0;
    int64_t channels = pick({1, 3, 64, 127, 129, 256});
    int64_t kernel = pick({1, 3, 5, 7}), stride = pick({1, 2});
    int64_t padding = pick({0, 1, 2, 3}), dilation = pick({1, 2});
    int64_t size = pick({7, 13, 28, 33});
    int64_t groups = pick({1, 2, 0});
    int64_t outChannels = pick({1, 3, 64, 127, 129, 256});
    if (groups == 0) { // depthwise
      groups = channels;
      outChannels = channels;
    }
    if (channels % groups || outChannels % groups) {
      continue;
    }
    int64_t width = twoD ? pick({7, 13, 28, 33}) : size;
    auto outSize = [&](int64_t in) {
      int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
      return span < 0 ? 0 : span / stride + 1;
    };
    int64_t out = std::min(outSize(size), outSize(width));
    double spatial = twoD ? double(outSize(size)) * outSize(width) * kernel * kernel
                          : double(out) * kernel;
    double macs = spatial * double(outChannels) * double(channels / groups);
    // Each group and tap is a matmul per block: bound the instructions.
    double matmuls = double(groups) * (twoD ? kernel * kernel : kernel);
    if (out < 1 || macs > 1e6 || matmuls > 1500) {
      continue;
    }
    llvm::SmallVector<int64_t, 4> input = {1 + int64_t(rng() % 2), channels};
    input.push_back(size);
    if (twoD) {
      input.push_back(width);
    }
    cases.push_back({input, outChannels, kernel, stride, padding, dilation,
                     groups});
  }
  return cases;
}

TEST(WindowOpsTest, RandomConvolutionsMatchReference) {
  // KILN_RANDOM_CONVOLUTIONS sets the count (CI runs the default).
  const char *env = std::getenv("KILN_RANDOM_CONVOLUTIONS");
  size_t count = env ? std::strtoul(env, nullptr, 10) : 200;
  for (const ConvCase &c : randomConvCases(count, /*seed=*/38)) {
    expectConvMatches(c);
  }
}

/// What a convolution computes on its output blocks as they leave PSUM
/// (its epilogue): a bias and ReLU, eval-mode batch norm and ReLU, and a
/// residual addition; and on an input gradient's, ReLU's backward.
void expectEpiloguesMatch(const ConvCase &c, DiffOptions options = {}) {
  SCOPED_TRACE(describe(c));
  const ConvShapes s(c);
  int64_t k = c.outChannels;
  llvm::SmallVector<int64_t, 4> perChannel(s.output.size(), 1);
  perChannel[1] = k;
  double terms = s.terms;
  options.atol = (options.compile.autoCast == "bf16" ? 4e-3 : 1e-6) * terms;
  // One graph each, so that each convolution has its own epilogue.
  using Epilogue = std::function<Tensor(GraphBuilder &, Tensor y)>;
  auto channelInput = [&](GraphBuilder &b, const char *name) {
    return b.reshape(in(b, name, {k}), perChannel);
  };
  std::vector<std::pair<const char *, Epilogue>> epilogues = {
      {"bias and ReLU",
       [&](GraphBuilder &b, Tensor y) {
         return b.relu(b.add(y, channelInput(b, "b")));
       }},
      {"eval batch norm and ReLU",
       [&](GraphBuilder &b, Tensor y) {
         Tensor gamma = in(b, "gamma", {k}), beta = in(b, "beta", {k});
         Tensor rm = in(b, "rm", {k});
         Tensor rv = b.add(in(b, "rv", {k}), b.scalar(2));
         return b.relu(
             b.batchNorm(y, gamma, beta, rm, rv, /*training=*/false, 0.1, 1e-5)
                 .output);
       }},
      {"residual", [&](GraphBuilder &b, Tensor y) {
         return b.add(b.mul(y, b.scalar(0.5)), in(b, "r", s.output));
       }}};
  for (const auto &[name, epilogue] : epilogues) {
    SCOPED_TRACE(name);
    expectMatches(
        [&](GraphBuilder &b) {
          Tensor x = in(b, "x", c.input), kernel = in(b, "w", s.weight);
          out(b, epilogue(b, b.conv(x, kernel, {}, s.window)), "y");
        },
        options);
  }
  expectMatches(
      [&](GraphBuilder &b) {
        Tensor dy = in(b, "dy", s.output), kernel = in(b, "w", s.weight);
        Tensor x = in(b, "x", c.input);
        out(b, b.reluBackward(b.convInputGrad(dy, kernel, c.input, s.window), x),
            "gx");
      },
      options);
}

TEST(WindowOpsTest, ConvolutionEpiloguesMatchReference) {
  for (const ConvCase &c : convCases()) {
    if (c.input.back() < 1000) { // the many-block case adds nothing here
      expectEpiloguesMatch(c);
    }
  }
  DiffOptions options;
  options.autoCastBf16(0); // set by expectEpiloguesMatch
  expectEpiloguesMatch(convCases().front(), options);
}

TEST(WindowOpsTest, AutoCastConvolutionsStayNearF32) {
  // bf16 operands, f32 sums: the casts fold into the loads and the f32
  // result into the PSUM evacuation.
  for (const ConvCase &c : convCases()) {
    DiffOptions options;
    options.autoCastBf16(0); // set per case by expectConvMatches
    expectConvMatches(c, options);
  }
}

} // namespace
