//===- CacheCommand.cpp - kiln cache ... ----------------------------------===//
//
// The cache's maintenance and inspection commands (docs/cache.md). They take
// their own arguments, like git's subcommands, so that `prune --version`
// does not collide with the tool's --version.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/CacheCommand.h"
#include "tools/kiln/CacheArgs.h"
#include "tools/kiln/ToolSupport.h"

#include "cache/Cache.h"
#include "cache/Coverage.h"
#include "cache/Maintenance.h"
#include "compiler/graph/GraphFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <ctime>
#include <map>
#include <set>

using namespace kiln;
using namespace kiln::cache;

namespace kiln::tool {

namespace {

constexpr const char *kUsage =
    R"(usage: kiln cache <command> [options]
The cache root: --cache DIR (--root DIR is the same), else $KILN_CACHE_URL,
else ~/.cache/kiln. A remote tier (s3://..., http(s)://...) takes ls, stats,
verify, gc, prune, doctor, export and import (bundles move between tiers);
the other commands work on a cache directory.

  ls [--json]                         entries: key, graph, size, compile time, hits, last use, status
  show KEY                            one entry (a unique key prefix will do)
  key --explain GRAPH [compile options]
                                      the key of GRAPH and the hash of each field that makes it
  stats [--json] [--zero]             the counters, merged over every host
  verify [--repair]                   check every artifact; --repair quarantines the bad ones
  gc [--max-size N[KMGT]] [--max-age DUR] [--keep-versions N] [--grace DUR] [--dry-run]
  prune [--older-than DUR] [--version] [--grace DUR] [--dry-run]
                                      remove entries created before DUR ago / by other compiler builds
  export FILE                         every artifact and graph into a zip file
  import FILE                         verify and publish the artifacts of an export
  index rebuild                       recreate index.sqlite from the files
  doctor                              probe the root: links, renames, leases, space, permissions
  coverage --run-log FILE [--manifest FILE]
                                      the graphs a run used (KILN_CACHE_RUN_LOG) that precompile
                                      did not produce (its manifest, default <cache>/kiln-<v>/coverage.json)
DUR is a number with s, m, h or d (default s); N[KMGT] a number of bytes
with an optional K, M, G or T (powers of 1024, below 8 EiB).
)";

/// The index brought up to date when this process may update it, else as it
/// was last merged (a read-only mount, say), with a note saying so.
llvm::Expected<Index> openIndexForReading(const Store &store) {
  auto index = Index::openForUpdate(store);
  if (index) {
    return index;
  }
  std::string why = llvm::toString(index.takeError());
  auto readOnly = Index::openReadOnly(store);
  if (!readOnly) {
    llvm::consumeError(readOnly.takeError());
    return llvm::createStringError(why);
  }
  llvm::errs() << "kiln: note: " << why
               << "; showing the index as it was last updated\n";
  return readOnly;
}

int runList(const Store &store, const Args &args) {
  auto index = openIndexForReading(store);
  if (!index) {
    return reportError(index.takeError());
  }
  std::vector<IndexEntry> entries = index->entries();
  if (args.has("--json")) {
    llvm::json::Array out;
    for (const IndexEntry &e : entries) {
      out.push_back(llvm::json::Object{{"key", e.key},
                                       {"graph", e.graphName},
                                       {"size", e.size},
                                       {"compile_seconds", e.compileSeconds},
                                       {"hits", e.hits},
                                       {"created", e.created},
                                       {"last_used", e.lastUsed},
                                       {"status", e.status},
                                       {"compiler", e.compiler}});
    }
    printJson(std::move(out));
    return Success;
  }
  llvm::outs() << llvm::formatv("{0,-16}  {1,-24}  {2,10}  {3,9}  {4,6}  "
                                "{5,-16}  {6}\n",
                                "KEY", "GRAPH", "SIZE", "COMPILE", "HITS",
                                "LAST USED (UTC)", "STATUS");
  int64_t total = 0;
  for (const IndexEntry &e : entries) {
    llvm::outs() << llvm::formatv(
        "{0,-16}  {1,-24}  {2,10}  {3,8:f2}s  {4,6}  {5,-16}  {6}\n",
        e.key.substr(0, 16), llvm::StringRef(e.graphName).take_front(24),
        humanBytes(e.size), e.compileSeconds, e.hits, humanTime(e.lastUsed),
        e.status);
    total += e.size;
  }
  llvm::outs() << entries.size() << " entries, " << humanBytes(total) << " in "
               << store.dir() << "\n";
  return Success;
}

/// The full key for a unique prefix of one, from the files.
llvm::Expected<std::string> resolveKey(const Store &store,
                                       llvm::StringRef prefix) {
  if (prefix.size() < 2 || !llvm::all_of(prefix, llvm::isHexDigit)) {
    return llvm::createStringError("'" + prefix +
                                   "' is not a key or a key prefix");
  }
  std::vector<std::string> matches;
  std::error_code ec;
  for (const char *dir : {"objects", "failed"}) {
    std::string fan = store.subdir(dir) + "/" + prefix.take_front(2).str();
    for (llvm::sys::fs::directory_iterator it(fan, ec), end; it != end && !ec;
         it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      llvm::StringRef key = name.take_front(64);
      if (isKey(key) && key.starts_with(prefix) &&
          std::find(matches.begin(), matches.end(), key) == matches.end()) {
        matches.push_back(key.str());
      }
    }
  }
  if (matches.empty()) {
    return llvm::createStringError("no cache entry has key " + prefix);
  }
  if (matches.size() > 1) {
    return llvm::createStringError("key prefix " + prefix + " is ambiguous (" +
                                   llvm::Twine(matches.size()) + " entries)");
  }
  return matches[0];
}

int runShow(const Store &store, const Args &args) {
  if (args.positional.size() != 1) {
    return fail("cache show takes one key");
  }
  auto key = resolveKey(store, args.positional[0]);
  if (!key) {
    return reportError(key.takeError());
  }
  llvm::outs() << "key        " << *key << "\n";
  std::string object = store.objectPath(*key);
  if (llvm::sys::fs::exists(object)) {
    uint64_t size = 0;
    llvm::sys::fs::file_size(object, size);
    llvm::outs() << "artifact   " << object << " (" << humanBytes(size)
                 << ")\n";
    auto loaded = loadEntry(object, *key);
    if (loaded) {
      llvm::outs() << "graph      " << loaded->manifest.name() << "\n"
                   << "target     " << loaded->manifest.target() << "\n"
                   << "compiler   " << loaded->compilerVersion << " "
                   << loaded->gitHash << "\n"
                   << "verified   yes (header, version, checksum, every "
                      "instruction, bound to this key)\n";
    } else {
      llvm::outs() << "verified   NO: " << llvm::toString(loaded.takeError())
                   << "\n";
    }
  }
  if (llvm::sys::fs::exists(store.graphPath(*key))) {
    llvm::outs() << "source     " << store.graphPath(*key) << "\n";
  }
  if (auto failed = store.failedEntry(*key)) {
    llvm::outs() << "FAILED     at " << humanTime(failed->time) << " by "
                 << failed->compiler << ", retried after "
                 << humanTime(failed->expires) << ":\n  " << failed->error
                 << "\n";
  }
  if (auto index = Index::openForUpdate(store)) {
    if (auto e = index->entry(*key)) {
      llvm::outs() << llvm::formatv(
          "index      {0} hits, compiled in {1:f2} s, created {2}, last used "
          "{3}, status {4}\n",
          e->hits, e->compileSeconds, humanTime(e->created),
          humanTime(e->lastUsed), e->status);
    }
  } else {
    llvm::consumeError(index.takeError());
  }
  return Success;
}

int runKey(const Args &args) {
  if (!args.has("--explain") && args.positional.empty()) {
    return fail("cache key takes --explain GRAPH");
  }
  if (args.positional.size() != 1) {
    return fail("cache key takes one graph (.kgraph.pb)");
  }
  auto graph = graph::readGraphFile(args.positional[0]);
  if (!graph) {
    return reportError(graph.takeError());
  }
  auto options = CompileOptions::fromEnvironment(CompileOptions());
  if (!options) {
    return reportError(options.takeError());
  }
  auto withFlags = CompileOptions::parse(args.passThrough, *options);
  if (!withFlags) {
    return reportError(withFlags.takeError());
  }
  auto key = deriveKey(*graph, *withFlags);
  if (!key) {
    return reportError(key.takeError());
  }
  if (!args.has("--explain")) {
    llvm::outs() << key->hex << "\n";
    return Success;
  }
  if (args.has("--json")) {
    llvm::json::Array fields;
    for (const KeyField &f : key->fields) {
      fields.push_back(llvm::json::Object{
          {"field", f.name},
          {"sha256", graph::sha256Hex(f.value)},
          {"value", f.name == "graph" ? llvm::json::Value(nullptr)
                                      : llvm::json::Value(f.value)}});
    }
    printJson(
        llvm::json::Object{{"key", key->hex}, {"fields", std::move(fields)}});
    return Success;
  }
  llvm::outs() << "key " << key->hex << "\n";
  for (const KeyField &f : key->fields) {
    std::string shown = f.name == "graph"
                            ? llvm::formatv("<{0} bytes>", f.value.size()).str()
                            : (f.value.empty() ? std::string("\"\"") : f.value);
    llvm::outs() << llvm::formatv("  {0,-18} {1}  {2}\n", f.name,
                                  graph::sha256Hex(f.value).substr(0, 16),
                                  shown);
  }
  llvm::outs() << "Two runs that miss each other differ in at least one field "
                  "hash above.\n";
  return Success;
}

/// Counters as `kiln cache stats` shows them, then the hit rate.
void printCounters(std::map<std::string, double> counters,
                   llvm::StringRef indent) {
  for (auto &[name, value] : counters) {
    std::string shown =
        llvm::StringRef(name).starts_with("bytes")
            ? humanBytes(value)
            : (llvm::StringRef(name).ends_with("seconds") ||
                       name == "seconds_saved"
                   ? llvm::formatv("{0:f1} s", value).str()
                   : llvm::formatv("{0}", static_cast<int64_t>(value)).str());
    llvm::outs() << llvm::formatv("{0}{1,-20} {2}\n", indent, name, shown);
  }
  double lookups = counters["hits"] + counters["misses"];
  if (lookups > 0) {
    llvm::outs() << llvm::formatv("{0}{1,-20} {2:f1} %\n", indent, "hit rate",
                                  100.0 * counters["hits"] / lookups);
  }
}

int runStats(const Store &store, const Args &args) {
  auto index = args.has("--zero") ? Index::openForUpdate(store)
                                  : openIndexForReading(store);
  if (!index) {
    return reportError(index.takeError());
  }
  std::map<std::string, double> counters = index->counters();
  if (args.has("--zero")) {
    if (auto err = index->zeroCounters()) {
      return reportError(std::move(err));
    }
  }
  // host:<host>:<name> are the per-host counters (Index::mergeEvents).
  std::map<std::string, std::map<std::string, double>> perHost;
  for (auto it = counters.begin(); it != counters.end();) {
    llvm::StringRef name = it->first;
    if (name.consume_front("host:")) {
      auto [host, counter] = name.rsplit(':');
      perHost[host.str()][counter.str()] = it->second;
      it = counters.erase(it);
    } else {
      ++it;
    }
  }
  if (args.has("--json")) {
    llvm::json::Object out, hosts;
    for (auto &[name, value] : counters) {
      out[name] = value;
    }
    for (auto &[host, hostCounters] : perHost) {
      llvm::json::Object one;
      for (auto &[name, value] : hostCounters) {
        one[name] = value;
      }
      hosts[host] = std::move(one);
    }
    out["hosts"] = std::move(hosts);
    printJson(std::move(out));
    return Success;
  }
  printCounters(counters, "");
  for (auto &[host, hostCounters] : perHost) {
    llvm::outs() << "host " << host << ":\n";
    printCounters(hostCounters, "  ");
  }
  if (args.has("--zero")) {
    llvm::outs() << "(counters zeroed)\n";
  }
  return Success;
}

int runVerify(const Store &store, const Args &args) {
  bool repair = args.has("--repair");
  std::optional<Index> index;
  if (repair) {
    auto opened = Index::openForUpdate(store);
    if (opened) {
      index.emplace(std::move(*opened));
    } else {
      llvm::consumeError(opened.takeError());
    }
  }
  VerifyReport report = verifyObjects(store, index ? &*index : nullptr, repair);
  for (const std::string &problem : report.layout) {
    llvm::outs() << "DAMAGED " << problem << "\n";
  }
  std::set<std::string> unrepaired;
  for (auto &[key, why] : report.unrepaired) {
    unrepaired.insert(key);
  }
  for (auto &[key, why] : report.bad) {
    bool moved = repair && !unrepaired.count(key);
    llvm::outs() << (moved ? "quarantined " : "BAD ") << key << ": " << why
                 << "\n";
  }
  for (auto &[key, why] : report.unrepaired) {
    llvm::outs() << "NOT QUARANTINED " << key << ": " << why << "\n";
  }
  for (auto &[key, why] : report.unreadable) {
    llvm::outs() << "UNREADABLE " << key << ": " << why
                 << " (left in place: a permission problem is not "
                    "corruption)\n";
  }
  size_t moved = report.bad.size() - report.unrepaired.size();
  llvm::outs() << report.checked << " artifacts checked, " << report.bad.size()
               << " bad"
               << (repair && moved > 0
                       ? " (" + std::to_string(moved) +
                             " moved to quarantine/; they recompile on next "
                             "use)"
                       : std::string())
               << ", " << report.unreadable.size() << " unreadable"
               << (report.layout.empty() ? "" : "; the layout is damaged")
               << "\n";
  bool repaired = repair && report.unrepaired.empty() &&
                  report.unreadable.empty() && report.layout.empty();
  return report.clean() || repaired ? Success : InternalFailure;
}

int runGc(const Store &store, const Args &args, bool prune) {
  auto policy = parseGcPolicy(args, prune);
  if (!policy) {
    return reportError(policy.takeError());
  }
  auto index = Index::openForUpdate(store);
  if (!index) {
    return reportError(index.takeError());
  }
  auto report = collectGarbage(store, *index, *policy);
  if (!report) {
    return reportError(report.takeError());
  }
  const char *verb = policy->dryRun ? "would remove" : "removed";
  for (const std::string &key : report->removed) {
    llvm::outs() << verb << " " << key << "\n";
  }
  llvm::outs() << llvm::formatv(
      "{0} {1} entries ({2}); kept {3} ({4}), {5} too young for the grace "
      "period, {6} under a live lease; swept {7} staging files, {8} dead "
      "leases, {9} expired failures, {10} old format versions\n",
      verb, report->removed.size(), humanBytes(report->freedBytes),
      report->kept, humanBytes(report->keptBytes), report->skippedYoung,
      report->skippedLeased, report->tmpSwept, report->leasesBroken,
      report->failedExpired, report->versionsRemoved);
  return Success;
}

/// `coverage`: each graph in the run log whose key the manifest lacks,
/// with the key fields that differ from the nearest it has. Exit 1 when
/// there is one.
int runCoverage(const Store &store, const Args &args) {
  std::optional<std::string> logPath = args.value("--run-log");
  if (!logPath) {
    return fail("cache coverage takes --run-log FILE (KILN_CACHE_RUN_LOG of "
                "the run)");
  }
  std::string manifestPath =
      args.value("--manifest").value_or(defaultManifestPath(store));
  auto manifest = readManifest(manifestPath);
  if (!manifest) {
    return reportError(manifest.takeError());
  }
  auto used = readRunLog(*logPath);
  if (!used) {
    return reportError(used.takeError());
  }
  std::set<std::string> precompiled, seen;
  for (const CoverageEntry &e : *manifest) {
    precompiled.insert(e.key);
  }
  std::vector<const CoverageEntry *> missing;
  for (const CoverageEntry &e : *used) {
    if (seen.insert(e.key).second && !precompiled.count(e.key)) {
      missing.push_back(&e);
    }
  }
  llvm::outs() << llvm::formatv("coverage: the run used {0} graphs; {1} "
                                "precompiled, {2} not\n",
                                seen.size(), seen.size() - missing.size(),
                                missing.size());
  for (const CoverageEntry *e : missing) {
    llvm::outs() << llvm::formatv("  {0} (inputs {1}; world size {2}) key "
                                  "{3}, {4} in the run: {5}\n",
                                  e->graph, summarizeInputs(e->inputs),
                                  e->worldSize,
                                  e->key.substr(0, 16), e->outcome,
                                  explainMiss(*e, *manifest));
  }
  return missing.empty() ? Success : InternalFailure;
}

int runDoctor(const Store &store) {
  return printDoctorChecks("cache root " + store.root().str(),
                           diagnose(store));
}

} // namespace

int runCacheCommand(llvm::ArrayRef<std::string> argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" ||
      argv[0] == "help") {
    llvm::outs() << kUsage;
    return argv.empty() ? BadInput : Success;
  }
  std::string command = argv[0];
  auto args = parseArgs(
      argv.drop_front(),
      {"--cache", "--root", "--max-size", "--max-age", "--keep-versions",
       "--grace", "--older-than", "--manifest", "--run-log"},
      {"--json", "--zero", "--repair", "--explain", "--dry-run", "--version"},
      /*compileOptions=*/command == "key");
  if (!args) {
    return reportError(llvm::createStringError(
        "cache " + command + ": " + llvm::toString(args.takeError())));
  }
  if (command == "key") {
    return runKey(*args);
  }
  // --cache, as kiln precompile spells it; --root is the older spelling.
  std::string root = args->value("--cache").value_or(
      args->value("--root").value_or(Cache::defaultRoot()));
  if (isRemoteUrl(root) && command != "coverage") {
    return runRemoteCacheCommand(command, root, *args);
  }
  auto store = Store::open(root, Store::optionsFromEnvironment());
  if (!store) {
    return reportError(store.takeError());
  }
  if (command == "ls") {
    return runList(*store, *args);
  }
  if (command == "show") {
    return runShow(*store, *args);
  }
  if (command == "stats") {
    return runStats(*store, *args);
  }
  if (command == "verify") {
    return runVerify(*store, *args);
  }
  if (command == "gc" || command == "prune") {
    return runGc(*store, *args, command == "prune");
  }
  if (command == "doctor") {
    return runDoctor(*store);
  }
  if (command == "coverage") {
    return runCoverage(*store, *args);
  }
  if (command == "export" || command == "import") {
    if (args->positional.size() != 1) {
      return fail("cache " + command + " takes one file");
    }
    if (command == "export") {
      auto report = exportCache(*store, args->positional[0]);
      if (!report) {
        return reportError(report.takeError());
      }
      for (auto &[key, why] : report->skipped) {
        llvm::outs() << "skipped " << key << ": " << why << "\n";
      }
      llvm::outs() << "exported " << report->exported << " artifacts to "
                   << args->positional[0] << ", skipped "
                   << report->skipped.size() << " invalid entries\n";
      return report->skipped.empty() ? Success : InternalFailure;
    }
    auto counts = importCache(*store, args->positional[0]);
    if (!counts) {
      return reportError(counts.takeError());
    }
    llvm::outs() << "imported " << counts->first << " artifacts, skipped "
                 << counts->second << " invalid entries\n";
    return counts->second == 0 ? Success : InternalFailure;
  }
  if (command == "index") {
    if (args->positional.size() != 1 || args->positional[0] != "rebuild") {
      return fail("cache index takes 'rebuild'");
    }
    auto index = Index::openForUpdate(*store);
    if (!index) {
      return reportError(index.takeError());
    }
    if (auto err = index->rebuild()) {
      return reportError(std::move(err));
    }
    llvm::outs() << "index rebuilt: " << index->entries().size()
                 << " entries\n";
    return Success;
  }
  return fail("unknown cache command '" + command + "' (kiln cache --help)");
}

} // namespace kiln::tool
