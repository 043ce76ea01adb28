//===- TcpStore.cpp - Gloo's rendezvous store over TCP --------------------===//

#include "runtime/comm/TcpStore.h"

#include "gloo/common/error.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <optional>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::comm {

namespace {

using Clock = std::chrono::steady_clock;

/// Repeats `io` (a send or a recv of up to n bytes at p) until `size` bytes
/// have moved; false on end of stream or an error.
template <typename Io> bool transferAll(char *p, size_t size, Io io) {
  while (size > 0) {
    ssize_t n = io(p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool sendAll(int fd, const void *data, size_t size) {
  return transferAll(const_cast<char *>(static_cast<const char *>(data)), size,
                     [fd](char *p, size_t n) {
                       return ::send(fd, p, n, MSG_NOSIGNAL);
                     });
}

bool recvAll(int fd, void *data, size_t size) {
  return transferAll(static_cast<char *>(data), size,
                     [fd](char *p, size_t n) { return ::recv(fd, p, n, 0); });
}

bool sendBlob(int fd, const void *data, uint32_t size) {
  uint32_t wire = htonl(size);
  return sendAll(fd, &wire, 4) && sendAll(fd, data, size);
}

bool recvBlob(int fd, std::string &out) {
  uint32_t wire = 0;
  if (!recvAll(fd, &wire, 4)) {
    return false;
  }
  out.resize(ntohl(wire));
  return recvAll(fd, out.data(), out.size());
}

} // namespace

// The map and its connections. Requests: 'S' key value -> 'k';
// 'G' key -> 0, or 1 value.
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
      return llvm::createStringError(llvm::Twine("rendezvous store: socket: ") +
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
      return llvm::createStringError(
          "rank 0 cannot serve the rendezvous store on port " +
          std::to_string(port) + ": " + why +
          " (another job on MASTER_PORT? pick a free port)");
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

  void serve(int c) {
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string key, value;
    char op = 0;
    while (recvAll(c, &op, 1) && recvBlob(c, key)) {
      bool ok = false;
      if (op == 'S' && recvBlob(c, value)) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          data[key] = value;
        }
        ok = sendAll(c, "k", 1);
      } else if (op == 'G') {
        std::optional<std::string> found;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (auto it = data.find(key); it != data.end()) {
            found = it->second;
          }
        }
        char flag = found ? 1 : 0;
        ok = sendAll(c, &flag, 1) &&
             (!found || sendBlob(c, found->data(),
                                 static_cast<uint32_t>(found->size())));
      }
      if (!ok) {
        break;
      }
    }
    ::shutdown(c, SHUT_RDWR);
  }

  int listener = -1;
  std::thread acceptor;
  std::mutex mutex;
  bool stopping = false;
  std::vector<int> clients;
  std::vector<std::thread> handlers;
  std::map<std::string, std::string> data;
};

llvm::Expected<std::unique_ptr<TcpStore>>
TcpStore::open(const std::string &host, int port, bool serve,
               std::chrono::milliseconds timeout) {
  auto store = std::unique_ptr<TcpStore>(new TcpStore);
  store->endpoint = host + ":" + std::to_string(port);
  store->timeout = timeout;
  if (serve) {
    auto server = TcpStoreServer::listen(port);
    if (!server) {
      return server.takeError();
    }
    store->server = std::move(*server);
  }
  // Rank 0 may not be listening yet: retry until the deadline.
  Clock::time_point deadline = Clock::now() + timeout;
  std::string why;
  auto pause = std::chrono::milliseconds(20);
  while (true) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                           &found);
    if (rc != 0) {
      why = std::string("cannot resolve: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo *a = found; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
          continue;
        }
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          store->fd = fd;
          break;
        }
        why = std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (store->fd >= 0) {
      int one = 1;
      ::setsockopt(store->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return store;
    }
    if (Clock::now() + pause > deadline) {
      return llvm::createStringError(
          "cannot reach the rendezvous store at " + store->endpoint +
          " (served by rank 0) within " +
          std::to_string(timeout.count() / 1000) + " s: " + why);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

TcpStore::~TcpStore() {
  if (fd >= 0) {
    ::close(fd);
  }
}

void TcpStore::set(const std::string &key, const std::vector<char> &data) {
  std::lock_guard<std::mutex> lock(requestMutex);
  char ack = 0;
  if (!sendAll(fd, "S", 1) ||
      !sendBlob(fd, key.data(), static_cast<uint32_t>(key.size())) ||
      !sendBlob(fd, data.data(), static_cast<uint32_t>(data.size())) ||
      !recvAll(fd, &ack, 1)) {
    throw gloo::IoException("rendezvous store at " + endpoint +
                            " closed the connection (did rank 0 exit?)");
  }
}

bool TcpStore::tryGet(const std::string &key, std::vector<char> &data) {
  std::lock_guard<std::mutex> lock(requestMutex);
  char flag = 0;
  if (!sendAll(fd, "G", 1) ||
      !sendBlob(fd, key.data(), static_cast<uint32_t>(key.size())) ||
      !recvAll(fd, &flag, 1)) {
    throw gloo::IoException("rendezvous store at " + endpoint +
                            " closed the connection (did rank 0 exit?)");
  }
  if (!flag) {
    return false;
  }
  std::string value;
  if (!recvBlob(fd, value)) {
    throw gloo::IoException("rendezvous store at " + endpoint +
                            " closed the connection (did rank 0 exit?)");
  }
  data.assign(value.begin(), value.end());
  return true;
}

std::vector<std::string>
TcpStore::missing(const std::vector<std::string> &keys) {
  std::vector<std::string> absent;
  std::vector<char> ignored;
  for (const std::string &key : keys) {
    if (!tryGet(key, ignored)) {
      absent.push_back(key);
    }
  }
  return absent;
}

std::vector<char> TcpStore::get(const std::string &key) {
  wait({key}, timeout);
  std::vector<char> data;
  tryGet(key, data);
  return data;
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
