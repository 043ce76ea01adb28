//===- Simulator.h - the NeuronCore simulator -------------------*- C++ -*-===//
//
// Executes a loaded artifact's engine streams with machine-model.md's
// semantics: every engine runs its stream in order; engines are ordered only
// by semaphores. An event-driven run yields the results (functional model),
// the modelled time of every instruction (timing model), and every pair of
// cross-engine accesses that no semaphore chain orders (hazard checker);
// since none of the latter depends on values, later runs replay the first
// one's order (ExecutionPath). docs/runtime.md describes it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIM_SIMULATOR_H
#define KILN_RUNTIME_SIM_SIMULATOR_H

#include "runtime/artifact/Artifact.h"
#include "compiler/target/Timing.h"
#include "runtime/comm/Communicator.h"
#include "runtime/sim/Memory.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::sim {

/// How a Simulator executes its runs. The schedule (which instruction each
/// engine issues when, the hazards, the modelled times) depends on no value
/// a run computes, so one event-driven run yields every run's.
enum class ExecutionPath {
  /// The first run is event-driven and records the order it applied the
  /// instructions in; later runs apply them in that order, with no
  /// scheduling, and report the first run's schedule. The same effects in
  /// the same order: results are bit-identical to the event-driven path's.
  Replay,
  /// Every run schedules event by event (tests compare the two paths).
  EventDriven,
};

/// Host time spent applying each opcode's instructions, summed over runs.
struct HostProfile {
  std::array<double, isa::kOpcodes> seconds{};
  std::array<int64_t, isa::kOpcodes> instructions{};
};

struct SimOptions {
  ExecutionPath path = ExecutionPath::Replay;
  /// Where replayed runs add up their host time per opcode (not owned);
  /// null: not measured.
  HostProfile *hostProfile = nullptr;
  /// Report cross-engine accesses not ordered by semaphores (costs time).
  bool checkHazards = true;
  /// Round bf16 results stochastically, deterministically from `seed`.
  bool stochasticRounding = false;
  uint64_t seed = 0;
  /// Workers of the data-parallel group (collectives' cost and semantics);
  /// an artifact compiled for a group (its manifest's world_size) overrides.
  int worldSize = 1;
  /// Runs collectives across the group when worldSize > 1 (not owned).
  comm::Communicator *communicator = nullptr;
  /// The same for the tensor-parallel group; the manifest's
  /// tensor_parallel overrides the size.
  int tensorParallel = 1;
  comm::Communicator *tensorCommunicator = nullptr;

  isa::GroupSizes groups() const { return {worldSize, tensorParallel}; }
  /// The communicator of a collective's group (null: a group of one).
  comm::Communicator *communicatorOf(isa::CollectiveGroup group) const {
    return group == isa::CollectiveGroup::Tensor ? tensorCommunicator
                                                 : communicator;
  }
  /// Models the artifact on this variant of its target instead (not owned):
  /// a what-if, such as twice the DMA bandwidth (kiln-bench-compile
  /// --what-if). Its memories must be at least the artifact's target's.
  const target::TargetDescription *target = nullptr;
  /// Only the timing: no instruction computes anything, so no buffer needs
  /// setting and none has results (a what-if needs no numbers).
  bool timingOnly = false;
};

struct StreamStats {
  std::string name;
  size_t instructions = 0;
  double busySeconds = 0;
};

struct TraceEvent {
  int stream = 0;
  std::string name;
  double startSeconds = 0, durationSeconds = 0;
  /// The trace index of the instruction whose end this one's start waited
  /// for (its stream's previous one, a signal it waited on, or the holder
  /// of a shared port); -1 when it started at 0. Following it back from the
  /// last instruction gives the critical path.
  int64_t after = -1;
  /// The instruction's position in its stream, as `kiln dump` numbers it.
  int64_t index = 0;
};

struct SimResult {
  double makespanSeconds = 0;
  std::vector<StreamStats> streams;
  std::vector<std::string> hazards;
  /// 2*K*M*N over the matmuls executed (the manifest's model FLOPs, when the
  /// compiler recorded them, are the graph's instead).
  double matmulFlops = 0;
  double modelFlops = 0;
  double mfu = 0;
  /// Every instruction's place on the timelines, in issue order; shared by
  /// the results of the runs that replay one schedule.
  std::shared_ptr<const std::vector<TraceEvent>> trace;
};

/// The modelled duration of one instruction, from the cost table.
inline double instructionSeconds(const isa::Instruction &inst,
                                 const target::TargetDescription &target,
                                 int worldSize) {
  return isa::instructionSeconds(inst, target, worldSize);
}

class Simulator {
public:
  Simulator(const artifact::Artifact &artifact, SimOptions options = {});

  /// Copies an input or inout buffer's bytes into HBM.
  llvm::Error setBuffer(llvm::StringRef name, llvm::StringRef bytes);
  /// The bytes of a buffer after a run (unwritten bytes read as 0xff).
  llvm::Expected<std::string> getBuffer(llvm::StringRef name) const;

  /// Runs every stream to completion. Errors: deadlock (naming what each
  /// blocked engine waits for) and unset input buffers.
  llvm::Expected<SimResult> run();

private:
  /// An instruction of the schedule, and whether everything it read was
  /// written when the schedule was recorded (MachineState::tracksWritten).
  struct Scheduled {
    uint32_t stream, index;
    bool readsWritten;
  };
  /// The order the event-driven run applied the instructions in, and what
  /// it modelled.
  struct Schedule {
    std::vector<Scheduled> order;
    SimResult result;
  };

  llvm::Error checkRunnable() const;
  llvm::Expected<SimResult> replay();

  const artifact::Artifact &artifact;
  const target::TargetDescription &target;
  SimOptions options;
  MemoryArray hbm, sbuf, psum;
  Rounder rounder;
  llvm::StringMap<const kneff::Buffer *> buffers;
  llvm::StringMap<bool> bufferSet;
  std::optional<Schedule> schedule;

  friend class Execution;
};

/// Writes the run's engine timelines as a Chrome/Perfetto trace (JSON).
llvm::Error writeTrace(llvm::StringRef path, const SimResult &result);

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_SIMULATOR_H
