//===- GlooRendezvous.h - how a job's ranks meet ----------------*- C++ -*-===//
//
// The store every rank of a job meets in (rank 0's TCP store, or a
// directory on shared storage), the keys of one attempt in it, the join
// that names a missing rank, and the address this rank advertises to its
// peers. Private to runtime/comm: GlooCommunicator.cpp connects its meshes
// through it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_GLOORENDEZVOUS_H
#define KILN_RUNTIME_COMM_GLOORENDEZVOUS_H

#include "runtime/comm/Communicator.h"

#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/attr.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

using Clock = std::chrono::steady_clock;

/// Whether `key` is set in `store` now, asking no later than `deadline`.
bool isSet(gloo::rendezvous::Store &store, const std::string &key,
           Clock::time_point deadline);
/// Sets `key` in `store`, giving up no later than `deadline`.
void setKey(gloo::rendezvous::Store &store, const std::string &key,
            const std::string &value, Clock::time_point deadline);

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

  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override;

private:
  std::vector<std::string> prefixed(const std::vector<std::string> &keys);

  gloo::rendezvous::Store &base;
  std::string prefix;
  std::chrono::milliseconds timeout;
};

/// `message` with its line breaks made spaces (Gloo's errors have some).
std::string oneLine(std::string message);
/// The key rank `rank` announces itself under.
std::string joinKey(const std::string &prefix, int rank);

/// Keys that tell this attempt from others sharing the store.
std::string attemptPrefix(const World &world);
/// The job's store: a directory under KILN_RENDEZVOUS=file:..., or the TCP
/// store rank 0 serves at MASTER_ADDR:MASTER_PORT.
llvm::Expected<std::unique_ptr<gloo::rendezvous::Store>>
openStore(const World &world);

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
                            const World &world, const std::string &prefix);

/// The transport attributes that choose the address this rank advertises,
/// and how they were chosen (for the errors and warnings that name it).
struct Advertised {
  gloo::transport::tcp::attr attr;
  std::string chosenBy;
};
Advertised advertisedAddress(const World &world);
/// The address in Gloo's description of a TCP device ("tcp, pci=,
/// iface=lo, speed=-1, addr=[127.0.0.1]"), or the whole description.
std::string deviceAddress(llvm::StringRef device);
/// Warns when this rank advertises a loopback address to peers on other
/// hosts (called when the rendezvous saw another host).
void warnOfLoopback(const World &world, llvm::StringRef address,
                    llvm::StringRef chosenBy);

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_GLOORENDEZVOUS_H
