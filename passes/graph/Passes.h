//===- Passes.h - the graph phase -------------------------------*- C++ -*-===//

#ifndef KILN_PASSES_GRAPH_PASSES_H
#define KILN_PASSES_GRAPH_PASSES_H

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln::graph_passes {

#define GEN_PASS_DECL
#include "passes/graph/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/graph/Passes.h.inc"

} // namespace kiln::graph_passes

#endif // KILN_PASSES_GRAPH_PASSES_H
