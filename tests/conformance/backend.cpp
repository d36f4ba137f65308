#include "backend.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>

namespace conformance {

TestClock::TestClock()
    : usecs_(std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch()).count()) {}

namespace {
std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0')
    throw std::runtime_error(std::string(name) + " is not set: run the suite through scripts/test.sh");
  return v;
}
}  // namespace

Backend::Backend() {
  const std::string backend = required_env("FORGEYARD_TEST_BACKEND");
  if (backend == "postgres") {
    postgres = true;
    url = required_env("FORGEYARD_TEST_PG_URL");
  } else if (backend == "pgbouncer") {
    postgres = true;
    unnamed_statements = true;
    url = required_env("FORGEYARD_TEST_PGBOUNCER_URL");
  } else if (backend == "sqlite") {
    char pattern[] = "/tmp/forgeyard-conformance.XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    temp_dir = pattern;
    url = "sqlite://" + temp_dir + "/store.db";
  } else {
    throw std::runtime_error("FORGEYARD_TEST_BACKEND must be sqlite, postgres or pgbouncer, not " + backend);
  }
  store = open_another();
  tenant = unique("tenant");
}

Backend::~Backend() {
  store.reset();
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir);
}

std::unique_ptr<forgeyard::Store> Backend::open_another(int max_connections) const {
  forgeyard::StoreOptions options;
  options.pool.max_connections = max_connections;
  options.clock = [this] { return clock.now(); };
  options.prepared_statements = !unnamed_statements;
  return forgeyard::open(url, options);
}

std::unique_ptr<forgeyard::Store> Backend::open_real_clock() const {
  forgeyard::StoreOptions options;
  options.prepared_statements = !unnamed_statements;
  return forgeyard::open(url, options);
}

std::string Backend::unique(const std::string& prefix) const {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(rng() % 1000000000);
}

}  // namespace conformance
