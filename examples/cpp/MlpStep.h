//===- MlpStep.h - a 2-layer MLP training step built in C++ -----*- C++ -*-===//
//
// The full step — forward, cross-entropy, backward and AdamW update — written
// with GraphBuilder, as a C++ user of Kiln would. PyTorch's AdamW semantics
// (decoupled weight decay, bias correction) are reproduced exactly so the
// step can be checked against torch.optim.AdamW.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_CPP_MLPSTEP_H
#define KILN_EXAMPLES_CPP_MLPSTEP_H

#include "compiler/builder/Optimizers.h"
#include "compiler/graph/kgraph.pb.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

namespace kiln::examples {

struct MlpConfig {
  int64_t batch = 64;
  int64_t features = 784;
  int64_t hidden = 128;
  int64_t classes = 10;
  OptimizerSpec optimizer = [] {
    OptimizerSpec spec;
    spec.weightDecay = 0.01;
    return spec;
  }();
};

/// Inputs, in order: x [B, F], y [B] (i64), w1 [H, F], b1 [H], w2 [C, H],
/// b2 [C], the hyper-parameters lr and step (f32 scalars; step counts from
/// 1), then the optimizer state of each parameter (<state>_<p>).
/// Outputs: loss, correct (count of right predictions), the updated
/// parameters and optimizer state.
llvm::Expected<proto::Graph> buildMlpTrainStep(mlir::MLIRContext &context,
                                               const MlpConfig &config);

/// Forward only: x, w1, b1, w2, b2 -> predicted class [B] (i64).
llvm::Expected<proto::Graph> buildMlpPredict(mlir::MLIRContext &context,
                                             const MlpConfig &config);

} // namespace kiln::examples

#endif // KILN_EXAMPLES_CPP_MLPSTEP_H
