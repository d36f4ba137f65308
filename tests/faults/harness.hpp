// Shared by the fault suites: the figures a run prints, child processes of this executable, and
// the checks run over a finished history.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checker.hpp"
#include "history.hpp"

namespace faults {

// This executable started again in a worker mode (see main.cpp): returns the child's pid.
pid_t spawn_self(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null");
// Runs it to the end; returns its exit code (-1 if killed) and its stdout in `output`.
int run_self(const std::vector<std::string>& args, std::string& output);

// A run's summary line by line, as the test prints it (and BOOST_TEST_MESSAGE shows).
struct Figures {
  std::string backend;
  std::int64_t operations = 0;
  std::map<std::string, std::int64_t> faults;  // injected, by kind
  std::map<std::string, std::int64_t> errors;  // error kinds (and SQLSTATEs) the operations ended with
  std::vector<history::CheckReport> reports;
  std::string format() const;
  std::int64_t unknown() const;
  std::int64_t violations() const;
};

// `storage verify --full` of the store at `url` finds nothing (each finding fails the test);
// prints how many checks ran after `what`.
void expect_verified(const std::string& url, const std::string& what);

// The run's working directory for temporary files (FORGEYARD_FAULT_TMPDIR or the system's).
std::string temp_dir(const std::string& prefix);

// Seconds the workloads run per backend (FORGEYARD_FAULT_SECONDS, default 25).
int run_seconds();

}  // namespace faults
