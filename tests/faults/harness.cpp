#include "harness.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "forgeyard/forgeyard.hpp"

namespace faults {

pid_t spawn_self(const std::vector<std::string>& args, const std::string& stdout_path) {
  std::vector<std::string> all{"fault_tests"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  if (pid < 0) throw std::runtime_error("fork failed");
  return pid;
}

int run_self(const std::vector<std::string>& args, std::string& output) {
  const std::string path = temp_dir("fault-child") + "/stdout";
  int status = 0;
  waitpid(spawn_self(args, path), &status, 0);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  output = s.str();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string temp_dir(const std::string& prefix) {
  const char* base = std::getenv("FORGEYARD_FAULT_TMPDIR");
  std::string pattern =
      ((base != nullptr && base[0] != '\0') ? std::filesystem::path(base) : std::filesystem::temp_directory_path()) /
      ("forgeyard-" + prefix + ".XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

int run_seconds() {
  const char* s = std::getenv("FORGEYARD_FAULT_SECONDS");
  return s != nullptr && std::atoi(s) > 0 ? std::atoi(s) : 25;
}

std::int64_t Figures::unknown() const {
  std::int64_t n = 0;
  for (const auto& r : reports) n += r.unknown;
  return n;
}

std::int64_t Figures::violations() const {
  std::int64_t n = 0;
  for (const auto& r : reports) n += static_cast<std::int64_t>(r.violations.size());
  return n;
}

std::string Figures::format() const {
  auto counts = [](const std::map<std::string, std::int64_t>& m) {
    std::string s;
    for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(v);
    return s.empty() ? std::string("none") : s;
  };
  std::int64_t took = 0, none = 0;
  for (const auto& r : reports) {
    took += r.unknown_took_effect;
    none += r.unknown_had_no_effect;
  }
  std::string s = "fault run (" + backend + "): " + std::to_string(operations) + " operations\n";
  s += "  faults injected: " + counts(faults) + "\n";
  s += "  errors surfaced: " + counts(errors) + "\n";
  s += "  unknown outcomes: " + std::to_string(unknown()) + ", resolved by reading: " + std::to_string(took) +
       " took effect, " + std::to_string(none) + " had none\n";
  s += "  violations: " + std::to_string(violations()) + "\n";
  for (const auto& r : reports) s += "  " + history::describe(r) + "\n";
  return s;
}

void expect_verified(const std::string& url, const std::string& what) {
  const auto report = forgeyard::verify_store(url, true);
  BOOST_TEST(report.full);
  BOOST_TEST(report.checks.size() > 3);
  for (const auto& finding : report.findings)
    BOOST_TEST(false, what << ": " << finding.check << ": " << finding.detail);
  std::printf("storage verify --full %s: %zu checks, %zu findings\n", what.c_str(), report.checks.size(),
              report.findings.size());
}

}  // namespace faults
