//===- TileLowering.cpp - kgraph functions to ktile functions -------------===//
//
// Walks a kgraph function in program order and emits the ktile function
// that computes it: HBM buffers for tensors, views for data movement, and a
// loop nest of tiles per elementwise group, reduction and matmul (see the
// pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"
#include "passes/tile/Passes.h"

#include "passes/graph/OpClasses.h"

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

namespace {

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

MemRefType hbmTypeOf(RankedTensorType type) {
  Shape shape(type.getShape());
  if (shape.empty()) {
    shape.push_back(1);
  }
  Type element = kisa::toMlirType(type.getContext(),
                                  deviceType(type.getElementType()));
  return ktile::bufferType(shape, element, isa::Memory::Hbm);
}

HbmView viewOfBuffer(Value buffer, RankedTensorType type) {
  HbmView v = HbmView::whole(buffer);
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  v.strides = rowMajorStrides(v.shape);
  return v;
}

/// A constant's elements in the device type of its buffer.
ElementsAttr deviceConstant(DenseElementsAttr value, MemRefType bufferType) {
  auto shape = RankedTensorType::get(bufferType.getShape(),
                                     bufferType.getElementType());
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

class FunctionLowering {
public:
  FunctionLowering(func::FuncOp source, const target::TargetDescription &t,
                   int64_t sbufBudget)
      : source(source), builder(source.getContext()),
        tb(builder, source.getLoc(), t), lowering(tb, sbufBudget) {}

  FailureOr<func::FuncOp> run();

private:
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerGroup(llvm::ArrayRef<Operation *> members);
  LogicalResult lowerChain(size_t chain);
  llvm::SmallVector<LoopOutput>
  groupOutputs(llvm::ArrayRef<Operation *> members);
  llvm::SmallVector<LoopReduction>
  groupReductions(llvm::ArrayRef<Operation *> members,
                  llvm::ArrayRef<int64_t> shape, unsigned at,
                  const llvm::SmallPtrSetImpl<Operation *> *computed = nullptr);
  void bindLoopResults(llvm::ArrayRef<LoopOutput> outputs,
                       llvm::ArrayRef<LoopReduction> reductions);
  void planOneHotOperands();
  void planBf16Copies();
  void planEpilogues();
  void planColumnSums();
  void planNarrowedOutputs();
  bool readOnlyNarrowed(Value value);
  void planRowSums();
  void planChains();
  void planChainEpilogues();
  void planEpilogueChains();
  void planEpilogueSums();
  Value sumResult(Operation *sum);
  void bindEpilogueSums(const Epilogue &e);
  bool returnsAliasedResult(const llvm::SmallPtrSetImpl<Operation *> &ops);
  void runChainAt(size_t chain, MatmulOp product,
                  const llvm::SetVector<Operation *> &views);
  void interleaveRows(Value value, HbmView &dst);
  unsigned readAt(Operation *op);
  bool availableBy(Operation *def, unsigned at,
                   llvm::SetVector<Operation *> &views);
  LogicalResult lowerReturn(func::ReturnOp ret);
  HbmView freshBuffer(Value result);
  void planInPlace();
  void planConcats();
  unsigned loweredAt(Operation *op);
  bool readsEndBefore(Value value, unsigned at,
                      const llvm::SmallPtrSetImpl<Operation *> &group,
                      bool throughView);

  func::FuncOp source;
  OpBuilder builder;
  TileBuilder tb;
  Lowering lowering;
  func::FuncOp target;
  llvm::DenseMap<Operation *, unsigned> position;
  llvm::DenseMap<int64_t, llvm::SmallVector<Operation *>> groups;
  /// Results computed straight into an argument's buffer.
  llvm::DenseMap<Value, unsigned> inPlace;
  /// Results computed straight into their part of a concat's buffer, and
  /// the concat buffers not yet moved to their first writer.
  llvm::DenseMap<Value, HbmView> destinations;
  llvm::SmallPtrSet<Operation *, 4> unplacedBuffers;
  /// Ops another op's lowering performs (casts folded into matmuls).
  llvm::SmallPtrSet<Operation *, 16> absorbed;
  llvm::DenseMap<Operation *, Operation *> matmulResultCast;
  /// Groups a matmul computes on its output tiles, and where they run.
  llvm::DenseMap<Operation *, int64_t> epilogueOf;
  llvm::DenseMap<int64_t, unsigned> epilogueAt;
  /// Views an epilogue reads that stand after its matmul: lowered before it.
  llvm::DenseMap<Operation *, llvm::SmallVector<Operation *>> earlyViews;
  llvm::SmallPtrSet<Operation *, 8> loweredEarly;
  /// Bias gradients `ones[1, K] . dY` a weight gradient `dY^T . X`
  /// computes beside its product (see Lowering::lowerMatmul).
  llvm::DenseMap<Operation *, llvm::SmallVector<MatmulOp, 1>> columnSumsOf;
  llvm::SmallPtrSet<Operation *, 8> summedBySibling;
  /// Sums over rows of a group value that its loop nest may compute (see
  /// LoopColumnSum), keyed by the group's last op.
  llvm::DenseMap<Operation *, llvm::SmallVector<std::pair<MatmulOp, Value>, 2>>
      rowSumsOf;
  llvm::SmallPtrSet<Operation *, 8> rowSumCandidates;
  /// Row sums a 2-D product's epilogue computes (see planEpilogueSums),
  /// by matmul, the groups that join epilogues for them, and the reshapes
  /// and casts between a sum and its value, which the epilogue does.
  llvm::DenseMap<Operation *, llvm::SmallVector<LoopColumnSum, 2>>
      epilogueSumsOf;
  llvm::DenseMap<Operation *, llvm::SmallVector<Operation *>> joinedEpilogue;
  llvm::DenseSet<int64_t> groupsInEpilogues;
  llvm::SmallPtrSet<Operation *, 16> doneByEpilogues;
  /// Reductions a group's loop nest computed.
  llvm::SmallPtrSet<Operation *, 16> fusedReductions;
  /// Row chains (see PlanRowChains.cpp), each run where its last op
  /// stands, and those whose loop nest declined (their parts run alone).
  std::vector<PlannedRowChain> chains;
  llvm::DenseMap<Operation *, size_t> chainOf;
  llvm::DenseSet<size_t> declinedChains;
  /// Row chains a batched product computes on its tiles (see
  /// planChainEpilogues), keyed by the matmul, and where they run.
  llvm::DenseMap<Operation *, size_t> chainEpilogueOf;
  llvm::DenseMap<size_t, unsigned> chainEpilogueAt;
  std::map<Operation *, Operation *> loneGroups; // stable storage
  /// f32 values of elementwise ops stored in bf16 (see planNarrowedOutputs).
  llvm::DenseSet<Value> narrowed;
};

using graph_passes::fusionId;

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
  return llvm::all_of(cast.getInput().getUsers(), [&](Operation *user) {
    return fusionId(user) == group;
  });
}

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
      if (feedsMatmuls && cast.getOutput().getType().getElementType().isBF16() &&
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
  for (auto [arg, newArg] : llvm::zip(body.getArguments(),
                                      entry->getArguments())) {
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
    if (failed(lowerOp(&op))) {
      target.erase();
      return failure();
    }
  }
  fuseTensorScalarPairs(target);
  return target;
}

/// The integer column [n, 1] broadcast to [n, C] that `value` is, or null.
static Value broadcastColumn(Value value) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  if (!broadcast) {
    return {};
  }
  auto shape = tensorType(broadcast.getInput()).getShape();
  return shape.size() == 2 && shape[1] == 1 ? broadcast.getInput() : Value();
}

/// The ops of `broadcast(reshape(iota [C]) : [1, C])`, outermost first,
/// when `value` is that, or none.
static llvm::SmallVector<Operation *, 3> broadcastIotaRow(Value value) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  auto reshape =
      broadcast ? broadcast.getInput().getDefiningOp<ReshapeOp>() : nullptr;
  auto iota = reshape ? reshape.getInput().getDefiningOp<IotaOp>() : nullptr;
  if (!iota || iota.getType().getRank() != 1 ||
      tensorType(reshape.getOutput()).getShape() !=
          llvm::ArrayRef<int64_t>{1, iota.getType().getShape()[0]}) {
    return {};
  }
  return {broadcast, reshape, iota};
}

/// One-hot matrices as GraphEmitter::oneHot builds them, a group casting
/// `compare("eq", broadcast(indices [n, 1]), broadcast(iota [1, C]))`,
/// that only 2-D matmuls read with the n rows along K (an embedding's or a
/// gather's gradient): those matmuls compute the tiles on chip from the
/// indices (Lowering::oneHotIndices), and the group, and the iota if
/// nothing else reads it, emit nothing. BERT's [1024 x 30522] one was 61 MB
/// stored and loaded again on the step's last stretch.
void FunctionLowering::planOneHotOperands() {
  for (Operation &op : source.getBody().front()) {
    auto compare = llvm::dyn_cast<CompareOp>(&op);
    auto id = fusionId(&op);
    if (!compare || compare.getDirection() != "eq" || !id ||
        !llvm::isa<IntegerType>(
            tensorType(compare.getLhs()).getElementType())) {
      continue;
    }
    // The group: the comparison, then casts, each reading the one before.
    llvm::SmallVector<Operation *> chain{compare};
    Value matrix = compare.getOutput();
    while (matrix.hasOneUse()) {
      auto cast = llvm::dyn_cast<CastOp>(*matrix.getUsers().begin());
      if (!cast || fusionId(cast) != id) {
        break;
      }
      chain.push_back(cast);
      matrix = cast.getOutput();
    }
    if (chain.size() != groups[*id].size() ||
        !llvm::isa<FloatType>(tensorType(matrix).getElementType())) {
      continue;
    }
    auto alongK = [&](OpOperand &use) {
      auto m = llvm::dyn_cast<MatmulOp>(use.getOwner());
      if (!m || tensorType(m.getOutput()).getRank() != 2 ||
          m.getLhs() == m.getRhs()) {
        return false;
      }
      return use.getOperandNumber() == 0 ? m.getTransposeLhs()
                                         : !m.getTransposeRhs();
    };
    // Iota values must be exact in the f32 compare that computes the tiles.
    int64_t classes = tensorType(matrix).getShape()[1];
    if (matrix.use_empty() || !llvm::all_of(matrix.getUses(), alongK) ||
        classes > (int64_t(1) << 24)) {
      continue;
    }
    Value indices = broadcastColumn(compare.getLhs());
    auto iotaRow = broadcastIotaRow(compare.getRhs());
    if (!indices || iotaRow.empty()) {
      indices = broadcastColumn(compare.getRhs());
      iotaRow = broadcastIotaRow(compare.getLhs());
    }
    if (!indices || iotaRow.empty()) {
      continue;
    }
    absorbed.insert(chain.begin(), chain.end());
    if (llvm::all_of(iotaRow, [](Operation *o) { return o->hasOneUse(); })) {
      absorbed.insert(iotaRow.begin(), iotaRow.end());
    }
    lowering.oneHotIndices[matrix] = indices;
  }
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

/// Which aliasing results (updated parameters and state) their producer
/// can write straight into the argument's buffer.
void FunctionLowering::planInPlace() {
  auto ret = llvm::cast<func::ReturnOp>(source.getBody().front().back());
  llvm::SmallPtrSet<Value, 8> taken;
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    auto alias = source.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
    if (!alias) {
      continue;
    }
    Value result = ret.getOperand(r);
    Value arg = source.getArgument(alias.getInt());
    Operation *producer = result.getDefiningOp();
    if (!producer || !graph_passes::isElementwise(producer) ||
        absorbed.contains(producer) || !taken.insert(result).second ||
        tensorType(result) != tensorType(arg)) {
      continue;
    }
    llvm::SmallVector<Operation *> members{producer};
    if (auto id = fusionId(producer)) {
      members = groups[*id];
    }
    unsigned at = loweredAt(producer);
    llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
    if (readsEndBefore(arg, at, inGroup, /*throughView=*/false)) {
      inPlace[result] = alias.getInt();
    }
  }
}

/// Where `op`'s reads happen: a fused op runs with its group's last member,
/// or with the matmul whose epilogue the group is.
unsigned FunctionLowering::loweredAt(Operation *op) {
  auto chain = chainOf.find(op);
  if (chain != chainOf.end() && !declinedChains.contains(chain->second)) {
    auto epilogue = chainEpilogueAt.find(chain->second);
    return epilogue != chainEpilogueAt.end()
               ? epilogue->second
               : position[chains[chain->second].ops.back()];
  }
  auto id = fusionId(op);
  if (!id) {
    return position[op];
  }
  auto epilogue = epilogueAt.find(*id);
  return epilogue != epilogueAt.end() ? epilogue->second
                                      : position[groups[*id].back()];
}

/// Where `op`'s lowering reads its operands: an absorbed cast's are read by
/// the matmuls it feeds; a view early for an epilogue reads at its matmul.
unsigned FunctionLowering::readAt(Operation *op) {
  if (absorbed.contains(op)) {
    unsigned at = std::numeric_limits<unsigned>::max();
    for (Operation *user : op->getUsers()) {
      at = std::min(at, readAt(user));
    }
    return at;
  }
  unsigned at = loweredAt(op);
  for (auto &[matmul, views] : earlyViews) {
    if (llvm::is_contained(views, op)) {
      at = std::min(at, position[matmul]);
    }
  }
  return at;
}

/// Row chains among the groups no matmul or row sum claimed.
void FunctionLowering::planChains() {
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
           llvm::none_of(members, [&](Operation *m) {
             return absorbed.contains(m);
           });
  };
  hooks.readAt = [&](Operation *op) { return readAt(op); };
  chains = planRowChains(source.getBody().front(), hooks);
  for (auto [k, chain] : llvm::enumerate(chains)) {
    for (Operation *op : chain.ops) {
      chainOf[op] = k;
    }
  }
}

/// The row chains that a batched product of one-tile elements (attention's
/// scores, [B, H, S, S]) computes on its output tiles, as an epilogue: the
/// chain reduces the product's last dimension, which each output tile
/// holds whole (several batch elements side by side), reads the product
/// only itself, and reads nothing computed after the product. The scores
/// then never go to HBM and come back: the softmax and its backward each
/// save a store and a load of the product on every layer, and a hop on the
/// forward pass's chain of dependent transfers.
void FunctionLowering::planChainEpilogues() {
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
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
    // The lowering's grouped path: one tile per element, several elements
    // of the innermost batch dimension to a PSUM bank.
    int64_t m = plan.shape[rank - 2], n = plan.shape[rank - 1];
    int64_t depth =
        tensorType(product.getLhs())
            .getShape()[product.getTransposeLhs() ? rank - 2 : rank - 1];
    if (depth > 128 || m > 128 || n > bankColumns || plan.shape[rank - 3] < 2 ||
        lowering.oneHotIndices.count(product.getLhs()) ||
        lowering.oneHotIndices.count(product.getRhs())) {
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
    bool available = llvm::all_of(plan.ops, [&](Operation *op) {
      return llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def == product || inChain.contains(def) ||
               availableBy(def, at, views);
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
bool FunctionLowering::returnsAliasedResult(
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
void FunctionLowering::runChainAt(size_t k, MatmulOp product,
                                  const llvm::SetVector<Operation *> &views) {
  chainEpilogueOf[product] = k;
  chainEpilogueAt[k] = position[product];
  llvm::SmallVector<Operation *> early(views.begin(), views.end());
  llvm::sort(early, [&](Operation *a, Operation *b) {
    return position[a] < position[b];
  });
  earlyViews[product] = std::move(early);
}

/// Whether `def`'s result exists at position `at`: lowered before it, or a
/// view (reshape, transpose, broadcast, slice: they compute nothing) of
/// values that are, which then joins `views` to be lowered early.
bool FunctionLowering::availableBy(Operation *def, unsigned at,
                                   llvm::SetVector<Operation *> &views) {
  if (absorbed.contains(def)) {
    return false;
  }
  if (loweredAt(def) < at || views.contains(def)) {
    return true;
  }
  if (!isViewOp(def)) {
    return false;
  }
  for (Value v : def->getOperands()) {
    Operation *inner = v.getDefiningOp();
    if (inner && !availableBy(inner, at, views)) {
      return false;
    }
  }
  views.insert(def);
  return true;
}

/// A 2-D product with neither operand transposed.
bool isPlain2d(MatmulOp m) {
  return !m.getTransposeLhs() && !m.getTransposeRhs() &&
         tensorType(m.getOutput()).getRank() == 2;
}

/// A sum over rows as layout assignment writes it: `ones[1, R] . V`, the
/// ones a floating-point splat constant.
bool isRowSum(MatmulOp m) {
  auto constant = m.getLhs().getDefiningOp<ConstantOp>();
  auto dense =
      constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return isPlain2d(m) && tensorType(m.getLhs()).getShape()[0] == 1 && dense &&
         dense.isSplat() && llvm::isa<FloatType>(dense.getElementType()) &&
         dense.getSplatValue<APFloat>().convertToDouble() == 1.0;
}

/// Whether everything that reads `value`, through views, is a bf16 cast
/// that the loads of the matmuls it feeds perform.
bool FunctionLowering::readOnlyNarrowed(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUsers(), [&](Operation *user) {
           if (auto cast = llvm::dyn_cast<CastOp>(user)) {
             return absorbed.contains(cast) &&
                    cast.getOutput().getType().getElementType().isBF16();
           }
           return isViewOp(user) && readOnlyNarrowed(user->getResult(0));
         });
}

/// f32 values computed by elementwise ops that only bf16 matmul operands
/// read (through slices, reshapes and transposes): attention's fused QKV
/// projection, which the forward and the backward pass both read as bf16
/// Q, K and V. The producer rounds its tiles to bf16 on an engine and
/// stores those, half the bytes out and in, instead of storing f32 for
/// every load to narrow. The matmuls see the same bits either way.
void FunctionLowering::planNarrowedOutputs() {
  for (Operation &op : source.getBody().front()) {
    if (!graph_passes::isElementwise(&op) || absorbed.contains(&op)) {
      continue;
    }
    for (Value result : op.getResults()) {
      if (tensorType(result).getElementType().isF32() &&
          readOnlyNarrowed(result)) {
        narrowed.insert(result);
      }
    }
  }
}

/// Pairs a row sum `ones[1, K] . G` (a bias gradient, as layout assignment
/// writes a reduction over rows) with an earlier 2-D product whose
/// stationary operand is G itself, `transpose(G) . X` (the weight
/// gradient): that product computes the sums from the G tiles it holds.
void FunctionLowering::planColumnSums() {
  for (Operation &op : source.getBody().front()) {
    auto sum = llvm::dyn_cast<MatmulOp>(&op);
    if (!sum || !isRowSum(sum)) {
      continue;
    }
    for (Operation *user : sum.getRhs().getUsers()) {
      auto transpose = llvm::dyn_cast<TransposeOp>(user);
      if (!transpose || transpose.getPermutation() != llvm::ArrayRef<int64_t>{1, 0}) {
        continue;
      }
      auto product = llvm::find_if(transpose->getUsers(), [&](Operation *u) {
        auto m = llvm::dyn_cast<MatmulOp>(u);
        return m && isPlain2d(m) && m.getLhs() == transpose.getOutput() &&
               position[m] < position[sum];
      });
      if (product != transpose->getUsers().end()) {
        columnSumsOf[*product].push_back(sum);
        summedBySibling.insert(sum);
        break;
      }
    }
  }
}

/// The row sums `ones[1, R] . V` left after planColumnSums whose V, seen
/// as [R, C], is a value of a group of V's shape computed before them:
/// candidates for the group's loop nest (which may not take them; then
/// they run where they stand, without an epilogue).
void FunctionLowering::planRowSums() {
  for (Operation &op : source.getBody().front()) {
    auto sum = llvm::dyn_cast<MatmulOp>(&op);
    if (!sum || summedBySibling.contains(sum) || !isRowSum(sum)) {
      continue;
    }
    Value v = sum.getRhs();
    if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
      v = reshape.getInput();
    }
    Operation *def = v.getDefiningOp();
    if (!def || !graph_passes::isElementwise(def)) {
      continue;
    }
    // A group runs where its last op stands; a lone op is a group of one.
    auto id = fusionId(def);
    Operation *last = id ? groups[*id].back() : def;
    auto shape = tensorType(v).getShape();
    if (shape.size() < 2 ||
        tensorType(last->getResult(0)).getShape() != shape ||
        shape.back() != tensorType(sum.getRhs()).getShape().back() ||
        position[last] > position[sum]) {
      continue;
    }
    rowSumsOf[last].push_back({sum, v});
    rowSumCandidates.insert(sum);
  }
}

/// The elementwise groups 2-D matmuls compute on their output tiles (see
/// Epilogue): the group of the product's first reader, when every reader is
/// in a group, every group op has the product's shape, the group's other
/// inputs are computed before the matmul, and a result written over an
/// argument has no read of the argument left after the matmul (so it stays
/// in place). The group never reads the product back from HBM, and the
/// product goes there only for readers in other groups.
void FunctionLowering::planEpilogues() {
  Block &body = source.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.back());
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
    auto &members = groups[*id];
    llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(), members.end());
    unsigned at = position[matmul];
    llvm::SetVector<Operation *> views;
    bool fits = llvm::all_of(members, [&](Operation *member) {
      return llvm::all_of(member->getResults(),
                          [&](Value r) {
                            return tensorType(r).getShape() == shape;
                          }) &&
             llvm::all_of(member->getOperands(), [&](Value v) {
               Operation *def = v.getDefiningOp();
               return !def || def == matmul || inGroup.contains(def) ||
                      availableBy(def, at, views);
             });
    });
    for (unsigned r = 0; fits && r < ret.getNumOperands(); ++r) {
      auto alias = source.getResultAttrOfType<IntegerAttr>(r, "kgraph.aliases");
      Operation *producer = ret.getOperand(r).getDefiningOp();
      if (alias && producer && inGroup.contains(producer)) {
        fits = readsEndBefore(source.getArgument(alias.getInt()), at, inGroup,
                              /*throughView=*/false);
      }
    }
    if (fits) {
      epilogueOf[matmul] = *id;
      epilogueAt[*id] = at;
      llvm::SmallVector<Operation *> early(views.begin(), views.end());
      llvm::sort(early, [&](Operation *a, Operation *b) {
        return position[a] < position[b];
      });
      earlyViews[matmul] = std::move(early);
    }
  }
}

/// Whether the group may overwrite `value`'s buffer at position `at`: every
/// read outside the group happens earlier, and group members read it
/// elementwise in its own layout. Views and absorbed casts read nothing where
/// they stand; their consumers read the buffer, so those are what count.
bool FunctionLowering::readsEndBefore(
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
void FunctionLowering::planEpilogueSums() {
  // Each 2-D product's epilogue ops, in program order of the products.
  llvm::SmallVector<MatmulOp> products;
  llvm::DenseMap<Operation *, Operation *> epilogueOfOp;
  for (Operation &op : source.getBody().front()) {
    auto m = llvm::dyn_cast<MatmulOp>(&op);
    if (!m || tensorType(m.getOutput()).getRank() != 2 ||
        !(epilogueOf.count(m) || chainEpilogueOf.count(m))) {
      continue;
    }
    products.push_back(m);
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
  // The value a row sum reads, through single-use reshapes and absorbed
  // casts (`via`).
  auto summedValue = [&](MatmulOp sum, llvm::SmallVectorImpl<Operation *> &via) {
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
  };
  auto isSum = [&](Operation *op) {
    auto m = llvm::dyn_cast<MatmulOp>(op);
    return m && isRowSum(m) && !summedBySibling.contains(m);
  };
  // Whether every reader of `v` outside `inside` is a row sum (through
  // single-use reshapes and absorbed casts).
  std::function<bool(Value, const llvm::SmallPtrSetImpl<Operation *> &)>
      onlySummed = [&](Value v, const llvm::SmallPtrSetImpl<Operation *> &inside) {
        return llvm::all_of(v.getUsers(), [&](Operation *u) {
          if (inside.contains(u) || isSum(u)) {
            return true;
          }
          return (llvm::isa<ReshapeOp>(u) || absorbed.contains(u)) &&
                 u->hasOneUse() && onlySummed(u->getResult(0), inside);
        });
      };
  for (Operation &op : source.getBody().front()) {
    if (!isSum(&op)) {
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
      // A group that may join: of V's shape, in no epilogue or chain, its
      // values read outside only by row sums, the rest of what it reads an
      // epilogue's values (directly or through reshapes) or there by the
      // product.
      auto id = fusionId(def);
      if (!id || epilogueAt.count(*id) || groupsInEpilogues.count(*id)) {
        continue;
      }
      auto &members = groups[*id];
      llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(),
                                                 members.end());
      auto shape = tensorType(v).getShape();
      bool fits = llvm::all_of(members, [&](Operation *m) {
        return !chainOf.count(m) && !absorbed.contains(m) &&
               m->getNumResults() == 1 &&
               tensorType(m->getResult(0)).getShape() == shape &&
               onlySummed(m->getResult(0), inGroup);
      });
      // The product whose epilogue computes what the group reads last;
      // the reshapes between its values and the group join too.
      auto baseOf = [](Value operand) {
        Operation *d = operand.getDefiningOp();
        while (auto reshape = llvm::dyn_cast_if_present<ReshapeOp>(d)) {
          d = reshape.getInput().getDefiningOp();
        }
        return d;
      };
      std::optional<MatmulOp> product;
      for (Operation *m : members) {
        for (Value operand : m->getOperands()) {
          Operation *base = baseOf(operand);
          if (base && epilogueOfOp.count(base)) {
            auto p = llvm::cast<MatmulOp>(epilogueOfOp[base]);
            if (!product || position[p] > position[*product]) {
              product = p;
            }
          }
        }
      }
      if (!fits || !product) {
        continue;
      }
      llvm::SmallVector<Operation *> reshapes;
      for (Operation *m : members) {
        for (Value operand : m->getOperands()) {
          Operation *base = baseOf(operand);
          if (!base || epilogueOfOp.lookup(base) != *product) {
            continue;
          }
          for (Operation *d = operand.getDefiningOp(); d != base;
               d = d->getOperand(0).getDefiningOp()) {
            reshapes.push_back(d);
          }
        }
      }
      auto outShape = tensorType(product->getOutput()).getShape();
      if (rhsShape.back() != outShape[1] ||
          tensorType(v).getNumElements() != outShape[0] * outShape[1]) {
        continue;
      }
      unsigned start = position[*product];
      llvm::SetVector<Operation *> views(earlyViews[*product].begin(),
                                         earlyViews[*product].end());
      llvm::SmallPtrSet<Operation *, 16> joins(inGroup.begin(), inGroup.end());
      joins.insert(reshapes.begin(), reshapes.end());
      fits = llvm::all_of(members, [&](Operation *m) {
        return llvm::all_of(m->getOperands(), [&](Value operand) {
          Operation *d = operand.getDefiningOp();
          return !d || joins.contains(d) ||
                 epilogueOfOp.lookup(d) == *product ||
                 availableBy(d, start, views);
        });
      });
      if (!fits) {
        continue;
      }
      auto &joined = joinedEpilogue[*product];
      for (Operation *m : llvm::concat<Operation *const>(reshapes, members)) {
        if (!llvm::is_contained(joined, m)) {
          joined.push_back(m);
          epilogueOfOp[m] = *product;
          doneByEpilogues.insert(m);
        }
      }
      llvm::SmallVector<Operation *> early(views.begin(), views.end());
      llvm::sort(early, [&](Operation *a, Operation *b) {
        return position[a] < position[b];
      });
      earlyViews[*product] = std::move(early);
      groupsInEpilogues.insert(*id);
      rowSumsOf.erase(members.back());
      at = epilogueOfOp.find(def);
    }
    // The product's columns are V's last dimension, its rows the rest; the
    // sums' columns (one per 128 product columns) share one PSUM bank.
    auto product = llvm::cast<MatmulOp>(at->second);
    auto outShape = tensorType(product.getOutput()).getShape();
    int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
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

/// Which concat inputs their producers can write straight into the concat's
/// buffer. Attention's backward concatenates the Q, K and V gradients, each
/// a matmul result seen through a head-merging transpose and reshape: the
/// matmul can store into the slice seen through the inverse views, the
/// transpose and reshape then become views of the slice, and the concat
/// copies nothing. A chain qualifies when each value in it has one use
/// and the producer writes a fresh buffer of the concat's element type.
void FunctionLowering::planConcats() {
  for (Operation &op : source.getBody().front()) {
    auto concat = llvm::dyn_cast<ConcatOp>(&op);
    if (!concat || inPlace.count(concat.getOutput()) ||
        destinations.count(concat.getOutput())) {
      continue;
    }
    auto type = tensorType(concat.getOutput());
    HbmView whole = viewOfBuffer(
        tb.hbm(type.getShape(), deviceType(type.getElementType())), type);
    bool used = false;
    int64_t dim = concat.getDim(), at = 0;
    for (Value input : concat.getInputs()) {
      int64_t size = tensorType(input).getShape()[dim];
      HbmView want = concatPart(whole, dim, at, size);
      at += size;
      Value v = input;
      while (v.hasOneUse() && !inPlace.count(v)) {
        Operation *def = v.getDefiningOp();
        if (auto reshape = llvm::dyn_cast_if_present<ReshapeOp>(def)) {
          auto split = want.reshaped(tensorType(reshape.getInput()).getShape());
          if (!split) {
            break;
          }
          want = *split;
          v = reshape.getInput();
          continue;
        }
        if (auto transpose = llvm::dyn_cast_if_present<TransposeOp>(def)) {
          llvm::ArrayRef<int64_t> perm = transpose.getPermutation();
          llvm::SmallVector<int64_t> inverse(perm.size());
          for (auto [i, p] : llvm::enumerate(perm)) {
            inverse[p] = static_cast<int64_t>(i);
          }
          want = want.transposed(inverse);
          v = transpose.getInput();
          continue;
        }
        // Matmuls (into their folded result cast's value, when they have
        // one) and elementwise groups ask freshBuffer for their results.
        auto *producer = def && def->getNumOperands() > 0
                             ? def->getOperand(0).getDefiningOp()
                             : nullptr;
        bool resultCast = llvm::isa_and_present<MatmulOp>(producer) &&
                          matmulResultCast.lookup(producer) == def;
        bool writesFresh =
            def && (llvm::isa<MatmulOp>(def) || resultCast ||
                    (graph_passes::isElementwise(def) &&
                     !absorbed.contains(def)));
        if (writesFresh &&
            deviceType(tensorType(v).getElementType()) == want.dtype) {
          destinations[v] = want;
          used = true;
        }
        break;
      }
    }
    Operation *alloc = whole.buffer.getDefiningOp();
    if (used) {
      destinations[concat.getOutput()] = whole;
      unplacedBuffers.insert(alloc);
    } else {
      alloc->erase();
    }
  }
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
  Value buffer = tb.hbm(type.getShape(), narrowed.contains(result)
                                             ? isa::DType::BF16
                                             : deviceType(type.getElementType()));
  return viewOfBuffer(buffer, type);
}

/// The row chains that run on the whole rows of a 2-D product whose
/// epilogue group computes what they read: a layer norm after a linear
/// layer's bias, dropout and residual add. The epilogue then takes the
/// chain and the ops between the group and it (a reshape to the chain's
/// shape, the layer norm's mean folded over each row, the mean's scale),
/// on spans of whole rows, and the group's values go to HBM only if later
/// ops read them: the residual stream is not stored and loaded back
/// before each layer norm.
void FunctionLowering::planEpilogueChains() {
  llvm::DenseMap<int64_t, MatmulOp> productOf;
  for (auto &[matmul, id] : epilogueOf) {
    productOf[id] = llvm::cast<MatmulOp>(matmul);
  }
  // Joins chain k to the epilogue whose group computes what it reads; a
  // chain of one group (`alone`) only through a row reduction.
  auto join = [&](size_t k, bool alone) -> bool {
    const PlannedRowChain &plan = chains[k];
    auto rank = static_cast<int64_t>(plan.shape.size());
    if (chainEpilogueAt.count(k) || rank < 2 || plan.from != rank - 1) {
      return false;
    }
    int64_t n = plan.shape.back();
    llvm::SmallPtrSet<Operation *, 32> inChain(plan.ops.begin(),
                                               plan.ops.end());
    std::optional<int64_t> group;
    bool oneGroup = true;
    llvm::SetVector<Operation *> between;
    // Whether `def` is the epilogue group's or an op between it and the
    // chain (which joins `between`).
    std::function<bool(Operation *)> absorb = [&](Operation *def) -> bool {
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
      auto inside = [&](Value v) {
        Operation *d = v.getDefiningOp();
        return d && absorb(d);
      };
      auto lastDim = [](Value v) { return tensorType(v).getShape().back(); };
      bool joins = false;
      if (auto reshape = llvm::dyn_cast<ReshapeOp>(def)) {
        joins = tensorType(reshape.getInput()).getRank() > 0 &&
                lastDim(reshape.getInput()) == lastDim(reshape.getOutput()) &&
                inside(reshape.getInput());
      } else if (llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(def)) {
        auto dims = def->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
        auto in = tensorType(def->getOperand(0));
        joins = dims.size() == 1 && dims[0] == in.getRank() - 1 &&
                tensorType(def->getResult(0)).getRank() == in.getRank() &&
                inside(def->getOperand(0));
      } else if (graph_passes::isElementwise(def) &&
                 !llvm::isa<DropoutOp>(def) && def->getNumResults() == 1 &&
                 tensorType(def->getResult(0)).getRank() > 0 &&
                 lastDim(def->getResult(0)) == 1) {
        // An op on row values: those from inside, and scalars.
        joins = llvm::any_of(def->getOperands(),
                             [&](Value v) {
                               return tensorType(v).getNumElements() != 1;
                             }) &&
                llvm::all_of(def->getOperands(), [&](Value v) {
                  return tensorType(v).getNumElements() == 1 || inside(v);
                });
      }
      if (joins) {
        between.insert(def);
      }
      return joins;
    };
    for (Operation *op : plan.ops) {
      for (Value v : op->getOperands()) {
        if (Operation *def = v.getDefiningOp()) {
          absorb(def); // what does not join is an input, checked below
        }
      }
    }
    bool reduces = llvm::any_of(between, [](Operation *op) {
      return llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op);
    });
    if (!group || !oneGroup || !productOf.count(*group) ||
        (alone && !reduces)) {
      return false;
    }
    MatmulOp product = productOf[*group];
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
    all.insert(between.begin(), between.end());
    all.insert(groups[*group].begin(), groups[*group].end());
    unsigned at = position[product];
    llvm::SetVector<Operation *> views(earlyViews[product].begin(),
                                       earlyViews[product].end());
    auto readsExisting = [&](Operation *op) {
      return llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def == product || all.contains(def) ||
               availableBy(def, at, views);
      });
    };
    // Values read after: the rows' (stored as the epilogue stores them) or
    // one per row (gathered); a reshape between is read inside only.
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
        auto rShape = tensorType(r).getShape();
        if (isRowValueShape(rShape, plan.shape) &&
            tensorType(r).getNumElements() != shape[0]) {
          return false;
        }
      }
      return true;
    };
    bool fits = llvm::all_of(plan.ops, readsExisting) &&
                llvm::all_of(between, readsExisting) &&
                llvm::all_of(all, readAfterFits) && !returnsAliasedResult(all);
    if (!fits) {
      return false;
    }
    PlannedRowChain &joined = chains[k];
    for (Operation *op : between) {
      joined.ops.push_back(op);
      chainOf[op] = k;
    }
    llvm::sort(joined.ops, [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
    runChainAt(k, product, views);
    return true;
  };
  for (size_t k = 0, planned = chains.size(); k < planned; ++k) {
    join(k, /*alone=*/false);
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
    if (!join(chains.size() - 1, /*alone=*/true)) {
      chains.pop_back();
      continue;
    }
    for (Operation *m : members) {
      chainOf[m] = chains.size() - 1;
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
llvm::SmallVector<LoopReduction>
FunctionLowering::groupReductions(llvm::ArrayRef<Operation *> members,
                                  llvm::ArrayRef<int64_t> shape, unsigned at,
                                  const llvm::SmallPtrSetImpl<Operation *> *computed) {
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
    if (n == 0 || !llvm::all_of(dims, [&](int64_t d) { return d >= rank - n; })) {
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
    bool readAfter = llvm::all_of(user->getResult(0).getUsers(), [&](Operation *u) {
      return position.lookup(u) > at;
    });
    if (tail == reduced && readAfter) {
      reductions.push_back(LoopReduction{
          user, via, from, freshBuffer(user->getResult(0))});
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

LogicalResult FunctionLowering::lowerGroup(llvm::ArrayRef<Operation *> members) {
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
    } else if (Operation *alloc = c.dst.buffer.getDefiningOp();
               alloc && alloc->use_empty()) {
      alloc->erase();
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
  llvm::SmallVector<LoopReduction> reductions = groupReductions(
      plan.ops, shape, position[plan.ops.back()], &inChain);
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
  if (failed(lowering.lowerElementwise(plan.ops, shape, outputs, reductions,
                                       {}, &chain))) {
    return failure();
  }
  if (!chain.declined) {
    bindLoopResults(outputs, reductions);
    return success();
  }
  // The buffers made for the loop nest; the parts make their own.
  auto discard = [&](Value value, const HbmView &view) {
    if (!destinations.count(value) && !inPlace.count(value)) {
      eraseIfUnused(view);
    }
  };
  for (const LoopOutput &out : outputs) {
    discard(out.value, out.dst);
  }
  for (const LoopReduction &r : reductions) {
    discard(r.op->getResult(0), r.dst);
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
      eraseIfUnused(out.dst);
    }
  }
  for (const LoopReduction &r : reductions) {
    if (r.fused) {
      lowering.bind(r.op->getResult(0), TensorOperand{std::nullopt, r.dst});
      fusedReductions.insert(r.op);
    } else {
      eraseIfUnused(r.dst);
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
        auto alloc = ktile::AllocOp::create(
            builder, c.getLoc(), type, StringAttr(),
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
        HbmView view = lowering.materialize(in, tensorType(r.getInput()).getShape());
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
        auto type = tensorType(ar.getInput());
        HbmView src = lowering.materialize(lowering.operandOf(ar.getInput()),
                                           type.getShape());
        HbmView dst = freshBuffer(ar.getOutput());
        int64_t n = src.elements();
        tb.emit("collective",
                {{dst.buffer, tb.pattern(dst, dst.offset, 1, 0, n, 1)},
                 {src.buffer, tb.pattern(src, src.offset, 1, 0, n, 1)}},
                {builder.getNamedAttr(
                    "kind", builder.getStringAttr(ar.getReduction() == "mean"
                                                      ? "all_reduce_mean"
                                                      : "all_reduce_sum"))});
        bindView(ar.getOutput(), dst);
        return success();
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
      buffer = lowering.materialize(TensorOperand{operand.immediate,
                                                  operand.view},
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
