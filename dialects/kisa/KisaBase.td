//===- KisaBase.td - kisa dialect and access patterns ----------------------===//
//
// kisa is the NeuronCore instruction level: one op per engine instruction of
// machine-model.md, each bound to an engine, with its operands as access
// patterns into HBM, SBUF or PSUM and its synchronisation (semaphore waits
// and signals) explicit. Operands are attributes, not SSA values: engine
// programs address memory, they do not pass values (see
// docs/dialects/kisa-rationale.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KISA_BASE_TD
#define KILN_KISA_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "compiler/target/InstructionSet.td"

def Kisa_Dialect : Dialect {
  let name = "kisa";
  let cppNamespace = "::kiln::kisa";
  let summary = "NeuronCore engine instructions, DMA queues and semaphores";
  let description = [{
    A `kisa.program` holds the HBM buffers of one compiled step and the
    instructions of every engine. Each engine (Tensor, Vector, Scalar, GpSimd,
    and each DMA queue) runs its instructions in program order; instructions
    of different engines are ordered only through semaphores: an instruction
    may wait until semaphores reach values and increments semaphores when it
    completes. The verifiers enforce every limit of the machine model, using
    the same rules as the artifact loader.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def Kisa_AccessPatternAttr : AttrDef<Kisa_Dialect, "AccessPattern"> {
  let mnemonic = "ap";
  let summary = "A tile: memory, dtype, partitions and up to four free dims";
  let description = [{
    `#kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>` names 128
    partitions starting at 0 and, in each, 512 f32 elements with stride 1 from
    byte 0. `dims` lists (stride x size) pairs in elements, outermost first.
    HBM has no partitions: `pstride = N` gives the element distance between
    the rows that go to consecutive partitions.
  }];
  let parameters = (ins "unsigned":$memory, "::mlir::Type":$dtype,
                        "int64_t":$partition, "int64_t":$partitions,
                        "int64_t":$offset, "int64_t":$partitionStride,
                        ArrayRefParameter<"int64_t">:$strides,
                        ArrayRefParameter<"int64_t">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

// The attribute that an instruction's argument is, in kisa and ktile alike.
class Kisa_ArgumentAttr<IsaArgument arg> {
  Attr Required = !cond(!eq(arg.Kind, IsaAccessPatternKind) : Kisa_AccessPatternAttr,
                        !eq(arg.Kind, IsaF64Kind) : F64Attr,
                        !eq(arg.Kind, IsaI64Kind) : I64Attr,
                        !eq(arg.Kind, IsaBoolKind) : BoolAttr,
                        // ALU ops, activation functions and collectives by name.
                        !eq(arg.Kind.SlotGroup, "op") : StrAttr);
  Attr Constraint = !if(arg.Optional, OptionalAttr<Required>, Required);
}

// An instruction's arguments (compiler/target/InstructionSet.td) as the
// `ins` of its op, in the order the instruction lists them.
class Kisa_InstructionArguments<IsaInstruction inst> {
  dag Arguments = !foldl((ins), inst.Arguments, args, arg,
      !con(args, !dag(ins, [Kisa_ArgumentAttr<arg>.Constraint], [arg.Name])));
}

#endif // KILN_KISA_BASE_TD
