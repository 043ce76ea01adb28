//===- GraphFile.h - reading, writing and hashing .kgraph.pb graphs -*- C++
//-*-===//
//
// The protobuf side of the graph format, independent of MLIR so that the
// cache and tools that only key graphs do not need the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_GRAPH_GRAPHFILE_H
#define KILN_COMPILER_GRAPH_GRAPHFILE_H

#include "compiler/graph/kgraph.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace kiln::graph {

/// The version of the graph format this build writes and reads. A graph of a
/// newer version is refused; older versions are read as they are.
inline constexpr uint32_t kGraphFormatVersion = 1;

/// The most bytes a graph file may hold: protobuf parses no larger message
/// (2 GiB - 1). Large constants go in a weights file instead.
inline constexpr uint64_t kMaxGraphFileBytes = (uint64_t(1) << 31) - 1;

/// Reads a .kgraph.pb file. External weight ranges are read from the weights
/// file next to it and inlined, so the returned graph is self-contained. A
/// regular file's size is checked before it is read; a pipe or device is read
/// no further than kMaxGraphFileBytes.
llvm::Expected<proto::Graph> readGraphFile(llvm::StringRef path);

/// Parses a serialized graph; `origin` names it in errors. Only a Kiln graph
/// is accepted: format_version 1 up to kGraphFormatVersion, no field the
/// format does not define, and at least one output. Graphs with external
/// weights need readGraphFile.
llvm::Expected<proto::Graph> parseGraph(llvm::StringRef bytes,
                                        llvm::StringRef origin);

/// Writes a graph atomically (temporary file, then rename).
llvm::Error writeGraphFile(const proto::Graph &graph, llvm::StringRef path);

/// The canonical form: debug names, source locations and the graph name
/// stripped, attributes sorted by name. Graphs with external weights are
/// refused (inline them first). Two graphs that compute the same thing from the
/// same interface have the same canonical form.
llvm::Expected<proto::Graph> canonicalGraph(const proto::Graph &graph);

/// Deterministic serialization of the canonical form.
llvm::Expected<std::string> canonicalBytes(const proto::Graph &graph);

/// Lower-case hex SHA-256 of canonicalBytes().
llvm::Expected<std::string> graphHash(const proto::Graph &graph);

/// Lower-case hex SHA-256 of arbitrary bytes.
std::string sha256Hex(llvm::StringRef bytes);

/// Size in bytes of one element of `dtype` (i1 is stored as one byte).
size_t dtypeSize(proto::DType dtype);

/// The spelling used in text: "f32", "bf16", ...
llvm::StringRef dtypeName(proto::DType dtype);

} // namespace kiln::graph

#endif // KILN_COMPILER_GRAPH_GRAPHFILE_H
