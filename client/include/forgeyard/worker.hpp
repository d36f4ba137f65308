// A queue worker loop: claims, runs a handler per message, acks or nacks by its result, extends
// deliveries whose handler runs long, backs off when idle, and stops cleanly on request. In
// steady state the acks of one batch and the claim of the next are one round trip.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>

#include "forgeyard/queues.hpp"

namespace forgeyard {

struct WorkerOptions {
  std::string tenant;
  std::string queue;
  std::string consumer = "worker";
  int batch = 10;
  Duration visibility = std::chrono::seconds(30);
  Duration idle_min = std::chrono::milliseconds(50);  // first sleep when the queue is empty
  Duration idle_max = std::chrono::seconds(2);        // the sleep doubles up to this
  bool stop_when_idle = false;                        // return once the queue is empty (scripts, tests)
};

struct HandlerResult {
  enum class Kind { Success, Retry, Fail } kind = Kind::Success;  // Success: ack it
  std::string error;
  static HandlerResult ack() { return {}; }
  static HandlerResult retry(std::string why) { return {Kind::Retry, std::move(why)}; }
  static HandlerResult fail(std::string why) { return {Kind::Fail, std::move(why)}; }  // dead-letter now
};

// An exception thrown by the handler counts as Retry with its message.
using Handler = std::function<HandlerResult(const Delivery&)>;

struct WorkerStats {
  std::uint64_t acked = 0, retried = 0, dead = 0, extended = 0, idle_polls = 0, stale = 0;
};

FORGEYARD_API WorkerStats run_worker(Queues& queues, const WorkerOptions& options, const Handler& handler,
                                     std::stop_token stop);

}  // namespace forgeyard
