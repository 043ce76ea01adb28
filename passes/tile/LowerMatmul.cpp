//===- LowerMatmul.cpp - matmul on TensorE --------------------------------===//
//
// out[M, N] = lhs[M, K] . rhs[K, N] per batch: [<=128 x <=512] output tiles,
// each accumulated over 128-deep K slices in one PSUM bank. TensorE
// contracts over partitions, so both operands are loaded with K on the
// partitions: the stationary operand as lhs^T [K, M], the moving one as
// rhs [K, N]. An operand whose K dimension is innermost in HBM would need
// element-sized DMA strides for that; it is loaded row-major instead and
// transposed on TensorE through PSUM.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// What a matmul keeps to compute the tiles of a one-hot operand [K, X]
/// (Lowering::oneHotIndices) instead of loading them.
struct OneHotTiles {
  HbmView indices; // [K, 1]
  /// Each K slice's indices as f32, one per partition, by first row.
  std::map<int64_t, Tile> slices;
  Tile columns; // f32 [128, cols]: column j holds j
};

/// A 2-D operand [K, X] as it lies in HBM: K on the partitions when loaded.
/// A one-hot operand is computed instead (its view only has the strides of
/// a row-major [K, X]).
struct KMajor {
  HbmView view;
  int64_t offset = 0, kStride = 0, xStride = 0;
  OneHotTiles *oneHot = nullptr;
  /// Where the loads also store what they load (Lowering::startBf16Copy):
  /// the same elements of a bf16 mirror of the view's buffer.
  std::optional<HbmView> copy;
};

/// Rows [k0, k0 + kk), columns [x0, x0 + xx) of a one-hot operand: one
/// tensor_scalar, (j + x0) == indices[k0 + p], on a column iota kept for
/// the whole product. It replaces a DMA of the same tile from a matrix
/// that a loop nest would have had to compute and store first.
Tile oneHotSlice(TileBuilder &tb, OneHotTiles &hot, int64_t k0, int64_t kk,
                 int64_t x0, int64_t xx, isa::DType dtype) {
  Tile &indices = hot.slices[k0];
  if (!indices.buffer) {
    const HbmView &view = hot.indices;
    Tile loaded = tb.tile(isa::Memory::Sbuf, view.dtype, kk, 1);
    tb.load(loaded, view, view.offset + k0 * view.strides[0], view.strides[0],
            1);
    indices = loaded;
    if (loaded.dtype != isa::DType::F32) {
      indices = tb.tile(isa::Memory::Sbuf, isa::DType::F32, kk, 1);
      tb.copy(indices, loaded);
    }
  }
  if (hot.columns.cols < xx) {
    hot.columns = tb.tile(isa::Memory::Sbuf, isa::DType::F32, 128, xx);
    tb.iota(hot.columns, 0, 0, 1);
  }
  Tile out = tb.tile(isa::Memory::Sbuf, dtype, kk, xx);
  tb.tensorScalar(out, hot.columns.withRows(0, kk).columns(0, xx), "add", "eq",
                  indices, /*first=*/false, static_cast<double>(x0));
  return out;
}

/// Loads `tile` from `m`'s view, `rowStride` and `colStride` apart from
/// element `origin`, and stores what it loaded into `m`'s bf16 copy if any.
void loadCopying(TileBuilder &tb, const KMajor &m, const Tile &tile,
                 int64_t origin, int64_t rowStride, int64_t colStride) {
  tb.load(tile, m.view, origin, rowStride, colStride);
  if (m.copy) {
    tb.store(*m.copy, origin, rowStride, colStride, tile);
  }
}

/// Loads rows [k0, k0 + kk) and columns [x0, x0 + xx) of `m` into an SBUF
/// tile [kk, xx] of `dtype`.
Tile loadKMajor(TileBuilder &tb, const KMajor &m, int64_t k0, int64_t kk,
                int64_t x0, int64_t xx, isa::DType dtype) {
  if (m.oneHot) {
    return oneHotSlice(tb, *m.oneHot, k0, kk, x0, xx, dtype);
  }
  Tile out = tb.tile(isa::Memory::Sbuf, dtype, kk, xx);
  int64_t origin = m.offset + k0 * m.kStride + x0 * m.xStride;
  bool kInnermost = m.kStride == 1 && m.xStride != 1 && kk > 1;
  if (!kInnermost) {
    loadCopying(tb, m, out, origin, m.kStride, m.xStride);
    return out;
  }
  // Rows of X are contiguous in K: load [x, k] blocks and transpose them.
  for (int64_t b0 = 0; b0 < xx; b0 += 128) {
    int64_t bb = std::min<int64_t>(128, xx - b0);
    Tile rows = tb.tile(isa::Memory::Sbuf, dtype, bb, kk);
    loadCopying(tb, m, rows, origin + b0 * m.xStride, m.xStride, 1);
    Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32, kk, bb);
    tb.transpose(flipped, rows);
    tb.copy(out.columns(b0, bb), flipped);
  }
  return out;
}

/// The K slices [k0 + 128 j, k0 + 128 (j + 1)), j < count, of columns
/// [x0, x0 + xx) of `m`, each a [128, xx] tile. Where K is innermost in HBM,
/// one DMA loads a 128-column block's rows for all slices, and their
/// transposes share a PSUM bank: a DMA costs a fixed ~2 us on top of its
/// bytes, and a copy ~60 cycles plus one per element on a slower clock than
/// TensorE's, so a DMA and a copy per 128 x 128 block would pace the
/// matmuls. Slices up to 128 columns wide leave PSUM together in one copy;
/// wider ones each fill a bank with a bank's width of blocks.
llvm::SmallVector<Tile, 4> loadKMajorSlices(TileBuilder &tb, const KMajor &m,
                                            int64_t k0, int64_t count,
                                            int64_t x0, int64_t xx,
                                            isa::DType dtype) {
  llvm::SmallVector<Tile, 4> slices;
  bool kInnermost = m.kStride == 1 && m.xStride != 1;
  int64_t bankColumns =
      tb.targetDescription().psumBankBytes / isa::dtypeBytes(isa::DType::F32);
  int64_t block = std::min<int64_t>(128, xx);
  if (!kInnermost || count * block > bankColumns) {
    for (int64_t j = 0; j < count; ++j) {
      slices.push_back(loadKMajor(tb, m, k0 + 128 * j, 128, x0, xx, dtype));
    }
    return slices;
  }
  // Rows [b0, b0 + bb) of the columns, all slices' K along the free axis.
  auto loadRows = [&](int64_t b0, int64_t bb) {
    Tile rows = tb.tile(isa::Memory::Sbuf, dtype, bb, 128 * count);
    loadCopying(tb, m, rows, m.offset + k0 + (x0 + b0) * m.xStride, m.xStride,
                1);
    return rows;
  };
  if (xx <= 128) {
    Tile out = tb.tile(isa::Memory::Sbuf, dtype, 128, count * xx);
    Tile rows = loadRows(0, xx);
    Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32, 128, count * xx);
    for (int64_t j = 0; j < count; ++j) {
      tb.transpose(flipped.columns(j * xx, xx), rows.columns(128 * j, 128));
    }
    tb.copy(out, flipped);
    for (int64_t j = 0; j < count; ++j) {
      slices.push_back(out.columns(j * xx, xx));
    }
    return slices;
  }
  for (int64_t j = 0; j < count; ++j) {
    slices.push_back(tb.tile(isa::Memory::Sbuf, dtype, 128, xx));
  }
  // Wider slices: the blocks of a bank's width of columns are loaded first,
  // then each slice's transposes fill a PSUM bank that leaves in one copy,
  // not a copy per 128 x 128 block (each ~60 cycles of fixed cost on the
  // PSUM port VectorE and ScalarE share, which every product's evacuation
  // also needs).
  for (int64_t c0 = 0; c0 < xx; c0 += bankColumns) {
    int64_t cc = std::min<int64_t>(bankColumns, xx - c0);
    llvm::SmallVector<Tile, 4> rows;
    for (int64_t b0 = c0; b0 < c0 + cc; b0 += 128) {
      rows.push_back(loadRows(b0, std::min<int64_t>(128, c0 + cc - b0)));
    }
    for (int64_t j = 0; j < count; ++j) {
      Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32, 128, cc);
      for (auto [i, r] : llvm::enumerate(rows)) {
        tb.transpose(flipped.columns(static_cast<int64_t>(i) * 128, r.rows),
                     r.columns(128 * j, 128));
      }
      tb.copy(slices[j].columns(c0, cc), flipped);
    }
  }
  return slices;
}

/// Batch elements [0, count) of a one-tile operand [kk, xx], `batchStride`
/// elements apart in HBM, loaded by one DMA into one tile: element g is
/// columns [g xx, (g + 1) xx). Where K is innermost in HBM the rows are
/// loaded and each element transposed into one PSUM bank, which leaves in
/// one copy. A broadcast operand (stride 0) is loaded once and shared.
llvm::SmallVector<Tile, 4> loadBatchGroup(TileBuilder &tb, const KMajor &m,
                                          int64_t batchStride, int64_t count,
                                          int64_t kk, int64_t xx,
                                          isa::DType dtype) {
  if (batchStride == 0) {
    return llvm::SmallVector<Tile, 4>(count,
                                      loadKMajor(tb, m, 0, kk, 0, xx, dtype));
  }
  llvm::SmallVector<Tile, 4> elements;
  bool kInnermost = m.kStride == 1 && m.xStride != 1 && kk > 1;
  if (kInnermost && xx > 128) {
    // Rows that span more than the partitions: one element at a time.
    for (int64_t g = 0; g < count; ++g) {
      KMajor element = m;
      element.offset += g * batchStride;
      elements.push_back(loadKMajor(tb, element, 0, kk, 0, xx, dtype));
    }
    return elements;
  }
  Tile out = tb.tile(isa::Memory::Sbuf, dtype, kk, count * xx);
  if (!kInnermost) {
    tb.load(out, m.view, m.offset, m.kStride,
            {FreeDim{batchStride, count}, FreeDim{m.xStride, xx}});
  } else {
    Tile rows = tb.tile(isa::Memory::Sbuf, dtype, xx, count * kk);
    tb.load(rows, m.view, m.offset, m.xStride,
            {FreeDim{batchStride, count}, FreeDim{1, kk}});
    Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32, kk, count * xx);
    for (int64_t g = 0; g < count; ++g) {
      tb.transpose(flipped.columns(g * xx, xx), rows.columns(g * kk, kk));
    }
    tb.copy(out, flipped);
  }
  for (int64_t g = 0; g < count; ++g) {
    elements.push_back(out.columns(g * xx, xx));
  }
  return elements;
}

} // namespace

int64_t batchElementOffset(int64_t offset, llvm::ArrayRef<int64_t> strides,
                           llvm::ArrayRef<int64_t> batch, int64_t index) {
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    offset += (index % batch[d]) * strides[d];
    index /= batch[d];
  }
  return offset;
}

std::optional<HbmView> Lowering::startBf16Copy(Value cast) {
  auto later = copiedBy.find(cast);
  if (later == copiedBy.end()) {
    return std::nullopt;
  }
  HbmView copy = operandOf(cast.getDefiningOp<CastOp>().getInput()).view;
  auto buffer = llvm::dyn_cast<mlir::BlockArgument>(copy.buffer);
  if (!buffer) {
    return std::nullopt; // the view had to be materialised: not the argument
  }
  copy.buffer = tb.hbm(llvm::cast<MemRefType>(buffer.getType()).getShape(),
                       isa::DType::BF16);
  copy.dtype = isa::DType::BF16;
  for (Value c : later->second) {
    bf16CopyOf[c] = copy.buffer;
  }
  copiedBy.erase(later); // the later products read the copy, not copy again
  return copy;
}

std::pair<TensorOperand, isa::DType> Lowering::matmulOperand(Value value) {
  if (auto copy = bf16CopyOf.find(value); copy != bf16CopyOf.end()) {
    // The argument's buffer mirrored element for element in bf16.
    TensorOperand operand =
        operandOf(value.getDefiningOp<CastOp>().getInput());
    operand.view.buffer = copy->second;
    operand.view.dtype = isa::DType::BF16;
    return {operand, isa::DType::BF16};
  }
  if (auto cast = value.getDefiningOp<CastOp>()) {
    Type to = cast.getOutput().getType().getElementType();
    Type from = cast.getInput().getType().getElementType();
    if (to.isBF16() && from.isF32() && !values.count(value)) {
      return {operandOf(cast.getInput()), isa::DType::BF16};
    }
  }
  TensorOperand operand = operandOf(value);
  return {operand, operand.view.dtype};
}

LogicalResult Lowering::lowerMatmul(MatmulOp op, const HbmView &dst,
                                    Epilogue *epilogue,
                                    llvm::ArrayRef<HbmView> columnSums) {
  // A one-hot operand has no buffer: a row-major view of its shape with
  // none stands for it, and its tiles are computed where they would load.
  OneHotTiles lhsHot, rhsHot;
  auto operandOrOneHot = [&](Value value, OneHotTiles &hot) {
    auto indices = oneHotIndices.find(value);
    if (indices == oneHotIndices.end()) {
      return matmulOperand(value);
    }
    const TensorOperand &ids = operandOf(indices->second);
    hot.indices = ids.immediate
                      ? materialize(ids, llvm::cast<RankedTensorType>(
                                             indices->second.getType())
                                             .getShape())
                      : ids.view;
    auto type = llvm::cast<RankedTensorType>(value.getType());
    TensorOperand operand;
    operand.view.dtype = deviceType(type.getElementType());
    operand.view.shape.assign(type.getShape().begin(), type.getShape().end());
    operand.view.strides = rowMajorStrides(type.getShape());
    return std::make_pair(operand, operand.view.dtype);
  };
  auto [lhsOperand, lhsType] = operandOrOneHot(op.getLhs(), lhsHot);
  auto [rhsOperand, rhsType] = operandOrOneHot(op.getRhs(), rhsHot);
  auto outShape = llvm::cast<RankedTensorType>(op.getType()).getShape();
  size_t rank = outShape.size();
  Shape batch(outShape.begin(), outShape.end() - 2);
  if (((epilogue && !epilogue->rowChain()) || !columnSums.empty()) &&
      !batch.empty()) {
    return op.emitOpError("has an epilogue or column sums but is batched");
  }
  int64_t m = outShape[rank - 2], n = outShape[rank - 1];
  int64_t k = llvm::cast<RankedTensorType>(op.getLhs().getType())
                  .getShape()[op.getTransposeLhs() ? rank - 2 : rank - 1];
  if (lhsOperand.immediate || rhsOperand.immediate) {
    // A splat operand: materialise it (rare: canonicalisation folds most).
    auto lhsShape = llvm::cast<RankedTensorType>(op.getLhs().getType());
    auto rhsShape = llvm::cast<RankedTensorType>(op.getRhs().getType());
    if (lhsOperand.immediate) {
      lhsOperand.view = materialize(lhsOperand, lhsShape.getShape());
      lhsOperand.immediate.reset();
      lhsType = lhsOperand.view.dtype;
    }
    if (rhsOperand.immediate) {
      rhsOperand.view = materialize(rhsOperand, rhsShape.getShape());
      rhsOperand.immediate.reset();
      rhsType = rhsOperand.view.dtype;
    }
  }
  // Operands broadcast over the batch dims of the result.
  auto batched = [&](const HbmView &v) {
    Shape target(batch);
    target.append(v.shape.end() - 2, v.shape.end());
    return v.broadcastTo(target);
  };
  HbmView lhs = batched(lhsOperand.view), rhs = batched(rhsOperand.view);
  // f32 and another type cannot meet in one matmul: widen nothing, narrow
  // the f32 side (the graph asked for at most that precision).
  if ((lhsType == isa::DType::F32) != (rhsType == isa::DType::F32)) {
    lhsType = rhsType = isa::DType::BF16;
  }

  int64_t batchCount = 1;
  for (int64_t d : batch) {
    batchCount *= d;
  }
  isa::DType resultType = deviceType(
      llvm::cast<RankedTensorType>(op.getType()).getElementType());
  // With an epilogue the product has no buffer of its own.
  Shape dstStrides = epilogue ? rowMajorStrides(outShape) : dst.strides;
  int64_t sMo = dstStrides[rank - 2], sNo = dstStrides[rank - 1];
  const int64_t kTile = 128, mTile = 128, nTile = 512;
  // The start of batch element `index` (row-major over `batch`) in a view.
  auto batchBase = [&](const HbmView &v, const Shape &strides, int64_t index) {
    return batchElementOffset(v.offset, strides, batch, index);
  };
  auto stationaryAt = [&](int64_t base) {
    return KMajor{lhs, base,
                  lhs.strides[op.getTransposeLhs() ? rank - 2 : rank - 1],
                  lhs.strides[op.getTransposeLhs() ? rank - 1 : rank - 2],
                  lhsHot.indices.buffer ? &lhsHot : nullptr};
  };
  auto movingAt = [&](int64_t base) {
    return KMajor{rhs, base,
                  rhs.strides[op.getTransposeRhs() ? rank - 1 : rank - 2],
                  rhs.strides[op.getTransposeRhs() ? rank - 2 : rank - 1],
                  rhsHot.indices.buffer ? &rhsHot : nullptr};
  };

  // Many one-tile products (attention's, [128 x 64] per head): consecutive
  // elements of the innermost batch dimension share each DMA, transpose
  // bank, PSUM bank and store. One per element, their fixed ~2 us DMA costs
  // would dwarf the 16-32 KiB each moves.
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
  if (batchCount > 1 && k <= kTile && m <= mTile && n <= bankColumns &&
      batch.back() > 1) {
    int64_t inner = batch.back();
    int64_t group = std::min<int64_t>(
        {4, inner, bankColumns / std::max(m, n)});
    int64_t lhsStep = lhs.strides[batch.size() - 1];
    int64_t rhsStep = rhs.strides[batch.size() - 1];
    int64_t outStep = dstStrides[batch.size() - 1];
    for (int64_t first = 0; first < batchCount; first += inner) {
      for (int64_t g0 = 0; g0 < inner; g0 += group) {
        int64_t count = std::min(group, inner - g0);
        auto stationary = loadBatchGroup(
            tb, stationaryAt(batchBase(lhs, lhs.strides, first + g0)), lhsStep,
            count, k, m, lhsType);
        auto moving = loadBatchGroup(
            tb, movingAt(batchBase(rhs, rhs.strides, first + g0)), rhsStep,
            count, k, n, rhsType);
        Tile acc = tb.tile(isa::Memory::Psum, isa::DType::F32, m, count * n);
        for (int64_t g = 0; g < count; ++g) {
          tb.matmul(acc.columns(g * n, n), stationary[g], moving[g],
                    /*accumulate=*/false);
        }
        if (epilogue) {
          // The products rounded to their type, as the graph has them.
          Tile out = tb.tile(isa::Memory::Sbuf, resultType, m, count * n);
          tb.copy(out, acc);
          if (failed(emitBatchedEpilogue(*epilogue, out, first + g0, count))) {
            return failure();
          }
          continue;
        }
        Tile out = tb.tile(isa::Memory::Sbuf, dst.dtype, m, count * n);
        tb.copy(out, acc);
        tb.store(dst, batchBase(dst, dstStrides, first + g0), sMo,
                 {FreeDim{outStep, count}, FreeDim{sNo, n}}, out);
      }
    }
    return success();
  }

  // An epilogue's reductions gather a result per row, a column per row
  // tile, stored once the last column tile has passed.
  if (epilogue) {
    if (!epilogue->columnSums.empty()) {
      int64_t blocks = (n + 127) / 128;
      epilogue->sums = tb.tile(
          isa::Memory::Psum, isa::DType::F32, std::min<int64_t>(128, n),
          blocks * static_cast<int64_t>(epilogue->columnSums.size()));
      for (LoopColumnSum &c : epilogue->columnSums) {
        c.fused = true;
        isa::DType type = deviceType(
            llvm::cast<RankedTensorType>(c.op->getOperand(1).getType())
                .getElementType());
        Tile &column = epilogue->ones[type];
        if (!column.buffer) {
          column = tb.tile(isa::Memory::Sbuf, type, 128, 1);
          tb.memset(column, 1.0);
        }
      }
    }
    skipOutputsOnlyReducedOnes(epilogue->outputs, epilogue->ops,
                               epilogue->reductions, epilogue->columnSums);
    auto columnPerRowTile = [&] {
      return tb.tile(isa::Memory::Sbuf, isa::DType::F32,
                     std::min<int64_t>(mTile, m), (m + mTile - 1) / mTile);
    };
    for (size_t r = 0; r < epilogue->reductions.size(); ++r) {
      epilogue->gathered.push_back(columnPerRowTile());
    }
    for (size_t r = 0; r < epilogue->rowOutputs.size(); ++r) {
      epilogue->rowGathered.push_back(columnPerRowTile());
    }
  }
  int64_t kTiles = (k + kTile - 1) / kTile;
  int64_t elementBytes = isa::dtypeBytes(lhsType);
  // Column sums: a column of ones moving against each stationary slice,
  // accumulated over K per row tile in one PSUM tile (a column per row tile
  // of the block), rounded to the sums' type and gathered for one store
  // each at the end.
  Tile ones;
  llvm::SmallVector<Tile, 2> sumsGathered;
  if (!columnSums.empty()) {
    ones = tb.tile(isa::Memory::Sbuf, lhsType, kTile, 1);
    tb.memset(ones, 1.0);
    for (const HbmView &sums : columnSums) {
      sumsGathered.push_back(tb.tile(isa::Memory::Sbuf, sums.dtype,
                                     std::min<int64_t>(mTile, m),
                                     (m + mTile - 1) / mTile));
    }
  }
  // Let each moving tile serve a block of up to four row tiles, so that the
  // moving operand is read from HBM once per block, not once per row tile
  // (a 4096^3 matmul moves 300 MB instead of 1.1 GB), and keep the block's
  // stationary tiles for every N tile when they fit. When they do not (a
  // one-hot index_select over a vocabulary, K in the tens of thousands),
  // the block still shares each moving tile and reloads its stationary
  // slices per N tile.
  int64_t perRowTile = kTiles * mTile * elementBytes;
  bool keepStationary = perRowTile <= sbufBudget / 2;
  int64_t mBlock =
      keepStationary ? std::clamp<int64_t>((sbufBudget / 2) / perRowTile, 1, 4)
                     : 4;
  // K slices [kt, kt + 4) of an operand's columns [x0, x0 + xx): the full
  // ones four at a time (one PSUM bank of transposes), a last partial one
  // alone.
  auto groupSize = [&](int64_t kt) {
    int64_t full = k / kTile;
    return kt < full ? std::min<int64_t>(4, full - kt) : 1;
  };
  auto sliceGroup = [&](const KMajor &operand, int64_t kt, int64_t x0,
                        int64_t xx, isa::DType dtype) {
    if (kt < k / kTile) {
      return loadKMajorSlices(tb, operand, kt * kTile, groupSize(kt), x0, xx,
                              dtype);
    }
    return llvm::SmallVector<Tile, 4>{loadKMajor(
        tb, operand, kt * kTile, k - kt * kTile, x0, xx, dtype)};
  };
  // A small moving operand (the output gradient of a weight-gradient
  // product, 1024 x 768) stays in SBUF for every row block, read once rather
  // than once per block.
  int64_t nTiles = (n + nTile - 1) / nTile;
  bool keepMoving = m > mTile * mBlock &&
                    kTiles * n * isa::dtypeBytes(rhsType) <= sbufBudget * 3 / 4;
  // With the moving operand kept, a larger block saves no HBM reads. Two
  // row tiles leave PSUM (seven banks) room for the next N tile's
  // accumulators while this one's leave, which four 512-column ones do not,
  // and the block's rows reach the ops that read them sooner.
  // The stationary operand's loads keep the wider block, though, in whole
  // blocks: a DMA costs a fixed ~2 us on top of its bytes, and a 2-tile
  // block's K slice (256 bf16 columns, 64 KiB) pays it on half the bytes a
  // 4-tile one does.
  int64_t loadBlock = mBlock;
  if (keepMoving) {
    mBlock = std::min<int64_t>(mBlock, 2);
    loadBlock = loadBlock / mBlock * mBlock;
  }
  // An epilogue whose outputs only leave the step (an optimizer update's)
  // takes spans of consecutive N tiles at once: a 768-wide row whole, or as
  // many columns as the budget holds beside the block's products. Each of
  // its loads and stores is then one DMA per span, not per N tile (AdamW
  // moves six per span). One whose outputs later ops read keeps to one N
  // tile, so that its first rows are ready sooner.
  int64_t spanTiles = 1;
  EpilogueFootprint footprint = epilogue && !epilogue->rowChain()
                                    ? epilogueFootprint(*epilogue)
                                    : EpilogueFootprint{};
  if (epilogue && epilogue->rowChain()) {
    spanTiles = nTiles; // a row chain needs its rows whole
  } else if (epilogue && !footprint.outputsReadLater) {
    int64_t perColumn =
        footprint.bytesPerColumn + mBlock * isa::dtypeBytes(resultType);
    int64_t fit = std::max<int64_t>(1, sbufBudget / perColumn / nTile);
    int64_t spans = (nTiles + fit - 1) / fit;
    spanTiles = (nTiles + spans - 1) / spans; // balanced
  }
  std::optional<HbmView> lhsCopy, rhsCopy;
  if (batch.empty()) {
    lhsCopy = startBf16Copy(op.getLhs());
    rhsCopy = startBf16Copy(op.getRhs());
  }
  for (int64_t bIndex = 0; bIndex < batchCount; ++bIndex) {
    int64_t outBase = batchBase(dst, dstStrides, bIndex);
    // lhs^T as [K, M], rhs as [K, N].
    KMajor stationary = stationaryAt(batchBase(lhs, lhs.strides, bIndex));
    KMajor moving = movingAt(batchBase(rhs, rhs.strides, bIndex));
    // A bf16 copy is stored by the first load of each element only.
    stationary.copy = lhsCopy;
    moving.copy = rhsCopy;
    KMajor stationaryAgain = stationary, movingAgain = moving;
    stationaryAgain.copy.reset();
    movingAgain.copy.reset();
    std::vector<llvm::SmallVector<Tile>> keptMoving(keepMoving ? nTiles : 0);
    for (auto [t, slices] : llvm::enumerate(keptMoving)) {
      int64_t n0 = static_cast<int64_t>(t) * nTile;
      while (static_cast<int64_t>(slices.size()) < kTiles) {
        slices.append(sliceGroup(moving, slices.size(), n0,
                                 std::min(nTile, n - n0), rhsType));
      }
    }
    // The stationary K slices loaded for rows [loaded0, loaded0 +
    // loadedRows).
    llvm::SmallVector<Tile> loaded;
    int64_t loaded0 = 0, loadedRows = 0;
    for (int64_t b0 = 0; b0 < m; b0 += mTile * mBlock) {
      llvm::SmallVector<std::pair<int64_t, int64_t>, 4> rowTiles;
      for (int64_t m0 = b0; m0 < std::min(m, b0 + mTile * mBlock);
           m0 += mTile) {
        rowTiles.push_back({m0, std::min(mTile, m - m0)});
      }
      std::vector<llvm::SmallVector<Tile>> kept(rowTiles.size());
      bool stationaryKInnermost =
          stationary.kStride == 1 && stationary.xStride != 1;
      if (keepStationary && !stationaryKInnermost && rowTiles.size() > 1) {
        // M innermost (a weight gradient's transposed activations): one DMA
        // per K slice for the rows of `loadBlock` row tiles, which the
        // blocks among them share; its rows then run 4 x 128 elements
        // instead of 128 (256-byte runs move at half bandwidth).
        if (b0 >= loaded0 + loadedRows) {
          loaded0 = b0;
          loadedRows = std::min(m - b0, mTile * loadBlock);
          loaded.clear();
          for (int64_t kt = 0; kt < kTiles; ++kt) {
            loaded.push_back(loadKMajor(tb, stationary, kt * kTile,
                                        std::min(kTile, k - kt * kTile), b0,
                                        loadedRows, lhsType));
          }
        }
        for (const Tile &block : loaded) {
          for (auto [i, rt] : llvm::enumerate(rowTiles)) {
            kept[i].push_back(block.columns(rt.first - loaded0, rt.second));
          }
        }
      } else if (keepStationary) {
        for (auto [i, rt] : llvm::enumerate(rowTiles)) {
          while (static_cast<int64_t>(kept[i].size()) < kTiles) {
            kept[i].append(sliceGroup(stationary, kept[i].size(), rt.first,
                                      rt.second, lhsType));
          }
        }
      }
      Tile sumsAcc;
      if (!columnSums.empty()) {
        sumsAcc = tb.tile(isa::Memory::Psum, isa::DType::F32,
                          std::min<int64_t>(mTile, m),
                          static_cast<int64_t>(rowTiles.size()));
      }
      // Per row tile, the products of the current epilogue span.
      llvm::SmallVector<Tile, 4> spanProducts(rowTiles.size());
      for (int64_t n0 = 0; n0 < n; n0 += nTile) {
        int64_t nn = std::min(nTile, n - n0);
        int64_t spanStart = n0 / (nTile * spanTiles) * (nTile * spanTiles);
        int64_t spanCols = std::min(nTile * spanTiles, n - spanStart);
        llvm::SmallVector<Tile, 4> accs;
        for (auto &rt : rowTiles) {
          accs.push_back(
              tb.tile(isa::Memory::Psum, isa::DType::F32, rt.second, nn));
        }
        for (int64_t kt = 0; kt < kTiles;) {
          llvm::SmallVector<Tile, 4> movingSlices;
          if (keepMoving) {
            auto &all = keptMoving[n0 / nTile];
            movingSlices.assign(all.begin() + kt,
                                all.begin() + kt + groupSize(kt));
          } else {
            movingSlices =
                sliceGroup(b0 == 0 ? moving : movingAgain, kt, n0, nn, rhsType);
          }
          for (auto [i, rt] : llvm::enumerate(rowTiles)) {
            llvm::SmallVector<Tile, 4> stationarySlices =
                keepStationary
                    ? llvm::SmallVector<Tile, 4>(
                          kept[i].begin() + kt,
                          kept[i].begin() + kt + movingSlices.size())
                    : sliceGroup(n0 == 0 ? stationary : stationaryAgain, kt,
                                 rt.first, rt.second, lhsType);
            for (auto [j, v] : llvm::enumerate(movingSlices)) {
              tb.matmul(accs[i], stationarySlices[j], v,
                        /*accumulate=*/kt + static_cast<int64_t>(j) > 0);
            }
            for (auto [j, s] : llvm::enumerate(stationarySlices)) {
              if (n0 == 0 && !columnSums.empty()) {
                tb.matmul(sumsAcc.columns(static_cast<int64_t>(i), 1)
                              .withRows(0, rt.second),
                          s, ones.withRows(0, s.rows),
                          /*accumulate=*/kt + static_cast<int64_t>(j) > 0);
              }
            }
          }
          kt += static_cast<int64_t>(movingSlices.size());
        }
        for (auto [i, rt] : llvm::enumerate(rowTiles)) {
          for (const Tile &gathered : sumsGathered) {
            if (n0 == 0) {
              tb.copy(
                  gathered.columns(rt.first / mTile, 1).withRows(0, rt.second),
                  sumsAcc.columns(static_cast<int64_t>(i), 1)
                      .withRows(0, rt.second));
            }
          }
          if (epilogue) {
            // The product rounded to its type, as the graph has it, then
            // the group on the span in SBUF once its last tile is in.
            Tile &out = spanProducts[i];
            if (n0 == spanStart) {
              out = tb.tile(isa::Memory::Sbuf, resultType, rt.second,
                            spanCols);
            }
            tb.copy(out.columns(n0 - spanStart, nn), accs[i]);
            if (n0 + nn == spanStart + spanCols &&
                failed(emitEpilogue(*epilogue, out, rt.first, spanStart, n))) {
              return failure();
            }
            continue;
          }
          Tile out = tb.tile(isa::Memory::Sbuf, dst.dtype, rt.second, nn);
          tb.copy(out, accs[i]);
          tb.store(dst, outBase + rt.first * sMo + n0 * sNo, sMo, sNo, out);
        }
      }
    }
  }
  for (auto [sums, gathered] : llvm::zip(columnSums, sumsGathered)) {
    storeGathered(tb, sums, sums.offset, sums.strides.back(), m, gathered);
  }
  if (epilogue) {
    int64_t blocks = (n + 127) / 128;
    for (auto [k, c] : llvm::enumerate(epilogue->columnSums)) {
      // Rounded to the sum's type as the product's evacuation would.
      Tile out = tb.tile(isa::Memory::Sbuf, c.dst.dtype,
                         std::min<int64_t>(128, n), blocks);
      tb.copy(out, epilogue->sums.columns(static_cast<int64_t>(k) * blocks,
                                          blocks));
      storeGathered(tb, c.dst, c.dst.offset, 1, n, out);
    }
    for (auto [r, reduction] : llvm::enumerate(epilogue->reductions)) {
      storeGathered(tb, reduction.dst, reduction.dst.offset, 1, m,
                    epilogue->gathered[r]);
    }
    for (auto [r, out] : llvm::enumerate(epilogue->rowOutputs)) {
      std::optional<HbmView> rows = asRows(out.dst);
      if (!rows) {
        return op.emitOpError("has an epilogue row value whose buffer is not "
                              "one element per row");
      }
      storeGathered(tb, *rows, rows->offset, rows->strides[0], m,
                    epilogue->rowGathered[r]);
    }
  }
  return success();
}

} // namespace kiln::tile_passes
