//===- InstructionSet.td - the NeuronCore instructions, each once ---------===//
//
// Every engine instruction is declared here and nowhere else. Three things
// are generated from this list:
//
//   - isa::Opcode and the encoding's schema table (isa::schemaOf), by
//     kiln-isa-tblgen --gen-opcode-enum and --gen-schema-table;
//   - the kisa instruction ops (dialects/kisa/KisaOps.td);
//   - the ktile compute ops (dialects/ktile/KTileOps.td).
//
// The file is plain TableGen with no MLIR in it: compiler/target is the
// ground floor that the runtime loads artifacts with, and the dialects build
// their ops from it, not the other way round. What each instruction computes
// lives in the simulator (runtime/sim/Semantics.cpp), its cost in
// compiler/target/Timing.cpp and its machine-model rules in isa::validate;
// docs/extending.md lists every file a new instruction touches.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_INSTRUCTIONSET_TD
#define KILN_COMPILER_TARGET_INSTRUCTIONSET_TD

// An engine: its isa::Engine enumerator and how the documentation names it.
class IsaEngine<string cppName, string prose> {
  string CppName = cppName;
  string Prose = prose;
}
def IsaTensorE : IsaEngine<"Tensor", "TensorE">;
def IsaVectorE : IsaEngine<"Vector", "VectorE">;
def IsaScalarE : IsaEngine<"Scalar", "ScalarE">;
def IsaGpSimd : IsaEngine<"GpSimd", "GpSimd">;
def IsaDma : IsaEngine<"Dma", "DMA queue">;

// What an argument holds and which group of the isa::Instruction's slots
// keeps it: access patterns go to operands[0..2], names of ALU ops,
// activation functions or collectives to op0 and op1 (as isa::FieldKind
// `FieldKind` says), doubles to imm0 and imm1, integers to int0..int2, a
// flag to bit 0 of flags. Within a group, arguments take the slots in the
// order the instruction lists them.
class IsaKind<string slotGroup, int slots, string fieldKind = "None"> {
  string SlotGroup = slotGroup;
  int Slots = slots;
  string FieldKind = fieldKind;
}
def IsaAccessPatternKind : IsaKind<"operand", 3>;
def IsaAluKind : IsaKind<"op", 2, "Alu">;
def IsaActKind : IsaKind<"op", 2, "Act">;
def IsaCollectiveKind : IsaKind<"op", 2, "Collective">;
def IsaF64Kind : IsaKind<"imm", 2>;
def IsaI64Kind : IsaKind<"int", 3>;
def IsaBoolKind : IsaKind<"flag", 1>;

// One argument of an instruction, under the attribute name that kisa and
// ktile give it and the disassembly prints.
class IsaArgument<string name, IsaKind kind, bit optional = 0> {
  string Name = name;
  IsaKind Kind = kind;
  bit Optional = optional;
}
// An access pattern into HBM, SBUF or PSUM; the first is the destination.
class IsaOperand<string name> : IsaArgument<name, IsaAccessPatternKind>;
class IsaAlu<string name> : IsaArgument<name, IsaAluKind>;
class IsaAct<string name> : IsaArgument<name, IsaActKind>;
class IsaCollective<string name> : IsaArgument<name, IsaCollectiveKind>;
class IsaF64<string name> : IsaArgument<name, IsaF64Kind>;
class IsaI64<string name> : IsaArgument<name, IsaI64Kind>;
class IsaBool<string name> : IsaArgument<name, IsaBoolKind>;
// An argument that may be left out: an operand then reads as absent, a
// field as zero (false, bypass).
class IsaOptional<IsaArgument arg> : IsaArgument<arg.Name, arg.Kind, 1>;

class IsaArgumentsOf<list<IsaArgument> arguments, IsaKind kind> {
  list<IsaArgument> Arguments = !filter(a, arguments, !eq(a.Kind, kind));
}

// "A", "A or B", "A, B or C".
class IsaProseList<list<string> names> {
  string Text = !foldl("", !range(!size(names)), text, i,
      text # !cond(!eq(i, 0) : "",
                   !eq(i, !sub(!size(names), 1)) : " or ",
                   true : ", ") # names[i]);
}

// "tensor_tensor" -> "TensorTensor".
class IsaCamelCase<string snake> {
  string Text = !foldl("", !range(!size(snake)), text, i,
      !cond(!eq(!substr(snake, i, 1), "_") : text,
            !eq(!substr("_" # snake, i, 1), "_")
                : text # !toupper(!substr(snake, i, 1)),
            true : text # !substr(snake, i, 1)));
}

// An instruction: its mnemonic (the kisa and ktile op names), the engines
// that can run it (the documentation lists them in this order), a one-line
// summary of what it computes, and its arguments in the order the ops
// declare them.
class IsaInstruction<string mnemonic, list<IsaEngine> engines, string doc,
                     list<IsaArgument> arguments> {
  string Mnemonic = mnemonic;
  // The isa::Opcode enumerator and the op classes' stem: kisa::TensorTensorOp.
  string CppName = IsaCamelCase<mnemonic>.Text;
  list<IsaEngine> Engines = engines;
  string EngineProse = IsaProseList<!foreach(e, engines, e.Prose)>.Text;
  string Doc = doc;
  list<IsaArgument> Arguments = arguments;
  list<IsaArgument> Operands =
      IsaArgumentsOf<arguments, IsaAccessPatternKind>.Arguments;
  // Operands the instruction cannot do without: the leading ones that are
  // not optional.
  int RequiredOperands = !size(!filter(a, Operands, !not(a.Optional)));
  // Whether the tile phase has it as a ktile compute op.
  bit TileOp = 1;

  assert !not(!empty(engines)), mnemonic # ": no engine runs it";
  assert !and(!ge(!size(Operands), 1), !le(!size(Operands), 3)),
      mnemonic # ": an instruction has one to three access-pattern operands";
  assert !foldl(1, !range(RequiredOperands), ok, i,
                !and(ok, !not(Operands[i].Optional))),
      mnemonic # ": optional operands come after the required ones";
  assert !le(!size(!filter(a, arguments, !eq(a.Kind.SlotGroup, "op"))), 2),
      mnemonic # ": at most two ALU-op, activation or collective fields (op0, op1)";
  assert !le(!size(IsaArgumentsOf<arguments, IsaF64Kind>.Arguments), 2),
      mnemonic # ": at most two f64 fields (imm0, imm1)";
  assert !le(!size(IsaArgumentsOf<arguments, IsaI64Kind>.Arguments), 3),
      mnemonic # ": at most three i64 fields (int0, int1, int2)";
  assert !le(!size(IsaArgumentsOf<arguments, IsaBoolKind>.Arguments), 1),
      mnemonic # ": at most one bool field (flag bit 0)";
}

// The instruction set in opcode order: an instruction's position is the
// opcode that artifacts store, so a new instruction goes at the end (and is
// a minor version of the artifact format, docs/kneff-format.md).
defset list<IsaInstruction> IsaInstructions = {
  def : IsaInstruction<"matmul", [IsaTensorE],
      "dst[M, N] (+)= stationary[K, M]^T . moving[K, N], into PSUM",
      [IsaOperand<"dst">, IsaOperand<"stationary">, IsaOperand<"moving">,
       IsaOptional<IsaBool<"accumulate">>]>;
  def : IsaInstruction<"transpose", [IsaTensorE],
      "dst[F, P] = src[P, F]^T, SBUF to PSUM (an identity matmul)",
      [IsaOperand<"dst">, IsaOperand<"src">]>;
  def : IsaInstruction<"activation", [IsaScalarE],
      "dst = func(src * scale + bias), optionally summing each row into reduce_dst",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaOptional<IsaOperand<"reduce_dst">>,
       IsaAct<"func">, IsaOptional<IsaF64<"scale">>,
       IsaOptional<IsaF64<"bias">>]>;
  def : IsaInstruction<"tensor_tensor", [IsaVectorE, IsaGpSimd],
      "dst = lhs op rhs, elementwise",
      [IsaOperand<"dst">, IsaOperand<"lhs">, IsaOperand<"rhs">, IsaAlu<"op">]>;
  def : IsaInstruction<"tensor_scalar", [IsaVectorE, IsaScalarE, IsaGpSimd],
      "dst = (src op0 scalar0) op1 scalar1 (on ScalarE, floating point only); a scalar per partition from 'scalars' where scalar_operands says (bit 0: scalar0, bit 1: scalar1)",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaAlu<"op0">, IsaF64<"scalar0">,
       IsaOptional<IsaAlu<"op1">>, IsaOptional<IsaF64<"scalar1">>,
       IsaOptional<IsaOperand<"scalars">>,
       IsaOptional<IsaI64<"scalar_operands">>]>;
  def : IsaInstruction<"tensor_reduce", [IsaVectorE],
      "reduce the innermost free dimension with add, max, min or mul",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaAlu<"op">]>;
  def : IsaInstruction<"tensor_copy", [IsaVectorE, IsaScalarE, IsaGpSimd],
      "copy between on-chip tiles with dtype conversion",
      [IsaOperand<"dst">, IsaOperand<"src">]>;
  def : IsaInstruction<"iota", [IsaGpSimd, IsaVectorE],
      "dst[p, i] = base + partition_step * p + free_step * i",
      [IsaOperand<"dst">, IsaOptional<IsaI64<"base">>,
       IsaOptional<IsaI64<"partition_step">>, IsaOptional<IsaI64<"free_step">>]>;
  def : IsaInstruction<"memset", [IsaGpSimd, IsaVectorE], "dst = value",
      [IsaOperand<"dst">, IsaF64<"value">]>;
  def : IsaInstruction<"affine_select", [IsaGpSimd, IsaVectorE],
      "dst = (base + partition_step*p + free_step*i compare 0) ? src : fill",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaAlu<"compare">, IsaF64<"fill">,
       IsaOptional<IsaI64<"base">>, IsaOptional<IsaI64<"partition_step">>,
       IsaOptional<IsaI64<"free_step">>]>;
  // The tile phase sums across partitions with matmuls against a column of
  // ones and emits neither of these two, so ktile has no op for them.
  def : IsaInstruction<"partition_reduce", [IsaGpSimd],
      "reduce across partitions into one partition",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaAlu<"op">]> {
    let TileOp = 0;
  }
  def : IsaInstruction<"partition_broadcast", [IsaGpSimd],
      "copy one partition to every partition of dst",
      [IsaOperand<"dst">, IsaOperand<"src">]> {
    let TileOp = 0;
  }
  def : IsaInstruction<"dma_copy", [IsaDma],
      "a load (HBM to SBUF), a store (SBUF to HBM) or an SBUF to SBUF move, with dtype conversion",
      [IsaOperand<"dst">, IsaOperand<"src">]>;
  def : IsaInstruction<"collective", [IsaDma],
      "all-reduce (sum, mean), all-gather or reduce-scatter of HBM buffers across the group `group` names (isa::CollectiveGroup: 0 the data-parallel group, 1 the tensor-parallel group)",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaCollective<"kind">,
       IsaOptional<IsaI64<"group">>]>;
  def : IsaInstruction<"random", [IsaGpSimd],
      "dst[p, i] = uniform(seed[p], counter + partition_step * p + free_step * i + group_step * (i / n)), n the innermost dim's size (group_step a whole number)",
      [IsaOperand<"dst">, IsaOperand<"seed">, IsaOptional<IsaI64<"counter">>,
       IsaOptional<IsaI64<"partition_step">>, IsaOptional<IsaI64<"free_step">>,
       IsaOptional<IsaF64<"group_step">>]>;
  def : IsaInstruction<"dma_gather", [IsaDma],
      "dst[p, :] = the src row of partition p, index_stride * indices[p] elements on (an embedding lookup); an index outside [0, index_bound) stops the program",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaOperand<"indices">,
       IsaI64<"index_stride">, IsaI64<"index_bound">]>;
  def : IsaInstruction<"dma_scatter", [IsaDma],
      "the dst row of partition p, index_stride * indices[p] elements on, = src[p, :] (in partition order, an embedding table's row update); an index outside [0, index_bound) stops the program before anything is written",
      [IsaOperand<"dst">, IsaOperand<"src">, IsaOperand<"indices">,
       IsaI64<"index_stride">, IsaI64<"index_bound">]>;
}

#endif // KILN_COMPILER_TARGET_INSTRUCTIONSET_TD
