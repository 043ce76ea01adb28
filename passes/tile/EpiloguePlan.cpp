//===- EpiloguePlan.cpp - kgraph-plan-epilogues, and reading its plan -----===//
//
// The pass runs the planning of PlanEpilogues.cpp (what each matmul
// computes on its output tiles, and the row chains) and records it on the
// kgraph ops; convert-kgraph-to-ktile reads it back. Writer and reader
// stand together so that they agree on every attribute:
//   kgraph.row_chains (on the function): each chain's `from` and `shape`;
//   kgraph.row_chain = K: the op is in chain K;
//   kgraph.epilogue = G, kgraph.chain_epilogue = K: the matmul computes
//     fusion group G or chain K on its output tiles (a convolution, group
//     G: PlanConvolutionEpilogues.cpp);
//   kgraph.product = N: a label other ops' plans refer to;
//   kgraph.early_for = [N...]: a view lowered before product N, whose
//     epilogue reads it;
//   kgraph.joins_epilogue = N: the op joins product N's epilogue (a group
//     only its row sums read, and the reshapes it reads through);
//   kgraph.sum_in_epilogue = N: the row sum product N's epilogue folds.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/TilePlanner.h"
#include "passes/tile/Passes.h"

namespace kiln::tile_passes {
#define GEN_PASS_DEF_KGRAPHPLANEPILOGUES
#include "passes/tile/Passes.h.inc"
} // namespace kiln::tile_passes

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;

void TilePlanner::recordEpiloguePlan() {
  readMatmulOperandPlan();
  readRowSumPlan();
  planEpilogues();
  planChains();
  planChainEpilogues();
  planEpilogueChains();
  planEpilogueSums();
  planConvolutionEpilogues();
  writeEpiloguePlan();
}

/// Labels the products the plan refers to, in program order (so that the
/// IR is the same in every process), after those already labelled.
static llvm::DenseMap<Operation *, int64_t>
labelProducts(Block &body, const llvm::DenseSet<Operation *> &referred) {
  llvm::DenseMap<Operation *, int64_t> labels;
  int64_t next = 0;
  for (Operation &op : body) {
    if (auto label = op.getAttrOfType<IntegerAttr>(kProductAttr)) {
      labels[&op] = label.getInt();
      next = std::max(next, label.getInt() + 1);
    }
  }
  Builder builder(body.getParentOp()->getContext());
  for (Operation &op : body) {
    if (referred.contains(&op) && !labels.count(&op)) {
      labels[&op] = next;
      op.setAttr(kProductAttr, builder.getI64IntegerAttr(next++));
    }
  }
  return labels;
}

void TilePlanner::writeEpiloguePlan() {
  Block &body = source.getBody().front();
  Builder builder(source.getContext());
  auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
  for (auto &[m, id] : epilogueOf) {
    m->setAttr(kEpilogueAttr, i64(id));
  }
  for (auto &[m, k] : chainEpilogueOf) {
    m->setAttr(kChainEpilogueAttr, i64(static_cast<int64_t>(k)));
  }
  llvm::SmallVector<Attribute> table;
  for (auto [k, chain] : llvm::enumerate(chains)) {
    for (Operation *op : chain.ops) {
      op->setAttr(kRowChainAttr, i64(static_cast<int64_t>(k)));
    }
    table.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("from", i64(chain.from)),
         builder.getNamedAttr("shape",
                              builder.getDenseI64ArrayAttr(chain.shape))}));
  }
  if (!table.empty()) {
    source->setAttr(kRowChainsAttr, builder.getArrayAttr(table));
  }
  llvm::DenseSet<Operation *> referred;
  for (auto &entry : earlyViews) {
    referred.insert(entry.first);
  }
  for (auto &entry : joinedEpilogue) {
    referred.insert(entry.first);
  }
  for (auto &entry : epilogueSumsOf) {
    referred.insert(entry.first);
  }
  llvm::DenseMap<Operation *, int64_t> labels = labelProducts(body, referred);
  llvm::DenseMap<Operation *, llvm::SmallVector<int64_t, 1>> earlyFor;
  for (auto &[m, views] : earlyViews) {
    for (Operation *view : views) {
      earlyFor[view].push_back(labels.lookup(m));
    }
  }
  for (auto &[view, products] : earlyFor) {
    llvm::sort(products);
    view->setAttr(kEarlyForAttr, builder.getDenseI64ArrayAttr(products));
  }
  for (auto &[m, ops] : joinedEpilogue) {
    for (Operation *op : ops) {
      op->setAttr(kJoinsEpilogueAttr, i64(labels.lookup(m)));
    }
  }
  for (auto &[m, sums] : epilogueSumsOf) {
    for (const LoopColumnSum &sum : sums) {
      sum.op->setAttr(kSumInEpilogueAttr, i64(labels.lookup(m)));
      sum.op->removeAttr(kSumInLoopNestAttr); // the epilogue folds it
    }
  }
}

/// The reading of writeEpiloguePlan: the maps the planners filled.
void TilePlan::readEpiloguePlan() {
  Block &body = source.getBody().front();
  if (auto table = source->getAttrOfType<ArrayAttr>(kRowChainsAttr)) {
    for (auto chain : table.getAsRange<DictionaryAttr>()) {
      PlannedRowChain planned;
      planned.from = chain.getAs<IntegerAttr>("from").getInt();
      llvm::append_range(planned.shape,
                         chain.getAs<DenseI64ArrayAttr>("shape").asArrayRef());
      chains.push_back(std::move(planned));
    }
  }
  llvm::DenseMap<int64_t, Operation *> products;
  for (Operation &op : body) {
    auto attr = [&](llvm::StringRef name) {
      return op.getAttrOfType<IntegerAttr>(name);
    };
    if (auto label = attr(kProductAttr)) {
      products[label.getInt()] = &op;
    }
    if (auto id = attr(kEpilogueAttr)) {
      epilogueOf[&op] = id.getInt();
      epilogueAt[id.getInt()] = position[&op];
    }
    if (auto k = attr(kChainEpilogueAttr)) {
      chainEpilogueOf[&op] = k.getInt();
      chainEpilogueAt[k.getInt()] = position[&op];
    }
    if (auto k = attr(kRowChainAttr)) {
      chains[k.getInt()].ops.push_back(&op);
      chainOf[&op] = k.getInt();
    }
  }
  for (Operation &op : body) {
    readEpilogueReferences(&op, products);
  }
}

/// What `op`'s plan says of the product epilogues it takes part in.
void TilePlan::readEpilogueReferences(
    Operation *op, const llvm::DenseMap<int64_t, Operation *> &products) {
  if (auto labels = op->getAttrOfType<DenseI64ArrayAttr>(kEarlyForAttr)) {
    for (int64_t label : labels.asArrayRef()) {
      earlyViews[products.lookup(label)].push_back(op);
    }
  }
  if (auto label = op->getAttrOfType<IntegerAttr>(kJoinsEpilogueAttr)) {
    joinedEpilogue[products.lookup(label.getInt())].push_back(op);
    doneByEpilogues.insert(op);
    // Its row sums are the epilogue's now, not its loop nest's.
    rowSumsOf.erase(op);
  }
  if (auto label = op->getAttrOfType<IntegerAttr>(kSumInEpilogueAttr)) {
    auto sum = llvm::cast<MatmulOp>(op);
    llvm::SmallVector<Operation *> via;
    Value v = summedValue(sum, via);
    epilogueSumsOf[products.lookup(label.getInt())].push_back(
        LoopColumnSum{sum, v, {}, false, {via.begin(), via.end()}});
    doneByEpilogues.insert(op);
    doneByEpilogues.insert(via.begin(), via.end());
  }
}

namespace {

struct KGraphPlanEpilogues
    : kiln::tile_passes::impl::KGraphPlanEpiloguesBase<KGraphPlanEpilogues> {
  using Base::Base;

  void runOnOperation() override {
    const target::TargetDescription *t =
        lookupTargetOrError(getOperation(), target);
    if (!t) {
      return signalPassFailure();
    }
    TilePlanner(getOperation(), *t).recordEpiloguePlan();
  }
};

} // namespace
