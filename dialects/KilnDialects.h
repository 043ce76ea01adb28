//===- KilnDialects.h - every dialect Kiln's tools load ---------*- C++ -*-===//

#ifndef KILN_DIALECTS_KILNDIALECTS_H
#define KILN_DIALECTS_KILNDIALECTS_H

#include "dialects/kgraph/KGraphDialect.h"
#include "dialects/kisa/KisaDialect.h"
#include "dialects/ktile/KTileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

namespace kiln {

/// Kiln's dialects plus the upstream ones that appear beside them in IR.
inline void registerKilnDialects(mlir::DialectRegistry &registry) {
  registry
      .insert<kgraph::KGraphDialect, ktile::KTileDialect, kisa::KisaDialect,
              mlir::func::FuncDialect,
              mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
}

} // namespace kiln

#endif // KILN_DIALECTS_KILNDIALECTS_H
