//===- Lowering.h - state of one function's kgraph -> ktile lowering -*- C++ -*-===//

#ifndef KILN_PASSES_TILE_LOWERING_H
#define KILN_PASSES_TILE_LOWERING_H

#include "passes/tile/TileBuilder.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <functional>
#include <map>

namespace kiln::tile_passes {

/// An elementwise op's operand inside a tile iteration.
struct TileArg {
  std::optional<double> immediate;
  Tile tile;
};

/// Where a tile iteration lies in the row-major order of its group's shape:
/// tile element (p, i) is element `first + rowStep * p + colStep * i`; or,
/// with segments (a batched product's tile, several batch elements side by
/// side), column i = s * segmentCols + j is element
/// `first + rowStep * p + segmentStep * s + colStep * j`.
struct TileIndex {
  int64_t first = 0, rowStep = 0, colStep = 0;
  int64_t segmentCols = 0, segmentStep = 0;
};

/// A value copied or computed into an HBM view by an elementwise loop nest.
struct LoopOutput {
  mlir::Value value; // the group value (or, for a copy, the source value)
  HbmView dst;
  /// Cleared by a loop nest whose fused reductions are the value's only
  /// readers outside it: nothing is stored.
  bool stored = true;
};

/// An elementwise group a convolution computes on each block of its output
/// as it leaves PSUM (see PlanConvolutionEpilogues.cpp): `value` is the
/// output as the group reads it, `inputs` the group's other operands,
/// `outputs` the group values read after it.
struct ConvEpilogue {
  llvm::ArrayRef<mlir::Operation *> ops;
  mlir::Value value;
  llvm::SmallVector<std::pair<mlir::Value, TensorOperand>, 4> inputs;
  llvm::ArrayRef<LoopOutput> outputs;
};

/// A reduction over the trailing dimensions of a group value (a layer
/// norm's row sums, a softmax's row max and sum), computed by the group's
/// loop nest as each row's columns pass instead of by reading the value
/// back from HBM. The loop nest fuses it when the reduced dimensions are
/// exactly its free axis's innermost ones.
struct LoopReduction {
  mlir::Operation *op; // reduce_sum, reduce_max or reduce_min
  /// The reshape of the group value it reads, if any: the reduced trailing
  /// elements are then those of the group's dimensions [from, rank).
  mlir::Operation *via;
  int64_t from;
  HbmView dst; // a fresh row-major buffer
  bool fused = false; // set by the loop nest
  /// A value a row chain's ops compute per row (one of its reductions or
  /// statistics, read after the chain): stored as it is, not folded.
  bool rowValue = false;
  /// >= 0: a reduction over every dimension of the group value but this one
  /// (batch norm's sums over [N, H, W] per channel, read through a
  /// transpose that puts the channels first). The loop nest fuses it when
  /// that dimension lies on the partitions: each tile iteration folds its
  /// rows into a column of its own, and the columns fold at the end.
  int64_t keptDim = -1;
};

/// A row chain (see planRowChains, PlanRowChains.cpp): elementwise groups of
/// one shape joined by reductions over their trailing dimensions and the
/// elementwise ops on those reductions (a softmax's max, shift, exp, sum
/// and division; a layer norm's centring, variance and scaling). When each
/// iteration of the loop nest holds whole rows, one loop nest computes it
/// all and the values passed between the groups never leave SBUF.
struct RowChain {
  /// The reduced dimensions are [from, rank) of the groups' shape; the
  /// row values (reductions and the ops on them) have size 1 there.
  int64_t from = 0;
  /// Set by the loop nest when its layout cannot hold whole rows: it
  /// emitted nothing, and the chain's parts are lowered one by one.
  bool declined = false;
};

/// A sum over a group value's leading dimensions, `ones[1, R] . V` as
/// layout assignment writes it (a layer norm's weight and bias gradients),
/// computed by the group's loop nest on TensorE instead of by reading V
/// back: each tile of V, stationary, against a column of ones, its 128-
/// column blocks accumulating in PSUM across the row blocks. Fused when the
/// loop nest keeps V's rows on the partitions and whole 128-column blocks
/// in each chunk.
struct LoopColumnSum {
  mlir::Operation *op; // the matmul
  mlir::Value value;   // the group value it sums
  HbmView dst;         // [1, C], a fresh row-major buffer
  bool fused = false;  // set by the loop nest
  /// The reshapes and casts between the value and the sum, if any, which
  /// the sum's loads would do: done with it.
  llvm::SmallVector<mlir::Operation *, 2> via = {};
};

/// An elementwise group computed on a 2-D matmul's output tiles as they
/// leave PSUM, instead of by its own loop nest reading the product back
/// from HBM: a linear layer's bias and activation, AdamW on a weight
/// gradient. Every group op has the product's shape [M, N].
struct Epilogue {
  llvm::SmallVector<mlir::Operation *> ops; // program order
  mlir::Value product;                       // the matmul's result
  llvm::SmallVector<LoopOutput> outputs;     // group values used outside
  /// Reductions of group values over the product's columns (from = 1),
  /// each row's folded as its column tiles pass.
  llvm::SmallVector<LoopReduction> reductions;
  /// Inputs every row reads alike (a bias), loaded once per column offset
  /// (-1: a scalar, once), keyed by the value's opaque pointer.
  std::map<std::pair<const void *, int64_t>, Tile> kept;
  /// Per reduction, the rows' results (a column per row tile), and the
  /// fold of the column tiles so far, keyed by (reduction, first row).
  std::vector<Tile> gathered;
  std::map<std::pair<size_t, int64_t>, Tile> soFar;
  /// The shape of a row chain (PlannedRowChain) the epilogue runs instead
  /// of a group, empty for a group: on a batched product of one-tile
  /// elements (see emitBatchedEpilogue), on the whole rows of a batched
  /// product of larger elements (attention's scores over 2048 keys), or on
  /// a 2-D product's whole rows, the group computing the product's values
  /// followed by the chain over them (a linear layer's bias, dropout and
  /// residual, then a layer norm). Its ops reduce the last dimension; the
  /// row values they compute stay in SBUF but for `rowOutputs`.
  llvm::SmallVector<int64_t> chainShape;
  bool rowChain() const { return !chainShape.empty(); }
  /// Row values read after the chain (a layer norm's reciprocal
  /// deviation), gathered a column per row tile and stored at the end.
  llvm::SmallVector<LoopOutput> rowOutputs;
  std::vector<Tile> rowGathered;
  /// Row sums `ones[1, M] . V` of group values (a layer norm's bias and
  /// scale gradients), each folded on TensorE from the value's tiles as
  /// they pass: a column per 128 product columns in `sums`, accumulated
  /// over the row tiles. V's tiles are rounded to the sum's operand type.
  llvm::SmallVector<LoopColumnSum> columnSums;
  Tile sums;                      // PSUM, a block of columns per sum
  std::map<isa::DType, Tile> ones; // [128 x 1]
};

/// What the epilogue on one output tile holds in SBUF at its peak (the
/// product, its loaded inputs and the values between), per product column,
/// and whether later ops of the step read what it stores (an optimizer
/// update's outputs are only step results).
struct EpilogueFootprint {
  int64_t bytesPerColumn = 0;
  bool outputsReadLater = false;
};

/// A row chain as planned: its ops in program order (the groups' members,
/// the reductions, the ops on row values), run where the last stands.
struct PlannedRowChain {
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::SmallVector<int64_t> shape; // the groups' (the last op may be a row op)
  int64_t from = 0;                 // as RowChain::from
};

/// What the planner needs to know of the function's lowering.
struct RowChainHooks {
  /// The members of an elementwise op's fusion group (the op alone if in
  /// none), in program order.
  std::function<llvm::ArrayRef<mlir::Operation *>(mlir::Operation *)>
      membersOf;
  /// Whether a group may join a chain (one a matmul's epilogue computes,
  /// say, may not).
  std::function<bool(llvm::ArrayRef<mlir::Operation *>)> mayJoin;
  /// The position at which an op's lowering reads its operands.
  std::function<unsigned(mlir::Operation *)> readAt;
};

/// The row chains of a function body, each joining two or more groups, no
/// op in two of them.
std::vector<PlannedRowChain> planRowChains(mlir::Block &body,
                                           const RowChainHooks &hooks);

/// Stores the results `gathered` holds for `total` rows (row 128 t + p in
/// column t of partition p), `rowStride` apart from `offset` in `dst`.
void storeGathered(TileBuilder &tb, const HbmView &dst, int64_t offset,
                   int64_t rowStride, int64_t total, const Tile &gathered);

/// Marks the outputs only fused reductions and sums read (directly or
/// through their reshapes) not stored.
void skipOutputsOnlyReducedOnes(llvm::MutableArrayRef<LoopOutput> outputs,
                                llvm::ArrayRef<mlir::Operation *> members,
                                llvm::ArrayRef<LoopReduction> reductions,
                                llvm::ArrayRef<LoopColumnSum> columnSums = {});

class Lowering {
public:
  Lowering(TileBuilder &tb, int64_t sbufBudget,
           const llvm::DenseMap<mlir::Value, mlir::Value> &oneHotIndices)
      : tb(tb), sbufBudget(sbufBudget), oneHotIndices(oneHotIndices) {}

  /// The tile-level form of `value` (already lowered).
  TensorOperand &operandOf(mlir::Value value);
  void bind(mlir::Value value, TensorOperand operand);
  /// `operand` as a contiguous HBM buffer view, copying when it is not.
  HbmView materialize(const TensorOperand &operand,
                      llvm::ArrayRef<int64_t> shape);
  /// Copies `src` (broadcast to dst's shape) into `dst`.
  void copyInto(const TensorOperand &src, const HbmView &dst);

  /// One loop nest over `shape` computing `ops` (elementwise, in order) and
  /// storing `outputs`, and those of `reductions` (of group values of
  /// `shape`) it can: it marks them fused, and the outputs only they read
  /// not stored. Operands defined outside `ops` are loaded.
  /// With `chain`, `ops` are a row chain's (reductions and row values
  /// among them, computed per row in SBUF), and `reductions` include the
  /// row values read after it (`rowValue`).
  mlir::LogicalResult
  lowerElementwise(llvm::ArrayRef<mlir::Operation *> ops,
                   llvm::ArrayRef<int64_t> shape,
                   llvm::MutableArrayRef<LoopOutput> outputs,
                   llvm::MutableArrayRef<LoopReduction> reductions = {},
                   llvm::MutableArrayRef<LoopColumnSum> columnSums = {},
                   RowChain *chain = nullptr);
  mlir::LogicalResult lowerReduce(mlir::Operation *op, const HbmView &dst);
  /// A convolution, or its input or weight gradient, into `dst` (see
  /// LowerConvolution.cpp; none: not stored); the sums of its output per
  /// channel into each of `channelSums`, and `epilogue` on each block of it
  /// (neither for the weight gradient).
  mlir::LogicalResult lowerConvolution(mlir::Operation *op, const HbmView &dst,
                                       llvm::ArrayRef<HbmView> channelSums,
                                       const ConvEpilogue *epilogue = nullptr);
  /// Rows of the table by gather DMAs into `dst` (row-major [tokens, D]).
  mlir::LogicalResult lowerEmbedding(kgraph::EmbeddingOp op,
                                     const HbmView &dst);
  /// The rows `op` picks written into `dst` (the table, [V, D]) by scatter
  /// DMAs.
  mlir::LogicalResult lowerScatterRows(kgraph::ScatterRowsOp op,
                                       const HbmView &dst);
  /// Writes the product into `dst` (for a folded f32 cast of a bf16 product,
  /// the cast's result: PSUM is f32 already), or, with an epilogue, computes
  /// the epilogue on each output tile and stores its outputs instead.
  /// Each of `columnSums` (a [1, M] view) receives the sums over K of the
  /// stationary operand's columns: the bias gradient `ones[1, K] . dY`
  /// beside the weight gradient `dY^T . X`, one more TensorE pass over the
  /// dY tiles already in SBUF against a column of ones, instead of a second
  /// read of dY from HBM. The product must not be batched.
  mlir::LogicalResult lowerMatmul(kgraph::MatmulOp op, const HbmView &dst,
                                  Epilogue *epilogue = nullptr,
                                  llvm::ArrayRef<HbmView> columnSums = {});
  /// The epilogue on output rows [m0, m0 + product.rows) and columns
  /// [n0, n0 + product.cols) of batch element `element` (row-major over
  /// the batch dimensions; 0 for a 2-D product) of a product whose
  /// elements are [M, N], `product` in SBUF. Row values gather by the row
  /// of the product seen as [elements x M, N], so a batched product's M is
  /// a multiple of 128.
  mlir::LogicalResult emitEpilogue(Epilogue &epilogue, const Tile &product,
                                   int64_t element, int64_t m0, int64_t n0,
                                   int64_t n);
  /// The tiles an epilogue starts from: the product's, and each input's
  /// from outside the epilogue, an immediate or what `load` brings in
  /// from its view; none for a condition its selects compute at `index`
  /// (computesCondition).
  mlir::LogicalResult epilogueTiles(
      const Epilogue &epilogue, const Tile &product, const TileIndex &index,
      llvm::function_ref<mlir::FailureOr<Tile>(mlir::Value, const HbmView &)>
          load,
      llvm::DenseMap<mlir::Value, TileArg> &tiles);
  /// A row-chain epilogue on batch elements [first, first + count) of a
  /// batched product whose elements are one [M, N] tile each, `product`
  /// [M, count * N] in SBUF (element g in columns [g N, (g + 1) N)): each
  /// partition holds `count` whole rows.
  mlir::LogicalResult emitBatchedEpilogue(Epilogue &epilogue,
                                          const Tile &product, int64_t first,
                                          int64_t count);
  /// What the epilogue on one output tile holds in SBUF, and whether
  /// later ops read what it stores.
  EpilogueFootprint epilogueFootprint(const Epilogue &epilogue);

  /// The view and load dtype of a matmul operand, looking through a bf16
  /// cast that the load performs, or that an earlier product's loads
  /// performed and stored (bf16CopyOf).
  std::pair<TensorOperand, isa::DType> matmulOperand(mlir::Value value);
  /// Where a product's loads of `cast` (a bf16 cast of an argument) also
  /// store what they load: a view of a fresh bf16 mirror of the argument's
  /// buffer, which the later casts in copiedBy then read; none if `cast`
  /// has no later casts.
  std::optional<HbmView> startBf16Copy(mlir::Value cast);

  TileBuilder &tb;
  int64_t sbufBudget;
  /// Whether HBM may be spent for speed (KTile's `hbm-trades`): the compile
  /// runs again without when the HBM plan overflows.
  bool hbmTrades = true;
  llvm::DenseMap<mlir::Value, TensorOperand> values;
  /// bf16 casts of one f32 argument that several matmuls load (a weight the
  /// forward pass reads transposed and the backward pass as it is), keyed
  /// by the cast the first of those matmuls loads: the casts the later ones
  /// load (the first among them if they share it), which read the bf16 copy
  /// that first matmul's loads store (see FunctionLowering::planBf16Copies).
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value, 2>> copiedBy;
  /// The copy each later cast reads, once the first matmul stored it.
  llvm::DenseMap<mlir::Value, mlir::Value> bf16CopyOf;
  /// One-hot matrices [n, C] that the matmuls reading them compute on chip
  /// (the plan's kgraph.fold = "on_chip"), each with the value of its
  /// indices, [n, 1]: element (i, j) is 1 where indices[i] == j, else 0.
  const llvm::DenseMap<mlir::Value, mlir::Value> &oneHotIndices;
  /// HBM buffers holding an iota (element k is k): a loop nest computes
  /// the part it needs with GpSimd's iota instead of loading it.
  llvm::SmallPtrSet<mlir::Value, 4> iotaBuffers;
};

/// Whether a value of `shape` in a row chain over `chainShape` is a row
/// value (one element per row: size 1 where the chain's values have their
/// rows). A value with the chain's rows in another shape (a 2-D product's
/// before its reshape to the chain's) is not one.
bool isRowValueShape(llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<int64_t> chainShape);

/// `view` as [rows, last dimension] when it has more than two dimensions
/// (a row chain's values, [B, S, H] over a product's [B·S, H]); none when
/// its strides do not allow that without a copy.
std::optional<HbmView> asRows(const HbmView &view);

/// The offset of batch element `index` (row-major over `batch`, the leading
/// dimensions of `strides`) from `offset`.
int64_t batchElementOffset(int64_t offset, llvm::ArrayRef<int64_t> strides,
                           llvm::ArrayRef<int64_t> batch, int64_t index);


/// The ALU op that folds a reduce_sum, reduce_max or reduce_min.
const char *reductionAlu(mlir::Operation *op);

/// Emits the instructions of one elementwise op on a tile iteration, one
/// destination per result.
mlir::LogicalResult emitElementwiseOp(TileBuilder &tb, mlir::Operation *op,
                                      llvm::ArrayRef<TileArg> args,
                                      llvm::ArrayRef<Tile> dsts,
                                      const TileIndex &index);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_LOWERING_H
