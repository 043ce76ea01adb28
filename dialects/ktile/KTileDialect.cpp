//===- KTileDialect.cpp - ktile registration and buffer types --------------===//

#include "dialects/ktile/KTileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

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
