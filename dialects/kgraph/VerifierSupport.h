//===- VerifierSupport.h - helpers of the kgraph verifiers ------*- C++ -*-===//
//
// Private to the dialect's verifier files (KGraphOps.cpp,
// KGraphWindowOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KGRAPH_VERIFIERSUPPORT_H
#define KILN_DIALECTS_KGRAPH_VERIFIERSUPPORT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace kiln::kgraph {

using OptLoc = std::optional<mlir::Location>;

inline mlir::RankedTensorType tensorOf(mlir::Value v) {
  return llvm::dyn_cast_if_present<mlir::RankedTensorType>(
      v ? v.getType() : mlir::Type());
}

inline mlir::LogicalResult fail(OptLoc loc, const llvm::Twine &message) {
  return mlir::emitOptionalError(loc, message);
}

inline std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

} // namespace kiln::kgraph

#endif // KILN_DIALECTS_KGRAPH_VERIFIERSUPPORT_H
