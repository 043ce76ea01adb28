//===- InterpretCommand.cpp - kiln interpret ------------------------------===//
//
// Runs a graph on the reference interpreter: inputs are bound by name from
// .npz/.npy files, outputs are written by name to a .npz file.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/Commands.h"
#include "tools/kiln/ToolSupport.h"

#include "compiler/graph/GraphConversion.h"
#include "compiler/reference/Interpreter.h"
#include "dialects/kgraph/KGraphDialect.h"
#include "runtime/io/Npz.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::tool;

namespace {

cl::SubCommand interpretCommand("interpret",
                                "Run a graph on the reference interpreter");
cl::opt<std::string> graphPath(cl::Positional,
                               cl::desc("<graph.kgraph.pb | graph.mlir>"),
                               cl::Required, cl::sub(interpretCommand));
cl::list<std::string> inputPaths(
    "inputs",
    cl::desc("Input arrays (.npz or .npy), bound to graph inputs by name"),
    cl::CommaSeparated, cl::sub(interpretCommand));
cl::opt<std::string> outputPath("outputs",
                                cl::desc("Where to write the outputs (.npz)"),
                                cl::sub(interpretCommand));

/// The argument names of the step function, in order.
std::vector<std::string> argumentNames(mlir::func::FuncOp function) {
  std::vector<std::string> names;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto name =
        function.getArgAttrOfType<mlir::StringAttr>(i, kgraph::kNameAttr);
    names.push_back(name ? name.str() : "arg" + std::to_string(i));
  }
  return names;
}

llvm::Expected<std::vector<reference::HostTensor>>
bindInputs(mlir::func::FuncOp function) {
  llvm::StringMap<io::NpyArray> byName;
  for (const std::string &path : inputPaths) {
    auto arrays = io::readArrays(path);
    if (!arrays) {
      return arrays.takeError();
    }
    for (io::NpyArray &array : *arrays) {
      std::string name = array.name;
      if (!byName.try_emplace(name, std::move(array)).second) {
        return llvm::createStringError("input '" + name +
                                       "' is given twice (in '" + path + "')");
      }
    }
  }
  std::vector<reference::HostTensor> inputs;
  std::vector<std::string> names = argumentNames(function);
  for (auto [i, name] : llvm::enumerate(names)) {
    auto it = byName.find(name);
    if (it == byName.end()) {
      return llvm::createStringError("graph input '" + name +
                                     "' is missing from the input files");
    }
    reference::HostTensor expected =
        reference::zerosOfType(function.getArgument(i).getType());
    io::NpyArray &array = it->second;
    // NumPy has no bf16: bf16 inputs come as f32 and are rounded here.
    proto::DType fileDtype =
        expected.dtype == proto::BF16 && array.dtype == proto::F32
            ? proto::F32
            : array.dtype;
    auto tensor = reference::HostTensor::fromRaw(
        fileDtype, reference::Shape(array.shape.begin(), array.shape.end()),
        array.data);
    if (!tensor) {
      return llvm::createStringError(
          "input '" + name + "': " + llvm::toString(tensor.takeError()));
    }
    if (expected.dtype == proto::BF16 && tensor->dtype == proto::F32) {
      tensor->dtype = proto::BF16;
      for (double &v : tensor->data) {
        v = reference::roundTo(proto::BF16, v);
      }
    }
    inputs.push_back(std::move(*tensor));
    byName.erase(it);
  }
  if (!byName.empty()) {
    return llvm::createStringError("input file array '" +
                                   byName.begin()->getKey() +
                                   "' matches no graph input");
  }
  return inputs;
}

int runInterpret() {
  mlir::MLIRContext context;
  auto module = loadGraphModule(graphPath, context);
  if (!module) {
    return reportError(module.takeError());
  }
  auto function = graph::getStepFunction(**module);
  if (!function) {
    return reportError(function.takeError());
  }
  auto inputs = bindInputs(*function);
  if (!inputs) {
    return reportError(inputs.takeError());
  }
  auto outputs = reference::interpret(*function, *inputs);
  if (!outputs) {
    return reportError(outputs.takeError());
  }
  std::vector<io::NpyArray> arrays;
  for (auto [i, tensor] : llvm::enumerate(*outputs)) {
    auto name =
        function->getResultAttrOfType<mlir::StringAttr>(i, kgraph::kNameAttr);
    io::NpyArray array;
    array.name = name ? name.str() : "result" + std::to_string(i);
    reference::HostTensor written = tensor;
    if (written.dtype == proto::BF16) {
      written.dtype = proto::F32;
    }
    array.dtype = written.dtype;
    array.shape.assign(written.shape.begin(), written.shape.end());
    array.data = written.toRaw();
    arrays.push_back(std::move(array));
  }
  if (outputPath.empty()) {
    for (const io::NpyArray &array : arrays) {
      llvm::outs() << array.name << ": " << array.data.size() << " bytes\n";
    }
    return Success;
  }
  if (llvm::Error err = io::writeArrays(outputPath, arrays)) {
    return reportError(std::move(err));
  }
  return Success;
}

CommandRegistration registration(interpretCommand, runInterpret);

} // namespace
