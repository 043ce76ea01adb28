//===- GraphExport.cpp - kgraph MLIR -> .kgraph.pb -----------------------===//

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "compiler/graph/GraphRoles.h"
#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace kiln::graph {

proto::DType dtypeOf(Type type) {
  if (type.isF32()) {
    return proto::F32;
  }
  if (type.isBF16()) {
    return proto::BF16;
  }
  if (type.isF16()) {
    return proto::F16;
  }
  if (type.isSignlessInteger(32)) {
    return proto::I32;
  }
  if (type.isSignlessInteger(64)) {
    return proto::I64;
  }
  if (type.isSignlessInteger(1)) {
    return proto::I1;
  }
  return proto::DTYPE_UNSPECIFIED;
}

namespace {

llvm::Error error(Operation *op, const llvm::Twine &what) {
  return llvm::createStringError("cannot export '" +
                                 op->getName().getStringRef() + "' at " +
                                 formatLocation(op->getLoc()) + ": " + what);
}

llvm::Error exportType(Operation *op, Type type, proto::TensorType *out) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  proto::DType dtype =
      tensor ? dtypeOf(tensor.getElementType()) : proto::DTYPE_UNSPECIFIED;
  if (!tensor || !tensor.hasStaticShape() ||
      dtype == proto::DTYPE_UNSPECIFIED) {
    std::string text;
    llvm::raw_string_ostream os(text);
    type.print(os);
    return error(op,
                 "type " + text + " is not a static tensor of a kgraph dtype");
  }
  out->set_dtype(dtype);
  for (int64_t d : tensor.getShape()) {
    out->add_shape(d);
  }
  return llvm::Error::success();
}

llvm::Error exportElements(Operation *op, DenseElementsAttr dense,
                           proto::TensorData *out) {
  if (llvm::Error err = exportType(op, dense.getType(), out->mutable_type())) {
    return err;
  }
  std::string raw;
  if (dense.getElementType().isInteger(1)) {
    // MLIR packs i1 as bits; the format keeps one byte per element.
    if (dense.isSplat()) {
      raw.push_back(dense.getSplatValue<bool>() ? 1 : 0);
    } else {
      for (bool bit : dense.getValues<bool>()) {
        raw.push_back(bit ? 1 : 0);
      }
    }
  } else {
    // A splat's raw data is its one element, which the format reads back as
    // a splat.
    llvm::ArrayRef<char> data = dense.getRawData();
    raw.assign(data.begin(), data.end());
  }
  out->set_raw(std::move(raw));
  return llvm::Error::success();
}

llvm::Error exportAttribute(Operation *op, NamedAttribute named,
                            proto::Attribute *out) {
  Attribute attr = named.getValue();
  if (auto b = llvm::dyn_cast<BoolAttr>(attr)) {
    out->set_b(b.getValue());
  } else if (auto i = llvm::dyn_cast<IntegerAttr>(attr)) {
    out->set_i(i.getValue().getSExtValue());
  } else if (auto f = llvm::dyn_cast<FloatAttr>(attr)) {
    out->set_f(f.getValueAsDouble());
  } else if (auto s = llvm::dyn_cast<StringAttr>(attr)) {
    out->set_s(s.str());
  } else if (auto ints = llvm::dyn_cast<DenseI64ArrayAttr>(attr)) {
    for (int64_t v : ints.asArrayRef()) {
      out->mutable_ints()->add_values(v);
    }
  } else if (auto dense = llvm::dyn_cast<DenseElementsAttr>(attr)) {
    return exportElements(op, dense, out->mutable_tensor());
  } else {
    return error(op, "attribute '" + named.getName().strref() +
                         "' has a kind the graph format cannot hold");
  }
  return llvm::Error::success();
}

void exportLocation(Location loc, proto::Node *node) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc)) {
    node->set_debug_name(name.getName().str());
    loc = name.getChildLoc();
  }
  if (auto file = llvm::dyn_cast<FileLineColLoc>(loc)) {
    node->mutable_location()->set_file(file.getFilename().str());
    node->mutable_location()->set_line(file.getLine());
  }
}

template <typename T>
T stringAttrOr(DictionaryAttr attrs, llvm::StringRef name, T fallback) {
  if (!attrs) {
    return fallback;
  }
  if (auto value = attrs.getAs<StringAttr>(name)) {
    return value.getValue();
  }
  return fallback;
}

} // namespace

std::string formatLocation(Location loc) {
  std::string name;
  if (auto named = llvm::dyn_cast<NameLoc>(loc)) {
    name = "'" + named.getName().str() + "'";
    loc = named.getChildLoc();
  }
  std::string place;
  if (auto file = llvm::dyn_cast<FileLineColLoc>(loc)) {
    place = (file.getFilename().strref() + ":" + llvm::Twine(file.getLine()) +
             ":" + llvm::Twine(file.getColumn()))
                .str();
  }
  if (name.empty()) {
    return place.empty() ? "unknown location" : place;
  }
  return place.empty() ? name : name + " (" + place + ")";
}

llvm::Expected<proto::Graph> exportGraph(func::FuncOp function) {
  proto::Graph graph;
  graph.set_format_version(kGraphFormatVersion);
  graph.set_name(function.getSymName().str());
  if (!function.getBody().hasOneBlock()) {
    return error(function, "a graph function has exactly one block");
  }
  llvm::DenseMap<Value, uint32_t> ids;
  Block &body = function.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    proto::Input *input = graph.add_inputs();
    DictionaryAttr attrs = function.getArgAttrDict(i);
    input->set_name(
        stringAttrOr<llvm::StringRef>(attrs, kgraph::kNameAttr, "").str());
    if (input->name().empty()) {
      input->set_name("arg" + std::to_string(i));
    }
    llvm::StringRef role =
        stringAttrOr<llvm::StringRef>(attrs, kgraph::kRoleAttr, "unspecified");
    std::optional<proto::InputRole> parsed = parseInputRole(role);
    if (!parsed) {
      return error(function, "argument " + llvm::Twine(i) +
                                 " has unknown role '" + role + "'");
    }
    input->set_role(*parsed);
    if (llvm::Error err =
            exportType(function, arg.getType(), input->mutable_type())) {
      return std::move(err);
    }
    ids[arg] = i;
  }
  uint32_t next = body.getNumArguments();
  for (Operation &op : body.without_terminator()) {
    if (!llvm::isa<kgraph::KGraphDialect>(op.getDialect())) {
      return error(&op, "only kgraph ops form a graph");
    }
    proto::Node *node = graph.add_nodes();
    node->set_op(op.getName().stripDialect().str());
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it == ids.end()) {
        return error(&op, "an operand is not defined in the graph");
      }
      node->add_operands(it->second);
    }
    for (Value result : op.getResults()) {
      if (llvm::Error err =
              exportType(&op, result.getType(), node->add_results())) {
        return std::move(err);
      }
      ids[result] = next++;
    }
    // getAttrDictionary includes the properties and is sorted by name.
    for (NamedAttribute named : op.getAttrDictionary()) {
      proto::NamedAttribute *out = node->add_attributes();
      out->set_name(named.getName().str());
      if (llvm::Error err = exportAttribute(&op, named, out->mutable_value())) {
        return std::move(err);
      }
    }
    exportLocation(op.getLoc(), node);
  }
  auto ret = llvm::dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret) {
    return error(function, "the graph function must end in func.return");
  }
  // A graph file without outputs is refused when read (it computes nothing,
  // and is what an empty file parses to), so none is written.
  if (ret.getNumOperands() == 0) {
    return error(function, "a graph returns at least one value");
  }
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    proto::Output *output = graph.add_outputs();
    DictionaryAttr attrs = function.getResultAttrDict(i);
    output->set_name(
        stringAttrOr<llvm::StringRef>(attrs, kgraph::kNameAttr, "").str());
    if (output->name().empty()) {
      output->set_name("result" + std::to_string(i));
    }
    llvm::StringRef role =
        stringAttrOr<llvm::StringRef>(attrs, kgraph::kRoleAttr, "unspecified");
    std::optional<proto::OutputRole> parsed = parseOutputRole(role);
    if (!parsed) {
      return error(function, "result " + llvm::Twine(i) +
                                 " has unknown role '" + role + "'");
    }
    output->set_role(*parsed);
    if (attrs) {
      if (auto alias = attrs.getAs<IntegerAttr>(kgraph::kAliasesAttr)) {
        output->set_aliases_input(alias.getInt());
      }
    }
    output->set_value(ids.lookup(value));
  }
  return graph;
}

llvm::Expected<func::FuncOp> getStepFunction(ModuleOp module) {
  func::FuncOp step;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (step) {
      return llvm::createStringError(
          "the module holds more than one function; a graph is one func.func");
    }
    step = function;
  }
  if (!step) {
    return llvm::createStringError("the module holds no func.func to run");
  }
  return step;
}

} // namespace kiln::graph
