//===- MatmulOperands.cpp - a product's operands loaded K-major -----------===//
//
// TensorE contracts over partitions, so both operands of a product are
// loaded with K on the partitions: the stationary operand as lhs^T [K, M],
// the moving one as rhs [K, N]. An operand whose K dimension is innermost
// in HBM would need element-sized DMA strides for that; it is loaded
// row-major instead and transposed on TensorE through PSUM. A one-hot
// operand is computed from its indices instead of loaded. This file also
// holds what the loads read: an operand's view through the bf16 casts the
// loads perform, and the bf16 copies they store for later products.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/MatmulOperands.h"

#include "passes/tile/Lowering.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

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

} // namespace

Tile loadKMajor(TileBuilder &tb, const KMajor &m, int64_t k0, int64_t kk,
                int64_t x0, int64_t xx, isa::DType dtype) {
  if (m.oneHot) {
    return oneHotSlice(tb, *m.oneHot, k0, kk, x0, xx, dtype);
  }
  Tile out = tb.tile(isa::Memory::Sbuf, dtype, kk, xx);
  int64_t origin = m.offset + k0 * m.kStride + x0 * m.xStride;
  bool kInnermost = m.kInnermost() && kk > 1;
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
  bool kInnermost = m.kInnermost();
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
  bool kInnermost = m.kInnermost() && kk > 1;
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
    TensorOperand operand = operandOf(value.getDefiningOp<CastOp>().getInput());
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

} // namespace kiln::tile_passes
