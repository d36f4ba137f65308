// What a call into the shared core throws: its SQLSTATE ("none" if nothing) or its message.
#pragma once

#include <functional>
#include <string>

#include "core/core.hpp"

namespace unit {

inline std::string code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fy::core::Error& e) {
    return e.sqlstate();
  }
  return "none";
}

inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fy::core::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace unit
