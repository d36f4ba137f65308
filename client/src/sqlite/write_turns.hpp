// Writers of one SQLite file take turns in the order they came, across threads and processes.
// SQLite's busy handler polls, sleeping up to 100 ms between tries, so a writer that holds its
// transactions back to back (a worker doing work inside a Transaction, or a process whose threads
// hand the lock to each other) keeps the write lock through every poll of the others, and they
// fail with "database is locked" when their busy timeout runs out
// (tests/conformance/concurrency_test.cpp, tests/faults/sqlite_faults_test.cpp).
//
// Two lines, taken in this order with one deadline:
// - in this process, every Store on the file shares one line (a mutex and a list of waiters);
// - the holder of this process's turn then joins the line of every process on the file, kept in
//   "<store>.turns" beside the store (write_turns.cpp): one ticket per process at a time, served
//   first come first served, a waiter that runs out of time leaves without holding up those behind
//   it, and a process that died while holding or waiting is passed over.
// So SQLite's write lock is free whenever a writer gets its turn, and BEGIN IMMEDIATE does not wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>

namespace forgeyard::detail {

class ProcessLine;  // the line of the processes on the file (write_turns.cpp)

class WriteTurns {
 public:
  // The turns of the file at `path`: one object per file while a Store of this process has it open.
  static std::shared_ptr<WriteTurns> of(const std::string& path);
  // Opens (creating if need be) the line shared with other processes; without it (a read-only
  // directory, an in-memory database) the turns are this process's only.
  explicit WriteTurns(const std::string& path);
  ~WriteTurns();
  WriteTurns(const WriteTurns&) = delete;
  WriteTurns& operator=(const WriteTurns&) = delete;

  // Waits for the caller's turn, first come first served, at most `timeout` in all; false when it ran out.
  bool take(std::chrono::milliseconds timeout);
  // Hands the turn to the next in line, if any.
  void give_back();

 private:
  bool take_here(std::chrono::steady_clock::time_point deadline);
  void give_back_here();

  std::mutex mutex_;
  std::condition_variable handed_;
  bool held_ = false;
  std::list<bool> waiters_;  // in arrival order; true once the turn was handed to it
  // Null when the file turns are unavailable. Used by the holder of this process's turn only.
  std::unique_ptr<ProcessLine> processes_;
};

// A turn held from construction until release() or destruction. Throws SQLite's busy error
// (40001, as a busy timeout does) when the turn does not come within `timeout`.
class WriteTurn {
 public:
  WriteTurn(WriteTurns& turns, std::chrono::milliseconds timeout);
  ~WriteTurn() { release(); }
  // What is left of the timeout (zero once it ran out): the longest the writer may still wait.
  std::chrono::milliseconds left() const;
  WriteTurn(const WriteTurn&) = delete;
  WriteTurn& operator=(const WriteTurn&) = delete;
  void release() noexcept;

 private:
  WriteTurns& turns_;
  std::chrono::steady_clock::time_point deadline_;
  bool held_ = false;
};

}  // namespace forgeyard::detail
