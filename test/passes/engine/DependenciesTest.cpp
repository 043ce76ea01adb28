//===- DependenciesTest.cpp - what an access must follow -----------------===//
//
// A PSUM bank read whole by each evacuation and written a part at a time by
// the next products: once the parts have overwritten all of an evacuation's
// bytes, later accesses follow those writes, which follow the evacuation,
// so they need not list it too. A write over only some of its rows leaves
// it listed.
//
//===----------------------------------------------------------------------===//

#include "passes/engine/Engine.h"
#include "test/support/TestSupport.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

constexpr int64_t kQuarter = 128; // f32 columns: 512 bytes

/// A VectorE copy into PSUM columns [first, first + count) of partitions
/// [partition, partition + partitions) from SBUF.
engine_passes::Node writePsum(int64_t first, int64_t count,
                              int64_t partitions = 128, int64_t partition = 0) {
  engine_passes::Node node;
  isa::Instruction &inst = node.inst;
  inst.opcode = isa::Opcode::TensorCopy;
  inst.engine = isa::Engine::Vector;
  inst.numOperands = 2;
  inst.operands[0] = test::rowsOf(isa::Memory::Psum, partitions, count, 4 * first);
  inst.operands[1] = test::rowsOf(isa::Memory::Sbuf, partitions, count, 0);
  inst.operands[0].partition = inst.operands[1].partition =
      static_cast<uint16_t>(partition);
  return node;
}

/// An evacuation: PSUM columns [0, count) of all partitions into SBUF at
/// byte `to`.
engine_passes::Node readPsum(int64_t count, int64_t to) {
  engine_passes::Node node;
  isa::Instruction &inst = node.inst;
  inst.opcode = isa::Opcode::TensorCopy;
  inst.engine = isa::Engine::Scalar;
  inst.numOperands = 2;
  inst.operands[0] = test::rowsOf(isa::Memory::Sbuf, 128, count, to);
  inst.operands[1] = test::rowsOf(isa::Memory::Psum, 128, count, 0);
  return node;
}

using Preds = llvm::SmallVector<uint32_t, 4>;

TEST(Dependencies, AReadOverwrittenPartByPartIsFollowedThroughTheWrites) {
  std::vector<engine_passes::Node> nodes = {
      writePsum(0, kQuarter),        // 0
      writePsum(kQuarter, kQuarter), // 1
      readPsum(2 * kQuarter, 65536), // 2: reads 0 and 1
      writePsum(0, kQuarter),        // 3: after the read
      writePsum(kQuarter, kQuarter), // 4: the read's bytes all overwritten
      readPsum(2 * kQuarter, 69632), // 5
      writePsum(0, kQuarter),        // 6
  };
  engine_passes::computeDependencies(nodes);
  EXPECT_EQ(nodes[2].preds, (Preds{0, 1}));
  EXPECT_EQ(nodes[3].preds, (Preds{0, 2}));
  EXPECT_EQ(nodes[4].preds, (Preds{1, 2}));
  EXPECT_EQ(nodes[5].preds, (Preds{3, 4}));
  // Not 2: 6 follows 3, which follows 2.
  EXPECT_EQ(nodes[6].preds, (Preds{3, 5}));
}

TEST(Dependencies, AReadOverwrittenInSomeRowsStaysListed) {
  std::vector<engine_passes::Node> nodes = {
      writePsum(0, 2 * kQuarter),            // 0
      readPsum(2 * kQuarter, 65536),         // 1
      writePsum(0, kQuarter),                // 2
      writePsum(kQuarter, kQuarter, 64, 0),  // 3: half the partitions
      writePsum(kQuarter, kQuarter, 64, 64), // 4: the other half
  };
  engine_passes::computeDependencies(nodes);
  // 4 overlaps the read in partitions 64-127, which 3 did not write: 4
  // must follow the read itself.
  EXPECT_EQ(nodes[3].preds, (Preds{0, 1}));
  EXPECT_EQ(nodes[4].preds, (Preds{0, 1}));
}

} // namespace
