// Writers of one SQLite file in this process take turns in the order they came. SQLite's busy
// handler polls, sleeping up to 100 ms between tries, so a writer that holds its transactions back
// to back (a worker doing work inside a Transaction) keeps the write lock through every poll of
// the others, and they fail with "database is locked" when their busy timeout runs out
// (tests/conformance/concurrency_test.cpp). Every Store of this process on the file shares one line
// of turns; writers in other processes still meet SQLite's busy handler.
#pragma once

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>

namespace forgeyard::detail {

class WriteTurns {
 public:
  // The turns of the file at `path`: one object per file while a Store of this process has it open.
  static std::shared_ptr<WriteTurns> of(const std::string& path);
  // Waits for the caller's turn, first come first served, at most `timeout`; false when it ran out.
  bool take(std::chrono::milliseconds timeout);
  // Hands the turn to the next in line, if any.
  void give_back();

 private:
  std::mutex mutex_;
  std::condition_variable handed_;
  bool held_ = false;
  std::list<bool> waiters_;  // in arrival order; true once the turn was handed to it
};

// A turn held from construction until release() or destruction. Throws SQLite's busy error
// (40001, as a busy timeout does) when the turn does not come within `timeout`.
class WriteTurn {
 public:
  WriteTurn(WriteTurns& turns, std::chrono::milliseconds timeout);
  ~WriteTurn() { release(); }
  WriteTurn(const WriteTurn&) = delete;
  WriteTurn& operator=(const WriteTurn&) = delete;
  void release() noexcept;

 private:
  WriteTurns& turns_;
  bool held_ = false;
};

}  // namespace forgeyard::detail
