// The forgeyard command line: CLI11 commands built from the commands_*.cpp files, the overview
// that `forgeyard --help` prints, and the exit codes of exit_codes.hpp.
#pragma once

#include <string>
#include <vector>

namespace forgeyard::cli {

int run(int argc, char** argv);

// The parse alone, no command run and no store opened (tests/fuzz drives it with any words):
// the exit code the command line ends with when parsing decides it (0 for --help, 2 for a usage
// error, help and message printed as `run` prints them), or -1 when a command was selected;
// `selected` is its path ("queue claim"), or "--version".
int parse_only(const std::vector<std::string>& args, std::string& selected);

}  // namespace forgeyard::cli
