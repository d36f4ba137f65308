// The PostgreSQL Store: a pool of libpq connections; calls are autocommit unless made through
// a Transaction. Nothing depends on session state, so it works through PgBouncer.
#include <ctime>

#include "backends.hpp"
#include "pool.hpp"
#include "transaction_state.hpp"
#include "postgres/app_migrations.hpp"
#include "postgres/audit.hpp"
#include "postgres/workflows.hpp"
#include "postgres/leases.hpp"
#include "postgres/operations.hpp"
#include "postgres/queues.hpp"
#include "postgres/replicas.hpp"
#include "postgres/restore.hpp"
#include "postgres/topics.hpp"
#include "postgres/versioned_rows.hpp"

namespace forgeyard::detail {

std::string interval_param(Duration d) {
  return std::to_string(d.count()) + " microseconds";
}

PgResult exec_autocommit(PgPool& pool, const PgStatement& statement, const PgParams& params,
                         const std::function<void(PgConnection&)>& before) {
  auto conn = pool.acquire();
  if (!before) return conn->exec(statement, params);
  conn->command("BEGIN");
  try {
    before(*conn);
    PgResult r = conn->exec(statement, params);
    conn->commit();
    return r;
  } catch (const Error&) {
    // A refused statement (FY002, FY001, ...) leaves the transaction aborted: end it so the
    // connection stays reusable instead of being closed (a reconnect per refusal through PgBouncer).
    // A connection that cannot roll back is not reusable and the pool closes it.
    if (PQTRANS_INERROR == conn->transaction_status()) conn->rollback_quietly();
    throw;
  }
}

namespace {

const PgStatement set_clock_sql{"fy_set_clock", "SELECT pg_catalog.set_config('forgeyard.now_override', $1, true)", 1};
const PgStatement maintain_sql{"fy_maintain", "SELECT task, \"rows\" FROM forgeyard.maintain($1, $2)", 2};
const PgStatement version_sql{"fy_extension_version", "SELECT " FY_INSTALLED_VERSION ", " FY_INSTALLED_EDITION, 0};
// health()'s first read: the extension version and whether the server takes writes (a standby or a
// read-only default: Degraded). The restore state and, for a named application, its schema follow.
const PgStatement health_sql{
    "fy_health",
    "SELECT " FY_INSTALLED_VERSION
    ","
    " pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only'), " FY_INSTALLED_EDITION,
    0};

constexpr std::string_view not_installed =
    "forgeyard is not installed in this database (forgeyard storage install: docs/operations.md, \"Installing "
    "forgeyard\")";

std::string iso_utc(TimePoint t) {
  const std::int64_t us = unix_usecs(t);
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000 - (us % 1'000'000 < 0 ? 1 : 0));
  long frac = static_cast<long>(us - static_cast<std::int64_t>(secs) * 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06ld+00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

struct Shared {
  std::string url;
  StoreOptions options;
  PgPool pool;
  Instruments instruments;
  // Set only with a test clock: what runs first in each autocommit call's transaction.
  std::function<void(PgConnection&)> before;
  PgReplicas replicas;

  Shared(std::string u, StoreOptions o)
      : url(std::move(u)),
        options(std::move(o)),
        pool(options.pool, [this] { return std::make_unique<PgConnection>(url, options.prepared_statements); }),
        before(options.clock ? std::function<void(PgConnection&)>([this](PgConnection& c) { apply_clock(c); })
                             : nullptr),
        replicas(options, before) {}

  // With a test clock, each transaction carries it as forgeyard.now_override (SET LOCAL).
  void apply_clock(PgConnection& conn) {
    if (options.clock) conn.exec(set_clock_sql, {iso_utc(options.clock())});
  }
};

// Autocommit: each statement on a pooled connection, alone (or wrapped with the test clock).
// An eventual read may go to a replica.
class PooledSession final : public PgSession {
 public:
  explicit PooledSession(Shared& shared) : shared_(shared) {}
  PgResult run(const PgStatement& statement, const PgParams& params) override {
    return exec_autocommit(shared_.pool, statement, params, shared_.before);
  }
  PgResult read(const PgStatement& statement, const PgParams& params, const ReadClass& read_class) override {
    std::optional<PgResult> r;
    if (read_class.kind == ReadClass::Kind::Eventual &&
        shared_.replicas.try_read(shared_.pool, read_class.max_lag, statement, params, r))
      return std::move(*r);
    return run(statement, params);
  }
  std::vector<PgResult> run_all(const std::vector<PgCall>& calls) override {
    auto conn = shared_.pool.acquire();
    try {
      if (!shared_.options.clock) return conn->pipeline(calls, true);
      std::vector<PgCall> with_clock{{&set_clock_sql, {iso_utc(shared_.options.clock())}}};
      with_clock.insert(with_clock.end(), calls.begin(), calls.end());
      std::vector<PgResult> results = conn->pipeline(with_clock, true);
      results.erase(results.begin());
      return results;
    } catch (const Error&) {
      if (PQTRANS_INERROR == conn->transaction_status()) conn->rollback_quietly();
      throw;
    }
  }
  Instruments& instruments() override { return shared_.instruments; }

 private:
  Shared& shared_;
};

class PgTransaction final : public Transaction, private PgSession {
 public:
  explicit PgTransaction(Shared& shared)
      : shared_(shared),
        state_(shared.instruments),
        conn_(shared.pool.acquire()),
        leases_(*this),
        rows_(*this),
        idempotency_(*this),
        queues_(*this),
        topics_(*this),
        audit_(*this),
        workflows_(*this) {
    state_.begin([&] { conn_->command("BEGIN"); });
  }
  ~PgTransaction() override {
    state_.abandon([&] { conn_->command("ROLLBACK"); });
  }
  Leases& leases() override { return leases_; }
  VersionedRows& versioned_rows() override { return rows_; }
  Idempotency& idempotency() override { return idempotency_; }
  Queues& queues() override { return queues_; }
  Topics& topics() override { return topics_; }
  Audit& audit() override { return audit_; }
  Workflows& workflows() override { return workflows_; }
  void commit() override {
    state_.commit([&] { conn_->commit(); }, [&] { conn_->command("ROLLBACK"); });
  }
  void rollback() override {
    state_.end("tx.rollback", [&] { conn_->command("ROLLBACK"); });
  }

 private:
  PgResult run(const PgStatement& statement, const PgParams& params) override {
    state_.check_usable();
    shared_.apply_clock(*conn_);
    return conn_->exec(statement, params);
  }
  std::vector<PgResult> run_all(const std::vector<PgCall>& calls) override {
    state_.check_usable();
    shared_.apply_clock(*conn_);
    return conn_->pipeline(calls, false);
  }
  Instruments& instruments() override { return shared_.instruments; }
  void failed() override { state_.fail(); }

  Shared& shared_;
  TransactionState state_;
  PgPool::Handle conn_;
  PgLeases leases_;
  PgVersionedRows rows_;
  PgIdempotency idempotency_;
  PgQueues queues_;
  PgTopics topics_;
  PgAudit audit_;
  PgWorkflows workflows_;
};

class PgStore final : public Store {
 public:
  PgStore(const std::string& url, const StoreOptions& options)
      : shared_(url, options),
        session_(shared_),
        leases_(session_),
        rows_(session_),
        idempotency_(session_),
        queues_(session_),
        topics_(session_),
        audit_(session_),
        workflows_(session_),
        app_schema_(make_pg_app_schema(shared_.pool, [this](PgConnection& c) { shared_.apply_clock(c); })),
        migrations_(make_migrations(*app_schema_)),
        presence_(*app_schema_, options) {
    presence_.open();
    log().info("opened PostgreSQL store {}", redact(url));
  }
  Leases& leases() override { return leases_; }
  VersionedRows& versioned_rows() override { return rows_; }
  Idempotency& idempotency() override { return idempotency_; }
  Queues& queues() override { return queues_; }
  Topics& topics() override { return topics_; }
  Audit& audit() override { return audit_; }
  Workflows& workflows() override { return workflows_; }
  std::unique_ptr<Transaction> begin() override { return std::make_unique<PgTransaction>(shared_); }
  StorageStatus status() override {
    StorageStatus s;
    s.backend = "postgresql";
    s.location = redact(shared_.url);
    try {
      auto conn = shared_.pool.acquire();
      PgResult r = conn->exec(version_sql, {});
      if (r.is_null(0, 0)) {
        s.detail = std::string(not_installed);
        s.migrations_pending = 1;
        return s;
      }
      s.schema_version = r.text(0, 0);
      s.edition = r.is_null(0, 1) ? "" : r.text(0, 1);
      s.migrations_applied = 1;
      const RestoreStatus restore = pg_restore_status(session_);
      s.healthy = !restore.needs_reconcile();
      s.detail = "forgeyard " + s.schema_version + " (" + s.edition + " edition)";
      if (restore.needs_reconcile()) s.detail += "; restore detected, run storage reconcile: " + restore.detail;
    } catch (const Error& e) {
      s.detail = std::string(to_string(e.kind())) + ": " + e.what();
    }
    s.replicas = shared_.replicas.measure(shared_.pool);
    return s;
  }
  Metrics metrics() const override {
    return {shared_.instruments.snapshot(), shared_.pool.stats(), shared_.replicas.snapshot()};
  }
  std::vector<ReplicaStatus> replicas() override { return shared_.replicas.measure(shared_.pool); }
  Migrations& migrations() override { return *migrations_; }
  Health health(ReadClass read) override {
    Health h = primary_health();
    h.replicas = shared_.replicas.measure(shared_.pool);
    for (const ReplicaStatus& r : h.replicas) {
      if (!r.reachable)
        h.details.push_back("replica " + r.location + " is unreachable: " + r.error);
      else if (!r.in_recovery)
        h.details.push_back("replica " + r.location +
                            " is not in recovery: a primary (eventual reads there are strong)");
      else if (!r.lag)
        h.details.push_back("replica " + r.location + ": " + r.error);
    }
    if (read.kind != ReadClass::Kind::Eventual || h.status != HealthStatus::Unavailable) return h;
    for (const ReplicaStatus& r : h.replicas)
      if (r.reachable && r.lag && *r.lag <= read.max_lag) {
        h.status = HealthStatus::Degraded;
        h.details.push_back("the primary is unreachable; eventual reads go to replica " + r.location);
        break;
      }
    return h;
  }
  StoreStats stats(ReadClass read) override {
    PgReadSession reads(session_, read);
    return pg_stats(reads);
  }
  DoctorReport doctor(const DoctorOptions& options) override {
    DoctorFacts facts;
    try {
      auto conn = shared_.pool.acquire();
      facts = pg_doctor_facts(*conn, session_, shared_.url);
    } catch (const Error& e) {
      facts = DoctorFacts{};
      facts.backend = "postgresql";
      facts.connect_error = std::string(to_string(e.kind())) + ": " + e.what();
    }
    add_store_facts(facts, *this, options, shared_.options);
    return {evaluate_doctor(facts)};
  }
  RestoreStatus restore_status() override { return pg_restore_status(session_); }
  ReconcileReport restore_reconcile(const std::vector<AuditAnchor>& anchors) override {
    return pg_restore_reconcile(session_, anchors);
  }
  std::map<std::string, std::int64_t> maintain(int max_rows, std::optional<std::string> tenant) override {
    return shared_.instruments.measure("store.maintain", [&] {
      PgResult r = session_.run(maintain_sql, {std::to_string(max_rows), tenant});
      std::map<std::string, std::int64_t> done;
      for (int i = 0; i < r.rows(); ++i) done[r.text(i, 0)] = r.int8(i, 1);
      return done;
    });
  }

 private:
  // The primary's health (health() adds the replicas).
  Health primary_health() {
    Health h;
    const auto started = std::chrono::steady_clock::now();
    try {
      bool read_only = false;
      {
        auto conn = shared_.pool.acquire();
        PgResult r = conn->exec(health_sql, {});
        h.latency = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
        if (r.is_null(0, 0)) {
          h.status = HealthStatus::Unavailable;
          h.details.push_back(std::string(not_installed));
          return h;
        }
        h.schema.store_version = r.text(0, 0);
        h.schema.store_edition = r.is_null(0, 3) ? "" : r.text(0, 3);
        read_only = r.boolean(0, 1) || r.text(0, 2) == "on";
      }
      h.status = presence_.check(h.schema, h.details, !read_only);
      const RestoreStatus restore = pg_restore_status(session_);
      if (restore.needs_reconcile() && h.status == HealthStatus::Healthy) h.status = HealthStatus::Degraded;
      if (restore.needs_reconcile())
        h.details.push_back("a restore was detected and not reconciled (run forgeyard storage reconcile): " +
                            restore.detail);
      if (read_only && h.status == HealthStatus::Healthy) {
        h.status = HealthStatus::Degraded;
        h.details.push_back(
            "the database accepts reads only (a standby, or default_transaction_read_only): writes fail");
      }
    } catch (const Error& e) {
      h.latency = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
      h.status = HealthStatus::Unavailable;
      h.details.push_back(std::string(to_string(e.kind())) + ": " + e.what());
    }
    return h;
  }

  Shared shared_;
  PooledSession session_;
  PgLeases leases_;
  PgVersionedRows rows_;
  PgIdempotency idempotency_;
  PgQueues queues_;
  PgTopics topics_;
  PgAudit audit_;
  PgWorkflows workflows_;
  std::unique_ptr<AppSchemaBackend> app_schema_;
  std::unique_ptr<Migrations> migrations_;
  DaemonPresence presence_;
};

}  // namespace

std::unique_ptr<Store> open_postgres(const std::string& url, const StoreOptions& options) {
  return std::make_unique<PgStore>(url, options);
}

}  // namespace forgeyard::detail
