#include "history.hpp"

#include <atomic>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace history {

std::string_view to_string(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::Pending:
      return "pending";
    case Outcome::Ok:
      return "ok";
    case Outcome::Failed:
      return "failed";
    case Outcome::Unknown:
      return "unknown";
  }
  return "pending";
}

std::int64_t Op::arg(const std::string& name) const {
  auto it = args.find(name);
  return it == args.end() ? 0 : it->second;
}

std::int64_t Op::res(const std::string& name) const {
  auto it = result.find(name);
  return it == result.end() ? 0 : it->second;
}

std::int64_t now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

int thread_index() {
  static std::atomic<int> next{0};
  thread_local int index = next++;
  return index;
}

namespace {

// Stream lines: "I <id> <thread> <invoked> <kind> <key> <args> <text>" and
// "C <id> <completed> <outcome> <error> <result> <text>", fields tab-separated; a map is
// "name=value,name=value". Keys, texts and errors never hold tabs or newlines.
std::string encode(const std::map<std::string, std::int64_t>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::map<std::string, std::int64_t> decode(const std::string& s) {
  std::map<std::string, std::int64_t> m;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    if (eq != std::string::npos) m[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
  }
  return m;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const auto tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  return fields;
}

std::string invoke_line(std::size_t id, const Op& op) {
  return "I\t" + std::to_string(id) + "\t" + std::to_string(op.thread) + "\t" + std::to_string(op.invoked_us) + "\t" +
         op.kind + "\t" + op.key + "\t" + encode(op.args) + "\t" + op.text;
}

std::string completion_line(std::size_t id, const Op& op) {
  return "C\t" + std::to_string(id) + "\t" + std::to_string(op.completed_us) + "\t" +
         std::string(to_string(op.outcome)) + "\t" + op.error + "\t" + encode(op.result) + "\t" + op.text;
}

Outcome outcome_from(const std::string& s) {
  if (s == "ok") return Outcome::Ok;
  if (s == "failed") return Outcome::Failed;
  return Outcome::Unknown;
}

}  // namespace

Recorder::Recorder(int process, const std::string& stream_path) : process_(process) {
  if (!stream_path.empty()) {
    file_ = std::fopen(stream_path.c_str(), "a");
    if (file_ == nullptr) throw std::runtime_error("cannot open history stream " + stream_path);
  }
}

Recorder::~Recorder() {
  if (file_ != nullptr) std::fclose(file_);
}

void Recorder::stream(const std::string& line) {
  if (file_ == nullptr) return;
  std::fputs(line.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);  // into the kernel: a SIGKILL of this process keeps it
}

std::size_t Recorder::invoke(Op op) {
  op.process = process_;
  op.thread = thread_index();
  op.invoked_us = now_us();
  op.outcome = Outcome::Pending;
  std::lock_guard lock(mutex_);
  const std::size_t id = ops_.size();
  stream(invoke_line(id, op));
  ops_.push_back(std::move(op));
  return id;
}

namespace {
void finish(Op& op, Outcome outcome, std::string error, std::map<std::string, std::int64_t> result, std::string text) {
  op.completed_us = now_us();
  op.outcome = outcome;
  op.error = std::move(error);
  op.result = std::move(result);
  if (!text.empty()) op.text = std::move(text);
}
}  // namespace

void Recorder::ok(std::size_t id, std::map<std::string, std::int64_t> result, std::string text) {
  std::lock_guard lock(mutex_);
  finish(ops_.at(id), Outcome::Ok, {}, std::move(result), std::move(text));
  stream(completion_line(id, ops_[id]));
}

void Recorder::failed(std::size_t id, std::string error) {
  std::lock_guard lock(mutex_);
  finish(ops_.at(id), Outcome::Failed, std::move(error), {}, {});
  stream(completion_line(id, ops_[id]));
}

void Recorder::unknown(std::size_t id, std::string error) {
  std::lock_guard lock(mutex_);
  finish(ops_.at(id), Outcome::Unknown, std::move(error), {}, {});
  stream(completion_line(id, ops_[id]));
}

void Recorder::observe(Op op) {
  op.process = process_;
  op.thread = thread_index();
  op.invoked_us = op.completed_us = now_us();
  op.outcome = Outcome::Ok;
  std::lock_guard lock(mutex_);
  ops_.push_back(std::move(op));
}

void Recorder::record(Op op) {
  op.process = process_;
  op.thread = thread_index();
  std::lock_guard lock(mutex_);
  const std::size_t id = ops_.size();
  stream(invoke_line(id, op));
  stream(completion_line(id, op));
  ops_.push_back(std::move(op));
}

void Recorder::merge(const std::vector<Op>& ops) {
  std::lock_guard lock(mutex_);
  ops_.insert(ops_.end(), ops.begin(), ops.end());
}

std::vector<Op> Recorder::ops() const {
  std::lock_guard lock(mutex_);
  return ops_;
}

std::size_t Recorder::size() const {
  std::lock_guard lock(mutex_);
  return ops_.size();
}

std::vector<Op> Recorder::load(const std::string& stream_path, int process) {
  std::ifstream in(stream_path);
  std::map<std::size_t, Op> by_id;
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f[0] == "I" && f.size() >= 8) {
      Op op;
      op.process = process;
      op.thread = std::stoi(f[2]);
      op.invoked_us = std::stoll(f[3]);
      op.kind = f[4];
      op.key = f[5];
      op.args = decode(f[6]);
      op.text = f[7];
      by_id[std::stoul(f[1])] = std::move(op);
    } else if (f[0] == "C" && f.size() >= 7) {
      auto it = by_id.find(std::stoul(f[1]));
      if (it == by_id.end()) continue;
      Op& op = it->second;
      op.completed_us = std::stoll(f[2]);
      op.outcome = outcome_from(f[3]);
      op.error = f[4];
      op.result = decode(f[5]);
      if (!f[6].empty()) op.text = f[6];
    }
    // A torn last line (the process died while writing it) is skipped.
  }
  std::vector<Op> ops;
  for (auto& [id, op] : by_id) {
    if (op.outcome == Outcome::Pending) {
      op.outcome = Outcome::Unknown;
      op.error = "killed";
      op.completed_us = now_us();
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace history
