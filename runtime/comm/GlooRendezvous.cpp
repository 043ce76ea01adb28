//===- GlooRendezvous.cpp - how a job's ranks meet -----------------------===//

#include "runtime/comm/GlooRendezvous.h"

#include "runtime/comm/TcpStore.h"

#include "gloo/rendezvous/file_store.h"

#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <netdb.h>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::comm {

namespace {

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

std::string fileStoreDirectory(const World &world) {
  for (const char *name : {"KILN_RUN_ID", "TORCHELASTIC_RUN_ID",
                           "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid"}) {
    if (const char *id = std::getenv(name); id && *id) {
      return world.fileStore + "/" + id;
    }
  }
  return world.fileStore;
}

} // namespace

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

void MeshStore::set(const std::string &key, const std::vector<char> &data) {
  base.set(prefix + key, data);
}

std::vector<char> MeshStore::get(const std::string &key) {
  base.wait({prefix + key}, timeout);
  return base.get(prefix + key);
}

void MeshStore::wait(const std::vector<std::string> &keys) {
  base.wait(prefixed(keys), timeout);
}

void MeshStore::wait(const std::vector<std::string> &keys,
                     const std::chrono::milliseconds &) {
  base.wait(prefixed(keys), timeout);
}

std::vector<std::string>
MeshStore::prefixed(const std::vector<std::string> &keys) {
  std::vector<std::string> out;
  for (const std::string &key : keys) {
    out.push_back(prefix + key);
  }
  return out;
}

std::string oneLine(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  return message;
}

std::string joinKey(const std::string &prefix, int rank) {
  return prefix + "join/" + std::to_string(rank);
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

Advertised advertisedAddress(const World &world) {
  Advertised chosen;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    chosen.attr.iface = iface;
    chosen.chosenBy = std::string("GLOO_SOCKET_IFNAME=") + iface;
  } else if (const char *host = std::getenv("KILN_COMM_HOST");
             host && *host) {
    chosen.attr.hostname = host;
    chosen.chosenBy = std::string("KILN_COMM_HOST=") + host;
  } else {
    std::string route =
        world.masterAddr.empty() ? "" : addressTowards(world.masterAddr);
    chosen.attr.hostname = route.empty() ? localHostName() : route;
    chosen.chosenBy = route.empty()
                          ? "this host's name"
                          : "the route to MASTER_ADDR=" + world.masterAddr;
  }
  return chosen;
}

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

} // namespace kiln::comm
