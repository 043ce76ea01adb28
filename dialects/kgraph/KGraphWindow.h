//===- KGraphWindow.h - the windows of convolution and pooling ops -*- C++ -*-===//
//
// Each convolution and pooling op's window, read from its attributes (and,
// for a convolution, its weight's spatial dims), for the verifiers, the
// reference interpreter and the lowerings alike.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KGRAPH_KGRAPHWINDOW_H
#define KILN_DIALECTS_KGRAPH_KGRAPHWINDOW_H

#include "dialects/kgraph/KGraphDialect.h"
#include "dialects/kgraph/KGraphShapes.h"

namespace kiln::kgraph {

Window windowOf(ConvOp op);
Window windowOf(ConvInputGradOp op);
Window windowOf(ConvWeightGradOp op);
Window windowOf(MaxPoolOp op);
Window windowOf(MaxPoolBackwardOp op);
Window windowOf(AvgPoolOp op);
Window windowOf(AvgPoolBackwardOp op);

/// What avg_pool divides the sum of the window at output position `at`
/// by (PyTorch's rule): `divisor` when positive; else the taps inside the
/// padded input (`countIncludePad`) or inside the input.
int64_t avgPoolDivisor(const Window &w, llvm::ArrayRef<int64_t> inputSpatial,
                       llvm::ArrayRef<int64_t> at, bool countIncludePad,
                       int64_t divisor);

} // namespace kiln::kgraph

#endif // KILN_DIALECTS_KGRAPH_KGRAPHWINDOW_H
