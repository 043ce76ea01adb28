//===- SemaphoresTest.cpp - waits beyond four, without carriers -----------===//
//
// An instruction waits on at most four semaphores. The waits beyond four go
// to an earlier instruction of its stream that the schedule starts after
// their producers are done; only when none does is a carrier added (on a
// DMA queue a carrier is a transfer, 2 us of the queue's time).
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"
#include "test/support/TestSupport.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

constexpr int kStreams = engine_passes::kDmaStream + 16;
constexpr int kQueue0 = engine_passes::kDmaStream;

/// A scheduled instruction on `stream`, [start, finish] in microseconds.
engine_passes::Node scheduled(int stream, double start, double finish,
                              llvm::ArrayRef<uint32_t> preds = {}) {
  engine_passes::Node node;
  node.inst.opcode =
      stream >= kQueue0 ? isa::Opcode::DmaCopy : isa::Opcode::TensorCopy;
  node.inst.engine =
      stream >= kQueue0 ? isa::Engine::Dma : static_cast<isa::Engine>(stream);
  node.inst.numOperands = 2;
  node.inst.operands[0] = test::rowsOf(isa::Memory::Sbuf, 128, 64);
  node.inst.operands[1] = test::rowsOf(isa::Memory::Sbuf, 128, 64, 256);
  node.stream = stream;
  node.start = start * 1e-6;
  node.finish = finish * 1e-6;
  node.preds.assign(preds.begin(), preds.end());
  return node;
}

/// Five producers on five streams, done at 1-5 us; then a transfer on
/// queue 0 from `hostStart` us, and one at 9 us that needs all five.
std::vector<engine_passes::Node> fiveProducers(double hostStart) {
  std::vector<engine_passes::Node> nodes;
  int producerStreams[] = {0, 1, 2, 3, kQueue0 + 1};
  for (int k = 0; k < 5; ++k) {
    nodes.push_back(scheduled(producerStreams[k], k, k + 1));
  }
  nodes.push_back(scheduled(kQueue0, hostStart, hostStart + 2));
  nodes.push_back(scheduled(kQueue0, 9, 11, {0, 1, 2, 3, 4}));
  return nodes;
}

llvm::Expected<int> insert(std::vector<engine_passes::Node> &nodes,
                           std::vector<uint32_t> &order) {
  auto carrier = [](int stream) { return scheduled(stream, 0, 0).inst; };
  return engine_passes::insertSemaphores(nodes, order, kStreams, carrier);
}

TEST(Semaphores, WaitsBeyondFourGoToAnEarlierInstructionThatStartsLater) {
  // The transfer before it starts at 6 us, after every producer.
  std::vector<engine_passes::Node> nodes = fiveProducers(6);
  std::vector<uint32_t> order{0, 1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(static_cast<bool>(insert(nodes, order)));
  EXPECT_EQ(order.size(), 7u) << "a carrier was added";
  EXPECT_EQ(nodes[6].inst.numWaits, 4);
  // The producer done first (stream 0's, at 1 us) is the one it carries.
  ASSERT_EQ(nodes[5].inst.numWaits, 1);
  EXPECT_TRUE(llvm::is_contained(nodes[5].preds, 0u));
}

TEST(Semaphores, ACarrierWhenNoEarlierInstructionStartsLateEnough) {
  // The transfer before it starts at 0.5 us, before any producer is done:
  // waiting there would hold the queue back.
  std::vector<engine_passes::Node> nodes = fiveProducers(0.5);
  std::vector<uint32_t> order{0, 1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(static_cast<bool>(insert(nodes, order)));
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(nodes[5].inst.numWaits, 0);
  // The carrier sits on the queue just before the transfer it carries for.
  EXPECT_EQ(order[6], 7u);
  EXPECT_EQ(nodes[7].stream, kQueue0);
  EXPECT_EQ(nodes[7].inst.numWaits + nodes[6].inst.numWaits, 5);
}

TEST(Semaphores, AWaitMovesOnlyToAnInstructionIssuedAfterItsProducer) {
  // At -O0 the issue order is program order, not time order: the producer
  // done first (1 us) is issued after the transfer that starts at 6 us, so
  // that transfer cannot wait for it (its semaphore count is not known
  // there); a carrier takes it.
  std::vector<engine_passes::Node> nodes = fiveProducers(6);
  std::vector<uint32_t> order{1, 2, 3, 4, 5, 0, 6};
  ASSERT_TRUE(static_cast<bool>(insert(nodes, order)));
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(nodes[5].inst.numWaits, 0);
  EXPECT_EQ(nodes[7].stream, kQueue0);
}

} // namespace
