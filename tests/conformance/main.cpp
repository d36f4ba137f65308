// The conformance suite's main, and the child mode `--workflow-worker` (a workflow worker process
// that workflow_test.cpp SIGKILLs). One suite needs what only the direct PostgreSQL run has: the
// cluster's hot standby (replica_reads, read_class_test.cpp). On the other backends it is removed
// from the test tree before the run, not filtered out, so no run reports a test as skipped.
#define BOOST_TEST_MODULE forgeyard conformance
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <string>

namespace conformance {
int workflow_worker_main(int argc, char* argv[]);
}

namespace {

bool init_for_backend() {
  if (!init_unit_test()) return false;
  const char* backend = std::getenv("FORGEYARD_TEST_BACKEND");
  if (backend != nullptr && std::string(backend) == "postgres") return true;
  namespace utf = boost::unit_test;
  utf::master_test_suite_t& master = utf::framework::master_test_suite();
  const utf::test_unit_id id = master.get("replica_reads");
  if (id != utf::INV_TEST_UNIT_ID) master.remove(id);
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc > 1 && std::string(argv[1]) == "--workflow-worker") return conformance::workflow_worker_main(argc, argv);
  return boost::unit_test::unit_test_main(&init_for_backend, argc, argv);
}
