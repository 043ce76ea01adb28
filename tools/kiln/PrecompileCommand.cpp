//===- PrecompileCommand.cpp - kiln precompile [options] -- <command> -----===//
//
// Parses its own arguments (everything after `--` is the training command,
// passed through untouched) and runs the steps Precompile.h describes.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/Precompile.h"
#include "tools/kiln/ToolSupport.h"

#include "cache/Cache.h"
#include "cache/CollectedGraphs.h"
#include "cache/Coverage.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <thread>
#include <unistd.h>

namespace kiln::tool {

namespace {

constexpr const char *kUsage =
    R"(usage: kiln precompile [options] -- <training command...>
       kiln precompile --command compile|clean|clear-locks [options]

Runs the training command with KILN_EXTRACT_GRAPHS_ONLY=1 (every step call
records its graph and returns zeros without running), then compiles every
unique graph into the cache in parallel.

  --cache DIR           cache root (default $KILN_CACHE_URL, else ~/.cache/kiln);
                        --root DIR is the same
  --graphs DIR          where collected graphs go (default <cache>/kiln-<v>/collected)
  --command C           all (default): collect, then compile; collect; compile
                        (graphs already collected); clean (delete the files
                        collection wrote, and the directory if nothing else
                        is in it); clear-locks (delete every lease file)
  -j N, --jobs N        compiles at a time (default: one per core)
  --max-retries N       retries of a failed or timed-out compile (default 1)
  --timeout SECONDS     per-graph compile time limit, > 0 (default 3600)
  --keep-going          compile the rest after a failure
  --retry-failed        compile graphs the cache remembers as failed
  --world-sizes A,B,... collect once per world size (a job that resizes,
                        as elastic training does): each run's workers see
                        that many workers in all (KILN_COLLECT_WORLD_SIZE)
  --shard I/N           compile only shard I of N (0-based), for job arrays
  --report FILE         write a JSON report: graph, key, status, seconds, bytes
  --manifest FILE       where to write the coverage manifest: each graph's
                        key, name, input shapes, world size and key fields,
                        which KILN_CACHE_MODE=strict runs and `kiln cache
                        coverage` check against (default
                        <cache>/kiln-<v>/coverage.json)
  --no-progress         one line per graph instead of a live progress line
Exit status: 0 when every graph is in the cache; 1 when a graph failed, was
compiled but not published into the cache, or the training command failed
during collection; 2 for bad usage. A training command that records no graph
gets a warning; --command compile with no graphs collected is an error.
)";

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int usageError(const llvm::Twine &message) {
  llvm::errs() << "kiln: error: precompile: " << message
               << " (kiln precompile --help)\n";
  return BadInput;
}

int inputError(const llvm::Twine &message) {
  llvm::errs() << "kiln: error: precompile: " << message << "\n";
  return BadInput;
}

void warning(const llvm::Twine &message) {
  llvm::errs() << "kiln: warning: precompile: " << message << "\n";
}

/// `--command clean` and `--command clear-locks`: only files Kiln wrote are
/// removed, whatever directory the options name.
int cleanUp(llvm::StringRef command, llvm::StringRef dir) {
  bool clean = command == "clean";
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(dir, status)) {
    if (ec == std::errc::no_such_file_or_directory) {
      llvm::outs() << "nothing to remove: '" << dir << "' does not exist\n";
      return Success;
    }
    return inputError("cannot read '" + dir + "': " + ec.message());
  }
  if (!llvm::sys::fs::is_directory(status)) {
    return inputError("'" + dir + "' is not a directory");
  }
  auto result = clean ? cleanGraphsDirectory(dir) : clearLeases(dir);
  if (!result) {
    return reportError(result.takeError());
  }
  llvm::outs() << "removed " << result->removed
               << (clean ? " collected graph files" : " lease files")
               << " from " << dir << "\n";
  if (result->removedDirectory) {
    llvm::outs() << "removed " << dir << "\n";
  }
  if (result->kept > 0 && clean) {
    warning("kept '" + dir + "' and the " + llvm::Twine(result->kept) +
            " entries in it that collection did not write ('" +
            result->firstKept + "', ...)");
  } else if (result->kept > 0) {
    warning("kept the " + llvm::Twine(result->kept) + " entries of '" + dir +
            "' that are not lease files ('" + result->firstKept + "', ...)");
  }
  return Success;
}

/// What the command line asks for.
struct Request {
  PrecompileOptions options;
  /// all, collect, compile, clean or clear-locks.
  std::string command = "all";
  /// The training command after `--`, passed through untouched.
  std::vector<std::string> training;

  bool collects() const { return command == "all" || command == "collect"; }
};

/// Sets the option `name` (spelled `arg` on the command line); `value` reads
/// its value, inline or from the next argument. Returns the exit status of a
/// usage error.
std::optional<int>
applyOption(llvm::StringRef name, llvm::StringRef arg,
            llvm::function_ref<std::optional<std::string>()> value,
            Request &request) {
  PrecompileOptions &options = request.options;
  auto number = [&](int &out, int min) -> bool {
    auto text = value();
    return text && !llvm::StringRef(*text).getAsInteger(10, out) && out >= min;
  };
  if (name == "--keep-going") {
    options.keepGoing = true;
  } else if (name == "--retry-failed") {
    options.retryFailed = true;
  } else if (name == "--no-progress") {
    options.live = false;
  } else if (name == "--cache" || name == "--root") {
    auto v = value();
    if (!v) {
      return usageError(name + " needs a directory");
    }
    options.cacheRoot = *v;
  } else if (name == "--graphs") {
    auto v = value();
    if (!v) {
      return usageError("--graphs needs a directory");
    }
    options.graphsDir = *v;
  } else if (name == "--command") {
    auto v = value();
    if (!v || !llvm::is_contained(
                  {"all", "collect", "compile", "clean", "clear-locks"}, *v)) {
      return usageError("--command takes all, collect, compile, clean or "
                        "clear-locks");
    }
    request.command = *v;
  } else if (name == "-j" || name == "--jobs") {
    if (!number(options.jobs, 1)) {
      return usageError("-j needs a positive number");
    }
  } else if (name == "--max-retries") {
    if (!number(options.maxRetries, 0)) {
      return usageError("--max-retries needs a number >= 0");
    }
  } else if (name == "--timeout") {
    auto v = value();
    if (!v || llvm::StringRef(*v).getAsDouble(options.timeoutSeconds) ||
        !std::isfinite(options.timeoutSeconds) || options.timeoutSeconds <= 0) {
      return usageError("--timeout needs a positive number of seconds");
    }
  } else if (name == "--shard") {
    auto v = value();
    auto [index, count] = llvm::StringRef(v.value_or("")).split('/');
    if (!v || index.getAsInteger(10, options.shardIndex) ||
        count.getAsInteger(10, options.shardCount) || options.shardCount < 1 ||
        options.shardIndex < 0 || options.shardIndex >= options.shardCount) {
      return usageError("--shard takes I/N with 0 <= I < N, e.g. 0/4");
    }
  } else if (name == "--world-sizes") {
    auto v = value();
    llvm::SmallVector<llvm::StringRef> sizes;
    if (v) {
      llvm::StringRef(*v).split(sizes, ',');
    }
    options.worldSizes.clear();
    for (llvm::StringRef size : sizes) {
      int n = 0;
      if (size.trim().getAsInteger(10, n) || n < 1) {
        return usageError("--world-sizes takes positive integers joined by "
                          "commas, e.g. 1,2,4");
      }
      options.worldSizes.push_back(n);
    }
    if (options.worldSizes.empty()) {
      return usageError("--world-sizes takes positive integers joined by "
                        "commas, e.g. 1,2,4");
    }
  } else if (name == "--manifest") {
    auto v = value();
    if (!v) {
      return usageError("--manifest needs a file");
    }
    options.manifestPath = *v;
  } else if (name == "--report") {
    auto v = value();
    if (!v) {
      return usageError("--report needs a file");
    }
    options.reportPath = *v;
  } else {
    return usageError("unknown option '" + arg + "'");
  }
  return std::nullopt;
}

/// Reads the command line into `request`. Returns the exit status when the
/// command ends here: --help, or a usage error.
std::optional<int> parseArguments(llvm::ArrayRef<std::string> argv,
                                  Request &request) {
  for (size_t i = 0; i < argv.size(); ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--") {
      request.training.assign(argv.begin() + i + 1, argv.end());
      break;
    }
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      return Success;
    }
    auto [name, inlineValue] = arg.split('=');
    bool hasInline = arg.contains('=');
    // -j8 is -j 8, as make spells it.
    if (name.starts_with("-j") && name.size() > 2) {
      inlineValue = name.drop_front(2);
      name = "-j";
      hasInline = true;
    }
    auto value = [&]() -> std::optional<std::string> {
      if (hasInline) {
        return inlineValue.str();
      }
      if (i + 1 < argv.size()) {
        return argv[++i];
      }
      return std::nullopt;
    };
    if (std::optional<int> status = applyOption(name, arg, value, request)) {
      return status;
    }
  }
  if (request.collects() && request.training.empty()) {
    return usageError("give the training command after --");
  }
  if (!request.collects() && !request.training.empty()) {
    return usageError("--command " + request.command +
                      " takes no training command");
  }
  return std::nullopt;
}

/// Opens the cache and settles where the graphs go. The directory is made
/// absolute because the training command finds it in KILN_GRAPHS_DIR from
/// whatever directory it runs in.
llvm::Expected<cache::Store> openCache(PrecompileOptions &options) {
  if (options.cacheRoot.empty()) {
    options.cacheRoot = cache::Cache::defaultRoot();
  }
  auto store = cache::Store::open(options.cacheRoot,
                                  cache::Store::optionsFromEnvironment());
  if (!store) {
    return store.takeError();
  }
  // A remote tier stays the root the compiles publish to (and upload from).
  if (!cache::isRemoteUrl(options.cacheRoot)) {
    options.cacheRoot = store->root().str();
  }
  if (options.manifestPath.empty()) {
    options.manifestPath = cache::defaultManifestPath(*store);
  }
  if (options.graphsDir.empty()) {
    options.graphsDir = cache::defaultCollectedDir(*store);
  } else {
    llvm::SmallString<256> absolute(options.graphsDir);
    llvm::sys::fs::make_absolute(absolute);
    llvm::sys::path::remove_dots(absolute);
    options.graphsDir = absolute.str().str();
  }
  return store;
}

/// Refuses, before anything runs, a graphs directory or cache the command
/// cannot use. Returns the exit status of the refusal.
std::optional<int> checkPlaces(const Request &request,
                               const cache::Store &store) {
  const PrecompileOptions &options = request.options;
  bool graphsExist = llvm::sys::fs::exists(options.graphsDir);
  if (graphsExist && !llvm::sys::fs::is_directory(options.graphsDir)) {
    return inputError("--graphs '" + options.graphsDir +
                      "' is not a directory");
  }
  if (request.command == "compile" && !graphsExist) {
    return inputError("no graphs were collected: '" + options.graphsDir +
                      "' does not exist (collect them first: --command "
                      "collect)");
  }
  if (request.command != "collect" && store.options().readOnly) {
    return inputError("the cache '" + options.cacheRoot +
                      "' is read-only (KILN_CACHE_READONLY): there is nowhere "
                      "to put the compiled graphs");
  }
  return std::nullopt;
}

/// Compiles the jobs, prints the summary (and --report), and says whether
/// the whole run succeeded.
int compileAndReport(std::vector<GraphJob> &jobs,
                     const PrecompileOptions &options, double start,
                     int collectStatus) {
  llvm::errs() << "precompile: " << jobs.size() << " graphs"
               << (options.shardCount > 1
                       ? llvm::formatv(" in shard {0}/{1}", options.shardIndex,
                                       options.shardCount)
                             .str()
                       : "")
               << ", -j" << options.jobs << ", cache " << options.cacheRoot
               << "\n";
  compileGraphs(jobs, options);
  if (llvm::Error error = reportJobs(jobs, options, now() - start)) {
    return reportError(std::move(error));
  }
  if (llvm::Error error = writeCoverage(jobs, options)) {
    return reportError(std::move(error));
  }
  bool allCached = std::all_of(jobs.begin(), jobs.end(), [](const GraphJob &j) {
    return j.status == "hit" || j.status == "compiled";
  });
  return allCached && collectStatus == 0 ? Success : InternalFailure;
}

/// `--command all`, `collect` and `compile`: runs the training command when
/// the command collects, then compiles this shard of what was collected.
int collectAndCompile(const Request &request) {
  const PrecompileOptions &options = request.options;
  double start = now();
  int collectStatus = 0;
  if (request.collects()) {
    std::vector<int> sizes = options.worldSizes;
    if (sizes.empty()) {
      sizes.push_back(0); // the command's own
    }
    for (int size : sizes) {
      llvm::errs() << "precompile: collecting graphs"
                   << (size > 0 ? " at world size " + std::to_string(size)
                                : std::string())
                   << ": " << llvm::join(request.training, " ") << "\n";
      auto status = collectGraphs(request.training, options, size);
      if (!status) {
        return reportError(status.takeError());
      }
      collectStatus = collectStatus ? collectStatus : *status;
    }
  }
  auto jobs = listGraphs(options);
  if (!jobs) {
    return reportError(jobs.takeError());
  }
  if (jobs->empty()) {
    if (request.command == "compile") {
      return inputError("no graphs were collected in '" + options.graphsDir +
                        "' (collect them first: --command collect)");
    }
    if (collectStatus == 0) {
      warning("the training command recorded no graph in '" +
              options.graphsDir +
              "': it ran no Kiln step (KILN_EXTRACT_GRAPHS_ONLY=1 makes every "
              "step record its graph)");
    }
  }
  *jobs = selectShard(std::move(*jobs), options);
  if (collectStatus != 0) {
    llvm::errs() << "kiln: error: precompile: the training command failed "
                    "during collection (exit status "
                 << collectStatus << "); compiling the " << jobs->size()
                 << " graphs it recorded before it stopped\n";
  }
  if (request.command == "collect") {
    llvm::outs() << jobs->size() << " graphs collected in " << options.graphsDir
                 << "\n";
    return collectStatus == 0 ? Success : InternalFailure;
  }
  return compileAndReport(*jobs, options, start, collectStatus);
}

} // namespace

int runPrecompileCommand(llvm::ArrayRef<std::string> argv) {
  Request request;
  request.options.jobs =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  request.options.live = ::isatty(2);
  if (std::optional<int> status = parseArguments(argv, request)) {
    return *status;
  }
  auto store = openCache(request.options);
  if (!store) {
    return reportError(store.takeError());
  }
  if (request.command == "clean") {
    return cleanUp(request.command, request.options.graphsDir);
  }
  if (request.command == "clear-locks") {
    return cleanUp(request.command,
                   llvm::sys::path::parent_path(store->leasePath("x")));
  }
  if (std::optional<int> status = checkPlaces(request, *store)) {
    return *status;
  }
  return collectAndCompile(request);
}

} // namespace kiln::tool
