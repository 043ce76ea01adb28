//===- CommunicatorTest.cpp - rendezvous, Gloo collectives, the environment -===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/TcpStore.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace kiln::comm;

namespace {

const char *const kVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "KILN_RENDEZVOUS", "KILN_COMM_TIMEOUT", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "GLOO_SOCKET_IFNAME",
    "KILN_COMM_HOST", "KILN_RUN_ATTEMPT", "KILN_EXTRACT_GRAPHS_ONLY",
    "KILN_COLLECT_WORLD_SIZE"};

/// Clears every variable World reads, and restores them afterwards.
class CommTest : public ::testing::Test {
protected:
  void SetUp() override {
    for (const char *name : kVariables) {
      if (const char *value = std::getenv(name)) {
        saved.emplace_back(name, value);
      }
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char *name : kVariables) {
      ::unsetenv(name);
    }
    for (auto &[name, value] : saved) {
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  std::vector<std::pair<std::string, std::string>> saved;
};

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t length = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

World tcpWorld(int rank, int size, int port, int timeoutSeconds = 20) {
  World w;
  w.rank = rank;
  w.size = size;
  w.masterAddr = "127.0.0.1";
  w.masterPort = port;
  w.launcher = "env";
  w.timeout = std::chrono::seconds(timeoutSeconds);
  return w;
}

/// Runs `body(rank, communicator-or-error)` on one thread per world.
template <typename Body>
void runGroup(const std::vector<World> &worlds, Body body) {
  std::vector<std::thread> threads;
  for (const World &w : worlds) {
    threads.emplace_back([&body, w] { body(w.rank, connect(w)); });
  }
  for (std::thread &t : threads) {
    t.join();
  }
}

} // namespace

TEST_F(CommTest, NoLauncherIsAGroupOfOne) {
  auto world = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(world)) << llvm::toString(world.takeError());
  EXPECT_EQ(world->size, 1);
  EXPECT_EQ(world->launcher, "single");
  auto comm = connect(*world);
  ASSERT_TRUE(static_cast<bool>(comm));
  float x[2] = {1, 2};
  EXPECT_FALSE(static_cast<bool>((*comm)->allReduce(x, 2, Reduction::Mean)));
  EXPECT_EQ(x[1], 2);
  float gathered[2] = {};
  EXPECT_FALSE(static_cast<bool>((*comm)->allGather(x, gathered, sizeof(x))));
  EXPECT_EQ(gathered[1], 2);
}

TEST_F(CommTest, ReadsTorchrunAndMpiEnvironments) {
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  ::setenv("MASTER_ADDR", "10.0.0.7", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  ::setenv("TORCHELASTIC_RUN_ID", "job", 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  auto world = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(world)) << llvm::toString(world.takeError());
  EXPECT_EQ(world->rank, 2);
  EXPECT_EQ(world->size, 4);
  EXPECT_EQ(world->launcher, "torchrun");
  EXPECT_EQ(world->masterAddr, "10.0.0.7");
  // torchrun's agent serves its own store on MASTER_PORT.
  EXPECT_EQ(world->masterPort, 29501);

  SetUp();
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("KILN_RENDEZVOUS", "file:/shared/rdzv", 1);
  world = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(world)) << llvm::toString(world.takeError());
  EXPECT_EQ(world->launcher, "mpirun");
  EXPECT_EQ(world->rank, 1);
  EXPECT_EQ(world->fileStore, "/shared/rdzv");
}

TEST_F(CommTest, CollectionSeesTheWorldSizePrecompileAsksFor) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("KILN_COLLECT_WORLD_SIZE", "2", 1);
  // Outside collection the launcher's size stands.
  auto running = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(running));
  EXPECT_EQ(running->size, 4);
  ::setenv("KILN_EXTRACT_GRAPHS_ONLY", "1", 1);
  auto collecting = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(collecting));
  EXPECT_EQ(collecting->size, 2);
  EXPECT_EQ(collecting->rank, 1);
  ::setenv("KILN_COLLECT_WORLD_SIZE", "0", 1);
  EXPECT_EQ(llvm::toString(World::fromEnvironment().takeError()),
            "KILN_COLLECT_WORLD_SIZE='0' is not an integer in [1, 1048576]");
}

TEST_F(CommTest, BadEnvironmentsNameTheVariable) {
  ::setenv("RANK", "4", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  auto world = World::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(world));
  EXPECT_EQ(llvm::toString(world.takeError()),
            "RANK='4' is not an integer in [0, 3]");

  // Described without an address (graph collection needs no peers), but
  // joining the group needs one.
  ::setenv("RANK", "1", 1);
  world = World::fromEnvironment();
  ASSERT_TRUE(static_cast<bool>(world)) << llvm::toString(world.takeError());
  auto comm = connect(*world);
  ASSERT_FALSE(static_cast<bool>(comm));
  EXPECT_NE(llvm::toString(comm.takeError()).find("set MASTER_ADDR and MASTER_PORT"),
            std::string::npos);

  ::unsetenv("WORLD_SIZE");
  world = World::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(world));
  EXPECT_EQ(llvm::toString(world.takeError()),
            "RANK and WORLD_SIZE must be set together (only one of them is)");

  SetUp();
  ::setenv("KILN_RENDEZVOUS", "redis://x", 1);
  world = World::fromEnvironment();
  ASSERT_FALSE(static_cast<bool>(world));
  EXPECT_NE(llvm::toString(world.takeError()).find("is not file:"),
            std::string::npos);
}

TEST_F(CommTest, CollectivesAndBarrierOverTcp) {
  int port = freePort();
  std::vector<World> worlds;
  for (int r = 0; r < 3; ++r) {
    worlds.push_back(tcpWorld(r, 3, port));
  }
  std::vector<std::vector<float>> sums(3), means(3);
  std::vector<int> broadcasts(3);
  std::vector<std::vector<int32_t>> gathered(3);
  std::vector<std::vector<float>> scattered(3);
  runGroup(worlds, [&](int rank,
                       llvm::Expected<std::unique_ptr<Communicator>> comm) {
    ASSERT_TRUE(static_cast<bool>(comm)) << llvm::toString(comm.takeError());
    // Large enough to need several ring segments.
    std::vector<float> x(300001);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 7);
    }
    ASSERT_FALSE(static_cast<bool>(
        (*comm)->allReduce(x.data(), x.size(), Reduction::Sum)));
    sums[rank] = x;
    std::vector<float> m = {static_cast<float>(rank), 3.0f};
    ASSERT_FALSE(static_cast<bool>(
        (*comm)->allReduce(m.data(), m.size(), Reduction::Mean)));
    means[rank] = m;
    int value = rank == 2 ? 42 : -1;
    ASSERT_FALSE(static_cast<bool>((*comm)->broadcast(&value, sizeof(value), 2)));
    broadcasts[rank] = value;
    // Each rank's two indices, in rank order on every rank.
    std::vector<int32_t> mine = {10 * rank, 10 * rank + 1};
    gathered[rank].assign(6, -1);
    ASSERT_FALSE(static_cast<bool>((*comm)->allGather(
        mine.data(), gathered[rank].data(), mine.size() * sizeof(int32_t))));
    // Three blocks of 200001 (several ring segments each): rank r keeps
    // the mean of block r.
    std::vector<float> blocks(3 * 200001);
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 5);
    }
    scattered[rank].assign(200001, -1);
    ASSERT_FALSE(static_cast<bool>((*comm)->reduceScatter(
        blocks.data(), scattered[rank].data(), 200001, Reduction::Mean)));
    ASSERT_FALSE(static_cast<bool>((*comm)->barrier()));
  });
  for (int r = 0; r < 3; ++r) {
    // (1 + 2 + 3) / 3 = 2 times the element's i % 5, i counted in the
    // whole source.
    for (size_t i : {size_t(0), size_t(1), size_t(77777), size_t(200000)}) {
      EXPECT_EQ(scattered[r][i],
                2.0f * static_cast<float>((r * 200001 + i) % 5))
          << "rank " << r << " element " << i;
    }
    ASSERT_EQ(sums[r].size(), 300001u);
    EXPECT_EQ(sums[r][5], 6.0f * 5);
    EXPECT_EQ(sums[r], sums[0]); // the same bytes on every rank
    EXPECT_EQ(means[r], (std::vector<float>{1.0f, 3.0f}));
    EXPECT_EQ(broadcasts[r], 42);
    EXPECT_EQ(gathered[r], (std::vector<int32_t>{0, 1, 10, 11, 20, 21}));
  }
}

TEST_F(CommTest, LayoutsPutTensorParallelGroupsOnConsecutiveRanks) {
  auto layout = Layout::of(8, 2);
  ASSERT_TRUE(static_cast<bool>(layout)) << llvm::toString(layout.takeError());
  EXPECT_EQ(layout->dataParallel(), 4);
  EXPECT_EQ(layout->tensorGroup(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout->dataGroup(5), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(layout->dataGroup(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(llvm::toString(Layout::of(6, 4).takeError()),
            "a job of 6 workers cannot be laid out in tensor-parallel groups "
            "of 4 (it must divide the world size)");
}

TEST_F(CommTest, SubgroupsRunTheirOwnCollectives) {
  // Four ranks as 2 x 2: tensor-parallel groups {0, 1}, {2, 3} and
  // data-parallel groups {0, 2}, {1, 3}, all over one store.
  int port = freePort();
  std::vector<World> worlds;
  for (int r = 0; r < 4; ++r) {
    worlds.push_back(tcpWorld(r, 4, port));
  }
  std::vector<float> tensorSums(4), dataSums(4), worldSums(4);
  std::vector<int> tensorRanks(4), dataRanks(4);
  runGroup(worlds, [&](int rank,
                       llvm::Expected<std::unique_ptr<Communicator>> comm) {
    ASSERT_TRUE(static_cast<bool>(comm)) << llvm::toString(comm.takeError());
    Layout layout = *Layout::of(4, 2);
    auto tensor = (*comm)->subgroup(layout.tensorGroup(rank), "tensor");
    ASSERT_TRUE(static_cast<bool>(tensor)) << llvm::toString(tensor.takeError());
    auto data = (*comm)->subgroup(layout.dataGroup(rank), "data");
    ASSERT_TRUE(static_cast<bool>(data)) << llvm::toString(data.takeError());
    float x = static_cast<float>(1 << rank);
    ASSERT_FALSE(static_cast<bool>((*tensor)->allReduce(&x, 1, Reduction::Sum)));
    tensorSums[rank] = x;
    float y = static_cast<float>(1 << rank);
    ASSERT_FALSE(static_cast<bool>((*data)->allReduce(&y, 1, Reduction::Sum)));
    dataSums[rank] = y;
    // The whole job's communicator still works beside its subgroups.
    float z = 1;
    ASSERT_FALSE(static_cast<bool>((*comm)->allReduce(&z, 1, Reduction::Sum)));
    worldSums[rank] = z;
    tensorRanks[rank] = (*tensor)->rank();
    dataRanks[rank] = (*data)->rank();
    EXPECT_EQ((*tensor)->size(), 2);
  });
  EXPECT_EQ(tensorSums, (std::vector<float>{3, 3, 12, 12}));
  EXPECT_EQ(dataSums, (std::vector<float>{5, 10, 5, 10}));
  EXPECT_EQ(worldSums, (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(tensorRanks, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(dataRanks, (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(CommTest, SubgroupTimeoutNamesTheJobsRank) {
  // Ranks 2 and 3 form a tensor-parallel group; rank 3 never reaches the
  // all-reduce. Rank 2's error names rank 3 as the job numbers it.
  int port = freePort();
  std::vector<World> worlds;
  for (int r = 0; r < 4; ++r) {
    worlds.push_back(tcpWorld(r, 4, port, 2));
  }
  std::mutex mutex;
  std::condition_variable done;
  bool failed = false;
  std::string error;
  runGroup(worlds, [&](int rank,
                       llvm::Expected<std::unique_ptr<Communicator>> comm) {
    ASSERT_TRUE(static_cast<bool>(comm)) << llvm::toString(comm.takeError());
    auto tensor = (*comm)->subgroup(Layout::of(4, 2)->tensorGroup(rank), "tensor");
    ASSERT_TRUE(static_cast<bool>(tensor)) << llvm::toString(tensor.takeError());
    std::unique_lock<std::mutex> lock(mutex);
    if (rank != 2) {
      // Rank 0 serves the store: it stays until rank 2 has its diagnosis.
      done.wait(lock, [&] { return failed; });
      return;
    }
    lock.unlock();
    float x = 1;
    error = llvm::toString((*tensor)->allReduce(&x, 1, Reduction::Sum));
    lock.lock();
    failed = true;
    done.notify_all();
  });
  EXPECT_NE(error.find("all-reduce of 1 floats timed out after 2 s on rank 2 "
                       "of 4 (rank 0 of its tensor group of 2) waiting for "
                       "rank 3 (pid "),
            std::string::npos)
      << error;
}

TEST_F(CommTest, SubgroupsMustHoldTheirRank) {
  auto comm = connect(World{});
  ASSERT_TRUE(static_cast<bool>(comm));
  EXPECT_EQ(llvm::toString((*comm)->subgroup({1}, "tensor").takeError()),
            "the tensor group of rank 0 must list distinct ranks below 1, "
            "this one among them");
  EXPECT_TRUE(static_cast<bool>((*comm)->subgroup({0}, "tensor")));
}

TEST_F(CommTest, MeshFailureNamesTheAddressAndWhatChoseIt) {
  ::setenv("GLOO_SOCKET_IFNAME", "nosuch0", 1);
  int port = freePort();
  std::vector<std::string> errors(2);
  runGroup({tcpWorld(0, 2, port, 5), tcpWorld(1, 2, port, 5)},
           [&](int rank, llvm::Expected<std::unique_ptr<Communicator>> comm) {
             ASSERT_FALSE(static_cast<bool>(comm));
             errors[rank] = llvm::toString(comm.takeError());
           });
  // Rank 0 fails as it makes its device; rank 1 the same way, or, when
  // rank 0 (which serves the store) is gone first, on the store.
  EXPECT_TRUE(errors[1].find("at address GLOO_SOCKET_IFNAME=nosuch0") !=
                  std::string::npos ||
              errors[1].find("closed the connection (did rank 0 exit?)") !=
                  std::string::npos)
      << errors[1];
  for (const std::string &error : {errors[0]}) {
    EXPECT_NE(error.find("connecting the Gloo mesh failed on rank "),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("at address GLOO_SOCKET_IFNAME=nosuch0"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("set GLOO_SOCKET_IFNAME to an interface they reach, "
                         "or KILN_COMM_HOST"),
              std::string::npos)
        << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST_F(CommTest, RendezvousTimeoutNamesTheMissingRank) {
  int port = freePort();
  std::vector<std::string> errors(3);
  // Rank 1 never starts. Rank 0 serves the store, so it waits longer: a
  // rank whose store has gone reports that instead.
  runGroup({tcpWorld(0, 3, port, 4), tcpWorld(2, 3, port, 1)},
           [&](int rank, llvm::Expected<std::unique_ptr<Communicator>> comm) {
             ASSERT_FALSE(static_cast<bool>(comm));
             errors[rank] = llvm::toString(comm.takeError());
           });
  EXPECT_NE(errors[0].find("after 4 s on rank 0 of 3"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find(": rank 1 did not join"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[2].find(": rank 1 did not join"), std::string::npos)
      << errors[2];
}

TEST_F(CommTest, UnreachableStoreIsOneLine) {
  World w = tcpWorld(1, 2, freePort(), 1);
  auto comm = connect(w);
  ASSERT_FALSE(static_cast<bool>(comm));
  std::string message = llvm::toString(comm.takeError());
  EXPECT_NE(message.find("cannot reach the rendezvous store at 127.0.0.1:"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(CommTest, CollectiveTimeoutNamesTheRankWaitedFor) {
  // Rank 1 joins, then never reaches the all-reduce (as if stopped). In
  // the ring rank 0 receives from rank 2, which waits on rank 1: the error
  // names rank 1, and not rank 2, which timed out alongside.
  int port = freePort();
  std::vector<World> worlds;
  for (int r = 0; r < 3; ++r) {
    worlds.push_back(tcpWorld(r, 3, port, 2));
  }
  std::mutex mutex;
  std::condition_variable done;
  int failed = 0;
  std::vector<std::string> errors(3);
  runGroup(worlds, [&](int rank,
                       llvm::Expected<std::unique_ptr<Communicator>> comm) {
    ASSERT_TRUE(static_cast<bool>(comm)) << llvm::toString(comm.takeError());
    std::unique_lock<std::mutex> lock(mutex);
    if (rank == 1) {
      done.wait(lock, [&] { return failed == 2; });
      return;
    }
    lock.unlock();
    std::vector<float> x(1000, 1.0f);
    llvm::Error error = (*comm)->allReduce(x.data(), x.size(), Reduction::Sum);
    errors[rank] = llvm::toString(std::move(error));
    lock.lock();
    ++failed;
    done.notify_all();
  });
  std::string pid = std::to_string(::getpid());
  for (int r : {0, 2}) {
    EXPECT_NE(errors[r].find("all-reduce of 1000 floats timed out after 2 s "
                             "on rank " +
                             std::to_string(r) + " of 3 waiting for rank 1 (pid " +
                             pid + " on "),
              std::string::npos)
        << errors[r];
    EXPECT_EQ(errors[r].find("rank 2 ("), std::string::npos) << errors[r];
  }
}

TEST_F(CommTest, SecondGroupOnABusyPortNamesIt) {
  // Group A holds the port; group B, started on it later, fails at once
  // on every rank: rank 0 cannot serve the store, rank 1 finds its place
  // in A's store taken.
  int port = freePort();
  std::vector<std::unique_ptr<Communicator>> first(2);
  runGroup({tcpWorld(0, 2, port), tcpWorld(1, 2, port)},
           [&](int rank, llvm::Expected<std::unique_ptr<Communicator>> comm) {
             ASSERT_TRUE(static_cast<bool>(comm))
                 << llvm::toString(comm.takeError());
             first[rank] = std::move(*comm);
           });
  std::vector<std::string> errors(2);
  runGroup({tcpWorld(0, 2, port, 2), tcpWorld(1, 2, port, 2)},
           [&](int rank, llvm::Expected<std::unique_ptr<Communicator>> comm) {
             ASSERT_FALSE(static_cast<bool>(comm));
             errors[rank] = llvm::toString(comm.takeError());
           });
  std::string address = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(errors[0].find("rank 0 of 2: cannot serve the rendezvous store at " +
                           address + ": Address already in use"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rendezvous failed on rank 1 of 2: the rendezvous "
                           "store at " +
                           address + " already has a rank 1 (pid "),
            std::string::npos)
      << errors[1];
  // Group A is undisturbed.
  std::vector<float> sums = {0.0f, 1.0f};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_FALSE(static_cast<bool>(
          first[r]->allReduce(&sums[r], 1, Reduction::Sum)));
    });
  }
  for (std::thread &t : threads) {
    t.join();
  }
  EXPECT_EQ(sums, (std::vector<float>{1.0f, 1.0f}));
}

TEST_F(CommTest, SilentServiceOnThePortTimesOut) {
  // Something listens on MASTER_PORT but never answers (a stopped rank 0,
  // another job's service): connecting gives up after the timeout. The
  // test's own wait is a generous bound; closing the listener releases a
  // connect that does not give up.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t length = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &length);
  World w = tcpWorld(1, 2, ntohs(addr.sin_port), 1);
  auto joined = std::async(std::launch::async, [&] {
    auto comm = connect(w);
    return comm ? std::string("connected")
                : llvm::toString(comm.takeError());
  });
  bool gaveUp =
      joined.wait_for(std::chrono::seconds(120)) == std::future_status::ready;
  ::close(listener);
  std::string message = joined.get();
  EXPECT_TRUE(gaveUp) << "connect() waited past the timeout";
  EXPECT_NE(message.find("rendezvous store at 127.0.0.1:" +
                         std::to_string(ntohs(addr.sin_port)) +
                         " did not answer within 1 s"),
            std::string::npos)
      << message;
}

TEST_F(CommTest, FileStoreRendezvous) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-rdzv", dir));
  std::vector<World> worlds(2);
  for (int r = 0; r < 2; ++r) {
    worlds[r].rank = r;
    worlds[r].size = 2;
    worlds[r].fileStore = dir.str().str();
    worlds[r].timeout = std::chrono::seconds(20);
  }
  std::vector<float> got(2);
  runGroup(worlds, [&](int rank,
                       llvm::Expected<std::unique_ptr<Communicator>> comm) {
    ASSERT_TRUE(static_cast<bool>(comm)) << llvm::toString(comm.takeError());
    float x = rank == 0 ? 1.0f : 3.0f;
    ASSERT_FALSE(static_cast<bool>((*comm)->allReduce(&x, 1, Reduction::Mean)));
    got[rank] = x;
  });
  EXPECT_EQ(got, (std::vector<float>{2.0f, 2.0f}));
  llvm::sys::fs::remove_directories(dir);
}

/// The descriptors this process has open.
static int openDescriptors() {
  int count = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it("/proc/self/fd", ec), end;
       it != end && !ec; it.increment(ec)) {
    ++count;
  }
  return count;
}

TEST_F(CommTest, StoreServerClosesTheConnectionsOfClientsThatLeft) {
  // Ranks that time out reconnect: each connection the server kept after
  // its client had gone would be a descriptor lost for the job's lifetime.
  int port = freePort();
  auto server = TcpStore::open("127.0.0.1", port, /*serve=*/true,
                               std::chrono::seconds(10));
  ASSERT_TRUE(static_cast<bool>(server)) << llvm::toString(server.takeError());
  int before = openDescriptors();
  for (int i = 0; i < 40; ++i) {
    auto client = TcpStore::open("127.0.0.1", port, /*serve=*/false,
                                 std::chrono::seconds(10));
    ASSERT_TRUE(static_cast<bool>(client))
        << llvm::toString(client.takeError());
    (*client)->set("k" + std::to_string(i), std::string("v"),
                   std::chrono::steady_clock::now() + std::chrono::seconds(10));
  }
  // The server closes its side when it reads the end of a connection: wait
  // for that (at most 5 s), then count.
  for (int wait = 0; wait < 100 && openDescriptors() > before + 2; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LE(openDescriptors(), before + 2);
}
