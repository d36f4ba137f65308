// The embedded SQLite Store: one file, WAL, BEGIN IMMEDIATE for every write on a pool of write
// connections, and a second pool of read connections (query_only, deferred transactions) so that a
// read never waits for a writer's connection or write turn.
#include <unistd.h>

#include <filesystem>

#include "backends.hpp"
#include "core/errors.hpp"
#include "pool.hpp"
#include "transaction_state.hpp"
#include "sqlite/app_migrations.hpp"
#include "sqlite/audit.hpp"
#include "sqlite/workflows.hpp"
#include "sqlite/file_lock.hpp"
#include "sqlite/leases.hpp"
#include "sqlite/maintenance.hpp"
#include "sqlite/migrations.hpp"
#include "sqlite/operations.hpp"
#include "sqlite/queues.hpp"
#include "sqlite/restore.hpp"
#include "sqlite/topics.hpp"
#include "sqlite/versioned_rows.hpp"
#include "sqlite/write_turns.hpp"

namespace forgeyard::detail {

namespace {

using SqlitePool = Pool<Db>;

// The read pool is sized as the write pool but opens its connections on first use: a store that
// only writes never opens one.
PoolOptions read_pool_options(PoolOptions options) {
  options.min_connections = 0;
  return options;
}

struct SqliteShared {
  std::string path;
  StoreOptions options;
  SqlitePool pool;     // write connections: BEGIN IMMEDIATE under a write turn
  SqlitePool readers;  // read connections: PRAGMA query_only, one deferred transaction per read
  Instruments instruments;
  MigrationState migrations;
  std::shared_ptr<WriteTurns> turns;  // shared with every Store of this process on the file

  SqliteShared(std::string p, StoreOptions o)
      : path(std::move(p)),
        options(std::move(o)),
        pool(options.pool, [this] { return std::make_unique<Db>(path, options); }),
        readers(read_pool_options(options.pool),
                [this] {
                  auto db = std::make_unique<Db>(path, options);
                  db->exec("PRAGMA query_only = 1");  // a read that tried to write fails (SQLITE_READONLY)
                  return db;
                }),
        turns(WriteTurns::of(path)) {}

  // Both pools' counters, summed: Metrics has one pool entry per store, as on PostgreSQL.
  PoolStats pool_stats() const {
    PoolStats w = pool.stats();
    const PoolStats r = readers.stats();
    w.created += r.created;
    w.closed += r.closed;
    w.acquired += r.acquired;
    w.waited += r.waited;
    w.timed_out += r.timed_out;
    w.in_use += r.in_use;
    w.idle += r.idle;
    return w;
  }

  // A write transaction takes this process's turn on the file (write_turns.hpp) with its
  // connection already in hand, so a turn never waits for a pooled connection; it waits as long
  // as SQLite's busy timeout would.
  std::chrono::milliseconds turn_timeout() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(options.sqlite_busy_timeout);
  }

  std::int64_t now_usecs() const {
    return unix_usecs(options.clock ? options.clock() : std::chrono::time_point_cast<Duration>(Clock::now()));
  }
};

// Each call in its own transaction: BEGIN IMMEDIATE with this process's write turn on a write
// connection for writes; for reads a deferred BEGIN on a read connection, one WAL snapshot for the
// whole call, never waiting for a write connection or a turn. In WAL a reader does not block a
// writer, nor a writer a reader; a checkpoint cannot copy past the oldest snapshot still read.
class SqlitePooledSession final : public SqliteSession {
 public:
  explicit SqlitePooledSession(SqliteShared& shared) : shared_(shared) {}
  void write(const std::function<void(Db&)>& work) override {
    auto db = shared_.pool.acquire();
    WriteTurn turn(*shared_.turns, shared_.turn_timeout());
    in_transaction(
        *db, [&] { db->begin_immediate(turn.left()); }, work);
  }
  void read(const std::function<void(Db&)>& work) override {
    auto db = shared_.readers.acquire();
    in_transaction(
        *db, [&] { db->exec("BEGIN"); }, work);
  }
  std::int64_t now_usecs() override { return shared_.now_usecs(); }
  Instruments& instruments() override { return shared_.instruments; }

 private:
  template <typename Begin>
  static void in_transaction(Db& db, const Begin& begin, const std::function<void(Db&)>& work) {
    begin();
    try {
      work(db);
      db.exec("COMMIT");
    } catch (...) {
      if (!db.reusable()) db.exec("ROLLBACK");
      throw;
    }
  }

  SqliteShared& shared_;
};

// Like PostgreSQL, an error inside a transaction aborts it: later calls fail with 25P02 and
// commit rolls back, so both backends give the same answers.
class SqliteTransaction final : public Transaction, private SqliteSession {
 public:
  explicit SqliteTransaction(SqliteShared& shared)
      : shared_(shared),
        state_(shared.instruments),
        db_(shared.pool.acquire()),
        turn_(*shared.turns, shared.turn_timeout()),
        leases_(*this),
        rows_(*this),
        idempotency_(*this),
        queues_(*this),
        topics_(*this),
        audit_(*this),
        workflows_(*this) {
    state_.begin([&] { db_->begin_immediate(turn_.left()); });
  }
  ~SqliteTransaction() override {
    state_.abandon([&] { db_->exec("ROLLBACK"); });
  }
  Leases& leases() override { return leases_; }
  VersionedRows& versioned_rows() override { return rows_; }
  Idempotency& idempotency() override { return idempotency_; }
  Queues& queues() override { return queues_; }
  Topics& topics() override { return topics_; }
  Audit& audit() override { return audit_; }
  Workflows& workflows() override { return workflows_; }
  // The turn goes to the next writer once the transaction ended, not when this object goes.
  void commit() override {
    Ended ended{turn_};
    state_.commit([&] { db_->exec("COMMIT"); }, [&] { db_->exec("ROLLBACK"); });
  }
  void rollback() override {
    Ended ended{turn_};
    state_.end("tx.rollback", [&] { db_->exec("ROLLBACK"); });
  }

 private:
  void write(const std::function<void(Db&)>& work) override {
    state_.check_usable();
    work(*db_);  // a failure reaches measure(), which aborts the transaction (failed())
  }
  std::int64_t now_usecs() override { return shared_.now_usecs(); }
  Instruments& instruments() override { return shared_.instruments; }
  void failed() override { state_.fail(); }

  struct Ended {
    WriteTurn& turn;
    ~Ended() { turn.release(); }
  };

  SqliteShared& shared_;
  TransactionState state_;
  SqlitePool::Handle db_;
  WriteTurn turn_;
  SqliteLeases leases_;
  SqliteVersionedRows rows_;
  SqliteIdempotency idempotency_;
  SqliteQueues queues_;
  SqliteTopics topics_;
  SqliteAudit audit_;
  SqliteWorkflows workflows_;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& path, const StoreOptions& options)
      : shared_(path, options),
        session_(shared_),
        leases_(session_),
        rows_(session_),
        idempotency_(session_),
        queues_(session_),
        topics_(session_),
        audit_(session_),
        workflows_(session_),
        app_schema_(make_sqlite_app_schema(shared_.pool, path + ".lock", [this] { return shared_.now_usecs(); })),
        migrations_(make_migrations(*app_schema_)),
        presence_(*app_schema_, options) {
    const auto dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot create " + dir.string() + ": " + ec.message());
    check_local_filesystem(dir.string());
    {
      FileLock lock(path + ".lock", "migrating",
                    std::chrono::duration_cast<std::chrono::milliseconds>(options.sqlite_busy_timeout));
      auto db = shared_.pool.acquire();
      shared_.migrations = migrate(*db, migrations_list(), true);
      // On the connection already held (a pool of one has no second one to give); it writes only
      // for a new store, so opening never waits for another process's write transaction.
      record_new_store_identity(*db, path, shared_.now_usecs());
    }
    presence_.open();
    log().info("opened SQLite store {} at migration {}", path, shared_.migrations.last);
  }
  Leases& leases() override { return leases_; }
  VersionedRows& versioned_rows() override { return rows_; }
  Idempotency& idempotency() override { return idempotency_; }
  Queues& queues() override { return queues_; }
  Topics& topics() override { return topics_; }
  Audit& audit() override { return audit_; }
  Workflows& workflows() override { return workflows_; }
  std::unique_ptr<Transaction> begin() override { return std::make_unique<SqliteTransaction>(shared_); }
  StorageStatus status() override {
    StorageStatus s;
    s.backend = "sqlite";
    s.location = shared_.path;
    try {
      session_.read([&](Db& db) {
        MigrationState state = migrate(db, migrations_list(), false);
        s.schema_version = state.last;
        s.migrations_applied = state.applied;
        s.migrations_pending = state.pending;
        auto q = db.query("PRAGMA integrity_check");
        std::string check = q.step() ? q.text(0) : "no answer";
        const RestoreStatus restore = sqlite_restore_status(db, shared_.path);
        s.healthy = check == "ok" && state.pending == 0 && !restore.needs_reconcile();
        s.detail = "integrity " + check + "; last exclusive lock: " + FileLock::describe_holder(shared_.path + ".lock");
        if (restore.needs_reconcile()) s.detail += "; restore detected, run storage reconcile: " + restore.detail;
      });
    } catch (const Error& e) {
      s.detail = std::string(to_string(e.kind())) + ": " + e.what();
    }
    return s;
  }
  Metrics metrics() const override { return {shared_.instruments.snapshot(), shared_.pool_stats(), {}}; }
  std::vector<ReplicaStatus> replicas() override { return {}; }
  Migrations& migrations() override { return *migrations_; }
  // One file: every read class is served by it.
  Health health(ReadClass /*read*/) override {
    Health h;
    RestoreStatus restore;
    const auto started = std::chrono::steady_clock::now();
    try {
      session_.read([&](Db& db) {
        const MigrationState state = migrate(db, migrations_list(), false);
        h.latency = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
        h.schema.store_version = state.last;
        restore = sqlite_restore_status(db, shared_.path);
      });
      h.status = presence_.check(h.schema, h.details);
      if (restore.needs_reconcile() && h.status == HealthStatus::Healthy) h.status = HealthStatus::Degraded;
      if (restore.needs_reconcile())
        h.details.push_back("a restore or copy was detected and not reconciled (run forgeyard storage reconcile): " +
                            restore.detail);
      if (h.status == HealthStatus::Healthy && ::access(shared_.path.c_str(), W_OK) != 0) {
        h.status = HealthStatus::Degraded;
        h.details.push_back("the store file is not writable: reads work, writes fail");
      }
    } catch (const Error& e) {
      h.latency = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
      h.status = HealthStatus::Unavailable;
      h.details.push_back(std::string(to_string(e.kind())) + ": " + e.what());
    }
    return h;
  }
  StoreStats stats(ReadClass /*read: one file*/) override {
    return shared_.instruments.measure("store.stats", [&] {
      StoreStats s;
      session_.read([&](Db& db) {
        HeldSession snapshot(db, shared_.instruments, [this] { return shared_.now_usecs(); });
        SqliteQueues queues(snapshot);
        s = sqlite_stats(db, queues, shared_.now_usecs());
      });
      return s;
    });
  }
  DoctorReport doctor(const DoctorOptions& options) override {
    DoctorFacts facts;
    try {
      session_.read([&](Db& db) {
        HeldSession snapshot(db, shared_.instruments, [this] { return shared_.now_usecs(); });
        SqliteQueues queues(snapshot);
        facts = sqlite_doctor_facts(db, queues, shared_.now_usecs(), migrations_list());
      });
    } catch (const Error& e) {
      facts = DoctorFacts{};
      facts.backend = "sqlite";
      facts.connect_error = std::string(to_string(e.kind())) + ": " + e.what();
    }
    add_store_facts(facts, *this, options, shared_.options);
    return {evaluate_doctor(facts)};
  }
  RestoreStatus restore_status() override {
    return shared_.instruments.measure("storage.restore_status", [&] {
      RestoreStatus s;
      session_.read([&](Db& db) { s = sqlite_restore_status(db, shared_.path); });
      return s;
    });
  }
  ReconcileReport restore_reconcile(const std::vector<AuditAnchor>& anchors) override {
    return shared_.instruments.measure("storage.reconcile",
                                       [&] { return sqlite_restore_reconcile(session_, shared_.path, anchors); });
  }
  std::map<std::string, std::int64_t> maintain(int max_rows, std::optional<std::string> tenant) override {
    return shared_.instruments.measure("store.maintain", [&] {
      if (max_rows <= 0) throw Error(sqlstate::invalid_parameter, "max_rows must be positive");
      std::map<std::string, std::int64_t> done;
      session_.write([&](Db& db) {
        const std::int64_t now = shared_.now_usecs();
        done = purge_expired(db, now, max_rows, tenant);
        done["workflow_runs"] = purge_runs(db, now, max_rows, tenant);
        done["schedules"] = tick_schedules(db, tenant, now);  // the runs of due schedules started
      });
      return done;
    });
  }

 private:
  std::vector<Migration> migrations_list() const {
    return shared_.options.sqlite_migrations_dir.empty() ? embedded_sqlite_migrations()
                                                         : load_migrations(shared_.options.sqlite_migrations_dir);
  }
  SqliteShared shared_;
  SqlitePooledSession session_;
  SqliteLeases leases_;
  SqliteVersionedRows rows_;
  SqliteIdempotency idempotency_;
  SqliteQueues queues_;
  SqliteTopics topics_;
  SqliteAudit audit_;
  SqliteWorkflows workflows_;
  std::unique_ptr<AppSchemaBackend> app_schema_;
  std::unique_ptr<Migrations> migrations_;
  DaemonPresence presence_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite(const std::string& path, const StoreOptions& options) {
  if (!options.replicas.empty())
    throw Error(ErrorKind::InvalidArgument, "22023",
                "replicas are for a PostgreSQL store: the embedded store is one file, and every read is strong");
  return std::make_unique<SqliteStore>(path, options);
}

}  // namespace forgeyard::detail
