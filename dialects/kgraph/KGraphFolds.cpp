//===- KGraphFolds.cpp - kgraph folders and canonicalization patterns ----===//
//
// Only the simplifications that front ends produce in practice: identities
// with splat constants (x*1, x+0, x/1), no-op shape ops, chains of reshapes and
// transposes, and shape ops applied to splat constants. Every fold here keeps
// the result type exactly, so a fold never changes a graph's interface.
//
//===----------------------------------------------------------------------===//

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace {

/// True when `attr` is a splat constant equal to `value`.
bool isSplatOf(Attribute attr, double value) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat()) {
    return false;
  }
  Type element = dense.getElementType();
  if (llvm::isa<FloatType>(element)) {
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  }
  if (element.isInteger(1)) {
    return false;
  }
  return static_cast<double>(dense.getSplatValue<APInt>().getSExtValue()) ==
         value;
}

/// `operand` when it already has the op's result type (so replacing the op
/// by it keeps the IR well typed), else null.
OpFoldResult ifSameType(Value operand, Value result) {
  return operand.getType() == result.getType() ? OpFoldResult(operand)
                                               : OpFoldResult();
}

/// A splat constant re-typed to `type` (for broadcast, reshape).
OpFoldResult resplat(Attribute attr, Type type) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat()) {
    return {};
  }
  return DenseElementsAttr::get(llvm::cast<ShapedType>(type),
                                dense.getSplatValue<Attribute>());
}

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>()) {
    return inner.getInput();
  }
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0)) {
    return ifSameType(getLhs(), getResult());
  }
  if (isSplatOf(adaptor.getLhs(), 0.0)) {
    return ifSameType(getRhs(), getResult());
  }
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0)) {
    return ifSameType(getLhs(), getResult());
  }
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0)) {
    return ifSameType(getLhs(), getResult());
  }
  if (isSplatOf(adaptor.getLhs(), 1.0)) {
    return ifSameType(getRhs(), getResult());
  }
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0)) {
    return ifSameType(getLhs(), getResult());
  }
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  // Casts of splat float constants between float types fold; other casts
  // carry rounding rules that only the evaluators implement.
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  auto toType = llvm::dyn_cast<FloatType>(getType().getElementType());
  if (dense && dense.isSplat() && toType &&
      llvm::isa<FloatType>(dense.getElementType())) {
    APFloat value = dense.getSplatValue<APFloat>();
    bool losesInfo = false;
    value.convert(toType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    return DenseElementsAttr::get(getType(), value);
  }
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  if (auto dense =
          llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput())) {
    return dense.reshape(getType());
  }
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  return resplat(adaptor.getInput(), getType());
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation())) {
    if (static_cast<int64_t>(i) != p) {
      return {};
    }
  }
  return getInput();
}

namespace {

/// reshape(reshape(x)) -> reshape(x): only the final shape matters.
struct FoldReshapeChain : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<ReshapeOp>();
    if (!inner) {
      return failure();
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), inner.getInput());
    return success();
  }
};

/// transpose(transpose(x, p), q) -> transpose(x, p∘q); the identity that may
/// result is then removed by the folder.
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner) {
      return failure();
    }
    llvm::ArrayRef<int64_t> innerPerm = inner.getPermutation();
    llvm::SmallVector<int64_t> composed;
    for (int64_t p : op.getPermutation()) {
      composed.push_back(innerPerm[p]);
    }
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), inner.getInput(),
                                             composed);
    return success();
  }
};

} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<FoldReshapeChain>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ComposeTransposes>(context);
}
