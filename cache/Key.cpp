//===- Key.cpp - deriving cache keys --------------------------------------===//

#include "cache/Key.h"

#include "compiler/Version.h"
#include "compiler/graph/GraphFile.h"
#include "compiler/support/Sha256.h"
#include "compiler/target/TargetDescription.h"
#include "runtime/artifact/Artifact.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"

#include <cstdlib>

namespace kiln::cache {

std::string compilerBuildId() {
  return std::string("kiln ") + KILN_VERSION + " git " + KILN_GIT_HASH +
         " kneff " + std::to_string(artifact::kFormatMajor) + "." +
         std::to_string(artifact::kFormatMinor) + " kgraph " +
         std::to_string(graph::kGraphFormatVersion) + " schema " +
         llvm::toHex(artifact::schemaHash(), /*LowerCase=*/true).substr(0, 16);
}

std::string artifactBuild(const artifact::Artifact &artifact) {
  return artifact.compilerVersion + " " + artifact.gitHash;
}

std::string thisBuild() {
  // The header keeps 16 bytes of each.
  return llvm::StringRef(KILN_VERSION).take_front(16).str() + " " +
         llvm::StringRef(KILN_GIT_HASH).take_front(16).str();
}

namespace {

/// Collectives, or what data parallelism averages (gradients, the loss and
/// metrics): the graphs whose artifact depends on the group's size.
bool hasCollectives(const proto::Graph &graph) {
  for (const proto::Output &output : graph.outputs()) {
    if (output.role() == proto::LOSS || output.role() == proto::METRIC) {
      return true;
    }
  }
  for (const auto &node : graph.nodes()) {
    for (llvm::StringRef group : {"all_reduce", "all_gather", "reduce_scatter",
                                  "worker_shard", "gradient"}) {
      if (node.op() == group) {
        return true;
      }
    }
  }
  return false;
}

} // namespace

std::string hashFields(const std::vector<KeyField> &fields) {
  support::Sha256 sha;
  auto put = [&](llvm::StringRef bytes) {
    char length[8];
    llvm::support::endian::write64le(length, bytes.size());
    sha.update(llvm::StringRef(length, 8));
    sha.update(bytes);
  };
  for (const KeyField &f : fields) {
    put(f.name);
    put(f.value);
  }
  return support::toHex(sha.final());
}

llvm::Expected<Key> deriveKey(const proto::Graph &graph,
                              const CompileOptions &options,
                              llvm::StringRef salt) {
  auto canonical = graph::canonicalBytes(graph);
  if (!canonical) {
    return canonical.takeError();
  }
  const target::TargetDescription *t = target::lookupTarget(options.target);
  if (!t) {
    return llvm::createStringError("cache key: unknown target '" +
                                   options.target + "'");
  }
  Key key;
  key.fields.push_back({"graph", std::move(*canonical),
                        "the canonical graph bytes (debug names and source "
                        "locations stripped)"});
  key.fields.push_back({"compiler", compilerBuildId(),
                        "compiler version, git hash, artifact, graph and "
                        "instruction-schema versions"});
  // One NeuronCore per artifact; the topology is the data-parallel group's,
  // which only graphs with collectives depend on.
  bool collective = hasCollectives(graph);
  key.fields.push_back(
      {"target",
       t->name.str() + " cores=1 topology=" +
           (collective && (options.worldSize > 1 || options.tensorParallel > 1)
                ? "ring"
                : "single"),
       "target kind, cores per artifact and topology"});
  // Options every artifact depends on first, then those that change only
  // the graphs with collectives, or only data-parallel compiles: "n/a"
  // elsewhere, so that one graph compiled for one worker has one key.
  for (const CompileOptionInfo &option : compileOptionTable()) {
    if (option.key == KeyUse::Always) {
      key.fields.push_back({"option." + option.name.str(), option.get(options),
                            "compile option " + option.name.str()});
    }
  }
  for (KeyUse use : {KeyUse::GroupSize, KeyUse::DataParallel}) {
    bool applies = use == KeyUse::GroupSize
                       ? collective
                       : collective && options.worldSize > 1;
    for (const CompileOptionInfo &option : compileOptionTable()) {
      if (option.key == use) {
        key.fields.push_back(
            {option.name.str(), applies ? option.get(options) : "n/a",
             option.help.str() +
                 (use == KeyUse::GroupSize
                      ? " (only for graphs with collectives)"
                      : " (only for data-parallel compiles)")});
      }
    }
  }
  key.fields.push_back(
      {"salt", salt.str(), "KILN_CACHE_SALT, for deliberate separation"});
  key.hex = hashFields(key.fields);
  return key;
}

llvm::Expected<Key> deriveKey(const proto::Graph &graph,
                              const CompileOptions &options) {
  const char *salt = std::getenv("KILN_CACHE_SALT");
  return deriveKey(graph, options, salt ? salt : "");
}

bool isKey(llvm::StringRef text) {
  return text.size() == 64 && llvm::all_of(text, [](char c) {
           return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
         });
}

} // namespace kiln::cache
