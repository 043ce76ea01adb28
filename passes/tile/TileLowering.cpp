//===- TileLowering.cpp - kgraph functions to ktile functions -------------===//
//
// Walks a kgraph function in program order and emits the ktile function
// that computes it: HBM buffers for tensors, views for data movement, and a
// loop nest of tiles per elementwise group, reduction and matmul (see the
// pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"
#include "passes/tile/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

namespace kiln::tile_passes {
#define GEN_PASS_DEF_CONVERTKGRAPHTOKTILE
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;

TensorOperand &Lowering::operandOf(Value value) {
  auto it = values.find(value);
  if (it == values.end()) {
    // An ordering bug in an earlier pass; say so instead of reading junk.
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "tile phase: a value is used before it was lowered: ";
    value.print(os, OpPrintingFlags().skipRegions());
    llvm::report_fatal_error(llvm::StringRef(text), /*gen_crash_diag=*/false);
  }
  return it->second;
}

void Lowering::bind(Value value, TensorOperand operand) {
  values[value] = std::move(operand);
}

using graph_passes::fusionId;

namespace kiln::tile_passes {

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

MemRefType hbmTypeOf(RankedTensorType type) {
  Shape shape(type.getShape());
  if (shape.empty()) {
    shape.push_back(1);
  }
  Type element =
      kisa::toMlirType(type.getContext(), deviceType(type.getElementType()));
  return ktile::bufferType(shape, element, isa::Memory::Hbm);
}

HbmView viewOfBuffer(Value buffer, RankedTensorType type) {
  HbmView v = HbmView::whole(buffer);
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  v.strides = rowMajorStrides(v.shape);
  return v;
}

/// Elements [at, at + size) along `dim` of a concat's result view.
HbmView concatPart(const HbmView &whole, int64_t dim, int64_t at,
                   int64_t size) {
  HbmView part = whole;
  part.offset += at * whole.strides[dim];
  part.shape[dim] = size;
  return part;
}

/// Erases a buffer nothing reads or writes (made for a loop nest that
/// stored nothing into it).
void eraseIfUnused(const HbmView &view) {
  Operation *alloc = view.buffer ? view.buffer.getDefiningOp() : nullptr;
  if (alloc && llvm::isa<ktile::AllocOp>(alloc) && alloc->use_empty()) {
    alloc->erase();
  }
}

bool isViewOp(Operation *op) {
  return llvm::isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp>(op);
}

} // namespace kiln::tile_passes

FailureOr<func::FuncOp> FunctionLowering::run() {
  MLIRContext *context = source.getContext();
  Block &body = source.getBody().front();
  readMatmulOperandPlan();
  readRowSumPlan();
  planBf16Copies();

  // The ktile function: every tensor an HBM memref.
  FunctionType type = source.getFunctionType();
  llvm::SmallVector<Type> inputs, results;
  for (Type t : type.getInputs()) {
    inputs.push_back(hbmTypeOf(llvm::cast<RankedTensorType>(t)));
  }
  for (Type t : type.getResults()) {
    results.push_back(hbmTypeOf(llvm::cast<RankedTensorType>(t)));
  }
  builder.setInsertionPoint(source);
  target = func::FuncOp::create(builder, source.getLoc(), source.getName(),
                                FunctionType::get(context, inputs, results));
  target.setAllArgAttrs(source.getAllArgAttrs());
  target.setAllResultAttrs(source.getAllResultAttrs());
  target->setAttr(ktile::kTargetAttr,
                  StringAttr::get(context, tb.targetDescription().name));
  Block *entry = target.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [arg, newArg] :
       llvm::zip(body.getArguments(), entry->getArguments())) {
    lowering.bind(arg, TensorOperand{std::nullopt,
                                     viewOfBuffer(newArg, tensorType(arg))});
  }
  readEpiloguePlan();
  readBufferPlan();
  placeConcats();

  for (Operation &op : body) {
    emitDueSlices(position[&op]);
    if (llvm::isa<func::ReturnOp>(op)) {
      emitDueSlices(std::numeric_limits<unsigned>::max());
    }
    Operation *last = entry->empty() ? nullptr : &entry->back();
    if (failed(lowerOp(&op))) {
      target.erase();
      return failure();
    }
    for (Value result : op.getResults()) {
      if (auto it = copiedEarly.find(result); it != copiedEarly.end()) {
        lowering.copyInto(lowering.operandOf(result),
                          viewOfBuffer(target.getArgument(it->second),
                                       tensorType(result)));
      }
    }
    if (auto id = fusionId(&op); id && &op == groups[*id].back()) {
      if (auto until = spreadUntil(groups[*id])) {
        spread(last, position[&op], *until);
      }
    }
  }
  return target;
}

/// A row sum's result, or the f32 cast folded into it.
Value TilePlan::sumResult(Operation *sum) {
  Operation *cast = matmulResultCast.lookup(sum);
  return cast ? cast->getResult(0) : sum->getResult(0);
}

/// Binds the results of the row sums `e` computed to their buffers.
void FunctionLowering::bindEpilogueSums(const Epilogue &e) {
  for (const LoopColumnSum &c : e.columnSums) {
    bindView(sumResult(c.op), c.dst);
  }
}

void FunctionLowering::bindView(Value value, HbmView view) {
  lowering.bind(value, TensorOperand{std::nullopt, std::move(view)});
}

HbmView FunctionLowering::freshBuffer(Value result) {
  auto type = tensorType(result);
  auto it = inPlace.find(result);
  if (it != inPlace.end()) {
    return viewOfBuffer(target.getArgument(it->second), type);
  }
  auto planned = destinations.find(result);
  if (planned != destinations.end()) {
    // The buffer lives from its first writer on.
    Operation *alloc = planned->second.buffer.getDefiningOp();
    if (unplacedBuffers.erase(alloc)) {
      alloc->moveBefore(builder.getInsertionBlock(),
                        builder.getInsertionPoint());
    }
    return planned->second;
  }
  Value buffer =
      tb.hbm(type.getShape(), narrowed.contains(result)
                                  ? isa::DType::BF16
                                  : deviceType(type.getElementType()));
  return viewOfBuffer(buffer, type);
}

/// Erases the buffer freshBuffer made for `value` when nothing wrote it.
/// A planned destination stays: a concat's buffer is also its other parts'
/// and the concat's own, whose writers still hold views of it.
void FunctionLowering::dropUnwritten(Value value, const HbmView &view) {
  if (!destinations.count(value) && !inPlace.count(value)) {
    eraseIfUnused(view);
  }
}

/// Lowers `op` by its family, unless the plan has another op compute it (a
/// row chain's last op, a matmul's epilogue, a loop nest's reduction).
LogicalResult FunctionLowering::lowerOp(Operation *op) {
  auto chain = chainOf.find(op);
  if (chain != chainOf.end() && !declinedChains.contains(chain->second)) {
    bool last = op == chains[chain->second].ops.back();
    return last && !chainEpilogueAt.count(chain->second)
               ? lowerChain(chain->second)
               : success(); // the last op runs it, or its product does
  }
  if (absorbed.contains(op) || loweredEarly.contains(op) ||
      fusedReductions.contains(op) || doneByEpilogues.contains(op)) {
    return success();
  }
  tb.setLocation(op->getLoc());
  if (graph_passes::isElementwise(op)) {
    return lowerElementwiseOp(op);
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) { return lowerConstant(c); })
      .Case([&](ReshapeOp r) { return lowerReshape(r); })
      .Case([&](TransposeOp t) { return lowerTranspose(t); })
      .Case([&](BroadcastOp b) { return lowerBroadcast(b); })
      .Case([&](SliceOp s) { return lowerSlice(s); })
      .Case([&](ConcatOp c) { return lowerConcat(c); })
      .Case([&](IotaOp iota) { return lowerIota(iota); })
      .Case<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(
          [&](Operation *r) { return lowerReduction(r); })
      .Case([&](MatmulOp m) { return lowerMatmulOp(m); })
      .Case([&](EmbeddingOp e) { return lowerEmbeddingOp(e); })
      .Case<ConvOp, ConvInputGradOp, ConvWeightGradOp>(
          [&](Operation *c) { return lowerConvolutionOp(c); })
      .Case([&](ScatterRowsOp s) { return lowerScatterOp(s); })
      .Case([&](AllReduceOp ar) {
        return lowerCollective(ar.getInput(), ar.getOutput(),
                               ar.getReduction() == "mean" ? "all_reduce_mean"
                                                           : "all_reduce_sum",
                               ar.getGroup());
      })
      .Case([&](AllGatherOp gather) {
        return lowerCollective(gather.getInput(), gather.getOutput(),
                               "all_gather", gather.getGroup());
      })
      .Case([&](ReduceScatterOp rs) {
        return lowerCollective(rs.getInput(), rs.getOutput(),
                               rs.getReduction() == "mean"
                                   ? "reduce_scatter_mean"
                                   : "reduce_scatter_sum",
                               rs.getGroup());
      })
      .Case([&](WorkerShardOp shard) {
        return lowerCollective(shard.getInput(), shard.getOutput(),
                               "worker_shard", shard.getGroup());
      })
      .Case([&](func::ReturnOp ret) { return lowerReturn(ret); })
      .Default([&](Operation *other) {
        return other->emitOpError(
            "cannot be tiled yet (the tile phase lowers the primitives that "
            "kgraph-decompose leaves)");
      });
}

LogicalResult FunctionLowering::lowerReturn(func::ReturnOp ret) {
  llvm::SmallVector<Value> results;
  llvm::SmallPtrSet<Value, 8> returned;
  for (auto [r, value] : llvm::enumerate(ret.getOperands())) {
    auto resultType =
        llvm::cast<MemRefType>(target.getFunctionType().getResult(r));
    auto alias = source.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
    if (alias) {
      Value arg = target.getArgument(alias.getInt());
      bool written = inPlace.count(value) || copiedEarly.count(value);
      if (!written || !returned.insert(arg).second) {
        // Copied into the argument's buffer after everything else.
        lowering.copyInto(lowering.operandOf(value),
                          viewOfBuffer(arg, tensorType(value)));
        returned.insert(arg);
      }
      results.push_back(arg);
      continue;
    }
    TensorOperand operand = lowering.operandOf(value);
    Value buffer;
    if (!operand.immediate && operand.view.isContiguous() &&
        operand.view.offset == 0 &&
        operand.view.elements() ==
            llvm::cast<MemRefType>(operand.view.buffer.getType())
                .getNumElements() &&
        !llvm::isa<BlockArgument>(operand.view.buffer) &&
        !returned.count(operand.view.buffer)) {
      buffer = operand.view.buffer;
    } else {
      HbmView view = lowering.materialize(
          TensorOperand{operand.immediate, operand.view},
          tensorType(value).getShape());
      buffer = view.buffer;
      // A contiguous part of a larger buffer (a slice trimming padding)
      // is copied out: a result is a whole buffer.
      bool whole = view.offset == 0 &&
                   view.elements() ==
                       llvm::cast<MemRefType>(buffer.getType()).getNumElements();
      if (!whole || returned.count(buffer) ||
          llvm::isa<BlockArgument>(buffer)) {
        HbmView copy = viewOfBuffer(
            tb.hbm(tensorType(value).getShape(), operand.view.dtype),
            tensorType(value));
        lowering.copyInto(operand, copy);
        buffer = copy.buffer;
      }
    }
    if (buffer.getType() != resultType) {
      buffer = ktile::ViewOp::create(builder, ret.getLoc(), resultType, buffer);
    }
    returned.insert(buffer);
    results.push_back(buffer);
  }
  func::ReturnOp::create(builder, ret.getLoc(), results);
  return success();
}

namespace {

struct ConvertKGraphToKTile
    : kiln::tile_passes::impl::ConvertKGraphToKTileBase<ConvertKGraphToKTile> {
  using Base::Base;

  void runOnOperation() override {
    const target::TargetDescription *t =
        lookupTargetOrError(getOperation(), target);
    if (!t) {
      return signalPassFailure();
    }
    llvm::SmallVector<func::FuncOp> functions(
        getOperation().getOps<func::FuncOp>());
    for (func::FuncOp source : functions) {
      if (source.isExternal()) {
        continue;
      }
      FunctionLowering lowering(source, *t, sbufBudget, hbmTrades);
      FailureOr<func::FuncOp> lowered = lowering.run();
      if (failed(lowered)) {
        return signalPassFailure();
      }
      source.erase();
    }
  }
};

} // namespace
