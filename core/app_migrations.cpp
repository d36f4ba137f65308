#include "core/app_migrations.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/digest.hpp"
#include "core/errors.hpp"
#include "core/input.hpp"

namespace fy::core {

namespace {

constexpr std::size_t max_app_bytes = 200;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

[[noreturn]] void bad_file(const std::string& file_name, const std::string& why) {
  throw Error(sqlstate::invalid_parameter, "migration file " + file_name + ": " + why,
              "files are NNNN_name.sql; headers: -- forgeyard: phase=expand|contract, -- forgeyard: no-transaction");
}

// The directives of one "-- forgeyard: ..." line.
void apply_directives(const std::string& file_name, std::string_view words, AppMigrationFile& file) {
  std::istringstream in{std::string(words)};
  for (std::string w; in >> w;) {
    if (w == "phase=expand")
      file.contract = false;
    else if (w == "phase=contract")
      file.contract = true;
    else if (w == "no-transaction")
      file.transactional = false;
    else
      bad_file(file_name, "unknown directive \"" + w + "\"");
  }
}

}  // namespace

AppMigrationFile parse_app_migration(const std::string& file_name, std::string sql) {
  AppMigrationFile file;
  std::size_t digits = 0;
  while (digits < file_name.size() && is_digit(file_name[digits])) ++digits;
  if (digits < 4 || digits > 9 || digits >= file_name.size() || file_name[digits] != '_' ||
      !file_name.ends_with(".sql") || file_name.size() <= digits + 1 + 4)
    bad_file(file_name, "the name must be NNNN_name.sql");
  const std::string_view label(file_name.data() + digits + 1, file_name.size() - digits - 1 - 4);
  if (!std::all_of(label.begin(), label.end(), is_name_char))
    bad_file(file_name, "the name after the number may hold a-z, 0-9, _ and - only");
  file.id = std::stoi(file_name.substr(0, digits));
  if (file.id <= 0) bad_file(file_name, "the number must be positive");
  file.name = file_name;
  // Directives live in the leading comment lines (blank lines allowed between them).
  std::istringstream lines(sql);
  constexpr std::string_view tag = "-- forgeyard:";
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (!line.starts_with("--")) break;
    if (line.starts_with(tag)) apply_directives(file_name, std::string_view(line).substr(tag.size()), file);
  }
  file.sha256 = sha256_hex(sql);
  file.sql = std::move(sql);
  return file;
}

void sort_app_migrations(std::vector<AppMigrationFile>& files) {
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < files.size(); ++i)
    if (files[i].id == files[i - 1].id)
      throw Error(sqlstate::invalid_parameter, "two migration files have number " + std::to_string(files[i].id) + ": " +
                                                   files[i - 1].name + " and " + files[i].name);
}

std::vector<AppMigrationCheck> compare_app_migrations(const std::vector<AppMigrationFile>& files,
                                                      const std::vector<AppMigrationRecord>& records) {
  std::map<int, AppMigrationCheck> by_id;
  int applied_through = 0;
  std::map<std::string, const AppMigrationRecord*> by_checksum;
  for (const AppMigrationRecord& r : records) {
    AppMigrationCheck& c = by_id[r.id];
    c.id = r.id;
    c.name = r.name;
    c.record = &r;
    c.state = FileState::Missing;
    c.detail = "applied file " + r.name + " (sha256 " + r.sha256 + ") is not in the directory";
    applied_through = std::max(applied_through, r.id);
    by_checksum[r.sha256] = &r;
  }
  for (const AppMigrationFile& f : files) {
    AppMigrationCheck& c = by_id[f.id];
    c.id = f.id;
    c.file = &f;
    c.name = f.name;
    if (c.record == nullptr) {
      c.state = FileState::Pending;
      c.detail.clear();
      if (auto same = by_checksum.find(f.sha256); same != by_checksum.end()) {
        c.state = FileState::Changed;
        c.detail =
            "file " + f.name + " (sha256 " + f.sha256 + ") was applied as " + same->second->name + ": renumbered";
      } else if (f.id < applied_through) {
        c.state = FileState::Changed;
        c.detail = "file " + f.name + " is new but numbered below the last applied migration " +
                   std::to_string(applied_through) + "; give it a higher number";
      }
    } else if (c.record->sha256 != f.sha256 || c.record->name != f.name) {
      c.state = FileState::Changed;
      c.detail = "applied file " + c.record->name + " changed: recorded sha256 " + c.record->sha256 + ", file " +
                 f.name + " sha256 " + f.sha256;
    } else {
      c.state = FileState::Applied;
      c.detail.clear();
    }
  }
  std::vector<AppMigrationCheck> out;
  out.reserve(by_id.size());
  for (auto& [id, c] : by_id) out.push_back(std::move(c));
  return out;
}

std::string app_history_refusal(const std::vector<AppMigrationCheck>& checks) {
  std::string out;
  for (const AppMigrationCheck& c : checks) {
    if (c.state != FileState::Changed && c.state != FileState::Missing) continue;
    if (!out.empty()) out += "; ";
    out += c.detail;
  }
  return out;
}

std::vector<AppPlanStep> plan_app_migrations(const std::vector<AppMigrationCheck>& checks, bool allow_contract,
                                             const std::vector<AppDaemon>& daemons) {
  std::vector<AppPlanStep> steps;
  std::string waiting;  // the first held-back migration: the rest wait for it
  for (const AppMigrationCheck& c : checks) {
    if (c.state != FileState::Pending) continue;
    AppPlanStep step{c.file, false, {}};
    if (!waiting.empty()) {
      step.reason = "waits for " + waiting;
    } else if (c.file->contract && !allow_contract) {
      step.reason = "contract: needs --allow-contract";
    } else if (c.file->contract) {
      for (const AppDaemon& d : daemons) {
        if (!d.live || d.max_schema == 0 || d.max_schema >= c.id) continue;
        if (!step.reason.empty())
          step.reason += ", ";
        else
          step.reason = "contract: live daemons predate it: ";
        step.reason += d.instance + " (max_schema " + std::to_string(d.max_schema) + ")";
      }
    }
    step.will_run = step.reason.empty();
    if (!step.will_run && waiting.empty()) waiting = c.name;
    steps.push_back(std::move(step));
  }
  return steps;
}

DaemonFit check_daemon_range(const std::vector<AppMigrationRecord>& records, int min_schema, int max_schema,
                             std::string& why) {
  int applied_through = 0;
  for (const AppMigrationRecord& r : records) {
    applied_through = std::max(applied_through, r.id);
    if (max_schema > 0 && r.contract && r.id > max_schema) {
      why = "contract migration " + r.name + " is applied, and this daemon understands the schema only up to " +
            std::to_string(max_schema);
      return DaemonFit::TooOld;
    }
  }
  if (applied_through < min_schema) {
    why = "the application's schema is at " + std::to_string(applied_through) + ", this daemon needs " +
          std::to_string(min_schema);
    return DaemonFit::MigrationRequired;
  }
  why.clear();
  return DaemonFit::Ok;
}

void check_app_name(std::string_view value, const char* what) {
  check_name(what, true, value, max_app_bytes);
}

std::int32_t app_lock_key(std::string_view app) {
  const std::string digest = sha256(app);
  const std::uint32_t v = (std::uint32_t(std::uint8_t(digest[0])) << 24) |
                          (std::uint32_t(std::uint8_t(digest[1])) << 16) |
                          (std::uint32_t(std::uint8_t(digest[2])) << 8) | std::uint32_t(std::uint8_t(digest[3]));
  return static_cast<std::int32_t>(v);
}

}  // namespace fy::core
