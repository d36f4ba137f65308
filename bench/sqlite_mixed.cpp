// Many writer processes on one SQLite store, with readers (issue F18): a time, not a ratio.
// The benchmark starts itself again as child processes; each has writer threads that claim and ack
// messages of one queue and a reader thread that reads queue stats, a lease and an audit head.
// A first phase runs the readers alone; the second runs them with the writers. Printed: writes per
// second, the readers' p50/p99 in both phases, the writers' longest call, errors by SQLSTATE.
//
//   sqlite_mixed [--seconds N] [--processes P] [--writers W] [--busy-ms T] [--sqlite-dir DIR]
//
// Goal: no error, the readers' p99 under 5 ms, no writer call longer than its busy timeout.
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "forgeyard/forgeyard.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string tenant = "mixed";
const std::string queue = "work";

// Microseconds of CLOCK_MONOTONIC: one clock for every process of the machine.
std::int64_t now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

struct Options {
  int seconds = 60;
  int processes = 4;
  int writers = 2;
  int busy_ms = 200;
  std::string dir;
};

std::string url_of(const std::string& dir) {
  return "sqlite://" + dir + "/store.db";
}

forgeyard::StoreOptions store_options(int busy_ms) {
  forgeyard::StoreOptions o;
  o.sqlite_busy_timeout = std::chrono::milliseconds(busy_ms);
  return o;
}

std::string sqlstate_of_current_exception() {
  try {
    throw;
  } catch (const forgeyard::Error& e) {
    return e.sqlstate();
  } catch (const std::exception&) {
    return "exception";
  }
}

// One child process: `writers` writer threads (none in the readers-alone phase) and one reader,
// from start_us to end_us. Writes its figures to `out`: "writes N", "longest_us N" (of a call that
// succeeded), "longest_failed_us N", one
// "error SQLSTATE N" per SQLSTATE, then the readers' call times in microseconds, one a line.
int child_main(const std::string& dir, int writers, int busy_ms, std::int64_t start_us, std::int64_t end_us,
               const std::string& out) {
  auto store = forgeyard::open(url_of(dir), store_options(busy_ms));
  std::mutex mutex;
  std::map<std::string, std::int64_t> errors;
  std::int64_t writes = 0, longest_us = 0, longest_failed_us = 0;
  std::vector<std::int64_t> reads;
  auto count_error = [&] {
    std::lock_guard lock(mutex);
    ++errors[sqlstate_of_current_exception()];
  };
  auto wait_start = [&] {
    while (now_us() < start_us) std::this_thread::sleep_for(1ms);
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      const std::string consumer = "writer-" + std::to_string(getpid()) + "-" + std::to_string(w);
      std::int64_t my_writes = 0, my_longest = 0, my_longest_failed = 0;
      auto timed = [&](auto&& call) {
        const std::int64_t asked = now_us();
        try {
          call();
          ++my_writes;
          my_longest = std::max(my_longest, now_us() - asked);
        } catch (...) {
          count_error();
          my_longest_failed = std::max(my_longest_failed, now_us() - asked);
        }
      };
      wait_start();
      while (now_us() < end_us) {
        std::vector<forgeyard::Delivery> batch;
        timed([&] { batch = store->queues().claim(tenant, queue, consumer, 1); });
        if (batch.empty()) {  // drained: top it up (a write too)
          std::vector<forgeyard::OutgoingMessage> more(200);
          for (auto& m : more) m.payload = "refill";
          timed([&] { store->queues().enqueue_many(tenant, queue, more); });
          continue;
        }
        for (const auto& d : batch) timed([&] { store->queues().ack(tenant, queue, d.msg_id, d.claim_token); });
      }
      std::lock_guard lock(mutex);
      writes += my_writes;
      longest_us = std::max(longest_us, my_longest);
      longest_failed_us = std::max(longest_failed_us, my_longest_failed);
    });
  threads.emplace_back([&] {
    std::vector<std::int64_t> mine;
    wait_start();
    for (int i = 0; now_us() < end_us; ++i) {
      const std::int64_t asked = now_us();
      try {
        switch (i % 3) {
          case 0:
            store->queues().stats(tenant, queue);
            break;
          case 1:
            store->leases().get(tenant, "resource");
            break;
          default:
            store->audit().head(tenant);
            break;
        }
        mine.push_back(now_us() - asked);
      } catch (...) {
        count_error();
      }
      std::this_thread::sleep_for(1ms);  // a reader that polls, not one that spins
    }
    std::lock_guard lock(mutex);
    reads = std::move(mine);
  });
  for (auto& t : threads) t.join();
  std::ofstream o(out);
  o << "writes " << writes << "\nlongest_us " << longest_us << "\nlongest_failed_us " << longest_failed_us << "\n";
  for (const auto& [state, n] : errors) o << "error " << state << " " << n << "\n";
  for (auto r : reads) o << r << "\n";
  return 0;
}

struct Phase {
  std::int64_t writes = 0, longest_us = 0, longest_failed_us = 0;
  std::vector<std::int64_t> writes_by_process;
  std::map<std::string, std::int64_t> errors;
  std::vector<std::int64_t> reads;
};

Phase run_phase(const Options& opt, int writers, int seconds) {
  const std::int64_t start = now_us() + 1'000'000;  // every child open before the start
  const std::int64_t end = start + std::int64_t{seconds} * 1'000'000;
  std::vector<std::pair<pid_t, std::string>> children;
  for (int p = 0; p < opt.processes; ++p) {
    const std::string out = opt.dir + "/child-" + std::to_string(p) + ".out";
    std::vector<std::string> args{
        "sqlite_mixed",        "--child",           opt.dir, std::to_string(writers), std::to_string(opt.busy_ms),
        std::to_string(start), std::to_string(end), out};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    children.emplace_back(pid, out);
  }
  Phase phase;
  for (const auto& [pid, out] : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++phase.errors["child process failed"];
    std::ifstream in(out);
    std::int64_t process_writes = 0;
    for (std::string line; std::getline(in, line);) {
      std::istringstream s(line);
      std::string word;
      s >> word;
      if (word == "writes") {
        s >> process_writes;
        phase.writes += process_writes;
      } else if (word == "longest_us") {
        std::int64_t v = 0;
        s >> v;
        phase.longest_us = std::max(phase.longest_us, v);
      } else if (word == "longest_failed_us") {
        std::int64_t v = 0;
        s >> v;
        phase.longest_failed_us = std::max(phase.longest_failed_us, v);
      } else if (word == "error") {
        std::string state;
        std::int64_t n = 0;
        s >> state >> n;
        phase.errors[state] += n;
      } else if (!word.empty()) {
        phase.reads.push_back(std::atoll(word.c_str()));
      }
    }
    phase.writes_by_process.push_back(process_writes);
  }
  std::sort(phase.reads.begin(), phase.reads.end());
  return phase;
}

double percentile_ms(const std::vector<std::int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
  return static_cast<double>(sorted[i]) / 1000.0;
}

void print_reads(const char* label, const Phase& phase) {
  std::printf("%-22s %8zu calls, p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", label, phase.reads.size(),
              percentile_ms(phase.reads, 0.50), percentile_ms(phase.reads, 0.99),
              phase.reads.empty() ? 0.0 : static_cast<double>(phase.reads.back()) / 1000.0);
}

// The store: a queue with a backlog (the writers top it up when it drains), a lease and an audit
// chain for the readers.
void set_up(const Options& opt) {
  auto store = forgeyard::open(url_of(opt.dir));
  forgeyard::QueueOptions q;
  q.max_messages = 10'000'000;
  store->queues().create(tenant, queue, q);
  store->leases().acquire(tenant, "resource", "bench", std::chrono::hours(1));
  for (int i = 0; i < 20; ++i) store->audit().append(tenant, {"bench", "mixed.setup", "r" + std::to_string(i)});
  // A small backlog: queue stats count the queue's rows, so a deep queue would time the count.
  const int messages = 2000;
  std::vector<forgeyard::OutgoingMessage> batch(1000);
  for (auto& m : batch) m.payload = "message";
  for (int sent = 0; sent < messages; sent += static_cast<int>(batch.size())) {
    auto tx = store->begin();
    tx->queues().enqueue_many(tenant, queue, batch);
    tx->commit();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 8 && std::string(argv[1]) == "--child")
    return child_main(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]),
                      argv[7]);
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seconds")
      opt.seconds = std::atoi(argv[i + 1]);
    else if (a == "--processes")
      opt.processes = std::atoi(argv[i + 1]);
    else if (a == "--writers")
      opt.writers = std::atoi(argv[i + 1]);
    else if (a == "--busy-ms")
      opt.busy_ms = std::atoi(argv[i + 1]);
    else if (a == "--sqlite-dir")
      opt.dir = argv[i + 1];
  }
  if (opt.dir.empty()) opt.dir = fs::temp_directory_path() / ("forgeyard-sqlite-mixed-" + std::to_string(getpid()));
  fs::remove_all(opt.dir);
  fs::create_directories(opt.dir);
  set_up(opt);
  const int alone_seconds = std::max(3, opt.seconds / 4);
  std::printf("sqlite_mixed: %d processes x (%d writers + 1 reader), busy timeout %d ms\n", opt.processes, opt.writers,
              opt.busy_ms);
  std::printf("phase 1: readers alone, %d s; phase 2: readers with writers, %d s\n", alone_seconds, opt.seconds);
  const Phase alone = run_phase(opt, 0, alone_seconds);
  const Phase mixed = run_phase(opt, opt.writers, opt.seconds);
  print_reads("readers alone:", alone);
  print_reads("readers with writers:", mixed);
  std::printf("writes (claims + acks): %lld, %.0f per second; by process:", static_cast<long long>(mixed.writes),
              static_cast<double>(mixed.writes) / opt.seconds);
  for (auto w : mixed.writes_by_process) std::printf(" %lld", static_cast<long long>(w));
  std::printf("\nwriters' longest call: %.1f ms that succeeded, %.1f ms that failed (busy timeout %d ms)\n",
              static_cast<double>(mixed.longest_us) / 1000.0, static_cast<double>(mixed.longest_failed_us) / 1000.0,
              opt.busy_ms);
  std::map<std::string, std::int64_t> errors = alone.errors;
  for (const auto& [state, n] : mixed.errors) errors[state] += n;
  std::printf("errors by SQLSTATE:");
  if (errors.empty()) std::printf(" none");
  for (const auto& [state, n] : errors) std::printf(" %s %lld", state.c_str(), static_cast<long long>(n));
  std::printf("\n");
  fs::remove_all(opt.dir);
  return 0;
}
