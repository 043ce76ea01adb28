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
