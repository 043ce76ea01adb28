//===- GraphFileTest.cpp - canonical form, hashing and file reading ------===//

#include "compiler/graph/GraphFile.h"
#include "examples/cpp/MlpStep.h"
#include "test/support/TestSupport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fcntl.h>
#include <unistd.h>

using namespace kiln;

namespace {

proto::Graph smallMlp(int64_t hidden = 16) {
  auto context = test::makeContext();
  examples::MlpConfig config;
  config.batch = 4;
  config.features = 8;
  config.hidden = hidden;
  config.classes = 3;
  auto graph = examples::buildMlpTrainStep(*context, config);
  EXPECT_TRUE(static_cast<bool>(graph));
  return graph ? *graph : proto::Graph();
}

std::string hashOf(const proto::Graph &graph) {
  auto hash = graph::graphHash(graph);
  EXPECT_TRUE(static_cast<bool>(hash));
  return hash ? *hash : "";
}

proto::NamedAttribute *findAttribute(proto::Graph &graph, llvm::StringRef op,
                                     llvm::StringRef name) {
  for (proto::Node &node : *graph.mutable_nodes()) {
    if (node.op() != op) {
      continue;
    }
    for (proto::NamedAttribute &attr : *node.mutable_attributes()) {
      if (attr.name() == name) {
        return &attr;
      }
    }
  }
  return nullptr;
}

TEST(GraphHash, SameGraphBuiltTwiceHashesTheSame) {
  EXPECT_EQ(hashOf(smallMlp()), hashOf(smallMlp()));
  EXPECT_EQ(hashOf(smallMlp()).size(), 64u);
}

TEST(GraphHash, DebugInformationDoesNotChangeTheHash) {
  proto::Graph graph = smallMlp();
  std::string before = hashOf(graph);
  graph.set_name("renamed_step");
  graph.mutable_nodes(3)->set_debug_name("layer1.linear");
  graph.mutable_nodes(3)->mutable_location()->set_file("train.py");
  graph.mutable_nodes(3)->mutable_location()->set_line(42);
  // Attribute order is not part of the meaning either.
  for (proto::Node &node : *graph.mutable_nodes()) {
    std::reverse(node.mutable_attributes()->begin(),
                 node.mutable_attributes()->end());
  }
  EXPECT_EQ(before, hashOf(graph));
}

TEST(GraphHash, EveryMeaningfulChangeChangesTheHash) {
  proto::Graph base = smallMlp();
  std::string baseHash = hashOf(base);

  proto::Graph op = base;
  for (proto::Node &node : *op.mutable_nodes()) {
    if (node.op() == "relu") {
      node.set_op("sigmoid");
      break;
    }
  }
  EXPECT_NE(baseHash, hashOf(op));

  EXPECT_NE(baseHash, hashOf(smallMlp(/*hidden=*/17))) << "shape";

  proto::Graph dtype = base;
  dtype.mutable_inputs(0)->mutable_type()->set_dtype(proto::BF16);
  EXPECT_NE(baseHash, hashOf(dtype));

  proto::Graph attr = base;
  proto::NamedAttribute *dim = findAttribute(attr, "log_softmax", "dim");
  ASSERT_NE(dim, nullptr);
  dim->mutable_value()->set_i(0);
  EXPECT_NE(baseHash, hashOf(attr));

  proto::Graph constant = base;
  proto::NamedAttribute *value = findAttribute(constant, "constant", "value");
  ASSERT_NE(value, nullptr);
  std::string raw = value->value().tensor().raw();
  raw[0] ^= 1;
  value->mutable_value()->mutable_tensor()->set_raw(raw);
  EXPECT_NE(baseHash, hashOf(constant));

  proto::Graph role = base;
  role.mutable_outputs(1)->set_role(proto::LOSS);
  EXPECT_NE(baseHash, hashOf(role));
}

using GraphFileTest = test::TempDirTest;

TEST_F(GraphFileTest, WriteThenReadGivesTheSameGraph) {
  proto::Graph graph = smallMlp();
  ASSERT_FALSE(
      static_cast<bool>(graph::writeGraphFile(graph, path("g.kgraph.pb"))));
  auto read = graph::readGraphFile(path("g.kgraph.pb"));
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(hashOf(graph), hashOf(*read));
  EXPECT_EQ(graph.SerializeAsString(), read->SerializeAsString());
}

TEST_F(GraphFileTest, ExternalWeightsAreInlinedAndHashLikeInlineOnes) {
  proto::Graph graph = smallMlp();
  proto::Graph external = graph;
  std::string weights;
  for (proto::Node &node : *external.mutable_nodes()) {
    for (proto::NamedAttribute &attr : *node.mutable_attributes()) {
      if (!attr.value().has_tensor()) {
        continue;
      }
      proto::TensorData *tensor = attr.mutable_value()->mutable_tensor();
      std::string raw = tensor->raw();
      tensor->mutable_external()->set_offset(weights.size());
      tensor->mutable_external()->set_length(raw.size());
      weights += raw;
    }
  }
  external.set_weights_file("g.weights");
  writeBytes("g.weights", weights);
  ASSERT_FALSE(
      static_cast<bool>(graph::writeGraphFile(external, path("g.kgraph.pb"))));
  auto read = graph::readGraphFile(path("g.kgraph.pb"));
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(hashOf(graph), hashOf(*read));

  // Hashing the unresolved graph is refused rather than hashing a path.
  EXPECT_NE(
      test::errorOf(graph::graphHash(external)).find("external weights file"),
      std::string::npos);

  // A range past the end of the weights file names the node.
  writeBytes("g.weights", weights.substr(0, weights.size() / 2));
  std::string message =
      test::errorOf(graph::readGraphFile(path("g.kgraph.pb")));
  EXPECT_NE(message.find("lies outside weights file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("('constant')"), std::string::npos) << message;
}

TEST_F(GraphFileTest, TruncatedAndNewerFilesAreRefused) {
  std::string bytes = smallMlp().SerializeAsString();
  writeBytes("cut.kgraph.pb", bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(test::errorOf(graph::readGraphFile(path("cut.kgraph.pb")))
                .find("truncated or corrupt"),
            std::string::npos);

  proto::Graph newer = smallMlp();
  newer.set_format_version(graph::kGraphFormatVersion + 1);
  writeBytes("new.kgraph.pb", newer.SerializeAsString());
  EXPECT_NE(test::errorOf(graph::readGraphFile(path("new.kgraph.pb")))
                .find("upgrade Kiln"),
            std::string::npos);

  EXPECT_NE(test::errorOf(graph::readGraphFile(path("absent.kgraph.pb")))
                .find("No such file"),
            std::string::npos);
}

TEST(GraphFormat, OnlyKilnGraphsParse) {
  proto::Graph graph = smallMlp();
  std::string bytes = graph.SerializeAsString();
  EXPECT_TRUE(static_cast<bool>(graph::parseGraph(bytes, "g")));

  EXPECT_NE(test::errorOf(graph::parseGraph("", "empty"))
                .find("'empty' is not a Kiln graph: it has no format_version"),
            std::string::npos);

  // Field 9, a varint: nothing the graph format defines.
  std::string foreign = bytes + std::string("\x48\x05", 2);
  EXPECT_NE(test::errorOf(graph::parseGraph(foreign, "foreign"))
                .find("field 9 is not part of the graph format"),
            std::string::npos);
  proto::Graph nested = graph;
  nested.mutable_nodes(2)
      ->mutable_location()
      ->GetReflection()
      ->MutableUnknownFields(nested.mutable_nodes(2)->mutable_location())
      ->AddVarint(7, 1);
  EXPECT_NE(test::errorOf(graph::parseGraph(nested.SerializeAsString(), "n"))
                .find("nodes[2].location.field 7 is not part"),
            std::string::npos);

  proto::Graph noOutputs = graph;
  noOutputs.clear_outputs();
  EXPECT_NE(test::errorOf(graph::parseGraph(noOutputs.SerializeAsString(), "o"))
                .find("it has no outputs"),
            std::string::npos);
}

TEST(GraphFormat, ParseErrorsAreNotLogged) {
  // A name that is not UTF-8: protobuf would log an ERROR line of its own.
  testing::internal::CaptureStderr();
  std::string message = test::errorOf(
      graph::parseGraph(llvm::StringRef("\x08\x01\x12\x01\xff", 5), "u"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(message.find("truncated or corrupt"), std::string::npos);
}

TEST_F(GraphFileTest, FilesLargerThanProtobufReadsAreRefusedUnread) {
  // Sparse: no disk is used, and nothing is read.
  int fd = ::open(path("huge.kgraph.pb").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, graph::kMaxGraphFileBytes + 1), 0);
  ::close(fd);
  EXPECT_NE(test::errorOf(graph::readGraphFile(path("huge.kgraph.pb")))
                .find("is 2147483648 bytes, more than a graph file may hold"),
            std::string::npos);
}

TEST_F(GraphFileTest, DevicesAreReadOnlyAsFarAsTheParserGets) {
  EXPECT_NE(test::errorOf(graph::readGraphFile("/dev/zero"))
                .find("'/dev/zero' is not a valid .kgraph.pb graph"),
            std::string::npos);
  EXPECT_NE(test::errorOf(graph::readGraphFile("/dev/null"))
                .find("no format_version"),
            std::string::npos);
}

} // namespace
