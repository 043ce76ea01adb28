//===- ArtifactEmission.cpp - kisa programs <-> .kneff artifacts ---------===//

#include "compiler/emit/ArtifactEmission.h"

#include "compiler/Version.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"

#include <map>

using namespace mlir;

namespace kiln::emit {

namespace {

kneff::BufferRole roleOf(llvm::StringRef role) {
  return llvm::StringSwitch<kneff::BufferRole>(role)
      .Case("input", kneff::INPUT)
      .Case("output", kneff::OUTPUT)
      .Case("inout", kneff::INOUT)
      .Case("constant", kneff::CONSTANT)
      .Default(kneff::BUFFER_ROLE_UNSPECIFIED);
}

llvm::StringRef roleName(kneff::BufferRole role) {
  switch (role) {
  case kneff::INPUT:
    return "input";
  case kneff::OUTPUT:
    return "output";
  case kneff::INOUT:
    return "inout";
  case kneff::CONSTANT:
    return "constant";
  default:
    return "unspecified";
  }
}

/// Raw little-endian bytes of a dense constant.
std::string constantBytes(ElementsAttr value) {
  auto dense = llvm::cast<DenseElementsAttr>(value);
  llvm::ArrayRef<char> raw = dense.getRawData();
  int64_t count = dense.getNumElements();
  if (dense.isSplat()) {
    std::string bytes;
    for (int64_t i = 0; i < count; ++i) {
      bytes.append(raw.begin(), raw.end());
    }
    return bytes;
  }
  return std::string(raw.begin(), raw.end());
}

} // namespace

llvm::Expected<kisa::ProgramOp> getProgram(ModuleOp module) {
  kisa::ProgramOp program;
  for (auto op : module.getOps<kisa::ProgramOp>()) {
    if (program) {
      return llvm::createStringError(
          "the module holds more than one kisa.program");
    }
    program = op;
  }
  if (!program) {
    return llvm::createStringError("the module holds no kisa.program");
  }
  return program;
}

llvm::Expected<artifact::Artifact> assembleProgram(kisa::ProgramOp program) {
  artifact::Artifact out;
  out.compilerVersion = KILN_VERSION;
  out.gitHash = KILN_GIT_HASH;
  kneff::Manifest &m = out.manifest;
  m.set_name(program.getSymName().str());
  m.set_target(program.getTarget().str());
  m.set_hbm_bytes(program.getHbmBytes());
  m.set_semaphores(static_cast<uint32_t>(program.getSemaphores()));
  if (program.getWorldSize() > 1) {
    m.set_world_size(static_cast<uint32_t>(program.getWorldSize()));
  }
  if (program.getTensorParallel() > 1) {
    m.set_tensor_parallel(static_cast<uint32_t>(program.getTensorParallel()));
  }

  std::map<std::pair<int, int>, artifact::Stream> streams;
  for (Operation &op : program.getBody().front()) {
    if (auto buffer = llvm::dyn_cast<kisa::BufferOp>(op)) {
      kneff::Buffer *b = m.add_buffers();
      b->set_name(buffer.getName().str());
      b->set_role(roleOf(buffer.getRole()));
      b->set_offset(buffer.getOffset());
      b->set_dtype(static_cast<uint32_t>(*kisa::toIsaType(buffer.getDtype())));
      for (int64_t d : buffer.getShape()) {
        b->add_shape(d);
      }
      if (buffer.getValue()) {
        // Constants start 64-byte aligned so the runtime can map them.
        out.constants.resize((out.constants.size() + 63) / 64 * 64, '\0');
        std::string bytes = constantBytes(*buffer.getValue());
        b->set_constant_offset(out.constants.size());
        b->set_constant_bytes(bytes.size());
        out.constants += bytes;
      }
      continue;
    }
    auto inst = kisa::toInstruction(&op);
    if (!inst) {
      return inst.takeError();
    }
    artifact::Stream &s =
        streams[{static_cast<int>(inst->engine), inst->queue}];
    s.engine = inst->engine;
    s.queue = inst->queue;
    s.instructions.push_back(*inst);
  }
  if (auto module = program->getParentOfType<ModuleOp>()) {
    if (auto flops = module->getAttrOfType<FloatAttr>(kModelFlopsAttr)) {
      m.mutable_cost()->set_model_flops(flops.getValueAsDouble());
    }
  }
  for (auto &[key, stream] : streams) {
    m.mutable_cost()->set_instructions(m.cost().instructions() +
                                       stream.instructions.size());
    out.streams.push_back(std::move(stream));
  }
  return out;
}

OwningOpRef<ModuleOp> disassembleArtifact(const artifact::Artifact &a,
                                          MLIRContext &context) {
  context.loadDialect<kisa::KisaDialect>();
  OpBuilder builder(&context);
  Location loc = builder.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  const kneff::Manifest &m = a.manifest;
  auto program = kisa::ProgramOp::create(
      builder, loc, m.name(), m.target(), m.hbm_bytes(), m.semaphores(),
      std::max<uint64_t>(1, m.world_size()),
      std::max<uint64_t>(1, m.tensor_parallel()));
  builder.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  for (const kneff::Buffer &b : m.buffers()) {
    Type dtype = kisa::toMlirType(&context, static_cast<isa::DType>(b.dtype()));
    llvm::SmallVector<int64_t> shape(b.shape().begin(), b.shape().end());
    ElementsAttr value;
    if (b.role() == kneff::CONSTANT) {
      value = DenseElementsAttr::getFromRawBuffer(
          RankedTensorType::get(shape, dtype),
          llvm::ArrayRef<char>(a.constantBytes().data() + b.constant_offset(),
                               b.constant_bytes()));
    }
    kisa::BufferOp::create(builder, loc, b.name(), b.offset(), dtype, shape,
                           roleName(b.role()), value);
  }
  kisa::InstructionOpBuilder instructions(builder);
  for (const artifact::Stream &s : a.streams) {
    for (const isa::Instruction &inst : s.instructions) {
      instructions.create(loc, inst);
    }
  }
  return module;
}

} // namespace kiln::emit
