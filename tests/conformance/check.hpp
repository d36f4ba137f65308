#pragma once

#include <boost/test/unit_test.hpp>

#include <exception>
#include <mutex>
#include <string>

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

// Errors thrown inside a test's threads: run() keeps the first, check() fails the test with it on
// the test's own thread. (An exception escaping a std::thread aborts the whole suite, and the log
// then shows a SIGABRT instead of the error.)
class ThreadFailures {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (const forgeyard::Error& e) {
      record(std::string(forgeyard::to_string(e.kind())) + " " + e.sqlstate() + ": " + e.what());
    } catch (const std::exception& e) {
      record(e.what());
    } catch (...) {
      record("an exception that is not a std::exception");
    }
  }
  void check(const std::string& who) {
    std::lock_guard lock(mutex_);
    BOOST_TEST(first_.empty(), "a " << who << " thread failed: " << first_);
    first_.clear();
  }

 private:
  void record(std::string what) noexcept {
    std::lock_guard lock(mutex_);
    if (first_.empty()) first_ = std::move(what);
  }
  std::mutex mutex_;
  std::string first_;
};

}  // namespace conformance

// Checks the kind and SQLSTATE of the error `statement` throws and, when a fourth argument is
// given, its message too: where both backends raise the core's error (fencing, argument checks)
// the texts must match word for word, so a twin SQL predicate that drifts shows up here.
#define FY_CHECK_ERROR(statement, expected_kind, expected_sqlstate, ...)                  \
  do {                                                                                    \
    const forgeyard::Error fy_e = ::conformance::expect_error([&] { statement; });        \
    BOOST_TEST(forgeyard::to_string(fy_e.kind()) == forgeyard::to_string(expected_kind)); \
    BOOST_TEST(fy_e.sqlstate() == (expected_sqlstate));                                   \
    __VA_OPT__(BOOST_TEST(std::string(fy_e.what()) == std::string(__VA_ARGS__));)         \
  } while (0)
