// The CLI's exit codes: the one table of them (the usage text prints it, and tests/cli checks
// that README.md and docs/errors.md say the same, kind by kind).
#pragma once

#include <span>
#include <string_view>

#include "forgeyard/error.hpp"

namespace forgeyard::cli {

enum Exit : int {
  exit_done = 0,
  exit_no = 1,       // answered "no": not acquired, nothing claimed, a chain that does not verify, ...
  exit_usage = 2,    // the command line is wrong; the usage text follows on stderr
  exit_stale = 3,    // StaleFence, Conflict
  exit_refused = 4,  // every error kind that a retry does not fix
  exit_later = 5,    // unavailable, timed out, busy or full: the same command may succeed later
};

struct ExitCode {
  int code;
  std::string_view meaning;  // one line of the usage text
};

// 0 to 5, in order.
std::span<const ExitCode> exit_codes() noexcept;

// The exit code of an error kind. A switch without a default: a new ErrorKind does not compile
// (-Wswitch, -Werror) until it has an exit code here.
int exit_code_for(ErrorKind kind) noexcept;

}  // namespace forgeyard::cli
