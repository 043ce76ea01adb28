//===- DecomposeWindows.h - batch norm, pooling and bias to primitives -*- C++ -*-===//
//
// Private to kgraph-decompose (Decompose.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_GRAPH_DECOMPOSEWINDOWS_H
#define KILN_PASSES_GRAPH_DECOMPOSEWINDOWS_H

#include "passes/graph/GraphEmitter.h"

#include <optional>

namespace kiln::graph_passes {

/// The rewrite of a convolution with a bias (a convolution and an add),
/// batch norm and its backward (reductions over all but the channel dim
/// and elementwise ops), or a pooling op and its backward (strided slices
/// of the padded input, and their transposes); nullopt for other ops.
std::optional<llvm::SmallVector<mlir::Value>>
decomposeWindowOp(GraphEmitter &e, mlir::Operation *op);

} // namespace kiln::graph_passes

#endif // KILN_PASSES_GRAPH_DECOMPOSEWINDOWS_H
