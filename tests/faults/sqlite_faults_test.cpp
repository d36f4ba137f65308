// SQLite under faults: writer processes SIGKILLed mid-transaction while the workloads run, then
// the history checked; a full disk, a read-only file, a truncated and a corrupted file and a held
// lock, each surfacing as a documented error kind with the store consistent afterwards.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
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

namespace {
// Runs every workload (threads) on the store at `url` until SIGTERM, streaming the history to the
// file `history_path`; prints the errors the workloads met, also those outside the history.
// `loaders` more threads keep the write turn busy: back to back, each holds a transaction open
// for a few milliseconds, now and then for 250 ms (audit appends to a tenant of their own, outside
// the history).
int run_workload_process(const std::string& url, const std::string& run, const std::string& history_path, int process,
                         const forgeyard::StoreOptions& options, int pause_ms, int loaders = 0) {
  signal(SIGTERM, on_term);
  Names names(run);
  history::Recorder rec(process, history_path);
  Workload w(names, rec, process);
  w.set_pause_in_transaction(pause_ms);
  auto store = forgeyard::open(url, options);
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
  std::mutex load_mutex;
  std::map<std::string, std::int64_t> load_errors;
  std::vector<std::thread> load;
  for (int i = 0; i < loaders; ++i)
    load.emplace_back([&, i] {
      std::mt19937 rng{std::random_device{}()};
      while (!worker_stop) try {
          auto tx = store->begin();
          tx->audit().append(names.tenant + "-load", {"loader-" + std::to_string(i), "load.hold", "r"});
          // Now and then longer than the busy timeout of the tests, so that those behind run out of time.
          std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 25 == 0 ? 250 : 2 + rng() % 10));
          tx->commit();
        } catch (const forgeyard::Error& e) {
          std::lock_guard lock(load_mutex);
          ++load_errors[std::string(forgeyard::to_string(e.kind())) + "/" + e.sqlstate()];
        } catch (...) {
          std::lock_guard lock(load_mutex);
          ++load_errors["exception"];
        }
    });
  for (auto& t : threads) t.join();
  for (auto& t : load) t.join();
  auto errors = w.errors();
  for (const auto& [kind, n] : load_errors) errors[kind] += n;
  std::printf("%s\n", format_counts(errors).c_str());
  return 0;
}
// Enqueues `payload` on queue "q" of tenant "t": "none" if it went in, else the error's kind and
// SQLSTATE.
std::string enqueue_outcome(forgeyard::Store& store, const std::string& payload) {
  forgeyard::OutgoingMessage m;
  m.payload = payload;
  try {
    store.queues().enqueue("t", "q", m);
    return "none";
  } catch (...) {
    return kind_of_current_exception();
  }
}

}  // namespace

// fault_tests --fault-worker URL RUN HISTORY PROCESS: runs every workload (threads) on the store
// at URL (either backend) until SIGTERM, streaming its history to the file HISTORY.
int worker_main(int argc, char* argv[]) {
  if (argc != 6) return 2;
  // A long pause widens the window in which a SIGKILL lands mid-transaction.
  return run_workload_process(argv[2], argv[3], argv[4], std::atoi(argv[5]), {}, 30);
}

namespace {

forgeyard::StoreOptions with_busy_timeout(int ms) {
  forgeyard::StoreOptions options;
  options.sqlite_busy_timeout = std::chrono::milliseconds(ms);
  return options;
}

// --fault-child turn-writer URL TIMEOUT_MS START_US END_US THREADS: THREADS threads each loop
// short write transactions (an enqueue on queue "q" of tenant "t" and an audit append) from
// START_US to END_US on history::now_us(), the monotonic clock every process of the machine
// shares. Prints "<committed> <busy> <other> <longest wait that got a turn, us> <longest wait
// that failed busy, us>" and then each other error; busy counts SerializationFailure 40001. The
// wait is that of begin(): the pooled connection, the write turn and BEGIN IMMEDIATE.
int turn_writer_main(const std::string& url, int timeout_ms, std::int64_t start_us, std::int64_t end_us, int threads) {
  forgeyard::StoreOptions options = with_busy_timeout(timeout_ms);
  // The turns are the subject, not the disk: no commit waits for a sync that could stall a turn
  // past the timeout on a loaded machine (WAL with NORMAL still survives a killed process).
  options.sqlite_synchronous = "NORMAL";
  auto store = forgeyard::open(url, options);
  std::mutex mutex;
  std::int64_t committed = 0, busy = 0, longest_served = 0, longest_busy = 0;
  std::vector<std::string> others;
  auto loop = [&] {
    std::int64_t my_committed = 0, my_busy = 0, my_served = 0, my_busy_wait = 0;
    std::vector<std::string> my_others;
    forgeyard::OutgoingMessage m;
    m.payload = "turn";
    while (history::now_us() < start_us) std::this_thread::sleep_for(1ms);
    while (history::now_us() < end_us) {
      const std::int64_t asked = history::now_us();
      bool served = false;
      try {
        auto tx = store->begin();
        served = true;
        my_served = std::max(my_served, history::now_us() - asked);
        tx->queues().enqueue("t", "q", m);
        tx->audit().append("t", {"writer", "turn.write", "r"});
        tx->commit();
        ++my_committed;
      } catch (const forgeyard::Error& e) {
        if (e.kind() == forgeyard::ErrorKind::SerializationFailure && e.sqlstate() == "40001") {
          ++my_busy;
          if (!served) my_busy_wait = std::max(my_busy_wait, history::now_us() - asked);
        } else {
          my_others.push_back(kind_of_current_exception());
        }
      } catch (...) {
        my_others.push_back(kind_of_current_exception());
      }
    }
    std::lock_guard lock(mutex);
    committed += my_committed;
    busy += my_busy;
    longest_served = std::max(longest_served, my_served);
    longest_busy = std::max(longest_busy, my_busy_wait);
    others.insert(others.end(), my_others.begin(), my_others.end());
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(loop);
  for (auto& t : pool) t.join();
  std::printf("%lld %lld %zu %lld %lld\n", static_cast<long long>(committed), static_cast<long long>(busy),
              others.size(), static_cast<long long>(longest_served), static_cast<long long>(longest_busy));
  for (const auto& o : others) std::printf("%s\n", o.c_str());
  return 0;
}

}  // namespace

// fault_tests --fault-child MODE URL [TENANT]: one fault in a process of its own; prints
// "<ok operations> <error kind> <sqlstate>" (or "<n> none"). Modes of the write turns:
//   busy-workload URL RUN HISTORY PROCESS TIMEOUT_MS: --fault-worker's workloads with that busy
//     timeout, and two more threads that keep the write turn busy
//   turn-writer ...: see turn_writer_main
//   hold-turn URL [fork]: holds a write transaction (its turn) and says "holding"; never ends by
//                          itself; with "fork", first forks a child (no exec) that says
//                          "child PID" and only sleeps
//   wait-turn URL: says "waiting", then waits up to a minute for a write turn
int child_main(int argc, char* argv[]) {
  if (argc < 4) return 2;
  const std::string mode = argv[2], url = argv[3];
  if (mode == "busy-workload" && argc == 8)
    return run_workload_process(url, argv[4], argv[5], std::atoi(argv[6]), with_busy_timeout(std::atoi(argv[7])), 30,
                                2);
  if (mode == "turn-writer" && argc == 8)
    return turn_writer_main(url, std::atoi(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]), std::atoi(argv[7]));
  if (mode == "hold-turn" || mode == "wait-turn") {
    auto store = forgeyard::open(url, with_busy_timeout(60000));
    forgeyard::OutgoingMessage m;
    m.payload = mode;
    if (mode == "wait-turn") {
      std::printf("waiting\n");
      std::fflush(stdout);
      store->queues().enqueue("t", "q", m);
      std::printf("served\n");
      return 0;
    }
    if (argc == 5 && std::string(argv[4]) == "fork" && ::fork() == 0) {
      std::printf("child %d\n", static_cast<int>(::getpid()));
      std::fflush(stdout);
      while (true) ::pause();  // outlives the parent, sharing its open files until killed
    }
    auto tx = store->begin();
    tx->queues().enqueue("t", "q", m);
    std::printf("holding\n");
    std::fflush(stdout);
    while (true) ::pause();
  }
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
  const std::string kind = enqueue_outcome(*store, "blocked");
  BOOST_TEST_MESSAGE("held lock: " << kind);
  BOOST_TEST(kind == "SerializationFailure 40001");
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  BOOST_TEST(enqueue_outcome(*store, "blocked") == "none");
  check_consistent(*store, run.url, "t", 6);
}

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits (at most 60 s) until the child writing to `path` has said `word`.
bool child_said(const std::string& path, const std::string& word) {
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) {
    if (read_whole(path).find(word) != std::string::npos) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// What one turn-writer process reported.
struct TurnWriter {
  long long committed = -1, busy = -1, others = -1, longest_served_us = -1, longest_busy_us = -1;
  std::string output;
};

TurnWriter parse_turn_writer(const std::string& output) {
  TurnWriter w;
  w.output = output;
  std::sscanf(output.c_str(), "%lld %lld %lld %lld %lld", &w.committed, &w.busy, &w.others, &w.longest_served_us,
              &w.longest_busy_us);
  return w;
}

// Turn-writer processes, one per entry of `threads` with that many threads, writing for `seconds` together.
std::vector<TurnWriter> run_turn_writers(SqliteRun& run, const std::vector<int>& threads, int timeout_ms, int seconds) {
  const std::int64_t start = history::now_us() + 1'500'000;  // every process open before the start
  const std::int64_t end = start + std::int64_t{seconds} * 1'000'000;
  std::vector<std::pair<pid_t, std::string>> children;
  for (std::size_t p = 0; p < threads.size(); ++p) {
    const std::string out = run.dir + "/writer-" + std::to_string(p) + ".out";
    children.emplace_back(spawn_self({"--fault-child", "turn-writer", run.url, std::to_string(timeout_ms),
                                      std::to_string(start), std::to_string(end), std::to_string(threads[p])},
                                     out),
                          out);
  }
  std::vector<TurnWriter> writers;
  for (const auto& [pid, out] : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "writer process " << pid << " ended badly");
    writers.push_back(parse_turn_writer(read_whole(out)));
  }
  return writers;
}

}  // namespace

// Writer processes with a short busy timeout, running every workload while loader threads keep
// the write turn busy (now and then past the timeout): each call is answered (its result, or a
// refusal the workload provokes on purpose: a stale fence, a version conflict) or fails with 40001
// when its turn did not come in time; never another error, and the history of the run checks out
// (nothing lost, nothing twice).
BOOST_AUTO_TEST_CASE(writer_processes_with_a_short_busy_timeout_are_answered_or_get_40001) {
  SqliteRun run;
  const std::string id = sqlite_run_id();
  Names names(id);
  history::Recorder rec(0);
  {
    auto store = forgeyard::open(run.url);
    set_up(*store, names, true, [&](const std::string& sql) { sqlite_exec(run.path, sql); });
  }
  constexpr int processes = 3;
  struct Child {
    pid_t pid;
    std::string history, out;
  };
  std::vector<Child> children;
  for (int p = 1; p <= processes; ++p) {
    Child c{0, run.dir + "/history-" + std::to_string(p), run.dir + "/worker-" + std::to_string(p) + ".out"};
    c.pid = spawn_self({"--fault-child", "busy-workload", run.url, id, c.history, std::to_string(p), "200"}, c.out);
    children.push_back(c);
  }
  std::this_thread::sleep_for(std::chrono::seconds(std::min(run_seconds(), 10)));
  Figures f;
  f.backend = "sqlite, busy timeout 200 ms";
  std::map<std::string, std::int64_t> worker_errors;  // every error the workers met, also outside the history
  for (auto& c : children) {
    kill(c.pid, SIGTERM);
    int status = 0;
    waitpid(c.pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    std::istringstream counts(read_whole(c.out));
    for (std::string item; counts >> item;) {
      const auto eq = item.find('=');
      if (eq != std::string::npos) worker_errors[item.substr(0, eq)] += std::stoll(item.substr(eq + 1));
    }
    const int process = std::stoi(c.history.substr(c.history.rfind('-') + 1));
    const auto ops = history::Recorder::load(c.history, process);
    std::int64_t ok = 0;
    for (const auto& o : ops) {
      if (o.outcome == history::Outcome::Ok) ++ok;
      if (!o.error.empty()) ++f.errors[o.error];
    }
    BOOST_TEST(ok > 0, "process " << process << " completed no operation");
    rec.merge(ops);
  }
  auto store = forgeyard::open(run.url);
  Workload reader(names, rec, 0);
  read_back(*store, names, reader, rec);
  const auto ops = rec.ops();
  f.operations = static_cast<std::int64_t>(ops.size());
  f.reports = history::check_all(ops);
  std::printf("%s  errors the workers met: %s\n", f.format().c_str(), format_counts(worker_errors).c_str());
  BOOST_TEST(f.violations() == 0);
  BOOST_TEST(f.unknown() == 0);  // no process was killed, so every outcome is known
  for (const auto& r : f.reports) BOOST_TEST(r.ops > 0, r.check << " saw no operations");
  // Busy is "SerializationFailure/40001"; the others the workloads provoke are FYnnn answers.
  auto answered_or_busy = [](const std::string& kind) {
    const auto slash = kind.find('/');
    const std::string state = slash == std::string::npos ? "" : kind.substr(slash + 1);
    return kind == "SerializationFailure/40001" || (state.size() == 5 && state.rfind("FY", 0) == 0);
  };
  for (const auto& [kind, n] : f.errors) BOOST_TEST(answered_or_busy(kind), n << " operations ended in " << kind);
  // The loaders' long holds ran writers out of time: the run did leave the line on timeouts.
  BOOST_TEST(worker_errors["SerializationFailure/40001"] > 0);
  for (const auto& [kind, n] : worker_errors) BOOST_TEST(answered_or_busy(kind), n << " calls ended in " << kind);
  expect_verified(run.url, "after the busy writers");
}

// Four processes loop short write transactions, one with four threads and three with one: the
// busy one's threads would hand SQLite's write lock to each other while the others sleep in the
// busy handler. Each process gets a fair share of the commits (at least half an even share); in a
// fair line of short transactions nearly every writer is served well within its busy timeout (at
// most 3% get 40001), none that got its turn waited past its timeout for it, one that did not got
// 40001 about then, and there was no other error.
BOOST_AUTO_TEST_CASE(writer_processes_share_the_file_fairly_within_their_busy_timeout) {
  SqliteRun run;
  fill(run.url, "t", 0);
  const std::vector<int> threads{4, 1, 1, 1};
  const long long processes = static_cast<long long>(threads.size());
  constexpr int timeout_ms = 200;
  // Scheduling slack over the timeout: a waiter woken at its deadline may wait a moment for a core.
  constexpr long long slack_us = 100'000;
  const auto writers = run_turn_writers(run, threads, timeout_ms, 4);
  long long total = 0, busy = 0;
  for (const auto& w : writers) {
    total += std::max(w.committed, 0LL);
    busy += std::max(w.busy, 0LL);
  }
  for (std::size_t p = 0; p < writers.size(); ++p) {
    const auto& w = writers[p];
    std::printf(
        "writer process %zu: %lld committed, %lld busy, %lld other; longest wait served %lld us, busy %lld us\n", p,
        w.committed, w.busy, w.others, w.longest_served_us, w.longest_busy_us);
    BOOST_TEST(w.others == 0, "writer process " << p << ": " << w.output);
    BOOST_TEST(w.committed * 2 * processes >= total,
               "writer process " << p << " starved: " << w.committed << " of " << total << " commits");
    BOOST_TEST(w.longest_served_us >= 0);
    BOOST_TEST(w.longest_served_us <= timeout_ms * 1000LL + slack_us);
    BOOST_TEST(w.longest_busy_us <= timeout_ms * 1000LL + slack_us);
  }
  std::printf("%lld commits, %lld busy (40001) of %lld transactions\n", total, busy, total + busy);
  BOOST_TEST(total > 0);
  BOOST_TEST(busy * 100 <= 3 * (total + busy), busy << " of " << total + busy << " transactions got no turn in time");
  auto store = forgeyard::open(run.url);
  BOOST_TEST(store->queues().stats("t", "q").ready == total);
  BOOST_TEST(store->audit().verify("t").ok);
}

// A process SIGKILLed while it holds its turn, and another SIGKILLed while it waits in line,
// block the others no longer than their busy timeout: while the holder lives a writer gets 40001
// in about its timeout; once both died the line passes over them and writes go on at once, in
// this process and in others.
BOOST_AUTO_TEST_CASE(a_process_killed_holding_its_turn_blocks_the_others_only_until_their_timeout) {
  SqliteRun run;
  fill(run.url, "t", 0);
  const std::string holder_out = run.dir + "/holder.out", waiter_out = run.dir + "/waiter.out";
  const pid_t holder = spawn_self({"--fault-child", "hold-turn", run.url}, holder_out);
  BOOST_TEST_REQUIRE(child_said(holder_out, "holding"));
  const pid_t waiter = spawn_self({"--fault-child", "wait-turn", run.url}, waiter_out);
  BOOST_TEST_REQUIRE(child_said(waiter_out, "waiting"));
  // Both are in the line of the processes: the holder served, the waiter's ticket next.
  const auto in_line = [&] {
    std::uint64_t next = 0, serving = 0;
    const int fd = ::open((fs::weakly_canonical(run.path).string() + ".turns").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::uint64_t{0};
    // The layout of write_turns.cpp: `next` at byte 64, `serving` at byte 128.
    const bool read = ::pread(fd, &next, sizeof next, 64) == sizeof next &&
                      ::pread(fd, &serving, sizeof serving, 128) == sizeof serving;
    ::close(fd);
    return read ? next - serving : 0;
  };
  for (int i = 0; i < 500 && in_line() != 2; ++i) std::this_thread::sleep_for(10ms);
  BOOST_TEST_REQUIRE(in_line() == 2u);
  auto store = forgeyard::open(run.url, with_busy_timeout(200));
  const auto asked = std::chrono::steady_clock::now();
  const std::string kind = enqueue_outcome(*store, "after");
  const auto waited = std::chrono::steady_clock::now() - asked;
  BOOST_TEST(kind == "SerializationFailure 40001");
  BOOST_TEST(waited >= 200ms);
  BOOST_TEST(waited < 200ms + 300ms, "waited " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                                               << " ms for a turn with a 200 ms timeout");
  kill(waiter, SIGKILL);
  waitpid(waiter, nullptr, 0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  BOOST_TEST(read_whole(waiter_out).find("served") == std::string::npos);
  int written = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string outcome = enqueue_outcome(*store, "after");
    BOOST_TEST(outcome == "none", "write " << i << " after the deaths: " << outcome);
    written += outcome == "none" ? 1 : 0;
  }
  BOOST_TEST(written == 20);
  const auto writers = run_turn_writers(run, {1, 1}, 200, 1);
  for (const auto& w : writers) {
    BOOST_TEST(w.committed > 0, w.output);
    BOOST_TEST(w.busy * 100 <= w.committed, w.output);  // (a stall of the machine past 200 ms aside)
    BOOST_TEST(w.others == 0, w.output);
  }
  // Neither killed transaction committed.
  BOOST_TEST(store->queues().stats("t", "q").ready == 20 + writers[0].committed + writers[1].committed);
}

// A child forked without exec keeps the parent's open files: the line must still see the parent
// die. The holder forks a sleeping child, takes its turn and is killed; the child lives on, and
// the writers of other processes get their turns.
BOOST_AUTO_TEST_CASE(a_forked_child_does_not_keep_its_dead_parent_in_the_line) {
  SqliteRun run;
  fill(run.url, "t", 0);
  const std::string holder_out = run.dir + "/holder.out";
  const pid_t holder = spawn_self({"--fault-child", "hold-turn", run.url, "fork"}, holder_out);
  BOOST_TEST_REQUIRE(child_said(holder_out, "holding"));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  auto store = forgeyard::open(run.url, with_busy_timeout(2000));
  BOOST_TEST(enqueue_outcome(*store, "after") == "none");
  BOOST_TEST(store->queues().stats("t", "q").ready == 1);
  const std::string out = read_whole(holder_out);
  const auto at = out.find("child ");
  BOOST_REQUIRE(at != std::string::npos);
  const pid_t child = static_cast<pid_t>(std::atoi(out.c_str() + at + 6));
  BOOST_TEST(::kill(child, SIGKILL) == 0);  // it lived all along (an orphan: init reaps it)
}

// A line left inconsistent (a crash of the machine mid-write of the mapped page) starts empty
// once no process has the file open: the turn stuck at a ticket nobody holds is not inherited.
BOOST_AUTO_TEST_CASE(a_line_nobody_has_open_starts_empty) {
  SqliteRun run;
  fill(run.url, "t", 0);
  const std::string turns = fs::weakly_canonical(run.path).string() + ".turns";
  {
    // The turn at ticket 5, tickets up to 9 handed out, no slot filled in: without the reset every
    // writer would wait for ticket 5 until its timeout.
    const int fd = ::open(turns.c_str(), O_RDWR | O_CLOEXEC);
    BOOST_REQUIRE(fd >= 0);
    const std::uint64_t next = 9, serving = 5;
    BOOST_REQUIRE(::pwrite(fd, &next, sizeof next, 64) == sizeof next);
    BOOST_REQUIRE(::pwrite(fd, &serving, sizeof serving, 128) == sizeof serving);
    ::close(fd);
  }
  auto store = forgeyard::open(run.url, with_busy_timeout(300));
  BOOST_TEST(enqueue_outcome(*store, "after") == "none");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace faults
