//===- GraphBuilderTest.cpp - the C++ graph-builder API ------------------===//

#include "compiler/builder/GraphBuilder.h"
#include "compiler/builder/Optimizers.h"
#include "compiler/graph/GraphConversion.h"
#include "compiler/reference/Interpreter.h"
#include "test/support/TestSupport.h"

using namespace kiln;

namespace {

TEST(GraphBuilder, BuildsAVerifiedGraphWithRoles) {
  auto context = test::makeContext();
  GraphBuilder b(*context, "step");
  Tensor x = b.input("x", proto::F32, {2, 3}, proto::BATCH_INPUT);
  Tensor w = b.input("w", proto::F32, {3}, proto::PARAMETER);
  Tensor y = b.mul(x, w);
  b.output("sum", b.reduceSum(y, {0, 1}), proto::LOSS);
  b.output("w", b.sub(w, b.scalar(0.5)), proto::UPDATED_PARAMETER, w);
  auto graph = b.finishGraph();
  ASSERT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  EXPECT_EQ(graph->name(), "step");
  ASSERT_EQ(graph->inputs_size(), 2);
  EXPECT_EQ(graph->inputs(1).role(), proto::PARAMETER);
  ASSERT_EQ(graph->outputs_size(), 2);
  EXPECT_EQ(graph->outputs(0).role(), proto::LOSS);
  EXPECT_EQ(graph->outputs(1).role(), proto::UPDATED_PARAMETER);
  EXPECT_EQ(graph->outputs(1).aliases_input(), 1);
}

TEST(GraphBuilder, ShapeErrorIsReportedNotFatal) {
  auto context = test::makeContext();
  GraphBuilder b(*context, "bad");
  Tensor x = b.input("x", proto::F32, {2, 3}, proto::BATCH_INPUT);
  Tensor w = b.input("w", proto::F32, {4, 5}, proto::PARAMETER);
  Tensor y = b.matmul(x, w);
  EXPECT_FALSE(y);
  // Ops that depend on the failed one are skipped quietly.
  EXPECT_FALSE(b.relu(y));
  b.output("y", y, proto::LOSS);
  std::string message = test::errorOf(b.finish());
  EXPECT_EQ(message, "graph 'bad': 'kgraph.matmul': matmul contraction sizes "
                     "differ: 3 vs 4");
}

TEST(GraphBuilder, VerifierErrorsAreReportedToo) {
  auto context = test::makeContext();
  GraphBuilder b(*context, "bad");
  Tensor x = b.input("x", proto::F32, {2, 3}, proto::BATCH_INPUT);
  EXPECT_FALSE(b.reshape(x, {7}));
  EXPECT_EQ(
      test::errorOf(b.finish()),
      "graph 'bad': 'kgraph.reshape': 'kgraph.reshape' op cannot reshape 6 "
      "elements into 7");
}

TEST(GraphBuilder, ReplacingANonInputIsAnError) {
  auto context = test::makeContext();
  GraphBuilder b(*context, "bad");
  Tensor x = b.input("x", proto::F32, {2}, proto::PARAMETER);
  Tensor y = b.neg(x);
  b.output("y", y, proto::UPDATED_PARAMETER, y);
  EXPECT_EQ(test::errorOf(b.finish()),
            "graph 'bad': output 'y' replaces a value that is not an input");
}

TEST(GraphBuilder, CompositeLossRunsOnTheInterpreter) {
  auto context = test::makeContext();
  GraphBuilder b(*context, "xent");
  Tensor logits = b.input("logits", proto::F32, {2, 2}, proto::BATCH_INPUT);
  Tensor target = b.input("target", proto::I64, {2}, proto::BATCH_INPUT);
  GraphBuilder::NllLoss loss = b.nllLoss(b.logSoftmax(logits, 1), target);
  b.output("loss", loss.loss, proto::LOSS);
  auto module = b.finish();
  ASSERT_TRUE(static_cast<bool>(module));
  reference::HostTensor l(proto::F32, {2, 2});
  l.data = {0, 0, 10, 0};
  reference::HostTensor t(proto::I64, {2});
  t.data = {1, 0};
  auto out = reference::interpret(*graph::getStepFunction(**module), {l, t});
  ASSERT_TRUE(static_cast<bool>(out));
  // Row 0: log 2; row 1: log(1 + e^-10).
  EXPECT_NEAR(out->front().data[0],
              (std::log(2.0) + std::log1p(std::exp(-10.0))) / 2, 1e-6);
}

} // namespace

namespace {

TEST(Optimizers, StateInputsFollowTheSpec) {
  auto countStates = [](OptimizerSpec spec) {
    auto context = test::makeContext();
    GraphBuilder b(*context, "opt");
    Tensor w = b.input("w", proto::F32, {3}, proto::PARAMETER);
    Tensor lr = b.input("lr", proto::F32, {}, proto::HYPER_PARAMETER);
    Tensor step = b.input("step", proto::F32, {}, proto::HYPER_PARAMETER);
    addOptimizerUpdate(b, spec, "w", w, b.neg(w), lr, step);
    auto graph = b.finishGraph();
    EXPECT_TRUE(static_cast<bool>(graph));
    int states = 0;
    for (const proto::Input &input : graph->inputs()) {
      states += input.role() == proto::OPTIMIZER_STATE;
    }
    // Every state input is replaced by an output of the same name.
    for (const proto::Output &output : graph->outputs()) {
      EXPECT_EQ(graph->inputs(output.aliases_input()).name(), output.name());
    }
    return states;
  };
  OptimizerSpec sgd;
  sgd.kind = OptimizerSpec::Kind::SGD;
  EXPECT_EQ(countStates(sgd), 0);
  sgd.momentum = 0.9;
  EXPECT_EQ(countStates(sgd), 1);
  OptimizerSpec adam;
  adam.kind = OptimizerSpec::Kind::Adam;
  EXPECT_EQ(countStates(adam), 2);
  EXPECT_EQ(OptimizerSpec::parseKind("adamw"), OptimizerSpec::Kind::AdamW);
  EXPECT_EQ(OptimizerSpec::parseKind("lamb"), std::nullopt);
}

} // namespace
