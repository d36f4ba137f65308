// The application's own schema migrations, the daemon registry and health, on both backends
// (docs/operations.md, "Migrating your application's schema").
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::HealthStatus;
using forgeyard::MigrationState;

namespace {

struct Fixture : conformance::Backend {
  std::string dir;
  std::string app = unique("app");
  std::string table = unique_identifier("app_t");

  Fixture() {
    std::string pattern = (std::filesystem::temp_directory_path() / "forgeyard-appmig.XXXXXX").string();
    BOOST_REQUIRE(mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
  }
  ~Fixture() { std::filesystem::remove_all(dir); }

  void write(const std::string& name, const std::string& sql) const { std::ofstream(dir + "/" + name) << sql; }
  std::string read(const std::string& name) const {
    std::ifstream in(dir + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  forgeyard::MigrateOptions opts(bool allow_contract = false) const {
    forgeyard::MigrateOptions o;
    o.app = app;
    o.allow_contract = allow_contract;
    o.app_version = "1.2.3";
    o.lock_wait = 10s;
    return o;
  }
  forgeyard::StoreOptions daemon_options(const std::string& instance, int min_schema, int max_schema) const {
    forgeyard::StoreOptions o;
    o.pool.max_connections = 2;
    o.clock = [this] { return clock.now(); };
    o.prepared_statements = !unnamed_statements;
    o.app_name = app;
    o.instance_id = instance;
    o.min_schema = min_schema;
    o.max_schema = max_schema;
    o.daemon_lease = 60s;
    return o;
  }
  // Three steps of a rolling change: create, expand (new column), contract (drop the old one).
  void write_three() const {
    write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY, old_name text);\n");
    write("0002_add_name.sql", "-- forgeyard: phase=expand\nALTER TABLE " + table + " ADD COLUMN name text;\n");
    write("0003_drop_old.sql", "-- forgeyard: phase=contract\nALTER TABLE " + table + " DROP COLUMN old_name;\n");
  }
  bool table_has_column(const std::string& column) const {
    return exec_sql_error("SELECT " + column + " FROM " + table).empty();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(app_migrations, Fixture)

BOOST_AUTO_TEST_CASE(applies_in_order_records_each_and_finds_nothing_left) {
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
  write("0002_add_email.sql", "ALTER TABLE " + table + " ADD COLUMN email text;\n");
  auto& m = store->migrations();
  const auto before = m.status(dir, app);
  BOOST_TEST(before.pending == 2);
  BOOST_TEST(before.applied == 0);
  const auto result = m.apply(dir, opts());
  BOOST_REQUIRE(result.applied.size() == 2u);
  BOOST_TEST(result.applied[0].name == "0001_create.sql");
  BOOST_TEST(result.applied[1].id == 2);
  BOOST_TEST(result.applied[1].app_version == "1.2.3");
  BOOST_TEST(!result.applied[1].applied_by.empty());
  BOOST_TEST(result.applied_through == 2);
  BOOST_TEST(table_has_column("email"));
  const auto after = m.status(dir, app);
  BOOST_TEST(after.applied == 2);
  BOOST_TEST(after.pending == 0);
  BOOST_TEST(after.applied_through == 2);
  BOOST_REQUIRE(after.migrations.size() == 2u);
  BOOST_TEST(after.migrations[0].recorded_sha256 == after.migrations[0].file_sha256);
  BOOST_TEST(after.migrations[0].recorded_sha256.size() == 64u);
  BOOST_REQUIRE(after.migrations[0].record.has_value());
  BOOST_TEST(after.migrations[0].record->app_version == "1.2.3");
  BOOST_TEST(m.apply(dir, opts()).applied.empty());
  // Another application's history is its own.
  auto other = opts();
  other.app = unique("other");
  BOOST_TEST(m.status(dir, other.app).pending == 2);
}

BOOST_AUTO_TEST_CASE(a_changed_applied_file_is_refused_naming_both_checksums) {
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
  auto& m = store->migrations();
  m.apply(dir, opts());
  const std::string recorded = m.status(dir, app).migrations[0].recorded_sha256;
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY, extra text);\n");
  write("0002_next.sql", "ALTER TABLE " + table + " ADD COLUMN email text;\n");
  const auto s = m.status(dir, app);
  BOOST_TEST(s.changed == 1);
  BOOST_TEST((s.migrations[0].state == MigrationState::Changed));
  BOOST_TEST(s.migrations[0].detail.find(recorded) != std::string::npos);
  BOOST_TEST(s.migrations[0].detail.find(s.migrations[0].file_sha256) != std::string::npos);
  BOOST_TEST(!m.plan(dir, opts()).refused.empty());
  BOOST_TEST(m.plan(dir, opts()).will_run == 0);
  const auto e = conformance::expect_error([&] { m.apply(dir, opts()); });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "InvalidArgument");
  BOOST_TEST(e.sqlstate() == "22023");
  BOOST_TEST(e.detail().find("0001_create.sql") != std::string::npos);
  BOOST_TEST(e.detail().find(recorded) != std::string::npos);
  BOOST_TEST(!table_has_column("email"));  // 0002 did not run either
  // A daemon that checks its directory at start-up refuses too.
  auto o = daemon_options("d1", 0, 0);
  o.app_migrations_dir = dir;
  FY_CHECK_ERROR(forgeyard::open(url, o), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(a_missing_or_renumbered_applied_file_is_refused) {
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
  write("0002_add_email.sql", "ALTER TABLE " + table + " ADD COLUMN email text;\n");
  auto& m = store->migrations();
  m.apply(dir, opts());
  std::filesystem::rename(dir + "/0002_add_email.sql", dir + "/0003_add_email.sql");
  auto s = m.status(dir, app);
  BOOST_TEST(s.changed == 2);  // 0002 missing, 0003 is 0002 renumbered
  BOOST_TEST((s.migrations[1].state == MigrationState::Missing));
  BOOST_TEST((s.migrations[2].state == MigrationState::Changed));
  BOOST_TEST(s.migrations[2].detail.find("renumbered") != std::string::npos);
  FY_CHECK_ERROR(m.apply(dir, opts()), ErrorKind::InvalidArgument, "22023");
  std::filesystem::remove(dir + "/0003_add_email.sql");
  s = m.status(dir, app);
  BOOST_TEST((s.migrations[1].state == MigrationState::Missing));
  BOOST_TEST(s.migrations[1].detail.find("0002_add_email.sql") != std::string::npos);
  FY_CHECK_ERROR(m.apply(dir, opts()), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(a_failing_migration_leaves_no_trace_and_earlier_ones_stay) {
  const std::string other = unique_identifier("app_x");
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
  write("0002_broken.sql", "CREATE TABLE " + other + " (id integer);\nINSERT INTO " + table +
                               " (id) VALUES (1);\nINSERT INTO " + table + " (id) VALUES (1);\n");
  auto& m = store->migrations();
  const auto e = conformance::expect_error([&] { m.apply(dir, opts()); });
  BOOST_TEST(!e.sqlstate().empty());
  const auto s = m.status(dir, app);
  BOOST_TEST(s.applied == 1);
  BOOST_TEST(s.pending == 1);
  BOOST_TEST((s.migrations[1].state == MigrationState::Pending));
  BOOST_TEST(table_has_column("id"));
  BOOST_TEST(!exec_sql_error("SELECT id FROM " + other).empty());  // its table is gone with it
  BOOST_TEST(exec_sql_error("SELECT 1 FROM " + table + " WHERE id = 1").empty());
  // Fixed file (never applied, so it may change): applies.
  write("0002_broken.sql", "CREATE TABLE " + other + " (id integer);\n");
  BOOST_TEST(m.apply(dir, opts()).applied.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_no_transaction_file_runs_outside_a_transaction) {
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY, email text);\n");
  // Each statement here refuses to run inside a transaction block.
  write("0002_index.sql", is_postgres() ? "-- forgeyard: no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS " +
                                              table + "_email ON " + table + " (email);\n"
                                        : "-- forgeyard: no-transaction\nCREATE INDEX IF NOT EXISTS " + table +
                                              "_email ON " + table + " (email);\nVACUUM;\n");
  auto& m = store->migrations();
  const auto r = m.apply(dir, opts());
  BOOST_REQUIRE(r.applied.size() == 2u);
  BOOST_TEST(!r.applied[1].transactional);
  const auto s = m.status(dir, app);
  BOOST_TEST(!s.migrations[1].transactional);
  BOOST_TEST((s.migrations[1].state == MigrationState::Applied));
  // The same statement in a transactional file fails: the directive is what made it work.
  const std::string table2 = unique_identifier("app_t2");
  write("0003_create2.sql", "CREATE TABLE " + table2 + " (id integer);\n");
  write("0004_index2.sql", is_postgres() ? "CREATE INDEX CONCURRENTLY " + table2 + "_i ON " + table2 + " (id);\n"
                                         : "CREATE INDEX " + table2 + "_i ON " + table2 + " (id);\nVACUUM;\n");
  BOOST_CHECK_THROW(m.apply(dir, opts()), forgeyard::Error);
  BOOST_TEST(m.status(dir, app).applied == 3);
}

BOOST_AUTO_TEST_CASE(concurrent_runners_apply_each_migration_once) {
  for (int i = 1; i <= 6; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%04d_step.sql", i);
    write(name, i == 1 ? "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n"
                       : "INSERT INTO " + table + " (id) VALUES (" + std::to_string(i) + ");\n");
  }
  std::vector<std::unique_ptr<forgeyard::Store>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(open_another(2));
  std::vector<forgeyard::MigrationResult> results(stores.size());
  std::vector<std::string> errors(stores.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < stores.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        results[i] = stores[i]->migrations().apply(dir, opts());
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::multiset<int> applied;
  for (std::size_t i = 0; i < stores.size(); ++i) {
    BOOST_TEST(errors[i] == "");
    for (const auto& a : results[i].applied) applied.insert(a.id);
  }
  BOOST_TEST(applied.size() == 6u);
  BOOST_TEST(std::set<int>(applied.begin(), applied.end()).size() == 6u);  // none twice
  BOOST_TEST(store->migrations().status(dir, app).applied == 6);
}

BOOST_AUTO_TEST_CASE(a_second_runner_waits_bounded_then_names_the_holder) {
  // A slow migration keeps the runner lock while the test looks. On PostgreSQL the lock is taken
  // per migration, so between two files another runner may take it: there the slow work is in
  // the one file (a second file let the refused runner in between them now and then).
  if (is_postgres()) {
    write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\nSELECT pg_catalog.pg_sleep(3);\n");
  } else {
    write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
    write(
        "0002_slow.sql",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT count(*) FROM c;\n");
  }
  auto first = open_another(2);
  std::string first_error;
  std::thread runner([&] {
    try {
      first->migrations().apply(dir, opts());
    } catch (const std::exception& e) {
      first_error = e.what();
    }
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join_at_exit{runner};
  std::string holder;
  for (int i = 0; i < 400 && holder.empty(); ++i) {
    holder = store->migrations().status(dir, app).lock_holder;
    if (holder.empty()) std::this_thread::sleep_for(10ms);
  }
  // SQLite: status() does not yet report the holder of the store's file lock (see the report in
  // docs/operations.md); the refused runner below names it on both backends.
  if (is_postgres()) BOOST_TEST(holder.find("pid") != std::string::npos);
  auto quick = opts();
  quick.lock_wait = 100ms;
  const auto e = conformance::expect_error([&] { store->migrations().apply(dir, quick); });
  runner.join();
  BOOST_TEST(first_error == "");
  BOOST_TEST(forgeyard::to_string(e.kind()) == "Unavailable");
  BOOST_TEST(e.sqlstate() == "55P03");
  BOOST_TEST(std::string(e.what()).find("pid") != std::string::npos);
  // Once the first is done, the second finds nothing left to do.
  BOOST_TEST(store->migrations().apply(dir, opts()).applied.empty());
  BOOST_TEST(store->migrations().status(dir, app).lock_holder == "");
}

BOOST_AUTO_TEST_CASE(a_contract_waits_for_allow_contract_and_for_live_older_daemons) {
  write_three();
  auto& m = store->migrations();
  const auto first = m.apply(dir, opts());
  BOOST_TEST(first.applied.size() == 2u);
  BOOST_REQUIRE(first.held_back.size() == 1u);
  BOOST_TEST(first.held_back[0].reason.find("--allow-contract") != std::string::npos);
  // An N-1 daemon (understands up to 0002) starts and keeps working after the expand.
  auto old_daemon = forgeyard::open(url, daemon_options("old-1", 1, 2));
  BOOST_TEST((old_daemon->health().status == HealthStatus::Healthy));
  auto new_daemon = forgeyard::open(url, daemon_options("new-1", 2, 3));
  BOOST_TEST(new_daemon->ready());
  auto plan = m.plan(dir, opts(true));
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST(!plan.steps[0].will_run);
  BOOST_TEST(plan.steps[0].reason.find("old-1") != std::string::npos);
  BOOST_TEST(plan.steps[0].reason.find("new-1") == std::string::npos);
  auto held = m.apply(dir, opts(true));
  BOOST_TEST(held.applied.empty());
  BOOST_TEST(held.held_back.size() == 1u);
  BOOST_TEST(table_has_column("old_name"));
  // Its heartbeat (each health check) keeps it live past the first lease ...
  clock.advance(40s);
  BOOST_TEST((old_daemon->health().status == HealthStatus::Healthy));
  BOOST_TEST(new_daemon->ready());
  clock.advance(40s);
  BOOST_TEST(!m.plan(dir, opts(true)).steps[0].will_run);
  // ... and once it stops beating, its lease runs out and the contract is released.
  clock.advance(61s);
  BOOST_TEST(new_daemon->ready());  // the new one still beats
  const auto status = m.status(dir, app);
  const auto old_reg =
      std::find_if(status.daemons.begin(), status.daemons.end(), [](const auto& d) { return d.instance == "old-1"; });
  BOOST_REQUIRE(old_reg != status.daemons.end());
  BOOST_TEST(!old_reg->live);
  BOOST_TEST(m.plan(dir, opts(true)).steps[0].will_run);
  const auto done = m.apply(dir, opts(true));
  BOOST_REQUIRE(done.applied.size() == 1u);
  BOOST_TEST((done.applied[0].phase == forgeyard::MigrationPhase::Contract));
  BOOST_TEST(!table_has_column("old_name"));
  // Now a daemon that predates the contract refuses to start; one that knows it starts.
  const auto e = conformance::expect_error([&] { forgeyard::open(url, daemon_options("old-2", 1, 2)); });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "InvalidArgument");
  BOOST_TEST(e.detail().find("0003_drop_old.sql") != std::string::npos);
  BOOST_TEST(forgeyard::open(url, daemon_options("new-2", 3, 3))->ready());
}

BOOST_AUTO_TEST_CASE(migration_required_at_open_until_the_schema_catches_up) {
  write_three();
  auto daemon = forgeyard::open(url, daemon_options("needs-2", 2, 0));
  auto h = daemon->health();
  BOOST_TEST((h.status == HealthStatus::MigrationRequired));
  BOOST_TEST(!daemon->ready());
  BOOST_TEST(h.schema.applied_through == 0);
  BOOST_TEST(h.schema.min_schema == 2);
  BOOST_TEST(!h.details.empty());
  BOOST_TEST(!h.schema.store_version.empty());
  store->migrations().apply(dir, opts());
  h = daemon->health();
  BOOST_TEST((h.status == HealthStatus::Healthy));
  BOOST_TEST(h.schema.applied_through == 2);
  BOOST_TEST(daemon->ready());
  // Registered while open, gone after a clean close.
  auto listed = [&] {
    const auto s = store->migrations().status(dir, app);
    return std::any_of(s.daemons.begin(), s.daemons.end(), [](const auto& d) { return d.instance == "needs-2"; });
  };
  BOOST_TEST(listed());
  daemon.reset();
  BOOST_TEST(!listed());
}

BOOST_AUTO_TEST_CASE(a_store_without_an_application_is_healthy) {
  const auto h = store->health();
  BOOST_TEST((h.status == HealthStatus::Healthy));
  BOOST_TEST(h.schema.app == "");
  BOOST_TEST(h.latency.count() >= 0);
  BOOST_TEST(store->ready());
}

BOOST_AUTO_TEST_CASE(a_backfill_resumes_where_a_killed_process_stopped) {
  const std::string log = dir + "/processed.log";
  // Chunks of 10 ids up to 100; the cursor is the next id. Appending an id twice is harmless.
  auto chunk_from = [log](const std::optional<std::string>& cursor, int kill_at) {
    const int from = cursor ? std::stoi(*cursor) : 0;
    std::ofstream out(log, std::ios::app);
    for (int id = from; id < from + 10; ++id) out << id << "\n";
    out.close();
    if (from == kill_at) raise(SIGKILL);  // after the chunk's work, before its progress is saved
    forgeyard::BackfillChunk c;
    c.next_cursor = std::to_string(from + 10);
    c.rows = 10;
    c.done = from + 10 >= 100;
    return c;
  };
  const pid_t child = fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    // The child never returns nor runs destructors: it shares the parent's sockets.
    try {
      auto own = open_another(1);
      own->migrations().run_backfill(app, 2, "fill_name", [&](const auto& c) { return chunk_from(c, 30); });
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  BOOST_REQUIRE(waitpid(child, &status, 0) == child);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGKILL);
  auto s = store->migrations().status(dir, app);
  BOOST_REQUIRE(s.backfills.size() == 1u);
  BOOST_TEST(s.backfills[0].rows_done == 30);
  BOOST_TEST(s.backfills[0].cursor.value_or("") == "30");
  BOOST_TEST(!s.backfills[0].done);
  std::optional<std::string> first_cursor;
  bool first = true;
  const auto p = store->migrations().run_backfill(app, 2, "fill_name", [&](const auto& c) {
    if (first) first_cursor = c;
    first = false;
    return chunk_from(c, -1);
  });
  BOOST_TEST(first_cursor.value_or("") == "30");
  BOOST_TEST(p.done);
  BOOST_TEST(p.rows_done == 100);
  std::set<int> ids;
  std::ifstream in(log);
  for (int id; in >> id;) ids.insert(id);
  BOOST_TEST(ids.size() == 100u);
  s = store->migrations().status(dir, app);
  BOOST_TEST(s.backfills[0].done);
  BOOST_TEST(s.backfills[0].rows_done == 100);
  // Done is done: running it again calls no chunk.
  bool called = false;
  store->migrations().run_backfill(app, 2, "fill_name", [&](const auto&) {
    called = true;
    return forgeyard::BackfillChunk{};
  });
  BOOST_TEST(!called);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_and_changes_nothing) {
  auto& m = store->migrations();
  FY_CHECK_ERROR(m.status(dir, ""), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(m.status(dir, std::string(201, 'a')), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(m.status(dir + "/nope", app), ErrorKind::NotFound, "58P01");
  write("1_short.sql", "SELECT 1;\n");
  FY_CHECK_ERROR(m.plan(dir, opts()), ErrorKind::InvalidArgument, "22023");
  std::filesystem::remove(dir + "/1_short.sql");
  write("0001_create.sql", "-- forgeyard: phase=sideways\nCREATE TABLE " + table + " (id integer);\n");
  FY_CHECK_ERROR(m.apply(dir, opts()), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST(!table_has_column("id"));
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer);\n");
  write("0001_again.sql", "SELECT 1;\n");
  FY_CHECK_ERROR(m.apply(dir, opts()), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST(!table_has_column("id"));
  FY_CHECK_ERROR(m.run_backfill(app, 0, "x", [](const auto&) { return forgeyard::BackfillChunk{}; }),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(forgeyard::open(url, daemon_options("bad", 3, 2)), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(records_are_never_rewritten) {
  write("0001_create.sql", "CREATE TABLE " + table + " (id integer);\n");
  store->migrations().apply(dir, opts());
  const std::string t = is_postgres() ? "forgeyard.app_migrations" : "app_migrations";
  BOOST_TEST(exec_sql_error("UPDATE " + t + " SET name = 'x' WHERE application = '" + app + "'").find("FY030") !=
             std::string::npos);
  BOOST_TEST(exec_sql_error("DELETE FROM " + t + " WHERE application = '" + app + "'").find("FY030") !=
             std::string::npos);
  BOOST_TEST(store->migrations().status(dir, app).applied == 1);
}

// storage doctor with the application's directory (DoctorOptions, StoreOptions::app_migrations_dir
// or --dir/--app): a pending migration and a changed file each fail REQUIRED, exit 1.
BOOST_AUTO_TEST_CASE(the_doctor_fails_required_on_a_pending_migration_and_a_changed_file) {
  auto app_check = [](const forgeyard::DoctorReport& r, const std::string& name) {
    for (const forgeyard::DoctorCheck& c : r.checks)
      if (c.name == name) return c;
    BOOST_FAIL("the doctor has no check " + name);
    return forgeyard::DoctorCheck{};
  };
  const forgeyard::DoctorOptions mine{dir, app};
  const std::string out_path = dir + ".doctor.out";  // beside the directory: only migrations in it
  auto doctor_cli = [&](std::string& out) {
    const int code = run_cli({"storage", "doctor", "--dir", dir, "--app", app}, out_path);
    std::ifstream in(out_path);
    std::stringstream text;
    text << in.rdbuf();
    out = text.str();
    return code;
  };
  std::string out;
  // Without a directory the application's checks are not made.
  for (const auto& c : store->doctor().checks) BOOST_TEST(c.name != "app_migrations");

  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY);\n");
  store->migrations().apply(dir, opts());
  write("0002_add_email.sql", "ALTER TABLE " + table + " ADD COLUMN email text;\n");
  auto report = store->doctor(mine);
  auto c = app_check(report, "app_migrations");
  BOOST_TEST((c.group == forgeyard::CheckGroup::Required));
  BOOST_TEST((c.status == forgeyard::CheckStatus::Fail));
  BOOST_TEST(c.detail == "application " + app + ": 1 migration(s) pending");
  BOOST_TEST(c.fix == "forgeyard storage migrate apply --dir <dir> --app " + app);
  BOOST_TEST(!report.passed());
  BOOST_TEST((app_check(report, "app_migration_lock").status == forgeyard::CheckStatus::Ok));
  BOOST_TEST(doctor_cli(out) == 1);
  BOOST_TEST(out.find("app_migrations.status=fail\n") != std::string::npos);
  BOOST_TEST(out.find("\npassed=false\n") != std::string::npos);

  store->migrations().apply(dir, opts());
  report = store->doctor(mine);
  BOOST_TEST((app_check(report, "app_migrations").status == forgeyard::CheckStatus::Ok));
  BOOST_TEST(report.passed());
  BOOST_TEST(doctor_cli(out) == 0);
  BOOST_TEST(out.find("app_migrations.status=ok\n") != std::string::npos);

  // A daemon's own directory and name are the defaults.
  auto o = daemon_options("doctor-d1", 0, 0);
  o.app_migrations_dir = dir;
  const auto daemon = forgeyard::open(url, o);
  BOOST_TEST((app_check(daemon->doctor(), "app_migrations").status == forgeyard::CheckStatus::Ok));

  write("0001_create.sql", "CREATE TABLE " + table + " (id integer PRIMARY KEY, extra text);\n");
  report = daemon->doctor();
  c = app_check(report, "app_migrations");
  BOOST_TEST((c.status == forgeyard::CheckStatus::Fail));
  BOOST_TEST(c.detail.find("1 applied migration(s) changed or missing: 0001_create.sql") != std::string::npos);
  BOOST_TEST(!report.passed());
  BOOST_TEST(doctor_cli(out) == 1);
  BOOST_TEST(out.find("app_migrations.status=fail\n") != std::string::npos);

  // storage status shows the application's migration state and the health.
  BOOST_TEST(run_cli({"storage", "status", "--dir", dir, "--app", app}, out_path) == 0);
  std::ifstream in(out_path);
  std::stringstream text;
  text << in.rdbuf();
  BOOST_TEST(text.str().find("\nhealth=healthy\n") != std::string::npos);
  BOOST_TEST(
      text.str().find("\napp=" + app + "\napp_applied_through=2\napp_applied=1\napp_pending=0\napp_changed=1\n") !=
      std::string::npos);
  BOOST_TEST(text.str().find("app_migration=0001_create.sql state=changed\n") != std::string::npos);
  std::filesystem::remove(out_path);
}

BOOST_AUTO_TEST_SUITE_END()
