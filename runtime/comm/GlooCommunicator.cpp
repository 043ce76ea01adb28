//===- GlooCommunicator.cpp - the Gloo backend ---------------------------===//
//
// Communicators over Gloo meshes: the job's, connected once its ranks have
// met (GlooRendezvous.h), and its subgroups', connected through the same
// store and transport device.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/GlooRendezvous.h"
#include "runtime/comm/TcpStore.h"

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <thread>
#include <unistd.h>

namespace kiln::comm {

namespace {

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

} // namespace

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
  auto [attr, chosenBy] = advertisedAddress(world);
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
