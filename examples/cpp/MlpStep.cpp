//===- MlpStep.cpp - a 2-layer MLP training step built in C++ ------------===//

#include "examples/cpp/MlpStep.h"

#include "compiler/builder/GraphBuilder.h"

#include <string>
#include <vector>

namespace kiln::examples {

namespace {

struct Parameter {
  std::string name;
  Tensor value, grad;
};

} // namespace

llvm::Expected<proto::Graph> buildMlpTrainStep(mlir::MLIRContext &context,
                                               const MlpConfig &c) {
  GraphBuilder b(context, "mlp_train_step");
  Tensor x =
      b.input("x", proto::F32, {c.batch, c.features}, proto::BATCH_INPUT);
  Tensor y = b.input("y", proto::I64, {c.batch}, proto::BATCH_INPUT);
  std::vector<Parameter> params = {
      {"w1",
       b.input("w1", proto::F32, {c.hidden, c.features}, proto::PARAMETER),
       {}},
      {"b1", b.input("b1", proto::F32, {c.hidden}, proto::PARAMETER), {}},
      {"w2",
       b.input("w2", proto::F32, {c.classes, c.hidden}, proto::PARAMETER),
       {}},
      {"b2", b.input("b2", proto::F32, {c.classes}, proto::PARAMETER), {}}};
  Tensor w1 = params[0].value, b1 = params[1].value;
  Tensor w2 = params[2].value, b2 = params[3].value;

  // Forward and loss.
  Tensor h = b.linear(x, w1, b1);
  Tensor a = b.relu(h);
  Tensor logits = b.linear(a, w2, b2);
  Tensor logProbs = b.logSoftmax(logits, 1);
  GraphBuilder::NllLoss loss = b.nllLoss(logProbs, y);
  Tensor correct = b.reduceSum(
      b.cast(b.compare("eq", b.argmax(logits, 1), y), proto::I64), {0});

  // Backward.
  Tensor gLogProbs =
      b.nllLossBackward(b.scalar(1.0), logProbs, y, loss.totalWeight);
  Tensor gLogits = b.logSoftmaxBackward(gLogProbs, logProbs, 1);
  params[2].grad = b.matmul(gLogits, a, /*transposeA=*/true);
  params[3].grad = b.reduceSum(gLogits, {0});
  Tensor gA = b.matmul(gLogits, w2);
  Tensor gH = b.reluBackward(gA, h);
  params[0].grad = b.matmul(gH, x, /*transposeA=*/true);
  params[1].grad = b.reduceSum(gH, {0});

  b.output("loss", loss.loss, proto::LOSS);
  b.output("correct", correct, proto::METRIC);
  Tensor lr = b.input("lr", proto::F32, {}, proto::HYPER_PARAMETER);
  Tensor step = b.input("step", proto::F32, {}, proto::HYPER_PARAMETER);
  for (Parameter &p : params) {
    addOptimizerUpdate(b, c.optimizer, p.name, p.value, p.grad, lr, step);
  }
  return b.finishGraph();
}

llvm::Expected<proto::Graph> buildMlpPredict(mlir::MLIRContext &context,
                                             const MlpConfig &c) {
  GraphBuilder b(context, "mlp_predict");
  Tensor x =
      b.input("x", proto::F32, {c.batch, c.features}, proto::BATCH_INPUT);
  Tensor w1 =
      b.input("w1", proto::F32, {c.hidden, c.features}, proto::PARAMETER);
  Tensor b1 = b.input("b1", proto::F32, {c.hidden}, proto::PARAMETER);
  Tensor w2 =
      b.input("w2", proto::F32, {c.classes, c.hidden}, proto::PARAMETER);
  Tensor b2 = b.input("b2", proto::F32, {c.classes}, proto::PARAMETER);
  Tensor logits = b.linear(b.relu(b.linear(x, w1, b1)), w2, b2);
  b.output("prediction", b.argmax(logits, 1), proto::METRIC);
  return b.finishGraph();
}

} // namespace kiln::examples
