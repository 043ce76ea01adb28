//===- Lowering.h - state of one function's kgraph -> ktile lowering -*- C++ -*-===//

#ifndef KILN_PASSES_TILE_LOWERING_H
#define KILN_PASSES_TILE_LOWERING_H

#include "passes/tile/TileBuilder.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::tile_passes {

/// An elementwise op's operand inside a tile iteration.
struct TileArg {
  std::optional<double> immediate;
  Tile tile;
};

/// A value copied or computed into an HBM view by an elementwise loop nest.
struct LoopOutput {
  mlir::Value value; // the group value (or, for a copy, the source value)
  HbmView dst;
};

class Lowering {
public:
  Lowering(TileBuilder &tb, int64_t sbufBudget)
      : tb(tb), sbufBudget(sbufBudget) {}

  /// The tile-level form of `value` (already lowered).
  TensorOperand &operandOf(mlir::Value value);
  void bind(mlir::Value value, TensorOperand operand);
  /// `operand` as a contiguous HBM buffer view, copying when it is not.
  HbmView materialize(const TensorOperand &operand,
                      llvm::ArrayRef<int64_t> shape);
  /// Copies `src` (broadcast to dst's shape) into `dst`.
  void copyInto(const TensorOperand &src, const HbmView &dst);

  /// One loop nest over `shape` computing `ops` (elementwise, in order) and
  /// storing `outputs`. Operands defined outside `ops` are loaded.
  mlir::LogicalResult lowerElementwise(llvm::ArrayRef<mlir::Operation *> ops,
                                       llvm::ArrayRef<int64_t> shape,
                                       llvm::ArrayRef<LoopOutput> outputs);
  mlir::LogicalResult lowerReduce(mlir::Operation *op, const HbmView &dst);
  /// Writes the product into `dst` (for a folded f32 cast of a bf16 product,
  /// the cast's result: PSUM is f32 already).
  mlir::LogicalResult lowerMatmul(kgraph::MatmulOp op, const HbmView &dst);

  /// The view and load dtype of a matmul operand, looking through a bf16
  /// cast that the load performs.
  std::pair<TensorOperand, isa::DType> matmulOperand(mlir::Value value);

  TileBuilder &tb;
  int64_t sbufBudget;
  llvm::DenseMap<mlir::Value, TensorOperand> values;
};

/// Where a tile iteration lies in the row-major order of its group's shape:
/// tile element (p, i) is element `first + rowStep * p + colStep * i`.
struct TileIndex {
  int64_t first = 0, rowStep = 0, colStep = 0;
};

/// Emits the instructions of one elementwise op on a tile iteration, one
/// destination per result.
mlir::LogicalResult emitElementwiseOp(TileBuilder &tb, mlir::Operation *op,
                                      llvm::ArrayRef<TileArg> args,
                                      llvm::ArrayRef<Tile> dsts,
                                      const TileIndex &index);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_LOWERING_H
