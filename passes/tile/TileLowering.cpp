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

/// A bf16 cast that ends a fusion group whose f32 input nothing outside the
/// group reads: the group stores the bf16 value (half the bytes out, and
/// half in for every matmul that reads it) instead of the f32 one for the
/// matmuls to narrow as they load it. Either way the bits are the same.
bool narrowsGroupOutput(CastOp cast) {
  std::optional<int64_t> group = fusionId(cast);
  Operation *producer = cast.getInput().getDefiningOp();
  if (!group || !producer || fusionId(producer) != group) {
    return false;
  }
  return llvm::all_of(cast.getInput().getUsers(),
                      [&](Operation *user) { return fusionId(user) == group; });
}

} // namespace kiln::tile_passes

namespace {

/// A constant's elements in the device type of its buffer.
ElementsAttr deviceConstant(DenseElementsAttr value, MemRefType bufferType) {
  auto shape =
      RankedTensorType::get(bufferType.getShape(), bufferType.getElementType());
  Type from = value.getElementType(), to = bufferType.getElementType();
  if (from == to) {
    return value.reshape(shape);
  }
  if (llvm::isa<IntegerType>(from)) {
    llvm::SmallVector<APInt> ints;
    llvm::SmallVector<APFloat> floats;
    for (APInt v : value.getValues<APInt>()) {
      int64_t x = from.isInteger(1) ? v.getZExtValue() : v.getSExtValue();
      if (to.isInteger(32)) {
        ints.push_back(APInt(32, static_cast<uint64_t>(x), true));
      } else {
        floats.push_back(APFloat(static_cast<float>(x)));
      }
    }
    return to.isInteger(32) ? DenseElementsAttr::get(shape, ints)
                            : DenseElementsAttr::get(shape, floats);
  }
  return value.reshape(shape);
}

} // namespace

FailureOr<func::FuncOp> FunctionLowering::run() {
  MLIRContext *context = source.getContext();
  Block &body = source.getBody().front();
  unsigned index = 0;
  for (Operation &op : body) {
    position[&op] = index++;
    if (auto id = fusionId(&op)) {
      groups[*id].push_back(&op);
    }
  }
  // Casts that a matmul's loads or evacuation perform.
  for (Operation &op : body) {
    if (auto cast = llvm::dyn_cast<CastOp>(&op)) {
      bool feedsMatmuls = !cast->use_empty() &&
                          llvm::all_of(cast->getUsers(), [](Operation *u) {
                            return llvm::isa<MatmulOp>(u);
                          });
      if (feedsMatmuls &&
          cast.getOutput().getType().getElementType().isBF16() &&
          cast.getInput().getType().getElementType().isF32() &&
          !narrowsGroupOutput(cast)) {
        absorbed.insert(&op);
      }
    }
    if (auto matmul = llvm::dyn_cast<MatmulOp>(&op)) {
      if (matmul->hasOneUse()) {
        auto cast = llvm::dyn_cast<CastOp>(*matmul->getUsers().begin());
        if (cast && cast.getOutput().getType().getElementType().isF32() &&
            !fusionId(cast)) {
          absorbed.insert(cast);
          matmulResultCast[matmul] = cast;
        }
      }
    }
  }
  planOneHotOperands();
  planBf16Copies();
  for (Operation *op : absorbed) {
    op->removeAttr("kgraph.fusion");
  }
  groups.clear();
  for (Operation &op : body) {
    if (auto id = fusionId(&op)) {
      groups[*id].push_back(&op);
    }
  }

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
  target->setAttr("ktile.target",
                  StringAttr::get(context, tb.targetDescription().name));
  Block *entry = target.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [arg, newArg] :
       llvm::zip(body.getArguments(), entry->getArguments())) {
    lowering.bind(arg, TensorOperand{std::nullopt,
                                     viewOfBuffer(newArg, tensorType(arg))});
  }
  planNarrowedOutputs();
  planColumnSums();
  planRowSums();
  planEpilogues();
  planChains();
  planChainEpilogues();
  planEpilogueChains();
  planEpilogueSums();
  planInPlace();
  planConcats();

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
    if (auto id = fusionId(&op); id && &op == groups[*id].back()) {
      if (auto until = spreadUntil(groups[*id])) {
        spread(last, position[&op], *until);
      }
    }
  }
  return target;
}

/// A row sum's result, or the f32 cast folded into it.
Value FunctionLowering::sumResult(Operation *sum) {
  Operation *cast = matmulResultCast.lookup(sum);
  return cast ? cast->getResult(0) : sum->getResult(0);
}

/// Binds the results of the row sums `e` computed to their buffers.
void FunctionLowering::bindEpilogueSums(const Epilogue &e) {
  for (const LoopColumnSum &c : e.columnSums) {
    lowering.bind(sumResult(c.op), TensorOperand{std::nullopt, c.dst});
  }
}

/// A collective of `kind` from `input` into a fresh buffer for `output`,
/// each one partition of all its elements (an all-gather's output holds
/// the group's size times the input's).
LogicalResult FunctionLowering::lowerCollective(Value input, Value output,
                                                llvm::StringRef kind) {
  HbmView src = lowering.materialize(lowering.operandOf(input),
                                     tensorType(input).getShape());
  HbmView dst = freshBuffer(output);
  tb.emit("collective",
          {{dst.buffer, tb.pattern(dst, dst.offset, 1, 0, dst.elements(), 1)},
           {src.buffer, tb.pattern(src, src.offset, 1, 0, src.elements(), 1)}},
          {builder.getNamedAttr("kind", builder.getStringAttr(kind))});
  lowering.bind(output, TensorOperand{std::nullopt, std::move(dst)});
  return success();
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

/// The group's values used outside it, each with the view it is stored to.
llvm::SmallVector<LoopOutput>
FunctionLowering::groupOutputs(llvm::ArrayRef<Operation *> members) {
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  llvm::SmallVector<LoopOutput> outputs;
  for (Operation *op : members) {
    for (Value result : op->getResults()) {
      bool usedOutside = llvm::any_of(result.getUsers(), [&](Operation *u) {
        return !inGroup.contains(u);
      });
      if (usedOutside) {
        outputs.push_back(LoopOutput{result, freshBuffer(result)});
      }
    }
  }
  return outputs;
}

/// Reductions over the trailing dimensions of a group value of the group's
/// shape whose results nothing reads before the group runs (at position
/// `at`), each with a fresh buffer for the loop nest to fill.
llvm::SmallVector<LoopReduction> FunctionLowering::groupReductions(
    llvm::ArrayRef<Operation *> members, llvm::ArrayRef<int64_t> shape,
    unsigned at, const llvm::SmallPtrSetImpl<Operation *> *computed) {
  llvm::SmallVector<LoopReduction> reductions;
  auto consider = [&](Operation *user, Operation *via) {
    if (!llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(user) ||
        (computed && computed->contains(user)) ||
        inPlace.count(user->getResult(0)) ||
        destinations.count(user->getResult(0))) {
      return;
    }
    // The reduced dimensions must be trailing ones, and their elements
    // those of the group's dimensions [from, rank) for some `from`.
    auto dims = user->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    auto in = tensorType(user->getOperand(0)).getShape();
    auto rank = static_cast<int64_t>(in.size());
    auto n = static_cast<int64_t>(dims.size());
    if (n == 0 ||
        !llvm::all_of(dims, [&](int64_t d) { return d >= rank - n; })) {
      return;
    }
    int64_t reduced = 1, tail = 1;
    for (int64_t d : in.take_back(n)) {
      reduced *= d;
    }
    int64_t from = static_cast<int64_t>(shape.size());
    while (from > 0 && tail < reduced) {
      tail *= shape[--from];
    }
    bool readAfter =
        llvm::all_of(user->getResult(0).getUsers(),
                     [&](Operation *u) { return position.lookup(u) > at; });
    if (tail == reduced && readAfter) {
      reductions.push_back(
          LoopReduction{user, via, from, freshBuffer(user->getResult(0))});
    }
  };
  for (Operation *op : members) {
    for (Value result : op->getResults()) {
      if (tensorType(result).getShape() != shape) {
        continue;
      }
      for (Operation *user : result.getUsers()) {
        if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
          for (Operation *reader : reshape->getUsers()) {
            consider(reader, reshape);
          }
        } else {
          consider(user, nullptr);
        }
      }
    }
  }
  return reductions;
}

LogicalResult
FunctionLowering::lowerGroup(llvm::ArrayRef<Operation *> members) {
  llvm::SmallVector<LoopOutput> outputs = groupOutputs(members);
  auto shape = tensorType(members.back()->getResult(0)).getShape();
  llvm::SmallVector<LoopReduction> reductions =
      groupReductions(members, shape, position.lookup(members.back()));
  llvm::SmallVector<LoopColumnSum> columnSums;
  // A sum's result, or the f32 cast folded into it.
  auto resultOf = [&](Operation *sum) {
    Operation *cast = matmulResultCast.lookup(sum);
    return cast ? cast->getResult(0) : sum->getResult(0);
  };
  for (auto [sum, value] : rowSumsOf.lookup(members.back())) {
    columnSums.push_back(LoopColumnSum{sum, value, freshBuffer(resultOf(sum))});
  }
  if (failed(lowering.lowerElementwise(members, shape, outputs, reductions,
                                       columnSums))) {
    return failure();
  }
  bindLoopResults(outputs, reductions);
  for (const LoopColumnSum &c : columnSums) {
    if (c.fused) {
      lowering.bind(resultOf(c.op), TensorOperand{std::nullopt, c.dst});
      fusedReductions.insert(c.op);
      // A reshape only fused sums read is done with them.
      Operation *via = c.op->getOperand(1).getDefiningOp();
      if (llvm::isa_and_present<ReshapeOp>(via) &&
          llvm::all_of(via->getUsers(), [&](Operation *u) {
            return fusedReductions.contains(u);
          })) {
        fusedReductions.insert(via);
      }
    } else {
      dropUnwritten(resultOf(c.op), c.dst);
    }
  }
  return success();
}

/// A row chain in one loop nest: its values of the groups' shape read
/// after it are stored, and so are its row values read after it; the rest
/// stays in SBUF. If the loop nest declines, the parts run one by one.
LogicalResult FunctionLowering::lowerChain(size_t k) {
  const PlannedRowChain &plan = chains[k];
  llvm::ArrayRef<int64_t> shape = plan.shape;
  llvm::SmallPtrSet<Operation *, 32> inChain(plan.ops.begin(), plan.ops.end());
  llvm::SmallVector<LoopOutput> outputs;
  llvm::SmallVector<LoopReduction> reductions =
      groupReductions(plan.ops, shape, position[plan.ops.back()], &inChain);
  for (const LoopOutput &out : groupOutputs(plan.ops)) {
    if (tensorType(out.value).getShape() == shape) {
      outputs.push_back(out);
    } else {
      reductions.push_back(LoopReduction{out.value.getDefiningOp(), nullptr,
                                         plan.from, out.dst, false,
                                         /*rowValue=*/true});
    }
  }
  RowChain chain{plan.from};
  if (failed(lowering.lowerElementwise(plan.ops, shape, outputs, reductions, {},
                                       &chain))) {
    return failure();
  }
  if (!chain.declined) {
    bindLoopResults(outputs, reductions);
    return success();
  }
  // The buffers made for the loop nest; the parts make their own.
  for (const LoopOutput &out : outputs) {
    dropUnwritten(out.value, out.dst);
  }
  for (const LoopReduction &r : reductions) {
    dropUnwritten(r.op->getResult(0), r.dst);
  }
  declinedChains.insert(k);
  for (Operation *op : plan.ops) {
    if (failed(lowerOp(op))) {
      return failure();
    }
  }
  return success();
}

/// Binds what a group's loop nest (or epilogue) stored and the reductions
/// it computed; drops the buffers nothing wrote.
void FunctionLowering::bindLoopResults(
    llvm::ArrayRef<LoopOutput> outputs,
    llvm::ArrayRef<LoopReduction> reductions) {
  // Buffers nothing wrote: an output only fused reductions read, a
  // reduction the loop nest could not fuse (it runs where it stands).
  for (const LoopOutput &out : outputs) {
    if (out.stored) {
      lowering.bind(out.value, TensorOperand{std::nullopt, out.dst});
    } else {
      dropUnwritten(out.value, out.dst);
    }
  }
  for (const LoopReduction &r : reductions) {
    if (r.fused) {
      lowering.bind(r.op->getResult(0), TensorOperand{std::nullopt, r.dst});
      fusedReductions.insert(r.op);
    } else {
      dropUnwritten(r.op->getResult(0), r.dst);
    }
  }
  // A reshape only fused reductions read is done with them.
  for (const LoopReduction &r : reductions) {
    if (r.via && llvm::all_of(r.via->getUsers(), [&](Operation *u) {
          return fusedReductions.contains(u);
        })) {
      fusedReductions.insert(r.via);
    }
  }
}

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
    auto id = fusionId(op);
    if (!id) {
      return lowerGroup({op});
    }
    if (epilogueAt.count(*id)) {
      return success(); // computed by its matmul
    }
    auto &members = groups[*id];
    return op == members.back() ? lowerGroup(members) : success();
  }
  auto bindView = [&](Value v, HbmView view) {
    lowering.bind(v, TensorOperand{std::nullopt, std::move(view)});
  };
  // The buffers of the row sums `m` computes, bound to their results
  // (through an f32 cast folded into the sum) now; the sums' own ops are
  // then done.
  auto sumsBeside = [&](MatmulOp m) {
    llvm::SmallVector<HbmView, 1> views;
    for (MatmulOp sum : columnSumsOf.lookup(m)) {
      Operation *cast = matmulResultCast.lookup(sum);
      Value result = cast ? Value(cast->getResult(0)) : Value(sum.getOutput());
      views.push_back(freshBuffer(result));
      bindView(result, views.back());
      loweredEarly.insert(sum);
    }
    return views;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) -> LogicalResult {
        auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense) {
          return c.emitOpError("has a constant that is not dense elements");
        }
        if (dense.isSplat()) {
          Type t = dense.getElementType();
          double v = llvm::isa<FloatType>(t)
                         ? dense.getSplatValue<APFloat>().convertToDouble()
                     : t.isInteger(1)
                         ? double(dense.getSplatValue<APInt>().getZExtValue())
                         : double(dense.getSplatValue<APInt>().getSExtValue());
          lowering.bind(c.getOutput(), TensorOperand{v, HbmView{}});
          return success();
        }
        MemRefType type = hbmTypeOf(c.getType());
        auto alloc =
            ktile::AllocOp::create(builder, c.getLoc(), type, StringAttr(),
                                   deviceConstant(dense, type));
        bindView(c.getOutput(), viewOfBuffer(alloc, c.getType()));
        return success();
      })
      .Case([&](ReshapeOp r) {
        TensorOperand in = lowering.operandOf(r.getInput());
        if (in.immediate) {
          lowering.bind(r.getOutput(), in);
          return success();
        }
        if (auto view = in.view.reshaped(r.getType().getShape())) {
          bindView(r.getOutput(), *view);
          return success();
        }
        HbmView view =
            lowering.materialize(in, tensorType(r.getInput()).getShape());
        view.shape.assign(r.getType().getShape().begin(),
                          r.getType().getShape().end());
        view.strides = rowMajorStrides(view.shape);
        bindView(r.getOutput(), view);
        return success();
      })
      .Case([&](TransposeOp t) {
        TensorOperand in = lowering.operandOf(t.getInput());
        if (in.immediate) {
          lowering.bind(t.getOutput(), in);
          return success();
        }
        bindView(t.getOutput(), in.view.transposed(t.getPermutation()));
        return success();
      })
      .Case([&](BroadcastOp bc) {
        TensorOperand in = lowering.operandOf(bc.getInput());
        if (!in.immediate) {
          in.view = in.view.broadcastTo(bc.getType().getShape());
        }
        lowering.bind(bc.getOutput(), in);
        return success();
      })
      .Case([&](SliceOp s) {
        TensorOperand in = lowering.operandOf(s.getInput());
        if (in.immediate) {
          lowering.bind(s.getOutput(), in);
          return success();
        }
        HbmView view = in.view;
        for (size_t d = 0; d < view.shape.size(); ++d) {
          view.offset += s.getStart()[d] * view.strides[d];
          view.shape[d] = s.getType().getShape()[d];
          view.strides[d] *= s.getStride()[d];
        }
        bindView(s.getOutput(), view);
        return success();
      })
      .Case([&](ConcatOp c) {
        HbmView dst = freshBuffer(c.getOutput());
        int64_t dim = c.getDim(), at = 0;
        for (Value input : c.getInputs()) {
          int64_t size = tensorType(input).getShape()[dim];
          HbmView part = concatPart(dst, dim, at, size);
          at += size;
          // An input planConcats had computed in place is there already.
          const TensorOperand &in = lowering.operandOf(input);
          if (in.immediate || !(in.view == part)) {
            lowering.copyInto(in, part);
          }
        }
        bindView(c.getOutput(), dst);
        return success();
      })
      .Case<ReduceSumOp, ReduceMaxOp, ReduceMinOp>([&](Operation *r) {
        HbmView dst = freshBuffer(r->getResult(0));
        if (failed(lowering.lowerReduce(r, dst))) {
          return failure();
        }
        bindView(r->getResult(0), dst);
        return success();
      })
      .Case([&](MatmulOp m) -> LogicalResult {
        auto lowerEarlyViews = [&] {
          for (Operation *view : earlyViews[m]) {
            if (failed(lowerOp(view))) {
              return failure();
            }
            loweredEarly.insert(view);
          }
          tb.setLocation(m.getLoc());
          return success();
        };
        if (auto chain = chainEpilogueOf.find(m);
            chain != chainEpilogueOf.end()) {
          if (failed(lowerEarlyViews())) {
            return failure();
          }
          const PlannedRowChain &plan = chains[chain->second];
          Epilogue e;
          e.ops.assign(plan.ops.begin(), plan.ops.end());
          if (auto group = epilogueOf.find(m); group != epilogueOf.end()) {
            // A 2-D product's: its group, then the chain on its rows.
            e.ops.append(groups[group->second]);
            llvm::sort(e.ops, [&](Operation *a, Operation *b) {
              return position[a] < position[b];
            });
          }
          e.ops.append(joinedEpilogue.lookup(m));
          llvm::sort(e.ops, [&](Operation *a, Operation *b) {
            return position[a] < position[b];
          });
          e.product = m.getOutput();
          e.chainShape.assign(plan.shape.begin(), plan.shape.end());
          for (LoopOutput &out : groupOutputs(e.ops)) {
            if (isRowValueShape(tensorType(out.value).getShape(), plan.shape)) {
              e.rowOutputs.push_back(out);
              continue;
            }
            if (tensorType(m.getOutput()).getRank() > 2) {
              interleaveRows(out.value, out.dst); // rows of a 2-D one stay
            }
            e.outputs.push_back(out);
          }
          for (LoopColumnSum c : epilogueSumsOf.lookup(m)) {
            c.dst = freshBuffer(sumResult(c.op));
            e.columnSums.push_back(c);
          }
          if (failed(lowering.lowerMatmul(m, HbmView{}, &e))) {
            return failure();
          }
          bindLoopResults(e.outputs, {});
          bindEpilogueSums(e);
          for (const LoopOutput &out : e.rowOutputs) {
            lowering.bind(out.value, TensorOperand{std::nullopt, out.dst});
          }
          return success();
        }
        auto epilogue = epilogueOf.find(m);
        if (epilogue != epilogueOf.end()) {
          if (failed(lowerEarlyViews())) {
            return failure();
          }
          Epilogue e;
          e.ops.assign(groups[epilogue->second].begin(),
                       groups[epilogue->second].end());
          e.ops.append(joinedEpilogue.lookup(m));
          llvm::sort(e.ops, [&](Operation *a, Operation *b) {
            return position[a] < position[b];
          });
          e.product = m.getOutput();
          e.outputs = groupOutputs(e.ops);
          for (LoopColumnSum c : epilogueSumsOf.lookup(m)) {
            c.dst = freshBuffer(sumResult(c.op));
            e.columnSums.push_back(c);
          }
          if (!llvm::all_of(m->getUsers(), [&](Operation *u) {
                return fusionId(u) == epilogue->second;
              })) {
            e.outputs.push_back(LoopOutput{e.product, freshBuffer(e.product)});
          }
          // Only reductions over the product's columns fold on its tiles;
          // the others run where they stand.
          auto shape = tensorType(m.getOutput()).getShape();
          llvm::SmallVector<LoopReduction> reductions =
              groupReductions(e.ops, shape, position[m]);
          for (LoopReduction &r : reductions) {
            r.fused = r.from == 1;
            if (r.fused) {
              e.reductions.push_back(r);
            }
          }
          auto sums = sumsBeside(m);
          if (failed(lowering.lowerMatmul(m, HbmView{}, &e, sums))) {
            return failure();
          }
          bindLoopResults(e.outputs, reductions);
          bindEpilogueSums(e);
          return success();
        }
        Operation *cast = matmulResultCast.lookup(m);
        Value result = cast ? Value(cast->getResult(0)) : Value(m.getOutput());
        HbmView dst = freshBuffer(result);
        interleaveRows(result, dst);
        auto sums = sumsBeside(m);
        if (failed(lowering.lowerMatmul(m, dst, nullptr, sums))) {
          return failure();
        }
        bindView(result, dst);
        return success();
      })
      .Case([&](EmbeddingOp e) -> LogicalResult {
        HbmView dst = freshBuffer(e.getOutput());
        if (failed(lowering.lowerEmbedding(e, dst))) {
          return failure();
        }
        bindView(e.getOutput(), dst);
        return success();
      })
      .Case([&](ScatterRowsOp scatter) -> LogicalResult {
        // Over the input's buffer when the input was written for this
        // scatter alone (into the argument the result aliases, as
        // planScatterInPlace planned, or into a buffer of its own);
        // otherwise over a copy of it.
        Value input = scatter.getInput();
        TensorOperand before = lowering.operandOf(input);
        HbmView dst;
        auto planned = inPlace.find(scatter.getOutput());
        bool overInput =
            !before.immediate &&
            (planned != inPlace.end()
                 ? inPlace.count(input) &&
                       inPlace.lookup(input) == planned->second
                 : input.hasOneUse() && before.view.isContiguous() &&
                       before.view.offset == 0 &&
                       before.view.elements() ==
                           llvm::cast<MemRefType>(before.view.buffer.getType())
                               .getNumElements() &&
                       !llvm::isa<BlockArgument>(before.view.buffer));
        if (overInput) {
          dst = before.view;
        } else {
          dst = freshBuffer(scatter.getOutput());
          lowering.copyInto(before, dst);
        }
        if (failed(lowering.lowerScatterRows(scatter, dst))) {
          return failure();
        }
        bindView(scatter.getOutput(), dst);
        return success();
      })
      .Case([&](IotaOp iota) -> LogicalResult {
        auto type = iota.getType();
        if (type.getRank() != 1) {
          return iota.emitOpError("of rank > 1; run kgraph-decompose first");
        }
        HbmView dst = freshBuffer(iota.getOutput());
        int64_t n = type.getShape()[0], rows = 1;
        for (int64_t p = std::min<int64_t>(128, n); p > 1; --p) {
          if (n % p == 0) {
            rows = p;
            break;
          }
        }
        int64_t cols = n / rows;
        for (int64_t c0 = 0; c0 < cols; c0 += 4096) {
          int64_t cc = std::min<int64_t>(4096, cols - c0);
          Tile t = tb.tile(isa::Memory::Sbuf, dst.dtype, rows, cc);
          tb.iota(t, c0, cols, 1);
          tb.store(dst, c0, cols, 1, t);
        }
        bindView(iota.getOutput(), dst);
        lowering.iotaBuffers.insert(dst.buffer);
        return success();
      })
      .Case([&](AllReduceOp ar) {
        return lowerCollective(ar.getInput(), ar.getOutput(),
                               ar.getReduction() == "mean" ? "all_reduce_mean"
                                                           : "all_reduce_sum");
      })
      .Case([&](AllGatherOp gather) {
        return lowerCollective(gather.getInput(), gather.getOutput(),
                               "all_gather");
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
      if (!inPlace.count(value) || !returned.insert(arg).second) {
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
      buffer = lowering
                   .materialize(TensorOperand{operand.immediate, operand.view},
                                tensorType(value).getShape())
                   .buffer;
      if (returned.count(buffer) || llvm::isa<BlockArgument>(buffer)) {
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
    const target::TargetDescription *t = target::lookupTarget(target);
    if (!t) {
      getOperation().emitError("unknown target '") << target << "'";
      return signalPassFailure();
    }
    llvm::SmallVector<func::FuncOp> functions(
        getOperation().getOps<func::FuncOp>());
    for (func::FuncOp source : functions) {
      if (source.isExternal()) {
        continue;
      }
      FunctionLowering lowering(source, *t, sbufBudget);
      FailureOr<func::FuncOp> lowered = lowering.run();
      if (failed(lowered)) {
        return signalPassFailure();
      }
      source.erase();
    }
  }
};

} // namespace
