// Streaming replicas for eventual reads (ReadClass, contract §12): a pool per replica, its replay
// lag measured at most once per StoreOptions::replica_lag_refresh, and the choice of a replica
// whose lag (plus the age of that measurement) is within a read's bound. Writes never come here.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/store.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

class PgReplicas {
 public:
  PgReplicas(const StoreOptions& options, std::function<void(PgConnection&)> before);
  ~PgReplicas();
  PgReplicas(const PgReplicas&) = delete;
  PgReplicas& operator=(const PgReplicas&) = delete;

  bool empty() const { return replicas_.empty(); }
  // Runs a read on a replica within max_lag and returns true, or returns false when none is (the
  // caller then reads from the primary). A replica that fails the read for a reason the primary
  // would not have (unreachable, a recovery conflict, a statement that writes) is counted as a
  // fallback and false is returned too; a refusal the primary would give as well is thrown.
  bool try_read(PgPool& primary, Duration max_lag, const PgStatement& statement, const PgParams& params,
                std::optional<PgResult>& out);
  // Measures every replica now.
  std::vector<ReplicaStatus> measure(PgPool& primary);
  // As last measured, without a round trip.
  std::vector<ReplicaStatus> snapshot() const;

 private:
  struct Replica;
  void probe(Replica& r, const std::optional<std::string>& primary_lsn);
  ReplicaStatus view(const Replica& r) const;

  std::vector<std::unique_ptr<Replica>> replicas_;
  Duration refresh_;
  std::function<void(PgConnection&)> before_;
  std::atomic<unsigned> next_{0};
};

}  // namespace forgeyard::detail
