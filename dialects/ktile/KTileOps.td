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
    HBM memory plan, which record it as `address` (bytes into each partition
    on chip, into the program's HBM space for HBM). `name` labels a buffer
    in dumps.

    ```mlir
    %t = ktile.alloc : memref<128x512xf32, "sbuf">
    ```
  }];
  let arguments = (ins OptionalAttr<StrAttr>:$name,
                       OptionalAttr<ElementsAttr>:$value,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$address);
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

// One compute op per instruction of compiler/target/InstructionSet.td that
// the tile phase emits: buffers in the instruction's operand order
// (destination first), and the instruction's arguments named as in kisa.
class KTile_TileOp<IsaInstruction inst> : Op<KTile_Dialect, inst.Mnemonic> {
  let summary = inst.Doc;
  let arguments = !con((ins Variadic<AnyMemRef>:$buffers),
                       Kisa_InstructionArguments<inst>.Arguments);
  let assemblyFormat = "$buffers attr-dict `:` type($buffers)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::kiln::ktile::verifyTileOp(getOperation());
    }
  }];
}

foreach inst = !filter(i, IsaInstructions, i.TileOp) in
  def KTile_ # inst.CppName # Op : KTile_TileOp<inst>;

#endif // KILN_KTILE_OPS_TD
