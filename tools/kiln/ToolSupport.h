//===- ToolSupport.h - shared pieces of the kiln subcommands ----*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_TOOLSUPPORT_H
#define KILN_TOOLS_KILN_TOOLSUPPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace kiln::tool {

/// Exit statuses: 2 for bad usage or input, 1 for an internal failure.
enum ExitCode { Success = 0, InternalFailure = 1, BadInput = 2 };

/// Prints "kiln: error: <message>" on one line and returns BadInput.
int reportError(llvm::Error error);

/// Loads a graph from a .kgraph.pb file or from kgraph MLIR text (.mlir).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
loadGraphModule(llvm::StringRef path, mlir::MLIRContext &context);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_TOOLSUPPORT_H
