//===- KGraphWindowOps.cpp - convolution, batch norm and pooling shapes --===//
//
// Type inference and verifiers of the ops in KGraphWindowOps.td, and each
// op's window. Errors name the attribute or operand and the shapes.
//
//===----------------------------------------------------------------------===//

#include "dialects/kgraph/KGraphWindow.h"
#include "dialects/kgraph/VerifierSupport.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace {

Shape shapeOf(llvm::ArrayRef<int64_t> values) {
  return Shape(values.begin(), values.end());
}

Window convWindow(llvm::ArrayRef<int64_t> weightShape,
                  llvm::ArrayRef<int64_t> stride,
                  llvm::ArrayRef<int64_t> padding,
                  llvm::ArrayRef<int64_t> dilation) {
  return Window{shapeOf(weightShape.drop_front(std::min<size_t>(
                    2, weightShape.size()))),
                shapeOf(stride), shapeOf(padding), shapeOf(dilation)};
}

/// Checks a window against a channels-first input of `type`: one or two
/// spatial dims, an entry of each attribute per spatial dim, positive
/// kernel, stride and dilation, padding at least 0, at least one output
/// position. Pooling windows also keep padding within half the kernel
/// (PyTorch's rule: no window lies wholly in the padding).
LogicalResult checkWindow(OptLoc loc, llvm::StringRef op,
                          RankedTensorType type, const Window &w,
                          bool pooling) {
  int64_t spatial = type.getRank() - 2;
  if (spatial != 1 && spatial != 2) {
    return fail(loc, op + " takes [N, C, W] or [N, C, H, W] tensors, not " +
                         shapeString(type.getShape()));
  }
  auto sized = [&](const Shape &values, llvm::StringRef name,
                   int64_t least) -> LogicalResult {
    if (static_cast<int64_t>(values.size()) != spatial) {
      return fail(loc, op + " " + name + " must have " + Twine(spatial) +
                           " entries (one per spatial dim), not " +
                           Twine(values.size()));
    }
    for (int64_t v : values) {
      if (v < least) {
        return fail(loc, op + " " + name + " " + shapeString(values) +
                             " must be at least " + Twine(least));
      }
    }
    return success();
  };
  if (failed(sized(w.kernel, "kernel", 1)) ||
      failed(sized(w.stride, "stride", 1)) ||
      failed(sized(w.padding, "padding", 0)) ||
      failed(sized(w.dilation, "dilation", 1))) {
    return failure();
  }
  for (size_t d = 0; d < w.spatialRank(); ++d) {
    if (pooling && 2 * w.padding[d] > w.kernel[d]) {
      return fail(loc, op + " padding " + shapeString(w.padding) +
                           " must be at most half the kernel " +
                           shapeString(w.kernel));
    }
    if (w.outputSize(d, type.getDimSize(2 + d)) < 1) {
      return fail(loc, op + " window " + shapeString(w.kernel) +
                           " (dilation " + shapeString(w.dilation) +
                           ") does not fit the padded input " +
                           shapeString(type.getShape()));
    }
  }
  return success();
}

/// Checks a convolution's input and weight and returns its output shape.
FailureOr<Shape> convOutputShape(OptLoc loc, llvm::StringRef op,
                                 RankedTensorType input,
                                 RankedTensorType weight, const Window &w,
                                 int64_t groups) {
  if (input.getRank() != weight.getRank() ||
      input.getElementType() != weight.getElementType()) {
    return fail(loc, op + " weight " + shapeString(weight.getShape()) +
                         " must have the input's rank and element type (input " +
                         shapeString(input.getShape()) + ")");
  }
  if (failed(checkWindow(loc, op, input, w, /*pooling=*/false))) {
    return failure();
  }
  int64_t channels = input.getDimSize(1), outChannels = weight.getDimSize(0);
  if (groups < 1 || channels % groups || outChannels % groups) {
    return fail(loc, op + " groups " + Twine(groups) +
                         " must divide the input channels (" + Twine(channels) +
                         ") and the output channels (" + Twine(outChannels) +
                         ")");
  }
  if (weight.getDimSize(1) != channels / groups) {
    return fail(loc, op + " weight " + shapeString(weight.getShape()) +
                         " must have " + Twine(channels / groups) +
                         " input channels per group (input " +
                         shapeString(input.getShape()) + ", groups " +
                         Twine(groups) + ")");
  }
  return w.outputShape(input.getShape(), outChannels);
}

LogicalResult checkGradOutput(OptLoc loc, llvm::StringRef op,
                              RankedTensorType grad, llvm::ArrayRef<int64_t> expected,
                              Type element) {
  if (grad.getShape() != expected || grad.getElementType() != element) {
    return fail(loc, op + " grad_output " + shapeString(grad.getShape()) +
                         " must have the forward output's shape " +
                         shapeString(expected) + " and element type");
  }
  return success();
}

Window poolWindow(llvm::ArrayRef<int64_t> kernel,
                         llvm::ArrayRef<int64_t> stride,
                         llvm::ArrayRef<int64_t> padding,
                         std::optional<llvm::ArrayRef<int64_t>> dilation,
                         bool ceilMode) {
  return Window{shapeOf(kernel), shapeOf(stride), shapeOf(padding),
                dilation ? shapeOf(*dilation) : Shape(kernel.size(), 1),
                ceilMode};
}

/// A tensor of `shape` like `like`.
RankedTensorType withShape(RankedTensorType like, llvm::ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, like.getElementType());
}

} // namespace

namespace kiln::kgraph {

Window windowOf(ConvOp op) {
  return convWindow(op.getWeight().getType().getShape(), op.getStride(),
                    op.getPadding(), op.getDilation());
}
Window windowOf(ConvInputGradOp op) {
  return convWindow(op.getWeight().getType().getShape(), op.getStride(),
                    op.getPadding(), op.getDilation());
}
Window windowOf(ConvWeightGradOp op) {
  return convWindow(op.getGradWeight().getType().getShape(), op.getStride(),
                    op.getPadding(), op.getDilation());
}
Window windowOf(MaxPoolOp op) {
  return poolWindow(op.getKernel(), op.getStride(), op.getPadding(),
                    op.getDilation(), op.getCeilMode());
}
Window windowOf(MaxPoolBackwardOp op) {
  return poolWindow(op.getKernel(), op.getStride(), op.getPadding(),
                    op.getDilation(), op.getCeilMode());
}
Window windowOf(AvgPoolOp op) {
  return poolWindow(op.getKernel(), op.getStride(), op.getPadding(),
                    std::nullopt, op.getCeilMode());
}
Window windowOf(AvgPoolBackwardOp op) {
  return poolWindow(op.getKernel(), op.getStride(), op.getPadding(),
                    std::nullopt, op.getCeilMode());
}

int64_t avgPoolDivisor(const Window &w, llvm::ArrayRef<int64_t> inputSpatial,
                       llvm::ArrayRef<int64_t> at, bool countIncludePad,
                       int64_t divisor) {
  if (divisor > 0) {
    return divisor;
  }
  int64_t padded = 1, inside = 1;
  for (size_t d = 0; d < w.spatialRank(); ++d) {
    int64_t start = at[d] * w.stride[d] - w.padding[d];
    int64_t end = std::min(start + w.kernel[d], inputSpatial[d] + w.padding[d]);
    padded *= end - start;
    inside *= std::min(end, inputSpatial[d]) - std::max<int64_t>(start, 0);
  }
  return countIncludePad ? padded : inside;
}

} // namespace kiln::kgraph

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  RankedTensorType weight = tensorOf(adaptor.getWeight());
  if (!input || !weight) {
    return fail(loc, "conv operands must be ranked tensors");
  }
  Window w = convWindow(weight.getShape(), adaptor.getStride(),
                        adaptor.getPadding(), adaptor.getDilation());
  FailureOr<Shape> shape =
      convOutputShape(loc, "conv", input, weight, w, adaptor.getGroups());
  if (failed(shape)) {
    return failure();
  }
  if (Value bias = adaptor.getBias()) {
    if (tensorOf(bias) != withShape(input, {(*shape)[1]})) {
      return fail(loc, "conv bias must be [" + Twine((*shape)[1]) +
                           "] of the input's element type");
    }
  }
  inferred.push_back(withShape(input, *shape));
  return success();
}

LogicalResult ConvInputGradOp::verify() {
  RankedTensorType input = getGradInput().getType();
  FailureOr<Shape> out =
      convOutputShape(getLoc(), "conv_input_grad", input,
                      getWeight().getType(), windowOf(*this), getGroups());
  if (failed(out)) {
    return failure();
  }
  return checkGradOutput(getLoc(), "conv_input_grad",
                         getGradOutput().getType(), *out,
                         input.getElementType());
}

LogicalResult ConvWeightGradOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<Shape> out =
      convOutputShape(getLoc(), "conv_weight_grad", input,
                      getGradWeight().getType(), windowOf(*this), getGroups());
  if (failed(out)) {
    return failure();
  }
  return checkGradOutput(getLoc(), "conv_weight_grad",
                         getGradOutput().getType(), *out,
                         input.getElementType());
}

/// Checks batch norm's input and per-channel operand type `perChannel`.
static LogicalResult checkBatchNormOperands(OptLoc loc, llvm::StringRef op,
                                            RankedTensorType input,
                                            RankedTensorType perChannel) {
  if (!input || input.getRank() < 2) {
    return fail(loc, op + " input must be [N, C, ...]");
  }
  if (perChannel != withShape(input, {input.getDimSize(1)})) {
    return fail(loc, op + " per-channel operands must be [" +
                         Twine(input.getDimSize(1)) +
                         "] of the input's element type");
  }
  return success();
}

LogicalResult BatchNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(checkBatchNormOperands(getLoc(), "batch_norm", input,
                                    getWeight().getType()))) {
    return failure();
  }
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0.0 && momentum <= 1.0)) {
    return emitOpError("momentum ") << momentum << " must be in [0, 1]";
  }
  if (getTraining() && input.getNumElements() / input.getDimSize(1) < 2) {
    return emitOpError("in training needs more than one value per channel, "
                       "not input ") << shapeString(input.getShape());
  }
  return success();
}

LogicalResult BatchNormBackwardOp::verify() {
  return checkBatchNormOperands(getLoc(), "batch_norm_backward",
                                getInput().getType(), getWeight().getType());
}

/// The output type of a pooling op's window over `input`.
static FailureOr<RankedTensorType> pooledType(OptLoc loc, llvm::StringRef op,
                                              RankedTensorType input,
                                              const Window &w) {
  if (!input) {
    return fail(loc, op + " input must be a ranked tensor");
  }
  if (failed(checkWindow(loc, op, input, w, /*pooling=*/true))) {
    return failure();
  }
  return withShape(input, w.outputShape(input.getShape(), input.getDimSize(1)));
}


LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = pooledType(
      loc, "max_pool", tensorOf(adaptor.getInput()),
      poolWindow(adaptor.getKernel(), adaptor.getStride(), adaptor.getPadding(),
                 adaptor.getDilation(), adaptor.getCeilMode()));
  if (failed(type)) {
    return failure();
  }
  inferred.push_back(*type);
  return success();
}

LogicalResult MaxPoolBackwardOp::verify() {
  RankedTensorType input = getInput().getType();
  FailureOr<RankedTensorType> type =
      pooledType(getLoc(), "max_pool_backward", input, windowOf(*this));
  if (failed(type)) {
    return failure();
  }
  return checkGradOutput(getLoc(), "max_pool_backward",
                         getGradOutput().getType(), type->getShape(),
                         input.getElementType());
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> type = pooledType(
      loc, "avg_pool", tensorOf(adaptor.getInput()),
      poolWindow(adaptor.getKernel(), adaptor.getStride(), adaptor.getPadding(),
                 std::nullopt, adaptor.getCeilMode()));
  if (failed(type)) {
    return failure();
  }
  if (adaptor.getDivisorAttr() && adaptor.getDivisorAttr().getInt() < 0) {
    return fail(loc, "avg_pool divisor must be positive, or 0 for the "
                     "window's size");
  }
  inferred.push_back(*type);
  return success();
}

LogicalResult AvgPoolBackwardOp::verify() {
  RankedTensorType input = getGradInput().getType();
  FailureOr<RankedTensorType> type =
      pooledType(getLoc(), "avg_pool_backward", input, windowOf(*this));
  if (failed(type)) {
    return failure();
  }
  return checkGradOutput(getLoc(), "avg_pool_backward",
                         getGradOutput().getType(), type->getShape(),
                         input.getElementType());
}
