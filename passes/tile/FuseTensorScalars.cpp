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
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

#include "dialects/ktile/KTileDialect.h"

using namespace mlir;

namespace kiln::tile_passes {

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

/// The tensor_scalar that alone writes what `second` reads, if the two can
/// be one instruction: neither uses its second stage, at most one takes a
/// per-partition scalar (the second's only on a floating-point source),
/// the tile between them is f32 and nothing between them writes what the
/// first reads.
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
  if (!first || first->getOperand(0) != middle || first.getOp1() ||
      first->getBlock() != second->getBlock() ||
      !first->isBeforeInBlock(second) || first.getDst() != second.getSrc() ||
      !first.getDst().getDtype().isF32() ||
      (first.getScalars() && second.getScalars())) {
    return {};
  }
  // Per-partition scalars apply to floating-point sources only (the ISA
  // verifier's rule): an integer source keeps its second stage apart.
  if (second.getScalars() &&
      llvm::isa<IntegerType>(first.getSrc().getDtype())) {
    return {};
  }
  for (Operation *op = first->getNextNode(); op != second.getOperation();
       op = op->getNextNode()) {
    for (Value read : first->getOperands().drop_front()) {
      if (writes(op, read)) {
        return {};
      }
    }
  }
  return first;
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
  for (auto [first, second] : pairs) {
    OpBuilder b(second);
    MLIRContext *context = b.getContext();
    llvm::SmallVector<Value, 3> buffers{second->getOperand(0),
                                        first->getOperand(1)};
    llvm::SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("dst", second.getDstAttr()),
        b.getNamedAttr("src", first.getSrcAttr()),
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
    Operation *alloc = first->getOperand(0).getDefiningOp();
    second->erase();
    first->erase();
    alloc->erase();
  }
}

} // namespace kiln::tile_passes
