//===- Scheduler.cpp - engine assignment and list scheduling --------------===//
//
// A time-stepped list scheduler: whenever a stream is free, it takes the
// ready instruction with the longest path to the end of the step among
// those it can run. Durations come from the target's timing model
// (compiler/target/Timing.h), the same one the simulator reports with.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include "compiler/target/Timing.h"

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
  case isa::Opcode::TensorTensor:
  case isa::Opcode::TensorScalar:
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
  case isa::Opcode::Collective:
    return {E::Dma};
  }
  return {E::Vector};
}

double secondsOn(isa::Instruction inst, isa::Engine engine,
                 const target::TargetDescription &t, int worldSize) {
  inst.engine = engine;
  return isa::instructionSeconds(inst, t, worldSize);
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

} // namespace

std::vector<uint32_t> scheduleNodes(std::vector<Node> &nodes,
                                    const target::TargetDescription &t,
                                    int worldSize, bool listSchedule) {
  const int queues = static_cast<int>(t.dmaQueues);
  const int streams = kDmaStream + queues;
  auto n = static_cast<uint32_t>(nodes.size());
  std::vector<llvm::SmallVector<isa::Engine, 3>> engines(n);
  std::vector<double> cost(n);
  for (uint32_t i = 0; i < n; ++i) {
    engines[i] = candidates(nodes[i].inst);
    cost[i] = secondsOn(nodes[i].inst, engines[i][0], t, worldSize);
  }
  auto place = [&](uint32_t i, int stream, double start) {
    Node &node = nodes[i];
    node.stream = stream;
    node.inst.engine = stream >= kDmaStream ? isa::Engine::Dma
                                            : static_cast<isa::Engine>(stream);
    node.inst.queue =
        static_cast<uint8_t>(stream >= kDmaStream ? stream - kDmaStream : 0);
    node.start = start;
    node.finish = start + secondsOn(node.inst, node.inst.engine, t, worldSize);
  };
  std::vector<uint32_t> order;
  order.reserve(n);
  std::vector<double> streamFree(streams, 0.0);

  if (!listSchedule) {
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
          double finish = std::max(ready, streamFree[s]) + cost[i];
          if (best < 0 || finish < bestFinish) {
            best = s;
            bestFinish = finish;
          }
        }
      }
      place(i, best, std::max(ready, streamFree[best]));
      streamFree[best] = nodes[i].finish;
      order.push_back(i);
    }
    return order;
  }

  // Longest path to the end, through successors.
  std::vector<llvm::SmallVector<uint32_t, 4>> successors(n);
  std::vector<uint32_t> waiting(n);
  for (uint32_t i = 0; i < n; ++i) {
    waiting[i] = static_cast<uint32_t>(nodes[i].preds.size());
    for (uint32_t p : nodes[i].preds) {
      successors[p].push_back(i);
    }
  }
  std::vector<double> level(n, 0.0);
  for (uint32_t i = n; i-- > 0;) {
    double tail = 0;
    for (uint32_t s : successors[i]) {
      tail = std::max(tail, level[s]);
    }
    level[i] = cost[i] + tail;
  }

  // Ready instructions per engine kind (one instruction may sit in several).
  ByPriority byPriority{&level};
  std::vector<std::set<uint32_t, ByPriority>> available(
      kDmaStream + 1, std::set<uint32_t, ByPriority>(byPriority));
  auto kindOf = [](isa::Engine e) { return static_cast<int>(e); };
  using Pending = std::pair<double, uint32_t>;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  std::vector<double> dataReady(n, 0.0);
  for (uint32_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) {
      pending.push({0.0, i});
    }
  }
  double now = 0;
  while (order.size() < n) {
    while (!pending.empty() && pending.top().first <= now) {
      uint32_t i = pending.top().second;
      pending.pop();
      for (isa::Engine e : engines[i]) {
        available[kindOf(e)].insert(i);
      }
    }
    bool placed = false;
    for (int s = 0; s < streams; ++s) {
      if (streamFree[s] > now) {
        continue;
      }
      int kind = s >= kDmaStream ? kindOf(isa::Engine::Dma) : s;
      auto &set = available[kind];
      if (set.empty()) {
        continue;
      }
      uint32_t i = *set.begin();
      for (isa::Engine e : engines[i]) {
        available[kindOf(e)].erase(i);
      }
      place(i, s, now);
      streamFree[s] = nodes[i].finish;
      order.push_back(i);
      placed = true;
      for (uint32_t succ : successors[i]) {
        dataReady[succ] = std::max(dataReady[succ], nodes[i].finish);
        if (--waiting[succ] == 0) {
          pending.push({dataReady[succ], succ});
        }
      }
    }
    if (placed) {
      continue;
    }
    // Nothing could start now: move to the next time something can.
    double next = std::numeric_limits<double>::infinity();
    if (!pending.empty()) {
      next = pending.top().first;
    }
    for (int s = 0; s < streams; ++s) {
      int kind = s >= kDmaStream ? kindOf(isa::Engine::Dma) : s;
      if (streamFree[s] > now && !available[kind].empty()) {
        next = std::min(next, streamFree[s]);
      }
    }
    now = next;
  }
  return order;
}

} // namespace kiln::engine_passes
