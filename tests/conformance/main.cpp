#define BOOST_TEST_MODULE forgeyard conformance
#include <boost/test/unit_test.hpp>
