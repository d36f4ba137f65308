// Backup directories: creating them, writing the manifest durably, and checking a backup's
// files against its manifest before a restore changes anything.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/core.hpp"
#include "forgeyard/error.hpp"
#include "ops/ops.hpp"

namespace forgeyard::detail::ops {

namespace sqlstate = fy::core::sqlstate;
namespace fs = std::filesystem;

namespace {
[[noreturn]] void io_failure(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::Unavailable, sqlstate::io_error, what + " " + path + ": " + std::strerror(errno));
}
[[noreturn]] void corrupted(const std::string& why) {
  throw Error(ErrorKind::Corruption, sqlstate::data_corrupted, "the backup is incomplete or corrupted: " + why);
}
}  // namespace

FileDigest digest_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_failure("cannot read", path);
  fy::core::Sha256 hash;
  FileDigest d;
  std::string block(1 << 20, '\0');
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    hash.update(std::string_view(block.data(), n));
    d.size += n;
  }
  if (in.bad()) io_failure("cannot read", path);
  d.sha256 = hash.hex();
  return d;
}

void prepare_backup_directory(const std::string& directory) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot create " + directory + ": " + ec.message());
  if (!fs::is_empty(directory, ec) || ec)
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "backup directory " + directory + " is not empty: give a new directory for each backup");
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) io_failure("cannot open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) io_failure("cannot fsync", path);
}

void write_durably(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) io_failure("cannot write", partial);
  }
  fsync_path(partial);
  if (std::rename(partial.c_str(), path.c_str()) != 0) io_failure("cannot rename to", path);
  fsync_path(fs::path(path).parent_path().string());
}

fy::core::BackupManifest read_checked_backup(const std::string& directory, const ProgressFn& progress) {
  if (!fs::is_directory(directory))
    throw Error(ErrorKind::NotFound, sqlstate::undefined_object, "no backup directory " + directory);
  const std::string manifest_path = (fs::path(directory) / fy::core::backup_manifest_name).string();
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) corrupted("no " + std::string(fy::core::backup_manifest_name) + " in " + directory);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  fy::core::BackupManifest manifest;
  try {
    manifest = fy::core::parse_backup_manifest(text);
  } catch (const fy::core::Error& e) {
    throw Error(e.sqlstate(), e.what(), e.detail());
  }
  std::set<std::string> listed{fy::core::backup_manifest_name};
  for (const auto& f : manifest.files) {
    listed.insert(f.name);
    const std::string path = (fs::path(directory) / f.name).string();
    if (!fs::is_regular_file(path)) corrupted(f.name + " is missing");
    if (progress) progress("checking " + f.name + " (" + std::to_string(f.size) + " bytes)");
    const FileDigest d = digest_file(path);
    if (d.size != f.size)
      corrupted(f.name + " has " + std::to_string(d.size) + " bytes, the manifest says " + std::to_string(f.size));
    if (d.sha256 != f.sha256) corrupted(f.name + " does not match its SHA-256 in the manifest");
  }
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (!listed.contains(name)) corrupted(name + " is not in the manifest (a partial or mixed backup?)");
  }
  return manifest;
}

std::string quote_ident(const std::string& name) {
  std::string q = "\"";
  for (char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string utc_now_iso() {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long>(us % 1'000'000));
  return buf;
}

}  // namespace forgeyard::detail::ops
