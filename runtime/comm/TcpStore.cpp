//===- TcpStore.cpp - Gloo's rendezvous store over TCP --------------------===//

#include "runtime/comm/TcpStore.h"

#include "gloo/common/error.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::comm {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = TcpStore::Deadline;

/// What the client sends first and the server echoes: another service on
/// the port answers something else, or nothing.
constexpr const char kGreeting[] = "kiln-rendezvous-store-1";

enum class Io { Done, Closed, TimedOut };

/// Waits until `fd` is ready for `events` or `deadline` passes (a deadline
/// of Deadline::max() waits as long as it takes).
Io awaitReady(int fd, short events, Deadline deadline) {
  while (true) {
    int wait = -1;
    if (deadline != Deadline::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      if (left.count() <= 0) {
        return Io::TimedOut;
      }
      wait = static_cast<int>(std::min<long long>(left.count() + 1, 1 << 30));
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, wait);
    if (rc > 0) {
      return Io::Done;
    }
    if (rc == 0) {
      return Io::TimedOut;
    }
    if (errno != EINTR) {
      return Io::Closed;
    }
  }
}

/// Repeats `io` (a send or a recv of up to n bytes at p) until `size` bytes
/// have moved, waiting for the socket (blocking or not) until `deadline`.
template <typename IoFn>
Io transferAll(int fd, short events, char *p, size_t size, Deadline deadline,
               IoFn io) {
  while (size > 0) {
    ssize_t n = io(p, size);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return Io::Closed;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Io::Closed;
    }
    if (Io ready = awaitReady(fd, events, deadline); ready != Io::Done) {
      return ready;
    }
  }
  return Io::Done;
}

Io sendAll(int fd, const void *data, size_t size,
           Deadline deadline = Deadline::max()) {
  return transferAll(fd, POLLOUT,
                     const_cast<char *>(static_cast<const char *>(data)), size,
                     deadline, [fd](char *p, size_t n) {
                       return ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                     });
}

Io recvAll(int fd, void *data, size_t size,
           Deadline deadline = Deadline::max()) {
  return transferAll(fd, POLLIN, static_cast<char *>(data), size, deadline,
                     [fd](char *p, size_t n) {
                       return ::recv(fd, p, n, MSG_DONTWAIT);
                     });
}

Io sendBlob(int fd, const std::string &data,
            Deadline deadline = Deadline::max()) {
  uint32_t wire = htonl(static_cast<uint32_t>(data.size()));
  Io io = sendAll(fd, &wire, 4, deadline);
  return io == Io::Done ? sendAll(fd, data.data(), data.size(), deadline) : io;
}

Io recvBlob(int fd, std::string &out, Deadline deadline = Deadline::max()) {
  // Keys and values are addresses and names; a larger length is another
  // protocol's bytes, not a size to allocate.
  constexpr uint32_t kMaxBlob = 1u << 26;
  uint32_t wire = 0;
  if (Io io = recvAll(fd, &wire, 4, deadline); io != Io::Done) {
    return io;
  }
  if (ntohl(wire) > kMaxBlob) {
    return Io::Closed;
  }
  out.resize(ntohl(wire));
  return recvAll(fd, out.data(), out.size(), deadline);
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(t.count() / 1000) + " s";
}

} // namespace

// The map and its connections. Every request is an op byte and blobs; every
// reply a flag byte, then a blob where the op has one:
//   'H' greeting        -> 1 greeting
//   'S' key value       -> 1
//   'G' key             -> 0, or 1 value
//   'A' key value       -> 1 (set), or 0 value (already set: left as it was)
class TcpStoreServer {
public:
  ~TcpStoreServer() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      for (int c : clients) {
        ::shutdown(c, SHUT_RDWR);
      }
    }
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
    if (acceptor.joinable()) {
      acceptor.join();
    }
    for (std::thread &t : handlers) {
      t.join();
    }
  }

  static llvm::Expected<std::unique_ptr<TcpStoreServer>> listen(int port) {
    int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = fd >= 0;
    if (!v6) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
    }
    if (fd < 0) {
      return llvm::createStringError(llvm::Twine("socket: ") +
                                     std::strerror(errno));
    }
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (v6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_any;
      addr.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    }
    if (rc != 0 || ::listen(fd, 1024) != 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return llvm::createStringError(why);
    }
    auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer);
    server->listener = fd;
    server->acceptor = std::thread([s = server.get()] { s->acceptLoop(); });
    return server;
  }

private:
  TcpStoreServer() = default;

  void acceptLoop() {
    while (true) {
      int c = ::accept(listener, nullptr, nullptr);
      if (c < 0) {
        if (errno == EINTR) {
          continue;
        }
        return; // shut down
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) {
        ::close(c);
        return;
      }
      clients.push_back(c);
      handlers.emplace_back([this, c] { serve(c); });
    }
  }

  /// Answers one request whose op and first blob have been read; false when
  /// the connection is done.
  bool answer(int c, char op, const std::string &key) {
    if (op != 'H' && op != 'S' && op != 'G' && op != 'A') {
      return false; // not a Kiln client
    }
    std::string value;
    if (op == 'H') {
      char flag = 1;
      return sendAll(c, &flag, 1) == Io::Done &&
             sendBlob(c, key) == Io::Done;
    }
    if ((op == 'S' || op == 'A') && recvBlob(c, value) != Io::Done) {
      return false;
    }
    std::optional<std::string> found;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = data.find(key);
      if (it != data.end()) {
        found = it->second;
      }
      if (op == 'S' || (op == 'A' && !found)) {
        data[key] = value;
      }
    }
    char flag = op == 'S' || (op == 'A' && !found) || (op == 'G' && found);
    if (sendAll(c, &flag, 1) != Io::Done) {
      return false;
    }
    bool withValue = found && (op == 'G' || op == 'A');
    return !withValue || sendBlob(c, *found) == Io::Done;
  }

  void serve(int c) {
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string key;
    char op = 0;
    while (recvAll(c, &op, 1) == Io::Done && recvBlob(c, key) == Io::Done &&
           answer(c, op, key)) {
    }
    // Closed here, under the lock, so that the destructor never shuts down
    // a descriptor number this one's close has handed to someone else; a
    // job whose ranks reconnect after timeouts does not run out of them.
    std::lock_guard<std::mutex> lock(mutex);
    clients.erase(std::remove(clients.begin(), clients.end(), c),
                  clients.end());
    ::shutdown(c, SHUT_RDWR);
    ::close(c);
  }

  int listener = -1;
  std::thread acceptor;
  std::mutex mutex;
  bool stopping = false;
  std::vector<int> clients;
  std::vector<std::thread> handlers;
  std::map<std::string, std::string> data;
};

namespace {

/// Connects a non-blocking socket to one of `host`'s addresses, waiting no
/// later than `deadline`; -1 with `why` set when it cannot.
int connectBefore(const std::string &host, int port, Deadline deadline,
                  std::string &why) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  int rc =
      ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    why = std::string("cannot resolve: ") + ::gai_strerror(rc);
    return -1;
  }
  int connected = -1;
  for (addrinfo *a = found; a && connected < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK,
                      a->ai_protocol);
    if (fd < 0) {
      continue;
    }
    int error = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      // A host that drops the handshake leaves connect(2) waiting for
      // minutes; the store's timeout is the bound.
      if (error == EINPROGRESS) {
        socklen_t length = sizeof(error);
        Io ready = awaitReady(fd, POLLOUT, deadline);
        if (ready == Io::TimedOut) {
          error = ETIMEDOUT;
        } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)) {
          error = errno;
        }
      }
    }
    if (error == 0) {
      connected = fd;
    } else {
      why = std::strerror(error);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return connected;
}

} // namespace

llvm::Expected<std::unique_ptr<TcpStore>>
TcpStore::open(const std::string &host, int port, bool serve,
               std::chrono::milliseconds timeout) {
  auto store = std::unique_ptr<TcpStore>(new TcpStore);
  store->endpoint = host + ":" + std::to_string(port);
  store->timeout = timeout;
  if (serve) {
    auto server = TcpStoreServer::listen(port);
    if (!server) {
      return llvm::createStringError(
          "cannot serve the rendezvous store at " + store->endpoint + ": " +
          llvm::toString(server.takeError()) +
          " (another job on MASTER_PORT? pick a free port)");
    }
    store->server = std::move(*server);
  }
  // Rank 0 may not be listening yet: retry until the deadline.
  Deadline deadline = Clock::now() + timeout;
  std::string why;
  auto pause = std::chrono::milliseconds(20);
  while ((store->fd = connectBefore(host, port, deadline, why)) < 0) {
    if (Clock::now() + pause > deadline) {
      return llvm::createStringError(
          "cannot reach the rendezvous store at " + store->endpoint +
          " (served by rank 0) within " + seconds(timeout) + ": " + why);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  int one = 1;
  ::setsockopt(store->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  std::string echo;
  char flag = 0;
  Io io = sendAll(store->fd, "H", 1, deadline);
  if (io == Io::Done) {
    io = sendBlob(store->fd, kGreeting, deadline);
  }
  if (io == Io::Done) {
    io = recvAll(store->fd, &flag, 1, deadline);
  }
  if (io == Io::Done) {
    io = recvBlob(store->fd, echo, deadline);
  }
  if (io == Io::TimedOut) {
    return llvm::createStringError(
        "the rendezvous store at " + store->endpoint +
        " did not answer within " + seconds(timeout) +
        " (is rank 0 stopped, or another job's service on MASTER_PORT?)");
  }
  if (io != Io::Done || flag != 1 || echo != kGreeting) {
    return llvm::createStringError(
        "the service at " + store->endpoint +
        " is not Kiln's rendezvous store (it " +
        (io == Io::Closed ? "closed the connection" : "answered otherwise") +
        " when greeted): another job's, or torchrun's own store, on "
        "MASTER_PORT? pick a free port");
  }
  return store;
}

TcpStore::~TcpStore() {
  if (fd >= 0) {
    ::close(fd);
  }
}

TcpStore::Deadline TcpStore::requestDeadline() const {
  return Clock::now() + timeout;
}

void TcpStore::fail(bool timedOut) {
  if (timedOut) {
    unanswered = true;
    throw gloo::IoException("rendezvous store at " + endpoint +
                            " did not answer within " + seconds(timeout) +
                            " (is rank 0 stopped?)");
  }
  throw gloo::IoException("rendezvous store at " + endpoint +
                          " closed the connection (did rank 0 exit?)");
}

char TcpStore::request(char op, const std::vector<std::string> &blobs,
                       Deadline deadline) {
  if (unanswered) {
    fail(true);
  }
  Io io = sendAll(fd, &op, 1, deadline);
  for (size_t i = 0; i < blobs.size() && io == Io::Done; ++i) {
    io = sendBlob(fd, blobs[i], deadline);
  }
  char flag = 0;
  if (io == Io::Done) {
    io = recvAll(fd, &flag, 1, deadline);
  }
  if (io != Io::Done) {
    fail(io == Io::TimedOut);
  }
  return flag;
}

std::string TcpStore::replyBlob(Deadline deadline) {
  std::string value;
  if (Io io = recvBlob(fd, value, deadline); io != Io::Done) {
    fail(io == Io::TimedOut);
  }
  return value;
}

void TcpStore::set(const std::string &key, const std::string &data,
                   Deadline deadline) {
  std::lock_guard<std::mutex> lock(requestMutex);
  request('S', {key, data}, deadline);
}

void TcpStore::set(const std::string &key, const std::vector<char> &data) {
  set(key, std::string(data.begin(), data.end()), requestDeadline());
}

std::optional<std::string> TcpStore::setIfAbsent(const std::string &key,
                                                 const std::string &data) {
  std::lock_guard<std::mutex> lock(requestMutex);
  Deadline deadline = requestDeadline();
  if (request('A', {key, data}, deadline)) {
    return std::nullopt;
  }
  return replyBlob(deadline);
}

std::optional<std::string> TcpStore::lookup(const std::string &key,
                                            Deadline deadline) {
  std::lock_guard<std::mutex> lock(requestMutex);
  if (!request('G', {key}, deadline)) {
    return std::nullopt;
  }
  return replyBlob(deadline);
}

std::vector<std::string>
TcpStore::missing(const std::vector<std::string> &keys) {
  std::vector<std::string> absent;
  for (const std::string &key : keys) {
    if (!lookup(key, requestDeadline())) {
      absent.push_back(key);
    }
  }
  return absent;
}

std::vector<char> TcpStore::get(const std::string &key) {
  wait({key}, timeout);
  std::optional<std::string> value = lookup(key, requestDeadline());
  return value ? std::vector<char>(value->begin(), value->end())
               : std::vector<char>();
}

void TcpStore::wait(const std::vector<std::string> &keys) {
  wait(keys, timeout);
}

void TcpStore::wait(const std::vector<std::string> &keys,
                    const std::chrono::milliseconds &limit) {
  Clock::time_point deadline = Clock::now() + limit;
  auto pause = std::chrono::milliseconds(5);
  std::vector<std::string> absent = keys;
  while (true) {
    absent = missing(absent);
    if (absent.empty()) {
      return;
    }
    if (Clock::now() > deadline) {
      std::string list;
      for (const std::string &k : absent) {
        list += (list.empty() ? "" : ", ") + k;
      }
      throw StoreTimeout("timed out after " +
                             std::to_string(limit.count() / 1000) +
                             " s waiting at " + endpoint + " for " + list,
                         absent);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

} // namespace kiln::comm
