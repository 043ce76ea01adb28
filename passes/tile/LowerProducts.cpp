//===- LowerProducts.cpp - matmuls and what they compute on their tiles ---===//
//
// A matmul lowers in one of three ways, as the plan says: with a row chain
// as its epilogue (attention's scores and softmax; a layer norm after a
// linear layer's bias), with an elementwise group as its epilogue (a bias
// and activation, AdamW on a weight gradient), or alone, its product
// stored. The row sums planned beside a product are computed from the
// same tiles (see Lowering::lowerMatmul for the tiling itself). A
// convolution lowers with its epilogue group or alone, with the
// per-channel sums planned beside it (see LowerConvolution.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ElementwiseLoop.h"
#include "passes/tile/FunctionLowering.h"

#include <numeric>

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

/// The views an epilogue reads that stand after its matmul, lowered first.
LogicalResult FunctionLowering::lowerEarlyViews(Operation *product) {
  for (Operation *view : earlyViews[product]) {
    if (failed(lowerOp(view))) {
      return failure();
    }
    loweredEarly.insert(view);
  }
  tb.setLocation(product->getLoc());
  return success();
}

/// The buffers of the sums `product` computes beside itself (a weight
/// gradient's row sums, a convolution's per-channel sums), bound to their
/// results (through an f32 cast folded into the sum) now; the sums' own
/// ops are then done.
llvm::SmallVector<HbmView, 1>
FunctionLowering::sumsBeside(Operation *product) {
  llvm::SmallVector<Operation *, 2> sums(channelSumsOf.lookup(product));
  for (MatmulOp sum : columnSumsOf.lookup(product)) {
    sums.push_back(sum);
  }
  llvm::SmallVector<HbmView, 1> views;
  for (Operation *sum : sums) {
    Value result = sumResult(sum);
    views.push_back(freshBuffer(result));
    bindView(result, views.back());
    loweredEarly.insert(sum);
  }
  return views;
}

/// The row sums the epilogue of `m` folds, each with a fresh buffer.
void FunctionLowering::addEpilogueSums(MatmulOp m, Epilogue &e) {
  for (LoopColumnSum c : epilogueSumsOf.lookup(m)) {
    c.dst = freshBuffer(sumResult(c.op));
    e.columnSums.push_back(c);
  }
}

/// `ops` in program order.
void TilePlan::sortByPosition(llvm::SmallVectorImpl<Operation *> &ops) {
  llvm::sort(ops, [&](Operation *a, Operation *b) {
    return position[a] < position[b];
  });
}

LogicalResult FunctionLowering::lowerMatmulOp(MatmulOp m) {
  if (auto chain = chainEpilogueOf.find(m); chain != chainEpilogueOf.end()) {
    return lowerChainEpilogue(m, chain->second);
  }
  if (auto group = epilogueOf.find(m); group != epilogueOf.end()) {
    return lowerGroupEpilogue(m, group->second);
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
}

/// A product with row chain `k` as its epilogue (and, for a 2-D product,
/// the group computing the chain's input before it): the chain's values
/// leave as the chain's outputs, its row values read later gathered a
/// column per row tile.
LogicalResult FunctionLowering::lowerChainEpilogue(MatmulOp m, size_t k) {
  if (failed(lowerEarlyViews(m))) {
    return failure();
  }
  const PlannedRowChain &plan = chains[k];
  Epilogue e;
  e.ops.assign(plan.ops.begin(), plan.ops.end());
  if (auto group = epilogueOf.find(m); group != epilogueOf.end()) {
    e.ops.append(groups[group->second]);
  }
  e.ops.append(joinedEpilogue.lookup(m));
  sortByPosition(e.ops);
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
  addEpilogueSums(m, e);
  if (failed(lowering.lowerMatmul(m, HbmView{}, &e))) {
    return failure();
  }
  bindLoopResults(e.outputs, {});
  bindEpilogueSums(e);
  for (const LoopOutput &out : e.rowOutputs) {
    bindView(out.value, out.dst);
  }
  return success();
}

/// A 2-D product with fusion group `id` as its epilogue: the product is
/// stored only if something outside the group reads it, and reductions of
/// group values over the product's columns fold on its tiles.
LogicalResult FunctionLowering::lowerGroupEpilogue(MatmulOp m, int64_t id) {
  if (failed(lowerEarlyViews(m))) {
    return failure();
  }
  Epilogue e;
  e.ops.assign(groups[id].begin(), groups[id].end());
  e.ops.append(joinedEpilogue.lookup(m));
  sortByPosition(e.ops);
  e.product = m.getOutput();
  e.outputs = groupOutputs(e.ops);
  addEpilogueSums(m, e);
  if (!llvm::all_of(m->getUsers(),
                    [&](Operation *u) { return fusionId(u) == id; })) {
    e.outputs.push_back(LoopOutput{e.product, freshBuffer(e.product)});
  }
  // Only reductions over the product's columns fold on its tiles; the
  // others run where they stand.
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

/// Arguments (weights) that two or more 2-D matmuls load through bf16 casts
/// of their views, transposed or not: the forward pass's product reads
/// W^T, the backward's input gradient W. The first product stores the bf16
/// tiles it loads into a bf16 mirror of W's buffer, and the later ones read
/// that instead of W: half the bytes, moved out of the backward pass,
/// whose DMA queues are the step's bottleneck, into the forward's, which
/// have room. The bits are the same: the same cast, rounded once.
void FunctionLowering::planBf16Copies() {
  llvm::MapVector<Value, llvm::SmallVector<Value, 2>> castsOf;
  for (Operation &op : source.getBody().front()) {
    auto matmul = llvm::dyn_cast<MatmulOp>(&op);
    if (!matmul || tensorType(matmul.getOutput()).getRank() != 2) {
      continue;
    }
    llvm::SmallVector<Value, 2> roots;
    for (Value operand : {matmul.getLhs(), matmul.getRhs()}) {
      auto cast = operand.getDefiningOp<CastOp>();
      if (!cast || !absorbed.contains(cast) ||
          !tensorType(cast.getOutput()).getElementType().isBF16()) {
        continue;
      }
      Value root = cast.getInput();
      while (root.getDefiningOp<TransposeOp>() ||
             root.getDefiningOp<ReshapeOp>()) {
        root = root.getDefiningOp()->getOperand(0);
      }
      // One cast of a root per product: the copy must be stored before
      // anything reads it.
      if (llvm::isa<BlockArgument>(root) && !llvm::is_contained(roots, root)) {
        roots.push_back(root);
        castsOf[root].push_back(cast.getOutput());
      }
    }
  }
  // A cast several products read (canonicalisation merged their casts) is
  // among the later ones too: the first product stores the copy before any
  // other lowers.
  for (auto &[root, casts] : castsOf) {
    if (casts.size() > 1) {
      auto &later = lowering.copiedBy[casts.front()];
      later.assign(casts.begin() + 1, casts.end());
    }
  }
}

/// Lays out a batched value [..., G, M, N] (a batched product's, or its
/// row chain epilogue's) as [..., M, G, N] in HBM when its rows are short
/// runs (bf16 rows of 128 keys are 256 bytes, which move at half
/// bandwidth) and only products read it, directly or through views: a
/// tile of several consecutive elements along G is then one run per
/// partition, for the store and for the products' loads alike. Attention's
/// context [B, H, S, D] so becomes the row-major [B, S, H·D] that the
/// output projection reads. The value's view keeps its shape; only its
/// strides change.
void FunctionLowering::interleaveRows(Value value, HbmView &dst) {
  auto type = tensorType(value);
  auto rank = type.getRank();
  if (rank < 3 || type.getShape()[rank - 3] < 2 || inPlace.count(value) ||
      destinations.count(value) ||
      type.getShape()[rank - 1] * isa::dtypeBytes(dst.dtype) >= 512) {
    return;
  }
  std::function<bool(Value)> readByProducts = [&](Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation *user) {
      return llvm::isa<MatmulOp>(user) ||
             (llvm::isa<TransposeOp, ReshapeOp>(user) &&
              readByProducts(user->getResult(0)));
    });
  };
  if (!readByProducts(value)) {
    return;
  }
  llvm::SmallVector<int64_t> swap(rank);
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[rank - 3], swap[rank - 2]);
  llvm::SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 3], shape[rank - 2]);
  eraseIfUnused(dst);
  isa::DType dtype = dst.dtype;
  dst = HbmView::whole(tb.hbm(shape, dtype)).transposed(swap);
}

LogicalResult FunctionLowering::lowerConvolutionOp(Operation *op) {
  // An f32 cast of a bf16 result is the PSUM evacuation's (kgraph.fold).
  Operation *cast = matmulResultCast.lookup(op);
  Value result = cast ? cast->getResult(0) : op->getResult(0);
  auto group = epilogueOf.find(op);
  if (group == epilogueOf.end()) {
    HbmView dst = freshBuffer(result);
    if (failed(lowering.lowerConvolution(op, dst, sumsBeside(op)))) {
      return failure();
    }
    bindView(result, dst);
    return success();
  }
  return lowerConvolutionEpilogue(op, result, group->second);
}

/// A convolution with group `id` as its epilogue: the group's values read
/// after it are stored block by block; the output itself, read by the
/// group alone, is not.
LogicalResult FunctionLowering::lowerConvolutionEpilogue(Operation *op,
                                                         Value result,
                                                         int64_t id) {
  if (failed(lowerEarlyViews(op))) {
    return failure();
  }
  ConvEpilogue e;
  e.ops = groups[id];
  e.value = result;
  for (Value v : externalInputs(e.ops)) {
    if (v != result) {
      e.inputs.push_back({v, lowering.operandOf(v)});
    }
  }
  llvm::SmallVector<LoopOutput> outputs = groupOutputs(e.ops);
  e.outputs = outputs;
  if (failed(lowering.lowerConvolution(op, HbmView{}, {}, &e))) {
    return failure();
  }
  for (const LoopOutput &out : outputs) {
    bindView(out.value, out.dst);
  }
  return success();
}
