//===- Interpreter.cpp - the kgraph reference interpreter ----------------===//

#include "compiler/reference/Interpreter.h"

#include "compiler/reference/Kernels.h"
#include "dialects/kgraph/KGraphDialect.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace kiln::reference {

namespace {

std::string argumentName(func::FuncOp function, unsigned index) {
  if (auto name =
          function.getArgAttrOfType<StringAttr>(index, kgraph::kNameAttr)) {
    return "'" + name.str() + "'";
  }
  return "#" + std::to_string(index);
}

} // namespace

llvm::Expected<std::vector<HostTensor>>
interpret(func::FuncOp function, llvm::ArrayRef<HostTensor> inputs) {
  if (!function.getBody().hasOneBlock()) {
    return llvm::createStringError("function '" + function.getSymName() +
                                   "' must have exactly one block");
  }
  Block &body = function.getBody().front();
  if (inputs.size() != body.getNumArguments()) {
    return llvm::createStringError(
        "function '" + function.getSymName() + "' takes " +
        llvm::Twine(body.getNumArguments()) + " inputs, got " +
        llvm::Twine(inputs.size()));
  }

  // Values live until their last use; the count of remaining uses frees them
  // as soon as possible, so large graphs need only their live set in memory.
  llvm::DenseMap<Value, HostTensor> values;
  llvm::DenseMap<Value, unsigned> usesLeft;
  auto countUses = [&](Value v) {
    usesLeft[v] = static_cast<unsigned>(
        std::distance(v.getUses().begin(), v.getUses().end()));
  };
  for (BlockArgument arg : body.getArguments()) {
    HostTensor expected = emptyLike(arg);
    const HostTensor &given = inputs[arg.getArgNumber()];
    if (given.dtype != expected.dtype || given.shape != expected.shape) {
      return llvm::createStringError(
          "input " + argumentName(function, arg.getArgNumber()) + " of '" +
          function.getSymName() + "': expected " + expected.typeString() +
          ", got " + given.typeString());
    }
    values[arg] = given;
    countUses(arg);
  }

  for (Operation &op : body.without_terminator()) {
    llvm::SmallVector<const HostTensor *> operands;
    for (Value operand : op.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end()) {
        return kernelError(&op, "operand defined outside the function body");
      }
      operands.push_back(&it->second);
    }
    KernelResult result = evaluateElementwise(&op, operands);
    if (!result) {
      result = evaluateShapeOp(&op, operands);
    }
    if (!result) {
      result = evaluateMathOp(&op, operands);
    }
    if (!result) {
      result = evaluateWindowOp(&op, operands);
    }
    if (!result) {
      return kernelError(&op, "the reference interpreter has no kernel for "
                              "this op");
    }
    if (!*result) {
      return result->takeError();
    }
    for (auto [value, tensor] : llvm::zip(op.getResults(), **result)) {
      values[value] = std::move(tensor);
      countUses(value);
    }
    for (Value operand : op.getOperands()) {
      if (--usesLeft[operand] == 0) {
        values.erase(operand);
      }
    }
  }

  std::vector<HostTensor> outputs;
  for (Value v : body.getTerminator()->getOperands()) {
    outputs.push_back(values.lookup(v));
  }
  return outputs;
}

} // namespace kiln::reference
