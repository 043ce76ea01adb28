//===- CompileBench.cpp - compile time, instruction counts, modelled MFU --===//
//
// Compiles steps of growing size and prints, for each: compile time on one
// thread (best of 3), instructions per artifact, the artifact file's size,
// its HBM plan, and — simulated for the
// timing only (nothing computed: correctness is the tests' job) — the
// modelled step time, TensorE busy fraction and MFU on trn1.
//
//   build/bin/kiln-bench-compile [--no-sim] [--breakdown] [--what-if]
//                                [--runs N] [--world-size N] [--zero-stage N]
//                                [--tensor-parallel N]
//                                [--profile DIR]
//                                [--check-hazards] [--graph NAME=FILE]...
//
//   mlp-step        the 2-layer MLP training step (batch 64, AdamW)
//   matmul-4096     one 4096^3 matmul with --auto-cast=bf16 (TensorE goal:
//                   >= 95 % busy)
//   bert-layer-fwd  one BERT-style encoder layer, forward (hidden 256,
//                   4 heads, sequence 128, batch 8)
//   bert-base-fwd   12 BERT-base encoder layers, forward (hidden 768,
//                   12 heads, sequence 128, batch 8), bf16 matmuls
//   conv-block-14   a 3x3 convolution, batch norm (training) and ReLU with
//                   their gradients: the Fashion-MNIST CNN's 14x14 stage
//                   (batch 32, 32 channels), f32
//   conv-block-56   the same at ResNet-50's 56x56 stage (batch 4, 64
//                   channels), bf16 convolutions
//   separable-28    a MobileNet-style block: a 3x3 depthwise convolution,
//                   batch norm and ReLU, then a 1x1 convolution with bias
//                   and ReLU, with all their gradients (batch 8, 64
//                   channels, 28x28), f32
//
// --graph adds graph files, compiled in f32 and with --auto-cast=bf16
// (--f32-only, --bf16-only pick one; --no-builtin skips the steps above): the
// BERT-base training step, which the PyTorch front end traces
// (bench/pytorch/BertBaseGraph.py writes it), is one; --world-size N
// compiles the graph files for a data-parallel group of N workers (their
// gradients all-reduced in the step; one worker's time), --zero-stage 1 with
// their optimizer state sharded (ZeRO-1), --tensor-parallel N for one
// worker of a tensor-parallel group of N (a graph traced with kiln.parallel's
// sharded layers). --breakdown adds, per
// artifact, each engine's busy fraction and its costliest instruction kinds:
// where the modelled time goes. --profile writes each simulated run's engine
// timelines to DIR/NAME.json (Chrome/Perfetto trace); --runs sets how many
// compiles the best time is taken over (3); --check-hazards runs the
// simulator's hazard checker too (slower): a program whose semaphores miss
// a dependency fails with the hazard named. --what-if models the step again
// on variants of trn1 (twice the DMA bandwidth, tensor_tensor at one cycle
// an element, ...), timing only, both the same program and the graph
// compiled anew for the variant: which of the machine's limits bound the
// step, and how far lifting them would take it.
//
// --random N adds the random-graph differential suite's first N graphs, as
// single-worker graphs and as data-parallel steps of 4 workers with 64 KiB
// buckets. --table FILE writes every artifact's modelled time and
// instruction count; --against FILE compares this run with such a table
// (bench/compiler/modelled-steps.txt is the one on record) and lists every
// graph whose modelled step got slower: how a change to the compiler is
// checked to cost no graph any modelled time.
//
//===----------------------------------------------------------------------===//

#include "compiler/builder/GraphBuilder.h"
#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphFile.h"
#include "examples/cpp/MlpStep.h"
#include "runtime/sim/Simulator.h"
#include "test/compiler/driver/RandomGraphs.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace kiln;

namespace {

Tensor input(GraphBuilder &b, const std::string &name,
             llvm::ArrayRef<int64_t> shape) {
  return b.input(name, proto::F32, shape, proto::PARAMETER);
}

/// One post-norm encoder layer: attention, residual, layer norm, GELU MLP,
/// residual, layer norm. x is [B*S, H].
Tensor encoderLayer(GraphBuilder &b, Tensor x, int layer, int64_t batch,
                    int64_t seq, int64_t hidden, int64_t heads) {
  std::string p = "l" + std::to_string(layer) + ".";
  int64_t d = hidden / heads, tokens = batch * seq;
  auto proj = [&](Tensor v, const char *name, int64_t out) {
    return b.linear(v, input(b, p + name + ".w", {out, hidden}),
                    input(b, p + name + ".b", {out}));
  };
  auto split = [&](Tensor v) { // [B*S, H] -> [B, heads, S, d]
    return b.transpose(b.reshape(v, {batch, seq, heads, d}), {0, 2, 1, 3});
  };
  Tensor q = split(proj(x, "q", hidden)), k = split(proj(x, "k", hidden)),
         v = split(proj(x, "v", hidden));
  Tensor scores = b.mul(b.matmul(q, k, false, true),
                        b.scalar(1.0 / std::sqrt(static_cast<double>(d))));
  Tensor context = b.matmul(b.softmax(scores, 3), v); // [B, heads, S, d]
  Tensor merged =
      b.reshape(b.transpose(context, {0, 2, 1, 3}), {tokens, hidden});
  Tensor attn = proj(merged, "o", hidden);
  auto norm = [&](Tensor v, const char *name) {
    return b
        .layerNorm(v, input(b, p + name + ".g", {hidden}),
                   input(b, p + name + ".beta", {hidden}), 1)
        .output;
  };
  Tensor h = norm(b.add(x, attn), "ln1");
  Tensor ffn = b.gelu(b.linear(h, input(b, p + "ff1.w", {4 * hidden, hidden}),
                               input(b, p + "ff1.b", {4 * hidden})));
  ffn = b.linear(ffn, input(b, p + "ff2.w", {hidden, 4 * hidden}),
                 input(b, p + "ff2.b", {hidden}));
  return norm(b.add(h, ffn), "ln2");
}

llvm::Expected<proto::Graph> encoder(mlir::MLIRContext &context, int layers,
                                     int64_t hidden, int64_t heads) {
  const int64_t batch = 8, seq = 128;
  GraphBuilder b(context, "encoder");
  Tensor x = b.input("x", proto::F32, {batch * seq, hidden},
                     proto::BATCH_INPUT);
  for (int l = 0; l < layers; ++l) {
    x = encoderLayer(b, x, l, batch, seq, hidden, heads);
  }
  b.output("y", x, proto::METRIC);
  return b.finishGraph();
}

/// A residual CNN's convolution block as its training step runs it: a 3x3
/// convolution, batch norm in training mode and ReLU, then the gradients of
/// all three from the output's gradient `g`. [batch, channels, size, size].
llvm::Expected<proto::Graph> convBlock(mlir::MLIRContext &context,
                                       int64_t batch, int64_t channels,
                                       int64_t size) {
  GraphBuilder b(context, "conv-block");
  llvm::SmallVector<int64_t, 4> shape = {batch, channels, size, size};
  llvm::SmallVector<int64_t, 4> weightShape = {channels, channels, 3, 3};
  Tensor x = b.input("x", proto::F32, shape, proto::BATCH_INPUT);
  Tensor g = b.input("g", proto::F32, shape, proto::BATCH_INPUT);
  Tensor w = input(b, "w", weightShape);
  Tensor gamma = input(b, "gamma", {channels});
  Tensor beta = input(b, "beta", {channels});
  Tensor mean = input(b, "running_mean", {channels});
  Tensor var = input(b, "running_var", {channels});
  GraphBuilder::ConvWindow window{{1, 1}, {1, 1}, {1, 1}};
  Tensor y = b.conv(x, w, {}, window);
  auto bn = b.batchNorm(y, gamma, beta, mean, var, /*training=*/true);
  Tensor out = b.relu(bn.output);
  b.output("out", out, proto::METRIC);
  b.output("next_running_mean", bn.runningMean, proto::METRIC);
  b.output("next_running_var", bn.runningVar, proto::METRIC);
  auto grads = b.batchNormBackward(b.reluBackward(g, out), y, bn.mean,
                                   bn.rstd, gamma, /*training=*/true);
  b.output("grad_x", b.convInputGrad(grads.input, w, shape, window),
           proto::METRIC);
  b.output("grad_w", b.convWeightGrad(grads.input, x, weightShape, window),
           proto::METRIC);
  b.output("grad_gamma", grads.weight, proto::METRIC);
  b.output("grad_beta", grads.bias, proto::METRIC);
  return b.finishGraph();
}

/// A depthwise-separable block as a MobileNet training step runs it: a 3x3
/// depthwise convolution, batch norm (training) and ReLU, a 1x1
/// convolution with bias and ReLU, then the gradients of all of them.
llvm::Expected<proto::Graph> separableBlock(mlir::MLIRContext &context,
                                            int64_t batch, int64_t channels,
                                            int64_t size) {
  GraphBuilder b(context, "separable-block");
  llvm::SmallVector<int64_t, 4> shape = {batch, channels, size, size};
  llvm::SmallVector<int64_t, 4> depthwiseShape = {channels, 1, 3, 3};
  llvm::SmallVector<int64_t, 4> pointwiseShape = {channels, channels, 1, 1};
  Tensor x = b.input("x", proto::F32, shape, proto::BATCH_INPUT);
  Tensor g = b.input("g", proto::F32, shape, proto::BATCH_INPUT);
  Tensor wd = input(b, "depthwise", depthwiseShape);
  Tensor wp = input(b, "pointwise", pointwiseShape);
  Tensor bias = input(b, "bias", {channels});
  Tensor gamma = input(b, "gamma", {channels});
  Tensor beta = input(b, "beta", {channels});
  Tensor mean = input(b, "running_mean", {channels});
  Tensor var = input(b, "running_var", {channels});
  GraphBuilder::ConvWindow depthwise{{1, 1}, {1, 1}, {1, 1}, channels};
  GraphBuilder::ConvWindow pointwise{{1, 1}, {0, 0}, {1, 1}};
  Tensor d = b.conv(x, wd, {}, depthwise);
  auto bn = b.batchNorm(d, gamma, beta, mean, var, /*training=*/true);
  Tensor h = b.relu(bn.output);
  Tensor out = b.relu(b.conv(h, wp, bias, pointwise));
  b.output("out", out, proto::METRIC);
  Tensor gp = b.reluBackward(g, out);
  b.output("grad_pointwise", b.convWeightGrad(gp, h, pointwiseShape, pointwise),
           proto::METRIC);
  b.output("grad_bias", b.reduceSum(gp, {0, 2, 3}), proto::METRIC);
  Tensor gh = b.reluBackward(b.convInputGrad(gp, wp, shape, pointwise), h);
  auto grads = b.batchNormBackward(gh, d, bn.mean, bn.rstd, gamma,
                                   /*training=*/true);
  b.output("grad_x", b.convInputGrad(grads.input, wd, shape, depthwise),
           proto::METRIC);
  b.output("grad_depthwise",
           b.convWeightGrad(grads.input, x, depthwiseShape, depthwise),
           proto::METRIC);
  b.output("grad_gamma", grads.weight, proto::METRIC);
  b.output("grad_beta", grads.bias, proto::METRIC);
  return b.finishGraph();
}

llvm::Expected<proto::Graph> bigMatmul(mlir::MLIRContext &context) {
  GraphBuilder b(context, "matmul");
  Tensor x = b.input("x", proto::F32, {4096, 4096}, proto::BATCH_INPUT);
  Tensor w = b.input("w", proto::F32, {4096, 4096}, proto::PARAMETER);
  b.output("y", b.matmul(x, w), proto::METRIC);
  return b.finishGraph();
}

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Each engine's busy fraction of the makespan (DMA queues together, as the
/// mean over queues), then its costliest instruction kinds (opcode and ALU or
/// activation function) by modelled seconds.
void printBreakdown(const artifact::Artifact &artifact,
                    const sim::SimResult &result) {
  const auto &target = *target::lookupTarget(artifact.manifest.target());
  struct Kind {
    double seconds = 0, bytes = 0;
    size_t count = 0;
  };
  std::map<std::string, std::map<std::string, Kind>> kinds;
  std::map<std::string, std::pair<double, int>> busy; // seconds, streams
  for (size_t i = 0; i < artifact.streams.size(); ++i) {
    const artifact::Stream &stream = artifact.streams[i];
    std::string engine = isa::engineName(stream.engine).str();
    busy[engine].first += result.streams[i].busySeconds;
    busy[engine].second += 1;
    for (const isa::Instruction &inst : stream.instructions) {
      const isa::OpcodeSchema &schema = isa::schemaOf(inst.opcode);
      std::string kind = schema.mnemonic.str();
      if (schema.op0Kind != isa::FieldKind::None) {
        kind += "." + isa::fieldValueName(schema.op0Kind, inst.op0).str();
      }
      const isa::AccessPattern &dst = inst.operands[0];
      double bytes = 0;
      double seconds = isa::instructionSeconds(
          inst, target,
          {std::max(1, static_cast<int>(artifact.manifest.world_size())),
           std::max(1, static_cast<int>(artifact.manifest.tensor_parallel()))});
      if (isa::isTransfer(inst.opcode)) {
        // Direction, and whether the transfer runs at full bandwidth.
        const isa::AccessPattern &src = inst.operands[1];
        bytes = isa::dmaBytes(inst);
        kind += " " + isa::memoryName(src.memory).str() + ">" +
                isa::memoryName(dst.memory).str();
        if (src.dtype != dst.dtype) {
          kind += " " + isa::dtypeName(src.dtype).str() + ">" +
                  isa::dtypeName(dst.dtype).str();
        }
        double fullSpeed = target.dmaFixedLatencySeconds +
                           bytes / target.dmaBytesPerSecondPerQueue;
        if (seconds > fullSpeed * 1.01) {
          kind += bytes < target.dmaSmallTransferBytes ? " small" : " strided";
        }
      }
      Kind &k = kinds[engine][kind];
      k.bytes += bytes;
      k.seconds += seconds;
      k.count += 1;
    }
  }
  for (auto &[engine, perKind] : kinds) {
    auto [seconds, streams] = busy[engine];
    std::printf("    %-7s busy %5.1f %% of %.1f us (%d stream%s)\n",
                engine.c_str(),
                100 * seconds / streams / result.makespanSeconds,
                result.makespanSeconds * 1e6, streams, streams > 1 ? "s" : "");
    std::vector<std::pair<std::string, Kind>> sorted(perKind.begin(),
                                                     perKind.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
      return a.second.seconds > b.second.seconds;
    });
    for (size_t j = 0; j < sorted.size() && j < 8; ++j) {
      const Kind &k = sorted[j].second;
      std::printf("      %-28s %9.1f us %8zu instructions", sorted[j].first.c_str(),
                  k.seconds * 1e6, k.count);
      if (k.bytes > 0) {
        std::printf(" %9.1f MB", k.bytes / 1e6);
      }
      std::printf("\n");
    }
  }
}

/// Variants of trn1, each lifting one or more of its limits. The step is
/// modelled on each twice: the same program (its schedule and memory plan
/// made for trn1, so a gain is a lower bound) and the program compiled for
/// the variant (what the limit costs once the compiler plans around its
/// absence). Which limits bind the step, and how far lifting them goes.
struct WhatIf {
  const char *name; // the variant's target name (registerVariant)
  const char *description;
  bool dmaLatencyOverlaps, dmaBandwidthX2, tensorTensorOneCycle;
};

const WhatIf kWhatIfs[] = {
    {"trn1-dma-latency-overlaps",
     "DMA fixed latency overlaps the next transfer", true, false, false},
    {"trn1-dma-x2", "DMA bandwidth x2", false, true, false},
    {"trn1-dma-free", "both (DMA all but free)", true, true, false},
    {"trn1-tt-1", "tensor_tensor 1 cycle an element", false, false, true},
    {"trn1-dma-x2-tt-1", "DMA bandwidth x2, tensor_tensor 1 cycle", false, true,
     true},
    {"trn1-all", "all three", true, true, true},
    // (No variant with ports unshared: the compiler orders a shared port's
    // holders by semaphores, so the same program would run the same.)
};

const target::TargetDescription &whatIfTarget(const WhatIf &w) {
  if (const target::TargetDescription *known = target::lookupTarget(w.name)) {
    return *known;
  }
  target::TargetDescription t = *target::lookupTarget("trn1");
  if (w.dmaLatencyOverlaps) {
    t.dmaLatencyHoldsQueue = false;
  }
  if (w.dmaBandwidthX2) {
    t.dmaBytesPerSecondPerQueue.value *= 2;
  }
  if (w.tensorTensorOneCycle) {
    t.tensorTensorCyclesPerElement.value = 1;
  }
  return target::registerVariant(w.name, t);
}

llvm::Expected<sim::SimResult> modelTiming(const artifact::Artifact &artifact,
                                           const target::TargetDescription *t) {
  sim::SimOptions options;
  options.checkHazards = false;
  options.timingOnly = true;
  options.target = t;
  return sim::Simulator(artifact, options).run();
}

int printWhatIfs(const std::string &name, const proto::Graph &graph,
                 const CompileOptions &options,
                 const artifact::Artifact &artifact, double modelledSeconds) {
  if (options.target != "trn1") {
    return 0; // the variants are trn1's
  }
  std::printf("  %-44s %12s %7s %12s %7s   %s\n",
              "what-if on trn1, timing only", "same program", "MFU",
              "recompiled", "MFU", "against trn1");
  for (const WhatIf &w : kWhatIfs) {
    auto fail = [&](llvm::Error err) {
      std::fprintf(stderr, "%s: what-if '%s': %s\n", name.c_str(),
                   w.description, llvm::toString(std::move(err)).c_str());
      return 1;
    };
    const target::TargetDescription &variant = whatIfTarget(w);
    auto same = modelTiming(artifact, &variant);
    if (!same) {
      return fail(same.takeError());
    }
    CompileOptions variantOptions = options;
    variantOptions.target = w.name;
    auto recompiled = compile(graph, variantOptions);
    if (!recompiled) {
      return fail(recompiled.takeError());
    }
    auto again = modelTiming(*recompiled, nullptr);
    if (!again) {
      return fail(again.takeError());
    }
    std::printf("  %-44s %9.1f us %5.1f %% %9.1f us %5.1f %%   %.3fx\n",
                w.description, same->makespanSeconds * 1e6, 100 * same->mfu,
                again->makespanSeconds * 1e6, 100 * again->mfu,
                again->makespanSeconds / modelledSeconds);
  }
  std::fflush(stdout);
  return 0;
}

/// What one artifact models: the figures --table writes and --against reads.
struct Figures {
  double modelledMicroseconds = 0;
  size_t instructions = 0;
  /// xxh3 of the artifact's bytes: a change meant to keep the compiler's
  /// output (a refactoring) shows here as "identical bytes".
  uint64_t digest = 0;
};
using FigureTable = std::map<std::string, Figures>;

struct BenchOptions {
  bool simulate = true, breakdown = false, checkHazards = false;
  bool whatIf = false;
  int runs = 3;
  /// Workers of the data-parallel group the graph files are compiled for
  /// (their gradients all-reduced in the step).
  int worldSize = 1;
  /// ZeRO stage of the graph files' data-parallel compiles.
  int zeroStage = 0;
  int tensorParallel = 1;
  std::string profileDir;
  /// Where each artifact's figures go (--table, --against).
  FigureTable *figures = nullptr;
};

/// The digest of what the compiler made of a graph: the artifact's
/// sections, their streams uncompressed. The header (format version, the
/// commit the compiler was built from) and how the streams are packed are
/// not the compiler's doing.
uint64_t outputDigest(const artifact::Artifact &artifact) {
  std::string bytes =
      artifact::writeArtifact(artifact, /*compressStreams=*/false);
  return llvm::xxh3_64bits(
      llvm::StringRef(bytes).drop_front(artifact::kHeaderBytes));
}

int run(const std::string &name, llvm::Expected<proto::Graph> graph,
        CompileOptions options, const BenchOptions &bench) {
  if (!graph) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 llvm::toString(graph.takeError()).c_str());
    return 1;
  }
  double best = 1e30;
  std::optional<artifact::Artifact> artifact;
  for (int i = 0; i < bench.runs; ++i) {
    double start = seconds();
    auto compiled = compile(*graph, options);
    best = std::min(best, seconds() - start);
    if (!compiled) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(),
                   llvm::toString(compiled.takeError()).c_str());
      return 1;
    }
    artifact = std::move(*compiled);
  }
  size_t instructions = 0;
  for (const auto &s : artifact->streams) {
    instructions += s.instructions.size();
  }
  // The file as the cache stores it (written outside the timed compile).
  size_t fileBytes = artifact::writeArtifact(*artifact).size();
  std::printf("%-16s compile %7.3f s  %8zu instructions  artifact %7.2f MB  "
              "HBM %8.1f MB",
              name.c_str(), best, instructions,
              static_cast<double>(fileBytes) / 1e6,
              static_cast<double>(artifact->manifest.hbm_bytes()) / 1e6);
  if (bench.simulate) {
    // The modelled time does not depend on the values, so nothing is
    // computed: the BERT-base step models in ~10 s instead of ~55 s.
    sim::SimOptions simOptions;
    simOptions.checkHazards = bench.checkHazards;
    simOptions.timingOnly = true;
    sim::Simulator simulator(*artifact, simOptions);
    auto result = simulator.run();
    if (!result) {
      std::fprintf(stderr, "\n%s: %s\n", name.c_str(),
                   llvm::toString(result.takeError()).c_str());
      return 1;
    }
    if (!result->hazards.empty()) {
      std::fprintf(stderr, "\n%s: %zu hazard(s) (the checker keeps 32):\n",
                   name.c_str(), result->hazards.size());
      for (const std::string &h : result->hazards) {
        std::fprintf(stderr, "  %s\n", h.c_str());
      }
      return 1;
    }
    double tensorBusy = 0;
    for (const auto &s : result->streams) {
      if (s.name == "tensor") {
        tensorBusy = s.busySeconds / result->makespanSeconds;
      }
    }
    std::printf("  modelled %9.1f us  TensorE busy %5.1f %%  MFU %5.1f %%",
                result->makespanSeconds * 1e6, 100 * tensorBusy,
                100 * result->mfu);
    if (bench.figures) {
      (*bench.figures)[name] = {result->makespanSeconds * 1e6, instructions,
                                outputDigest(*artifact)};
    }
    if (!bench.profileDir.empty()) {
      std::string path = bench.profileDir + "/" + name + ".json";
      if (std::error_code ec =
              llvm::sys::fs::create_directories(bench.profileDir)) {
        std::fprintf(stderr, "\n%s: cannot create '%s': %s\n", name.c_str(),
                     bench.profileDir.c_str(), ec.message().c_str());
        return 1;
      }
      if (llvm::Error err = sim::writeTrace(path, *result)) {
        std::fprintf(stderr, "\n%s: %s\n", name.c_str(),
                     llvm::toString(std::move(err)).c_str());
        return 1;
      }
    }
    if (bench.breakdown || bench.whatIf) {
      std::printf("\n");
      if (bench.breakdown) {
        printBreakdown(*artifact, *result);
      }
      std::fflush(stdout);
      return bench.whatIf ? printWhatIfs(name, *graph, options, *artifact,
                                         result->makespanSeconds)
                          : 0;
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  return 0;
}

/// Writes `table` as lines of "name modelled-us instructions digest".
bool writeTable(const FigureTable &table, const std::string &path) {
  std::ofstream out(path);
  out << "# kiln-bench-compile --table: graph, modelled step (us), "
         "instructions, artifact digest\n";
  for (const auto &[name, f] : table) {
    out << name << " " << llvm::formatv("{0:f3}", f.modelledMicroseconds).str()
        << " " << f.instructions << " "
        << llvm::formatv("{0:x16}", f.digest).str() << "\n";
  }
  return static_cast<bool>(out);
}

std::optional<FigureTable> readTable(const std::string &path) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  FigureTable table;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    Figures f;
    if (line.empty() || line[0] == '#' ||
        !(fields >> name >> f.modelledMicroseconds >> f.instructions)) {
      continue;
    }
    // The digest column is optional: older tables have none.
    std::string digest;
    if (fields >> digest) {
      f.digest = std::strtoull(digest.c_str(), nullptr, 16);
    }
    table[name] = f;
  }
  return table;
}

/// Prints how this run's figures compare with `before`: every graph whose
/// modelled step is slower, and a summary.
void printComparison(const FigureTable &now, const FigureTable &before,
                     const std::string &path) {
  int slower = 0, faster = 0, same = 0, missing = 0, identical = 0;
  double nowTotal = 0, beforeTotal = 0, worst = 1;
  std::string worstName;
  std::printf("\nagainst %s:\n", path.c_str());
  for (const auto &[name, b] : before) {
    auto it = now.find(name);
    if (it == now.end()) {
      ++missing;
      continue;
    }
    if (b.digest && it->second.digest == b.digest) {
      ++identical;
    }
    double ratio = it->second.modelledMicroseconds / b.modelledMicroseconds;
    nowTotal += it->second.modelledMicroseconds;
    beforeTotal += b.modelledMicroseconds;
    // Within a thousandth is the table's rounding, not the compiler.
    if (ratio > 1.001) {
      ++slower;
      std::printf("  SLOWER %-28s %10.1f us -> %10.1f us  %.4fx\n",
                  name.c_str(), b.modelledMicroseconds,
                  it->second.modelledMicroseconds, ratio);
      if (ratio > worst) {
        worst = ratio;
        worstName = name;
      }
    } else if (ratio < 0.999) {
      ++faster;
    } else {
      ++same;
    }
  }
  std::string worstText =
      slower ? llvm::formatv(" (worst {0:f4}x: {1})", worst, worstName).str()
             : "";
  std::printf("  %d graphs slower%s, %d faster, %d the same, %d not run; "
              "modelled time in all %.4fx\n",
              slower, worstText.c_str(), faster, same, missing,
              beforeTotal > 0 ? nowTotal / beforeTotal : 1.0);
  std::printf("  %d of %zu artifacts byte-identical\n", identical,
              before.size());
}

} // namespace

int main(int argc, char **argv) {
  BenchOptions benchOptions;
  bool builtin = true;
  bool wantF32 = true, wantBf16 = true;
  std::vector<std::pair<std::string, std::string>> files;
  int randomGraphs = 0;
  std::string tablePath, againstPath;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--no-sim") {
      benchOptions.simulate = false;
    } else if (arg == "--breakdown") {
      benchOptions.breakdown = true;
    } else if (arg == "--what-if") {
      benchOptions.whatIf = true;
    } else if (arg == "--check-hazards") {
      benchOptions.checkHazards = true;
    } else if (arg == "--runs" && i + 1 < argc &&
               !llvm::StringRef(argv[i + 1])
                    .getAsInteger(10, benchOptions.runs) &&
               benchOptions.runs > 0) {
      ++i;
    } else if (arg == "--world-size" && i + 1 < argc &&
               !llvm::StringRef(argv[i + 1])
                    .getAsInteger(10, benchOptions.worldSize) &&
               benchOptions.worldSize > 0) {
      ++i;
    } else if (arg == "--tensor-parallel" && i + 1 < argc &&
               !llvm::StringRef(argv[i + 1])
                    .getAsInteger(10, benchOptions.tensorParallel) &&
               benchOptions.tensorParallel > 0) {
      ++i;
    } else if (arg == "--zero-stage" && i + 1 < argc &&
               (llvm::StringRef(argv[i + 1]) == "0" ||
                llvm::StringRef(argv[i + 1]) == "1")) {
      benchOptions.zeroStage = argv[++i][0] - '0';
    } else if (arg == "--random" && i + 1 < argc &&
               !llvm::StringRef(argv[i + 1]).getAsInteger(10, randomGraphs) &&
               randomGraphs >= 0) {
      ++i;
    } else if (arg == "--table" && i + 1 < argc) {
      tablePath = argv[++i];
    } else if (arg == "--against" && i + 1 < argc) {
      againstPath = argv[++i];
    } else if (arg == "--profile" && i + 1 < argc) {
      benchOptions.profileDir = argv[++i];
    } else if (arg == "--no-builtin") {
      builtin = false;
    } else if (arg == "--bf16-only") {
      wantF32 = false;
    } else if (arg == "--f32-only") {
      wantBf16 = false;
    } else if (arg == "--graph" && i + 1 < argc &&
               llvm::StringRef(argv[i + 1]).contains('=')) {
      auto [name, path] = llvm::StringRef(argv[++i]).split('=');
      files.emplace_back(name.str(), path.str());
    } else {
      std::fprintf(
          stderr,
          "usage: kiln-bench-compile [--no-sim] [--breakdown] [--what-if] "
          "[--no-builtin] [--bf16-only|--f32-only] [--runs N] "
          "[--world-size N] [--zero-stage 0|1] [--tensor-parallel N] "
          "[--profile DIR] "
          "[--check-hazards] "
          "[--random N] [--table FILE] [--against FILE] "
          "[--graph NAME=FILE]...\n");
      return 2;
    }
  }
  std::optional<FigureTable> before;
  if (!againstPath.empty() && !(before = readTable(againstPath))) {
    std::fprintf(stderr, "kiln-bench-compile: cannot read '%s'\n",
                 againstPath.c_str());
    return 2;
  }
  FigureTable figures;
  benchOptions.figures = &figures;
  mlir::MLIRContext context;
  CompileOptions f32, bf16;
  bf16.autoCast = "bf16";
  examples::MlpConfig mlp;
  int failures = 0;
  auto bench = [&](const std::string &name, auto makeGraph,
                   const CompileOptions &options) {
    failures += run(name, makeGraph(), options, benchOptions);
  };
  if (builtin) {
    bench("mlp-step", [&] { return examples::buildMlpTrainStep(context, mlp); },
          f32);
    bench("matmul-4096", [&] { return bigMatmul(context); }, bf16);
    bench("bert-layer-fwd", [&] { return encoder(context, 1, 256, 4); }, f32);
    bench("bert-base-fwd", [&] { return encoder(context, 12, 768, 12); },
          bf16);
    bench("conv-block-14", [&] { return convBlock(context, 32, 32, 14); },
          f32);
    bench("conv-block-56", [&] { return convBlock(context, 4, 64, 56); },
          bf16);
    bench("separable-28", [&] { return separableBlock(context, 8, 64, 28); },
          f32);
  }
  // The differential suite's graphs: alone, and as data-parallel steps with
  // buckets small enough to split them.
  CompileOptions group = f32;
  group.worldSize = 4;
  group.bucketBytes = 64 << 10;
  for (int seed = 0; seed < randomGraphs; ++seed) {
    char tag[16];
    std::snprintf(tag, sizeof tag, "%04d", seed);
    bench(std::string("random-") + tag,
          [&] { return testing::randomGraph(context, seed); }, f32);
    bench(std::string("random-dp-") + tag,
          [&] { return testing::randomGraph(context, seed, true); }, group);
  }
  f32.worldSize = bf16.worldSize = benchOptions.worldSize;
  f32.zeroStage = bf16.zeroStage = benchOptions.zeroStage;
  f32.tensorParallel = bf16.tensorParallel = benchOptions.tensorParallel;
  for (auto &[name, path] : files) {
    auto read = [&] { return graph::readGraphFile(path); };
    if (wantF32) {
      bench(name, read, f32);
    }
    if (wantBf16) {
      bench(name + "-bf16", read, bf16);
    }
  }
  std::printf("(trn1; compile on one thread, best of %d; simulated for the "
              "timing only, hazard checker %s; graph files for %d worker%s)\n",
              benchOptions.runs, benchOptions.checkHazards ? "on" : "off",
              benchOptions.worldSize, benchOptions.worldSize > 1 ? "s" : "");
  if (!tablePath.empty() && !writeTable(figures, tablePath)) {
    std::fprintf(stderr, "kiln-bench-compile: cannot write '%s'\n",
                 tablePath.c_str());
    return 1;
  }
  if (before) {
    printComparison(figures, *before, againstPath);
  }
  return failures ? 1 : 0;
}
