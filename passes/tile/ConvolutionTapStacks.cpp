//===- ConvolutionTapStacks.cpp - taps that share a matmul ----------------===//
//
// A matmul's cost does not depend on how many partitions it contracts, so
// a convolution on few input channels (a network's stem on 1 or 3
// channels) wastes most of TensorE when each tap is a matmul of its own:
// a 7x7 stem on RGB input would run 49 matmuls of three partitions a block,
// and its weight gradient 49 transposes, copies and matmuls of three
// columns each. Here the taps of whole kernel rows stack on the
// partitions instead, (channel, kernel row, kernel column) in the weight's
// order: an on-chip DMA repeats each channel's band once per tap of the
// stack, shifted by the tap, so one matmul contracts them all. The band
// keeps its zero field, so padding needs nothing more; no im2col tensor
// exists in HBM.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ConvolutionLowering.h"

namespace kiln::tile_passes::convolution {

llvm::SmallVector<TapStack> ConvLowering::tapStacks() const {
  int64_t perKernelRow = g.inPerGroup() * g.kernel[1];
  if (depthwise() || g.taps() == 1 || perKernelRow > kPartitions) {
    return {};
  }
  int64_t rows = std::min(g.kernel[0], kPartitions / perKernelRow);
  llvm::SmallVector<TapStack> stacks;
  for (int64_t r = 0; r < g.kernel[0]; r += rows) {
    stacks.push_back({r, std::min(rows, g.kernel[0] - r)});
  }
  // Each stack costs an on-chip DMA a block (one an image): worth it where
  // the stacks at least halve the matmuls (a 7x1 kernel on 100 channels,
  // a stack a tap, is not).
  if (static_cast<int64_t>(stacks.size()) * 2 > g.taps()) {
    return {};
  }
  return stacks;
}

Tile ConvLowering::loadStackedWeights(const WeightLayout &w, int64_t group,
                                      const TapStack &stack,
                                      const ChannelTile &out) {
  int64_t channels = g.inPerGroup();
  Tile tile = tb.tile(isa::Memory::Sbuf, operand,
                      channels * stack.rows * g.kernel[1], out.size);
  int64_t offset = w.view.offset + group * w.groupStride +
                   out.first * w.outStride + stack.row0 * w.tapStride[0];
  // One DMA: the channels as its source's rows, each reading its stack's
  // taps in order, which the destination lays on partitions.
  tb.loadSpread(tile, w.view, offset, channels, w.inStride,
                {FreeDim{w.tapStride[0], stack.rows},
                 FreeDim{w.tapStride[1], g.kernel[1]},
                 FreeDim{w.outStride, out.size}});
  return tile;
}

Tile ConvLowering::stackBand(const Band &band, const TapStack &stack,
                             const PixelBlock &block,
                             const PixelBlock &span) {
  int64_t pixels = block.rows * block.cols;
  Tile stacked = tb.tile(isa::Memory::Sbuf, operand,
                         band.tile.rows * stack.rows * g.kernel[1],
                         block.pixels());
  // A DMA's free dims are at most four: the taps' two and the window's
  // two, so a block of several images takes one DMA each.
  for (int64_t n = 0; n < block.images; ++n) {
    TileWindow taps{band.tile,
                    blockOrigin(band, span, block) + n * band.image() +
                        stack.row0 * g.dilation[0] * band.cols,
                    {FreeDim{g.dilation[0] * band.cols, stack.rows},
                     FreeDim{g.dilation[1], g.kernel[1]},
                     FreeDim{g.stride[0] * band.cols, block.rows},
                     FreeDim{g.stride[1], block.cols}}};
    tb.dmaCopy(stacked.columns(n * pixels, pixels), taps);
  }
  return stacked;
}

void ConvLowering::weightGradStacked(const HbmView &input,
                                     const HbmView &gradOut,
                                     const HbmView &gradWeight,
                                     llvm::ArrayRef<TapStack> stacks) {
  llvm::SmallVector<ChannelTile> outTiles = channelTiles(g.outPerGroup());
  llvm::SmallVector<BlockGroup> groups = weightGradGroups();
  // Four stacks accumulate at a time: four PSUM banks, the rest for the
  // transposes.
  constexpr size_t kStacksAtOnce = 4;
  for (int64_t group = 0; group < g.groups; ++group) {
    for (const ChannelTile &ot : outTiles) {
      for (size_t s0 = 0; s0 < stacks.size(); s0 += kStacksAtOnce) {
        llvm::ArrayRef<TapStack> some =
            stacks.slice(s0, std::min(kStacksAtOnce, stacks.size() - s0));
        llvm::SmallVector<Tile> acc;
        for (const TapStack &stack : some) {
          acc.push_back(tb.tile(isa::Memory::Psum, isa::DType::F32, ot.size,
                                g.inPerGroup() * stack.rows * g.kernel[1]));
        }
        bool first = true;
        for (const BlockGroup &blockGroup : groups) {
          const PixelBlock &span = blockGroup.span;
          Tile gradient = loadGradient(
              gradOut, group * g.outPerGroup() + ot.first, ot, span);
          Band band = loadBand(input, group * g.inPerGroup(), g.inPerGroup(),
                               span);
          for (const PixelBlock &block : blockGroup.blocks) {
            Tile dy = transposedGradient(gradient, span, block);
            for (auto [stack, sum] : llvm::zip(some, acc)) {
              Tile stacked = stackBand(band, stack, block, span);
              Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32,
                                     block.pixels(), stacked.rows);
              tb.transpose(flipped, stacked);
              Tile x = tb.tile(isa::Memory::Sbuf, operand, block.pixels(),
                               stacked.rows);
              tb.copy(x, flipped);
              tb.matmul(sum, dy, x, /*accumulate=*/!first);
            }
            first = false;
          }
        }
        for (auto [stack, sum] : llvm::zip(some, acc)) {
          storeStackedWeightGrad(gradWeight, group, ot, stack, sum);
        }
      }
    }
  }
}

void ConvLowering::storeStackedWeightGrad(const HbmView &gradWeight,
                                          int64_t group, const ChannelTile &ot,
                                          const TapStack &stack,
                                          const Tile &acc) {
  Tile result =
      tb.tile(isa::Memory::Sbuf, gradWeight.dtype, acc.rows, acc.cols);
  tb.copy(result, acc);
  // [K, C, R...] as Strides4: n the output channel, c the input one, row
  // and col the kernel's.
  Strides4 st(gradWeight);
  int64_t offset = gradWeight.offset +
                   (group * g.outPerGroup() + ot.first) * st.n +
                   stack.row0 * st.row;
  tb.store(gradWeight, offset, st.n,
           {FreeDim{st.c, g.inPerGroup()}, FreeDim{st.row, stack.rows},
            FreeDim{st.col, g.kernel[1]}},
           result);
}

} // namespace kiln::tile_passes::convolution
