//===- KisaOps.td - kisa operations ----------------------------------------===//

#ifndef KILN_KISA_OPS_TD
#define KILN_KISA_OPS_TD

include "dialects/kisa/KisaBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Kisa_ProgramOp : Op<Kisa_Dialect, "program", [
    Symbol, NoTerminator, SingleBlock, NoRegionArguments,
    IsolatedFromAbove]> {
  let summary = "One engine program: HBM buffers and instructions";
  let description = [{
    `hbm_bytes` is the size of the program's HBM space; `semaphores` how many
    semaphores its instructions use (ids 0 .. semaphores-1); `world_size` the
    data-parallel group its collectives were compiled for. The body holds
    `kisa.buffer` declarations and instructions; each engine's stream is its
    instructions in body order.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DefaultValuedAttr<StrAttr, "\"trn1\"">:$target,
                       I64Attr:$hbm_bytes, I64Attr:$semaphores,
                       DefaultValuedAttr<I64Attr, "1">:$world_size);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Kisa_BufferOp : Op<Kisa_Dialect, "buffer", [HasParent<"ProgramOp">]> {
  let summary = "A named HBM buffer: an input, output or constant of the step";
  let description = [{
    `role` is `input`, `output`, `inout` (read, then replaced: parameters and
    optimizer state) or `constant` (then `value` holds its contents, loaded
    before the first instruction runs).
  }];
  let arguments = (ins StrAttr:$name, I64Attr:$offset, TypeAttr:$dtype,
                       DenseI64ArrayAttr:$shape, StrAttr:$role,
                       OptionalAttr<ElementsAttr>:$value);
  let assemblyFormat = "$name attr-dict";
  let hasVerifier = 1;
}

// Every instruction takes the same synchronisation attributes: it waits
// until semaphore wait_sem[i] >= wait_value[i] for every i, and increments
// each semaphore of `signal` by one when it completes.
class Kisa_InstructionOp<string mnemonic, string doc, dag fields>
    : Op<Kisa_Dialect, mnemonic, [HasParent<"ProgramOp">]> {
  let summary = doc;
  let arguments = !con(fields, (ins
      OptionalAttr<StrAttr>:$engine,
      OptionalAttr<DenseI64ArrayAttr>:$wait_sem,
      OptionalAttr<DenseI64ArrayAttr>:$wait_value,
      OptionalAttr<DenseI64ArrayAttr>:$signal));
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::kiln::kisa::verifyInstruction(getOperation());
    }
  }];
}

def Kisa_MatmulOp : Kisa_InstructionOp<"matmul",
    "TensorE: dst[M, N] (+)= stationary[K, M]^T . moving[K, N] into PSUM",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$stationary, Kisa_AccessPatternAttr:$moving,
         OptionalAttr<BoolAttr>:$accumulate)>;
def Kisa_TransposeOp : Kisa_InstructionOp<"transpose",
    "TensorE: dst[F, P] = src[P, F]^T, SBUF to PSUM (an identity matmul)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def Kisa_ActivationOp : Kisa_InstructionOp<"activation",
    "ScalarE: dst = func(src * scale + bias), optionally summing each row into reduce_dst",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, OptionalAttr<Kisa_AccessPatternAttr>:$reduce_dst,
         StrAttr:$func, OptionalAttr<F64Attr>:$scale, OptionalAttr<F64Attr>:$bias)>;
def Kisa_TensorTensorOp : Kisa_InstructionOp<"tensor_tensor",
    "VectorE or GpSimd: dst = lhs op rhs, elementwise",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$lhs, Kisa_AccessPatternAttr:$rhs, StrAttr:$op)>;
def Kisa_TensorScalarOp : Kisa_InstructionOp<"tensor_scalar",
    "VectorE, ScalarE (floating point only) or GpSimd: dst = (src op0 scalar0) op1 scalar1, a scalar per partition from 'scalars' where scalar_operands says (bit 0: scalar0, bit 1: scalar1)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$op0, F64Attr:$scalar0,
         OptionalAttr<StrAttr>:$op1, OptionalAttr<F64Attr>:$scalar1,
         OptionalAttr<Kisa_AccessPatternAttr>:$scalars, OptionalAttr<I64Attr>:$scalar_operands)>;
def Kisa_TensorReduceOp : Kisa_InstructionOp<"tensor_reduce",
    "VectorE: reduce the innermost free dimension with add, max, min or mul",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$op)>;
def Kisa_TensorCopyOp : Kisa_InstructionOp<"tensor_copy",
    "VectorE, ScalarE or GpSimd: copy with dtype conversion",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def Kisa_IotaOp : Kisa_InstructionOp<"iota",
    "GpSimd or VectorE: dst[p, i] = base + partition_step * p + free_step * i",
    (ins Kisa_AccessPatternAttr:$dst, OptionalAttr<I64Attr>:$base,
         OptionalAttr<I64Attr>:$partition_step, OptionalAttr<I64Attr>:$free_step)>;
def Kisa_RandomOp : Kisa_InstructionOp<"random",
    "GpSimd: dst[p, i] = uniform(seed[p], counter + partition_step * p + free_step * i + group_step * (i / n)), n the innermost dim's size (group_step a whole number)",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$seed,
         OptionalAttr<I64Attr>:$counter, OptionalAttr<I64Attr>:$partition_step,
         OptionalAttr<I64Attr>:$free_step, OptionalAttr<F64Attr>:$group_step)>;
def Kisa_MemsetOp : Kisa_InstructionOp<"memset",
    "GpSimd or VectorE: dst = value", (ins Kisa_AccessPatternAttr:$dst, F64Attr:$value)>;
def Kisa_AffineSelectOp : Kisa_InstructionOp<"affine_select",
    "GpSimd or VectorE: dst = (base + partition_step*p + free_step*i compare 0) ? src : fill",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$compare, F64Attr:$fill,
         OptionalAttr<I64Attr>:$base, OptionalAttr<I64Attr>:$partition_step,
         OptionalAttr<I64Attr>:$free_step)>;
def Kisa_PartitionReduceOp : Kisa_InstructionOp<"partition_reduce",
    "GpSimd: reduce across partitions into one partition",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$op)>;
def Kisa_PartitionBroadcastOp : Kisa_InstructionOp<"partition_broadcast",
    "GpSimd: copy one partition to every partition of dst",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src)>;
def Kisa_DmaCopyOp : Kisa_InstructionOp<"dma_copy",
    "DMA queue: copy HBM<->SBUF or SBUF<->SBUF, with dtype conversion",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, OptionalAttr<I64Attr>:$queue)>;
def Kisa_DmaGatherOp : Kisa_InstructionOp<"dma_gather",
    "DMA queue: dst[p, :] = the src row of partition p, index_stride * indices[p] elements on; an index outside [0, index_bound) stops the program",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, Kisa_AccessPatternAttr:$indices,
         I64Attr:$index_stride, I64Attr:$index_bound, OptionalAttr<I64Attr>:$queue)>;
def Kisa_DmaScatterOp : Kisa_InstructionOp<"dma_scatter",
    "DMA queue: the dst row of partition p, index_stride * indices[p] elements on, = src[p, :] (in partition order); an index outside [0, index_bound) stops the program before anything is written",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, Kisa_AccessPatternAttr:$indices,
         I64Attr:$index_stride, I64Attr:$index_bound, OptionalAttr<I64Attr>:$queue)>;
def Kisa_CollectiveOp : Kisa_InstructionOp<"collective",
    "DMA queue: all-reduce (sum, mean), all-gather or reduce-scatter of HBM buffers",
    (ins Kisa_AccessPatternAttr:$dst, Kisa_AccessPatternAttr:$src, StrAttr:$kind,
         OptionalAttr<I64Attr>:$queue)>;

#endif // KILN_KISA_OPS_TD
