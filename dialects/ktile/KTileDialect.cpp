//===- KTileDialect.cpp - ktile registration and buffer types --------------===//

#include "dialects/ktile/KTileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::ktile;

#include "dialects/ktile/KTileDialect.cpp.inc"

void KTileDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/ktile/KTileOps.cpp.inc"
      >();
}

std::optional<isa::Memory> kiln::ktile::memoryOf(MemRefType type) {
  auto space = llvm::dyn_cast_or_null<StringAttr>(type.getMemorySpace());
  if (!space) {
    return std::nullopt;
  }
  return isa::memoryNamed(space.getValue());
}

MemRefType kiln::ktile::bufferType(llvm::ArrayRef<int64_t> shape,
                                   Type elementType, isa::Memory memory) {
  MLIRContext *context = elementType.getContext();
  return MemRefType::get(shape, elementType, MemRefLayoutAttrInterface(),
                         StringAttr::get(context, isa::memoryName(memory)));
}

int64_t kiln::ktile::bufferBytes(MemRefType type) {
  std::optional<isa::DType> dtype = kisa::toIsaType(type.getElementType());
  int64_t elements = 1;
  llvm::ArrayRef<int64_t> shape = type.getShape();
  bool onChip = memoryOf(type) != isa::Memory::Hbm;
  for (size_t d = onChip ? 1 : 0; d < shape.size(); ++d) {
    elements *= shape[d];
  }
  return elements * (dtype ? isa::dtypeBytes(*dtype) : 4);
}

namespace {

LogicalResult verifyFunctionAttribute(Operation *op, NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  auto function = llvm::dyn_cast<FunctionOpInterface>(op);
  if (!function) {
    return op->emitOpError("has ") << name << " but is not a function";
  }
  if (name == kTargetAttr) {
    auto target = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!target || !target::lookupTarget(target.getValue())) {
      return op->emitOpError("has ktile.target that names no known target");
    }
    return success();
  }
  if (name == kArgumentAddressesAttr) {
    auto addresses = llvm::dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!addresses ||
        addresses.size() != int64_t(function.getNumArguments()) ||
        llvm::any_of(addresses.asArrayRef(), [](int64_t a) { return a < 0; })) {
      return op->emitOpError("has ktile.argument_addresses that is not one "
                             "address >= 0 per argument");
    }
    return success();
  }
  auto count = llvm::dyn_cast<IntegerAttr>(attr.getValue());
  if (!count || count.getInt() < 0) {
    return op->emitOpError("has ") << name << " that is not an integer >= 0";
  }
  return success();
}

} // namespace

LogicalResult KTileDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  if (name == kBackgroundAttr) {
    auto alloc = llvm::dyn_cast<AllocOp>(op);
    if (!alloc || memoryOf(alloc.getBuffer().getType()) != isa::Memory::Sbuf ||
        !llvm::isa<UnitAttr>(attr.getValue())) {
      return op->emitOpError("has ktile.background but is not an SBUF "
                             "ktile.alloc (or gives it a value)");
    }
    return success();
  }
  if (llvm::is_contained({kTargetAttr, kHbmBytesAttr, kArgumentAddressesAttr,
                          kSpillsAttr},
                         name)) {
    return verifyFunctionAttribute(op, attr);
  }
  return op->emitOpError("has an unknown ktile attribute '") << name << "'";
}
