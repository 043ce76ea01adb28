//===- AffinePredicate.cpp - masks that are affine in element indices -----===//

#include "passes/tile/AffinePredicate.h"

#include <cmath>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

using Dims = llvm::ArrayRef<int64_t>;

namespace {

Dims shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

/// `constant + sum_d coefficients[d] * x[d]` over a value's indices.
struct AffineForm {
  int64_t constant = 0;
  llvm::SmallVector<int64_t, 4> coefficients;
};

/// The form of a value of shape `from` seen over `to`, which it broadcasts
/// to with NumPy's rules (dimensions aligned at the right; a dimension of
/// size 1 reads its one element everywhere).
AffineForm broadcastForm(const AffineForm &form, Dims from, Dims to) {
  AffineForm out{form.constant, llvm::SmallVector<int64_t, 4>(to.size(), 0)};
  size_t skip = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == to[skip + d]) {
      out.coefficients[skip + d] = form.coefficients[d];
    }
  }
  return out;
}

/// The form over `to` of a reshape that only adds or drops dimensions of
/// size 1; none for any other reshape.
std::optional<AffineForm> reshapeForm(const AffineForm &form, Dims from,
                                      Dims to) {
  AffineForm out{form.constant, llvm::SmallVector<int64_t, 4>(to.size(), 0)};
  size_t d = 0;
  for (size_t e = 0; e < to.size(); ++e) {
    if (to[e] == 1) {
      continue;
    }
    while (d < from.size() && from[d] == 1) {
      ++d;
    }
    if (d == from.size() || from[d] != to[e]) {
      return std::nullopt;
    }
    out.coefficients[e] = form.coefficients[d++];
  }
  while (d < from.size() && from[d] == 1) {
    ++d;
  }
  if (d != from.size()) {
    return std::nullopt;
  }
  return out;
}

/// The value of `v` when it is a splat constant (the tile phase holds it
/// as an immediate).
DenseElementsAttr splatOf(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                        : DenseElementsAttr();
  return dense && dense.isSplat() ? dense : DenseElementsAttr();
}

/// The integral value of a splat constant that an f32 holds exactly.
std::optional<int64_t> splatInteger(Value v) {
  DenseElementsAttr dense = splatOf(v);
  if (!dense) {
    return std::nullopt;
  }
  Type element = dense.getElementType();
  if (element.isInteger(1)) {
    return std::nullopt;
  }
  double value = llvm::isa<IntegerType>(element)
                     ? static_cast<double>(dense.getSplatValue<APInt>().getSExtValue())
                     : dense.getSplatValue<APFloat>().convertToDouble();
  if (value != std::trunc(value) || std::fabs(value) > (1 << 24)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

const int kMaxDepth = 16;

/// Whether every value of `v` is the exact integer the form computes: an
/// integer type (an i1 means x != 0, not x), or f32 with every dimension
/// under 2^24 (bf16 and f16 round an iota past 256 and 2048).
bool holdsIndicesExactly(Value v) {
  Type element = llvm::cast<RankedTensorType>(v.getType()).getElementType();
  if (auto integer = llvm::dyn_cast<IntegerType>(element)) {
    return integer.getWidth() >= 32;
  }
  return element.isF32() &&
         llvm::all_of(shapeOf(v), [](int64_t n) { return n < (1 << 24); });
}

std::optional<AffineForm> formOf(Value v, int depth) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > kMaxDepth || !holdsIndicesExactly(v)) {
    return std::nullopt;
  }
  Dims shape = shapeOf(v);
  auto operand = [&](Value x) -> std::optional<AffineForm> {
    std::optional<AffineForm> f = formOf(x, depth + 1);
    if (!f) {
      return std::nullopt;
    }
    return broadcastForm(*f, shapeOf(x), shape);
  };
  if (llvm::isa<ConstantOp>(def)) {
    std::optional<int64_t> value = splatInteger(v);
    if (!value) {
      return std::nullopt;
    }
    return AffineForm{*value, llvm::SmallVector<int64_t, 4>(shape.size(), 0)};
  }
  if (auto iota = llvm::dyn_cast<IotaOp>(def)) {
    AffineForm f{0, llvm::SmallVector<int64_t, 4>(shape.size(), 0)};
    f.coefficients[iota.getDim()] = 1;
    return f;
  }
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(def)) {
    std::optional<AffineForm> f = formOf(reshape.getInput(), depth + 1);
    return f ? reshapeForm(*f, shapeOf(reshape.getInput()), shape)
             : std::nullopt;
  }
  if (auto broadcast = llvm::dyn_cast<BroadcastOp>(def)) {
    return operand(broadcast.getInput());
  }
  if (auto cast = llvm::dyn_cast<CastOp>(def)) {
    return operand(cast.getInput());
  }
  if (auto neg = llvm::dyn_cast<NegOp>(def)) {
    std::optional<AffineForm> f = operand(neg.getInput());
    if (f) {
      f->constant = -f->constant;
      for (int64_t &c : f->coefficients) {
        c = -c;
      }
    }
    return f;
  }
  if (llvm::isa<AddOp, SubOp, MulOp>(def)) {
    std::optional<AffineForm> a = operand(def->getOperand(0));
    std::optional<AffineForm> b = operand(def->getOperand(1));
    if (!a || !b) {
      return std::nullopt;
    }
    if (llvm::isa<MulOp>(def)) {
      // A product is affine when one factor is a constant.
      bool aConstant = llvm::all_of(a->coefficients, [](int64_t c) { return c == 0; });
      bool bConstant = llvm::all_of(b->coefficients, [](int64_t c) { return c == 0; });
      if (!aConstant && !bConstant) {
        return std::nullopt;
      }
      const AffineForm &k = aConstant ? *a : *b;
      AffineForm x = aConstant ? *b : *a;
      x.constant *= k.constant;
      for (int64_t &c : x.coefficients) {
        c *= k.constant;
      }
      return x;
    }
    int64_t sign = llvm::isa<SubOp>(def) ? -1 : 1;
    a->constant += sign * b->constant;
    for (auto [c, d] : llvm::zip(a->coefficients, b->coefficients)) {
      c += sign * d;
    }
    return a;
  }
  return std::nullopt;
}

} // namespace

llvm::StringRef negatedComparison(llvm::StringRef compare) {
  return llvm::StringSwitch<llvm::StringRef>(compare)
      .Case("lt", "ge")
      .Case("ge", "lt")
      .Case("le", "gt")
      .Case("gt", "le")
      .Case("eq", "ne")
      .Default("eq");
}

namespace {

/// A splat i1 constant's value.
std::optional<bool> splatBool(Value v) {
  DenseElementsAttr dense = splatOf(v);
  if (!dense || !dense.getElementType().isInteger(1)) {
    return std::nullopt;
  }
  return dense.getSplatValue<bool>();
}

std::optional<AffinePredicate> predicateOf(Value v, int depth) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > kMaxDepth) {
    return std::nullopt;
  }
  Dims shape = shapeOf(v);
  auto seen = [&](const AffineForm &f, llvm::StringRef compare) {
    return AffinePredicate{f.constant, f.coefficients, compare};
  };
  auto operand = [&](Value x) -> std::optional<AffinePredicate> {
    std::optional<AffinePredicate> p = predicateOf(x, depth + 1);
    if (!p) {
      return std::nullopt;
    }
    AffineForm f = broadcastForm({p->constant, p->coefficients}, shapeOf(x), shape);
    return seen(f, p->compare);
  };
  if (auto compare = llvm::dyn_cast<CompareOp>(def)) {
    std::optional<AffineForm> a = formOf(compare.getLhs(), depth + 1);
    std::optional<AffineForm> b = formOf(compare.getRhs(), depth + 1);
    if (!a || !b) {
      return std::nullopt;
    }
    AffineForm x = broadcastForm(*a, shapeOf(compare.getLhs()), shape);
    AffineForm y = broadcastForm(*b, shapeOf(compare.getRhs()), shape);
    x.constant -= y.constant;
    for (auto [c, d] : llvm::zip(x.coefficients, y.coefficients)) {
      c -= d;
    }
    return seen(x, compare.getDirection());
  }
  if (auto notOp = llvm::dyn_cast<NotOp>(def)) {
    std::optional<AffinePredicate> p = operand(notOp.getInput());
    if (p) {
      p->compare = negatedComparison(p->compare);
    }
    return p;
  }
  if (auto select = llvm::dyn_cast<SelectOp>(def)) {
    std::optional<bool> t = splatBool(select.getOnTrue());
    std::optional<bool> f = splatBool(select.getOnFalse());
    if (!t || !f || *t == *f) {
      return std::nullopt;
    }
    std::optional<AffinePredicate> p = operand(select.getCondition());
    if (p && !*t) {
      p->compare = negatedComparison(p->compare);
    }
    return p;
  }
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(def)) {
    std::optional<AffinePredicate> p = predicateOf(reshape.getInput(), depth + 1);
    if (!p) {
      return std::nullopt;
    }
    std::optional<AffineForm> f = reshapeForm(
        {p->constant, p->coefficients}, shapeOf(reshape.getInput()), shape);
    return f ? std::optional(seen(*f, p->compare)) : std::nullopt;
  }
  if (auto broadcast = llvm::dyn_cast<BroadcastOp>(def)) {
    return operand(broadcast.getInput());
  }
  return std::nullopt;
}


/// Row-major multi-index of `element` in `shape`, each step from the
/// outermost dimension taking as many of its strides as fit.
llvm::SmallVector<int64_t, 4> unravel(int64_t element, Dims shape) {
  llvm::SmallVector<int64_t, 4> index;
  for (int64_t stride : rowMajorStrides(shape)) {
    index.push_back(element / stride);
    element -= index.back() * stride;
  }
  return index;
}

/// Whether no index wraps over the box of `rows` x `cols` elements
/// `first + rowStep * p + colStep * i`: the far corner, computed linearly
/// from the near one, stays inside the shape (every step is non-negative,
/// so then every element of the box does).
bool boxInside(Dims shape, int64_t first, int64_t rowStep, int64_t colStep,
               int64_t rows, int64_t cols) {
  auto origin = unravel(first, shape);
  auto down = unravel(rowStep, shape), right = unravel(colStep, shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (origin[d] + (rows - 1) * down[d] + (cols - 1) * right[d] >= shape[d]) {
      return false;
    }
  }
  return true;
}

/// Splits the columns of a tile (elements `first + rowStep * p + colStep *
/// i`) into the longest runs over which the multi-index is affine in the
/// position; false when a single column's rows wrap.
bool splitColumns(const AffinePredicate &predicate, Dims shape, int64_t first,
                  int64_t rowStep, int64_t colStep, int64_t rows, int64_t cols,
                  llvm::SmallVectorImpl<AffineBox> &out) {
  auto down = unravel(rowStep, shape), right = unravel(colStep, shape);
  for (int64_t f0 = 0; f0 < cols;) {
    int64_t at = first + colStep * f0;
    if (!boxInside(shape, at, rowStep, colStep, rows, 1)) {
      return false;
    }
    // The longest run from f0 that stays inside (a shorter run of an
    // inside one is inside).
    int64_t lo = 1, hi = cols - f0;
    while (lo < hi) {
      int64_t mid = (lo + hi + 1) / 2;
      if (boxInside(shape, at, rowStep, colStep, rows, mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    auto origin = unravel(at, shape);
    AffineBox box{0, rows, f0, lo, predicate.constant, 0, 0};
    for (size_t d = 0; d < shape.size(); ++d) {
      box.base += predicate.coefficients[d] * origin[d];
      box.partitionStep += predicate.coefficients[d] * down[d];
      box.freeStep += predicate.coefficients[d] * right[d];
    }
    out.push_back(box);
    f0 += lo;
  }
  return true;
}

} // namespace

std::optional<AffinePredicate> affinePredicateOf(Value v, Dims shape) {
  std::optional<AffinePredicate> p = predicateOf(v, 0);
  if (!p || shapeOf(v).size() > shape.size()) {
    return std::nullopt;
  }
  AffineForm f = broadcastForm({p->constant, p->coefficients}, shapeOf(v), shape);
  return AffinePredicate{f.constant, f.coefficients, p->compare};
}

std::optional<AffinePredicate>
selectCondition(Value cond, llvm::ArrayRef<Operation *> ops, Dims shape) {
  bool read = false;
  for (Operation *op : ops) {
    if (!llvm::is_contained(op->getOperands(), cond)) {
      continue;
    }
    auto select = llvm::dyn_cast<SelectOp>(op);
    if (!select || select.getOnTrue() == cond || select.getOnFalse() == cond ||
        shapeOf(select.getOutput()) != shape ||
        static_cast<bool>(splatOf(select.getOnTrue())) ==
            static_cast<bool>(splatOf(select.getOnFalse()))) {
      return std::nullopt;
    }
    read = true;
  }
  return read ? affinePredicateOf(cond, shape) : std::nullopt;
}

std::optional<llvm::SmallVector<AffineBox, 1>>
affineBoxes(const AffinePredicate &predicate, Dims shape, const TileIndex &index,
            int64_t rows, int64_t cols) {
  if (index.rowStep <= 0 || index.colStep <= 0) {
    return std::nullopt; // no index: not a tile iteration of the shape
  }
  llvm::SmallVector<AffineBox, 1> boxes;
  // A batched product's tile holds several batch elements side by side.
  int64_t segmentCols = index.segmentCols ? index.segmentCols : cols;
  for (int64_t f0 = 0; f0 < cols; f0 += segmentCols) {
    int64_t first = index.first + (index.segmentCols
                                       ? f0 / segmentCols * index.segmentStep
                                       : 0);
    // Instructions start at partitions 0, 32 or 64 only: a tile whose rows
    // wrap around a dimension cannot be split by rows.
    llvm::SmallVector<AffineBox, 1> part;
    if (!splitColumns(predicate, shape, first, index.rowStep, index.colStep,
                      rows, std::min(segmentCols, cols - f0), part)) {
      return std::nullopt;
    }
    for (AffineBox &box : part) {
      box.f0 += f0;
      boxes.push_back(box);
    }
  }
  return boxes;
}

bool computesCondition(Value cond, llvm::ArrayRef<Operation *> ops, Dims shape,
                       const TileIndex &index, int64_t rows, int64_t cols) {
  std::optional<AffinePredicate> predicate = selectCondition(cond, ops, shape);
  return predicate &&
         affineBoxes(*predicate, shape, index, rows, cols).has_value();
}

} // namespace kiln::tile_passes
