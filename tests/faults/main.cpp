// The fault suites (Boost.Test), and the worker modes this executable is started in as a child
// process: `--fault-worker` (a SQLite workload process that the test SIGKILLs) and
// `--fault-child` (one fault tried in a process of its own, e.g. under a file size limit).
#define BOOST_TEST_MODULE fault tests
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <string>

namespace faults {
int worker_main(int argc, char* argv[]);
int child_main(int argc, char* argv[]);
}  // namespace faults

int main(int argc, char* argv[]) {
  if (argc > 1 && std::string(argv[1]) == "--fault-worker") return faults::worker_main(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--fault-child") return faults::child_main(argc, argv);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
