#include "sqlite/migrations.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/core.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard::detail {

namespace {
int version_of(const std::string& name) {
  if (name.size() < 6 || name[4] != '_' || !std::all_of(name.begin(), name.begin() + 4, ::isdigit) ||
      !name.ends_with(".sql"))
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "migration file name must be NNNN_name.sql: " + name);
  return std::stoi(name.substr(0, 4));
}
}  // namespace

std::vector<Migration> load_migrations(const std::string& directory) {
  std::vector<Migration> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".sql")) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    out.push_back({version_of(name), name, text.str()});
  }
  if (ec)
    throw Error(ErrorKind::Unavailable, sqlstate::io_error,
                "cannot read migrations from " + directory + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const Migration& a, const Migration& b) { return a.version < b.version; });
  return out;
}

MigrationState migrate(Db& db, const std::vector<Migration>& migrations, bool apply) {
  db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)");
  MigrationState state;
  int last_version = 0;
  {
    auto q = db.query("SELECT version, name, checksum FROM schema_migrations ORDER BY version");
    while (q.step()) {
      const int version = static_cast<int>(q.int64(0));
      const std::string name = q.text(1);
      const std::string checksum = q.text(2);
      auto known =
          std::find_if(migrations.begin(), migrations.end(), [&](const Migration& m) { return m.version == version; });
      if (known == migrations.end())
        throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                    "the store has migration " + name + " applied, which this client does not know",
                    "the store was created by a newer forgeyard; use that version");
      if (fy::core::sha256_hex(known->sql) != checksum)
        throw Error(ErrorKind::Corruption, sqlstate::internal_error,
                    "migration " + name + " was changed after it was applied; refusing to open",
                    "recorded sha256 " + checksum + ", file sha256 " + fy::core::sha256_hex(known->sql));
      ++state.applied;
      state.last = name;
      last_version = version;
    }
  }
  for (const Migration& m : migrations) {
    if (m.version <= last_version) continue;
    if (!apply) {
      ++state.pending;
      continue;
    }
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(m.sql.c_str());
      const auto now =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      db.query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)")
          .bind(1, static_cast<std::int64_t>(m.version))
          .bind(2, m.name)
          .bind(3, fy::core::sha256_hex(m.sql))
          .bind(4, static_cast<std::int64_t>(now))
          .run();
      db.exec("COMMIT");
    } catch (...) {
      db.exec("ROLLBACK");
      throw;
    }
    ++state.applied;
    state.last = m.name;
  }
  return state;
}

}  // namespace forgeyard::detail
