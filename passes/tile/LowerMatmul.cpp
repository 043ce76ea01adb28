//===- LowerMatmul.cpp - matmul on TensorE --------------------------------===//
//
// out[M, N] = lhs[M, K] . rhs[K, N] per batch: [<=128 x <=512] output tiles,
// each accumulated over 128-deep K slices in one PSUM bank, both operands
// loaded with K on the partitions (MatmulOperands.cpp). This file holds
// the tiling: how row tiles share moving tiles and keep stationary ones,
// the PSUM accumulation, and each output tile's evacuation into a store or
// an epilogue, with the stationary operand's column sums beside.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"
#include "passes/tile/MatmulOperands.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

constexpr int64_t kTile = 128, mTile = 128, nTile = 512;

/// One batch element's operands as its row blocks load them.
struct ElementOperands {
  int64_t index = 0; // row-major over the batch dims
  int64_t outBase = 0;
  /// lhs^T as [K, M], rhs as [K, N]. A bf16 copy is stored by the first
  /// load of each element only: the `again` forms load without storing.
  KMajor stationary, moving, stationaryAgain, movingAgain;
  /// Per N tile, the moving operand's K slices, when it stays in SBUF.
  std::vector<llvm::SmallVector<Tile>> keptMoving;
  /// A moving operand that only TensorE transposes bring K-major (a
  /// weight stored [N, K]) and that several row blocks read: the first
  /// block's transposed slices are stored here, [K, N] row-major, and the
  /// later blocks load them as they are instead of transposing again.
  /// (The stationary operand, when its slices do not stay, is reloaded per
  /// N tile; a copy of it models slower: its slices are [K, 128] pieces,
  /// each store and load a transfer of its own.)
  std::optional<KMajor> movingTransposed;
  /// Whether movingTransposed holds the operand already (an earlier batch
  /// element's, where the batch dims broadcast it), so that no block loads
  /// the operand itself.
  bool movingCopied = false;
  /// The stationary K slices loaded for rows [loaded0, loaded0 +
  /// loadedRows).
  llvm::SmallVector<Tile> loaded;
  int64_t loaded0 = 0, loadedRows = 0;
};

/// Up to four row tiles that share each moving tile.
struct RowBlock {
  int64_t b0 = 0; // the first row
  /// (first row, rows) per row tile.
  llvm::SmallVector<std::pair<int64_t, int64_t>, 4> rowTiles;
  /// Per row tile, its stationary K slices when kept for every N tile.
  std::vector<llvm::SmallVector<Tile>> kept;
  Tile sumsAcc; // PSUM, the column sums: a column per row tile
  /// Per row tile, the products of the current epilogue span.
  llvm::SmallVector<Tile, 4> spanProducts;
};

/// The lowering of one matmul: its operands and shape, fixed first, then
/// the tiling that the steps below share.
class MatmulLowering {
public:
  MatmulLowering(Lowering &lowering, MatmulOp op, const HbmView &dst,
                 Epilogue *epilogue, llvm::ArrayRef<HbmView> columnSums);

  LogicalResult prepareOperands();
  bool isBatchOfOneTiles() const;
  LogicalResult lowerBatchOfOneTiles();
  LogicalResult lowerTiled();

private:
  std::pair<TensorOperand, isa::DType> operandOrOneHot(Value value,
                                                       OneHotTiles &hot);
  HbmView batchedView(TensorOperand operand, isa::DType &type, Value value);
  /// The start of batch element `index` (row-major over `batch`) in a view.
  int64_t batchBase(const HbmView &v, const Shape &strides,
                    int64_t index) const {
    return batchElementOffset(v.offset, strides, batch, index);
  }
  KMajor stationaryAt(int64_t base);
  KMajor movingAt(int64_t base);

  void startEpilogue();
  void startColumnSums();
  void chooseBlocking();
  void chooseEpilogueSpan();
  int64_t groupSize(int64_t kt) const;
  static bool needsTransposes(const KMajor &operand);
  KMajor kMajorCopy(int64_t columns, isa::DType dtype);
  void storeSlices(const KMajor &copy, int64_t kt, int64_t x0,
                   llvm::ArrayRef<Tile> slices);
  llvm::SmallVector<Tile, 4> sliceGroup(const KMajor &operand, int64_t kt,
                                        int64_t x0, int64_t xx,
                                        isa::DType dtype);
  ElementOperands elementOperands(int64_t bIndex,
                                  const std::optional<HbmView> &lhsCopy,
                                  const std::optional<HbmView> &rhsCopy);
  LogicalResult lowerRowBlock(ElementOperands &element, int64_t b0);
  void keepStationarySlices(ElementOperands &element, RowBlock &block);
  llvm::SmallVector<Tile, 4> accumulate(const ElementOperands &element,
                                        RowBlock &block, int64_t n0,
                                        int64_t nn);
  LogicalResult evacuate(const ElementOperands &element, RowBlock &block,
                         int64_t n0, int64_t nn, llvm::ArrayRef<Tile> accs);
  LogicalResult storeGatheredResults();

  Lowering &l;
  TileBuilder &tb;
  MatmulOp op;
  const HbmView &dst;
  Epilogue *epilogue;
  llvm::ArrayRef<HbmView> columnSums;

  // The product's shape.
  llvm::ArrayRef<int64_t> outShape;
  size_t rank;
  Shape batch;
  int64_t batchCount = 1;
  int64_t m, n, k;
  isa::DType resultType;
  Shape dstStrides;
  int64_t sMo, sNo; // dst's row and column strides
  int64_t kTiles, nTiles;

  // The operands, broadcast over the batch dims of the result.
  OneHotTiles lhsHot, rhsHot;
  HbmView lhs, rhs;
  isa::DType lhsType, rhsType; // as loaded

  // The tiling (see chooseBlocking, chooseEpilogueSpan).
  bool keepStationary = false, keepMoving = false;
  /// The K-major copy of the moving operand last stored, by the element
  /// offset of the operand it copies (one per weight a batch broadcasts).
  std::optional<std::pair<int64_t, KMajor>> lastMovingCopy;
  int64_t mBlock = 4, loadBlock = 4, spanTiles = 1;
  // Column sums: a column of ones moving against each stationary slice.
  Tile ones;
  llvm::SmallVector<Tile, 2> sumsGathered;
};

MatmulLowering::MatmulLowering(Lowering &lowering, MatmulOp op,
                               const HbmView &dst, Epilogue *epilogue,
                               llvm::ArrayRef<HbmView> columnSums)
    : l(lowering), tb(lowering.tb), op(op), dst(dst), epilogue(epilogue),
      columnSums(columnSums) {
  auto outType = llvm::cast<RankedTensorType>(op.getType());
  outShape = outType.getShape();
  rank = outShape.size();
  batch.assign(outShape.begin(), outShape.end() - 2);
  for (int64_t d : batch) {
    batchCount *= d;
  }
  m = outShape[rank - 2];
  n = outShape[rank - 1];
  k = llvm::cast<RankedTensorType>(op.getLhs().getType())
          .getShape()[op.getTransposeLhs() ? rank - 2 : rank - 1];
  resultType = deviceType(outType.getElementType());
  // With an epilogue the product has no buffer of its own.
  dstStrides = epilogue ? rowMajorStrides(outShape) : dst.strides;
  sMo = dstStrides[rank - 2];
  sNo = dstStrides[rank - 1];
  kTiles = (k + kTile - 1) / kTile;
  nTiles = (n + nTile - 1) / nTile;
}

/// A one-hot operand has no buffer: a row-major view of its shape with
/// none stands for it, and its tiles are computed where they would load.
std::pair<TensorOperand, isa::DType>
MatmulLowering::operandOrOneHot(Value value, OneHotTiles &hot) {
  auto indices = l.oneHotIndices.find(value);
  if (indices == l.oneHotIndices.end()) {
    return l.matmulOperand(value);
  }
  const TensorOperand &ids = l.operandOf(indices->second);
  hot.indices = ids.immediate
                    ? l.materialize(ids, llvm::cast<RankedTensorType>(
                                             indices->second.getType())
                                             .getShape())
                    : ids.view;
  auto type = llvm::cast<RankedTensorType>(value.getType());
  TensorOperand operand;
  operand.view.dtype = deviceType(type.getElementType());
  operand.view.shape.assign(type.getShape().begin(), type.getShape().end());
  operand.view.strides = rowMajorStrides(type.getShape());
  return std::make_pair(operand, operand.view.dtype);
}

/// `operand` of `value` broadcast over the batch dims of the result; a
/// splat materialised (rare: canonicalisation folds most), `type` then
/// its buffer's.
HbmView MatmulLowering::batchedView(TensorOperand operand, isa::DType &type,
                                    Value value) {
  if (operand.immediate) {
    operand.view = l.materialize(
        operand, llvm::cast<RankedTensorType>(value.getType()).getShape());
    type = operand.view.dtype;
  }
  Shape target(batch);
  target.append(operand.view.shape.end() - 2, operand.view.shape.end());
  return operand.view.broadcastTo(target);
}

LogicalResult MatmulLowering::prepareOperands() {
  auto [lhsOperand, lhsLoad] = operandOrOneHot(op.getLhs(), lhsHot);
  auto [rhsOperand, rhsLoad] = operandOrOneHot(op.getRhs(), rhsHot);
  if (((epilogue && !epilogue->rowChain()) || !columnSums.empty()) &&
      !batch.empty()) {
    return op.emitOpError("has an epilogue or column sums but is batched");
  }
  // A row chain on the whole rows of batch elements gathers its row values
  // by row tile of [elements x M, N].
  if (epilogue && !batch.empty() && !isBatchOfOneTiles() &&
      (m % mTile != 0 || !epilogue->columnSums.empty())) {
    return op.emitOpError("has a row chain epilogue on batch elements of ")
           << m << " rows, not whole row tiles, or with column sums";
  }
  lhsType = lhsLoad;
  rhsType = rhsLoad;
  lhs = batchedView(lhsOperand, lhsType, op.getLhs());
  rhs = batchedView(rhsOperand, rhsType, op.getRhs());
  // f32 and another type cannot meet in one matmul: widen nothing, narrow
  // the f32 side (the graph asked for at most that precision).
  if ((lhsType == isa::DType::F32) != (rhsType == isa::DType::F32)) {
    lhsType = rhsType = isa::DType::BF16;
  }
  return success();
}

KMajor MatmulLowering::stationaryAt(int64_t base) {
  return KMajor{lhs, base,
                lhs.strides[op.getTransposeLhs() ? rank - 2 : rank - 1],
                lhs.strides[op.getTransposeLhs() ? rank - 1 : rank - 2],
                lhsHot.indices.buffer ? &lhsHot : nullptr};
}

KMajor MatmulLowering::movingAt(int64_t base) {
  return KMajor{rhs, base,
                rhs.strides[op.getTransposeRhs() ? rank - 1 : rank - 2],
                rhs.strides[op.getTransposeRhs() ? rank - 2 : rank - 1],
                rhsHot.indices.buffer ? &rhsHot : nullptr};
}

/// Many one-tile products (attention's, [128 x 64] per head): consecutive
/// elements of the innermost batch dimension share each DMA, transpose
/// bank, PSUM bank and store. One per element, their fixed ~2 us DMA costs
/// would dwarf the 16-32 KiB each moves.
bool MatmulLowering::isBatchOfOneTiles() const {
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
  return batchCount > 1 && k <= kTile && m <= mTile && n <= bankColumns &&
         batch.back() > 1;
}

LogicalResult MatmulLowering::lowerBatchOfOneTiles() {
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
  int64_t inner = batch.back();
  int64_t group = std::min<int64_t>({4, inner, bankColumns / std::max(m, n)});
  int64_t lhsStep = lhs.strides[batch.size() - 1];
  int64_t rhsStep = rhs.strides[batch.size() - 1];
  int64_t outStep = dstStrides[batch.size() - 1];
  for (int64_t first = 0; first < batchCount; first += inner) {
    for (int64_t g0 = 0; g0 < inner; g0 += group) {
      int64_t count = std::min(group, inner - g0);
      auto stationary = loadBatchGroup(
          tb, stationaryAt(batchBase(lhs, lhs.strides, first + g0)), lhsStep,
          count, k, m, lhsType);
      auto moving =
          loadBatchGroup(tb, movingAt(batchBase(rhs, rhs.strides, first + g0)),
                         rhsStep, count, k, n, rhsType);
      Tile acc = tb.tile(isa::Memory::Psum, isa::DType::F32, m, count * n);
      for (int64_t g = 0; g < count; ++g) {
        tb.matmul(acc.columns(g * n, n), stationary[g], moving[g],
                  /*accumulate=*/false);
      }
      if (epilogue) {
        // The products rounded to their type, as the graph has them.
        Tile out = tb.tile(isa::Memory::Sbuf, resultType, m, count * n);
        tb.copy(out, acc);
        if (failed(l.emitBatchedEpilogue(*epilogue, out, first + g0, count))) {
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

LogicalResult MatmulLowering::lowerTiled() {
  if (epilogue) {
    startEpilogue();
  }
  startColumnSums();
  chooseBlocking();
  chooseEpilogueSpan();
  std::optional<HbmView> lhsCopy, rhsCopy;
  if (batch.empty()) {
    lhsCopy = l.startBf16Copy(op.getLhs());
    rhsCopy = l.startBf16Copy(op.getRhs());
  }
  for (int64_t bIndex = 0; bIndex < batchCount; ++bIndex) {
    ElementOperands element = elementOperands(bIndex, lhsCopy, rhsCopy);
    for (int64_t b0 = 0; b0 < m; b0 += mTile * mBlock) {
      if (failed(lowerRowBlock(element, b0))) {
        return failure();
      }
    }
  }
  return storeGatheredResults();
}

/// An epilogue's reductions gather a result per row, a column per row
/// tile, stored once the last column tile has passed.
void MatmulLowering::startEpilogue() {
  if (!epilogue->columnSums.empty()) {
    int64_t blocks = (n + 127) / 128;
    epilogue->sums =
        tb.tile(isa::Memory::Psum, isa::DType::F32, std::min<int64_t>(128, n),
                blocks * static_cast<int64_t>(epilogue->columnSums.size()));
    for (LoopColumnSum &c : epilogue->columnSums) {
      c.fused = true;
      isa::DType type =
          deviceType(llvm::cast<RankedTensorType>(c.op->getOperand(1).getType())
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
  // A batched product's rows gather as those of [elements x M, N].
  auto columnPerRowTile = [&] {
    return tb.tile(isa::Memory::Sbuf, isa::DType::F32,
                   std::min<int64_t>(mTile, m),
                   (batchCount * m + mTile - 1) / mTile);
  };
  for (size_t r = 0; r < epilogue->reductions.size(); ++r) {
    epilogue->gathered.push_back(columnPerRowTile());
  }
  for (size_t r = 0; r < epilogue->rowOutputs.size(); ++r) {
    epilogue->rowGathered.push_back(columnPerRowTile());
  }
}

/// Column sums: a column of ones moving against each stationary slice,
/// accumulated over K per row tile in one PSUM tile (a column per row tile
/// of the block), rounded to the sums' type and gathered for one store
/// each at the end.
void MatmulLowering::startColumnSums() {
  if (columnSums.empty()) {
    return;
  }
  ones = tb.tile(isa::Memory::Sbuf, lhsType, kTile, 1);
  tb.memset(ones, 1.0);
  for (const HbmView &sums : columnSums) {
    sumsGathered.push_back(tb.tile(isa::Memory::Sbuf, sums.dtype,
                                   std::min<int64_t>(mTile, m),
                                   (m + mTile - 1) / mTile));
  }
}

void MatmulLowering::chooseBlocking() {
  // Let each moving tile serve a block of up to four row tiles, so that the
  // moving operand is read from HBM once per block, not once per row tile
  // (a 4096^3 matmul moves 300 MB instead of 1.1 GB), and keep the block's
  // stationary tiles for every N tile when they fit. When they do not (a
  // one-hot index_select over a vocabulary, K in the tens of thousands),
  // the block still shares each moving tile and reloads its stationary
  // slices per N tile.
  int64_t sbufBudget = l.sbufBudget;
  int64_t perRowTile = kTiles * mTile * isa::dtypeBytes(lhsType);
  keepStationary = perRowTile <= sbufBudget / 2;
  mBlock = keepStationary
               ? std::clamp<int64_t>((sbufBudget / 2) / perRowTile, 1, 4)
               : 4;
  // A small moving operand (the output gradient of a weight-gradient
  // product, 1024 x 768) stays in SBUF for every row block, read once rather
  // than once per block.
  keepMoving = m > mTile * mBlock &&
               kTiles * n * isa::dtypeBytes(rhsType) <= sbufBudget * 3 / 4;
  // With the moving operand kept, a larger block saves no HBM reads. Two
  // row tiles leave PSUM (seven banks) room for the next N tile's
  // accumulators while this one's leave, which four 512-column ones do not,
  // and the block's rows reach the ops that read them sooner.
  // The stationary operand's loads keep the wider block, though, in whole
  // blocks: a DMA costs a fixed ~2 us on top of its bytes, and a 2-tile
  // block's K slice (256 bf16 columns, 64 KiB) pays it on half the bytes a
  // 4-tile one does.
  loadBlock = mBlock;
  if (keepMoving) {
    mBlock = std::min<int64_t>(mBlock, 2);
    loadBlock = loadBlock / mBlock * mBlock;
  }
}

/// An epilogue whose outputs only leave the step (an optimizer update's)
/// takes spans of consecutive N tiles at once: a 768-wide row whole, or as
/// many columns as the budget holds beside the block's products. Each of
/// its loads and stores is then one DMA per span, not per N tile (AdamW
/// moves six per span). One whose outputs later ops read keeps to one N
/// tile, so that its first rows are ready sooner.
void MatmulLowering::chooseEpilogueSpan() {
  spanTiles = 1;
  EpilogueFootprint footprint = epilogue && !epilogue->rowChain()
                                    ? l.epilogueFootprint(*epilogue)
                                    : EpilogueFootprint{};
  if (epilogue && epilogue->rowChain()) {
    spanTiles = nTiles; // a row chain needs its rows whole
  } else if (epilogue && !footprint.outputsReadLater) {
    int64_t perColumn =
        footprint.bytesPerColumn + mBlock * isa::dtypeBytes(resultType);
    int64_t fit = std::max<int64_t>(1, l.sbufBudget / perColumn / nTile);
    int64_t spans = (nTiles + fit - 1) / fit;
    spanTiles = (nTiles + spans - 1) / spans; // balanced
  }
}

/// How many K slices from `kt` load together: the full ones four at a time
/// (one PSUM bank of transposes), a last partial one alone.
int64_t MatmulLowering::groupSize(int64_t kt) const {
  int64_t full = k / kTile;
  return kt < full ? std::min<int64_t>(4, full - kt) : 1;
}

/// Whether `operand`'s K dimension is innermost in HBM, so that its loads
/// transpose it on TensorE.
bool MatmulLowering::needsTransposes(const KMajor &operand) {
  return !operand.oneHot && operand.kInnermost();
}

/// An HBM buffer [K, columns] of `dtype` that loads read K-major as they are.
KMajor MatmulLowering::kMajorCopy(int64_t columns, isa::DType dtype) {
  HbmView view;
  view.buffer = tb.hbm({k, columns}, dtype);
  view.dtype = dtype;
  view.shape = {k, columns};
  view.strides = {columns, 1};
  return KMajor{view, 0, columns, 1, nullptr, std::nullopt};
}

/// Stores the K slices [kt, kt + slices.size()) of columns [x0, ...) into
/// `copy` (kMajorCopy's).
void MatmulLowering::storeSlices(const KMajor &copy, int64_t kt, int64_t x0,
                                 llvm::ArrayRef<Tile> slices) {
  for (auto [j, slice] : llvm::enumerate(slices)) {
    int64_t k0 = (kt + static_cast<int64_t>(j)) * kTile;
    tb.store(copy.view, k0 * copy.kStride + x0, copy.kStride, 1, slice);
  }
}

/// K slices [kt, kt + groupSize(kt)) of an operand's columns [x0, x0 + xx).
llvm::SmallVector<Tile, 4> MatmulLowering::sliceGroup(const KMajor &operand,
                                                      int64_t kt, int64_t x0,
                                                      int64_t xx,
                                                      isa::DType dtype) {
  if (kt < k / kTile) {
    return loadKMajorSlices(tb, operand, kt * kTile, groupSize(kt), x0, xx,
                            dtype);
  }
  return llvm::SmallVector<Tile, 4>{
      loadKMajor(tb, operand, kt * kTile, k - kt * kTile, x0, xx, dtype)};
}

/// Batch element `bIndex`'s operands, and, when the moving operand stays in
/// SBUF, all its K slices, loaded first.
ElementOperands
MatmulLowering::elementOperands(int64_t bIndex,
                                const std::optional<HbmView> &lhsCopy,
                                const std::optional<HbmView> &rhsCopy) {
  ElementOperands e;
  e.index = bIndex;
  e.outBase = batchBase(dst, dstStrides, bIndex);
  e.stationary = stationaryAt(batchBase(lhs, lhs.strides, bIndex));
  e.moving = movingAt(batchBase(rhs, rhs.strides, bIndex));
  e.stationary.copy = lhsCopy;
  e.moving.copy = rhsCopy;
  e.stationaryAgain = e.stationary;
  e.movingAgain = e.moving;
  e.stationaryAgain.copy.reset();
  e.movingAgain.copy.reset();
  if (l.hbmTrades && !keepMoving && m > mTile * mBlock &&
      needsTransposes(e.moving)) {
    e.movingCopied = lastMovingCopy && lastMovingCopy->first == e.moving.offset;
    if (!e.movingCopied) {
      lastMovingCopy = {e.moving.offset, kMajorCopy(n, rhsType)};
    }
    e.movingTransposed = lastMovingCopy->second;
  }
  e.keptMoving.resize(keepMoving ? nTiles : 0);
  for (auto [t, slices] : llvm::enumerate(e.keptMoving)) {
    int64_t n0 = static_cast<int64_t>(t) * nTile;
    while (static_cast<int64_t>(slices.size()) < kTiles) {
      slices.append(sliceGroup(e.moving, slices.size(), n0,
                               std::min(nTile, n - n0), rhsType));
    }
  }
  return e;
}

/// The output rows [b0, b0 + mTile * mBlock): per N tile, the block's
/// products accumulated in PSUM, then evacuated.
LogicalResult MatmulLowering::lowerRowBlock(ElementOperands &element,
                                            int64_t b0) {
  RowBlock block;
  block.b0 = b0;
  for (int64_t m0 = b0; m0 < std::min(m, b0 + mTile * mBlock); m0 += mTile) {
    block.rowTiles.push_back({m0, std::min(mTile, m - m0)});
  }
  block.kept.resize(block.rowTiles.size());
  keepStationarySlices(element, block);
  if (!columnSums.empty()) {
    block.sumsAcc =
        tb.tile(isa::Memory::Psum, isa::DType::F32, std::min<int64_t>(mTile, m),
                static_cast<int64_t>(block.rowTiles.size()));
  }
  block.spanProducts.resize(block.rowTiles.size());
  for (int64_t n0 = 0; n0 < n; n0 += nTile) {
    int64_t nn = std::min(nTile, n - n0);
    llvm::SmallVector<Tile, 4> accs = accumulate(element, block, n0, nn);
    if (failed(evacuate(element, block, n0, nn, accs))) {
      return failure();
    }
  }
  return success();
}

/// Loads the block's stationary K slices once for all N tiles, when they
/// fit in SBUF.
void MatmulLowering::keepStationarySlices(ElementOperands &e, RowBlock &block) {
  if (!keepStationary) {
    return;
  }
  if (e.stationary.kInnermost() || block.rowTiles.size() <= 1) {
    for (auto [i, rt] : llvm::enumerate(block.rowTiles)) {
      while (static_cast<int64_t>(block.kept[i].size()) < kTiles) {
        block.kept[i].append(sliceGroup(e.stationary, block.kept[i].size(),
                                        rt.first, rt.second, lhsType));
      }
    }
    return;
  }
  // M innermost (a weight gradient's transposed activations): one DMA per K
  // slice for the rows of `loadBlock` row tiles, which the blocks among
  // them share; its rows then run 4 x 128 elements instead of 128 (256-byte
  // runs move at half bandwidth).
  if (block.b0 >= e.loaded0 + e.loadedRows) {
    e.loaded0 = block.b0;
    e.loadedRows = std::min(m - block.b0, mTile * loadBlock);
    e.loaded.clear();
    for (int64_t kt = 0; kt < kTiles; ++kt) {
      e.loaded.push_back(loadKMajor(tb, e.stationary, kt * kTile,
                                    std::min(kTile, k - kt * kTile), block.b0,
                                    e.loadedRows, lhsType));
    }
  }
  for (const Tile &loaded : e.loaded) {
    for (auto [i, rt] : llvm::enumerate(block.rowTiles)) {
      block.kept[i].push_back(loaded.columns(rt.first - e.loaded0, rt.second));
    }
  }
}

/// The block's products for columns [n0, n0 + nn), accumulated over K in
/// one PSUM tile per row tile; on the first N tile, the column sums too.
llvm::SmallVector<Tile, 4> MatmulLowering::accumulate(const ElementOperands &e,
                                                      RowBlock &block,
                                                      int64_t n0, int64_t nn) {
  llvm::SmallVector<Tile, 4> accs;
  for (auto &rt : block.rowTiles) {
    accs.push_back(tb.tile(isa::Memory::Psum, isa::DType::F32, rt.second, nn));
  }
  for (int64_t kt = 0; kt < kTiles;) {
    llvm::SmallVector<Tile, 4> movingSlices;
    if (keepMoving) {
      auto &all = e.keptMoving[n0 / nTile];
      movingSlices.assign(all.begin() + kt, all.begin() + kt + groupSize(kt));
    } else if (e.movingTransposed && (block.b0 > 0 || e.movingCopied)) {
      movingSlices = sliceGroup(*e.movingTransposed, kt, n0, nn, rhsType);
    } else {
      movingSlices = sliceGroup(block.b0 == 0 ? e.moving : e.movingAgain, kt,
                                n0, nn, rhsType);
      if (e.movingTransposed) {
        storeSlices(*e.movingTransposed, kt, n0, movingSlices);
      }
    }
    for (auto [i, rt] : llvm::enumerate(block.rowTiles)) {
      llvm::SmallVector<Tile, 4> stationarySlices =
          keepStationary
              ? llvm::SmallVector<Tile, 4>(block.kept[i].begin() + kt,
                                           block.kept[i].begin() + kt +
                                               movingSlices.size())
              : sliceGroup(n0 == 0 ? e.stationary : e.stationaryAgain, kt,
                           rt.first, rt.second, lhsType);
      for (auto [j, v] : llvm::enumerate(movingSlices)) {
        tb.matmul(accs[i], stationarySlices[j], v,
                  /*accumulate=*/kt + static_cast<int64_t>(j) > 0);
      }
      for (auto [j, s] : llvm::enumerate(stationarySlices)) {
        if (n0 == 0 && !columnSums.empty()) {
          tb.matmul(block.sumsAcc.columns(static_cast<int64_t>(i), 1)
                        .withRows(0, rt.second),
                    s, ones.withRows(0, s.rows),
                    /*accumulate=*/kt + static_cast<int64_t>(j) > 0);
        }
      }
    }
    kt += static_cast<int64_t>(movingSlices.size());
  }
  return accs;
}

/// Takes the block's products for columns [n0, n0 + nn) out of PSUM: into
/// dst, or into the epilogue's span, which runs once its last tile is in.
/// On the first N tile the column sums leave too.
LogicalResult MatmulLowering::evacuate(const ElementOperands &e,
                                       RowBlock &block, int64_t n0, int64_t nn,
                                       llvm::ArrayRef<Tile> accs) {
  int64_t spanStart = n0 / (nTile * spanTiles) * (nTile * spanTiles);
  int64_t spanCols = std::min(nTile * spanTiles, n - spanStart);
  for (auto [i, rt] : llvm::enumerate(block.rowTiles)) {
    for (const Tile &gathered : sumsGathered) {
      if (n0 == 0) {
        tb.copy(gathered.columns(rt.first / mTile, 1).withRows(0, rt.second),
                block.sumsAcc.columns(static_cast<int64_t>(i), 1)
                    .withRows(0, rt.second));
      }
    }
    if (epilogue) {
      // The product rounded to its type, as the graph has it, then the
      // group on the span in SBUF once its last tile is in.
      Tile &out = block.spanProducts[i];
      if (n0 == spanStart) {
        out = tb.tile(isa::Memory::Sbuf, resultType, rt.second, spanCols);
      }
      tb.copy(out.columns(n0 - spanStart, nn), accs[i]);
      if (n0 + nn == spanStart + spanCols &&
          failed(l.emitEpilogue(*epilogue, out, e.index, rt.first, spanStart,
                                n))) {
        return failure();
      }
      continue;
    }
    Tile out = tb.tile(isa::Memory::Sbuf, dst.dtype, rt.second, nn);
    tb.copy(out, accs[i]);
    tb.store(dst, e.outBase + rt.first * sMo + n0 * sNo, sMo, sNo, out);
  }
  return success();
}

/// Stores what was gathered a column per row tile (or per 128 columns):
/// the column sums, and the epilogue's sums, reductions and row values.
LogicalResult MatmulLowering::storeGatheredResults() {
  for (auto [sums, gathered] : llvm::zip(columnSums, sumsGathered)) {
    storeGathered(tb, sums, sums.offset, sums.strides.back(), m, gathered);
  }
  if (!epilogue) {
    return success();
  }
  int64_t blocks = (n + 127) / 128;
  for (auto [s, c] : llvm::enumerate(epilogue->columnSums)) {
    // Rounded to the sum's type as the product's evacuation would.
    Tile out = tb.tile(isa::Memory::Sbuf, c.dst.dtype,
                       std::min<int64_t>(128, n), blocks);
    tb.copy(out,
            epilogue->sums.columns(static_cast<int64_t>(s) * blocks, blocks));
    storeGathered(tb, c.dst, c.dst.offset, 1, n, out);
  }
  for (auto [r, reduction] : llvm::enumerate(epilogue->reductions)) {
    storeGathered(tb, reduction.dst, reduction.dst.offset, 1, batchCount * m,
                  epilogue->gathered[r]);
  }
  for (auto [r, out] : llvm::enumerate(epilogue->rowOutputs)) {
    std::optional<HbmView> rows = asRows(out.dst);
    if (!rows) {
      return op.emitOpError("has an epilogue row value whose buffer is not "
                            "one element per row");
    }
    storeGathered(tb, *rows, rows->offset, rows->strides[0], batchCount * m,
                  epilogue->rowGathered[r]);
  }
  return success();
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

LogicalResult Lowering::lowerMatmul(MatmulOp op, const HbmView &dst,
                                    Epilogue *epilogue,
                                    llvm::ArrayRef<HbmView> columnSums) {
  MatmulLowering lowering(*this, op, dst, epilogue, columnSums);
  if (failed(lowering.prepareOperands())) {
    return failure();
  }
  if (lowering.isBatchOfOneTiles()) {
    return lowering.lowerBatchOfOneTiles();
  }
  return lowering.lowerTiled();
}

} // namespace kiln::tile_passes
