//===- MatmulOperands.h - a product's operands loaded K-major ---*- C++ -*-===//
//
// Private to the matmul lowering (LowerMatmul.cpp): how a product's
// operands reach SBUF with K on the partitions, whatever their layout in
// HBM, or are computed there (one-hot operands). Defined in
// MatmulOperands.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_MATMULOPERANDS_H
#define KILN_PASSES_TILE_MATMULOPERANDS_H

#include "passes/tile/TileBuilder.h"

#include <map>
#include <optional>

namespace kiln::tile_passes {

/// What a matmul keeps to compute the tiles of a one-hot operand [K, X]
/// (Lowering::oneHotIndices) instead of loading them.
struct OneHotTiles {
  HbmView indices; // [K, 1]
  /// Each K slice's indices as f32, one per partition, by first row.
  std::map<int64_t, Tile> slices;
  Tile columns; // f32 [128, cols]: column j holds j
};

/// A 2-D operand [K, X] as it lies in HBM: K on the partitions when loaded.
/// A one-hot operand is computed instead (its view only has the strides of
/// a row-major [K, X]).
struct KMajor {
  HbmView view;
  int64_t offset = 0, kStride = 0, xStride = 0;
  OneHotTiles *oneHot = nullptr;
  /// Where the loads also store what they load (Lowering::startBf16Copy):
  /// the same elements of a bf16 mirror of the view's buffer.
  std::optional<HbmView> copy;

  /// Whether K is innermost in HBM (and X is not), so that loads bring the
  /// rows in and transpose them on TensorE.
  bool kInnermost() const { return kStride == 1 && xStride != 1; }
};

/// Loads rows [k0, k0 + kk) and columns [x0, x0 + xx) of `m` into an SBUF
/// tile [kk, xx] of `dtype`.
Tile loadKMajor(TileBuilder &tb, const KMajor &m, int64_t k0, int64_t kk,
                int64_t x0, int64_t xx, isa::DType dtype);

/// The K slices [k0 + 128 j, k0 + 128 (j + 1)), j < count, of columns
/// [x0, x0 + xx) of `m`, each a [128, xx] tile, loaded with as few DMAs
/// and PSUM evacuations as the layout allows.
llvm::SmallVector<Tile, 4> loadKMajorSlices(TileBuilder &tb, const KMajor &m,
                                            int64_t k0, int64_t count,
                                            int64_t x0, int64_t xx,
                                            isa::DType dtype);

/// Batch elements [0, count) of a one-tile operand [kk, xx], `batchStride`
/// elements apart in HBM, each a [kk, xx] tile; one DMA loads them all
/// where the layout allows.
llvm::SmallVector<Tile, 4> loadBatchGroup(TileBuilder &tb, const KMajor &m,
                                          int64_t batchStride, int64_t count,
                                          int64_t kk, int64_t xx,
                                          isa::DType dtype);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_MATMULOPERANDS_H
