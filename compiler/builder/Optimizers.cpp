//===- Optimizers.cpp - optimizer updates written with kgraph ops --------===//

#include "compiler/builder/Optimizers.h"

#include "llvm/ADT/StringSwitch.h"

namespace kiln {

std::optional<OptimizerSpec::Kind>
OptimizerSpec::parseKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Kind>>(name)
      .Case("sgd", Kind::SGD)
      .Case("adam", Kind::Adam)
      .Case("adamw", Kind::AdamW)
      .Default(std::nullopt);
}

llvm::SmallVector<std::string, 2> OptimizerSpec::stateNames() const {
  if (kind == Kind::SGD) {
    if (momentum == 0.0) {
      return {};
    }
    return {"momentum"};
  }
  return {"m", "v"};
}

namespace {

void sgd(GraphBuilder &b, const OptimizerSpec &s, llvm::StringRef name,
         Tensor param, Tensor grad, Tensor lr, Tensor step) {
  llvm::ArrayRef<int64_t> shape = GraphBuilder::shapeOf(param);
  Tensor d = grad;
  if (s.weightDecay != 0.0) {
    d = b.add(d, b.mul(param, b.scalar(s.weightDecay)));
  }
  if (s.momentum != 0.0) {
    std::string stateName = ("momentum_" + name).str();
    Tensor buf = b.input(stateName, proto::F32, shape, proto::OPTIMIZER_STATE);
    // PyTorch starts the buffer as a copy of the first gradient, not as a
    // damped update of zeros; the two differ when dampening is non-zero.
    // One op per statement: the order of a call's arguments is
    // unspecified, and the graph (and its cache key) must not depend on the
    // compiler that built Kiln.
    Tensor kept = b.mul(buf, b.scalar(s.momentum));
    Tensor added = b.mul(d, b.scalar(1.0 - s.dampening));
    Tensor damped = b.add(kept, added);
    Tensor first = b.compare("eq", step, b.scalar(1.0));
    Tensor updatedBuf = b.select(first, d, damped);
    b.output(stateName, updatedBuf, proto::UPDATED_STATE, buf);
    d = s.nesterov ? b.add(d, b.mul(updatedBuf, b.scalar(s.momentum)))
                   : updatedBuf;
  }
  b.output(name, b.sub(param, b.mul(lr, d)), proto::UPDATED_PARAMETER, param);
}

void adam(GraphBuilder &b, const OptimizerSpec &s, llvm::StringRef name,
          Tensor param, Tensor grad, Tensor lr, Tensor step) {
  llvm::ArrayRef<int64_t> shape = GraphBuilder::shapeOf(param);
  std::string mName = ("m_" + name).str(), vName = ("v_" + name).str();
  Tensor m = b.input(mName, proto::F32, shape, proto::OPTIMIZER_STATE);
  Tensor v = b.input(vName, proto::F32, shape, proto::OPTIMIZER_STATE);
  Tensor one = b.scalar(1.0);
  Tensor original = param;
  bool decoupled = s.kind == OptimizerSpec::Kind::AdamW;
  if (s.weightDecay != 0.0 && decoupled) {
    param = b.mul(param, b.sub(one, b.mul(lr, b.scalar(s.weightDecay))));
  } else if (s.weightDecay != 0.0) {
    grad = b.add(grad, b.mul(param, b.scalar(s.weightDecay)));
  }
  // One op per statement, as above.
  Tensor mKept = b.mul(m, b.scalar(s.beta1));
  Tensor mAdded = b.mul(grad, b.scalar(1.0 - s.beta1));
  Tensor m2 = b.add(mKept, mAdded);
  Tensor vKept = b.mul(v, b.scalar(s.beta2));
  Tensor squares = b.mul(grad, grad);
  Tensor vAdded = b.mul(squares, b.scalar(1.0 - s.beta2));
  Tensor v2 = b.add(vKept, vAdded);
  Tensor correction1 = b.sub(one, b.pow(b.scalar(s.beta1), step));
  Tensor correction2 = b.sub(one, b.pow(b.scalar(s.beta2), step));
  Tensor stepSize = b.div(lr, correction1);
  Tensor root = b.sqrt(v2);
  Tensor rootCorrection = b.sqrt(correction2);
  Tensor ratio = b.div(root, rootCorrection);
  Tensor denom = b.add(ratio, b.scalar(s.epsilon));
  Tensor updated = b.sub(param, b.mul(stepSize, b.div(m2, denom)));
  b.output(name, updated, proto::UPDATED_PARAMETER, original);
  b.output(mName, m2, proto::UPDATED_STATE, m);
  b.output(vName, v2, proto::UPDATED_STATE, v);
}

} // namespace

void addOptimizerUpdate(GraphBuilder &b, const OptimizerSpec &spec,
                        llvm::StringRef name, Tensor param, Tensor grad,
                        Tensor lr, Tensor step) {
  // Where a data-parallel step averages the gradient across its workers.
  grad = b.gradient(grad, name);
  if (spec.kind == OptimizerSpec::Kind::SGD) {
    sgd(b, spec, name, param, grad, lr, step);
  } else {
    adam(b, spec, name, param, grad, lr, step);
  }
}

} // namespace kiln
