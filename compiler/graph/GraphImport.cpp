//===- GraphImport.cpp - .kgraph.pb -> kgraph MLIR -----------------------===//

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "compiler/graph/GraphRoles.h"
#include "dialects/KilnDialects.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;

namespace kiln::graph {

Type elementTypeOf(proto::DType dtype, MLIRContext &context) {
  switch (dtype) {
  case proto::F32:
    return Float32Type::get(&context);
  case proto::BF16:
    return BFloat16Type::get(&context);
  case proto::F16:
    return Float16Type::get(&context);
  case proto::I32:
    return IntegerType::get(&context, 32);
  case proto::I64:
    return IntegerType::get(&context, 64);
  case proto::I1:
    return IntegerType::get(&context, 1);
  default:
    return {};
  }
}

namespace {

class GraphImporter {
public:
  GraphImporter(const proto::Graph &graph, MLIRContext &context)
      : graph(graph), context(context), builder(&context) {}

  llvm::Expected<OwningOpRef<ModuleOp>> run();

private:
  llvm::Error error(const llvm::Twine &what) const {
    return llvm::createStringError("graph '" + graph.name() + "': " + what);
  }
  llvm::Error nodeError(int index, const llvm::Twine &what) const {
    return error("node " + llvm::Twine(index) + " ('" +
                 graph.nodes(index).op() + "'): " + what);
  }

  llvm::Expected<RankedTensorType>
  tensorType(const proto::TensorType &type) const;
  llvm::Expected<Attribute> attribute(const proto::Attribute &attr) const;
  llvm::Expected<DenseElementsAttr>
  tensorData(const proto::TensorData &data) const;
  llvm::Error operandError(int node, int operand, uint32_t id) const;
  Location nodeLocation(const proto::Node &node);
  llvm::Error importNode(int index);

  const proto::Graph &graph;
  MLIRContext &context;
  mutable OpBuilder builder;
  std::vector<Value> values;
  // The first value id that each node defines, for locating forward uses.
  std::vector<uint32_t> firstValueOfNode;
};

llvm::Expected<RankedTensorType>
GraphImporter::tensorType(const proto::TensorType &type) const {
  Type element = elementTypeOf(type.dtype(), context);
  if (!element) {
    return llvm::createStringError("unknown dtype " +
                                   llvm::Twine(static_cast<int>(type.dtype())));
  }
  // Element counts must stay exact in a double and far from int64 overflow,
  // which every consumer of the shape relies on.
  constexpr int64_t kMaxElements = int64_t(1) << 48;
  int64_t count = 1;
  for (int64_t d : type.shape()) {
    if (d < 0) {
      return llvm::createStringError("negative dimension " + llvm::Twine(d) +
                                     " in a shape");
    }
    if (d != 0 && count > kMaxElements / d) {
      return llvm::createStringError(
          "a shape of more than 2^48 elements is not supported");
    }
    count *= d;
  }
  llvm::SmallVector<int64_t> shape(type.shape().begin(), type.shape().end());
  return RankedTensorType::get(shape, element);
}

llvm::Expected<DenseElementsAttr>
GraphImporter::tensorData(const proto::TensorData &data) const {
  auto type = tensorType(data.type());
  if (!type) {
    return type.takeError();
  }
  if (data.has_external()) {
    return llvm::createStringError(
        "tensor refers to external weights that were not inlined "
        "(read the graph with readGraphFile)");
  }
  const std::string &raw = data.raw();
  size_t elementSize = dtypeSize(data.type().dtype());
  int64_t count = type->getNumElements();
  bool splat = raw.size() == elementSize && count != 1;
  if (!splat && raw.size() != elementSize * static_cast<size_t>(count)) {
    return llvm::createStringError(
        "tensor data has " + llvm::Twine(raw.size()) + " bytes; a " +
        dtypeName(data.type().dtype()) + " tensor of " + llvm::Twine(count) +
        " elements needs " + llvm::Twine(elementSize * count) +
        " (or one element for a splat)");
  }
  if (data.type().dtype() == proto::I1) {
    llvm::SmallVector<bool> bits;
    for (char c : raw) {
      bits.push_back(c != 0);
    }
    if (splat) {
      return DenseElementsAttr::get(*type, bits.front());
    }
    return DenseElementsAttr::get(*type, llvm::ArrayRef<bool>(bits));
  }
  if (splat) {
    RankedTensorType one = RankedTensorType::get({}, type->getElementType());
    auto element = DenseElementsAttr::getFromRawBuffer(
        one, llvm::ArrayRef<char>(raw.data(), raw.size()));
    return DenseElementsAttr::get(*type, element.getSplatValue<Attribute>());
  }
  return DenseElementsAttr::getFromRawBuffer(
      *type, llvm::ArrayRef<char>(raw.data(), raw.size()));
}

llvm::Expected<Attribute>
GraphImporter::attribute(const proto::Attribute &attr) const {
  switch (attr.value_case()) {
  case proto::Attribute::kI:
    return builder.getI64IntegerAttr(attr.i());
  case proto::Attribute::kF:
    return builder.getF64FloatAttr(attr.f());
  case proto::Attribute::kB:
    return builder.getBoolAttr(attr.b());
  case proto::Attribute::kS:
    return builder.getStringAttr(attr.s());
  case proto::Attribute::kInts: {
    llvm::SmallVector<int64_t> ints(attr.ints().values().begin(),
                                    attr.ints().values().end());
    return builder.getDenseI64ArrayAttr(ints);
  }
  case proto::Attribute::kTensor: {
    auto data = tensorData(attr.tensor());
    if (!data) {
      return data.takeError();
    }
    return Attribute(*data);
  }
  default:
    return llvm::createStringError("attribute has no value");
  }
}

llvm::Error GraphImporter::operandError(int node, int operand,
                                        uint32_t id) const {
  uint32_t total = firstValueOfNode.back();
  if (id >= total) {
    return nodeError(node, "operand " + llvm::Twine(operand) +
                               " refers to value " + llvm::Twine(id) +
                               ", which nothing defines (the graph has " +
                               llvm::Twine(total) + " values)");
  }
  auto ownerOf = [&](uint32_t value) {
    auto it = std::upper_bound(firstValueOfNode.begin(), firstValueOfNode.end(),
                               value);
    return static_cast<int>(it - firstValueOfNode.begin()) - 1;
  };
  int owner = ownerOf(id);
  // Does the later node `owner` depend on `node`? Then the graph has a cycle;
  // otherwise the nodes are merely out of order.
  std::vector<int> stack{owner};
  std::vector<bool> seen(graph.nodes_size(), false);
  while (!stack.empty()) {
    int current = stack.back();
    stack.pop_back();
    if (current == node) {
      return nodeError(node, "operand " + llvm::Twine(operand) +
                                 " comes from node " + llvm::Twine(owner) +
                                 ", which depends on this node: the graph "
                                 "has a cycle");
    }
    if (current < 0 || seen[current]) {
      continue;
    }
    seen[current] = true;
    for (uint32_t used : graph.nodes(current).operands()) {
      if (used >= static_cast<uint32_t>(graph.inputs_size()) && used < total) {
        stack.push_back(ownerOf(used));
      }
    }
  }
  return nodeError(node, "operand " + llvm::Twine(operand) +
                             " comes from later node " + llvm::Twine(owner) +
                             ": nodes must be in topological order");
}

Location GraphImporter::nodeLocation(const proto::Node &node) {
  Location loc = UnknownLoc::get(&context);
  if (node.has_location() && !node.location().file().empty()) {
    loc = FileLineColLoc::get(&context, node.location().file(),
                              node.location().line(), 0);
  }
  if (!node.debug_name().empty()) {
    loc = NameLoc::get(builder.getStringAttr(node.debug_name()), loc);
  }
  return loc;
}

llvm::Error GraphImporter::importNode(int index) {
  const proto::Node &node = graph.nodes(index);
  std::string opName = "kgraph." + node.op();
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(opName, &context);
  if (!registered) {
    return nodeError(index, "unknown op '" + opName + "'");
  }
  OperationState state(nodeLocation(node), *registered);
  for (auto [i, id] : llvm::enumerate(node.operands())) {
    if (id >= values.size()) {
      return operandError(index, i, id);
    }
    state.addOperands(values[id]);
  }
  for (const proto::TensorType &result : node.results()) {
    auto type = tensorType(result);
    if (!type) {
      return nodeError(index, llvm::toString(type.takeError()));
    }
    state.addTypes(*type);
  }
  llvm::StringSet<> attributeNames;
  for (const proto::NamedAttribute &named : node.attributes()) {
    if (!attributeNames.insert(named.name()).second) {
      return nodeError(index,
                       "attribute '" + named.name() + "' is given twice");
    }
    auto attr = attribute(named.value());
    if (!attr) {
      return nodeError(index, "attribute '" + named.name() +
                                  "': " + llvm::toString(attr.takeError()));
    }
    state.addAttribute(named.name(), *attr);
  }

  // The op's own verifier (arity, attributes, inferred shapes) is the one
  // place that knows what is valid.
  auto op = createVerified(builder, state);
  if (!op) {
    return nodeError(index, llvm::toString(op.takeError()));
  }
  for (Value result : (*op)->getResults()) {
    values.push_back(result);
  }
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  context.loadDialect<kgraph::KGraphDialect, func::FuncDialect>();
  if (graph.format_version() > kGraphFormatVersion) {
    return error("graph format version " + llvm::Twine(graph.format_version()) +
                 " is newer than this Kiln reads (" +
                 llvm::Twine(kGraphFormatVersion) + ")");
  }
  firstValueOfNode.push_back(graph.inputs_size());
  for (const proto::Node &node : graph.nodes()) {
    firstValueOfNode.push_back(firstValueOfNode.back() + node.results_size());
  }
  // firstValueOfNode[n] is node n's first value; the extra last entry is the
  // total, which operandError reads as firstValueOfNode.back().

  llvm::StringSet<> names;
  for (const proto::Input &input : graph.inputs()) {
    if (input.name().empty() || !names.insert(input.name()).second) {
      return error("input names must be unique and non-empty ('" +
                   input.name() + "')");
    }
  }
  names.clear();
  for (const proto::Output &output : graph.outputs()) {
    if (output.name().empty() || !names.insert(output.name()).second) {
      return error("output names must be unique and non-empty ('" +
                   output.name() + "')");
    }
  }

  llvm::SmallVector<Type> argTypes;
  for (const proto::Input &input : graph.inputs()) {
    auto type = tensorType(input.type());
    if (!type) {
      return error("input '" + input.name() +
                   "': " + llvm::toString(type.takeError()));
    }
    argTypes.push_back(*type);
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  builder.setInsertionPointToEnd(module->getBody());
  std::string name = graph.name().empty() ? "step" : graph.name();
  auto function = func::FuncOp::create(builder, UnknownLoc::get(&context), name,
                                       builder.getFunctionType(argTypes, {}));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  for (auto [i, input] : llvm::enumerate(graph.inputs())) {
    values.push_back(body->getArgument(i));
    function.setArgAttr(i, kgraph::kNameAttr,
                        builder.getStringAttr(input.name()));
    function.setArgAttr(i, kgraph::kRoleAttr,
                        builder.getStringAttr(inputRoleName(input.role())));
  }
  for (int n = 0; n < graph.nodes_size(); ++n) {
    if (llvm::Error err = importNode(n)) {
      return std::move(err);
    }
  }

  llvm::SmallVector<Value> results;
  for (const proto::Output &output : graph.outputs()) {
    if (output.value() >= values.size()) {
      return error("output '" + output.name() + "' refers to value " +
                   llvm::Twine(output.value()) + ", which nothing defines");
    }
    int alias = output.aliases_input();
    bool updates = output.role() == proto::UPDATED_PARAMETER ||
                   output.role() == proto::UPDATED_STATE;
    if (updates && (alias < 0 || alias >= graph.inputs_size())) {
      return error("output '" + output.name() + "' is an " +
                   outputRoleName(output.role()) +
                   " but does not name the input it replaces");
    }
    if (updates && values[output.value()].getType() != argTypes[alias]) {
      return error("output '" + output.name() + "' replaces input '" +
                   graph.inputs(alias).name() + "' but their types differ");
    }
    results.push_back(values[output.value()]);
  }
  func::ReturnOp::create(builder, UnknownLoc::get(&context), results);
  function.setType(
      builder.getFunctionType(argTypes, TypeRange(ValueRange(results))));
  for (auto [i, output] : llvm::enumerate(graph.outputs())) {
    function.setResultAttr(i, kgraph::kNameAttr,
                           builder.getStringAttr(output.name()));
    function.setResultAttr(
        i, kgraph::kRoleAttr,
        builder.getStringAttr(outputRoleName(output.role())));
    if (output.role() == proto::UPDATED_PARAMETER ||
        output.role() == proto::UPDATED_STATE) {
      function.setResultAttr(i, kgraph::kAliasesAttr,
                             builder.getI64IntegerAttr(output.aliases_input()));
    }
  }
  return module;
}

} // namespace

llvm::Expected<Operation *> createVerified(OpBuilder &builder,
                                           const OperationState &state) {
  auto fail = [](Operation *op, const llvm::Twine &message) {
    op->erase();
    return llvm::createStringError(message);
  };
  std::string message;
  ScopedDiagnosticHandler handler(builder.getContext(), [&](Diagnostic &diag) {
    if (message.empty()) {
      message = diag.str();
    }
    return success();
  });
  Operation *op = builder.create(state);
  // MLIR stores inherent attributes as properties and silently drops one of
  // the wrong kind, and it keeps unknown names as discardable attributes. A
  // graph's attributes must all be declared by the op and kept as given, or a
  // typo would change the meaning without a word.
  llvm::ArrayRef<StringAttr> declared = op->getName().getAttributeNames();
  for (const NamedAttribute &attr : state.attributes) {
    if (!llvm::is_contained(declared, attr.getName())) {
      std::string known;
      for (StringAttr name : declared) {
        known += (known.empty() ? "" : ", ") + name.str();
      }
      return fail(op, "unknown attribute '" + attr.getName().strref() +
                          "' (the op has: " + (known.empty() ? "none" : known) +
                          ")");
    }
    if (op->getInherentAttr(attr.getName()) != attr.getValue()) {
      return fail(op, "attribute '" + attr.getName().strref() +
                          "' has the wrong kind of value");
    }
  }
  if (failed(mlir::verify(op))) {
    return fail(op, message.empty() ? "invalid op" : message);
  }
  return op;
}

llvm::Expected<OwningOpRef<ModuleOp>> importGraph(const proto::Graph &graph,
                                                  MLIRContext &context) {
  return GraphImporter(graph, context).run();
}

} // namespace kiln::graph
