//===- Semaphores.cpp - one wait per dependency nothing else implies -----===//
//
// Stream s's semaphore counts its instructions that some other stream waits
// for. Streams complete in order, so "semaphore s >= v" means every
// instruction of s up to the v-th signalling one is done. Each stream keeps
// a vector clock of what it knows is complete (through its own waits and,
// transitively, through what the instructions it waited for knew), and an
// instruction waits only for the dependencies beyond that knowledge.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"

#include <algorithm>

namespace kiln::engine_passes {

namespace {

struct Wait {
  int stream;
  uint32_t seq; // 1-based position in that stream
};

} // namespace

namespace {

struct WaitPlan {
  std::vector<uint32_t> seq;
  std::vector<std::vector<uint32_t>> members;
  std::vector<llvm::SmallVector<Wait, 4>> waits;
  std::vector<llvm::SmallVector<uint32_t, 4>> producers; // one per wait
  std::vector<bool> signals;
};

/// Waits from vector clocks, any number per instruction.
WaitPlan planWaits(const std::vector<Node> &nodes,
                   llvm::ArrayRef<uint32_t> order, int streams) {
  auto n = nodes.size();
  WaitPlan plan;
  plan.seq.assign(n, 0);
  plan.members.resize(streams);
  std::vector<uint32_t> streamLength(streams, 0);
  for (uint32_t i : order) {
    plan.seq[i] = ++streamLength[nodes[i].stream];
    plan.members[nodes[i].stream].push_back(i);
  }
  std::vector<std::vector<uint32_t>> known(streams,
                                           std::vector<uint32_t>(streams, 0));
  // Each instruction's clock, `streams` entries from clocks[i * streams]:
  // one allocation, not one per instruction.
  std::vector<uint32_t> clocks(n * streams, 0);
  plan.waits.resize(n);
  plan.producers.resize(n);
  plan.signals.assign(n, false);
  std::vector<uint32_t> needed(streams), producer(streams);
  for (uint32_t i : order) {
    int t = nodes[i].stream;
    std::fill(needed.begin(), needed.end(), 0);
    std::fill(producer.begin(), producer.end(), 0);
    for (uint32_t p : nodes[i].preds) {
      int s = nodes[p].stream;
      if (s != t && plan.seq[p] > needed[s]) {
        needed[s] = plan.seq[p];
        producer[s] = p;
      }
    }
    std::vector<uint32_t> &k = known[t];
    for (int s = 0; s < streams; ++s) {
      if (needed[s] <= k[s]) {
        continue;
      }
      uint32_t p = producer[s];
      plan.signals[p] = true;
      plan.waits[i].push_back({s, plan.seq[p]});
      plan.producers[i].push_back(p);
      const uint32_t *theirs = &clocks[size_t(p) * streams];
      for (int r = 0; r < streams; ++r) {
        k[r] = std::max(k[r], theirs[r]);
      }
    }
    k[t] = plan.seq[i];
    std::copy(k.begin(), k.end(), clocks.begin() + size_t(i) * streams);
  }
  return plan;
}

/// Moves the waits an instruction has beyond four to instructions before
/// it on its stream that the schedule starts after the producer is done:
/// the stream runs in order, so the dependency holds all the same, and no
/// carrier is needed (on a DMA queue a carrier is a transfer, 2 us of the
/// queue's time). The producer must also come first in the issue order,
/// which the waits are planned in (at -O0 it is program order, not time
/// order). Returns whether any moved.
bool hoistExcessWaits(std::vector<Node> &nodes, llvm::ArrayRef<uint32_t> order,
                      const WaitPlan &plan) {
  std::vector<uint32_t> issued(nodes.size(), 0);
  for (auto [at, i] : llvm::enumerate(order)) {
    issued[i] = static_cast<uint32_t>(at);
  }
  // Waits moved onto each instruction so far (the plan is redone after).
  std::vector<size_t> added(nodes.size(), 0);
  bool moved = false;
  for (auto &members : plan.members) {
    for (size_t m = 0; m < members.size(); ++m) {
      uint32_t i = members[m];
      auto &producers = plan.producers[i];
      if (producers.size() <= isa::kMaxWaits) {
        continue;
      }
      // The producers done soonest are the likeliest to be done before
      // an earlier instruction starts.
      llvm::SmallVector<uint32_t, 8> excess(producers.begin(), producers.end());
      llvm::sort(excess, [&](uint32_t a, uint32_t b) {
        return nodes[a].finish < nodes[b].finish;
      });
      excess.resize(excess.size() - isa::kMaxWaits);
      for (uint32_t p : excess) {
        // The latest earlier instruction that starts after p finishes and
        // has a wait to spare.
        for (size_t back = m; back-- > 0;) {
          uint32_t j = members[back];
          if (nodes[j].finish <= nodes[j].start) {
            continue; // a carrier: no time of its own in the schedule
          }
          if (nodes[j].start < nodes[p].finish || issued[j] < issued[p]) {
            break;
          }
          if (plan.waits[j].size() + added[j] < isa::kMaxWaits) {
            nodes[j].preds.push_back(p);
            ++added[j];
            moved = true;
            break;
          }
        }
      }
    }
  }
  return moved;
}

} // namespace

llvm::Expected<int>
insertSemaphores(std::vector<Node> &nodes, std::vector<uint32_t> &order,
                 int streams,
                 llvm::function_ref<isa::Instruction(int stream)> carrier) {
  // An instruction may wait on four semaphores. One that needs more has
  // the extra waits moved to earlier instructions of its stream where the
  // schedule allows (hoistExcessWaits), and gets carriers for the rest:
  // instructions on its stream, just before it, that take the extra waits
  // and touch only a scratch slot of their own stream.
  WaitPlan plan = planWaits(nodes, order, streams);
  for (int round = 0; round < 8; ++round) {
    if (hoistExcessWaits(nodes, order, plan)) {
      plan = planWaits(nodes, order, streams);
    }
    std::vector<uint32_t> expanded;
    bool changed = false;
    for (uint32_t i : order) {
      auto &producers = plan.producers[i];
      for (size_t first = 0; producers.size() - first > isa::kMaxWaits;
           first += isa::kMaxWaits) {
        Node c;
        c.inst = carrier(nodes[i].stream);
        c.stream = nodes[i].stream;
        size_t last = std::min(producers.size(), first + isa::kMaxWaits);
        c.preds.assign(producers.begin() + first, producers.begin() + last);
        nodes.push_back(c);
        expanded.push_back(static_cast<uint32_t>(nodes.size() - 1));
        changed = true;
      }
      expanded.push_back(i);
    }
    if (!changed) {
      break;
    }
    order = std::move(expanded);
    plan = planWaits(nodes, order, streams);
  }
  for (uint32_t i : order) {
    if (plan.waits[i].size() > isa::kMaxWaits) {
      return llvm::createStringError(
          "an instruction needs more than four semaphore waits");
    }
  }
  auto n = nodes.size();
  auto &waits = plan.waits;
  auto &signals = plan.signals;
  auto &members = plan.members;
  std::vector<uint32_t> streamLength(streams, 0);
  for (int s = 0; s < streams; ++s) {
    streamLength[s] = static_cast<uint32_t>(members[s].size());
  }

  // Semaphore ids for the streams that signal, and signal counts.
  std::vector<int> semaphore(streams, -1);
  int used = 0;
  std::vector<std::vector<uint32_t>> count(streams);
  for (int s = 0; s < streams; ++s) {
    uint32_t c = 0;
    count[s].assign(streamLength[s] + 1, 0);
    for (size_t j = 0; j < members[s].size(); ++j) {
      c += signals[members[s][j]];
      count[s][j + 1] = c;
    }
    if (c > 0) {
      semaphore[s] = used++;
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    isa::Instruction &inst = nodes[i].inst;
    inst.numWaits = static_cast<uint8_t>(waits[i].size());
    for (size_t w = 0; w < waits[i].size(); ++w) {
      inst.waitSemaphore[w] =
          static_cast<uint16_t>(semaphore[waits[i][w].stream]);
      inst.waitValue[w] = count[waits[i][w].stream][waits[i][w].seq];
    }
    inst.numSignals = 0;
    if (signals[i]) {
      inst.numSignals = 1;
      inst.signalSemaphore[0] = static_cast<uint16_t>(semaphore[nodes[i].stream]);
    }
  }
  return used;
}

} // namespace kiln::engine_passes
