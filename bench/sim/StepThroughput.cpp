//===- StepThroughput.cpp - host time of simulated training steps ---------===//
//
// How long this host takes to run compiled steps on the simulator: for each
// artifact, the wall time of a step and per instruction on the replay path
// (what training runs) and on the event-driven path (what traces and tests
// run), then where the replay path's time goes, by opcode. Inputs are
// random (f32 and bf16 in [-1, 1), integers 0), which every index accepts.
//
//   OMP_NUM_THREADS=1 build/bin/kiln-bench-sim-step [--runs N] a.kneff ...
//
// Artifacts to try: any in a cache's kiln-1/objects (TrainingBench.py's
// models, the examples' steps).
//
//===----------------------------------------------------------------------===//

#include "compiler/target/FloatFormats.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/sim/Simulator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

using namespace kiln;

namespace {

// The benchmark's own options; --help hides those of the libraries it links.
llvm::cl::OptionCategory benchOptions("kiln-bench-sim-step options");
llvm::cl::list<std::string> artifactPaths(llvm::cl::Positional,
                                          llvm::cl::desc("<artifact.kneff>..."),
                                          llvm::cl::OneOrMore,
                                          llvm::cl::cat(benchOptions));
llvm::cl::opt<int> runs("runs", llvm::cl::desc("Timed runs per path"),
                        llvm::cl::init(20), llvm::cl::cat(benchOptions));
llvm::cl::opt<bool> timeEventDriven(
    "event-driven", llvm::cl::desc("Time the event-driven path too"),
    llvm::cl::init(true), llvm::cl::cat(benchOptions));

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string randomBytes(const kneff::Buffer &b, std::mt19937 &gen) {
  int64_t count = 1;
  for (int64_t d : b.shape()) {
    count *= d;
  }
  auto dtype = static_cast<isa::DType>(b.dtype());
  std::string bytes(count * isa::dtypeBytes(dtype), '\0');
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < count; ++i) {
    float v = dist(gen);
    if (dtype == isa::DType::F32) {
      std::memcpy(&bytes[4 * i], &v, 4);
    } else if (dtype == isa::DType::BF16) {
      uint16_t bits = numerics::floatToBF16Bits(v);
      std::memcpy(&bytes[2 * i], &bits, 2);
    } else if (dtype == isa::DType::F16) {
      uint16_t bits = numerics::floatToHalfBits(v);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  return bytes;
}

/// Seconds per step of `runs` runs on `path`, after one untimed run.
llvm::Expected<double> stepSeconds(const artifact::Artifact &artifact,
                                   sim::ExecutionPath path,
                                   sim::HostProfile *profile) {
  sim::SimOptions options;
  options.checkHazards = false;
  options.path = path;
  // The first run schedules; only replayed runs add to the profile.
  options.hostProfile = profile;
  sim::Simulator simulator(artifact, options);
  std::mt19937 gen(0);
  for (const kneff::Buffer &b : artifact.manifest.buffers()) {
    if (b.role() == kneff::INPUT || b.role() == kneff::INOUT) {
      if (auto e = simulator.setBuffer(b.name(), randomBytes(b, gen))) {
        return std::move(e);
      }
    }
  }
  if (auto first = simulator.run(); !first) {
    return first.takeError();
  }
  double start = now();
  for (int r = 0; r < runs; ++r) {
    if (auto result = simulator.run(); !result) {
      return result.takeError();
    }
  }
  return (now() - start) / runs;
}

size_t instructionCount(const artifact::Artifact &artifact) {
  size_t n = 0;
  for (const artifact::Stream &s : artifact.streams) {
    n += s.instructions.size();
  }
  return n;
}

void printProfile(const sim::HostProfile &profile) {
  double total = std::accumulate(profile.seconds.begin(),
                                 profile.seconds.end(), 0.0);
  std::vector<int> order(isa::kOpcodes);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return profile.seconds[a] > profile.seconds[b];
  });
  for (int op : order) {
    if (profile.instructions[op] == 0) {
      continue;
    }
    llvm::outs() << llvm::formatv(
        "    {0,-20} {1,8} instr {2,9:F1} us/instr {3,6:F1} %\n",
        isa::schemaOf(static_cast<isa::Opcode>(op)).mnemonic,
        profile.instructions[op],
        1e6 * profile.seconds[op] / profile.instructions[op],
        100 * profile.seconds[op] / total);
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::HideUnrelatedOptions(benchOptions);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "Host time of simulated training steps\n");
  llvm::outs() << llvm::formatv("{0,-40} {1,8} {2,22} {3,22}\n", "artifact",
                                "instr", "replay ms (us/instr)",
                                "event ms (us/instr)");
  for (const std::string &path : artifactPaths) {
    auto artifact = artifact::loadArtifactFile(path);
    if (!artifact) {
      llvm::errs() << path << ": " << llvm::toString(artifact.takeError())
                   << "\n";
      return 1;
    }
    sim::HostProfile profile;
    auto replay = stepSeconds(*artifact, sim::ExecutionPath::Replay, &profile);
    auto event =
        timeEventDriven
            ? stepSeconds(*artifact, sim::ExecutionPath::EventDriven, nullptr)
            : llvm::Expected<double>(0.0);
    if (!replay || !event) {
      llvm::errs() << path << ": "
                   << llvm::toString(replay ? event.takeError()
                                            : replay.takeError())
                   << "\n";
      return 1;
    }
    size_t n = instructionCount(*artifact);
    llvm::outs() << llvm::formatv(
        "{0,-40} {1,8} {2,12:F3} ({3,7:F2}) {4,12:F3} ({5,7:F2})\n",
        artifact->manifest.name(), n, 1e3 * *replay, 1e6 * *replay / n,
        1e3 * *event, 1e6 * *event / n);
    printProfile(profile);
  }
  return 0;
}
