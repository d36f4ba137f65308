// Backend errors into forgeyard::Error; the mapping itself lives in error.cpp only.
#pragma once

#include <string>

#include "core/core.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard::detail {

// A SQLite result code (primary or extended) and its message.
Error sqlite_error(int code, const std::string& message);

// An error raised by the shared core logic (input checks, lease rules): its SQLSTATE decides.
inline Error core_error(const fy::core::Error& e) {
  return Error(e.sqlstate(), e.what(), e.detail());
}

// Runs f; an error of the shared core logic leaves it as forgeyard::Error (core_error).
template <class F>
auto core_guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const fy::core::Error& e) {
    throw core_error(e);
  }
}

}  // namespace forgeyard::detail
