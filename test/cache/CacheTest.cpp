//===- CacheTest.cpp - keys, lookups, faults, index and gc in one process -===//

#include "cache/Cache.h"
#include "cache/Maintenance.h"
#include "compiler/builder/GraphBuilder.h"
#include "compiler/graph/GraphFile.h"
#include "test/cache/StandInCompiler.h"
#include "test/support/TestSupport.h"

#include "llvm/Support/FileSystem.h"

#include <zip.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;
using namespace kiln::cache;

namespace {

proto::Graph makeGraph(llvm::StringRef name, double scale = 0.5) {
  auto context = test::makeContext();
  auto graph = test::smallStepGraph(*context, name, scale);
  EXPECT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  return *graph;
}

/// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  ScopedEnv(const char *name, const char *value) : name(name) {
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { ::unsetenv(name); }
  const char *name;
};

class CacheTest : public test::TempDirTest {
protected:
  Cache open(StoreOptions store = {}, GetOptions get = {}) {
    auto cache = Cache::open(path("root"), store, LeaseOptions(), get);
    EXPECT_TRUE(static_cast<bool>(cache)) << llvm::toString(cache.takeError());
    return std::move(*cache);
  }
  Result get(Cache &cache, const proto::Graph &graph) {
    auto result =
        cache.getOrCompile(graph, CompileOptions(), test::standInCompile);
    EXPECT_TRUE(static_cast<bool>(result))
        << llvm::toString(result.takeError());
    return std::move(*result);
  }
  std::string readFile(const std::string &file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void writeFile(const std::string &file, const std::string &bytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  int countFiles(const std::string &dir) {
    int n = 0;
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
         it != end && !ec; it.increment(ec)) {
      n += it->type() == llvm::sys::fs::file_type::regular_file;
    }
    return n;
  }
};

/// Runs `check` as a user who does not own the test's files, and returns its
/// exit code: as nobody in a child process when the tests run as root (whom
/// permissions do not stop), else here.
int asAnotherUser(const std::function<int()> &check) {
  if (::geteuid() != 0) {
    return check();
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      ::_exit(99);
    }
    ::_exit(check());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST_F(CacheTest, KeyIsStableAndSensitiveToEveryField) {
  proto::Graph g = makeGraph("step");
  auto key = [&](const proto::Graph &graph, CompileOptions o,
                 llvm::StringRef salt = "") {
    auto k = deriveKey(graph, o, salt);
    EXPECT_TRUE(static_cast<bool>(k));
    return k->hex;
  };
  std::string base = key(g, {});
  EXPECT_TRUE(isKey(base));
  EXPECT_EQ(base, key(makeGraph("step"), {}));
  // Debug names do not change the key; the graph's content does.
  proto::Graph renamed = g;
  renamed.set_name("another-name");
  EXPECT_EQ(base, key(renamed, {}));
  EXPECT_NE(base, key(makeGraph("step", 0.25), {}));
  CompileOptions o2;
  o2.target = "trn2";
  EXPECT_NE(base, key(g, o2));
  CompileOptions o1;
  o1.optLevel = 1;
  EXPECT_NE(base, key(g, o1));
  CompileOptions cast;
  cast.autoCast = "bf16";
  EXPECT_NE(base, key(g, cast));
  EXPECT_NE(base, key(g, {}, "team-a"));
  // A loss is averaged across the group: the world size changes the
  // artifact of every training step.
  CompileOptions world;
  world.worldSize = 4;
  EXPECT_NE(base, key(g, world));
  // Without a loss, metric or collective, it does not.
  auto context = test::makeContext();
  GraphBuilder alone(*context, "alone");
  auto v = alone.input("v", proto::F32, {8}, proto::PARAMETER);
  alone.output("v", alone.add(v, v), proto::UPDATED_PARAMETER, v);
  auto local = alone.finishGraph();
  ASSERT_TRUE(static_cast<bool>(local)) << llvm::toString(local.takeError());
  EXPECT_EQ(key(*local, {}), key(*local, world));
  // With a compiled all-reduce, it does.
  GraphBuilder b(*context, "dp-step");
  auto w = b.input("w", proto::F32, {8}, proto::PARAMETER);
  b.output("w", b.allReduce(w, "mean"), proto::UPDATED_PARAMETER, w);
  auto dp = b.finishGraph();
  ASSERT_TRUE(static_cast<bool>(dp)) << llvm::toString(dp.takeError());
  EXPECT_NE(key(*dp, {}), key(*dp, world));
  CompileOptions zero = world;
  zero.zeroStage = 1;
  EXPECT_NE(key(*dp, world), key(*dp, zero));
  // So does the tensor-parallel group's size, and only where there are
  // collectives.
  CompileOptions tensor;
  tensor.tensorParallel = 2;
  EXPECT_NE(key(*dp, {}), key(*dp, tensor));
  EXPECT_EQ(key(*local, {}), key(*local, tensor));
  // Every field is named, and the default options are written out.
  auto explained = deriveKey(g, {}, "");
  std::vector<std::string> names;
  for (const KeyField &f : explained->fields) {
    names.push_back(f.name);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "graph", "compiler", "target", "option.target",
                "option.opt-level", "option.auto-cast", "option.sbuf-bytes",
                "option.hbm-bytes",
                "world-size", "tensor-parallel", "bucket-bytes", "zero-stage",
                "salt"}));
}

TEST_F(CacheTest, MissCompilesPublishesAndThenHits) {
  Cache cache = open();
  proto::Graph g = makeGraph("step");
  Result first = get(cache, g);
  EXPECT_EQ(first.outcome, Outcome::Compiled);
  EXPECT_TRUE(llvm::sys::fs::exists(cache.store().objectPath(first.key.hex)));
  EXPECT_TRUE(llvm::sys::fs::exists(cache.store().graphPath(first.key.hex)));
  Result second = get(cache, g);
  EXPECT_EQ(second.outcome, Outcome::Hit);
  EXPECT_EQ(second.artifact.constantBytes(), first.artifact.constantBytes());
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().compiles, 1);
  // Nothing is left in staging.
  EXPECT_EQ(countFiles(cache.store().subdir("tmp")), 0);
}

TEST_F(CacheTest, CorruptEntriesAreQuarantinedAndRecompiled) {
  Cache cache = open();
  proto::Graph g = makeGraph("step");
  std::string object = cache.store().objectPath(get(cache, g).key.hex);
  std::string good = readFile(object);
  for (int damage = 0; damage < 3; ++damage) {
    std::string bad = good;
    if (damage == 0) {
      bad[bad.size() / 2] ^= 0x40; // one flipped bit
    } else if (damage == 1) {
      bad.clear(); // truncated to nothing
    } else {
      bad.resize(bad.size() / 2); // truncated to half
    }
    ::unlink(object.c_str()); // objects are immutable: replace, not edit
    writeFile(object, bad);
    Result again = get(cache, g);
    EXPECT_EQ(again.outcome, Outcome::Compiled) << damage;
    EXPECT_EQ(readFile(object), good) << damage;
  }
  EXPECT_EQ(cache.stats().corrupt, 3);
  EXPECT_EQ(countFiles(cache.store().subdir("quarantine")), 3);
}

TEST_F(CacheTest, FailuresAreRememberedUntilRetriedOrExpired) {
  proto::Graph g = makeGraph("bad");
  {
    ScopedEnv failing("KILN_TEST_COMPILE_FAIL", "1");
    Cache cache = open();
    auto result = cache.getOrCompile(g, {}, test::standInCompile);
    std::string error = test::errorOf(std::move(result));
    EXPECT_NE(error.find("compiling graph 'bad'"), std::string::npos) << error;
    EXPECT_NE(error.find("has no lowering"), std::string::npos) << error;
  }
  // Now the compiler would succeed, but the negative entry answers first.
  std::string log = path("compiles.log");
  ScopedEnv counting("KILN_TEST_COMPILE_LOG", log.c_str());
  Cache cache = open();
  std::string error =
      test::errorOf(cache.getOrCompile(g, {}, test::standInCompile));
  EXPECT_NE(error.find("failed to compile earlier"), std::string::npos)
      << error;
  EXPECT_NE(error.find("--retry-failed"), std::string::npos) << error;
  EXPECT_FALSE(llvm::sys::fs::exists(log));
  // --retry-failed compiles, and success clears the negative entry.
  GetOptions retry;
  retry.retryFailed = true;
  Cache retrying = open({}, retry);
  EXPECT_EQ(get(retrying, g).outcome, Outcome::Compiled);
  EXPECT_EQ(get(cache, g).outcome, Outcome::Hit);
  // An expired entry is ignored.
  {
    ScopedEnv failing("KILN_TEST_COMPILE_FAIL", "1");
    GetOptions instant;
    instant.failedTtlSeconds = 0;
    Cache c = open({}, instant);
    proto::Graph other = makeGraph("other", 2.0);
    EXPECT_FALSE(
        static_cast<bool>(c.getOrCompile(other, {}, test::standInCompile)));
    std::string again =
        test::errorOf(c.getOrCompile(other, {}, test::standInCompile));
    EXPECT_EQ(again.find("failed to compile earlier"), std::string::npos);
  }
}

TEST_F(CacheTest, ReadOnlyWorkersCompileInMemoryAndPublishNothing) {
  open(); // create the root
  StoreOptions readOnly;
  readOnly.readOnly = true;
  Cache cache = open(readOnly);
  Result r = get(cache, makeGraph("step"));
  EXPECT_EQ(r.outcome, Outcome::InMemory);
  EXPECT_FALSE(llvm::sys::fs::exists(cache.store().objectPath(r.key.hex)));
  EXPECT_EQ(cache.stats().bypasses, 1);
}

TEST_F(CacheTest, InjectedEnospcAndEioLeaveNoPartialEntry) {
  for (const char *fault :
       {"enospc@write", "eio@fsync", "enospc@open", "eio@link"}) {
    llvm::sys::fs::remove_directories(path("root"));
    ScopedEnv injected("KILN_CACHE_FAULT", fault);
    Cache cache = open();
    Result r = get(cache, makeGraph("step"));
    EXPECT_EQ(r.outcome, Outcome::InMemory) << fault;
    EXPECT_FALSE(llvm::sys::fs::exists(cache.store().objectPath(r.key.hex)))
        << fault;
    EXPECT_EQ(countFiles(cache.store().subdir("tmp")), 0) << fault;
    EXPECT_EQ(countFiles(cache.store().subdir("objects")), 0) << fault;
  }
}

TEST_F(CacheTest, UnreachableAndForeignRootsAreClearErrors) {
  writeBytes("file", "not a directory");
  std::string error = test::errorOf(Cache::open(path("file")));
  EXPECT_NE(error.find("is not a directory"), std::string::npos) << error;
  StoreOptions readOnly;
  readOnly.readOnly = true;
  error = test::errorOf(
      Cache::open(path("missing"), readOnly, LeaseOptions(), GetOptions()));
  EXPECT_NE(error.find("is unreachable"), std::string::npos) << error;
}

TEST_F(CacheTest, IndexCanBeDeletedCorruptedAndRebuilt) {
  Cache cache = open();
  Result a = get(cache, makeGraph("a", 1.0));
  get(cache, makeGraph("b", 2.0));
  get(cache, makeGraph("a", 1.0)); // a hit
  {
    auto index = Index::openForUpdate(cache.store());
    ASSERT_TRUE(static_cast<bool>(index));
    EXPECT_EQ(index->entries().size(), 2u);
    auto counters = index->counters();
    EXPECT_EQ(counters["hits"], 1);
    EXPECT_EQ(counters["misses"], 2);
    EXPECT_EQ(counters["compiles"], 2);
    EXPECT_EQ(index->entry(a.key.hex)->hits, 1);
  }
  std::string indexFile = (cache.store().dir() + "/index.sqlite").str();
  // Lookups never need the index.
  ::unlink(indexFile.c_str());
  EXPECT_EQ(get(cache, makeGraph("a", 1.0)).outcome, Outcome::Hit);
  writeFile(indexFile, "this is not a database");
  EXPECT_EQ(get(cache, makeGraph("b", 2.0)).outcome, Outcome::Hit);
  // Opening a corrupt index rebuilds it from the files.
  auto index = Index::openForUpdate(cache.store());
  ASSERT_TRUE(static_cast<bool>(index)) << llvm::toString(index.takeError());
  EXPECT_EQ(index->entries().size(), 2u);
  EXPECT_EQ(index->entry(a.key.hex)->graphName, "a");
}

TEST_F(CacheTest, GcHonoursSizeAgeGraceAndLeases) {
  Cache cache = open();
  std::vector<std::string> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(
        get(cache, makeGraph("g" + std::to_string(i), i + 1.0)).key.hex);
  }
  auto index = Index::openForUpdate(cache.store());
  ASSERT_TRUE(static_cast<bool>(index));
  // Everything is younger than the default grace period: nothing goes.
  GcPolicy all;
  all.maxBytes = 0;
  auto report = collectGarbage(cache.store(), *index, all);
  ASSERT_TRUE(static_cast<bool>(report));
  EXPECT_TRUE(report->removed.empty());
  EXPECT_EQ(report->skippedYoung, 4);
  // Without grace, a live lease still protects its key.
  auto lease = Lease::tryAcquire(cache.store().leasePath(keys[0]), {});
  ASSERT_TRUE(lease && *lease);
  all.graceSeconds = 0;
  report = collectGarbage(cache.store(), *index, all);
  ASSERT_TRUE(static_cast<bool>(report));
  EXPECT_EQ(report->removed.size(), 3u);
  EXPECT_EQ(report->skippedLeased, 1);
  EXPECT_TRUE(llvm::sys::fs::exists(cache.store().objectPath(keys[0])));
  lease->reset();
  // A stale staging file is swept.
  writeFile(cache.store().subdir("tmp") + "/dead-writer", "partial");
  GcPolicy sweep;
  sweep.graceSeconds = 0;
  report = collectGarbage(cache.store(), *index, sweep);
  ASSERT_TRUE(static_cast<bool>(report));
  EXPECT_EQ(report->tmpSwept, 1);
  EXPECT_EQ(index->entries().size(), 1u);
}

TEST_F(CacheTest, GcKeepsTheNewestFormatVersions) {
  Cache cache = open();
  get(cache, makeGraph("step"));
  // An older artifact format's directory beside the current one.
  ASSERT_FALSE(
      llvm::sys::fs::create_directories(path("root") + "/kiln-0/objects"));
  auto index = Index::openForUpdate(cache.store());
  ASSERT_TRUE(static_cast<bool>(index));
  GcPolicy policy;
  policy.keepVersions = 1;
  auto report = collectGarbage(cache.store(), *index, policy);
  ASSERT_TRUE(static_cast<bool>(report));
  EXPECT_EQ(report->versionsRemoved, 1);
  EXPECT_FALSE(llvm::sys::fs::exists(path("root") + "/kiln-0"));
  EXPECT_TRUE(llvm::sys::fs::exists(cache.store().dir()));
  EXPECT_EQ(get(cache, makeGraph("step")).outcome, Outcome::Hit);
}

TEST_F(CacheTest, PruneVersionRemovesOnlyOtherBuilds) {
  Cache cache = open();
  Result old = get(cache, makeGraph("old", 1.0)); // the stand-in's build
  auto thisBuildsCompiler =
      [](const proto::Graph &graph,
         const CompileOptions &options) -> llvm::Expected<std::string> {
    auto bytes = test::standInCompile(graph, options);
    if (!bytes) {
      return bytes.takeError();
    }
    auto artifact = artifact::readArtifact(*bytes, "stand-in");
    if (!artifact) {
      return artifact.takeError();
    }
    std::string build = thisBuild();
    auto [version, git] = llvm::StringRef(build).split(' ');
    artifact->compilerVersion = version.str();
    artifact->gitHash = git.str();
    return artifact::writeArtifact(*artifact);
  };
  auto current =
      cache.getOrCompile(makeGraph("current", 2.0), {}, thisBuildsCompiler);
  ASSERT_TRUE(static_cast<bool>(current));
  auto index = Index::openForUpdate(cache.store());
  ASSERT_TRUE(static_cast<bool>(index));
  // The index's record of each entry's build survives a rebuild unchanged.
  EXPECT_EQ(index->entry(current->key.hex)->compiler, thisBuild());
  ASSERT_FALSE(static_cast<bool>(index->rebuild()));
  EXPECT_EQ(index->entry(current->key.hex)->compiler, thisBuild());
  GcPolicy prune;
  prune.otherCompilers = true;
  prune.graceSeconds = 0;
  auto report = collectGarbage(cache.store(), *index, prune);
  ASSERT_TRUE(static_cast<bool>(report));
  EXPECT_EQ(report->removed, std::vector<std::string>{old.key.hex});
  EXPECT_TRUE(
      llvm::sys::fs::exists(cache.store().objectPath(current->key.hex)));
}

TEST_F(CacheTest, ExportImportAndVerify) {
  Cache cache = open();
  Result r = get(cache, makeGraph("step"));
  auto exported = exportCache(cache.store(), path("cache.zip"));
  ASSERT_TRUE(static_cast<bool>(exported));
  EXPECT_EQ(exported->exported, 1);
  auto other = Cache::open(path("other"), {}, {}, {});
  ASSERT_TRUE(static_cast<bool>(other));
  auto imported = importCache(other->store(), path("cache.zip"));
  ASSERT_TRUE(static_cast<bool>(imported));
  EXPECT_EQ(imported->first, 1);
  EXPECT_EQ(imported->second, 0);
  EXPECT_EQ(get(*other, makeGraph("step")).outcome, Outcome::Hit);
  // verify finds a damaged object; --repair quarantines it.
  std::string object = other->store().objectPath(r.key.hex);
  std::string bytes = readFile(object);
  bytes[200] ^= 1;
  ::unlink(object.c_str());
  writeFile(object, bytes);
  VerifyReport report = verifyObjects(other->store(), nullptr, false);
  EXPECT_EQ(report.checked, 1);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_NE(report.bad[0].second.find("checksum"), std::string::npos);
  verifyObjects(other->store(), nullptr, true);
  EXPECT_FALSE(llvm::sys::fs::exists(object));
}

TEST_F(CacheTest, EntriesGetTheCachesUmaskNotTheProcesss) {
  mode_t old = ::umask(077); // a private training script
  StoreOptions group;
  group.umask = 002;
  Cache cache = open(group);
  Result r = get(cache, makeGraph("step"));
  ::umask(old);
  struct stat info;
  ASSERT_EQ(::stat(cache.store().objectPath(r.key.hex).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0664u);
  ASSERT_EQ(::stat(cache.store().subdir("objects").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0775u);
}

TEST_F(CacheTest, DoctorPassesOnALocalDirectory) {
  Cache cache = open();
  for (const DoctorCheck &c : diagnose(cache.store())) {
    if (c.name != "free space" && c.name != "index") {
      EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
    }
  }
}

TEST_F(CacheTest, DoctorNamesTheFileSystemFromTheMountTable) {
  // The mount table's own words: a tmpfs where the machine has one, and a
  // named type for the root.
  if (llvm::sys::fs::is_directory("/dev/shm")) {
    std::string shm = describeFileSystem("/dev/shm");
    EXPECT_TRUE(shm == "tmpfs (not shared between hosts)" ||
                llvm::StringRef(shm).starts_with("local, "))
        << shm;
  }
  std::string root = describeFileSystem("/");
  EXPECT_NE(root, "local") << "the mount table gave no type for /";
  EXPECT_EQ(describeFileSystem("/proc/self"), "local, proc");
}

TEST_F(CacheTest, AnEntryFiledUnderAnotherKeyIsCorruptNeverServed) {
  Cache cache = open();
  Result a = get(cache, makeGraph("a", 1.0));
  Result b = get(cache, makeGraph("b", 2.0));
  EXPECT_EQ(a.artifact.manifest.cache_key(), a.key.hex);
  std::string objectB = cache.store().objectPath(b.key.hex);
  ::unlink(objectB.c_str());
  writeFile(objectB, readFile(cache.store().objectPath(a.key.hex)));
  // verify and export see it...
  VerifyReport report = verifyObjects(cache.store(), nullptr, false);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, b.key.hex);
  EXPECT_NE(report.bad[0].second.find("compiled for key " + a.key.hex),
            std::string::npos)
      << report.bad[0].second;
  auto exported = exportCache(cache.store(), path("cache.zip"));
  ASSERT_TRUE(static_cast<bool>(exported));
  EXPECT_EQ(exported->exported, 1);
  ASSERT_EQ(exported->skipped.size(), 1u);
  EXPECT_EQ(exported->skipped[0].first, b.key.hex);
  // ...and a lookup quarantines it and compiles b's own program.
  Result again = get(cache, makeGraph("b", 2.0));
  EXPECT_EQ(again.outcome, Outcome::Compiled);
  EXPECT_EQ(again.artifact.manifest.cache_key(), b.key.hex);
  EXPECT_EQ(again.artifact.constantBytes(), b.artifact.constantBytes());
  EXPECT_EQ(cache.stats().corrupt, 1);
  EXPECT_EQ(countFiles(cache.store().subdir("quarantine")), 1);
}

TEST_F(CacheTest, ImportRefusesAnEntryFiledUnderAnotherKey) {
  Cache cache = open();
  Result a = get(cache, makeGraph("a", 1.0));
  std::string b = deriveKey(makeGraph("b", 2.0), {})->hex;
  std::string bytes = readFile(cache.store().objectPath(a.key.hex));
  int error = 0;
  zip_t *zip = zip_open(path("bundle.zip").c_str(), ZIP_CREATE, &error);
  ASSERT_NE(zip, nullptr);
  zip_source_t *source =
      zip_source_buffer(zip, bytes.data(), bytes.size(), /*freep=*/0);
  ASSERT_GE(zip_file_add(zip, ("objects/" + b + ".kneff").c_str(), source, 0),
            0);
  ASSERT_EQ(zip_close(zip), 0);
  auto other = Cache::open(path("other"), {}, {}, {});
  ASSERT_TRUE(static_cast<bool>(other));
  auto imported = importCache(other->store(), path("bundle.zip"));
  ASSERT_TRUE(static_cast<bool>(imported));
  EXPECT_EQ(imported->first, 0);
  EXPECT_EQ(imported->second, 1);
  EXPECT_FALSE(llvm::sys::fs::exists(other->store().objectPath(b)));
}

TEST_F(CacheTest, AnUnreadableEntryIsLeftInPlaceAndCompiledAround) {
  Cache cache = open();
  proto::Graph g = makeGraph("step");
  std::string object = cache.store().objectPath(get(cache, g).key.hex);
  ::chmod(dir.c_str(), 0755);
  ::chmod(path("root").c_str(), 0755);
  ::chmod(object.c_str(), 0);
  StoreOptions trusting;
  trusting.allowForeignOwner = true;
  int rc = asAnotherUser([&] {
    auto other = Cache::open(path("root"), trusting, {}, {});
    if (!other) {
      llvm::errs() << llvm::toString(other.takeError()) << "\n";
      return 1;
    }
    Lookup found = other->store().loadObject(deriveKey(g, {})->hex);
    if (found.state != Lookup::State::Unreadable) {
      return 2;
    }
    auto result = other->getOrCompile(g, {}, test::standInCompile);
    if (!result || result->outcome != Outcome::InMemory) {
      return 3;
    }
    if (other->stats().corrupt != 0) {
      return 4;
    }
    // verify reports it apart, and --repair leaves it alone.
    VerifyReport report = verifyObjects(other->store(), nullptr, true);
    return report.unreadable.size() == 1 && report.bad.empty() ? 0 : 5;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(llvm::sys::fs::exists(object));
  EXPECT_EQ(countFiles(cache.store().subdir("quarantine")), 0);
  ::chmod(object.c_str(), 0644);
}

TEST_F(CacheTest, AnUnwritableRootCompilesInMemoryWithoutWaiting) {
  Cache cache = open();
  ::chmod(dir.c_str(), 0755);
  ::chmod(path("root").c_str(), 0755);
  ::chmod(cache.store().subdir("leases").c_str(), 0555);
  ::chmod(cache.store().subdir("tmp").c_str(), 0555);
  StoreOptions trusting;
  trusting.allowForeignOwner = true;
  LeaseOptions patient;
  patient.maxWaitSeconds = 5;
  proto::Graph g = makeGraph("step");
  int rc = asAnotherUser([&] {
    auto other = Cache::open(path("root"), trusting, patient, {});
    if (!other) {
      return 1;
    }
    auto result = other->getOrCompile(g, {}, test::standInCompile);
    if (!result || result->outcome != Outcome::InMemory) {
      return 2;
    }
    // Nobody could be compiling it: there was nothing to wait for.
    if (other->stats().leaseWaits != 0) {
      return 3;
    }
    // Nor is another maintenance command holding the index: the reason is
    // said at once.
    std::string error = test::errorOf(Index::openForUpdate(other->store()));
    return error.find("Permission denied") != std::string::npos ? 0 : 4;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(CacheTest, AFullDiskLeavesNoLeaseBehind) {
  Cache cache = open();
  {
    ScopedEnv injected("KILN_CACHE_FAULT", "enospc@lease");
    ::testing::internal::CaptureStderr();
    Result r = get(cache, makeGraph("step"));
    std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(r.outcome, Outcome::InMemory);
    EXPECT_EQ(cache.stats().leaseWaits, 0);
    EXPECT_NE(said.find("No space left on device"), std::string::npos) << said;
    EXPECT_NE(said.find("compiling in memory"), std::string::npos) << said;
  }
  EXPECT_EQ(countFiles(cache.store().subdir("leases")), 0);
  // A lease file without a holder line (left by a crash) is no lease.
  std::string key = deriveKey(makeGraph("other", 3.0), {})->hex;
  writeFile(cache.store().leasePath(key), "");
  EXPECT_FALSE(leaseIsLive(cache.store().leasePath(key), {}));
  Result r = get(cache, makeGraph("other", 3.0));
  EXPECT_EQ(r.outcome, Outcome::Compiled);
  EXPECT_EQ(cache.stats().leaseWaits, 0);
}

TEST_F(CacheTest, AWaiterSaysWhomItWaitsFor) {
  open();
  LeaseOptions leases;
  leases.maxWaitSeconds = 0.6;
  leases.reportEverySeconds = 0.1;
  auto cache = Cache::open(path("root"), {}, leases, {});
  ASSERT_TRUE(static_cast<bool>(cache));
  proto::Graph g = makeGraph("step");
  auto held = Lease::tryAcquire(
      cache->store().leasePath(deriveKey(g, {})->hex), {});
  ASSERT_TRUE(held && *held);
  ::testing::internal::CaptureStderr();
  auto result = cache->getOrCompile(g, {}, test::standInCompile);
  std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(static_cast<bool>(result));
  std::string holder = hostIdentity() + " pid " + std::to_string(::getpid());
  EXPECT_NE(said.find("waiting for " + holder + " to compile graph 'step'"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("waited 1 s for " + holder), std::string::npos) << said;
}

TEST_F(CacheTest, UnknownSchemesAreRefusedNotTakenForDirectories) {
  llvm::SmallString<128> cwd;
  llvm::sys::fs::current_path(cwd);
  llvm::sys::fs::set_current_path(dir);
  for (const char *url : {"gs://bucket/kiln", "ftp://host/kiln"}) {
    std::string error = test::errorOf(Cache::open(url));
    EXPECT_NE(error.find("scheme is not supported"), std::string::npos)
        << error;
  }
  EXPECT_FALSE(llvm::sys::fs::exists(path("gs:")));
  EXPECT_FALSE(llvm::sys::fs::exists(path("ftp:")));
  EXPECT_TRUE(static_cast<bool>(Cache::open("file://" + path("root"))));
  llvm::sys::fs::set_current_path(cwd);
}

TEST_F(CacheTest, RemoteTierUrlsAreCheckedWhenOpened) {
  ScopedEnv id("AWS_ACCESS_KEY_ID", "key");
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "secret");
  EXPECT_TRUE(static_cast<bool>(RemoteTier::open("s3://bucket/team/a")));
  EXPECT_TRUE(static_cast<bool>(RemoteTier::open("http://host:8080/kiln")));
  for (auto [url, says] :
       {std::pair{"s3:///prefix", "no bucket"},
        std::pair{"s3://bucket/pre+fix", "use letters, digits"},
        std::pair{"http://host/a b", "use letters, digits"},
        std::pair{"gs://bucket", "not an s3://"}}) {
    std::string error = test::errorOf(RemoteTier::open(url));
    EXPECT_NE(error.find(says), std::string::npos) << url << ": " << error;
    EXPECT_NE(error.find(url), std::string::npos) << error;
  }
}

TEST_F(CacheTest, AnUnreachableRemoteTierCostsOneWarningAndTheLocalTierServes) {
  ScopedEnv local("KILN_CACHE_LOCAL", path("front").c_str());
  // Nothing listens on port 1: every request is refused at once.
  const char *url = "http://127.0.0.1:1/kiln";
  auto cache = Cache::open(url);
  ASSERT_TRUE(static_cast<bool>(cache)) << test::errorOf(std::move(cache));
  EXPECT_EQ(cache->store().root(), path("front"));
  ASSERT_NE(cache->remoteTier(), nullptr);
  testing::internal::CaptureStderr();
  Result first = get(*cache, makeGraph("a", 1.0));
  Result second = get(*cache, makeGraph("b", 2.0));
  std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_EQ(first.outcome, Outcome::Compiled);
  EXPECT_EQ(second.outcome, Outcome::Compiled);
  EXPECT_EQ(cache->remoteTier(), nullptr);
  EXPECT_EQ(llvm::StringRef(warnings).count('\n'), 1u) << warnings;
  EXPECT_NE(warnings.find(url), std::string::npos) << warnings;
  EXPECT_EQ(get(*cache, makeGraph("a", 1.0)).outcome, Outcome::Hit);
}

TEST_F(CacheTest, MaintenanceRebuildsADeletedOrMisplacedIndex) {
  Cache cache = open();
  get(cache, makeGraph("a", 1.0));
  get(cache, makeGraph("b", 2.0));
  std::string indexFile = (cache.store().dir() + "/index.sqlite").str();
  for (int damage = 0; damage < 2; ++damage) {
    ::unlink(indexFile.c_str());
    if (damage == 1) {
      llvm::sys::fs::create_directory(indexFile);
      EXPECT_FALSE(cache.store().layoutProblems().empty());
    }
    auto index = Index::openForUpdate(cache.store());
    ASSERT_TRUE(static_cast<bool>(index)) << llvm::toString(index.takeError());
    EXPECT_EQ(index->entries().size(), 2u) << damage;
    EXPECT_TRUE(llvm::sys::fs::is_regular_file(indexFile)) << damage;
  }
  // The directory was moved aside, not deleted.
  EXPECT_TRUE(cache.store().layoutProblems().empty());
}

TEST_F(CacheTest, VerifyAndDoctorReportADamagedLayout) {
  Cache cache = open();
  Result r = get(cache, makeGraph("step"));
  // A corrupt object, and quarantine/ replaced by a file: --repair says it
  // could not move the object, and leaves it where it was.
  std::string object = cache.store().objectPath(r.key.hex);
  std::string bytes = readFile(object);
  bytes[bytes.size() / 2] ^= 1;
  ::unlink(object.c_str());
  writeFile(object, bytes);
  llvm::sys::fs::remove_directories(cache.store().subdir("quarantine"));
  writeFile(cache.store().subdir("quarantine"), "a file");
  VerifyReport report = verifyObjects(cache.store(), nullptr, true);
  EXPECT_EQ(report.bad.size(), 1u);
  ASSERT_EQ(report.unrepaired.size(), 1u);
  EXPECT_TRUE(llvm::sys::fs::exists(object));
  ASSERT_EQ(report.layout.size(), 1u);
  EXPECT_EQ(report.layout[0], "quarantine/ is not a directory");
  // objects/ replaced by a file: nothing to check, and not clean.
  llvm::sys::fs::remove_directories(cache.store().subdir("objects"));
  writeFile(cache.store().subdir("objects"), "a file");
  report = verifyObjects(cache.store(), nullptr, false);
  EXPECT_EQ(report.checked, 0);
  EXPECT_FALSE(report.clean());
  bool flagged = false;
  for (const DoctorCheck &c : diagnose(cache.store())) {
    if (c.name == "layout") {
      flagged = !c.ok &&
                c.detail.find("objects/ is not a directory") != std::string::npos;
    }
  }
  EXPECT_TRUE(flagged);
}

} // namespace
