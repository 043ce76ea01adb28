//===- ArtifactEmission.h - kisa programs <-> .kneff artifacts --*- C++ -*-===//

#ifndef KILN_COMPILER_EMIT_ARTIFACTEMISSION_H
#define KILN_COMPILER_EMIT_ARTIFACTEMISSION_H

#include "dialects/kisa/KisaDialect.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::emit {

/// The module attribute (f64) holding the FLOPs of the graph's own matmuls
/// and linear layers, counted before decomposition: the numerator of MFU.
/// The one-hot products that embeddings and gathers decompose into are the
/// compiler's way of moving rows, not the model's arithmetic, so they do
/// not count (the simulator counts every executed matmul instead when the
/// attribute is absent).
inline constexpr llvm::StringLiteral kModelFlopsAttr = "kiln.model_flops";

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
