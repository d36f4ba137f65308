// pg_dump and pg_restore as child processes. The connection parameters travel in the child's
// environment (libpq's PG* variables), never on its command line, where `ps` would show a
// password; the child's stderr is kept and quoted if it fails.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/core.hpp"
#include "forgeyard/error.hpp"
#include "ops/ops.hpp"

namespace forgeyard::detail::ops {

namespace sqlstate = fy::core::sqlstate;

void run_child(const Child& child, const ProgressFn& progress) {
  std::string err_path = (std::filesystem::temp_directory_path() / "forgeyard-child-XXXXXX").string();
  const int err_fd = mkstemp(err_path.data());
  if (err_fd < 0) throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot create a temporary file");
  std::vector<std::string> args = child.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The child's environment, built before fork: ours, with the connection's variables over it.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!child.env.contains(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : child.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(err_fd);
    std::filesystem::remove(err_path);
    throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot start " + child.label + ": fork failed");
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: everything was prepared above.
    dup2(err_fd, 2);
    const int null_fd = ::open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(child.stdout_file.empty() ? null_fd : ::open(child.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600),
         1);
    execvpe(argv[0], argv.data(), envp.data());
    const char* msg = "cannot run the program (is it on PATH?)\n";
    [[maybe_unused]] auto n = ::write(2, msg, std::strlen(msg));
    _exit(127);
  }
  ::close(err_fd);
  int status = 0;
  auto next_report = started + std::chrono::seconds(1);
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    const auto now = std::chrono::steady_clock::now();
    if (progress && now >= next_report) {
      std::string line = child.label + " running " +
                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - started).count()) + "s";
      std::error_code ec;
      if (!child.watch_file.empty()) {
        const auto size = std::filesystem::file_size(child.watch_file, ec);
        if (!ec) line += ", " + std::to_string(size) + " bytes written";
      }
      progress(line);
      next_report = now + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(err_path);
  std::string err(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(err_path);
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (err.size() > 2000) err = "..." + err.substr(err.size() - 2000);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status)) : "was killed";
    throw Error(ErrorKind::Unavailable, sqlstate::io_error, child.label + " " + how + (err.empty() ? "" : ": " + err));
  }
}

}  // namespace forgeyard::detail::ops
