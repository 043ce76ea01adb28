//===- Session.cpp - a compiled training step, resident on a NeuronCore ---===//

#include "runtime/session/Session.h"

#include "cache/CollectedGraphs.h"

#include "compiler/graph/GraphFile.h"
#include "compiler/target/FloatFormats.h"
#include "compiler/target/Isa.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace kiln::runtime {

using graph::dtypeName;
using graph::dtypeSize;

namespace {

bool envFlag(const char *name) {
  const char *value = std::getenv(name);
  return value && std::string(value) == "1";
}

double nowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t elementCount(const proto::TensorType &type) {
  int64_t n = 1;
  for (int64_t d : type.shape()) {
    n *= d;
  }
  return n;
}

/// ZeRO-1 keeps a worker's block of rows of each optimizer state tensor
/// (kgraph-data-parallel): `where` takes its buffer's shape when that is
/// the graph's with the first dimension divided by the group's size.
llvm::Error takeBlockShape(Session::Place &where, const kneff::Buffer &buffer,
                           int worldSize) {
  const auto &graph = where.type.shape();
  const auto &device = buffer.shape();
  int64_t deviceElements = 1;
  for (int64_t d : device) {
    deviceElements *= d;
  }
  // The device may lay a tensor out otherwise (a scalar as [1]).
  if (deviceElements == elementCount(where.type)) {
    return llvm::Error::success();
  }
  if (device.size() != graph.size() || device[0] * worldSize != graph[0] ||
      !std::equal(graph.begin() + 1, graph.end(), device.begin() + 1)) {
    return llvm::createStringError(
        "the artifact's buffer '" + buffer.name() +
        "' is not the graph's tensor or a block of its rows");
  }
  where.type.mutable_shape()->Assign(device.begin(), device.end());
  return llvm::Error::success();
}

/// The artifact runs only in the layout its collectives were compiled for:
/// a tensor-parallel program's all-reduces sum partial products of the
/// other shards, which another layout does not hold.
/// Only the groups the program's collectives use count: a graph without
/// them has one artifact for every layout. `job` is the layout the
/// session's communicators give (a session without a tensor-parallel
/// communicator is a group of one; one without a data-parallel
/// communicator may simulate a data-parallel program alone).
llvm::Error checkLayout(const artifact::Artifact &a, const CompileOptions &job,
                        bool dataGroupKnown) {
  const kneff::Manifest &m = a.manifest;
  int compiledTensor = std::max<int>(1, static_cast<int>(m.tensor_parallel()));
  int compiledData = std::max<int>(1, static_cast<int>(m.world_size()));
  bool usesData = false, usesTensor = false;
  for (const artifact::Stream &s : a.streams) {
    for (const isa::Instruction &inst : s.instructions) {
      if (inst.opcode == isa::Opcode::Collective) {
        bool tensor =
            isa::collectiveGroupOf(inst) == isa::CollectiveGroup::Tensor;
        usesTensor |= tensor;
        usesData |= !tensor;
      }
    }
  }
  if ((!usesTensor || compiledTensor == job.tensorParallel) &&
      (!usesData || !dataGroupKnown || compiledData == job.worldSize)) {
    return llvm::Error::success();
  }
  return llvm::createStringError(
      "the artifact was compiled for a job of " +
      std::to_string(compiledData) + " data-parallel x " +
      std::to_string(compiledTensor) +
      " tensor-parallel workers, but this job is laid out as " +
      std::to_string(job.worldSize) + " x " +
      std::to_string(job.tensorParallel) +
      "; compile the step for this layout");
}

/// The graph type of value `value` (inputs first, then node results).
std::optional<proto::TensorType> valueType(const proto::Graph &graph,
                                           uint32_t value) {
  if (value < static_cast<uint32_t>(graph.inputs_size())) {
    return graph.inputs(value).type();
  }
  uint32_t first = graph.inputs_size();
  for (const proto::Node &node : graph.nodes()) {
    if (value < first + node.results_size()) {
      return node.results(value - first);
    }
    first += node.results_size();
  }
  return std::nullopt;
}

/// The step's artifact from the cache at `options.cacheRoot`, compiled on a
/// miss. A root that is unusable (not a directory, unreachable, damaged) costs
/// the cache, not the run: the graph compiles in memory, with one warning a
/// process. A root spelled wrong (an unsupported URL scheme) or an unknown
/// KILN_CACHE_MODE is an error.
llvm::Expected<cache::Result> compileThroughCache(const proto::Graph &graph,
                                                  const SessionOptions &options,
                                                  cache::Stats &stats) {
  cache::CompileFunction compile = options.compiler;
  if (!compile) {
    compile = [](const proto::Graph &graph, const CompileOptions &) {
      return llvm::Expected<std::string>(llvm::createStringError(
          "graph '" + graph.name() +
          "' is not in the cache and this session was given no compiler"));
    };
  }
  std::string root = options.cacheRoot.empty() ? cache::Cache::defaultRoot()
                                               : options.cacheRoot;
  if (llvm::Error error = cache::checkRootUrl(root)) {
    return std::move(error);
  }
  if (auto mode = cache::cacheModeFromEnvironment(); !mode) {
    return mode.takeError(); // a spelling mistake, not an unusable root
  }
  auto cache = cache::Cache::open(root);
  if (!cache) {
    static std::atomic<bool> warned{false};
    std::string why = llvm::toString(cache.takeError());
    if (!warned.exchange(true)) {
      llvm::WithColor::warning(llvm::errs(), "kiln")
          << why << "; compiling in memory, nothing is cached\n";
    }
    auto result =
        cache::Cache::compileUncached(graph, options.compile, compile);
    ++stats.misses;
    if (result) {
      ++stats.compiles;
      ++stats.bypasses;
      stats.compileSeconds += result->compileSeconds;
    } else {
      ++stats.failures;
    }
    return result;
  }
  auto result = cache->getOrCompile(graph, options.compile, compile);
  stats = cache->stats();
  return result;
}

} // namespace

llvm::Expected<SessionOptions>
SessionOptions::fromEnvironment(SessionOptions base) {
  auto compile = CompileOptions::fromEnvironment(base.compile);
  if (!compile) {
    return compile.takeError();
  }
  base.compile = std::move(*compile);
  base.collectOnly = base.collectOnly || envFlag("KILN_EXTRACT_GRAPHS_ONLY");
  base.stochasticRounding =
      base.stochasticRounding || envFlag("KILN_STOCHASTIC_ROUNDING");
  if (base.graphsDir.empty()) {
    if (const char *dir = std::getenv("KILN_GRAPHS_DIR")) {
      base.graphsDir = dir;
    }
  }
  return base;
}

llvm::Expected<std::unique_ptr<Session>> Session::open(proto::Graph graph,
                                                       SessionOptions options) {
  std::unique_ptr<Session> session(new Session());
  session->source = std::move(graph);
  session->options = std::move(options);
  const proto::Graph &g = session->source;
  const SessionOptions &o = session->options;
  auto fail = [&](llvm::Error error) {
    return llvm::createStringError("graph '" + g.name() +
                                   "': " + llvm::toString(std::move(error)));
  };

  if (o.communicator && !o.collectOnly) {
    session->options.compile.worldSize = o.communicator->size();
  }
  if (o.tensorCommunicator && !o.collectOnly) {
    session->options.compile.tensorParallel = o.tensorCommunicator->size();
  }
  auto key = cache::deriveKey(g, o.compile);
  if (!key) {
    return fail(key.takeError());
  }
  session->cacheKey = std::move(*key);

  // The graph's type of every input and output.
  for (const proto::Input &input : g.inputs()) {
    session->places[input.name()] = {input.name(), input.type(), true};
  }
  for (const proto::Output &output : g.outputs()) {
    auto type = valueType(g, output.value());
    if (!type) {
      return fail(llvm::createStringError("output '" + output.name() +
                                          "' names no value"));
    }
    // An input keeps its own entry: read() of an updated parameter's input
    // name reads the updated value, which is what a caller wants.
    session->places.try_emplace(output.name(), Place{"", *type});
  }

  if (o.collectOnly) {
    auto dir = cache::collectedDirFor(o.graphsDir, o.cacheRoot);
    if (!dir) {
      return fail(dir.takeError());
    }
    if (llvm::Error error =
            cache::recordGraph(g, o.compile, session->cacheKey.hex, *dir)) {
      return fail(std::move(error));
    }
    return session;
  }

  auto result = compileThroughCache(g, o, session->stats);
  if (!result) {
    return result.takeError(); // the cache's errors name the graph and key
  }
  session->cacheOutcome = result->outcome;
  session->compileTime = result->compileSeconds;
  session->artifact =
      std::make_unique<artifact::Artifact>(std::move(result->artifact));
  CompileOptions job = session->options.compile;
  job.tensorParallel = o.tensorCommunicator ? o.tensorCommunicator->size() : 1;
  if (llvm::Error error =
          checkLayout(*session->artifact, job, o.communicator != nullptr)) {
    return fail(std::move(error));
  }

  // Where each input and output lives on the device.
  llvm::StringMap<const kneff::Buffer *> buffers;
  for (const kneff::Buffer &b : session->artifact->manifest.buffers()) {
    buffers[b.name()] = &b;
  }
  for (const proto::Input &input : g.inputs()) {
    if (!buffers.count(input.name())) {
      return fail(llvm::createStringError(
          "the artifact has no buffer for input '" + input.name() + "'"));
    }
  }
  for (const proto::Output &output : g.outputs()) {
    Place &where = session->places[output.name()];
    if (!where.buffer.empty()) {
      continue; // an input's own name
    }
    where.buffer = output.name();
    // Written in place into an input's buffer: updated parameters and state,
    // and outputs that return an input unchanged.
    if (!buffers.count(where.buffer)) {
      uint32_t value = output.value();
      if (output.aliases_input() >= 0) {
        where.buffer = g.inputs(output.aliases_input()).name();
      } else if (value < static_cast<uint32_t>(g.inputs_size())) {
        where.buffer = g.inputs(value).name();
      } else {
        return fail(llvm::createStringError(
            "the artifact has no buffer for output '" + output.name() + "'"));
      }
    }
  }
  for (auto &entry : session->places) {
    const kneff::Buffer &buffer = *buffers[entry.second.buffer];
    entry.second.deviceDtype = buffer.dtype();
    if (llvm::Error error = takeBlockShape(entry.second, buffer,
                                           session->options.compile.worldSize)) {
      return fail(std::move(error));
    }
  }

  sim::SimOptions simOptions;
  simOptions.checkHazards = o.checkHazards;
  simOptions.stochasticRounding = o.stochasticRounding;
  // The group size comes with the artifact (its manifest).
  simOptions.communicator = o.communicator.get();
  simOptions.tensorCommunicator = o.tensorCommunicator.get();
  session->simulator =
      std::make_unique<sim::Simulator>(*session->artifact, simOptions);
  return session;
}

llvm::Expected<const Session::Place *>
Session::place(llvm::StringRef name) const {
  auto it = places.find(name);
  if (it == places.end()) {
    return llvm::createStringError("graph '" + source.name() +
                                   "' has no input or output '" + name + "'");
  }
  return &it->second;
}

llvm::Expected<std::vector<int64_t>>
Session::shape(llvm::StringRef name) const {
  auto where = place(name);
  if (!where) {
    return where.takeError();
  }
  const auto &dims = (*where)->type.shape();
  return std::vector<int64_t>(dims.begin(), dims.end());
}

llvm::Error Session::setInput(llvm::StringRef name, llvm::StringRef bytes) {
  auto it = places.find(name);
  if (it == places.end() || !it->second.input) {
    return llvm::createStringError("graph '" + source.name() +
                                   "' has no input '" + name + "'");
  }
  const Place &where = it->second;
  size_t expected = elementCount(where.type) * dtypeSize(where.type.dtype());
  if (bytes.size() != expected) {
    return llvm::createStringError(
        "graph '" + source.name() + "': input '" + name + "' takes " +
        llvm::Twine(expected) + " bytes (" + dtypeName(where.type.dtype()) +
        "), got " + llvm::Twine(bytes.size()));
  }
  if (collecting()) {
    return llvm::Error::success();
  }
  auto device = toDevice(bytes, where.type.dtype(), where.deviceDtype,
                         "input '" + name.str() + "'");
  if (!device) {
    return device.takeError();
  }
  return simulator->setBuffer(name, *device ? llvm::StringRef(**device)
                                            : bytes);
}

llvm::Expected<StepStats> Session::run(llvm::StringRef tracePath) {
  ++stepCount;
  if (collecting()) {
    return StepStats{};
  }
  double start = nowSeconds();
  auto result = simulator->run();
  if (!result) {
    return llvm::createStringError("graph '" + source.name() + "', step " +
                                   llvm::Twine(stepCount) + ": " +
                                   llvm::toString(result.takeError()));
  }
  if (!result->hazards.empty()) {
    return llvm::createStringError(
        "graph '" + source.name() + "': the hazard checker found " +
        llvm::Twine(result->hazards.size()) +
        " unordered access pairs; first: " + result->hazards.front());
  }
  if (!tracePath.empty()) {
    if (llvm::Error error = sim::writeTrace(tracePath, *result)) {
      return std::move(error);
    }
  }
  return StepStats{result->makespanSeconds, result->mfu, nowSeconds() - start};
}

llvm::Expected<std::string> Session::read(llvm::StringRef name) const {
  auto where = place(name);
  if (!where) {
    return where.takeError();
  }
  if (collecting()) {
    return std::string(elementCount((*where)->type) *
                           dtypeSize((*where)->type.dtype()),
                       '\0');
  }
  auto bytes = simulator->getBuffer((*where)->buffer);
  if (!bytes) {
    return bytes.takeError();
  }
  return fromDevice(*bytes, (*where)->type.dtype(), (*where)->deviceDtype);
}

llvm::Expected<std::optional<std::string>>
toDevice(llvm::StringRef bytes, proto::DType dtype, uint32_t deviceDtype,
         llvm::StringRef what) {
  auto device = static_cast<isa::DType>(deviceDtype);
  switch (dtype) {
  case proto::I64: {
    std::string out(bytes.size() / 2, '\0');
    for (size_t i = 0; i < bytes.size() / 8; ++i) {
      int64_t value;
      std::memcpy(&value, bytes.data() + 8 * i, 8);
      if (value < INT32_MIN || value > INT32_MAX) {
        return llvm::createStringError(
            what + ": element " + llvm::Twine(i) + " (" + llvm::Twine(value) +
            ") does not fit the device's i32");
      }
      int32_t narrow = static_cast<int32_t>(value);
      std::memcpy(out.data() + 4 * i, &narrow, 4);
    }
    return out;
  }
  case proto::I1: {
    std::string out(bytes.size() * 4, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) {
      float value = bytes[i] ? 1.0f : 0.0f;
      std::memcpy(out.data() + 4 * i, &value, 4);
    }
    return out;
  }
  case proto::F32:
    if (device == isa::DType::BF16) { // an auto-cast input
      return numerics::f32BytesToBF16Bytes(bytes.data(), bytes.size());
    }
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

std::string fromDevice(llvm::StringRef bytes, proto::DType dtype,
                       uint32_t deviceDtype) {
  auto device = static_cast<isa::DType>(deviceDtype);
  switch (dtype) {
  case proto::I64: {
    std::string out(bytes.size() * 2, '\0');
    for (size_t i = 0; i < bytes.size() / 4; ++i) {
      int32_t narrow;
      std::memcpy(&narrow, bytes.data() + 4 * i, 4);
      int64_t value = narrow;
      std::memcpy(out.data() + 8 * i, &value, 8);
    }
    return out;
  }
  case proto::I1: {
    std::string out(bytes.size() / 4, '\0');
    for (size_t i = 0; i < out.size(); ++i) {
      float value;
      std::memcpy(&value, bytes.data() + 4 * i, 4);
      out[i] = value != 0.0f;
    }
    return out;
  }
  case proto::F32:
    if (device == isa::DType::BF16) {
      return numerics::bf16BytesToF32Bytes(bytes.data(), bytes.size());
    }
    return bytes.str();
  default:
    return bytes.str();
  }
}

} // namespace kiln::runtime
