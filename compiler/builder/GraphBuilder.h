//===- GraphBuilder.h - building training-step graphs in C++ ----*- C++ -*-===//
//
// The C++ front end: programs and tests describe a training step op by op and
// get a verified kgraph function, or its .kgraph.pb form.
//
//   GraphBuilder b(context, "mlp_step");
//   Tensor x = b.input("x", proto::F32, {64, 784}, proto::BATCH_INPUT);
//   Tensor w = b.input("w", proto::F32, {128, 784}, proto::PARAMETER);
//   Tensor h = b.relu(b.linear(x, w));
//   ...
//   llvm::Expected<proto::Graph> graph = b.finishGraph();
//
// Shape or dtype mistakes do not abort: the first one is remembered (with the
// op it came from), later ops that depend on it are skipped, and finish()
// returns it as an error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_BUILDER_GRAPHBUILDER_H
#define KILN_COMPILER_BUILDER_GRAPHBUILDER_H

#include "compiler/graph/kgraph.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

/// A value of the graph under construction (null after an error).
using Tensor = mlir::Value;

class GraphBuilder {
public:
  GraphBuilder(mlir::MLIRContext &context, llvm::StringRef name);

  // Interface.
  Tensor input(llvm::StringRef name, proto::DType dtype,
               llvm::ArrayRef<int64_t> shape, proto::InputRole role);
  /// `replaces` is the input an updated parameter or state takes the place of.
  void output(llvm::StringRef name, Tensor value, proto::OutputRole role,
              Tensor replaces = {});

  // Constants and index generation.
  Tensor scalar(double value, proto::DType dtype = proto::F32);
  Tensor full(llvm::ArrayRef<int64_t> shape, double value,
              proto::DType dtype = proto::F32);
  Tensor constant(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> values,
                  proto::DType dtype = proto::F32);
  Tensor iota(llvm::ArrayRef<int64_t> shape, int64_t dim,
              proto::DType dtype = proto::I64);

  // Elementwise.
  Tensor neg(Tensor x);
  Tensor abs(Tensor x);
  Tensor sign(Tensor x);
  Tensor exp(Tensor x);
  Tensor log(Tensor x);
  Tensor log1p(Tensor x);
  Tensor sqrt(Tensor x);
  Tensor rsqrt(Tensor x);
  Tensor reciprocal(Tensor x);
  Tensor tanh(Tensor x);
  Tensor sigmoid(Tensor x);
  Tensor relu(Tensor x);
  Tensor erf(Tensor x);
  Tensor sin(Tensor x);
  Tensor cos(Tensor x);
  Tensor logicalNot(Tensor x);
  Tensor gelu(Tensor x, llvm::StringRef approximate = "none");
  Tensor add(Tensor a, Tensor b);
  Tensor sub(Tensor a, Tensor b);
  Tensor mul(Tensor a, Tensor b);
  Tensor div(Tensor a, Tensor b);
  Tensor pow(Tensor a, Tensor b);
  Tensor max(Tensor a, Tensor b);
  Tensor min(Tensor a, Tensor b);
  Tensor logicalAnd(Tensor a, Tensor b);
  Tensor logicalOr(Tensor a, Tensor b);
  /// direction: eq, ne, lt, le, gt, ge.
  Tensor compare(llvm::StringRef direction, Tensor a, Tensor b);
  Tensor select(Tensor condition, Tensor onTrue, Tensor onFalse);
  Tensor cast(Tensor x, proto::DType dtype);

  // Shapes and indexing.
  Tensor reshape(Tensor x, llvm::ArrayRef<int64_t> shape);
  Tensor transpose(Tensor x, llvm::ArrayRef<int64_t> permutation);
  Tensor broadcast(Tensor x, llvm::ArrayRef<int64_t> shape);
  Tensor slice(Tensor x, llvm::ArrayRef<int64_t> start,
               llvm::ArrayRef<int64_t> limit, llvm::ArrayRef<int64_t> stride);
  Tensor concat(llvm::ArrayRef<Tensor> xs, int64_t dim);
  Tensor gather(Tensor x, Tensor index, int64_t dim);
  Tensor scatterAdd(Tensor x, Tensor index, Tensor source, int64_t dim);
  Tensor indexSelect(Tensor x, Tensor index, int64_t dim);
  Tensor embedding(Tensor weight, Tensor indices);
  Tensor embeddingBackward(Tensor gradOutput, Tensor indices,
                           int64_t numWeights, int64_t paddingIdx = -1);

  // Linear algebra and reductions.
  Tensor matmul(Tensor a, Tensor b, bool transposeA = false,
                bool transposeB = false);
  Tensor linear(Tensor x, Tensor weight, Tensor bias = {});
  Tensor reduceSum(Tensor x, llvm::ArrayRef<int64_t> dims,
                   bool keepDim = false);
  Tensor reduceMean(Tensor x, llvm::ArrayRef<int64_t> dims,
                    bool keepDim = false);
  Tensor reduceMax(Tensor x, llvm::ArrayRef<int64_t> dims,
                   bool keepDim = false);
  Tensor reduceMin(Tensor x, llvm::ArrayRef<int64_t> dims,
                   bool keepDim = false);
  Tensor argmax(Tensor x, int64_t dim, bool keepDim = false);

  // Neural-network ops.
  Tensor softmax(Tensor x, int64_t dim);
  Tensor logSoftmax(Tensor x, int64_t dim);
  Tensor softmaxBackward(Tensor gradOutput, Tensor output, int64_t dim);
  Tensor logSoftmaxBackward(Tensor gradOutput, Tensor output, int64_t dim);
  struct LayerNorm {
    Tensor output, mean, rstd;
  };
  LayerNorm layerNorm(Tensor x, Tensor weight, Tensor bias,
                      int64_t normalizedRank, double epsilon = 1e-5);
  struct LayerNormGrads {
    Tensor input, weight, bias;
  };
  LayerNormGrads layerNormBackward(Tensor gradOutput, Tensor x, Tensor mean,
                                   Tensor rstd, Tensor weight,
                                   int64_t normalizedRank);
  Tensor geluBackward(Tensor gradOutput, Tensor x,
                      llvm::StringRef approximate = "none");
  Tensor tanhBackward(Tensor gradOutput, Tensor y);
  Tensor sigmoidBackward(Tensor gradOutput, Tensor y);
  Tensor reluBackward(Tensor gradOutput, Tensor x, double threshold = 0.0);
  struct NllLoss {
    Tensor loss, totalWeight;
  };
  NllLoss nllLoss(Tensor logProbs, Tensor target,
                  llvm::StringRef reduction = "mean",
                  int64_t ignoreIndex = -100);
  Tensor nllLossBackward(Tensor gradOutput, Tensor logProbs, Tensor target,
                         Tensor totalWeight, llvm::StringRef reduction = "mean",
                         int64_t ignoreIndex = -100);
  struct Dropout {
    Tensor output, mask;
  };
  Dropout dropout(Tensor x, Tensor seed, double p, int64_t stream = 0);
  Tensor allReduce(Tensor x, llvm::StringRef reduction = "sum");

  /// Convolution and pooling windows on [N, C, W] or [N, C, H, W] tensors,
  /// one entry per spatial dim (see kgraph.conv and kgraph.max_pool).
  struct ConvWindow {
    llvm::SmallVector<int64_t, 2> stride, padding, dilation;
    int64_t groups = 1;
  };
  /// `bias` may be null.
  Tensor conv(Tensor x, Tensor weight, Tensor bias, const ConvWindow &w);
  Tensor convInputGrad(Tensor gradOutput, Tensor weight,
                       llvm::ArrayRef<int64_t> inputShape,
                       const ConvWindow &w);
  Tensor convWeightGrad(Tensor gradOutput, Tensor x,
                        llvm::ArrayRef<int64_t> weightShape,
                        const ConvWindow &w);
  struct BatchNorm {
    Tensor output, mean, rstd, runningMean, runningVar;
  };
  BatchNorm batchNorm(Tensor x, Tensor weight, Tensor bias,
                      Tensor runningMean, Tensor runningVar, bool training,
                      double momentum = 0.1, double epsilon = 1e-5);
  struct BatchNormGrads {
    Tensor input, weight, bias;
  };
  BatchNormGrads batchNormBackward(Tensor gradOutput, Tensor x, Tensor mean,
                                   Tensor rstd, Tensor weight, bool training);
  struct PoolWindow {
    llvm::SmallVector<int64_t, 2> kernel, stride, padding;
    llvm::SmallVector<int64_t, 2> dilation = {}; // max pooling; empty: 1s
    bool ceilMode = false;
    bool countIncludePad = true; // average pooling
    int64_t divisor = 0;         // average pooling; 0: the window's count
  };
  Tensor maxPool(Tensor x, const PoolWindow &w);
  Tensor maxPoolBackward(Tensor gradOutput, Tensor x, const PoolWindow &w);
  Tensor avgPool(Tensor x, const PoolWindow &w);
  Tensor avgPoolBackward(Tensor gradOutput, llvm::ArrayRef<int64_t> inputShape,
                         const PoolWindow &w);
  /// Marks `grad` as parameter `parameter`'s gradient, which a step compiled
  /// for several workers averages across them (kgraph.gradient).
  Tensor gradient(Tensor grad, llvm::StringRef parameter);
  /// Marks `x` as entering (`side` "input") or leaving ("output") the
  /// checkpointed call numbered `call` (kgraph.checkpoint): the values the
  /// call computes from its inputs are recomputed where later ops read them
  /// instead of kept.
  Tensor checkpoint(Tensor x, int64_t call, llvm::StringRef side);

  /// The shape of a tensor of this graph.
  static llvm::ArrayRef<int64_t> shapeOf(Tensor t);

  /// Ends the function and returns the module holding it, or the first error.
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> finish();
  /// finish(), exported to the graph format.
  llvm::Expected<proto::Graph> finishGraph();

private:
  template <typename OpTy>
  mlir::Operation *make(llvm::ArrayRef<Tensor> operands,
                        llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                        llvm::ArrayRef<mlir::Type> resultTypes = {});
  Tensor one(mlir::Operation *op, unsigned index = 0) const;
  mlir::RankedTensorType tensorType(proto::DType dtype,
                                    llvm::ArrayRef<int64_t> shape);
  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value);
  llvm::SmallVector<mlir::NamedAttribute> windowAttrs(const ConvWindow &w);
  llvm::SmallVector<mlir::NamedAttribute> windowAttrs(const PoolWindow &w,
                                                      bool maxPooling);
  void recordError(const llvm::Twine &message);

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp function;
  std::vector<Tensor> outputs;
  std::vector<mlir::DictionaryAttr> outputAttrs;
  std::string firstError;
  bool finished = false;
};

} // namespace kiln

#endif // KILN_COMPILER_BUILDER_GRAPHBUILDER_H
