//===- FuseTensorScalars.cpp - two tensor_scalars as one ------------------===//
//
// tensor_scalar has two ALU stages, dst = (src op0 s0) op1 s1, but a
// group's ops are emitted one at a time: AdamW's sqrt(v) / c + eps and a
// dropout mask's 0/1 divided by the keep probability come out as two
// instructions through an f32 tile only the second reads. Joined, an engine
// pays one instruction's fixed cost and one pass over the elements instead
// of two. The intermediate was f32, which is what the first stage hands the
// second (engines compute in f32), so the result is the same.
//
// A first stage over a whole tile that several tensor_scalars read in
// column ranges (a softmax's scores divided by the scale, then each head's
// row max subtracted with a per-partition scalar of its own) joins each of
// them on its range: the first stage's pass over the tile goes.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"
#include "passes/tile/Passes.h"

#include "dialects/ktile/KTileDialect.h"

using namespace mlir;

namespace kiln::tile_passes {

#define GEN_PASS_DEF_KTILEFUSETENSORSCALARS
#include "passes/tile/Passes.h.inc"

namespace {

/// Whether the tile op `op` writes `buffer` (isa::writesOperand).
bool writes(Operation *op, Value buffer) {
  if (!ktile::isTileOp(op)) {
    return false;
  }
  isa::Opcode opcode = *isa::opcodeNamed(op->getName().stripDialect());
  for (OpOperand &operand : op->getOpOperands()) {
    if (operand.get() == buffer &&
        isa::writesOperand(opcode, operand.getOperandNumber())) {
      return true;
    }
  }
  return false;
}

/// Whether `second`, reading what `first` writes, may take `first` as its
/// first stage: neither uses its second stage, at most one takes a
/// per-partition scalar (the second's only on a floating-point source, the
/// ISA verifier's rule), `first` comes earlier in the same block, and
/// nothing between them writes what `first` reads.
bool joinable(ktile::TensorScalarOp first, ktile::TensorScalarOp second) {
  if (first.getOp1() || second.getOp1() ||
      first->getBlock() != second->getBlock() ||
      !first->isBeforeInBlock(second) ||
      (first.getScalars() && second.getScalars()) ||
      (second.getScalars() &&
       llvm::isa<IntegerType>(first.getSrc().getDtype()))) {
    return false;
  }
  for (Operation *op = first->getNextNode(); op != second.getOperation();
       op = op->getNextNode()) {
    for (Value read : first->getOperands().drop_front()) {
      if (writes(op, read)) {
        return false;
      }
    }
  }
  return true;
}

/// The tensor_scalar that alone writes what `second` reads, if the two can
/// be one instruction (`joinable`) through an f32 tile that `second` reads
/// with the pattern the first wrote.
ktile::TensorScalarOp joinableFirst(ktile::TensorScalarOp second) {
  Value middle = second->getOperand(1);
  if (second.getOp1() || !middle.getDefiningOp<ktile::AllocOp>() ||
      !llvm::hasNItems(middle.getUses(), 2)) {
    return {};
  }
  ktile::TensorScalarOp first;
  for (Operation *user : middle.getUsers()) {
    if (user != second.getOperation()) {
      first = llvm::dyn_cast<ktile::TensorScalarOp>(user);
    }
  }
  if (!first || first->getOperand(0) != middle ||
      first.getDst() != second.getSrc() || !first.getDst().getDtype().isF32() ||
      !joinable(first, second)) {
    return {};
  }
  return first;
}

/// A pattern of one partition range and `size` consecutive elements.
bool isRun(kisa::AccessPatternAttr ap) {
  return ap.getStrides().size() == 1 && ap.getStrides()[0] == 1;
}

/// The readers of `first`'s result when each is a tensor_scalar that may
/// join it on its own column range: `first` writes a run of f32 elements of
/// a tile that nothing else touches, reads a run of as many on the same
/// partitions, and each reader reads a run inside what `first` wrote on the
/// same partitions, and may take `first` as its first stage (`joinable`).
llvm::SmallVector<ktile::TensorScalarOp>
joinableRangeReaders(ktile::TensorScalarOp first) {
  Value middle = first->getOperand(0);
  kisa::AccessPatternAttr dst = first.getDst(), src = first.getSrc();
  if (first.getOp1() || !middle.getDefiningOp<ktile::AllocOp>() ||
      !dst.getDtype().isF32() || !isRun(dst) || !isRun(src) ||
      dst.getSizes() != src.getSizes() ||
      dst.getPartition() != src.getPartition() ||
      dst.getPartitions() != src.getPartitions() ||
      llvm::hasNItemsOrLess(middle.getUses(), 2)) {
    return {};
  }
  int64_t begin = dst.getOffset(), end = begin + dst.getSizes()[0] * 4;
  llvm::SmallVector<ktile::TensorScalarOp> readers;
  for (OpOperand &use : middle.getUses()) {
    if (use.getOwner() == first.getOperation()) {
      continue;
    }
    auto reader = llvm::dyn_cast<ktile::TensorScalarOp>(use.getOwner());
    if (!reader || use.getOperandNumber() != 1 || !joinable(first, reader)) {
      return {};
    }
    kisa::AccessPatternAttr part = reader.getSrc();
    int64_t from = part.getOffset();
    if (!isRun(part) || part.getPartition() != dst.getPartition() ||
        part.getPartitions() != dst.getPartitions() || from < begin ||
        (from - begin) % 4 != 0 || from + part.getSizes()[0] * 4 > end) {
      return {};
    }
    readers.push_back(reader);
  }
  return readers;
}

/// `first`'s source pattern for the elements `second` reads of its result.
kisa::AccessPatternAttr sourceFor(ktile::TensorScalarOp first,
                                  ktile::TensorScalarOp second) {
  kisa::AccessPatternAttr src = first.getSrc(), part = second.getSrc();
  if (part == first.getDst()) {
    return src;
  }
  int64_t skipped = (part.getOffset() - first.getDst().getOffset()) / 4;
  int64_t bytes = src.getDtype().getIntOrFloatBitWidth() / 8;
  return kisa::AccessPatternAttr::get(
      src.getContext(), src.getMemory(), src.getDtype(), src.getPartition(),
      src.getPartitions(), src.getOffset() + skipped * bytes,
      src.getPartitionStride(), src.getStrides(), part.getSizes());
}

} // namespace

void fuseTensorScalarPairs(func::FuncOp func) {
  llvm::SmallVector<std::pair<ktile::TensorScalarOp, ktile::TensorScalarOp>>
      pairs;
  llvm::SmallPtrSet<Operation *, 32> taken;
  for (auto second : func.getBody().front().getOps<ktile::TensorScalarOp>()) {
    ktile::TensorScalarOp first = joinableFirst(second);
    if (first && !taken.contains(first) && !taken.contains(second)) {
      taken.insert(first);
      taken.insert(second);
      pairs.push_back({first, second});
    }
  }
  for (auto first : func.getBody().front().getOps<ktile::TensorScalarOp>()) {
    if (taken.contains(first)) {
      continue;
    }
    llvm::SmallVector<ktile::TensorScalarOp> readers =
        joinableRangeReaders(first);
    if (readers.empty() ||
        llvm::any_of(readers, [&](auto r) { return taken.contains(r); })) {
      continue;
    }
    taken.insert(first);
    for (ktile::TensorScalarOp reader : readers) {
      taken.insert(reader);
      pairs.push_back({first, reader});
    }
  }
  llvm::SmallPtrSet<Operation *, 32> firsts;
  for (auto [first, second] : pairs) {
    firsts.insert(first);
    OpBuilder b(second);
    MLIRContext *context = b.getContext();
    llvm::SmallVector<Value, 3> buffers{second->getOperand(0),
                                        first->getOperand(1)};
    llvm::SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("dst", second.getDstAttr()),
        b.getNamedAttr("src", sourceFor(first, second)),
        b.getNamedAttr("op0", first.getOp0Attr()),
        b.getNamedAttr("scalar0", first.getScalar0Attr()),
        b.getNamedAttr("op1", second.getOp0Attr()),
        b.getNamedAttr("scalar1", second.getScalar0Attr())};
    // The per-partition scalar of either stage: bit 0 for the first's,
    // bit 1 for the second's (its op0 becomes op1).
    for (auto [op, bit] : {std::pair{first, 1}, std::pair{second, 2}}) {
      if (op.getScalars()) {
        buffers.push_back(op->getOperand(2));
        attrs.push_back(b.getNamedAttr("scalars", op.getScalarsAttr()));
        attrs.push_back(b.getNamedAttr(
            "scalar_operands", b.getI64IntegerAttr(bit)));
      }
    }
    OperationState state(FusedLoc::get(context, {first.getLoc(),
                                                 second.getLoc()}),
                         second->getName());
    state.addOperands(buffers);
    state.addAttributes(attrs);
    b.create(state);
    second->erase();
  }
  for (Operation *first : firsts) {
    Operation *alloc = first->getOperand(0).getDefiningOp();
    first->erase();
    alloc->erase();
  }
}

namespace {

struct KTileFuseTensorScalars : impl::KTileFuseTensorScalarsBase<KTileFuseTensorScalars> {
  void runOnOperation() override { fuseTensorScalarPairs(getOperation()); }
};

} // namespace

} // namespace kiln::tile_passes
