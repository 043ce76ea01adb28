//===- KGraphOps.cpp - kgraph type inference and verifiers ---------------===//
//
// Result types are inferred wherever they follow from the operands and
// attributes; the InferTypeOpInterface verifier then checks imported or
// hand-written result types against the inferred ones, so a shape rule is
// written once.
//
//===----------------------------------------------------------------------===//

#include "dialects/kgraph/KGraphDialect.h"
#include "dialects/kgraph/KGraphShapes.h"
#include "dialects/kgraph/VerifierSupport.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace {

LogicalResult checkDim(OptLoc loc, int64_t dim, int64_t rank,
                       llvm::StringRef what) {
  if (dim < 0 || dim >= rank) {
    return fail(loc, what + " " + llvm::Twine(dim) +
                         " is out of range for rank " + llvm::Twine(rank));
  }
  return success();
}

LogicalResult inferBroadcast(OptLoc loc, llvm::ArrayRef<Value> operands,
                             Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  Shape shape;
  for (Value operand : operands) {
    RankedTensorType type = tensorOf(operand);
    if (!type) {
      return fail(loc, "operands must be ranked tensors");
    }
    std::optional<Shape> next = broadcastShapes(shape, type.getShape());
    if (!next) {
      return fail(loc, "operand shapes " + shapeString(shape) + " and " +
                           shapeString(type.getShape()) +
                           " are not broadcast-compatible");
    }
    shape = *next;
  }
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Constants and iota
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto value = llvm::dyn_cast_if_present<ElementsAttr>(adaptor.getValueAttr());
  if (!value) {
    return fail(loc, "constant needs an elements 'value'");
  }
  inferred.push_back(value.getType());
  return success();
}

LogicalResult ConstantOp::verify() {
  if (!llvm::isa<DenseElementsAttr, DenseResourceElementsAttr>(getValue())) {
    return emitOpError("value must be dense elements");
  }
  return success();
}

LogicalResult IotaOp::verify() {
  auto type = llvm::cast<RankedTensorType>(getType());
  if (type.getRank() == 0) {
    return emitOpError("result must have rank >= 1");
  }
  return checkDim(getLoc(), getDim(), type.getRank(), "iota dim");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define KGRAPH_BINARY_INFERENCE(OP)                                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc loc,                \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    RankedTensorType lhs = tensorOf(adaptor.getLhs());                         \
    if (!lhs) {                                                                \
      return fail(loc, "operands must be ranked tensors");                     \
    }                                                                          \
    return inferBroadcast(loc, {adaptor.getLhs(), adaptor.getRhs()},           \
                          lhs.getElementType(), inferred);                     \
  }
KGRAPH_BINARY_INFERENCE(AddOp)
KGRAPH_BINARY_INFERENCE(SubOp)
KGRAPH_BINARY_INFERENCE(MulOp)
KGRAPH_BINARY_INFERENCE(DivOp)
KGRAPH_BINARY_INFERENCE(PowOp)
KGRAPH_BINARY_INFERENCE(MaxOp)
KGRAPH_BINARY_INFERENCE(MinOp)
KGRAPH_BINARY_INFERENCE(AndOp)
KGRAPH_BINARY_INFERENCE(OrOp)
#undef KGRAPH_BINARY_INFERENCE

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, {adaptor.getLhs(), adaptor.getRhs()},
                        IntegerType::get(context, 1), inferred);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType onTrue = tensorOf(adaptor.getOnTrue());
  RankedTensorType onFalse = tensorOf(adaptor.getOnFalse());
  if (!onTrue || !onFalse) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (onTrue.getElementType() != onFalse.getElementType()) {
    return fail(loc, "on_true and on_false must have the same element type");
  }
  return inferBroadcast(
      loc, {adaptor.getCondition(), adaptor.getOnTrue(), adaptor.getOnFalse()},
      onTrue.getElementType(), inferred);
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  auto out = llvm::cast<RankedTensorType>(getType());
  if (in.getNumElements() != out.getNumElements()) {
    return emitOpError("cannot reshape ")
           << in.getNumElements() << " elements into " << out.getNumElements();
  }
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in) {
    return fail(loc, "input must be a ranked tensor");
  }
  llvm::ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != in.getRank()) {
    return fail(loc, "permutation has " + llvm::Twine(perm.size()) +
                         " entries for an input of rank " +
                         llvm::Twine(in.getRank()));
  }
  llvm::SmallVector<bool> seen(perm.size(), false);
  Shape shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p]) {
      return fail(loc, "permutation " + shapeString(perm) +
                           " is not a permutation of the input dims");
    }
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

namespace {
/// `whole` is a whole number of `part`s along the first dimension.
bool isRowMultiple(RankedTensorType whole, RankedTensorType part) {
  return whole.getElementType() == part.getElementType() &&
         part.getRank() > 0 && whole.getRank() == part.getRank() &&
         whole.getShape().drop_front() == part.getShape().drop_front() &&
         part.getDimSize(0) > 0 && whole.getDimSize(0) % part.getDimSize(0) == 0;
}
} // namespace

LogicalResult AllGatherOp::verify() {
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  auto out = llvm::cast<RankedTensorType>(getType());
  if (!isRowMultiple(out, in)) {
    return emitOpError("gathers a whole number of its operand ")
           << in << " along the first dimension, not " << out;
  }
  return success();
}

/// A reduce-scatter's or worker shard's result is one of a whole number of
/// blocks of its operand's rows.
static LogicalResult verifyRowBlock(Operation *op, llvm::StringRef verb) {
  auto in = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = llvm::cast<RankedTensorType>(op->getResult(0).getType());
  if (!isRowMultiple(in, out)) {
    return op->emitOpError(verb)
           << " one of a whole number of blocks of rows of " << in << ", not "
           << out;
  }
  return success();
}

LogicalResult ReduceScatterOp::verify() { return verifyRowBlock(*this, "keeps"); }

LogicalResult WorkerShardOp::verify() { return verifyRowBlock(*this, "takes"); }

LogicalResult BroadcastOp::verify() {
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  auto out = llvm::cast<RankedTensorType>(getType());
  if (!isBroadcastableTo(in.getShape(), out.getShape())) {
    return emitOpError("cannot broadcast ")
           << shapeString(in.getShape()) << " to "
           << shapeString(out.getShape());
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in) {
    return fail(loc, "input must be a ranked tensor");
  }
  auto start = adaptor.getStart();
  auto limit = adaptor.getLimit();
  auto stride = adaptor.getStride();
  size_t rank = in.getRank();
  if (start.size() != rank || limit.size() != rank || stride.size() != rank) {
    return fail(loc, "start, limit and stride need one entry per dim (rank " +
                         llvm::Twine(rank) + ")");
  }
  Shape shape;
  for (size_t i = 0; i < rank; ++i) {
    if (stride[i] < 1 || start[i] < 0 || limit[i] < start[i] ||
        limit[i] > in.getDimSize(i)) {
      return fail(loc, "slice [" + llvm::Twine(start[i]) + ":" +
                           llvm::Twine(limit[i]) + ":" +
                           llvm::Twine(stride[i]) + "] is invalid for dim " +
                           llvm::Twine(i) + " of size " +
                           llvm::Twine(in.getDimSize(i)));
    }
    shape.push_back(sliceSize(start[i], limit[i], stride[i]));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto inputs = adaptor.getInputs();
  if (inputs.empty()) {
    return fail(loc, "concat needs at least one input");
  }
  RankedTensorType first = tensorOf(inputs.front());
  if (!first) {
    return fail(loc, "inputs must be ranked tensors");
  }
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, first.getRank(), "concat dim"))) {
    return failure();
  }
  Shape shape(first.getShape());
  for (Value input : inputs.drop_front()) {
    RankedTensorType type = tensorOf(input);
    if (!type || type.getRank() != first.getRank()) {
      return fail(loc, "all concat inputs must have the same rank");
    }
    for (int64_t i = 0; i < first.getRank(); ++i) {
      if (i != dim && type.getDimSize(i) != shape[i]) {
        return fail(loc, "concat inputs differ in dim " + llvm::Twine(i) +
                             ", which is not the concat dim");
      }
    }
    shape[dim] += type.getDimSize(dim);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType index = tensorOf(adaptor.getIndex());
  if (!in || !index) {
    return fail(loc, "operands must be ranked tensors");
  }
  int64_t dim = adaptor.getDim();
  if (index.getRank() != in.getRank()) {
    return fail(loc, "gather index must have the input's rank");
  }
  if (failed(checkDim(loc, dim, in.getRank(), "gather dim"))) {
    return failure();
  }
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (i != dim && index.getDimSize(i) > in.getDimSize(i)) {
      return fail(loc, "gather index is larger than the input in dim " +
                           llvm::Twine(i));
    }
  }
  inferred.push_back(
      RankedTensorType::get(index.getShape(), in.getElementType()));
  return success();
}

LogicalResult ScatterAddOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType index = tensorOf(adaptor.getIndex());
  RankedTensorType source = tensorOf(adaptor.getSource());
  if (!in || !index || !source) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (source.getElementType() != in.getElementType()) {
    return fail(loc, "scatter_add source must have the input's element type");
  }
  if (index.getRank() != in.getRank() || source.getRank() != in.getRank()) {
    return fail(loc, "scatter_add index and source must have the input's rank");
  }
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, in.getRank(), "scatter_add dim"))) {
    return failure();
  }
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (index.getDimSize(i) > source.getDimSize(i) ||
        (i != dim && index.getDimSize(i) > in.getDimSize(i))) {
      return fail(loc,
                  "scatter_add index is too large in dim " + llvm::Twine(i));
    }
  }
  inferred.push_back(in);
  return success();
}

LogicalResult IndexSelectOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType index = tensorOf(adaptor.getIndex());
  if (!in || !index) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (index.getRank() > 1) {
    return fail(loc, "index_select index must have rank 0 or 1");
  }
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, in.getRank(), "index_select dim"))) {
    return failure();
  }
  Shape shape(in.getShape());
  shape[dim] = index.getNumElements();
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType weight = tensorOf(adaptor.getWeight());
  RankedTensorType indices = tensorOf(adaptor.getIndices());
  if (!weight || !indices) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (weight.getRank() != 2) {
    return fail(loc, "embedding weight must have rank 2 [V, D]");
  }
  Shape shape(indices.getShape());
  shape.push_back(weight.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, weight.getElementType()));
  return success();
}

LogicalResult ScatterRowsOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  RankedTensorType indices = tensorOf(adaptor.getIndices());
  RankedTensorType rows = tensorOf(adaptor.getRows());
  if (!input || !indices || !rows) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (input.getRank() != 2) {
    return fail(loc, "scatter_rows input must have rank 2 [V, D]");
  }
  Shape expected(indices.getShape());
  expected.push_back(input.getDimSize(1));
  if (rows.getShape() != llvm::ArrayRef<int64_t>(expected) ||
      rows.getElementType() != input.getElementType()) {
    return fail(loc, "scatter_rows rows must be indices' shape plus the "
                     "input's row width, of the input's element type");
  }
  inferred.push_back(input);
  return success();
}

LogicalResult
EmbeddingBackwardOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  RankedTensorType grad = tensorOf(adaptor.getGradOutput());
  RankedTensorType indices = tensorOf(adaptor.getIndices());
  if (!grad || !indices) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (grad.getRank() != indices.getRank() + 1 ||
      grad.getShape().drop_back() != indices.getShape()) {
    return fail(loc, "embedding_backward grad_output must be indices' shape "
                     "plus the embedding dim");
  }
  // I64Attr getters return uint64_t; the attribute holds a signed value.
  auto numWeights = static_cast<int64_t>(adaptor.getNumWeights());
  if (numWeights < 1) {
    return fail(loc, "embedding_backward num_weights must be positive");
  }
  inferred.push_back(RankedTensorType::get({numWeights, grad.getShape().back()},
                                           grad.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs());
  RankedTensorType rhs = tensorOf(adaptor.getRhs());
  if (!lhs || !rhs) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (lhs.getRank() < 2 || rhs.getRank() < 2) {
    return fail(loc, "matmul operands must have rank >= 2");
  }
  auto matrix = [](RankedTensorType t, bool transposed) {
    int64_t rows = t.getDimSize(t.getRank() - 2);
    int64_t cols = t.getDimSize(t.getRank() - 1);
    return transposed ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
  };
  auto [m, k] = matrix(lhs, adaptor.getTransposeLhs());
  auto [k2, n] = matrix(rhs, adaptor.getTransposeRhs());
  if (k != k2) {
    return fail(loc, "matmul contraction sizes differ: " + llvm::Twine(k) +
                         " vs " + llvm::Twine(k2));
  }
  std::optional<Shape> batch =
      broadcastShapes(lhs.getShape().drop_back(2), rhs.getShape().drop_back(2));
  if (!batch) {
    return fail(loc, "matmul batch dims are not broadcast-compatible");
  }
  batch->append({m, n});
  inferred.push_back(RankedTensorType::get(*batch, lhs.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType weight = tensorOf(adaptor.getWeight());
  if (!in || !weight) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (in.getRank() < 1 || weight.getRank() != 2) {
    return fail(loc, "linear needs input of rank >= 1 and weight [out, in]");
  }
  if (in.getShape().back() != weight.getDimSize(1)) {
    return fail(loc, "linear input features " +
                         llvm::Twine(in.getShape().back()) +
                         " do not match weight [out, in] = " +
                         shapeString(weight.getShape()));
  }
  if (Value bias = adaptor.getBias()) {
    RankedTensorType biasType = tensorOf(bias);
    if (!biasType ||
        biasType.getShape() != ArrayRef<int64_t>{weight.getDimSize(0)}) {
      return fail(loc, "linear bias must have shape [out]");
    }
  }
  Shape shape(in.getShape().drop_back());
  shape.push_back(weight.getDimSize(0));
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduction(OptLoc loc, Value input,
                                    llvm::ArrayRef<int64_t> dims, bool keepDim,
                                    Type elementType,
                                    SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(input);
  if (!in) {
    return fail(loc, "input must be a ranked tensor");
  }
  llvm::SmallVector<bool> seen(in.getRank(), false);
  for (int64_t dim : dims) {
    if (failed(checkDim(loc, dim, in.getRank(), "reduction dim"))) {
      return failure();
    }
    if (seen[dim]) {
      return fail(loc, "reduction dim " + llvm::Twine(dim) + " is repeated");
    }
    seen[dim] = true;
  }
  inferred.push_back(
      RankedTensorType::get(reducedShape(in.getShape(), dims, keepDim),
                            elementType ? elementType : in.getElementType()));
  return success();
}

#define KGRAPH_REDUCE_INFERENCE(OP)                                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc loc,                \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduction(loc, adaptor.getInput(), adaptor.getDims(),          \
                          adaptor.getKeepdim(), Type(), inferred);             \
  }
KGRAPH_REDUCE_INFERENCE(ReduceSumOp)
KGRAPH_REDUCE_INFERENCE(ReduceMeanOp)
KGRAPH_REDUCE_INFERENCE(ReduceMaxOp)
KGRAPH_REDUCE_INFERENCE(ReduceMinOp)
#undef KGRAPH_REDUCE_INFERENCE

LogicalResult ArgmaxOp::inferReturnTypes(MLIRContext *context, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  int64_t dim = adaptor.getDim();
  return inferReduction(loc, adaptor.getInput(), {dim}, adaptor.getKeepdim(),
                        IntegerType::get(context, 64), inferred);
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult verifySoftmaxDim(OpTy op, Value operand) {
  auto type = llvm::cast<RankedTensorType>(operand.getType());
  return checkDim(op.getLoc(), op.getDim(),
                  std::max<int64_t>(type.getRank(), 1), "softmax dim");
}

LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getInput());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getInput());
}
LogicalResult SoftmaxBackwardOp::verify() {
  return verifySoftmaxDim(*this, getOutput());
}
LogicalResult LogSoftmaxBackwardOp::verify() {
  return verifySoftmaxDim(*this, getOutput());
}

/// The shape of layer_norm's per-row statistics.
static FailureOr<RankedTensorType>
layerNormStatType(OptLoc loc, RankedTensorType input, int64_t normalizedRank) {
  if (normalizedRank < 1 || normalizedRank > input.getRank()) {
    return fail(loc, "layer_norm normalized_rank " +
                         llvm::Twine(normalizedRank) +
                         " must be in [1, input rank " +
                         llvm::Twine(input.getRank()) + "]");
  }
  Shape shape(input.getShape());
  for (int64_t i = input.getRank() - normalizedRank; i < input.getRank(); ++i) {
    shape[i] = 1;
  }
  return RankedTensorType::get(shape, input.getElementType());
}

static LogicalResult checkNormalizedShape(OptLoc loc, RankedTensorType input,
                                          int64_t normalizedRank, Value param,
                                          llvm::StringRef name) {
  RankedTensorType type = tensorOf(param);
  if (!type || type.getShape() != input.getShape().take_back(normalizedRank) ||
      type.getElementType() != input.getElementType()) {
    return fail(loc,
                "layer_norm " + name + " must have the normalized shape " +
                    shapeString(input.getShape().take_back(normalizedRank)) +
                    " and the input's element type");
  }
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in) {
    return fail(loc, "input must be a ranked tensor");
  }
  int64_t rank = adaptor.getNormalizedRank();
  FailureOr<RankedTensorType> stat = layerNormStatType(loc, in, rank);
  if (failed(stat) ||
      failed(
          checkNormalizedShape(loc, in, rank, adaptor.getWeight(), "weight")) ||
      failed(checkNormalizedShape(loc, in, rank, adaptor.getBias(), "bias"))) {
    return failure();
  }
  inferred.append({in, *stat, *stat});
  return success();
}

LogicalResult
LayerNormBackwardOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType grad = tensorOf(adaptor.getGradOutput());
  if (!in || !grad) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (grad != in) {
    return fail(loc,
                "layer_norm_backward grad_output must have the input's type");
  }
  int64_t rank = adaptor.getNormalizedRank();
  FailureOr<RankedTensorType> stat = layerNormStatType(loc, in, rank);
  if (failed(stat) || failed(checkNormalizedShape(
                          loc, in, rank, adaptor.getWeight(), "weight"))) {
    return failure();
  }
  if (tensorOf(adaptor.getMean()) != *stat ||
      tensorOf(adaptor.getRstd()) != *stat) {
    return fail(loc, "layer_norm_backward mean and rstd must have type " +
                         shapeString(stat->getShape()));
  }
  Type weight = adaptor.getWeight().getType();
  inferred.append({in, weight, weight});
  return success();
}

static LogicalResult checkNllOperands(OptLoc loc, RankedTensorType input,
                                      RankedTensorType target) {
  if (input.getRank() != 1 && input.getRank() != 2) {
    return fail(loc, "nll_loss input must be [N, C] or [C]");
  }
  if (target.getRank() != input.getRank() - 1 ||
      (input.getRank() == 2 && target.getDimSize(0) != input.getDimSize(0))) {
    return fail(loc, "nll_loss target must be [N] for input [N, C] and a "
                     "scalar for input [C]");
  }
  return success();
}

static RankedTensorType nllLossType(RankedTensorType input,
                                    llvm::StringRef reduction) {
  Shape shape;
  if (reduction == "none" && input.getRank() == 2) {
    shape.push_back(input.getDimSize(0));
  }
  return RankedTensorType::get(shape, input.getElementType());
}

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType target = tensorOf(adaptor.getTarget());
  if (!in || !target) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (failed(checkNllOperands(loc, in, target))) {
    return failure();
  }
  inferred.push_back(nllLossType(in, adaptor.getReduction()));
  inferred.push_back(RankedTensorType::get({}, in.getElementType()));
  return success();
}

LogicalResult
NllLossBackwardOp::inferReturnTypes(MLIRContext *, OptLoc loc, Adaptor adaptor,
                                    SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  RankedTensorType target = tensorOf(adaptor.getTarget());
  RankedTensorType grad = tensorOf(adaptor.getGradOutput());
  if (!in || !target || !grad) {
    return fail(loc, "operands must be ranked tensors");
  }
  if (failed(checkNllOperands(loc, in, target))) {
    return failure();
  }
  if (grad != nllLossType(in, adaptor.getReduction())) {
    return fail(loc, "nll_loss_backward grad_output must have the loss's type");
  }
  inferred.push_back(in);
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in) {
    return fail(loc, "input must be a ranked tensor");
  }
  inferred.push_back(in);
  inferred.push_back(
      RankedTensorType::get(in.getShape(), IntegerType::get(context, 1)));
  return success();
}

#define GET_OP_CLASSES
#include "dialects/kgraph/KGraphOps.cpp.inc"
