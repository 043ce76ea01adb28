//===- Engine.h - the engine phase's instruction graph ----------*- C++ -*-===//

#ifndef KILN_PASSES_ENGINE_ENGINE_H
#define KILN_PASSES_ENGINE_ENGINE_H

#include "compiler/target/Isa.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace kiln::engine_passes {

/// Streams: the four engines, then one per DMA queue.
inline constexpr int kDmaStream = 4;
inline int streamOf(isa::Engine engine, int queue) {
  return engine == isa::Engine::Dma ? kDmaStream + queue
                                    : static_cast<int>(engine);
}

struct Node {
  isa::Instruction inst; // addresses bound; engine and queue once scheduled
  llvm::SmallVector<uint32_t, 4> preds;
  int stream = -1;
  double start = 0, finish = 0;
  /// A piece of a split transfer (splitLargeDma): the index of its first
  /// piece, which the pieces follow in partition order; -1 otherwise.
  int64_t pieceOf = -1;
};

/// A dma_copy of more than two `pieceBytes` cut along its partitions into
/// at most `maxPieces` transfers of about equal size, which the scheduler
/// may put on different queues; any other instruction as it is.
llvm::SmallVector<isa::Instruction, 4>
splitLargeDma(const isa::Instruction &inst, int64_t pieceBytes, int maxPieces);

/// Adds to each node the earlier nodes it must follow: every RAW, WAR and
/// WAW pair on overlapping bytes.
void computeDependencies(std::vector<Node> &nodes);

/// Assigns engines and queues and returns the issue order. With `listSchedule`
/// off, nodes keep program order. With `mergePieces`, a piece of a split
/// transfer that would not run beside its siblings (every free queue has
/// other transfers to take) takes the siblings after it into one transfer:
/// the nodes merged away are left out of the order and their dependents
/// follow the merged one.
std::vector<uint32_t> scheduleNodes(std::vector<Node> &nodes,
                                    const target::TargetDescription &target,
                                    const isa::GroupSizes &groups,
                                    bool listSchedule,
                                    bool mergePieces = false);

/// The list schedule with and without merging split transfers' pieces,
/// whichever ends sooner by the timing model: merging saves a DMA-bound
/// step the pieces' fixed costs, but can hold back a load that a
/// TensorE-bound step waits for.
std::vector<uint32_t> scheduleBest(std::vector<Node> &nodes,
                                   const target::TargetDescription &target,
                                   const isa::GroupSizes &groups);

/// Makes the shared ports' holders follow each other in the schedule's
/// order: each instruction that holds a port VectorE shares with another
/// engine depends on the port's previous holder on another stream.
void orderSharedPorts(std::vector<Node> &nodes, llvm::ArrayRef<uint32_t> order,
                      const target::TargetDescription &target);

/// Sets waits and signals on the instructions; returns the number of
/// semaphores used. An instruction that needs more than four waits gets
/// carrier instructions from `carrier` (added to nodes and order) before it.
llvm::Expected<int>
insertSemaphores(std::vector<Node> &nodes, std::vector<uint32_t> &order,
                 int streams,
                 llvm::function_ref<isa::Instruction(int stream)> carrier);

} // namespace kiln::engine_passes

#endif // KILN_PASSES_ENGINE_ENGINE_H
