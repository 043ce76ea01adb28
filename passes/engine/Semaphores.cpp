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

namespace kiln::engine_passes {

namespace {

struct Wait {
  int stream;
  uint32_t seq; // 1-based position in that stream
};

} // namespace

llvm::Expected<int> insertSemaphores(std::vector<Node> &nodes,
                                     llvm::ArrayRef<uint32_t> order,
                                     int streams) {
  auto n = nodes.size();
  std::vector<uint32_t> seq(n);
  std::vector<uint32_t> streamLength(streams, 0);
  // The instructions of each stream, in order.
  std::vector<std::vector<uint32_t>> members(streams);
  for (uint32_t i : order) {
    seq[i] = ++streamLength[nodes[i].stream];
    members[nodes[i].stream].push_back(i);
  }
  std::vector<std::vector<uint32_t>> known(streams,
                                           std::vector<uint32_t>(streams, 0));
  std::vector<std::vector<uint32_t>> clock(n);
  std::vector<llvm::SmallVector<Wait, 4>> waits(n);
  std::vector<bool> signals(n, false);

  for (uint32_t i : order) {
    int t = nodes[i].stream;
    std::vector<uint32_t> needed(streams, 0);
    std::vector<uint32_t> producer(streams, 0);
    for (uint32_t p : nodes[i].preds) {
      int s = nodes[p].stream;
      if (s != t && seq[p] > needed[s]) {
        needed[s] = seq[p];
        producer[s] = p;
      }
    }
    std::vector<uint32_t> &k = known[t];
    for (int s = 0; s < streams; ++s) {
      if (needed[s] <= k[s]) {
        continue;
      }
      uint32_t p = producer[s];
      signals[p] = true;
      // Place the wait on i, or on an earlier instruction of this stream
      // with room that p does not depend on (waiting earlier is safe then).
      uint32_t host = i;
      while (waits[host].size() >= isa::kMaxWaits) {
        uint32_t position = seq[host] - 1;
        if (position == 0) {
          return llvm::createStringError(
              "an instruction needs more than four semaphore waits");
        }
        uint32_t earlier = members[t][position - 1];
        if (clock[p].size() && clock[p][t] >= seq[earlier]) {
          return llvm::createStringError(
              "an instruction needs more than four semaphore waits and no "
              "earlier instruction of its stream can take one");
        }
        host = earlier;
      }
      waits[host].push_back({s, seq[p]});
      for (int r = 0; r < streams; ++r) {
        k[r] = std::max(k[r], clock[p][r]);
      }
    }
    clock[i] = k;
    clock[i][t] = seq[i];
    k[t] = seq[i];
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
