//===- GraphConversion.h - .kgraph.pb <-> kgraph MLIR -----------*- C++ -*-===//

#ifndef KILN_COMPILER_GRAPH_GRAPHCONVERSION_H
#define KILN_COMPILER_GRAPH_GRAPHCONVERSION_H

#include "compiler/graph/kgraph.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace kiln::graph {

/// Imports a graph into a new module holding one func.func named after the
/// graph, with its roles as argument and result attributes. Every node is
/// verified as it is created; the first problem comes back as a one-line
/// error naming the graph, the node index and its op.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importGraph(const proto::Graph &graph, mlir::MLIRContext &context);

/// Exports a training-step function. Only kgraph ops can be exported.
llvm::Expected<proto::Graph> exportGraph(mlir::func::FuncOp function);

/// The training-step function of a module: its single func.func.
llvm::Expected<mlir::func::FuncOp> getStepFunction(mlir::ModuleOp module);

/// Creates the op `state` describes at the builder's insertion point and
/// verifies it. On failure the op is erased and the verifier's first message
/// is returned, so callers can report it as one line of their own.
llvm::Expected<mlir::Operation *>
createVerified(mlir::OpBuilder &builder, const mlir::OperationState &state);

/// A location as people read it in a one-line error: "file:line:col",
/// "'name' (file:line:col)" for named nodes, or "unknown location".
std::string formatLocation(mlir::Location loc);

/// MLIR element type <-> graph dtype.
mlir::Type elementTypeOf(proto::DType dtype, mlir::MLIRContext &context);
proto::DType dtypeOf(mlir::Type elementType);

} // namespace kiln::graph

#endif // KILN_COMPILER_GRAPH_GRAPHCONVERSION_H
