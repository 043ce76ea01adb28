//===- Interpreter.h - the kgraph reference interpreter ---------*- C++ -*-===//
//
// Executes a kgraph function on the CPU. It is the oracle that compiled code
// is checked against, so it favours clarity and accuracy over speed; its
// numerics are documented in docs/reference-interpreter.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_REFERENCE_INTERPRETER_H
#define KILN_COMPILER_REFERENCE_INTERPRETER_H

#include "compiler/reference/HostTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace kiln::reference {

/// Runs `function` on `inputs` (one per argument, in order, with the
/// argument's exact dtype and shape) and returns its results. Errors name the
/// input or the op and its location.
llvm::Expected<std::vector<HostTensor>>
interpret(mlir::func::FuncOp function, llvm::ArrayRef<HostTensor> inputs);

/// A zero-filled host tensor of a kgraph tensor type.
HostTensor zerosOfType(mlir::Type type);

} // namespace kiln::reference

#endif // KILN_COMPILER_REFERENCE_INTERPRETER_H
