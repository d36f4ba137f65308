// An application's migration file (core/app_migrations), as `storage migrate` reads a folder: the
// input is a file name, a newline, then the file's text. Either the file is refused with 22023, or
// its number is the name's leading digits, its checksum is the SHA-256 of exactly the text, and
// its directives are the ones in the leading comment lines. Two files with one number are refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/app_migrations.hpp"
#include "core/digest.hpp"
#include "core/errors.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string name(input.substr(0, nl));
  const std::string sql(input.substr(nl + 1));

  fy::core::AppMigrationFile file;
  try {
    file = fy::core::parse_app_migration(name, sql);
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "22023");
    return 0;
  }
  FUZZ_CHECK(file.id > 0);
  FUZZ_CHECK(file.name == name);
  FUZZ_CHECK(name.ends_with(".sql"));
  FUZZ_CHECK(std::stoll(name.substr(0, name.find('_'))) == file.id);
  FUZZ_CHECK(file.sql == sql);
  FUZZ_CHECK(file.sha256 == fy::core::sha256_hex(sql));
  // A directive counts only in the leading comment lines: the same text after a statement does not.
  const bool says_contract = sql.find("phase=contract") != std::string::npos;
  if (file.contract) FUZZ_CHECK(says_contract);
  const bool says_no_tx = sql.find("no-transaction") != std::string::npos;
  if (!file.transactional) FUZZ_CHECK(says_no_tx);

  std::vector<fy::core::AppMigrationFile> files{file, file};
  try {
    fy::core::sort_app_migrations(files);
    FUZZ_CHECK(false);  // one number twice is never accepted
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "22023");
  }
  return 0;
}
