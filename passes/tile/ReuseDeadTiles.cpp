//===- ReuseDeadTiles.cpp - elementwise results in their dead input -------===//
//
// The lowering gives every op of a group its own result tile, and the
// memory plan hands SBUF out from a rotating start, so that one tile
// iteration's buffers are not the next one's and the engine phase can
// overlap them. How far ahead the loads of later iterations may run is
// then set by how much SBUF one iteration allocates: AdamW's fifteen ops
// took fifteen tiles where about eight are ever live. An elementwise
// instruction that reads a source tile for the last time, element for
// element as it writes its result, can write the result over it: the engines
// stream each element through (read, compute, write), and the next op of the
// chain reads the same bytes it would have read elsewhere. Fewer tiles per
// iteration leave more iterations in SBUF.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

#include "dialects/ktile/KTileDialect.h"

using namespace mlir;

namespace kiln::tile_passes {

namespace {

/// The ops that compute one element of the result from the same element
/// of each source: a result may overwrite a source read alike.
bool isElementwise(Operation *op) {
  return llvm::isa<ktile::TensorTensorOp, ktile::TensorScalarOp,
                   ktile::ActivationOp, ktile::TensorCopyOp>(op);
}

/// An SBUF tile of its own (an alloc no view reads) that only tile ops use.
ktile::AllocOp ownSbufTile(Value buffer) {
  auto alloc = buffer.getDefiningOp<ktile::AllocOp>();
  if (!alloc ||
      ktile::memoryOf(alloc.getBuffer().getType()) != isa::Memory::Sbuf) {
    return {};
  }
  for (Operation *user : buffer.getUsers()) {
    if (!ktile::isTileOp(user)) {
      return {};
    }
  }
  return alloc;
}

/// The source tile `op` may write its result over: one that `op` reads
/// last, only with the result's own pattern, of the result tile's type,
/// while `op` is the first to touch the result tile. Earlier readers on
/// other engines are fine: the engine phase orders a write after the reads
/// of the bytes it overwrites.
ktile::AllocOp deadSource(Operation *op, const isa::Instruction &inst) {
  Value result = op->getOperand(0);
  ktile::AllocOp resultTile = ownSbufTile(result);
  if (!resultTile || !llvm::all_of(result.getUsers(), [&](Operation *user) {
        return user == op || op->isBeforeInBlock(user);
      })) {
    return {};
  }
  for (unsigned k = 1; k < op->getNumOperands(); ++k) {
    Value source = op->getOperand(k);
    ktile::AllocOp sourceTile = ownSbufTile(source);
    if (!sourceTile || source == result ||
        source.getType() != result.getType() ||
        isa::writesOperand(inst.opcode, static_cast<int>(k))) {
      continue;
    }
    // This op reads the source only element for element with the result
    // (a per-partition scalar from the same tile would be clobbered).
    bool alike = llvm::all_of(op->getOpOperands(), [&](OpOperand &use) {
      unsigned at = use.getOperandNumber();
      return use.get() != source ||
             (!isa::writesOperand(inst.opcode, static_cast<int>(at)) &&
              inst.operands[at] == inst.operands[0]);
    });
    if (alike && llvm::all_of(source.getUsers(), [&](Operation *user) {
          return user == op || user->isBeforeInBlock(op);
        })) {
      return sourceTile;
    }
  }
  return {};
}

} // namespace

void reuseDeadTiles(func::FuncOp func) {
  for (Operation &op : func.getBody().front()) {
    if (!isElementwise(&op)) {
      continue;
    }
    auto inst = ktile::toInstruction(&op);
    if (!inst) {
      llvm::consumeError(inst.takeError());
      continue;
    }
    if (ktile::AllocOp source = deadSource(&op, *inst)) {
      auto resultTile = op.getOperand(0).getDefiningOp<ktile::AllocOp>();
      resultTile.getBuffer().replaceAllUsesWith(source.getBuffer());
      resultTile.erase();
    }
  }
}

} // namespace kiln::tile_passes
