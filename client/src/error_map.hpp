// Backend errors into forgeyard::Error; the mapping itself lives in error.cpp only.
#pragma once

#include <string>

#include "core/core.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard::detail {

// A SQLite result code (primary or extended) and its message.
Error sqlite_error(int code, const std::string& message);

// An error raised by the shared core logic (input checks, lease rules): its SQLSTATE decides.
inline Error core_error(const fy::core::Error& e) { return Error(e.sqlstate(), e.what(), e.detail()); }

}  // namespace forgeyard::detail
