//===- GraphImportTest.cpp - malformed graphs get one-line errors --------===//

#include "compiler/graph/GraphConversion.h"
#include "compiler/graph/GraphFile.h"
#include "test/support/TestSupport.h"

using namespace kiln;

namespace {

/// x[2,3] f32 -> exp -> add(x) -> loss output; nodes can then be broken.
proto::Graph validGraph() {
  proto::Graph g;
  g.set_format_version(graph::kGraphFormatVersion);
  g.set_name("g");
  proto::Input *x = g.add_inputs();
  x->set_name("x");
  x->set_role(proto::BATCH_INPUT);
  x->mutable_type()->set_dtype(proto::F32);
  x->mutable_type()->add_shape(2);
  x->mutable_type()->add_shape(3);
  auto addNode = [&](const std::string &op, std::vector<uint32_t> operands) {
    proto::Node *node = g.add_nodes();
    node->set_op(op);
    for (uint32_t v : operands) {
      node->add_operands(v);
    }
    *node->add_results() = x->type();
    return node;
  };
  addNode("exp", {0});    // value 1
  addNode("add", {1, 0}); // value 2
  proto::Output *out = g.add_outputs();
  out->set_name("y");
  out->set_value(2);
  out->set_role(proto::METRIC);
  return g;
}

std::string importError(const proto::Graph &graph) {
  auto context = test::makeContext();
  return test::errorOf(graph::importGraph(graph, *context));
}

TEST(GraphImport, ValidGraphImportsAndExportsBack) {
  auto context = test::makeContext();
  proto::Graph graph = validGraph();
  auto module = graph::importGraph(graph, *context);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto function = graph::getStepFunction(**module);
  ASSERT_TRUE(static_cast<bool>(function));
  auto exported = graph::exportGraph(*function);
  ASSERT_TRUE(static_cast<bool>(exported));
  EXPECT_EQ(*graph::graphHash(graph), *graph::graphHash(*exported));
}

TEST(GraphImport, UnknownOpIsNamed) {
  proto::Graph g = validGraph();
  g.mutable_nodes(1)->set_op("frobnicate");
  EXPECT_EQ(importError(g), "graph 'g': node 1 ('frobnicate'): unknown op "
                            "'kgraph.frobnicate'");
}

TEST(GraphImport, WrongArityIsNamed) {
  proto::Graph g = validGraph();
  g.mutable_nodes(1)->add_operands(0);
  std::string message = importError(g);
  EXPECT_NE(message.find("node 1 ('add')"), std::string::npos) << message;
  EXPECT_NE(message.find("expected 2 operands, but found 3"), std::string::npos)
      << message;
}

TEST(GraphImport, DanglingValueIsNamed) {
  proto::Graph g = validGraph();
  g.mutable_nodes(1)->set_operands(0, 17);
  EXPECT_EQ(importError(g),
            "graph 'g': node 1 ('add'): operand 0 refers to value 17, which "
            "nothing defines (the graph has 3 values)");
}

TEST(GraphImport, CycleIsDetected) {
  proto::Graph g = validGraph();
  // exp now reads add's output, and add reads exp's: a cycle.
  g.mutable_nodes(0)->set_operands(0, 2);
  EXPECT_EQ(importError(g),
            "graph 'g': node 0 ('exp'): operand 0 comes from node 1, which "
            "depends on this node: the graph has a cycle");
}

TEST(GraphImport, OutOfOrderNodesAreNotCalledACycle) {
  proto::Graph g = validGraph();
  proto::Node *neg = g.add_nodes(); // value 3, defined after its user
  neg->set_op("neg");
  neg->add_operands(0);
  *neg->add_results() = g.inputs(0).type();
  g.mutable_nodes(1)->set_operands(1, 3);
  EXPECT_EQ(importError(g),
            "graph 'g': node 1 ('add'): operand 1 comes from later node 2: "
            "nodes must be in topological order");
}

TEST(GraphImport, ShapeMismatchIsNamed) {
  proto::Graph g = validGraph();
  g.mutable_nodes(1)->mutable_results(0)->set_shape(1, 4);
  std::string message = importError(g);
  EXPECT_NE(message.find("node 1 ('add')"), std::string::npos) << message;
  EXPECT_NE(message.find("inferred type(s) 'tensor<2x3xf32>' are incompatible "
                         "with return type(s) of operation 'tensor<2x4xf32>'"),
            std::string::npos)
      << message;
}

TEST(GraphImport, BroadcastErrorIsNamed) {
  proto::Graph g = validGraph();
  proto::Input *b = g.add_inputs();
  b->set_name("b");
  b->mutable_type()->set_dtype(proto::F32);
  b->mutable_type()->add_shape(5);
  // Inputs come first in value numbering: shift node references by one.
  g.mutable_nodes(1)->set_operands(0, 2);
  g.mutable_nodes(1)->set_operands(1, 1);
  g.mutable_outputs(0)->set_value(3);
  EXPECT_EQ(importError(g), "graph 'g': node 1 ('add'): operand shapes [2, 3] "
                            "and [5] are not broadcast-compatible");
}

TEST(GraphImport, MissingAndMistypedAttributesAreNamed) {
  proto::Graph g = validGraph();
  proto::Node *sum = g.add_nodes();
  sum->set_op("reduce_sum");
  sum->add_operands(2);
  sum->add_results()->set_dtype(proto::F32);
  std::string message = importError(g);
  EXPECT_NE(message.find("node 2 ('reduce_sum')"), std::string::npos)
      << message;
  EXPECT_NE(message.find("requires attribute 'dims'"), std::string::npos)
      << message;
}

TEST(GraphImport, UnknownOrMistypedAttributesAreRefused) {
  proto::Graph g = validGraph();
  proto::Node *sum = g.add_nodes();
  sum->set_op("reduce_sum");
  sum->add_operands(2);
  sum->add_results()->set_dtype(proto::F32);
  proto::NamedAttribute *dims = sum->add_attributes();
  dims->set_name("dims");
  dims->mutable_value()->mutable_ints()->add_values(0);
  dims->mutable_value()->mutable_ints()->add_values(1);

  proto::Graph typo = g;
  proto::NamedAttribute *keep = typo.mutable_nodes(2)->add_attributes();
  keep->set_name("keep_dim");
  keep->mutable_value()->set_b(true);
  EXPECT_EQ(importError(typo),
            "graph 'g': node 2 ('reduce_sum'): unknown attribute 'keep_dim' "
            "(the op has: dims, keepdim)");

  proto::Graph kind = g;
  keep = kind.mutable_nodes(2)->add_attributes();
  keep->set_name("keepdim");
  keep->mutable_value()->set_i(1);
  EXPECT_EQ(importError(kind), "graph 'g': node 2 ('reduce_sum'): attribute "
                               "'keepdim' has the wrong kind of value");
}

TEST(GraphImport, BadTensorDataIsNamed) {
  proto::Graph g = validGraph();
  proto::Node *c = g.add_nodes();
  c->set_op("constant");
  *c->add_results() = g.inputs(0).type();
  proto::NamedAttribute *value = c->add_attributes();
  value->set_name("value");
  *value->mutable_value()->mutable_tensor()->mutable_type() =
      g.inputs(0).type();
  value->mutable_value()->mutable_tensor()->set_raw(std::string(7, '\0'));
  std::string message = importError(g);
  EXPECT_NE(message.find("node 2 ('constant'): attribute 'value': "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("tensor data has 7 bytes"), std::string::npos)
      << message;
}

TEST(GraphImport, InterfaceErrorsAreNamed) {
  proto::Graph dup = validGraph();
  *dup.add_inputs() = dup.inputs(0);
  EXPECT_NE(importError(dup).find("input names must be unique"),
            std::string::npos);

  proto::Graph dtype = validGraph();
  dtype.mutable_inputs(0)->mutable_type()->set_dtype(proto::DTYPE_UNSPECIFIED);
  EXPECT_NE(importError(dtype).find("graph 'g': input 'x': unknown dtype 0"),
            std::string::npos);

  proto::Graph output = validGraph();
  output.mutable_outputs(0)->set_value(9);
  EXPECT_EQ(importError(output),
            "graph 'g': output 'y' refers to value 9, which nothing defines");

  proto::Graph alias = validGraph();
  alias.mutable_outputs(0)->set_role(proto::UPDATED_PARAMETER);
  alias.mutable_outputs(0)->set_aliases_input(4);
  EXPECT_NE(importError(alias).find("does not name the input it replaces"),
            std::string::npos);
}

} // namespace
