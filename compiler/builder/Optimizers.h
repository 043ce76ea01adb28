//===- Optimizers.h - optimizer updates written with kgraph ops -*- C++ -*-===//
//
// The update rules of torch.optim.SGD, Adam and AdamW (PyTorch 1.13,
// single-tensor path), as graph ops, so that a training step is one graph:
// forward, backward and update.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_BUILDER_OPTIMIZERS_H
#define KILN_COMPILER_BUILDER_OPTIMIZERS_H

#include "compiler/builder/GraphBuilder.h"

#include <optional>
#include <string>

namespace kiln {

struct OptimizerSpec {
  enum class Kind { SGD, Adam, AdamW };
  Kind kind = Kind::AdamW;
  // SGD.
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // Adam and AdamW.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // All three; AdamW decays the parameter, SGD and Adam add it to the grad.
  double weightDecay = 0.0;

  /// "sgd", "adam" or "adamw".
  static std::optional<Kind> parseKind(llvm::StringRef name);
  /// The optimizer-state tensors one parameter needs, in input order
  /// ("momentum" for SGD with momentum; "m", "v" for Adam and AdamW).
  llvm::SmallVector<std::string, 2> stateNames() const;
};

/// Adds the update of parameter `param` (graph input `name`) given its
/// gradient, which it marks as the parameter's (GraphBuilder::gradient) so
/// that a step compiled for several workers averages it. Declares the
/// parameter's optimizer-state inputs, named
/// "<state>_<name>", and outputs the updated parameter and states, each
/// replacing its input. `lr` and `step` are f32 scalar hyper-parameter inputs;
/// `step` counts from 1.
void addOptimizerUpdate(GraphBuilder &b, const OptimizerSpec &spec,
                        llvm::StringRef name, Tensor param, Tensor grad,
                        Tensor lr, Tensor step);

} // namespace kiln

#endif // KILN_COMPILER_BUILDER_OPTIMIZERS_H
