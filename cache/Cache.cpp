//===- Cache.cpp - getOrCompile -------------------------------------------===//

#include "cache/Cache.h"

#include "compiler/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace kiln::cache {

namespace {

double monotonicSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void warn(const llvm::Twine &message) {
  llvm::WithColor::warning(llvm::errs(), "kiln") << message << "\n";
}

/// Validates what the compiler produced and records `key` in it, so that the
/// published entry is bound to its key; `bytes` becomes the bound artifact.
llvm::Expected<artifact::Artifact> bindArtifact(std::string &bytes,
                                                llvm::StringRef name,
                                                const CompileOptions &options,
                                                llvm::StringRef key) {
  auto loaded = artifact::readArtifact(
      bytes, ("compiled graph '" + name + "'").str(), options.target);
  if (!loaded) {
    return llvm::createStringError(
        "the compiler produced an invalid artifact for graph '" + name +
        "': " + llvm::toString(loaded.takeError()));
  }
  loaded->manifest.set_cache_key(key.str());
  bytes = artifact::writeArtifact(*loaded);
  return loaded;
}

/// Whether this process has said that the cache cannot take writes; said
/// once, not once a graph.
std::atomic<bool> warnedUnwritable{false};

/// Remote tiers whose reads failed in this process (unreachable, timeouts,
/// 403, 5xx): each warned once, and the process uses its local tier from
/// then on. Tiers whose uploads failed (a worker allowed to read only, say)
/// warned once too, and are still read.
std::mutex downLock;
std::set<std::string> downTiers, noUploads;

bool isDown(llvm::StringRef url) {
  std::lock_guard<std::mutex> guard(downLock);
  return downTiers.count(url.str()) != 0;
}

bool takesUploads(llvm::StringRef url) {
  std::lock_guard<std::mutex> guard(downLock);
  return noUploads.count(url.str()) == 0;
}

/// Adds `url` to `tiers`, warning with `error` and `consequence` the first
/// time.
void setAside(std::set<std::string> &tiers, llvm::StringRef url,
              llvm::Error error, llvm::StringRef consequence) {
  std::string why = llvm::toString(std::move(error));
  std::lock_guard<std::mutex> guard(downLock);
  if (tiers.insert(url.str()).second) {
    warn(why + "; " + consequence);
  }
}

void uploadTrouble(llvm::StringRef url, llvm::Error error) {
  setAside(noUploads, url, std::move(error),
           "this process uploads nothing more (it still reads the remote "
           "tier)");
}

/// The compile seconds the tier's record of `key` gives; 0 without one.
double recordedCompileSeconds(const Tier &tier, llvm::StringRef key) {
  auto record = tier.fetchRecord(key);
  if (!record || !*record) {
    if (!record) {
      llvm::consumeError(record.takeError()); // the artifact came; go on
    }
    return 0;
  }
  auto parsed = llvm::json::parse(**record);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return 0;
  }
  const llvm::json::Object *o = parsed->getAsObject();
  return o ? o->getNumber("compile_seconds").value_or(0) : 0;
}

void remoteTrouble(llvm::StringRef url, llvm::Error error) {
  setAside(downTiers, url, std::move(error),
           "going on with the local tier only");
}

} // namespace

std::string Stats::toJson() const {
  llvm::json::Object o{{"hits", hits},
                       {"misses", misses},
                       {"compiles", compiles},
                       {"bypasses", bypasses},
                       {"failures", failures},
                       {"corrupt", corrupt},
                       {"lease_waits", leaseWaits},
                       {"lease_wait_seconds", leaseWaitSeconds},
                       {"compile_seconds", compileSeconds},
                       {"bytes_read", bytesRead},
                       {"bytes_written", bytesWritten},
                       {"remote_hits", remoteHits},
                       {"uploads", uploads}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(o));
  return text;
}

GetOptions GetOptions::fromEnvironment() {
  GetOptions o;
  if (auto mode = cacheModeFromEnvironment()) {
    o.mode = *mode;
  } else {
    llvm::consumeError(mode.takeError()); // Cache::open reports it
  }
  if (const char *manifest = std::getenv("KILN_CACHE_MANIFEST")) {
    o.manifestPath = manifest;
  }
  if (const char *log = std::getenv("KILN_CACHE_RUN_LOG")) {
    o.runLog = log;
  }
  const char *retry = std::getenv("KILN_CACHE_RETRY_FAILED");
  o.retryFailed = retry && *retry && llvm::StringRef(retry) != "0";
  if (const char *ttl = std::getenv("KILN_CACHE_FAILED_TTL")) {
    double value = 0;
    if (!llvm::StringRef(ttl).getAsDouble(value) && value >= 0) {
      o.failedTtlSeconds = value;
    }
  }
  return o;
}

std::string Cache::defaultRoot() {
  if (const char *url = std::getenv("KILN_CACHE_URL"); url && *url) {
    return url;
  }
  const char *home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/kiln";
}

llvm::Expected<Cache> Cache::open(llvm::StringRef root) {
  if (auto mode = cacheModeFromEnvironment(); !mode) {
    return mode.takeError();
  }
  return open(root, Store::optionsFromEnvironment(),
              LeaseOptions::fromEnvironment(), GetOptions::fromEnvironment());
}

llvm::Expected<Cache> Cache::open(llvm::StringRef root, StoreOptions store,
                                  LeaseOptions leases, GetOptions get) {
  auto opened = Store::open(root, store);
  if (!opened) {
    return opened.takeError();
  }
  std::vector<std::string> damage = opened->layoutProblems();
  if (!damage.empty()) {
    return llvm::createStringError("cache root '" + opened->root() +
                                   "' is damaged: " + llvm::join(damage, "; ") +
                                   " (kiln cache doctor)");
  }
  Cache cache(std::move(*opened), leases, get);
  if (isRemoteUrl(root) && !isDown(root)) {
    auto tier = RemoteTier::open(root);
    if (!tier) {
      remoteTrouble(root, tier.takeError());
    } else {
      cache.remote = std::move(*tier);
    }
  }
  return cache;
}

const Tier *Cache::remoteTier() const {
  return remote && !isDown(remote->location()) ? remote.get() : nullptr;
}

std::optional<artifact::Artifact>
Cache::fetchRemote(const Key &key, const CompileOptions &options,
                   llvm::StringRef graphName) {
  const Tier *tier = remoteTier();
  if (!tier) {
    return std::nullopt;
  }
  auto fetched = tier->fetchArtifact(key.hex);
  if (!fetched) {
    remoteTrouble(tier->location(), fetched.takeError());
    return std::nullopt;
  }
  if (!*fetched) {
    return std::nullopt;
  }
  std::string origin =
      "remote object for key " + key.hex.substr(0, 16) + " in " +
      tier->location();
  auto loaded = artifact::readArtifact(**fetched, origin, options.target);
  llvm::Error bad = loaded ? checkBinding(*loaded, key.hex, origin)
                           : loaded.takeError();
  if (bad) {
    // Reported and never used; the compile that follows uploads a good
    // object over it.
    warn("corrupt " + origin + ": " + llvm::toString(std::move(bad)) +
         "; not used, recompiling");
    ++counters.corrupt;
    record({"corrupt", key.hex});
    return std::nullopt;
  }
  ++counters.remoteHits;
  counters.bytesRead += static_cast<int64_t>((*fetched)->size());
  record({"remote_hit", key.hex, static_cast<double>((*fetched)->size()),
          recordedCompileSeconds(*tier, key.hex), graphName.str(),
          artifactBuild(*loaded)});
  // Keep a copy in the local tier and serve it from there (mapped, as any
  // local hit); a local tier that takes no writes serves it from memory.
  if (!files.options().readOnly) {
    auto kept = files.publish(files.objectPath(key.hex), **fetched);
    if (!kept) {
      llvm::consumeError(kept.takeError());
    } else if (Lookup local = files.loadObject(key.hex);
               local.state == Lookup::State::Valid) {
      return std::move(local.artifact);
    }
  }
  return std::move(*loaded);
}

void Cache::upload(const Key &key, llvm::StringRef bytes,
                   llvm::StringRef graphName, double compileSeconds) {
  const Tier *tier = remoteTier();
  if (!tier || files.options().readOnly || !takesUploads(tier->location())) {
    return;
  }
  std::string json;
  llvm::raw_string_ostream(json)
      << llvm::json::Value(llvm::json::Object{
             {"graph", graphName},
             {"compile_seconds", compileSeconds},
             {"host", hostIdentity()}});
  // The artifact first: a record without its artifact is harmless.
  llvm::Error error = tier->publishArtifact(key.hex, bytes);
  if (!error) {
    error = tier->publishRecord(key.hex, json);
  }
  if (error) {
    uploadTrouble(tier->location(), std::move(error));
    return;
  }
  ++counters.uploads;
}

llvm::Expected<Cache> Cache::openDefault() { return open(defaultRoot()); }

void Cache::record(Event event) { appendEvent(files, event); }

llvm::Expected<Result> Cache::compileAndPublish(const proto::Graph &graph,
                                                const CompileOptions &options,
                                                const CompileFunction &compile,
                                                Key key,
                                                std::optional<std::string> notPublishing) {
  double start = monotonicSeconds();
  auto bytes = compile(graph, options);
  double seconds = monotonicSeconds() - start;
  counters.compileSeconds += seconds;
  std::string name = graph.name();
  if (!bytes) {
    std::string error = llvm::toString(bytes.takeError());
    ++counters.failures;
    if (!notPublishing) {
      FailedEntry entry{error, compilerBuildId(), wallSeconds(),
                        wallSeconds() + get.failedTtlSeconds};
      if (auto err = files.recordFailure(key.hex, entry)) {
        warn("cannot record the failure of " + key.hex + ": " +
             llvm::toString(std::move(err)));
      }
      record({"failure", key.hex, 0, seconds, name, compilerBuildId()});
    }
    return llvm::createStringError("compiling graph '" + name + "' (key " +
                                   key.hex.substr(0, 16) +
                                   ") failed: " + error);
  }
  auto loaded = bindArtifact(*bytes, name, options, key.hex);
  if (!loaded) {
    return loaded.takeError();
  }
  ++counters.compiles;
  Result result{std::move(*loaded), std::move(key), Outcome::InMemory, seconds};
  if (notPublishing) {
    ++counters.bypasses;
    record({"bypass", result.key.hex});
    result.notPublished = std::move(*notPublishing);
    return result;
  }
  // The artifact first, then its graph: an object never refers to anything
  // that is not there yet, and a graph alone is harmless. The upload comes
  // last: this host's waiters find the local entry without waiting for it.
  auto published = files.publish(files.objectPath(result.key.hex), *bytes);
  if (!published) {
    // ENOSPC, EIO, ...: this run goes on with the artifact in memory.
    result.notPublished = llvm::toString(published.takeError());
    warn(result.notPublished + "; going on with the artifact in memory");
    ++counters.bypasses;
    upload(result.key, *bytes, name, seconds);
    return result;
  }
  std::string graphBytes;
  if (graph.SerializeToString(&graphBytes)) {
    auto graphPublished =
        files.publish(files.graphPath(result.key.hex), graphBytes);
    if (!graphPublished) {
      llvm::consumeError(graphPublished.takeError());
    }
  }
  files.forgetFailure(result.key.hex);
  counters.bytesWritten += static_cast<int64_t>(bytes->size());
  record({"compile", result.key.hex, static_cast<double>(bytes->size()),
          seconds, name, artifactBuild(result.artifact)});
  result.outcome = Outcome::Compiled;
  upload(result.key, *bytes, name, seconds);
  return result;
}

llvm::Expected<Result> Cache::compileUncached(const proto::Graph &graph,
                                              const CompileOptions &options,
                                              const CompileFunction &compile) {
  auto key = deriveKey(graph, options);
  if (!key) {
    return key.takeError();
  }
  double start = monotonicSeconds();
  auto bytes = compile(graph, options);
  double seconds = monotonicSeconds() - start;
  if (!bytes) {
    return llvm::createStringError("compiling graph '" + graph.name() +
                                   "' (key " + key->hex.substr(0, 16) +
                                   ") failed: " +
                                   llvm::toString(bytes.takeError()));
  }
  auto loaded = bindArtifact(*bytes, graph.name(), options, key->hex);
  if (!loaded) {
    return loaded.takeError();
  }
  return Result{std::move(*loaded), std::move(*key), Outcome::InMemory, seconds,
                "compiled without a cache"};
}

llvm::Expected<std::vector<CoverageEntry>> Cache::readCoverageManifest() {
  if (!get.manifestPath.empty()) {
    return readManifest(get.manifestPath);
  }
  auto local = readManifest(defaultManifestPath(files));
  const Tier *tier = remoteTier();
  if (local || !tier) {
    return local;
  }
  // Precompile ran on another host: its manifest is on the remote tier.
  auto fetched = tier->fetchManifest();
  if (!fetched || !*fetched) {
    if (!fetched) {
      llvm::consumeError(fetched.takeError());
    }
    return local;
  }
  llvm::consumeError(local.takeError());
  return parseManifest(**fetched,
                       "the coverage manifest of " + tier->location());
}

llvm::Error Cache::strictMiss(const proto::Graph &graph,
                              const CompileOptions &options, const Key &key) {
  CoverageEntry wanted = describeGraph(graph, options, key);
  wanted.outcome = "missing";
  if (!get.runLog.empty()) {
    if (llvm::Error error = appendRunLog(get.runLog, wanted)) {
      warn(llvm::toString(std::move(error)));
    }
  }
  auto manifest = readCoverageManifest();
  std::string why = manifest ? explainMiss(wanted, *manifest)
                             : llvm::toString(manifest.takeError()) +
                                   " (kiln precompile writes it)";
  return llvm::createStringError(llvm::formatv(
      "strict cache mode (KILN_CACHE_MODE=strict): graph '{0}' (inputs {1}; "
      "world size {2}) is not in the cache (key {3}): {4}",
      graph.name(), summarizeInputs(wanted.inputs), options.worldSize,
      key.hex.substr(0, 16), why));
}

llvm::Expected<Result> Cache::getOrCompile(const proto::Graph &graph,
                                           const CompileOptions &options,
                                           const CompileFunction &compile) {
  auto result = lookUpOrCompile(graph, options, compile);
  if (result && !get.runLog.empty()) {
    CoverageEntry used = describeGraph(graph, options, result->key);
    used.outcome = result->outcome == Outcome::Hit ? "hit" : "compiled";
    if (llvm::Error error = appendRunLog(get.runLog, used)) {
      warn(llvm::toString(std::move(error)));
    }
  }
  return result;
}

llvm::Expected<Result> Cache::lookUpOrCompile(const proto::Graph &graph,
                                              const CompileOptions &options,
                                              const CompileFunction &compile) {
  auto key = deriveKey(graph, options);
  if (!key) {
    return key.takeError();
  }
  std::mt19937_64 jitter(std::random_device{}());
  double waitStart = 0, lastReport = 0, delay = 0.02;
  bool waited = false, missed = false;
  while (true) {
    Lookup found = files.loadObject(key->hex);
    if (found.state == Lookup::State::Valid) {
      ++counters.hits;
      int64_t size = static_cast<int64_t>(
          found.artifact->mapping ? found.artifact->mapping->getBufferSize()
                                  : 0);
      counters.bytesRead += size;
      record({"hit", key->hex, static_cast<double>(size)});
      if (waited) {
        counters.leaseWaitSeconds += monotonicSeconds() - waitStart;
        record({"lease_wait", key->hex, 0, monotonicSeconds() - waitStart});
      }
      return Result{std::move(*found.artifact), std::move(*key), Outcome::Hit,
                    0};
    }
    if (found.state == Lookup::State::Unreadable) {
      // Perhaps good, and readable by its owner: not ours to replace.
      warn(found.problem + "; compiling graph '" + graph.name() +
           "' in memory");
      return compileAndPublish(graph, options, compile, std::move(*key),
                               found.problem);
    }
    if (found.state == Lookup::State::Corrupt) {
      // It has been quarantined: count it and compile.
      warn(found.problem + "; recompiling");
      ++counters.corrupt;
      record({"corrupt", key->hex});
    }
    if (!missed) {
      missed = true;
      if (auto fetched = fetchRemote(*key, options, graph.name())) {
        ++counters.hits;
        return Result{std::move(*fetched), std::move(*key), Outcome::Hit, 0};
      }
      ++counters.misses;
      record({"miss", key->hex});
    }
    if (auto failed = files.failedEntry(key->hex); failed && !get.retryFailed) {
      ++counters.failures;
      return llvm::createStringError(
          "graph '" + graph.name() + "' (key " + key->hex.substr(0, 16) +
          ") failed to compile earlier (" + failed->compiler +
          "); not retrying until the entry expires or --retry-failed "
          "(KILN_CACHE_RETRY_FAILED=1): " +
          failed->error);
    }
    if (get.mode == CacheMode::Strict) {
      return strictMiss(graph, options, *key);
    }
    if (files.options().readOnly) {
      return compileAndPublish(graph, options, compile, std::move(*key),
                               "the cache is read-only (KILN_CACHE_MODE="
                               "readonly or KILN_CACHE_READONLY)");
    }
    std::string leasePath = files.leasePath(key->hex);
    auto lease = Lease::tryAcquire(leasePath, leases);
    if (!lease) {
      // A read-only mount, no permission, no space or inodes: nobody can
      // publish here, so there is nothing to wait for.
      std::string why = "the cache at '" + files.root().str() +
                        "' takes no writes (" +
                        llvm::toString(lease.takeError()) + ")";
      if (!warnedUnwritable.exchange(true)) {
        warn(why + "; compiling in memory, nothing is published");
      }
      return compileAndPublish(graph, options, compile, std::move(*key), why);
    }
    if (*lease) {
      // Someone may have published between our lookup and our lease.
      if (files.loadObject(key->hex).state == Lookup::State::Valid) {
        continue;
      }
      return compileAndPublish(graph, options, compile, std::move(*key));
    }
    // Another process is compiling this key: wait for its result.
    double now = monotonicSeconds();
    if (!waited) {
      waited = true;
      waitStart = lastReport = now;
      ++counters.leaseWaits;
    }
    if (now - waitStart > leases.maxWaitSeconds) {
      warn("waited " + llvm::formatv("{0:f0}", leases.maxWaitSeconds).str() +
           " s for " + describeHolder(leasePath) + " to compile graph '" +
           graph.name() + "' (key " + key->hex.substr(0, 16) +
           "); compiling it here too");
      counters.leaseWaitSeconds += now - waitStart;
      record({"lease_wait", key->hex, 0, now - waitStart});
      return compileAndPublish(graph, options, compile, std::move(*key));
    }
    if (now - lastReport >= leases.reportEverySeconds) {
      lastReport = now;
      llvm::errs() << llvm::formatv(
          "kiln: waiting for {0} to compile graph '{1}' (key {2}): {3:f0} s "
          "so far, compiling here after {4:f0} s (lease {5})\n",
          describeHolder(leasePath), graph.name(), key->hex.substr(0, 16),
          now - waitStart, leases.maxWaitSeconds, leasePath);
    }
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    std::this_thread::sleep_for(
        std::chrono::duration<double>(delay * spread(jitter)));
    delay = std::min(delay * 1.5, 0.5);
  }
}

} // namespace kiln::cache
