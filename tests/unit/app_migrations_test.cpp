// The shared logic of the application's schema migrations (core/app_migrations.*): file names and
// directives, the comparison with the recorded history, the plan's contract rule, and a daemon's
// schema range check.
#include <boost/test/unit_test.hpp>

#include "core/app_migrations.hpp"
#include "core/digest.hpp"
#include "core/errors.hpp"

namespace core = fy::core;

namespace {

std::string code_of(const std::string& name, const std::string& sql) {
  try {
    core::parse_app_migration(name, sql);
  } catch (const core::Error& e) {
    return e.sqlstate();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(app_migrations)

BOOST_AUTO_TEST_CASE(names_and_directives) {
  const auto f = core::parse_app_migration("0012_add-email_2.sql",
                                           "-- note\n-- forgeyard: phase=contract no-transaction\n\nALTER TABLE t;\n");
  BOOST_TEST(f.id == 12);
  BOOST_TEST(f.contract);
  BOOST_TEST(!f.transactional);
  BOOST_TEST(f.sha256 == core::sha256_hex(f.sql));
  const auto plain =
      core::parse_app_migration("0001_init.sql", "CREATE TABLE t (id int);\n-- forgeyard: phase=contract\n");
  BOOST_TEST(!plain.contract);  // directives count only in the leading comment lines
  BOOST_TEST(plain.transactional);
  for (const char* bad :
       {"1_x.sql", "0001x.sql", "0000_zero.sql", "0001_.sql", "0001_Upper.sql", "0001_x.txt", "abcd_x.sql"})
    BOOST_TEST(code_of(bad, "SELECT 1;") == "22023", bad);
  BOOST_TEST(code_of("0001_x.sql", "-- forgeyard: phase=later\n") == "22023");
  BOOST_TEST(code_of("0001_x.sql", "-- forgeyard: no-transactions\n") == "22023");
  std::vector<core::AppMigrationFile> two{core::parse_app_migration("0002_b.sql", "b"),
                                          core::parse_app_migration("0002_c.sql", "c")};
  BOOST_CHECK_THROW(core::sort_app_migrations(two), core::Error);
}

BOOST_AUTO_TEST_CASE(history_comparison) {
  std::vector<core::AppMigrationFile> files{core::parse_app_migration("0001_a.sql", "a"),
                                            core::parse_app_migration("0002_b.sql", "b2"),
                                            core::parse_app_migration("0004_d.sql", "d")};
  const std::vector<core::AppMigrationRecord> records{{1, "0001_a.sql", core::sha256_hex("a"), false},
                                                      {2, "0002_b.sql", core::sha256_hex("b"), false},
                                                      {3, "0003_c.sql", core::sha256_hex("c"), false}};
  const auto checks = core::compare_app_migrations(files, records);
  BOOST_REQUIRE(checks.size() == 4u);
  BOOST_TEST((checks[0].state == core::FileState::Applied));
  BOOST_TEST((checks[1].state == core::FileState::Changed));
  BOOST_TEST(checks[1].detail.find(core::sha256_hex("b")) != std::string::npos);
  BOOST_TEST(checks[1].detail.find(core::sha256_hex("b2")) != std::string::npos);
  BOOST_TEST((checks[2].state == core::FileState::Missing));
  BOOST_TEST((checks[3].state == core::FileState::Pending));
  BOOST_TEST(!core::app_history_refusal(checks).empty());
  // Renumbered: 0003's bytes come back as 0005.
  files = {core::parse_app_migration("0001_a.sql", "a"), core::parse_app_migration("0005_c.sql", "c")};
  const std::vector<core::AppMigrationRecord> one{{1, "0001_a.sql", core::sha256_hex("a"), false}};
  BOOST_TEST(core::app_history_refusal(core::compare_app_migrations(files, one)).empty());
  const std::vector<core::AppMigrationRecord> with_c{{1, "0001_a.sql", core::sha256_hex("a"), false},
                                                     {3, "0003_c.sql", core::sha256_hex("c"), false}};
  const auto renumbered = core::compare_app_migrations(files, with_c);
  BOOST_TEST(renumbered.back().detail.find("renumbered") != std::string::npos);
  // A new file below the last applied id.
  files = {core::parse_app_migration("0001_a.sql", "a"), core::parse_app_migration("0002_new.sql", "n"),
           core::parse_app_migration("0003_c.sql", "c")};
  const auto below = core::compare_app_migrations(files, with_c);
  BOOST_TEST((below[1].state == core::FileState::Changed));
}

BOOST_AUTO_TEST_CASE(contracts_wait_for_the_flag_and_for_older_live_daemons) {
  const std::vector<core::AppMigrationFile> files{
      core::parse_app_migration("0001_a.sql", "a"),
      core::parse_app_migration("0002_b.sql", "-- forgeyard: phase=contract\nb"),
      core::parse_app_migration("0003_c.sql", "c")};
  const auto checks = core::compare_app_migrations(files, {});
  auto steps = core::plan_app_migrations(checks, false, {});
  BOOST_REQUIRE(steps.size() == 3u);
  BOOST_TEST(steps[0].will_run);
  BOOST_TEST(!steps[1].will_run);
  BOOST_TEST(steps[1].reason == "contract: needs --allow-contract");
  BOOST_TEST(steps[2].reason == "waits for 0002_b.sql");
  const std::vector<core::AppDaemon> daemons{
      {"old", 1, 1, true}, {"dead", 1, 1, false}, {"new", 1, 2, true}, {"unbounded", 1, 0, true}};
  steps = core::plan_app_migrations(checks, true, daemons);
  BOOST_TEST(!steps[1].will_run);
  BOOST_TEST(steps[1].reason == "contract: live daemons predate it: old (max_schema 1)");
  steps = core::plan_app_migrations(checks, true, {{"new", 1, 2, true}, {"dead", 1, 1, false}});
  BOOST_TEST(steps[1].will_run);
  BOOST_TEST(steps[2].will_run);
}

BOOST_AUTO_TEST_CASE(a_daemons_range) {
  const std::vector<core::AppMigrationRecord> records{
      {1, "0001_a.sql", "x", false}, {2, "0002_b.sql", "y", false}, {3, "0003_c.sql", "z", true}};
  std::string why;
  BOOST_TEST((core::check_daemon_range(records, 1, 3, why) == core::DaemonFit::Ok));
  BOOST_TEST((core::check_daemon_range(records, 4, 0, why) == core::DaemonFit::MigrationRequired));
  BOOST_TEST((core::check_daemon_range(records, 1, 2, why) == core::DaemonFit::TooOld));
  BOOST_TEST(why.find("0003_c.sql") != std::string::npos);
  const std::vector<core::AppMigrationRecord> expand_only{{1, "0001_a.sql", "x", false}, {2, "0002_b.sql", "y", false}};
  BOOST_TEST((core::check_daemon_range(expand_only, 1, 1, why) == core::DaemonFit::Ok));  // N-1 keeps working
  BOOST_TEST(core::app_lock_key("billing") == core::app_lock_key("billing"));
  BOOST_TEST(core::app_lock_key("billing") != core::app_lock_key("billinh"));
}

BOOST_AUTO_TEST_SUITE_END()
