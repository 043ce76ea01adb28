//===- train_mlp_reference.cpp - train an MLP on Fashion-MNIST -----------===//
//
// The C++ path end to end, before the compiler exists: build the training
// step with GraphBuilder, write it as .kgraph.pb, read it back, and train on
// Fashion-MNIST by running the step on Kiln's reference interpreter, feeding
// each updated parameter back to the input it replaces.
//
//   kiln-example-mlp [--data DIR] [--steps N] [--batch B] [--out DIR]
//   kiln-example-mlp --emit-graph mlp.kgraph.pb [--batch B --hidden H ...]
//
//===----------------------------------------------------------------------===//

#include "examples/cpp/FashionMnist.h"
#include "examples/cpp/MlpStep.h"

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "compiler/reference/Interpreter.h"
#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

namespace cl = llvm::cl;
using namespace kiln;
using reference::HostTensor;

static cl::opt<std::string>
    dataDir("data", cl::desc("Fashion-MNIST directory"),
            cl::init("/usr/share/datasets/fashion-mnist"));
static cl::opt<int> steps("steps", cl::desc("Training steps"), cl::init(1800));
static cl::opt<int> batch("batch", cl::desc("Batch size"), cl::init(100));
static cl::opt<int> hidden("hidden", cl::desc("Hidden units"), cl::init(128));
static cl::opt<int> features("features",
                             cl::desc("Input features (with --emit-graph)"),
                             cl::init(784));
static cl::opt<int> classes("classes", cl::desc("Classes (with --emit-graph)"),
                            cl::init(10));
static cl::opt<double> learningRate("lr", cl::desc("AdamW learning rate"),
                                    cl::init(1e-3));
static cl::opt<std::string> outDir("out", cl::desc("Where to write the graphs"),
                                   cl::init("build/examples/mlp"));
static cl::opt<std::string>
    optimizer("optimizer", cl::desc("sgd, adam or adamw"), cl::init("adamw"));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum"),
                                cl::init(0.0));
static cl::opt<double> dampening("dampening", cl::desc("SGD dampening"),
                                 cl::init(0.0));
static cl::opt<bool> nesterov("nesterov",
                              cl::desc("SGD with Nesterov momentum"));
static cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay"),
                                   cl::init(0.01));
static cl::opt<std::string>
    emitGraph("emit-graph",
              cl::desc("Only write the training-step graph to this file"));

namespace {

int fail(llvm::Error error) {
  llvm::errs() << "kiln-example-mlp: error: "
               << llvm::toString(std::move(error)) << "\n";
  return 2;
}

/// Writes `graph` under outDir, reads it back and imports it: the example
/// goes through the same file format as every other front end.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
roundTrip(const proto::Graph &graph, mlir::MLIRContext &context) {
  std::string path = outDir + "/" + graph.name() + ".kgraph.pb";
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir)) {
    return llvm::createStringError(ec, "cannot create '" + outDir + "'");
  }
  if (llvm::Error err = graph::writeGraphFile(graph, path)) {
    return std::move(err);
  }
  auto reread = graph::readGraphFile(path);
  if (!reread) {
    return reread.takeError();
  }
  auto hash = graph::graphHash(*reread);
  if (!hash) {
    return hash.takeError();
  }
  llvm::outs() << "graph " << graph.name() << ": " << graph.nodes_size()
               << " nodes, written to " << path << ", hash "
               << hash->substr(0, 16) << "\n";
  return graph::importGraph(*reread, context);
}

/// PyTorch's default Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
HostTensor uniformInit(reference::Shape shape, int64_t fanIn,
                       std::mt19937 &rng) {
  HostTensor t(proto::F32, std::move(shape));
  double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (double &v : t.data) {
    v = dist(rng);
  }
  return t;
}

void fillBatch(const examples::Dataset &data, const std::vector<int64_t> &order,
               int64_t first, HostTensor &x, HostTensor *y) {
  int64_t rows = x.shape[0];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t sample = order[(first + r) % order.size()];
    std::copy_n(data.images.begin() + sample * 784, 784,
                x.data.begin() + r * 784);
    if (y) {
      y->data[r] = static_cast<double>(data.labels[sample]);
    }
  }
}

/// How many of `test`'s images the predict function, with `inputs` bound
/// (the image slot is filled batch by batch), classifies right.
llvm::Expected<int64_t> countCorrect(mlir::func::FuncOp predictFn,
                                     std::vector<HostTensor> &inputs,
                                     const examples::Dataset &test,
                                     int64_t batchSize) {
  std::vector<int64_t> order(test.count);
  std::iota(order.begin(), order.end(), 0);
  int64_t right = 0;
  for (int64_t first = 0; first < test.count; first += batchSize) {
    fillBatch(test, order, first, inputs[0], nullptr);
    auto outputs = reference::interpret(predictFn, inputs);
    if (!outputs) {
      return outputs.takeError();
    }
    for (int64_t r = 0; r < batchSize; ++r) {
      right += (*outputs)[0].data[r] == test.labels[first + r];
    }
  }
  return right;
}

} // namespace

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv,
                              "Train an MLP on Fashion-MNIST with "
                              "Kiln's reference interpreter\n");
  mlir::MLIRContext context;
  examples::MlpConfig config;
  config.batch = batch;
  config.hidden = hidden;
  std::optional<OptimizerSpec::Kind> kind = OptimizerSpec::parseKind(optimizer);
  if (!kind) {
    return fail(llvm::createStringError("unknown optimizer '" + optimizer +
                                        "' (sgd, adam or adamw)"));
  }
  config.optimizer.kind = *kind;
  config.optimizer.momentum = momentum;
  config.optimizer.dampening = dampening;
  config.optimizer.nesterov = nesterov;
  config.optimizer.weightDecay = weightDecay;
  if (!emitGraph.empty()) {
    config.features = features;
    config.classes = classes;
    auto graph = examples::buildMlpTrainStep(context, config);
    if (!graph) {
      return fail(graph.takeError());
    }
    if (llvm::Error err = graph::writeGraphFile(*graph, emitGraph)) {
      return fail(std::move(err));
    }
    return 0;
  }

  auto train = examples::readFashionMnist(dataDir, "train");
  if (!train) {
    return fail(train.takeError());
  }
  auto test = examples::readFashionMnist(dataDir, "t10k");
  if (!test) {
    return fail(test.takeError());
  }
  llvm::outs() << "Fashion-MNIST: " << train->count << " training and "
               << test->count << " test images\n";

  auto stepGraph = examples::buildMlpTrainStep(context, config);
  if (!stepGraph) {
    return fail(stepGraph.takeError());
  }
  examples::MlpConfig evalConfig = config;
  evalConfig.batch = 1000;
  auto predictGraph = examples::buildMlpPredict(context, evalConfig);
  if (!predictGraph) {
    return fail(predictGraph.takeError());
  }
  auto stepModule = roundTrip(*stepGraph, context);
  if (!stepModule) {
    return fail(stepModule.takeError());
  }
  auto predictModule = roundTrip(*predictGraph, context);
  if (!predictModule) {
    return fail(predictModule.takeError());
  }
  mlir::func::FuncOp stepFn = *graph::getStepFunction(**stepModule);
  mlir::func::FuncOp predictFn = *graph::getStepFunction(**predictModule);

  // Inputs in the step function's order; names say which is which.
  std::mt19937 rng(0);
  std::vector<HostTensor> inputs;
  for (mlir::BlockArgument arg : stepFn.getArguments()) {
    inputs.push_back(reference::zerosOfType(arg.getType()));
  }
  auto indexOf = [&](llvm::StringRef name) {
    for (unsigned i = 0; i < stepFn.getNumArguments(); ++i) {
      if (stepFn.getArgAttrOfType<mlir::StringAttr>(i, kgraph::kNameAttr)
              .getValue() == name) {
        return i;
      }
    }
    llvm::report_fatal_error("no input named " + name);
  };
  inputs[indexOf("w1")] = uniformInit({config.hidden, 784}, 784, rng);
  inputs[indexOf("b1")] = uniformInit({config.hidden}, 784, rng);
  inputs[indexOf("w2")] =
      uniformInit({config.classes, config.hidden}, config.hidden, rng);
  inputs[indexOf("b2")] = uniformInit({config.classes}, config.hidden, rng);
  inputs[indexOf("lr")].data[0] = learningRate;

  std::vector<int64_t> order(train->count);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  auto start = std::chrono::steady_clock::now();
  double lossSum = 0, correctSum = 0;
  int window = 0;
  for (int step = 1; step <= steps; ++step) {
    fillBatch(*train, order, (step - 1) * config.batch, inputs[indexOf("x")],
              &inputs[indexOf("y")]);
    inputs[indexOf("step")].data[0] = step;
    auto outputs = reference::interpret(stepFn, inputs);
    if (!outputs) {
      return fail(outputs.takeError());
    }
    for (unsigned i = 0; i < outputs->size(); ++i) {
      if (auto alias = stepFn.getResultAttrOfType<mlir::IntegerAttr>(
              i, kgraph::kAliasesAttr)) {
        inputs[alias.getInt()] = std::move((*outputs)[i]);
      }
    }
    lossSum += (*outputs)[0].data[0];
    correctSum += (*outputs)[1].data[0];
    ++window;
    if (step % 50 == 0 || step == steps) {
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      llvm::outs() << llvm::format("step %5d  loss %.4f  train acc %.3f  "
                                   "(%.1f steps/s)\n",
                                   step, lossSum / window,
                                   correctSum / (window * config.batch),
                                   step / seconds);
      lossSum = correctSum = 0;
      window = 0;
    }
  }

  std::vector<HostTensor> evalInputs;
  for (mlir::BlockArgument arg : predictFn.getArguments()) {
    evalInputs.push_back(reference::zerosOfType(arg.getType()));
  }
  for (unsigned i = 1; i < predictFn.getNumArguments(); ++i) {
    llvm::StringRef name =
        predictFn.getArgAttrOfType<mlir::StringAttr>(i, kgraph::kNameAttr)
            .getValue();
    evalInputs[i] = inputs[indexOf(name)];
  }
  auto right = countCorrect(predictFn, evalInputs, *test, evalConfig.batch);
  if (!right) {
    return fail(right.takeError());
  }
  llvm::outs() << llvm::format("test accuracy: %.4f (%lld of %lld)\n",
                               static_cast<double>(*right) / test->count,
                               static_cast<long long>(*right),
                               static_cast<long long>(test->count));
  return 0;
}
