//===- CacheFaultTest.cpp - many processes, killed writers, stampedes ----===//
//
// cache.md's fault tests that need more than one process: each runs
// kiln-cache-test-worker processes (getOrCompile with the stand-in compiler)
// against one root.
//
//===----------------------------------------------------------------------===//

#include "cache/Index.h"
#include "compiler/graph/GraphFile.h"
#include "test/cache/StandInCompiler.h"
#include "test/support/TestSupport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <fstream>
#include <map>
#include <set>
#include <sys/stat.h>
#include <utime.h>

using namespace kiln;

namespace {

class CacheFaultTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root = path("root");
    for (int i = 0; i < 3; ++i) {
      graphs.push_back(writeGraph("g" + std::to_string(i), i + 1.0));
    }
  }

  std::string writeGraph(const std::string &name, double scale) {
    auto context = test::makeContext();
    auto graph = test::smallStepGraph(*context, name, scale);
    EXPECT_TRUE(static_cast<bool>(graph));
    std::string file = path(name + ".kgraph.pb");
    EXPECT_FALSE(static_cast<bool>(graph::writeGraphFile(*graph, file)));
    return file;
  }

  struct Worker {
    llvm::sys::ProcessInfo process;
    std::string output;
  };

  /// Starts a worker on `graph` with extra environment entries.
  Worker start(const std::string &graph, std::vector<std::string> env) {
    static int counter = 0;
    Worker w;
    w.output = path("out-" + std::to_string(counter++));
    std::string binary = std::string(KILN_BIN_DIR) + "/kiln-cache-test-worker";
    std::vector<llvm::StringRef> args = {binary, root, graph};
    for (char **e = environ; *e; ++e) {
      if (!llvm::StringRef(*e).starts_with("KILN_")) {
        env.push_back(*e);
      }
    }
    std::vector<llvm::StringRef> envRefs(env.begin(), env.end());
    std::string errors = w.output + ".err";
    std::optional<llvm::StringRef> redirects[] = {
        std::nullopt, llvm::StringRef(w.output), llvm::StringRef(errors)};
    std::string error;
    w.process =
        llvm::sys::ExecuteNoWait(binary, args, envRefs, redirects, 0, &error);
    EXPECT_TRUE(error.empty()) << error;
    return w;
  }

  /// Waits for a worker; returns its exit status (negative: killed).
  int finish(Worker &w, std::string *stdoutText = nullptr) {
    std::string error;
    llvm::sys::ProcessInfo done =
        llvm::sys::Wait(w.process, /*SecondsToWait=*/120, &error);
    if (stdoutText) {
      std::ifstream in(w.output);
      *stdoutText = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return done.ReturnCode;
  }

  int compileCount(const std::string &log) {
    std::ifstream in(log);
    int lines = 0;
    for (std::string line; std::getline(in, line);) {
      ++lines;
    }
    return lines;
  }

  std::string root;
  std::vector<std::string> graphs;
};

TEST_F(CacheFaultTest, WriterKilledAtEveryPublishStepLeavesNoPartialEntry) {
  for (const char *step : {"open", "write", "fsync", "link"}) {
    llvm::sys::fs::remove_directories(root);
    Worker killed =
        start(graphs[0], {std::string("KILN_CACHE_FAULT=kill@") + step});
    EXPECT_NE(finish(killed), 0) << step;
    // No visible entry, whatever the step.
    std::error_code ec;
    int objects = 0;
    for (llvm::sys::fs::recursive_directory_iterator
             it(root + "/kiln-1/objects", ec),
         end;
         it != end && !ec; it.increment(ec)) {
      objects += it->type() == llvm::sys::fs::file_type::regular_file;
    }
    EXPECT_EQ(objects, 0) << step;
    // The killed writer's lease does not block the next run, which compiles
    // and publishes; the run after it hits.
    std::string out;
    Worker next = start(graphs[0], {});
    EXPECT_EQ(finish(next, &out), 0) << step;
    EXPECT_TRUE(llvm::StringRef(out).starts_with("compiled ")) << step << out;
    Worker again = start(graphs[0], {});
    EXPECT_EQ(finish(again, &out), 0) << step;
    EXPECT_TRUE(llvm::StringRef(out).starts_with("hit ")) << step << out;
  }
}

TEST_F(CacheFaultTest, StampedeOf32ProcessesCompilesOnce) {
  std::string log = path("compiles.log");
  std::vector<Worker> workers;
  for (int i = 0; i < 32; ++i) {
    workers.push_back(start(graphs[0], {"KILN_TEST_COMPILE_SECONDS=1",
                                        "KILN_TEST_COMPILE_LOG=" + log}));
  }
  std::set<std::string> results;
  int compiled = 0;
  for (Worker &w : workers) {
    std::string out;
    ASSERT_EQ(finish(w, &out), 0) << out;
    llvm::StringRef line = llvm::StringRef(out).trim();
    auto [outcome, rest] = line.split(' ');
    compiled += outcome == "compiled";
    results.insert(rest.str()); // key and artifact hash
  }
  EXPECT_EQ(compileCount(log), 1);
  EXPECT_EQ(compiled, 1);
  EXPECT_EQ(results.size(), 1u) << "processes got different artifacts";
}

TEST_F(CacheFaultTest, RenewedLeaseOutlivesItsTimeout) {
  // A compile three times longer than the lease timeout: renewals keep the
  // lease live, so the second process waits instead of compiling too.
  std::string log = path("compiles.log");
  std::vector<std::string> env = {"KILN_CACHE_LEASE_TIMEOUT=0.5",
                                  "KILN_TEST_COMPILE_SECONDS=1.5",
                                  "KILN_TEST_COMPILE_LOG=" + log};
  Worker first = start(graphs[2], env);
  Worker second = start(graphs[2], env);
  std::string a, b;
  ASSERT_EQ(finish(first, &a), 0) << a;
  ASSERT_EQ(finish(second, &b), 0) << b;
  EXPECT_EQ(compileCount(log), 1) << a << b;
}

TEST_F(CacheFaultTest, StaleLeaseOfAnotherHostIsBrokenNotWaitedOn) {
  std::string log = path("compiles.log");
  // A lease from a host that died: never renewed.
  llvm::sys::fs::create_directories(root + "/kiln-1/leases");
  Worker probe = start(graphs[1], {"KILN_CACHE_READONLY=1"});
  std::string out;
  finish(probe, &out); // learns the key (read-only: publishes nothing)
  std::string key =
      llvm::StringRef(out).split(' ').second.split(' ').first.str();
  ASSERT_EQ(key.size(), 64u) << out;
  std::string lease = root + "/kiln-1/leases/" + key + ".lease";
  std::ofstream(lease) << "dead-host 12345\n";
  struct utimbuf old = {1, 1};
  ::utime(lease.c_str(), &old);
  Worker w = start(graphs[1], {"KILN_CACHE_LEASE_TIMEOUT=5",
                               "KILN_TEST_COMPILE_LOG=" + log});
  ASSERT_EQ(finish(w, &out), 0) << out;
  EXPECT_TRUE(llvm::StringRef(out).starts_with("compiled ")) << out;
  EXPECT_EQ(compileCount(log), 1);

  // A fresh lease nobody renews: waited on for the timeout, then broken.
  llvm::sys::fs::remove_directories(root + "/kiln-1/objects");
  std::ofstream(lease) << "dead-host 12345\n";
  Worker waiter = start(graphs[1], {"KILN_CACHE_LEASE_TIMEOUT=1"});
  ASSERT_EQ(finish(waiter, &out), 0) << out;
  EXPECT_TRUE(llvm::StringRef(out).starts_with("compiled ")) << out;
}

TEST_F(CacheFaultTest, TwoHostsShareOneRoot) {
  std::string log = path("compiles.log");
  std::vector<Worker> workers;
  for (const char *host : {"host-a", "host-b"}) {
    for (int i = 0; i < 6; ++i) {
      workers.push_back(
          start(graphs[i % 3], {std::string("KILN_HOST_ID=") + host,
                                "KILN_TEST_COMPILE_SECONDS=0.5",
                                "KILN_TEST_COMPILE_LOG=" + log}));
    }
  }
  std::map<std::string, std::set<std::string>> artifactsByKey;
  for (Worker &w : workers) {
    std::string out;
    ASSERT_EQ(finish(w, &out), 0) << out;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::SplitString(out, parts);
    ASSERT_EQ(parts.size(), 3u) << out;
    artifactsByKey[parts[1].str()].insert(parts[2].str());
  }
  // Three graphs, three keys, each compiled once across both hosts.
  EXPECT_EQ(artifactsByKey.size(), 3u);
  for (auto &[key, artifacts] : artifactsByKey) {
    EXPECT_EQ(artifacts.size(), 1u) << key;
  }
  EXPECT_EQ(compileCount(log), 3);
  // Each host logged its own events; merged, they account for all lookups.
  EXPECT_TRUE(llvm::sys::fs::exists(root + "/kiln-1/events/host-a.log"));
  EXPECT_TRUE(llvm::sys::fs::exists(root + "/kiln-1/events/host-b.log"));
  auto store = cache::Store::open(root);
  ASSERT_TRUE(static_cast<bool>(store));
  auto index = cache::Index::openForUpdate(*store);
  ASSERT_TRUE(static_cast<bool>(index));
  auto counters = index->counters();
  EXPECT_EQ(counters["compiles"], 3);
  EXPECT_EQ(counters["hits"] + counters["compiles"], 12);
}

} // namespace
