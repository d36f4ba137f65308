#define BOOST_TEST_MODULE forgeyard unit
#include <boost/test/unit_test.hpp>
