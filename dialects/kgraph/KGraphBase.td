//===- KGraphBase.td - kgraph dialect, types and attribute constraints ----===//
//
// The kgraph dialect is the tensor-level training graph: one func.func per
// training step, forward + backward + optimizer update, on statically shaped
// tensors. It mirrors the aten-level op set that PyTorch training graphs use,
// so that a front end maps each aten op to one kgraph op.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KGRAPH_BASE_TD
#define KILN_KGRAPH_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

def KGraph_Dialect : Dialect {
  let name = "kgraph";
  let cppNamespace = "::kiln::kgraph";
  let summary = "Tensor-level training graphs (forward, backward, optimizer update)";
  let description = [{
    `kgraph` holds one training step as a `func.func` of ops on ranked,
    statically shaped tensors of `f32`, `bf16`, `f16`, `i32`, `i64` or `i1`.

    Function arguments and results carry their role in the step as the
    attributes `kgraph.name` and `kgraph.role` (`parameter`, `optimizer_state`,
    `batch_input`, `hyper_parameter`, `rng_seed`, `buffer`; `loss`, `metric`,
    `updated_parameter`, `updated_state`); an updated parameter or state names
    the argument it replaces with `kgraph.aliases`.

    Binary elementwise ops broadcast their operands as NumPy does (trailing
    dimensions aligned, size-1 dimensions stretched). Operands of one op share
    one element type: the front end inserts `kgraph.cast` where PyTorch would
    promote types. Randomness is explicit: `kgraph.dropout` takes a seed
    operand, so a graph is a pure function of its inputs.

    Plan attributes: passes record on ops what the tile phase will do with
    them, and the dialect verifies each.
    - `kgraph.fusion = N : i64` (`kgraph-fuse-elementwise`): the op, an
      elementwise one, is in fusion group N, lowered as one loop nest.
    - `kgraph.fold` (`kgraph-plan-matmul-operands`): another op's
      instructions compute this one. `"loads"`: a bf16 cast of a matmul
      operand that the product's loads round; `"evacuation"`: the f32 cast
      of a product, done as its tiles leave PSUM; `"on_chip"`: part of a
      one-hot operand that the matmuls reading it compute from its indices.
    - `kgraph.narrowed = array<i64: R...>` (`kgraph-plan-matmul-operands`):
      the op's f32 results R, which only bf16 matmul operands read, are
      stored rounded to bf16.
    - `kgraph.sum_beside = N : i64` and `kgraph.sum_in_loop_nest`
      (`kgraph-plan-row-sums`) on a row sum `ones[1, K] . G`: the earlier
      matmul labelled `kgraph.product = N` (a weight gradient
      `transpose(G) . X`) computes it beside itself from its G tiles; or it
      is a candidate for the loop nest of the group that computes G.
      `kgraph.sum_beside = N` on a `reduce_sum` over all but the first dim
      of a channels-first transpose of a convolution's f32 output (or of
      the f32 cast folded into its evacuation): the convolution labelled N
      computes that per-channel sum as its tiles leave PSUM.
    - The epilogue plan (`kgraph-plan-epilogues`): `kgraph.row_chains` on
      the function lists each row chain's `from` and `shape`, and
      `kgraph.row_chain = K` marks the ops of chain K; on a matmul,
      `kgraph.epilogue = G` or `kgraph.chain_epilogue = K` is the fusion
      group or chain it computes on its output tiles (on a convolution,
      `kgraph.epilogue = G`, the group it computes on its output blocks); labels name products
      (`kgraph.product = N`) for `kgraph.early_for = array<i64: N...>` (a
      view lowered before those products), `kgraph.joins_epilogue = N` (an
      op product N's epilogue computes too) and `kgraph.sum_in_epilogue =
      N` (a row sum it folds).
    - The buffer plan (`kgraph-plan-buffers`): `kgraph.in_place =
      array<i64: A...>` computes result r into argument A[r]'s buffer (-1:
      its own); `kgraph.into_slices = array<i64: I...>` on a concat
      computes inputs I into their part of its buffer; `kgraph.copied_into
      = array<i64: A...>` copies result r into argument A[r]'s buffer right
      after computing it, not at the function's end, so its own buffer dies
      there.
  }];
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def KGraph_FloatElement : AnyTypeOf<[F32, BF16, F16]>;
def KGraph_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64, I1]>;
def KGraph_NumericTensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64]>;
def KGraph_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def KGraph_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def KGraph_BoolTensor : StaticShapeTensorOf<[I1]>;
def KGraph_SeedTensor : 0DTensorOf<[I64]>;

//===----------------------------------------------------------------------===//
// Attribute constraints
//===----------------------------------------------------------------------===//

// A string attribute restricted to a fixed set of words. Strings rather than
// integer enums keep the protobuf graph format readable and let the front end
// write attributes without a table of enum values.
class KGraph_StrEnum<list<string> cases> : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::is_contained(::llvm::ArrayRef<::llvm::StringRef>{"
          # !interleave(!foreach(c, cases, "\"" # c # "\""), ", ")
          # "}, ::llvm::cast<::mlir::StringAttr>($_self).getValue())">,
    "one of: " # !interleave(cases, ", ")>]>;

def KGraph_GeluApproximation : KGraph_StrEnum<["none", "tanh"]>;
def KGraph_CompareDirection : KGraph_StrEnum<["eq", "ne", "lt", "le", "gt", "ge"]>;
def KGraph_LossReduction : KGraph_StrEnum<["none", "mean", "sum"]>;
def KGraph_AllReduceKind : KGraph_StrEnum<["sum", "mean"]>;
// The group a collective runs across: the data-parallel group (the
// replicas) or the tensor-parallel group (the shards of one replica).
def KGraph_CollectiveGroup : KGraph_StrEnum<["data", "tensor"]>;
// Which side of a checkpointed function a value crosses.
def KGraph_CheckpointSide : KGraph_StrEnum<["input", "output"]>;

def KGraph_Probability : ConfinedAttr<F64Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() < 1.0">,
    "a probability in [0, 1)">]>;
def KGraph_PositiveF64 : ConfinedAttr<F64Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "a positive number">]>;

#endif // KILN_KGRAPH_BASE_TD
