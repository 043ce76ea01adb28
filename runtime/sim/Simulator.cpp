//===- Simulator.cpp - scheduling, timing and hazard checking ------------===//
//
// The scheduler repeatedly starts, among the engines whose next instruction
// has its semaphore waits satisfied, the one that can start earliest; it
// applies the instruction's effect, and its signals land at its end time.
// When no engine can start and some are unfinished, the program deadlocks.
//
// Hazards are found with vector clocks: each stream's clock counts its
// instructions; a signal carries the signaller's clock and a satisfied wait
// joins the clocks of the signals that satisfied it. Two accesses from
// different streams to overlapping bytes, one a write, race unless the
// earlier one's epoch is covered by the later one's clock (HazardChecker).
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Simulator.h"

#include "compiler/target/AccessRegion.h"
#include "runtime/sim/HazardChecker.h"
#include "runtime/sim/Semantics.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::sim {

namespace {

using Region = isa::AccessRegion;

} // namespace

Simulator::Simulator(const artifact::Artifact &artifact, SimOptions options)
    : artifact(artifact),
      target(options.target
                 ? *options.target
                 : *target::lookupTarget(artifact.manifest.target())),
      options(options),
      hbm(1, static_cast<int64_t>(artifact.manifest.hbm_bytes())),
      sbuf(target.partitions, target.sbufBytesPerPartition),
      psum(target.partitions, target.psumBytesPerPartition),
      rounder(options.stochasticRounding, options.seed) {
  // The group the collectives were compiled for; without a communicator
  // (kiln run) they still cost what they would, and copy their operand.
  if (artifact.manifest.world_size() > 1) {
    this->options.worldSize = static_cast<int>(artifact.manifest.world_size());
  }
  for (const kneff::Buffer &b : artifact.manifest.buffers()) {
    buffers[b.name()] = &b;
    if (b.role() == kneff::CONSTANT) {
      hbm.store(static_cast<int64_t>(b.offset()),
                artifact.constantBytes().data() + b.constant_offset(),
                static_cast<int64_t>(b.constant_bytes()));
    }
  }
}

static int64_t bufferBytes(const kneff::Buffer &b) {
  int64_t n = isa::dtypeBytes(static_cast<isa::DType>(b.dtype()));
  for (int64_t d : b.shape()) {
    n *= d;
  }
  return n;
}

llvm::Error Simulator::setBuffer(llvm::StringRef name, llvm::StringRef bytes) {
  auto it = buffers.find(name);
  if (it == buffers.end()) {
    return llvm::createStringError("the program has no buffer '" + name + "'");
  }
  const kneff::Buffer &b = *it->second;
  if (b.role() != kneff::INPUT && b.role() != kneff::INOUT) {
    return llvm::createStringError("buffer '" + name + "' is an " +
                                   kneff::BufferRole_Name(b.role()) +
                                   ", not an input");
  }
  if (static_cast<int64_t>(bytes.size()) != bufferBytes(b)) {
    return llvm::createStringError("buffer '" + name + "' takes " +
                                   llvm::Twine(bufferBytes(b)) +
                                   " bytes, got " + llvm::Twine(bytes.size()));
  }
  hbm.store(static_cast<int64_t>(b.offset()), bytes.data(),
            static_cast<int64_t>(bytes.size()));
  bufferSet[name] = true;
  return llvm::Error::success();
}

llvm::Expected<std::string> Simulator::getBuffer(llvm::StringRef name) const {
  auto it = buffers.find(name);
  if (it == buffers.end()) {
    return llvm::createStringError("the program has no buffer '" + name + "'");
  }
  std::string bytes(bufferBytes(*it->second), '\0');
  hbm.load(static_cast<int64_t>(it->second->offset()), bytes.data(),
           static_cast<int64_t>(bytes.size()));
  return bytes;
}

llvm::Expected<SimResult> Simulator::run() {
  if (const target::TargetDescription *compiledFor =
          target::lookupTarget(artifact.manifest.target());
      !compiledFor ||
      target.sbufBytesPerPartition < compiledFor->sbufBytesPerPartition ||
      target.psumBytesPerPartition < compiledFor->psumBytesPerPartition ||
      target.dmaQueues < compiledFor->dmaQueues) {
    return llvm::createStringError(
        "the target modelled ('" + target.name.str() +
        "') has fewer on-chip bytes or DMA queues than the program's ('" +
        artifact.manifest.target() + "')");
  }
  if (options.communicator &&
      options.communicator->size() != options.worldSize) {
    return llvm::createStringError(
        "the program was compiled for " + std::to_string(options.worldSize) +
        " workers but the group has " +
        std::to_string(options.communicator->size()));
  }
  for (const kneff::Buffer &b : artifact.manifest.buffers()) {
    if (!options.timingOnly &&
        (b.role() == kneff::INPUT || b.role() == kneff::INOUT) &&
        !bufferSet.lookup(b.name())) {
      return llvm::createStringError("input buffer '" + b.name() +
                                     "' was not set");
    }
  }
  const auto &streams = artifact.streams;
  size_t numStreams = streams.size();
  std::vector<size_t> next(numStreams, 0);
  std::vector<double> streamTime(numStreams, 0.0);
  std::vector<std::vector<uint32_t>> clocks(
      numStreams, std::vector<uint32_t>(numStreams, 0));
  // Per semaphore, the signaller's clock at each signal, in arrival order.
  std::vector<std::vector<std::vector<uint32_t>>> signalClocks(
      artifact.manifest.semaphores());
  // Per semaphore, its signals' (time, trace index) in time order: the
  // value-th is when it reached value. Kept sorted as signals arrive (they
  // arrive nearly in time order) rather than selected per wait, which cost
  // a pass over every signal so far each time a stream's next instruction
  // was looked at.
  std::vector<std::vector<std::pair<double, int64_t>>> signalTimes(
      artifact.manifest.semaphores());
  HazardChecker hazards(numStreams);
  // Accesses every running stream has seen are dropped this often.
  constexpr int kForgetEvery = 4096;
  int sinceForgetting = 0;
  double sbufPortFree = 0, psumPortFree = 0;
  MachineState machine{hbm, sbuf, psum, rounder};

  SimResult result;
  for (const artifact::Stream &s : streams) {
    result.streams.push_back({artifact::streamName(s.engine, s.queue), 0, 0});
  }

  // When semaphore `sem` reached `value`, if it has, and the trace index of
  // the signal that got it there (-1: the initial value).
  auto reachedAt = [&](uint16_t sem,
                       uint32_t value) -> std::optional<std::pair<double, int64_t>> {
    if (value == 0) {
      return std::pair<double, int64_t>{0.0, -1};
    }
    const auto &times = signalTimes[sem];
    if (times.size() < value) {
      return std::nullopt;
    }
    return times[value - 1];
  };
  // Each stream's last instruction and each port's last holder, by trace
  // index: what an instruction's start waited for (TraceEvent::after).
  std::vector<int64_t> lastEvent(numStreams, -1);
  int64_t sbufPortHolder = -1, psumPortHolder = -1;
  while (true) {
    int best = -1;
    double bestStart = std::numeric_limits<double>::infinity();
    int64_t bestAfter = -1; // what the best start waits for
    bool unfinished = false;
    for (size_t s = 0; s < numStreams; ++s) {
      if (next[s] >= streams[s].instructions.size()) {
        continue;
      }
      unfinished = true;
      const isa::Instruction &inst = streams[s].instructions[next[s]];
      double start = streamTime[s];
      int64_t after = lastEvent[s];
      bool ready = true;
      for (int w = 0; w < inst.numWaits && ready; ++w) {
        auto at = reachedAt(inst.waitSemaphore[w], inst.waitValue[w]);
        ready = at.has_value();
        if (ready && at->first > start) {
          start = at->first;
          after = at->second;
        }
      }
      if (!ready) {
        continue;
      }
      if (start < bestStart) {
        bestStart = start;
        bestAfter = after;
        best = static_cast<int>(s);
      }
    }
    if (best < 0) {
      if (!unfinished) {
        break;
      }
      std::string blocked;
      for (size_t s = 0; s < numStreams; ++s) {
        if (next[s] >= streams[s].instructions.size()) {
          continue;
        }
        const isa::Instruction &inst = streams[s].instructions[next[s]];
        blocked += "; " + result.streams[s].name + " waits at instruction " +
                   std::to_string(next[s]) + " ('" +
                   isa::schemaOf(inst.opcode).mnemonic.str() + "') for";
        for (int w = 0; w < inst.numWaits; ++w) {
          uint16_t sem = inst.waitSemaphore[w];
          blocked += " s" + std::to_string(sem) +
                     ">=" + std::to_string(inst.waitValue[w]) + " (is " +
                     std::to_string(signalTimes[sem].size()) + ")";
        }
      }
      return llvm::createStringError("deadlock: no engine can make progress" +
                                     blocked);
    }

    size_t s = static_cast<size_t>(best);
    size_t index = next[s]++;
    const isa::Instruction &inst = streams[s].instructions[index];
    double start = bestStart;
    // What the start waited for: the stream, a wait's signal or a port.
    int64_t after = bestAfter;
    unsigned ports = isa::sharedPorts(inst, target);
    bool sbufPort = ports & isa::kSbufPort, psumPort = ports & isa::kPsumPort;
    if (sbufPort && sbufPortFree > start) {
      start = sbufPortFree;
      after = sbufPortHolder;
    }
    if (psumPort && psumPortFree > start) {
      start = psumPortFree;
      after = psumPortHolder;
    }
    int64_t event = static_cast<int64_t>(result.trace.size());
    lastEvent[s] = event;
    if (sbufPort) {
      sbufPortHolder = event;
    }
    if (psumPort) {
      psumPortHolder = event;
    }
    double duration = isa::instructionSeconds(inst, target, options.worldSize);
    double end = start + duration;
    double held = isa::streamSeconds(inst, target, options.worldSize);
    if (sbufPort) {
      sbufPortFree = end;
    }
    if (psumPort) {
      psumPortFree = end;
    }
    streamTime[s] = start + held;
    result.streams[s].instructions++;
    result.streams[s].busySeconds += held;
    result.makespanSeconds = std::max(result.makespanSeconds, end);
    result.trace.push_back({best, isa::schemaOf(inst.opcode).mnemonic.str(),
                            start, duration, after});
    if (inst.opcode == isa::Opcode::Matmul) {
      result.matmulFlops += 2.0 * inst.operands[1].partitions *
                            inst.operands[1].freeElements() *
                            inst.operands[2].freeElements();
    }

    // Happens-before: the waits' signals, then this instruction's epoch.
    std::vector<uint32_t> &clock = clocks[s];
    for (int w = 0; w < inst.numWaits; ++w) {
      const auto &list = signalClocks[inst.waitSemaphore[w]];
      for (uint32_t k = 0; k < inst.waitValue[w] && k < list.size(); ++k) {
        for (size_t e = 0; e < numStreams; ++e) {
          clock[e] = std::max(clock[e], list[k][e]);
        }
      }
    }
    uint32_t epoch = ++clock[s];

    if (options.checkHazards) {
      for (int i = 0; i < inst.numOperands; ++i) {
        HazardChecker::Access access{best, epoch, index,
                                     isa::regionOfOperand(inst, i),
                                     isa::writesOperand(inst.opcode, i)};
        const Region &region = access.region;
        hazards.check(access, clock, [&](const HazardChecker::Access &prev) {
          if (result.hazards.size() >= 32) {
            return;
          }
          const isa::Instruction &other =
              streams[prev.stream].instructions[prev.index];
          result.hazards.push_back(llvm::formatv(
              "race on {0} partitions [{1}, {2}) bytes [{3}, {4}): {5} "
              "instruction {6} ('{7}') {8} and {9} instruction {10} ('{11}') "
              "{12}, with no semaphore ordering them",
              isa::memoryName(region.memory),
              std::max(region.rowLo, prev.region.rowLo),
              std::min(region.rowHi, prev.region.rowHi),
              std::max(region.firstByte(), prev.region.firstByte()),
              std::min(region.endByte(), prev.region.endByte()),
              result.streams[prev.stream].name, prev.index,
              isa::schemaOf(other.opcode).mnemonic,
              prev.write ? "writes" : "reads", result.streams[s].name, index,
              isa::schemaOf(inst.opcode).mnemonic,
              access.write ? "writes" : "reads"));
        });
      }
      for (int i = 0; i < inst.numOperands; ++i) {
        hazards.record({best, epoch, index, isa::regionOfOperand(inst, i),
                        isa::writesOperand(inst.opcode, i)});
      }
      if (++sinceForgetting == kForgetEvery) {
        sinceForgetting = 0;
        llvm::SmallVector<bool, 32> running(numStreams);
        for (size_t r = 0; r < numStreams; ++r) {
          running[r] = next[r] < streams[r].instructions.size();
        }
        hazards.forgetOrdered(clocks, running);
      }
    }

    if (options.timingOnly) {
      // Nothing computed.
    } else if (inst.opcode == isa::Opcode::Collective) {
      if (auto e = executeCollective(machine, inst, options.communicator)) {
        return std::move(e);
      }
    } else if (isa::indexedOperand(inst.opcode) >= 0) {
      if (auto e = executeIndexed(machine, inst)) {
        return llvm::createStringError(
            llvm::formatv("{0} instruction {1} ({2}): {3}",
                          result.streams[s].name, index,
                          isa::schemaOf(inst.opcode).mnemonic,
                          llvm::toString(std::move(e)))
                .str());
      }
    } else {
      execute(machine, inst);
    }
    for (int i = 0; i < inst.numSignals; ++i) {
      signalClocks[inst.signalSemaphore[i]].push_back(clock);
      auto &times = signalTimes[inst.signalSemaphore[i]];
      std::pair<double, int64_t> signal{end, event};
      times.insert(std::upper_bound(times.begin(), times.end(), signal,
                                    [](const auto &a, const auto &b) {
                                      return a.first < b.first;
                                    }),
                   signal);
    }
  }

  result.modelFlops = artifact.manifest.cost().model_flops() > 0
                          ? artifact.manifest.cost().model_flops()
                          : result.matmulFlops;
  if (result.makespanSeconds > 0) {
    result.mfu = result.modelFlops /
                 (result.makespanSeconds * target.corePeakFlopsBf16());
  }
  return result;
}

llvm::Error writeTrace(llvm::StringRef path, const SimResult &result) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    return llvm::createStringError("cannot write trace '" + path +
                                   "': " + ec.message());
  }
  out << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  for (size_t s = 0; s < result.streams.size(); ++s) {
    out << llvm::formatv(
        "{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
        "\"tid\": {0}, \"args\": {{\"name\": \"{1}\"}},\n",
        s, result.streams[s].name);
  }
  for (size_t i = 0; i < result.trace.size(); ++i) {
    const TraceEvent &e = result.trace[i];
    out << llvm::formatv(
        "{{\"name\": \"{0}\", \"ph\": \"X\", \"pid\": 0, \"tid\": {1}, "
        "\"ts\": {2:F4}, \"dur\": {3:F4}, \"args\": {{\"after\": {4}}}{5}\n",
        e.name, e.stream, e.startSeconds * 1e6, e.durationSeconds * 1e6,
        e.after, i + 1 < result.trace.size() ? "," : "");
  }
  out << "]}\n";
  return llvm::Error::success();
}

} // namespace kiln::sim
