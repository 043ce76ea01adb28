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
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <array>
#include <optional>

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

/// Builds the ops of instructions (the disassembler's direction) at the
/// builder's insertion point. Each op's fields are set as its properties,
/// with the op and attribute names looked up once: a large program has
/// millions of instructions, and an attribute dictionary per op would be
/// uniqued (and kept) by the context.
class InstructionOpBuilder {
public:
  explicit InstructionOpBuilder(mlir::OpBuilder &builder) : builder(builder) {}

  mlir::Operation *create(mlir::Location loc, const isa::Instruction &inst);

private:
  mlir::StringAttr name(llvm::StringRef text);

  mlir::OpBuilder &builder;
  std::array<std::optional<mlir::OperationName>, isa::kOpcodes> opNames;
  llvm::StringMap<mlir::StringAttr> attributeNames;
};

/// What the instructions of `program` may use.
llvm::Expected<isa::Limits> limitsOf(ProgramOp program);

isa::AccessPattern toAccessPattern(AccessPatternAttr attr);
AccessPatternAttr toAttr(mlir::MLIRContext *context,
                         const isa::AccessPattern &ap);
mlir::Type toMlirType(mlir::MLIRContext *context, isa::DType dtype);
std::optional<isa::DType> toIsaType(mlir::Type type);

} // namespace kiln::kisa

#endif // KILN_DIALECTS_KISA_KISADIALECT_H
