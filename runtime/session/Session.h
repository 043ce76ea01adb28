//===- Session.h - a compiled training step, resident on a NeuronCore -*- C++ -*-===//
//
// What a training worker holds for each graph it runs: the artifact (found
// in the cache, or compiled just in time on a miss) loaded into a simulated
// NeuronCore whose HBM keeps parameters and optimizer state between steps.
// Each step binds only what changes (the batch, hyper-parameters, the seed),
// runs, and reads back what the caller asks for. Values cross this API in
// the graph's dtypes; the session converts to and from the device's (i64 is
// i32 on the device, i1 is f32).
//
// In graph-collection mode (KILN_EXTRACT_GRAPHS_ONLY=1, what `kiln
// precompile` sets) a session compiles nothing: open() records the graph for
// precompile and run() leaves every output zero-filled. The Python front end
// and C++ trainers share this one implementation.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SESSION_SESSION_H
#define KILN_RUNTIME_SESSION_SESSION_H

#include "cache/Cache.h"
#include "compiler/graph/kgraph.pb.h"
#include "compiler/target/CompileOptions.h"
#include "runtime/comm/Communicator.h"
#include "runtime/sim/Simulator.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace kiln::runtime {

struct SessionOptions {
  CompileOptions compile;
  /// Compiles a graph on a miss. The runtime does not link the compiler:
  /// whoever opens sessions hands it over (the Python bindings and the CLI
  /// pass kiln::compileToBytes). Without one, a miss is an error.
  cache::CompileFunction compiler;
  /// The cache root; empty means KILN_CACHE_URL, else ~/.cache/kiln.
  std::string cacheRoot;
  /// Run the hazard checker on every step (slow; for debugging).
  bool checkHazards = false;
  bool stochasticRounding = false;
  /// Graph-collection mode; defaults from KILN_EXTRACT_GRAPHS_ONLY.
  bool collectOnly = false;
  /// Where collection mode writes graphs; empty means KILN_GRAPHS_DIR, else
  /// <cache>/kiln-<major>/collected.
  std::string graphsDir;
  /// The data-parallel group the step's collectives run across; its size is
  /// the compile's world size. Null: a group of one (and collection mode,
  /// which needs no peers, keeps compile.worldSize as given).
  std::shared_ptr<comm::Communicator> communicator;
  /// The tensor-parallel group (the workers holding the other shards of
  /// this worker's layers); its size is the compile's tensor parallelism.
  /// Null: no tensor parallelism (in collection mode, compile's as given).
  std::shared_ptr<comm::Communicator> tensorCommunicator;
  /// Defaults from the environment (KILN_CC_FLAGS, KILN_EXTRACT_GRAPHS_ONLY,
  /// KILN_GRAPHS_DIR, KILN_STOCHASTIC_ROUNDING) on top of `base`.
  static llvm::Expected<SessionOptions> fromEnvironment(SessionOptions base);
};

/// What one step did.
struct StepStats {
  double modelledSeconds = 0;
  double mfu = 0;
  double wallSeconds = 0;
};

class Session {
public:
  static llvm::Expected<std::unique_ptr<Session>> open(proto::Graph graph,
                                                       SessionOptions options);

  /// Binds input `name` from `bytes` in the graph's dtype and shape (i1 as
  /// one byte per element). Parameters and optimizer state need binding only
  /// once: the compiled step updates them in place.
  llvm::Error setInput(llvm::StringRef name, llvm::StringRef bytes);
  /// Runs one step; with `tracePath`, also writes its engine timelines there
  /// as a Chrome/Perfetto trace. Errors name the graph.
  llvm::Expected<StepStats> run(llvm::StringRef tracePath = "");
  /// Output or input `name` after the last run, in the graph's dtype. An
  /// updated parameter reads as the input it replaces.
  llvm::Expected<std::string> read(llvm::StringRef name) const;

  const proto::Graph &graph() const { return source; }
  const cache::Key &key() const { return cacheKey; }
  bool collecting() const { return !simulator; }
  /// Hit, Compiled or InMemory; nullopt in collection mode.
  std::optional<cache::Outcome> outcome() const { return cacheOutcome; }
  double compileSeconds() const { return compileTime; }
  const cache::Stats &cacheStats() const { return stats; }
  int64_t steps() const { return stepCount; }
  /// The artifact's HBM plan (bytes the step needs on its NeuronCore); 0
  /// in collection mode.
  uint64_t hbmBytes() const {
    return artifact ? artifact->manifest.hbm_bytes() : 0;
  }

  /// The shape input or output `name` takes and reads: the graph's, or,
  /// for optimizer state that ZeRO-1 shards, this worker's block of rows.
  llvm::Expected<std::vector<int64_t>> shape(llvm::StringRef name) const;

  struct Place {
    std::string buffer;          // the artifact buffer holding it
    proto::TensorType type;      // the graph's type
    bool input = false;          // an input (setInput takes it)
    uint32_t deviceDtype = 0;    // the buffer's dtype (set when compiled)
  };

private:
  Session() = default;
  llvm::Expected<const Place *> place(llvm::StringRef name) const;

  proto::Graph source;
  SessionOptions options;
  cache::Key cacheKey;
  std::optional<cache::Outcome> cacheOutcome;
  double compileTime = 0;
  cache::Stats stats;
  std::unique_ptr<artifact::Artifact> artifact;
  std::unique_ptr<sim::Simulator> simulator;
  llvm::StringMap<Place> places;
  int64_t stepCount = 0;
};

/// Bytes in the graph dtype `dtype` to the device dtype `deviceDtype` (and
/// back); i64 values outside i32 are an error naming `what`. toDevice gives
/// nullopt where the bytes are already the device's (no copy is made).
llvm::Expected<std::optional<std::string>>
toDevice(llvm::StringRef bytes, proto::DType dtype, uint32_t deviceDtype,
         llvm::StringRef what);
std::string fromDevice(llvm::StringRef bytes, proto::DType dtype,
                       uint32_t deviceDtype);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SESSION_SESSION_H
