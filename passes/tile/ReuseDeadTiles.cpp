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
// chain reads the same bytes it would have read elsewhere. A result that
// reads no such tile may take over a tile of its type that the op just
// before it read for the last time, when it reads that op's result (so it
// waits for that op anyway). Fewer tiles per iteration leave more
// iterations in SBUF.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"
#include "passes/tile/Passes.h"

#include "dialects/ktile/KTileDialect.h"

using namespace mlir;

namespace kiln::tile_passes {

#define GEN_PASS_DEF_KTILEREUSEDEADTILES
#include "passes/tile/Passes.h.inc"

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

/// Whether `op` is the first to touch its result, a tile of its own.
bool writesFreshTile(Operation *op) {
  Value result = op->getOperand(0);
  return ownSbufTile(result) &&
         llvm::all_of(result.getUsers(), [&](Operation *user) {
           return user == op || op->isBeforeInBlock(user);
         });
}

/// The source tile `op` may write its result over: one that `op` reads
/// last, only with the result's own pattern, of the result tile's type,
/// while `op` is the first to touch the result tile. Earlier readers on
/// other engines are fine: the engine phase orders a write after the reads
/// of the bytes it overwrites.
ktile::AllocOp deadSource(Operation *op, const isa::Instruction &inst) {
  Value result = op->getOperand(0);
  if (!writesFreshTile(op)) {
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
  // The previous elementwise op and the tiles it read for the last time.
  Operation *previous = nullptr;
  llvm::SmallVector<ktile::AllocOp, 2> diedThere;
  for (Operation &op : func.getBody().front()) {
    if (!isElementwise(&op)) {
      continue;
    }
    auto inst = ktile::toInstruction(&op);
    if (!inst) {
      llvm::consumeError(inst.takeError());
      continue;
    }
    ktile::AllocOp source = deadSource(&op, *inst);
    // A result that reads no dead tile of its type (AdamW's denominator,
    // sqrt(v), after v + (1 - beta2) g g used its last term) may take over
    // one the op before it read last, when it reads that op's result: it
    // waits for that op anyway, so the write adds no order. Reaching up to
    // four ops back won 0.15 ms more on the BERT-base step but cost its
    // forward pass 0.2 ms (docs/compiler.md).
    if (!source && previous && writesFreshTile(&op) &&
        llvm::is_contained(llvm::drop_begin(op.getOperands()),
                           previous->getOperand(0))) {
      for (ktile::AllocOp tile : diedThere) {
        if (tile.getBuffer().getType() == op.getOperand(0).getType()) {
          source = tile;
          break;
        }
      }
    }
    if (source) {
      auto resultTile = op.getOperand(0).getDefiningOp<ktile::AllocOp>();
      resultTile.getBuffer().replaceAllUsesWith(source.getBuffer());
      resultTile.erase();
    }
    // The tiles this op reads for the last time, when only elementwise ops
    // read them (a store or a matmul that read one earlier need not be
    // done when this op is).
    diedThere.clear();
    for (unsigned k = 1; k < op.getNumOperands(); ++k) {
      ktile::AllocOp tile = ownSbufTile(op.getOperand(k));
      if (!tile || tile == source || llvm::is_contained(diedThere, tile)) {
        continue;
      }
      bool lastRead =
          llvm::all_of(tile.getBuffer().getUses(), [&](OpOperand &use) {
            Operation *user = use.getOwner();
            bool elementwiseOrLoad =
                isElementwise(user) || (llvm::isa<ktile::DmaCopyOp>(user) &&
                                        use.getOperandNumber() == 0);
            return elementwiseOrLoad &&
                   (user == &op || user->isBeforeInBlock(&op));
          });
      if (lastRead) {
        diedThere.push_back(tile);
      }
    }
    previous = &op;
  }
}

namespace {

struct KTileReuseDeadTiles : impl::KTileReuseDeadTilesBase<KTileReuseDeadTiles> {
  void runOnOperation() override { reuseDeadTiles(getOperation()); }
};

} // namespace

} // namespace kiln::tile_passes
