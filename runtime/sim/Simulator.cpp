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
// Simulator::run records the order of the first such run and replays it
// afterwards (Simulator::replay), unless told to schedule every run.
//
//===----------------------------------------------------------------------===//

#include "runtime/sim/Simulator.h"

#include "compiler/target/AccessRegion.h"
#include "runtime/sim/HazardChecker.h"
#include "runtime/sim/Semantics.h"
#include "runtime/sim/TileWalk.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

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
  if (artifact.manifest.tensor_parallel() > 1) {
    this->options.tensorParallel =
        static_cast<int>(artifact.manifest.tensor_parallel());
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

/// The run's preconditions: a target at least the program's, a group of the
/// size it was compiled for and every input set.
llvm::Error Simulator::checkRunnable() const {
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
  int tensorGroup =
      options.tensorCommunicator ? options.tensorCommunicator->size() : 1;
  if (options.tensorParallel > 1 && tensorGroup != options.tensorParallel &&
      (options.tensorCommunicator || options.communicator)) {
    return llvm::createStringError(
        "the program was compiled for tensor-parallel groups of " +
        std::to_string(options.tensorParallel) + " workers but the job's have " +
        std::to_string(tensorGroup));
  }
  for (const kneff::Buffer &b : artifact.manifest.buffers()) {
    if (!options.timingOnly &&
        (b.role() == kneff::INPUT || b.role() == kneff::INOUT) &&
        !bufferSet.lookup(b.name())) {
      return llvm::createStringError("input buffer '" + b.name() +
                                     "' was not set");
    }
  }
  return llvm::Error::success();
}

namespace {

/// Applies one instruction's effect on the memories. An indexed DMA's bad
/// index is an error naming the instruction (`stream` and `index`).
llvm::Error applyInstruction(MachineState &machine, const SimOptions &options,
                             const isa::Instruction &inst,
                             llvm::StringRef stream, size_t index) {
  if (inst.opcode == isa::Opcode::Collective) {
    return executeCollective(
        machine, inst, options.communicatorOf(isa::collectiveGroupOf(inst)));
  }
  if (isa::indexedOperand(inst.opcode) >= 0) {
    if (auto e = executeIndexed(machine, inst)) {
      return llvm::createStringError(
          llvm::formatv("{0} instruction {1} ({2}): {3}", stream, index,
                        isa::schemaOf(inst.opcode).mnemonic,
                        llvm::toString(std::move(e)))
              .str());
    }
    return llvm::Error::success();
  }
  execute(machine, inst);
  return llvm::Error::success();
}

/// Whether every byte `inst` reads has been written. Indexed transfers
/// and collectives read what their indices and peers choose: never said.
bool readsOnlyWritten(const MachineState &machine,
                      const isa::Instruction &inst) {
  if (isa::indexedOperand(inst.opcode) >= 0 ||
      inst.opcode == isa::Opcode::Collective) {
    return false;
  }
  for (int i = 0; i < inst.numOperands; ++i) {
    bool accumulates = i == 0 && inst.opcode == isa::Opcode::Matmul &&
                       inst.accumulate();
    if (isa::writesOperand(inst.opcode, i) && !accumulates) {
      continue;
    }
    const isa::AccessPattern &ap = inst.operands[i];
    const MemoryArray &memory = machine.memory(ap.memory);
    bool written = true;
    forEachRun(ap, [&](int64_t row, int64_t byte, int64_t count) {
      written = written && memory.isWritten(row, byte, count * ap.elementBytes());
    });
    if (!written) {
      return false;
    }
  }
  return true;
}

} // namespace

/// One run of a Simulator's program: the scheduler's state, the hazard
/// checker's clocks and the result being built. Its steps are member
/// functions so each reads on its own; it is a friend of Simulator to reach
/// the memories and buffers the run works on.
class Execution {
public:
  /// With `order`, records there the instructions it applies, in order.
  explicit Execution(
      Simulator &sim,
      std::vector<Simulator::Scheduled> *order = nullptr);

  llvm::Expected<SimResult> run();

private:
  /// The next instruction of a stream whose waits are satisfied: when it can
  /// start and the trace index of what it waited for.
  struct Candidate {
    size_t stream;
    double start;
    int64_t after;
  };
  /// An issued instruction's end and its index in the trace: when and by
  /// whom its signals are given.
  struct Issued {
    double end;
    int64_t event;
  };

  std::optional<std::pair<double, int64_t>> reachedAt(uint16_t sem,
                                                      uint32_t value) const;
  std::optional<Candidate> earliestReady() const;
  bool finished() const;
  llvm::Error deadlock() const;
  llvm::Error step(const Candidate &candidate);
  Issued issue(size_t s, size_t index, const isa::Instruction &inst,
               const Candidate &candidate);
  uint32_t joinClocks(size_t s, const isa::Instruction &inst);
  void checkHazards(size_t s, size_t index, const isa::Instruction &inst,
                    uint32_t epoch);
  std::string describeRace(const HazardChecker::Access &prev,
                           const HazardChecker::Access &access) const;
  llvm::Error apply(size_t s, size_t index, const isa::Instruction &inst);
  void signal(size_t s, const isa::Instruction &inst, const Issued &issued);
  void summarize();

  // Accesses every running stream has seen are dropped this often.
  static constexpr int kForgetEvery = 4096;
  // A start later than any: what a ready stream's start is compared with
  // before any stream is ready.
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  const artifact::Artifact &artifact;
  const target::TargetDescription &target;
  const SimOptions &options;
  std::vector<Simulator::Scheduled> *order;
  const std::vector<artifact::Stream> &streams;
  size_t numStreams;
  MachineState machine;

  std::vector<size_t> next;
  std::vector<double> streamTime;
  std::vector<std::vector<uint32_t>> clocks;
  // Per semaphore, in arrival order, the join of the signallers' clocks at
  // that signal and every earlier one.
  std::vector<std::vector<std::vector<uint32_t>>> signalClocks;
  // Per semaphore, its signals' (time, trace index) in time order: the
  // value-th is when it reached value. Kept sorted as signals arrive (they
  // arrive nearly in time order) rather than selected per wait, which cost
  // a pass over every signal so far each time a stream's next instruction
  // was looked at.
  std::vector<std::vector<std::pair<double, int64_t>>> signalTimes;
  HazardChecker hazards;
  int sinceForgetting = 0;
  double sbufPortFree = 0, psumPortFree = 0;
  // Each stream's last instruction and each port's last holder, by trace
  // index: what an instruction's start waited for (TraceEvent::after).
  std::vector<int64_t> lastEvent;
  int64_t sbufPortHolder = -1, psumPortHolder = -1;
  std::vector<TraceEvent> trace;
  SimResult result;
};

Execution::Execution(Simulator &sim,
                     std::vector<Simulator::Scheduled> *order)
    : artifact(sim.artifact), target(sim.target), options(sim.options),
      order(order), streams(sim.artifact.streams),
      numStreams(streams.size()), machine{sim.hbm, sim.sbuf, sim.psum,
                                          sim.rounder},
      next(numStreams, 0), streamTime(numStreams, 0.0),
      clocks(numStreams, std::vector<uint32_t>(numStreams, 0)),
      signalClocks(artifact.manifest.semaphores()),
      signalTimes(artifact.manifest.semaphores()), hazards(numStreams),
      lastEvent(numStreams, -1) {
  for (const artifact::Stream &s : streams) {
    result.streams.push_back({artifact::streamName(s.engine, s.queue), 0, 0});
  }
}

llvm::Expected<SimResult> Execution::run() {
  while (std::optional<Candidate> candidate = earliestReady()) {
    if (auto e = step(*candidate)) {
      return std::move(e);
    }
  }
  if (!finished()) {
    return deadlock();
  }
  summarize();
  return std::move(result);
}

/// When semaphore `sem` reached `value`, if it has, and the trace index of
/// the signal that got it there (-1: the initial value).
std::optional<std::pair<double, int64_t>>
Execution::reachedAt(uint16_t sem, uint32_t value) const {
  if (value == 0) {
    return std::pair<double, int64_t>{0.0, -1};
  }
  const auto &times = signalTimes[sem];
  if (times.size() < value) {
    return std::nullopt;
  }
  return times[value - 1];
}

/// Among the streams whose next instruction has its waits satisfied, the one
/// that can start earliest (the first such stream on a tie); none when every
/// stream has finished or waits.
std::optional<Execution::Candidate> Execution::earliestReady() const {
  std::optional<Candidate> best;
  for (size_t s = 0; s < numStreams; ++s) {
    if (next[s] >= streams[s].instructions.size()) {
      continue;
    }
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
    if (ready && start < (best ? best->start : kNever)) {
      best = Candidate{s, start, after};
    }
  }
  return best;
}

bool Execution::finished() const {
  for (size_t s = 0; s < numStreams; ++s) {
    if (next[s] < streams[s].instructions.size()) {
      return false;
    }
  }
  return true;
}

/// The error for a run where no stream can go on: what each blocked stream
/// waits for and how far each of those semaphores has got.
llvm::Error Execution::deadlock() const {
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

/// Runs the candidate's instruction: its place on the timeline, its clock,
/// its hazards, its effect and its signals, in that order.
llvm::Error Execution::step(const Candidate &candidate) {
  size_t s = candidate.stream;
  size_t index = next[s]++;
  const isa::Instruction &inst = streams[s].instructions[index];
  Issued issued = issue(s, index, inst, candidate);
  uint32_t epoch = joinClocks(s, inst);
  if (options.checkHazards) {
    checkHazards(s, index, inst, epoch);
  }
  if (auto e = apply(s, index, inst)) {
    return e;
  }
  signal(s, inst, issued);
  return llvm::Error::success();
}

/// Places the instruction on the timeline: it starts when its stream, its
/// waits and the shared ports it uses allow, and the stream, the ports, the
/// stream's statistics and the trace are updated.
Execution::Issued Execution::issue(size_t s, size_t index,
                                   const isa::Instruction &inst,
                                   const Candidate &candidate) {
  double start = candidate.start;
  // What the start waited for: the stream, a wait's signal or a port.
  int64_t after = candidate.after;
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
  int64_t event = static_cast<int64_t>(trace.size());
  lastEvent[s] = event;
  double duration = isa::instructionSeconds(inst, target, options.groups());
  double end = start + duration;
  double held = isa::streamSeconds(inst, target, options.groups());
  if (sbufPort) {
    sbufPortHolder = event;
    sbufPortFree = end;
  }
  if (psumPort) {
    psumPortHolder = event;
    psumPortFree = end;
  }
  streamTime[s] = start + held;
  result.streams[s].instructions++;
  result.streams[s].busySeconds += held;
  result.makespanSeconds = std::max(result.makespanSeconds, end);
  trace.push_back({static_cast<int>(s),
                   isa::schemaOf(inst.opcode).mnemonic.str(), start, duration,
                   after, static_cast<int64_t>(index)});
  if (inst.opcode == isa::Opcode::Matmul) {
    result.matmulFlops += 2.0 * inst.operands[1].partitions *
                          inst.operands[1].freeElements() *
                          inst.operands[2].freeElements();
  }
  return {end, event};
}

/// Happens-before: joins the clocks of the signals the instruction's waits
/// consumed into its stream's clock, then counts the instruction; returns
/// its epoch.
uint32_t Execution::joinClocks(size_t s, const isa::Instruction &inst) {
  std::vector<uint32_t> &clock = clocks[s];
  for (int w = 0; w < inst.numWaits; ++w) {
    const auto &list = signalClocks[inst.waitSemaphore[w]];
    size_t value = std::min<size_t>(inst.waitValue[w], list.size());
    if (value == 0) {
      continue;
    }
    // Entry value - 1 joins the clocks of the first `value` signals.
    const std::vector<uint32_t> &joined = list[value - 1];
    for (size_t e = 0; e < numStreams; ++e) {
      clock[e] = std::max(clock[e], joined[e]);
    }
  }
  return ++clock[s];
}

/// Reports the instruction's accesses that race with earlier ones (the first
/// 32 races of the run), records them, and now and then forgets the
/// accesses every running stream is ordered after.
void Execution::checkHazards(size_t s, size_t index,
                             const isa::Instruction &inst, uint32_t epoch) {
  int stream = static_cast<int>(s);
  for (int i = 0; i < inst.numOperands; ++i) {
    HazardChecker::Access access{stream, epoch, index,
                                 isa::regionOfOperand(inst, i),
                                 isa::writesOperand(inst.opcode, i)};
    hazards.check(access, clocks[s], [&](const HazardChecker::Access &prev) {
      if (result.hazards.size() < 32) {
        result.hazards.push_back(describeRace(prev, access));
      }
    });
  }
  for (int i = 0; i < inst.numOperands; ++i) {
    hazards.record({stream, epoch, index, isa::regionOfOperand(inst, i),
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

std::string Execution::describeRace(const HazardChecker::Access &prev,
                                    const HazardChecker::Access &access) const {
  const Region &region = access.region;
  const isa::Instruction &other = streams[prev.stream].instructions[prev.index];
  const isa::Instruction &inst =
      streams[access.stream].instructions[access.index];
  return llvm::formatv(
      "race on {0} partitions [{1}, {2}) bytes [{3}, {4}): {5} "
      "instruction {6} ('{7}') {8} and {9} instruction {10} ('{11}') "
      "{12}, with no semaphore ordering them",
      isa::memoryName(region.memory), std::max(region.rowLo, prev.region.rowLo),
      std::min(region.rowHi, prev.region.rowHi),
      std::max(region.firstByte(), prev.region.firstByte()),
      std::min(region.endByte(), prev.region.endByte()),
      result.streams[prev.stream].name, prev.index,
      isa::schemaOf(other.opcode).mnemonic, prev.write ? "writes" : "reads",
      result.streams[access.stream].name, access.index,
      isa::schemaOf(inst.opcode).mnemonic, access.write ? "writes" : "reads");
}

/// Applies the instruction's effect on the memories, unless the run models
/// timing only.
llvm::Error Execution::apply(size_t s, size_t index,
                             const isa::Instruction &inst) {
  if (options.timingOnly) {
    return llvm::Error::success();
  }
  if (order) {
    order->push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(index),
                      readsOnlyWritten(machine, inst)});
  }
  return applyInstruction(machine, options, inst, result.streams[s].name,
                          index);
}

/// The instruction's signals land at its end, carrying its stream's clock.
void Execution::signal(size_t s, const isa::Instruction &inst,
                       const Issued &issued) {
  for (int i = 0; i < inst.numSignals; ++i) {
    // Each entry joins the signaller's clock with every earlier signal's,
    // so a wait for value v reads entry v - 1 alone: joining the first v
    // signals one by one made every wait cost as many signals as the
    // semaphore had received (quadratic in the program's length).
    auto &list = signalClocks[inst.signalSemaphore[i]];
    list.push_back(clocks[s]);
    if (list.size() > 1) {
      const std::vector<uint32_t> &before = list[list.size() - 2];
      for (size_t e = 0; e < numStreams; ++e) {
        list.back()[e] = std::max(list.back()[e], before[e]);
      }
    }
    auto &times = signalTimes[inst.signalSemaphore[i]];
    std::pair<double, int64_t> signal{issued.end, issued.event};
    times.insert(std::upper_bound(times.begin(), times.end(), signal,
                                  [](const auto &a, const auto &b) {
                                    return a.first < b.first;
                                  }),
                 signal);
  }
}

/// The run's FLOPs and utilisation, once every stream has finished.
void Execution::summarize() {
  result.trace =
      std::make_shared<const std::vector<TraceEvent>>(std::move(trace));
  result.modelFlops = artifact.manifest.cost().model_flops() > 0
                          ? artifact.manifest.cost().model_flops()
                          : result.matmulFlops;
  if (result.makespanSeconds > 0) {
    result.mfu = result.modelFlops /
                 (result.makespanSeconds * target.corePeakFlopsBf16());
  }
}

llvm::Expected<SimResult> Simulator::run() {
  if (auto e = checkRunnable()) {
    return std::move(e);
  }
  if (options.path == ExecutionPath::EventDriven || options.timingOnly) {
    return Execution(*this).run();
  }
  if (schedule) {
    return replay();
  }
  Schedule recorded;
  llvm::Expected<SimResult> result = Execution(*this, &recorded.order).run();
  if (result) {
    recorded.result = *result;
    schedule = std::move(recorded);
  }
  return result;
}

/// Applies the recorded schedule's instructions in its order.
llvm::Expected<SimResult> Simulator::replay() {
  MachineState machine{hbm, sbuf, psum, rounder};
  HostProfile *profile = options.hostProfile;
  for (auto [s, index, readsWritten] : schedule->order) {
    const isa::Instruction &inst = artifact.streams[s].instructions[index];
    machine.tracksWritten = !readsWritten;
    auto start = profile ? std::chrono::steady_clock::now()
                         : std::chrono::steady_clock::time_point();
    if (auto e = applyInstruction(machine, options, inst,
                                  schedule->result.streams[s].name, index)) {
      return std::move(e);
    }
    if (profile) {
      auto op = static_cast<size_t>(inst.opcode);
      profile->seconds[op] += std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
      profile->instructions[op]++;
    }
  }
  return schedule->result;
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
  static const std::vector<TraceEvent> none;
  const std::vector<TraceEvent> &trace = result.trace ? *result.trace : none;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent &e = trace[i];
    out << llvm::formatv(
        "{{\"name\": \"{0}\", \"ph\": \"X\", \"pid\": 0, \"tid\": {1}, "
        "\"ts\": {2:F4}, \"dur\": {3:F4}, \"args\": {{\"after\": {4}, "
        "\"index\": {5}}}{6}\n",
        e.name, e.stream, e.startSeconds * 1e6, e.durationSeconds * 1e6,
        e.after, e.index, i + 1 < trace.size() ? "," : "");
  }
  out << "]}\n";
  return llvm::Error::success();
}

} // namespace kiln::sim
