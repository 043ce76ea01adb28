//===- ToolSupport.h - shared pieces of the kiln subcommands ----*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_TOOLSUPPORT_H
#define KILN_TOOLS_KILN_TOOLSUPPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <string>

namespace kiln::tool {

/// Exit statuses: 2 for bad usage or input, 1 for an internal failure.
enum ExitCode { Success = 0, InternalFailure = 1, BadInput = 2 };

/// Prints "kiln: error: <message>" on one line and returns BadInput.
int reportError(llvm::Error error);

/// Runs `body` with this process's stderr (file descriptor 2) going to memory
/// and returns what was written there; the caller decides whether to pass it
/// on. Where no in-memory file can be made, `body` writes to stderr as usual
/// and the result is empty.
std::string captureStderr(llvm::function_ref<void()> body);

/// Loads a graph from a .kgraph.pb file or from kgraph MLIR text (.mlir).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
loadGraphModule(llvm::StringRef path, mlir::MLIRContext &context);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_TOOLSUPPORT_H
