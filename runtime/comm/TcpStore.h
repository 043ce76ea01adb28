//===- TcpStore.h - Gloo's rendezvous store over TCP ------------*- C++ -*-===//
//
// Debian's Gloo (2022) has file, hash and Redis stores but no TCP store, and
// torchrun's convention is a store served by rank 0 at MASTER_ADDR:
// MASTER_PORT. This is that store: a key-value map served by one thread per
// connection on rank 0, reached by every rank (rank 0 included) through a
// client connection. Requests are length-prefixed; a missing key is polled
// for until the deadline, and a timeout names the keys still missing.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_TCPSTORE_H
#define KILN_RUNTIME_COMM_TCPSTORE_H

#include "gloo/rendezvous/store.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::comm {

/// Thrown (inside Gloo's Store interface) when keys are still missing at
/// the deadline.
struct StoreTimeout : std::runtime_error {
  StoreTimeout(const std::string &message, std::vector<std::string> keys)
      : std::runtime_error(message), missing(std::move(keys)) {}
  std::vector<std::string> missing;
};

class TcpStoreServer;

class TcpStore : public gloo::rendezvous::Store {
public:
  /// Connects to host:port, retrying until `timeout`; with `serve`, first
  /// serves the store on `port` (all interfaces) from this process.
  static llvm::Expected<std::unique_ptr<TcpStore>>
  open(const std::string &host, int port, bool serve,
       std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string &key, const std::vector<char> &data) override;
  /// Waits for the key (up to the store's timeout), like Gloo's FileStore.
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

  /// The keys of `keys` that are not set yet.
  std::vector<std::string> missing(const std::vector<std::string> &keys);

private:
  TcpStore() = default;
  bool tryGet(const std::string &key, std::vector<char> &data);

  std::string endpoint;
  int fd = -1;
  std::mutex requestMutex;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<TcpStoreServer> server;
};

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_TCPSTORE_H
