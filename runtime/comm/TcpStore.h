//===- TcpStore.h - Gloo's rendezvous store over TCP ------------*- C++ -*-===//
//
// Debian's Gloo (2022) has file, hash and Redis stores but no TCP store, and
// torchrun's convention is a store served by rank 0 at MASTER_ADDR:
// MASTER_PORT. This is that store: a key-value map served by one thread per
// connection on rank 0, reached by every rank (rank 0 included) through a
// client connection. Requests are length-prefixed; a missing key is polled
// for until the deadline, and a timeout names the keys still missing.
//
// Every wait is bounded by the store's timeout (KILN_COMM_TIMEOUT): the
// connection, each request's reply (a stopped rank 0 answers nothing) and
// each wait for keys. A client greets the server first, so that another
// service on the port (torchrun's own store, say) is named as such.
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
#include <optional>
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
  using Deadline = std::chrono::steady_clock::time_point;

  /// Connects to host:port, retrying until `timeout`; with `serve`, first
  /// serves the store on `port` (all interfaces) from this process.
  static llvm::Expected<std::unique_ptr<TcpStore>>
  open(const std::string &host, int port, bool serve,
       std::chrono::milliseconds timeout);
  ~TcpStore() override;

  /// "host:port".
  const std::string &address() const { return endpoint; }

  void set(const std::string &key, const std::vector<char> &data) override;
  /// Waits for the key (up to the store's timeout), like Gloo's FileStore.
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

  /// Sets `key` to `data` unless it is set already, in one request; returns
  /// the value it already held, if it did.
  std::optional<std::string> setIfAbsent(const std::string &key,
                                         const std::string &data);
  /// Sets `key`, giving up at `deadline` (throws, as every request does).
  void set(const std::string &key, const std::string &data,
           Deadline deadline);
  /// The value of `key` now, if it is set, asking until `deadline`.
  std::optional<std::string> lookup(const std::string &key,
                                    Deadline deadline);
  /// The keys of `keys` that are not set yet.
  std::vector<std::string> missing(const std::vector<std::string> &keys);

private:
  TcpStore() = default;
  Deadline requestDeadline() const;
  /// Sends one request (an op byte and blobs) and reads the reply's flag
  /// byte; throws gloo::IoException naming the store when it cannot.
  char request(char op, const std::vector<std::string> &blobs,
               Deadline deadline);
  std::string replyBlob(Deadline deadline);
  [[noreturn]] void fail(bool timedOut);

  std::string endpoint;
  int fd = -1;
  /// A request that timed out leaves its reply in flight: the connection
  /// is not used again.
  bool unanswered = false;
  std::mutex requestMutex;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<TcpStoreServer> server;
};

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_TCPSTORE_H
