//===- KTileOps.td - ktile operations --------------------------------------===//

#ifndef KILN_KTILE_OPS_TD
#define KILN_KTILE_OPS_TD

include "dialects/ktile/KTileBase.td"
include "dialects/kisa/KisaBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def KTile_AllocOp : Op<KTile_Dialect, "alloc"> {
  let summary = "A buffer in HBM, SBUF or PSUM";
  let description = [{
    The memref's memory space picks the memory. Addresses are chosen later:
    SBUF and PSUM buffers by the liveness-driven allocator, HBM buffers by the
    HBM memory plan. `name` labels a buffer in dumps.

    ```mlir
    %t = ktile.alloc : memref<128x512xf32, "sbuf">
    ```
  }];
  let arguments = (ins OptionalAttr<StrAttr>:$name,
                       OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyMemRef:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def KTile_ViewOp : Op<KTile_Dialect, "view", [Pure]> {
  let summary = "The same HBM bytes with another shape (a row-major reshape)";
  let arguments = (ins AnyMemRef:$source);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

// Every compute op: buffers in the instruction's operand order (destination
// first), one access-pattern attribute per buffer named as in kisa.
class KTile_TileOp<string mnemonic, string doc, dag fields>
    : Op<KTile_Dialect, mnemonic> {
  let summary = doc;
  let arguments = !con((ins Variadic<AnyMemRef>:$buffers), fields);
  let assemblyFormat = "$buffers attr-dict `:` type($buffers)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::kiln::ktile::verifyTileOp(getOperation());
    }
  }];
}

def KTile_MatmulOp : KTile_TileOp<"matmul",
    "dst[M, N] (+)= stationary[K, M]^T . moving[K, N], into PSUM",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$stationary,
         Kisa_AccessPatternAttr:$moving, OptionalAttr<BoolAttr>:$accumulate)>;
def KTile_TransposeOp : KTile_TileOp<"transpose",
    "dst[F, P] = src[P, F]^T, SBUF to PSUM",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def KTile_ActivationOp : KTile_TileOp<"activation",
    "dst = func(src * scale + bias), optionally summing each row into reduce_dst",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src,
         OptionalAttr<Kisa_AccessPatternAttr>:$reduce_dst, StrAttr:$func,
         OptionalAttr<F64Attr>:$scale, OptionalAttr<F64Attr>:$bias)>;
def KTile_TensorTensorOp : KTile_TileOp<"tensor_tensor",
    "dst = lhs op rhs, elementwise",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$lhs,
         Kisa_AccessPatternAttr:$rhs, StrAttr:$op)>;
def KTile_TensorScalarOp : KTile_TileOp<"tensor_scalar",
    "dst = (src op0 scalar0) op1 scalar1; a scalar per partition from 'scalars' where scalar_operands says (bit 0: scalar0, bit 1: scalar1)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src,
         StrAttr:$op0, F64Attr:$scalar0, OptionalAttr<StrAttr>:$op1,
         OptionalAttr<F64Attr>:$scalar1,
         OptionalAttr<Kisa_AccessPatternAttr>:$scalars,
         OptionalAttr<I64Attr>:$scalar_operands)>;
def KTile_TensorReduceOp : KTile_TileOp<"tensor_reduce",
    "reduce the innermost free dimension with add, max, min or mul",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$op)>;
def KTile_TensorCopyOp : KTile_TileOp<"tensor_copy",
    "copy between on-chip tiles with dtype conversion",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def KTile_IotaOp : KTile_TileOp<"iota",
    "dst[p, i] = base + partition_step * p + free_step * i",
    (ins Kisa_AccessPatternAttr:$dst, OptionalAttr<I64Attr>:$base,
         OptionalAttr<I64Attr>:$partition_step, OptionalAttr<I64Attr>:$free_step)>;
def KTile_RandomOp : KTile_TileOp<"random",
    "dst[p, i] = uniform(seed[p], counter + partition_step * p + free_step * i + group_step * (i / n)), n the innermost dim's size",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$seed,
         OptionalAttr<I64Attr>:$counter, OptionalAttr<I64Attr>:$partition_step,
         OptionalAttr<I64Attr>:$free_step, OptionalAttr<F64Attr>:$group_step)>;
def KTile_MemsetOp : KTile_TileOp<"memset", "dst = value",
    (ins Kisa_AccessPatternAttr:$dst, F64Attr:$value)>;
def KTile_AffineSelectOp : KTile_TileOp<"affine_select",
    "dst = (base + partition_step*p + free_step*i compare 0) ? src : fill",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src,
         StrAttr:$compare, F64Attr:$fill, OptionalAttr<I64Attr>:$base,
         OptionalAttr<I64Attr>:$partition_step, OptionalAttr<I64Attr>:$free_step)>;
def KTile_DmaCopyOp : KTile_TileOp<"dma_copy",
    "a load (HBM to SBUF), a store (SBUF to HBM) or an SBUF to SBUF move",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def KTile_DmaGatherOp : KTile_TileOp<"dma_gather",
    "dst[p, :] = the src row of partition p, index_stride * indices[p] elements on (an embedding lookup)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src,
         Kisa_AccessPatternAttr:$indices, I64Attr:$index_stride, I64Attr:$index_bound)>;
def KTile_DmaScatterOp : KTile_TileOp<"dma_scatter",
    "the dst row of partition p, index_stride * indices[p] elements on, = src[p, :] (an embedding table's row update)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src,
         Kisa_AccessPatternAttr:$indices, I64Attr:$index_stride, I64Attr:$index_bound)>;
def KTile_CollectiveOp : KTile_TileOp<"collective",
    "all-reduce (sum, mean), all-gather or reduce-scatter of HBM buffers",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$kind)>;

#endif // KILN_KTILE_OPS_TD
