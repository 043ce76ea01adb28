//===- KGraphDialect.cpp - kgraph dialect registration -------------------===//

#include "dialects/kgraph/KGraphDialect.h"

using namespace mlir;
using namespace kiln::kgraph;

#include "dialects/kgraph/KGraphDialect.cpp.inc"
#include "dialects/kgraph/KGraphInterfaces.cpp.inc"

void KGraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kgraph/KGraphOps.cpp.inc"
      >();
}

Operation *KGraphDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) {
    return nullptr;
  }
  return ConstantOp::create(builder, loc, elements);
}

namespace {

constexpr std::pair<Fold, llvm::StringLiteral> kFoldNames[] = {
    {Fold::IntoLoads, "loads"},
    {Fold::IntoEvacuation, "evacuation"},
    {Fold::OnChip, "on_chip"},
};

} // namespace

Fold kiln::kgraph::foldOf(Operation *op) {
  auto name = op->getAttrOfType<StringAttr>(kFoldAttr);
  for (auto [fold, spelling] : kFoldNames) {
    if (name && name.getValue() == spelling) {
      return fold;
    }
  }
  return Fold::None;
}

void kiln::kgraph::setFold(Operation *op, Fold fold) {
  for (auto [f, spelling] : kFoldNames) {
    if (f == fold) {
      op->setAttr(kFoldAttr, StringAttr::get(op->getContext(), spelling));
      return;
    }
  }
  op->removeAttr(kFoldAttr);
}

std::optional<int64_t> kiln::kgraph::fusionGroupOf(Operation *op) {
  if (auto id = op->getAttrOfType<IntegerAttr>(kFusionAttr)) {
    return id.getInt();
  }
  return std::nullopt;
}

bool kiln::kgraph::isTensorEngineProduct(Operation *op) {
  return isa<MatmulOp, ConvOp, ConvInputGradOp, ConvWeightGradOp>(op);
}

Operation *kiln::kgraph::channelSummedConvolution(ReduceSumOp sum) {
  auto transpose = sum.getInput().getDefiningOp<TransposeOp>();
  if (!transpose || !sum.getOutput().getType().getElementType().isF32()) {
    return nullptr;
  }
  int64_t rank = sum.getInput().getType().getRank();
  llvm::ArrayRef<int64_t> perm = transpose.getPermutation();
  llvm::ArrayRef<int64_t> dims = sum.getDims();
  if (rank < 3 || perm[0] != 1 || perm[1] != 0 ||
      dims.size() != static_cast<size_t>(rank - 1)) {
    return nullptr;
  }
  for (int64_t d = 2; d < rank; ++d) {
    if (perm[d] != d) {
      return nullptr;
    }
  }
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d != static_cast<int64_t>(i) + 1) {
      return nullptr;
    }
  }
  // An f32 sum adds the f32 values the evacuation writes: the product's,
  // or those of the cast it performs.
  Value summed = transpose.getInput();
  if (auto cast = summed.getDefiningOp<CastOp>();
      cast && foldOf(cast) == Fold::IntoEvacuation) {
    summed = cast.getInput();
  }
  Operation *conv = summed.getDefiningOp();
  return isa_and_nonnull<ConvOp, ConvInputGradOp>(conv) ? conv : nullptr;
}

/// A cast folded into a product's loads is read by TensorE products alone;
/// one folded into its evacuation reads a product's only result use.
static LogicalResult verifyFoldedCast(CastOp cast, Fold fold) {
  if (fold == Fold::IntoEvacuation) {
    Operation *product = cast.getInput().getDefiningOp();
    if (!product || !isTensorEngineProduct(product) ||
        !product->hasOneUse()) {
      return cast.emitOpError("folds into a product's evacuation but does "
                              "not read a matmul's result alone");
    }
    return success();
  }
  for (Operation *user : cast->getUsers()) {
    if (!isTensorEngineProduct(user)) {
      return cast.emitOpError("folds into matmul loads but is read by '")
             << user->getName() << "'";
    }
  }
  return success();
}

/// kgraph.product labels a matmul or a convolution; kgraph.sum_beside on
/// a matmul names the label of a product before the sum, on a reduce_sum
/// that of the convolution whose output it sums per channel;
/// kgraph.sum_in_loop_nest is a unit on a matmul.
static LogicalResult verifyRowSumPlan(Operation *op, NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  bool labelled = attr.getName() == kProductAttr
                      ? isa<MatmulOp, ConvOp, ConvInputGradOp>(op)
                      : isa<MatmulOp>(op) ||
                            (attr.getName() == kSumBesideAttr &&
                             isa<ReduceSumOp>(op));
  if (!labelled) {
    return op->emitOpError("has ")
           << name << " but is not a matmul"
           << (attr.getName() == kProductAttr ? " or a convolution" : "");
  }
  if (attr.getName() == kSumInLoopNestAttr) {
    if (!isa<UnitAttr>(attr.getValue())) {
      return op->emitOpError("has ") << name << " with a value";
    }
    return success();
  }
  auto label = dyn_cast<IntegerAttr>(attr.getValue());
  if (!label || !label.getType().isInteger(64) || label.getInt() < 0) {
    return op->emitOpError("has ")
           << name << " that is not a product label (a non-negative i64)";
  }
  if (attr.getName() == kProductAttr) {
    return success();
  }
  if (auto sum = dyn_cast<ReduceSumOp>(op)) {
    Operation *conv = channelSummedConvolution(sum);
    if (!conv || conv->getAttr(kProductAttr) != label) {
      return op->emitOpError("is not a per-channel sum of the output of "
                             "the convolution labelled ")
             << label.getInt();
    }
    return success();
  }
  for (Operation *before = op->getPrevNode(); before;
       before = before->getPrevNode()) {
    if (before->getAttr(kProductAttr) == label) {
      return success();
    }
  }
  return op->emitOpError("is a row sum beside product ")
         << label.getInt() << ", which no earlier matmul is";
}

/// Whether a matmul in `op`'s block is labelled `kgraph.product = label`.
static bool hasProduct(Operation *op, int64_t label) {
  for (Operation &other : *op->getBlock()) {
    auto attr = other.getAttrOfType<IntegerAttr>(kProductAttr);
    if (attr && attr.getInt() == label) {
      return true;
    }
  }
  return false;
}

/// The row chains of the function `op` is in (kgraph.row_chains).
static size_t rowChainsOf(Operation *op) {
  Operation *function = op->getParentOp();
  auto table =
      function ? function->getAttrOfType<ArrayAttr>(kRowChainsAttr) : nullptr;
  return table ? table.size() : 0;
}

static LogicalResult verifyRowChainTable(Operation *op, Attribute value) {
  auto table = dyn_cast<ArrayAttr>(value);
  bool wellFormed = table && llvm::all_of(table, [](Attribute chain) {
    auto entry = dyn_cast<DictionaryAttr>(chain);
    return entry && entry.getAs<IntegerAttr>("from") &&
           entry.getAs<DenseI64ArrayAttr>("shape");
  });
  if (!wellFormed) {
    return op->emitOpError("has kgraph.row_chains that is not a list of "
                           "{from = i64, shape = array<i64: ...>}");
  }
  return success();
}

/// The epilogue plan's attributes: a chain number within the function's
/// table, a fusion group number on a matmul, product labels that exist.
static LogicalResult verifyEpiloguePlan(Operation *op, NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  if (name == kRowChainsAttr) {
    return verifyRowChainTable(op, attr.getValue());
  }
  if (name == kEarlyForAttr) {
    auto labels = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!labels) {
      return op->emitOpError("has kgraph.early_for that is not a list of "
                             "product labels");
    }
    for (int64_t label : labels.asArrayRef()) {
      if (!hasProduct(op, label)) {
        return op->emitOpError("is lowered early for product ")
               << label << ", which no matmul is";
      }
    }
    return success();
  }
  auto number = dyn_cast<IntegerAttr>(attr.getValue());
  if (!number || !number.getType().isInteger(64) || number.getInt() < 0) {
    return op->emitOpError("has ") << name << " that is not a non-negative i64";
  }
  int64_t n = number.getInt();
  if (name == kRowChainAttr || name == kChainEpilogueAttr) {
    if (static_cast<size_t>(n) >= rowChainsOf(op)) {
      return op->emitOpError("names row chain ")
             << n << ", which the function's kgraph.row_chains lacks";
    }
  }
  if (name == kEpilogueAttr && !isa<MatmulOp, ConvOp, ConvInputGradOp>(op)) {
    return op->emitOpError("has ")
           << name << " but is not a matmul or a convolution";
  }
  if ((name == kChainEpilogueAttr || name == kSumInEpilogueAttr) &&
      !isa<MatmulOp>(op)) {
    return op->emitOpError("has ") << name << " but is not a matmul";
  }
  if ((name == kJoinsEpilogueAttr || name == kSumInEpilogueAttr) &&
      !hasProduct(op, n)) {
    return op->emitOpError("joins the epilogue of product ")
           << n << ", which no matmul is";
  }
  return success();
}

/// kgraph.in_place lists an argument of the function (or -1) per result,
/// of the result's type; kgraph.into_slices lists inputs of a concat.
static LogicalResult verifyBufferPlan(Operation *op, NamedAttribute attr) {
  auto list = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (attr.getName() == kIntoSlicesAttr) {
    auto concat = dyn_cast<ConcatOp>(op);
    if (!concat || !list ||
        llvm::any_of(list.asArrayRef(), [&](int64_t i) {
          return i < 0 || i >= int64_t(concat.getInputs().size());
        })) {
      return op->emitOpError("has kgraph.into_slices that is not a list of "
                             "the concat's inputs");
    }
    return success();
  }
  Block *block = op->getBlock();
  if (!list || list.size() != int64_t(op->getNumResults())) {
    return op->emitOpError("has ")
           << attr.getName().getValue()
           << " that does not list an argument (or -1) per result";
  }
  for (auto [result, arg] : llvm::zip(op->getResults(), list.asArrayRef())) {
    if (arg < 0) {
      continue;
    }
    if (!block || arg >= int64_t(block->getNumArguments()) ||
        block->getArgument(arg).getType() != result.getType()) {
      return op->emitOpError("is planned in place in argument ")
             << arg << ", which is not an argument of its result's type";
    }
  }
  return success();
}

LogicalResult KGraphDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  if (attr.getName() == kFusionAttr) {
    auto id = dyn_cast<IntegerAttr>(attr.getValue());
    if (!id || !id.getType().isInteger(64) || id.getInt() < 0) {
      return op->emitOpError("has kgraph.fusion that is not a group number "
                             "(a non-negative i64)");
    }
    if (!isa<EngineElementwiseOp>(op)) {
      return op->emitOpError(
          "is in a fusion group (kgraph.fusion) but is not elementwise");
    }
    return success();
  }
  if (attr.getName() == kFoldAttr) {
    auto name = dyn_cast<StringAttr>(attr.getValue());
    if (!name || foldOf(op) == Fold::None) {
      return op->emitOpError("has kgraph.fold that is not one of: loads, "
                             "evacuation, on_chip");
    }
    if (foldOf(op) == Fold::OnChip) {
      return success();
    }
    if (!isa<CastOp>(op)) {
      return op->emitOpError("folds into a matmul (kgraph.fold = ")
             << name << ") but is not a cast";
    }
    return verifyFoldedCast(cast<CastOp>(op), foldOf(op));
  }
  if (attr.getName() == kNarrowedAttr) {
    auto results = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!results || !isa<EngineElementwiseOp>(op)) {
      return op->emitOpError("has kgraph.narrowed but is not elementwise or "
                             "does not list result numbers");
    }
    for (int64_t r : results.asArrayRef()) {
      if (r < 0 || r >= op->getNumResults() ||
          !cast<ShapedType>(op->getResult(r).getType()).getElementType().isF32()) {
        return op->emitOpError("has kgraph.narrowed listing result ")
               << r << ", which is not an f32 result";
      }
    }
    return success();
  }
  if (attr.getName() == kProductAttr || attr.getName() == kSumBesideAttr ||
      attr.getName() == kSumInLoopNestAttr) {
    return verifyRowSumPlan(op, attr);
  }
  if (llvm::is_contained({kRowChainsAttr, kRowChainAttr, kEpilogueAttr,
                          kChainEpilogueAttr, kEarlyForAttr,
                          kJoinsEpilogueAttr, kSumInEpilogueAttr},
                         attr.getName().getValue())) {
    return verifyEpiloguePlan(op, attr);
  }
  if (attr.getName() == kInPlaceAttr || attr.getName() == kIntoSlicesAttr ||
      attr.getName() == kCopiedIntoAttr) {
    return verifyBufferPlan(op, attr);
  }
  // Function argument and result attributes are not verified here.
  return op->emitOpError("has an unknown kgraph attribute '")
         << attr.getName().getValue() << "'";
}
