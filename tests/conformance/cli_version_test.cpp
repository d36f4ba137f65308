// `forgeyard --version` on every backend: the client's version, and the version of the store it
// talks to (on PostgreSQL the installed extension, which must be the client's own, VERSION).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "backend.hpp"

BOOST_FIXTURE_TEST_SUITE(cli_version, conformance::Backend)

BOOST_AUTO_TEST_CASE(the_cli_prints_its_version_and_the_stores) {
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string version = slurp(std::string(FORGEYARD_SOURCE_DIR) + "/VERSION");
  while (!version.empty() && (version.back() == '\n' || version.back() == ' ')) version.pop_back();
  const std::string out = (std::filesystem::temp_directory_path() / unique("forgeyard-version")).string();
  BOOST_TEST(run_cli({"--version"}, out) == 0);
  const std::string printed = slurp(out);
  std::filesystem::remove(out);
  if (is_postgres()) {
    BOOST_TEST(printed == "client_version=" + version + "\nbackend=postgresql\nextension_version=" + version + "\n");
  } else {
    BOOST_TEST(printed == "client_version=" + version +
                              "\nbackend=sqlite\nschema_version=" + store->status().schema_version + "\n");
  }
}

BOOST_AUTO_TEST_SUITE_END()
