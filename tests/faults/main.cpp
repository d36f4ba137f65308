// The fault suites (Boost.Test), and the worker modes this executable is started in as a child
// process: `--fault-worker` (a SQLite workload process that the test SIGKILLs) and
// `--fault-child` (one fault tried in a process of its own, e.g. under a file size limit).
//
// `--suite=NAME` (first argument) keeps only that suite in the test tree: the other one is
// removed before the run, not filtered out, so the log never reports a suite as skipped.
#define BOOST_TEST_MODULE fault tests
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace faults {
int worker_main(int argc, char* argv[]);
int child_main(int argc, char* argv[]);
}  // namespace faults

namespace {

std::string only_suite;  // --suite=NAME, empty: every suite
// Every suite of this executable (postgres_faults_test.cpp, sqlite_faults_test.cpp, ha_failover_test.cpp).
constexpr const char* suites[] = {"postgres_faults", "sqlite_faults", "ha_failover"};

bool init_selected() {
  if (!init_unit_test()) return false;
  if (only_suite.empty()) return true;
  namespace utf = boost::unit_test;
  utf::master_test_suite_t& master = utf::framework::master_test_suite();
  if (master.get(only_suite) == utf::INV_TEST_UNIT_ID) {
    std::fprintf(stderr, "fault_tests: no suite %s\n", only_suite.c_str());
    return false;
  }
  for (const char* name : suites)
    if (name != only_suite) {
      const utf::test_unit_id id = master.get(name);
      if (id != utf::INV_TEST_UNIT_ID) master.remove(id);
    }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc > 1 && std::string(argv[1]) == "--fault-worker") return faults::worker_main(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--fault-child") return faults::child_main(argc, argv);
  std::vector<char*> args(argv, argv + argc);
  const std::string prefix = "--suite=";
  if (argc > 1 && std::string(argv[1]).rfind(prefix, 0) == 0) {
    only_suite = std::string(argv[1]).substr(prefix.size());
    args.erase(args.begin() + 1);
  }
  return boost::unit_test::unit_test_main(&init_selected, static_cast<int>(args.size()), args.data());
}
