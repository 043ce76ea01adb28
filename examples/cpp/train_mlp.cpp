//===- train_mlp.cpp - a C++ trainer on the NeuronCore simulator ----------===//
//
// What a C++ training program looks like with Kiln's installed API
// (`find_package(Kiln)`, docs/build.md): build the step with GraphBuilder,
// open a Session on it (the cache serves the artifact, or the compiler it is
// handed builds one on a miss), bind the parameters once, then feed batches
// and read the loss. The compiled step updates parameters and optimizer
// state in place on the simulated NeuronCore.
//
// With --check, every step also runs on the kgraph reference interpreter
// from the same inputs, and the program fails if the two losses differ by
// more than --tolerance (relative).
//
//   kiln-example-train-mlp [--data DIR | --synthetic] [--steps N] [--check]
//
//===----------------------------------------------------------------------===//

#include "examples/cpp/FashionMnist.h"
#include "examples/cpp/MlpStep.h"

#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphConversion.h"
#include "compiler/reference/Interpreter.h"
#include "runtime/session/Session.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <random>

namespace cl = llvm::cl;
using namespace kiln;

static cl::opt<std::string>
    dataDir("data", cl::desc("Fashion-MNIST directory"),
            cl::init("/usr/share/datasets/fashion-mnist"));
static cl::opt<bool>
    synthetic("synthetic",
              cl::desc("Train on generated clusters instead of Fashion-MNIST"));
static cl::opt<int> steps("steps", cl::desc("Training steps"), cl::init(300));
static cl::opt<int> batch("batch", cl::desc("Batch size"), cl::init(64));
static cl::opt<int> hidden("hidden", cl::desc("Hidden units"), cl::init(128));
static cl::opt<double> learningRate("lr", cl::desc("AdamW learning rate"),
                                    cl::init(1e-3));
static cl::opt<std::string> cacheRoot("cache",
                                      cl::desc("Cache root (default: "
                                               "KILN_CACHE_URL, ~/.cache/kiln)"));
static cl::opt<bool> check("check",
                           cl::desc("Check each step's loss against the "
                                    "reference interpreter"));
static cl::opt<double> tolerance("tolerance",
                                 cl::desc("Relative loss difference --check "
                                          "accepts"),
                                 cl::init(1e-4));

namespace {

/// One f32 or i64 tensor as the session takes it: bytes in the graph's dtype.
template <typename T> llvm::StringRef bytesOf(const std::vector<T> &values) {
  return {reinterpret_cast<const char *>(values.data()),
          values.size() * sizeof(T)};
}

/// PyTorch's default Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
std::vector<float> uniformInit(int64_t count, int64_t fanIn,
                               std::mt19937 &rng) {
  float bound = 1.0f / std::sqrt(static_cast<float>(fanIn));
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> values(count);
  for (float &v : values) {
    v = dist(rng);
  }
  return values;
}

/// Ten overlapping Gaussian clusters in 784 dimensions: a data set any
/// machine has, on which the loss falls but stays well above zero.
examples::Dataset syntheticData(int64_t count, std::mt19937 &rng) {
  examples::Dataset data;
  data.count = count;
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::normal_distribution<float> centre(0.0f, 0.05f);
  std::vector<float> centres(10 * 784);
  for (float &c : centres) {
    c = centre(rng);
  }
  for (int64_t i = 0; i < count; ++i) {
    int label = static_cast<int>(i % 10);
    data.labels.push_back(label);
    for (int64_t f = 0; f < 784; ++f) {
      data.images.push_back(centres[label * 784 + f] + noise(rng));
    }
  }
  return data;
}

/// The step on the reference interpreter, fed what the session is fed and
/// keeping its own copy of the parameters and optimizer state.
class ReferenceStep {
public:
  static llvm::Expected<std::unique_ptr<ReferenceStep>>
  create(const proto::Graph &graph, mlir::MLIRContext &context) {
    auto module = graph::importGraph(graph, context);
    if (!module) {
      return module.takeError();
    }
    std::unique_ptr<ReferenceStep> step(new ReferenceStep(graph));
    step->module = std::move(*module);
    step->function = *graph::getStepFunction(*step->module);
    for (mlir::BlockArgument arg : step->function.getArguments()) {
      step->inputs.push_back(reference::zerosOfType(arg.getType()));
    }
    return step;
  }

  template <typename T> void set(llvm::StringRef name, const std::vector<T> &v) {
    reference::HostTensor &t = inputs[indexOf(name)];
    std::copy(v.begin(), v.end(), t.data.begin());
  }

  /// Runs one step and returns its loss.
  llvm::Expected<double> run() {
    auto outputs = reference::interpret(function, inputs);
    if (!outputs) {
      return outputs.takeError();
    }
    for (int i = 0; i < graph.outputs_size(); ++i) {
      if (graph.outputs(i).role() == proto::UPDATED_PARAMETER ||
          graph.outputs(i).role() == proto::UPDATED_STATE) {
        inputs[graph.outputs(i).aliases_input()] = std::move((*outputs)[i]);
      }
    }
    return (*outputs)[0].data[0];
  }

private:
  explicit ReferenceStep(const proto::Graph &graph) : graph(graph) {}
  size_t indexOf(llvm::StringRef name) const {
    for (int i = 0; i < graph.inputs_size(); ++i) {
      if (graph.inputs(i).name() == name) {
        return i;
      }
    }
    llvm::report_fatal_error("the step has no input named " + name);
  }

  proto::Graph graph;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp function;
  std::vector<reference::HostTensor> inputs;
};

int fail(llvm::Error error) {
  llvm::errs() << "kiln-example-train-mlp: error: "
               << llvm::toString(std::move(error)) << "\n";
  return 1;
}

llvm::Expected<float> readScalar(const runtime::Session &session,
                                 llvm::StringRef name) {
  auto bytes = session.read(name);
  if (!bytes) {
    return bytes.takeError();
  }
  float value;
  std::memcpy(&value, bytes->data(), sizeof value);
  return value;
}

} // namespace

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv,
                              "Train an MLP on Kiln's NeuronCore simulator\n");
  std::mt19937 rng(0);
  llvm::Expected<examples::Dataset> data =
      synthetic ? syntheticData(4096, rng)
                : examples::readFashionMnist(dataDir, "train");
  if (!data) {
    return fail(data.takeError());
  }
  mlir::MLIRContext context;
  examples::MlpConfig config;
  config.batch = batch;
  config.hidden = hidden;
  auto graph = examples::buildMlpTrainStep(context, config);
  if (!graph) {
    return fail(graph.takeError());
  }

  runtime::SessionOptions base;
  base.compiler = kiln::compileToBytes;
  base.cacheRoot = cacheRoot;
  auto options = runtime::SessionOptions::fromEnvironment(std::move(base));
  if (!options) {
    return fail(options.takeError());
  }
  auto session = runtime::Session::open(*graph, std::move(*options));
  if (!session) {
    return fail(session.takeError());
  }
  llvm::outs() << "step " << graph->name() << ": "
               << ((*session)->outcome() == cache::Outcome::Hit
                       ? "from the cache"
                       : "compiled")
               << llvm::format(" (%.3f s), HBM %.1f MB\n",
                               (*session)->compileSeconds(),
                               (*session)->hbmBytes() / 1e6);
  std::unique_ptr<ReferenceStep> reference;
  if (check) {
    auto created = ReferenceStep::create(*graph, context);
    if (!created) {
      return fail(created.takeError());
    }
    reference = std::move(*created);
  }

  // Parameters once; the step keeps them on the device from then on.
  auto bind = [&](llvm::StringRef name, const auto &values) -> llvm::Error {
    if (reference) {
      reference->set(name, values);
    }
    return (*session)->setInput(name, bytesOf(values));
  };
  std::vector<std::pair<std::string, std::vector<float>>> parameters = {
      {"w1", uniformInit(config.hidden * 784, 784, rng)},
      {"b1", uniformInit(config.hidden, 784, rng)},
      {"w2", uniformInit(config.classes * config.hidden, config.hidden, rng)},
      {"b2", uniformInit(config.classes, config.hidden, rng)},
      {"lr", {static_cast<float>(learningRate.getValue())}}};
  // The optimizer state starts at zero.
  for (const proto::Input &input : graph->inputs()) {
    if (input.role() == proto::OPTIMIZER_STATE) {
      int64_t count = 1;
      for (int64_t size : input.type().shape()) {
        count *= size;
      }
      parameters.emplace_back(input.name(), std::vector<float>(count, 0.0f));
    }
  }
  for (const auto &[name, values] : parameters) {
    if (llvm::Error err = bind(name, values)) {
      return fail(std::move(err));
    }
  }

  std::vector<float> x(config.batch * 784);
  std::vector<int64_t> y(config.batch);
  double worst = 0, first = 0, windowLoss = 0;
  for (int step = 1; step <= steps; ++step) {
    for (int64_t r = 0; r < config.batch; ++r) {
      int64_t sample = ((step - 1) * config.batch + r) % data->count;
      std::copy_n(data->images.begin() + sample * 784, 784,
                  x.begin() + r * 784);
      y[r] = data->labels[sample];
    }
    std::vector<float> stepNumber = {static_cast<float>(step)};
    if (llvm::Error err = llvm::joinErrors(
            bind("x", x), llvm::joinErrors(bind("y", y),
                                           bind("step", stepNumber)))) {
      return fail(std::move(err));
    }
    auto stats = (*session)->run();
    if (!stats) {
      return fail(stats.takeError());
    }
    auto loss = readScalar(**session, "loss");
    if (!loss) {
      return fail(loss.takeError());
    }
    if (reference) {
      auto expected = reference->run();
      if (!expected) {
        return fail(expected.takeError());
      }
      // Relative, but losses near zero are compared to 1e-2.
      double difference = std::fabs(*loss - *expected) /
                          std::max(std::fabs(*expected), 1e-2);
      worst = std::max(worst, difference);
      if (difference > tolerance) {
        return fail(llvm::createStringError(llvm::formatv(
            "step {0}: loss {1} on the simulator, {2} on the reference "
            "interpreter",
            step, *loss, *expected)));
      }
    }
    first = step == 1 ? *loss : first;
    windowLoss += *loss;
    if (step % 50 == 0 || step == steps) {
      int window = step % 50 == 0 ? 50 : step % 50;
      llvm::outs() << llvm::format(
          "step %4d  loss %.4f  (modelled %.3f ms, MFU %.1f %%)\n", step,
          windowLoss / window, stats->modelledSeconds * 1e3, stats->mfu * 100);
      windowLoss = 0;
    }
  }
  auto last = readScalar(**session, "loss");
  if (!last) {
    return fail(last.takeError());
  }
  const cache::Stats &cacheStats = (*session)->cacheStats();
  llvm::outs() << llvm::format("first loss %.4f, last loss %.4f", first,
                               *last);
  if (reference) {
    llvm::outs() << llvm::format(", largest difference from the reference "
                                 "interpreter %.2e",
                                 worst);
  }
  llvm::outs() << "\ncompiles " << cacheStats.compiles << ", cache hits "
               << cacheStats.hits << "\n";
  return 0;
}
