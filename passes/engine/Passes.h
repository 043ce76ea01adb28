//===- Passes.h - the engine phase ------------------------------*- C++ -*-===//

#ifndef KILN_PASSES_ENGINE_PASSES_H
#define KILN_PASSES_ENGINE_PASSES_H

#include "dialects/kisa/KisaDialect.h"
#include "dialects/ktile/KTileDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln::engine_passes {

#define GEN_PASS_DECL
#include "passes/engine/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/engine/Passes.h.inc"

} // namespace kiln::engine_passes

#endif // KILN_PASSES_ENGINE_PASSES_H
