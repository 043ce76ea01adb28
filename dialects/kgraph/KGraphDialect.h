//===- KGraphDialect.h - the kgraph dialect and its ops --------*- C++ -*-===//

#ifndef KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H
#define KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kgraph/KGraphDialect.h.inc"

#include "dialects/kgraph/KGraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/kgraph/KGraphOps.h.inc"

namespace kiln::kgraph {

/// Names of the function argument/result attributes that carry a value's role
/// in the training step (see the dialect description).
inline constexpr llvm::StringLiteral kNameAttr = "kgraph.name";
inline constexpr llvm::StringLiteral kRoleAttr = "kgraph.role";
inline constexpr llvm::StringLiteral kAliasesAttr = "kgraph.aliases";

} // namespace kiln::kgraph

#endif // KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H
