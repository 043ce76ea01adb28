//===- RandomGraphs.h - seeded random kgraph programs -----------*- C++ -*-===//

#ifndef KILN_TEST_COMPILER_DRIVER_RANDOMGRAPHS_H
#define KILN_TEST_COMPILER_DRIVER_RANDOMGRAPHS_H

#include "compiler/graph/kgraph.pb.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

namespace kiln::testing {

/// A graph of 4 to 12 ops drawn from elementwise, broadcasting, reduction,
/// matmul, transpose, softmax and layer-norm ops over 2-D tensors whose
/// sizes include 1, 127, 128, 129 and 1000. Values stay finite for inputs
/// in [-1, 1]. The same seed gives the same graph. With `gradients`, the
/// graph also updates one to five parameters as a training step does, each
/// with a value of the graph (a reduction before its broadcast included)
/// marked as its gradient (kgraph.gradient), which a data-parallel compile
/// buckets and all-reduces; the rest of the graph is the one without.
llvm::Expected<proto::Graph> randomGraph(mlir::MLIRContext &context,
                                         uint64_t seed,
                                         bool gradients = false);

} // namespace kiln::testing

#endif // KILN_TEST_COMPILER_DRIVER_RANDOMGRAPHS_H
