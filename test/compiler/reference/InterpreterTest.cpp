//===- InterpreterTest.cpp - the reference interpreter on hand-computed values
//===//

#include "compiler/reference/Interpreter.h"
#include "compiler/graph/GraphConversion.h"
#include "compiler/target/Random.h"
#include "test/compiler/reference/InterpreterFixture.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln;
using reference::HostTensor;

namespace {

class InterpreterTest : public test::InterpreterFixture {};

TEST_F(InterpreterTest, BroadcastingArithmetic) {
  auto out = run(R"(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
      %0 = kgraph.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
      %1 = kgraph.div %a, %b : tensor<2x3xf32>, tensor<3xf32>
      %two = kgraph.constant dense<2.0> : tensor<f32>
      %2 = kgraph.pow %a, %two : tensor<2x3xf32>, tensor<f32>
      return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
    })",
                 {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 40})});
  expectNear(out[0], {11, 22, 43, 14, 25, 46});
  expectNear(out[1], {0.1, 0.1, 0.075, 0.4, 0.25, 0.15});
  expectNear(out[2], {1, 4, 9, 16, 25, 36});
}

TEST_F(InterpreterTest, MatmulWithTransposesAndBatchBroadcast) {
  auto out =
      run(R"(
    func.func @f(%a: tensor<2x2x3xf32>, %b: tensor<3x2xf32>, %c: tensor<2x3xf32>) -> (tensor<2x2x2xf32>, tensor<2x2x2xf32>) {
      %0 = kgraph.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x2xf32> -> tensor<2x2x2xf32>
      %1 = kgraph.matmul %a, %c {transpose_rhs = true} : tensor<2x2x3xf32>, tensor<2x3xf32> -> tensor<2x2x2xf32>
      return %0, %1 : tensor<2x2x2xf32>, tensor<2x2x2xf32>
    })",
          {f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}),
           f32({3, 2}, {1, 0, 0, 1, 1, 1}), f32({2, 3}, {1, 0, 1, 0, 1, 1})});
  // [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]; identity rows
  // pick rows of b.
  expectNear(out[0], {4, 5, 10, 11, 1, 0, 0, 1});
  expectNear(out[1], {4, 5, 10, 11, 1, 0, 0, 1});
}

TEST_F(InterpreterTest, LinearIsInputTimesWeightTransposedPlusBias) {
  auto out = run(R"(
    func.func @f(%x: tensor<1x2xf32>, %w: tensor<3x2xf32>, %b: tensor<3xf32>) -> tensor<1x3xf32> {
      %0 = kgraph.linear %x, %w, %b : tensor<1x2xf32>, tensor<3x2xf32>, tensor<3xf32> -> tensor<1x3xf32>
      return %0 : tensor<1x3xf32>
    })",
                 {f32({1, 2}, {1, 2}), f32({3, 2}, {1, 1, 2, 0, 0, 3}),
                  f32({3}, {0.5, 0, -1})});
  expectNear(out[0], {3.5, 2, 5});
}

TEST_F(InterpreterTest, Reductions) {
  auto out = run(R"(
    func.func @f(%a: tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<3xf32>, tensor<f32>, tensor<2xf32>, tensor<2xi64>) {
      %0 = kgraph.reduce_sum %a, [1] {keepdim = true} : tensor<2x3xf32> -> tensor<2x1xf32>
      %1 = kgraph.reduce_mean %a, [0] : tensor<2x3xf32> -> tensor<3xf32>
      %2 = kgraph.reduce_max %a, [0, 1] : tensor<2x3xf32> -> tensor<f32>
      %3 = kgraph.reduce_min %a, [1] : tensor<2x3xf32> -> tensor<2xf32>
      %4 = kgraph.argmax %a {dim = 1} : tensor<2x3xf32> -> tensor<2xi64>
      return %0, %1, %2, %3, %4 : tensor<2x1xf32>, tensor<3xf32>, tensor<f32>, tensor<2xf32>, tensor<2xi64>
    })",
                 {f32({2, 3}, {1, 5, 5, -2, 0, 3})});
  expectNear(out[0], {11, 1});
  expectNear(out[1], {-0.5, 2.5, 4});
  expectNear(out[2], {5});
  expectNear(out[3], {1, -2});
  expectNear(out[4], {1, 2}); // ties keep the first maximum
}

TEST_F(InterpreterTest, SoftmaxFamily) {
  auto out = run(
      R"(
    func.func @f(%a: tensor<1x3xf32>, %g: tensor<1x3xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
      %0 = kgraph.softmax %a {dim = 1} : tensor<1x3xf32>
      %1 = kgraph.log_softmax %a {dim = 1} : tensor<1x3xf32>
      %2 = kgraph.softmax_backward %g, %0 {dim = 1} : tensor<1x3xf32>
      %3 = kgraph.log_softmax_backward %g, %1 {dim = 1} : tensor<1x3xf32>
      return %0, %1, %2, %3 : tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>
    })",
      {f32({1, 3}, {0, std::log(2.0), std::log(5.0)}), f32({1, 3}, {1, 0, 0})});
  expectNear(out[0], {0.125, 0.25, 0.625});
  expectNear(out[1], {std::log(0.125), std::log(0.25), std::log(0.625)});
  // y * (g - sum(g*y)) with sum = 0.125.
  expectNear(out[2], {0.125 * 0.875, 0.25 * -0.125, 0.625 * -0.125});
  // g - softmax * sum(g) with sum = 1.
  expectNear(out[3], {0.875, -0.25, -0.625});
}

TEST_F(InterpreterTest, LayerNormAndItsBackward) {
  auto out = run(R"(
    func.func @f(%x: tensor<1x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>, %g: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>) {
      %y, %mean, %rstd = kgraph.layer_norm %x, %w, %b {normalized_rank = 1, epsilon = 1.0e-5} : tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4xf32>, tensor<1x1xf32>, tensor<1x1xf32>
      %gx, %gw, %gb = kgraph.layer_norm_backward %g, %x, %mean, %rstd, %w {normalized_rank = 1} : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<4xf32> -> tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>
      return %y, %mean, %rstd, %gx, %gw, %gb : tensor<1x4xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>
    })",
                 {f32({1, 4}, {1, 2, 3, 4}), f32({4}, {1, 1, 2, 2}),
                  f32({4}, {0, 0, 0, 1}), f32({1, 4}, {1, 1, 1, 1})});
  // mean 2.5, variance 1.25.
  double rs = 1.0 / std::sqrt(1.25 + 1e-5);
  expectNear(out[0], {-1.5 * rs, -0.5 * rs, 2 * 0.5 * rs, 2 * 1.5 * rs + 1},
             1e-5);
  expectNear(out[1], {2.5});
  expectNear(out[2], {rs}, 1e-5);
  // The gradient of a normalised row is orthogonal to 1 and to xhat.
  double sum = 0;
  for (double v : out[3].data) {
    sum += v;
  }
  EXPECT_NEAR(sum, 0.0, 1e-5);
  expectNear(out[4], {-1.5 * rs, -0.5 * rs, 0.5 * rs, 1.5 * rs}, 1e-5);
  expectNear(out[5], {1, 1, 1, 1});
}

TEST_F(InterpreterTest, NllLossForwardAndBackward) {
  auto out = run(R"(
    func.func @f(%lp: tensor<3x2xf32>, %y: tensor<3xi64>) -> (tensor<f32>, tensor<f32>, tensor<3x2xf32>, tensor<3xf32>) {
      %loss, %total = kgraph.nll_loss %lp, %y {ignore_index = 1} : tensor<3x2xf32>, tensor<3xi64> -> tensor<f32>, tensor<f32>
      %one = kgraph.constant dense<1.0> : tensor<f32>
      %g = kgraph.nll_loss_backward %one, %lp, %y, %total {ignore_index = 1} : tensor<f32>, tensor<3x2xf32>, tensor<3xi64>, tensor<f32> -> tensor<3x2xf32>
      %each, %t2 = kgraph.nll_loss %lp, %y {reduction = "none"} : tensor<3x2xf32>, tensor<3xi64> -> tensor<3xf32>, tensor<f32>
      return %loss, %total, %g, %each : tensor<f32>, tensor<f32>, tensor<3x2xf32>, tensor<3xf32>
    })",
                 {f32({3, 2}, {-1, -2, -3, -4, -5, -6}), i64({3}, {0, 1, 0})});
  // Row 1 is ignored: mean of 1 and 5 over two targets.
  expectNear(out[0], {3});
  expectNear(out[1], {2});
  expectNear(out[2], {-0.5, 0, 0, 0, -0.5, 0});
  expectNear(out[3], {1, 4, 5});
}

TEST_F(InterpreterTest, ActivationsAndTheirBackwards) {
  auto out = run(R"(
    func.func @f(%x: tensor<3xf32>, %g: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0 = kgraph.gelu %x : tensor<3xf32>
      %1 = kgraph.gelu %x {approximate = "tanh"} : tensor<3xf32>
      %2 = kgraph.gelu_backward %g, %x : tensor<3xf32>
      %3 = kgraph.relu_backward %g, %x : tensor<3xf32>
      %t = kgraph.tanh %x : tensor<3xf32>
      %4 = kgraph.tanh_backward %g, %t : tensor<3xf32>
      %s = kgraph.sigmoid %x : tensor<3xf32>
      %5 = kgraph.sigmoid_backward %g, %s : tensor<3xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    })",
                 {f32({3}, {-1, 0, 1}), f32({3}, {1, 1, 1})});
  expectNear(out[0], {-0.15865525, 0, 0.84134475});
  expectNear(out[1], {-0.15880801, 0, 0.84119199});
  expectNear(out[2], {-0.08331547, 0.5, 1.08331547});
  expectNear(out[3], {0, 0, 1});
  double t = std::tanh(1.0);
  expectNear(out[4], {1 - t * t, 1, 1 - t * t});
  double s = 1 / (1 + std::exp(-1.0));
  expectNear(out[5], {s * (1 - s), 0.25, s * (1 - s)});
}

TEST_F(InterpreterTest, IndexingOps) {
  auto out = run(R"(
    func.func @f(%a: tensor<2x3xf32>, %i: tensor<2x2xi64>, %w: tensor<3x2xf32>, %tok: tensor<3xi64>) -> (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
      %0 = kgraph.gather %a, %i {dim = 1} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<2x2xf32>
      %1 = kgraph.scatter_add %a, %i, %0 {dim = 1} : tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32> -> tensor<2x3xf32>
      %sel = kgraph.constant dense<[2, 0]> : tensor<2xi64>
      %2 = kgraph.index_select %a, %sel {dim = 1} : tensor<2x3xf32>, tensor<2xi64> -> tensor<2x2xf32>
      %3 = kgraph.embedding %w, %tok : tensor<3x2xf32>, tensor<3xi64> -> tensor<3x2xf32>
      %4 = kgraph.embedding_backward %3, %tok {num_weights = 3} : tensor<3x2xf32>, tensor<3xi64> -> tensor<3x2xf32>
      return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
    })",
                 {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2, 2}, {2, 2, 0, 1}),
                  f32({3, 2}, {10, 11, 20, 21, 30, 31}), i64({3}, {2, 0, 2})});
  expectNear(out[0], {3, 3, 4, 5});
  expectNear(out[1], {1, 2, 9, 8, 10, 6}); // duplicate index 2 accumulates
  expectNear(out[2], {3, 1, 6, 4});
  expectNear(out[3], {30, 31, 10, 11, 30, 31});
  expectNear(out[4], {10, 11, 0, 0, 60, 62});
}

TEST_F(InterpreterTest, ShapeOps) {
  auto out = run(R"(
    func.func @f(%a: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2x6xf32>, tensor<2x2x3xf32>, tensor<2x3xi64>) {
      %0 = kgraph.transpose %a, [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
      %1 = kgraph.slice %a {start = array<i64: 0, 0>, limit = array<i64: 2, 3>, stride = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<2x2xf32>
      %2 = kgraph.concat %a, %a {dim = 1} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
      %3 = kgraph.broadcast %a : tensor<2x3xf32> -> tensor<2x2x3xf32>
      %4 = kgraph.iota {dim = 1} : tensor<2x3xi64>
      return %0, %1, %2, %3, %4 : tensor<3x2xf32>, tensor<2x2xf32>, tensor<2x6xf32>, tensor<2x2x3xf32>, tensor<2x3xi64>
    })",
                 {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  expectNear(out[0], {1, 4, 2, 5, 3, 6});
  expectNear(out[1], {1, 3, 4, 6});
  expectNear(out[2], {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  expectNear(out[3], {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  expectNear(out[4], {0, 1, 2, 0, 1, 2});
}

TEST_F(InterpreterTest, CastsRoundAndTruncate) {
  auto out = run(R"(
    func.func @f(%a: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xi32>, tensor<4xi1>) {
      %0 = kgraph.cast %a : tensor<4xf32> -> tensor<4xbf16>
      %1 = kgraph.cast %a : tensor<4xf32> -> tensor<4xi32>
      %2 = kgraph.cast %a : tensor<4xf32> -> tensor<4xi1>
      return %0, %1, %2 : tensor<4xbf16>, tensor<4xi32>, tensor<4xi1>
    })",
                 {f32({4}, {1.00390625, 1.01171875, -2.7, 0})});
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: ties go to the even 1.
  // 1 + 3*2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6: the even one is 1 +
  // 2^-6.
  expectNear(out[0], {1.0, 1.015625, -2.703125, 0}, 0);
  expectNear(out[1], {1, 1, -2, 0}, 0);
  expectNear(out[2], {1, 1, 1, 0}, 0);
}

TEST_F(InterpreterTest, Bf16ArithmeticRoundsEveryResult) {
  auto out = run(R"(
    func.func @f(%a: tensor<1xbf16>, %b: tensor<1xbf16>) -> tensor<1xbf16> {
      %0 = kgraph.add %a, %b : tensor<1xbf16>, tensor<1xbf16>
      return %0 : tensor<1xbf16>
    })",
                 {[] {
                    HostTensor t(proto::BF16, {1});
                    t.data = {1.0};
                    return t;
                  }(),
                  [] {
                    HostTensor t(proto::BF16, {1});
                    t.data = {0.00390625};
                    return t;
                  }()});
  expectNear(out[0], {1.0}, 0); // 1 + 2^-8 rounds back to 1 in bf16
}

TEST_F(InterpreterTest, DropoutIsDeterministicAndKeepsOneMinusP) {
  llvm::StringRef ir = R"(
    func.func @f(%x: tensor<100x100xf32>, %seed: tensor<i64>) -> (tensor<100x100xf32>, tensor<100x100xi1>, tensor<100x100xi1>) {
      %y, %m = kgraph.dropout %x, %seed {p = 0.25} : tensor<100x100xf32>, tensor<i64> -> tensor<100x100xf32>, tensor<100x100xi1>
      %y2, %m2 = kgraph.dropout %x, %seed {p = 0.25, stream = 1} : tensor<100x100xf32>, tensor<i64> -> tensor<100x100xf32>, tensor<100x100xi1>
      return %y, %m, %m2 : tensor<100x100xf32>, tensor<100x100xi1>, tensor<100x100xi1>
    })";
  HostTensor ones(proto::F32, {100, 100}, 1.0);
  HostTensor seed(proto::I64, {}, 1234);
  auto first = run(ir, {ones, seed});
  auto second = run(ir, {ones, seed});
  EXPECT_EQ(first[0].data, second[0].data);
  double kept = 0;
  size_t differ = 0;
  for (size_t i = 0; i < first[1].data.size(); ++i) {
    kept += first[1].data[i];
    EXPECT_FLOAT_EQ(first[0].data[i], first[1].data[i] ? 1.0f / 0.75f : 0.0f);
    differ += first[1].data[i] != first[2].data[i];
  }
  EXPECT_NEAR(kept / 10000, 0.75, 0.02);
  EXPECT_GT(differ, 1000u) << "streams must give independent masks";
  seed.data[0] = 1235;
  auto other = run(ir, {ones, seed});
  EXPECT_NE(first[1].data, other[1].data);
}

TEST_F(InterpreterTest, RuntimeErrorsNameTheOp) {
  llvm::StringRef gather = R"(
    func.func @f(%a: tensor<2x3xf32>, %i: tensor<2x1xi64>) -> tensor<2x1xf32> {
      %0 = kgraph.gather %a, %i {dim = 1} : tensor<2x3xf32>, tensor<2x1xi64> -> tensor<2x1xf32> loc("model.py":7:3)
      return %0 : tensor<2x1xf32>
    })";
  EXPECT_EQ(
      runError(gather, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2, 1}, {0, 3})}),
      "'kgraph.gather' at model.py:7:3: index 3 is out of range [0, 3)");

  llvm::StringRef nll = R"(
    func.func @f(%a: tensor<1x3xf32>, %y: tensor<1xi64>) -> tensor<f32> {
      %0, %1 = kgraph.nll_loss %a, %y : tensor<1x3xf32>, tensor<1xi64> -> tensor<f32>, tensor<f32>
      return %0 : tensor<f32>
    })";
  EXPECT_NE(runError(nll, {f32({1, 3}, {1, 2, 3}), i64({1}, {5})})
                .find("target 5 of row 0 is out of range [0, 3)"),
            std::string::npos);

  llvm::StringRef div = R"(
    func.func @f(%a: tensor<2xi32>) -> tensor<2xi32> {
      %0 = kgraph.div %a, %a : tensor<2xi32>, tensor<2xi32>
      return %0 : tensor<2xi32>
    })";
  HostTensor ints(proto::I32, {2});
  ints.data = {4, 0};
  EXPECT_NE(runError(div, {ints}).find("integer division by zero"),
            std::string::npos);

  // Inputs are checked against the signature, by name.
  llvm::StringRef named = R"(
    func.func @f(%a: tensor<2xf32> {kgraph.name = "weights"}) -> tensor<2xf32> {
      return %a : tensor<2xf32>
    })";
  EXPECT_EQ(runError(named, {f32({3}, {1, 2, 3})}),
            "input 'weights' of 'f': expected f32[2], got f32[3]");
  EXPECT_EQ(runError(named, {}), "function 'f' takes 1 inputs, got 0");
}

TEST(RandomTest, UniformNumbersAreInTheUnitIntervalAndStable) {
  reference::DropoutStream stream(42, 0);
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    double u = stream.uniform(i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  // Pinned: the compiled dropout, kiln.rng and saved masks rely on these
  // exact numbers (k / 2^24).
  EXPECT_EQ(reference::splitMix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(reference::DropoutStream(42, 0).uniform(0), 5759482 * 0x1p-24);
  EXPECT_EQ(reference::DropoutStream(42, 3).uniform(5), 7129762 * 0x1p-24);
  EXPECT_EQ(reference::uniformAt(42, 3 * reference::kCountersPerStream + 5),
            7129762 * 0x1p-24);
}

TEST(RandomTest, DropoutThresholdComparesLikeTheProbability) {
  // u >= threshold(p) exactly when u >= p, for every 24-bit u near p.
  for (double p : {0.1, 0.25, 0.5, 0.7, 0.9, 1.0 / 3, 0.999999}) {
    double t = reference::dropoutThreshold(p);
    EXPECT_EQ(static_cast<double>(static_cast<float>(t)), t) << p;
    auto near = static_cast<int64_t>(p * 0x1p24);
    for (int64_t k = near - 2; k <= near + 2; ++k) {
      double u = k * 0x1p-24;
      EXPECT_EQ(u >= t, u >= p) << p << " " << k;
    }
  }
}

TEST_F(InterpreterTest, MaxOfScaledValuesIsScaledMaxBitForBit) {
  // kgraph's canonicalization takes a row's max (min) of x * c or x / c,
  // c > 0, on x and scales it after (KGraphFolds.cpp): rounding is
  // monotone, so the reference gives the same bits either way, here with
  // a divisor whose quotients round, extremes, a NaN row and signed zeros.
  llvm::StringRef ir = R"(
    func.func @f(%x: tensor<4x6xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>, tensor<4xf32>) {
      %c = kgraph.constant dense<0.7> : tensor<f32>
      %h = kgraph.constant dense<3.0> : tensor<f32>
      %s = kgraph.div %x, %c : tensor<4x6xf32>, tensor<f32>
      %m = kgraph.reduce_max %s, [1] {keepdim = true} : tensor<4x6xf32> -> tensor<4x1xf32>
      %n = kgraph.reduce_min %s, [1] {keepdim = true} : tensor<4x6xf32> -> tensor<4x1xf32>
      %t = kgraph.mul %h, %x : tensor<f32>, tensor<4x6xf32>
      %k = kgraph.reduce_max %t, [1] : tensor<4x6xf32> -> tensor<4xf32>
      return %m, %n, %k : tensor<4x1xf32>, tensor<4x1xf32>, tensor<4xf32>
    })";
  double inf = std::numeric_limits<double>::infinity();
  HostTensor x = f32(
      {4, 6}, {1.1,    2.3000001, 2.3,    -7.0, 1e-40,        0.3,  -0.0, 0.0,
               -1e-38, -3e38,     3.4e38, 5.0,  std::nan(""), 1.0,  -2.0, 0.5,
               0.25,   8.0,       -inf,   inf,  1.0,          -1.0, 0.1,  0.2});
  std::vector<HostTensor> before = run(ir, {x});
  ASSERT_EQ(before.size(), 3u);
  mlir::PassManager pm(context.get());
  pm.addPass(mlir::createCanonicalizerPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  int reductionsOfX = 0;
  module->walk([&](mlir::Operation *op) {
    if (llvm::isa<kgraph::ReduceMaxOp, kgraph::ReduceMinOp>(op) &&
        llvm::isa<mlir::BlockArgument>(op->getOperand(0))) {
      ++reductionsOfX;
    }
  });
  EXPECT_EQ(reductionsOfX, 3) << "the canonicalization did not apply";
  auto after = reference::interpret(*graph::getStepFunction(*module), {x});
  ASSERT_TRUE(static_cast<bool>(after)) << llvm::toString(after.takeError());
  for (size_t r = 0; r < before.size(); ++r) {
    ASSERT_EQ(before[r].data.size(), (*after)[r].data.size());
    for (size_t i = 0; i < before[r].data.size(); ++i) {
      float a = static_cast<float>(before[r].data[i]);
      float b = static_cast<float>((*after)[r].data[i]);
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0)
          << "result " << r << " element " << i << ": " << a << " vs " << b;
    }
  }
}

} // namespace
