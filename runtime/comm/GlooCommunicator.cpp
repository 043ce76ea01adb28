//===- GlooCommunicator.cpp - the Gloo backend and rendezvous -------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/TcpStore.h"

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

#include "llvm/Support/FileSystem.h"

#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::comm {

namespace {

class SingleCommunicator : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  llvm::Error allReduce(float *, size_t, Reduction) override {
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

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(World world, std::shared_ptr<gloo::Context> context,
                   std::unique_ptr<gloo::rendezvous::Store> store)
      : world(std::move(world)), context(std::move(context)),
        store(std::move(store)) {}

  int rank() const override { return world.rank; }
  int size() const override { return world.size; }

  llvm::Error allReduce(float *data, size_t count,
                        Reduction reduction) override {
    if (count == 0) {
      return llvm::Error::success();
    }
    try {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(data, count);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      void (*sum)(void *, const void *, const void *, size_t) =
          &gloo::sum<float>;
      opts.setReduceFunction(sum);
      opts.setTag(nextTag++);
      opts.setTimeout(world.timeout);
      gloo::allreduce(opts);
    } catch (const std::exception &e) {
      return failure("all-reduce of " + std::to_string(count) + " floats", e);
    }
    if (reduction == Reduction::Mean) {
      float scale = 1.0f / static_cast<float>(world.size);
      for (size_t i = 0; i < count; ++i) {
        data[i] *= scale;
      }
    }
    return llvm::Error::success();
  }

  llvm::Error allGather(const void *input, void *output,
                        size_t bytes) override {
    if (bytes == 0) {
      return llvm::Error::success();
    }
    try {
      gloo::AllgatherOptions opts(context);
      // Gloo only reads the input (its buffer type is not const).
      opts.setInput(const_cast<char *>(static_cast<const char *>(input)),
                    bytes);
      opts.setOutput(static_cast<char *>(output), bytes * world.size);
      opts.setTag(nextTag++);
      opts.setTimeout(world.timeout);
      gloo::allgather(opts);
    } catch (const std::exception &e) {
      return failure("all-gather of " + std::to_string(bytes) + " bytes", e);
    }
    return llvm::Error::success();
  }

  llvm::Error broadcast(void *data, size_t bytes, int root) override {
    try {
      gloo::BroadcastOptions opts(context);
      opts.setOutput(static_cast<char *>(data), bytes);
      opts.setRoot(root);
      opts.setTag(nextTag++);
      opts.setTimeout(world.timeout);
      gloo::broadcast(opts);
    } catch (const std::exception &e) {
      return failure("broadcast from rank " + std::to_string(root), e);
    }
    return llvm::Error::success();
  }

  llvm::Error barrier() override {
    try {
      gloo::BarrierOptions opts(context);
      opts.setTag(nextTag++);
      opts.setTimeout(world.timeout);
      gloo::barrier(opts);
    } catch (const std::exception &e) {
      return failure("barrier", e);
    }
    return llvm::Error::success();
  }

private:
  llvm::Error failure(const std::string &what, const std::exception &e) {
    // Gloo's messages span lines; ours is one.
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    return llvm::createStringError(
        what + " failed on " + world.describe() + ": " + message +
        " (a peer exited or stopped answering; see its log)");
  }

  World world;
  std::shared_ptr<gloo::Context> context;
  std::unique_ptr<gloo::rendezvous::Store> store;
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

/// Keys that tell this attempt from earlier ones on a file store that
/// outlives them (torchrun restarts, reruns with the same run id).
std::string attemptPrefix() {
  const char *restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return std::string("kiln/attempt-") + (restart && *restart ? restart : "0") +
         "/";
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
      return std::make_unique<gloo::rendezvous::FileStore>(dir);
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

/// Every rank announces itself and waits for the others, so that a missing
/// rank is named here rather than as a Gloo pair timeout.
llvm::Error join(gloo::rendezvous::Store &store, const World &world,
                 const std::string &prefix) {
  std::string me = localHostName() + " pid " + std::to_string(::getpid());
  std::vector<std::string> keys;
  for (int r = 0; r < world.size; ++r) {
    keys.push_back(prefix + "join/" + std::to_string(r));
  }
  try {
    store.set(keys[world.rank], std::vector<char>(me.begin(), me.end()));
    store.wait(keys, world.timeout);
    return llvm::Error::success();
  } catch (const std::exception &e) {
    std::vector<std::string> missing;
    if (const auto *timeout = dynamic_cast<const StoreTimeout *>(&e)) {
      missing = timeout->missing;
    } else if (!world.fileStore.empty()) {
      // The file store's timeout carries no list: ask which keys are absent
      // (files on shared storage outlive whoever wrote them).
      for (const std::string &key : keys) {
        try {
          store.wait({key}, std::chrono::milliseconds(1));
        } catch (...) {
          missing.push_back(key);
        }
      }
    }
    if (missing.empty()) {
      return llvm::createStringError("rendezvous failed on " +
                                     world.describe() + ": " + e.what());
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
  std::string prefix = attemptPrefix();
  if (auto e = join(**store, world, prefix)) {
    return std::move(e);
  }
  gloo::transport::tcp::attr attr;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.iface = iface;
  } else if (const char *host = std::getenv("KILN_COMM_HOST");
             host && *host) {
    attr.hostname = host;
  } else {
    std::string route =
        world.masterAddr.empty() ? "" : addressTowards(world.masterAddr);
    attr.hostname = route.empty() ? localHostName() : route;
  }
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(world.rank, world.size);
    context->setTimeout(world.timeout);
    gloo::rendezvous::PrefixStore meshStore(prefix + "gloo", **store);
    context->connectFullMesh(meshStore, device);
    return std::make_unique<GlooCommunicator>(world, std::move(context),
                                              std::move(*store));
  } catch (const std::exception &e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    return llvm::createStringError("connecting the Gloo mesh failed on " +
                                   world.describe() + ": " + message);
  }
}

} // namespace kiln::comm
