//===- LowerReduce.cpp - reductions over trailing dimensions --------------===//
//
// The layout pass leaves reductions over the trailing dimensions (or turns
// them into matmuls). The kept dimensions go on the partitions, the reduced
// ones along the free axis: one tensor_reduce per free-axis chunk, with the
// partials of several chunks combined by tensor_tensor. Short rows go
// several to a partition, folded by one tensor_reduce over an inner free
// dimension, and the results of many blocks leave in one store.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// Dims [from, to) of a view as at most `most` free dims (outermost
/// first), evenly strided neighbours merged and dims of size 1 dropped; a
/// reduction over all but the channels of an NCHW value reads [N, H * W]
/// per channel, two dims.
std::optional<llvm::SmallVector<FreeDim, 2>>
collapseDims(const HbmView &v, size_t from, size_t to, size_t most) {
  llvm::SmallVector<FreeDim, 2> dims; // innermost first while building
  for (size_t d = to; d-- > from;) {
    if (v.shape[d] == 1) {
      continue;
    }
    if (!dims.empty() &&
        v.strides[d] == dims.back().stride * dims.back().size) {
      dims.back().size *= v.shape[d];
      continue;
    }
    if (dims.size() == most) {
      return std::nullopt;
    }
    dims.push_back(FreeDim{v.strides[d], v.shape[d]});
  }
  std::reverse(dims.begin(), dims.end());
  return dims;
}

/// Dims [from, to) of a view as one (size, stride), if they are evenly
/// strided.
std::optional<std::pair<int64_t, int64_t>>
collapseRange(const HbmView &v, size_t from, size_t to) {
  auto dims = collapseDims(v, from, to, 1);
  if (!dims) {
    return std::nullopt;
  }
  return dims->empty() ? std::make_pair(int64_t(1), int64_t(1))
                       : std::make_pair(dims->front().size,
                                        dims->front().stride);
}

} // namespace

const char *reductionAlu(Operation *op) {
  return llvm::isa<ReduceSumOp>(op)   ? "add"
         : llvm::isa<ReduceMaxOp>(op) ? "max"
                                      : "min";
}

namespace {

/// How many partitions one row of `columns` elements spreads over: the
/// most, from 8 up to 128, that divide it into runs of at least 512
/// columns; 1 when no such split exists (fewer would not pay for the
/// transpose).
int64_t spreadPartitions(int64_t columns) {
  for (int64_t parts = 128; parts >= 8; --parts) {
    if (columns % parts == 0 && columns / parts >= 512) {
      return parts;
    }
  }
  return 1;
}

/// Folds one row of `parts * run` elements, `run` consecutive ones (with
/// stride `colStride`) on each of `parts` partitions, then gathers the
/// partials on one partition with a TensorE transpose for the last fold.
/// On a single partition a fold runs at an element a cycle: a whole-tensor
/// sum (the global gradient norm's squares) took milliseconds.
void reduceSpread(TileBuilder &tb, const HbmView &view, int64_t colStride,
                  int64_t parts, int64_t run, int64_t tileElements,
                  const char *alu, const HbmView &dst) {
  int64_t chunk = std::min(run, tileElements);
  Tile acc;
  for (int64_t c0 = 0; c0 < run; c0 += chunk) {
    int64_t m = std::min(chunk, run - c0);
    Tile in = tb.tile(isa::Memory::Sbuf, view.dtype, parts, m);
    tb.load(in, view, view.offset + c0 * colStride, run * colStride,
            {FreeDim{colStride, m}});
    Tile partial = tb.tile(isa::Memory::Sbuf, isa::DType::F32, parts, 1);
    tb.reduce(partial, in, alu);
    if (c0 == 0) {
      acc = partial;
      continue;
    }
    Tile sum = tb.tile(isa::Memory::Sbuf, isa::DType::F32, parts, 1);
    tb.tensorTensor(sum, acc, partial, alu);
    acc = sum;
  }
  Tile gathered = tb.tile(isa::Memory::Psum, isa::DType::F32, 1, parts);
  tb.transpose(gathered, acc);
  Tile result = tb.tile(isa::Memory::Sbuf, isa::DType::F32, 1, 1);
  tb.reduce(result, gathered, alu);
  tb.store(dst, dst.offset, 1, {FreeDim{1, 1}}, result);
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
  int64_t tileElements = sbufBudget / 16;
  auto rows = collapseRange(view, 0, kept);
  auto cols = collapseRange(view, kept, rank);
  // Reduced elements in two evenly strided runs (a transposed view: batch
  // norm's statistics over [N, H, W] per channel) load as two free dims
  // rather than as a copy of the whole view; a chunk then holds whole
  // inner runs.
  std::optional<FreeDim> outer;
  if (rows && !cols) {
    auto two = collapseDims(view, kept, rank, 2);
    if (two && two->size() == 2 && (*two)[1].size <= tileElements) {
      outer = (*two)[0];
      cols = std::make_pair((*two)[1].size, (*two)[1].stride);
    }
  }
  if (!rows || !cols) {
    view = materialize(operand, inType.getShape());
    rows = collapseRange(view, 0, kept);
    cols = collapseRange(view, kept, rank);
  }
  const char *alu = reductionAlu(op);
  // A contiguous view always collapses.
  auto [rowCount, rowStride] = rows.value_or(std::make_pair(int64_t(1), int64_t(1)));
  auto [runLength, colStride] = cols.value_or(std::make_pair(int64_t(1), int64_t(1)));
  int64_t runs = outer ? outer->size : 1;
  int64_t colCount = runs * runLength;
  int64_t chunk = outer ? (tileElements / runLength) * runLength
                        : std::min(colCount, tileElements);
  chunk = std::min(chunk, colCount);
  // Columns [c0, c0 + m) of a row as free dims from the row's start.
  auto columnDims = [&](int64_t c0, int64_t m) {
    llvm::SmallVector<FreeDim, 2> dims;
    if (outer) {
      dims.push_back(FreeDim{outer->stride, m / runLength});
      dims.push_back(FreeDim{colStride, runLength});
    } else {
      dims.push_back(FreeDim{colStride, m});
    }
    return dims;
  };
  auto columnOffset = [&](int64_t c0) {
    return outer ? (c0 / runLength) * outer->stride : c0 * colStride;
  };
  if (rowCount == 1 && !outer) {
    if (int64_t parts = spreadPartitions(colCount); parts > 1) {
      reduceSpread(tb, view, colStride, parts, colCount / parts,
                   tileElements, alu, dst);
      return success();
    }
  }
  // Short rows (softmax over 128 keys) go several to a partition, so that a
  // load moves ~256 KiB, not one 128-row block: each DMA costs a fixed ~2 us.
  int64_t rowBytes = colCount * isa::dtypeBytes(view.dtype);
  int64_t perPartition =
      colCount > chunk
          ? 1
          : std::clamp<int64_t>((256 << 10) / (128 * rowBytes), 1,
                                std::min<int64_t>(64, tileElements / colCount));
  perPartition = std::max<int64_t>(1, std::min(perPartition, rowCount / 128));
  // Results gather in one tile across blocks and leave in one DMA: one
  // element per row, so a store per block would move 512 bytes for 2 us.
  const int64_t resultColumns = 1024;

  // Reduces `blocks` consecutive blocks of `parts` partitions x `g` rows
  // from row r0 on: partition p of block b holds rows
  // r0 + (b * parts + p) * g + [0, g).
  auto reduceBlocks = [&](int64_t r0, int64_t blocks, int64_t g,
                          int64_t parts) {
    Tile result =
        tb.tile(isa::Memory::Sbuf, isa::DType::F32, parts, blocks * g);
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t first = r0 + b * parts * g;
      Tile acc;
      for (int64_t c0 = 0; c0 < colCount; c0 += chunk) {
        int64_t m = std::min(chunk, colCount - c0);
        bool last = c0 + m >= colCount;
        Tile in = tb.tile(isa::Memory::Sbuf, view.dtype, parts, g * m);
        llvm::SmallVector<FreeDim, 3> free = {FreeDim{rowStride, g}};
        free.append(columnDims(c0, m));
        tb.load(in, view, view.offset + first * rowStride + columnOffset(c0),
                g * rowStride, free);
        Tile into = result.columns(b * g, g);
        Tile partial =
            c0 == 0 && last
                ? into
                : tb.tile(isa::Memory::Sbuf, isa::DType::F32, parts, g);
        tb.reduce(partial, in, alu, m);
        if (c0 == 0) {
          acc = partial;
          continue;
        }
        Tile sum = last ? into
                        : tb.tile(isa::Memory::Sbuf, isa::DType::F32, parts, g);
        tb.tensorTensor(sum, acc, partial, alu);
        acc = sum;
      }
    }
    // Row r0 + (b * parts + p) * g + i is result element (p, b * g + i).
    tb.store(dst, dst.offset + r0, g,
             {FreeDim{parts * g, blocks}, FreeDim{1, g}}, result);
  };

  int64_t blockRows = 128 * perPartition;
  int64_t fullBlocks = rowCount / blockRows;
  int64_t blocksPerStore = std::max<int64_t>(1, resultColumns / perPartition);
  for (int64_t b = 0; b < fullBlocks; b += blocksPerStore) {
    reduceBlocks(b * blockRows, std::min(blocksPerStore, fullBlocks - b),
                 perPartition, 128);
  }
  // What is left: whole 128-row blocks one row per partition, then a
  // partial block.
  int64_t r0 = fullBlocks * blockRows;
  int64_t wholeBlocks = (rowCount - r0) / 128;
  if (wholeBlocks > 0) {
    reduceBlocks(r0, wholeBlocks, 1, 128);
    r0 += wholeBlocks * 128;
  }
  if (r0 < rowCount) {
    reduceBlocks(r0, 1, 1, rowCount - r0);
  }
  return success();
}

} // namespace kiln::tile_passes
