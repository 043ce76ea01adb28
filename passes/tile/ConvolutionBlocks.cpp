//===- ConvolutionBlocks.cpp - what every convolution lowering shares -----===//
//
// The blocks of output positions and the input bands they read, the
// stores of a block's tiles, the per-channel sums folded as blocks leave
// their accumulators, and the epilogue group run on each block (see
// ConvolutionLowering.h).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ConvolutionLowering.h"

#include "passes/tile/ElementwiseLoop.h"

using namespace mlir;

namespace kiln::tile_passes::convolution {

llvm::SmallVector<ChannelTile> channelTiles(int64_t count,
                                            int64_t limit) {
  llvm::SmallVector<ChannelTile> tiles;
  for (int64_t c = 0; c < count; c += limit) {
    tiles.push_back({c, std::min(limit, count - c)});
  }
  return tiles;
}

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

llvm::SmallVector<BlockGroup> groupBlocks(llvm::ArrayRef<PixelBlock> blocks,
                                          int64_t rows, int64_t cols,
                                          int64_t limit) {
  auto whole = [&](const PixelBlock &b) {
    return b.row == 0 && b.rows == rows && b.col == 0 && b.cols == cols;
  };
  auto follows = [&](const PixelBlock &span, const PixelBlock &b) {
    if (span.pixels() + b.pixels() > limit) {
      return false;
    }
    if (whole(span) && whole(b)) {
      return b.n == span.n + span.images;
    }
    return span.images == 1 && b.images == 1 && b.n == span.n &&
           b.col == span.col && b.cols == span.cols &&
           b.row == span.row + span.rows;
  };
  llvm::SmallVector<BlockGroup> groups;
  for (const PixelBlock &b : blocks) {
    if (!groups.empty() && follows(groups.back().span, b)) {
      PixelBlock &span = groups.back().span;
      if (whole(span) && whole(b)) {
        span.images += b.images;
      } else {
        span.rows += b.rows;
      }
      groups.back().blocks.push_back(b);
      continue;
    }
    groups.push_back({b, {b}});
  }
  return groups;
}

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
                                const PixelBlock &block,
                                const PixelBlock *span) const {
  int64_t ry = tap / g.kernel[1], rx = tap % g.kernel[1];
  int64_t origin = span ? blockOrigin(band, *span, block) : 0;
  return TileWindow{band.tile,
                    origin + ry * g.dilation[0] * band.cols +
                        rx * g.dilation[1],
                    blockDims(block, band.image(),
                              FreeDim{g.stride[0] * band.cols, block.rows},
                              FreeDim{g.stride[1], block.cols})};
}

int64_t ConvLowering::blockOrigin(const Band &band, const PixelBlock &span,
                                  const PixelBlock &block) const {
  return (block.n - span.n) * band.image() +
         (block.row - span.row) * g.stride[0] * band.cols +
         (block.col - span.col) * g.stride[1];
}

/// A block's accumulated sums `acc` leave for SBUF in the output's type
/// (summed per channel on the way when `sums`), then go to `out` (when
/// stored) and through the epilogue.
void ConvLowering::finishBlock(const HbmView &out, int64_t group,
                               const PixelBlock &block, const ChannelTile &ot,
                               const Tile &acc, ChannelSumColumns *sums,
                               const EpilogueTiles &channelInputs) {
  isa::DType type =
      epilogue ? deviceType(llvm::cast<mlir::RankedTensorType>(
                                epilogue->value.getType())
                                .getElementType())
               : out.dtype;
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
  tb.store(out, blockOffset(out, group * g.outPerGroup() + ot.first, block),
           Strides4(out).c, blockFree(out, block), tile);
}

llvm::ArrayRef<int64_t> ConvLowering::epilogueShape() const {
  return llvm::cast<mlir::RankedTensorType>(epilogue->value.getType())
      .getShape();
}

int64_t blockOffset(const HbmView &view, int64_t channel,
                    const PixelBlock &block) {
  Strides4 s(view);
  return view.offset + block.n * s.n + channel * s.c + block.row * s.row +
         block.col * s.col;
}

llvm::SmallVector<FreeDim, 3> blockFree(const HbmView &view,
                                        const PixelBlock &block) {
  Strides4 s(view);
  return blockDims(block, s.n, FreeDim{s.row, block.rows},
                   FreeDim{s.col, block.cols});
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
    Strides4 s(operand.view.broadcastTo(epilogueShape()));
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
    HbmView view = operand.view.broadcastTo(epilogueShape());
    tiles[v] = TileArg{
        std::nullopt,
        loadInput(tb, view,
                  blockOffset(view, group * g.outPerGroup() + ot.first, block),
                  Strides4(view).c, blockFree(view, block), rows, cols)};
  }
  // Dropout, the one op that numbers its elements, is never planned here.
  if (failed(emitGroupOps(tb, epilogue->ops, tiles, rows, cols, TileIndex{}))) {
    lowered = false;
    return;
  }
  for (const LoopOutput &out : epilogue->outputs) {
    Tile t = storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows, cols);
    storeBlock(out.dst, group, block, ot, t);
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

} // namespace kiln::tile_passes::convolution
