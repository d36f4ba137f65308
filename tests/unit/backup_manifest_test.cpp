// The backup manifest (core/backup_manifest): what one backup writes another restore reads
// back unchanged, and every way a manifest can be damaged is XX001 before a restore starts.
#include <boost/test/unit_test.hpp>

#include "core/backup_manifest.hpp"
#include "core/core.hpp"
#include "core_errors.hpp"

namespace core = fy::core;

namespace {

core::BackupManifest sample() {
  core::BackupManifest m;
  m.forgeyard_version = "0.5.0";
  m.backend = "sqlite";
  m.schema_version = "0004_audit.sql";
  m.created_at = "2026-12-02T00:00:00.000000Z";
  m.migrations = {{"forgeyard", "0001_leases.sql", std::string(64, 'a')}, {"forgeyard", "0004_audit.sql", ""}};
  m.files = {{"store.db", 4096, core::sha256_hex("x")}};
  m.audit_heads = {{"tenant \"one\"", 3, core::sha256_hex("h")}};
  return m;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backup_manifest)

BOOST_AUTO_TEST_CASE(a_written_manifest_reads_back_field_by_field) {
  const core::BackupManifest m = sample();
  const core::BackupManifest back = core::parse_backup_manifest(core::to_json(m));
  BOOST_TEST(back.format == 1);
  BOOST_TEST(back.forgeyard_version == m.forgeyard_version);
  BOOST_TEST(back.backend == m.backend);
  BOOST_TEST(back.schema_version == m.schema_version);
  BOOST_TEST(back.created_at == m.created_at);
  BOOST_REQUIRE_EQUAL(back.migrations.size(), 2u);
  BOOST_TEST(back.migrations[0].checksum == m.migrations[0].checksum);
  BOOST_REQUIRE_EQUAL(back.files.size(), 1u);
  BOOST_TEST(back.files[0].size == 4096u);
  BOOST_TEST(back.files[0].sha256 == m.files[0].sha256);
  BOOST_REQUIRE_EQUAL(back.audit_heads.size(), 1u);
  BOOST_TEST(back.audit_heads[0].tenant == "tenant \"one\"");
  BOOST_TEST(back.audit_heads[0].seq == 3);
}

BOOST_AUTO_TEST_CASE(a_damaged_manifest_is_corruption) {
  const std::string good = core::to_json(sample());
  for (const std::string& bad : {
           good.substr(0, good.size() / 2),                                          // cut short
           std::string("[]"),                                                        // not an object
           replaced(good, "\"backend\": \"sqlite\"", "\"backend\": \"oracle\""),     // unknown backend
           replaced(good, "\"size\": 4096", "\"size\": -1"),                         // negative size
           replaced(good, "\"size\": 4096", "\"size\": \"4096\""),                   // wrong type
           replaced(good, "\"name\": \"store.db\"", "\"name\": \"../etc/passwd\""),  // a path
           replaced(good, "\"name\": \"store.db\"", "\"name\": \"manifest.json\""),  // itself
           replaced(good, core::sha256_hex("x"), "abc"),                             // short digest
           replaced(good, "\"format\": 1,", ""),                                     // missing field
       })
    BOOST_TEST(unit::code_of([&] { core::parse_backup_manifest(bad); }) == "XX001", bad);
  auto no_files = sample();
  no_files.files.clear();
  BOOST_TEST(unit::code_of([&] { core::parse_backup_manifest(core::to_json(no_files)); }) == "XX001");
}

BOOST_AUTO_TEST_CASE(a_newer_format_or_schema_is_refused_as_not_understood) {
  const std::string good = core::to_json(sample());
  const std::string newer_format = replaced(good, "\"format\": 1", "\"format\": 2");
  BOOST_TEST(unit::code_of([&] { core::parse_backup_manifest(newer_format); }) == "22023");

  auto m = sample();
  BOOST_TEST(unit::code_of([&] { core::check_backup_not_newer(m, "0004_audit.sql"); }) == "none");
  BOOST_TEST(unit::code_of([&] { core::check_backup_not_newer(m, "0006_copy.sql"); }) == "none");
  BOOST_TEST(unit::code_of([&] { core::check_backup_not_newer(m, "0003_queues.sql"); }) == "22023");
  m.backend = "postgresql";
  m.schema_version = "0.10.0";
  BOOST_TEST(unit::code_of([&] { core::check_backup_not_newer(m, "0.9.9"); }) == "22023");
  BOOST_TEST(unit::code_of([&] { core::check_backup_not_newer(m, "0.10.0"); }) == "none");
  BOOST_TEST(unit::message_of([&] { core::check_backup_not_newer(m, "0.5.0"); }).find("newer than this forgeyard") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(versions_compare_by_number_not_by_text) {
  BOOST_TEST(core::compare_versions("0.10.0", "0.9.3") > 0);
  BOOST_TEST(core::compare_versions("0.5", "0.5.0") == 0);
  BOOST_TEST(core::compare_versions("0.4.0", "0.5.0") < 0);
  BOOST_TEST(unit::code_of([&] { core::compare_versions("0.x", "0.5"); }) == "22023");
  BOOST_TEST(core::migration_number("0004_audit.sql") == 4);
  BOOST_TEST(core::migration_number("audit.sql") == -1);
}

BOOST_AUTO_TEST_CASE(a_streamed_sha256_is_the_one_shot_sha256) {
  core::Sha256 h;
  h.update("hello ");
  h.update("world");
  BOOST_TEST(h.hex() == core::sha256_hex("hello world"));
}

BOOST_AUTO_TEST_SUITE_END()
