#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "sqlite/db.hpp"

namespace forgeyard::detail {

// The extension's forgeyard.maintain() tasks in the SQLite store, at most max_rows each.
std::map<std::string, std::int64_t> purge_expired(Db& db, std::int64_t now, int max_rows,
                                                  const std::optional<std::string>& tenant);

}  // namespace forgeyard::detail
