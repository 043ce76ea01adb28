//===- ElementwiseLoop.h - the elementwise lowering's own parts -*- C++ -*-===//
//
// What the files of the elementwise lowering share and nothing else needs:
// the iteration space of a loop nest and its layout on tiles
// (ElementwiseLayout.cpp), a group's ops on one tile iteration
// (ElementwiseGroup.cpp), and the loads and folds that both the loop nest
// (LowerElementwise.cpp) and a matmul's epilogue (ElementwiseEpilogue.cpp)
// emit.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_ELEMENTWISELOOP_H
#define KILN_PASSES_TILE_ELEMENTWISELOOP_H

#include "passes/tile/AffinePredicate.h"

#include "llvm/ADT/SetVector.h"

namespace kiln::tile_passes {

/// Dimensions of an iteration space with every view's strides, collapsed.
struct LoopSpace {
  Shape sizes;
  std::vector<Shape> strides; // per view
};

/// `shape` with each run of dimensions that every view steps through alike
/// merged into one, and dimensions of size 1 dropped. A single dimension
/// left is split in two so that part of it can go on the partitions; with
/// `splitInnermost`, so is an innermost one merged from several behind
/// fewer than 128 rows, at the shape's last dimension (a mask's rows).
LoopSpace collapse(llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<Shape> viewStrides, bool splitInnermost);

/// The views of one loop nest over a group's shape, each with its strides
/// and offset: the inputs, then the outputs, then the views that only steer
/// the collapse (the random numbers' index, the reductions, a row chain's
/// row values, the column sums), at the positions recorded here.
struct LoopViews {
  /// External inputs in first-use order (a copy's source among them).
  llvm::SetVector<mlir::Value> inputs;
  std::vector<HbmView> views; // inputs, then outputs
  std::vector<bool> isImmediate;
  std::vector<double> immediates; // 0 where not isImmediate
  /// Per input: the predicate of a select condition the group computes
  /// rather than loads where a tile iteration allows (selectCondition),
  /// over `shape`.
  std::vector<std::optional<AffinePredicate>> computedConditions;
  bool computesConditions() const {
    return llvm::any_of(computedConditions,
                        [](const auto &p) { return p.has_value(); });
  }
  llvm::SmallVector<int64_t, 4> shape;
  std::vector<Shape> strides;     // every view
  std::vector<int64_t> offsets;   // every view
  /// Whether a dropout or an affine select reads the row-major index
  /// (view `indexView`).
  bool needsIndex = false;
  size_t indexView = 0;
  size_t reductionView = 0; // the first of one per reduction
  size_t chainView = 0;
  size_t columnSumView = 0; // the first of one per column sum
};

LoopViews loopViews(Lowering &lowering, llvm::ArrayRef<mlir::Operation *> ops,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::ArrayRef<LoopOutput> outputs,
                    llvm::ArrayRef<LoopReduction> reductions, size_t columnSums,
                    const RowChain *chain);

/// Marks fused the reductions whose view in `space` folds exactly its
/// innermost dimension; returns whether a row chain's row values do.
bool fuseRowFolds(const LoopSpace &space, const LoopViews &views,
                  llvm::MutableArrayRef<LoopReduction> reductions,
                  const RowChain *chain);

/// The most free-axis columns one tile iteration may hold within the SBUF
/// budget (see peakBytesPerColumn), between 64 and 4096.
int64_t chunkLimitOf(int64_t sbufBudget, llvm::ArrayRef<mlir::Operation *> ops,
                     const LoopViews &views, const LoopSpace &space,
                     llvm::ArrayRef<LoopOutput> outputs,
                     llvm::ArrayRef<int64_t> chainShape);

/// How a loop nest lays its iteration space on tiles: dimension
/// `partitionDim` on the partitions in blocks of 128 rows; the innermost
/// dimension on the free axis in chunks of `chunk` columns or, `wide`, the
/// innermost and `freeOuterDim` together; the dimensions before those
/// (`outer`) one iteration of the outermost loop each.
struct LoopLayout {
  LoopSpace space;
  size_t rank = 0;
  bool wide = false;
  size_t partitionDim = 0, freeOuterDim = 0;
  int64_t rowsTotal = 0, colsTotal = 0;
  int64_t chunks = 0, chunk = 0;
  /// Row values per partition: one per row, or wide, one per short row.
  int64_t perRow = 1;
  Shape outer;
  int64_t outerCount = 1;

  /// View v's free dimensions for a tile of `cols` columns.
  llvm::SmallVector<FreeDim, 2> freeDims(size_t v, int64_t cols) const;
  /// The element offset in view v of free-axis column `f0`.
  int64_t columnOffset(size_t v, int64_t f0) const;
  /// The element step in view v from one partition to the next.
  int64_t rowStride(size_t v) const { return space.strides[v][partitionDim]; }
};

LoopLayout layOut(LoopSpace space, int64_t chunkLimit, const LoopViews &views);

/// Marks fused the kept-dimension sums (LoopReduction::keptDim) whose kept
/// dimension the layout put on the partitions; returns whether any.
bool fuseKeptDimFolds(const LoopLayout &layout, const LoopViews &views,
                      llvm::MutableArrayRef<LoopReduction> reductions);

/// Marks fused the column sums the layout can fold on TensorE; returns
/// whether it could hold any (then the outputs only they read need no
/// store).
bool fuseColumnSums(const LoopLayout &layout, const LoopViews &views,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::MutableArrayRef<LoopColumnSum> columnSums,
                    int64_t bankColumns);

/// Bytes per free-axis column that one iteration of the loop nest holds at
/// its peak: each input from its load to its last use, each result from
/// its op to its last use (an output until its store), and an op's scratch
/// tiles while it runs.
int64_t peakBytesPerColumn(llvm::ArrayRef<mlir::Operation *> ops,
                           llvm::ArrayRef<mlir::Value> inputs,
                           llvm::ArrayRef<bool> inputIsScalar,
                           llvm::ArrayRef<LoopOutput> outputs,
                           llvm::ArrayRef<int64_t> chainShape);

/// The values `ops` read that none of them defines, in first-use order.
llvm::SetVector<mlir::Value>
externalInputs(llvm::ArrayRef<mlir::Operation *> ops);

/// The tile a store of a group value into `dtype` reads: an immediate
/// filled in, a tile read with stride 0 made whole (a store reads its
/// source's own layout), an f32 tile stored in bf16 rounded on an engine
/// (a converting DMA would move the f32 bytes).
Tile storedTile(TileBuilder &tb, const TileArg &arg, isa::DType dtype,
                int64_t rows, int64_t cols);

/// Runs `ops` (in order) on one tile iteration of `rows` x `cols`: `tiles`
/// holds each operand from outside the ops, and receives every result.
/// With `chainShape` (a row chain's), the ops not of that shape compute
/// row values, `perRow` per partition: a reduction folds each row of its
/// input, and ops on row values work on one element per row.
/// `ownedInput` is an input whose tile belongs to this iteration alone (an
/// epilogue's product, evacuated afresh for each tile), which an op that
/// is its one reader may overwrite.
mlir::LogicalResult
emitGroupOps(TileBuilder &tb, llvm::ArrayRef<mlir::Operation *> ops,
             llvm::DenseMap<mlir::Value, TileArg> &tiles, int64_t rows,
             int64_t cols, const TileIndex &index,
             llvm::ArrayRef<int64_t> chainShape = {}, int64_t perRow = 1,
             mlir::Value ownedInput = {});

/// `a alu b` as the engines compute it on immediates: f32 arithmetic, and
/// 1 or 0 for a comparison.
double foldAlu(llvm::StringRef alu, double a, double b);

/// Loads `rows` x `cols` of an input from `origin`. A broadcast along the
/// free axis (every free stride 0) loads one column, read with stride 0;
/// one along the inner of two free dimensions (a statistic per short row)
/// loads one element per run, each read `run` times.
Tile loadInput(TileBuilder &tb, const HbmView &view, int64_t origin,
               int64_t rowStride, llvm::ArrayRef<FreeDim> free, int64_t rows,
               int64_t cols);

/// Folds the rows of a reduction's input tile (`perRow` runs each) and
/// combines them with `before` (the fold of the columns before, if any),
/// into `into` when given (the last columns), else a fresh tile.
Tile foldRows(TileBuilder &tb, const LoopReduction &r,
              const llvm::DenseMap<mlir::Value, TileArg> &tiles, int64_t rows,
              int64_t cols, int64_t perRow, const Tile *before, Tile into);

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_ELEMENTWISELOOP_H
