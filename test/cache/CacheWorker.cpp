//===- CacheWorker.cpp - one cache user, for the multi-process tests -----===//
//
//   kiln-cache-test-worker ROOT GRAPH.kgraph.pb [--stats]
//
// Calls getOrCompile once with the stand-in compiler and prints
// "<outcome> <key> <sha256 of the artifact's constants>", so that tests can
// check that every process got the same artifact. Exit status 1 with the
// error on stderr when getOrCompile fails.
//
//===----------------------------------------------------------------------===//

#include "test/cache/StandInCompiler.h"

#include "cache/Cache.h"
#include "compiler/graph/GraphFile.h"

#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace kiln;

int main(int argc, char **argv) {
  if (argc < 3) {
    llvm::errs() << "usage: kiln-cache-test-worker ROOT GRAPH [--stats]\n";
    return 2;
  }
  auto graph = graph::readGraphFile(argv[2]);
  if (!graph) {
    llvm::errs() << "kiln: error: " << llvm::toString(graph.takeError())
                 << "\n";
    return 2;
  }
  auto cache = cache::Cache::open(argv[1]);
  if (!cache) {
    llvm::errs() << "kiln: error: " << llvm::toString(cache.takeError())
                 << "\n";
    return 2;
  }
  auto result =
      cache->getOrCompile(*graph, CompileOptions(), test::standInCompile);
  if (!result) {
    llvm::errs() << "kiln: error: " << llvm::toString(result.takeError())
                 << "\n";
    return 1;
  }
  const char *outcome = result->outcome == cache::Outcome::Hit ? "hit"
                        : result->outcome == cache::Outcome::Compiled
                            ? "compiled"
                            : "in-memory";
  llvm::outs() << outcome << " " << result->key.hex << " "
               << graph::sha256Hex(result->artifact.constantBytes()) << "\n";
  if (argc > 3 && std::strcmp(argv[3], "--stats") == 0) {
    llvm::outs() << cache->stats().toJson() << "\n";
  }
  return 0;
}
