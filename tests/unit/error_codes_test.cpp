// Every FY code docs/errors.md lists is in the core's table (core/errors.hpp), and the other way
// round: a new code cannot be raised without being documented, or documented without existing.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/errors.hpp"

BOOST_AUTO_TEST_SUITE(error_codes)

namespace {
// The codes in the first column of the rows of docs/errors.md's tables ("| FY001 | ...").
std::set<std::string> documented_fy_codes() {
  std::ifstream in(std::string(FORGEYARD_SOURCE_DIR) + "/docs/errors.md");
  BOOST_REQUIRE_MESSAGE(in, "cannot read docs/errors.md");
  std::set<std::string> codes;
  const std::regex row(R"(^\|\s*(FY[0-9A-Z]{3})\s*\|)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row)) codes.insert(m[1]);
  return codes;
}
}  // namespace

BOOST_AUTO_TEST_CASE(the_documented_fy_codes_are_the_cores) {
  const std::set<std::string> documented = documented_fy_codes();
  BOOST_TEST_REQUIRE(!documented.empty());
  std::set<std::string> core_codes;
  for (const fy::core::FyCode& c : fy::core::fy_codes) {
    BOOST_TEST(std::string(c.code).size() == 5u);
    BOOST_TEST(std::string(c.code).starts_with("FY"));
    BOOST_TEST(core_codes.insert(c.code).second, c.code << " is in the core's table twice");
  }
  for (const std::string& code : documented)
    BOOST_TEST(core_codes.contains(code), code << " is in docs/errors.md but not in fy::core::fy_codes");
  for (const std::string& code : core_codes)
    BOOST_TEST(documented.contains(code), code << " is in fy::core::fy_codes but not in docs/errors.md");
}

BOOST_AUTO_TEST_CASE(every_fy_code_has_a_distinct_name) {
  std::set<std::string> names;
  for (const fy::core::FyCode& c : fy::core::fy_codes) {
    BOOST_TEST(!std::string(c.name).empty());
    BOOST_TEST(names.insert(c.name).second, c.name << " names two codes");
  }
}

BOOST_AUTO_TEST_SUITE_END()
