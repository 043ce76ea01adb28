//===- GraphFile.cpp - reading, writing and hashing .kgraph.pb graphs ----===//

#include "compiler/graph/GraphFile.h"

#include "compiler/support/Sha256.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>

namespace kiln::graph {

namespace {

/// Replaces every external tensor of `graph` by inline bytes from `weights`.
llvm::Error inlineWeights(proto::Graph &graph, llvm::StringRef weights,
                          llvm::StringRef weightsPath) {
  for (int n = 0; n < graph.nodes_size(); ++n) {
    proto::Node *node = graph.mutable_nodes(n);
    for (proto::NamedAttribute &attr : *node->mutable_attributes()) {
      if (!attr.value().has_tensor() || !attr.value().tensor().has_external()) {
        continue;
      }
      proto::TensorData *tensor = attr.mutable_value()->mutable_tensor();
      uint64_t offset = tensor->external().offset();
      uint64_t length = tensor->external().length();
      if (offset > weights.size() || length > weights.size() - offset) {
        return llvm::createStringError(
            "node " + llvm::Twine(n) + " ('" + node->op() +
            "'): external data [" + llvm::Twine(offset) + ", +" +
            llvm::Twine(length) + ") lies outside weights file '" +
            weightsPath + "' of " + llvm::Twine(weights.size()) + " bytes");
      }
      tensor->set_raw(weights.substr(offset, length).str());
    }
  }
  graph.clear_weights_file();
  return llvm::Error::success();
}

} // namespace

llvm::Expected<proto::Graph> parseGraph(llvm::StringRef bytes,
                                        llvm::StringRef origin) {
  proto::Graph graph;
  google::protobuf::io::ArrayInputStream stream(bytes.data(),
                                                static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&stream);
  if (!graph.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return llvm::createStringError(
        "'" + origin +
        "' is not a valid .kgraph.pb graph (truncated or corrupt "
        "protobuf)");
  }
  if (graph.format_version() > kGraphFormatVersion) {
    return llvm::createStringError(
        "'" + origin + "' has graph format version " +
        llvm::Twine(graph.format_version()) + ", newer than this Kiln reads (" +
        llvm::Twine(kGraphFormatVersion) + "); upgrade Kiln");
  }
  return graph;
}

llvm::Expected<proto::Graph> readGraphFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    return llvm::createStringError("cannot read graph '" + path +
                                   "': " + buffer.getError().message());
  }
  auto graph = parseGraph((*buffer)->getBuffer(), path);
  if (!graph || graph->weights_file().empty()) {
    return graph;
  }
  llvm::SmallString<256> weightsPath(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(weightsPath, graph->weights_file());
  auto weights = llvm::MemoryBuffer::getFile(weightsPath, false, false);
  if (!weights) {
    return llvm::createStringError("cannot read weights file '" + weightsPath +
                                   "' of graph '" + path +
                                   "': " + weights.getError().message());
  }
  if (llvm::Error err =
          inlineWeights(*graph, (*weights)->getBuffer(), weightsPath)) {
    return std::move(err);
  }
  return graph;
}

llvm::Error writeGraphFile(const proto::Graph &graph, llvm::StringRef path) {
  std::string bytes;
  if (!graph.SerializeToString(&bytes)) {
    return llvm::createStringError("cannot serialize graph for '" + path + "'");
  }
  // A temporary file renamed into place: no reader sees a partial graph.
  if (llvm::Error err = llvm::writeToOutput(path, [&](llvm::raw_ostream &out) {
        out << bytes;
        return llvm::Error::success();
      })) {
    return llvm::createStringError("cannot write '" + path +
                                   "': " + llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

llvm::Expected<proto::Graph> canonicalGraph(const proto::Graph &graph) {
  if (!graph.weights_file().empty()) {
    return llvm::createStringError(
        "graph '" + graph.name() +
        "' refers to an external weights file; read it with "
        "readGraphFile to inline the weights before hashing");
  }
  proto::Graph canonical = graph;
  canonical.clear_name();
  canonical.set_format_version(kGraphFormatVersion);
  for (proto::Node &node : *canonical.mutable_nodes()) {
    node.clear_debug_name();
    node.clear_location();
    // A total order (name, then value bytes), so that even a malformed node
    // with a repeated name has one canonical form.
    auto *attrs = node.mutable_attributes();
    std::sort(
        attrs->begin(), attrs->end(),
        [](const proto::NamedAttribute &a, const proto::NamedAttribute &b) {
          if (a.name() != b.name()) {
            return a.name() < b.name();
          }
          return a.value().SerializeAsString() < b.value().SerializeAsString();
        });
  }
  return canonical;
}

llvm::Expected<std::string> canonicalBytes(const proto::Graph &graph) {
  auto canonical = canonicalGraph(graph);
  if (!canonical) {
    return canonical.takeError();
  }
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!canonical->SerializeToCodedStream(&coded)) {
      return llvm::createStringError(
          "cannot serialize the canonical form of graph '" + graph.name() +
          "'");
    }
  }
  return bytes;
}

llvm::Expected<std::string> graphHash(const proto::Graph &graph) {
  auto bytes = canonicalBytes(graph);
  if (!bytes) {
    return bytes.takeError();
  }
  return sha256Hex(*bytes);
}

std::string sha256Hex(llvm::StringRef bytes) {
  return support::sha256Hex(bytes);
}

size_t dtypeSize(proto::DType dtype) {
  switch (dtype) {
  case proto::F32:
  case proto::I32:
    return 4;
  case proto::BF16:
  case proto::F16:
    return 2;
  case proto::I64:
    return 8;
  case proto::I1:
    return 1;
  default:
    return 0;
  }
}

llvm::StringRef dtypeName(proto::DType dtype) {
  switch (dtype) {
  case proto::F32:
    return "f32";
  case proto::BF16:
    return "bf16";
  case proto::F16:
    return "f16";
  case proto::I32:
    return "i32";
  case proto::I64:
    return "i64";
  case proto::I1:
    return "i1";
  default:
    return "unspecified";
  }
}

} // namespace kiln::graph
