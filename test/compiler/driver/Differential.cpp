//===- Differential.cpp - compiled step vs reference interpreter ----------===//

#include "test/compiler/driver/Differential.h"

#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphConversion.h"
#include "compiler/reference/Interpreter.h"
#include "compiler/target/Elements.h"
#include "runtime/sim/Simulator.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace kiln::testing {

namespace {

using reference::HostTensor;

proto::DType graphType(mlir::Type t) {
  if (t.isF32()) {
    return proto::F32;
  }
  if (t.isBF16()) {
    return proto::BF16;
  }
  if (t.isF16()) {
    return proto::F16;
  }
  if (t.isInteger(1)) {
    return proto::I1;
  }
  if (t.isInteger(32)) {
    return proto::I32;
  }
  return proto::I64;
}

/// The bytes of `t` in a buffer of device type `dtype`.
std::string deviceBytes(const HostTensor &t, isa::DType dtype) {
  std::string out(t.data.size() * isa::dtypeBytes(dtype), '\0');
  for (size_t i = 0; i < t.data.size(); ++i) {
    isa::encodeElement(dtype, t.data[i], out.data() + i * isa::dtypeBytes(dtype));
  }
  return out;
}

/// The first buffer whose bytes differ between the two simulators, and
/// where, after a run; empty if none.
std::string differingBuffer(const artifact::Artifact &artifact,
                            const sim::Simulator &a, const sim::Simulator &b,
                            llvm::StringRef run) {
  for (const kneff::Buffer &buffer : artifact.manifest.buffers()) {
    auto x = a.getBuffer(buffer.name()), y = b.getBuffer(buffer.name());
    if (!x || !y) {
      llvm::consumeError(x.takeError());
      llvm::consumeError(y.takeError());
      return "buffer '" + buffer.name() + "' cannot be read";
    }
    if (*x != *y) {
      auto at = std::mismatch(x->begin(), x->end(), y->begin()).first;
      return ("replay and event-driven runs differ after the " + run +
              " run: buffer '" + buffer.name() + "' byte " +
              llvm::Twine(at - x->begin()))
          .str();
    }
  }
  return "";
}

/// Runs `eventDriven` once, then both simulators a second time (`replayed`
/// then replays its first run's schedule), comparing every buffer after
/// each (`replayed` has run once).
std::string compareExecutionPaths(const artifact::Artifact &artifact,
                                  sim::Simulator &replayed,
                                  sim::Simulator &eventDriven) {
  auto first = eventDriven.run();
  if (!first) {
    return "the event-driven run fails: " + llvm::toString(first.takeError());
  }
  if (std::string d = differingBuffer(artifact, replayed, eventDriven, "first");
      !d.empty()) {
    return d;
  }
  auto second = replayed.run();
  if (!second) {
    return "the replayed run fails: " + llvm::toString(second.takeError());
  }
  auto secondEvent = eventDriven.run();
  if (!secondEvent) {
    return "the second event-driven run fails: " +
           llvm::toString(secondEvent.takeError());
  }
  if (second->makespanSeconds != secondEvent->makespanSeconds) {
    return "replay reports another modelled time than the event-driven run";
  }
  return differingBuffer(artifact, replayed, eventDriven, "second");
}

} // namespace

llvm::Expected<DiffReport> compileAndCompare(const proto::Graph &graph,
                                             const DiffOptions &options) {
  // Every pass's output verified: a pass that breaks an invariant fails
  // here, where it happened, not as a wrong number later.
  CompileHooks hooks;
  hooks.verifyEachPass = true;
  auto artifact = compile(graph, options.compile, hooks);
  if (!artifact) {
    return artifact.takeError();
  }
  mlir::MLIRContext context;
  prepareContext(context);
  auto module = graph::importGraph(graph, context);
  if (!module) {
    return module.takeError();
  }
  auto func = graph::getStepFunction(**module);
  if (!func) {
    return func.takeError();
  }

  // Inputs, each from a generator seeded by its name: a graph that the
  // C++ compiler building the tests declared in another order (inputs made
  // inside another call's arguments) still gets the same values.
  std::vector<HostTensor> inputs;
  llvm::StringMap<size_t> inputIndex;
  for (auto [i, type] : llvm::enumerate(func->getArgumentTypes())) {
    auto tensor = llvm::cast<mlir::RankedTensorType>(type);
    auto name = func->getArgAttrOfType<mlir::StringAttr>(i, "kgraph.name");
    proto::DType dtype = graphType(tensor.getElementType());
    HostTensor t(dtype, reference::Shape(tensor.getShape()));
    bool floating = reference::isFloat(dtype);
    Range range = floating ? options.floats : options.integers;
    if (name && options.ranges.count(name.getValue())) {
      range = options.ranges.lookup(name.getValue());
    }
    llvm::StringRef key = name ? name.getValue() : llvm::StringRef();
    std::mt19937_64 rng(options.seed ^ llvm::xxh3_64bits(key));
    std::uniform_real_distribution<double> uniform(range.lo, range.hi);
    for (double &v : t.data) {
      v = uniform(rng);
      v = floating ? reference::roundTo(dtype, v) : std::floor(v);
      if (dtype == proto::I1) {
        v = v != 0.0;
      }
    }
    inputIndex[name ? name.getValue() : ""] = inputs.size();
    inputs.push_back(std::move(t));
  }
  auto expected = reference::interpret(*func, inputs);
  if (!expected) {
    return expected.takeError();
  }

  // The replay path (what training runs) and the event-driven path must
  // leave every buffer bit for bit the same, on the first run (which
  // schedules) and on the second (which replays; its inputs are the first
  // run's updates).
  sim::SimOptions simOptions;
  simOptions.checkHazards = true;
  sim::Simulator simulator(*artifact, simOptions);
  simOptions.path = sim::ExecutionPath::EventDriven;
  simOptions.checkHazards = false; // no effect on results; checked above
  sim::Simulator eventDriven(*artifact, simOptions);
  for (const kneff::Buffer &b : artifact->manifest.buffers()) {
    if (b.role() != kneff::INPUT && b.role() != kneff::INOUT) {
      continue;
    }
    auto it = inputIndex.find(b.name());
    if (it == inputIndex.end()) {
      return llvm::createStringError("artifact input '" + b.name() +
                                     "' is not a graph input");
    }
    auto dtype = static_cast<isa::DType>(b.dtype());
    std::string bytes = deviceBytes(inputs[it->second], dtype);
    if (auto err = simulator.setBuffer(b.name(), bytes)) {
      return std::move(err);
    }
    if (auto err = eventDriven.setBuffer(b.name(), bytes)) {
      return std::move(err);
    }
  }
  auto result = simulator.run();
  if (!result) {
    return result.takeError();
  }
  llvm::StringMap<std::string> outputs;
  for (const kneff::Buffer &b : artifact->manifest.buffers()) {
    auto bytes = simulator.getBuffer(b.name());
    if (!bytes) {
      return bytes.takeError();
    }
    outputs[b.name()] = std::move(*bytes);
  }
  std::string pathsDiffer =
      compareExecutionPaths(*artifact, simulator, eventDriven);
  DiffReport report;
  report.hazards = result->hazards.size();
  report.modelledSeconds = result->makespanSeconds;
  report.hbmBytes = artifact->manifest.hbm_bytes();
  for (const artifact::Stream &s : artifact->streams) {
    report.instructions += s.instructions.size();
  }
  if (!result->hazards.empty()) {
    report.worst = "hazard: " + result->hazards.front();
  }
  for (auto [r, type] : llvm::enumerate(func->getResultTypes())) {
    auto name = func->getResultAttrOfType<mlir::StringAttr>(r, "kgraph.name");
    const std::string *bytes = &outputs[name.getValue()];
    isa::DType dtype = isa::DType::F32;
    for (const kneff::Buffer &b : artifact->manifest.buffers()) {
      if (b.name() == name.getValue()) {
        dtype = static_cast<isa::DType>(b.dtype());
      }
    }
    const HostTensor &want = (*expected)[r];
    for (size_t i = 0; i < want.data.size(); ++i) {
      double got = isa::decodeElement(
                     dtype, bytes->data() + i * isa::dtypeBytes(dtype)),
             ref = want.data[i];
      double excess;
      if (std::isnan(ref) || std::isnan(got)) {
        excess = std::isnan(ref) && std::isnan(got) ? 0.0 : INFINITY;
      } else if (std::isinf(ref) || std::isinf(got)) {
        excess = got == ref ? 0.0 : INFINITY;
      } else {
        excess = std::fabs(got - ref) /
                 (options.atol + options.rtol * std::fabs(ref));
      }
      if (excess > report.worstExcess) {
        report.worstExcess = excess;
        report.worst = (name.getValue() + "[" + llvm::Twine(i) + "]: sim " +
                        std::to_string(got) + " vs reference " +
                        std::to_string(ref))
                           .str();
      }
    }
  }
  if (!pathsDiffer.empty()) {
    report.worstExcess = INFINITY;
    report.worst = pathsDiffer;
  }
  return report;
}

} // namespace kiln::testing
