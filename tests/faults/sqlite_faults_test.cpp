// SQLite under faults: writer processes SIGKILLed mid-transaction while the workloads run, then
// the history checked; a full disk, a read-only file, a truncated and a corrupted file and a held
// lock, each surfacing as a documented error kind with the store consistent afterwards.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "harness.hpp"
#include "workload.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace faults {

namespace {

std::atomic<bool> worker_stop{false};
void on_term(int) {
  worker_stop = true;
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

std::string kind_of_current_exception() {
  try {
    throw;
  } catch (const forgeyard::Error& e) {
    return std::string(forgeyard::to_string(e.kind())) + " " + e.sqlstate();
  } catch (const std::exception& e) {
    return std::string("exception ") + e.what();
  }
}

}  // namespace

// fault_tests --fault-worker URL RUN HISTORY PROCESS: runs every workload (threads) on the store
// at URL (either backend) until SIGTERM, streaming its history to the file HISTORY.
int worker_main(int argc, char* argv[]) {
  if (argc != 6) return 2;
  signal(SIGTERM, on_term);
  const std::string url = argv[2];
  Names names(argv[3]);
  const int process = std::atoi(argv[5]);
  history::Recorder rec(process, argv[4]);
  Workload w(names, rec, process);
  w.set_pause_in_transaction(30);  // widen the window in which a SIGKILL lands mid-transaction
  auto store = forgeyard::open(url);
  std::thread threads[] = {
      std::thread([&] { w.producer(*store, worker_stop); }),
      std::thread([&] { w.consumer(*store, worker_stop); }),
      std::thread([&] { w.lease_worker(*store, worker_stop); }),
      std::thread([&] { w.cas_worker(*store, worker_stop, 0, names.cas_rows); }),
      std::thread([&] { w.pair_worker(*store, worker_stop); }),
      std::thread([&] { w.idempotent_worker(*store, worker_stop); }),
      std::thread([&] { w.audit_worker(*store, worker_stop); }),
      std::thread([&] { w.workflow_worker(*store, worker_stop); }),
  };
  for (auto& t : threads) t.join();
  return 0;
}

// fault_tests --fault-child MODE URL [TENANT]: one fault in a process of its own; prints
// "<ok operations> <error kind> <sqlstate>" (or "<n> none").
int child_main(int argc, char* argv[]) {
  if (argc < 4) return 2;
  const std::string mode = argv[2], url = argv[3];
  const std::string tenant = argc > 4 ? argv[4] : "t";
  int done = 0;
  try {
    if (mode == "full-disk") {
      // The file system refuses to grow the database beyond a limit, as a full disk does.
      signal(SIGXFSZ, SIG_IGN);
      const auto size = fs::file_size(url.substr(9));
      rlimit limit{static_cast<rlim_t>(size + 256 * 1024), static_cast<rlim_t>(size + 256 * 1024)};
      setrlimit(RLIMIT_FSIZE, &limit);
      auto store = forgeyard::open(url);
      forgeyard::OutgoingMessage m;
      m.payload = std::string(16 * 1024, 'x');
      for (; done < 100000; ++done) store->queues().enqueue(tenant, "q", m);
    } else if (mode == "read-only") {
      if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) return 3;  // root writes anything
      auto store = forgeyard::open(url);
      forgeyard::OutgoingMessage m;
      m.payload = "never";
      store->queues().enqueue(tenant, "q", m);
      done = 1;
    }
    std::printf("%d none\n", done);
  } catch (...) {
    std::printf("%d %s\n", done, kind_of_current_exception().c_str());
  }
  return 0;
}

namespace {

struct SqliteRun {
  std::string dir = temp_dir("faults-sqlite");
  std::string path = dir + "/store.db";
  std::string url = "sqlite://" + path;
  ~SqliteRun() { fs::remove_all(dir); }
};

std::string sqlite_run_id() {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(getpid()) + "_" + std::to_string(rng() % 1000000);
}

// The store's own consistency: `storage verify --full` finds nothing, and as the public API sees
// it, every audit chain verifies and the queue counters match what a claim finds.
void check_consistent(forgeyard::Store& store, const std::string& url, const std::string& tenant,
                      std::int64_t expected_ready) {
  expect_verified(url, "after the fault");
  auto v = store.audit().verify(tenant);
  BOOST_TEST(v.ok);
  const auto s = store.queues().stats(tenant, "q");
  BOOST_TEST(s.ready == expected_ready);
  BOOST_TEST(s.in_flight == 0);
  std::int64_t found = 0;
  while (true) {
    auto batch = store.queues().claim(tenant, "q", "checker", 1000, 600s);
    if (batch.empty()) break;
    found += static_cast<std::int64_t>(batch.size());
  }
  BOOST_TEST(found == expected_ready);
}

// A store with queue "q" holding `messages` small messages and an audit chain of 20 events.
void fill(const std::string& url, const std::string& tenant, int messages) {
  auto store = forgeyard::open(url);
  store->queues().create(tenant, "q", {});
  forgeyard::OutgoingMessage m;
  m.payload = "payload";
  auto tx = store->begin();
  for (int i = 0; i < messages; ++i) tx->queues().enqueue(tenant, "q", m);
  for (int i = 0; i < 20; ++i) tx->audit().append(tenant, {"actor", "fault.fill", "r" + std::to_string(i)});
  tx->commit();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sqlite_faults)

BOOST_AUTO_TEST_CASE(workloads_with_writer_processes_killed_mid_transaction) {
  SqliteRun run;
  const std::string id = sqlite_run_id();
  Names names(id);
  history::Recorder rec(0);
  {
    auto store = forgeyard::open(run.url);
    set_up(*store, names, true, [&](const std::string& sql) { sqlite_exec(run.path, sql); });
  }
  struct Child {
    pid_t pid;
    std::string history;
  };
  std::vector<Child> children, done;
  int next_process = 1;
  auto spawn = [&] {
    const int p = next_process++;
    Child c{0, run.dir + "/history-" + std::to_string(p)};
    c.pid = spawn_self({"--fault-worker", run.url, id, c.history, std::to_string(p)});
    children.push_back(c);
  };
  for (int i = 0; i < 3; ++i) spawn();
  std::mt19937 rng{std::random_device{}()};
  std::int64_t kills = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(run_seconds());
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600 + rng() % 900));
    const std::size_t victim = rng() % children.size();
    kill(children[victim].pid, SIGKILL);
    waitpid(children[victim].pid, nullptr, 0);
    ++kills;
    done.push_back(children[victim]);
    children.erase(children.begin() + static_cast<long>(victim));
    spawn();
  }
  Figures f;
  f.backend = "sqlite";
  for (auto& c : children) {
    kill(c.pid, SIGTERM);
    int status = 0;
    waitpid(c.pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    done.push_back(c);
  }
  std::int64_t in_flight_at_kill = 0;
  for (const auto& c : done) {
    auto ops = history::Recorder::load(c.history, std::stoi(c.history.substr(c.history.rfind('-') + 1)));
    for (const auto& o : ops)
      if (o.error == "killed") ++in_flight_at_kill;
    for (const auto& o : ops)
      if (!o.error.empty() && o.error != "killed") ++f.errors[o.error];
    rec.merge(ops);
  }
  f.faults["sigkill_writer_process"] = kills;
  f.faults["op_in_flight_at_kill"] = in_flight_at_kill;
  auto store = forgeyard::open(run.url);
  Workload reader(names, rec, 0);
  read_back(*store, names, reader, rec);
  const auto ops = rec.ops();
  f.operations = static_cast<std::int64_t>(ops.size());
  f.reports = history::check_all(ops);
  BOOST_TEST_MESSAGE(f.format());
  std::printf("%s", f.format().c_str());
  BOOST_TEST(kills > 0);
  BOOST_TEST(in_flight_at_kill > 0);
  BOOST_TEST(f.violations() == 0);
  for (const auto& [kind, n] : f.errors) {
    BOOST_TEST(kind.rfind("Internal", 0) != 0, "an operation ended in " << kind);
    BOOST_TEST(kind.rfind("exception", 0) != 0, "an operation ended in " << kind);
  }
  // Every committed message was worked off; the queue is empty and its counters agree.
  const auto s = store->queues().stats(names.tenant, names.work_queue);
  BOOST_TEST(s.ready + s.in_flight + s.delayed + s.dead == 0);
  for (const auto& r : f.reports) BOOST_TEST(r.ops > 0, r.check << " saw no operations");
  expect_verified(run.url, "after the kills");
}

BOOST_AUTO_TEST_CASE(a_full_disk_is_unavailable_and_keeps_what_committed) {
  SqliteRun run;
  fill(run.url, "t", 10);
  std::string out;
  BOOST_TEST_REQUIRE(run_self({"--fault-child", "full-disk", run.url, "t"}, out) == 0);
  BOOST_TEST_MESSAGE("full disk: " << out);
  int ok = -1;
  char kind[64] = {0}, state[16] = {0};
  std::sscanf(out.c_str(), "%d %63s %15s", &ok, kind, state);
  BOOST_TEST(std::string(kind) == "Unavailable");
  BOOST_TEST(std::string(state) == "58030");
  BOOST_TEST(ok > 0);
  auto store = forgeyard::open(run.url);
  check_consistent(*store, run.url, "t", 10 + ok);
  // Space again: writes go on.
  forgeyard::OutgoingMessage m;
  m.payload = "after";
  BOOST_TEST(store->queues().enqueue("t", "q", m) > 0);
}

BOOST_AUTO_TEST_CASE(a_read_only_file_refuses_writes_and_changes_nothing) {
  SqliteRun run;
  fill(run.url, "t", 3);
  fs::permissions(run.dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  for (const auto& e : fs::directory_iterator(run.dir))
    fs::permissions(e.path(), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  std::string out;
  const int rc = run_self({"--fault-child", "read-only", run.url, "t"}, out);
  for (const auto& e : fs::directory_iterator(run.dir))
    fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write);
  BOOST_TEST_REQUIRE(rc == 0);
  BOOST_TEST_MESSAGE("read-only: " << out);
  int ok = -1;
  char kind[64] = {0};
  std::sscanf(out.c_str(), "%d %63s", &ok, kind);
  BOOST_TEST(ok == 0);
  BOOST_TEST((std::string(kind) == "PermissionDenied" || std::string(kind) == "Unavailable"), "kind " << kind);
  auto store = forgeyard::open(run.url);
  check_consistent(*store, run.url, "t", 3);
}

namespace {
// What the first operations on a damaged copy of a store end with.
std::string open_and_read(const std::string& url, const std::string& tenant) {
  try {
    auto store = forgeyard::open(url);
    store->audit().verify(tenant);
    store->queues().stats(tenant, "q");
    store->queues().claim(tenant, "q", "c", 1000);
    return "none";
  } catch (...) {
    return kind_of_current_exception();
  }
}

// A checkpointed copy of a store with enough data to span many pages.
std::string damaged_copy(SqliteRun& run, const std::string& name) {
  fill(run.url, "t", 2000);
  sqlite_exec(run.path, "PRAGMA wal_checkpoint(TRUNCATE)");  // everything in the file itself
  const std::string copy = run.dir + "/" + name + ".db";
  fs::copy_file(run.path, copy);
  return copy;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_truncated_file_is_corruption) {
  SqliteRun run;
  const std::string copy = damaged_copy(run, "truncated");
  fs::resize_file(copy, fs::file_size(copy) / 2);
  const std::string kind = open_and_read("sqlite://" + copy, "t");
  BOOST_TEST_MESSAGE("truncated: " << kind);
  BOOST_TEST(kind.rfind("Corruption", 0) == 0, "kind " << kind);
  // The original is untouched and consistent.
  auto store = forgeyard::open(run.url);
  check_consistent(*store, run.url, "t", 2000);
}

BOOST_AUTO_TEST_CASE(a_corrupted_file_is_corruption) {
  SqliteRun run;
  const std::string copy = damaged_copy(run, "corrupted");
  {
    // Garbage over every page but the first (the schema's root stays readable).
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(copy);
    std::mt19937 rng{42};
    for (std::uintmax_t off = 4096; off < size; off += 4096) {
      f.seekp(static_cast<std::streamoff>(off + 8));
      for (int i = 0; i < 64; ++i) f.put(static_cast<char>(rng()));
    }
  }
  const std::string kind = open_and_read("sqlite://" + copy, "t");
  BOOST_TEST_MESSAGE("corrupted pages: " << kind);
  BOOST_TEST(kind.rfind("Corruption", 0) == 0, "kind " << kind);
  // A header that is not SQLite's: not a database.
  const std::string header = run.dir + "/header.db";
  fs::copy_file(copy, header);
  {
    std::fstream f(header, std::ios::in | std::ios::out | std::ios::binary);
    f.write("this is not sqlite", 16);
  }
  const std::string kind2 = open_and_read("sqlite://" + header, "t");
  BOOST_TEST_MESSAGE("corrupted header: " << kind2);
  BOOST_TEST(kind2.rfind("Corruption", 0) == 0, "kind " << kind2);
  auto store = forgeyard::open(run.url);
  check_consistent(*store, run.url, "t", 2000);
}

BOOST_AUTO_TEST_CASE(a_held_lock_is_a_serialization_failure_and_then_writes_go_on) {
  SqliteRun run;
  fill(run.url, "t", 5);
  forgeyard::StoreOptions options;
  options.sqlite_busy_timeout = 200ms;
  auto store = forgeyard::open(run.url, options);
  sqlite3* holder = nullptr;
  sqlite3_open(run.path.c_str(), &holder);
  BOOST_TEST_REQUIRE(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  forgeyard::OutgoingMessage m;
  m.payload = "blocked";
  std::string kind = "none";
  try {
    store->queues().enqueue("t", "q", m);
  } catch (...) {
    kind = kind_of_current_exception();
  }
  BOOST_TEST_MESSAGE("held lock: " << kind);
  BOOST_TEST(kind == "SerializationFailure 40001");
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  BOOST_TEST(store->queues().enqueue("t", "q", m) > 0);
  check_consistent(*store, run.url, "t", 6);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace faults
