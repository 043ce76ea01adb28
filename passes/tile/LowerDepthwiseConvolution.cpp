//===- LowerDepthwiseConvolution.cpp - depthwise convolutions on VectorE --===//
//
// A depthwise convolution (one input and one output channel per group)
// contracts over nothing but its taps, so TensorE would run a matmul of one
// partition per channel and tap. VectorE computes it with the channels on
// the partitions instead, up to 128 at a time: per block of positions
//
//   out[c, pixels] = sum over taps of weight[c, tap] * band[c, window(tap)]
//
// a tensor_scalar per tap (the tap's weights a scalar per partition, the
// window an access pattern over the band, as for TensorE) and a
// tensor_tensor adding it to the sum so far. The weight gradient is, per
// block and tap, the product of the output gradient with the tap's window,
// summed along each partition into a column per block (folded once the
// blocks are done, as the per-channel sums of ConvolutionBlocks.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ConvolutionLowering.h"

namespace kiln::tile_passes::convolution {

bool ConvLowering::depthwise() const {
  return g.groups > 1 && g.inPerGroup() == 1 && g.outPerGroup() == 1;
}

/// The weights of channels `ct`, [channels x taps] in f32 (rounded to the
/// operand type first, as TensorE's loads would).
static Tile loadDepthwiseWeights(TileBuilder &tb, const ConvGeometry &g,
                                 const WeightLayout &w, isa::DType operand,
                                 const ChannelTile &ct) {
  Tile loaded = tb.tile(isa::Memory::Sbuf, operand, ct.size, g.taps());
  tb.load(loaded, w.view, w.view.offset + ct.first * w.groupStride,
          w.groupStride,
          {FreeDim{w.tapStride[0], g.kernel[0]},
           FreeDim{w.tapStride[1], g.kernel[1]}});
  if (operand == isa::DType::F32) {
    return loaded;
  }
  Tile wide = tb.tile(isa::Memory::Sbuf, isa::DType::F32, ct.size, g.taps());
  tb.copy(wide, loaded);
  return wide;
}

void ConvLowering::applyDepthwise(const HbmView &input,
                                  const WeightLayout &weights,
                                  const HbmView &out,
                                  llvm::ArrayRef<HbmView> channelSums) {
  llvm::SmallVector<PixelBlock> blocks = pixelBlocks(g, kBankColumns);
  for (const ChannelTile &ct : channelTiles(g.groups)) {
    Tile w = loadDepthwiseWeights(tb, g, weights, operand, ct);
    std::optional<ChannelSumColumns> sums;
    if (!channelSums.empty()) {
      sums.emplace(tb, ct.size, static_cast<int64_t>(blocks.size()));
    }
    EpilogueTiles inputs = channelInputs(/*group=*/0, ct);
    for (const PixelBlock &block : blocks) {
      Band band = loadBand(input, ct.first, ct.size, block);
      Tile acc;
      for (int64_t tap = 0; tap < g.taps(); ++tap) {
        int64_t stored = weights.flipped ? g.taps() - 1 - tap : tap;
        Tile term = tb.tile(isa::Memory::Sbuf, isa::DType::F32, ct.size,
                            block.pixels());
        tb.tensorScalar(term, window(band, tap, block), "mul",
                        w.columns(stored, 1));
        if (acc.buffer) {
          Tile sum = tb.tile(isa::Memory::Sbuf, isa::DType::F32, ct.size,
                             block.pixels());
          tb.tensorTensor(sum, acc, term, "add");
          term = sum;
        }
        acc = term;
      }
      finishBlock(out, /*group=*/0, block, ct, acc, sums ? &*sums : nullptr,
                  inputs);
    }
    if (sums) {
      storeChannelSums(channelSums, ct.first, sums->total());
    }
  }
}

void ConvLowering::weightGradDepthwise(const HbmView &input,
                                       const HbmView &gradOut,
                                       const HbmView &gradWeight) {
  llvm::SmallVector<PixelBlock> blocks = pixelBlocks(g, kBankColumns);
  const llvm::SmallVector<int64_t, 4> &st = gradWeight.strides;
  int64_t rowStride = st.size() == 4 ? st[2] : 0;
  for (const ChannelTile &ct : channelTiles(g.groups)) {
    std::vector<ChannelSumColumns> taps;
    for (int64_t tap = 0; tap < g.taps(); ++tap) {
      taps.emplace_back(tb, ct.size, static_cast<int64_t>(blocks.size()));
    }
    for (const PixelBlock &block : blocks) {
      Tile dy = tb.tile(isa::Memory::Sbuf, operand, ct.size, block.pixels());
      tb.load(dy, gradOut, blockOffset(gradOut, ct.first, block),
              Strides4(gradOut).c, blockFree(gradOut, block));
      Band band = loadBand(input, ct.first, ct.size, block);
      for (int64_t tap = 0; tap < g.taps(); ++tap) {
        Tile product = tb.tile(isa::Memory::Sbuf, isa::DType::F32, ct.size,
                               block.pixels());
        tb.tensorTensor(product, dy, window(band, tap, block), "mul");
        tb.reduce(taps[tap].next(), product, "add");
      }
    }
    Tile grads = tb.tile(isa::Memory::Sbuf, gradWeight.dtype, ct.size,
                         g.taps());
    for (int64_t tap = 0; tap < g.taps(); ++tap) {
      tb.copy(grads.columns(tap, 1), taps[tap].total());
    }
    tb.store(gradWeight, gradWeight.offset + ct.first * st[0], st[0],
             {FreeDim{rowStride, g.kernel[0]}, FreeDim{st.back(), g.kernel[1]}},
             grads);
  }
}

} // namespace kiln::tile_passes::convolution
