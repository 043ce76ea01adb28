//===- KisaOps.cpp - kisa verifiers and instruction conversion -----------===//
//
// An instruction op is converted to an isa::Instruction and checked by
// isa::validate: the same rules the artifact loader applies to a loaded
// program, so IR that verifies is IR the runtime accepts.
//
//===----------------------------------------------------------------------===//

#include "dialects/kisa/KisaDialect.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kisa;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(message);
}

std::string choices(isa::FieldKind kind) {
  std::string all;
  for (uint8_t v = 0;; ++v) {
    llvm::StringRef name = isa::fieldValueName(kind, v);
    if (name == "?") {
      break;
    }
    all += (all.empty() ? "" : ", ") + name.str();
  }
  return all;
}

llvm::Expected<uint8_t> fieldValue(Operation *op, llvm::StringRef name,
                                   isa::FieldKind kind, bool required) {
  auto attr = op->getAttrOfType<StringAttr>(name);
  if (!attr) {
    if (required) {
      return error("'" + name + "' is missing");
    }
    return 0; // AluOp::Bypass
  }
  std::optional<uint8_t> value = isa::fieldValueNamed(kind, attr.getValue());
  if (!value) {
    return error("'" + name + "' is '" + attr.getValue() +
                 "', not one of: " + choices(kind));
  }
  return *value;
}

double floatField(Operation *op, llvm::StringRef name, double fallback) {
  if (name.empty()) {
    return 0;
  }
  auto attr = op->getAttrOfType<FloatAttr>(name);
  return attr ? attr.getValueAsDouble() : fallback;
}

int64_t intField(Operation *op, llvm::StringRef name) {
  if (name.empty()) {
    return 0;
  }
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

} // namespace

llvm::Expected<isa::Instruction> kiln::kisa::toInstruction(Operation *op) {
  std::optional<isa::Opcode> opcode =
      isa::opcodeNamed(op->getName().stripDialect());
  if (!opcode || !llvm::isa<KisaDialect>(op->getDialect())) {
    return error("'" + op->getName().getStringRef() +
                 "' is not an instruction");
  }
  return instructionFromAttributes(op, *opcode);
}

llvm::Expected<isa::Instruction>
kiln::kisa::instructionFromAttributes(Operation *op, isa::Opcode opcode) {
  const isa::OpcodeSchema &s = isa::schemaOf(opcode);
  isa::Instruction inst;
  inst.opcode = opcode;

  // Engine: as given, else the first engine that runs the opcode.
  if (auto engine = op->getAttrOfType<StringAttr>("engine")) {
    std::optional<isa::Engine> named = isa::engineNamed(engine.getValue());
    if (!named) {
      return error("'engine' is '" + engine.getValue() +
                   "', not one of: tensor, vector, scalar, gpsimd, dma");
    }
    inst.engine = *named;
  } else {
    for (int e = 0; e < isa::kEngineKinds; ++e) {
      if (s.engines & (1u << e)) {
        inst.engine = static_cast<isa::Engine>(e);
        break;
      }
    }
  }
  int64_t queue = intField(op, "queue");
  if (queue < 0 || queue > 255) {
    return error("'queue' " + llvm::Twine(queue) + " is out of range");
  }
  inst.queue = static_cast<uint8_t>(queue);

  for (int i = 0; i < isa::kMaxOperands && !s.operandNames[i].empty(); ++i) {
    auto ap = op->getAttrOfType<AccessPatternAttr>(s.operandNames[i]);
    if (!ap) {
      if (i < s.requiredOperands) {
        return error("operand '" + s.operandNames[i] + "' is missing");
      }
      break;
    }
    inst.operands[i] = toAccessPattern(ap);
    inst.numOperands = i + 1;
  }

  if (s.op0Kind != isa::FieldKind::None) {
    auto value = fieldValue(op, s.op0Name, s.op0Kind, /*required=*/true);
    if (!value) {
      return value.takeError();
    }
    inst.op0 = *value;
  }
  if (s.op1Kind != isa::FieldKind::None) {
    auto value = fieldValue(op, s.op1Name, s.op1Kind, /*required=*/false);
    if (!value) {
      return value.takeError();
    }
    inst.op1 = *value;
  }
  // An activation's scale defaults to 1: dst = func(src) unless told otherwise.
  inst.imm0 = floatField(op, s.imm0Name,
                         opcode == isa::Opcode::Activation ? 1.0 : 0.0);
  inst.imm1 = floatField(op, s.imm1Name, 0.0);
  inst.int0 = intField(op, s.int0Name);
  inst.int1 = intField(op, s.int1Name);
  inst.int2 = intField(op, s.int2Name);
  if (!s.flag0Name.empty()) {
    auto flag = op->getAttrOfType<BoolAttr>(s.flag0Name);
    inst.flags = flag && flag.getValue() ? 1 : 0;
  }

  auto waitSem = op->getAttrOfType<DenseI64ArrayAttr>("wait_sem");
  auto waitValue = op->getAttrOfType<DenseI64ArrayAttr>("wait_value");
  int64_t waits = waitSem ? waitSem.size() : 0;
  if ((waitValue ? waitValue.size() : 0) != waits) {
    return error("'wait_sem' and 'wait_value' must have the same length");
  }
  if (waits > isa::kMaxWaits) {
    return error("an instruction waits on at most 4 semaphores");
  }
  for (int64_t i = 0; i < waits; ++i) {
    if (waitSem[i] < 0 || waitSem[i] > 0xffff || waitValue[i] < 0 ||
        waitValue[i] > 0xffffffffll) {
      return error("wait " + llvm::Twine(i) + " is out of range");
    }
    inst.waitSemaphore[i] = static_cast<uint16_t>(waitSem[i]);
    inst.waitValue[i] = static_cast<uint32_t>(waitValue[i]);
  }
  inst.numWaits = static_cast<uint8_t>(waits);
  if (auto signal = op->getAttrOfType<DenseI64ArrayAttr>("signal")) {
    if (signal.size() > isa::kMaxSignals) {
      return error("an instruction signals at most 4 semaphores");
    }
    for (int64_t i = 0; i < signal.size(); ++i) {
      if (signal[i] < 0 || signal[i] > 0xffff) {
        return error("signal " + llvm::Twine(i) + " is out of range");
      }
      inst.signalSemaphore[i] = static_cast<uint16_t>(signal[i]);
    }
    inst.numSignals = static_cast<uint8_t>(signal.size());
  }
  return inst;
}

StringAttr InstructionOpBuilder::name(llvm::StringRef text) {
  auto [it, inserted] = attributeNames.try_emplace(text);
  if (inserted) {
    it->second = builder.getStringAttr(text);
  }
  return it->second;
}

Operation *InstructionOpBuilder::create(Location loc,
                                        const isa::Instruction &inst) {
  const isa::OpcodeSchema &s = isa::schemaOf(inst.opcode);
  MLIRContext *context = builder.getContext();
  std::optional<OperationName> &opName =
      opNames[static_cast<size_t>(inst.opcode)];
  if (!opName) {
    opName.emplace(("kisa." + s.mnemonic).str(), context);
  }
  Operation *op = builder.create(OperationState(loc, *opName));
  auto set = [&](llvm::StringRef field, Attribute value) {
    op->setAttr(name(field), value);
  };
  for (int i = 0; i < inst.numOperands; ++i) {
    set(s.operandNames[i], toAttr(context, inst.operands[i]));
  }
  if (s.op0Kind != isa::FieldKind::None) {
    set(s.op0Name, builder.getStringAttr(
                       isa::fieldValueName(s.op0Kind, inst.op0)));
  }
  if (s.op1Kind != isa::FieldKind::None) {
    set(s.op1Name, builder.getStringAttr(
                       isa::fieldValueName(s.op1Kind, inst.op1)));
  }
  for (auto [field, value] :
       {std::pair(s.imm0Name, inst.imm0), std::pair(s.imm1Name, inst.imm1)}) {
    if (!field.empty()) {
      set(field, builder.getF64FloatAttr(value));
    }
  }
  for (auto [field, value] :
       {std::pair(s.int0Name, inst.int0), std::pair(s.int1Name, inst.int1),
        std::pair(s.int2Name, inst.int2)}) {
    if (!field.empty()) {
      set(field, builder.getI64IntegerAttr(value));
    }
  }
  if (!s.flag0Name.empty()) {
    set(s.flag0Name, builder.getBoolAttr(inst.accumulate()));
  }
  if (llvm::popcount(static_cast<unsigned>(s.engines)) > 1) {
    set("engine", builder.getStringAttr(isa::engineName(inst.engine)));
  }
  if (inst.engine == isa::Engine::Dma) {
    set("queue", builder.getI64IntegerAttr(inst.queue));
  }
  if (inst.numWaits) {
    llvm::SmallVector<int64_t, isa::kMaxWaits> sems, values;
    for (int i = 0; i < inst.numWaits; ++i) {
      sems.push_back(inst.waitSemaphore[i]);
      values.push_back(inst.waitValue[i]);
    }
    set("wait_sem", builder.getDenseI64ArrayAttr(sems));
    set("wait_value", builder.getDenseI64ArrayAttr(values));
  }
  if (inst.numSignals) {
    llvm::SmallVector<int64_t, isa::kMaxSignals> sems;
    for (int i = 0; i < inst.numSignals; ++i) {
      sems.push_back(inst.signalSemaphore[i]);
    }
    set("signal", builder.getDenseI64ArrayAttr(sems));
  }
  return op;
}

llvm::Expected<isa::Limits> kiln::kisa::limitsOf(ProgramOp program) {
  isa::Limits limits;
  limits.target = target::lookupTarget(program.getTarget());
  if (!limits.target) {
    return error("unknown target '" + program.getTarget() + "'");
  }
  limits.hbmBytes = static_cast<int64_t>(program.getHbmBytes());
  limits.semaphores = static_cast<int64_t>(program.getSemaphores());
  return limits;
}

LogicalResult kiln::kisa::verifyInstruction(Operation *op) {
  auto inst = toInstruction(op);
  if (!inst) {
    return op->emitOpError(llvm::toString(inst.takeError()));
  }
  auto program = op->getParentOfType<ProgramOp>();
  auto limits = limitsOf(program);
  if (!limits) {
    llvm::consumeError(limits.takeError());
    return op->emitOpError("is in a program whose target is unknown");
  }
  if (std::optional<std::string> broken = isa::validate(*inst, *limits)) {
    return op->emitOpError(*broken);
  }
  return success();
}

LogicalResult ProgramOp::verify() {
  const target::TargetDescription *t = target::lookupTarget(getTarget());
  if (!t) {
    return emitOpError("unknown target '") << getTarget() << "' (trn1 or trn2)";
  }
  auto hbm = static_cast<int64_t>(getHbmBytes());
  if (hbm < 1 || hbm > t->hbmBytesPerCore()) {
    return emitOpError("hbm_bytes ")
           << hbm << " must be in [1, " << t->hbmBytesPerCore() << "]";
  }
  auto semaphores = static_cast<int64_t>(getSemaphores());
  if (semaphores < 0 ||
      semaphores > static_cast<int64_t>(t->semaphores.value)) {
    return emitOpError("semaphores ")
           << semaphores << " must be in [0, "
           << static_cast<int64_t>(t->semaphores.value) << "]";
  }
  return success();
}

LogicalResult BufferOp::verify() {
  llvm::StringRef role = getRole();
  if (!llvm::is_contained({"input", "output", "inout", "constant"}, role)) {
    return emitOpError("role '")
           << role << "' is not one of: input, output, inout, constant";
  }
  std::optional<isa::DType> dtype = toIsaType(getDtype());
  if (!dtype) {
    return emitOpError("dtype must be f32, bf16, f16 or i32");
  }
  int64_t elements = 1;
  for (int64_t d : getShape()) {
    if (d < 1) {
      return emitOpError("shape dimensions must be positive");
    }
    elements *= d;
  }
  auto offset = static_cast<int64_t>(getOffset());
  int64_t end = offset + elements * isa::dtypeBytes(*dtype);
  auto program = (*this)->getParentOfType<ProgramOp>();
  if (offset < 0 || end > static_cast<int64_t>(program.getHbmBytes())) {
    return emitOpError("bytes [")
           << offset << ", " << end << ") lie outside the program's HBM";
  }
  bool isConstant = role == "constant";
  if (isConstant != getValue().has_value()) {
    return emitOpError(
        "a constant buffer, and only a constant buffer, has a value");
  }
  if (isConstant) {
    auto type = llvm::cast<ShapedType>(getValue()->getType());
    if (type.getElementType() != getDtype() || type.getShape() != getShape()) {
      return emitOpError("value must have the buffer's dtype and shape");
    }
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/kisa/KisaOps.cpp.inc"
