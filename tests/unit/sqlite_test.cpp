// The SQLite shim's own rules: file placement, pragmas, migrations ledger, exclusive lock.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "error_map.hpp"
#include "forgeyard/store.hpp"
#include "sqlite/db.hpp"
#include "sqlite/file_lock.hpp"

namespace fs = std::filesystem;
using forgeyard::Error;
using forgeyard::ErrorKind;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "forgeyard-unit.XXXXXX").string();
    BOOST_REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string pragma(forgeyard::detail::Db& db, const char* sql) {
  auto q = db.query(sql);
  BOOST_REQUIRE(q.step());
  return q.is_null(0) ? "" : std::to_string(q.int64(0));
}

void copy_migrations(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(fs::path(FORGEYARD_SOURCE_DIR) / "migrations" / "sqlite"))
    fs::copy_file(e.path(), to / e.path().filename());
}
}  // namespace

BOOST_AUTO_TEST_SUITE(sqlite_shim)

BOOST_AUTO_TEST_CASE(default_store_lives_under_xdg_data_home_else_home) {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  setenv("XDG_DATA_HOME", "/xdg/data", 1);
  BOOST_TEST(forgeyard::default_sqlite_path() == "/xdg/data/forgeyard/forgeyard.db");
  unsetenv("XDG_DATA_HOME");
  setenv("HOME", "/home/someone", 1);
  BOOST_TEST(forgeyard::default_sqlite_path() == "/home/someone/.local/share/forgeyard/forgeyard.db");
  setenv("XDG_DATA_HOME", "relative/not/allowed", 1);  // the XDG spec ignores relative paths
  BOOST_TEST(forgeyard::default_sqlite_path() == "/home/someone/.local/share/forgeyard/forgeyard.db");
  if (old_xdg)
    setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
  setenv("HOME", saved_home.c_str(), 1);
}

BOOST_AUTO_TEST_CASE(empty_url_opens_the_default_store) {
  TempDir dir;
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  setenv("XDG_DATA_HOME", dir.path.c_str(), 1);
  {
    auto store = forgeyard::open();
    BOOST_TEST(store->status().location == (dir.path / "forgeyard" / "forgeyard.db").string());
  }
  BOOST_TEST(fs::exists(dir.path / "forgeyard" / "forgeyard.db"));
  if (old_xdg)
    setenv("XDG_DATA_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
}

BOOST_AUTO_TEST_CASE(bad_urls_are_refused) {
  BOOST_CHECK_THROW(forgeyard::open("sqlite://relative.db"), Error);
  BOOST_CHECK_THROW(forgeyard::open("mysql://x"), Error);
  try {
    forgeyard::open("redis://x");
  } catch (const Error& e) {
    BOOST_TEST(forgeyard::to_string(e.kind()) == "InvalidArgument");
  }
}

BOOST_AUTO_TEST_CASE(connections_use_wal_full_sync_and_the_configured_level) {
  TempDir dir;
  forgeyard::StoreOptions options;
  forgeyard::detail::Db db((dir.path / "a.db").string(), options);
  auto q = db.query("PRAGMA journal_mode");
  BOOST_REQUIRE(q.step());
  BOOST_TEST(q.text(0) == "wal");
  BOOST_TEST(pragma(db, "PRAGMA synchronous") == "2");  // FULL
  options.sqlite_synchronous = "NORMAL";
  forgeyard::detail::Db normal((dir.path / "a.db").string(), options);
  BOOST_TEST(pragma(normal, "PRAGMA synchronous") == "1");
  options.sqlite_synchronous = "SOMETIMES";
  BOOST_CHECK_THROW(forgeyard::detail::Db((dir.path / "a.db").string(), options), Error);
}

BOOST_AUTO_TEST_CASE(migrations_are_recorded_and_a_changed_file_refuses_to_open) {
  TempDir dir;
  copy_migrations(dir.path / "migrations");
  forgeyard::StoreOptions options;
  options.sqlite_migrations_dir = (dir.path / "migrations").string();
  const std::string url = "sqlite://" + (dir.path / "store.db").string();
  {
    auto store = forgeyard::open(url, options);
    auto s = store->status();
    BOOST_TEST(s.healthy);
    BOOST_TEST(s.migrations_pending == 0);
    std::set<std::string> files;
    for (const auto& e : fs::directory_iterator(dir.path / "migrations")) files.insert(e.path().filename().string());
    BOOST_TEST(s.migrations_applied == static_cast<int>(files.size()));
    BOOST_TEST(s.schema_version == *files.rbegin());  // the last of migrations/sqlite
  }
  { std::ofstream(dir.path / "migrations" / "0001_leases.sql", std::ios::app) << "\n-- edited\n"; }
  try {
    forgeyard::open(url, options);
    BOOST_FAIL("a changed applied migration must refuse to open");
  } catch (const Error& e) {
    BOOST_TEST(forgeyard::to_string(e.kind()) == "Corruption");
    BOOST_TEST(std::string(e.what()).find("0001_leases.sql was changed") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(new_migrations_apply_in_order_and_unknown_applied_ones_refuse) {
  TempDir dir;
  copy_migrations(dir.path / "migrations");
  { std::ofstream(dir.path / "migrations" / "0099_extra.sql") << "CREATE TABLE extra (x INTEGER);\n"; }
  forgeyard::StoreOptions options;
  options.sqlite_migrations_dir = (dir.path / "migrations").string();
  const std::string url = "sqlite://" + (dir.path / "store.db").string();
  BOOST_TEST(forgeyard::open(url, options)->status().schema_version == "0099_extra.sql");
  fs::remove(dir.path / "migrations" / "0099_extra.sql");
  try {
    forgeyard::open(url, options);
    BOOST_FAIL("a store with a migration this client does not know must refuse to open");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("0099_extra.sql") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(exclusive_work_names_the_process_holding_the_lock) {
  TempDir dir;
  const std::string db = (dir.path / "store.db").string();
  int ready[2];
  BOOST_REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  if (child == 0) {
    forgeyard::detail::FileLock lock(db + ".lock", "backup", std::chrono::milliseconds(1000));
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c = 0;
  BOOST_REQUIRE(read(ready[0], &c, 1) == 1);
  forgeyard::StoreOptions options;
  options.sqlite_busy_timeout = std::chrono::milliseconds(200);
  try {
    forgeyard::open("sqlite://" + db, options);
    BOOST_FAIL("the store must not open while another process holds the exclusive lock");
  } catch (const Error& e) {
    BOOST_TEST(forgeyard::to_string(e.kind()) == "Unavailable");
    BOOST_TEST(std::string(e.what()).find("pid " + std::to_string(child)) != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("backup") != std::string::npos);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  // The kernel released the dead holder's lock: the store opens now.
  BOOST_TEST(forgeyard::open("sqlite://" + db, options)->status().healthy);
  close(ready[0]);
  close(ready[1]);
}

BOOST_AUTO_TEST_CASE(versioned_tables_refuse_raw_updates_that_do_not_bump_the_version) {
  TempDir dir;
  const std::string path = (dir.path / "store.db").string();
  auto store = forgeyard::open("sqlite://" + path);
  forgeyard::StoreOptions options;
  forgeyard::detail::Db db(path, options);
  db.exec("CREATE TABLE acct (id INTEGER PRIMARY KEY, balance INTEGER, entity_version INTEGER NOT NULL DEFAULT 1)");
  store->versioned_rows().enable("acct");
  db.exec("INSERT INTO acct (id, balance) VALUES (1, 10)");
  db.exec("UPDATE acct SET balance = 11, entity_version = 2 WHERE id = 1");  // expected 1 -> 2: fine
  auto code_of = [&](const char* sql) {
    try {
      db.exec(sql);
    } catch (const Error& e) {
      return e.sqlstate();
    }
    return std::string("none");
  };
  BOOST_TEST(code_of("UPDATE acct SET balance = 12 WHERE id = 1") == "FY002");                      // not bumped
  BOOST_TEST(code_of("UPDATE acct SET balance = 12, entity_version = 9 WHERE id = 1") == "FY002");  // jumped
  BOOST_TEST(code_of("INSERT INTO acct (id, balance, entity_version) VALUES (2, 1, 5)") == "22023");
  auto q = db.query("SELECT balance, entity_version FROM acct WHERE id = 1");
  BOOST_REQUIRE(q.step());
  BOOST_TEST(q.int64(0) == 11);
  BOOST_TEST(q.int64(1) == 2);
}

BOOST_AUTO_TEST_CASE(sqlite_result_codes_map_to_kinds) {
  using forgeyard::detail::sqlite_error;
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_BUSY, "m").kind()) == "SerializationFailure");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_BUSY_SNAPSHOT, "m").kind()) == "SerializationFailure");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_CORRUPT, "m").kind()) == "Corruption");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_NOTADB, "m").kind()) == "Corruption");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_IOERR_WRITE, "m").kind()) == "Unavailable");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_READONLY, "m").kind()) == "PermissionDenied");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_INTERRUPT, "m").kind()) == "Timeout");
  BOOST_TEST(forgeyard::to_string(sqlite_error(SQLITE_MISMATCH, "m").kind()) == "Internal");
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_database_is_corruption) {
  TempDir dir;
  { std::ofstream(dir.path / "junk.db") << std::string(4096, 'j'); }
  try {
    forgeyard::open("sqlite://" + (dir.path / "junk.db").string());
    BOOST_FAIL("junk must not open");
  } catch (const Error& e) {
    BOOST_TEST(forgeyard::to_string(e.kind()) == "Corruption");
  }
}

// A write waits for SQLite's lock only what its turn left of the busy timeout: a writer outside
// the turns (here a second connection, as the sqlite3 shell would be) holding the lock makes it
// fail with 40001 then, not after a whole busy timeout more. The timeout is the store's again
// afterwards.
BOOST_AUTO_TEST_CASE(begin_immediate_waits_what_the_turn_left) {
  TempDir dir;
  const std::string path = (dir.path / "store.db").string();
  forgeyard::StoreOptions options;
  options.sqlite_busy_timeout = std::chrono::seconds(30);
  forgeyard::detail::Db db(path, options), other(path, options);
  other.exec("BEGIN IMMEDIATE");
  const auto asked = std::chrono::steady_clock::now();
  try {
    db.begin_immediate(std::chrono::milliseconds(50));
    BOOST_TEST(false, "BEGIN IMMEDIATE beside a held write lock succeeded");
  } catch (const Error& e) {
    BOOST_TEST(e.sqlstate() == "40001");
  }
  const bool in_time = std::chrono::steady_clock::now() - asked < std::chrono::seconds(15);
  BOOST_TEST(in_time);  // not after the 30 s timeout
  other.exec("ROLLBACK");
  db.begin_immediate(std::chrono::milliseconds(0));  // a free lock needs no wait
  db.exec("ROLLBACK");
  BOOST_TEST(pragma(db, "PRAGMA busy_timeout") == "30000");  // the store's timeout again
}

BOOST_AUTO_TEST_SUITE_END()
