//===- TileBuilder.cpp - views, tiles and ktile op construction ----------===//

#include "passes/tile/TileBuilder.h"

using namespace mlir;

namespace kiln::tile_passes {

Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

isa::DType deviceType(Type elementType) {
  if (elementType.isF32() || elementType.isInteger(1)) {
    return isa::DType::F32;
  }
  if (elementType.isBF16()) {
    return isa::DType::BF16;
  }
  if (elementType.isF16()) {
    return isa::DType::F16;
  }
  return isa::DType::I32;
}

int64_t HbmView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

bool HbmView::isContiguous() const {
  Shape expected = rowMajorStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && strides[d] != expected[d]) {
      return false;
    }
  }
  return true;
}

HbmView HbmView::broadcastTo(llvm::ArrayRef<int64_t> target) const {
  HbmView v = *this;
  v.shape.assign(target.begin(), target.end());
  v.strides.assign(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    v.strides[lead + d] = shape[d] == 1 ? 0 : strides[d];
  }
  return v;
}

std::optional<HbmView>
HbmView::reshaped(llvm::ArrayRef<int64_t> target) const {
  // Dimensions of size 1 have no stride that matters; drop them.
  Shape sizes, steps;
  for (auto [size, stride] : llvm::zip(shape, strides)) {
    if (size != 1) {
      sizes.push_back(size);
      steps.push_back(stride);
    }
  }
  HbmView v = *this;
  v.shape.assign(target.begin(), target.end());
  v.strides.assign(target.size(), 1);
  // Match runs of old and new dimensions of equal element counts; the old
  // run must step through memory as one dimension (each stride the next
  // one's times its size), and the new run then splits it.
  size_t o = 0, n = 0;
  while (o < sizes.size()) {
    while (n < target.size() && target[n] == 1) {
      ++n;
    }
    if (n == target.size()) {
      return std::nullopt;
    }
    size_t oEnd = o + 1, nEnd = n + 1;
    int64_t oldCount = sizes[o], newCount = target[n];
    while (oldCount != newCount) {
      if (oldCount < newCount) {
        if (oEnd == sizes.size()) {
          return std::nullopt;
        }
        oldCount *= sizes[oEnd++];
      } else {
        if (nEnd == target.size()) {
          return std::nullopt;
        }
        newCount *= target[nEnd++];
      }
    }
    for (size_t k = o; k + 1 < oEnd; ++k) {
      if (steps[k] != steps[k + 1] * sizes[k + 1]) {
        return std::nullopt;
      }
    }
    v.strides[nEnd - 1] = steps[oEnd - 1];
    for (size_t k = nEnd - 1; k > n; --k) {
      v.strides[k - 1] = v.strides[k] * target[k];
    }
    o = oEnd;
    n = nEnd;
  }
  return v;
}

HbmView HbmView::transposed(llvm::ArrayRef<int64_t> permutation) const {
  HbmView v = *this;
  for (auto [i, p] : llvm::enumerate(permutation)) {
    v.shape[i] = shape[p];
    v.strides[i] = strides[p];
  }
  return v;
}

bool HbmView::operator==(const HbmView &other) const {
  return buffer == other.buffer && dtype == other.dtype &&
         offset == other.offset && shape == other.shape &&
         strides == other.strides;
}

bool HbmView::sameElements(const HbmView &other) const {
  if (buffer != other.buffer || elements() != other.elements()) {
    return false;
  }
  std::optional<HbmView> seen = other.reshaped(shape);
  return seen && *seen == *this;
}

HbmView HbmView::whole(Value buffer) {
  auto type = llvm::cast<MemRefType>(buffer.getType());
  HbmView v;
  v.buffer = buffer;
  v.dtype = kisa::toIsaType(type.getElementType()).value_or(isa::DType::F32);
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  v.strides = rowMajorStrides(v.shape);
  return v;
}

Tile Tile::columns(int64_t col, int64_t n) const {
  Tile t = *this;
  if (run > 0) {
    assert(col % run == 0 && n % run == 0 && "columns must keep whole runs");
    t.offset += col / run * isa::dtypeBytes(dtype);
  } else {
    t.offset += col * freeStride * isa::dtypeBytes(dtype);
  }
  t.cols = n;
  return t;
}

Tile Tile::withRows(int64_t first, int64_t n) const {
  Tile t = *this;
  t.partition += first;
  t.rows = n;
  return t;
}

Tile TileBuilder::tile(isa::Memory memory, isa::DType dtype, int64_t rows,
                       int64_t cols) {
  Type element = kisa::toMlirType(b.getContext(), dtype);
  // Tiles span every partition a later instruction might need to start at;
  // partition starts are aligned, so a tile always begins at partition 0.
  auto type = ktile::bufferType({rows, cols}, element, memory);
  Tile t;
  t.buffer = ktile::AllocOp::create(b, loc, type, StringAttr(), nullptr,
                                    IntegerAttr());
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  return t;
}

Value TileBuilder::hbm(llvm::ArrayRef<int64_t> shape, isa::DType dtype,
                       llvm::StringRef name) {
  Type element = kisa::toMlirType(b.getContext(), dtype);
  Shape dims(shape);
  if (dims.empty()) {
    dims.push_back(1);
  }
  auto type = ktile::bufferType(dims, element, isa::Memory::Hbm);
  return ktile::AllocOp::create(
      b, loc, type, name.empty() ? StringAttr() : b.getStringAttr(name),
      nullptr, IntegerAttr());
}

kisa::AccessPatternAttr TileBuilder::pattern(const Tile &t, int64_t segment) {
  isa::AccessPattern ap;
  auto type = llvm::cast<MemRefType>(t.buffer.getType());
  ap.memory = *ktile::memoryOf(type);
  ap.dtype = t.dtype;
  ap.partition = static_cast<uint16_t>(t.partition);
  ap.partitions = static_cast<uint16_t>(t.rows);
  ap.offset = t.offset;
  ap.rank = 1;
  ap.strides[0] = t.freeStride;
  ap.sizes[0] = t.cols;
  if (t.run > 0) {
    assert(segment == 0 && t.cols % t.run == 0 && "runs must tile the columns");
    ap.rank = 2;
    ap.strides[0] = 1;
    ap.sizes[0] = t.cols / t.run;
    ap.strides[1] = 0;
    ap.sizes[1] = t.run;
  } else if (segment > 0 && segment < t.cols) {
    assert(t.cols % segment == 0 && "segments must tile the columns");
    ap.rank = 2;
    ap.strides[0] = t.freeStride * segment;
    ap.sizes[0] = t.cols / segment;
    ap.strides[1] = t.freeStride;
    ap.sizes[1] = segment;
  }
  return kisa::toAttr(b.getContext(), ap);
}

kisa::AccessPatternAttr TileBuilder::pattern(const HbmView &view,
                                             int64_t offset, int64_t rows,
                                             int64_t rowStride, int64_t cols,
                                             int64_t colStride) {
  return pattern(view, offset, rows, rowStride, {FreeDim{colStride, cols}});
}

kisa::AccessPatternAttr TileBuilder::pattern(const HbmView &view,
                                             int64_t offset, int64_t rows,
                                             int64_t rowStride,
                                             llvm::ArrayRef<FreeDim> free) {
  assert(!free.empty() && free.size() <= isa::kMaxRank);
  isa::AccessPattern ap;
  ap.memory = isa::Memory::Hbm;
  ap.dtype = view.dtype;
  ap.partitions = static_cast<uint16_t>(rows);
  ap.offset = offset * isa::dtypeBytes(view.dtype);
  ap.partitionStride = rows > 1 ? rowStride : 0;
  // Dimensions that continue each other in memory merge into one, so a
  // contiguous row is one run for the DMA however the loop split it.
  llvm::SmallVector<FreeDim, isa::kMaxRank> dims;
  for (const FreeDim &dim : free) {
    FreeDim d{dim.size > 1 ? dim.stride : 1, dim.size};
    if (!dims.empty() && dims.back().stride == d.stride * d.size) {
      dims.back() = {d.stride, dims.back().size * d.size};
    } else {
      dims.push_back(d);
    }
  }
  ap.rank = static_cast<uint8_t>(dims.size());
  for (auto [d, dim] : llvm::enumerate(dims)) {
    ap.strides[d] = dim.stride;
    ap.sizes[d] = dim.size;
  }
  return kisa::toAttr(b.getContext(), ap);
}

Operation *TileBuilder::emit(
    llvm::StringRef mnemonic,
    llvm::ArrayRef<std::pair<Value, kisa::AccessPatternAttr>> operands,
    llvm::ArrayRef<NamedAttribute> fields) {
  std::optional<isa::Opcode> opcode = isa::opcodeNamed(mnemonic);
  assert(opcode && "not an instruction mnemonic");
  const isa::OpcodeSchema &s = isa::schemaOf(*opcode);
  OperationState state(loc, ("ktile." + mnemonic).str());
  for (auto [i, operand] : llvm::enumerate(operands)) {
    state.addOperands(operand.first);
    state.addAttribute(s.operandNames[i], operand.second);
  }
  state.addAttributes(fields);
  return b.create(state);
}

void TileBuilder::load(const Tile &dst, const HbmView &view, int64_t offset,
                       int64_t rowStride, int64_t colStride) {
  load(dst, view, offset, rowStride, {FreeDim{colStride, dst.cols}});
}

void TileBuilder::store(const HbmView &view, int64_t offset,
                        int64_t rowStride, int64_t colStride,
                        const Tile &src) {
  store(view, offset, rowStride, {FreeDim{colStride, src.cols}}, src);
}

void TileBuilder::load(const Tile &dst, const HbmView &view, int64_t offset,
                       int64_t rowStride, llvm::ArrayRef<FreeDim> free) {
  emit("dma_copy", {{dst.buffer, pattern(dst)},
                    {view.buffer, pattern(view, offset, dst.rows, rowStride,
                                          free)}});
}

void TileBuilder::store(const HbmView &view, int64_t offset,
                        int64_t rowStride, llvm::ArrayRef<FreeDim> free,
                        const Tile &src) {
  emit("dma_copy", {{view.buffer, pattern(view, offset, src.rows, rowStride,
                                          free)},
                    {src.buffer, pattern(src)}});
}

void TileBuilder::copy(const Tile &dst, const Tile &src) {
  emit("tensor_copy", {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src)}});
}

void TileBuilder::activation(const Tile &dst, const Tile &src,
                             llvm::StringRef func, double scale, double bias) {
  llvm::SmallVector<NamedAttribute> fields{
      b.getNamedAttr("func", b.getStringAttr(func))};
  if (scale != 1.0) {
    fields.push_back(b.getNamedAttr("scale", b.getF64FloatAttr(scale)));
  }
  if (bias != 0.0) {
    fields.push_back(b.getNamedAttr("bias", b.getF64FloatAttr(bias)));
  }
  emit("activation", {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src)}},
       fields);
}

void TileBuilder::activationWithRowSums(const Tile &dst, const Tile &src,
                                        llvm::StringRef func,
                                        const Tile &rowSums) {
  emit("activation",
       {{dst.buffer, pattern(dst)},
        {src.buffer, pattern(src)},
        {rowSums.buffer, pattern(rowSums)}},
       {b.getNamedAttr("func", b.getStringAttr(func))});
}

void TileBuilder::tensorTensor(const Tile &dst, const Tile &lhs,
                               const Tile &rhs, llvm::StringRef op) {
  emit("tensor_tensor",
       {{dst.buffer, pattern(dst)},
        {lhs.buffer, pattern(lhs)},
        {rhs.buffer, pattern(rhs)}},
       {b.getNamedAttr("op", b.getStringAttr(op))});
}

void TileBuilder::tensorScalar(const Tile &dst, const Tile &src,
                               llvm::StringRef op0, double scalar0,
                               llvm::StringRef op1, double scalar1) {
  llvm::SmallVector<NamedAttribute> fields{
      b.getNamedAttr("op0", b.getStringAttr(op0)),
      b.getNamedAttr("scalar0", b.getF64FloatAttr(scalar0))};
  if (!op1.empty()) {
    fields.push_back(b.getNamedAttr("op1", b.getStringAttr(op1)));
    fields.push_back(b.getNamedAttr("scalar1", b.getF64FloatAttr(scalar1)));
  }
  emit("tensor_scalar", {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src)}},
       fields);
}

void TileBuilder::tensorScalar(const Tile &dst, const Tile &src,
                               llvm::StringRef op0, llvm::StringRef op1,
                               const Tile &scalars, bool first, double other) {
  tensorScalarByPartition(dst, src.buffer, pattern(src), op0, op1, scalars,
                          first, other);
}

void TileBuilder::tensorScalar(const Tile &dst, const TileWindow &src,
                               llvm::StringRef op0, const Tile &scalars) {
  tensorScalarByPartition(dst, src.tile.buffer, pattern(src), op0, "", scalars,
                          /*first=*/true, 0.0);
}

void TileBuilder::tensorTensor(const Tile &dst, const Tile &lhs,
                               const TileWindow &rhs, llvm::StringRef op) {
  emit("tensor_tensor",
       {{dst.buffer, pattern(dst)},
        {lhs.buffer, pattern(lhs)},
        {rhs.tile.buffer, pattern(rhs)}},
       {b.getNamedAttr("op", b.getStringAttr(op))});
}

void TileBuilder::tensorScalarByPartition(
    const Tile &dst, Value src, kisa::AccessPatternAttr srcPattern,
    llvm::StringRef op0, llvm::StringRef op1, const Tile &scalars, bool first,
    double other) {
  Tile column = scalars;
  column.cols = 1;
  column.freeStride = 1;
  llvm::SmallVector<NamedAttribute> fields{
      b.getNamedAttr("op0", b.getStringAttr(op0)),
      b.getNamedAttr("scalar0", b.getF64FloatAttr(first ? 0.0 : other)),
      b.getNamedAttr("scalar_operands", b.getI64IntegerAttr(first ? 1 : 2))};
  if (!op1.empty()) {
    fields.push_back(b.getNamedAttr("op1", b.getStringAttr(op1)));
    fields.push_back(
        b.getNamedAttr("scalar1", b.getF64FloatAttr(first ? other : 0.0)));
  }
  emit("tensor_scalar",
       {{dst.buffer, pattern(dst)}, {src, srcPattern}, {column.buffer, pattern(column)}},
       fields);
}

void TileBuilder::reduce(const Tile &dst, const Tile &src, llvm::StringRef op,
                         int64_t segment) {
  emit("tensor_reduce",
       {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src, segment)}},
       {b.getNamedAttr("op", b.getStringAttr(op))});
}

void TileBuilder::memset(const Tile &dst, double value) {
  emit("memset", {{dst.buffer, pattern(dst)}},
       {b.getNamedAttr("value", b.getF64FloatAttr(value))});
}

void TileBuilder::iota(const Tile &dst, int64_t base, int64_t partitionStep,
                       int64_t freeStep) {
  emit("iota", {{dst.buffer, pattern(dst)}},
       {b.getNamedAttr("base", b.getI64IntegerAttr(base)),
        b.getNamedAttr("partition_step", b.getI64IntegerAttr(partitionStep)),
        b.getNamedAttr("free_step", b.getI64IntegerAttr(freeStep))});
}

void TileBuilder::affineSelect(const Tile &dst, const Tile &src,
                               llvm::StringRef compare, double fill,
                               int64_t base, int64_t partitionStep,
                               int64_t freeStep) {
  emit("affine_select", {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src)}},
       {b.getNamedAttr("compare", b.getStringAttr(compare)),
        b.getNamedAttr("fill", b.getF64FloatAttr(fill)),
        b.getNamedAttr("base", b.getI64IntegerAttr(base)),
        b.getNamedAttr("partition_step", b.getI64IntegerAttr(partitionStep)),
        b.getNamedAttr("free_step", b.getI64IntegerAttr(freeStep))});
}

void TileBuilder::random(const Tile &dst, const Tile &seed, int64_t counter,
                         int64_t partitionStep, int64_t freeStep, int64_t group,
                         int64_t groupStep) {
  llvm::SmallVector<NamedAttribute> fields{
      b.getNamedAttr("counter", b.getI64IntegerAttr(counter)),
      b.getNamedAttr("partition_step", b.getI64IntegerAttr(partitionStep)),
      b.getNamedAttr("free_step", b.getI64IntegerAttr(freeStep))};
  if (groupStep != 0) {
    fields.push_back(b.getNamedAttr(
        "group_step", b.getF64FloatAttr(static_cast<double>(groupStep))));
  }
  emit("random",
       {{dst.buffer, pattern(dst, group)}, {seed.buffer, pattern(seed)}},
       fields);
}

void TileBuilder::gather(const Tile &dst, const HbmView &view, int64_t offset,
                         llvm::ArrayRef<FreeDim> free, const Tile &indices,
                         int64_t indexStride, int64_t bound) {
  emit("dma_gather",
       {{dst.buffer, pattern(dst)},
        {view.buffer, pattern(view, offset, dst.rows, /*rowStride=*/0, free)},
        {indices.buffer, pattern(indices)}},
       {b.getNamedAttr("index_stride", b.getI64IntegerAttr(indexStride)),
        b.getNamedAttr("index_bound", b.getI64IntegerAttr(bound))});
}

void TileBuilder::scatter(const HbmView &view, int64_t offset,
                          llvm::ArrayRef<FreeDim> free, const Tile &src,
                          const Tile &indices, int64_t indexStride,
                          int64_t bound) {
  emit("dma_scatter",
       {{view.buffer, pattern(view, offset, src.rows, /*rowStride=*/0, free)},
        {src.buffer, pattern(src)},
        {indices.buffer, pattern(indices)}},
       {b.getNamedAttr("index_stride", b.getI64IntegerAttr(indexStride)),
        b.getNamedAttr("index_bound", b.getI64IntegerAttr(bound))});
}

void TileBuilder::matmul(const Tile &dst, const Tile &stationary,
                         const Tile &moving, bool accumulate) {
  emit("matmul",
       {{dst.buffer, pattern(dst)},
        {stationary.buffer, pattern(stationary)},
        {moving.buffer, pattern(moving)}},
       {b.getNamedAttr("accumulate", b.getBoolAttr(accumulate))});
}

void TileBuilder::transpose(const Tile &dst, const Tile &src) {
  emit("transpose", {{dst.buffer, pattern(dst)}, {src.buffer, pattern(src)}});
}

kisa::AccessPatternAttr TileBuilder::pattern(const TileWindow &window) {
  assert(!window.free.empty() && window.free.size() <= isa::kMaxRank);
  const Tile &t = window.tile;
  isa::AccessPattern ap;
  ap.memory = *ktile::memoryOf(llvm::cast<MemRefType>(t.buffer.getType()));
  ap.dtype = t.dtype;
  ap.partition = static_cast<uint16_t>(t.partition);
  ap.partitions = static_cast<uint16_t>(t.rows);
  ap.offset = t.offset + window.at * isa::dtypeBytes(t.dtype);
  ap.rank = static_cast<uint8_t>(window.free.size());
  for (auto [d, dim] : llvm::enumerate(window.free)) {
    ap.strides[d] = dim.stride;
    ap.sizes[d] = dim.size;
  }
  return kisa::toAttr(b.getContext(), ap);
}

void TileBuilder::matmul(const Tile &dst, const Tile &stationary,
                         const TileWindow &moving, bool accumulate) {
  emit("matmul",
       {{dst.buffer, pattern(dst)},
        {stationary.buffer, pattern(stationary)},
        {moving.tile.buffer, pattern(moving)}},
       {b.getNamedAttr("accumulate", b.getBoolAttr(accumulate))});
}

void TileBuilder::transpose(const Tile &dst, const TileWindow &src) {
  emit("transpose",
       {{dst.buffer, pattern(dst)}, {src.tile.buffer, pattern(src)}});
}

void TileBuilder::load(const TileWindow &dst, const HbmView &view,
                       int64_t offset, int64_t rowStride,
                       llvm::ArrayRef<FreeDim> free) {
  emit("dma_copy",
       {{dst.tile.buffer, pattern(dst)},
        {view.buffer, pattern(view, offset, dst.tile.rows, rowStride, free)}});
}

void TileBuilder::loadSpread(const Tile &dst, const HbmView &view,
                             int64_t offset, int64_t sourceRows,
                             int64_t rowStride, llvm::ArrayRef<FreeDim> free) {
  emit("dma_copy", {{dst.buffer, pattern(dst)},
                    {view.buffer,
                     pattern(view, offset, sourceRows, rowStride, free)}});
}

void TileBuilder::dmaCopy(const Tile &dst, const TileWindow &src) {
  emit("dma_copy",
       {{dst.buffer, pattern(dst)}, {src.tile.buffer, pattern(src)}});
}

} // namespace kiln::tile_passes
