//===- TileBuilder.h - views, tiles and ktile op construction ---*- C++ -*-===//
//
// The tile phase's vocabulary. An HbmView is a tensor as it lies in an HBM
// buffer (offset and strides in elements), so reshapes, transposes,
// broadcasts and slices are arithmetic on views. A Tile is a rectangle of an
// SBUF or PSUM buffer. TileBuilder emits the ktile ops that move and compute
// them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_TILEBUILDER_H
#define KILN_PASSES_TILE_TILEBUILDER_H

#include "compiler/target/TargetDescription.h"
#include "dialects/kisa/KisaDialect.h"
#include "dialects/ktile/KTileDialect.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace kiln::tile_passes {

using Shape = llvm::SmallVector<int64_t, 4>;

struct HbmView {
  mlir::Value buffer; // memref in "hbm"
  isa::DType dtype = isa::DType::F32;
  int64_t offset = 0; // elements
  Shape shape, strides;

  int64_t elements() const;
  /// Row-major with no gaps (a whole buffer or a contiguous part of one).
  bool isContiguous() const;
  /// The view read broadcast to `shape` (NumPy rules): stride 0 where this
  /// view has size 1.
  HbmView broadcastTo(llvm::ArrayRef<int64_t> shape) const;
  /// The view as `shape` (same element count) without moving data, when
  /// its strides allow: every run of dimensions that merges steps through
  /// memory as one. A split of a strided view (heads out of a slice of the
  /// fused QKV projection) always does.
  std::optional<HbmView> reshaped(llvm::ArrayRef<int64_t> shape) const;
  /// The view with dimension i taken from dimension permutation[i].
  HbmView transposed(llvm::ArrayRef<int64_t> permutation) const;
  /// The same elements of the same buffer in the same order.
  bool operator==(const HbmView &other) const;
  /// The same elements of the same buffer in the same row-major order,
  /// whatever the two shapes (a value and a reshape of it that moves
  /// nothing).
  bool sameElements(const HbmView &other) const;
  static HbmView whole(mlir::Value buffer);
};

/// What a kgraph value is at the tile level: a view of HBM, or a splat
/// constant that instructions take as an immediate.
struct TensorOperand {
  std::optional<double> immediate;
  HbmView view;
};

/// Row-major strides of `shape`.
Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape);

/// The device dtype of a graph element type: f32, bf16, f16 as they are;
/// integers as i32; i1 as f32 (0.0 or 1.0).
isa::DType deviceType(mlir::Type elementType);

/// One dimension of an HBM access's free axis, in elements.
struct FreeDim {
  int64_t stride = 1, size = 1;
};

struct Tile {
  mlir::Value buffer; // memref in "sbuf" or "psum"
  isa::DType dtype = isa::DType::F32;
  int64_t partition = 0, rows = 0; // partitions [partition, partition + rows)
  int64_t offset = 0;              // bytes into each partition
  int64_t cols = 0;
  int64_t freeStride = 1; // 0 reads one element per partition, broadcast
  /// > 0: each stored element is read `run` times in a row, so the tile
  /// holds cols / run elements per partition (a row's statistic against
  /// several short rows on one partition).
  int64_t run = 0;

  /// The columns [col, col + n) of this tile.
  Tile columns(int64_t col, int64_t n) const;
  Tile withRows(int64_t first, int64_t n) const;
};

/// A tile's elements read with a free axis of several dimensions (a
/// convolution's window over an input band): in each partition, from
/// element `at` on, `free` (stride, size) outermost first.
struct TileWindow {
  Tile tile;
  int64_t at = 0;
  llvm::SmallVector<FreeDim, 2> free;
};

class TileBuilder {
public:
  TileBuilder(mlir::OpBuilder &builder, mlir::Location loc,
              const target::TargetDescription &target)
      : b(builder), loc(loc), target(target) {}

  /// A fresh [rows x cols] tile in SBUF or PSUM.
  Tile tile(isa::Memory memory, isa::DType dtype, int64_t rows, int64_t cols);
  /// A fresh HBM buffer of `shape`.
  mlir::Value hbm(llvm::ArrayRef<int64_t> shape, isa::DType dtype,
                  llvm::StringRef name = "");

  /// The tile's access pattern; with `segment`, its columns as runs of
  /// `segment` (an inner free dimension that tensor_reduce folds).
  kisa::AccessPatternAttr pattern(const Tile &tile, int64_t segment = 0);
  /// The HBM rectangle: `rows` rows `rowStride` apart from element `offset`,
  /// each `cols` elements `colStride` apart.
  kisa::AccessPatternAttr pattern(const HbmView &view, int64_t offset,
                                  int64_t rows, int64_t rowStride,
                                  int64_t cols, int64_t colStride);
  /// The same with the free axis over several dimensions (stride, size),
  /// outermost first: a tile's contiguous columns in that order.
  kisa::AccessPatternAttr pattern(const HbmView &view, int64_t offset,
                                  int64_t rows, int64_t rowStride,
                                  llvm::ArrayRef<FreeDim> free);

  /// Emits `ktile.<mnemonic>` on `buffers` (destination first) with their
  /// access patterns and the op's other fields.
  mlir::Operation *emit(llvm::StringRef mnemonic,
                        llvm::ArrayRef<std::pair<mlir::Value,
                                                 kisa::AccessPatternAttr>>
                            operands,
                        llvm::ArrayRef<mlir::NamedAttribute> fields = {});

  void load(const Tile &dst, const HbmView &view, int64_t offset,
            int64_t rowStride, int64_t colStride);
  void store(const HbmView &view, int64_t offset, int64_t rowStride,
             int64_t colStride, const Tile &src);
  /// Loads and stores whose HBM side spans several free dimensions.
  void load(const Tile &dst, const HbmView &view, int64_t offset,
            int64_t rowStride, llvm::ArrayRef<FreeDim> free);
  void store(const HbmView &view, int64_t offset, int64_t rowStride,
             llvm::ArrayRef<FreeDim> free, const Tile &src);
  void copy(const Tile &dst, const Tile &src);
  void activation(const Tile &dst, const Tile &src, llvm::StringRef func,
                  double scale = 1.0, double bias = 0.0);
  /// The same, also summing each partition's results into `rowSums`
  /// ([rows x 1], f32) as ScalarE writes them.
  void activationWithRowSums(const Tile &dst, const Tile &src,
                             llvm::StringRef func, const Tile &rowSums);
  void tensorTensor(const Tile &dst, const Tile &lhs, const Tile &rhs,
                    llvm::StringRef op);
  void tensorScalar(const Tile &dst, const Tile &src, llvm::StringRef op0,
                    double scalar0, llvm::StringRef op1 = "",
                    double scalar1 = 0.0);
  /// The same with one scalar per partition, `scalars` one element per
  /// partition (a row statistic, a runtime scalar loaded once): the first
  /// scalar when `first`, (src op0 s[p]) op1 other; else the second,
  /// (src op0 other) op1 s[p].
  void tensorScalar(const Tile &dst, const Tile &src, llvm::StringRef op0,
                    llvm::StringRef op1, const Tile &scalars, bool first,
                    double other = 0.0);
  /// Folds each run of `segment` columns of `src` (all of them when 0) into
  /// one column of `dst`.
  void reduce(const Tile &dst, const Tile &src, llvm::StringRef op,
              int64_t segment = 0);
  void memset(const Tile &dst, double value);
  void iota(const Tile &dst, int64_t base, int64_t partitionStep,
            int64_t freeStep);
  /// dst = (base + partitionStep * p + freeStep * i compare 0) ? src : fill.
  void affineSelect(const Tile &dst, const Tile &src, llvm::StringRef compare,
                    double fill, int64_t base, int64_t partitionStep,
                    int64_t freeStep);
  /// Uniform numbers of the counters `counter + partitionStep * p +
  /// freeStep * i` under each partition's seed (an i32 [rows x 1] tile);
  /// with `group`, the columns are runs of that many (which must tile
  /// them) and the counter steps `groupStep` more from one run to the next.
  void random(const Tile &dst, const Tile &seed, int64_t counter,
              int64_t partitionStep, int64_t freeStep, int64_t group = 0,
              int64_t groupStep = 0);
  /// Row p of `dst` from `view` at `offset + indices[p] * indexStride`
  /// elements, `free` along it; indices (i32, one per partition) must lie
  /// in [0, bound).
  void gather(const Tile &dst, const HbmView &view, int64_t offset,
              llvm::ArrayRef<FreeDim> free, const Tile &indices,
              int64_t indexStride, int64_t bound);
  /// Row p of `src` to `view` at `offset + indices[p] * indexStride`
  /// elements, `free` along it (the gather's inverse; of two partitions
  /// with one index the later one's row stays).
  void scatter(const HbmView &view, int64_t offset,
               llvm::ArrayRef<FreeDim> free, const Tile &src,
               const Tile &indices, int64_t indexStride, int64_t bound);
  void matmul(const Tile &dst, const Tile &stationary, const Tile &moving,
              bool accumulate);
  void transpose(const Tile &dst, const Tile &src);
  /// The same with a window for the moving operand, the transposed source
  /// or the load's destination.
  kisa::AccessPatternAttr pattern(const TileWindow &window);
  void matmul(const Tile &dst, const Tile &stationary,
              const TileWindow &moving, bool accumulate);
  void tensorScalar(const Tile &dst, const TileWindow &src,
                    llvm::StringRef op0, const Tile &scalars);
  void tensorTensor(const Tile &dst, const Tile &lhs, const TileWindow &rhs,
                    llvm::StringRef op);
  void transpose(const Tile &dst, const TileWindow &src);
  void load(const TileWindow &dst, const HbmView &view, int64_t offset,
            int64_t rowStride, llvm::ArrayRef<FreeDim> free);
  /// `sourceRows` rows of the HBM pattern, `rowStride` apart, into `dst`
  /// element for element in order: a source row may fill several of its
  /// partitions (a convolution's weights, a channel's taps stacked).
  void loadSpread(const Tile &dst, const HbmView &view, int64_t offset,
                  int64_t sourceRows, int64_t rowStride,
                  llvm::ArrayRef<FreeDim> free);
  /// An on-chip copy by DMA, the way other than TensorE for data to change
  /// partitions: `src`'s elements in order (partition by partition, its
  /// free dims within each) fill `dst`'s, which may have other partitions.
  void dmaCopy(const Tile &dst, const TileWindow &src);

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// Where the ops built next come from: the kgraph op being lowered, so
  /// that diagnostics and profiles of the tile program name it.
  void setLocation(mlir::Location l) { loc = l; }
  const target::TargetDescription &targetDescription() const { return target; }

private:
  void tensorScalarByPartition(const Tile &dst, mlir::Value src,
                               kisa::AccessPatternAttr srcPattern,
                               llvm::StringRef op0, llvm::StringRef op1,
                               const Tile &scalars, bool first, double other);

  mlir::OpBuilder &b;
  mlir::Location loc;
  const target::TargetDescription &target;
};

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_TILEBUILDER_H
