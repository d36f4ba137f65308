#pragma once

#include <boost/test/unit_test.hpp>

#include "forgeyard/error.hpp"

namespace conformance {

// Runs f and returns the forgeyard::Error it throws; fails the test if it throws none.
template <class F>
forgeyard::Error expect_error(F&& f) {
  try {
    f();
  } catch (const forgeyard::Error& e) {
    return e;
  }
  BOOST_FAIL("expected a forgeyard::Error, got none");
  throw;  // unreachable
}

}  // namespace conformance

#define FY_CHECK_ERROR(statement, expected_kind, expected_sqlstate)                        \
  do {                                                                                     \
    const forgeyard::Error fy_e = ::conformance::expect_error([&] { statement; });         \
    BOOST_TEST(forgeyard::to_string(fy_e.kind()) == forgeyard::to_string(expected_kind));  \
    BOOST_TEST(fy_e.sqlstate() == (expected_sqlstate));                                    \
  } while (0)
