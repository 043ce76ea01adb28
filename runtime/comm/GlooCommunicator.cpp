//===- GlooCommunicator.cpp - the Gloo backend and rendezvous -------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/TcpStore.h"

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <netdb.h>
#include <numeric>
#include <optional>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace kiln::comm {

namespace {

using Clock = std::chrono::steady_clock;

/// Gloo's file store, asked without waiting whether keys are set (its
/// wait() polls for at least a second before it gives up on a key). A key
/// left by an earlier attempt under the same name is replaced, not an
/// error: Gloo's own set() refuses an existing file.
class FileStore : public gloo::rendezvous::FileStore {
public:
  using gloo::rendezvous::FileStore::FileStore;
  using gloo::rendezvous::FileStore::check;

  void set(const std::string &key, const std::vector<char> &data) override {
    ::unlink(objectPath(key).c_str());
    gloo::rendezvous::FileStore::set(key, data);
  }
};

/// Whether `key` is set in `store` now, asking no later than `deadline`.
bool isSet(gloo::rendezvous::Store &store, const std::string &key,
           Clock::time_point deadline) {
  if (auto *tcp = dynamic_cast<TcpStore *>(&store)) {
    return tcp->lookup(key, deadline).has_value();
  }
  return static_cast<FileStore &>(store).check({key});
}

/// Sets `key` in `store`, giving up no later than `deadline`.
void setKey(gloo::rendezvous::Store &store, const std::string &key,
            const std::string &value, Clock::time_point deadline) {
  if (auto *tcp = dynamic_cast<TcpStore *>(&store)) {
    tcp->set(key, value, deadline);
  } else {
    store.set(key, std::vector<char>(value.begin(), value.end()));
  }
}

/// The store as Gloo's connectFullMesh sees it: its keys under `prefix`,
/// and every wait bounded by `timeout`, whatever timeout Gloo passes.
/// connectFullMesh waits for each pair's connection five times its
/// context's timeout; the context gets a fifth of KILN_COMM_TIMEOUT so that
/// no connection waits longer than it, and the store waits, which Gloo
/// bounds by that same context timeout (or by its own 30 s in get), keep
/// the whole of it.
class MeshStore : public gloo::rendezvous::Store {
public:
  MeshStore(gloo::rendezvous::Store &base, std::string prefix,
            std::chrono::milliseconds timeout)
      : base(base), prefix(std::move(prefix)), timeout(timeout) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    base.set(prefix + key, data);
  }
  std::vector<char> get(const std::string &key) override {
    base.wait({prefix + key}, timeout);
    return base.get(prefix + key);
  }
  void wait(const std::vector<std::string> &keys) override {
    base.wait(prefixed(keys), timeout);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    base.wait(prefixed(keys), timeout);
  }

private:
  std::vector<std::string> prefixed(const std::vector<std::string> &keys) {
    std::vector<std::string> out;
    for (const std::string &key : keys) {
      out.push_back(prefix + key);
    }
    return out;
  }

  gloo::rendezvous::Store &base;
  std::string prefix;
  std::chrono::milliseconds timeout;
};

std::string oneLine(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  return message;
}

std::string joinKey(const std::string &prefix, int rank) {
  return prefix + "join/" + std::to_string(rank);
}

/// This rank's place in `group` (ranks of a group of `size`, this one
/// `me`), or what is wrong with it.
llvm::Expected<int> checkSubgroup(llvm::ArrayRef<int> group, int me,
                                  size_t size, llvm::StringRef name) {
  std::vector<int> sorted(group.begin(), group.end());
  std::sort(sorted.begin(), sorted.end());
  bool valid = !group.empty() &&
               std::adjacent_find(sorted.begin(), sorted.end()) ==
                   sorted.end() &&
               sorted.front() >= 0 &&
               sorted.back() < static_cast<int>(size);
  auto at = std::find(group.begin(), group.end(), me);
  if (!valid || at == group.end()) {
    return llvm::createStringError(
        "the " + name + " group of rank " + std::to_string(me) +
        " must list distinct ranks below " + std::to_string(size) +
        ", this one among them");
  }
  return static_cast<int>(at - group.begin());
}

class SingleCommunicator : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  llvm::Expected<std::unique_ptr<Communicator>>
  subgroup(llvm::ArrayRef<int> group, llvm::StringRef name) override {
    if (auto mine = checkSubgroup(group, 0, 1, name); !mine) {
      return mine.takeError();
    }
    return std::make_unique<SingleCommunicator>();
  }
  llvm::Error allReduce(float *, size_t, Reduction) override {
    return llvm::Error::success();
  }
  llvm::Error reduceScatter(float *data, float *output, size_t count,
                            Reduction) override {
    std::memmove(output, data, count * sizeof(float));
    return llvm::Error::success();
  }
  llvm::Error allGather(const void *input, void *output,
                        size_t bytes) override {
    std::memmove(output, input, bytes);
    return llvm::Error::success();
  }
  llvm::Error broadcast(void *, size_t, int root) override {
    if (root != 0) {
      return llvm::createStringError("broadcast from rank " +
                                     std::to_string(root) +
                                     " in a group of one");
    }
    return llvm::Error::success();
  }
  llvm::Error barrier() override { return llvm::Error::success(); }
};

/// What a group's communicator shares with the job's other groups: the
/// rendezvous store and the transport device.
struct Rendezvous {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
  /// This attempt's keys in the store (see attemptPrefix).
  std::string attempt;
};

/// Connects a Gloo context of `size` ranks, this one `rank`, through the
/// store's keys under `prefix`.
std::shared_ptr<gloo::Context> connectMesh(const Rendezvous &shared,
                                           const std::string &prefix, int rank,
                                           int size,
                                           std::chrono::milliseconds timeout) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // See MeshStore: Gloo waits five times this for each connection.
  context->setTimeout(
      std::max<std::chrono::milliseconds>(timeout / 5, std::chrono::milliseconds(1)));
  MeshStore meshStore(*shared.store, prefix + "gloo/", timeout);
  std::shared_ptr<gloo::transport::Device> device = shared.device;
  context->connectFullMesh(meshStore, device);
  context->setTimeout(timeout);
  return context;
}

class GlooCommunicator : public Communicator {
public:
  /// `world` is this group as a world of its own (its rank and size);
  /// `members` the job's ranks it holds, `prefix` its keys in the store.
  GlooCommunicator(World world, std::shared_ptr<gloo::Context> context,
                   Rendezvous shared, std::string prefix, std::string rank0,
                   std::vector<int> members, std::string where)
      : world(std::move(world)), context(std::move(context)),
        shared(std::move(shared)),
        prefix(std::move(prefix)), rank0(std::move(rank0)),
        members(std::move(members)), where(std::move(where)) {}

  llvm::Expected<std::unique_ptr<Communicator>>
  subgroup(llvm::ArrayRef<int> group, llvm::StringRef name) override {
    auto mine = checkSubgroup(group, world.rank, members.size(), name);
    if (!mine) {
      return mine.takeError();
    }
    if (group.size() == 1) {
      return std::make_unique<SingleCommunicator>();
    }
    std::vector<int> jobRanks;
    for (int r : group) {
      jobRanks.push_back(members[r]);
    }
    World sub = world;
    sub.rank = *mine;
    sub.size = static_cast<int>(group.size());
    std::string subPrefix = prefix + "group/" + name.str() + "/" +
                            std::to_string(jobRanks.front()) + "/";
    std::string subWhere = where + " (rank " + std::to_string(sub.rank) +
                           " of its " + name.str() + " group of " +
                           std::to_string(sub.size) + ")";
    try {
      auto subContext =
          connectMesh(shared, subPrefix, sub.rank, sub.size, world.timeout);
      return std::make_unique<GlooCommunicator>(
          sub, std::move(subContext), shared, subPrefix, "",
          std::move(jobRanks), subWhere);
    } catch (const std::exception &e) {
      return llvm::createStringError("connecting the " + name +
                                     " group's Gloo mesh failed on " + where +
                                     ": " + oneLine(e.what()));
    }
  }

  int rank() const override { return world.rank; }
  int size() const override { return world.size; }

  llvm::Error allReduce(float *data, size_t count,
                        Reduction reduction) override {
    if (count == 0) {
      return llvm::Error::success();
    }
    uint32_t tag = nextTag++;
    try {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(data, count);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      void (*sum)(void *, const void *, const void *, size_t) =
          &gloo::sum<float>;
      opts.setReduceFunction(sum);
      opts.setTag(tag);
      opts.setTimeout(world.timeout);
      gloo::allreduce(opts);
    } catch (const std::exception &e) {
      return failure("all-reduce of " + std::to_string(count) + " floats", tag,
                     e);
    }
    if (reduction == Reduction::Mean) {
      float scale = 1.0f / static_cast<float>(world.size);
      for (size_t i = 0; i < count; ++i) {
        data[i] *= scale;
      }
    }
    return llvm::Error::success();
  }

  /// Gloo reduces block r onto rank r, one block after another: each
  /// rank adds in a fixed order, so the bytes are the same on every run.
  llvm::Error reduceScatter(float *data, float *output, size_t count,
                            Reduction reduction) override {
    if (count == 0) {
      return llvm::Error::success();
    }
    uint32_t tag = nextTag;
    nextTag += static_cast<uint32_t>(world.size);
    try {
      for (int root = 0; root < world.size; ++root) {
        gloo::ReduceOptions opts(context);
        // In place: Gloo's ring reads and then overwrites the block.
        opts.setOutput(data + root * count, count);
        opts.setRoot(root);
        void (*sum)(void *, const void *, const void *, size_t) =
            &gloo::sum<float>;
        opts.setReduceFunction(sum);
        opts.setTag(tag + static_cast<uint32_t>(root));
        opts.setTimeout(world.timeout);
        gloo::reduce(opts);
      }
    } catch (const std::exception &e) {
      return failure("reduce-scatter of " + std::to_string(count) +
                         " floats a rank",
                     tag, e);
    }
    const float *mine = data + world.rank * count;
    float scale = reduction == Reduction::Mean
                      ? 1.0f / static_cast<float>(world.size)
                      : 1.0f;
    for (size_t i = 0; i < count; ++i) {
      output[i] = mine[i] * scale; // exact for a sum's 1
    }
    return llvm::Error::success();
  }

  llvm::Error allGather(const void *input, void *output,
                        size_t bytes) override {
    if (bytes == 0) {
      return llvm::Error::success();
    }
    uint32_t tag = nextTag++;
    try {
      gloo::AllgatherOptions opts(context);
      // Gloo only reads the input (its buffer type is not const).
      opts.setInput(const_cast<char *>(static_cast<const char *>(input)),
                    bytes);
      opts.setOutput(static_cast<char *>(output), bytes * world.size);
      opts.setTag(tag);
      opts.setTimeout(world.timeout);
      gloo::allgather(opts);
    } catch (const std::exception &e) {
      return failure("all-gather of " + std::to_string(bytes) + " bytes", tag,
                     e);
    }
    return llvm::Error::success();
  }

  llvm::Error broadcast(void *data, size_t bytes, int root) override {
    uint32_t tag = nextTag++;
    try {
      gloo::BroadcastOptions opts(context);
      opts.setOutput(static_cast<char *>(data), bytes);
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(world.timeout);
      gloo::broadcast(opts);
    } catch (const std::exception &e) {
      return failure("broadcast from rank " + std::to_string(root), tag, e);
    }
    return llvm::Error::success();
  }

  llvm::Error barrier() override {
    uint32_t tag = nextTag++;
    try {
      gloo::BarrierOptions opts(context);
      opts.setTag(tag);
      opts.setTimeout(world.timeout);
      gloo::barrier(opts);
    } catch (const std::exception &e) {
      return failure("barrier", tag, e);
    }
    return llvm::Error::success();
  }

private:
  llvm::Error failure(const std::string &what, uint32_t tag,
                      const std::exception &e) {
    std::string message = oneLine(e.what());
    llvm::StringRef text(message);
    bool timedOut = text.contains_insensitive("timed out") ||
                    text.contains_insensitive("timeout");
    std::string head =
        what +
        (timedOut ? " timed out after " +
                        std::to_string(world.timeout.count() / 1000) + " s"
                  : std::string(" failed")) +
        " on " + where;
    std::optional<std::string> waited = waitedFor(tag);
    if (!waited) {
      return llvm::createStringError(
          head + ": " + message +
          " (a peer exited or stopped answering; see its log)");
    }
    if (waited->empty()) {
      return llvm::createStringError(
          head + ": " + message +
          " (every other rank failed in it too; see their logs)");
    }
    return llvm::createStringError(
        head + " waiting for " + *waited +
        (timedOut ? std::string() : ": " + message));
  }

  /// "rank 2 (pid 4711 on host-a)", as rank 2 joined.
  std::string identify(int rank, Clock::time_point deadline) {
    std::string who = rank == 0 ? rank0 : "";
    if (who.empty()) {
      try {
        std::string key = joinKey(shared.attempt, members[rank]);
        if (auto *tcp = dynamic_cast<TcpStore *>(store())) {
          who = tcp->lookup(key, deadline).value_or("");
        } else if (isSet(*store(), key, deadline)) {
          std::vector<char> value = store()->get(key);
          who.assign(value.begin(), value.end());
        }
      } catch (const std::exception &) {
      }
    }
    return "rank " + std::to_string(members[rank]) +
           (who.empty() ? "" : " (" + who + ")");
  }

  /// The ranks that collective `tag` waited for, named. Every rank whose
  /// collective fails says so in the store and looks for the others'
  /// reports for a while (they fail at about the same time: each waited
  /// the same timeout); a rank that does not report is stopped, dead or
  /// behind, and the others waited for it. A peer's own neighbour in the
  /// ring is not enough: with three ranks and rank 1 stopped, rank 0 waits
  /// on rank 2, which waits on rank 1. Empty when every rank reported;
  /// nothing when this rank cannot report.
  std::optional<std::string> waitedFor(uint32_t tag) {
    auto grace = std::min<std::chrono::milliseconds>(world.timeout,
                                                     std::chrono::seconds(10));
    Clock::time_point end = Clock::now() + grace;
    auto key = [&](int r) {
      return prefix + "stalled/" + std::to_string(tag) + "/" +
             std::to_string(r);
    };
    std::vector<int> silent;
    for (int r = 0; r < world.size; ++r) {
      if (r != world.rank) {
        silent.push_back(r);
      }
    }
    try {
      setKey(*store(), key(world.rank), std::to_string(::getpid()),
             Clock::now() + grace);
    } catch (const std::exception &) {
      // Rank 0 serves a TCP store: it does not answer when rank 0 is
      // stopped or gone.
      if (world.rank == 0 || !dynamic_cast<TcpStore *>(store())) {
        return std::nullopt;
      }
      return identify(0, Clock::now()) +
             ", whose rendezvous store does not answer either";
    }
    // Named at the first look: rank 0, whose store this is, may exit
    // once it has made its own diagnosis.
    std::map<int, std::string> names;
    try {
      while (!silent.empty() && Clock::now() < end) {
        std::vector<int> still;
        for (int r : silent) {
          if (!isSet(*store(), key(r), Clock::now() + grace)) {
            still.push_back(r);
            if (!names.count(r)) {
              names[r] = identify(r, Clock::now() + grace);
            }
          }
        }
        silent = std::move(still);
        if (!silent.empty()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
      }
    } catch (const std::exception &) {
      // Rank 0 exited after its own report: the last look stands.
    }
    std::string list;
    for (int r : silent) {
      list += (list.empty() ? "" : ", ") +
              (names.count(r) ? names[r] : "rank " + std::to_string(r));
    }
    return list;
  }

  gloo::rendezvous::Store *store() const { return shared.store.get(); }

  World world;
  std::shared_ptr<gloo::Context> context;
  Rendezvous shared;
  /// This group's keys in the store.
  std::string prefix;
  /// Rank 0's identity, read at rendezvous: the store may not answer when
  /// rank 0 is the rank waited for.
  std::string rank0;
  /// The job's rank of each of the group's ranks.
  std::vector<int> members;
  /// This rank, as messages name it: "rank 2 of 4", with its place in the
  /// group for a subgroup's.
  std::string where;
  uint32_t nextTag = 1;
};

std::string localHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !*name) {
    return "localhost";
  }
  return name;
}

/// The local address that routes to `host` (no packet is sent: connecting a
/// UDP socket only picks the route), so peers can reach this rank's pairs.
std::string addressTowards(const std::string &host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0) {
    return "";
  }
  std::string result;
  for (addrinfo *a = found; a && result.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &length) ==
            0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void *bytes =
          local.ss_family == AF_INET
              ? static_cast<const void *>(
                    &reinterpret_cast<sockaddr_in *>(&local)->sin_addr)
              : static_cast<const void *>(
                    &reinterpret_cast<sockaddr_in6 *>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, bytes, text, sizeof(text))) {
        result = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return result;
}

/// Keys that tell this attempt from others sharing the store. Rank 0
/// serves a TCP store afresh for every attempt, so its keys need nothing
/// more. A file store on shared storage outlives attempts: its keys go
/// under what every rank of one attempt agrees on and no other attempt
/// shares. A worker's own restart count is not that: after a node is
/// replaced the survivors count 1 and the newcomer 0. Torchrun's agents
/// agree on each rendezvous round's master address and port; mpirun gives
/// each launch a job id; KILN_RUN_ATTEMPT names an attempt explicitly.
std::string attemptPrefix(const World &world) {
  if (world.fileStore.empty()) {
    return "kiln/";
  }
  auto variable = [](const char *name) -> std::string {
    const char *value = std::getenv(name);
    return value && *value ? value : "";
  };
  std::string attempt = variable("KILN_RUN_ATTEMPT");
  if (attempt.empty() && world.launcher == "torchrun" &&
      !variable("MASTER_ADDR").empty()) {
    attempt = variable("MASTER_ADDR") + ":" + variable("MASTER_PORT");
  }
  for (const char *name : {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}) {
    if (attempt.empty()) {
      attempt = variable(name);
    }
  }
  if (attempt.empty()) {
    attempt = "0";
  }
  std::replace(attempt.begin(), attempt.end(), '/', '_');
  return "kiln/attempt-" + attempt + "/";
}

std::string fileStoreDirectory(const World &world) {
  for (const char *name : {"KILN_RUN_ID", "TORCHELASTIC_RUN_ID",
                           "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid"}) {
    if (const char *id = std::getenv(name); id && *id) {
      return world.fileStore + "/" + id;
    }
  }
  return world.fileStore;
}

llvm::Expected<std::unique_ptr<gloo::rendezvous::Store>>
openStore(const World &world) {
  if (!world.fileStore.empty()) {
    std::string dir = fileStoreDirectory(world);
    if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
      return llvm::createStringError("rendezvous file store '" + dir +
                                     "': " + ec.message());
    }
    try {
      return std::make_unique<FileStore>(dir);
    } catch (const std::exception &e) {
      return llvm::createStringError("rendezvous file store '" + dir +
                                     "': " + e.what());
    }
  }
  auto tcp = TcpStore::open(world.masterAddr, world.masterPort,
                            world.rank == 0, world.timeout);
  if (!tcp) {
    return llvm::createStringError(world.describe() + ": " +
                                   llvm::toString(tcp.takeError()));
  }
  return std::unique_ptr<gloo::rendezvous::Store>(std::move(*tcp));
}

/// What the rendezvous learnt of the group.
struct Joined {
  /// How rank 0 announced itself ("pid 4711 on host-a").
  std::string rank0;
  /// Whether rank 0 or the last rank is on another host than this one.
  bool otherHosts = false;
};

/// Every rank announces itself and waits for the others, so that a missing
/// rank is named here rather than as a Gloo pair timeout.
llvm::Expected<Joined> join(gloo::rendezvous::Store &store,
                            const World &world, const std::string &prefix) {
  std::string me =
      "pid " + std::to_string(::getpid()) + " on " + localHostName();
  std::vector<std::string> keys;
  for (int r = 0; r < world.size; ++r) {
    keys.push_back(joinKey(prefix, r));
  }
  try {
    // A rank already in a store served on this port belongs to another
    // job: a second group started on a busy MASTER_PORT reaches the first
    // group's store from every rank but rank 0 (whose bind fails).
    if (auto *tcp = dynamic_cast<TcpStore *>(&store)) {
      if (std::optional<std::string> other =
              tcp->setIfAbsent(keys[world.rank], me)) {
        return llvm::createStringError(
            "rendezvous failed on " + world.describe() +
            ": the rendezvous store at " + tcp->address() +
            " already has a rank " + std::to_string(world.rank) + " (" +
            *other + "): another job on MASTER_PORT? pick a free port");
      }
    } else {
      store.set(keys[world.rank], std::vector<char>(me.begin(), me.end()));
    }
    store.wait(keys, world.timeout);
    std::vector<char> first = store.get(keys[0]);
    std::vector<char> last = store.get(keys.back());
    Joined joined{std::string(first.begin(), first.end())};
    std::string here = " on " + localHostName();
    for (llvm::StringRef who :
         {llvm::StringRef(joined.rank0),
          llvm::StringRef(last.data(), last.size())}) {
      joined.otherHosts |= !who.ends_with(here);
    }
    return joined;
  } catch (const std::exception &e) {
    std::vector<std::string> missing;
    if (const auto *timeout = dynamic_cast<const StoreTimeout *>(&e)) {
      missing = timeout->missing;
    } else if (!world.fileStore.empty()) {
      // The file store's timeout carries no list: ask which keys are absent
      // (files on shared storage outlive whoever wrote them).
      try {
        for (const std::string &key : keys) {
          if (!isSet(store, key, Clock::now())) {
            missing.push_back(key);
          }
        }
      } catch (const std::exception &) {
        missing.clear();
      }
    }
    if (missing.empty()) {
      return llvm::createStringError("rendezvous failed on " +
                                     world.describe() + ": " +
                                     oneLine(e.what()));
    }
    std::string ranks;
    for (const std::string &key : missing) {
      ranks += (ranks.empty() ? "" : ", ") +
               key.substr(key.rfind('/') + 1);
    }
    std::string where = world.fileStore.empty()
                            ? world.masterAddr + ":" +
                                  std::to_string(world.masterPort)
                            : "file store " + fileStoreDirectory(world);
    return llvm::createStringError(
        "rendezvous timed out after " +
        std::to_string(world.timeout.count() / 1000) + " s on " +
        world.describe() + " at " + where + ": rank" +
        (missing.size() > 1 ? "s " : " ") + ranks + " did not join");
  }
}

} // namespace

/// The address in Gloo's description of a TCP device ("tcp, pci=,
/// iface=lo, speed=-1, addr=[127.0.0.1]"), or the whole description.
std::string deviceAddress(llvm::StringRef device) {
  size_t at = device.find("addr=[");
  if (at == llvm::StringRef::npos) {
    return device.str();
  }
  llvm::StringRef rest = device.drop_front(at + 6);
  return rest.take_until([](char c) { return c == ']'; }).str();
}

/// A rank that would advertise a loopback address to peers on other hosts
/// (a host name that resolves to 127.0.1.1, as Debian sets it up, or
/// GLOO_SOCKET_IFNAME=lo) says so: its peers cannot reach it, and which
/// side connects decides whether the job notices. Called when the
/// rendezvous saw another host.
void warnOfLoopback(const World &world, llvm::StringRef address,
                    llvm::StringRef chosenBy) {
  auto loopback = [](llvm::StringRef address) {
    return address.starts_with("127.") || address.starts_with("[127.") ||
           address.contains("::1]") || address == "::1" ||
           address.starts_with("localhost");
  };
  if (loopback(address)) {
    std::fprintf(stderr,
                 "kiln: warning: %s advertises the loopback address %s "
                 "(chosen by %s); ranks on other hosts cannot reach it: set "
                 "GLOO_SOCKET_IFNAME or KILN_COMM_HOST\n",
                 world.describe().c_str(), address.str().c_str(),
                 chosenBy.str().c_str());
  }
}

llvm::Expected<std::unique_ptr<Communicator>> connect(const World &world) {
  if (world.size == 1) {
    return std::make_unique<SingleCommunicator>();
  }
  if (world.fileStore.empty() && world.masterAddr.empty()) {
    return llvm::createStringError(
        world.describe() + " (" + world.launcher +
        "): set MASTER_ADDR and MASTER_PORT (with mpirun: -x MASTER_ADDR "
        "-x MASTER_PORT), or KILN_RENDEZVOUS=file:<shared directory>");
  }
  auto store = openStore(world);
  if (!store) {
    return store.takeError();
  }
  std::string prefix = attemptPrefix(world);
  llvm::Expected<Joined> joined = join(**store, world, prefix);
  if (!joined) {
    return joined.takeError();
  }
  gloo::transport::tcp::attr attr;
  // How this rank's address was chosen, for the errors and warnings that
  // name it.
  std::string chosenBy;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.iface = iface;
    chosenBy = std::string("GLOO_SOCKET_IFNAME=") + iface;
  } else if (const char *host = std::getenv("KILN_COMM_HOST");
             host && *host) {
    attr.hostname = host;
    chosenBy = std::string("KILN_COMM_HOST=") + host;
  } else {
    std::string route =
        world.masterAddr.empty() ? "" : addressTowards(world.masterAddr);
    attr.hostname = route.empty() ? localHostName() : route;
    chosenBy = route.empty() ? "this host's name"
                             : "the route to MASTER_ADDR=" + world.masterAddr;
  }
  std::string address = chosenBy;
  try {
    Rendezvous shared{std::shared_ptr<gloo::rendezvous::Store>(std::move(*store)),
                      gloo::transport::tcp::CreateDevice(attr), prefix};
    std::string advertised = deviceAddress(shared.device->str());
    address = advertised + " (chosen by " + chosenBy + ")";
    if (joined->otherHosts) {
      warnOfLoopback(world, advertised, chosenBy);
    }
    auto context =
        connectMesh(shared, prefix, world.rank, world.size, world.timeout);
    std::vector<int> members(world.size);
    std::iota(members.begin(), members.end(), 0);
    return std::make_unique<GlooCommunicator>(
        world, std::move(context), std::move(shared), prefix,
        std::move(joined->rank0), std::move(members), world.describe());
  } catch (const std::exception &e) {
    return llvm::createStringError(
        "connecting the Gloo mesh failed on " + world.describe() +
        " at address " + address + ": " + oneLine(e.what()) +
        "; if the other hosts cannot reach that address, set "
        "GLOO_SOCKET_IFNAME to an interface they reach, or KILN_COMM_HOST "
        "to this host's address on it");
  }
}

} // namespace kiln::comm
