//===- Precompile.cpp - collect graphs, compile them in a process pool ----===//

#include "tools/kiln/Precompile.h"

#include "cache/Cache.h"
#include "cache/CollectedGraphs.h"
#include "cache/Coverage.h"
#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphFile.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace kiln::tool {

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int exitStatus(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return 1;
}

/// What a compile child reports through its pipe: one JSON object.
std::string childResult(GraphJob &job, const PrecompileOptions &options) {
  auto graph = graph::readGraphFile(job.path);
  llvm::json::Object out;
  auto finish = [&](llvm::StringRef status, llvm::StringRef error) {
    out["status"] = status.str();
    out["error"] = error.str();
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(out));
    return text;
  };
  if (!graph) {
    return finish("failed", llvm::toString(graph.takeError()));
  }
  auto compileOptions = CompileOptions::parse(job.flags);
  if (!compileOptions) {
    return finish("failed", llvm::toString(compileOptions.takeError()));
  }
  cache::GetOptions get = cache::GetOptions::fromEnvironment();
  get.retryFailed = get.retryFailed || options.retryFailed;
  // Precompiling is what strict mode's runs need done first; a precompile
  // is no part of a run's log.
  if (get.mode == cache::CacheMode::Strict) {
    get.mode = cache::CacheMode::ReadWrite;
  }
  get.runLog.clear();
  auto cache = cache::Cache::open(options.cacheRoot,
                                  cache::Store::optionsFromEnvironment(),
                                  cache::LeaseOptions::fromEnvironment(), get);
  if (!cache) {
    return finish("failed", llvm::toString(cache.takeError()));
  }
  auto result =
      cache->getOrCompile(*graph, *compileOptions, kiln::compileToBytes);
  if (!result) {
    return finish("failed", llvm::toString(result.takeError()));
  }
  cache::Result &got = *result;
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(cache->store().objectPath(got.key.hex), size)) {
    size = 0;
  }
  out["bytes"] = static_cast<int64_t>(size);
  out["compile_seconds"] = got.compileSeconds;
  switch (got.outcome) {
  case cache::Outcome::Hit:
    return finish("hit", "");
  case cache::Outcome::Compiled:
    return finish("compiled", "");
  case cache::Outcome::InMemory:
    // Compiled, but nobody will find it: precompile exists to fill the
    // cache, so this graph is not done.
    out["bytes"] = 0;
    return finish("unpublished",
                  "compiled, but not published into the cache: " +
                      got.notPublished);
  }
  return finish("failed", "unknown cache outcome");
}

struct Running {
  size_t job;
  pid_t pid;
  int pipe;
  std::string output;
  double started;
};

/// Starts a child compiling jobs[index]; the child writes its result to a
/// pipe and exits. Forking (not exec) reuses this process's loaded code; the
/// parent has no threads, so the child starts from a consistent state.
std::optional<Running> startChild(std::vector<GraphJob> &jobs, size_t index,
                                  const PrecompileOptions &options) {
  int fds[2];
  if (::pipe(fds) != 0) {
    jobs[index].status = "failed";
    jobs[index].error = std::string("cannot create a pipe: ") + strerror(errno);
    return std::nullopt;
  }
  llvm::outs().flush();
  llvm::errs().flush();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    jobs[index].status = "failed";
    jobs[index].error = std::string("cannot fork: ") + strerror(errno);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string text = childResult(jobs[index], options);
    size_t written = 0;
    while (written < text.size()) {
      ssize_t n = ::write(fds[1], text.data() + written, text.size() - written);
      if (n <= 0) {
        break;
      }
      written += static_cast<size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  ++jobs[index].attempts;
  return Running{index, pid, fds[0], "", now()};
}

void drain(Running &run) {
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(run.pipe, buffer, sizeof buffer);
    if (n <= 0) {
      return;
    }
    run.output.append(buffer, static_cast<size_t>(n));
  }
}

/// Applies a finished child's report to its job.
void finishJob(GraphJob &job, const Running &run, int status) {
  job.seconds += now() - run.started;
  auto parsed = llvm::json::parse(run.output);
  const llvm::json::Object *object = parsed ? parsed->getAsObject() : nullptr;
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
  }
  if (!object) {
    job.status = "failed";
    job.error = WIFSIGNALED(status)
                    ? "the compiler process was killed by signal " +
                          std::to_string(WTERMSIG(status)) + " (" +
                          strsignal(WTERMSIG(status)) + ")"
                    : "the compiler process exited with status " +
                          std::to_string(exitStatus(status)) +
                          " without a result";
    return;
  }
  job.status = object->getString("status").value_or("failed").str();
  job.error = object->getString("error").value_or("").str();
  job.artifactBytes = object->getInteger("bytes").value_or(0);
}

std::string minutesSeconds(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%d:%02d", s / 60, s % 60);
  return text;
}

} // namespace

llvm::Expected<int> collectGraphs(llvm::ArrayRef<std::string> command,
                                  const PrecompileOptions &options,
                                  int worldSize) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    llvm::StringRef entry(*e);
    if (entry.starts_with("KILN_EXTRACT_GRAPHS_ONLY=") ||
        entry.starts_with("KILN_GRAPHS_DIR=") ||
        entry.starts_with("KILN_CACHE_URL=") ||
        entry.starts_with("KILN_COLLECT_WORLD_SIZE=")) {
      continue;
    }
    env.push_back(entry.str());
  }
  if (worldSize > 0) {
    env.push_back("KILN_COLLECT_WORLD_SIZE=" + std::to_string(worldSize));
  }
  env.push_back("KILN_EXTRACT_GRAPHS_ONLY=1");
  env.push_back("KILN_GRAPHS_DIR=" + options.graphsDir);
  env.push_back("KILN_CACHE_URL=" + options.cacheRoot);
  std::vector<char *> envp, argv;
  for (std::string &e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args(command.begin(), command.end());
  for (std::string &a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_t pid;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(),
                          envp.data());
  if (rc != 0) {
    return llvm::createStringError("cannot run the training command '" +
                                   command.front() + "': " + strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return llvm::createStringError(std::string("waiting for '") +
                                     command.front() + "': " + strerror(errno));
    }
  }
  return exitStatus(status);
}

llvm::Expected<std::vector<GraphJob>>
listGraphs(const PrecompileOptions &options) {
  auto collected = cache::listCollectedGraphs(options.graphsDir);
  if (!collected) {
    return collected.takeError();
  }
  std::vector<GraphJob> jobs;
  for (cache::CollectedGraph &recorded : *collected) {
    GraphJob job;
    job.path = recorded.path;
    job.flags = std::move(recorded.flags);
    auto graph = graph::readGraphFile(job.path);
    auto compileOptions = CompileOptions::parse(job.flags);
    if (!graph || !compileOptions) {
      job.status = "failed";
      if (!graph) {
        job.error = llvm::toString(graph.takeError());
        if (!compileOptions) {
          llvm::consumeError(compileOptions.takeError());
        }
      } else {
        job.error = llvm::toString(compileOptions.takeError());
      }
      job.key = recorded.key;
      job.name = recorded.key;
      jobs.push_back(std::move(job));
      continue;
    }
    job.name = graph->name();
    auto key = cache::deriveKey(*graph, *compileOptions);
    if (!key) {
      job.status = "failed";
      job.error = llvm::toString(key.takeError());
      job.key = recorded.key;
    } else {
      job.key = key->hex;
    }
    jobs.push_back(std::move(job));
  }
  // Two files of one key (collected by different compiler builds, say) are
  // one compile.
  std::sort(jobs.begin(), jobs.end(), [](const GraphJob &a, const GraphJob &b) {
    return std::tie(a.key, a.path) < std::tie(b.key, b.path);
  });
  jobs.erase(std::unique(jobs.begin(), jobs.end(),
                         [](const GraphJob &a, const GraphJob &b) {
                           return a.key == b.key;
                         }),
             jobs.end());
  return jobs;
}

std::vector<GraphJob> selectShard(std::vector<GraphJob> jobs,
                                  const PrecompileOptions &options) {
  // A key's shard depends on the key alone, so every machine of a sharded
  // compile agrees without talking to the others.
  if (options.shardCount <= 1) {
    return jobs;
  }
  std::vector<GraphJob> mine;
  for (GraphJob &job : jobs) {
    uint64_t prefix = 0;
    llvm::StringRef(job.key).take_front(15).getAsInteger(16, prefix);
    if (static_cast<int>(prefix % options.shardCount) == options.shardIndex) {
      mine.push_back(std::move(job));
    }
  }
  return mine;
}

namespace {

bool isLeaseFileName(llvm::StringRef name) {
  // Lease::tryAcquire stages <name>.lease.tmp-*, breaking a stale one
  // renames it to <name>.lease.broken-*.
  auto [stem, leftover] = name.split(".lease");
  return !stem.empty() && name.contains(".lease") &&
         (leftover.empty() || leftover.starts_with(".tmp-") ||
          leftover.starts_with(".broken-"));
}

/// Removes the regular files of `dir` that `owned` recognises.
llvm::Expected<CleanResult>
removeOwnFiles(llvm::StringRef dir,
               llvm::function_ref<bool(llvm::StringRef)> owned) {
  CleanResult result;
  std::error_code ec;
  std::vector<std::string> names;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    names.push_back(llvm::sys::path::filename(it->path()).str());
  }
  if (ec) {
    return llvm::createStringError("cannot list '" + dir +
                                   "': " + ec.message());
  }
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    struct stat info;
    bool ownFile = owned(name) && ::lstat(path.c_str(), &info) == 0 &&
                   S_ISREG(info.st_mode);
    if (!ownFile) {
      if (result.kept++ == 0) {
        result.firstKept = name;
      }
      continue;
    }
    if (std::error_code ec = llvm::sys::fs::remove(path)) {
      return llvm::createStringError("cannot remove '" + path +
                                     "': " + ec.message());
    }
    ++result.removed;
  }
  return result;
}

} // namespace

llvm::Expected<CleanResult> cleanGraphsDirectory(llvm::StringRef dir) {
  auto result = removeOwnFiles(dir, cache::isCollectedFileName);
  if (!result || result->kept > 0) {
    return result;
  }
  if (std::error_code ec = llvm::sys::fs::remove(dir)) {
    return llvm::createStringError("cannot remove '" + dir +
                                   "': " + ec.message());
  }
  result->removedDirectory = true;
  return result;
}

llvm::Expected<CleanResult> clearLeases(llvm::StringRef dir) {
  return removeOwnFiles(dir, isLeaseFileName);
}

void compileGraphs(std::vector<GraphJob> &jobs,
                   const PrecompileOptions &options) {
  // Largest graphs first (longest-processing-time order): a big graph
  // started last would leave the other workers idle at the end.
  std::vector<std::pair<uint64_t, size_t>> bySize;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].status == "pending") {
      uint64_t size = 0;
      if (llvm::sys::fs::file_size(jobs[i].path, size)) {
        size = 0;
      }
      bySize.push_back({size, i});
    }
  }
  std::stable_sort(bySize.begin(), bySize.end(),
                   [](auto &a, auto &b) { return a.first < b.first; });
  std::vector<size_t> queue; // popped from the back
  for (auto &[size, index] : bySize) {
    queue.push_back(index);
  }
  std::vector<Running> running;
  size_t total = jobs.size(), done = total - queue.size(), failed = 0;
  for (const GraphJob &job : jobs) {
    failed += job.status == "failed";
  }
  bool stopping = failed > 0 && !options.keepGoing;
  double start = now(), finishedSeconds = 0;
  size_t finishedCompiles = 0;
  double lastDraw = 0;

  auto draw = [&](bool force) {
    if (!options.live || (!force && now() - lastDraw < 0.25)) {
      return;
    }
    lastDraw = now();
    std::string eta = "--:--";
    if (finishedCompiles > 0) {
      double perGraph = finishedSeconds / finishedCompiles;
      double remaining = (queue.size() + running.size()) * perGraph /
                         std::max(1, options.jobs);
      eta = minutesSeconds(remaining);
    }
    llvm::errs() << llvm::formatv(
        "\r\033[Kprecompile: {0}/{1} done, {2} running, {3} failed, "
        "elapsed {4}, ETA {5}",
        done, total, running.size(), failed, minutesSeconds(now() - start), eta);
    llvm::errs().flush();
  };

  while (!queue.empty() || !running.empty()) {
    while (!stopping && !queue.empty() &&
           static_cast<int>(running.size()) < options.jobs) {
      size_t index = queue.back();
      queue.pop_back();
      if (auto child = startChild(jobs, index, options)) {
        running.push_back(std::move(*child));
      } else {
        ++done;
        ++failed;
      }
    }
    if (stopping) {
      for (size_t index : queue) {
        jobs[index].status = "skipped";
        jobs[index].error = "not compiled: an earlier graph failed (use "
                            "--keep-going to compile the rest)";
        ++done;
      }
      queue.clear();
    }
    std::vector<pollfd> fds;
    for (const Running &r : running) {
      fds.push_back({r.pipe, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 200);
    for (size_t r = 0; r < running.size();) {
      Running &run = running[r];
      drain(run);
      int status = 0;
      pid_t reaped = ::waitpid(run.pid, &status, WNOHANG);
      bool timedOut = reaped == 0 && now() - run.started > options.timeoutSeconds;
      if (timedOut) {
        ::kill(run.pid, SIGKILL);
        ::waitpid(run.pid, &status, 0);
      }
      if (reaped == 0 && !timedOut) {
        ++r;
        continue;
      }
      drain(run);
      ::close(run.pipe);
      GraphJob &job = jobs[run.job];
      if (timedOut) {
        job.seconds += now() - run.started;
        job.status = "timeout";
        job.error = llvm::formatv("compiling took longer than {0} s (--timeout)",
                                  options.timeoutSeconds)
                        .str();
      } else {
        finishJob(job, run, status);
      }
      bool retriable = job.status == "failed" || job.status == "timeout";
      // An unpublished graph compiled fine: compiling it again would fail to
      // publish the same way (a full or read-only cache).
      bool failedNow = retriable || job.status == "unpublished";
      if (retriable && job.attempts <= options.maxRetries) {
        queue.push_back(run.job); // retry
      } else {
        ++done;
        if (failedNow) {
          ++failed;
          stopping = !options.keepGoing;
        } else {
          finishedSeconds += job.seconds;
          ++finishedCompiles;
        }
        if (!options.live) {
          llvm::errs() << llvm::formatv("precompile: [{0}/{1}] {2} {3} {4} ({5:f2} s){6}\n",
                                        done, total, job.status,
                                        job.key.substr(0, 16), job.name,
                                        job.seconds,
                                        job.error.empty() ? "" : ": " + job.error);
        }
      }
      running.erase(running.begin() + static_cast<long>(r));
    }
    draw(false);
  }
  draw(true);
  if (options.live) {
    llvm::errs() << "\n";
  }
}

llvm::Error writeCoverage(const std::vector<GraphJob> &jobs,
                          const PrecompileOptions &options) {
  std::vector<cache::CoverageEntry> entries;
  for (const GraphJob &job : jobs) {
    if (job.status != "hit" && job.status != "compiled") {
      continue;
    }
    auto graph = graph::readGraphFile(job.path);
    auto compileOptions = CompileOptions::parse(job.flags);
    if (!graph || !compileOptions) {
      llvm::consumeError(graph.takeError());
      llvm::consumeError(compileOptions.takeError());
      continue; // it compiled from this very file: not reached
    }
    auto key = cache::deriveKey(*graph, *compileOptions);
    if (!key) {
      return key.takeError();
    }
    entries.push_back(cache::describeGraph(*graph, *compileOptions, *key));
  }
  if (llvm::Error error = cache::writeManifest(options.manifestPath, entries)) {
    return error;
  }
  if (!cache::isRemoteUrl(options.cacheRoot)) {
    return llvm::Error::success();
  }
  // Hosts that train from the remote tier find the manifest there.
  auto tier = cache::RemoteTier::open(options.cacheRoot);
  llvm::Error uploaded = tier ? (*tier)->publishManifest(
                                    cache::manifestText(entries))
                              : tier.takeError();
  if (uploaded) {
    llvm::errs() << "kiln: warning: " << llvm::toString(std::move(uploaded))
                 << "; the coverage manifest is only in "
                 << options.manifestPath << "\n";
  }
  return llvm::Error::success();
}

llvm::Error reportJobs(const std::vector<GraphJob> &jobs,
                       const PrecompileOptions &options, double wallSeconds) {
  llvm::raw_ostream &os = llvm::outs();
  size_t nameWidth = 5;
  for (const GraphJob &job : jobs) {
    nameWidth = std::max(nameWidth, std::min<size_t>(job.name.size(), 32));
  }
  os << llvm::left_justify("graph", nameWidth) << " "
     << llvm::left_justify("key", 16) << " " << llvm::left_justify("status", 11)
     << " " << llvm::right_justify("seconds", 8) << " "
     << llvm::right_justify("bytes", 10) << "\n";
  std::map<std::string, int> counts;
  for (const GraphJob &job : jobs) {
    ++counts[job.status];
    std::string name = llvm::StringRef(job.name).take_front(32).str();
    std::string key = llvm::StringRef(job.key).take_front(16).str();
    std::string seconds = llvm::formatv("{0:f2}", job.seconds).str();
    std::string bytes = std::to_string(job.artifactBytes);
    os << llvm::left_justify(name, nameWidth) << " "
       << llvm::left_justify(key, 16) << " "
       << llvm::left_justify(job.status, 11) << " "
       << llvm::right_justify(seconds, 8) << " "
       << llvm::right_justify(bytes, 10) << "\n";
  }
  os << llvm::formatv("{0} graphs: {1} compiled, {2} already cached, {3} "
                      "failed, {4} unpublished, {5} timed out, {6} skipped; "
                      "{7:f2} s with -j{8}\n",
                      jobs.size(), counts["compiled"], counts["hit"],
                      counts["failed"], counts["unpublished"],
                      counts["timeout"], counts["skipped"], wallSeconds,
                      options.jobs);
  for (const GraphJob &job : jobs) {
    if (!job.error.empty()) {
      os << "  " << job.status << " " << job.key.substr(0, 16) << " "
         << job.name << ": " << job.error << "\n";
    }
  }
  os.flush();
  if (options.reportPath.empty()) {
    return llvm::Error::success();
  }
  llvm::json::Array graphs;
  for (const GraphJob &job : jobs) {
    graphs.push_back(llvm::json::Object{
        {"graph", job.name},
        {"file", job.path},
        {"key", job.key},
        {"status", job.status},
        {"compile_seconds", job.seconds},
        {"artifact_bytes", job.artifactBytes},
        {"attempts", job.attempts},
        {"error", job.error},
    });
  }
  llvm::json::Object report{
      {"cache", options.cacheRoot},
      {"graphs_dir", options.graphsDir},
      {"jobs", options.jobs},
      {"shard", llvm::formatv("{0}/{1}", options.shardIndex, options.shardCount).str()},
      {"wall_seconds", wallSeconds},
      {"graphs", std::move(graphs)},
  };
  std::string temp = options.reportPath + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(temp, ec);
    if (ec) {
      return llvm::createStringError("cannot write the report '" +
                                     options.reportPath + "': " + ec.message());
    }
    out << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, options.reportPath)) {
    return llvm::createStringError("cannot write the report '" +
                                   options.reportPath + "': " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace kiln::tool
