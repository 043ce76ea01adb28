//===- GraphEmitter.h - terse construction of kgraph ops --------*- C++ -*-===//
//
// The graph passes rewrite one op into several; this keeps each rewrite
// readable as the formula it implements.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_GRAPH_GRAPHEMITTER_H
#define KILN_PASSES_GRAPH_GRAPHEMITTER_H

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/Builders.h"

namespace kiln::graph_passes {

class GraphEmitter {
public:
  GraphEmitter(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return llvm::cast<mlir::RankedTensorType>(v.getType());
  }
  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
    return typeOf(v).getShape();
  }
  static mlir::Type elementOf(mlir::Value v) {
    return typeOf(v).getElementType();
  }

  /// A rank-0 constant of `elementType`.
  mlir::Value scalar(double value, mlir::Type elementType);
  /// A constant shaped like nothing else: `shape` filled with `value`.
  mlir::Value splat(double value, llvm::ArrayRef<int64_t> shape,
                    mlir::Type elementType);

  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value exp(mlir::Value x);
  mlir::Value log(mlir::Value x);
  mlir::Value rsqrt(mlir::Value x);
  mlir::Value max(mlir::Value a, mlir::Value b);
  mlir::Value logicalAnd(mlir::Value a, mlir::Value b);
  mlir::Value logicalOr(mlir::Value a, mlir::Value b);
  mlir::Value logicalNot(mlir::Value x);
  mlir::Value compare(llvm::StringRef direction, mlir::Value a, mlir::Value b);
  mlir::Value select(mlir::Value c, mlir::Value t, mlir::Value f);
  mlir::Value cast(mlir::Value x, mlir::Type elementType);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> permutation);
  mlir::Value broadcast(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  /// x[start:limit:stride] in every dim (x itself when that is all of it).
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> limit,
                    llvm::ArrayRef<int64_t> stride);
  /// The values joined along `dim`, skipping empty ones (one: itself).
  mlir::Value concat(llvm::ArrayRef<mlir::Value> values, int64_t dim);
  mlir::Value reduceSum(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                        bool keepdim);
  mlir::Value reduceMax(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                        bool keepdim);
  mlir::Value reduceMin(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                        bool keepdim);
  mlir::Value matmul(mlir::Value a, mlir::Value b, bool transposeA = false,
                     bool transposeB = false);
  /// 0, 1, ..., n-1 as a 1-D tensor.
  mlir::Value iota1d(int64_t n, mlir::Type elementType);
  /// [n, classes] of 0/1 in `elementType`: row i has a 1 at indices[i]
  /// (indices is 1-D; an index outside [0, classes) gives a zero row).
  mlir::Value oneHot(mlir::Value indices, int64_t classes,
                     mlir::Type elementType);
  /// `rows` ([n, d], one per index of the 1-D `indices`) with the rows of
  /// indices equal to `padding` zeroed (an embedding's padding row gets no
  /// gradient); `rows` itself when `padding` is negative (none).
  mlir::Value zeroPaddingRows(mlir::Value rows, mlir::Value indices,
                              int64_t padding);

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace kiln::graph_passes

#endif // KILN_PASSES_GRAPH_GRAPHEMITTER_H
