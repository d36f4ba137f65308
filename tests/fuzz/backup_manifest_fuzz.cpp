// The backup manifest (core/backup_manifest), as `storage restore` and `storage verify` read it from a
// backup directory: any text is either refused as corrupted (XX001) or a too-new format (22023), or
// parsed into a manifest that writes back to JSON that parses to the same manifest; the version
// check refuses only with 22023, and comparing two versions is antisymmetric.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/backup_manifest.hpp"
#include "core/errors.hpp"
#include "fuzz.hpp"

namespace {

int compare_or_refuse(std::string_view a, std::string_view b, bool& refused) {
  try {
    return fy::core::compare_versions(a, b);
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "22023");
    refused = true;
    return 0;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // Two versions, split at the first newline.
  const auto nl = text.find('\n');
  if (nl != std::string_view::npos && nl < 64 && size - nl < 64) {
    bool refused_ab = false, refused_ba = false;
    const int ab = compare_or_refuse(text.substr(0, nl), text.substr(nl + 1), refused_ab);
    const int ba = compare_or_refuse(text.substr(nl + 1), text.substr(0, nl), refused_ba);
    FUZZ_CHECK(refused_ab == refused_ba);
    if (!refused_ab) FUZZ_CHECK((ab < 0) == (ba > 0) && (ab == 0) == (ba == 0));
  }

  fy::core::BackupManifest m;
  try {
    m = fy::core::parse_backup_manifest(text);
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "XX001" || e.sqlstate() == "22023");
    return 0;
  }
  FUZZ_CHECK(m.backend == "sqlite" || m.backend == "postgresql");
  FUZZ_CHECK(m.format <= fy::core::backup_manifest_format);
  for (const auto& f : m.files) {
    FUZZ_CHECK(!f.name.empty() && f.name.find('/') == std::string::npos && f.name != "." && f.name != "..");
    FUZZ_CHECK(f.sha256.size() == 64);
  }
  // What a backup writes, a restore reads back unchanged.
  const std::string written = fy::core::to_json(m);
  const fy::core::BackupManifest again = fy::core::parse_backup_manifest(written);
  FUZZ_CHECK(fy::core::to_json(again) == written);
  // Too new for this code (22023), or a schema_version that is no version of its backend (XX001).
  try {
    fy::core::check_backup_not_newer(m, m.backend == "sqlite" ? "0004_audit.sql" : "0.5.0");
  } catch (const fy::core::Error& e) {
    FUZZ_CHECK(e.sqlstate() == "22023" || e.sqlstate() == "XX001");
  }
  return 0;
}
