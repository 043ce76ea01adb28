//===- KTileOps.cpp - ktile op verifiers -----------------------------------===//
//
// A compute op is checked as the instruction it becomes with every buffer at
// address zero, by the same rules the kisa verifier and the artifact loader
// use, plus the rule that each access pattern stays inside its buffer.
//
//===----------------------------------------------------------------------===//

#include "dialects/ktile/KTileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::ktile;

#define GET_OP_CLASSES
#include "dialects/ktile/KTileOps.cpp.inc"

namespace {

std::optional<isa::Opcode> opcodeOf(Operation *op) {
  if (!llvm::isa<KTileDialect>(op->getDialect())) {
    return std::nullopt;
  }
  return isa::opcodeNamed(op->getName().stripDialect());
}

/// The target named by the enclosing function's `ktile.target`, else trn1.
const target::TargetDescription &targetOf(Operation *op) {
  if (auto func = op->getParentOfType<func::FuncOp>()) {
    if (auto name = func->getAttrOfType<StringAttr>("ktile.target")) {
      if (const auto *t = target::lookupTarget(name.getValue())) {
        return *t;
      }
    }
  }
  return *target::lookupTarget("trn1");
}

} // namespace

bool kiln::ktile::isTileOp(Operation *op) { return opcodeOf(op).has_value(); }

llvm::StringRef kiln::ktile::operandAttrName(Operation *op, unsigned index) {
  std::optional<isa::Opcode> opcode = opcodeOf(op);
  if (!opcode || index >= isa::kMaxOperands) {
    return "";
  }
  return isa::schemaOf(*opcode).operandNames[index];
}

llvm::Expected<isa::Instruction> kiln::ktile::toInstruction(Operation *op) {
  std::optional<isa::Opcode> opcode = opcodeOf(op);
  if (!opcode) {
    return llvm::createStringError("'" + op->getName().getStringRef() +
                                   "' is not a ktile compute op");
  }
  return kisa::instructionFromAttributes(op, *opcode);
}

LogicalResult kiln::ktile::verifyTileOp(Operation *op) {
  auto inst = toInstruction(op);
  if (!inst) {
    return op->emitOpError(llvm::toString(inst.takeError()));
  }
  if (op->getNumOperands() != inst->numOperands) {
    return op->emitOpError("has ")
           << op->getNumOperands() << " buffers but "
           << static_cast<unsigned>(inst->numOperands)
           << " access patterns";
  }
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    llvm::StringRef name = operandAttrName(op, i);
    auto type = llvm::cast<MemRefType>(op->getOperand(i).getType());
    std::optional<isa::Memory> memory = memoryOf(type);
    const isa::AccessPattern &ap = inst->operands[i];
    if (!memory) {
      return op->emitOpError("buffer '")
             << name << "' has no memory space \"hbm\", \"sbuf\" or \"psum\"";
    }
    if (*memory != ap.memory) {
      return op->emitOpError("operand '")
             << name << "' reads " << isa::memoryName(ap.memory)
             << " but its buffer is in " << isa::memoryName(*memory);
    }
    int64_t span = ap.rowSpanElements() * ap.elementBytes();
    int64_t capacity = bufferBytes(type);
    if (ap.memory == isa::Memory::Hbm) {
      int64_t end = ap.offset +
                    (ap.partitions - 1) * ap.partitionStride *
                        ap.elementBytes() +
                    span;
      if (end > capacity) {
        return op->emitOpError("operand '")
               << name << "' reaches byte " << end << " of a " << capacity
               << "-byte HBM buffer";
      }
      continue;
    }
    if (ap.partition + ap.partitions > type.getDimSize(0)) {
      return op->emitOpError("operand '")
             << name << "' uses partitions [" << ap.partition << ", "
             << ap.partition + ap.partitions << ") of a buffer with "
             << type.getDimSize(0);
    }
    if (ap.offset + span > capacity) {
      return op->emitOpError("operand '")
             << name << "' reaches byte " << ap.offset + span
             << " of a partition that holds " << capacity;
    }
  }
  isa::Limits limits;
  limits.target = &targetOf(op);
  limits.hbmBytes = int64_t(1) << 48;
  if (std::optional<std::string> broken = isa::validate(*inst, limits)) {
    return op->emitOpError(*broken);
  }
  return success();
}

LogicalResult AllocOp::verify() {
  MemRefType type = getBuffer().getType();
  std::optional<isa::Memory> memory = memoryOf(type);
  if (!memory) {
    return emitOpError(
        "buffer needs the memory space \"hbm\", \"sbuf\" or \"psum\"");
  }
  if (!type.hasStaticShape() || type.getRank() < 1) {
    return emitOpError("buffer needs a static shape of rank >= 1");
  }
  if (!kisa::toIsaType(type.getElementType())) {
    return emitOpError("element type must be f32, bf16, f16 or i32");
  }
  if (auto value = getValueAttr()) {
    auto valueType = llvm::cast<ShapedType>(value.getType());
    if (*memory != isa::Memory::Hbm ||
        valueType.getElementType() != type.getElementType() ||
        valueType.getNumElements() != type.getNumElements()) {
      return emitOpError("value must fill an HBM buffer of its element type");
    }
  }
  if (*memory == isa::Memory::Hbm) {
    return success();
  }
  const target::TargetDescription &t = targetOf(*this);
  if (type.getDimSize(0) > t.partitions) {
    return emitOpError("has ") << type.getDimSize(0) << " partitions; "
                               << t.name << " has " << t.partitions;
  }
  int64_t capacity = *memory == isa::Memory::Sbuf ? t.sbufBytesPerPartition
                                                  : t.psumBytesPerPartition;
  if (bufferBytes(type) > capacity) {
    return emitOpError("needs ")
           << bufferBytes(type) << " bytes per partition; "
           << isa::memoryName(*memory) << " has " << capacity;
  }
  return success();
}

LogicalResult ViewOp::verify() {
  MemRefType from = getSource().getType(), to = getResult().getType();
  if (memoryOf(from) != isa::Memory::Hbm || memoryOf(to) != isa::Memory::Hbm) {
    return emitOpError("views HBM buffers only");
  }
  if (from.getElementType() != to.getElementType() ||
      bufferBytes(from) != bufferBytes(to)) {
    return emitOpError("must keep the element type and the number of bytes");
  }
  return success();
}
