// Eventual reads on streaming replicas (replicas.hpp).
#include "postgres/replicas.hpp"

#include <algorithm>

#include "instruments.hpp"

namespace forgeyard::detail {

namespace {

using Steady = std::chrono::steady_clock;

// The primary's WAL position, read just before a replica's: a replica that has replayed it holds
// everything committed before the probe began. On a node in recovery (a URL that reached a
// standby) its own replay position.
const PgStatement primary_lsn_sql{"fy_replica_primary_lsn",
                                  "SELECT (CASE WHEN pg_catalog.pg_is_in_recovery()"
                                  " THEN pg_catalog.pg_last_wal_replay_lsn()"
                                  " ELSE pg_catalog.pg_current_wal_lsn() END)::text",
                                  0};
// On the replica: whether it is a standby, whether it has replayed that position, and the time
// since its last replayed commit (its lag when it has not).
const PgStatement replica_lag_sql{
    "fy_replica_lag",
    "SELECT pg_catalog.pg_is_in_recovery(),"
    " COALESCE($1::pg_catalog.pg_lsn <= pg_catalog.pg_last_wal_replay_lsn(), false),"
    " (EXTRACT(epoch FROM pg_catalog.clock_timestamp() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000000)"
    "::pg_catalog.int8",
    1};

// A replica's failure that the primary would not have: then the read goes to the primary.
bool replica_specific(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::Unavailable:
    case ErrorKind::Timeout:
    case ErrorKind::SerializationFailure:  // 40001: canceled by a conflict with recovery
    case ErrorKind::Internal:              // e.g. 25006, a statement that writes on a standby
      return true;
    default:
      return false;
  }
}

}  // namespace

struct PgReplicas::Replica {
  // Its connections open on first use: a replica that is down does not keep the store from opening.
  Replica(std::string u, const StoreOptions& options)
      : url(std::move(u)),
        location(redact(url)),
        pool(lazy(options.pool),
             [this, prepared = options.prepared_statements] { return std::make_unique<PgConnection>(url, prepared); }) {
  }
  static PoolOptions lazy(PoolOptions o) {
    o.min_connections = 0;
    return o;
  }

  const std::string url;
  const std::string location;
  PgPool pool;
  std::mutex probing;  // one probe at a time; readers meanwhile use the last figures
  mutable std::mutex m;
  bool measured = false;
  Steady::time_point measured_at;
  bool reachable = false;
  bool in_recovery = false;
  std::optional<Duration> lag;
  std::string error;
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> fallbacks{0};
};

PgReplicas::PgReplicas(const StoreOptions& options, std::function<void(PgConnection&)> before)
    : refresh_(options.replica_lag_refresh), before_(std::move(before)) {
  for (const std::string& url : options.replicas) {
    if (url.empty()) throw Error(ErrorKind::InvalidArgument, "22023", "a replica URL is empty");
    replicas_.push_back(std::make_unique<Replica>(url, options));
  }
}

PgReplicas::~PgReplicas() = default;

void PgReplicas::probe(Replica& r, const std::optional<std::string>& primary_lsn) {
  bool reachable = false, in_recovery = false;
  std::optional<Duration> lag;
  std::string error;
  try {
    PgResult res = exec_autocommit(r.pool, replica_lag_sql, {primary_lsn}, nullptr);
    reachable = true;
    in_recovery = res.boolean(0, 0);
    if (!in_recovery || res.boolean(0, 1))
      lag = Duration(0);
    else if (!res.is_null(0, 2))
      lag = Duration(std::max<std::int64_t>(0, res.int8(0, 2)));
    else
      error = "no transaction replayed yet: its lag is unknown";
  } catch (const Error& e) {
    error = std::string(to_string(e.kind())) + ": " + e.what();
  }
  std::lock_guard lock(r.m);
  r.measured = true;
  r.measured_at = Steady::now();
  r.reachable = reachable;
  r.in_recovery = in_recovery;
  r.lag = lag;
  r.error = std::move(error);
}

namespace {

std::optional<std::string> read_primary_lsn(PgPool& primary) {
  try {
    return exec_autocommit(primary, primary_lsn_sql, {}, nullptr).text(0, 0);
  } catch (const Error&) {
    return std::nullopt;  // the primary is away: the replica's own replay time tells its lag
  }
}

}  // namespace

bool PgReplicas::try_read(PgPool& primary, Duration max_lag, const PgStatement& statement, const PgParams& params,
                          std::optional<PgResult>& out) {
  if (replicas_.empty()) return false;
  std::optional<std::optional<std::string>> primary_lsn;  // read once per call, when a probe needs it
  const std::size_t start = next_++ % replicas_.size();
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    Replica& r = *replicas_[(start + i) % replicas_.size()];
    bool stale = false;
    {
      std::lock_guard lock(r.m);
      stale = !r.measured || Steady::now() - r.measured_at >= refresh_;
    }
    if (stale) {
      std::unique_lock probing(r.probing, std::try_to_lock);
      if (probing.owns_lock()) {
        if (!primary_lsn) primary_lsn = read_primary_lsn(primary);
        probe(r, *primary_lsn);
      }
    }
    {
      std::lock_guard lock(r.m);
      if (!r.reachable || !r.lag) continue;
      const auto age = std::chrono::duration_cast<Duration>(Steady::now() - r.measured_at);
      if (*r.lag + age > max_lag) continue;
    }
    try {
      out.emplace(exec_autocommit(r.pool, statement, params, before_));
      ++r.reads;
      return true;
    } catch (const Error& e) {
      if (!replica_specific(e)) throw;
      ++r.fallbacks;
      log().warn("replica {} failed an eventual read, the primary serves it: {}", r.location, e.what());
      std::lock_guard lock(r.m);
      r.error = std::string(to_string(e.kind())) + ": " + e.what();
      if (e.kind() == ErrorKind::Unavailable) r.reachable = false;  // until its next probe
      return false;
    }
  }
  return false;
}

std::vector<ReplicaStatus> PgReplicas::measure(PgPool& primary) {
  if (replicas_.empty()) return {};
  const std::optional<std::string> lsn = read_primary_lsn(primary);
  for (auto& r : replicas_) {
    std::lock_guard probing(r->probing);
    probe(*r, lsn);
  }
  return snapshot();
}

ReplicaStatus PgReplicas::view(const Replica& r) const {
  std::lock_guard lock(r.m);
  ReplicaStatus s;
  s.location = r.location;
  s.reachable = r.reachable;
  s.in_recovery = r.in_recovery;
  s.lag = r.lag;
  if (r.measured) s.measured_ago = std::chrono::duration_cast<Duration>(Steady::now() - r.measured_at);
  s.reads = r.reads;
  s.fallbacks = r.fallbacks;
  s.error = r.error;
  return s;
}

std::vector<ReplicaStatus> PgReplicas::snapshot() const {
  std::vector<ReplicaStatus> out;
  out.reserve(replicas_.size());
  for (const auto& r : replicas_) out.push_back(view(*r));
  return out;
}

}  // namespace forgeyard::detail
