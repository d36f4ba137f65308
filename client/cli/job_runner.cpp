// The fork/exec half of `queue work`; the claim/ack loop is run_worker's.
#include "job_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

extern char** environ;

namespace forgeyard::cli {

// The environment is built before fork: the child of a threaded process only calls exec.
int run_command(const std::string& command, const Delivery& d, const std::string& tenant, const std::string& queue) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "FORGEYARD_", 10) != 0) env.emplace_back(*e);
  env.push_back("FORGEYARD_TENANT=" + tenant);
  env.push_back("FORGEYARD_QUEUE=" + queue);
  env.push_back("FORGEYARD_MSG_ID=" + std::to_string(d.msg_id));
  env.push_back("FORGEYARD_ATTEMPT=" + std::to_string(d.attempt));
  env.push_back("FORGEYARD_PRIORITY=" + std::string(to_string(d.priority)));
  env.push_back("FORGEYARD_PARTITION_KEY=" + d.partition_key.value_or(""));
  env.push_back("FORGEYARD_EVENT_ID=" + d.event_id.value_or(""));
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  int in[2];
  if (pipe(in) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  close(in[0]);
  std::size_t written = 0;
  while (written < d.payload.size()) {
    const ssize_t n = write(in[1], d.payload.data() + written, d.payload.size() - written);
    if (n <= 0) break;  // the command does not read its input (EPIPE; SIGPIPE is ignored): fine
    written += static_cast<std::size_t>(n);
  }
  close(in[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {
std::atomic<bool> stop_signal{false};
extern "C" void on_stop_signal(int) {
  stop_signal = true;
}
}  // namespace

WorkerStats run_jobs(Queues& queues, const WorkerOptions& options, const std::string& command) {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a command that does not read its payload must not kill the runner
  // A signal handler may only set a flag; this thread turns it into the worker's stop request.
  std::stop_source stop;
  std::jthread watcher([&](std::stop_token done) {
    while (!done.stop_requested() && !stop_signal) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.request_stop();
  });
  WorkerStats stats = run_worker(
      queues, options,
      [&](const Delivery& d) {
        const int code = run_command(command, d, options.tenant, options.queue);
        if (code == 0) return HandlerResult::ack();
        if (code == 100) return HandlerResult::fail("command exited with 100");
        return HandlerResult::retry("command exited with " + std::to_string(code));
      },
      stop.get_token());
  watcher.request_stop();
  return stats;
}

}  // namespace forgeyard::cli
