//===- KGraphFolds.cpp - kgraph folders and canonicalization patterns ----===//
//
// Only the simplifications that front ends produce in practice: identities
// with splat constants (x*1, x+0, x/1), no-op shape ops, chains of reshapes and
// transposes, shape ops applied to splat constants, batched matmuls of
// reshapes that only merge batch dimensions, a max or min of values
// scaled by a positive constant (taken before the scaling), and a scaling
// by a power of two moved to a product's smaller input. Every fold
// here keeps the result type exactly, so a fold never changes a graph's
// interface.
//
//===----------------------------------------------------------------------===//

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

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

/// transpose(reshape(x)), where the reshape only merges x's leading
/// dimensions into one and the transpose keeps that one first ->
/// reshape(transpose(x)). Moves batch-merging reshapes outward, where
/// UnmergeBatchReshapes removes them (attention's backward transposes its
/// merged operands).
struct SinkBatchReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto reshape = op.getInput().getDefiningOp<ReshapeOp>();
    llvm::ArrayRef<int64_t> perm = op.getPermutation();
    if (!reshape || perm.empty() || perm[0] != 0) {
      return failure();
    }
    auto in = llvm::cast<RankedTensorType>(reshape.getInput().getType());
    auto merged = llvm::cast<RankedTensorType>(reshape.getType());
    int64_t lead = in.getRank() - merged.getRank() + 1;
    if (lead < 2 ||
        in.getShape().drop_front(lead) != merged.getShape().drop_front(1)) {
      return failure();
    }
    llvm::SmallVector<int64_t> unmergedPerm;
    llvm::SmallVector<int64_t> shape;
    for (int64_t d = 0; d < lead; ++d) {
      unmergedPerm.push_back(d);
      shape.push_back(in.getDimSize(d));
    }
    for (int64_t p : perm.drop_front()) {
      unmergedPerm.push_back(p + lead - 1);
      shape.push_back(in.getDimSize(p + lead - 1));
    }
    Value transposed = TransposeOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, in.getElementType()), reshape.getInput(),
        unmergedPerm);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), transposed);
    return success();
  }
};

/// matmul(reshape(a), reshape(b)), where the reshapes only merge leading
/// batch dimensions [B1, B2] into one, -> reshape(matmul(a, b)). Attention
/// merges batch and heads for its batched products, but its operands are
/// heads transposed out of a projection: merged, they must be copied
/// contiguous first; unmerged, the tile phase reads them in place, since a
/// matmul's batch dimensions may have any strides. An operand without such
/// a reshape is split to match (always free: splitting a dimension needs no
/// data movement); a rank-2 one is shared by every batch as before.
struct UnmergeBatchReshapes : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The batch shape a reshape to rank 3 merged, when that is all it did.
  static std::optional<llvm::SmallVector<int64_t>> mergedBatch(Value v) {
    auto reshape = v.getDefiningOp<ReshapeOp>();
    if (!reshape) {
      return std::nullopt;
    }
    auto in = llvm::cast<RankedTensorType>(reshape.getInput().getType());
    auto out = llvm::cast<RankedTensorType>(v.getType());
    if (out.getRank() != 3 || in.getRank() < 4 ||
        in.getShape().take_back(2) != out.getShape().take_back(2)) {
      return std::nullopt;
    }
    return llvm::to_vector(in.getShape().drop_back(2));
  }

  /// The batch shape `op` unmerges to, when the pattern applies.
  static std::optional<llvm::SmallVector<int64_t>> unmergedBatch(MatmulOp op) {
    auto outType = llvm::cast<RankedTensorType>(op.getType());
    if (outType.getRank() != 3) {
      return std::nullopt;
    }
    auto lhsBatch = mergedBatch(op.getLhs());
    auto rhsBatch = mergedBatch(op.getRhs());
    if ((!lhsBatch && !rhsBatch) ||
        (lhsBatch && rhsBatch && *lhsBatch != *rhsBatch)) {
      return std::nullopt;
    }
    // An operand no reshape merged must be rank 2 (shared) or have the
    // merged batch dimension; checked before anything is built.
    auto splittable = [&](Value v) {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      return type.getRank() == 2 ||
             (type.getRank() == 3 &&
              type.getDimSize(0) == outType.getDimSize(0));
    };
    if ((!lhsBatch && !splittable(op.getLhs())) ||
        (!rhsBatch && !splittable(op.getRhs()))) {
      return std::nullopt;
    }
    return lhsBatch ? *lhsBatch : *rhsBatch;
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto outType = llvm::cast<RankedTensorType>(op.getType());
    std::optional<llvm::SmallVector<int64_t>> unmerged = unmergedBatch(op);
    if (!unmerged) {
      return failure();
    }
    llvm::SmallVector<int64_t> batch = *unmerged;
    auto unmerge = [&](Value v) -> Value {
      if (mergedBatch(v)) {
        return v.getDefiningOp<ReshapeOp>().getInput();
      }
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (type.getRank() == 2) {
        return v;
      }
      llvm::SmallVector<int64_t> shape(batch);
      shape.append(type.getShape().begin() + 1, type.getShape().end());
      return ReshapeOp::create(
          rewriter, op.getLoc(),
          RankedTensorType::get(shape, type.getElementType()), v);
    };
    Value lhs = unmerge(op.getLhs());
    Value rhs = unmerge(op.getRhs());
    llvm::SmallVector<int64_t> shape(batch);
    shape.append(outType.getShape().begin() + 1, outType.getShape().end());
    Value product = MatmulOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, outType.getElementType()), lhs, rhs,
        op.getTransposeLhsAttr(), op.getTransposeRhsAttr());
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, outType, product);
    return success();
  }
};

/// matmul -> reshape that only adds leading unit dimensions (a [32, S, S]
/// product read as [1, 32, S, S]) -> the matmul at that rank, its operands
/// given the same unit dimensions (free) and its other readers a reshape
/// back. A traced step's product of merged heads (attention backward's
/// dP = dO . V^T, its heads merged by grouped-query attention's broadcast)
/// then has the shape of the values it meets, so the elementwise ops and
/// row reductions on it (the softmax gradient) stay one shape and form one
/// row chain.
struct AddUnitBatchDims : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// How many leading unit dimensions `reshape` adds to `type`, or 0.
  static int64_t addedUnitDims(ReshapeOp reshape, RankedTensorType type) {
    auto wider = llvm::cast<RankedTensorType>(reshape.getType());
    int64_t extra = wider.getRank() - type.getRank();
    if (extra <= 0 || wider.getShape().drop_front(extra) != type.getShape() ||
        !llvm::all_of(wider.getShape().take_front(extra),
                      [](int64_t d) { return d == 1; })) {
      return 0;
    }
    return extra;
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto type = llvm::cast<RankedTensorType>(op.getType());
    // A product whose merged operands unmerge (UnmergeBatchReshapes) reads
    // them where they lie at their own rank instead.
    if (type.getRank() < 3 || UnmergeBatchReshapes::unmergedBatch(op)) {
      return failure();
    }
    int64_t extra = 0;
    for (Operation *user : op->getUsers()) {
      if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
        extra = std::max(extra, addedUnitDims(reshape, type));
      }
    }
    if (extra == 0) {
      return failure();
    }
    auto widen = [&](Value v) -> Value {
      auto t = llvm::cast<RankedTensorType>(v.getType());
      if (t.getRank() == 2) {
        return v; // shared by every batch element
      }
      llvm::SmallVector<int64_t> shape(extra, 1);
      shape.append(t.getShape().begin(), t.getShape().end());
      return ReshapeOp::create(
          rewriter, op.getLoc(),
          RankedTensorType::get(shape, t.getElementType()), v);
    };
    llvm::SmallVector<int64_t> shape(extra, 1);
    shape.append(type.getShape().begin(), type.getShape().end());
    Value product = MatmulOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, type.getElementType()),
        widen(op.getLhs()), widen(op.getRhs()), op.getTransposeLhsAttr(),
        op.getTransposeRhsAttr());
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, type, product);
    return success();
  }
};

/// A float splat constant that is finite and positive.
bool isPositiveConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                        : DenseElementsAttr();
  if (!dense || !dense.isSplat() ||
      !llvm::isa<FloatType>(dense.getElementType())) {
    return false;
  }
  APFloat c = dense.getSplatValue<APFloat>();
  return c.isFiniteNonZero() && !c.isNegative();
}

/// The largest (or smallest) of x scaled by a positive constant is the
/// largest of x, scaled alike: rounding to nearest is monotone, so
/// max(x_i / c) = max(x_i) / c exactly for c > 0 (a NaN stays a NaN, an
/// infinity an infinity). A softmax over scaled scores then folds each
/// row's max on the scores themselves (a bf16 product's, which VectorE
/// folds at twice the rate) instead of after a pass that scales them, and
/// the scaling's one remaining reader, the subtraction of the max, takes
/// it in the same instruction (the tile phase's fuseTensorScalarPairs).
template <typename Reduce>
struct ReduceBeforePositiveScale : OpRewritePattern<Reduce> {
  using OpRewritePattern<Reduce>::OpRewritePattern;

  LogicalResult matchAndRewrite(Reduce op,
                                PatternRewriter &rewriter) const override {
    Operation *scale = op.getInput().getDefiningOp();
    if (!llvm::isa_and_present<DivOp, MulOp>(scale)) {
      return failure();
    }
    Value x = scale->getOperand(0), c = scale->getOperand(1);
    if (llvm::isa<MulOp>(scale) && !isPositiveConstant(c)) {
      std::swap(x, c);
    }
    auto cType = llvm::cast<RankedTensorType>(c.getType());
    if (!isPositiveConstant(c) || cType.getRank() != 0 ||
        x.getType() != op.getInput().getType()) {
      return failure();
    }
    Value reduced = Reduce::create(rewriter, op.getLoc(), x, op.getDimsAttr(),
                                   op.getKeepdimAttr());
    Operation *rescaled =
        rewriter.create(op.getLoc(), scale->getName().getIdentifier(),
                        {reduced, c}, {op.getType()}, scale->getAttrs());
    rewriter.replaceOp(op, rescaled->getResults());
    return success();
  }
};

/// The factor of `scale`, x * c or x / c with c a positive rank-0 f32 or
/// bf16 constant that is a power of two (the 1/8 of a 64-feature head's
/// softmax), and its x: a product's input scaled by it gives exactly the
/// product scaled by it, since multiplying every term and partial sum by
/// 2^k rounds nothing short of overflow and underflow, which f32's and
/// bf16's 8-bit exponent leaves far away. (f16's 5-bit exponent does
/// not; a negative factor would turn a product's +0 into -0.)
std::optional<double> powerOfTwoFactor(Operation *scale, Value &x) {
  if (!llvm::isa_and_present<DivOp, MulOp>(scale)) {
    return std::nullopt;
  }
  Value a = scale->getOperand(0), c = scale->getOperand(1);
  auto constantOf = [](Value v) {
    auto constant = v.getDefiningOp<ConstantOp>();
    auto dense = constant
                     ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                     : DenseElementsAttr();
    return dense && dense.isSplat() && dense.getType().getRank() == 0 &&
                   llvm::isa<FloatType>(dense.getElementType())
               ? dense
               : DenseElementsAttr();
  };
  if (llvm::isa<MulOp>(scale) && !constantOf(c)) {
    std::swap(a, c);
  }
  DenseElementsAttr dense = constantOf(c);
  if (!dense || a.getType() != scale->getResult(0).getType() ||
      !(dense.getElementType().isF32() || dense.getElementType().isBF16())) {
    return std::nullopt;
  }
  APFloat value = dense.getSplatValue<APFloat>();
  int exponent = 0;
  if (!value.isNormal() || value.isNegative() ||
      std::frexp(value.convertToDouble(), &exponent) != 0.5 ||
      std::abs(exponent) > 64) {
    return std::nullopt;
  }
  x = a;
  return llvm::isa<DivOp>(scale) ? 1.0 / value.convertToDouble()
                                 : value.convertToDouble();
}

int64_t elementsOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getNumElements();
}

/// `x * factor`, the factor a rank-0 constant of x's element type.
Value scaledBy(PatternRewriter &rewriter, Location loc, Value x,
               double factor) {
  auto type = llvm::cast<RankedTensorType>(x.getType());
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  Value c = ConstantOp::create(
      rewriter, loc, scalarType,
      DenseElementsAttr::get(scalarType,
                             rewriter.getFloatAttr(type.getElementType(), factor)));
  return MulOp::create(rewriter, loc, type, x, c);
}

/// A copy of `product` on other operands.
Value productOf(PatternRewriter &rewriter, MatmulOp product, Value lhs,
                Value rhs) {
  return rewriter
      .create(product.getLoc(), product->getName().getIdentifier(), {lhs, rhs},
              {product.getType()}, product->getAttrs())
      ->getResult(0);
}

/// A scaling is cheapest on the smallest tensor it can be applied to: a
/// product scaled by a power of two is the product of an input scaled by
/// it (attention's scores scaled by 1/8 are Q / 8 times K^T), and a
/// product of a scaled input the product of the other input scaled (the
/// backward's scaled score gradient times K is its gradient times K / 8).
/// Moved only from a tensor of at least 2^20 elements to an input at least
/// 4 times smaller, so the [S, S] pass becomes a pass over [S, d] (d the
/// head size) where S >= 4 d: elsewhere the pass the scaling moves to can
/// cost more than it saves (a loop nest of its own, where the scaled
/// tensor's producer is not elementwise).
constexpr int64_t kScaledProductElements = int64_t(1) << 20;
template <typename Scale>
struct ScaleProductInput : OpRewritePattern<Scale> {
  using OpRewritePattern<Scale>::OpRewritePattern;

  LogicalResult matchAndRewrite(Scale op,
                                PatternRewriter &rewriter) const override {
    Value x;
    std::optional<double> factor = powerOfTwoFactor(op, x);
    auto product = x ? x.getDefiningOp<MatmulOp>() : MatmulOp();
    if (!factor || !product || !product->hasOneUse()) {
      return failure();
    }
    Value lhs = product.getLhs(), rhs = product.getRhs();
    bool scaleLhs = elementsOf(lhs) <= elementsOf(rhs);
    if (elementsOf(x) < kScaledProductElements ||
        4 * elementsOf(scaleLhs ? lhs : rhs) > elementsOf(x)) {
      return failure();
    }
    Location loc = op.getLoc();
    Value result =
        scaleLhs ? productOf(rewriter, product, scaledBy(rewriter, loc, lhs, *factor), rhs)
                 : productOf(rewriter, product, lhs, scaledBy(rewriter, loc, rhs, *factor));
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Whether a product that reads `operand` may take its scaling over onto
/// its other input: at least 4 times smaller, and `operand` big enough.
bool movesToOtherInput(MatmulOp product, Value operand) {
  Value other = product.getLhs() == operand ? product.getRhs() : product.getLhs();
  return elementsOf(operand) >= kScaledProductElements &&
         4 * elementsOf(other) <= elementsOf(operand);
}

/// Whether every reader of `scaled` (directly or through reshapes) is a
/// product that moves the scaling to its other input, so that the pass
/// over `scaled` goes away rather than gaining a second one beside it.
bool onlyProductsMoveIt(Value scaled) {
  for (Operation *user : scaled.getUsers()) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
      if (!onlyProductsMoveIt(reshape.getOutput())) {
        return false;
      }
      continue;
    }
    auto product = llvm::dyn_cast<MatmulOp>(user);
    if (!product || product.getLhs() == product.getRhs() ||
        !movesToOtherInput(product, scaled)) {
      return false;
    }
  }
  return true;
}

struct ScaleOtherProductInput : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      Value operand = op->getOperand(i), other = op->getOperand(1 - i);
      auto reshape = operand.getDefiningOp<ReshapeOp>();
      Value inner = reshape ? reshape.getInput() : operand;
      Value x;
      std::optional<double> factor =
          powerOfTwoFactor(inner.getDefiningOp(), x);
      if (!factor || operand == other || !movesToOtherInput(op, operand) ||
          !onlyProductsMoveIt(inner)) {
        continue;
      }
      Location loc = op.getLoc();
      Value unscaled =
          reshape ? ReshapeOp::create(rewriter, loc, reshape.getType(), x)
                        .getOutput()
                  : x;
      Value scaled = scaledBy(rewriter, loc, other, *factor);
      rewriter.replaceOp(op, i == 0 ? productOf(rewriter, op, unscaled, scaled)
                                    : productOf(rewriter, op, scaled, unscaled));
      return success();
    }
    return failure();
  }
};

} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<ScaleProductInput<MulOp>>(context);
}

void DivOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<ScaleProductInput<DivOp>>(context);
}

void ReduceMaxOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ReduceBeforePositiveScale<ReduceMaxOp>>(context);
}

void ReduceMinOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ReduceBeforePositiveScale<ReduceMinOp>>(context);
}

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<UnmergeBatchReshapes, AddUnitBatchDims, ScaleOtherProductInput>(
      context);
}

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<FoldReshapeChain>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ComposeTransposes, SinkBatchReshape>(context);
}
