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
    semaphores its instructions use (ids 0 .. semaphores-1); `world_size` and
    `tensor_parallel` the sizes of the data-parallel and tensor-parallel
    groups its collectives were compiled for. The body holds
    `kisa.buffer` declarations and instructions; each engine's stream is its
    instructions in body order.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DefaultValuedAttr<StrAttr, "\"trn1\"">:$target,
                       I64Attr:$hbm_bytes, I64Attr:$semaphores,
                       DefaultValuedAttr<I64Attr, "1">:$world_size,
                       DefaultValuedAttr<I64Attr, "1">:$tensor_parallel);
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

// One op per instruction of compiler/target/InstructionSet.td, its summary
// naming the engines that run it. Every instruction takes the same
// synchronisation attributes: it waits until semaphore wait_sem[i] >=
// wait_value[i] for every i, and increments each semaphore of `signal` by
// one when it completes. A DMA instruction also names its queue.
class Kisa_InstructionOp<IsaInstruction inst>
    : Op<Kisa_Dialect, inst.Mnemonic, [HasParent<"ProgramOp">]> {
  let summary = inst.EngineProse # ": " # inst.Doc;
  let arguments = !con(Kisa_InstructionArguments<inst>.Arguments,
      !if(!empty(!filter(e, inst.Engines, !eq(e, IsaDma))), (ins),
          (ins OptionalAttr<I64Attr>:$queue)),
      (ins OptionalAttr<StrAttr>:$engine,
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

foreach inst = IsaInstructions in
  def Kisa_ # inst.CppName # Op : Kisa_InstructionOp<inst>;

#endif // KILN_KISA_OPS_TD
