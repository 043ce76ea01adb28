//===- ArtifactEmission.h - kisa programs <-> .kneff artifacts --*- C++ -*-===//

#ifndef KILN_COMPILER_EMIT_ARTIFACTEMISSION_H
#define KILN_COMPILER_EMIT_ARTIFACTEMISSION_H

#include "dialects/kisa/KisaDialect.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::emit {

/// Encodes a verified program: manifest, one stream per engine (instructions
/// in program order), constants, and the program's own text as source IR.
llvm::Expected<artifact::Artifact> assembleProgram(kisa::ProgramOp program);

/// The program an artifact holds, as kisa IR (engine by engine).
mlir::OwningOpRef<mlir::ModuleOp>
disassembleArtifact(const artifact::Artifact &artifact,
                    mlir::MLIRContext &context);

/// The single kisa.program of a module.
llvm::Expected<kisa::ProgramOp> getProgram(mlir::ModuleOp module);

} // namespace kiln::emit

#endif // KILN_COMPILER_EMIT_ARTIFACTEMISSION_H
