//===- WindowKernelsTest.cpp - the interpreter's convolution, batch norm
// and pooling kernels on hand-computed values and adjoint identities ---===//

#include "test/compiler/reference/InterpreterFixture.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "llvm/Support/FormatVariadic.h"

#include <random>

using namespace kiln;
using reference::HostTensor;

namespace {

class WindowKernelsTest : public test::InterpreterFixture {
protected:
  /// Values exact in f32 (multiples of 1/8), so sums are exact in double.
  HostTensor random(reference::Shape shape) {
    HostTensor t(proto::F32, std::move(shape));
    std::uniform_int_distribution<int> d(-16, 16);
    for (double &v : t.data) {
      v = d(rng) / 8.0;
    }
    return t;
  }
  static double dot(const HostTensor &a, const HostTensor &b) {
    double sum = 0.0;
    for (size_t i = 0; i < a.data.size(); ++i) {
      sum += a.data[i] * b.data[i];
    }
    return sum;
  }

  std::mt19937 rng{7};
};

TEST_F(WindowKernelsTest, ConvolutionByHand) {
  // 3x3 input, 2x2 kernel, padding 1, stride 2: outputs at rows and
  // columns -1 and 1 of the input.
  auto out = run(R"(
    func.func @f(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x2x2xf32>, %b: tensor<1xf32>) -> tensor<1x1x2x2xf32> {
      %y = kgraph.conv %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1xf32> -> tensor<1x1x2x2xf32>
      return %y : tensor<1x1x2x2xf32>
    })",
                 {f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                  f32({1, 1, 2, 2}, {1, 10, 100, 1000}), f32({1}, {0.5})});
  // Top left reads only x[0,0] through tap (1,1); top right x[0,1] and
  // x[0,2] through taps (1,0), (1,1); and so on.
  expectNear(out[0], {1000 + 0.5, 2 * 100 + 3 * 1000 + 0.5,
                      4 * 10 + 7 * 1000 + 0.5,
                      5 * 1 + 6 * 10 + 8 * 100 + 9 * 1000 + 0.5});
}

/// The gradients are the adjoints of the convolution: for any x, w and g,
/// <conv(x, w), g> = <x, conv_input_grad(g, w)> = <w, conv_weight_grad(g,
/// x)>. Checked over strides, padding, dilation, groups and 1-d.
TEST_F(WindowKernelsTest, GradientsAreTheConvolutionsAdjoints) {
  struct Case {
    reference::Shape x, w;
    int64_t stride, padding, dilation, groups;
  };
  for (const Case &c : std::vector<Case>{
           {{2, 4, 7, 6}, {6, 2, 3, 3}, 2, 1, 1, 2},
           {{1, 3, 9, 9}, {3, 1, 3, 3}, 1, 2, 2, 3},
           {{2, 2, 5, 5}, {4, 2, 1, 1}, 2, 0, 1, 1},
           {{2, 3, 13}, {5, 3, 5}, 2, 3, 1, 1}}) {
    bool twoD = c.x.size() == 4;
    auto attr = [&](int64_t v) {
      return twoD ? llvm::formatv("array<i64: {0}, {0}>", v).str()
                  : llvm::formatv("array<i64: {0}>", v).str();
    };
    auto type = [](const reference::Shape &s) {
      std::string t = "tensor<";
      for (int64_t d : s) {
        t += std::to_string(d) + "x";
      }
      return t + "f32>";
    };
    reference::Shape y = {c.x[0], c.w[0]};
    for (size_t d = 2; d < c.x.size(); ++d) {
      y.push_back((c.x[d] + 2 * c.padding - c.dilation * (c.w[d] - 1) - 1) /
                      c.stride +
                  1);
    }
    std::string attrs = llvm::formatv(
        "{{stride = {0}, padding = {1}, dilation = {2}, groups = {3}}",
        attr(c.stride), attr(c.padding), attr(c.dilation), c.groups);
    std::string ir = llvm::formatv(R"(
      func.func @f(%x: {0}, %w: {1}, %g: {2}) -> ({2}, {0}, {1}) {{
        %y = kgraph.conv %x, %w {3} : {0}, {1} -> {2}
        %gx = kgraph.conv_input_grad %g, %w {3} : {2}, {1} -> {0}
        %gw = kgraph.conv_weight_grad %g, %x {3} : {2}, {0} -> {1}
        return %y, %gx, %gw : {2}, {0}, {1}
      })",
                                   type(c.x), type(c.w), type(y), attrs);
    HostTensor x = random(c.x), w = random(c.w), g = random(y);
    auto out = run(ir, {x, w, g});
    ASSERT_EQ(out.size(), 3u) << ir;
    double forward = dot(out[0], g);
    EXPECT_NEAR(dot(x, out[1]), forward, 1e-9) << ir;
    EXPECT_NEAR(dot(w, out[2]), forward, 1e-9) << ir;
  }
}

TEST_F(WindowKernelsTest, BatchNormTrainingAndRunningStatistics) {
  // Two channels, four values each: channel 0 holds 1 2 3 4, channel 1
  // holds 2 2 2 2 (variance 0).
  auto out = run(R"(
    func.func @f(%x: tensor<2x2x2xf32>, %c: tensor<2xf32>, %rm: tensor<2xf32>, %rv: tensor<2xf32>) -> (tensor<2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %y, %m, %r, %nm, %nv = kgraph.batch_norm %x, %c, %rm, %rm, %rv {training = true, epsilon = 0.5} : tensor<2x2x2xf32>, tensor<2xf32>
      return %y, %m, %r, %nm, %nv : tensor<2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
    })",
                 {f32({2, 2, 2}, {1, 2, 2, 2, 3, 4, 2, 2}), f32({2}, {2, 3}),
                  f32({2}, {0, 1}), f32({2}, {1, 1})});
  // Channel 0: mean 2.5, variance 1.25, rstd 1/sqrt(1.75); weight 2,
  // bias (running_mean passed as bias) 0. Channel 1: all equal 3 + 1.
  double rs = 1.0 / std::sqrt(1.75);
  expectNear(out[0], {-1.5 * rs * 2, -0.5 * rs * 2, 1, 1, 0.5 * rs * 2,
                      1.5 * rs * 2, 1, 1},
             1e-6);
  expectNear(out[1], {2.5, 2});
  expectNear(out[2], {rs, 1.0 / std::sqrt(0.5)}, 1e-6);
  // Momentum 0.1 towards the mean and the unbiased variance (1.25 * 4/3).
  expectNear(out[3], {0.25, 1.1});
  expectNear(out[4], {0.9 + 0.1 * 1.25 * 4 / 3, 0.9}, 1e-6);
}

TEST_F(WindowKernelsTest, MaxPoolTakesTheFirstMaximum) {
  // Window 2, stride 1 over [5, 5, 1]: both windows containing a tie pick
  // the first, so all the gradient of window 0 lands on element 0.
  auto out = run(R"(
    func.func @f(%x: tensor<1x1x3xf32>, %g: tensor<1x1x2xf32>) -> (tensor<1x1x2xf32>, tensor<1x1x3xf32>) {
      %y = kgraph.max_pool %x {kernel = array<i64: 2>, stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>} : tensor<1x1x3xf32> -> tensor<1x1x2xf32>
      %gx = kgraph.max_pool_backward %g, %x {kernel = array<i64: 2>, stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>} : tensor<1x1x2xf32>, tensor<1x1x3xf32>
      return %y, %gx : tensor<1x1x2xf32>, tensor<1x1x3xf32>
    })",
                 {f32({1, 1, 3}, {5, 5, 1}), f32({1, 1, 2}, {10, 100})});
  expectNear(out[0], {5, 5});
  expectNear(out[1], {10, 100, 0});
}

TEST_F(WindowKernelsTest, AveragePoolDivisors) {
  // Kernel 2, stride 2, padding 1 over 3 values: windows [-1, 0], [1, 2].
  // Counting padding, both divide by 2; without, the first divides by 1.
  auto out = run(R"(
    func.func @f(%x: tensor<1x1x3xf32>) -> (tensor<1x1x2xf32>, tensor<1x1x2xf32>, tensor<1x1x3xf32>) {
      %a = kgraph.avg_pool %x {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 1>} : tensor<1x1x3xf32> -> tensor<1x1x2xf32>
      %b = kgraph.avg_pool %x {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 1>, count_include_pad = false} : tensor<1x1x3xf32> -> tensor<1x1x2xf32>
      %g = kgraph.avg_pool_backward %b {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 1>, count_include_pad = false} : tensor<1x1x2xf32> -> tensor<1x1x3xf32>
      return %a, %b, %g : tensor<1x1x2xf32>, tensor<1x1x2xf32>, tensor<1x1x3xf32>
    })",
                 {f32({1, 1, 3}, {2, 4, 8})});
  expectNear(out[0], {1, 6});
  expectNear(out[1], {2, 6});
  expectNear(out[2], {2, 3, 3});
}

} // namespace
