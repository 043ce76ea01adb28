// Instructions the encoding cannot hold, one per macro (errors.test).

#ifdef NO_SET
def NotAnInstructionSet;
#else
include "compiler/target/InstructionSet.td"
#endif

#ifdef THREE_F64
def : IsaInstruction<"scale3", [IsaVectorE], "three immediates",
    [IsaOperand<"dst">, IsaF64<"a">, IsaF64<"b">, IsaF64<"c">]>;
#endif

#ifdef OPTIONAL_FIRST
def : IsaInstruction<"pick", [IsaVectorE], "an optional operand first",
    [IsaOperand<"dst">, IsaOptional<IsaOperand<"src">>, IsaOperand<"mask">]>;
#endif

#ifdef NO_ENGINE
def : IsaInstruction<"idle", [], "no engine", [IsaOperand<"dst">]>;
#endif
