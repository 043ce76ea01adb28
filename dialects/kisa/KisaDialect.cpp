//===- KisaDialect.cpp - kisa registration and access patterns -----------===//

#include "dialects/kisa/KisaDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kisa;

#include "dialects/kisa/KisaDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kisa/KisaAttrs.cpp.inc"

void KisaDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/kisa/KisaAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/kisa/KisaOps.cpp.inc"
      >();
}

Type kiln::kisa::toMlirType(MLIRContext *context, isa::DType dtype) {
  switch (dtype) {
  case isa::DType::F32:
    return Float32Type::get(context);
  case isa::DType::BF16:
    return BFloat16Type::get(context);
  case isa::DType::F16:
    return Float16Type::get(context);
  case isa::DType::I32:
    return IntegerType::get(context, 32);
  }
  return {};
}

std::optional<isa::DType> kiln::kisa::toIsaType(Type type) {
  if (type.isF32()) {
    return isa::DType::F32;
  }
  if (type.isBF16()) {
    return isa::DType::BF16;
  }
  if (type.isF16()) {
    return isa::DType::F16;
  }
  if (type.isSignlessInteger(32)) {
    return isa::DType::I32;
  }
  return std::nullopt;
}

isa::AccessPattern kiln::kisa::toAccessPattern(AccessPatternAttr attr) {
  isa::AccessPattern ap;
  ap.memory = static_cast<isa::Memory>(attr.getMemory());
  ap.dtype = toIsaType(attr.getDtype()).value_or(isa::DType::F32);
  ap.partition = static_cast<uint16_t>(attr.getPartition());
  ap.partitions = static_cast<uint16_t>(attr.getPartitions());
  ap.offset = attr.getOffset();
  ap.partitionStride = attr.getPartitionStride();
  ap.rank = static_cast<uint8_t>(attr.getSizes().size());
  for (size_t d = 0; d < attr.getSizes().size() && d < isa::kMaxRank; ++d) {
    ap.strides[d] = attr.getStrides()[d];
    ap.sizes[d] = attr.getSizes()[d];
  }
  return ap;
}

AccessPatternAttr kiln::kisa::toAttr(MLIRContext *context,
                                     const isa::AccessPattern &ap) {
  return AccessPatternAttr::get(
      context, static_cast<unsigned>(ap.memory), toMlirType(context, ap.dtype),
      ap.partition, ap.partitions, ap.offset, ap.partitionStride,
      llvm::ArrayRef<int64_t>(ap.strides.data(), ap.rank),
      llvm::ArrayRef<int64_t>(ap.sizes.data(), ap.rank));
}

// #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512] (, pstride = N)?>
Attribute AccessPatternAttr::parse(AsmParser &parser, Type) {
  std::string memory;
  Type dtype;
  int64_t partition = 0, partitions = 0, offset = 0, partitionStride = 0;
  llvm::SmallVector<int64_t> strides, sizes;
  auto dim = [&]() -> ParseResult {
    int64_t stride, size;
    if (parser.parseInteger(stride) || parser.parseKeyword("x") ||
        parser.parseInteger(size)) {
      return failure();
    }
    strides.push_back(stride);
    sizes.push_back(size);
    return success();
  };
  if (parser.parseLess() || parser.parseKeywordOrString(&memory) ||
      parser.parseComma() || parser.parseType(dtype) || parser.parseComma() ||
      parser.parseKeyword("p") || parser.parseEqual() ||
      parser.parseInteger(partition) || parser.parseColon() ||
      parser.parseInteger(partitions) || parser.parseComma() ||
      parser.parseKeyword("offset") || parser.parseEqual() ||
      parser.parseInteger(offset) || parser.parseComma() ||
      parser.parseKeyword("dims") || parser.parseEqual() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, dim)) {
    return {};
  }
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("pstride") || parser.parseEqual() ||
       parser.parseInteger(partitionStride))) {
    return {};
  }
  if (parser.parseGreater()) {
    return {};
  }
  std::optional<isa::Memory> space = isa::memoryNamed(memory);
  if (!space) {
    parser.emitError(parser.getNameLoc(),
                     "unknown memory '" + memory + "' (hbm, sbuf or psum)");
    return {};
  }
  return parser.getChecked<AccessPatternAttr>(
      parser.getContext(), static_cast<unsigned>(*space), dtype, partition,
      partitions, offset, partitionStride, strides, sizes);
}

void AccessPatternAttr::print(AsmPrinter &printer) const {
  printer << "<" << isa::memoryName(static_cast<isa::Memory>(getMemory()))
          << ", " << getDtype() << ", p = " << getPartition() << ":"
          << getPartitions() << ", offset = " << getOffset() << ", dims = [";
  for (size_t d = 0; d < getSizes().size(); ++d) {
    printer << (d ? ", " : "") << getStrides()[d] << " x " << getSizes()[d];
  }
  printer << "]";
  if (getPartitionStride() != 0) {
    printer << ", pstride = " << getPartitionStride();
  }
  printer << ">";
}

LogicalResult
AccessPatternAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          unsigned memory, Type dtype, int64_t partition,
                          int64_t partitions, int64_t offset,
                          int64_t partitionStride, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> sizes) {
  if (memory > 2) {
    return emitError() << "unknown memory " << memory;
  }
  if (!toIsaType(dtype)) {
    return emitError() << "access pattern dtype must be f32, bf16, f16 or i32";
  }
  if (sizes.empty() || sizes.size() > isa::kMaxRank ||
      strides.size() != sizes.size()) {
    return emitError() << "an access pattern has 1 to 4 free dimensions";
  }
  if (partition < 0 || partition > 0xffff || partitions < 0 ||
      partitions > 0xffff) {
    return emitError() << "partition range is out of bounds";
  }
  return success();
}
