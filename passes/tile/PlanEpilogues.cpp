//===- PlanEpilogues.cpp - work a matmul does on its output tiles ---------===//
//
// The planning of kgraph-plan-epilogues (see EpiloguePlan.cpp), which decides
// what each matmul computes on its output tiles as they leave PSUM: an
// elementwise group (a bias, an activation, AdamW), a row chain on whole
// rows (a softmax on attention's scores, a layer norm after a linear
// layer, its backward after the next input gradient), and row sums of
// those values (a layer norm's parameter gradients), and which row chains
// run as one loop nest of their own.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/AffinePredicate.h"
#include "passes/tile/TilePlanner.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;
using graph_passes::fusionId;

namespace kiln::tile_passes {

/// The longest row, in f32 bytes per partition, that a batched product
/// gathers in SBUF for a row chain epilogue: 4096 keys (Llama 2's
/// sequence). The chain's few live row values (the scores, their
/// exponentials, the probabilities) then take about a third of a
/// partition's SBUF; what does not fit beside the product's other tiles
/// spills (ktile-plan-memory).
constexpr int64_t kChainRowBytes = 16384;

/// Row chains among the groups no matmul or row sum claimed.
void TilePlanner::planChains() {
  RowChainHooks hooks;
  hooks.membersOf = [&](Operation *op) -> llvm::ArrayRef<Operation *> {
    if (auto id = fusionId(op)) {
      return groups[*id];
    }
    auto lone = loneGroups.emplace(op, op).first;
    return llvm::ArrayRef<Operation *>(&lone->second, 1);
  };
  hooks.mayJoin = [&](llvm::ArrayRef<Operation *> members) {
    auto id = fusionId(members.front());
    return !(id && epilogueAt.count(*id)) && !rowSumsOf.count(members.back()) &&
           llvm::none_of(members,
                         [&](Operation *m) { return absorbed.contains(m); });
  };
  hooks.readAt = [&](Operation *op) { return readAt(op); };
  chains = planRowChains(source.getBody().front(), hooks);
  for (auto [k, chain] : llvm::enumerate(chains)) {
    for (Operation *op : chain.ops) {
      chainOf[op] = k;
    }
  }
}

/// The row chains that a batched product (attention's scores, [B, H, S, S])
/// computes on its output tiles, as an epilogue: the chain reduces the
/// product's last dimension, which each output tile holds whole (several
/// one-tile batch elements side by side), or which the product's tiles of
/// a row block gather in SBUF (elements of whole row tiles, rows of up to
/// kChainRowBytes in f32), reads the product only itself, and reads
/// nothing computed after the product. The scores then never go to HBM
/// and come back: the softmax and its backward each save a store and a
/// load of the product on every layer, and a hop on the forward pass's
/// chain of dependent transfers.
void TilePlanner::planChainEpilogues() {
  int64_t bankColumns = target.psumBankBytes / 4;
  for (auto [k, plan] : llvm::enumerate(chains)) {
    auto rank = static_cast<int64_t>(plan.shape.size());
    if (rank < 3 || plan.from != rank - 1) {
      continue;
    }
    llvm::SmallPtrSet<Operation *, 32> inChain(plan.ops.begin(),
                                               plan.ops.end());
    MatmulOp product;
    bool single = true;
    for (Operation *op : plan.ops) {
      for (Value v : op->getOperands()) {
        auto m = v.getDefiningOp<MatmulOp>();
        if (m && m != product) {
          single = single && !product;
          product = m;
        }
      }
    }
    if (!product || !single || chainEpilogueOf.count(product) ||
        matmulResultCast.count(product) ||
        tensorType(product.getOutput()).getShape() !=
            llvm::ArrayRef<int64_t>(plan.shape)) {
      continue;
    }
    // The lowering's grouped path (one tile per element, several elements
    // of the innermost batch dimension to a PSUM bank), or its tiled path
    // on each element's whole rows, in whole row tiles.
    int64_t m = plan.shape[rank - 2], n = plan.shape[rank - 1];
    auto lhsShape = tensorType(product.getLhs()).getShape();
    int64_t depth = lhsShape[lhsShape.size() -
                             (product.getTransposeLhs() ? 2 : 1)];
    bool grouped = depth <= 128 && m <= 128 && n <= bankColumns &&
                   plan.shape[rank - 3] >= 2;
    bool wholeRows = !grouped && m % 128 == 0 && 4 * n <= kChainRowBytes;
    if (!(grouped || wholeRows) || oneHotIndices.count(product.getLhs()) ||
        oneHotIndices.count(product.getRhs())) {
      continue;
    }
    bool readOnlyByChain = llvm::all_of(
        product->getUsers(), [&](Operation *u) { return inChain.contains(u); });
    // Row values (a max, a sum) read after the chain would need their own
    // stores; the chains that have them run as loop nests.
    bool rowValuesInside = llvm::all_of(plan.ops, [&](Operation *op) {
      return llvm::all_of(op->getResults(), [&](Value r) {
        return tensorType(r).getShape() ==
                   llvm::ArrayRef<int64_t>(plan.shape) ||
               llvm::all_of(r.getUsers(),
                            [&](Operation *u) { return inChain.contains(u); });
      });
    });
    unsigned at = position[product];
    llvm::SetVector<Operation *> views;
    // A mask the chain's selects compute from positions (a causal mask)
    // need not exist yet, where no tile's rows wrap round an element.
    auto computed = [&](Value v) {
      return m % 128 == 0 && selectCondition(v, plan.ops, plan.shape);
    };
    bool available = llvm::all_of(plan.ops, [&](Operation *op) {
      return llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def == product || inChain.contains(def) ||
               computed(v) || availableBy(def, at, views);
      });
    });
    if (readOnlyByChain && rowValuesInside && available &&
        !returnsAliasedResult(inChain)) {
      runChainAt(k, product, views);
    }
  }
}

/// Whether one of `ops` computes a result the function returns over an
/// argument's buffer: an epilogue would write it before the argument's
/// last reads.
bool TilePlanner::returnsAliasedResult(
    const llvm::SmallPtrSetImpl<Operation *> &ops) {
  auto ret = llvm::cast<func::ReturnOp>(source.getBody().front().back());
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    Operation *producer = ret.getOperand(r).getDefiningOp();
    if (producer && ops.contains(producer) &&
        source.getResultAttr(r, "kgraph.aliases")) {
      return true;
    }
  }
  return false;
}

/// Makes chain k the epilogue of `product`, the views its inputs need
/// lowered before the product.
void TilePlanner::runChainAt(size_t k, MatmulOp product,
                                  const llvm::SetVector<Operation *> &views) {
  chainEpilogueOf[product] = k;
  chainEpilogueAt[k] = position[product];
  setEarlyViews(product, views);
}

/// `views`, in program order, are lowered before `product`.
void TilePlanner::setEarlyViews(Operation *product,
                                const llvm::SetVector<Operation *> &views) {
  llvm::SmallVector<Operation *> early(views.begin(), views.end());
  llvm::sort(early, [&](Operation *a, Operation *b) {
    return position[a] < position[b];
  });
  earlyViews[product] = std::move(early);
}

/// The elementwise groups 2-D matmuls compute on their output tiles (see
/// Epilogue): the group of the product's first reader, when every reader is
/// in a group, every group op has the product's shape, the group's other
/// inputs are computed before the matmul, and a result written over an
/// argument has no read of the argument left after the matmul (so it stays
/// in place). The group never reads the product back from HBM, and the
/// product goes there only for readers in other groups.
void TilePlanner::planEpilogues() {
  Block &body = source.getBody().front();
  for (Operation &op : body) {
    auto matmul = llvm::dyn_cast<MatmulOp>(&op);
    if (!matmul || matmul->use_empty() || matmulResultCast.count(matmul) ||
        summedBySibling.contains(matmul) || rowSumCandidates.contains(matmul)) {
      continue;
    }
    auto shape = tensorType(matmul.getOutput()).getShape();
    // The group of the first reader; readers in later groups (a backward
    // group recomputing a value from the product, see kgraph-rematerialize)
    // read the product, which the epilogue then stores too.
    Operation *first =
        *llvm::min_element(matmul->getUsers(), [&](Operation *a, Operation *b) {
          return position[a] < position[b];
        });
    std::optional<int64_t> id = fusionId(first);
    bool grouped = shape.size() == 2 && id &&
                   llvm::all_of(matmul->getUsers(),
                                [](Operation *u) { return fusionId(u); });
    if (!grouped || epilogueAt.count(*id)) {
      continue;
    }
    llvm::SetVector<Operation *> views;
    if (groupFitsEpilogue(matmul, matmul.getOutput(), groups[*id], views)) {
      recordEpilogue(matmul, *id, views);
    }
  }
}

/// Whether group `members` can run on the output tiles of `product` (its
/// value `value`) where the product stands: every member has the value's
/// shape and reads values there by then (views after the product join
/// `views`, to be lowered before it), and a result written over an
/// argument has no read of the argument left after the product (so it
/// stays in place).
bool TilePlanner::groupFitsEpilogue(Operation *product, Value value,
                                    llvm::ArrayRef<Operation *> members,
                                    llvm::SetVector<Operation *> &views) {
  auto shape = tensorType(value).getShape();
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  unsigned at = position[product];
  bool fits = llvm::all_of(members, [&](Operation *member) {
    return llvm::all_of(
               member->getResults(),
               [&](Value r) { return tensorType(r).getShape() == shape; }) &&
           llvm::all_of(member->getOperands(), [&](Value v) {
             Operation *def = v.getDefiningOp();
             return !def || v == value || inGroup.contains(def) ||
                    availableBy(def, at, views);
           });
  });
  Block &body = source.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.back());
  for (unsigned r = 0; fits && r < ret.getNumOperands(); ++r) {
    auto alias = source.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
    Operation *producer = ret.getOperand(r).getDefiningOp();
    if (alias && producer && inGroup.contains(producer)) {
      fits = readsEndBefore(source.getArgument(alias.getInt()), at, inGroup,
                            /*throughView=*/false);
    }
  }
  return fits;
}

/// Group `id` runs on `product`'s output tiles, the views it reads after
/// the product lowered before it.
void TilePlanner::recordEpilogue(Operation *product, int64_t id,
                                 const llvm::SetVector<Operation *> &views) {
  epilogueOf[product] = id;
  epilogueAt[id] = position[product];
  setEarlyViews(product, views);
}

/// Whether the group may overwrite `value`'s buffer at position `at`: every
/// read outside the group happens earlier, and group members read it
/// elementwise in its own layout. Views and absorbed casts read nothing where
/// they stand; their consumers read the buffer, so those are what count.
bool TilePlanner::readsEndBefore(
    Value value, unsigned at, const llvm::SmallPtrSetImpl<Operation *> &group,
    bool throughView) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (group.contains(user)) {
      if (throughView || tensorType(user->getResult(0)).getShape() !=
                             tensorType(value).getShape()) {
        return false;
      }
    } else if (llvm::isa<func::ReturnOp>(user)) {
      return false;
    } else if (isViewOp(user) || absorbed.contains(user)) {
      if (!readsEndBefore(user->getResult(0), at, group,
                          throughView || isViewOp(user))) {
        return false;
      }
    } else if (loweredAt(user) >= at) {
      return false;
    }
  }
  return true;
}

/// Row sums `ones[1, M] . V` (a layer norm's bias and scale gradients)
/// that a 2-D product's epilogue computes from its tiles of V (see
/// Epilogue::columnSums), V seen through reshapes and the bf16 cast the
/// sum's loads would do: V is a value of the epilogue, or of a group that
/// joins the epilogue because only such sums read it and everything it
/// reads is there by the matmul (the scale gradient's dY * x_hat). V then
/// goes to HBM only for other readers; in BERT's backward a layer norm's
/// dY and dY * x_hat no longer go at all, nor are read back twice.
void TilePlanner::planEpilogueSums() {
  llvm::DenseMap<Operation *, Operation *> epilogueOfOp = epilogueOps();
  for (Operation &op : source.getBody().front()) {
    if (!isUnpairedRowSum(&op)) {
      continue;
    }
    auto sum = llvm::cast<MatmulOp>(&op);
    llvm::SmallVector<Operation *> via;
    Value v = summedValue(sum, via);
    Operation *def = v.getDefiningOp();
    auto rhsShape = tensorType(sum.getRhs()).getShape();
    if (!def || tensorType(v).getShape().back() != rhsShape.back()) {
      continue;
    }
    auto at = epilogueOfOp.find(def);
    if (at == epilogueOfOp.end()) {
      if (!joinEpilogueBySums(def, v, rhsShape, epilogueOfOp)) {
        continue;
      }
      at = epilogueOfOp.find(def);
    }
    // The product's columns are V's last dimension, its rows the rest; the
    // sums' columns (one per 128 product columns) share one PSUM bank.
    auto product = llvm::cast<MatmulOp>(at->second);
    auto outShape = tensorType(product.getOutput()).getShape();
    int64_t bankColumns = target.psumBankBytes / 4;
    int64_t sums = static_cast<int64_t>(epilogueSumsOf[product].size()) + 1;
    if (rhsShape.back() != outShape[1] ||
        tensorType(v).getNumElements() != outShape[0] * outShape[1] ||
        sums * ((outShape[1] + 127) / 128) > bankColumns) {
      continue;
    }
    epilogueSumsOf[product].push_back(
        LoopColumnSum{sum, v, {}, false, {via.begin(), via.end()}});
    doneByEpilogues.insert(sum);
    doneByEpilogues.insert(via.begin(), via.end());
  }
}

/// Each op a 2-D product's epilogue computes (its group's, its chain's),
/// with the product.
llvm::DenseMap<Operation *, Operation *> TilePlanner::epilogueOps() {
  llvm::DenseMap<Operation *, Operation *> epilogueOfOp;
  for (Operation &op : source.getBody().front()) {
    auto m = llvm::dyn_cast<MatmulOp>(&op);
    if (!m || tensorType(m.getOutput()).getRank() != 2) {
      continue;
    }
    if (auto id = epilogueOf.find(m); id != epilogueOf.end()) {
      for (Operation *member : groups[id->second]) {
        epilogueOfOp[member] = m;
      }
    }
    if (auto k = chainEpilogueOf.find(m); k != chainEpilogueOf.end()) {
      for (Operation *member : chains[k->second].ops) {
        epilogueOfOp[member] = m;
      }
    }
  }
  return epilogueOfOp;
}

/// The value a row sum reads, through single-use reshapes and absorbed
/// casts (`via`).
Value TilePlan::summedValue(MatmulOp sum,
                                    llvm::SmallVectorImpl<Operation *> &via) {
  Value v = sum.getRhs();
  while (Operation *def = v.getDefiningOp()) {
    if (!(llvm::isa<ReshapeOp>(def) || absorbed.contains(def)) ||
        !def->hasOneUse()) {
      break;
    }
    via.push_back(def);
    v = def->getOperand(0);
  }
  return v;
}

/// A row sum no weight gradient computes beside its product.
bool TilePlanner::isUnpairedRowSum(Operation *op) {
  auto m = llvm::dyn_cast<MatmulOp>(op);
  return m && isRowSum(m) && !summedBySibling.contains(m);
}

/// Whether every reader of `v` outside `inside` is a row sum (through
/// single-use reshapes and absorbed casts).
bool TilePlanner::onlySummed(
    Value v, const llvm::SmallPtrSetImpl<Operation *> &inside) {
  return llvm::all_of(v.getUsers(), [&](Operation *u) {
    if (inside.contains(u) || isUnpairedRowSum(u)) {
      return true;
    }
    return (llvm::isa<ReshapeOp>(u) || absorbed.contains(u)) &&
           u->hasOneUse() && onlySummed(u->getResult(0), inside);
  });
}

/// The op `operand` is a reshape (or several) of, or its own definer.
static Operation *throughReshapes(Value operand) {
  Operation *d = operand.getDefiningOp();
  while (auto reshape = llvm::dyn_cast_if_present<ReshapeOp>(d)) {
    d = reshape.getInput().getDefiningOp();
  }
  return d;
}

/// The latest product whose epilogue computes something `members` read.
static MatmulOp
lastFeedingProduct(llvm::ArrayRef<Operation *> members,
                   const llvm::DenseMap<Operation *, Operation *> &epilogueOfOp,
                   llvm::DenseMap<Operation *, unsigned> &position) {
  MatmulOp product;
  for (Operation *m : members) {
    for (Value operand : m->getOperands()) {
      Operation *base = throughReshapes(operand);
      if (base && epilogueOfOp.count(base)) {
        auto p = llvm::cast<MatmulOp>(epilogueOfOp.lookup(base));
        if (!product || position[p] > position[product]) {
          product = p;
        }
      }
    }
  }
  return product;
}

/// The reshapes between `product`'s epilogue values and `members`.
static llvm::SmallVector<Operation *>
reshapesFrom(MatmulOp product, llvm::ArrayRef<Operation *> members,
             const llvm::DenseMap<Operation *, Operation *> &epilogueOfOp) {
  llvm::SmallVector<Operation *> reshapes;
  for (Operation *m : members) {
    for (Value operand : m->getOperands()) {
      Operation *base = throughReshapes(operand);
      if (!base || epilogueOfOp.lookup(base) != product) {
        continue;
      }
      for (Operation *d = operand.getDefiningOp(); d != base;
           d = d->getOperand(0).getDefiningOp()) {
        reshapes.push_back(d);
      }
    }
  }
  return reshapes;
}

/// Joins the group of `def` (computing V, which a row sum reads) to the
/// epilogue of the product whose values it reads last, when it may: of V's
/// shape, in no epilogue or chain, its values read outside only by row
/// sums, the rest of what it reads an epilogue's values (directly or
/// through reshapes) or there by the product. Returns whether it joined.
bool TilePlanner::joinEpilogueBySums(
    Operation *def, Value v, llvm::ArrayRef<int64_t> rhsShape,
    llvm::DenseMap<Operation *, Operation *> &epilogueOfOp) {
  auto id = fusionId(def);
  if (!id || epilogueAt.count(*id)) {
    return false;
  }
  auto &members = groups[*id];
  llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
  auto shape = tensorType(v).getShape();
  bool fits = llvm::all_of(members, [&](Operation *m) {
    return !chainOf.count(m) && !absorbed.contains(m) &&
           m->getNumResults() == 1 &&
           tensorType(m->getResult(0)).getShape() == shape &&
           onlySummed(m->getResult(0), inGroup);
  });
  MatmulOp product = lastFeedingProduct(members, epilogueOfOp, position);
  if (!fits || !product) {
    return false;
  }
  llvm::SmallVector<Operation *> reshapes =
      reshapesFrom(product, members, epilogueOfOp);
  auto outShape = tensorType(product.getOutput()).getShape();
  if (rhsShape.back() != outShape[1] ||
      tensorType(v).getNumElements() != outShape[0] * outShape[1]) {
    return false;
  }
  unsigned start = position[product];
  llvm::SetVector<Operation *> views(earlyViews[product].begin(),
                                     earlyViews[product].end());
  llvm::SmallPtrSet<Operation *, 16> joins(inGroup.begin(), inGroup.end());
  joins.insert(reshapes.begin(), reshapes.end());
  fits = llvm::all_of(members, [&](Operation *m) {
    return llvm::all_of(m->getOperands(), [&](Value operand) {
      Operation *d = operand.getDefiningOp();
      return !d || joins.contains(d) || epilogueOfOp.lookup(d) == product ||
             availableBy(d, start, views);
    });
  });
  if (!fits) {
    return false;
  }
  auto &joined = joinedEpilogue[product];
  for (Operation *m : llvm::concat<Operation *const>(reshapes, members)) {
    if (!llvm::is_contained(joined, m)) {
      joined.push_back(m);
      epilogueOfOp[m] = product;
      doneByEpilogues.insert(m);
    }
  }
  llvm::SmallVector<Operation *> early(views.begin(), views.end());
  sortByPosition(early);
  earlyViews[product] = std::move(early);
  rowSumsOf.erase(members.back());
  return true;
}

/// The row chains that run on the whole rows of a 2-D product whose
/// epilogue group computes what they read: a layer norm after a linear
/// layer's bias, dropout and residual add. The epilogue then takes the
/// chain and the ops between the group and it (a reshape to the chain's
/// shape, the layer norm's mean folded over each row, the mean's scale),
/// on spans of whole rows, and the group's values go to HBM only if later
/// ops read them: the residual stream is not stored and loaded back
/// before each layer norm.
void TilePlanner::planEpilogueChains() {
  llvm::DenseMap<int64_t, MatmulOp> productOf;
  for (auto &[matmul, id] : epilogueOf) {
    productOf[id] = llvm::cast<MatmulOp>(matmul);
  }
  for (size_t k = 0, planned = chains.size(); k < planned; ++k) {
    joinChainToEpilogue(k, /*alone=*/false, productOf);
  }
  // A group alone that reads the row values of an epilogue group's values
  // (a layer norm's backward: the sums of dY·w and dY·w·xhat over each
  // row, then one group) is a chain of one group for this. In program
  // order, so that the plan is the same in every process.
  llvm::SmallVector<int64_t> ids;
  for (auto &entry : groups) {
    ids.push_back(entry.first);
  }
  llvm::sort(ids, [&](int64_t a, int64_t b) {
    return position[groups[a].back()] < position[groups[b].back()];
  });
  for (int64_t id : ids) {
    auto &members = groups[id];
    auto shape = tensorType(members.back()->getResult(0)).getShape();
    if (epilogueAt.count(id) || rowSumsOf.count(members.back()) ||
        shape.size() < 2 || llvm::any_of(members, [&](Operation *m) {
          return chainOf.count(m) || absorbed.contains(m) ||
                 llvm::any_of(m->getResults(), [&](Value r) {
                   return tensorType(r).getShape() != shape;
                 });
        })) {
      continue;
    }
    PlannedRowChain alone;
    alone.ops.assign(members.begin(), members.end());
    alone.shape.assign(shape.begin(), shape.end());
    alone.from = static_cast<int64_t>(shape.size()) - 1;
    chains.push_back(std::move(alone));
    if (!joinChainToEpilogue(chains.size() - 1, /*alone=*/true, productOf)) {
      chains.pop_back();
      continue;
    }
    for (Operation *m : members) {
      chainOf[m] = chains.size() - 1;
    }
  }
}

namespace {

/// What a row chain reads of a 2-D product's epilogue: the epilogue's
/// group, and the ops between it and the chain (a reshape that keeps the
/// rows, a row reduction, ops on row values), which join the chain.
struct EpilogueFeed {
  const llvm::SmallPtrSetImpl<Operation *> &inChain;
  const llvm::DenseMap<Operation *, size_t> &chainOf;
  const llvm::DenseMap<int64_t, unsigned> &epilogueAt;
  std::optional<int64_t> group;
  bool oneGroup = true;
  llvm::SetVector<Operation *> between;

  /// Whether `def` is the epilogue group's or an op between it and the
  /// chain (which joins `between`).
  bool absorb(Operation *def) {
    if (inChain.contains(def) || between.contains(def)) {
      return true;
    }
    if (auto id = fusionId(def); id && epilogueAt.count(*id)) {
      oneGroup = oneGroup && (!group || *group == *id);
      group = id;
      return true;
    }
    // An op another chain or a fusion group lowers stays there.
    if (chainOf.count(def) || fusionId(def)) {
      return false;
    }
    bool joins = joinsBetween(def);
    if (joins) {
      between.insert(def);
    }
    return joins;
  }

  bool joinsBetween(Operation *def) {
    auto inside = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return d && absorb(d);
    };
    auto lastDim = [](Value v) { return tensorType(v).getShape().back(); };
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(def)) {
      return tensorType(reshape.getInput()).getRank() > 0 &&
             tensorType(reshape.getOutput()).getRank() > 0 &&
             lastDim(reshape.getInput()) == lastDim(reshape.getOutput()) &&
             inside(reshape.getInput());
    }
    if (llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(def)) {
      auto dims = def->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
      auto in = tensorType(def->getOperand(0));
      return dims.size() == 1 && dims[0] == in.getRank() - 1 &&
             tensorType(def->getResult(0)).getRank() == in.getRank() &&
             inside(def->getOperand(0));
    }
    if (graph_passes::isElementwise(def) && !llvm::isa<DropoutOp>(def) &&
        def->getNumResults() == 1 &&
        tensorType(def->getResult(0)).getRank() > 0 &&
        lastDim(def->getResult(0)) == 1) {
      // An op on row values: those from inside, and scalars.
      return llvm::any_of(def->getOperands(),
                          [&](Value v) {
                            return tensorType(v).getNumElements() != 1;
                          }) &&
             llvm::all_of(def->getOperands(), [&](Value v) {
               return tensorType(v).getNumElements() == 1 || inside(v);
             });
    }
    return false;
  }
};

} // namespace

/// Joins chain k to the epilogue whose group computes what it reads; a
/// chain of one group (`alone`) only through a row reduction.
bool TilePlanner::joinChainToEpilogue(
    size_t k, bool alone, const llvm::DenseMap<int64_t, MatmulOp> &productOf) {
  const PlannedRowChain &plan = chains[k];
  auto rank = static_cast<int64_t>(plan.shape.size());
  if (chainEpilogueAt.count(k) || rank < 2 || plan.from != rank - 1) {
    return false;
  }
  int64_t n = plan.shape.back();
  llvm::SmallPtrSet<Operation *, 32> inChain(plan.ops.begin(), plan.ops.end());
  EpilogueFeed feed{inChain, chainOf, epilogueAt};
  for (Operation *op : plan.ops) {
    for (Value v : op->getOperands()) {
      if (Operation *def = v.getDefiningOp()) {
        feed.absorb(def); // what does not join is an input, checked below
      }
    }
  }
  bool reduces = llvm::any_of(feed.between, [](Operation *op) {
    return llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op);
  });
  if (!feed.group || !feed.oneGroup || !productOf.count(*feed.group) ||
      (alone && !reduces)) {
    return false;
  }
  MatmulOp product = productOf.lookup(*feed.group);
  auto shape = tensorType(product.getOutput()).getShape();
  int64_t elements = 1;
  for (int64_t d : plan.shape) {
    elements *= d;
  }
  if (shape.size() != 2 || shape[1] != n || shape[0] * n != elements ||
      n > 1024 || columnSumsOf.count(product) ||
      chainEpilogueOf.count(product)) {
    return false;
  }
  llvm::SmallPtrSet<Operation *, 32> all(plan.ops.begin(), plan.ops.end());
  all.insert(feed.between.begin(), feed.between.end());
  all.insert(groups[*feed.group].begin(), groups[*feed.group].end());
  llvm::SetVector<Operation *> views(earlyViews[product].begin(),
                                     earlyViews[product].end());
  if (!chainEpilogueFits(plan, feed.between, all, product, views)) {
    return false;
  }
  PlannedRowChain &joined = chains[k];
  for (Operation *op : feed.between) {
    joined.ops.push_back(op);
    chainOf[op] = k;
  }
  sortByPosition(joined.ops);
  runChainAt(k, product, views);
  return true;
}

/// Whether the chain `plan`, with the ops `between` it and the epilogue
/// group (`all` of them together), may run on `product`'s tiles: what they
/// read exists by the product (views of it joining `views`), and values
/// read after are the rows' (stored as the epilogue stores them) or one
/// per row (gathered), not a reshape between.
bool TilePlanner::chainEpilogueFits(
    const PlannedRowChain &plan, const llvm::SetVector<Operation *> &between,
    const llvm::SmallPtrSetImpl<Operation *> &all, MatmulOp product,
    llvm::SetVector<Operation *> &views) {
  unsigned at = position[product];
  auto rows = tensorType(product.getOutput()).getShape()[0];
  auto readsExisting = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !def || def == product || all.contains(def) ||
             availableBy(def, at, views);
    });
  };
  auto readAfterFits = [&](Operation *op) {
    for (Value r : op->getResults()) {
      bool outside = llvm::any_of(
          r.getUsers(), [&](Operation *u) { return !all.contains(u); });
      if (!outside) {
        continue;
      }
      if (llvm::isa<ReshapeOp>(op)) {
        return false;
      }
      if (isRowValueShape(tensorType(r).getShape(), plan.shape) &&
          tensorType(r).getNumElements() != rows) {
        return false;
      }
    }
    return true;
  };
  return llvm::all_of(plan.ops, readsExisting) &&
         llvm::all_of(between, readsExisting) &&
         llvm::all_of(all, readAfterFits) && !returnsAliasedResult(all);
}

} // namespace kiln::tile_passes
