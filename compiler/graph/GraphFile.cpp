//===- GraphFile.cpp - reading, writing and hashing .kgraph.pb graphs ----===//

#include "compiler/graph/GraphFile.h"

#include "compiler/support/Sha256.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/common.h>
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

llvm::Error tooLarge(llvm::StringRef origin, uint64_t size) {
  return llvm::createStringError(
      "'" + origin + "' is " + llvm::Twine(size) +
      " bytes, more than a graph file may hold (" +
      llvm::Twine(kMaxGraphFileBytes) +
      " bytes, protobuf's limit); keep large constants in a weights file");
}

/// The path to the first field of `message` (or of a message inside it) that
/// the graph format does not define, e.g. "nodes[3].field 9"; empty when
/// there is none.
std::string firstUnknownField(const google::protobuf::Message &message) {
  const google::protobuf::Reflection *reflection = message.GetReflection();
  const google::protobuf::UnknownFieldSet &unknown =
      reflection->GetUnknownFields(message);
  if (!unknown.empty()) {
    return "field " + std::to_string(unknown.field(0).number());
  }
  std::vector<const google::protobuf::FieldDescriptor *> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor *field : fields) {
    if (field->cpp_type() !=
        google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;
    }
    if (!field->is_repeated()) {
      std::string inner =
          firstUnknownField(reflection->GetMessage(message, field));
      if (!inner.empty()) {
        return field->name() + "." + inner;
      }
      continue;
    }
    for (int i = 0, e = reflection->FieldSize(message, field); i < e; ++i) {
      std::string inner =
          firstUnknownField(reflection->GetRepeatedMessage(message, field, i));
      if (!inner.empty()) {
        return field->name() + "[" + std::to_string(i) + "]." + inner;
      }
    }
  }
  return "";
}

/// What makes a protobuf message a Kiln graph rather than any message that
/// happens to parse: an empty file, another kind of protobuf or a corrupt
/// graph would otherwise compile to an artifact that does nothing.
llvm::Error checkIsGraph(const proto::Graph &graph, llvm::StringRef origin) {
  if (graph.format_version() > kGraphFormatVersion) {
    return llvm::createStringError(
        "'" + origin + "' has graph format version " +
        llvm::Twine(graph.format_version()) + ", newer than this Kiln reads (" +
        llvm::Twine(kGraphFormatVersion) + "); upgrade Kiln");
  }
  if (graph.format_version() == 0) {
    return llvm::createStringError(
        "'" + origin +
        "' is not a Kiln graph: it has no format_version (an empty file, or "
        "another kind of protobuf)");
  }
  std::string unknown = firstUnknownField(graph);
  if (!unknown.empty()) {
    return llvm::createStringError("'" + origin +
                                   "' is not a Kiln graph: " + unknown +
                                   " is not part of the graph format");
  }
  if (graph.outputs_size() == 0) {
    return llvm::createStringError("'" + origin +
                                   "' is not a Kiln graph: it has no outputs");
  }
  return llvm::Error::success();
}

/// Parses a whole graph from `stream` and checks that it is one. At most
/// kMaxGraphFileBytes are read, whatever the stream holds.
llvm::Expected<proto::Graph>
parseStream(google::protobuf::io::ZeroCopyInputStream &stream,
            llvm::StringRef origin) {
  proto::Graph graph;
  bool parsed = false;
  {
    // Scoped: its destructor hands unread bytes back, so that the stream's
    // byte count below is what the parse consumed.
    google::protobuf::io::CodedInputStream coded(&stream);
    coded.SetTotalBytesLimit(static_cast<int>(kMaxGraphFileBytes));
#if GOOGLE_PROTOBUF_VERSION < 4022000
    // Protobuf logs why a parse failed (invalid UTF-8, a message over the
    // limit) to stderr; Kiln's own one-line error says it instead.
    google::protobuf::LogSilencer quiet;
#endif
    parsed =
        graph.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  bool tooBig = !parsed &&
                static_cast<uint64_t>(stream.ByteCount()) >= kMaxGraphFileBytes;
  if (tooBig) {
    return llvm::createStringError(
        "'" + origin + "' holds more than a graph file may (" +
        llvm::Twine(kMaxGraphFileBytes) + " bytes, protobuf's limit)");
  }
  if (!parsed) {
    return llvm::createStringError(
        "'" + origin +
        "' is not a valid .kgraph.pb graph (truncated or corrupt protobuf)");
  }
  if (llvm::Error error = checkIsGraph(graph, origin)) {
    return std::move(error);
  }
  return graph;
}

} // namespace

llvm::Expected<proto::Graph> parseGraph(llvm::StringRef bytes,
                                        llvm::StringRef origin) {
  if (bytes.size() > kMaxGraphFileBytes) {
    return tooLarge(origin, bytes.size());
  }
  google::protobuf::io::ArrayInputStream stream(bytes.data(),
                                                static_cast<int>(bytes.size()));
  return parseStream(stream, origin);
}

llvm::Expected<proto::Graph> readGraphFile(llvm::StringRef path) {
  auto cannotRead = [&](int error) {
    return llvm::createStringError(
        std::error_code(error, std::generic_category()),
        "cannot read graph '" + path + "': " + std::strerror(error));
  };
  int fd = ::open(path.str().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return cannotRead(errno);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return cannotRead(error);
  }
  // The size is known before a byte is read wherever the file has one; a
  // pipe or a device (/dev/zero) is read only as far as the parser gets,
  // and never past the same bound.
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return cannotRead(EISDIR);
  }
  if (S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) > kMaxGraphFileBytes) {
    ::close(fd);
    return tooLarge(path, static_cast<uint64_t>(info.st_size));
  }
  auto graph = [&]() -> llvm::Expected<proto::Graph> {
    if (S_ISREG(info.st_mode)) {
      auto buffer = llvm::MemoryBuffer::getOpenFile(
          fd, path, static_cast<uint64_t>(info.st_size),
          /*RequiresNullTerminator=*/false);
      ::close(fd);
      if (!buffer) {
        return cannotRead(buffer.getError().value());
      }
      return parseGraph((*buffer)->getBuffer(), path);
    }
    google::protobuf::io::FileInputStream stream(fd, 1 << 20);
    stream.SetCloseOnDelete(true);
    auto parsed = parseStream(stream, path);
    if (!parsed && stream.GetErrno() != 0) {
      llvm::consumeError(parsed.takeError());
      return cannotRead(stream.GetErrno());
    }
    return parsed;
  }();
  if (!graph) {
    return graph.takeError();
  }
  if (graph->weights_file().empty()) {
    return graph;
  }
  llvm::SmallString<256> weightsPath(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(weightsPath, graph->weights_file());
  auto cannotReadWeights = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot read weights file '" + weightsPath +
                                   "' of graph '" + path + "': " + why);
  };
  // Weights are raw bytes read whole: only a regular file has a size to
  // trust (a weights file naming /dev/zero would otherwise never end).
  llvm::sys::fs::file_status weightsStatus;
  if (std::error_code ec = llvm::sys::fs::status(weightsPath, weightsStatus)) {
    return cannotReadWeights(ec.message());
  }
  if (weightsStatus.type() != llvm::sys::fs::file_type::regular_file) {
    return cannotReadWeights("not a regular file");
  }
  auto weights = llvm::MemoryBuffer::getFile(weightsPath, false, false);
  if (!weights) {
    return cannotReadWeights(weights.getError().message());
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
