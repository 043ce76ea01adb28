//===- ConvolutionLowering.h - convolutions on the engines -----*- C++ -*-===//
//
// What the convolution lowerings share (see LowerConvolution.cpp for how a
// convolution is tiled): the geometry, the blocks of output positions and
// the input bands they read, and ConvLowering, whose TensorE paths are in
// LowerConvolution.cpp (taps stacked on the partitions in
// ConvolutionTapStacks.cpp), its VectorE path for depthwise convolutions in
// LowerDepthwiseConvolution.cpp and the parts both use (bands, stores,
// per-channel sums, epilogues) in ConvolutionBlocks.cpp. Private to the
// tile passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_CONVOLUTIONLOWERING_H
#define KILN_PASSES_TILE_CONVOLUTIONLOWERING_H

#include "passes/tile/Lowering.h"

#include "llvm/ADT/DenseMap.h"

namespace kiln::tile_passes::convolution {

constexpr int64_t kPartitions = 128;
constexpr int64_t kBankColumns = 512; // f32 columns of one PSUM bank
constexpr int64_t kMinBlocks = 4;      // of whole images, where the batch allows
/// Positions a group of weight-gradient blocks loads in one transfer each:
/// its output gradient is then a [128 x 512] bf16 tile, 128 KiB.
constexpr int64_t kGroupPositions = 512;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// Channels-first strides as [n, c, row, column] (1-d: rows of one).
struct Strides4 {
  int64_t n = 0, c = 0, row = 0, col = 0;
  explicit Strides4(const HbmView &v) {
    n = v.strides[0];
    c = v.strides[1];
    col = v.strides.back();
    row = v.strides.size() == 4 ? v.strides[2] : 0;
  }
};

/// out[n, k, oy, ox] = sum over c in k's group and taps (ry, rx) of
/// band(n, c)[oy * stride + ry * dilation][ox * stride + rx * dilation] .
/// weight(k, c, ry, rx), where band(n, c) holds input element (iy, ix) at
/// (padLo + iy * spacing) in each dim and zeros elsewhere.
struct ConvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  int64_t in[2] = {1, 1}, out[2] = {1, 1};
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t padLo[2] = {0, 0}, spacing[2] = {1, 1};
  int64_t taps() const { return kernel[0] * kernel[1]; }
  int64_t inPerGroup() const { return inChannels / groups; }
  int64_t outPerGroup() const { return outChannels / groups; }
};

/// Where a convolution's weights lie: element (input channel c, output
/// channel k, tap) of group g at `base(g) + c * inStride + k * outStride`
/// plus the tap's offset; `flipped` reads tap t as tap (taps - 1 - t).
struct WeightLayout {
  HbmView view;
  int64_t inStride = 0, outStride = 0, groupStride = 0;
  int64_t tapStride[2] = {0, 0};
  bool flipped = false;
};

/// Channel tiles [first, first + size) of `count` channels, 128 a tile.
struct ChannelTile {
  int64_t first, size;
};
llvm::SmallVector<ChannelTile> channelTiles(int64_t count,
                                            int64_t limit = kPartitions);

/// A block of output positions: rows [row, row + rows), columns
/// [col, col + cols) of images [n, n + images). A block spans several
/// images only when each holds the whole image, so that a small feature
/// map still fills a PSUM bank (or the partitions) with one instruction.
struct PixelBlock {
  int64_t n, images, row, rows, col, cols;
  int64_t pixels() const { return images * rows * cols; }
};

/// The blocks of at most `limit` output positions covering the batch,
/// image by image.
llvm::SmallVector<PixelBlock> pixelBlocks(const ConvGeometry &g,
                                          int64_t limit);

/// Consecutive blocks whose input band and output gradient load together,
/// `span` covering them all: the weight gradient's blocks hold at most 128
/// positions (its contraction), too few for a transfer each to be worth
/// its fixed cost.
struct BlockGroup {
  PixelBlock span;
  llvm::SmallVector<PixelBlock, 4> blocks;
};

/// `blocks` (pixelBlocks') in groups of at most `limit` positions: rows
/// that follow each other in one image, or whole images that follow each
/// other (`rows` x `cols` is the whole map).
llvm::SmallVector<BlockGroup> groupBlocks(llvm::ArrayRef<PixelBlock> blocks,
                                          int64_t rows, int64_t cols,
                                          int64_t limit);

/// The free dims of a block's positions in a channels-first buffer (image
/// stride `image`, row stride `row`, column stride `col`); the image dim
/// only when the block spans several.
llvm::SmallVector<FreeDim, 3> blockDims(const PixelBlock &block, int64_t image,
                                        FreeDim row, FreeDim col);

/// Where a block of channels from `channel` on starts in a channels-first
/// view, and the free dims of its positions there.
int64_t blockOffset(const HbmView &view, int64_t channel,
                    const PixelBlock &block);
llvm::SmallVector<FreeDim, 3> blockFree(const HbmView &view,
                                        const PixelBlock &block);

/// An input band in SBUF: the band rows and columns a block's windows
/// read, from band position (row0, col0) on.
struct Band {
  Tile tile;
  int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  int64_t image() const { return rows * cols; } // elements of one image
};

/// Kernel rows [row0, row0 + rows) whose taps one matmul contracts
/// together. With few input channels a tap's matmul would use few of
/// TensorE's rows, so each channel's band is repeated once per tap of the
/// stack on the partitions, in the weight's order (channel, kernel row,
/// kernel column): a 7x7 stem on 3 channels runs as two matmuls a block
/// (126 and 21 partitions), not 49 of three partitions each.
struct TapStack {
  int64_t row0 = 0, rows = 0;
};

/// A convolution's sums per output channel, folded as its blocks leave
/// PSUM: the activation evacuating a block writes its sums into a column of
/// their own, and the columns fold once the blocks are done (independent
/// folds, not a chain of additions). Every kFoldColumns columns fold into a
/// partial column first, so the tile stays small however many blocks.
class ChannelSumColumns {
public:
  ChannelSumColumns(TileBuilder &tb, int64_t channels, int64_t blocks)
      : tb(tb), channels(channels), blocks(blocks) {
    int64_t folds = ceilDiv(blocks, kFoldColumns);
    if (folds > 1) {
      partials = tb.tile(isa::Memory::Sbuf, isa::DType::F32, channels, folds);
    }
  }

  /// The column the next block's sums go to.
  Tile next() {
    if (!columns.buffer || used == columns.cols) {
      if (columns.buffer) {
        fold(partials.columns(folded++, 1));
      }
      columns = tb.tile(isa::Memory::Sbuf, isa::DType::F32, channels,
                        std::min(kFoldColumns, blocks - done));
      used = 0;
    }
    ++done;
    return columns.columns(used++, 1);
  }

  /// [channels x 1]: the sums over every block.
  Tile total() {
    if (!partials.buffer && columns.cols == 1) {
      return columns; // one block: its sums are the total
    }
    Tile sum = tb.tile(isa::Memory::Sbuf, isa::DType::F32, channels, 1);
    if (!partials.buffer) {
      fold(sum);
      return sum;
    }
    fold(partials.columns(folded++, 1));
    tb.reduce(sum, partials, "add");
    return sum;
  }

private:
  static constexpr int64_t kFoldColumns = 512;

  void fold(const Tile &into) {
    if (columns.cols == 1) {
      tb.copy(into, columns);
    } else {
      tb.reduce(into, columns, "add");
    }
  }

  TileBuilder &tb;
  int64_t channels, blocks;
  int64_t done = 0, used = 0, folded = 0;
  Tile columns, partials;
};

/// The epilogue's operands as each block of an output-channel tile reads
/// them: immediates, and per-channel values as one column each.
using EpilogueTiles = llvm::DenseMap<mlir::Value, TileArg>;

class ConvLowering {
public:
  ConvLowering(TileBuilder &tb, const ConvGeometry &g, isa::DType operand,
               int64_t sbufBudget, const ConvEpilogue *epilogue = nullptr)
      : tb(tb), g(g), operand(operand), sbufBudget(sbufBudget),
        epilogue(epilogue) {}

  /// out = conv(input, weights), `out` [N, K, O...]; its sums per output
  /// channel into each of `channelSums` ([K] elements, any shape).
  void apply(const HbmView &input, const WeightLayout &weights,
             const HbmView &out, llvm::ArrayRef<HbmView> channelSums);
  /// grad_weight = the weight gradient of the forward convolution `g`
  /// from its input and output gradient.
  void weightGrad(const HbmView &input, const HbmView &gradOut,
                  const HbmView &gradWeight);
  /// Whether each group has one input and one output channel (a
  /// depthwise convolution), which VectorE computes, channels on the
  /// partitions (LowerDepthwiseConvolution.cpp).
  bool depthwise() const;
  /// Failure when an epilogue op had no form on the engines (its error
  /// emitted).
  mlir::LogicalResult status() const { return mlir::success(lowered); }

private:
  void applyDepthwise(const HbmView &input, const WeightLayout &weights,
                      const HbmView &out, llvm::ArrayRef<HbmView> channelSums);
  void weightGradDepthwise(const HbmView &input, const HbmView &gradOut,
                           const HbmView &gradWeight);
  void finishBlock(const HbmView &out, int64_t group, const PixelBlock &block,
                   const ChannelTile &ot, const Tile &acc,
                   ChannelSumColumns *sums, const EpilogueTiles &channelInputs);
  Band loadBand(const HbmView &input, int64_t channel, int64_t channels,
                const PixelBlock &block);
  Tile loadWeights(const WeightLayout &w, int64_t group, const ChannelTile &in,
                   const ChannelTile &out);
  /// Tap `tap`'s window of `block` in `band`, loaded for `span` (a group
  /// of blocks holding this one) or, without one, for the block itself.
  TileWindow window(const Band &band, int64_t tap, const PixelBlock &block,
                    const PixelBlock *span = nullptr) const;
  /// Where `block` starts in a band loaded for `span`, in elements.
  int64_t blockOrigin(const Band &band, const PixelBlock &span,
                      const PixelBlock &block) const;
  /// The block's matmuls, stationary[i] times moving[i] accumulated.
  void applyBlock(const HbmView &out, int64_t group, const PixelBlock &block,
                  const ChannelTile &ot, llvm::ArrayRef<Tile> stationary,
                  llvm::ArrayRef<TileWindow> moving, ChannelSumColumns *sums,
                  const EpilogueTiles &channelInputs);
  /// The weights of output-channel tile `ot`: a tile per tap stack, or per
  /// input-channel tile with every tap side by side.
  llvm::SmallVector<Tile> loadBlockWeights(const WeightLayout &w,
                                           int64_t group,
                                           const ChannelTile &ot,
                                           llvm::ArrayRef<TapStack> stacks);
  /// A block's moving operands: a stacked band per tap stack, or a window
  /// per input-channel tile and tap.
  llvm::SmallVector<TileWindow> movingOperands(llvm::ArrayRef<Band> bands,
                                               llvm::ArrayRef<TapStack> stacks,
                                               const PixelBlock &block);
  /// The stationary operands matching movingOperands' from the weight
  /// tiles of loadBlockWeights.
  llvm::SmallVector<Tile> stationaryOperands(llvm::ArrayRef<Tile> weights,
                                             const ChannelTile &ot,
                                             bool stacked, bool flipped) const;
  /// The stacks of kernel rows whose taps share a matmul: when a group's
  /// input channels times the kernel's width fit the partitions, and the
  /// kernel has more than one tap; none otherwise.
  llvm::SmallVector<TapStack> tapStacks() const;
  /// [channels x stack's taps, out.size]: a stack's weights on the
  /// partitions in the stacked band's order.
  Tile loadStackedWeights(const WeightLayout &w, int64_t group,
                          const TapStack &stack, const ChannelTile &out);
  /// [channels x stack's taps, block's positions]: each tap's window of
  /// `band` on partitions of its own (one DMA an image).
  Tile stackBand(const Band &band, const TapStack &stack,
                 const PixelBlock &block, const PixelBlock &span);
  void weightGradStacked(const HbmView &input, const HbmView &gradOut,
                         const HbmView &gradWeight,
                         llvm::ArrayRef<TapStack> stacks);
  void storeStackedWeightGrad(const HbmView &gradWeight, int64_t group,
                              const ChannelTile &ot, const TapStack &stack,
                              const Tile &acc);
  void storeBlock(const HbmView &out, int64_t group, const PixelBlock &block,
                  const ChannelTile &ot, const Tile &tile);
  EpilogueTiles channelInputs(int64_t group, const ChannelTile &ot);
  void runEpilogue(int64_t group, const PixelBlock &block,
                   const ChannelTile &ot, const Tile &value,
                   EpilogueTiles tiles);
  /// The epilogue's output shape ([N, K, S...]).
  llvm::ArrayRef<int64_t> epilogueShape() const;
  void storeChannelSums(llvm::ArrayRef<HbmView> channelSums, int64_t channel,
                        const Tile &sums);
  /// The weight gradient's blocks of at most 128 positions (its
  /// contraction), in groups that load together.
  llvm::SmallVector<BlockGroup> weightGradGroups() const {
    return groupBlocks(pixelBlocks(g, kPartitions), g.out[0], g.out[1],
                       kGroupPositions);
  }
  /// [channels, span's positions]: a group's output gradient, one DMA.
  Tile loadGradient(const HbmView &gradOut, int64_t channel,
                    const ChannelTile &ot, const PixelBlock &span);
  /// [block's positions, channels]: `block`'s columns of a group's output
  /// gradient transposed, its positions on the partitions.
  Tile transposedGradient(const Tile &gradient, const PixelBlock &span,
                          const PixelBlock &block);
  void storeWeightGrad(const HbmView &gradWeight, int64_t group,
                       const ChannelTile &ot, int64_t firstIn, int64_t tap,
                       const Tile &acc);

  TileBuilder &tb;
  const ConvGeometry &g;
  isa::DType operand;
  int64_t sbufBudget;
  const ConvEpilogue *epilogue;
  bool lowered = true;
};

} // namespace kiln::tile_passes::convolution

#endif // KILN_PASSES_TILE_CONVOLUTIONLOWERING_H
