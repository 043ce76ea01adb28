//===- LowerEmbedding.cpp - embedding rows by gather and scatter DMAs ----===//
//
// out[n, :] = weight[indices[n], :]. Each block of 128 tokens loads its
// indices (one per partition) and one dma_gather per column chunk fetches
// the rows they pick, which leave in one store. Decomposed instead into a
// one-hot matrix times the table, BERT's 30522-row lookup read the table
// (94 MB) more than once and spent 48 GFLOP on TensorE for 3 MB of rows;
// and an index out of range matched no row and gave zeros, where the
// gather stops the program with an error naming the index. A row scatter
// is the inverse: each block's rows load and one dma_scatter per column
// chunk writes them where their indices point.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// Visits an indexed transfer's blocks: `tokens` ids, 128 a block, one per
/// partition (loaded from `flat`, or all `constant`), and each block's
/// column chunks, at most half the SBUF budget wide: fn(ids, n0, nn, c0, cc).
template <typename Fn>
void forEachIdBlock(TileBuilder &tb, const std::optional<HbmView> &flat,
                    std::optional<double> constant, int64_t tokens,
                    int64_t width, int64_t chunkBytes, isa::DType dtype,
                    Fn fn) {
  int64_t chunk = std::min(
      width, std::max<int64_t>(64, chunkBytes / isa::dtypeBytes(dtype)));
  for (int64_t n0 = 0; n0 < tokens; n0 += 128) {
    int64_t nn = std::min<int64_t>(128, tokens - n0);
    Tile ids = tb.tile(isa::Memory::Sbuf, isa::DType::I32, nn, 1);
    if (flat) {
      tb.load(ids, *flat, flat->offset + n0, /*rowStride=*/1, /*colStride=*/1);
    } else {
      tb.memset(ids, *constant);
    }
    for (int64_t c0 = 0; c0 < width; c0 += chunk) {
      fn(ids, n0, nn, c0, std::min(chunk, width - c0));
    }
  }
}

/// `value` as a contiguous HBM view, or nothing for a splat (an immediate).
std::optional<HbmView> viewUnlessSplat(Lowering &lowering, Value value) {
  const TensorOperand &operand = lowering.operandOf(value);
  if (operand.immediate) {
    return std::nullopt;
  }
  return lowering.materialize(
      operand, llvm::cast<RankedTensorType>(value.getType()).getShape());
}

} // namespace

LogicalResult Lowering::lowerEmbedding(EmbeddingOp op, const HbmView &dst) {
  auto weightShape = op.getWeight().getType().getShape();
  int64_t rows = weightShape[0], width = weightShape[1];
  int64_t tokens = op.getIndices().getType().getNumElements();
  TensorOperand weight = operandOf(op.getWeight());
  if (weight.immediate) {
    weight.view = materialize(weight, weightShape);
    weight.immediate.reset();
  }
  const HbmView &table = weight.view;
  std::optional<HbmView> flat = viewUnlessSplat(*this, op.getIndices());
  std::optional<double> sameIndex = operandOf(op.getIndices()).immediate;
  int64_t rowStride = table.strides[0], colStride = table.strides[1];
  forEachIdBlock(
      tb, flat, sameIndex, tokens, width, sbufBudget / 2, dst.dtype,
      [&](const Tile &ids, int64_t n0, int64_t nn, int64_t c0, int64_t cc) {
        Tile picked = tb.tile(isa::Memory::Sbuf, dst.dtype, nn, cc);
        tb.gather(picked, table, table.offset + c0 * colStride,
                  {FreeDim{colStride, cc}}, ids, rowStride, rows);
        tb.store(dst, dst.offset + n0 * width + c0, width, 1, picked);
      });
  return success();
}

LogicalResult Lowering::lowerScatterRows(ScatterRowsOp op, const HbmView &dst) {
  int64_t rows = dst.shape[0], width = dst.shape[1];
  int64_t tokens = op.getIndices().getType().getNumElements();
  std::optional<HbmView> flat = viewUnlessSplat(*this, op.getIndices());
  std::optional<double> sameIndex = operandOf(op.getIndices()).immediate;
  std::optional<HbmView> picked = viewUnlessSplat(*this, op.getRows());
  std::optional<double> sameRow = operandOf(op.getRows()).immediate;
  int64_t rowStride = dst.strides[0], colStride = dst.strides[1];
  forEachIdBlock(
      tb, flat, sameIndex, tokens, width, sbufBudget / 2, dst.dtype,
      [&](const Tile &ids, int64_t n0, int64_t nn, int64_t c0, int64_t cc) {
        Tile values = tb.tile(isa::Memory::Sbuf, dst.dtype, nn, cc);
        if (picked) {
          tb.load(values, *picked, picked->offset + n0 * width + c0, width, 1);
        } else {
          tb.memset(values, *sameRow);
        }
        tb.scatter(dst, dst.offset + c0 * colStride, {FreeDim{colStride, cc}},
                   values, ids, rowStride, rows);
      });
  return success();
}

} // namespace kiln::tile_passes

using namespace kiln::tile_passes;

/// The rows an embedding picks, gathered into a fresh buffer.
LogicalResult FunctionLowering::lowerEmbeddingOp(EmbeddingOp e) {
  HbmView dst = freshBuffer(e.getOutput());
  if (failed(lowering.lowerEmbedding(e, dst))) {
    return failure();
  }
  bindView(e.getOutput(), dst);
  return success();
}

LogicalResult FunctionLowering::lowerScatterOp(ScatterRowsOp scatter) {
  // Over the input's buffer when the input was written for this
  // scatter alone (into the argument the result aliases, as
  // planScatterInPlace planned, or into a buffer of its own);
  // otherwise over a copy of it.
  Value input = scatter.getInput();
  TensorOperand before = lowering.operandOf(input);
  HbmView dst;
  auto planned = inPlace.find(scatter.getOutput());
  bool overInput =
      !before.immediate &&
      (planned != inPlace.end()
           ? inPlace.count(input) &&
                 inPlace.lookup(input) == planned->second
           : input.hasOneUse() && before.view.isContiguous() &&
                 before.view.offset == 0 &&
                 before.view.elements() ==
                     llvm::cast<MemRefType>(before.view.buffer.getType())
                         .getNumElements() &&
                 !llvm::isa<BlockArgument>(before.view.buffer));
  if (overInput) {
    dst = before.view;
  } else {
    dst = freshBuffer(scatter.getOutput());
    lowering.copyInto(before, dst);
  }
  if (failed(lowering.lowerScatterRows(scatter, dst))) {
    return failure();
  }
  bindView(scatter.getOutput(), dst);
  return success();
}
