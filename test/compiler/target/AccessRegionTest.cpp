//===- AccessRegionTest.cpp - which accesses count as overlapping ---------===//
//
// The compiler orders, and the hazard checker checks, exactly the pairs
// these regions call overlapping: too few is a race, too many serializes
// the DMAs that store the tiles of one tensor.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/AccessRegion.h"

#include <gtest/gtest.h>

using namespace kiln::isa;
using Region = AccessRegion;

namespace {

/// Rows [row, row + rows) and columns [col, col + cols) of a row-major f32
/// [.., width] tensor at byte `base` of HBM.
AccessPattern hbmTile(int64_t base, int64_t width, int64_t row, int64_t rows,
                      int64_t col, int64_t cols) {
  AccessPattern ap;
  ap.memory = Memory::Hbm;
  ap.dtype = DType::F32;
  ap.partitions = static_cast<uint16_t>(rows);
  ap.partitionStride = width;
  ap.offset = base + 4 * (row * width + col);
  ap.rank = 1;
  ap.strides[0] = 1;
  ap.sizes[0] = cols;
  return ap;
}

TEST(AccessRegion, TilesSideBySideInHbmDoNotOverlap) {
  // Two column tiles of the same 128 rows of a [1024, 3072] tensor: their
  // byte intervals interleave, their bytes do not.
  Region left = regionOf(hbmTile(0, 3072, 0, 128, 0, 512));
  Region right = regionOf(hbmTile(0, 3072, 0, 128, 512, 512));
  EXPECT_EQ(left.pitch, 3072 * 4);
  EXPECT_FALSE(left.overlaps(right));
  EXPECT_FALSE(right.overlaps(left));
  // The next row block, same columns: apart too.
  EXPECT_FALSE(left.overlaps(regionOf(hbmTile(0, 3072, 128, 128, 0, 512))));
  // A tile that shares one column and one row with `left` does overlap.
  EXPECT_TRUE(left.overlaps(regionOf(hbmTile(0, 3072, 127, 4, 511, 8))));
}

TEST(AccessRegion, DifferentPitchesCompareByteIntervals) {
  // The same bytes seen as [128 x 512] tiles of a [.., 3072] tensor and as
  // one flat run: a flat write over them must order both tiles.
  Region tile = regionOf(hbmTile(0, 3072, 0, 128, 512, 512));
  AccessPattern flat = hbmTile(0, 0, 0, 1, 0, 3072 * 128);
  flat.partitionStride = 0;
  Region run = regionOf(flat);
  EXPECT_EQ(run.pitch, 0);
  EXPECT_TRUE(run.overlaps(tile));
  EXPECT_TRUE(tile.overlaps(run));
  EXPECT_TRUE(run.contains(tile));
  EXPECT_FALSE(tile.contains(run));
  // A tile of another pitch whose interval lies past the tile's: apart.
  EXPECT_FALSE(tile.overlaps(regionOf(hbmTile(4 * 3072 * 128, 768, 0, 4, 0, 8))));
}

TEST(AccessRegion, DifferentPitchesCompareTheBytesRowByRow) {
  // As in the BERT-base f32 step: a store of 8 rows of 4064 f32, 98304
  // elements apart, and a load of 64 rows of 768 f32 (one run: its offset
  // is not on a row of its pitch) between the store's second and third
  // rows. The spans interleave, the bytes do not: no dependency, no race.
  int64_t base = 2188735856, pitch = 98304 * 4;
  Region rows = regionOf(hbmTile(base, 98304, 0, 8, 0, 4064));
  Region between = regionOf(hbmTile(base + 507008, 768, 0, 64, 0, 768));
  ASSERT_EQ(rows.pitch, pitch);
  ASSERT_EQ(between.pitch, 0);
  ASSERT_LT(rows.firstByte(), between.firstByte());
  ASSERT_GT(rows.endByte(), between.endByte());
  EXPECT_FALSE(rows.overlaps(between));
  EXPECT_FALSE(between.overlaps(rows));
  // Moved onto the store's second row, they meet, either way round.
  Region onRow = regionOf(hbmTile(base + pitch + 16000, 768, 0, 64, 0, 768));
  EXPECT_TRUE(rows.overlaps(onRow));
  EXPECT_TRUE(onRow.overlaps(rows));
  // The last byte of a row, and the first byte past it.
  AccessPattern flat = hbmTile(base + 16252, 0, 0, 1, 0, 1);
  flat.partitionStride = 0;
  EXPECT_TRUE(rows.overlaps(regionOf(flat)));
  flat.offset += 4;
  EXPECT_FALSE(rows.overlaps(regionOf(flat)));
  // Two boxes of different pitches: ten rows of a [.., 768] tensor between
  // the store's rows, then ten reaching into its third row.
  int64_t afterRow = (base + pitch + 16256 + 3071) / 3072 * 3072;
  Region gap = regionOf(hbmTile(afterRow, 768, 0, 10, 0, 768));
  ASSERT_EQ(gap.pitch, 3072);
  EXPECT_FALSE(rows.overlaps(gap));
  EXPECT_FALSE(gap.overlaps(rows));
  int64_t intoRow = (base + 2 * pitch) / 3072 * 3072 - 3072 * 5;
  Region across = regionOf(hbmTile(intoRow, 768, 0, 10, 0, 768));
  ASSERT_EQ(across.pitch, 3072);
  EXPECT_TRUE(rows.overlaps(across));
  EXPECT_TRUE(across.overlaps(rows));
}

TEST(AccessRegion, StridedRowsKeepTheirWholeSpan) {
  // Columns read with a stride (a transposed load): each row's span is the
  // box's width, a superset of its bytes, so overlaps are never missed.
  AccessPattern ap = hbmTile(0, 3072, 0, 128, 0, 64);
  ap.strides[0] = 2;
  Region strided = regionOf(ap);
  EXPECT_EQ(strided.byteHi - strided.byteLo, 4 * 127);
  EXPECT_TRUE(strided.overlaps(regionOf(hbmTile(0, 3072, 5, 1, 1, 1))));
  // Rows longer than the pitch are an interval.
  AccessPattern wide = hbmTile(0, 64, 0, 4, 0, 128);
  EXPECT_EQ(regionOf(wide).pitch, 0);
}

TEST(AccessRegion, OnChipRegionsArePartitionsTimesBytes) {
  AccessPattern a;
  a.memory = Memory::Sbuf;
  a.partition = 0;
  a.partitions = 64;
  a.offset = 0;
  a.rank = 1;
  a.strides[0] = 1;
  a.sizes[0] = 128;
  AccessPattern b = a;
  b.partition = 64;
  EXPECT_FALSE(regionOf(a).overlaps(regionOf(b)));
  b.partition = 32;
  EXPECT_TRUE(regionOf(a).overlaps(regionOf(b)));
  b.offset = 512;
  EXPECT_FALSE(regionOf(a).overlaps(regionOf(b)));
}

} // namespace
