// Time and small value types shared by the capability interfaces.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace forgeyard {

using Clock = std::chrono::system_clock;
// Timestamps are wall-clock instants with microsecond precision, as both backends store them.
using TimePoint = std::chrono::time_point<Clock, std::chrono::microseconds>;
using Duration = std::chrono::microseconds;

inline TimePoint from_unix_usecs(std::int64_t us) {
  return TimePoint(Duration(us));
}
inline std::int64_t unix_usecs(TimePoint t) {
  return t.time_since_epoch().count();
}

// Where a read may be served (contract §12). Strong, the default: the primary. Eventual: a
// replica (StoreOptions::replicas) whose replay lag, as last measured plus the age of that
// measurement, is at most max_lag; the primary when none is. Writes always go to the primary, and
// inside a Transaction every read is on the transaction's connection (it sees its own writes). The
// embedded store has one file: every read there is strong.
struct ReadClass {
  enum class Kind { Strong, Eventual };
  Kind kind = Kind::Strong;
  std::chrono::microseconds max_lag{0};

  static ReadClass strong() { return {}; }
  static ReadClass eventual(std::chrono::microseconds max_lag) { return {Kind::Eventual, max_lag}; }
};

// A replica as the client last saw it (Store::replicas(), Health, StorageStatus, Metrics).
struct ReplicaStatus {
  std::string location;      // its URL, any password redacted
  bool reachable = false;    // the last probe connected and answered
  bool in_recovery = false;  // a standby; false: the node is a primary (promoted, or listed by mistake)
  // Replay lag at the last probe: 0 when the replica had replayed the primary's WAL position read
  // just before, else the time since its last replayed commit. nullopt when unknown.
  std::optional<std::chrono::microseconds> lag;
  std::optional<std::chrono::microseconds> measured_ago;  // the age of that probe
  std::uint64_t reads = 0;                                // eventual reads it served
  std::uint64_t fallbacks = 0;                            // eventual reads it failed, then served by the primary
  std::string error;                                      // the last probe's or read's failure, when not reachable
};

}  // namespace forgeyard
