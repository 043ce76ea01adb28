// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile | FileCheck %s

// A 3x3 convolution, padding 1, on 5x5 maps: channels on the partitions.
// The weights load once, tap-major ([48 x 9 taps x 4 out]). Each block's
// input band is a zero field of 7x7 per image with the image inside it;
// the nine taps are matmuls whose moving operand is a window over the band
// (shifted by the tap, no copy), accumulating in PSUM, then one evacuation
// and one store. A map of 25 positions fills little of a PSUM bank, so a
// block holds two images: the batch of 8 runs as four blocks, enough for
// one block's band load to overlap another's matmuls. (48 channels times
// the kernel's width of 3 exceed the partitions: the taps do not stack.)
// CHECK-LABEL: func.func @small_maps
// CHECK: ktile.dma_copy %[[W:.*]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [1 x 36]>, src = #kisa.ap<hbm, f32, p = 0:48, offset = 0, dims = [1 x 9, 432 x 4], pstride = 9>}
// CHECK: ktile.memset %[[BAND:.*]] {dst = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [1 x 98]>
// CHECK: ktile.dma_copy %[[BAND]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:48, offset = 32, dims = [49 x 2, 7 x 5, 1 x 5]>, src = #kisa.ap<hbm, f32, p = 0:48, offset = 0, dims = [1200 x 2, 1 x 25], pstride = 25>}
// CHECK: ktile.matmul %[[ACC:.*]], %[[W]], %[[BAND]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:4, offset = 0, dims = [1 x 50]>, moving = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [49 x 2, 7 x 5, 1 x 5]>, stationary = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [1 x 4]>}
// CHECK: ktile.matmul %[[ACC]], %[[W]], %[[BAND]] {accumulate = true, {{.*}}moving = #kisa.ap<sbuf, f32, p = 0:48, offset = 4, dims = [49 x 2, 7 x 5, 1 x 5]>, stationary = #kisa.ap<sbuf, f32, p = 0:48, offset = 16, dims = [1 x 4]>}
// CHECK-COUNT-7: ktile.matmul %[[ACC]], %[[W]], %[[BAND]] {accumulate = true
// CHECK: ktile.tensor_copy %[[OUT:.*]], %[[ACC]]
// CHECK: ktile.dma_copy %{{.*}}, %[[OUT]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [100 x 2, 1 x 25], pstride = 25>
// CHECK-COUNT-3: offset = {{9600|19200|28800}}, dims = [1200 x 2, 1 x 25], pstride = 25>
// CHECK-NOT: ktile.dma_copy %{{.*}}, %arg0
// CHECK: return
func.func @small_maps(%x: tensor<8x48x5x5xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<4x48x3x3xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<8x4x5x5xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<8x48x5x5xf32>, tensor<4x48x3x3xf32> -> tensor<8x4x5x5xf32>
  return %0 : tensor<8x4x5x5xf32>
}

// The weight gradient contracts over positions, which must lie on the
// partitions: per block of positions (here 2 images of 25) the output
// gradient is transposed once and each tap's window of the input band once,
// and their product accumulates in PSUM over the batch (four taps at a
// time), stored per tap. The four blocks' output gradient and input band
// load together, one DMA each (200 positions), for each group of taps;
// each block transposes its columns and its windows of them.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: ktile.dma_copy %[[DY:.*]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 200]>, src = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [100 x 8, 1 x 25], pstride = 25>}
// CHECK: ktile.dma_copy %[[BAND:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:48, offset = 32, dims = [49 x 8, 7 x 5, 1 x 5]>, src = #kisa.ap<hbm, f32, p = 0:48, offset = 0, dims = [1200 x 8, 1 x 25], pstride = 25>}
// CHECK: ktile.transpose %{{.*}}, %[[DY]] {dst = #kisa.ap<psum, f32, p = 0:50, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 50]>}
// CHECK: ktile.transpose %{{.*}}, %[[BAND]] {dst = #kisa.ap<psum, f32, p = 0:50, offset = 0, dims = [1 x 48]>, src = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [49 x 2, 7 x 5, 1 x 5]>}
// CHECK: ktile.matmul {{.*}}accumulate = false, dst = #kisa.ap<psum, f32, p = 0:4, offset = 0, dims = [1 x 48]>
// CHECK-NOT: %arg1
// CHECK: ktile.transpose %{{.*}}, %[[DY]] {dst = #kisa.ap<psum, f32, p = 0:50, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:4, offset = 200, dims = [1 x 50]>}
// CHECK: ktile.transpose %{{.*}}, %[[BAND]] {dst = #kisa.ap<psum, f32, p = 0:50, offset = 0, dims = [1 x 48]>, src = #kisa.ap<sbuf, f32, p = 0:48, offset = 392, dims = [49 x 2, 7 x 5, 1 x 5]>}
// CHECK: ktile.dma_copy %{{.*}}, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 200]>
// CHECK: ktile.dma_copy %{{.*}}, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 200]>
// CHECK-NOT: %arg1
// CHECK: return
func.func @weight_gradient(%x: tensor<8x48x5x5xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %g: tensor<8x4x5x5xf32> {kgraph.name = "g", kgraph.role = "batch_input"}) -> (tensor<4x48x3x3xf32> {kgraph.name = "gw", kgraph.role = "metric"}) {
  %0 = kgraph.conv_weight_grad %g, %x {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<8x4x5x5xf32>, tensor<8x48x5x5xf32> -> tensor<4x48x3x3xf32>
  return %0 : tensor<4x48x3x3xf32>
}

// A 20x20 map's weight gradient: blocks of six rows (120 positions), four
// of them in one group of 400 positions, so the output gradient loads once
// ([4 x 400]) and the band once (22 x 22 with its zero field) for each
// group of taps; the second block transposes columns 120 on of the output
// gradient (byte 480) and its windows start six band rows down (132
// elements, byte 528, then 532 for the next tap).
// CHECK-LABEL: func.func @weight_gradient_rows
// CHECK: ktile.dma_copy %[[DY:[0-9]+]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 400]>, src = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [1 x 400], pstride = 400>}
// CHECK: ktile.dma_copy %[[BAND:[0-9]+]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:48, offset = 92, dims = [22 x 20, 1 x 20]>
// CHECK: ktile.transpose %{{[0-9]+}}, %[[DY]] {dst = #kisa.ap<psum, f32, p = 0:120, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 120]>}
// CHECK: ktile.transpose %{{[0-9]+}}, %[[BAND]] {{{.*}}src = #kisa.ap<sbuf, f32, p = 0:48, offset = 0, dims = [22 x 6, 1 x 20]>}
// CHECK-NOT: %arg1
// CHECK: ktile.transpose %{{[0-9]+}}, %[[DY]] {dst = #kisa.ap<psum, f32, p = 0:120, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:4, offset = 480, dims = [1 x 120]>}
// CHECK: ktile.transpose %{{[0-9]+}}, %[[BAND]] {{{.*}}src = #kisa.ap<sbuf, f32, p = 0:48, offset = 528, dims = [22 x 6, 1 x 20]>}
// CHECK: ktile.transpose %{{[0-9]+}}, %[[BAND]] {{{.*}}src = #kisa.ap<sbuf, f32, p = 0:48, offset = 532, dims = [22 x 6, 1 x 20]>}
// CHECK: return
func.func @weight_gradient_rows(%x: tensor<1x48x20x20xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %g: tensor<1x4x20x20xf32> {kgraph.name = "g", kgraph.role = "batch_input"}) -> (tensor<4x48x3x3xf32> {kgraph.name = "gw", kgraph.role = "metric"}) {
  %0 = kgraph.conv_weight_grad %g, %x {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<1x4x20x20xf32>, tensor<1x48x20x20xf32> -> tensor<4x48x3x3xf32>
  return %0 : tensor<4x48x3x3xf32>
}

// A 7x7, stride-2 stem on 3 channels: each tap as a matmul of its own
// would contract three partitions. The taps of whole kernel rows stack on
// the partitions instead, (channel, kernel row, kernel column) as the
// weight stores them: rows 0-5 (3 x 6 x 7 = 126 partitions) and row 6
// (21). Each stack's weights load in one DMA, the channels as its source's
// partitions; per block, an on-chip DMA repeats the band once per tap,
// shifted by the tap (rows 17 apart in the 17-wide band, columns 1 apart,
// then the stride-2 window), and two matmuls accumulate the block.
// CHECK-LABEL: func.func @stacked_taps
// CHECK: ktile.dma_copy %[[W0:[0-9]+]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:126, offset = 0, dims = [1 x 4]>, src = #kisa.ap<hbm, f32, p = 0:3, offset = 0, dims = [1 x 42, 147 x 4], pstride = 49>}
// CHECK: ktile.dma_copy %[[W1:[0-9]+]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:21, offset = 0, dims = [1 x 4]>, src = #kisa.ap<hbm, f32, p = 0:3, offset = 168, dims = [1 x 1, 1 x 7, 147 x 4], pstride = 49>}
// CHECK: ktile.memset %[[BAND:[0-9]+]] {dst = #kisa.ap<sbuf, f32, p = 0:3, offset = 0, dims = [1 x 289]>
// CHECK: ktile.dma_copy %[[BAND]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:3, offset = 216, dims = [17 x 11, 1 x 11]>
// CHECK: ktile.dma_copy %[[S0:[0-9]+]], %[[BAND]] {dst = #kisa.ap<sbuf, f32, p = 0:126, offset = 0, dims = [1 x 36]>, src = #kisa.ap<sbuf, f32, p = 0:3, offset = 0, dims = [17 x 6, 1 x 7, 34 x 6, 2 x 6]>}
// CHECK: ktile.dma_copy %[[S1:[0-9]+]], %[[BAND]] {dst = #kisa.ap<sbuf, f32, p = 0:21, offset = 0, dims = [1 x 36]>, src = #kisa.ap<sbuf, f32, p = 0:3, offset = 408, dims = [17 x 1, 1 x 7, 34 x 6, 2 x 6]>}
// CHECK: ktile.matmul %[[ACC:[0-9]+]], %[[W0]], %[[S0]] {accumulate = false
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.matmul %[[ACC]], %[[W1]], %[[S1]] {accumulate = true
// CHECK-NOT: ktile.matmul
// CHECK: ktile.tensor_copy %{{.*}}, %[[ACC]]
// CHECK-COUNT-2: ktile.matmul
// CHECK-NOT: ktile.matmul
// CHECK: return
func.func @stacked_taps(%x: tensor<2x3x11x11xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<4x3x7x7xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<2x4x6x6xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.conv %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilation = array<i64: 1, 1>, groups = 1} : tensor<2x3x11x11xf32>, tensor<4x3x7x7xf32> -> tensor<2x4x6x6xf32>
  return %0 : tensor<2x4x6x6xf32>
}

// Its weight gradient: per block of positions, each stacked band is
// transposed once (positions onto the partitions) and multiplied by the
// transposed output gradient into the stack's accumulator, [4 x 126] and
// [4 x 21]; each is stored once, in the weight's (channel, row, column)
// order.
// CHECK-LABEL: func.func @stacked_weight_gradient
// CHECK: ktile.dma_copy %[[S0:[0-9]+]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:126, offset = 0, dims = [1 x 36]>
// CHECK: ktile.transpose %{{.*}}, %[[S0]] {dst = #kisa.ap<psum, f32, p = 0:36, offset = 0, dims = [1 x 126]>
// CHECK: ktile.matmul %[[ACC0:[0-9]+]], {{.*}}accumulate = false, dst = #kisa.ap<psum, f32, p = 0:4, offset = 0, dims = [1 x 126]>
// CHECK: ktile.matmul %[[ACC1:[0-9]+]], {{.*}}accumulate = false, dst = #kisa.ap<psum, f32, p = 0:4, offset = 0, dims = [1 x 21]>
// CHECK: ktile.matmul %[[ACC0]], {{.*}}accumulate = true
// CHECK: ktile.matmul %[[ACC1]], {{.*}}accumulate = true
// CHECK: ktile.tensor_copy %[[G0:[0-9]+]], %[[ACC0]]
// CHECK: ktile.dma_copy %{{.*}}, %[[G0]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [49 x 3, 1 x 42], pstride = 147>
// CHECK: ktile.tensor_copy %[[G1:[0-9]+]], %[[ACC1]]
// CHECK: ktile.dma_copy %{{.*}}, %[[G1]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 168, dims = [49 x 3, 1 x 1, 1 x 7], pstride = 147>
// CHECK: return
func.func @stacked_weight_gradient(%x: tensor<2x3x11x11xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %g: tensor<2x4x6x6xf32> {kgraph.name = "g", kgraph.role = "batch_input"}) -> (tensor<4x3x7x7xf32> {kgraph.name = "gw", kgraph.role = "metric"}) {
  %0 = kgraph.conv_weight_grad %g, %x {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilation = array<i64: 1, 1>, groups = 1} : tensor<2x4x6x6xf32>, tensor<2x3x11x11xf32> -> tensor<4x3x7x7xf32>
  return %0 : tensor<4x3x7x7xf32>
}

// Batch norm's sum of the output per channel: each block's evacuation is an
// activation that also sums its rows (the block's sums per channel) into a
// column of its own; the four columns fold once all blocks are done, and
// the sums are stored. No instruction reads the output back for them.
// CHECK-LABEL: func.func @channel_sums
// CHECK-COUNT-4: ktile.activation %{{.*}}, %{{.*}}, %[[COLUMNS:[0-9]+]] {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 50]>, func = "identity", reduce_dst = #kisa.ap<sbuf, f32, p = 0:4, offset = {{0|4|8|12}}, dims = [1 x 1]>, src = #kisa.ap<psum
// CHECK-NOT: ktile.tensor_copy
// CHECK: ktile.tensor_reduce %[[SUMS:[0-9]+]], %[[COLUMNS]] {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 4]>}
// CHECK: ktile.dma_copy %{{.*}}, %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK-NOT: ktile.tensor_reduce
// CHECK: return
func.func @channel_sums(%x: tensor<8x3x5x5xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<4x3x3x3xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<8x4x5x5xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4xf32> {kgraph.name = "s", kgraph.role = "metric"}) {
  %0 = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<8x3x5x5xf32>, tensor<4x3x3x3xf32> -> tensor<8x4x5x5xf32>
  %1 = kgraph.transpose %0, [1, 0, 2, 3] : tensor<8x4x5x5xf32> -> tensor<4x8x5x5xf32>
  %2 = kgraph.reduce_sum %1, [1, 2, 3] : tensor<4x8x5x5xf32> -> tensor<4xf32>
  return %0, %2 : tensor<8x4x5x5xf32>, tensor<4xf32>
}

// A bias and ReLU computed on each block as it leaves PSUM (the
// convolution's epilogue): the bias loads once, a column read with stride
// 0; each block is evacuated, then the bias add (a per-partition scalar)
// and ReLU run on its tile, and only ReLU's output is stored. The
// convolution's own output never reaches HBM.
// CHECK-LABEL: func.func @bias_and_relu
// CHECK: ktile.dma_copy %[[BIAS:[0-9]+]], %arg2 {dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [1 x 1], pstride = 1>}
// CHECK: ktile.tensor_copy %[[Y:[0-9]+]], %[[ACC:[0-9]+]] {{{.*}}src = #kisa.ap<psum
// CHECK: ktile.tensor_scalar %[[B:[0-9]+]], %[[Y]], %[[BIAS]] {{{.*}}op0 = "add"
// CHECK: ktile.activation %[[R:[0-9]+]], %[[B]] {{{.*}}func = "relu"
// CHECK: ktile.dma_copy %[[OUT:[0-9]+]], %[[R]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [100 x 2, 1 x 25], pstride = 25>
// CHECK-COUNT-3: ktile.activation {{.*}}func = "relu"
// CHECK-NOT: ktile.dma_copy %{{.*}}, %arg2
// CHECK: return
func.func @bias_and_relu(%x: tensor<8x3x5x5xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<4x3x3x3xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %b: tensor<4xf32> {kgraph.name = "b", kgraph.role = "parameter"}) -> (tensor<8x4x5x5xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<8x3x5x5xf32>, tensor<4x3x3x3xf32> -> tensor<8x4x5x5xf32>
  %1 = kgraph.reshape %b : tensor<4xf32> -> tensor<1x4x1x1xf32>
  %2 = kgraph.add %0, %1 {kgraph.fusion = 0 : i64} : tensor<8x4x5x5xf32>, tensor<1x4x1x1xf32>
  %3 = kgraph.relu %2 {kgraph.fusion = 0 : i64} : tensor<8x4x5x5xf32>
  return %3 : tensor<8x4x5x5xf32>
}

// A depthwise convolution runs on VectorE, its 8 channels on the
// partitions together: the weights load once as [8 x 9 taps]; per block,
// each tap's window over the band is scaled by that tap's weight per
// partition (tensor_scalar with a column of scalars), and the taps' terms
// are added up (tensor_tensor). No matmul.
// CHECK-LABEL: func.func @depthwise
// CHECK: ktile.dma_copy %[[W:[0-9]+]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 9]>
// CHECK: ktile.dma_copy %[[BAND:[0-9]+]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 40, dims = [9 x 7, 1 x 7]>
// CHECK: ktile.tensor_scalar %[[T0:[0-9]+]], %[[BAND]], %[[W]] {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 49]>, op0 = "mul", {{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [9 x 7, 1 x 7]>}
// CHECK: ktile.tensor_scalar %[[T1:[0-9]+]], %[[BAND]], %[[W]] {{{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 4, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 4, dims = [9 x 7, 1 x 7]>}
// CHECK: ktile.tensor_tensor %{{.*}}, %[[T0]], %[[T1]] {{{.*}}op = "add"
// CHECK-COUNT-7: ktile.tensor_tensor
// CHECK-NOT: ktile.matmul
// CHECK: return
func.func @depthwise(%x: tensor<4x8x7x7xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<8x1x3x3xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<4x8x7x7xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 8} : tensor<4x8x7x7xf32>, tensor<8x1x3x3xf32> -> tensor<4x8x7x7xf32>
  return %0 : tensor<4x8x7x7xf32>
}

// Its weight gradient: per block and tap, the output gradient times the
// tap's window, summed along each partition into the tap's column for the
// block; the columns fold once the blocks are done and the [8 x 9]
// gradient is stored in one transfer.
// CHECK-LABEL: func.func @depthwise_weight_gradient
// CHECK: ktile.tensor_tensor %[[P:[0-9]+]], %{{.*}}, %{{.*}} {{{.*}}op = "mul", rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [9 x 7, 1 x 7]>}
// CHECK: ktile.tensor_reduce %{{.*}}, %[[P]] {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, op = "add"
// CHECK-NOT: ktile.matmul
// CHECK: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 9], pstride = 9>
// CHECK: return
func.func @depthwise_weight_gradient(%x: tensor<4x8x7x7xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %g: tensor<4x8x7x7xf32> {kgraph.name = "g", kgraph.role = "batch_input"}) -> (tensor<8x1x3x3xf32> {kgraph.name = "gw", kgraph.role = "metric"}) {
  %0 = kgraph.conv_weight_grad %g, %x {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 8} : tensor<4x8x7x7xf32>, tensor<4x8x7x7xf32> -> tensor<8x1x3x3xf32>
  return %0 : tensor<8x1x3x3xf32>
}
