//===- SchedulerTest.cpp - split transfers merged back, shared ports -----===//
//
// The scheduler takes a split transfer's ready pieces back into one when
// every other free queue has other transfers to take. Each piece has its
// own dependencies (a piece may overlap a write its siblings do not), so
// the merged transfer must keep them all: its semaphores come from them.
//
// The engines that share a port take it in the schedule's order, not in
// the order their instructions become ready (what the machine would do):
// each holder depends on the one the schedule put before it.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"
#include "compiler/target/TargetDescription.h"
#include "test/support/TestSupport.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

constexpr int64_t kFree = 2048; // f32: 8 KiB a partition, 1 MiB a tile

/// A load of `partitions` rows into SBUF at partition `first`, byte
/// `sbufOffset`, from HBM at `hbmOffset`.
isa::Instruction load(int64_t first, int64_t partitions, int64_t sbufOffset,
                      int64_t hbmOffset) {
  isa::Instruction inst;
  inst.opcode = isa::Opcode::DmaCopy;
  inst.engine = isa::Engine::Dma;
  inst.numOperands = 2;
  inst.operands[0] = test::rowsOf(isa::Memory::Sbuf, partitions, kFree, sbufOffset);
  inst.operands[0].partition = static_cast<uint16_t>(first);
  inst.operands[1] =
      test::rowsOf(isa::Memory::Hbm, partitions, kFree,
                   hbmOffset + first * kFree * 4);
  return inst;
}

/// A VectorE copy of `partitions` rows from partition `first`: `srcFree`
/// elements at byte `from` (what its time follows) into `dstFree` at `to`.
isa::Instruction copy(int64_t first, int64_t partitions, int64_t srcFree,
                      int64_t from, int64_t to, int64_t dstFree) {
  isa::Instruction inst;
  inst.opcode = isa::Opcode::TensorCopy;
  inst.engine = isa::Engine::Vector;
  inst.numOperands = 2;
  inst.operands[0] = test::rowsOf(isa::Memory::Sbuf, partitions, dstFree, to);
  inst.operands[1] = test::rowsOf(isa::Memory::Sbuf, partitions, srcFree, from);
  inst.operands[0].partition = inst.operands[1].partition =
      static_cast<uint16_t>(first);
  return inst;
}

/// Nodes 0-3: the pieces of a 1 MiB load that a VectorE op reading
/// `opColumns` columns (node 4) waits for; then forty 256 KiB loads
/// nothing waits for.
std::vector<engine_passes::Node> piecesBeforeAnOp(int64_t opColumns) {
  std::vector<engine_passes::Node> nodes;
  for (int64_t p = 0; p < 4; ++p) {
    nodes.push_back({load(32 * p, 32, 0, 0), {}, -1, 0, 0, 0});
  }
  nodes.push_back({copy(0, 128, opColumns, 8192, 100 * 1024, 20000),
                   {0, 1, 2, 3}, -1, 0, 0, -1});
  for (int64_t k = 1; k <= 40; ++k) {
    nodes.push_back({load(0, 32, 8192 * (k % 8 + 1), k << 20), {}, -1, 0, 0, -1});
  }
  return nodes;
}

TEST(Scheduler, MergedPiecesKeepEveryPiecesDependencies) {
  const target::TargetDescription *t = target::lookupTarget("trn1");
  ASSERT_NE(t, nullptr);
  std::vector<engine_passes::Node> nodes;
  // Node 0 reads partitions 64-127 of the tile the split load overwrites:
  // only the load's upper pieces wait for it (WAR). Node 1, longer, is
  // what every piece waits for, so the pieces become ready together, after
  // node 0 is done.
  nodes.push_back({copy(64, 64, 8, 0, 160 * 1024, 8), {}, -1, 0, 0, -1});
  nodes.push_back(
      {copy(0, 128, 2048, 170 * 1024, 180 * 1024, 2048), {}, -1, 0, 0, -1});
  // Nodes 2-5: the four 32-partition pieces of one 1 MiB load.
  for (int64_t p = 0; p < 4; ++p) {
    engine_passes::Node piece{load(32 * p, 32, 0, 0), {1}, -1, 0, 0, 2};
    if (p >= 2) {
      piece.preds.push_back(0);
    }
    nodes.push_back(piece);
  }
  // Node 6 stores the tile (a long path after the pieces, so they are the
  // most urgent); then sixty 1 MiB loads, a backlog for every queue.
  isa::Instruction store = load(0, 128, 0, 100 << 20);
  std::swap(store.operands[0], store.operands[1]);
  nodes.push_back({store, {2, 3, 4, 5}, -1, 0, 0, -1});
  for (int64_t k = 1; k <= 60; ++k) {
    nodes.push_back({load(0, 128, 8192 * (k % 16 + 1), k << 20), {}, -1, 0, 0, -1});
  }
  std::vector<uint32_t> order = engine_passes::scheduleNodes(
      nodes, *t, /*worldSize=*/1, /*listSchedule=*/true, /*mergePieces=*/true);
  // The first piece took its three siblings: all 128 partitions, one
  // transfer, waiting for node 0 too; the store follows it alone.
  EXPECT_EQ(order.size(), nodes.size() - 3);
  EXPECT_FALSE(llvm::is_contained(order, 3u));
  ASSERT_TRUE(llvm::is_contained(order, 2u));
  EXPECT_EQ(nodes[2].inst.operands[0].partitions, 128);
  EXPECT_EQ(nodes[2].inst.operands[1].partitions, 128);
  EXPECT_TRUE(llvm::is_contained(nodes[2].preds, 0u));
  EXPECT_EQ(nodes[6].preds, (llvm::SmallVector<uint32_t, 4>{2}));
}

TEST(Scheduler, KeepsTheSplitPiecesWhenMergingWouldDelayTheCriticalPath) {
  const target::TargetDescription *t = target::lookupTarget("trn1");
  ASSERT_NE(t, nullptr);
  // The op reads 2048 columns (~2 us). Merged, the pieces would take one
  // queue four times as long, and the op would start ~30 us later: the
  // schedule with the pieces apart ends sooner.
  std::vector<engine_passes::Node> nodes = piecesBeforeAnOp(2048);
  std::vector<engine_passes::Node> merging = nodes;
  std::vector<uint32_t> merged = engine_passes::scheduleNodes(
      merging, *t, 1, /*listSchedule=*/true, /*mergePieces=*/true);
  ASSERT_EQ(merged.size(), nodes.size() - 3) << "the pieces were not merged";
  std::vector<uint32_t> order = engine_passes::scheduleBest(nodes, *t, 1);
  EXPECT_EQ(order.size(), nodes.size());
  EXPECT_EQ(nodes[0].inst.operands[0].partitions, 32);
  EXPECT_LT(nodes[4].finish, merging[4].finish);
}

TEST(Scheduler, PiecesMuchMoreUrgentThanTheBacklogStayApart) {
  const target::TargetDescription *t = target::lookupTarget("trn1");
  ASSERT_NE(t, nullptr);
  // The op reads 20000 columns (~18 us): the pieces' path to the end is
  // longer than the waiting loads' by more than a piece takes, so those
  // loads have slack and the pieces go side by side even when merging.
  std::vector<engine_passes::Node> nodes = piecesBeforeAnOp(20000);
  std::vector<uint32_t> order = engine_passes::scheduleNodes(
      nodes, *t, 1, /*listSchedule=*/true, /*mergePieces=*/true);
  EXPECT_EQ(order.size(), nodes.size());
  EXPECT_EQ(nodes[0].inst.operands[0].partitions, 32);
}

/// An instruction on `engine` that reads and writes `memory` (a copy).
engine_passes::Node onEngine(isa::Engine engine, isa::Memory src,
                             isa::Memory dst) {
  engine_passes::Node node;
  node.inst = copy(0, 128, 64, 0, 1024, 64);
  node.inst.engine = engine;
  node.inst.operands[1].memory = src;
  node.inst.operands[0].memory = dst;
  node.stream = static_cast<int>(engine);
  return node;
}

TEST(Scheduler, SharedPortsAreTakenInTheScheduleOrder) {
  const target::TargetDescription *t = target::lookupTarget("trn1");
  ASSERT_NE(t, nullptr);
  using E = isa::Engine;
  using M = isa::Memory;
  std::vector<engine_passes::Node> nodes{
      onEngine(E::GpSimd, M::Sbuf, M::Sbuf), // 0: SBUF port
      onEngine(E::GpSimd, M::Sbuf, M::Sbuf), // 1: SBUF port, same stream
      onEngine(E::Vector, M::Sbuf, M::Sbuf), // 2: SBUF port after GpSimd
      onEngine(E::Scalar, M::Sbuf, M::Sbuf), // 3: no shared port
      onEngine(E::GpSimd, M::Sbuf, M::Sbuf), // 4: SBUF port after VectorE
      onEngine(E::Vector, M::Psum, M::Sbuf), // 5: both ports
      onEngine(E::Scalar, M::Psum, M::Sbuf), // 6: PSUM port after VectorE
  };
  std::vector<uint32_t> order{0, 1, 2, 3, 4, 5, 6};
  engine_passes::orderSharedPorts(nodes, order, *t);
  using Preds = llvm::SmallVector<uint32_t, 4>;
  EXPECT_EQ(nodes[0].preds, Preds{});
  EXPECT_EQ(nodes[1].preds, Preds{}); // its stream orders it already
  EXPECT_EQ(nodes[2].preds, Preds{1});
  EXPECT_EQ(nodes[3].preds, Preds{});
  EXPECT_EQ(nodes[4].preds, Preds{2});
  EXPECT_EQ(nodes[5].preds, Preds{4});
  EXPECT_EQ(nodes[6].preds, Preds{5});
}

} // namespace
