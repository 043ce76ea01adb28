//===- LowerProducts.cpp - matmuls and what they compute on their tiles ---===//
//
// A matmul lowers in one of three ways, as the plan says: with a row chain
// as its epilogue (attention's scores and softmax; a layer norm after a
// linear layer's bias), with an elementwise group as its epilogue (a bias
// and activation, AdamW on a weight gradient), or alone, its product
// stored. The row sums planned beside a product are computed from the
// same tiles (see Lowering::lowerMatmul for the tiling itself).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

/// The views an epilogue reads that stand after its matmul, lowered first.
LogicalResult FunctionLowering::lowerEarlyViews(MatmulOp m) {
  for (Operation *view : earlyViews[m]) {
    if (failed(lowerOp(view))) {
      return failure();
    }
    loweredEarly.insert(view);
  }
  tb.setLocation(m.getLoc());
  return success();
}

/// The buffers of the row sums `m` computes beside its product, bound to
/// their results (through an f32 cast folded into the sum) now; the sums'
/// own ops are then done.
llvm::SmallVector<HbmView, 1> FunctionLowering::sumsBeside(MatmulOp m) {
  llvm::SmallVector<HbmView, 1> views;
  for (MatmulOp sum : columnSumsOf.lookup(m)) {
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
void FunctionLowering::sortByPosition(llvm::SmallVectorImpl<Operation *> &ops) {
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
