//===- LowerConvolution.cpp - convolutions and their gradients on TensorE ===//
//
// A convolution runs as matmuls that accumulate over kernel taps and
// input-channel tiles in PSUM, with channels on the partitions:
//
//   out[k, pixels] += weight_tap[c, k]^T . band[c, window(tap, pixels)]
//
// Each block of output pixels (at most 512, one PSUM bank) reads a band of
// the input: the rows and columns its windows cover, loaded once into SBUF
// inside a zero field so that padding reads zeros. Each tap's moving
// operand is an access pattern over that band (rows `stride` apart,
// columns `stride` apart, shifted by the tap), never a copy: no im2col
// tensor exists anywhere. The weights of a tile of input and output
// channels load once, all taps side by side.
//
// The input gradient is the transposed convolution: the same kernel on
// the output gradient spread `stride` apart in its band (zeros between),
// with the taps flipped and the weight's channel roles swapped. The weight
// gradient contracts over pixels, which must lie on the partitions: per
// block of 128 pixels the output gradient and each tap's input window are
// transposed on TensorE, and their product accumulates in PSUM over the
// whole batch.
//
// Groups run one after another, each with its own channel tiles, so every
// tile starts at partition 0.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ElementwiseLoop.h"
#include "passes/tile/FunctionLowering.h"

#include "dialects/kgraph/KGraphWindow.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

constexpr int64_t kPartitions = 128;
constexpr int64_t kBankColumns = 512; // f32 columns of one PSUM bank
constexpr int64_t kMinBlocks = 4;      // of whole images, where the batch allows

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t floorDiv(int64_t a, int64_t b) {
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

/// Spatial sizes as two dims ([W] as [1, W]).
void spatial2d(llvm::ArrayRef<int64_t> values, int64_t (&out)[2]) {
  out[0] = values.size() == 2 ? values[0] : 1;
  out[1] = values.back();
}

/// The geometry of kgraph.conv (input x, output y) from its window.
ConvGeometry forwardGeometry(const Window &w, llvm::ArrayRef<int64_t> x,
                             llvm::ArrayRef<int64_t> y, int64_t groups) {
  ConvGeometry g;
  g.batch = x[0];
  g.inChannels = x[1];
  g.outChannels = y[1];
  g.groups = groups;
  spatial2d(x.drop_front(2), g.in);
  spatial2d(y.drop_front(2), g.out);
  Window w2 = w.twoDimensional();
  for (int d = 0; d < 2; ++d) {
    g.kernel[d] = w2.kernel[d];
    g.stride[d] = w2.stride[d];
    g.dilation[d] = w2.dilation[d];
    g.padLo[d] = w2.padding[d];
  }
  return g;
}

/// The input gradient as a convolution of the output gradient: stride 1
/// over the gradient spread `stride` apart, the kernel flipped, padded so
/// that input position i reads the output positions whose taps read it.
ConvGeometry inputGradGeometry(const ConvGeometry &f) {
  ConvGeometry g = f;
  g.inChannels = f.outChannels;
  g.outChannels = f.inChannels;
  for (int d = 0; d < 2; ++d) {
    g.in[d] = f.out[d];
    g.out[d] = f.in[d];
    g.spacing[d] = f.stride[d];
    g.stride[d] = 1;
    g.padLo[d] = (f.kernel[d] - 1) * f.dilation[d] - f.padLo[d];
  }
  return g;
}

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
                                            int64_t limit = kPartitions) {
  llvm::SmallVector<ChannelTile> tiles;
  for (int64_t c = 0; c < count; c += limit) {
    tiles.push_back({c, std::min(limit, count - c)});
  }
  return tiles;
}

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
                                          int64_t limit) {
  int64_t cols = std::min(g.out[1], limit);
  int64_t rows = std::min(g.out[0], std::max<int64_t>(1, limit / cols));
  llvm::SmallVector<PixelBlock> blocks;
  if (rows == g.out[0] && cols == g.out[1]) {
    // At least kMinBlocks blocks where the batch allows, so that loading
    // one block's band overlaps another's matmuls.
    int64_t images = std::max<int64_t>(
        1, std::min(limit / (rows * cols), ceilDiv(g.batch, kMinBlocks)));
    for (int64_t n = 0; n < g.batch; n += images) {
      blocks.push_back({n, std::min(images, g.batch - n), 0, rows, 0, cols});
    }
    return blocks;
  }
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t r = 0; r < g.out[0]; r += rows) {
      for (int64_t c = 0; c < g.out[1]; c += cols) {
        blocks.push_back({n, 1, r, std::min(rows, g.out[0] - r), c,
                          std::min(cols, g.out[1] - c)});
      }
    }
  }
  return blocks;
}

/// The free dims of a block's positions in a channels-first buffer (image
/// stride `image`, row stride `row`, column stride `col`); the image dim
/// only when the block spans several.
llvm::SmallVector<FreeDim, 3> blockDims(const PixelBlock &block, int64_t image,
                                        FreeDim row, FreeDim col) {
  llvm::SmallVector<FreeDim, 3> dims;
  if (block.images > 1) {
    dims.push_back(FreeDim{image, block.images});
  }
  dims.push_back(row);
  dims.push_back(col);
  return dims;
}

/// An input band in SBUF: the band rows and columns a block's windows
/// read, from band position (row0, col0) on.
struct Band {
  Tile tile;
  int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  int64_t image() const { return rows * cols; } // elements of one image
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
using EpilogueTiles = llvm::DenseMap<Value, TileArg>;

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

private:
  Band loadBand(const HbmView &input, int64_t channel, int64_t channels,
                const PixelBlock &block);
  Tile loadWeights(const WeightLayout &w, int64_t group, const ChannelTile &in,
                   const ChannelTile &out);
  TileWindow window(const Band &band, int64_t tap,
                    const PixelBlock &block) const;
  void applyBlock(const HbmView &input, const HbmView &out, int64_t group,
                  const PixelBlock &block, const ChannelTile &ot,
                  llvm::ArrayRef<Band> bands, llvm::ArrayRef<Tile> weights,
                  bool flipped, ChannelSumColumns *sums,
                  const EpilogueTiles &channelInputs);
  void storeBlock(const HbmView &out, int64_t group, const PixelBlock &block,
                  const ChannelTile &ot, const Tile &tile);
  EpilogueTiles channelInputs(int64_t group, const ChannelTile &ot);
  void runEpilogue(int64_t group, const PixelBlock &block,
                   const ChannelTile &ot, const Tile &value,
                   EpilogueTiles tiles);
  void storeChannelSums(llvm::ArrayRef<HbmView> channelSums, int64_t channel,
                        const Tile &sums);
  Tile transposedGradient(const HbmView &gradOut, int64_t channel,
                          const ChannelTile &ot, const PixelBlock &block);
  void storeWeightGrad(const HbmView &gradWeight, int64_t group,
                       const ChannelTile &ot, int64_t firstIn, int64_t tap,
                       const Tile &acc);

  TileBuilder &tb;
  const ConvGeometry &g;
  isa::DType operand;
  int64_t sbufBudget;
  const ConvEpilogue *epilogue;
};

Band ConvLowering::loadBand(const HbmView &input, int64_t channel,
                            int64_t channels, const PixelBlock &block) {
  Band band;
  band.row0 = block.row * g.stride[0];
  band.col0 = block.col * g.stride[1];
  band.rows = (block.rows - 1) * g.stride[0] +
              (g.kernel[0] - 1) * g.dilation[0] + 1;
  band.cols = (block.cols - 1) * g.stride[1] +
              (g.kernel[1] - 1) * g.dilation[1] + 1;
  band.tile = tb.tile(isa::Memory::Sbuf, operand, channels,
                      block.images * band.image());
  // The input elements inside the band, per dim: [first, first + count).
  int64_t first[2], count[2], start[2] = {band.row0, band.col0},
                                  size[2] = {band.rows, band.cols};
  bool covered = true;
  for (int d = 0; d < 2; ++d) {
    first[d] = std::max<int64_t>(0, ceilDiv(start[d] - g.padLo[d],
                                            g.spacing[d]));
    int64_t last = std::min(
        g.in[d] - 1, floorDiv(start[d] + size[d] - 1 - g.padLo[d],
                              g.spacing[d]));
    count[d] = std::max<int64_t>(0, last - first[d] + 1);
    covered &= g.spacing[d] == 1 && count[d] == size[d];
  }
  if (!covered) {
    tb.memset(band.tile, 0.0);
  }
  if (count[0] == 0 || count[1] == 0) {
    return band;
  }
  Strides4 s(input);
  TileWindow dst{band.tile,
                 (g.padLo[0] + first[0] * g.spacing[0] - band.row0) *
                         band.cols +
                     g.padLo[1] + first[1] * g.spacing[1] - band.col0,
                 blockDims(block, band.image(),
                           FreeDim{g.spacing[0] * band.cols, count[0]},
                           FreeDim{g.spacing[1], count[1]})};
  int64_t offset = input.offset + block.n * s.n + channel * s.c +
                   first[0] * s.row + first[1] * s.col;
  tb.load(dst, input, offset, s.c,
          blockDims(block, s.n, FreeDim{s.row, count[0]},
                    FreeDim{s.col, count[1]}));
  return band;
}

Tile ConvLowering::loadWeights(const WeightLayout &w, int64_t group,
                               const ChannelTile &in, const ChannelTile &out) {
  Tile tile =
      tb.tile(isa::Memory::Sbuf, operand, in.size, g.taps() * out.size);
  int64_t offset = w.view.offset + group * w.groupStride +
                   in.first * w.inStride + out.first * w.outStride;
  // Tap-major: the columns of tap t are [t * out.size, (t + 1) * out.size).
  tb.load(tile, w.view, offset, w.inStride,
          {FreeDim{w.tapStride[0], g.kernel[0]},
           FreeDim{w.tapStride[1], g.kernel[1]},
           FreeDim{w.outStride, out.size}});
  return tile;
}

TileWindow ConvLowering::window(const Band &band, int64_t tap,
                                const PixelBlock &block) const {
  int64_t ry = tap / g.kernel[1], rx = tap % g.kernel[1];
  return TileWindow{band.tile,
                    ry * g.dilation[0] * band.cols + rx * g.dilation[1],
                    blockDims(block, band.image(),
                              FreeDim{g.stride[0] * band.cols, block.rows},
                              FreeDim{g.stride[1], block.cols})};
}

void ConvLowering::applyBlock(const HbmView &input, const HbmView &out,
                              int64_t group, const PixelBlock &block,
                              const ChannelTile &ot,
                              llvm::ArrayRef<Band> bands,
                              llvm::ArrayRef<Tile> weights, bool flipped,
                              ChannelSumColumns *sums,
                              const EpilogueTiles &channelInputs) {
  Tile acc = tb.tile(isa::Memory::Psum, isa::DType::F32, ot.size,
                     block.pixels());
  bool first = true;
  for (auto [band, w] : llvm::zip(bands, weights)) {
    for (int64_t tap = 0; tap < g.taps(); ++tap) {
      int64_t stored = flipped ? g.taps() - 1 - tap : tap;
      tb.matmul(acc, w.columns(stored * ot.size, ot.size),
                window(band, tap, block), /*accumulate=*/!first);
      first = false;
    }
  }
  isa::DType type = epilogue ? epilogue->valueType : out.dtype;
  Tile result = tb.tile(isa::Memory::Sbuf, type, ot.size, block.pixels());
  if (sums) {
    tb.activationWithRowSums(result, acc, "identity", sums->next());
  } else {
    tb.copy(result, acc);
  }
  if (out.buffer) {
    storeBlock(out, group, block, ot, result);
  }
  if (epilogue) {
    runEpilogue(group, block, ot, result, channelInputs);
  }
}

/// A block's tile of an output-shaped view, [channels x positions].
void ConvLowering::storeBlock(const HbmView &out, int64_t group,
                              const PixelBlock &block, const ChannelTile &ot,
                              const Tile &tile) {
  Strides4 s(out);
  int64_t offset = out.offset + block.n * s.n +
                   (group * g.outPerGroup() + ot.first) * s.c +
                   block.row * s.row + block.col * s.col;
  tb.store(out, offset, s.c,
           blockDims(block, s.n, FreeDim{s.row, block.rows},
                     FreeDim{s.col, block.cols}),
           tile);
}

/// The epilogue's inputs that every block of channel tile `ot` reads alike:
/// immediates, and values that vary by channel alone (a bias, batch norm's
/// statistics), loaded once as a column read with stride 0.
EpilogueTiles ConvLowering::channelInputs(int64_t group,
                                          const ChannelTile &ot) {
  EpilogueTiles tiles;
  if (!epilogue) {
    return tiles;
  }
  int64_t channel = group * g.outPerGroup() + ot.first;
  for (const auto &[value, operand] : epilogue->inputs) {
    if (operand.immediate) {
      tiles[value] = TileArg{operand.immediate, Tile{}};
      continue;
    }
    Strides4 s(operand.view.broadcastTo(epilogue->shape));
    if (s.n == 0 && s.row == 0 && s.col == 0) {
      tiles[value] = TileArg{
          std::nullopt, loadInput(tb, operand.view, operand.view.offset +
                                                        channel * s.c,
                                  s.c, {FreeDim{0, 1}}, ot.size, 1)};
    }
  }
  return tiles;
}

/// The epilogue's ops on one block (`value`: the output's tile), its other
/// inputs read in the block's layout, and the values read after it stored.
void ConvLowering::runEpilogue(int64_t group, const PixelBlock &block,
                               const ChannelTile &ot, const Tile &value,
                               EpilogueTiles tiles) {
  int64_t rows = ot.size, cols = block.pixels();
  for (auto &[v, arg] : tiles) {
    arg.tile.cols = cols;
  }
  tiles[epilogue->value] = TileArg{std::nullopt, value};
  for (const auto &[v, operand] : epilogue->inputs) {
    if (tiles.count(v)) {
      continue;
    }
    HbmView view = operand.view.broadcastTo(epilogue->shape);
    Strides4 s(view);
    int64_t origin = view.offset + block.n * s.n +
                     (group * g.outPerGroup() + ot.first) * s.c +
                     block.row * s.row + block.col * s.col;
    tiles[v] = TileArg{
        std::nullopt,
        loadInput(tb, view, origin, s.c,
                  blockDims(block, s.n, FreeDim{s.row, block.rows},
                            FreeDim{s.col, block.cols}),
                  rows, cols)};
  }
  // Dropout, the one op that numbers its elements, is never planned here.
  (void)emitGroupOps(tb, epilogue->ops, tiles, rows, cols, TileIndex{});
  for (const LoopOutput &out : epilogue->outputs) {
    Tile t = storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows, cols);
    storeBlock(out.dst, group, block, ot, t);
  }
}

void ConvLowering::apply(const HbmView &input, const WeightLayout &weights,
                         const HbmView &out,
                         llvm::ArrayRef<HbmView> channelSums) {
  llvm::SmallVector<ChannelTile> inTiles = channelTiles(g.inPerGroup());
  llvm::SmallVector<ChannelTile> outTiles = channelTiles(g.outPerGroup());
  llvm::SmallVector<PixelBlock> blocks = pixelBlocks(g, kBankColumns);
  // All of a group's weights stay in SBUF when they fit in a quarter of
  // the budget, so the bands load once; otherwise each output-channel
  // tile loads its weights and reads the bands again.
  int64_t weightBytes = static_cast<int64_t>(inTiles.size()) *
                        g.taps() * g.outPerGroup() * isa::dtypeBytes(operand);
  bool weightsStay = weightBytes <= sbufBudget / 4;
  // The output-channel tiles whose weights are in SBUF together: all of
  // them, or one at a time.
  llvm::SmallVector<llvm::SmallVector<ChannelTile>> weightSets;
  for (const ChannelTile &ot : outTiles) {
    if (weightSets.empty() || !weightsStay) {
      weightSets.emplace_back();
    }
    weightSets.back().push_back(ot);
  }
  for (int64_t group = 0; group < g.groups; ++group) {
    for (llvm::ArrayRef<ChannelTile> set : weightSets) {
      std::vector<llvm::SmallVector<Tile>> tiles;
      for (const ChannelTile &ot : set) {
        tiles.emplace_back();
        for (const ChannelTile &it : inTiles) {
          tiles.back().push_back(loadWeights(weights, group, it, ot));
        }
      }
      std::vector<ChannelSumColumns> sums;
      for (const ChannelTile &ot : set) {
        if (!channelSums.empty()) {
          sums.emplace_back(tb, ot.size, static_cast<int64_t>(blocks.size()));
        }
      }
      std::vector<EpilogueTiles> inputs;
      for (const ChannelTile &ot : set) {
        inputs.push_back(channelInputs(group, ot));
      }
      for (const PixelBlock &block : blocks) {
        llvm::SmallVector<Band> bands;
        for (const ChannelTile &it : inTiles) {
          bands.push_back(loadBand(input, group * g.inPerGroup() + it.first,
                                   it.size, block));
        }
        for (auto [i, ot] : llvm::enumerate(set)) {
          applyBlock(input, out, group, block, ot, bands, tiles[i],
                     weights.flipped, sums.empty() ? nullptr : &sums[i],
                     inputs[i]);
        }
      }
      for (auto [ot, columns] : llvm::zip(set, sums)) {
        storeChannelSums(channelSums, group * g.outPerGroup() + ot.first,
                         columns.total());
      }
    }
  }
}

void ConvLowering::storeChannelSums(llvm::ArrayRef<HbmView> channelSums,
                                    int64_t channel, const Tile &sums) {
  for (const HbmView &dst : channelSums) {
    // [K] elements in channel order, whatever unit dims the shape has.
    int64_t stride = dst.strides.front();
    tb.store(dst, dst.offset + channel * stride, stride, {FreeDim{1, 1}},
             sums);
  }
}

/// [pixels, channels]: the output gradient's block, transposed so that its
/// pixels lie on the partitions.
Tile ConvLowering::transposedGradient(const HbmView &gradOut, int64_t channel,
                                      const ChannelTile &ot,
                                      const PixelBlock &block) {
  Strides4 s(gradOut);
  Tile rows = tb.tile(isa::Memory::Sbuf, operand, ot.size, block.pixels());
  tb.load(rows, gradOut,
          gradOut.offset + block.n * s.n + channel * s.c + block.row * s.row +
              block.col * s.col,
          s.c,
          blockDims(block, s.n, FreeDim{s.row, block.rows},
                    FreeDim{s.col, block.cols}));
  Tile flipped =
      tb.tile(isa::Memory::Psum, isa::DType::F32, block.pixels(), ot.size);
  tb.transpose(flipped, rows);
  Tile result = tb.tile(isa::Memory::Sbuf, operand, block.pixels(), ot.size);
  tb.copy(result, flipped);
  return result;
}

void ConvLowering::storeWeightGrad(const HbmView &gradWeight, int64_t group,
                                   const ChannelTile &ot, int64_t firstIn,
                                   int64_t tap, const Tile &acc) {
  Tile result = tb.tile(isa::Memory::Sbuf, gradWeight.dtype, acc.rows,
                        acc.cols);
  tb.copy(result, acc);
  const llvm::SmallVector<int64_t, 4> &st = gradWeight.strides;
  int64_t rowStride = st.size() == 4 ? st[2] : 0;
  int64_t offset = gradWeight.offset +
                   (group * g.outPerGroup() + ot.first) * st[0] +
                   firstIn * st[1] + (tap / g.kernel[1]) * rowStride +
                   (tap % g.kernel[1]) * st.back();
  tb.store(gradWeight, offset, st[0], {FreeDim{st[1], acc.cols}}, result);
}

void ConvLowering::weightGrad(const HbmView &input, const HbmView &gradOut,
                              const HbmView &gradWeight) {
  llvm::SmallVector<ChannelTile> outTiles = channelTiles(g.outPerGroup());
  // The moving operand holds up to four input-channel tiles side by side.
  llvm::SmallVector<ChannelTile> chunks =
      channelTiles(g.inPerGroup(), kBankColumns);
  llvm::SmallVector<PixelBlock> blocks = pixelBlocks(g, kPartitions);
  // Four taps accumulate at a time: four PSUM banks, the rest for the
  // transposes.
  constexpr int64_t kTapsAtOnce = 4;
  for (int64_t group = 0; group < g.groups; ++group) {
    for (const ChannelTile &ot : outTiles) {
      for (const ChannelTile &chunk : chunks) {
        llvm::SmallVector<ChannelTile> inTiles = channelTiles(chunk.size);
        for (int64_t tap0 = 0; tap0 < g.taps(); tap0 += kTapsAtOnce) {
          int64_t taps = std::min(kTapsAtOnce, g.taps() - tap0);
          llvm::SmallVector<Tile> acc;
          for (int64_t t = 0; t < taps; ++t) {
            acc.push_back(tb.tile(isa::Memory::Psum, isa::DType::F32,
                                  ot.size, chunk.size));
          }
          bool first = true;
          for (const PixelBlock &block : blocks) {
            Tile dy = transposedGradient(
                gradOut, group * g.outPerGroup() + ot.first, ot, block);
            llvm::SmallVector<Band> bands;
            for (const ChannelTile &it : inTiles) {
              bands.push_back(loadBand(
                  input, group * g.inPerGroup() + chunk.first + it.first,
                  it.size, block));
            }
            for (int64_t t = 0; t < taps; ++t) {
              Tile x = tb.tile(isa::Memory::Sbuf, operand, block.pixels(),
                               chunk.size);
              for (auto [it, band] : llvm::zip(inTiles, bands)) {
                Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32,
                                       block.pixels(), it.size);
                tb.transpose(flipped, window(band, tap0 + t, block));
                tb.copy(x.columns(it.first, it.size), flipped);
              }
              tb.matmul(acc[t], dy, x, /*accumulate=*/!first);
            }
            first = false;
          }
          for (int64_t t = 0; t < taps; ++t) {
            storeWeightGrad(gradWeight, group, ot, chunk.first, tap0 + t,
                            acc[t]);
          }
        }
      }
    }
  }
}

/// The matmul operand type of a convolution: bf16 when either side is,
/// else f32 (TensorE does not mix f32 with other types).
isa::DType operandType(isa::DType a, isa::DType b) {
  return a == isa::DType::F32 && b == isa::DType::F32 ? isa::DType::F32
                                                      : isa::DType::BF16;
}

/// A [K, C/groups, R...] weight's layout for the forward convolution or,
/// `inputGrad`, the transposed one.
WeightLayout weightLayout(const HbmView &w, const ConvGeometry &forward,
                          bool inputGrad) {
  WeightLayout l;
  l.view = w;
  int64_t outStride = w.strides[0], inStride = w.strides[1];
  l.groupStride = forward.outPerGroup() * outStride;
  l.inStride = inputGrad ? outStride : inStride;
  l.outStride = inputGrad ? inStride : outStride;
  l.tapStride[0] = w.strides.size() == 4 ? w.strides[2] : 0;
  l.tapStride[1] = w.strides.back();
  l.flipped = inputGrad;
  return l;
}

} // namespace

LogicalResult Lowering::lowerConvolution(Operation *op, const HbmView &dst,
                                         llvm::ArrayRef<HbmView> channelSums,
                                         const ConvEpilogue *epilogue) {
  // An operand's view, through a bf16 cast the loads perform (the view is
  // then f32, and the loads round it: the operand type says bf16).
  auto view = [&](Value v) {
    auto [operand, dtype] = matmulOperand(v);
    HbmView loaded = materialize(
        operand, llvm::cast<RankedTensorType>(v.getType()).getShape());
    return std::make_pair(loaded, dtype);
  };
  auto shape = [](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getShape();
  };
  if (auto conv = llvm::dyn_cast<ConvOp>(op)) {
    auto [x, xType] = view(conv.getInput());
    auto [w, wType] = view(conv.getWeight());
    ConvGeometry g = forwardGeometry(windowOf(conv), shape(conv.getInput()),
                                     shape(conv.getOutput()), conv.getGroups());
    ConvLowering(tb, g, operandType(xType, wType), sbufBudget, epilogue)
        .apply(x, weightLayout(w, g, /*inputGrad=*/false), dst, channelSums);
    return success();
  }
  if (auto grad = llvm::dyn_cast<ConvInputGradOp>(op)) {
    auto [dy, dyType] = view(grad.getGradOutput());
    auto [w, wType] = view(grad.getWeight());
    ConvGeometry f =
        forwardGeometry(windowOf(grad), shape(grad.getGradInput()),
                        shape(grad.getGradOutput()), grad.getGroups());
    ConvGeometry g = inputGradGeometry(f);
    ConvLowering(tb, g, operandType(dyType, wType), sbufBudget, epilogue)
        .apply(dy, weightLayout(w, f, /*inputGrad=*/true), dst, channelSums);
    return success();
  }
  auto grad = llvm::cast<ConvWeightGradOp>(op);
  auto [dy, dyType] = view(grad.getGradOutput());
  auto [x, xType] = view(grad.getInput());
  ConvGeometry g = forwardGeometry(windowOf(grad), shape(grad.getInput()),
                                   shape(grad.getGradOutput()),
                                   grad.getGroups());
  ConvLowering(tb, g, operandType(dyType, xType), sbufBudget)
      .weightGrad(x, dy, dst);
  return success();
}

} // namespace kiln::tile_passes
