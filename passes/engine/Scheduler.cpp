//===- Scheduler.cpp - engine assignment and list scheduling --------------===//
//
// A time-stepped list scheduler: whenever a stream is free, it takes the
// ready instruction with the longest path to the end of the step among
// those it can run. Durations come from the target's timing model
// (compiler/target/Timing.h), the same one the simulator reports with, and
// so do the access ports engines share: Vector and GpSimd cannot both reach
// SBUF at once on trn1, so an instruction waits for the port as well as for
// its engine.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include "compiler/target/Timing.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <queue>
#include <set>

namespace kiln::engine_passes {

namespace {

bool onlySbuf(const isa::Instruction &inst) {
  for (int i = 0; i < inst.numOperands; ++i) {
    if (inst.operands[i].memory != isa::Memory::Sbuf) {
      return false;
    }
  }
  return true;
}

/// The engines that may run an instruction, best first.
llvm::SmallVector<isa::Engine, 3> candidates(const isa::Instruction &inst) {
  using E = isa::Engine;
  switch (inst.opcode) {
  case isa::Opcode::Matmul:
  case isa::Opcode::Transpose:
    return {E::Tensor};
  case isa::Opcode::Activation:
    return {E::Scalar};
  case isa::Opcode::TensorScalar:
    // ScalarE has its own SBUF port and a faster clock than VectorE, so the
    // row statistics, runtime scalars and constant factors of normalisations
    // and optimizer updates need not queue for the port Vector and GpSimd
    // share. Its ALU works on floating point only.
    if (!isa::hasIntegerOperand(inst)) {
      if (onlySbuf(inst)) {
        return {E::Vector, E::Scalar, E::GpSimd};
      }
      return {E::Vector, E::Scalar};
    }
    [[fallthrough]];
  case isa::Opcode::TensorTensor:
    if (onlySbuf(inst)) {
      return {E::Vector, E::GpSimd};
    }
    return {E::Vector};
  case isa::Opcode::TensorReduce:
    return {E::Vector};
  case isa::Opcode::TensorCopy:
    if (onlySbuf(inst)) {
      return {E::Vector, E::Scalar, E::GpSimd};
    }
    return {E::Vector, E::Scalar};
  case isa::Opcode::Iota:
  case isa::Opcode::Memset:
  case isa::Opcode::AffineSelect:
    if (onlySbuf(inst)) {
      return {E::GpSimd, E::Vector};
    }
    return {E::Vector};
  case isa::Opcode::PartitionReduce:
  case isa::Opcode::PartitionBroadcast:
  case isa::Opcode::Random:
    return {E::GpSimd};
  case isa::Opcode::DmaCopy:
  case isa::Opcode::DmaGather:
  case isa::Opcode::DmaScatter:
  case isa::Opcode::Collective:
    return {E::Dma};
  }
  return {E::Vector};
}

double secondsOn(const isa::Instruction &inst, isa::Engine engine,
                 const target::TargetDescription &t, const isa::GroupSizes &groups) {
  isa::Instruction on = inst;
  on.engine = engine;
  return isa::instructionSeconds(on, t, groups);
}

struct ByPriority {
  const std::vector<double> *level;
  bool operator()(uint32_t a, uint32_t b) const {
    if ((*level)[a] != (*level)[b]) {
      return (*level)[a] > (*level)[b];
    }
    return a < b;
  }
};

isa::Engine engineOf(int stream) {
  return stream >= kDmaStream ? isa::Engine::Dma
                              : static_cast<isa::Engine>(stream);
}

/// The index of an engine kind's ready set: DMA streams share one.
int kindOf(isa::Engine engine) { return static_cast<int>(engine); }
int kindOfStream(int stream) {
  return stream >= kDmaStream ? kindOf(isa::Engine::Dma) : stream;
}

/// One scheduling run over `nodes`: when each stream and shared port is
/// next free, and, for the list schedule, what is ready and how urgent.
class StreamScheduler {
public:
  StreamScheduler(std::vector<Node> &nodes, const target::TargetDescription &t,
                  const isa::GroupSizes &groups);

  /// Each instruction in program order on the stream where it finishes
  /// soonest.
  std::vector<uint32_t> inProgramOrder();
  /// The list schedule: see scheduleNodes. Merged pieces widen the
  /// transfer that takes them; their dependencies move with
  /// applyMerges.
  std::vector<uint32_t> byPriority(bool mergePieces);
  bool mergedAny() const { return merged > 0; }
  /// Gives each transfer that took pieces their dependencies, and their
  /// dependents the transfer.
  void applyMerges();
  /// Narrows the transfers that took pieces back to their own partitions.
  void undoWidening();

private:
  unsigned portsOn(uint32_t i, int stream) const {
    return isa::sharedPorts(nodes[i].inst, engineOf(stream), t);
  }
  double portsFreeAt(unsigned ports) const;
  void place(uint32_t i, int stream, double start);
  /// How long a placed instruction keeps its stream (a queue may start its
  /// next transfer before the last completes, when the target says so).
  double heldFor(uint32_t i) const {
    return isa::streamSeconds(nodes[i].inst, t, groups);
  }

  void computeLevels();
  std::vector<int> visitOrder() const;
  void admitReady();
  std::optional<uint32_t> pickFor(int stream) const;
  void issue(uint32_t i, int stream, bool mergePieces);
  bool queuesBusy(uint32_t i, int stream) const;
  void mergeFollowingPieces(uint32_t i);
  void release(uint32_t done, double finish);
  double nextEventTime() const;

  std::vector<Node> &nodes;
  const target::TargetDescription &t;
  isa::GroupSizes groups;
  uint32_t n;
  int streams;
  std::vector<llvm::SmallVector<isa::Engine, 3>> engines;
  std::vector<double> cost;
  /// When each shared port (isa::SharedPort bit 0, 1) is next free.
  std::array<double, 2> portFree{0.0, 0.0};
  std::vector<double> streamFree;
  std::vector<uint32_t> order;

  // The list schedule's state.
  std::vector<llvm::SmallVector<uint32_t, 4>> successors;
  std::vector<uint32_t> waiting;
  /// Longest path to the end, through successors: the priority.
  std::vector<double> level;
  /// Ready instructions per engine kind (one instruction may sit in several).
  std::vector<std::set<uint32_t, ByPriority>> available;
  using Pending = std::pair<double, uint32_t>;
  /// Instructions whose predecessors are all placed, by when their data is.
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  std::vector<double> dataReady;
  double now = 0;
  /// Pieces of a split transfer merged into the piece before them.
  std::vector<int64_t> mergedInto;
  uint32_t merged = 0;
  /// The partitions of each transfer that took pieces, before it did.
  std::vector<std::pair<uint32_t, uint16_t>> ownPartitions;
};

StreamScheduler::StreamScheduler(std::vector<Node> &nodes,
                                 const target::TargetDescription &t,
                                 const isa::GroupSizes &groups)
    : nodes(nodes), t(t), groups(groups),
      n(static_cast<uint32_t>(nodes.size())),
      streams(kDmaStream + static_cast<int>(t.dmaQueues)), engines(n), cost(n),
      streamFree(streams, 0.0) {
  for (uint32_t i = 0; i < n; ++i) {
    engines[i] = candidates(nodes[i].inst);
    cost[i] = secondsOn(nodes[i].inst, engines[i][0], t, groups);
  }
  order.reserve(n);
}

double StreamScheduler::portsFreeAt(unsigned ports) const {
  double at = 0;
  for (int b = 0; b < 2; ++b) {
    if (ports & (1u << b)) {
      at = std::max(at, portFree[b]);
    }
  }
  return at;
}

void StreamScheduler::place(uint32_t i, int stream, double start) {
  Node &node = nodes[i];
  node.stream = stream;
  node.inst.engine = engineOf(stream);
  node.inst.queue =
      static_cast<uint8_t>(stream >= kDmaStream ? stream - kDmaStream : 0);
  node.start = start;
  node.finish = start + isa::instructionSeconds(node.inst, t, groups);
  unsigned ports = isa::sharedPorts(node.inst, t);
  for (int b = 0; b < 2; ++b) {
    if (ports & (1u << b)) {
      portFree[b] = node.finish;
    }
  }
  streamFree[stream] = node.start + heldFor(i);
  order.push_back(i);
}

std::vector<uint32_t> StreamScheduler::inProgramOrder() {
  for (uint32_t i = 0; i < n; ++i) {
    double ready = 0;
    for (uint32_t p : nodes[i].preds) {
      ready = std::max(ready, nodes[p].finish);
    }
    int best = -1;
    double bestFinish = 0;
    for (isa::Engine e : engines[i]) {
      int first = e == isa::Engine::Dma ? kDmaStream : static_cast<int>(e);
      int last = e == isa::Engine::Dma ? streams : first + 1;
      for (int s = first; s < last; ++s) {
        double start =
            std::max({ready, streamFree[s], portsFreeAt(portsOn(i, s))});
        double finish = start + secondsOn(nodes[i].inst, e, t, groups);
        if (best < 0 || finish < bestFinish) {
          best = s;
          bestFinish = finish;
        }
      }
    }
    place(i, best,
          std::max({ready, streamFree[best], portsFreeAt(portsOn(i, best))}));
  }
  return std::move(order);
}

std::vector<uint32_t> StreamScheduler::byPriority(bool mergePieces) {
  computeLevels();
  available.assign(kDmaStream + 1,
                   std::set<uint32_t, ByPriority>(ByPriority{&level}));
  dataReady.assign(n, 0.0);
  mergedInto.assign(n, -1);
  for (uint32_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) {
      pending.push({0.0, i});
    }
  }
  std::vector<int> streamsInTurn = visitOrder();
  while (order.size() + merged < n) {
    admitReady();
    bool placed = false;
    for (int s : streamsInTurn) {
      if (streamFree[s] > now) {
        continue;
      }
      if (std::optional<uint32_t> i = pickFor(s)) {
        issue(*i, s, mergePieces);
        placed = true;
      }
    }
    if (!placed) {
      // Nothing could start now: move to the next time something can.
      now = nextEventTime();
    }
  }
  return std::move(order);
}

void StreamScheduler::computeLevels() {
  successors.assign(n, {});
  waiting.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    waiting[i] = static_cast<uint32_t>(nodes[i].preds.size());
    for (uint32_t p : nodes[i].preds) {
      successors[p].push_back(i);
    }
  }
  level.assign(n, 0.0);
  for (uint32_t i = n; i-- > 0;) {
    double tail = 0;
    for (uint32_t s : successors[i]) {
      tail = std::max(tail, level[s]);
    }
    level[i] = cost[i] + tail;
  }
}

/// Free streams pick faster engines first (on trn1 ScalarE and GpSimd run
/// at 1.4 GHz, VectorE at 1.12), so that an instruction several engines
/// can run goes where it finishes soonest, and VectorE, the one engine for
/// reductions, stays free for them.
std::vector<int> StreamScheduler::visitOrder() const {
  std::vector<int> visit{static_cast<int>(isa::Engine::Tensor)};
  std::array<std::pair<double, isa::Engine>, 3> byClock{
      {{t.clocks.scalarHz, isa::Engine::Scalar},
       {t.clocks.gpsimdHz, isa::Engine::GpSimd},
       {t.clocks.vectorHz, isa::Engine::Vector}}};
  std::stable_sort(
      byClock.begin(), byClock.end(),
      [](const auto &a, const auto &b) { return a.first > b.first; });
  for (auto &[hz, e] : byClock) {
    visit.push_back(static_cast<int>(e));
  }
  for (int s = kDmaStream; s < streams; ++s) {
    visit.push_back(s);
  }
  return visit;
}

/// Moves the instructions whose data is ready by now into the ready sets of
/// every engine that may run them.
void StreamScheduler::admitReady() {
  while (!pending.empty() && pending.top().first <= now) {
    uint32_t i = pending.top().second;
    pending.pop();
    for (isa::Engine e : engines[i]) {
      available[kindOf(e)].insert(i);
    }
  }
}

/// The most urgent ready instruction for `stream` whose ports are free,
/// among the first few: one that waits for a port must not hold back the
/// engine.
std::optional<uint32_t> StreamScheduler::pickFor(int stream) const {
  const auto &set = available[kindOfStream(stream)];
  int looked = 0;
  for (auto it = set.begin(); it != set.end() && looked < 8; ++it, ++looked) {
    if (portsFreeAt(portsOn(*it, stream)) <= now) {
      return *it;
    }
  }
  return std::nullopt;
}

/// Starts `i` on `stream` now, first taking in the pieces after it when
/// they would not run beside it anyway, and readies what waited for it.
void StreamScheduler::issue(uint32_t i, int stream, bool mergePieces) {
  for (isa::Engine e : engines[i]) {
    available[kindOf(e)].erase(i);
  }
  uint32_t mergedBefore = merged;
  if (mergePieces && nodes[i].pieceOf >= 0 && queuesBusy(i, stream)) {
    mergeFollowingPieces(i);
  }
  place(i, stream, now);
  release(i, nodes[i].finish);
  for (uint32_t j = i + 1;
       merged > mergedBefore && j < n && nodes[j].pieceOf == nodes[i].pieceOf;
       ++j) {
    if (mergedInto[j] == static_cast<int64_t>(i)) {
      release(j, nodes[i].finish);
    }
  }
}

/// Whether every DMA queue free now but `stream` has another transfer,
/// about as urgent, to take: then pieces beside each other would not run
/// side by side, and each would only add a transfer's fixed cost.
bool StreamScheduler::queuesBusy(uint32_t i, int stream) const {
  int freeQueues = 0;
  for (int q = kDmaStream; q < streams; ++q) {
    freeQueues += q != stream && streamFree[q] <= now;
  }
  // Only transfers nearly as urgent count (within one piece's time of
  // its path to the end): pieces that displace less urgent ones finish
  // the urgent transfer sooner, and those have slack to wait.
  int others = 0;
  for (uint32_t j : available[kindOf(isa::Engine::Dma)]) {
    if (level[j] < level[i] - cost[i]) {
      break; // the set is in priority order
    }
    others += j != i && nodes[j].pieceOf != nodes[i].pieceOf;
    if (others > freeQueues) {
      return true;
    }
  }
  return false;
}

/// Takes the ready pieces after `i` (adjacent partitions) into it.
void StreamScheduler::mergeFollowingPieces(uint32_t i) {
  isa::Instruction &inst = nodes[i].inst;
  auto &dmas = available[kindOf(isa::Engine::Dma)];
  for (uint32_t j = i + 1; j < n && nodes[j].pieceOf == nodes[i].pieceOf; ++j) {
    const isa::Instruction &next = nodes[j].inst;
    int64_t count = inst.operands[0].partitions + next.operands[0].partitions;
    bool adjacent = dmas.count(j) > 0;
    for (int k = 0; adjacent && k < 2; ++k) {
      const isa::AccessPattern &a = inst.operands[k], &b = next.operands[k];
      adjacent = a.memory == isa::Memory::Hbm
                     ? b.offset == a.offset + a.partitions * a.partitionStride *
                                                  a.elementBytes()
                     : b.partition == a.partition + a.partitions &&
                           isa::partitionStartAligned(a.partition, count);
    }
    if (!adjacent) {
      break;
    }
    if (j == i + 1) {
      ownPartitions.push_back({i, inst.operands[0].partitions});
    }
    inst.operands[0].partitions = static_cast<uint16_t>(count);
    inst.operands[1].partitions = static_cast<uint16_t>(count);
    dmas.erase(j);
    mergedInto[j] = i;
    ++merged;
  }
}

/// Marks `done` placed, finishing at `finish`, for its successors.
void StreamScheduler::release(uint32_t done, double finish) {
  for (uint32_t succ : successors[done]) {
    dataReady[succ] = std::max(dataReady[succ], finish);
    if (--waiting[succ] == 0) {
      pending.push({dataReady[succ], succ});
    }
  }
}

/// The next time a stream or shared port frees up for a ready instruction,
/// or a pending one's data is ready.
double StreamScheduler::nextEventTime() const {
  double next = std::numeric_limits<double>::infinity();
  if (!pending.empty()) {
    next = pending.top().first;
  }
  for (int s = 0; s < streams; ++s) {
    if (available[kindOfStream(s)].empty()) {
      continue;
    }
    if (streamFree[s] > now) {
      next = std::min(next, streamFree[s]);
    }
    for (double at : portFree) {
      if (at > now) {
        next = std::min(next, at);
      }
    }
  }
  return next;
}

void StreamScheduler::applyMerges() {
  if (merged == 0) {
    return;
  }
  // A piece's own dependencies (it may overlap writes its siblings do not)
  // are the merged transfer's too: the semaphores must cover them.
  for (uint32_t j = 0; j < n; ++j) {
    if (mergedInto[j] >= 0) {
      Node &into = nodes[mergedInto[j]];
      into.preds.append(nodes[j].preds.begin(), nodes[j].preds.end());
    }
  }
  // Dependents of a merged-away piece follow the transfer that took it.
  for (Node &node : nodes) {
    for (uint32_t &p : node.preds) {
      if (mergedInto[p] >= 0) {
        p = static_cast<uint32_t>(mergedInto[p]);
      }
    }
    // std::sort: llvm::sort of plain integers is qsort, a call a comparison.
    std::sort(node.preds.begin(), node.preds.end());
    node.preds.erase(std::unique(node.preds.begin(), node.preds.end()),
                     node.preds.end());
  }
}

void StreamScheduler::undoWidening() {
  for (auto [i, partitions] : ownPartitions) {
    nodes[i].inst.operands[0].partitions = partitions;
    nodes[i].inst.operands[1].partitions = partitions;
  }
}

/// What a schedule decided for one node.
struct Placement {
  int stream;
  double start, finish;
  isa::Engine engine;
  uint8_t queue;
  /// A merged transfer's are wider than its own.
  std::array<uint16_t, 2> partitions;
};

std::vector<Placement> placementsOf(const std::vector<Node> &nodes) {
  std::vector<Placement> placed;
  placed.reserve(nodes.size());
  for (const Node &node : nodes) {
    placed.push_back({node.stream, node.start, node.finish, node.inst.engine,
                      node.inst.queue,
                      {node.inst.operands[0].partitions,
                       node.inst.operands[1].partitions}});
  }
  return placed;
}

void restore(std::vector<Node> &nodes, llvm::ArrayRef<Placement> placed) {
  for (auto [node, p] : llvm::zip_equal(nodes, placed)) {
    node.stream = p.stream;
    node.start = p.start;
    node.finish = p.finish;
    node.inst.engine = p.engine;
    node.inst.queue = p.queue;
    node.inst.operands[0].partitions = p.partitions[0];
    node.inst.operands[1].partitions = p.partitions[1];
  }
}

double makespan(const std::vector<Node> &nodes, llvm::ArrayRef<uint32_t> order) {
  double end = 0;
  for (uint32_t i : order) {
    end = std::max(end, nodes[i].finish);
  }
  return end;
}

} // namespace

std::vector<uint32_t> scheduleNodes(std::vector<Node> &nodes,
                                    const target::TargetDescription &t,
                                    const isa::GroupSizes &groups, bool listSchedule,
                                    bool mergePieces) {
  StreamScheduler scheduler(nodes, t, groups);
  if (!listSchedule) {
    return scheduler.inProgramOrder();
  }
  std::vector<uint32_t> order = scheduler.byPriority(mergePieces);
  scheduler.applyMerges();
  return order;
}

void orderSharedPorts(std::vector<Node> &nodes, llvm::ArrayRef<uint32_t> order,
                      const target::TargetDescription &t) {
  std::array<int64_t, 2> holder{-1, -1};
  for (uint32_t i : order) {
    unsigned ports = isa::sharedPorts(nodes[i].inst, t);
    for (int b = 0; b < 2; ++b) {
      if (!(ports & (1u << b))) {
        continue;
      }
      if (holder[b] >= 0 && nodes[holder[b]].stream != nodes[i].stream) {
        nodes[i].preds.push_back(static_cast<uint32_t>(holder[b]));
      }
      holder[b] = i;
    }
  }
}

std::vector<uint32_t> scheduleBest(std::vector<Node> &nodes,
                                   const target::TargetDescription &t,
                                   const isa::GroupSizes &groups) {
  // The merging schedule runs first, on the nodes themselves: when it
  // merges nothing it is the other schedule, and otherwise what it decided
  // is kept aside (a few bytes a node, not a copy of the nodes) while the
  // other runs.
  StreamScheduler merging(nodes, t, groups);
  std::vector<uint32_t> merged = merging.byPriority(/*mergePieces=*/true);
  if (!merging.mergedAny()) {
    return merged;
  }
  double mergedEnd = makespan(nodes, merged);
  std::vector<Placement> mergedPlacements = placementsOf(nodes);
  merging.undoWidening();
  std::vector<uint32_t> apart =
      StreamScheduler(nodes, t, groups).byPriority(/*mergePieces=*/false);
  if (!(mergedEnd < makespan(nodes, apart))) {
    return apart;
  }
  restore(nodes, mergedPlacements);
  merging.applyMerges();
  return merged;
}

} // namespace kiln::engine_passes
