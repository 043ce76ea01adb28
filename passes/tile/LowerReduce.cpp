//===- LowerReduce.cpp - reductions over trailing dimensions --------------===//
//
// The layout pass leaves reductions over the trailing dimensions (or turns
// them into matmuls). The kept dimensions go on the partitions, the reduced
// ones along the free axis: one tensor_reduce per free-axis chunk, with the
// partials of several chunks combined by tensor_tensor.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// Collapses dims [from, to) of a view into one (size, stride), if they are
/// evenly strided.
std::optional<std::pair<int64_t, int64_t>>
collapseRange(const HbmView &v, size_t from, size_t to) {
  int64_t size = 1, stride = 1;
  bool first = true;
  for (size_t d = to; d-- > from;) {
    if (v.shape[d] == 1) {
      continue;
    }
    if (first) {
      size = v.shape[d];
      stride = v.strides[d];
      first = false;
      continue;
    }
    if (v.strides[d] != stride * size) {
      return std::nullopt;
    }
    size *= v.shape[d];
  }
  return std::make_pair(size, stride);
}

} // namespace

LogicalResult Lowering::lowerReduce(Operation *op, const HbmView &dst) {
  Value input = op->getOperand(0);
  auto inType = llvm::cast<RankedTensorType>(input.getType());
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  auto rank = static_cast<size_t>(inType.getRank());
  size_t kept = rank - dims.size();
  for (auto [i, d] : llvm::enumerate(llvm::to_vector(dims))) {
    (void)i;
    if (static_cast<size_t>(d) < kept) {
      return op->emitOpError(
          "reduces a leading dimension; run kgraph-assign-layout first");
    }
  }
  TensorOperand operand = operandOf(input);
  if (operand.immediate || dims.empty()) {
    copyInto(operand, dst);
    return success();
  }
  HbmView view = operand.view;
  auto rows = collapseRange(view, 0, kept);
  auto cols = collapseRange(view, kept, rank);
  if (!rows || !cols) {
    view = materialize(operand, inType.getShape());
    rows = collapseRange(view, 0, kept);
    cols = collapseRange(view, kept, rank);
  }
  const char *alu = llvm::isa<ReduceSumOp>(op)   ? "add"
                    : llvm::isa<ReduceMaxOp>(op) ? "max"
                                                 : "min";
  // A contiguous view always collapses.
  auto [rowCount, rowStride] = rows.value_or(std::make_pair(int64_t(1), int64_t(1)));
  auto [colCount, colStride] = cols.value_or(std::make_pair(int64_t(1), int64_t(1)));
  int64_t chunk = std::min<int64_t>(colCount, sbufBudget / 16);
  for (int64_t p0 = 0; p0 < rowCount; p0 += 128) {
    int64_t n = std::min<int64_t>(128, rowCount - p0);
    Tile acc;
    for (int64_t c0 = 0; c0 < colCount; c0 += chunk) {
      int64_t m = std::min(chunk, colCount - c0);
      Tile in = tb.tile(isa::Memory::Sbuf, view.dtype, n, m);
      tb.load(in, view, view.offset + p0 * rowStride + c0 * colStride,
              rowStride, colStride);
      Tile partial = tb.tile(isa::Memory::Sbuf, isa::DType::F32, n, 1);
      tb.reduce(partial, in, alu);
      if (c0 == 0) {
        acc = partial;
      } else {
        Tile sum = tb.tile(isa::Memory::Sbuf, isa::DType::F32, n, 1);
        tb.tensorTensor(sum, acc, partial, alu);
        acc = sum;
      }
    }
    // Results leave in row order: one element per partition.
    tb.store(dst, dst.offset + p0, 1, 1, acc);
  }
  return success();
}

} // namespace kiln::tile_passes
