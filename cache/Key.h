//===- Key.h - the cache key ------------------------------------*- C++ -*-===//
//
// A key is SHA-256 over length-prefixed, named fields (cache.md, "Key"): the
// canonical graph, the compiler build, the target, every compile option with
// its default written out, the world size where the graph has collectives,
// and a salt. Nothing about where or by whom a graph was traced enters it:
// no rank, device, host, path, time or pointer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_KEY_H
#define KILN_CACHE_KEY_H

#include "compiler/target/CompileOptions.h"
#include "compiler/graph/kgraph.pb.h"
#include "runtime/artifact/Artifact.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::cache {

struct KeyField {
  std::string name;
  std::string value;
  /// What the value means, for `kiln cache key --explain`.
  std::string explanation;
};

struct Key {
  std::string hex; // 64 lower-case hex digits
  std::vector<KeyField> fields;
};

/// The compiler build the key records: version, git hash and the artifact
/// and graph format versions.
std::string compilerBuildId();

/// Which build compiled an artifact, from its header ("<version> <git>"),
/// and the same for this build: what `prune --version` and the index's
/// compiler column compare.
std::string artifactBuild(const artifact::Artifact &artifact);
std::string thisBuild();

/// Derives the key of compiling `graph` with `options`. `salt` separates
/// caches deliberately (KILN_CACHE_SALT by default).
llvm::Expected<Key> deriveKey(const proto::Graph &graph,
                              const CompileOptions &options,
                              llvm::StringRef salt);
/// The same, salted from the environment.
llvm::Expected<Key> deriveKey(const proto::Graph &graph,
                              const CompileOptions &options);

/// SHA-256 over the fields: for each, the name's and the value's lengths as
/// 8-byte little-endian integers, each followed by its bytes.
std::string hashFields(const std::vector<KeyField> &fields);

/// Whether `text` looks like a key (64 lower-case hex digits).
bool isKey(llvm::StringRef text);

} // namespace kiln::cache

#endif // KILN_CACHE_KEY_H
