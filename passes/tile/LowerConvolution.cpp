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
// tensor exists in HBM (tap stacks, ConvolutionTapStacks.cpp, repeat a
// band on-chip per tap for convolutions on few channels). The weights of a
// tile of input and output channels load once, all taps side by side.
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

#include "passes/tile/ConvolutionLowering.h"

#include "dialects/kgraph/KGraphWindow.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes::convolution {

void ConvLowering::applyBlock(const HbmView &out, int64_t group,
                              const PixelBlock &block, const ChannelTile &ot,
                              llvm::ArrayRef<Tile> stationary,
                              llvm::ArrayRef<TileWindow> moving,
                              ChannelSumColumns *sums,
                              const EpilogueTiles &channelInputs) {
  Tile acc = tb.tile(isa::Memory::Psum, isa::DType::F32, ot.size,
                     block.pixels());
  for (auto [i, operands] : llvm::enumerate(llvm::zip(stationary, moving))) {
    auto [weights, window] = operands;
    tb.matmul(acc, weights, window, /*accumulate=*/i > 0);
  }
  finishBlock(out, group, block, ot, acc, sums, channelInputs);
}

llvm::SmallVector<Tile>
ConvLowering::loadBlockWeights(const WeightLayout &w, int64_t group,
                               const ChannelTile &ot,
                               llvm::ArrayRef<TapStack> stacks) {
  llvm::SmallVector<Tile> tiles;
  for (const TapStack &stack : stacks) {
    tiles.push_back(loadStackedWeights(w, group, stack, ot));
  }
  if (stacks.empty()) {
    for (const ChannelTile &it : channelTiles(g.inPerGroup())) {
      tiles.push_back(loadWeights(w, group, it, ot));
    }
  }
  return tiles;
}

llvm::SmallVector<TileWindow>
ConvLowering::movingOperands(llvm::ArrayRef<Band> bands,
                             llvm::ArrayRef<TapStack> stacks,
                             const PixelBlock &block) {
  llvm::SmallVector<TileWindow> moving;
  for (const TapStack &stack : stacks) {
    Tile stacked = stackBand(bands.front(), stack, block, block);
    moving.push_back(TileWindow{stacked, 0, {FreeDim{1, stacked.cols}}});
  }
  if (stacks.empty()) {
    for (const Band &band : bands) {
      for (int64_t tap = 0; tap < g.taps(); ++tap) {
        moving.push_back(window(band, tap, block));
      }
    }
  }
  return moving;
}

llvm::SmallVector<Tile>
ConvLowering::stationaryOperands(llvm::ArrayRef<Tile> weights,
                                 const ChannelTile &ot, bool stacked,
                                 bool flipped) const {
  if (stacked) {
    return llvm::SmallVector<Tile>(weights);
  }
  llvm::SmallVector<Tile> stationary;
  for (const Tile &w : weights) {
    for (int64_t tap = 0; tap < g.taps(); ++tap) {
      int64_t stored = flipped ? g.taps() - 1 - tap : tap;
      stationary.push_back(w.columns(stored * ot.size, ot.size));
    }
  }
  return stationary;
}

void ConvLowering::apply(const HbmView &input, const WeightLayout &weights,
                         const HbmView &out,
                         llvm::ArrayRef<HbmView> channelSums) {
  if (depthwise()) {
    applyDepthwise(input, weights, out, channelSums);
    return;
  }
  // Stacks read the weights' taps in their stored order; the transposed
  // convolution's flipped taps would need them read backwards.
  llvm::SmallVector<TapStack> stacks;
  if (!weights.flipped) {
    stacks = tapStacks();
  }
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
      std::vector<llvm::SmallVector<Tile>> stationary;
      for (const ChannelTile &ot : set) {
        stationary.push_back(stationaryOperands(
            loadBlockWeights(weights, group, ot, stacks), ot, !stacks.empty(),
            weights.flipped));
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
        llvm::SmallVector<TileWindow> moving =
            movingOperands(bands, stacks, block);
        for (auto [i, ot] : llvm::enumerate(set)) {
          applyBlock(out, group, block, ot, stationary[i], moving,
                     sums.empty() ? nullptr : &sums[i], inputs[i]);
        }
      }
      for (auto [ot, columns] : llvm::zip(set, sums)) {
        storeChannelSums(channelSums, group * g.outPerGroup() + ot.first,
                         columns.total());
      }
    }
  }
}

Tile ConvLowering::loadGradient(const HbmView &gradOut, int64_t channel,
                                const ChannelTile &ot,
                                const PixelBlock &span) {
  Tile rows = tb.tile(isa::Memory::Sbuf, operand, ot.size, span.pixels());
  tb.load(rows, gradOut, blockOffset(gradOut, channel, span),
          Strides4(gradOut).c, blockFree(gradOut, span));
  return rows;
}

Tile ConvLowering::transposedGradient(const Tile &gradient,
                                      const PixelBlock &span,
                                      const PixelBlock &block) {
  // The span's positions run image by image, row by row.
  int64_t first = (block.n - span.n) * span.rows * span.cols +
                  (block.row - span.row) * span.cols + (block.col - span.col);
  Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32, block.pixels(),
                         gradient.rows);
  tb.transpose(flipped, gradient.columns(first, block.pixels()));
  Tile result =
      tb.tile(isa::Memory::Sbuf, operand, block.pixels(), gradient.rows);
  tb.copy(result, flipped);
  return result;
}

void ConvLowering::storeWeightGrad(const HbmView &gradWeight, int64_t group,
                                   const ChannelTile &ot, int64_t firstIn,
                                   int64_t tap, const Tile &acc) {
  Tile result = tb.tile(isa::Memory::Sbuf, gradWeight.dtype, acc.rows,
                        acc.cols);
  tb.copy(result, acc);
  // [K, C, R...] as Strides4: n the output channel, c the input one, row
  // and col the kernel's.
  Strides4 st(gradWeight);
  int64_t offset = gradWeight.offset +
                   (group * g.outPerGroup() + ot.first) * st.n +
                   firstIn * st.c + (tap / g.kernel[1]) * st.row +
                   (tap % g.kernel[1]) * st.col;
  tb.store(gradWeight, offset, st.n, {FreeDim{st.c, acc.cols}}, result);
}

void ConvLowering::weightGrad(const HbmView &input, const HbmView &gradOut,
                              const HbmView &gradWeight) {
  if (depthwise()) {
    weightGradDepthwise(input, gradOut, gradWeight);
    return;
  }
  if (llvm::SmallVector<TapStack> stacks = tapStacks(); !stacks.empty()) {
    weightGradStacked(input, gradOut, gradWeight, stacks);
    return;
  }
  llvm::SmallVector<ChannelTile> outTiles = channelTiles(g.outPerGroup());
  // The moving operand holds up to four input-channel tiles side by side.
  llvm::SmallVector<ChannelTile> chunks =
      channelTiles(g.inPerGroup(), kBankColumns);
  llvm::SmallVector<BlockGroup> groups = weightGradGroups();
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
          for (const BlockGroup &blockGroup : groups) {
            const PixelBlock &span = blockGroup.span;
            Tile gradient = loadGradient(
                gradOut, group * g.outPerGroup() + ot.first, ot, span);
            llvm::SmallVector<Band> bands;
            for (const ChannelTile &it : inTiles) {
              bands.push_back(loadBand(
                  input, group * g.inPerGroup() + chunk.first + it.first,
                  it.size, span));
            }
            for (const PixelBlock &block : blockGroup.blocks) {
              Tile dy = transposedGradient(gradient, span, block);
              for (int64_t t = 0; t < taps; ++t) {
                Tile x = tb.tile(isa::Memory::Sbuf, operand, block.pixels(),
                                 chunk.size);
                for (auto [it, band] : llvm::zip(inTiles, bands)) {
                  Tile flipped = tb.tile(isa::Memory::Psum, isa::DType::F32,
                                         block.pixels(), it.size);
                  tb.transpose(flipped, window(band, tap0 + t, block, &span));
                  tb.copy(x.columns(it.first, it.size), flipped);
                }
                tb.matmul(acc[t], dy, x, /*accumulate=*/!first);
              }
              first = false;
            }
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

} // namespace kiln::tile_passes::convolution

namespace kiln::tile_passes {

using namespace convolution;

namespace {

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
    ConvLowering lowering(tb, g, operandType(xType, wType), sbufBudget,
                          epilogue);
    lowering.apply(x, weightLayout(w, g, /*inputGrad=*/false), dst,
                   channelSums);
    return lowering.status();
  }
  if (auto grad = llvm::dyn_cast<ConvInputGradOp>(op)) {
    auto [dy, dyType] = view(grad.getGradOutput());
    auto [w, wType] = view(grad.getWeight());
    ConvGeometry f =
        forwardGeometry(windowOf(grad), shape(grad.getGradInput()),
                        shape(grad.getGradOutput()), grad.getGroups());
    ConvGeometry g = inputGradGeometry(f);
    ConvLowering lowering(tb, g, operandType(dyType, wType), sbufBudget,
                          epilogue);
    lowering.apply(dy, weightLayout(w, f, /*inputGrad=*/true), dst,
                   channelSums);
    return lowering.status();
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
