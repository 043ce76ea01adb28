//===- RunCommand.cpp - kiln run ------------------------------------------===//
//
// Loads an artifact, binds its input buffers by name from .npz/.npy arrays,
// runs it on the NeuronCore simulator and writes its output buffers.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/graph/GraphFile.h"
#include "compiler/target/FloatFormats.h"
#include "runtime/io/Npz.h"
#include "runtime/sim/Simulator.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand runCommand("run", "Run an artifact on the NeuronCore simulator");
cl::opt<std::string> artifactPath(cl::Positional, cl::desc("<artifact.kneff>"),
                                  cl::Required, cl::sub(runCommand));
cl::list<std::string>
    inputPaths("inputs",
               cl::desc("Input arrays (.npz or .npy), by buffer name"),
               cl::CommaSeparated, cl::sub(runCommand));
cl::opt<std::string> outputPath("outputs",
                                cl::desc("Where to write outputs (.npz)"),
                                cl::sub(runCommand));
cl::opt<std::string>
    profilePath("profile",
                cl::desc("Write a Chrome/Perfetto trace of the engines"),
                cl::sub(runCommand));
cl::opt<bool> noHazards("no-hazard-check",
                        cl::desc("Skip the hazard checker (faster)"),
                        cl::sub(runCommand));
cl::opt<bool> stochastic(
    "stochastic-rounding", cl::desc("Round bf16 results stochastically"),
    cl::init(std::getenv("KILN_STOCHASTIC_ROUNDING") &&
             std::string(std::getenv("KILN_STOCHASTIC_ROUNDING")) == "1"),
    cl::sub(runCommand));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of stochastic rounding"),
                       cl::init(0), cl::sub(runCommand));

/// The graph-format dtype a buffer travels as in .npy files (bf16 as f32).
proto::DType fileDtype(isa::DType dtype) {
  switch (dtype) {
  case isa::DType::F32:
  case isa::DType::BF16:
    return proto::F32;
  case isa::DType::F16:
    return proto::F16;
  case isa::DType::I32:
    return proto::I32;
  }
  return proto::F32;
}

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  for (int64_t d : shape) {
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  }
  return "[" + s + "]";
}

int runRun() {
  auto artifact = artifact::loadArtifactFile(artifactPath);
  if (!artifact) {
    return reportError(artifact.takeError());
  }
  sim::SimOptions options;
  options.checkHazards = !noHazards;
  options.stochasticRounding = stochastic;
  options.seed = seed;
  sim::Simulator simulator(*artifact, options);

  llvm::StringMap<io::NpyArray> arrays;
  for (const std::string &path : inputPaths) {
    auto read = io::readArrays(path);
    if (!read) {
      return reportError(read.takeError());
    }
    for (io::NpyArray &a : *read) {
      std::string name = a.name;
      arrays[name] = std::move(a);
    }
  }
  for (const kneff::Buffer &b : artifact->manifest.buffers()) {
    if (b.role() != kneff::INPUT && b.role() != kneff::INOUT) {
      continue;
    }
    auto it = arrays.find(b.name());
    if (it == arrays.end()) {
      return reportError(llvm::createStringError(
          "input '" + b.name() + "' of '" + artifactPath +
          "' is missing from the inputs"));
    }
    auto dtype = static_cast<isa::DType>(b.dtype());
    llvm::ArrayRef<int64_t> shape(b.shape().data(), b.shape().size());
    if (it->second.dtype != fileDtype(dtype) ||
        llvm::ArrayRef<int64_t>(it->second.shape) != shape) {
      return reportError(llvm::createStringError(
          "input '" + b.name() + "': expected " + isa::dtypeName(dtype) +
          shapeText(shape) +
          (dtype == isa::DType::BF16 ? " (as float32)" : "") + ", got " +
          graph::dtypeName(it->second.dtype) + shapeText(it->second.shape)));
    }
    std::string bytes = dtype == isa::DType::BF16
                            ? numerics::f32BytesToBF16Bytes(it->second.data.data(), it->second.data.size())
                            : it->second.data;
    if (llvm::Error err = simulator.setBuffer(b.name(), bytes)) {
      return reportError(std::move(err));
    }
    arrays.erase(it);
  }
  if (!arrays.empty()) {
    return reportError(llvm::createStringError("input array '" +
                                               arrays.begin()->getKey() +
                                               "' matches no input buffer"));
  }

  auto result = simulator.run();
  if (!result) {
    return reportError(result.takeError());
  }
  llvm::outs() << llvm::format(
      "modelled time %.3f us; MFU %.2f%% (%.3g model FLOPs)\n",
      result->makespanSeconds * 1e6, result->mfu * 100, result->modelFlops);
  for (const sim::StreamStats &s : result->streams) {
    llvm::outs() << llvm::format("  %-8s %5zu instructions, busy %6.2f%%\n",
                                 s.name.c_str(), s.instructions,
                                 result->makespanSeconds > 0
                                     ? 100 * s.busySeconds /
                                           result->makespanSeconds
                                     : 0.0);
  }
  if (!profilePath.empty()) {
    if (llvm::Error err = sim::writeTrace(profilePath, *result)) {
      return reportError(std::move(err));
    }
  }
  if (!outputPath.empty()) {
    std::vector<io::NpyArray> outputs;
    for (const kneff::Buffer &b : artifact->manifest.buffers()) {
      if (b.role() != kneff::OUTPUT && b.role() != kneff::INOUT) {
        continue;
      }
      auto bytes = simulator.getBuffer(b.name());
      if (!bytes) {
        return reportError(bytes.takeError());
      }
      auto dtype = static_cast<isa::DType>(b.dtype());
      io::NpyArray a;
      a.name = b.name();
      a.dtype = fileDtype(dtype);
      a.shape.assign(b.shape().begin(), b.shape().end());
      a.data = dtype == isa::DType::BF16 ? numerics::bf16BytesToF32Bytes(bytes->data(), bytes->size()) : *bytes;
      outputs.push_back(std::move(a));
    }
    if (llvm::Error err = io::writeArrays(outputPath, outputs)) {
      return reportError(std::move(err));
    }
  }
  if (!result->hazards.empty()) {
    for (const std::string &h : result->hazards) {
      llvm::errs() << "kiln: hazard: " << h << "\n";
    }
    llvm::errs() << "kiln: error: " << result->hazards.size()
                 << " unordered cross-engine accesses (hazards) in '"
                 << artifactPath << "'\n";
    return InternalFailure;
  }
  return Success;
}

CommandRegistration registration(runCommand, runRun);

} // namespace
