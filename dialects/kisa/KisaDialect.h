//===- KisaDialect.h - the kisa dialect -------------------------*- C++ -*-===//

#ifndef KILN_DIALECTS_KISA_KISADIALECT_H
#define KILN_DIALECTS_KISA_KISADIALECT_H

#include "compiler/target/Isa.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Error.h"

#include "dialects/kisa/KisaDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kisa/KisaAttrs.h.inc"

namespace kiln::kisa {
/// The shared verifier of every instruction op.
llvm::LogicalResult verifyInstruction(mlir::Operation *op);
} // namespace kiln::kisa

#define GET_OP_CLASSES
#include "dialects/kisa/KisaOps.h.inc"

namespace kiln::kisa {

/// The instruction an op stands for; errors name the attribute at fault.
llvm::Expected<isa::Instruction> toInstruction(mlir::Operation *op);

/// The instruction of `opcode` whose fields (operand access patterns, ALU or
/// activation names, immediates, engine, synchronisation) are the attributes
/// of `op`, named as the kisa op names them. ktile ops share these names.
llvm::Expected<isa::Instruction>
instructionFromAttributes(mlir::Operation *op, isa::Opcode opcode);

/// Builds the op of an instruction (the disassembler's direction).
mlir::Operation *createInstructionOp(mlir::OpBuilder &builder,
                                     mlir::Location loc,
                                     const isa::Instruction &inst);

/// What the instructions of `program` may use.
llvm::Expected<isa::Limits> limitsOf(ProgramOp program);

isa::AccessPattern toAccessPattern(AccessPatternAttr attr);
AccessPatternAttr toAttr(mlir::MLIRContext *context,
                         const isa::AccessPattern &ap);
mlir::Type toMlirType(mlir::MLIRContext *context, isa::DType dtype);
std::optional<isa::DType> toIsaType(mlir::Type type);

} // namespace kiln::kisa

#endif // KILN_DIALECTS_KISA_KISADIALECT_H
