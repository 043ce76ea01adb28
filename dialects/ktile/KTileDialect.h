//===- KTileDialect.h - the ktile dialect -----------------------*- C++ -*-===//

#ifndef KILN_DIALECTS_KTILE_KTILEDIALECT_H
#define KILN_DIALECTS_KTILE_KTILEDIALECT_H

#include "compiler/target/Isa.h"
#include "dialects/kisa/KisaDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/ktile/KTileDialect.h.inc"

namespace kiln::ktile {
/// The shared verifier of every compute op.
llvm::LogicalResult verifyTileOp(mlir::Operation *op);
} // namespace kiln::ktile

#define GET_OP_CLASSES
#include "dialects/ktile/KTileOps.h.inc"

namespace kiln::ktile {

/// The memory a buffer type lives in: its memory space "hbm", "sbuf" or
/// "psum"; nullopt for anything else.
std::optional<isa::Memory> memoryOf(mlir::MemRefType type);
mlir::MemRefType bufferType(llvm::ArrayRef<int64_t> shape,
                            mlir::Type elementType, isa::Memory memory);

/// The engine phase's scratch space, which the memory plan leaves free: the
/// last bytes of each SBUF partition (a slot per instruction stream) and the
/// last PSUM bank. Instructions that only carry semaphore waits touch it.
inline constexpr int64_t kScratchSbufBytes = 2048;
inline constexpr int64_t kScratchSlotBytes = 64;

/// Marks the SBUF buffers of work the memory plan keeps apart from the rest
/// (an embedding table's update spread over the forward pass): it places
/// them in a region of their own while any is live.
inline constexpr llvm::StringLiteral kBackgroundAttr = "ktile.background";

/// What the tile phase records on a ktile function, verified by the
/// dialect: the target it was tiled for; after the memory plan, the bytes
/// of HBM the program needs, each argument's HBM address, and how many
/// SBUF buffers were spilled to HBM.
inline constexpr llvm::StringLiteral kTargetAttr = "ktile.target";
inline constexpr llvm::StringLiteral kHbmBytesAttr = "ktile.hbm_bytes";
inline constexpr llvm::StringLiteral kArgumentAddressesAttr =
    "ktile.argument_addresses";
inline constexpr llvm::StringLiteral kSpillsAttr = "ktile.spills";

/// On-chip buffers: bytes in each partition. HBM buffers: bytes in all.
int64_t bufferBytes(mlir::MemRefType type);

/// Whether `op` is a compute op (one instruction once bound).
bool isTileOp(mlir::Operation *op);

/// The instruction a compute op stands for with every buffer at address 0
/// (partition 0, byte 0): add each buffer's base to bind it. The engine is
/// the first one that runs the opcode.
llvm::Expected<isa::Instruction> toInstruction(mlir::Operation *op);

/// The name of the access-pattern attribute of operand `index` of a compute
/// op (dst, src, lhs, ...).
llvm::StringRef operandAttrName(mlir::Operation *op, unsigned index);

} // namespace kiln::ktile

#endif // KILN_DIALECTS_KTILE_KTILEDIALECT_H
