//===- AffinePredicate.h - masks that are affine in element indices -*- C++ -*-===//
//
// A causal attention mask is a comparison of iotas: key index <= query
// index. Such a predicate needs no memory: GpSimd's affine_select computes
// it from each element's position while it selects, where loading the mask
// and blending two branches with it takes a DMA and four instructions a
// tile. This file recognises the predicates (on kgraph values) and places
// them on tile iterations.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_AFFINEPREDICATE_H
#define KILN_PASSES_TILE_AFFINEPREDICATE_H

#include "passes/tile/Lowering.h"

namespace kiln::tile_passes {

/// An i1 value whose element at index x is
/// `(constant + sum_d coefficients[d] * x[d]) compare 0`.
struct AffinePredicate {
  int64_t constant = 0;
  llvm::SmallVector<int64_t, 4> coefficients; // one per dimension
  llvm::StringRef compare;                   // lt, le, gt, ge, eq or ne
};

/// The predicate `v` computes, seen over `shape` (which `v` broadcasts to
/// with NumPy's rules), if it is affine in the element indices: built from
/// iotas and integral constants by add, sub, neg, multiplication by a
/// constant, casts, reshapes that add or drop unit dimensions and
/// broadcasts, then compare, not, and selects between true and false.
std::optional<AffinePredicate>
affinePredicateOf(mlir::Value v, llvm::ArrayRef<int64_t> shape);

/// The comparison that holds where `compare` does not.
llvm::StringRef negatedComparison(llvm::StringRef compare);

/// The predicate `cond` computes over `shape`, when `ops` (a group) read
/// it only as the condition of selects of `shape` with one splat constant
/// branch: the selects compute it with affine_select (GroupEmitter), so
/// the group need not load it.
std::optional<AffinePredicate>
selectCondition(mlir::Value cond, llvm::ArrayRef<mlir::Operation *> ops,
                llvm::ArrayRef<int64_t> shape);

/// A box of a tile iteration, rows [p0, p0 + rows) and columns [f0, f0 +
/// cols), over which `predicate`'s expression is `base + partitionStep * p
/// + freeStep * i` (p and i counted from the box's corner).
struct AffineBox {
  int64_t p0, rows, f0, cols;
  int64_t base, partitionStep, freeStep;
};

/// Splits a `rows` x `cols` tile iteration at `index` over `shape` into
/// boxes of whole rows where the expression is affine in the position: one
/// box unless the tile's columns wrap around a dimension. None when its
/// rows wrap (an instruction cannot start at any partition) or there is
/// no index: the group then loads the condition.
std::optional<llvm::SmallVector<AffineBox, 1>>
affineBoxes(const AffinePredicate &predicate, llvm::ArrayRef<int64_t> shape,
            const TileIndex &index, int64_t rows, int64_t cols);

/// Whether a group loop nest or epilogue computes `cond` on the tile
/// iteration at `index` rather than loading it: its selects read it alone
/// (selectCondition) and its rows do not wrap (affineBoxes).
bool computesCondition(mlir::Value cond, llvm::ArrayRef<mlir::Operation *> ops,
                       llvm::ArrayRef<int64_t> shape, const TileIndex &index,
                       int64_t rows, int64_t cols);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_AFFINEPREDICATE_H
