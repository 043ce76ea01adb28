//===- KernelSupport.cpp - helpers shared by the reference kernels -------===//

#include "compiler/reference/Interpreter.h"
#include "compiler/reference/Kernels.h"

#include "compiler/graph/GraphConversion.h"

#include "mlir/IR/BuiltinTypes.h"

namespace kiln::reference {

HostTensor zerosOfType(mlir::Type type) {
  auto tensor = llvm::cast<mlir::RankedTensorType>(type);
  return HostTensor(graph::dtypeOf(tensor.getElementType()),
                    Shape(tensor.getShape()));
}

HostTensor emptyLike(mlir::Value value) { return zerosOfType(value.getType()); }

llvm::Error kernelError(mlir::Operation *op, const llvm::Twine &message) {
  return llvm::createStringError("'" + op->getName().getStringRef() + "' at " +
                                 graph::formatLocation(op->getLoc()) + ": " +
                                 message);
}

Shape broadcastStrides(llvm::ArrayRef<int64_t> in,
                       llvm::ArrayRef<int64_t> out) {
  Shape strides(out.size(), 0);
  Shape inStrides = kgraph::rowMajorStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[lead + i] = in[i] == 1 ? 0 : inStrides[i];
  }
  return strides;
}

Lines linesAlong(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  Lines lines;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim) {
      lines.outer *= shape[i];
    } else if (i == dim) {
      lines.size = shape[i];
    } else {
      lines.inner *= shape[i];
    }
  }
  return lines;
}

} // namespace kiln::reference
