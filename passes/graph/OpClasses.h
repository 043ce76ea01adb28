//===- OpClasses.h - which kgraph ops the phases treat alike ----*- C++ -*-===//

#ifndef KILN_PASSES_GRAPH_OPCLASSES_H
#define KILN_PASSES_GRAPH_OPCLASSES_H

#include "dialects/kgraph/KGraphDialect.h"

namespace kiln::graph_passes {

/// An op computed element by element over its result shape, its operands
/// broadcasting to it: what the tile phase lowers as one loop nest and what
/// fusion groups. Dropout is one too: its random numbers come from the
/// element's row-major index, and both its results have its input's shape.
inline bool isElementwise(mlir::Operation *op) {
  return llvm::isa<kgraph::EngineElementwiseOp>(op);
}

/// The fusion group `kgraph-fuse-elementwise` put `op` in, if any.
inline std::optional<int64_t> fusionId(mlir::Operation *op) {
  return kgraph::fusionGroupOf(op);
}

} // namespace kiln::graph_passes

#endif // KILN_PASSES_GRAPH_OPCLASSES_H
