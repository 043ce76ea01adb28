//===- GraphRoles.h - spelling of input and output roles --------*- C++ -*-===//

#ifndef KILN_COMPILER_GRAPH_GRAPHROLES_H
#define KILN_COMPILER_GRAPH_GRAPHROLES_H

#include "compiler/graph/kgraph.pb.h"

#include "llvm/ADT/StringRef.h"
#include <optional>

namespace kiln::graph {

/// The words used for roles in IR attributes and text ("parameter", "loss").
llvm::StringRef inputRoleName(proto::InputRole role);
llvm::StringRef outputRoleName(proto::OutputRole role);
std::optional<proto::InputRole> parseInputRole(llvm::StringRef name);
std::optional<proto::OutputRole> parseOutputRole(llvm::StringRef name);

} // namespace kiln::graph

#endif // KILN_COMPILER_GRAPH_GRAPHROLES_H
