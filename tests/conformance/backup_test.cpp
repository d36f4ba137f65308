// storage backup / restore / verify on every backend, through the public API and the CLI: a
// round trip keeps leases, versions, idempotency keys, message states and audit chains; a
// corrupted, partial or too-new backup is refused before anything changes; a non-empty target
// needs --replace; verify --full finds a counter a superuser broke and exits 1.
#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "backend.hpp"
#include "check.hpp"
#include "forgeyard/backup.hpp"

namespace fs = std::filesystem;
using namespace forgeyard;
using conformance::slurp;
using conformance::with_database;

namespace {

void pg_exec(const std::string& conninfo, const std::string& sql) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  std::string message = ok ? "" : PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  if (!ok) throw std::runtime_error("setup SQL failed: " + message);
}

void sqlite_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_busy_timeout(db, 10000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("setup SQL failed: " + message);
}

// The CREATE statement of a SQLite schema object.
std::string sqlite_text(const std::string& path, const std::string& name) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_schema WHERE name = ?1", -1, &stmt, nullptr);
  sqlite3_bind_text(stmt, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  std::string sql;
  if (sqlite3_step(stmt) == SQLITE_ROW) sql = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (sql.empty()) throw std::runtime_error("no " + name + " in " + path);
  return sql;
}

// The same server URL with another database name.

void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Fresh stores for one test: SQLite files in a temporary directory, or new PostgreSQL
// databases with the extension (dropped at the end).
struct Stores : conformance::Backend {
  std::string dir;
  std::string server;  // a PostgreSQL URL of the test server, when the suite has one
  std::vector<std::string> databases;

  Stores() {
    // Backup, restore and copy are administration: they talk to the server directly, also when
    // the suite runs through PgBouncer (which knows only its configured databases).
    if (const char* direct = std::getenv("FORGEYARD_TEST_PG_URL"); is_postgres() && direct != nullptr) server = direct;
    std::string pattern = (fs::temp_directory_path() / "forgeyard-backup.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = pattern;
  }
  ~Stores() {
    for (const auto& db : databases) {
      try {
        pg_exec(server, "DROP DATABASE IF EXISTS \"" + db + "\" WITH (FORCE)");
        pg_exec(server, "DROP DATABASE IF EXISTS \"" + db + "_fy_restore\" WITH (FORCE)");
      } catch (const std::exception&) {
      }
    }
    fs::remove_all(dir);
  }
  // A store URL; `create` makes the database with the extension (PostgreSQL).
  std::string store_url(const std::string& name, bool create = true) {
    return is_postgres() ? pg_url(name, create) : sqlite_url(name);
  }
  std::string sqlite_url(const std::string& name) { return "sqlite://" + dir + "/" + name + ".db"; }
  std::string pg_url(const std::string& name, bool create = true) {
    BOOST_REQUIRE(!server.empty());
    const std::string db = unique_identifier("fy_" + name);
    databases.push_back(db);
    if (create) {
      pg_exec(server, "CREATE DATABASE \"" + db + "\"");
      pg_exec(with_database(server, db), "CREATE EXTENSION forgeyard");
    }
    return with_database(server, db);
  }
  static bool on_postgres(const std::string& store) { return store.starts_with("postgresql://"); }
  void exec_on(const std::string& at, const std::string& sql) {
    if (on_postgres(at))
      pg_exec(at, sql);
    else
      sqlite_exec(at.substr(9), sql);
  }
  std::string backup_dir(const std::string& name) { return dir + "/" + name; }

  // forgeyard --store STORE ARGS...; returns the exit code, stdout into `out`.
  int cli(const std::string& at, const std::vector<std::string>& args, std::string* out = nullptr) {
    const std::string out_path = dir + "/cli.out";
    std::vector<std::string> all{"forgeyard", "--store", at};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
      dup2(::open("/dev/null", O_WRONLY), 2);
      execv(FORGEYARD_CLI, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (out != nullptr) *out = slurp(out_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

// What a seeded store holds, read back through the API.
struct Seen {
  std::int64_t epoch = 0;
  std::int64_t row_version = 0;
  bool key_completed = false;
  std::int64_t waiting = 0, in_flight = 0, dead = 0;  // ready + delayed, claimed, dead letters
  std::int64_t head_seq = 0;
  Bytes head_hash;
  bool lease_live = false;
  bool operator==(const Seen&) const = default;
};

constexpr char backup_tenant[] = "backup-tenant";
constexpr char queue_name[] = "jobs";

// Returns the id of the last message it sent.
std::int64_t seed(Stores& s, const std::string& store_url) {
  const std::string integer = Stores::on_postgres(store_url) ? "bigint" : "INTEGER";
  s.exec_on(store_url, "CREATE TABLE accounts (tenant_id text NOT NULL, id " + integer + " NOT NULL, balance " +
                           integer + " NOT NULL, note text, entity_version " + integer +
                           " NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, id))");
  auto store = open(store_url);
  store->versioned_rows().enable("accounts");
  s.exec_on(store_url, "INSERT INTO accounts (tenant_id, id, balance) VALUES ('backup-tenant', 1, 10)");
  store->versioned_rows().update("accounts", {{"tenant_id", std::string(backup_tenant)}, {"id", std::int64_t{1}}}, 1,
                                 {{"balance", std::int64_t{20}}});
  store->leases().acquire(backup_tenant, "build-42", "worker-a", std::chrono::minutes(5));
  const IdempotencyKey key{backup_tenant, "run.create:project/1", "k1"};
  const auto begun = store->idempotency().begin(key, "digest-1");
  store->idempotency().complete(key, Bytes("response-1"), begun.attempt);
  store->queues().create(backup_tenant, queue_name, QueueOptions{});
  for (int i = 0; i < 3; ++i)
    store->queues().enqueue(backup_tenant, queue_name, {Bytes("payload-" + std::to_string(i))});
  auto claimed = store->queues().claim(backup_tenant, queue_name, "consumer-a", 2, std::chrono::minutes(5));
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  store->queues().ack(backup_tenant, queue_name, claimed[0].msg_id, claimed[0].claim_token);
  store->queues().nack(backup_tenant, queue_name, claimed[1].msg_id, claimed[1].claim_token, "poison", true);
  const std::int64_t last_id = store->queues().enqueue(backup_tenant, queue_name, {Bytes("in-flight")});
  auto in_flight = store->queues().claim(backup_tenant, queue_name, "consumer-b", 1, std::chrono::minutes(5));
  BOOST_REQUIRE_EQUAL(in_flight.size(), 1u);
  for (int i = 0; i < 3; ++i) store->audit().append(backup_tenant, {"alice", "deploy", "service/" + std::to_string(i)});
  return last_id;
}

Seen look(const std::string& store_url) {
  auto store = open(store_url);
  Seen seen;
  const auto lease = store->leases().get(backup_tenant, "build-42");
  seen.epoch = lease ? lease->epoch : 0;
  seen.lease_live = lease && lease->state == LeaseState::Live;
  const auto row =
      store->versioned_rows().get("accounts", {{"tenant_id", std::string(backup_tenant)}, {"id", std::int64_t{1}}});
  seen.row_version = row ? row->version : 0;
  const auto status = store->idempotency().status({backup_tenant, "run.create:project/1", "k1"});
  seen.key_completed = status && status->status == "completed";
  const QueueStats q = store->queues().stats(backup_tenant, queue_name);
  seen.waiting = q.ready + q.delayed;
  seen.in_flight = q.in_flight;
  seen.dead = q.dead;
  const AuditHead head = store->audit().head(backup_tenant);
  seen.head_seq = head.seq;
  seen.head_hash = head.hash;
  return seen;
}

// What reconcile makes of a store's state: deliveries in flight claimable again, no lease live.
Seen reconciled(Seen s) {
  s.waiting += s.in_flight;
  s.in_flight = 0;
  s.lease_live = false;
  return s;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(backup, Stores)

BOOST_AUTO_TEST_CASE(a_backup_restores_into_an_empty_store_with_everything_it_held) {
  const std::string source = store_url("source");
  seed(*this, source);
  const Seen before = look(source);
  const BackupResult b = backup_store(source, backup_dir("b1"));
  BOOST_TEST(b.backend == (is_postgres() ? "postgresql" : "sqlite"));
  BOOST_TEST(b.audit_chains == 1);
  BOOST_TEST(fs::exists(backup_dir("b1") + "/manifest.json"));
  const std::string manifest = slurp(backup_dir("b1") + "/manifest.json");
  BOOST_TEST(manifest.find("\"tenant\": \"backup-tenant\", \"seq\": 3") != std::string::npos);
  if (is_postgres()) BOOST_TEST(!b.server_version.empty());

  const std::string target = store_url("target", false);
  const RestoreResult r = restore_store(target, backup_dir("b1"));
  BOOST_TEST(r.verify.ok());
  BOOST_TEST(!r.replaced);
  BOOST_TEST(r.schema_version == b.schema_version);
  const Seen after = look(target);
  BOOST_TEST(after.epoch == before.epoch);
  BOOST_TEST(after.row_version == 2);
  BOOST_TEST(after.key_completed);
  BOOST_TEST(after.dead == 1);
  // Restore ends with reconcile: the delivery in flight at backup time is claimable again (its
  // old token refused) and the lease live at backup time is not live any more.
  BOOST_TEST(r.reconciled);
  BOOST_TEST(before.in_flight == 1);
  BOOST_TEST(before.lease_live);
  BOOST_TEST(after.waiting == 2);  // the third message, never claimed, and the released delivery
  BOOST_TEST(after.in_flight == 0);
  BOOST_TEST(!after.lease_live);
  BOOST_TEST(after.head_seq == 3);
  BOOST_TEST(after.head_hash == before.head_hash);
  BOOST_TEST(open(target)->audit().verify(backup_tenant).ok);

  // A store that exists but holds nothing (opened once, or CREATE EXTENSION only) is empty too.
  const std::string opened = store_url("opened");
  open(opened).reset();
  const RestoreResult into_opened = restore_store(opened, backup_dir("b1"));
  BOOST_TEST(!into_opened.replaced);
  BOOST_TEST(look(opened).head_seq == 3);
}

BOOST_AUTO_TEST_CASE(a_non_empty_target_needs_replace_and_then_goes_back_to_the_backup) {
  const std::string db = store_url("store");
  seed(*this, db);
  const Seen at_backup = look(db);
  backup_store(db, backup_dir("b1"));
  open(db)->audit().append(backup_tenant, {"bob", "rollback", "service/9"});
  const Seen later = look(db);
  BOOST_REQUIRE_EQUAL(later.head_seq, 4);

  FY_CHECK_ERROR(restore_store(db, backup_dir("b1")), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST((look(db) == later));
  std::string out;
  BOOST_TEST(cli(db, {"storage", "restore", backup_dir("b1")}) == 4);
  BOOST_TEST((look(db) == later));

  BOOST_TEST(cli(db, {"storage", "restore", backup_dir("b1"), "--replace"}, &out) == 0);
  BOOST_TEST(out.find("replaced=true") != std::string::npos);
  BOOST_TEST(out.find("verify_ok=true") != std::string::npos);
  const Seen restored = look(db);
  BOOST_TEST(restored.head_seq == 3);
  BOOST_TEST(restored.head_hash == at_backup.head_hash);
}

BOOST_AUTO_TEST_CASE(a_damaged_partial_or_too_new_backup_is_refused_and_nothing_changes) {
  const std::string db = store_url("store");
  seed(*this, db);
  backup_store(db, backup_dir("good"));
  open(db)->audit().append(backup_tenant, {"bob", "later", "service/9"});
  const Seen now = look(db);
  const std::string data = is_postgres() ? "database.dump" : "store.db";
  auto copy_of_good = [&](const std::string& name) {
    fs::copy(backup_dir("good"), backup_dir(name));
    return backup_dir(name);
  };

  const std::string invalid = copy_of_good("invalid");
  spit(invalid + "/manifest.json", "{\"format\": 1, \"backend\": \"sqlite\"");  // cut JSON
  FY_CHECK_ERROR(restore_store(db, invalid, {true}), ErrorKind::Corruption, "XX001");
  BOOST_TEST((look(db) == now));

  const std::string truncated = copy_of_good("truncated");
  fs::resize_file(truncated + "/" + data, fs::file_size(truncated + "/" + data) / 2);
  FY_CHECK_ERROR(restore_store(db, truncated, {true}), ErrorKind::Corruption, "XX001");
  BOOST_TEST((look(db) == now));

  const std::string flipped = copy_of_good("flipped");
  std::string bytes = slurp(flipped + "/" + data);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  spit(flipped + "/" + data, bytes);
  FY_CHECK_ERROR(restore_store(db, flipped, {true}), ErrorKind::Corruption, "XX001");
  BOOST_TEST((look(db) == now));

  const std::string missing = copy_of_good("missing");
  fs::remove(missing + "/" + data);
  FY_CHECK_ERROR(restore_store(db, missing, {true}), ErrorKind::Corruption, "XX001");

  const std::string newer = copy_of_good("newer");
  std::string manifest = slurp(newer + "/manifest.json");
  const std::string from = "\"schema_version\": \"";
  const auto at = manifest.find(from) + from.size();
  manifest.replace(at, manifest.find('"', at) - at, is_postgres() ? "99.0.0" : "9999_future.sql");
  spit(newer + "/manifest.json", manifest);
  const Error e = conformance::expect_error([&] { restore_store(db, newer, {true}); });
  BOOST_TEST(e.sqlstate() == "22023");
  BOOST_TEST(std::string(e.what()).find("newer than this forgeyard understands") != std::string::npos);
  BOOST_TEST((look(db) == now));
  BOOST_TEST(cli(db, {"storage", "restore", newer, "--replace"}) == 4);
  BOOST_TEST((look(db) == now));
}

BOOST_AUTO_TEST_CASE(verify_full_finds_a_counter_a_superuser_broke_and_exits_1) {
  const std::string db = store_url("store");
  seed(*this, db);
  std::string out;
  BOOST_TEST(cli(db, {"storage", "verify", "--full"}, &out) == 0);
  BOOST_TEST(out.find("ok=true") != std::string::npos);
  BOOST_TEST(out.find("audit_chains") != std::string::npos);
  BOOST_TEST(verify_store(db, true).ok());

  if (is_postgres())
    exec_on(db, "UPDATE forgeyard.queue_slots SET admitted_messages = admitted_messages + 5 WHERE slot = 0");
  else
    exec_on(db, "UPDATE queues SET used_messages = used_messages + 5");
  const VerifyReport quick = verify_store(db, false);
  BOOST_TEST(quick.ok());  // counters are a full check
  const VerifyReport full = verify_store(db, true);
  BOOST_REQUIRE_EQUAL(full.findings.size(), 1u);
  BOOST_TEST(full.findings[0].check == "queue_counters");
  BOOST_TEST(full.findings[0].detail.find("queue jobs of tenant backup-tenant") != std::string::npos);
  BOOST_TEST(cli(db, {"storage", "verify", "--full"}, &out) == 1);
  BOOST_TEST(out.find("finding=queue_counters: ") != std::string::npos);
  BOOST_TEST(cli(db, {"storage", "verify", "--full", "--json"}, &out) == 1);
  BOOST_TEST(out.find("\"ok\": false") != std::string::npos);
}

// A workflow journal with a gap, and a finished run with no finish time, are findings of the full
// check workflow_journals (a superuser's edits).
BOOST_AUTO_TEST_CASE(verify_full_finds_a_journal_gap_and_a_run_whose_state_its_row_contradicts) {
  const std::string db = store_url("store");
  seed(*this, db);
  {
    auto own = open(db);
    auto& wf = own->workflows();
    const std::string run = wf.start(backup_tenant, "verify", 1, "v-1");
    const auto c = wf.claim(backup_tenant, "w", {"verify@1"}).at(0);
    for (const char* step : {"a", "b"}) {
      wf.step(backup_tenant, run, c.epoch, step);
      wf.step_complete(backup_tenant, run, c.epoch, step, "{}");
    }
    wf.complete(backup_tenant, run, c.epoch, "{}");
  }
  BOOST_TEST(verify_store(db, true).ok());
  const std::string schema = is_postgres() ? "forgeyard." : "";
  exec_on(db, "DELETE FROM " + schema + "wf_journal WHERE position = 1");
  exec_on(db, "UPDATE " + schema + "wf_runs SET finished_at = NULL");
  const VerifyReport full = verify_store(db, true);
  std::vector<std::string> found;
  for (const auto& f : full.findings)
    if (f.check == "workflow_journals") found.push_back(f.detail);
  BOOST_TEST_REQUIRE(found.size() == 2u);
  BOOST_TEST(found[0].find("has 1 journal rows up to position 2: its positions are not contiguous from 1") !=
                 std::string::npos,
             found[0]);
  BOOST_TEST(found[1].find("is completed at epoch") != std::string::npos, found[1]);
  BOOST_TEST(verify_store(db, false).ok());  // a full check only
}

BOOST_AUTO_TEST_CASE(verify_full_finds_a_version_below_1_and_a_message_in_two_states) {
  const std::string db = store_url("store");
  seed(*this, db);
  if (is_postgres()) {
    exec_on(db, "ALTER TABLE accounts DISABLE TRIGGER forgeyard_versioning");
    exec_on(db, "UPDATE accounts SET entity_version = 0");
    exec_on(db, "ALTER TABLE accounts ENABLE TRIGGER forgeyard_versioning");
  } else {
    // A superuser's edit past the trigger: take it away, write, put it back as it was.
    const std::string trigger = sqlite_text(db.substr(9), "forgeyard_versioning_update_accounts");
    exec_on(db, "DROP TRIGGER forgeyard_versioning_update_accounts");
    exec_on(db, "UPDATE accounts SET entity_version = 0");
    exec_on(db, trigger);
  }
  exec_on(db, std::string("UPDATE ") + (is_postgres() ? "forgeyard." : "") +
                  "messages SET finished_at = enqueued_at WHERE state = 'pending'");
  const VerifyReport full = verify_store(db, true);
  std::set<std::string> checks;
  for (const auto& f : full.findings) checks.insert(f.check);
  BOOST_TEST(checks.contains("message_states"));
  BOOST_TEST(checks.contains("versioned_tables"));
  BOOST_TEST(!full.ok());
}

BOOST_AUTO_TEST_CASE(backup_refuses_a_directory_that_is_not_empty) {
  const std::string db = store_url("store");
  seed(*this, db);
  fs::create_directories(backup_dir("used"));
  spit(backup_dir("used") + "/something", "x");
  FY_CHECK_ERROR(backup_store(db, backup_dir("used")), ErrorKind::InvalidArgument, "22023");
  std::string out;
  BOOST_TEST(cli(db, {"storage", "backup", backup_dir("cli"), "--json"}, &out) == 0);
  BOOST_TEST(out.find("\"audit_chains\": 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(copy_moves_a_store_to_the_other_backend_and_back_with_everything_intact) {
  if (!is_postgres()) {
    // Without a server in this run, what can be proven is that a copy needs two backends.
    FY_CHECK_ERROR(copy_store(sqlite_url("a"), sqlite_url("b")), ErrorKind::InvalidArgument, "22023");
    return;
  }
  const std::string local = sqlite_url("local");
  const std::int64_t last_id = seed(*this, local);
  const Seen before = look(local);
  // A workflow run with a recorded step and one in flight travels too.
  const auto local_store = open(local);
  auto& local_wf = local_store->workflows();
  const std::string run = local_wf.start(backup_tenant, "order", 1, "order-1", R"({"n": 1})");
  const auto owner = local_wf.claim(backup_tenant, "w1", {"order@1"}, 1, std::chrono::hours(1)).at(0);
  local_wf.step(backup_tenant, run, owner.epoch, "reserve");
  local_wf.step_complete(backup_tenant, run, owner.epoch, "reserve", R"({"reserved": [1, 2]})", "release");
  const auto journal_before = local_wf.journal(backup_tenant, run);
  BOOST_TEST(local_wf.signal(backup_tenant, run, "approve", R"({"x": 1})"));
  // Topics travel too: a subscription filtered to versions 1-2 of a type, one that takes every
  // event, and an event waiting in both.
  auto& local_topics = local_store->topics();
  local_topics.register_event_type(backup_tenant, "order.created", 1);
  local_topics.register_event_type(backup_tenant, "order.created", 3);
  local_topics.create(backup_tenant, "orders");
  forgeyard::SubscriptionOptions filtered;
  filtered.event_types = std::map<std::string, forgeyard::VersionRange>{{"order.created", {1, 2}}};
  local_topics.subscribe(backup_tenant, "orders", "billing", filtered);
  local_topics.subscribe(backup_tenant, "orders", "feed");
  const auto order_event = [](int version, const char* payload) {
    forgeyard::Event e;
    e.event_type = "order.created";
    e.version = version;
    e.payload = Bytes(payload);
    return e;
  };
  const std::int64_t first_seq = local_topics.publish(backup_tenant, "orders", order_event(1, "order-42"));

  const std::string server_store = pg_url("server");
  const CopyResult up = copy_store(local, server_store);
  BOOST_TEST(up.verify.ok());
  BOOST_TEST(up.reconciled);
  BOOST_TEST(up.rows.at("audit_events") == 3);
  BOOST_TEST(up.rows.at("accounts") == 1);
  BOOST_TEST((look(server_store) == reconciled(before)));
  {
    const auto on_server = open(server_store);
    auto& server_wf = on_server->workflows();
    const auto journal = server_wf.journal(backup_tenant, run);
    BOOST_TEST_REQUIRE(journal.size() == 1u);
    BOOST_TEST((journal[0].result == journal_before[0].result));
    BOOST_TEST((journal[0].compensation == journal_before[0].compensation));
    BOOST_TEST(server_wf.status(backup_tenant, run).epoch == owner.epoch);
    // The same run_key and input return the copied run (its input compares equal as jsonb).
    BOOST_TEST(server_wf.start(backup_tenant, "order", 1, "order-1", R"({"n":1})") == run);
    // The copy's reconcile let the owner's delivery go (no fence survives a copy): the next owner
    // replays the journal and receives the signal sent to the run before the copy.
    FY_CHECK_ERROR(server_wf.step(backup_tenant, run, owner.epoch, "reserve"), ErrorKind::StaleFence, "FY001");
    const auto next = server_wf.claim(backup_tenant, "w2", {"order@1"}, 1, std::chrono::hours(1));
    BOOST_TEST_REQUIRE(next.size() == 1u);
    BOOST_TEST(next[0].epoch > owner.epoch);
    BOOST_TEST(server_wf.step(backup_tenant, run, next[0].epoch, "reserve").done);
    const auto approval =
        server_wf.wait_signal(backup_tenant, run, next[0].epoch, "approval", "approve", std::chrono::hours(1));
    BOOST_TEST((approval.status == forgeyard::SignalWait::Status::Received));
    BOOST_TEST((approval.payload == std::optional<std::string>(R"({"x":1})")));
    const auto topics = on_server->topics().list(backup_tenant);
    BOOST_TEST_REQUIRE(topics.size() == 1u);
    BOOST_TEST(topics[0].subscriptions.size() == 2u);
    for (const auto& lag : on_server->topics().lag(backup_tenant, "orders")) BOOST_TEST(lag.backlog == 1);
  }
  BOOST_TEST(open(server_store)->audit().verify(backup_tenant).ok);
  // The server continues the sequences: a new message gets an id above every copied one.
  BOOST_TEST(open(server_store)->queues().enqueue(backup_tenant, queue_name, {Bytes("after-copy")}) > last_id);
  // The versioned table is under version control on the server: a stale version is refused.
  FY_CHECK_ERROR(open(server_store)
                     ->versioned_rows()
                     .update("accounts", {{"tenant_id", std::string(backup_tenant)}, {"id", std::int64_t{1}}}, 1,
                             {{"balance", std::int64_t{1}}}),
                 ErrorKind::Conflict, "FY002");

  // A target that is not empty is refused, and so is a type that does not map.
  FY_CHECK_ERROR(copy_store(local, server_store), ErrorKind::InvalidArgument, "22023");
  const std::string odd = sqlite_url("odd");
  exec_on(odd,
          "CREATE TABLE readings (tenant_id TEXT NOT NULL, id INTEGER PRIMARY KEY, taken DATETIME,"
          " entity_version INTEGER NOT NULL DEFAULT 1)");
  open(odd)->versioned_rows().enable("readings");
  const std::string odd_target = pg_url("odd_target");
  const Error refused = conformance::expect_error([&] { copy_store(odd, odd_target); });
  BOOST_TEST(refused.sqlstate() == "22023");
  BOOST_TEST(std::string(refused.what()).find("column taken of table readings") != std::string::npos);
  // Nothing was written: the same target still counts as empty and takes a copy.
  BOOST_TEST(copy_store(local, odd_target).verify.ok());

  // And back to a new SQLite file, through the CLI.
  const std::string back = sqlite_url("back");
  std::string out;
  BOOST_TEST(cli(server_store, {"storage", "copy", "--to", back}, &out) == 0);
  // The tenant's 3 events and the report the server's reconcile wrote to the operations chain.
  BOOST_TEST(out.find("copied=audit_events:4") != std::string::npos);
  BOOST_TEST(out.find("verify_ok=true") != std::string::npos);
  Seen returned = look(back);
  BOOST_TEST(returned.waiting == reconciled(before).waiting + 1);  // the message sent on the server
  returned.waiting = reconciled(before).waiting;
  BOOST_TEST((returned == reconciled(before)));
  BOOST_TEST(open(back)->audit().verify(backup_tenant).ok);
  const auto journal_back = open(back)->workflows().journal(backup_tenant, run);
  BOOST_TEST_REQUIRE(journal_back.size() == 2u);  // reserve, and the wait that received on the server
  BOOST_TEST((journal_back[0].result == journal_before[0].result));
  BOOST_TEST((journal_back[1].result == std::optional<std::string>(R"({"payload":{"x":1},"status":"received"})")));
  BOOST_TEST(open(back)->workflows().start(backup_tenant, "order", 1, "order-1", R"({"n":1})") == run);
  // The topic's event is delivered with its payload after two copies; the filter came back
  // (version 3 is outside billing's range: quarantined) and event_seq goes on from the copied ones.
  for (const std::string& store_url : {server_store, back}) {
    const auto copied = open(store_url);
    auto& topics = copied->topics();
    const auto billing = topics.claim(backup_tenant, "billing", "c", 10);
    BOOST_TEST_REQUIRE(billing.size() == 1u);
    BOOST_TEST(billing[0].event_seq == first_seq);
    BOOST_TEST((billing[0].delivery.payload == Bytes("order-42")));
    BOOST_TEST(topics.publish(backup_tenant, "orders", order_event(3, "order-43")) > first_seq);
    BOOST_TEST(topics.claim(backup_tenant, "billing", "c", 10).empty());
    BOOST_TEST(copied->queues().stats(backup_tenant, "billing").dead == 1);
    BOOST_TEST(topics.claim(backup_tenant, "feed", "c", 10).size() == 2u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
