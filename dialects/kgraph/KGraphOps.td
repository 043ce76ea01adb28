//===- KGraphOps.td - kgraph operations ------------------------------------===//

#ifndef KILN_KGRAPH_OPS_TD
#define KILN_KGRAPH_OPS_TD

include "dialects/kgraph/KGraphBase.td"
include "dialects/kgraph/KGraphInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class KGraph_Op<string mnemonic, list<Trait> traits = []>
    : Op<KGraph_Dialect, mnemonic, traits>;

// Every kgraph op but the collective is a pure function of its operands.
class KGraph_PureOp<string mnemonic, list<Trait> traits = []>
    : KGraph_Op<mnemonic, !listconcat([Pure], traits)>;

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def KGraph_ConstantOp : KGraph_PureOp<"constant",
    [ConstantLike, InferTypeOpAdaptor]> {
  let summary = "A tensor constant (a scalar is a rank-0 tensor)";
  let description = [{
    Materialises `value`. Large constants may come from an external weights
    file when the graph is imported; in IR they are always dense elements.

    ```mlir
    %c = kgraph.constant dense<1.0> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def KGraph_IotaOp : KGraph_PureOp<"iota"> {
  let summary = "Indices 0, 1, 2, ... along one dimension (arange)";
  let description = [{
    `output[i0, ..., in] = i_dim`, converted to the result's element type.
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs KGraph_NumericTensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Unary elementwise ops
//===----------------------------------------------------------------------===//

// `activation`: the activation function that computes the op, if one does.
class KGraph_UnaryOp<string mnemonic, Type tensorType, string doc,
                     string activation = "", list<Trait> traits = []>
    : KGraph_PureOp<mnemonic, !listconcat(
          [Elementwise, SameOperandsAndResultType,
           KGraph_EngineElementwiseOp], traits)> {
  let summary = doc;
  let extraClassDeclaration = !if(!empty(activation), "",
      "::llvm::StringRef getActivationFunction() { return \"" # activation #
      "\"; }");
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
}

def KGraph_NegOp : KGraph_UnaryOp<"neg", KGraph_NumericTensor, "-x"> {
  let hasFolder = 1;
}
def KGraph_AbsOp : KGraph_UnaryOp<"abs", KGraph_NumericTensor, "|x|", "abs">;
def KGraph_SignOp : KGraph_UnaryOp<"sign", KGraph_NumericTensor, "-1, 0 or 1", "sign">;
def KGraph_ExpOp : KGraph_UnaryOp<"exp", KGraph_FloatTensor, "e^x", "exp">;
def KGraph_LogOp : KGraph_UnaryOp<"log", KGraph_FloatTensor, "natural logarithm", "log">;
def KGraph_Log1pOp : KGraph_UnaryOp<"log1p", KGraph_FloatTensor, "log(1 + x)", "log1p">;
def KGraph_SqrtOp : KGraph_UnaryOp<"sqrt", KGraph_FloatTensor, "square root", "sqrt">;
def KGraph_RsqrtOp : KGraph_UnaryOp<"rsqrt", KGraph_FloatTensor, "1 / sqrt(x)", "rsqrt">;
def KGraph_ReciprocalOp : KGraph_UnaryOp<"reciprocal", KGraph_FloatTensor, "1 / x", "reciprocal">;
def KGraph_TanhOp : KGraph_UnaryOp<"tanh", KGraph_FloatTensor, "hyperbolic tangent", "tanh">;
def KGraph_SigmoidOp : KGraph_UnaryOp<"sigmoid", KGraph_FloatTensor, "1 / (1 + e^-x)", "sigmoid">;
def KGraph_ReluOp : KGraph_UnaryOp<"relu", KGraph_NumericTensor, "max(x, 0)", "relu">;
def KGraph_ErfOp : KGraph_UnaryOp<"erf", KGraph_FloatTensor, "the error function", "erf">;
def KGraph_SinOp : KGraph_UnaryOp<"sin", KGraph_FloatTensor, "sine", "sin">;
def KGraph_CosOp : KGraph_UnaryOp<"cos", KGraph_FloatTensor, "cosine", "cos">;
def KGraph_NotOp : KGraph_UnaryOp<"not", KGraph_BoolTensor, "logical not">;

def KGraph_GeluOp : KGraph_PureOp<"gelu",
    [Elementwise, SameOperandsAndResultType, KGraph_EngineElementwiseOp]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = "none"`: `x * 0.5 * (1 + erf(x / sqrt(2)))`;
    `approximate = "tanh"`: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`,
    as `torch.nn.functional.gelu` defines them.
  }];
  let arguments = (ins KGraph_FloatTensor:$input,
      DefaultValuedAttr<KGraph_GeluApproximation, "\"none\"">:$approximate);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let extraClassDeclaration = [{
    ::llvm::StringRef getActivationFunction() {
      return getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
    }
  }];
}

//===----------------------------------------------------------------------===//
// Binary elementwise ops (NumPy broadcasting)
//===----------------------------------------------------------------------===//

// `alu`: the ALU op that computes the op; a binary op without one (pow) is
// a composition the graph phase decomposes, not one the engines compute.
class KGraph_BinaryOp<string mnemonic, Type tensorType, string doc,
                      string alu = "", list<Trait> traits = []>
    : KGraph_PureOp<mnemonic, !listconcat(
          [SameOperandsAndResultElementType, InferTypeOpAdaptor],
          !if(!empty(alu), [], [KGraph_EngineElementwiseOp]), traits)> {
  let summary = doc;
  let extraClassDeclaration = !if(!empty(alu), "",
      "::llvm::StringRef getAluOperation() { return \"" # alu # "\"; }");
  let description = [{
    Elementwise, with NumPy broadcasting of the two operands; both operands
    have the same element type.
  }];
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def KGraph_AddOp : KGraph_BinaryOp<"add", KGraph_NumericTensor, "lhs + rhs",
                                   "add", [Commutative]> {
  let hasFolder = 1;
}
def KGraph_SubOp : KGraph_BinaryOp<"sub", KGraph_NumericTensor, "lhs - rhs",
                                   "sub"> {
  let hasFolder = 1;
}
def KGraph_MulOp : KGraph_BinaryOp<"mul", KGraph_NumericTensor, "lhs * rhs",
                                   "mul", [Commutative]> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def KGraph_DivOp : KGraph_BinaryOp<"div", KGraph_NumericTensor,
    "lhs / rhs (true division for floats, truncating for integers)", "div"> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def KGraph_PowOp : KGraph_BinaryOp<"pow", KGraph_FloatTensor, "lhs ^ rhs">;
def KGraph_MaxOp : KGraph_BinaryOp<"max", KGraph_NumericTensor,
    "elementwise maximum (NaN-propagating)", "max", [Commutative]>;
def KGraph_MinOp : KGraph_BinaryOp<"min", KGraph_NumericTensor,
    "elementwise minimum (NaN-propagating)", "min", [Commutative]>;
// On 0/1 operands (the lowering normalises them), and is a product and or
// a maximum.
def KGraph_AndOp : KGraph_BinaryOp<"and", KGraph_BoolTensor, "logical and",
                                   "mul", [Commutative]>;
def KGraph_OrOp : KGraph_BinaryOp<"or", KGraph_BoolTensor, "logical or",
                                  "max", [Commutative]>;

def KGraph_CompareOp : KGraph_PureOp<"compare",
    [SameTypeOperands, InferTypeOpAdaptor, KGraph_EngineElementwiseOp]> {
  let summary = "Elementwise comparison, giving i1";
  let description = [{
    `lhs <direction> rhs` with NumPy broadcasting; `direction` is one of
    `eq`, `ne`, `lt`, `le`, `gt`, `ge`. The operands have the same type:
    compare with a scalar by broadcasting a rank-0 constant first.
  }];
  let arguments = (ins KGraph_Tensor:$lhs, KGraph_Tensor:$rhs,
                   KGraph_CompareDirection:$direction);
  let results = (outs KGraph_BoolTensor:$output);
  let assemblyFormat =
      "$direction `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  // The engines' comparison ALU ops have the directions' names.
  let extraClassDeclaration = [{
    ::llvm::StringRef getAluOperation() { return getDirection(); }
  }];
}

def KGraph_SelectOp : KGraph_PureOp<"select",
    [InferTypeOpAdaptor, KGraph_EngineElementwiseOp]> {
  let summary = "where(condition, on_true, on_false), broadcasting all three";
  let arguments = (ins KGraph_BoolTensor:$condition, KGraph_Tensor:$on_true,
                   KGraph_Tensor:$on_false);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` "
                       "type($condition) `,` type($on_true) `,` type($on_false)";
}

//===----------------------------------------------------------------------===//
// Type conversion and shape ops
//===----------------------------------------------------------------------===//

def KGraph_CastOp : KGraph_PureOp<"cast",
    [Elementwise, SameOperandsAndResultShape, KGraph_EngineElementwiseOp]> {
  let summary = "Element type conversion";
  let description = [{
    Float to float rounds to nearest even; float to integer truncates toward
    zero; to `i1` tests for non-zero; `i1` to a number gives 0 or 1.
  }];
  let arguments = (ins KGraph_Tensor:$input);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasFolder = 1;
}

def KGraph_ReshapeOp : KGraph_PureOp<"reshape", [SameOperandsAndResultElementType]> {
  let summary = "Reshape (view, squeeze, unsqueeze, flatten) in row-major order";
  let arguments = (ins KGraph_Tensor:$input);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def KGraph_TransposeOp : KGraph_PureOp<"transpose",
    [SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let summary = "Permute dimensions: output dim i is input dim permutation[i]";
  let arguments = (ins KGraph_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat =
      "$input `,` $permutation attr-dict `:` type($input) `->` type($output)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def KGraph_BroadcastOp : KGraph_PureOp<"broadcast", [SameOperandsAndResultElementType]> {
  let summary = "Broadcast (expand) to the result shape with NumPy rules";
  let arguments = (ins KGraph_Tensor:$input);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def KGraph_SliceOp : KGraph_PureOp<"slice",
    [SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let summary = "Strided slice: input[start:limit:stride] in every dimension";
  let arguments = (ins KGraph_Tensor:$input, DenseI64ArrayAttr:$start,
                   DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def KGraph_ConcatOp : KGraph_PureOp<"concat",
    [SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let summary = "Concatenate along one dimension";
  let arguments = (ins Variadic<KGraph_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, $output)";
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

def KGraph_GatherOp : KGraph_PureOp<"gather", [InferTypeOpAdaptor]> {
  let summary = "torch.gather: output[..i_dim..] = input[..index[..i..]..]";
  let arguments = (ins KGraph_Tensor:$input, KGraph_IndexTensor:$index,
                   I64Attr:$dim);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input `,` $index attr-dict `:` type($input) `,` "
                       "type($index) `->` type($output)";
}

def KGraph_ScatterAddOp : KGraph_PureOp<"scatter_add", [InferTypeOpAdaptor]> {
  let summary = "torch.scatter_add: the backward of gather";
  let description = [{
    `output = input`, then `output[..index[..i..]..] += source[..i..]` along
    `dim`. Duplicate indices accumulate.
  }];
  let arguments = (ins KGraph_NumericTensor:$input, KGraph_IndexTensor:$index,
                   KGraph_NumericTensor:$source, I64Attr:$dim);
  let results = (outs KGraph_NumericTensor:$output);
  // The result type is printed: inference while parsing cannot see attributes
  // from attr-dict yet.
  let assemblyFormat = "$input `,` $index `,` $source attr-dict `:` "
                       "type($input) `,` type($index) `,` type($source) `->` "
                       "type($output)";
}

def KGraph_IndexSelectOp : KGraph_PureOp<"index_select", [InferTypeOpAdaptor]> {
  let summary = "torch.index_select: pick whole slices along one dimension";
  let arguments = (ins KGraph_Tensor:$input, KGraph_IndexTensor:$index,
                   I64Attr:$dim);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input `,` $index attr-dict `:` type($input) `,` "
                       "type($index) `->` type($output)";
}

def KGraph_EmbeddingOp : KGraph_PureOp<"embedding", [InferTypeOpAdaptor]> {
  let summary = "Embedding lookup: weight[V, D] at indices [...] gives [..., D]";
  let arguments = (ins KGraph_FloatTensor:$weight, KGraph_IndexTensor:$indices);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$weight `,` $indices attr-dict `:` type($weight) `,` "
                       "type($indices) `->` type($output)";
}

def KGraph_ScatterRowsOp : KGraph_PureOp<"scatter_rows",
    [InferTypeOpAdaptor]> {
  let summary = "input[V, D] with rows picked by indices [...] replaced";
  let description = [{
    The embedding lookup's inverse: `output` is `input` with
    `output[indices[n], :] = rows[n, :]` for each index position n (indices
    flattened, rows `indices' shape + [D]`); where two positions pick one
    row, the later one's row stays. An index outside [0, V) is an error. No
    front end traces it: `kgraph-sparse-table-updates` writes it.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_IndexTensor:$indices,
                   KGraph_FloatTensor:$rows);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input `,` $indices `,` $rows attr-dict `:` "
                       "type($input) `,` type($indices) `,` type($rows) `->` "
                       "type($output)";
}

def KGraph_EmbeddingBackwardOp : KGraph_PureOp<"embedding_backward",
    [InferTypeOpAdaptor]> {
  let summary = "Gradient of embedding: scatter-add of grad rows into [V, D]";
  let description = [{
    `output[indices[i], :] += grad_output[i, :]` over all index positions,
    starting from zeros of shape `[num_weights, D]`. Rows whose index equals
    `padding_idx` (when it is non-negative) get no gradient, as in PyTorch.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_IndexTensor:$indices, I64Attr:$num_weights,
                   DefaultValuedAttr<I64Attr, "-1">:$padding_idx);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$grad_output `,` $indices attr-dict `:` "
                       "type($grad_output) `,` type($indices) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def KGraph_MatmulOp : KGraph_PureOp<"matmul",
    [SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let summary = "Matrix product, batched over leading dimensions";
  let description = [{
    `lhs[..., M, K] · rhs[..., K, N]` (after the optional transposes of the
    last two dimensions of each operand). Both operands have rank ≥ 2; their
    leading (batch) dimensions broadcast with NumPy rules, so a rank-2 `rhs`
    is shared by every batch. Accumulation is at least f32 precision.
  }];
  let arguments = (ins KGraph_FloatTensor:$lhs, KGraph_FloatTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) "
                       "`->` type($output)";
  let hasCanonicalizer = 1;
}

def KGraph_LinearOp : KGraph_PureOp<"linear",
    [SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let summary = "torch.nn.functional.linear: input · weightᵀ + bias";
  let description = [{
    `input[..., in]`, `weight[out, in]`, optional `bias[out]`; the result is
    `[..., out]`. This is aten's `linear`/`addmm` with the weight kept in
    PyTorch's layout; the graph phase decomposes it into a matmul.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_FloatTensor:$weight,
                   Optional<KGraph_FloatTensor>:$bias);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "type($input) `,` type($weight) (`,` type($bias)^)? "
                       "`->` type($output)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class KGraph_ReduceOp<string mnemonic, Type tensorType, string doc>
    : KGraph_PureOp<mnemonic, [SameOperandsAndResultElementType,
                               InferTypeOpAdaptor]> {
  let summary = doc;
  let description = [{
    Reduces over `dims` (each in range, no repeats; empty reduces nothing).
    With `keepdim` the reduced dimensions stay with size 1.
  }];
  let arguments = (ins tensorType:$input, DenseI64ArrayAttr:$dims,
                   DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs tensorType:$output);
  let assemblyFormat =
      "$input `,` $dims attr-dict `:` type($input) `->` type($output)";
}

def KGraph_ReduceSumOp : KGraph_ReduceOp<"reduce_sum", KGraph_NumericTensor, "sum over dims">;
def KGraph_ReduceMeanOp : KGraph_ReduceOp<"reduce_mean", KGraph_FloatTensor, "mean over dims">;
def KGraph_ReduceMaxOp : KGraph_ReduceOp<"reduce_max", KGraph_NumericTensor, "maximum over dims"> {
  let hasCanonicalizer = 1;
}
def KGraph_ReduceMinOp : KGraph_ReduceOp<"reduce_min", KGraph_NumericTensor, "minimum over dims"> {
  let hasCanonicalizer = 1;
}

def KGraph_ArgmaxOp : KGraph_PureOp<"argmax", [InferTypeOpAdaptor]> {
  let summary = "Index of the first maximum along one dimension (i64)";
  let arguments = (ins KGraph_NumericTensor:$input, I64Attr:$dim,
                   DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs StaticShapeTensorOf<[I64]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Neural-network ops and their backwards
//===----------------------------------------------------------------------===//

class KGraph_SoftmaxLikeOp<string mnemonic, string doc>
    : KGraph_PureOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = doc;
  let arguments = (ins KGraph_FloatTensor:$input, I64Attr:$dim);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def KGraph_SoftmaxOp : KGraph_SoftmaxLikeOp<"softmax", "softmax along dim">;
def KGraph_LogSoftmaxOp : KGraph_SoftmaxLikeOp<"log_softmax", "log(softmax) along dim">;

class KGraph_SoftmaxBackwardLikeOp<string mnemonic, string doc>
    : KGraph_PureOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = doc;
  let description = [{
    Takes the gradient of the forward op's output and the forward op's
    output, as aten's `_softmax_backward_data` and
    `_log_softmax_backward_data` do.
  }];
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$output, I64Attr:$dim);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $output attr-dict `:` type($grad_input)";
  let hasVerifier = 1;
}

def KGraph_SoftmaxBackwardOp : KGraph_SoftmaxBackwardLikeOp<"softmax_backward",
    "grad_input = y * (g - sum(g * y, dim))">;
def KGraph_LogSoftmaxBackwardOp : KGraph_SoftmaxBackwardLikeOp<
    "log_softmax_backward", "grad_input = g - exp(y) * sum(g, dim)">;

def KGraph_LayerNormOp : KGraph_PureOp<"layer_norm", [InferTypeOpAdaptor]> {
  let summary = "Layer normalisation over the trailing normalized_rank dims";
  let description = [{
    aten's `native_layer_norm`: returns the normalised, scaled and shifted
    output and the per-row `mean` and `rstd = 1/sqrt(var + eps)` (biased
    variance), both shaped like the input with the normalised dimensions set
    to 1. `weight` and `bias` have the normalised shape.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_FloatTensor:$weight,
                   KGraph_FloatTensor:$bias, I64Attr:$normalized_rank,
                   DefaultValuedAttr<KGraph_PositiveF64, "1e-5">:$epsilon);
  let results = (outs KGraph_FloatTensor:$output, KGraph_FloatTensor:$mean,
                 KGraph_FloatTensor:$rstd);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` "
                       "type($input) `,` type($weight) `,` type($bias) `->` "
                       "type($output) `,` type($mean) `,` type($rstd)";
}

def KGraph_LayerNormBackwardOp : KGraph_PureOp<"layer_norm_backward",
    [InferTypeOpAdaptor]> {
  let summary = "Gradients of layer_norm for its input, weight and bias";
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$input, KGraph_FloatTensor:$mean,
                   KGraph_FloatTensor:$rstd, KGraph_FloatTensor:$weight,
                   I64Attr:$normalized_rank);
  let results = (outs KGraph_FloatTensor:$grad_input,
                 KGraph_FloatTensor:$grad_weight, KGraph_FloatTensor:$grad_bias);
  let assemblyFormat = "$grad_output `,` $input `,` $mean `,` $rstd `,` $weight "
                       "attr-dict `:` type($grad_output) `,` type($input) `,` "
                       "type($mean) `,` type($rstd) `,` type($weight) `->` "
                       "type($grad_input) `,` type($grad_weight) `,` "
                       "type($grad_bias)";
}

class KGraph_ActivationBackwardOp<string mnemonic, string doc,
                                  dag extraArgs = (ins),
                                  list<Trait> traits = []>
    : KGraph_PureOp<mnemonic, !listconcat([SameOperandsAndResultType], traits)> {
  let summary = doc;
  let arguments = !con((ins KGraph_FloatTensor:$grad_output,
                            KGraph_FloatTensor:$saved), extraArgs);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $saved attr-dict `:` type($grad_input)";
}

def KGraph_GeluBackwardOp : KGraph_ActivationBackwardOp<"gelu_backward",
    "gelu's gradient; saved is the forward input",
    (ins DefaultValuedAttr<KGraph_GeluApproximation, "\"none\"">:$approximate),
    [KGraph_EngineElementwiseOp]>;
def KGraph_TanhBackwardOp : KGraph_ActivationBackwardOp<"tanh_backward",
    "g * (1 - y^2); saved is the forward output">;
def KGraph_SigmoidBackwardOp : KGraph_ActivationBackwardOp<"sigmoid_backward",
    "g * y * (1 - y); saved is the forward output">;
def KGraph_ReluBackwardOp : KGraph_ActivationBackwardOp<"relu_backward",
    "aten threshold_backward: g where saved > threshold, else 0",
    (ins DefaultValuedAttr<F64Attr, "0.0">:$threshold)>;

def KGraph_NllLossOp : KGraph_PureOp<"nll_loss", [InferTypeOpAdaptor]> {
  let summary = "Negative log-likelihood of log-probabilities [N, C] or [C]";
  let description = [{
    aten's `nll_loss_forward`: `loss_i = -input[i, target[i]]`, zero where
    `target[i] == ignore_index`; `reduction` is `none` (loss `[N]`), `sum` or
    `mean` (divides by the number of targets not ignored). `total_weight` is
    that count. Cross-entropy is `log_softmax` followed by this op.
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_IndexTensor:$target,
                   DefaultValuedAttr<KGraph_LossReduction, "\"mean\"">:$reduction,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs KGraph_FloatTensor:$loss, KGraph_FloatTensor:$total_weight);
  let assemblyFormat = "$input `,` $target attr-dict `:` type($input) `,` "
                       "type($target) `->` type($loss) `,` type($total_weight)";
}

def KGraph_NllLossBackwardOp : KGraph_PureOp<"nll_loss_backward",
    [InferTypeOpAdaptor]> {
  let summary = "Gradient of nll_loss with respect to its input";
  let arguments = (ins KGraph_FloatTensor:$grad_output,
                   KGraph_FloatTensor:$input, KGraph_IndexTensor:$target,
                   KGraph_FloatTensor:$total_weight,
                   DefaultValuedAttr<KGraph_LossReduction, "\"mean\"">:$reduction,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs KGraph_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $input `,` $target `,` $total_weight "
                       "attr-dict `:` type($grad_output) `,` type($input) `,` "
                       "type($target) `,` type($total_weight) `->` "
                       "type($grad_input)";
}

def KGraph_DropoutOp : KGraph_PureOp<"dropout",
    [InferTypeOpAdaptor, KGraph_EngineElementwiseOp]> {
  let summary = "Dropout with an explicit seed: (output, keep-mask)";
  let description = [{
    Element `i` (row-major) is kept when `uniform(seed, stream, i) >= p`,
    where `uniform` is Kiln's counter-based generator (see the interpreter's
    numerics guide). Kept elements are scaled by `1 / (1 - p)`. `stream`
    separates the dropouts of one graph that share a seed. The mask is the
    keep-mask, for the backward pass (`grad * mask / (1 - p)`).
  }];
  let arguments = (ins KGraph_FloatTensor:$input, KGraph_SeedTensor:$seed,
                   KGraph_Probability:$p, DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs KGraph_FloatTensor:$output, KGraph_BoolTensor:$mask);
  let assemblyFormat = "$input `,` $seed attr-dict `:` type($input) `,` "
                       "type($seed) `->` type($output) `,` type($mask)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def KGraph_AllReduceOp : KGraph_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "All-reduce across a group of workers (sum or mean)";
  let description = [{
    Every worker of the group contributes its operand and receives the
    reduction. Not pure: each worker must execute every all-reduce, in the
    same order, so it is never removed or merged. In a single-worker run it is
    the identity.

    `group` names the group, as for every collective: `data` (the default)
    is the data-parallel group, whose workers hold replicas of the model;
    `tensor` the tensor-parallel group, whose workers hold shards of one
    replica's layers (a row-parallel linear layer sums its partial products
    across it).

    ```mlir
    %y = kgraph.all_reduce %partial {group = "tensor"} : tensor<8x512xf32>
    ```
  }];
  let arguments = (ins KGraph_NumericTensor:$input,
                   DefaultValuedAttr<KGraph_AllReduceKind, "\"sum\"">:$reduction,
                   DefaultValuedAttr<KGraph_CollectiveGroup, "\"data\"">:$group);
  let results = (outs KGraph_NumericTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
}

def KGraph_AllGatherOp : KGraph_Op<"all_gather"> {
  let summary = "Every worker's operand, in rank order, on every worker";
  let description = [{
    The result is the group's operands concatenated along the first
    dimension, rank 0's first: its first dimension is the group's size times
    the operand's. Not pure, like `all_reduce`. No front end traces it:
    `kgraph-sparse-table-updates` writes it for an embedding table trained
    by a group, to learn which rows any worker's batch picks. A worker
    simulated alone (the reference
    interpreter, a group of one) finds its own operand in every slot.

    ```mlir
    %all = kgraph.all_gather %ids : tensor<1024xi32> -> tensor<4096xi32>
    ```
  }];
  let arguments = (ins KGraph_NumericTensor:$input,
                   DefaultValuedAttr<KGraph_CollectiveGroup, "\"data\"">:$group);
  let results = (outs KGraph_NumericTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def KGraph_ReduceScatterOp : KGraph_Op<"reduce_scatter"> {
  let summary = "The group's reduction, each worker keeping its block of rows";
  let description = [{
    Every worker contributes its operand; each receives its own block of
    the reduction (sum or mean) along the first dimension: rank r the rows
    `[r * n, (r + 1) * n)`, `n` the result's first dimension, so the
    operand's first dimension is the group's size times the result's. What
    ZeRO-1 uses in place of `all_reduce` for the gradients whose optimizer
    state is sharded: half an all-reduce's traffic. Not pure. A worker
    simulated alone (the reference interpreter, a group of one) keeps the
    first block of its own operand.

    ```mlir
    %mine = kgraph.reduce_scatter %g {reduction = "mean"} : tensor<1024x48xf32> -> tensor<256x48xf32>
    ```
  }];
  let arguments = (ins KGraph_FloatTensor:$input,
                   DefaultValuedAttr<KGraph_AllReduceKind, "\"sum\"">:$reduction,
                   DefaultValuedAttr<KGraph_CollectiveGroup, "\"data\"">:$group);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def KGraph_WorkerShardOp : KGraph_Op<"worker_shard"> {
  let summary = "This worker's block of rows of a value every worker holds alike";
  let description = [{
    Rank r's result is the operand's rows `[r * n, (r + 1) * n)`, `n` the
    result's first dimension, as `reduce_scatter` divides a value: ZeRO-1
    reads a parameter's block this way to update it beside its gradient's.
    Which block depends on the worker, which the artifact does not fix (one
    artifact serves every rank), so it is not pure: the runtime's rank
    picks it. Alone, a worker takes the first block.

    ```mlir
    %mine = kgraph.worker_shard %w : tensor<1024x48xf32> -> tensor<256x48xf32>
    ```
  }];
  let arguments = (ins KGraph_NumericTensor:$input,
                   DefaultValuedAttr<KGraph_CollectiveGroup, "\"data\"">:$group);
  let results = (outs KGraph_NumericTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def KGraph_GradientOp : KGraph_Op<"gradient", [SameOperandsAndResultType]> {
  let summary = "A parameter's gradient, averaged across the data-parallel group";
  let description = [{
    Front ends wrap each parameter's gradient in this op, between the
    backward pass and the optimizer update. It says what data parallelism
    needs to know and the graph cannot otherwise tell: which values are
    gradients. `kgraph-data-parallel` replaces it with a bucketed
    `all_reduce` (mean) when the step is compiled for more than one worker,
    and with its operand for one; no later pass sees it. The reference
    interpreter, a group of one, treats it as the identity.

    ```mlir
    %g = kgraph.gradient %dw {parameter = "p.fc1.weight"} : tensor<256x784xf32>
    ```
  }];
  let arguments = (ins KGraph_FloatTensor:$input, StrAttr:$parameter);
  let results = (outs KGraph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
}

def KGraph_CheckpointOp : KGraph_Op<"checkpoint", [SameOperandsAndResultType]> {
  let summary = "A value entering or leaving a checkpointed function";
  let description = [{
    Front ends wrap each tensor a checkpointed function reads
    (`torch.utils.checkpoint`) in a `checkpoint` with `side = "input"`, and
    each tensor it returns in one with `side = "output"`, all with the
    call's `region` number. The values the function computes between them
    are what the user chose not to keep: `kgraph-recompute-checkpoints`
    recomputes those the backward pass reads from the region's inputs just
    before the backward pass first needs them, so the step holds only the
    inputs and outputs of each region through the forward pass, and
    replaces every `checkpoint` with its operand; no later pass sees one.
    It has an effect (it is not pure), so common-subexpression elimination
    and canonicalization leave it and the values on either side apart until
    then. The reference interpreter treats it as the identity.

    ```mlir
    %x1 = kgraph.checkpoint %x {region = 0, side = "input"} : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins KGraph_Tensor:$input,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$region,
                   KGraph_CheckpointSide:$side);
  let results = (outs KGraph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
}

include "dialects/kgraph/KGraphWindowOps.td"

#endif // KILN_KGRAPH_OPS_TD
