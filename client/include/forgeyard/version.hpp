// The version of the client library: the top-level VERSION file, which CMake reads and which
// equals the extension's default_version (extension/forgeyard.control; tests/cli checks both).
#pragma once

#include <string_view>

#include "forgeyard/export.hpp"

namespace forgeyard {

// "0.4.0". The library's own (built into it), not the headers' a program was compiled with.
FORGEYARD_API std::string_view version() noexcept;

}  // namespace forgeyard
