//===- CacheLatency.cpp - how fast the cache answers ----------------------===//
//
// Issue 5's cache benchmarks, with the stand-in compiler (the cache does not
// care what compiled an artifact):
//   - warm lookup + verify + load latency, p50 and p99, for 1 MB and 100 MB
//     artifacts (goal: p50 under 1 ms for 1 MB);
//   - lookups per second from 8 concurrent processes;
//   - the overhead of a cold miss over the bare compile;
//   - per remote tier (--remote URL, repeatable; a server already running):
//     a compile's upload cost, and a first hit served from the remote to a
//     fresh local directory, for 1 MB and 100 MB artifacts.
//
//   build/bin/kiln-bench-cache [--root DIR] [--remote URL]...
//   (default root: a fresh temporary dir)
//
//===----------------------------------------------------------------------===//

#include "cache/Cache.h"
#include "compiler/builder/GraphBuilder.h"
#include "dialects/KilnDialects.h"
#include "test/cache/StandInCompiler.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace kiln;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

proto::Graph makeGraph(mlir::MLIRContext &context, int variant) {
  auto graph = test::smallStepGraph(context, "bench-" + std::to_string(variant),
                                    1.0 + variant);
  if (!graph) {
    std::fprintf(stderr, "kiln-bench-cache: %s\n",
                 llvm::toString(graph.takeError()).c_str());
    std::exit(1);
  }
  return *graph;
}

cache::Cache openCache(const std::string &root) {
  auto c = cache::Cache::open(root);
  if (!c) {
    std::fprintf(stderr, "kiln-bench-cache: %s\n",
                 llvm::toString(c.takeError()).c_str());
    std::exit(1);
  }
  return std::move(*c);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

void warmLatency(const std::string &root, mlir::MLIRContext &context,
                 size_t bytes, int variant, int reps) {
  ::setenv("KILN_TEST_ARTIFACT_BYTES", std::to_string(bytes).c_str(), 1);
  cache::Cache c = openCache(root);
  proto::Graph g = makeGraph(context, variant);
  if (auto fill = c.getOrCompile(g, {}, test::standInCompile); !fill) {
    std::fprintf(stderr, "kiln-bench-cache: %s\n",
                 llvm::toString(fill.takeError()).c_str());
    std::exit(1);
  }
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    double start = now();
    auto hit = c.getOrCompile(g, {}, test::standInCompile);
    samples.push_back(now() - start);
    if (!hit || hit->outcome != cache::Outcome::Hit) {
      std::fprintf(stderr, "kiln-bench-cache: expected a hit\n");
      std::exit(1);
    }
  }
  std::printf("  warm hit, %6.1f MB artifact: p50 %8.3f ms  p99 %8.3f ms  "
              "(%d lookups; key + verify + load)%s\n",
              bytes / 1e6, percentile(samples, 0.5) * 1e3,
              percentile(samples, 0.99) * 1e3, reps,
              bytes <= 1000000 ? "  goal p50 < 1 ms" : "");
  ::unsetenv("KILN_TEST_ARTIFACT_BYTES");
}

void concurrentLookups(const std::string &root, mlir::MLIRContext &context) {
  ::setenv("KILN_TEST_ARTIFACT_BYTES", "1000000", 1);
  {
    cache::Cache c = openCache(root);
    for (int v = 0; v < 8; ++v) {
      auto filled =
          c.getOrCompile(makeGraph(context, 100 + v), {}, test::standInCompile);
      if (!filled) {
        std::fprintf(stderr, "kiln-bench-cache: %s\n",
                     llvm::toString(filled.takeError()).c_str());
        std::exit(1);
      }
    }
  }
  constexpr int kProcesses = 8;
  constexpr double kSeconds = 2.0;
  int pipes[kProcesses][2];
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    if (::pipe(pipes[p]) != 0) {
      std::exit(1);
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      cache::Cache c = openCache(root);
      proto::Graph g = makeGraph(context, 100 + p);
      long count = 0;
      double end = now() + kSeconds;
      while (now() < end) {
        auto hit = c.getOrCompile(g, {}, test::standInCompile);
        count += hit && hit->outcome == cache::Outcome::Hit;
      }
      ssize_t n = ::write(pipes[p][1], &count, sizeof(count));
      (void)n;
      ::_exit(0);
    }
    children.push_back(pid);
  }
  long total = 0;
  for (int p = 0; p < kProcesses; ++p) {
    long count = 0;
    if (::read(pipes[p][0], &count, sizeof(count)) == sizeof(count)) {
      total += count;
    }
    ::waitpid(children[p], nullptr, 0);
  }
  std::printf("  %d processes, 1 MB artifacts: %.0f lookups/s in all "
              "(%ld hits in %.0f s)\n",
              kProcesses, total / kSeconds, total, kSeconds);
  ::unsetenv("KILN_TEST_ARTIFACT_BYTES");
}

void coldMiss(const std::string &root, mlir::MLIRContext &context) {
  ::setenv("KILN_TEST_ARTIFACT_BYTES", "1000000", 1);
  cache::Cache c = openCache(root);
  constexpr int kReps = 20;
  double bare = 0, cached = 0;
  for (int i = 0; i < kReps; ++i) {
    proto::Graph g = makeGraph(context, 1000 + i);
    double start = now();
    auto compiled = test::standInCompile(g, {});
    bare += now() - start;
    if (!compiled) {
      std::exit(1);
    }
    start = now();
    auto miss = c.getOrCompile(g, {}, test::standInCompile);
    cached += now() - start;
    if (!miss || miss->outcome != cache::Outcome::Compiled) {
      std::fprintf(stderr, "kiln-bench-cache: expected a compile\n");
      std::exit(1);
    }
  }
  std::printf("  cold miss, 1 MB artifact: bare compile %.3f ms, through the "
              "cache %.3f ms: overhead %.3f ms (key, lease, publish with "
              "fsync, graph)\n",
              bare / kReps * 1e3, cached / kReps * 1e3,
              (cached - bare) / kReps * 1e3);
  ::unsetenv("KILN_TEST_ARTIFACT_BYTES");
}

/// Upload cost and first remote hit for `bytes`-byte artifacts on `url`,
/// each against the same compile into a local directory alone.
void remoteFigures(const std::string &url, int tier, const std::string &root,
                   mlir::MLIRContext &context, size_t bytes, int reps) {
  ::setenv("KILN_TEST_ARTIFACT_BYTES", std::to_string(bytes).c_str(), 1);
  double local = 0, uploaded = 0, fetched = 0;
  for (int i = 0; i < reps; ++i) {
    // A fresh graph per rep and per size: every compile is a miss everywhere.
    int variant = 5000 + tier * 1000 + int(bytes % 997) * 10 + i;
    proto::Graph g = makeGraph(context, variant);
    std::string prefix = root + "/remote-" + std::to_string(variant);
    auto timed = [&](const std::string &cacheRoot, const std::string &front,
                     cache::Outcome expected) {
      ::setenv("KILN_CACHE_LOCAL", front.c_str(), 1);
      cache::Cache c = openCache(cacheRoot);
      double start = now();
      auto got = c.getOrCompile(g, {}, test::standInCompile);
      double seconds = now() - start;
      if (!got || got->outcome != expected || c.remoteTier() == nullptr) {
        std::string why = got ? "an unexpected outcome, or the tier failed"
                              : llvm::toString(got.takeError());
        std::fprintf(stderr, "kiln-bench-cache: %s: %s\n", url.c_str(),
                     why.c_str());
        std::exit(1);
      }
      return seconds;
    };
    auto start = now();
    auto alone =
        openCache(prefix + "-alone").getOrCompile(g, {}, test::standInCompile);
    if (!alone) {
      std::fprintf(stderr, "kiln-bench-cache: %s\n",
                   llvm::toString(alone.takeError()).c_str());
      std::exit(1);
    }
    local += now() - start;
    uploaded += timed(url, prefix + "-up", cache::Outcome::Compiled);
    fetched += timed(url, prefix + "-down", cache::Outcome::Hit);
  }
  std::printf("  %s, %6.1f MB artifact: cold miss %8.2f ms (a directory "
              "alone %8.2f ms: upload %8.2f ms); first hit from the remote "
              "%8.2f ms  (%d reps)\n",
              url.c_str(), bytes / 1e6, uploaded / reps * 1e3,
              local / reps * 1e3, (uploaded - local) / reps * 1e3,
              fetched / reps * 1e3, reps);
  ::unsetenv("KILN_TEST_ARTIFACT_BYTES");
  ::unsetenv("KILN_CACHE_LOCAL");
}

} // namespace

int main(int argc, char **argv) {
  std::string root;
  std::vector<std::string> remotes;
  bool ownRoot = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--root") {
      root = argv[i + 1];
      ownRoot = false;
    } else if (flag == "--remote") {
      remotes.push_back(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: kiln-bench-cache [--root DIR] "
                           "[--remote URL]...\n");
      return 2;
    }
  }
  if (ownRoot) {
    llvm::SmallString<128> dir;
    if (llvm::sys::fs::createUniqueDirectory("kiln-bench-cache", dir)) {
      return 1;
    }
    root = dir.str().str();
  }
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::printf("cache at %s\n", root.c_str());
  warmLatency(root, context, 1000000, 1, 2000);
  warmLatency(root, context, 100000000, 2, 50);
  concurrentLookups(root, context);
  coldMiss(root, context);
  for (size_t tier = 0; tier < remotes.size(); ++tier) {
    remoteFigures(remotes[tier], tier, root, context, 1000000, 10);
    remoteFigures(remotes[tier], tier, root, context, 100000000, 3);
  }
  if (ownRoot) {
    llvm::sys::fs::remove_directories(root);
  }
  return 0;
}
