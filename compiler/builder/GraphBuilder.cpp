//===- GraphBuilder.cpp - building training-step graphs in C++ -----------===//

#include "compiler/builder/GraphBuilder.h"

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphRoles.h"
#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
namespace kg = kiln::kgraph;

namespace kiln {

namespace {

Attribute elementAttr(Type type, double value) {
  if (llvm::isa<FloatType>(type)) {
    return FloatAttr::get(type, value);
  }
  return IntegerAttr::get(type, static_cast<int64_t>(value));
}

} // namespace

GraphBuilder::GraphBuilder(MLIRContext &context, llvm::StringRef name)
    : context(context), builder(&context) {
  context.loadDialect<kg::KGraphDialect, func::FuncDialect>();
  module = ModuleOp::create(builder.getUnknownLoc());
  builder.setInsertionPointToEnd(module->getBody());
  function = func::FuncOp::create(builder, builder.getUnknownLoc(), name,
                                  builder.getFunctionType({}, {}));
  builder.setInsertionPointToEnd(function.addEntryBlock());
}

void GraphBuilder::recordError(const llvm::Twine &message) {
  if (firstError.empty()) {
    firstError = message.str();
  }
}

RankedTensorType GraphBuilder::tensorType(proto::DType dtype,
                                          llvm::ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, graph::elementTypeOf(dtype, context));
}

NamedAttribute GraphBuilder::attr(llvm::StringRef name, Attribute value) {
  return builder.getNamedAttr(name, value);
}

Tensor GraphBuilder::one(Operation *op, unsigned index) const {
  return op ? op->getResult(index) : Tensor();
}

llvm::ArrayRef<int64_t> GraphBuilder::shapeOf(Tensor t) {
  return t ? llvm::cast<RankedTensorType>(t.getType()).getShape()
           : llvm::ArrayRef<int64_t>();
}

template <typename OpTy>
Operation *GraphBuilder::make(llvm::ArrayRef<Tensor> operands,
                              llvm::ArrayRef<NamedAttribute> attrs,
                              llvm::ArrayRef<Type> resultTypes) {
  if (!firstError.empty() || finished) {
    return nullptr;
  }
  for (Tensor t : operands) {
    if (!t) {
      return nullptr;
    }
  }
  Location loc = builder.getUnknownLoc();
  llvm::StringRef opName = OpTy::getOperationName();
  llvm::SmallVector<Type> types(resultTypes);
  if constexpr (OpTy::template hasTrait<InferTypeOpInterface::Trait>()) {
    if (types.empty()) {
      // Infer through the op's static hooks rather than its generated
      // builder, which aborts the process on a shape error.
      std::string message;
      ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
        if (message.empty()) {
          message = diag.str();
        }
        return success();
      });
      DictionaryAttr dict = builder.getDictionaryAttr(attrs);
      typename OpTy::Properties props;
      auto emit = [&] { return emitError(loc); };
      bool ok = succeeded(OpTy::setPropertiesFromAttr(props, dict, emit));
      if (ok) {
        OpTy::populateDefaultProperties(OperationName(opName, &context), props);
        ok = succeeded(OpTy::inferReturnTypes(
            &context, loc, ValueRange(operands), dict, OpaqueProperties(&props),
            RegionRange(), types));
      }
      if (!ok) {
        recordError(
            "'" + opName + "': " +
            (message.empty() ? std::string("invalid operands") : message));
        return nullptr;
      }
    }
  }
  OperationState state(loc, opName);
  state.addOperands(ValueRange(operands));
  state.addTypes(types);
  state.addAttributes(attrs);
  auto op = graph::createVerified(builder, state);
  if (!op) {
    recordError("'" + opName + "': " + llvm::toString(op.takeError()));
    return nullptr;
  }
  return *op;
}

Tensor GraphBuilder::input(llvm::StringRef name, proto::DType dtype,
                           llvm::ArrayRef<int64_t> shape,
                           proto::InputRole role) {
  if (finished) {
    return {};
  }
  Block &body = function.getBody().front();
  unsigned index = body.getNumArguments();
  Tensor arg =
      body.addArgument(tensorType(dtype, shape), builder.getUnknownLoc());
  llvm::SmallVector<Type> argTypes(body.getArgumentTypes());
  function.setType(builder.getFunctionType(argTypes, {}));
  function.setArgAttr(index, kg::kNameAttr, builder.getStringAttr(name));
  function.setArgAttr(index, kg::kRoleAttr,
                      builder.getStringAttr(graph::inputRoleName(role)));
  return arg;
}

void GraphBuilder::output(llvm::StringRef name, Tensor value,
                          proto::OutputRole role, Tensor replaces) {
  if (!value) {
    return;
  }
  auto replaced = llvm::dyn_cast_if_present<BlockArgument>(replaces);
  if (replaces && !replaced) {
    recordError("output '" + name + "' replaces a value that is not an input");
    return;
  }
  outputs.push_back(value);
  // Names and roles become result attributes in finish(), once the result
  // list is fixed.
  llvm::SmallVector<NamedAttribute> attrs = {
      attr(kg::kNameAttr, builder.getStringAttr(name)),
      attr(kg::kRoleAttr, builder.getStringAttr(graph::outputRoleName(role)))};
  if (replaced) {
    attrs.push_back(attr(kg::kAliasesAttr,
                         builder.getI64IntegerAttr(replaced.getArgNumber())));
  }
  outputAttrs.push_back(builder.getDictionaryAttr(attrs));
}

Tensor GraphBuilder::scalar(double value, proto::DType dtype) {
  return full({}, value, dtype);
}

Tensor GraphBuilder::full(llvm::ArrayRef<int64_t> shape, double value,
                          proto::DType dtype) {
  RankedTensorType type = tensorType(dtype, shape);
  auto dense =
      DenseElementsAttr::get(type, elementAttr(type.getElementType(), value));
  return one(make<kg::ConstantOp>({}, {attr("value", dense)}));
}

Tensor GraphBuilder::constant(llvm::ArrayRef<int64_t> shape,
                              llvm::ArrayRef<double> values,
                              proto::DType dtype) {
  RankedTensorType type = tensorType(dtype, shape);
  if (static_cast<int64_t>(values.size()) != type.getNumElements()) {
    recordError("constant of " + llvm::Twine(type.getNumElements()) +
                " elements given " + llvm::Twine(values.size()) + " values");
    return {};
  }
  llvm::SmallVector<Attribute> elements;
  for (double v : values) {
    elements.push_back(elementAttr(type.getElementType(), v));
  }
  return one(make<kg::ConstantOp>(
      {}, {attr("value", DenseElementsAttr::get(type, elements))}));
}

Tensor GraphBuilder::iota(llvm::ArrayRef<int64_t> shape, int64_t dim,
                          proto::DType dtype) {
  return one(make<kg::IotaOp>({}, {attr("dim", builder.getI64IntegerAttr(dim))},
                              {tensorType(dtype, shape)}));
}

#define KILN_UNARY(METHOD, OP)                                                 \
  Tensor GraphBuilder::METHOD(Tensor x) {                                      \
    return x ? one(make<kg::OP>({x}, {}, {x.getType()})) : Tensor();           \
  }
KILN_UNARY(neg, NegOp)
KILN_UNARY(abs, AbsOp)
KILN_UNARY(sign, SignOp)
KILN_UNARY(exp, ExpOp)
KILN_UNARY(log, LogOp)
KILN_UNARY(log1p, Log1pOp)
KILN_UNARY(sqrt, SqrtOp)
KILN_UNARY(rsqrt, RsqrtOp)
KILN_UNARY(reciprocal, ReciprocalOp)
KILN_UNARY(tanh, TanhOp)
KILN_UNARY(sigmoid, SigmoidOp)
KILN_UNARY(relu, ReluOp)
KILN_UNARY(erf, ErfOp)
KILN_UNARY(sin, SinOp)
KILN_UNARY(cos, CosOp)
KILN_UNARY(logicalNot, NotOp)
#undef KILN_UNARY

Tensor GraphBuilder::gelu(Tensor x, llvm::StringRef approximate) {
  return x ? one(make<kg::GeluOp>(
                 {x}, {attr("approximate", builder.getStringAttr(approximate))},
                 {x.getType()}))
           : Tensor();
}

#define KILN_BINARY(METHOD, OP)                                                \
  Tensor GraphBuilder::METHOD(Tensor a, Tensor b) {                            \
    return one(make<kg::OP>({a, b}));                                          \
  }
KILN_BINARY(add, AddOp)
KILN_BINARY(sub, SubOp)
KILN_BINARY(mul, MulOp)
KILN_BINARY(div, DivOp)
KILN_BINARY(pow, PowOp)
KILN_BINARY(max, MaxOp)
KILN_BINARY(min, MinOp)
KILN_BINARY(logicalAnd, AndOp)
KILN_BINARY(logicalOr, OrOp)
#undef KILN_BINARY

Tensor GraphBuilder::compare(llvm::StringRef direction, Tensor a, Tensor b) {
  return one(make<kg::CompareOp>(
      {a, b}, {attr("direction", builder.getStringAttr(direction))}));
}

Tensor GraphBuilder::select(Tensor condition, Tensor onTrue, Tensor onFalse) {
  return one(make<kg::SelectOp>({condition, onTrue, onFalse}));
}

Tensor GraphBuilder::cast(Tensor x, proto::DType dtype) {
  return x ? one(make<kg::CastOp>({x}, {}, {tensorType(dtype, shapeOf(x))}))
           : Tensor();
}

Tensor GraphBuilder::reshape(Tensor x, llvm::ArrayRef<int64_t> shape) {
  if (!x) {
    return {};
  }
  auto type = llvm::cast<RankedTensorType>(x.getType());
  return one(make<kg::ReshapeOp>(
      {x}, {}, {RankedTensorType::get(shape, type.getElementType())}));
}

Tensor GraphBuilder::transpose(Tensor x, llvm::ArrayRef<int64_t> permutation) {
  return one(make<kg::TransposeOp>(
      {x}, {attr("permutation", builder.getDenseI64ArrayAttr(permutation))}));
}

Tensor GraphBuilder::broadcast(Tensor x, llvm::ArrayRef<int64_t> shape) {
  if (!x) {
    return {};
  }
  auto type = llvm::cast<RankedTensorType>(x.getType());
  return one(make<kg::BroadcastOp>(
      {x}, {}, {RankedTensorType::get(shape, type.getElementType())}));
}

Tensor GraphBuilder::slice(Tensor x, llvm::ArrayRef<int64_t> start,
                           llvm::ArrayRef<int64_t> limit,
                           llvm::ArrayRef<int64_t> stride) {
  return one(make<kg::SliceOp>(
      {x}, {attr("start", builder.getDenseI64ArrayAttr(start)),
            attr("limit", builder.getDenseI64ArrayAttr(limit)),
            attr("stride", builder.getDenseI64ArrayAttr(stride))}));
}

Tensor GraphBuilder::concat(llvm::ArrayRef<Tensor> xs, int64_t dim) {
  return one(
      make<kg::ConcatOp>(xs, {attr("dim", builder.getI64IntegerAttr(dim))}));
}

Tensor GraphBuilder::gather(Tensor x, Tensor index, int64_t dim) {
  return one(make<kg::GatherOp>({x, index},
                                {attr("dim", builder.getI64IntegerAttr(dim))}));
}

Tensor GraphBuilder::scatterAdd(Tensor x, Tensor index, Tensor source,
                                int64_t dim) {
  return one(make<kg::ScatterAddOp>(
      {x, index, source}, {attr("dim", builder.getI64IntegerAttr(dim))}));
}

Tensor GraphBuilder::indexSelect(Tensor x, Tensor index, int64_t dim) {
  return one(make<kg::IndexSelectOp>(
      {x, index}, {attr("dim", builder.getI64IntegerAttr(dim))}));
}

Tensor GraphBuilder::embedding(Tensor weight, Tensor indices) {
  return one(make<kg::EmbeddingOp>({weight, indices}));
}

Tensor GraphBuilder::embeddingBackward(Tensor gradOutput, Tensor indices,
                                       int64_t numWeights, int64_t paddingIdx) {
  return one(make<kg::EmbeddingBackwardOp>(
      {gradOutput, indices},
      {attr("num_weights", builder.getI64IntegerAttr(numWeights)),
       attr("padding_idx", builder.getI64IntegerAttr(paddingIdx))}));
}

Tensor GraphBuilder::matmul(Tensor a, Tensor b, bool transposeA,
                            bool transposeB) {
  return one(make<kg::MatmulOp>(
      {a, b}, {attr("transpose_lhs", builder.getBoolAttr(transposeA)),
               attr("transpose_rhs", builder.getBoolAttr(transposeB))}));
}

Tensor GraphBuilder::linear(Tensor x, Tensor weight, Tensor bias) {
  if (bias) {
    return one(make<kg::LinearOp>({x, weight, bias}));
  }
  return one(make<kg::LinearOp>({x, weight}));
}

#define KILN_REDUCE(METHOD, OP)                                                \
  Tensor GraphBuilder::METHOD(Tensor x, llvm::ArrayRef<int64_t> dims,          \
                              bool keepDim) {                                  \
    return one(                                                                \
        make<kg::OP>({x}, {attr("dims", builder.getDenseI64ArrayAttr(dims)),   \
                           attr("keepdim", builder.getBoolAttr(keepDim))}));   \
  }
KILN_REDUCE(reduceSum, ReduceSumOp)
KILN_REDUCE(reduceMean, ReduceMeanOp)
KILN_REDUCE(reduceMax, ReduceMaxOp)
KILN_REDUCE(reduceMin, ReduceMinOp)
#undef KILN_REDUCE

Tensor GraphBuilder::argmax(Tensor x, int64_t dim, bool keepDim) {
  return one(
      make<kg::ArgmaxOp>({x}, {attr("dim", builder.getI64IntegerAttr(dim)),
                               attr("keepdim", builder.getBoolAttr(keepDim))}));
}

Tensor GraphBuilder::softmax(Tensor x, int64_t dim) {
  return x ? one(make<kg::SoftmaxOp>(
                 {x}, {attr("dim", builder.getI64IntegerAttr(dim))},
                 {x.getType()}))
           : Tensor();
}

Tensor GraphBuilder::logSoftmax(Tensor x, int64_t dim) {
  return x ? one(make<kg::LogSoftmaxOp>(
                 {x}, {attr("dim", builder.getI64IntegerAttr(dim))},
                 {x.getType()}))
           : Tensor();
}

Tensor GraphBuilder::softmaxBackward(Tensor gradOutput, Tensor output,
                                     int64_t dim) {
  return output ? one(make<kg::SoftmaxBackwardOp>(
                      {gradOutput, output},
                      {attr("dim", builder.getI64IntegerAttr(dim))},
                      {output.getType()}))
                : Tensor();
}

Tensor GraphBuilder::logSoftmaxBackward(Tensor gradOutput, Tensor output,
                                        int64_t dim) {
  return output ? one(make<kg::LogSoftmaxBackwardOp>(
                      {gradOutput, output},
                      {attr("dim", builder.getI64IntegerAttr(dim))},
                      {output.getType()}))
                : Tensor();
}

llvm::SmallVector<NamedAttribute>
GraphBuilder::windowAttrs(const ConvWindow &w) {
  return {attr("stride", builder.getDenseI64ArrayAttr(w.stride)),
          attr("padding", builder.getDenseI64ArrayAttr(w.padding)),
          attr("dilation", builder.getDenseI64ArrayAttr(w.dilation)),
          attr("groups", builder.getI64IntegerAttr(w.groups))};
}

llvm::SmallVector<NamedAttribute>
GraphBuilder::windowAttrs(const PoolWindow &w, bool maxPooling) {
  llvm::SmallVector<NamedAttribute> attrs = {
      attr("kernel", builder.getDenseI64ArrayAttr(w.kernel)),
      attr("stride", builder.getDenseI64ArrayAttr(w.stride)),
      attr("padding", builder.getDenseI64ArrayAttr(w.padding)),
      attr("ceil_mode", builder.getBoolAttr(w.ceilMode))};
  if (maxPooling) {
    llvm::SmallVector<int64_t, 2> ones(w.kernel.size(), 1);
    attrs.push_back(attr("dilation", builder.getDenseI64ArrayAttr(
                                         w.dilation.empty() ? ones : w.dilation)));
  } else {
    attrs.push_back(
        attr("count_include_pad", builder.getBoolAttr(w.countIncludePad)));
    attrs.push_back(attr("divisor", builder.getI64IntegerAttr(w.divisor)));
  }
  return attrs;
}

/// The element type of `t` as a tensor type of `shape`.
static RankedTensorType like(Tensor t, llvm::ArrayRef<int64_t> shape) {
  return RankedTensorType::get(
      shape, llvm::cast<RankedTensorType>(t.getType()).getElementType());
}

Tensor GraphBuilder::conv(Tensor x, Tensor weight, Tensor bias,
                          const ConvWindow &w) {
  llvm::SmallVector<Tensor, 3> operands = {x, weight};
  if (bias) {
    operands.push_back(bias);
  }
  return one(make<kg::ConvOp>(operands, windowAttrs(w)));
}

Tensor GraphBuilder::convInputGrad(Tensor gradOutput, Tensor weight,
                                   llvm::ArrayRef<int64_t> inputShape,
                                   const ConvWindow &w) {
  if (!gradOutput) {
    return {};
  }
  return one(make<kg::ConvInputGradOp>({gradOutput, weight}, windowAttrs(w),
                                       {like(gradOutput, inputShape)}));
}

Tensor GraphBuilder::convWeightGrad(Tensor gradOutput, Tensor x,
                                    llvm::ArrayRef<int64_t> weightShape,
                                    const ConvWindow &w) {
  if (!gradOutput) {
    return {};
  }
  return one(make<kg::ConvWeightGradOp>({gradOutput, x}, windowAttrs(w),
                                        {like(gradOutput, weightShape)}));
}

GraphBuilder::BatchNorm
GraphBuilder::batchNorm(Tensor x, Tensor weight, Tensor bias,
                        Tensor runningMean, Tensor runningVar, bool training,
                        double momentum, double epsilon) {
  if (!x || !weight) {
    return {};
  }
  Type channel = weight.getType();
  Operation *op = make<kg::BatchNormOp>(
      {x, weight, bias, runningMean, runningVar},
      {attr("training", builder.getBoolAttr(training)),
       attr("momentum", builder.getF64FloatAttr(momentum)),
       attr("epsilon", builder.getF64FloatAttr(epsilon))},
      {x.getType(), channel, channel, channel, channel});
  return {one(op, 0), one(op, 1), one(op, 2), one(op, 3), one(op, 4)};
}

GraphBuilder::BatchNormGrads
GraphBuilder::batchNormBackward(Tensor gradOutput, Tensor x, Tensor mean,
                                Tensor rstd, Tensor weight, bool training) {
  if (!x || !weight) {
    return {};
  }
  Type channel = weight.getType();
  Operation *op = make<kg::BatchNormBackwardOp>(
      {gradOutput, x, mean, rstd, weight},
      {attr("training", builder.getBoolAttr(training))},
      {x.getType(), channel, channel});
  return {one(op, 0), one(op, 1), one(op, 2)};
}

Tensor GraphBuilder::maxPool(Tensor x, const PoolWindow &w) {
  return one(make<kg::MaxPoolOp>({x}, windowAttrs(w, /*maxPooling=*/true)));
}

Tensor GraphBuilder::maxPoolBackward(Tensor gradOutput, Tensor x,
                                     const PoolWindow &w) {
  if (!x) {
    return {};
  }
  return one(make<kg::MaxPoolBackwardOp>(
      {gradOutput, x}, windowAttrs(w, /*maxPooling=*/true), {x.getType()}));
}

Tensor GraphBuilder::avgPool(Tensor x, const PoolWindow &w) {
  return one(make<kg::AvgPoolOp>({x}, windowAttrs(w, /*maxPooling=*/false)));
}

Tensor GraphBuilder::avgPoolBackward(Tensor gradOutput,
                                     llvm::ArrayRef<int64_t> inputShape,
                                     const PoolWindow &w) {
  if (!gradOutput) {
    return {};
  }
  return one(make<kg::AvgPoolBackwardOp>(
      {gradOutput}, windowAttrs(w, /*maxPooling=*/false),
      {like(gradOutput, inputShape)}));
}

GraphBuilder::LayerNorm GraphBuilder::layerNorm(Tensor x, Tensor weight,
                                                Tensor bias,
                                                int64_t normalizedRank,
                                                double epsilon) {
  Operation *op = make<kg::LayerNormOp>(
      {x, weight, bias},
      {attr("normalized_rank", builder.getI64IntegerAttr(normalizedRank)),
       attr("epsilon", builder.getF64FloatAttr(epsilon))});
  return {one(op, 0), one(op, 1), one(op, 2)};
}

GraphBuilder::LayerNormGrads
GraphBuilder::layerNormBackward(Tensor gradOutput, Tensor x, Tensor mean,
                                Tensor rstd, Tensor weight,
                                int64_t normalizedRank) {
  Operation *op = make<kg::LayerNormBackwardOp>(
      {gradOutput, x, mean, rstd, weight},
      {attr("normalized_rank", builder.getI64IntegerAttr(normalizedRank))});
  return {one(op, 0), one(op, 1), one(op, 2)};
}

Tensor GraphBuilder::geluBackward(Tensor gradOutput, Tensor x,
                                  llvm::StringRef approximate) {
  return x ? one(make<kg::GeluBackwardOp>(
                 {gradOutput, x},
                 {attr("approximate", builder.getStringAttr(approximate))},
                 {x.getType()}))
           : Tensor();
}

Tensor GraphBuilder::tanhBackward(Tensor gradOutput, Tensor y) {
  return y ? one(make<kg::TanhBackwardOp>({gradOutput, y}, {}, {y.getType()}))
           : Tensor();
}

Tensor GraphBuilder::sigmoidBackward(Tensor gradOutput, Tensor y) {
  return y ? one(make<kg::SigmoidBackwardOp>({gradOutput, y}, {},
                                             {y.getType()}))
           : Tensor();
}

Tensor GraphBuilder::reluBackward(Tensor gradOutput, Tensor x,
                                  double threshold) {
  return x ? one(make<kg::ReluBackwardOp>(
                 {gradOutput, x},
                 {attr("threshold", builder.getF64FloatAttr(threshold))},
                 {x.getType()}))
           : Tensor();
}

GraphBuilder::NllLoss GraphBuilder::nllLoss(Tensor logProbs, Tensor target,
                                            llvm::StringRef reduction,
                                            int64_t ignoreIndex) {
  Operation *op = make<kg::NllLossOp>(
      {logProbs, target},
      {attr("reduction", builder.getStringAttr(reduction)),
       attr("ignore_index", builder.getI64IntegerAttr(ignoreIndex))});
  return {one(op, 0), one(op, 1)};
}

Tensor GraphBuilder::nllLossBackward(Tensor gradOutput, Tensor logProbs,
                                     Tensor target, Tensor totalWeight,
                                     llvm::StringRef reduction,
                                     int64_t ignoreIndex) {
  return one(make<kg::NllLossBackwardOp>(
      {gradOutput, logProbs, target, totalWeight},
      {attr("reduction", builder.getStringAttr(reduction)),
       attr("ignore_index", builder.getI64IntegerAttr(ignoreIndex))}));
}

GraphBuilder::Dropout GraphBuilder::dropout(Tensor x, Tensor seed, double p,
                                            int64_t stream) {
  Operation *op = make<kg::DropoutOp>(
      {x, seed}, {attr("p", builder.getF64FloatAttr(p)),
                  attr("stream", builder.getI64IntegerAttr(stream))});
  return {one(op, 0), one(op, 1)};
}

Tensor GraphBuilder::allReduce(Tensor x, llvm::StringRef reduction) {
  return x ? one(make<kg::AllReduceOp>(
                 {x}, {attr("reduction", builder.getStringAttr(reduction))},
                 {x.getType()}))
           : Tensor();
}

Tensor GraphBuilder::checkpoint(Tensor x, int64_t call, llvm::StringRef side) {
  return x ? one(make<kg::CheckpointOp>(
                 {x},
                 {attr("region", builder.getI64IntegerAttr(call)),
                  attr("side", builder.getStringAttr(side))},
                 {x.getType()}))
           : Tensor();
}

Tensor GraphBuilder::gradient(Tensor grad, llvm::StringRef parameter) {
  return grad ? one(make<kg::GradientOp>(
                    {grad},
                    {attr("parameter", builder.getStringAttr(parameter))},
                    {grad.getType()}))
              : Tensor();
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphBuilder::finish() {
  if (finished) {
    return llvm::createStringError("graph builder already finished");
  }
  finished = true;
  if (!firstError.empty()) {
    return llvm::createStringError("graph '" + function.getSymName() +
                                   "': " + firstError);
  }
  func::ReturnOp::create(builder, builder.getUnknownLoc(), outputs);
  llvm::SmallVector<Type> argTypes(function.getArgumentTypes());
  function.setType(
      builder.getFunctionType(argTypes, TypeRange(ValueRange(outputs))));
  for (auto [i, attrs] : llvm::enumerate(outputAttrs)) {
    function.setResultAttrs(i, attrs);
  }
  if (failed(mlir::verify(*module))) {
    return llvm::createStringError("graph '" + function.getSymName() +
                                   "' does not verify");
  }
  return std::move(module);
}

llvm::Expected<proto::Graph> GraphBuilder::finishGraph() {
  auto finishedModule = finish();
  if (!finishedModule) {
    return finishedModule.takeError();
  }
  return graph::exportGraph(function);
}

} // namespace kiln
