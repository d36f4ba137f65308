// A recorded history: every operation a fault workload invokes, with when it was invoked and
// completed and how (ok / failed / unknown), and the state read back at the end as observations.
// Thread-safe; a worker process streams its history to a file line by line so that a SIGKILL
// leaves its in-flight operations behind as unknown (docs/architecture.md, "Fault harness").
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace history {

enum class Outcome { Pending, Ok, Failed, Unknown };

std::string_view to_string(Outcome outcome) noexcept;
inline std::ostream& operator<<(std::ostream& out, Outcome outcome) {
  return out << to_string(outcome);
}

// One operation. `kind` names the check it feeds (see checker.hpp); `key` what it is about (an
// event id, a resource, a row, an idempotency key, a tenant); `text` a string argument or result
// (an owner, an op tag, a read-back log); `args` and `result` integers by name.
struct Op {
  int process = 0;
  int thread = 0;
  std::string kind;
  std::string key;
  std::string text;
  std::map<std::string, std::int64_t> args;
  std::map<std::string, std::int64_t> result;
  std::int64_t invoked_us = 0;  // monotonic clock, shared by every process of the machine
  std::int64_t completed_us = 0;
  Outcome outcome = Outcome::Pending;
  std::string error;  // the error kind of a failed or unknown operation

  std::int64_t arg(const std::string& name) const;
  std::int64_t res(const std::string& name) const;
};

// Microseconds of CLOCK_MONOTONIC.
std::int64_t now_us();

class Recorder {
 public:
  // `process` labels the ops; with a `stream_path`, each invoke and completion is appended to
  // that file at once (load() reads it back; an op without a completion line is Unknown).
  explicit Recorder(int process = 0, const std::string& stream_path = {});
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records the invocation; returns the op's id.
  std::size_t invoke(Op op);
  void ok(std::size_t id, std::map<std::string, std::int64_t> result = {}, std::string text = {});
  void failed(std::size_t id, std::string error);
  // The operation may or may not have taken effect (connection lost, commit in flight, killed).
  void unknown(std::size_t id, std::string error);
  // State read back (instantaneous, Ok).
  void observe(Op op);
  // An op whose times and outcome the caller measured (e.g. one delivery of a claim call).
  void record(Op op);

  // Appends the ops of another history (e.g. a worker process's).
  void merge(const std::vector<Op>& ops);
  std::vector<Op> ops() const;
  std::size_t size() const;

  // The ops of a streamed history; those never completed become Unknown ("killed").
  static std::vector<Op> load(const std::string& stream_path, int process);

 private:
  void stream(const std::string& line);
  int process_;
  std::FILE* file_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<Op> ops_;
};

// The index of the calling thread (0, 1, ... in the order threads first ask).
int thread_index();

}  // namespace history
