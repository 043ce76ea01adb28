//===- KGraphWindowOps.td - convolution, batch norm and pooling -----------===//
//
// The ops of convolutional networks, on channels-first tensors as PyTorch
// keeps them: [N, C, spatial...] with one or two spatial dimensions. A
// window (kernel, stride, padding, dilation) gives one entry per spatial
// dimension; `kiln::kgraph::Window` (KGraphShapes.h) holds its shape rule
// once for the verifiers, the interpreter and the lowerings.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KGRAPH_WINDOW_OPS_TD
#define KILN_KGRAPH_WINDOW_OPS_TD

def KGraph_ConvOp : KGraph_PureOp<"conv", [InferTypeOpAdaptor]> {
  let summary = "Convolution (cross-correlation, as PyTorch's), 1-d or 2-d";
  let description = [{
    `output[n, k, o...] = bias[k] + sum over c in k's group and taps r... of
    input[n, c, o*stride - padding + r*dilation] * weight[k, c', r...]`,
    reading zeros outside the input. `input` is `[N, C, S...]`, `weight`
    `[K, C / groups, R...]` and the output `[N, K, O...]` with
    `O = floor((S + 2 padding - dilation (R - 1) - 1) / stride) + 1`.
    Output channels split into `groups` groups, each reading its `C /
    groups` input channels (`groups = C = K`: depthwise).

    ```mlir
    %y = kgraph.conv %x, %w {stride = array<i64: 2, 2>,
        padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>}
        : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32> -> tensor<8x16x16x16xf32>
    ```
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_FloatTensor:$weight,
                   Optional<KGraph_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "type($input) `,` type($weight) (`,` type($bias)^)? "
                       "`->` type($output)";
}

def KGraph_ConvInputGradOp : KGraph_PureOp<"conv_input_grad"> {
  let summary = "Gradient of conv with respect to its input";
  let description = [{
    The transposed convolution of `grad_output` `[N, K, O...]` by `weight`:
    `grad_input[n, c, i...]` sums `grad_output[n, k, o...] * weight[k, c',
    r...]` over every output position and tap that read input position
    `i` in `kgraph.conv` with the same attributes. The result type is the
    input's (several input sizes give one output size, so it is not
    inferred: the verifier checks it against the output's).
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$weight, DenseI64ArrayAttr:$stride,
                   DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $weight attr-dict `:` "
                       "type($grad_output) `,` type($weight) `->` "
                       "type($grad_input)";
  let hasVerifier = 1;
}

def KGraph_ConvWeightGradOp : KGraph_PureOp<"conv_weight_grad"> {
  let summary = "Gradient of conv with respect to its weight";
  let description = [{
    `grad_weight[k, c', r...]` sums `grad_output[n, k, o...] * input[n, c,
    o*stride - padding + r*dilation]` over the batch and every output
    position. The result type is the weight's, checked by the verifier.
    The bias gradient is a `reduce_sum` of `grad_output` over all but dim 1.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$input, DenseI64ArrayAttr:$stride,
                   DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs KGraph_FloatTensor:$grad_weight);
  let assemblyFormat = "$grad_output `,` $input attr-dict `:` "
                       "type($grad_output) `,` type($input) `->` "
                       "type($grad_weight)";
  let hasVerifier = 1;
}

def KGraph_BatchNormOp : KGraph_PureOp<"batch_norm", [
    AllTypesMatch<["input", "output"]>,
    AllTypesMatch<["weight", "bias", "running_mean", "running_var", "mean",
                   "rstd", "next_running_mean", "next_running_var"]>]> {
  let summary = "Batch normalisation over all dims but the channel dim 1";
  let description = [{
    aten's `native_batch_norm` as a pure op. `input` is `[N, C, S...]`;
    `weight`, `bias`, `running_mean` and `running_var` are `[C]`.

    Training (`training = true`): each channel is normalised by the
    statistics of the batch, `mean` and `rstd = 1 / sqrt(var + epsilon)`
    (biased variance over `N * S...` values), and the running statistics
    move towards them: `next_running_mean = (1 - momentum) running_mean +
    momentum mean`, `next_running_var` likewise with the unbiased variance
    (`var * n / (n - 1)`), as PyTorch does. Evaluation: the running
    statistics normalise; `mean` is `running_mean`, `rstd` is `1 /
    sqrt(running_var + epsilon)`, and the running statistics pass through.
    The step returns the next running statistics as updated state.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_FloatTensor:$weight,
                   KGraph_FloatTensor:$bias, KGraph_FloatTensor:$running_mean,
                   KGraph_FloatTensor:$running_var, BoolAttr:$training,
                   DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                   DefaultValuedAttr<KGraph_PositiveF64, "1e-5">:$epsilon);
  let results = (outs KGraph_FloatTensor:$output, KGraph_FloatTensor:$mean,
                 KGraph_FloatTensor:$rstd,
                 KGraph_FloatTensor:$next_running_mean,
                 KGraph_FloatTensor:$next_running_var);
  let assemblyFormat = "$input `,` $weight `,` $bias `,` $running_mean `,` "
                       "$running_var attr-dict `:` type($input) `,` "
                       "type($weight)";
  let hasVerifier = 1;
}

def KGraph_BatchNormBackwardOp : KGraph_PureOp<"batch_norm_backward",
    [AllTypesMatch<["grad_output", "input", "grad_input"]>,
     AllTypesMatch<["weight", "mean", "rstd", "grad_weight", "grad_bias"]>]> {
  let summary = "Gradients of batch_norm for its input, weight and bias";
  let description = [{
    `mean` and `rstd` are the statistics `kgraph.batch_norm` normalised by.
    In training the batch statistics depend on the input, and the input
    gradient has the two extra terms of that dependence; in evaluation it
    is `grad_output * weight * rstd`.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$input, KGraph_FloatTensor:$mean,
                   KGraph_FloatTensor:$rstd, KGraph_FloatTensor:$weight,
                   BoolAttr:$training);
  let results = (outs KGraph_FloatTensor:$grad_input,
                 KGraph_FloatTensor:$grad_weight, KGraph_FloatTensor:$grad_bias);
  let assemblyFormat = "$grad_output `,` $input `,` $mean `,` $rstd `,` "
                       "$weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def KGraph_MaxPoolOp : KGraph_PureOp<"max_pool", [InferTypeOpAdaptor]> {
  let summary = "Max pooling over windows of the spatial dims";
  let description = [{
    `output[n, c, o...]` is the largest `input[n, c, o*stride - padding +
    r*dilation]` over the taps `r...` inside the input (padding never
    wins). `ceil_mode` rounds the output size up as PyTorch does, never
    starting a window in the right padding.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

def KGraph_MaxPoolBackwardOp : KGraph_PureOp<"max_pool_backward",
    [AllTypesMatch<["input", "grad_input"]>]> {
  let summary = "Gradient of max_pool with respect to its input";
  let description = [{
    Each output position passes its gradient to the tap that max_pool
    chose: the first maximum of its window in row-major tap order, as
    PyTorch's indices are. Taps chosen by several windows sum.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $input attr-dict `:` "
                       "type($grad_output) `,` type($input)";
  let hasVerifier = 1;
}

def KGraph_AvgPoolOp : KGraph_PureOp<"avg_pool", [InferTypeOpAdaptor]> {
  let summary = "Average pooling over windows of the spatial dims";
  let description = [{
    `output[n, c, o...]` is the sum of the window's input elements divided
    by `divisor` when it is positive, else by the window's size: with
    `count_include_pad`, the taps inside the padded input (as PyTorch,
    a ceil_mode window hanging past the padding counts less); without, the
    taps inside the input.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "true">:$count_include_pad,
                   DefaultValuedAttr<I64Attr, "0">:$divisor);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($output)";
}

def KGraph_AvgPoolBackwardOp : KGraph_PureOp<"avg_pool_backward"> {
  let summary = "Gradient of avg_pool with respect to its input";
  let description = [{
    Each output position spreads its gradient, divided as avg_pool divided
    its sum, over the taps of its window inside the input. The result type
    is the input's, checked by the verifier.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                   DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "true">:$count_include_pad,
                   DefaultValuedAttr<I64Attr, "0">:$divisor);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output attr-dict `:` type($grad_output) `->` "
                       "type($grad_input)";
  let hasVerifier = 1;
}

#endif // KILN_KGRAPH_WINDOW_OPS_TD
