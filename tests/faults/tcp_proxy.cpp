#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

namespace faults {

struct TcpProxy::Connection {
  int client = -1;
  int server = -1;
  std::atomic<bool> cut_on_reply{false};  // the next server bytes are dropped and both sides closed
  std::atomic<int> pumps{2};              // running pump threads; the sockets are closed after both are joined
  // Shutting both sockets down wakes both pumps.
  void cut() {
    ::shutdown(client, SHUT_RDWR);
    ::shutdown(server, SHUT_RDWR);
  }
  void leave() { --pumps; }
  ~Connection() {
    ::close(client);
    ::close(server);
  }
};

namespace {

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// A client message that carries a statement: simple Query, Parse, Bind or Execute.
bool has_statement(const char* data, std::size_t n) {
  return n > 0 && (data[0] == 'Q' || data[0] == 'P' || data[0] == 'B' || data[0] == 'E');
}

// A buffer whose messages include a COMMIT: a simple Query, or the Parse of an unnamed statement
// as libpq's pipeline mode sends it (client/src/postgres/connection.cpp: BEGIN, the statements and
// COMMIT go out as Parse/Bind/Execute). A message cut off at the buffer's end is not looked into.
bool is_commit(const char* data, std::size_t n) {
  std::size_t at = 0;
  while (at + 5 <= n) {
    std::uint32_t length = 0;
    std::memcpy(&length, data + at + 1, 4);
    length = ntohl(length);
    const std::size_t body = at + 5, end = at + 1 + length;
    if (length < 4 || end > n) return false;
    if (data[at] == 'Q' && end - body >= 6 && std::strncmp(data + body, "COMMIT", 6) == 0) return true;
    if (data[at] == 'P' && end - body >= 7 && data[body] == '\0' && std::strncmp(data + body + 1, "COMMIT", 6) == 0)
      return true;
    at = end;
  }
  return false;
}

}  // namespace

TcpProxy::TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0)
    throw std::runtime_error("proxy cannot listen on 127.0.0.1");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  acceptor_.join();
  for (auto& p : pumps_) p.connection->cut();
  for (auto& p : pumps_) {
    p.to_server.join();
    p.to_client.join();
  }
  ::close(listen_fd_);
}

void TcpProxy::set_faults(const ProxyFaults& faults) {
  std::lock_guard lock(mutex_);
  faults_ = faults;
}

std::map<std::string, std::int64_t> TcpProxy::injected() const {
  std::lock_guard lock(mutex_);
  return injected_;
}

bool TcpProxy::roll(double p) {
  std::lock_guard lock(mutex_);
  return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

int TcpProxy::random_below(int n) {
  std::lock_guard lock(mutex_);
  return static_cast<int>(rng_() % static_cast<std::uint64_t>(n > 0 ? n : 1));
}

void TcpProxy::count(const std::string& kind) {
  std::lock_guard lock(mutex_);
  ++injected_[kind];
}

void TcpProxy::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(upstream_port_));
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(server);
      ::close(client);  // the server is down (restarting): the client sees the connection refused
      continue;
    }
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_shared<Connection>();
    c->client = client;
    c->server = server;
    // Join the pumps of connections that are done (only this thread touches pumps_).
    std::erase_if(pumps_, [](Pumps& done) {
      if (done.connection->pumps != 0) return false;
      done.to_server.join();
      done.to_client.join();
      return true;  // the last reference to the connection: its sockets close
    });
    pumps_.push_back({c, std::thread([this, c] { pump_client(c); }), std::thread([this, c] { pump_server(c); })});
  }
}

void TcpProxy::pump_client(std::shared_ptr<Connection> c) {
  char buf[65536];
  bool startup = true;  // the startup packet is never faulted: a fault is a statement's
  while (true) {
    const ssize_t n = ::recv(c->client, buf, sizeof buf, 0);
    if (n <= 0) break;
    const auto size = static_cast<std::size_t>(n);
    if (!startup && has_statement(buf, size)) {
      ProxyFaults f;
      {
        std::lock_guard lock(mutex_);
        f = faults_;
      }
      if (roll(f.delay)) {
        count("delay");
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + random_below(f.delay_ms_max)));
      }
      if (is_commit(buf, size) && roll(f.cut_commit)) {
        count("cut_during_commit");
        c->cut_on_reply = true;
      } else if (roll(f.cut_before)) {
        count("cut_before_statement");
        break;
      } else if (roll(f.cut_after)) {
        count("cut_after_statement");
        c->cut_on_reply = true;
      }
    }
    startup = false;
    if (!write_all(c->server, buf, size)) break;
  }
  c->cut();
  c->leave();
}

void TcpProxy::pump_server(std::shared_ptr<Connection> c) {
  char buf[65536];
  while (true) {
    const ssize_t n = ::recv(c->server, buf, sizeof buf, 0);
    if (n <= 0 || c->cut_on_reply) break;
    if (!write_all(c->client, buf, static_cast<std::size_t>(n))) break;
  }
  c->cut();
  c->leave();
}

}  // namespace faults
