// A TCP proxy on 127.0.0.1 between the client and PostgreSQL that injects network faults into
// the PostgreSQL wire protocol: delays, a connection cut before a statement reaches the server,
// cut after the server got a statement but before its reply reaches the client, and cut while a
// COMMIT is in flight. One thread accepts; two threads per connection pump bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace faults {

struct ProxyFaults {
  double delay = 0;  // per client message: sleep 1..delay_ms_max ms before forwarding
  int delay_ms_max = 20;
  double cut_before = 0;  // per statement: close both sides instead of forwarding it
  double cut_after = 0;   // per statement: forward it, then close before the reply
  double cut_commit = 0;  // per COMMIT: forward it, then close before the reply
};

class TcpProxy {
 public:
  explicit TcpProxy(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void set_faults(const ProxyFaults& faults);
  // Faults injected so far, by kind (delay, cut_before_statement, cut_after_statement, cut_during_commit).
  std::map<std::string, std::int64_t> injected() const;

 private:
  struct Connection;
  void accept_loop();
  void pump_client(std::shared_ptr<Connection> c);
  void pump_server(std::shared_ptr<Connection> c);
  bool roll(double p);
  int random_below(int n);
  void count(const std::string& kind);

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  ProxyFaults faults_;
  std::map<std::string, std::int64_t> injected_;
  std::mt19937_64 rng_{std::random_device{}()};
  struct Pumps {
    std::shared_ptr<Connection> connection;
    std::thread to_server, to_client;
  };
  std::vector<Pumps> pumps_;  // joined once both pumps of a connection are done
  std::thread acceptor_;
};

}  // namespace faults
