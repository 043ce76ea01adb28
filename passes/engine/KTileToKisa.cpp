//===- KTileToKisa.cpp - planned ktile functions to kisa programs ---------===//

#include "passes/engine/Engine.h"
#include "passes/engine/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::engine_passes {
#define GEN_PASS_DEF_CONVERTKTILETOKISA
#include "passes/engine/Passes.h.inc"
} // namespace kiln::engine_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::engine_passes;

namespace {

/// Transfers of twice this or more are spread over up to four queues: a
/// 128 KiB piece takes ~4.5 us at a queue's rate, beside a ~2 us fixed cost
/// per DMA. Smaller pieces shorten a transfer on the critical path but
/// spend more fixed costs, which a step bound by DMA throughput pays for.
/// Measured on the BERT-base step: 64 KiB pieces 32.9 ms, 128 KiB 28.1,
/// 256 KiB 28.0, 512 KiB 1.4 ms behind 128 KiB; on the main job's MLP step
/// (latency-bound) 256 KiB took 83.6 us against 74.6 with 128 KiB.
constexpr int64_t kDmaPieceBytes = 128 << 10;
constexpr int kDmaMaxPieces = 4;

/// The address of a buffer: its alloc's `address`, through views; an
/// argument's from the function's argument addresses.
FailureOr<int64_t> addressOf(Value buffer, func::FuncOp func) {
  while (auto view = buffer.getDefiningOp<ktile::ViewOp>()) {
    buffer = view.getSource();
  }
  if (auto arg = llvm::dyn_cast<BlockArgument>(buffer)) {
    auto addresses =
        func->getAttrOfType<DenseI64ArrayAttr>(ktile::kArgumentAddressesAttr);
    if (!addresses) {
      return failure();
    }
    return addresses[arg.getArgNumber()];
  }
  auto alloc = buffer.getDefiningOp<ktile::AllocOp>();
  auto address = alloc ? alloc.getAddressAttr()
                       : IntegerAttr();
  if (!address) {
    return failure();
  }
  return address.getInt();
}

Value rootOf(Value buffer) {
  while (auto view = buffer.getDefiningOp<ktile::ViewOp>()) {
    buffer = view.getSource();
  }
  return buffer;
}

std::string nameAttr(DictionaryAttr attrs, llvm::StringRef fallback) {
  if (attrs) {
    if (auto name = attrs.getAs<StringAttr>("kgraph.name")) {
      return name.str();
    }
  }
  return fallback.str();
}

struct ConvertKTileToKisa
    : kiln::engine_passes::impl::ConvertKTileToKisaBase<ConvertKTileToKisa> {
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<func::FuncOp> functions(
        getOperation().getOps<func::FuncOp>());
    for (func::FuncOp func : functions) {
      if (func.isExternal()) {
        continue;
      }
      if (failed(convert(func))) {
        return signalPassFailure();
      }
      func.erase();
    }
  }

  LogicalResult convert(func::FuncOp func) {
    auto targetName = func->getAttrOfType<StringAttr>(ktile::kTargetAttr);
    const target::TargetDescription *t =
        target::lookupTarget(targetName ? targetName.getValue() : "trn1");
    auto hbmBytes = func->getAttrOfType<IntegerAttr>(ktile::kHbmBytesAttr);
    if (!t || !hbmBytes) {
      return func.emitOpError(
          "has no memory plan; run ktile-plan-memory first");
    }
    // 1. Binding.
    std::vector<Node> nodes;
    llvm::SmallVector<Location> locations;
    // One node an op, but for split transfers: a step's millions of nodes
    // are not moved again and again as the vector grows.
    nodes.reserve(func.getBody().front().getOperations().size());
    locations.reserve(nodes.capacity());
    for (Operation &op : func.getBody().front()) {
      if (!ktile::isTileOp(&op)) {
        continue;
      }
      auto inst = ktile::toInstruction(&op);
      if (!inst) {
        return op.emitOpError(llvm::toString(inst.takeError()));
      }
      for (unsigned k = 0; k < op.getNumOperands(); ++k) {
        FailureOr<int64_t> base = addressOf(op.getOperand(k), func);
        if (failed(base)) {
          return op.emitOpError("uses a buffer with no address");
        }
        inst->operands[k].offset += *base;
      }
      auto pieces = splitLargeDma(*inst, kDmaPieceBytes, kDmaMaxPieces);
      int64_t first = static_cast<int64_t>(nodes.size());
      for (const isa::Instruction &piece : pieces) {
        nodes.push_back(Node{piece, {}, -1, 0, 0, pieces.size() > 1 ? first : -1});
        locations.push_back(op.getLoc());
      }
    }
    // 2-4.
    computeDependencies(nodes);
    isa::GroupSizes groups{static_cast<int>(worldSize),
                           static_cast<int>(tensorParallel)};
    std::vector<uint32_t> order =
        schedule ? scheduleBest(nodes, *t, groups)
                 : scheduleNodes(nodes, *t, groups, /*listSchedule=*/false);
    if (schedule) {
      orderSharedPorts(nodes, order, *t);
    }
    // Carriers touch a slot of their own stream in the scratch space the
    // memory plan leaves free (the end of SBUF, the last PSUM bank).
    auto carrier = [&](int stream) {
      isa::Instruction inst;
      auto slot = [&](isa::Memory memory, int64_t offset) {
        isa::AccessPattern ap;
        ap.memory = memory;
        ap.offset = offset;
        ap.sizes[0] = 1;
        ap.strides[0] = 1;
        return ap;
      };
      isa::AccessPattern sbuf = slot(
          isa::Memory::Sbuf, t->sbufBytesPerPartition - ktile::kScratchSbufBytes +
                                 stream * ktile::kScratchSlotBytes);
      inst.numOperands = 2;
      inst.operands[1] = sbuf;
      inst.operands[0] = sbuf;
      if (stream >= kDmaStream) {
        inst.opcode = isa::Opcode::DmaCopy;
        inst.engine = isa::Engine::Dma;
        inst.queue = static_cast<uint8_t>(stream - kDmaStream);
      } else if (stream == static_cast<int>(isa::Engine::Tensor)) {
        inst.opcode = isa::Opcode::Transpose;
        inst.engine = isa::Engine::Tensor;
        inst.operands[0] = slot(isa::Memory::Psum,
                                t->psumBytesPerPartition - t->psumBankBytes);
      } else if (stream == static_cast<int>(isa::Engine::Scalar)) {
        inst.opcode = isa::Opcode::Activation;
        inst.engine = isa::Engine::Scalar;
        inst.imm0 = 1.0;
      } else {
        inst.opcode = isa::Opcode::Memset;
        inst.engine = static_cast<isa::Engine>(stream);
        inst.numOperands = 1;
      }
      return inst;
    };
    auto semaphores = insertSemaphores(
        nodes, order, kDmaStream + static_cast<int>(t->dmaQueues), carrier);
    if (!semaphores) {
      return func.emitOpError(llvm::toString(semaphores.takeError()));
    }
    // 5. The program.
    OpBuilder b(func);
    auto program = kisa::ProgramOp::create(
        b, func.getLoc(), func.getName(), t->name,
        static_cast<uint64_t>(hbmBytes.getInt()),
        static_cast<uint64_t>(*semaphores), static_cast<uint64_t>(worldSize),
        static_cast<uint64_t>(tensorParallel));
    Block *body = new Block();
    program.getBody().push_back(body);
    b.setInsertionPointToStart(body);
    if (failed(emitBuffers(func, b))) {
      return failure();
    }
    kisa::InstructionOpBuilder instructions(b);
    for (uint32_t i : order) {
      instructions.create(i < locations.size() ? locations[i] : func.getLoc(),
                          nodes[i].inst);
    }
    return success();
  }

  LogicalResult emitBuffers(func::FuncOp func, OpBuilder &b) {
    Block &entry = func.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(entry.getTerminator());
    llvm::DenseSet<Value> returnedArgs;
    for (Value v : ret.getOperands()) {
      if (llvm::isa<BlockArgument>(rootOf(v))) {
        returnedArgs.insert(rootOf(v));
      }
    }
    auto buffer = [&](Value v, llvm::StringRef name, llvm::StringRef role,
                      ElementsAttr value) -> LogicalResult {
      auto type = llvm::cast<MemRefType>(v.getType());
      FailureOr<int64_t> address = addressOf(v, func);
      if (failed(address)) {
        return func.emitOpError("buffer '") << name << "' has no address";
      }
      kisa::BufferOp::create(b, func.getLoc(), name,
                             static_cast<uint64_t>(*address),
                             type.getElementType(), type.getShape(), role,
                             value);
      return success();
    };
    for (BlockArgument arg : entry.getArguments()) {
      std::string name = nameAttr(func.getArgAttrDict(arg.getArgNumber()),
                                  ("arg" + llvm::Twine(arg.getArgNumber())).str());
      if (failed(buffer(arg, name,
                        returnedArgs.contains(arg) ? "inout" : "input",
                        nullptr))) {
        return failure();
      }
    }
    for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
      if (llvm::isa<BlockArgument>(rootOf(v))) {
        continue; // written in place: the argument's inout buffer
      }
      std::string name = nameAttr(func.getResultAttrDict(r),
                                  ("result" + llvm::Twine(r)).str());
      if (failed(buffer(v, name, "output", nullptr))) {
        return failure();
      }
    }
    int constants = 0;
    for (auto alloc : entry.getOps<ktile::AllocOp>()) {
      if (auto value = alloc.getValueAttr()) {
        if (failed(buffer(alloc, ("const" + llvm::Twine(constants++)).str(),
                          "constant", value))) {
          return failure();
        }
      }
    }
    return success();
  }
};

} // namespace
